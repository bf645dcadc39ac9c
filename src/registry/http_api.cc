// MLflow-shaped registry HTTP API with access control, and its client (see http_api.h).
#include "gantry/registry/http_api.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "gantry/core/http_client.h"
#include "gantry/security/api_key.h"
#include "gantry/security/crypto.h"
#include "gantry/security/rbac.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMlflow = "/api/2.0/mlflow/";
constexpr std::string_view kGantry = "/api/2.0/gantry/";
constexpr std::string_view kBlobs = "/api/2.0/gantry/blobs/sha256/";
constexpr std::string_view kManifests = "/api/2.0/gantry/manifests/sha256/";
constexpr std::string_view kSignatures = "/api/2.0/gantry/signatures";
constexpr std::string_view kPolicy = "/api/2.0/gantry/policy";
constexpr std::string_view kTrustedKeys = "/api/2.0/gantry/trusted-keys";
// A signature bundle carries the whole manifest (up to kMaxManifestBytes) base64-encoded.
constexpr size_t kMaxSignatureBodyBytes = kMaxBufferedBodyBytes;

void Reply(http::ServerResponse* resp, int status, const Json& body) {
  resp->status = status;
  resp->content_type = "application/json";
  resp->body = body.dump();
}

void ReplyError(http::ServerResponse* resp, int status, std::string_view code,
                std::string_view message) {
  Reply(resp, status, Json{{"error_code", code}, {"message", message}});
}

void Error(http::ServerResponse* resp, const Status& s) {
  int status = 500;
  std::string code = "INTERNAL_ERROR";
  switch (s.code()) {
    case StatusCode::kNotFound:
      status = 404;
      code = "RESOURCE_DOES_NOT_EXIST";
      break;
    case StatusCode::kInvalidArgument:
      status = 400;
      code = "INVALID_PARAMETER_VALUE";
      break;
    case StatusCode::kPermissionDenied:
      status = 403;
      code = "PERMISSION_DENIED";
      break;
    case StatusCode::kAlreadyExists:
      status = 409;
      code = "RESOURCE_ALREADY_EXISTS";
      break;
    case StatusCode::kFailedPrecondition:
      // Compare-and-set misses (alias moved meanwhile) are conflicts.
      status = 409;
      code = "CONFLICT";
      break;
    case StatusCode::kDataLoss:
      status = 500;
      code = "DATA_LOSS";
      break;
    default:
      break;
  }
  ReplyError(resp, status, code, s.message());
}

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// Creates an empty temporary file "gantry-<what>-XXXXXX" in `dir` (empty:
// the system temp directory) and returns its open descriptor.
Result<int> CreateSpoolFile(const std::string& dir, std::string_view what, std::string* path) {
  std::error_code ec;
  std::string base = dir;
  if (base.empty()) base = fs::temp_directory_path(ec).string();
  if (base.empty()) base = "/tmp";
  fs::create_directories(base, ec);
  *path = (fs::path(base) / ("gantry-" + std::string(what) + "-XXXXXX")).string();
  int fd = ::mkostemp(path->data(), O_CLOEXEC);
  if (fd < 0) return IoError("creating a " + std::string(what) + " spool file in " + base, errno);
  return fd;
}

// A streamed blob upload: written to a temporary spool file and hashed as
// it arrives (http::BodySink); the file is removed when the request ends.
class SpooledBlob final : public http::BodySink {
 public:
  static Result<std::shared_ptr<SpooledBlob>> Create(const std::string& dir) {
    std::string path;
    ASSIGN_OR_RETURN(int fd, CreateSpoolFile(dir, "upload", &path));
    auto out = std::shared_ptr<SpooledBlob>(new SpooledBlob(fd, path));
    if (out->ctx_ == nullptr || EVP_DigestInit_ex(out->ctx_, EVP_sha256(), nullptr) != 1) {
      return Internal("cannot initialise SHA-256");
    }
    return out;
  }
  ~SpooledBlob() override {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
    EVP_MD_CTX_free(ctx_);
  }
  void Write(std::string_view data) override {
    if (!status_.ok() || finished_) return;
    EVP_DigestUpdate(ctx_, data.data(), data.size());
    size_ += data.size();
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        status_ = IoError("spooling an upload to " + path_, errno);
        return;
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
  }
  // Closes the file and computes the digest; the first error when spooling failed.
  Status Finish() {
    if (!status_.ok() || finished_) return status_;
    finished_ = true;
    unsigned char md[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, md, &len);
    hex_ = security::HexEncode(std::string_view(reinterpret_cast<char*>(md), 32));
    if (::close(fd_) != 0) status_ = IoError("closing " + path_, errno);
    fd_ = -1;
    return status_;
  }
  const std::string& hex() const { return hex_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  SpooledBlob(int fd, std::string path) : fd_(fd), path_(std::move(path)), ctx_(EVP_MD_CTX_new()) {}
  int fd_;
  std::string path_;
  EVP_MD_CTX* ctx_;
  uint64_t size_ = 0;
  bool finished_ = false;
  std::string hex_;
  Status status_;
};

// ---- access control ----
// Roles nest; the policy is the shared RBAC code so the matching rules are
// the gateway's.
const security::Policy& RolePolicy() {
  static const security::Policy p = [] {
    auto r = security::Policy::Create({
        {"reader", {{"registry:read"}}},
        {"writer", {{"registry:read"}, {"registry:write"}}},
        {"admin", {{"registry:*"}}},
    });
    return *r;
  }();
  return p;
}

std::string_view RoleFor(std::string_view action) {
  if (action == "registry:read") return "reader";
  if (action == "registry:write") return "writer";
  return "admin";
}

// Status PermissionDenied here means "no valid credential" (401).
Result<Caller> Authenticate(const HttpApiOptions& o, const http::ServerRequest& req, int64_t now) {
  std::string token;
  if (const std::string* h = req.Header("authorization")) {
    if (h->size() < 7 || !(std::string_view(*h).substr(0, 7) == "Bearer " ||
                           std::string_view(*h).substr(0, 7) == "bearer ")) {
      return PermissionDenied("Authorization must be 'Bearer <API key or JWT>'");
    }
    token = h->substr(7);
    while (!token.empty() && token.front() == ' ') token.erase(0, 1);
  } else if (const std::string* k = req.Header("x-api-key")) {
    token = *k;
  }
  if (token.empty()) {
    return PermissionDenied(
        "no credentials: send 'X-API-Key: <key>' or 'Authorization: Bearer <key or JWT>'");
  }
  Caller c;
  if (token.starts_with(security::kApiKeyPrefix)) {
    if (!o.keys) return PermissionDenied("API keys are not configured on this server (--keys-db)");
    const security::ApiKeyInfo* info = nullptr;
    security::KeyCheck check = security::Authenticate(*o.keys, token, now, &info);
    if (check != security::KeyCheck::kOk) {
      return PermissionDenied("API key rejected: " + std::string(security::KeyCheckName(check)));
    }
    c.actor = "api_key:" + info->id;
    c.roles = {info->role};
    return c;
  }
  if (o.jwt == nullptr) {
    return PermissionDenied("credential is not an API key and JWT is not configured");
  }
  auto claims = o.jwt->Verify(token, now);
  if (!claims.ok()) return PermissionDenied("token rejected: " + claims.status().message());
  c.actor = "jwt:" + claims->subject;
  c.roles = claims->roles;
  return c;
}

bool Allowed(const Caller& c, std::string_view action) {
  for (const auto& r : c.roles)
    if (RolePolicy().Allowed(r, action, "*")) return true;
  return false;
}

// ---- JSON fields ----
Result<Json> ParseBody(const http::ServerRequest& req) {
  if (req.body.empty()) return InvalidArgument("request body must be a JSON object");
  Json j = Json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("request body is not a JSON object");
  }
  return j;
}

