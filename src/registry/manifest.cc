// Names, manifests (model-signing "files" method), statements and bundles.
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "gantry/registry/registry.h"
#include "gantry/security/crypto.h"

namespace gantry::registry {

namespace fs = std::filesystem;

namespace {
bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}
}  // namespace

Status ValidateModelName(std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return InvalidArgument("model name '" + std::string(name) + "' must be 1..128 characters");
  }
  if (!IsAlnum(name[0])) {
    return InvalidArgument("model name '" + std::string(name) +
                           "' must start with a letter or digit");
  }
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') {
      return InvalidArgument("model name '" + std::string(name) +
                             "' may only contain letters, digits, '.', '_' and '-'");
    }
  }
  if (name.find("..") != std::string_view::npos) {
    return InvalidArgument("model name '" + std::string(name) + "' must not contain '..'");
  }
  return Status::Ok();
}

Status ValidateAlias(std::string_view alias) {
  bool ok = !alias.empty() && alias.size() <= 64 &&
            ((alias[0] >= 'a' && alias[0] <= 'z') || (alias[0] >= 'A' && alias[0] <= 'Z'));
  for (char c : alias) ok = ok && (IsAlnum(c) || c == '_' || c == '-');
  if (!ok) {
    return InvalidArgument(
        "alias '" + std::string(alias) +
        "' must be 1..64 of letters, digits, '_' and '-', starting with a letter");
  }
  bool vnum =
      alias.size() > 1 && (alias[0] == 'v' || alias[0] == 'V') &&
      std::all_of(alias.begin() + 1, alias.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (alias == "latest" || vnum) {
    return InvalidArgument("alias '" + std::string(alias) +
                           "' is reserved (it would shadow a version reference)");
  }
  return Status::Ok();
}

Status ValidateTag(std::string_view key, std::string_view value) {
  bool ok = !key.empty() && key.size() <= 250;
  for (char c : key) ok = ok && (IsAlnum(c) || c == '.' || c == '_' || c == '/' || c == '-');
  if (!ok) {
    return InvalidArgument("tag key '" + std::string(key) +
                           "' must be 1..250 of letters, digits, '.', '_', '/' and '-'");
  }
  if (value.size() > 5000) {
    return InvalidArgument("tag '" + std::string(key) + "' value is longer than 5000 bytes");
  }
  return Status::Ok();
}

Status ValidateFilePath(std::string_view path) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("file path '" + std::string(path.substr(0, 200)) + "' " +
                           std::string(why));
  };
  if (path.empty()) return bad("is empty");
  if (path.size() > 1024) return bad("is longer than 1024 bytes");
  if (path.front() == '/') return bad("is absolute; manifest paths are relative");
  for (unsigned char c : path) {
    if (c < 0x20 || c == 0x7f) return bad("contains a control character");
    if (c == '\\') return bad("contains a backslash; use '/'");
  }
  size_t start = 0;
  while (true) {
    size_t end = path.find('/', start);
    std::string_view seg =
        path.substr(start, end == std::string_view::npos ? path.npos : end - start);
    if (seg.empty()) return bad("has an empty segment ('//' or a trailing '/')");
    if (seg == "." || seg == "..") return bad("has a '.' or '..' segment (path traversal)");
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

std::string SubjectDigest(const std::vector<FileEntry>& sorted_files) {
  std::string raw;
  raw.reserve(sorted_files.size() * 32);
  for (const auto& f : sorted_files) {
    auto bytes = security::HexDecode(f.sha256);
    if (bytes.ok()) raw += *bytes;
  }
  return security::Sha256Hex(raw);
}

std::string StatementJson(const Manifest& m) {
  // nlohmann::json (not ordered_json) sorts object keys: a canonical form.
  nlohmann::json resources = nlohmann::json::array();
  for (const auto& f : m.files) {
    resources.push_back({{"name", f.path}, {"algorithm", "sha256"}, {"digest", f.sha256}});
  }
  nlohmann::json st = {
      {"_type", kStatementType},
      {"subject", nlohmann::json::array(
                      {{{"name", m.name}, {"digest", {{"sha256", SubjectDigest(m.files)}}}}})},
      {"predicateType", kPredicateType},
      {"predicate",
       {{"serialization",
         {{"method", "files"},
          {"hash_type", "sha256"},
          {"allow_symlinks", m.allow_symlinks},
          {"ignore_paths", m.ignore_paths}}},
        {"resources", resources}}}};
  return st.dump();
}

Result<Manifest> ParseStatement(std::string_view text) {
  if (text.size() > kMaxManifestBytes) {
    return InvalidArgument("manifest is " + std::to_string(text.size()) + " bytes, over the " +
                           std::to_string(kMaxManifestBytes) + "-byte limit");
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("manifest is not a JSON object (malformed statement)");
  }
  auto need_str = [&](const nlohmann::json& o, const char* k) -> Result<std::string> {
    if (!o.is_object() || !o.contains(k) || !o[k].is_string()) {
      return InvalidArgument(std::string("statement: missing string field '") + k + "'");
    }
    return o[k].get<std::string>();
  };
  ASSIGN_OR_RETURN(std::string type, need_str(j, "_type"));
  if (type != kStatementType) {
    return InvalidArgument("statement _type '" + type + "' is not " + std::string(kStatementType));
  }
  ASSIGN_OR_RETURN(std::string ptype, need_str(j, "predicateType"));
  if (ptype != kPredicateType) {
    return InvalidArgument("statement predicateType '" + ptype + "' is not " +
                           std::string(kPredicateType));
  }
  if (!j.contains("subject") || !j["subject"].is_array() || j["subject"].size() != 1) {
    return InvalidArgument("statement: 'subject' must be an array of one entry");
  }
  const auto& subj = j["subject"][0];
  Manifest m;
  ASSIGN_OR_RETURN(m.name, need_str(subj, "name"));
  if (!subj.contains("digest") || !subj["digest"].is_object()) {
    return InvalidArgument("statement: subject has no 'digest' object");
  }
  ASSIGN_OR_RETURN(std::string subject_digest, need_str(subj["digest"], "sha256"));
  if (!j.contains("predicate") || !j["predicate"].is_object()) {
    return InvalidArgument("statement: missing object 'predicate'");
  }
  const auto& pred = j["predicate"];
  if (!pred.contains("serialization") || !pred["serialization"].is_object()) {
    return InvalidArgument("statement: predicate has no 'serialization' object");
  }
  const auto& ser = pred["serialization"];
  ASSIGN_OR_RETURN(std::string method, need_str(ser, "method"));
  if (method != "files") {
    return InvalidArgument("statement: serialization method '" + method +
                           "' is not supported (only 'files')");
  }
  ASSIGN_OR_RETURN(std::string hash_type, need_str(ser, "hash_type"));
  if (hash_type != "sha256") {
    return InvalidArgument("statement: hash_type '" + hash_type + "' is not supported (sha256)");
  }
  if (ser.contains("allow_symlinks") && ser["allow_symlinks"].is_boolean()) {
    m.allow_symlinks = ser["allow_symlinks"].get<bool>();
  }
  if (ser.contains("ignore_paths") && ser["ignore_paths"].is_array()) {
    for (const auto& p : ser["ignore_paths"]) {
      if (p.is_string()) m.ignore_paths.push_back(p.get<std::string>());
    }
  }
  if (!pred.contains("resources") || !pred["resources"].is_array()) {
    return InvalidArgument("statement: predicate has no 'resources' array");
  }
  if (pred["resources"].size() > kMaxFiles) {
    return InvalidArgument("statement lists " + std::to_string(pred["resources"].size()) +
                           " files, over the limit of " + std::to_string(kMaxFiles));
  }
  std::set<std::string> seen;
  for (const auto& r : pred["resources"]) {
    FileEntry f;
    ASSIGN_OR_RETURN(f.path, need_str(r, "name"));
    RETURN_IF_ERROR(ValidateFilePath(f.path).WithContext("statement resource"));
    ASSIGN_OR_RETURN(std::string alg, need_str(r, "algorithm"));
    if (alg != "sha256") {
      return InvalidArgument("statement resource '" + f.path + "': algorithm '" + alg +
                             "' is not sha256");
    }
    ASSIGN_OR_RETURN(f.sha256, need_str(r, "digest"));
    if (!IsHex64(f.sha256)) {
      return InvalidArgument("statement resource '" + f.path +
                             "': digest is not 64 lowercase hex characters");
    }
    if (!seen.insert(f.path).second) {
      return InvalidArgument("statement lists file '" + f.path + "' twice");
    }
    m.files.push_back(std::move(f));
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  std::string want = SubjectDigest(m.files);
  if (want != subject_digest) {
    return DataLoss("statement subject digest " + subject_digest +
                    " does not match its resources (" + want + ")");
  }
  return m;
}

namespace {

// SHA-256 of a file read in 1 MiB chunks (model_signing's chunk size).
Result<std::pair<std::string, uint64_t>> HashFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("open " + path, errno);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::string buf(1u << 20, '\0');
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      EVP_MD_CTX_free(ctx);
      return IoError("read " + path, err);
    }
    if (n == 0) break;
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  return std::make_pair(security::HexEncode(std::string_view(reinterpret_cast<char*>(md), 32)),
                        total);
}

bool IsIgnoredTop(const std::string& name) {
  return name == kSignatureFile || name == ".git" || name == ".gitattributes" ||
         name == ".github" || name == ".gitignore";
}

bool Inside(const fs::path& root, const fs::path& p) {
  auto r = root.lexically_normal().string();
  auto s = p.lexically_normal().string();
  return s == r || (s.size() > r.size() && s.compare(0, r.size(), r) == 0 && s[r.size()] == '/');
}

}  // namespace

