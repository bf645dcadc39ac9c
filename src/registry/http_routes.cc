// The registry's MLflow-shaped HTTP API (see http_api.h): the route table
// (http_routes.h) and the handlers. Access control and the glue to an
// http::Server are in http_api.cc.
//
// Handlers may run concurrently (the server's handler pool). They share only
// thread-safe objects: the Registry's stores, the audit log. Changes are
// audited through the per-request Registry::ForCaller handle in Call::reg.
#include "http_routes.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <span>
#include <utility>

#include "blob_spool.h"
#include "gantry/core/http_status.h"
#include "gantry/core/json_reader.h"
#include "gantry/security/crypto.h"
#include "wire.h"

namespace gantry::registry {
namespace routes {

namespace {

// A signature bundle carries the whole manifest (up to kMaxManifestBytes) base64-encoded.
constexpr size_t kMaxSignatureBodyBytes = kMaxBufferedBodyBytes;

void Ok(Call& c, const Json& body = Json::object()) { Reply(c.resp, 200, body); }

// The request's JSON body; errors name the request.
Result<JsonReader> Body(const Call& c) {
  std::string origin = c.req.method + " " + c.req.path + " body";
  if (c.req.body.empty()) return InvalidArgument(origin + ": must be a JSON object");
  ASSIGN_OR_RETURN(JsonReader body, JsonReader::Parse(c.req.body, origin));
  RETURN_IF_ERROR(body.ExpectObject());
  return body;
}

Result<std::string> Name(const JsonReader& body) {
  ASSIGN_OR_RETURN(std::string name, body.GetString("name"));
  RETURN_IF_ERROR(ValidateModelName(name).WithContext(body.origin()));
  return name;
}

Result<std::string> Description(const JsonReader& body, bool required) {
  Result<std::string> d =
      required ? body.GetString("description") : body.GetString("description", "");
  if (d.ok() && d->size() > 5000) return body.Error("description", "at most 5000 bytes");
  return d;
}

// max_results of a search: 1..1000, `fallback` when absent.
Result<int> MaxResults(const http::ServerRequest& req, int fallback) {
  std::string mr = req.QueryParam("max_results");
  if (mr.empty()) return fallback;
  int max = 0;
  auto [p, ec] = std::from_chars(mr.data(), mr.data() + mr.size(), max);
  if (ec != std::errc() || p != mr.data() + mr.size() || max < 1 || max > 1000) {
    return InvalidArgument("max_results '" + mr + "' must be 1..1000");
  }
  return max;
}

Status AuditChange(Call& c, Json record) {
  if (c.o.audit == nullptr) return Status::Ok();
  Json r = Json::object();
  r["time"] = c.now;
  r["type"] = "registry";
  for (auto it = record.begin(); it != record.end(); ++it) r[it.key()] = it.value();
  r["actor"] = c.who.actor;
  r["via"] = "http";
  r["artifacts"] = c.reg.artifacts().url();
  // Invalid UTF-8 from the request (a name, a tag) would make dump() throw after
  // the change was made, leaving it unaudited; it is written as U+FFFD instead.
  c.o.audit->Append(r.dump(-1, ' ', false, Json::error_handler_t::replace));
  return c.o.audit->Flush().WithContext("writing the registry audit record");
}

// ---- reads ----

Status GetModel(Call& c) {
  ASSIGN_OR_RETURN(RegisteredModel m, c.reg.meta().GetModel(c.req.QueryParam("name")));
  Ok(c, {{"registered_model", ToJson(m)}});
  return Status::Ok();
}

Status SearchModels(Call& c) {
  ASSIGN_OR_RETURN(auto models, c.reg.meta().ListModels());
  ASSIGN_OR_RETURN(int max, MaxResults(c.req, 100));
  Json out = Json::array();
  for (const auto& m : models) {
    if (static_cast<int>(out.size()) >= max) break;
    out.push_back(ToJson(m));
  }
  Ok(c, {{"registered_models", out}});
  return Status::Ok();
}

Status GetVersion(Call& c) {
  ASSIGN_OR_RETURN(ModelVersion v,
                   c.reg.Resolve(c.req.QueryParam("name") + "/" + c.req.QueryParam("version")));
  Ok(c, {{"model_version", ToJson(v)}});
  return Status::Ok();
}

Status GetAlias(Call& c) {
  ASSIGN_OR_RETURN(ModelVersion v,
                   c.reg.Resolve(c.req.QueryParam("name") + "@" + c.req.QueryParam("alias")));
  Ok(c, {{"model_version", ToJson(v)}});
  return Status::Ok();
}

// MLflow's name/run_id, plus Gantry's lineage filters (the fields of
// SearchQuery; see `gantry registry search`).
Status SearchVersions(Call& c) {
  const http::ServerRequest& req = c.req;
  std::string name = req.QueryParam("name");
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
  ASSIGN_OR_RETURN(q.limit, MaxResults(req, q.limit));
  bool filtered = !q.run_id.empty() || !q.alias.empty() || !q.name_like.empty() ||
                  !q.tag_key.empty() || !q.dataset_digest.empty() || !q.source_like.empty() ||
                  !q.code_commit.empty() || !q.parent.empty();
  std::vector<ModelVersion> vs;
  if (!name.empty() && !filtered) {
    ASSIGN_OR_RETURN(vs, c.reg.meta().ListVersions(name));
  } else {
    ASSIGN_OR_RETURN(vs, c.reg.meta().Search(q));
  }
  Json out = Json::array();
  for (const auto& v : vs) {
    if (!name.empty() && v.model != name) continue;
    out.push_back(ToJson(v));
  }
  Ok(c, {{"model_versions", out}});
  return Status::Ok();
}

Status CheckDigest(const Call& c) {
  if (!wire::IsHex64(c.param)) {
    return InvalidArgument("digest '" + c.param + "' must be 64 lowercase hex digits");
  }
  return Status::Ok();
}

// Blobs can be many GiB: fetched into a spool file that the server sends with
// sendfile and removes, never held in memory.
Status GetBlob(Call& c) {
  RETURN_IF_ERROR(CheckDigest(c));
  std::string spool;
  ASSIGN_OR_RETURN(int fd, CreateSpoolFile(c.o.spool_dir, "download", &spool));
  ::close(fd);
  Status got = c.reg.artifacts().GetFile(BlobKey(c.param), spool);
  if (!got.ok()) {
    ::unlink(spool.c_str());
    if (got.code() == StatusCode::kNotFound)
      return NotFound("blob sha256:" + c.param + " is not stored");
    return got;
  }
  c.resp->status = 200;
  c.resp->content_type = "application/octet-stream";
  c.resp->body_file = std::move(spool);
  c.resp->body_file_temporary = true;
  return Status::Ok();
}

Status GetManifest(Call& c) {
  RETURN_IF_ERROR(CheckDigest(c));
  auto data = c.reg.artifacts().Get(ManifestKey(c.param));
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) {
      return NotFound("manifest sha256:" + c.param + " is not stored");
    }
    return data.status();
  }
  c.resp->status = 200;
  c.resp->content_type = "application/json";
  c.resp->body = *std::move(data);
  return Status::Ok();
}

Status GetSignatures(Call& c) {
  ASSIGN_OR_RETURN(ModelVersion v,
                   c.reg.Resolve(c.req.QueryParam("name") + "/" + c.req.QueryParam("version")));
  ASSIGN_OR_RETURN(auto sigs, c.reg.meta().Signatures(v.model, v.version));
  Json out = Json::array();
  for (const auto& [keyid, bundle] : sigs) out.push_back({{"keyid", keyid}, {"bundle", bundle}});
  Ok(c, {{"name", v.model}, {"version", std::to_string(v.version)}, {"signatures", out}});
  return Status::Ok();
}

Status GetPolicy(Call& c) {
  ASSIGN_OR_RETURN(bool on, c.reg.SignaturesRequired());
  Ok(c, {{"require_signatures", on}});
  return Status::Ok();
}

// Public keys only; listing them lets clients compare key ids. Clients never
// trust a key because the server lists it.
Status GetTrustedKeys(Call& c) {
  ASSIGN_OR_RETURN(auto keys, c.reg.meta().TrustedKeys());
  Json out = Json::array();
  for (const auto& k : keys) out.push_back(wire::TrustedKeyJson(k));
  Ok(c, {{"trusted_keys", out}});
  return Status::Ok();
}

// ---- writes ----

Status CreateModel(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, Name(body));
  ASSIGN_OR_RETURN(std::string desc, Description(body, false));
  if (c.reg.meta().GetModel(name).ok()) {
    return AlreadyExists("registered model '" + name + "' already exists");
  }
  RETURN_IF_ERROR(c.reg.meta().EnsureModel(name, desc, c.now));
  RETURN_IF_ERROR(AuditChange(c, {{"action", "model_create"}, {"model", name}}));
  ASSIGN_OR_RETURN(RegisteredModel m, c.reg.meta().GetModel(name));
  Ok(c, {{"registered_model", ToJson(m)}});
  return Status::Ok();
}