Result<std::string> Str(const Json& j, const char* field, bool required = true) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(std::string("missing field '") + field + "'");
    return std::string();
  }
  if (!it->is_string())
    return InvalidArgument(std::string("field '") + field + "' must be a string");
  return it->get<std::string>();
}

// MLflow sends versions as strings; numbers are accepted too.
Result<std::optional<int64_t>> Version(const Json& j, const char* field, bool required,
                                       int64_t min = 1) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(std::string("missing field '") + field + "'");
    return std::optional<int64_t>();
  }
  int64_t v = -1;
  if (it->is_number_integer()) {
    v = it->get<int64_t>();
  } else if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) v = -1;
  }
  if (v < min) {
    return InvalidArgument(std::string("field '") + field +
                           "' must be a version number >= " + std::to_string(min));
  }
  return std::optional<int64_t>(v);
}

// ---- handlers ----
struct Ctx {
  Registry& reg;
  const HttpApiOptions& o;
  const Caller& who;
  int64_t now;
};

Status AuditChange(Ctx& c, Json record) {
  if (c.o.audit == nullptr) return Status::Ok();
  Json r = Json::object();
  r["time"] = c.now;
  r["type"] = "registry";
  for (auto it = record.begin(); it != record.end(); ++it) r[it.key()] = it.value();
  r["actor"] = c.who.actor;
  r["via"] = "http";
  r["artifacts"] = c.reg.artifacts().url();
  c.o.audit->Append(r.dump());
  return c.o.audit->Flush().WithContext("writing the registry audit record");
}