Result<Manifest> HashPath(const std::string& path, const std::string& subject_name) {
  Manifest m;
  m.name = subject_name;
  m.ignore_paths = {".git", ".gitattributes", ".github", ".gitignore", std::string(kSignatureFile)};
  std::error_code ec;
  auto st = fs::symlink_status(path, ec);
  if (ec) return NotFound("model path " + path + " does not exist: " + ec.message());
  if (fs::is_regular_file(st)) {
    std::string name = fs::path(path).filename().string();
    RETURN_IF_ERROR(ValidateFilePath(name));
    ASSIGN_OR_RETURN(auto h, HashFile(path));
    m.files.push_back({name, h.first, h.second});
    m.ignore_paths.clear();
    return m;
  }
  if (!fs::is_directory(st)) {
    return InvalidArgument("model path " + path +
                           " is neither a directory nor a regular file (symlinks to the model "
                           "itself are not followed; pass the real path)");
  }
  fs::path root = fs::canonical(path, ec);
  if (ec) return IoError("resolving " + path, ec.value());
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) return IoError("listing " + path, ec.value());
  for (; it != end; it.increment(ec)) {
    if (ec) return IoError("listing " + path, ec.value());
    const fs::path p = it->path();
    std::string rel = p.lexically_relative(root).generic_string();
    if (it.depth() == 0 && IsIgnoredTop(p.filename().string())) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) it.disable_recursion_pending();
      continue;
    }
    auto lst = it->symlink_status(ec);
    fs::path target = p;
    if (fs::is_symlink(lst)) {
      fs::path resolved = fs::weakly_canonical(p, ec);
      if (ec || !Inside(root, resolved)) {
        return InvalidArgument("symlink " + rel + " points outside the model directory " + path +
                               "; copy the file in instead");
      }
      m.allow_symlinks = true;
      target = resolved;
      if (fs::is_directory(resolved)) {
        // Following it would hash files twice (or loop); refuse.
        return InvalidArgument("symlink " + rel +
                               " points to a directory; only symlinks to "
                               "files inside the model directory are followed");
      }
    } else if (fs::is_directory(lst)) {
      continue;
    }
    auto tst = fs::status(target, ec);
    if (ec || !fs::is_regular_file(tst)) {
      return InvalidArgument("model file " + rel +
                             " is not a regular file (device, fifo, socket or dangling link)");
    }
    RETURN_IF_ERROR(ValidateFilePath(rel));
    if (m.files.size() >= kMaxFiles) {
      return InvalidArgument("model directory " + path + " has more than " +
                             std::to_string(kMaxFiles) + " files");
    }
    ASSIGN_OR_RETURN(auto h, HashFile(target.string()));
    m.files.push_back({rel, h.first, h.second});
  }
  if (m.files.empty()) return InvalidArgument("model directory " + path + " has no files");
  std::sort(m.files.begin(), m.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  return m;
}