// registered-models/update (version 0) and model-versions/update.
Status UpdateDescription(Call& c, bool model) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, Name(body));
  int64_t version = 0;
  if (!model) {
    ASSIGN_OR_RETURN(auto v, wire::ReadVersion(body, "version", true));
    version = *v;
  }
  ASSIGN_OR_RETURN(std::string desc, Description(body, true));
  RETURN_IF_ERROR(c.reg.meta().SetDescription(name, version, desc, c.now));
  RETURN_IF_ERROR(
      AuditChange(c, {{"action", "description"}, {"model", name}, {"version", version}}));
  Ok(c);
  return Status::Ok();
}
Status UpdateModel(Call& c) { return UpdateDescription(c, true); }
Status UpdateVersion(Call& c) { return UpdateDescription(c, false); }

// registered-models/set-tag (version 0) and model-versions/set-tag.
Status SetTag(Call& c, bool model) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, Name(body));
  int64_t version = 0;
  if (!model) {
    ASSIGN_OR_RETURN(auto v, wire::ReadVersion(body, "version", true));
    version = *v;
  }
  ASSIGN_OR_RETURN(std::string key, body.GetString("key"));
  ASSIGN_OR_RETURN(std::string value, body.GetString("value"));
  RETURN_IF_ERROR(ValidateTag(key, value));
  RETURN_IF_ERROR(c.reg.meta().SetTag(name, version, key, value, false, c.now));
  RETURN_IF_ERROR(
      AuditChange(c, {{"action", "tag_set"}, {"model", name}, {"version", version}, {"key", key}}));
  Ok(c);
  return Status::Ok();
}
Status SetModelTag(Call& c) { return SetTag(c, true); }
Status SetVersionTag(Call& c) { return SetTag(c, false); }