Status CreateVersion(Ctx& c, const Json& body, http::ServerResponse* resp) {
  ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
  RETURN_IF_ERROR(ValidateModelName(name));
  ASSIGN_OR_RETURN(std::string description, Str(body, "description", false));
  if (description.size() > 5000) return InvalidArgument("field 'description' is over 5000 bytes");
  auto fit = body.find("files");
  if (fit == body.end() || !fit->is_array() || fit->empty()) {
    return InvalidArgument("field 'files' must be a non-empty array of {path, sha256, size}");
  }
  if (fit->size() > kMaxFiles) return InvalidArgument("field 'files' lists over 100000 files");
  Manifest m;
  m.name = name;
  for (size_t i = 0; i < fit->size(); ++i) {
    const Json& f = (*fit)[i];
    std::string where = "files[" + std::to_string(i) + "]";
    if (!f.is_object()) return InvalidArgument("field '" + where + "' must be an object");
    FileEntry e;
    auto p = Str(f, "path");
    auto h = Str(f, "sha256");
    if (!p.ok()) return InvalidArgument(where + ": " + p.status().message());
    if (!h.ok()) return InvalidArgument(where + ": " + h.status().message());
    e.path = *p;
    e.sha256 = *h;
    RETURN_IF_ERROR(ValidateFilePath(e.path).WithContext(where + ".path"));
    if (!IsHex64(e.sha256)) {
      return InvalidArgument("field '" + where + ".sha256' must be 64 lowercase hex digits");
    }
    auto s = f.find("size");
    if (s == f.end() || !s->is_number_unsigned()) {
      return InvalidArgument("field '" + where + ".size' must be a non-negative integer");
    }
    e.size = s->get<uint64_t>();
    m.files.push_back(std::move(e));
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  for (size_t i = 1; i < m.files.size(); ++i) {
    if (m.files[i].path == m.files[i - 1].path) {
      return InvalidArgument("field 'files' lists '" + m.files[i].path + "' twice");
    }
  }
  std::map<std::string, std::string> tags;
  if (auto t = body.find("tags"); t != body.end() && !t->is_null()) {
    if (!t->is_object()) return InvalidArgument("field 'tags' must be an object of strings");
    for (auto it = t->begin(); it != t->end(); ++it) {
      if (!it->is_string()) {
        return InvalidArgument("field 'tags." + it.key() + "' must be a string");
      }
      RETURN_IF_ERROR(ValidateTag(it.key(), it->get<std::string>()));
      tags[it.key()] = it->get<std::string>();
    }
  }
  Lineage lin;
  ASSIGN_OR_RETURN(lin.run_id, Str(body, "run_id", false));
  if (auto l = body.find("lineage"); l != body.end() && !l->is_null()) {
    if (!l->is_object()) return InvalidArgument("field 'lineage' must be an object");
    auto field = [&](const char* k, std::string* out) -> Status {
      auto s = Str(*l, k, false);
      if (!s.ok()) return InvalidArgument("lineage: " + s.status().message());
      if (!s->empty()) *out = *s;
      return Status::Ok();
    };
    RETURN_IF_ERROR(field("source", &lin.source));
    RETURN_IF_ERROR(field("run_id", &lin.run_id));
    RETURN_IF_ERROR(field("code_commit", &lin.code_commit));
    RETURN_IF_ERROR(field("parent", &lin.parent));
    if (auto d = l->find("dataset_digests"); d != l->end() && !d->is_null()) {
      if (!d->is_array())
        return InvalidArgument("field 'lineage.dataset_digests' must be an array");
      for (const auto& x : *d) {
        if (!x.is_string()) {
          return InvalidArgument("field 'lineage.dataset_digests' must hold strings");
        }
        lin.dataset_digests.push_back(x.get<std::string>());
      }
    }
    if (auto mt = l->find("metrics"); mt != l->end() && !mt->is_null()) {
      if (!mt->is_object()) return InvalidArgument("field 'lineage.metrics' must be an object");
      lin.metrics = *mt;
    }
  }
  // Every blob must be stored before the manifest and the row are written.
  for (const auto& f : m.files) {
    auto st = c.reg.artifacts().Stat(BlobKey(f.sha256));
    if (!st.ok() || st->size != f.size) {
      ReplyError(
          resp, 412, "BLOB_MISSING",
          "file '" + f.path + "': blob sha256:" + f.sha256 + " (" + std::to_string(f.size) +
              " bytes) is not stored; upload it with PUT /api/2.0/gantry/blobs/sha256/<hex>");
      return Status::Ok();
    }
  }
  std::string statement = StatementJson(m);
  std::string manifest_sha = security::Sha256Hex(statement);
  storage::PutOptions po;
  po.content_type = "application/json";
  RETURN_IF_ERROR(
      c.reg.artifacts()
          .Put(ManifestKey(manifest_sha),
               std::span<const std::byte>(reinterpret_cast<const std::byte*>(statement.data()),
                                          statement.size()),
               po)
          .WithContext("storing the manifest"));
  ModelVersion v;
  v.model = name;
  v.description = description;
  v.manifest_sha256 = manifest_sha;
  v.subject_sha256 = SubjectDigest(m.files);
  v.files = m.files;
  for (const auto& f : m.files) v.total_bytes += f.size;
  v.lineage = std::move(lin);
  if (v.lineage.source.empty()) v.lineage.source = "http:" + c.who.actor;
  v.tags = std::move(tags);
  RETURN_IF_ERROR(c.reg.meta().EnsureModel(name, "", c.now));
  ASSIGN_OR_RETURN(int64_t n, c.reg.meta().InsertVersion(v, c.now));
  RETURN_IF_ERROR(AuditChange(c, {{"action", "register"},
                                  {"model", name},
                                  {"version", n},
                                  {"manifest_sha256", manifest_sha},
                                  {"source", v.lineage.source}}));
  ASSIGN_OR_RETURN(ModelVersion got, c.reg.meta().GetVersion(name, n));
  Reply(resp, 200, Json{{"model_version", ToJson(got)}});
  return Status::Ok();
}

// Returns the action the request needs ("registry:read|write|admin").
std::string_view ActionOf(const http::ServerRequest& req) {
  std::string_view p = req.path;
  if (req.method == "GET" || req.method == "HEAD") return "registry:read";
  if (p.starts_with("/api/2.0/gantry/policy") || p.starts_with("/api/2.0/gantry/trusted-keys")) {
    return "registry:admin";
  }
  // Deleting versions or models destroys data (MLflow needs MANAGE): admin.
  if (p == "/api/2.0/mlflow/registered-models/delete" ||
      p == "/api/2.0/mlflow/model-versions/delete") {
    return "registry:admin";
  }
  return "registry:write";
}

Status Dispatch(Ctx& c, const http::ServerRequest& req, http::ServerResponse* resp) {
  Registry& reg = c.reg;
  std::string_view path = req.path;
  const std::string& method = req.method;
  // ---- blobs and manifests ----
  if (path.starts_with(kBlobs) || path.starts_with(kManifests)) {
    bool blob = path.starts_with(kBlobs);
    std::string hex(path.substr(blob ? kBlobs.size() : kManifests.size()));
    if (!IsHex64(hex))
      return InvalidArgument("digest '" + hex + "' must be 64 lowercase hex digits");
    std::string key = blob ? BlobKey(hex) : ManifestKey(hex);
    if (method == "GET" && blob) {
      // Blobs can be many GiB: fetched into a spool file that the server
      // sends with sendfile and removes, never held in memory.
      std::string spool;
      ASSIGN_OR_RETURN(int fd, CreateSpoolFile(c.o.spool_dir, "download", &spool));
      ::close(fd);
      Status got = reg.artifacts().GetFile(key, spool);
      if (!got.ok()) {
        ::unlink(spool.c_str());
        if (got.code() == StatusCode::kNotFound) {
          return NotFound("blob sha256:" + hex + " is not stored");
        }
        return got;
      }
      resp->status = 200;
      resp->content_type = "application/octet-stream";
      resp->body_file = std::move(spool);
      resp->body_file_temporary = true;
      return Status::Ok();
    }
    if (method == "GET") {
      auto data = reg.artifacts().Get(key);
      if (!data.ok()) {
        if (data.status().code() == StatusCode::kNotFound) {
          return NotFound(std::string(blob ? "blob" : "manifest") + " sha256:" + hex +
                          " is not stored");
        }
        return data.status();
      }
      resp->status = 200;
      resp->content_type = blob ? "application/octet-stream" : "application/json";
      resp->body = std::move(*data);
      return Status::Ok();
    }
    if (method == "PUT" && blob) {
      // Verified on receipt: a body whose digest differs is never stored.
      // Through AddHttpRoutes the body was streamed to a spool file.
      auto* spooled = dynamic_cast<SpooledBlob*>(req.body_sink.get());
      std::string got;
      uint64_t size = 0;
      if (spooled != nullptr) {
        RETURN_IF_ERROR(spooled->Finish());
        got = spooled->hex();
        size = spooled->size();
      } else {
        got = security::Sha256Hex(req.body);
        size = req.body.size();
      }
      if (got != hex) {
        return InvalidArgument("blob body has sha256 " + got + ", not " + hex +
                               " named in the path; nothing stored");
      }
      auto st = reg.artifacts().Stat(key);
      bool existed = st.ok() && st->size == size;
      if (!existed) {
        if (spooled != nullptr) {
          RETURN_IF_ERROR(reg.artifacts().PutFile(key, spooled->path()));
        } else {
          RETURN_IF_ERROR(reg.artifacts().Put(
              key, std::span<const std::byte>(reinterpret_cast<const std::byte*>(req.body.data()),
                                              req.body.size())));
        }
        RETURN_IF_ERROR(AuditChange(c, {{"action", "blob_put"}, {"sha256", hex}, {"size", size}}));
      }
      Reply(resp, existed ? 200 : 201, Json{{"sha256", hex}, {"size", size}});
      return Status::Ok();
    }
    ReplyError(resp, 405, "METHOD_NOT_ALLOWED", method + " " + req.path + " is not supported");
    return Status::Ok();
  }
  // ---- signatures (GET: reader; POST: writer) ----
  if (path == kSignatures) {
    std::string name = req.QueryParam("name");
    if (method == "GET") {
      ASSIGN_OR_RETURN(auto v, reg.Resolve(name + "/" + req.QueryParam("version")));
      ASSIGN_OR_RETURN(auto sigs, reg.meta().Signatures(v.model, v.version));
      Json out = Json::array();
      for (const auto& [keyid, bundle] : sigs)
        out.push_back({{"keyid", keyid}, {"bundle", bundle}});
      Reply(resp, 200,
            Json{{"name", v.model}, {"version", std::to_string(v.version)}, {"signatures", out}});
      return Status::Ok();
    }
    if (method == "POST") {
      ASSIGN_OR_RETURN(Json body, ParseBody(req));
      ASSIGN_OR_RETURN(name, Str(body, "name"));
      RETURN_IF_ERROR(ValidateModelName(name));
      ASSIGN_OR_RETURN(auto version, Version(body, "version", true));
      ASSIGN_OR_RETURN(std::string bundle, Str(body, "bundle"));
      reg.SetAudit(c.o.audit, c.who.actor);
      ASSIGN_OR_RETURN(std::string keyid,
                       reg.AddSignatureBundle(name + "/" + std::to_string(*version), bundle));
      Reply(resp, 200, Json{{"keyid", keyid}});
      return Status::Ok();
    }
    ReplyError(resp, 405, "METHOD_NOT_ALLOWED", method + " " + req.path + " is not supported");
    return Status::Ok();
  }
  // ---- policy and trusted keys (GET: reader; changes: admin) ----
  if (path == kPolicy && method == "GET") {
    ASSIGN_OR_RETURN(bool on, reg.SignaturesRequired());
    Reply(resp, 200, Json{{"require_signatures", on}});
    return Status::Ok();
  }
  if (path == kTrustedKeys && method == "GET") {
    // Public keys only; listing them lets clients compare key ids. Clients
    // never trust a key because the server lists it.
    ASSIGN_OR_RETURN(auto keys, reg.meta().TrustedKeys());
    Json out = Json::array();
    for (const auto& k : keys) {
      out.push_back({{"keyid", k.keyid},
                     {"algorithm", k.algorithm},
                     {"public_pem", k.public_pem},
                     {"comment", k.comment}});
    }
    Reply(resp, 200, Json{{"trusted_keys", out}});
    return Status::Ok();
  }
  // ---- admin ----
  if (path == kPolicy && method == "POST") {
    ASSIGN_OR_RETURN(Json body, ParseBody(req));
    auto it = body.find("require_signatures");
    if (it == body.end() || !it->is_boolean()) {
      return InvalidArgument("field 'require_signatures' must be true or false");
    }
    reg.SetAudit(c.o.audit, c.who.actor);
    RETURN_IF_ERROR(reg.SetSignaturesRequired(it->get<bool>()));
    Reply(resp, 200, Json{{"require_signatures", it->get<bool>()}});
    return Status::Ok();
  }
  if (path == kTrustedKeys) {
    reg.SetAudit(c.o.audit, c.who.actor);
    if (method == "POST") {
      ASSIGN_OR_RETURN(Json body, ParseBody(req));
      ASSIGN_OR_RETURN(std::string pem, Str(body, "public_pem"));
      ASSIGN_OR_RETURN(std::string comment, Str(body, "comment", false));
      ASSIGN_OR_RETURN(TrustedKey k, reg.TrustKey(pem, comment));
      Reply(resp, 200, Json{{"keyid", k.keyid}, {"algorithm", k.algorithm}});
      return Status::Ok();
    }
    if (method == "DELETE") {
      std::string keyid = req.QueryParam("keyid");
      if (keyid.empty()) return InvalidArgument("missing query parameter 'keyid'");
      RETURN_IF_ERROR(reg.UntrustKey(keyid));
      Reply(resp, 200, Json::object());
      return Status::Ok();
    }
  }
  if (!path.starts_with(kMlflow)) return NotFound("unknown path " + req.path);
  std::string_view ep = path.substr(kMlflow.size());
  // ---- reads ----
  if (method == "GET") {
    std::string name = req.QueryParam("name");
    if (ep == "registered-models/get") {
      ASSIGN_OR_RETURN(auto m, reg.meta().GetModel(name));
      Reply(resp, 200, Json{{"registered_model", ToJson(m)}});
      return Status::Ok();
    }
    if (ep == "registered-models/search") {
      ASSIGN_OR_RETURN(auto ms, reg.meta().ListModels());
      int max = 100;
      std::string mr = req.QueryParam("max_results");
      if (!mr.empty()) {
        auto [p, ec] = std::from_chars(mr.data(), mr.data() + mr.size(), max);
        if (ec != std::errc() || p != mr.data() + mr.size() || max < 1 || max > 1000) {
          return InvalidArgument("max_results '" + mr + "' must be 1..1000");
        }
      }
      Json out = Json::array();
      for (const auto& m : ms) {
        if (static_cast<int>(out.size()) >= max) break;
        out.push_back(ToJson(m));
      }
      Reply(resp, 200, Json{{"registered_models", out}});
      return Status::Ok();
    }
    if (ep == "model-versions/get") {
      ASSIGN_OR_RETURN(auto v, reg.Resolve(name + "/" + req.QueryParam("version")));
      Reply(resp, 200, Json{{"model_version", ToJson(v)}});
      return Status::Ok();
    }
    if (ep == "registered-models/alias") {
      ASSIGN_OR_RETURN(auto v, reg.Resolve(name + "@" + req.QueryParam("alias")));
      Reply(resp, 200, Json{{"model_version", ToJson(v)}});
      return Status::Ok();
    }
    if (ep == "model-versions/search") {
      // MLflow's name/run_id, plus Gantry's lineage filters (the fields of
      // SearchQuery; see `gantry registry search`).
      SearchQuery q;
      q.run_id = req.QueryParam("run_id");
      q.alias = req.QueryParam("alias");
      q.name_like = req.QueryParam("name_like");
      std::string tag = req.QueryParam("tag");
      if (!tag.empty()) {
        size_t eq = tag.find('=');
        q.tag_key = tag.substr(0, eq);
        if (eq != std::string::npos) q.tag_value = tag.substr(eq + 1);
      }
      q.dataset_digest = req.QueryParam("dataset");
      q.source_like = req.QueryParam("source");
      q.code_commit = req.QueryParam("commit");
      q.parent = req.QueryParam("parent");
      if (std::string mr = req.QueryParam("max_results"); !mr.empty()) {
        auto [p, ec] = std::from_chars(mr.data(), mr.data() + mr.size(), q.limit);
        if (ec != std::errc() || p != mr.data() + mr.size() || q.limit < 1 || q.limit > 1000) {
          return InvalidArgument("max_results '" + mr + "' must be 1..1000");
        }
      }
      bool filtered = !q.run_id.empty() || !q.alias.empty() || !q.name_like.empty() ||
                      !q.tag_key.empty() || !q.dataset_digest.empty() || !q.source_like.empty() ||
                      !q.code_commit.empty() || !q.parent.empty();
      std::vector<ModelVersion> vs;
      if (!name.empty() && !filtered) {
        ASSIGN_OR_RETURN(vs, reg.meta().ListVersions(name));
      } else {
        ASSIGN_OR_RETURN(vs, reg.meta().Search(q));
      }
      Json out = Json::array();
      for (const auto& v : vs) {
        if (!name.empty() && v.model != name) continue;
        out.push_back(ToJson(v));
      }
      Reply(resp, 200, Json{{"model_versions", out}});
      return Status::Ok();
    }
    return NotFound("unknown endpoint " + req.path);
  }
  // ---- writes ----
  if ((ep == "model-versions/delete" || ep == "registered-models/delete") && method != "DELETE") {
    ReplyError(resp, 405, "METHOD_NOT_ALLOWED",
               method + " " + req.path + " is not supported; use DELETE (as MLflow does)");
    return Status::Ok();
  }
  if ((ep == "model-versions/delete" || ep == "registered-models/delete") && method == "DELETE") {
    // MLflow sends {name, version} as a JSON body; query parameters work too.
    Json body = Json::object();
    if (!req.body.empty()) {
      ASSIGN_OR_RETURN(body, ParseBody(req));
    }
    if (!body.contains("name") && !req.QueryParam("name").empty())
      body["name"] = req.QueryParam("name");
    if (!body.contains("version") && !req.QueryParam("version").empty())
      body["version"] = req.QueryParam("version");
    ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
    RETURN_IF_ERROR(ValidateModelName(name));
    reg.SetAudit(c.o.audit, c.who.actor);
    DeleteReport rep;
    if (ep == "model-versions/delete") {
      ASSIGN_OR_RETURN(auto version, Version(body, "version", true));
      ASSIGN_OR_RETURN(rep, reg.DeleteVersion(name, *version));
    } else {
      ASSIGN_OR_RETURN(rep, reg.DeleteModel(name));
    }
    Json versions = Json::array();
    for (int64_t v : rep.versions) versions.push_back(std::to_string(v));
    Reply(resp, 200,
          Json{{"deleted",
                {{"name", rep.model},
                 {"versions", versions},
                 {"aliases_removed", rep.aliases_removed},
                 {"blobs_removed", rep.blobs_removed},
                 {"manifests_removed", rep.manifests_removed},
                 {"gc_errors", rep.gc_errors}}}});
    return Status::Ok();
  }
  if (ep == "registered-models/alias" && method == "DELETE") {
    std::string name = req.QueryParam("name"), alias = req.QueryParam("alias");
    std::optional<int64_t> expected;
    if (std::string e = req.QueryParam("expected_version"); !e.empty()) {
      ASSIGN_OR_RETURN(expected,
                       Version(Json{{"expected_version", e}}, "expected_version", false, 0));
    }
    reg.SetAudit(c.o.audit, c.who.actor);
    RETURN_IF_ERROR(reg.DeleteAlias(name, alias, expected));
    Reply(resp, 200, Json::object());
    return Status::Ok();
  }
  if (method != "POST") {
    ReplyError(resp, 405, "METHOD_NOT_ALLOWED", method + " " + req.path + " is not supported");
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(Json body, ParseBody(req));
  if (ep == "registered-models/create") {
    ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
    RETURN_IF_ERROR(ValidateModelName(name));
    ASSIGN_OR_RETURN(std::string desc, Str(body, "description", false));
    if (reg.meta().GetModel(name).ok()) {
      return AlreadyExists("registered model '" + name + "' already exists");
    }
    RETURN_IF_ERROR(reg.meta().EnsureModel(name, desc, c.now));
    RETURN_IF_ERROR(AuditChange(c, {{"action", "model_create"}, {"model", name}}));
    ASSIGN_OR_RETURN(auto m, reg.meta().GetModel(name));
    Reply(resp, 200, Json{{"registered_model", ToJson(m)}});
    return Status::Ok();
  }
  if (ep == "registered-models/update" || ep == "model-versions/update") {
    bool model = ep == "registered-models/update";
    ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
    RETURN_IF_ERROR(ValidateModelName(name));
    int64_t version = 0;
    if (!model) {
      ASSIGN_OR_RETURN(auto v, Version(body, "version", true));
      version = *v;
    }
    ASSIGN_OR_RETURN(std::string desc, Str(body, "description"));
    if (desc.size() > 5000) return InvalidArgument("field 'description' is over 5000 bytes");
    RETURN_IF_ERROR(reg.meta().SetDescription(name, version, desc, c.now));
    RETURN_IF_ERROR(
        AuditChange(c, {{"action", "description"}, {"model", name}, {"version", version}}));
    Reply(resp, 200, Json::object());
    return Status::Ok();
  }
  if (ep == "model-versions/set-tag" || ep == "registered-models/set-tag") {
    bool model = ep == "registered-models/set-tag";
    ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
    RETURN_IF_ERROR(ValidateModelName(name));
    int64_t version = 0;
    if (!model) {
      ASSIGN_OR_RETURN(auto v, Version(body, "version", true));
      version = *v;
    }
    ASSIGN_OR_RETURN(std::string key, Str(body, "key"));
    ASSIGN_OR_RETURN(std::string value, Str(body, "value"));
    RETURN_IF_ERROR(ValidateTag(key, value));
    RETURN_IF_ERROR(reg.meta().SetTag(name, version, key, value, false, c.now));
    RETURN_IF_ERROR(AuditChange(
        c, {{"action", "tag_set"}, {"model", name}, {"version", version}, {"key", key}}));
    Reply(resp, 200, Json::object());
    return Status::Ok();
  }
  if (ep == "registered-models/alias") {
    ASSIGN_OR_RETURN(std::string name, Str(body, "name"));
    ASSIGN_OR_RETURN(std::string alias, Str(body, "alias"));
    ASSIGN_OR_RETURN(auto version, Version(body, "version", true));
    ASSIGN_OR_RETURN(auto expected, Version(body, "expected_version", false, 0));
    reg.SetAudit(c.o.audit, c.who.actor);
    RETURN_IF_ERROR(reg.SetAlias(name, alias, *version, expected));
    Reply(resp, 200, Json::object());
    return Status::Ok();
  }
  if (ep == "model-versions/create") return CreateVersion(c, body, resp);
  return NotFound("unknown endpoint " + method + " " + req.path);
}

}  // namespace

namespace {

int64_t NowSeconds(const HttpApiOptions& o) {
  const Clock* clock = o.clock ? o.clock : &SystemClock();
  return std::chrono::duration_cast<std::chrono::seconds>(clock->WallNow().time_since_epoch())
      .count();
}

// Authenticates and checks the role the request needs; on failure fills
// `resp` with the 401 (with the Bearer challenge) or 403 answer.
std::optional<Caller> AuthorizeOrReply(const HttpApiOptions& o, const http::ServerRequest& req,
                                       int64_t now, http::ServerResponse* resp) {
  auto who = Authenticate(o, req, now);
  if (!who.ok()) {
    resp->headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gantry-registry\"");
    ReplyError(resp, 401, "UNAUTHENTICATED", who.status().message());
    return std::nullopt;
  }
  std::string_view action = ActionOf(req);
  if (!Allowed(*who, action)) {
    std::string roles;
    for (const auto& r : who->roles) roles += (roles.empty() ? "" : ",") + r;
    Reply(resp, 403,
          Json{{"error_code", "PERMISSION_DENIED"},
               {"required_role", RoleFor(action)},
               {"message", req.method + " " + req.path + " needs role '" +
                               std::string(RoleFor(action)) + "' (caller " + who->actor + " has '" +
                               roles + "')"}});
    return std::nullopt;
  }
  return *std::move(who);
}

// Re-reads the API keys when the key store changed (a revoked or new key
// takes effect on the next request). Handlers run on the one loop thread,
// so this needs no lock.
void RefreshKeys(HttpApiOptions& o) {
  if (o.key_store == nullptr) return;
  auto changed = o.key_store->ChangedSinceSnapshot();
  if (changed.ok() && *changed) {
    auto snap = o.key_store->Snapshot();
    if (snap.ok()) o.keys = *snap;
  }
}

}  // namespace