Status CompareManifests(const Manifest& expected, const Manifest& actual, std::string_view what) {
  std::vector<std::string> diffs;
  size_t i = 0, j = 0;
  const auto& e = expected.files;
  const auto& a = actual.files;
  while (i < e.size() || j < a.size()) {
    if (j == a.size() || (i < e.size() && e[i].path < a[j].path)) {
      diffs.push_back("missing file " + e[i].path);
      ++i;
    } else if (i == e.size() || a[j].path < e[i].path) {
      diffs.push_back("extra file " + a[j].path + " (not in the signed manifest)");
      ++j;
    } else {
      if (e[i].sha256 != a[j].sha256) {
        diffs.push_back("file " + e[i].path + " was modified: sha256 " + a[j].sha256 +
                        ", expected " + e[i].sha256);
      }
      ++i;
      ++j;
    }
  }
  if (diffs.empty()) return Status::Ok();
  std::string msg = std::string(what) + ": " + std::to_string(diffs.size()) + " difference(s): ";
  for (size_t k = 0; k < diffs.size() && k < 5; ++k) msg += (k ? "; " : "") + diffs[k];
  if (diffs.size() > 5) msg += "; ...";
  return DataLoss(msg);
}

Json BundleJson(const security::DsseEnvelope& env, std::string_view key_hint) {
  Json b = Json::object();
  b["mediaType"] = kBundleMediaType;
  b["verificationMaterial"] = {{"publicKey", {{"hint", key_hint}}}};
  b["dsseEnvelope"] = security::DsseEnvelopeToJson(env);
  return b;
}