Status SetAlias(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, body.GetString("name"));
  ASSIGN_OR_RETURN(std::string alias, body.GetString("alias"));
  ASSIGN_OR_RETURN(auto version, wire::ReadVersion(body, "version", true));
  ASSIGN_OR_RETURN(auto expected, wire::ReadVersion(body, "expected_version", false, 0));
  RETURN_IF_ERROR(c.reg.SetAlias(name, alias, *version, expected));
  Ok(c);
  return Status::Ok();
}

Status DeleteAlias(Call& c) {
  std::optional<int64_t> expected;
  if (std::string e = c.req.QueryParam("expected_version"); !e.empty()) {
    Json q = {{"expected_version", e}};
    ASSIGN_OR_RETURN(expected,
                     wire::ReadVersion(JsonReader(q, c.req.method + " " + c.req.path + " query"),
                                       "expected_version", false, 0));
  }
  RETURN_IF_ERROR(c.reg.DeleteAlias(c.req.QueryParam("name"), c.req.QueryParam("alias"), expected));
  Ok(c);
  return Status::Ok();
}

// Verified on receipt: a body whose digest differs is never stored. Through
// AddHttpRoutes the body was streamed to a spool file (SpooledBlob).
Status PutBlob(Call& c) {
  RETURN_IF_ERROR(CheckDigest(c));
  const std::string& hex = c.param;
  std::string key = BlobKey(hex);
  auto* spooled = dynamic_cast<SpooledBlob*>(c.req.body_sink.get());
  std::string got;
  uint64_t size = 0;
  if (spooled != nullptr) {
    RETURN_IF_ERROR(spooled->Finish());
    got = spooled->hex();
    size = spooled->size();
  } else {
    got = security::Sha256Hex(c.req.body);
    size = c.req.body.size();
  }
  if (got != hex) {
    return InvalidArgument("blob body has sha256 " + got + ", not " + hex +
                           " named in the path; nothing stored");
  }
  auto st = c.reg.artifacts().Stat(key);
  bool existed = st.ok() && st->size == size;
  if (!existed) {
    if (spooled != nullptr) {
      RETURN_IF_ERROR(c.reg.artifacts().PutFile(key, spooled->path()));
    } else {
      RETURN_IF_ERROR(c.reg.artifacts().Put(
          key, std::span<const std::byte>(reinterpret_cast<const std::byte*>(c.req.body.data()),
                                          c.req.body.size())));
    }
    RETURN_IF_ERROR(AuditChange(c, {{"action", "blob_put"}, {"sha256", hex}, {"size", size}}));
  }
  Reply(c.resp, existed ? 200 : 201, Json{{"sha256", hex}, {"size", size}});
  return Status::Ok();
}