void HandleHttpRequest(Registry& reg, const HttpApiOptions& o, const http::ServerRequest& req,
                       http::ServerResponse* resp) {
  int64_t now = NowSeconds(o);
  std::string_view path = req.path;
  if (!path.starts_with(kMlflow) && !path.starts_with(kGantry)) {
    return Error(resp, NotFound("unknown path " + req.path));
  }
  auto who = AuthorizeOrReply(o, req, now, resp);
  if (!who) return;
  // JSON bodies are bounded separately from blob uploads (which the server's
  // max_body_bytes bounds).
  size_t limit = path == kSignatures ? kMaxSignatureBodyBytes : kMaxJsonBodyBytes;
  if (!path.starts_with(kBlobs) && req.body.size() > limit) {
    return ReplyError(resp, 413, "REQUEST_TOO_LARGE",
                      "request body of " + std::to_string(req.body.size()) +
                          " bytes is over the limit of " + std::to_string(limit));
  }
  Ctx c{reg, o, *who, now};
  Status s = Dispatch(c, req, resp);
  if (!s.ok()) Error(resp, s);
}

void AddHttpRoutes(Registry& reg, HttpApiOptions options, http::Server& server) {
  auto o = std::make_shared<HttpApiOptions>(std::move(options));
  auto handle = [&reg, o](const http::ServerRequest& req, http::ServerResponse* resp) {
    RefreshKeys(*o);
    HandleHttpRequest(reg, *o, req, resp);
  };
  server.Handle("/api/", handle);
  // Blob uploads stream to a spool file. Credentials, role and size are
  // checked from the head, before a byte of the body is accepted.
  server.HandleStreaming(
      std::string(kBlobs),
      [o](const http::ServerRequest& head, uint64_t length,
          http::ServerResponse* reject) -> std::shared_ptr<http::BodySink> {
        if (head.method != "PUT") return nullptr;
        RefreshKeys(*o);
        if (!AuthorizeOrReply(*o, head, NowSeconds(*o), reject)) return nullptr;
        if (length > o->max_blob_bytes) {
          ReplyError(reject, 413, "REQUEST_TOO_LARGE",
                     "blob upload of " + std::to_string(length) +
                         " bytes is over this server's limit of " +
                         std::to_string(o->max_blob_bytes) +
                         " bytes (gantry registry serve --max-upload-mb)");
          return nullptr;
        }
        auto sink = SpooledBlob::Create(o->spool_dir);
        if (!sink.ok()) {
          Error(reject, sink.status());
          return nullptr;
        }
        return *std::move(sink);
      },
      handle);
}