Result<security::DsseEnvelope> ParseBundle(std::string_view text) {
  if (text.size() > kMaxManifestBytes * 2) {
    return InvalidArgument("signature bundle is over the size limit");
  }
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("signature bundle is not a JSON object");
  }
  // A bare DSSE envelope is accepted too.
  if (j.contains("dsseEnvelope")) return security::DsseEnvelopeFromJson(j["dsseEnvelope"]);
  return security::DsseEnvelopeFromJson(j);
}

Result<std::string> SignDirectory(const std::string& dir, const security::DsseSigner& signer) {
  std::string name = fs::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = fs::path(dir).lexically_normal().parent_path().filename().string();
  ASSIGN_OR_RETURN(Manifest m, HashPath(dir, name));
  ASSIGN_OR_RETURN(auto env, security::SignDsse(kInTotoPayloadType, StatementJson(m), signer));
  return BundleJson(env, signer.KeyId()).dump(2);
}

Result<std::string> VerifyDirectory(const std::string& dir, std::string_view bundle_text,
                                    const std::vector<security::DsseVerifier>& trusted) {
  ASSIGN_OR_RETURN(auto env, ParseBundle(bundle_text));
  if (env.payload_type != kInTotoPayloadType) {
    return PermissionDenied("signature payloadType '" + env.payload_type + "' is not " +
                            std::string(kInTotoPayloadType));
  }
  ASSIGN_OR_RETURN(std::string keyid, security::VerifyDsse(env, trusted));
  ASSIGN_OR_RETURN(Manifest signed_m, ParseStatement(env.payload));
  ASSIGN_OR_RETURN(Manifest actual, HashPath(dir, signed_m.name));
  RETURN_IF_ERROR(CompareManifests(signed_m, actual, "model directory " + dir));
  return keyid;
}

}  // namespace gantry::registry