// The manifest of a version created from uploaded blobs: files[{path,
// sha256, size}], every one a stored blob of that size.
Result<Manifest> ReadFiles(const JsonReader& body, const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<JsonReader> files, body.GetArray("files"));
  if (files.empty()) return body.Error("files", "a non-empty array of {path, sha256, size}");
  if (files.size() > kMaxFiles) return body.Error("files", "at most 100000 files");
  Manifest m;
  m.name = name;
  for (const JsonReader& f : files) {
    FileEntry e;
    ASSIGN_OR_RETURN(e.path, f.GetString("path"));
    ASSIGN_OR_RETURN(e.sha256, f.GetString("sha256"));
    ASSIGN_OR_RETURN(e.size, f.GetUint("size"));
    RETURN_IF_ERROR(ValidateFilePath(e.path).WithContext(f.Path("path")));
    if (!wire::IsHex64(e.sha256)) return f.Error("sha256", "64 lowercase hex digits");
    m.files.push_back(std::move(e));
  }
  std::sort(m.files.begin(), m.files.end(),
            [](const FileEntry& a, const FileEntry& b) { return a.path < b.path; });
  for (size_t i = 1; i < m.files.size(); ++i) {
    if (m.files[i].path == m.files[i - 1].path) {
      return InvalidArgument(body.origin() + ": field 'files' lists '" + m.files[i].path +
                             "' twice");
    }
  }
  return m;
}

// run_id (MLflow's field) and lineage {source, run_id, code_commit, parent,
// dataset_digests, metrics}; a non-empty lineage.run_id wins.
Result<Lineage> ReadLineage(const JsonReader& body) {
  Lineage lin;
  ASSIGN_OR_RETURN(lin.run_id, body.GetString("run_id", ""));
  ASSIGN_OR_RETURN(JsonReader l, body.GetOptionalObject("lineage"));
  for (auto [key, out] :
       {std::pair{"source", &lin.source}, std::pair{"run_id", &lin.run_id},
        std::pair{"code_commit", &lin.code_commit}, std::pair{"parent", &lin.parent}}) {
    ASSIGN_OR_RETURN(std::string value, l.GetString(key, ""));
    if (!value.empty()) *out = std::move(value);
  }
  ASSIGN_OR_RETURN(lin.dataset_digests, l.GetStringArray("dataset_digests"));
  ASSIGN_OR_RETURN(JsonReader metrics, l.GetOptionalObject("metrics"));
  lin.metrics = metrics.value();
  return lin;
}