// ---- client ----
namespace {

Status StatusFromHttp(int status, const std::string& body, std::string_view what) {
  Json j = Json::parse(body, nullptr, false);
  std::string msg = j.is_object() && j.contains("message") && j["message"].is_string()
                        ? j["message"].get<std::string>()
                        : body.substr(0, 200);
  msg = std::string(what) + ": HTTP " + std::to_string(status) + ": " + msg;
  switch (status) {
    case 400:
      return InvalidArgument(msg);
    case 401:
    case 403:
      return PermissionDenied(msg);
    case 404:
      return NotFound(msg);
    case 409:
    case 412:
      return FailedPrecondition(msg);
    case 413:
      return ResourceExhausted(msg);
    default:
      return Unavailable(msg);
  }
}

std::string UrlEncode(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

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

}  // namespace

Result<Json> RemoteRegistry::CallPath(std::string_view method, const std::string& path,
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
  std::string what = std::string(method) + " " + path.substr(0, path.find('?'));
  if (resp.status != 200) return StatusFromHttp(resp.status, resp.body, what);
  Json j = Json::parse(resp.body, nullptr, false);
  if (j.is_discarded()) return DataLoss("server answered " + what + " with non-JSON");
  return j;
}

Result<Json> RemoteRegistry::Call(std::string_view method, std::string_view endpoint,
                                  const Json& body) {
  return CallPath(method, std::string(kMlflow) + std::string(endpoint), body);
}

Result<Json> RemoteRegistry::CallGantry(std::string_view method, std::string_view endpoint,
                                        const Json& body) {
  return CallPath(method, std::string(kGantry) + std::string(endpoint), body);
}

Result<Json> RemoteRegistry::GetVersion(std::string_view ref) {
  std::string r(ref);
  if (r.starts_with("models:/")) r.erase(0, 8);
  std::string endpoint;
  if (size_t at = r.find('@'); at != std::string::npos) {
    endpoint = "registered-models/alias?name=" + UrlEncode(r.substr(0, at)) +
               "&alias=" + UrlEncode(r.substr(at + 1));
  } else {
    size_t slash = r.find('/');
    std::string name = r.substr(0, slash);
    std::string ver = slash == std::string::npos ? "latest" : r.substr(slash + 1);
    endpoint = "model-versions/get?name=" + UrlEncode(name) + "&version=" + UrlEncode(ver);
  }
  ASSIGN_OR_RETURN(Json got, Call("GET", endpoint));
  auto it = got.find("model_version");
  if (it == got.end() || !it->is_object()) {
    return DataLoss("server answer for " + r + " has no model_version object");
  }
  return *it;
}

namespace {

// The checked pieces of a remote version: its number, the statement text
// (hashing to the recorded digest), the parsed manifest (equal to the
// server's file list) and the listed sizes.
struct RemoteVersion {
  std::string name;
  int64_t version = 0;
  std::string label;  // "name/3"
  std::string statement;
  Manifest manifest;
  std::map<std::string, uint64_t> sizes;
};

}  // namespace

std::chrono::milliseconds BlobTransferDeadline(std::chrono::milliseconds base, uint64_t bytes) {
  // 10 MB/s is 10,000 bytes per millisecond.
  return base + std::chrono::milliseconds(bytes / 10'000);
}

Result<std::string> RemoteRegistry::GetRaw(const std::string& path) {
  http::Request r;
  r.url = o_.server + path;
  r.deadline = BlobTransferDeadline(o_.deadline, kMaxManifestBytes);
  r.max_body_bytes = kMaxManifestBytes;
  if (!o_.credential.empty()) r.headers.push_back({"Authorization", "Bearer " + o_.credential});
  ASSIGN_OR_RETURN(http::Response resp, http::Get(r));
  if (resp.status != 200) return StatusFromHttp(resp.status, resp.body, "GET " + path);
  return std::move(resp.body);
}

Status RemoteRegistry::PutBlob(const std::string& local, const FileEntry& f) {
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

namespace {

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
  // Sets *over when the server sent more than the limit.
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

}  // namespace

Status RemoteRegistry::FetchBlob(const FileEntry& f, uint64_t size, int fd, const std::string& out,
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

Result<Json> RemoteRegistry::Register(const RegisterRequest& req) {
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
  ASSIGN_OR_RETURN(Json out, Call("POST", "model-versions/create", body));
  return out["model_version"];
}

Result<Json> RemoteRegistry::RegisterCheckpoint(RegisterRequest req, const CheckpointSource& src) {
  RETURN_IF_ERROR(ValidateModelName(req.name));
  ASSIGN_OR_RETURN(RegisterRequest resolved, ReadCheckpointStep(std::move(req), src));
  return Register(resolved);
}

// Fetches and cross-checks a version's manifest (see RemoteVersion).
static Result<RemoteVersion> FetchRemoteVersion(
    RemoteRegistry& remote, std::string_view ref,
    const std::function<Result<std::string>(const std::string&)>& get_raw) {
  RemoteVersion out;
  ASSIGN_OR_RETURN(Json v, remote.GetVersion(ref));
  std::string r(ref);
  if (!v.contains("manifest_sha256") || !v.contains("files") || !v["files"].is_array()) {
    return DataLoss("server answer for " + r + " has no manifest_sha256/files");
  }
  std::string manifest_sha =
      v["manifest_sha256"].is_string() ? v["manifest_sha256"].get<std::string>() : "";
  if (!IsHex64(manifest_sha)) return DataLoss("server sent a bad manifest digest for " + r);
  out.name = v["name"].is_string() ? v["name"].get<std::string>() : "";
  {
    // A malformed answer must not throw (no exceptions across modules).
    std::string vs = v["version"].is_string() ? v["version"].get<std::string>() : "";
    auto [p, perr] = std::from_chars(vs.data(), vs.data() + vs.size(), out.version);
    if (perr != std::errc() || p != vs.data() + vs.size() || out.version < 1) {
      return DataLoss("server sent a bad version number for " + r);
    }
  }
  RETURN_IF_ERROR(ValidateModelName(out.name).WithContext("server answer for " + r));
  out.label = out.name + "/" + std::to_string(out.version);
  // The manifest must hash to the recorded digest, and the file list the
  // server sent must equal the manifest exactly.
  ASSIGN_OR_RETURN(out.statement, get_raw(std::string(kManifests) + manifest_sha));
  if (security::Sha256Hex(out.statement) != manifest_sha) {
    return DataLoss("manifest of " + out.label + " does not hash to " + manifest_sha);
  }
  ASSIGN_OR_RETURN(out.manifest, ParseStatement(out.statement));
  Manifest listed;
  for (const auto& f : v["files"]) {
    if (!f.is_object() || !f["path"].is_string() || !f["sha256"].is_string() ||
        !f["size"].is_number_unsigned()) {
      return DataLoss("server sent a malformed file entry for " + out.label);
    }
    FileEntry e{f["path"].get<std::string>(), f["sha256"].get<std::string>(), 0};
    out.sizes[e.path] = f["size"].get<uint64_t>();
    listed.files.push_back(e);
  }
  std::sort(listed.files.begin(), listed.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  RETURN_IF_ERROR(CompareManifests(out.manifest, listed, "the server's file list"));
  return out;
}

Result<VerifyReport> RemoteRegistry::Download(std::string_view ref, const std::string& dest,
                                              const RemoteDownloadOptions& options) {
  auto get_raw = [this](const std::string& path) { return GetRaw(path); };
  ASSIGN_OR_RETURN(RemoteVersion rv, FetchRemoteVersion(*this, ref, get_raw));
  const Manifest& m = rv.manifest;

  // Signatures, against the client's own trusted keys.
  bool require = options.require_signature;
  std::string required_by = "a signature was required (--require-signature)";
  if (auto pol = CallGantry("GET", "policy"); pol.ok()) {
    if (pol->value("require_signatures", false) && !require) {
      require = true;
      required_by = "the registry requires signatures";
    }
  } else if (pol.status().code() != StatusCode::kNotFound) {
    return pol.status().WithContext("reading the server's signature policy");
  }
  static const std::vector<security::DsseVerifier> kNone;
  const auto& trusted = options.trusted ? *options.trusted : kNone;
  ASSIGN_OR_RETURN(Json sj, CallGantry("GET", "signatures?name=" + UrlEncode(rv.name) +
                                                  "&version=" + std::to_string(rv.version)));
  std::map<std::string, std::string> sigs;
  if (sj.contains("signatures") && sj["signatures"].is_array()) {
    for (const auto& e : sj["signatures"]) {
      if (!e.is_object() || !e["keyid"].is_string() || !e["bundle"].is_string()) {
        return DataLoss("server sent a malformed signature entry for " + rv.label);
      }
      sigs[e["keyid"].get<std::string>()] = e["bundle"].get<std::string>();
    }
  }
  if (require && trusted.empty()) {
    return PermissionDenied(rv.label +
                            ": a trusted signature is required but no trusted public "
                            "key is configured on this client; pass --pubkey KEY.pub (the "
                            "server's key list is not trusted for this)");
  }
  ASSIGN_OR_RETURN(VerifyReport rep, CheckSignatureBundles(rv.label, sigs, rv.statement, trusted,
                                                           require, required_by));
  rep.model = rv.name;
  rep.version = rv.version;

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
      Status s = FetchBlob(f, size, -1, "", rv.label);
      if (!s.ok()) return s;
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

Result<std::string> RemoteRegistry::Sign(std::string_view ref, const security::DsseSigner& signer) {
  auto get_raw = [this](const std::string& path) { return GetRaw(path); };
  ASSIGN_OR_RETURN(RemoteVersion rv, FetchRemoteVersion(*this, ref, get_raw));
  ASSIGN_OR_RETURN(auto env, security::SignDsse(kInTotoPayloadType, rv.statement, signer));
  std::string bundle = BundleJson(env, signer.KeyId()).dump(2);
  ASSIGN_OR_RETURN(Json out, CallGantry("POST", "signatures",
                                        Json{{"name", rv.name},
                                             {"version", std::to_string(rv.version)},
                                             {"bundle", bundle}}));
  return out.value("keyid", signer.KeyId());
}

}  // namespace gantry::registry
