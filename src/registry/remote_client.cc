// RemoteClient: the registry Client over the HTTP API (see remote_client.h).
#include "gantry/registry/remote_client.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <map>
#include <random>

#include "gantry/core/http_client.h"
#include "gantry/core/json_reader.h"
#include "gantry/registry/http_api.h"
#include "gantry/security/crypto.h"
#include "wire.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

using wire::kBlobs;
using wire::kGantry;
using wire::kManifests;
using wire::kMlflow;

// The server's error answer as the Status it had: "<what>: HTTP 404: <message>".
Status StatusFromHttp(int status, const std::string& body, std::string_view what) {
  Json j = Json::parse(body, nullptr, false);
  bool shaped = j.is_object() && j.contains("message") && j["message"].is_string();
  std::string msg = shaped ? j["message"].get<std::string>() : body.substr(0, 200);
  std::string code = j.is_object() && j.contains("error_code") && j["error_code"].is_string()
                         ? j["error_code"].get<std::string>()
                         : "";
  return Status(wire::StatusCodeFor(status, code),
                std::string(what) + ": HTTP " + std::to_string(status) + ": " + msg);
}

std::string UrlEncode(std::string_view s) { return http::PercentEncode(s); }

// Writes all of `data` to `fd`.
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("writing " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// One blob download: the bytes go to a file (if any) and into SHA-256 as
// they arrive; more than the listed size is refused at once, so a server
// cannot fill the disk.
class BlobReceiver {
 public:
  BlobReceiver(int fd, std::string path, uint64_t limit)
      : fd_(fd), path_(std::move(path)), limit_(limit), ctx_(EVP_MD_CTX_new()) {}
  ~BlobReceiver() {
    if (fd_ >= 0) ::close(fd_);
    EVP_MD_CTX_free(ctx_);
  }
  BlobReceiver(const BlobReceiver&) = delete;
  BlobReceiver& operator=(const BlobReceiver&) = delete;

  Status Init() {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
      return Internal("cannot initialise SHA-256");
    }
    return Status::Ok();
  }
  // Sets over() when the server sent more than the limit.
  Status Write(std::string_view piece) {
    if (bytes_ + piece.size() > limit_) {
      over_ = true;
      return DataLoss("more than " + std::to_string(limit_) + " bytes");
    }
    bytes_ += piece.size();
    EVP_DigestUpdate(ctx_, piece.data(), piece.size());
    if (fd_ >= 0) return WriteAll(fd_, piece, path_);
    return Status::Ok();
  }
  // Flushes and closes the file; the hex digest of what arrived.
  Result<std::string> Finish() {
    if (fd_ >= 0) {
      int fd = fd_;
      fd_ = -1;
      if (::fsync(fd) != 0 || ::close(fd) != 0) return IoError("writing " + path_, errno);
    }
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    return security::HexEncode(std::string_view(reinterpret_cast<char*>(md), 32));
  }
  uint64_t bytes() const { return bytes_; }
  bool over() const { return over_; }

 private:
  int fd_;
  std::string path_;
  uint64_t limit_;
  EVP_MD_CTX* ctx_;
  uint64_t bytes_ = 0;
  bool over_ = false;
};

// "name@alias" -> registered-models/alias, "name[/v]" -> model-versions/get
// (version "latest" when absent).
std::string VersionEndpoint(std::string_view ref) {
  std::string r(ref);
  if (r.starts_with("models:/")) r.erase(0, 8);
  if (size_t at = r.find('@'); at != std::string::npos) {
    return "registered-models/alias?name=" + UrlEncode(r.substr(0, at)) +
           "&alias=" + UrlEncode(r.substr(at + 1));
  }
  size_t slash = r.find('/');
  std::string name = r.substr(0, slash);
  std::string ver = slash == std::string::npos ? "latest" : r.substr(slash + 1);
  return "model-versions/get?name=" + UrlEncode(name) + "&version=" + UrlEncode(ver);
}

}  // namespace