Status CreateVersion(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, Name(body));
  ASSIGN_OR_RETURN(std::string description, Description(body, false));
  ASSIGN_OR_RETURN(Manifest m, ReadFiles(body, name));
  ASSIGN_OR_RETURN(auto tags, body.GetStringMap("tags"));
  for (const auto& [k, v] : tags) RETURN_IF_ERROR(ValidateTag(k, v));
  ASSIGN_OR_RETURN(Lineage lineage, ReadLineage(body));
  // Every blob must be stored before the manifest and the row are written.
  for (const auto& f : m.files) {
    auto st = c.reg.artifacts().Stat(BlobKey(f.sha256));
    if (!st.ok() || st->size != f.size) {
      ReplyError(
          c.resp, 412, "BLOB_MISSING",
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
  v.lineage = std::move(lineage);
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
  Ok(c, {{"model_version", ToJson(got)}});
  return Status::Ok();
}

Status AddSignature(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string name, Name(body));
  ASSIGN_OR_RETURN(auto version, wire::ReadVersion(body, "version", true));
  ASSIGN_OR_RETURN(std::string bundle, body.GetString("bundle"));
  ASSIGN_OR_RETURN(std::string keyid,
                   c.reg.AddSignatureBundle(name + "/" + std::to_string(*version), bundle));
  Ok(c, {{"keyid", keyid}});
  return Status::Ok();
}

// ---- admin ----

// MLflow sends {name, version} as a JSON body; query parameters work too.
Result<JsonReader> DeleteArgs(const Call& c, Json* holder) {
  *holder = Json::object();
  if (!c.req.body.empty()) {
    ASSIGN_OR_RETURN(JsonReader body, Body(c));
    *holder = body.value();
  }
  for (const char* k : {"name", "version"}) {
    if (!holder->contains(k) && !c.req.QueryParam(k).empty()) (*holder)[k] = c.req.QueryParam(k);
  }
  return JsonReader(*holder, c.req.method + " " + c.req.path + " request");
}

Status Deleted(Call& c, const DeleteReport& rep) {
  Ok(c, {{"deleted", ToJson(rep)}});
  return Status::Ok();
}

Status DeleteVersion(Call& c) {
  Json holder;
  ASSIGN_OR_RETURN(JsonReader args, DeleteArgs(c, &holder));
  ASSIGN_OR_RETURN(std::string name, Name(args));
  ASSIGN_OR_RETURN(auto version, wire::ReadVersion(args, "version", true));
  ASSIGN_OR_RETURN(DeleteReport rep, c.reg.DeleteVersion(name, *version));
  return Deleted(c, rep);
}

Status DeleteModel(Call& c) {
  Json holder;
  ASSIGN_OR_RETURN(JsonReader args, DeleteArgs(c, &holder));
  ASSIGN_OR_RETURN(std::string name, Name(args));
  ASSIGN_OR_RETURN(DeleteReport rep, c.reg.DeleteModel(name));
  return Deleted(c, rep);
}

Status SetPolicy(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(bool on, body.GetBool("require_signatures"));
  RETURN_IF_ERROR(c.reg.SetSignaturesRequired(on));
  Ok(c, {{"require_signatures", on}});
  return Status::Ok();
}

Status AddTrustedKey(Call& c) {
  ASSIGN_OR_RETURN(JsonReader body, Body(c));
  ASSIGN_OR_RETURN(std::string pem, body.GetString("public_pem"));
  ASSIGN_OR_RETURN(std::string comment, body.GetString("comment", ""));
  ASSIGN_OR_RETURN(TrustedKey k, c.reg.TrustKey(pem, comment));
  Ok(c, wire::TrustedKeyJson(k));
  return Status::Ok();
}

Status RemoveTrustedKey(Call& c) {
  std::string keyid = c.req.QueryParam("keyid");
  if (keyid.empty()) return InvalidArgument("missing query parameter 'keyid'");
  RETURN_IF_ERROR(c.reg.UntrustKey(keyid));
  Ok(c);
  return Status::Ok();
}

const std::vector<Route>& Table() {
  static const std::vector<Route> table = {
      // Reads (reader).
      {"GET", "/api/2.0/mlflow/registered-models/get", kRead, false, kMaxJsonBodyBytes, GetModel},
      {"GET", "/api/2.0/mlflow/registered-models/search", kRead, false, kMaxJsonBodyBytes,
       SearchModels},
      {"GET", "/api/2.0/mlflow/model-versions/get", kRead, false, kMaxJsonBodyBytes, GetVersion},
      {"GET", "/api/2.0/mlflow/model-versions/search", kRead, false, kMaxJsonBodyBytes,
       SearchVersions},
      {"GET", "/api/2.0/mlflow/registered-models/alias", kRead, false, kMaxJsonBodyBytes, GetAlias},
      {"GET", "/api/2.0/gantry/blobs/sha256/{digest}", kRead, false, kMaxJsonBodyBytes, GetBlob},
      {"GET", "/api/2.0/gantry/manifests/sha256/{digest}", kRead, false, kMaxJsonBodyBytes,
       GetManifest},
      {"GET", "/api/2.0/gantry/signatures", kRead, false, kMaxJsonBodyBytes, GetSignatures},
      {"GET", "/api/2.0/gantry/policy", kRead, false, kMaxJsonBodyBytes, GetPolicy},
      {"GET", "/api/2.0/gantry/trusted-keys", kRead, false, kMaxJsonBodyBytes, GetTrustedKeys},
      // Writes (writer).
      {"POST", "/api/2.0/mlflow/registered-models/create", kWrite, false, kMaxJsonBodyBytes,
       CreateModel},
      {"POST", "/api/2.0/mlflow/registered-models/update", kWrite, false, kMaxJsonBodyBytes,
       UpdateModel},
      {"POST", "/api/2.0/mlflow/registered-models/set-tag", kWrite, false, kMaxJsonBodyBytes,
       SetModelTag},
      {"POST", "/api/2.0/mlflow/model-versions/update", kWrite, false, kMaxJsonBodyBytes,
       UpdateVersion},
      {"POST", "/api/2.0/mlflow/model-versions/set-tag", kWrite, false, kMaxJsonBodyBytes,
       SetVersionTag},
      {"POST", "/api/2.0/mlflow/model-versions/create", kWrite, false, kMaxJsonBodyBytes,
       CreateVersion},
      {"POST", "/api/2.0/mlflow/registered-models/alias", kWrite, false, kMaxJsonBodyBytes,
       SetAlias},
      {"DELETE", "/api/2.0/mlflow/registered-models/alias", kWrite, false, kMaxJsonBodyBytes,
       DeleteAlias},
      {"PUT", "/api/2.0/gantry/blobs/sha256/{digest}", kWrite, true, 0, PutBlob},
      {"POST", "/api/2.0/gantry/signatures", kWrite, false, kMaxSignatureBodyBytes, AddSignature},
      // Admin: deleting destroys data (MLflow needs MANAGE); trust and policy.
      {"DELETE", "/api/2.0/mlflow/model-versions/delete", kAdmin, false, kMaxJsonBodyBytes,
       DeleteVersion},
      {"DELETE", "/api/2.0/mlflow/registered-models/delete", kAdmin, false, kMaxJsonBodyBytes,
       DeleteModel},
      {"POST", "/api/2.0/gantry/policy", kAdmin, false, kMaxJsonBodyBytes, SetPolicy},
      {"POST", "/api/2.0/gantry/trusted-keys", kAdmin, false, kMaxJsonBodyBytes, AddTrustedKey},
      {"DELETE", "/api/2.0/gantry/trusted-keys", kAdmin, false, kMaxJsonBodyBytes,
       RemoveTrustedKey},
  };
  return table;
}

// The {name} segment when `path` matches `pattern`.
bool Matches(std::string_view pattern, std::string_view path, std::string* param) {
  size_t brace = pattern.find('{');
  if (brace == std::string_view::npos) return pattern == path;
  std::string_view prefix = pattern.substr(0, brace);
  if (!path.starts_with(prefix)) return false;
  std::string_view rest = path.substr(prefix.size());
  if (rest.empty() || rest.find('/') != std::string_view::npos) return false;
  *param = std::string(rest);
  return true;
}

}  // namespace

void Reply(http::ServerResponse* resp, int status, const Json& body) {
  resp->status = status;
  resp->content_type = "application/json";
  // Messages echo request text, which may not be UTF-8 (found by
  // fuzz_registry_http: a 500 "internal error" instead of the answer).
  resp->body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void ReplyError(http::ServerResponse* resp, int status, std::string_view code,
                std::string_view message) {
  Reply(resp, status, Json{{"error_code", code}, {"message", message}});
}

void ReplyStatus(http::ServerResponse* resp, const Status& s) {
  ReplyError(resp, http::HttpStatusFor(s.code()), wire::ErrorCodeFor(s.code()), s.message());
}

const std::vector<Route>& Routes() { return Table(); }

RouteMatch MatchRoute(std::string_view method, std::string_view path) {
  RouteMatch out;
  for (const Route& r : Table()) {
    std::string param;
    if (!Matches(r.pattern, path, &param)) continue;
    if (r.method == method) {
      out.route = &r;
      out.param = std::move(param);
      out.allowed.clear();
      return out;
    }
    out.allowed += (out.allowed.empty() ? "" : ", ") + std::string(r.method);
  }
  return out;
}

std::string_view RoleFor(std::string_view action) {
  if (action == kRead) return "reader";
  if (action == kWrite) return "writer";
  return "admin";
}

}  // namespace routes
}  // namespace gantry::registry