std::chrono::milliseconds BlobTransferDeadline(std::chrono::milliseconds base, uint64_t bytes) {
  // 10 MB/s is 10,000 bytes per millisecond.
  return base + std::chrono::milliseconds(bytes / 10'000);
}

// The checked pieces of a remote version: the version as the server
// describes it, the statement text (hashing to the recorded digest) and the
// parsed manifest (equal to the server's file list).
struct RemoteClient::Fetched {
  ModelVersion version;
  std::string label;  // "name/3"
  std::string statement;
  Manifest manifest;
  std::map<std::string, uint64_t> sizes;  // path -> size the server lists
};

RemoteClient::RemoteClient(RemoteOptions options) : o_(std::move(options)) {
  while (o_.server.ends_with("/")) o_.server.pop_back();
}

Result<Json> RemoteClient::CallPath(std::string_view method, const std::string& path,
                                    const Json& body) {
  http::Request r;
  r.method = std::string(method);
  r.url = o_.server + path;
  r.deadline = o_.deadline;
  r.max_body_bytes = 2 * kMaxManifestBytes;  // signature lists carry whole manifests
  if (!o_.credential.empty()) r.headers.push_back({"Authorization", "Bearer " + o_.credential});
  if (!body.is_null()) {
    r.body = body.dump();
    r.headers.push_back({"Content-Type", "application/json"});
  }
  ASSIGN_OR_RETURN(http::Response resp, http::Send(r));
  std::string bare = path.substr(0, path.find('?'));
  if (resp.status != 200)
    return StatusFromHttp(resp.status, resp.body, std::string(method) + " " + bare);
  ASSIGN_OR_RETURN(JsonReader answer, JsonReader::Parse(resp.body, o_.server + bare + ": answer",
                                                        StatusCode::kDataLoss));
  RETURN_IF_ERROR(answer.ExpectObject());
  return answer.value();
}

Result<Json> RemoteClient::Call(std::string_view method, std::string_view endpoint,
                                const Json& body) {
  return CallPath(method, std::string(kMlflow) + std::string(endpoint), body);
}

Result<Json> RemoteClient::CallGantry(std::string_view method, std::string_view endpoint,
                                      const Json& body) {
  return CallPath(method, std::string(kGantry) + std::string(endpoint), body);
}

namespace {

// Reads an answer's parts; malformed answers are DataLoss naming the endpoint.
JsonReader Answer(const Json& answer, const std::string& server, std::string_view endpoint) {
  std::string_view bare = endpoint.substr(0, endpoint.find('?'));
  return JsonReader(answer, server + std::string(bare) + ": answer", StatusCode::kDataLoss);
}

}  // namespace

Result<ModelVersion> RemoteClient::Resolve(std::string_view ref) {
  std::string endpoint = VersionEndpoint(ref);
  ASSIGN_OR_RETURN(Json got, Call("GET", endpoint));
  ASSIGN_OR_RETURN(
      JsonReader mv,
      Answer(got, o_.server, std::string(kMlflow) + endpoint).GetObject("model_version"));
  return wire::ModelVersionFromJson(mv);
}

Result<RegisteredModel> RemoteClient::GetModel(std::string_view name) {
  std::string endpoint = "registered-models/get?name=" + UrlEncode(name);
  ASSIGN_OR_RETURN(Json got, Call("GET", endpoint));
  ASSIGN_OR_RETURN(
      JsonReader m,
      Answer(got, o_.server, std::string(kMlflow) + endpoint).GetObject("registered_model"));
  return wire::RegisteredModelFromJson(m);
}

Result<std::vector<RegisteredModel>> RemoteClient::ListModels() {
  std::string endpoint = "registered-models/search?max_results=1000";
  ASSIGN_OR_RETURN(Json got, Call("GET", endpoint));
  ASSIGN_OR_RETURN(
      std::vector<JsonReader> items,
      Answer(got, o_.server, std::string(kMlflow) + endpoint).GetArray("registered_models"));
  std::vector<RegisteredModel> out;
  for (const JsonReader& m : items) {
    ASSIGN_OR_RETURN(RegisteredModel one, wire::RegisteredModelFromJson(m));
    out.push_back(std::move(one));
  }
  return out;
}

namespace {

Result<std::vector<ModelVersion>> Versions(const Json& got, const std::string& origin) {
  JsonReader answer(got, origin, StatusCode::kDataLoss);
  ASSIGN_OR_RETURN(std::vector<JsonReader> items, answer.GetArray("model_versions"));
  std::vector<ModelVersion> out;
  for (const JsonReader& v : items) {
    ASSIGN_OR_RETURN(ModelVersion one, wire::ModelVersionFromJson(v));
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace

Result<std::vector<ModelVersion>> RemoteClient::ListVersions(std::string_view name) {
  // The server takes an empty name for "search everything".
  RETURN_IF_ERROR(ValidateModelName(name));
  ASSIGN_OR_RETURN(Json got, Call("GET", "model-versions/search?name=" + UrlEncode(name)));
  return Versions(got, o_.server + std::string(kMlflow) + "model-versions/search: answer");
}

Result<std::vector<ModelVersion>> RemoteClient::Search(const SearchQuery& q) {
  // As the local store: a limit outside 1..1000 means 100.
  int limit = q.limit > 0 && q.limit <= 1000 ? q.limit : 100;
  std::string ep = "model-versions/search?max_results=" + std::to_string(limit);
  auto add = [&](const char* key, const std::string& v) {
    if (!v.empty()) ep += std::string("&") + key + "=" + UrlEncode(v);
  };
  add("name_like", q.name_like);
  add("tag", q.tag_value.empty() ? q.tag_key : q.tag_key + "=" + q.tag_value);
  add("alias", q.alias);
  add("run_id", q.run_id);
  add("dataset", q.dataset_digest);
  add("source", q.source_like);
  add("commit", q.code_commit);
  add("parent", q.parent);
  ASSIGN_OR_RETURN(Json got, Call("GET", ep));
  return Versions(got, o_.server + std::string(kMlflow) + "model-versions/search: answer");
}

Status RemoteClient::SetAlias(std::string_view name, std::string_view alias, int64_t version,
                              std::optional<int64_t> expected) {
  Json body = {{"name", name}, {"alias", alias}, {"version", std::to_string(version)}};
  if (expected) body["expected_version"] = std::to_string(*expected);
  return Call("POST", "registered-models/alias", body).status();
}

Status RemoteClient::DeleteAlias(std::string_view name, std::string_view alias,
                                 std::optional<int64_t> expected) {
  std::string ep = "registered-models/alias?name=" + UrlEncode(name) + "&alias=" + UrlEncode(alias);
  if (expected) ep += "&expected_version=" + std::to_string(*expected);
  return Call("DELETE", ep).status();
}

Result<DeleteReport> RemoteClient::DeleteVersion(std::string_view name, int64_t version) {
  std::string ep =
      "model-versions/delete?name=" + UrlEncode(name) + "&version=" + std::to_string(version);
  ASSIGN_OR_RETURN(Json got, Call("DELETE", ep));
  ASSIGN_OR_RETURN(JsonReader d,
                   Answer(got, o_.server, std::string(kMlflow) + ep).GetObject("deleted"));
  return wire::DeleteReportFromJson(d);
}

Result<DeleteReport> RemoteClient::DeleteModel(std::string_view name) {
  std::string ep = "registered-models/delete?name=" + UrlEncode(name);
  ASSIGN_OR_RETURN(Json got, Call("DELETE", ep));
  ASSIGN_OR_RETURN(JsonReader d,
                   Answer(got, o_.server, std::string(kMlflow) + ep).GetObject("deleted"));
  return wire::DeleteReportFromJson(d);
}

Result<std::vector<TrustedKey>> RemoteClient::TrustedKeys() {
  ASSIGN_OR_RETURN(Json got, CallGantry("GET", "trusted-keys"));
  ASSIGN_OR_RETURN(
      std::vector<JsonReader> items,
      Answer(got, o_.server, std::string(kGantry) + "trusted-keys").GetArray("trusted_keys"));
  std::vector<TrustedKey> out;
  for (const JsonReader& k : items) {
    ASSIGN_OR_RETURN(TrustedKey one, wire::TrustedKeyFromJson(k));
    out.push_back(std::move(one));
  }
  return out;
}

Result<TrustedKey> RemoteClient::TrustKey(std::string_view public_pem, std::string_view comment) {
  ASSIGN_OR_RETURN(Json got, CallGantry("POST", "trusted-keys",
                                        Json{{"public_pem", public_pem}, {"comment", comment}}));
  return wire::TrustedKeyFromJson(Answer(got, o_.server, std::string(kGantry) + "trusted-keys"));
}

Status RemoteClient::UntrustKey(std::string_view keyid) {
  return CallGantry("DELETE", "trusted-keys?keyid=" + UrlEncode(keyid)).status();
}

Result<bool> RemoteClient::SignaturesRequired() {
  ASSIGN_OR_RETURN(Json got, CallGantry("GET", "policy"));
  return Answer(got, o_.server, std::string(kGantry) + "policy").GetBool("require_signatures");
}

Status RemoteClient::SetSignaturesRequired(bool on) {
  return CallGantry("POST", "policy", Json{{"require_signatures", on}}).status();
}

Result<std::string> RemoteClient::GetRaw(const std::string& path) {
  http::Request r;
  r.url = o_.server + path;
  r.deadline = BlobTransferDeadline(o_.deadline, kMaxManifestBytes);
  r.max_body_bytes = kMaxManifestBytes;
  if (!o_.credential.empty()) r.headers.push_back({"Authorization", "Bearer " + o_.credential});
  ASSIGN_OR_RETURN(http::Response resp, http::Get(r));
  if (resp.status != 200) return StatusFromHttp(resp.status, resp.body, "GET " + path);
  return std::move(resp.body);
}

Status RemoteClient::PutBlob(const std::string& local, const FileEntry& f) {
  // The server hashes every upload and refuses one that differs from the
  // digest in the path; checking the size first catches most changes since
  // hashing without sending a byte.
  std::error_code ec;
  uint64_t size = fs::file_size(local, ec);
  if (ec) return IoError("reading the size of " + local, ec.value());
  if (size != f.size) {
    return FailedPrecondition("file " + local + " changed while it was being registered (" +
                              std::to_string(size) + " bytes now, " + std::to_string(f.size) +
                              " when hashed); retry");
  }
  http::Request r;
  r.method = "PUT";
  r.url = o_.server + std::string(kBlobs) + f.sha256;
  r.deadline = BlobTransferDeadline(o_.deadline, f.size);
  r.body_file = local;  // streamed from disk, never held whole
  r.headers.push_back({"Content-Type", "application/octet-stream"});
  if (!o_.credential.empty()) r.headers.push_back({"Authorization", "Bearer " + o_.credential});
  auto resp = http::Send(r);
  if (!resp.ok()) return resp.status().WithContext("uploading " + f.path);
  if (resp->status == 200 || resp->status == 201) return Status::Ok();
  Status s = StatusFromHttp(resp->status, resp->body, "uploading " + f.path);
  if (resp->status == 400) {
    // The only 400 for a well-formed digest: the bytes hash to something else.
    return FailedPrecondition("file " + local + " changed while it was being registered; retry (" +
                              s.message() + ")");
  }
  return s;
}

Status RemoteClient::FetchBlob(const FileEntry& f, uint64_t size, int fd, const std::string& out,
                               const std::string& label) {
  BlobReceiver rx(fd, out, size);
  RETURN_IF_ERROR(rx.Init());
  const std::string what = "file " + f.path + " of " + label;
  http::Request r;
  r.url = o_.server + std::string(kBlobs) + f.sha256;
  r.deadline = BlobTransferDeadline(o_.deadline, size);
  r.max_body_bytes = kMaxJsonBodyBytes;  // bounds error bodies only; the blob goes to the sink
  r.body_sink = [&rx](std::string_view piece) { return rx.Write(piece); };
  if (!o_.credential.empty()) r.headers.push_back({"Authorization", "Bearer " + o_.credential});
  auto resp = http::Get(r);
  if (!resp.ok()) {
    if (rx.over()) {
      return DataLoss(what + " was modified: the server sent more than the " +
                      std::to_string(size) + " bytes the manifest lists; nothing written");
    }
    return resp.status().WithContext(what);
  }
  if (resp->status != 200) {
    return StatusFromHttp(resp->status, resp->body, "GET " + std::string(kBlobs) + f.sha256)
        .WithContext(what);
  }
  ASSIGN_OR_RETURN(std::string got, rx.Finish());
  if (got != f.sha256 || rx.bytes() != size) {
    return DataLoss(what + " was modified: downloaded sha256 " + got + " (" +
                    std::to_string(rx.bytes()) + " bytes), manifest says " + f.sha256 + " (" +
                    std::to_string(size) + " bytes); nothing written");
  }
  return Status::Ok();
}

Result<ModelVersion> RemoteClient::Register(const RegisterRequest& req) {
  RETURN_IF_ERROR(ValidateModelName(req.name));
  ASSIGN_OR_RETURN(Manifest m, HashPath(req.path, req.name));
  bool is_dir = fs::is_directory(req.path);
  Json files = Json::array();
  for (const auto& f : m.files) {
    std::string local = is_dir ? (fs::path(req.path) / f.path).string() : req.path;
    RETURN_IF_ERROR(PutBlob(local, f));
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}});
  }
  Json tags = Json::object();
  for (const auto& [k, v] : req.tags) tags[k] = v;
  Json lineage = {
      {"source", req.lineage.source.empty() ? fs::absolute(req.path).lexically_normal().string()
                                            : req.lineage.source},
      {"code_commit", req.lineage.code_commit},
      {"parent", req.lineage.parent},
      {"dataset_digests", req.lineage.dataset_digests},
      {"metrics", req.lineage.metrics}};
  Json body = {{"name", req.name}, {"description", req.description}, {"files", files},
               {"tags", tags},     {"run_id", req.lineage.run_id},   {"lineage", lineage}};
  ASSIGN_OR_RETURN(Json got, Call("POST", "model-versions/create", body));
  ASSIGN_OR_RETURN(JsonReader mv,
                   Answer(got, o_.server, std::string(kMlflow) + "model-versions/create")
                       .GetObject("model_version"));
  return wire::ModelVersionFromJson(mv);
}

Result<ModelVersion> RemoteClient::RegisterCheckpoint(RegisterRequest req,
                                                      const CheckpointSource& src) {
  RETURN_IF_ERROR(ValidateModelName(req.name));
  ASSIGN_OR_RETURN(RegisterRequest resolved, ReadCheckpointStep(std::move(req), src));
  return Register(resolved);
}

// The manifest must hash to the recorded digest, and the file list the
// server sent must equal the manifest exactly.
Result<RemoteClient::Fetched> RemoteClient::FetchVersion(std::string_view ref) {
  Fetched out;
  ASSIGN_OR_RETURN(out.version, Resolve(ref));
  const ModelVersion& v = out.version;
  std::string r(ref);
  if (!wire::IsHex64(v.manifest_sha256))
    return DataLoss("server sent a bad manifest digest for " + r);
  if (v.version < 1) return DataLoss("server sent a bad version number for " + r);
  RETURN_IF_ERROR(ValidateModelName(v.model).WithContext("server answer for " + r));
  out.label = v.model + "/" + std::to_string(v.version);
  ASSIGN_OR_RETURN(out.statement, GetRaw(std::string(kManifests) + v.manifest_sha256));
  if (security::Sha256Hex(out.statement) != v.manifest_sha256) {
    return DataLoss("manifest of " + out.label + " does not hash to " + v.manifest_sha256);
  }
  ASSIGN_OR_RETURN(out.manifest, ParseStatement(out.statement));
  Manifest listed;
  for (const FileEntry& f : v.files) {
    out.sizes[f.path] = f.size;
    listed.files.push_back({f.path, f.sha256, 0});
  }
  std::sort(listed.files.begin(), listed.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  RETURN_IF_ERROR(CompareManifests(out.manifest, listed, "the server's file list"));
  return out;
}

Result<VerifyReport> RemoteClient::Verify(std::string_view ref, bool require_signature) {
  ExportOptions o;
  o.require_signature = require_signature;
  return Fetch(ref, "", o);
}

Result<VerifyReport> RemoteClient::Download(std::string_view ref, const std::string& dest,
                                            const ExportOptions& options) {
  if (dest.empty()) return InvalidArgument("download of " + std::string(ref) + ": no destination");
  return Fetch(ref, dest, options);
}

Result<VerifyReport> RemoteClient::Fetch(std::string_view ref, const std::string& dest,
                                         const ExportOptions& options) {
  ASSIGN_OR_RETURN(Fetched rv, FetchVersion(ref));
  const Manifest& m = rv.manifest;
  const std::string& name = rv.version.model;
  const int64_t number = rv.version.version;

  // Signatures, against the client's own trusted keys.
  bool require = options.require_signature;
  std::string required_by = "a signature was required (--require-signature)";
  if (auto pol = SignaturesRequired(); pol.ok()) {
    if (*pol && !require) {
      require = true;
      required_by = "the registry requires signatures";
    }
  } else if (pol.status().code() != StatusCode::kNotFound) {
    return pol.status().WithContext("reading the server's signature policy");
  }
  std::string sig_ep = "signatures?name=" + UrlEncode(name) + "&version=" + std::to_string(number);
  ASSIGN_OR_RETURN(Json sj, CallGantry("GET", sig_ep));
  ASSIGN_OR_RETURN(
      std::vector<JsonReader> entries,
      Answer(sj, o_.server, std::string(kGantry) + sig_ep).GetOptionalArray("signatures"));
  std::map<std::string, std::string> sigs;
  for (const JsonReader& e : entries) {
    ASSIGN_OR_RETURN(std::string keyid, e.GetString("keyid"));
    ASSIGN_OR_RETURN(sigs[keyid], e.GetString("bundle"));
  }
  if (require && o_.trusted.empty()) {
    return PermissionDenied(rv.label +
                            ": a trusted signature is required but no trusted public "
                            "key is configured on this client; pass --pubkey KEY.pub (the "
                            "server's key list is not trusted for this)");
  }
  ASSIGN_OR_RETURN(VerifyReport rep, CheckSignatureBundles(rv.label, sigs, rv.statement, o_.trusted,
                                                           require, required_by));
  rep.model = name;
  rep.version = number;

  bool write = !dest.empty();
  fs::path target, tmp;
  std::error_code ec;
  if (write) {
    target = fs::absolute(dest).lexically_normal();
    if (fs::exists(fs::symlink_status(target, ec)) && !options.overwrite) {
      return AlreadyExists("destination " + target.string() + " exists (pass --overwrite)");
    }
    std::mt19937_64 rng(std::random_device{}());
    tmp = target.parent_path() /
          ("." + target.filename().string() + ".tmp-" + std::to_string(rng() % 1000000));
    fs::create_directories(tmp, ec);
    if (ec) return IoError("creating " + tmp.string(), ec.value());
  }
  auto cleanup = [&] {
    if (write) fs::remove_all(tmp, ec);
  };
  std::mt19937_64 part_rng(std::random_device{}());
  for (const auto& f : m.files) {
    Status valid = ValidateFilePath(f.path);  // ParseStatement checked; keep it local too
    if (!valid.ok()) {
      cleanup();
      return valid;
    }
    uint64_t size = rv.sizes[f.path];
    if (!write) {
      RETURN_IF_ERROR(FetchBlob(f, size, -1, "", rv.label));
    } else {
      // Into a fresh temporary file first, renamed to its name only once its
      // digest and size match (the whole directory is renamed at the end).
      // A name no manifest file has yet (O_EXCL), with the umask's mode.
      std::string part;
      int pfd = -1;
      for (int attempt = 0; pfd < 0 && attempt < 100; ++attempt) {
        part = (tmp / (".part-" + std::to_string(part_rng() % 1000000000))).string();
        pfd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (pfd < 0 && errno != EEXIST) break;
      }
      if (pfd < 0) {
        Status s = IoError("creating a temporary file in " + tmp.string(), errno);
        cleanup();
        return s;
      }
      Status s = FetchBlob(f, size, pfd, part, rv.label);
      fs::path out = tmp / f.path;
      if (s.ok()) {
        fs::create_directories(out.parent_path(), ec);
        fs::rename(part, out, ec);
        if (ec) s = IoError("renaming into " + out.string(), ec.value());
      }
      if (!s.ok()) {
        cleanup();
        return s;
      }
    }
    rep.files++;
    rep.bytes += size;
  }
  if (!write) return rep;
  if (options.write_signature && !rep.verified_keyids.empty()) {
    Status s = WriteFileAtomic((tmp / std::string(kSignatureFile)).string(),
                               sigs.at(rep.verified_keyids.front()));
    if (!s.ok()) {
      cleanup();
      return s;
    }
  }
  if (fs::exists(target, ec)) fs::remove_all(target, ec);
  fs::rename(tmp, target, ec);
  if (ec) {
    cleanup();
    return IoError("renaming into " + target.string(), ec.value());
  }
  return rep;
}

Result<std::string> RemoteClient::Sign(std::string_view ref, const security::DsseSigner& signer) {
  ASSIGN_OR_RETURN(Fetched rv, FetchVersion(ref));
  ASSIGN_OR_RETURN(auto env, security::SignDsse(kInTotoPayloadType, rv.statement, signer));
  std::string bundle = BundleJson(env, signer.KeyId()).dump(2);
  ASSIGN_OR_RETURN(Json out, CallGantry("POST", "signatures",
                                        Json{{"name", rv.version.model},
                                             {"version", std::to_string(rv.version.version)},
                                             {"bundle", bundle}}));
  return Answer(out, o_.server, std::string(kGantry) + "signatures")
      .GetString("keyid", signer.KeyId());
}

}  // namespace gantry::registry
