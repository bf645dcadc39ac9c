// The registry's JSON shapes, both ways, and the error codes of its HTTP API.
#include "wire.h"

#include <charconv>

#include "gantry/core/http_status.h"

namespace gantry::registry {

Json ToJson(const ModelVersion& v) {
  Json files = Json::array();
  for (const auto& f : v.files)
    files.push_back({{"path", f.path}, {"sha256", f.sha256}, {"size", f.size}});
  Json tags = Json::object();
  for (const auto& [k, val] : v.tags) tags[k] = val;
  return Json{{"name", v.model},
              {"version", std::to_string(v.version)},
              {"description", v.description},
              {"creation_timestamp", v.created_unix * 1000},
              {"status", "READY"},
              {"source", "models:/" + v.model + "/" + std::to_string(v.version)},
              {"run_id", v.lineage.run_id},
              {"manifest_sha256", v.manifest_sha256},
              {"subject_sha256", v.subject_sha256},
              {"total_bytes", v.total_bytes},
              {"lineage",
               {{"source", v.lineage.source},
                {"run_id", v.lineage.run_id},
                {"code_commit", v.lineage.code_commit},
                {"dataset_digests", v.lineage.dataset_digests},
                {"parent", v.lineage.parent},
                {"metrics", v.lineage.metrics}}},
              {"tags", tags},
              {"aliases", v.aliases},
              {"signatures", v.signer_keyids},
              {"files", files}};
}

Json ToJson(const RegisteredModel& m) {
  Json tags = Json::object();
  for (const auto& [k, val] : m.tags) tags[k] = val;
  Json aliases = Json::array();
  for (const auto& [a, v] : m.aliases)
    aliases.push_back({{"alias", a}, {"version", std::to_string(v)}});
  return Json{{"name", m.name},
              {"description", m.description},
              {"creation_timestamp", m.created_unix * 1000},
              {"last_updated_timestamp", m.updated_unix * 1000},
              {"latest_version", m.latest_version == 0 ? "" : std::to_string(m.latest_version)},
              {"tags", tags},
              {"aliases", aliases}};
}

Json ToJson(const VerifyReport& r) {
  return Json{{"name", r.model},
              {"version", std::to_string(r.version)},
              {"files", r.files},
              {"bytes", r.bytes},
              {"signed_by_trusted", r.signed_by_trusted},
              {"verified_keyids", r.verified_keyids}};
}

Json ToJson(const DeleteReport& r) {
  Json versions = Json::array();
  for (int64_t v : r.versions) versions.push_back(std::to_string(v));
  return Json{{"name", r.model},
              {"versions", versions},
              {"aliases_removed", r.aliases_removed},
              {"blobs_removed", r.blobs_removed},
              {"manifests_removed", r.manifests_removed},
              {"gc_errors", r.gc_errors}};
}

namespace wire {
namespace {

struct ErrorName {
  StatusCode code;
  std::string_view name;
};
// MLflow's names (databricks error codes) where it has one.
constexpr ErrorName kErrorNames[] = {
    {StatusCode::kInvalidArgument, "INVALID_PARAMETER_VALUE"},
    {StatusCode::kNotFound, "RESOURCE_DOES_NOT_EXIST"},
    {StatusCode::kAlreadyExists, "RESOURCE_ALREADY_EXISTS"},
    // Compare-and-set misses (an alias moved meanwhile) are conflicts.
    {StatusCode::kFailedPrecondition, "CONFLICT"},
    {StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kUnavailable, "TEMPORARILY_UNAVAILABLE"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kUnimplemented, "NOT_IMPLEMENTED"},
    {StatusCode::kDataLoss, "DATA_LOSS"},
    {StatusCode::kInternal, "INTERNAL_ERROR"},
};

// "3" or 3; false when it is neither.
bool ParseVersionValue(const Json& j, int64_t* out) {
  if (j.is_number_integer()) {
    *out = j.get<int64_t>();
    return true;
  }
  if (!j.is_string()) return false;
  const std::string& s = j.get_ref<const std::string&>();
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// A version number the server sent as a string ("3"); 0 for "" when
// `empty_is_zero` (a model without versions).
Result<int64_t> VersionString(const JsonReader& j, std::string_view key, bool empty_is_zero) {
  ASSIGN_OR_RETURN(std::string text, j.GetString(key));
  if (text.empty() && empty_is_zero) return int64_t{0};
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1) {
    return j.Error(key, "a version number");
  }
  return v;
}

// Milliseconds since the epoch, as ToJson writes times.
Result<int64_t> Seconds(const JsonReader& j, std::string_view key) {
  ASSIGN_OR_RETURN(int64_t ms, j.GetInt(key, 0));
  return ms / 1000;
}

}  // namespace

std::string_view ErrorCodeFor(StatusCode code) {
  for (const ErrorName& e : kErrorNames) {
    if (e.code == code) return e.name;
  }
  return "INTERNAL_ERROR";
}

StatusCode StatusCodeFor(int http_status, std::string_view error_code) {
  for (const ErrorName& e : kErrorNames) {
    if (e.name == error_code && http::HttpStatusFor(e.code) == http_status) return e.code;
  }
  return http::StatusCodeForHttp(http_status);
}

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Result<std::optional<int64_t>> ReadVersion(const JsonReader& body, std::string_view key,
                                           bool required, int64_t min) {
  const Json* f = body.Find(key);
  if (f == nullptr) {
    if (required) return body.Error(key, "a version number");
    return std::optional<int64_t>();
  }
  int64_t v = 0;
  if (!ParseVersionValue(*f, &v) || v < min) {
    return body.Error(key, "a version number >= " + std::to_string(min));
  }
  return std::optional<int64_t>(v);
}

Result<ModelVersion> ModelVersionFromJson(const JsonReader& j) {
  ModelVersion v;
  ASSIGN_OR_RETURN(v.model, j.GetString("name"));
  ASSIGN_OR_RETURN(v.version, VersionString(j, "version", false));
  ASSIGN_OR_RETURN(v.description, j.GetString("description", ""));
  ASSIGN_OR_RETURN(v.created_unix, Seconds(j, "creation_timestamp"));
  ASSIGN_OR_RETURN(v.manifest_sha256, j.GetString("manifest_sha256"));
  ASSIGN_OR_RETURN(v.subject_sha256, j.GetString("subject_sha256", ""));
  ASSIGN_OR_RETURN(v.total_bytes, j.GetUint("total_bytes", 0));
  ASSIGN_OR_RETURN(JsonReader l, j.GetOptionalObject("lineage"));
  ASSIGN_OR_RETURN(v.lineage.source, l.GetString("source", ""));
  ASSIGN_OR_RETURN(v.lineage.run_id, l.GetString("run_id", ""));
  ASSIGN_OR_RETURN(v.lineage.code_commit, l.GetString("code_commit", ""));
  ASSIGN_OR_RETURN(v.lineage.parent, l.GetString("parent", ""));
  ASSIGN_OR_RETURN(v.lineage.dataset_digests, l.GetStringArray("dataset_digests"));
  ASSIGN_OR_RETURN(JsonReader metrics, l.GetOptionalObject("metrics"));
  v.lineage.metrics = metrics.value();
  if (v.lineage.run_id.empty()) {
    ASSIGN_OR_RETURN(v.lineage.run_id, j.GetString("run_id", ""));
  }
  ASSIGN_OR_RETURN(v.tags, j.GetStringMap("tags"));
  ASSIGN_OR_RETURN(v.aliases, j.GetStringArray("aliases"));
  ASSIGN_OR_RETURN(v.signer_keyids, j.GetStringArray("signatures"));
  ASSIGN_OR_RETURN(std::vector<JsonReader> files, j.GetArray("files"));
  for (const JsonReader& f : files) {
    FileEntry e;
    ASSIGN_OR_RETURN(e.path, f.GetString("path"));
    ASSIGN_OR_RETURN(e.sha256, f.GetString("sha256"));
    ASSIGN_OR_RETURN(e.size, f.GetUint("size"));
    v.files.push_back(std::move(e));
  }
  return v;
}

Result<RegisteredModel> RegisteredModelFromJson(const JsonReader& j) {
  RegisteredModel m;
  ASSIGN_OR_RETURN(m.name, j.GetString("name"));
  ASSIGN_OR_RETURN(m.description, j.GetString("description", ""));
  ASSIGN_OR_RETURN(m.created_unix, Seconds(j, "creation_timestamp"));
  ASSIGN_OR_RETURN(m.updated_unix, Seconds(j, "last_updated_timestamp"));
  ASSIGN_OR_RETURN(m.latest_version, VersionString(j, "latest_version", true));
  ASSIGN_OR_RETURN(m.tags, j.GetStringMap("tags"));
  ASSIGN_OR_RETURN(std::vector<JsonReader> aliases, j.GetOptionalArray("aliases"));
  for (const JsonReader& a : aliases) {
    ASSIGN_OR_RETURN(std::string alias, a.GetString("alias"));
    ASSIGN_OR_RETURN(m.aliases[alias], VersionString(a, "version", false));
  }
  return m;
}

Result<DeleteReport> DeleteReportFromJson(const JsonReader& j) {
  DeleteReport r;
  ASSIGN_OR_RETURN(r.model, j.GetString("name"));
  ASSIGN_OR_RETURN(std::vector<std::string> versions, j.GetStringArray("versions"));
  for (const std::string& text : versions) {
    int64_t v = 0;
    if (!ParseVersionValue(Json(text), &v) || v < 1) return j.Error("versions", "version numbers");
    r.versions.push_back(v);
  }
  ASSIGN_OR_RETURN(r.aliases_removed, j.GetStringArray("aliases_removed"));
  ASSIGN_OR_RETURN(r.blobs_removed, j.GetUint("blobs_removed", 0));
  ASSIGN_OR_RETURN(r.manifests_removed, j.GetUint("manifests_removed", 0));
  ASSIGN_OR_RETURN(r.gc_errors, j.GetStringArray("gc_errors"));
  return r;
}

Json TrustedKeyJson(const TrustedKey& k) {
  return Json{{"keyid", k.keyid},
              {"algorithm", k.algorithm},
              {"public_pem", k.public_pem},
              {"comment", k.comment}};
}

Result<TrustedKey> TrustedKeyFromJson(const JsonReader& j) {
  TrustedKey k;
  ASSIGN_OR_RETURN(k.keyid, j.GetString("keyid"));
  ASSIGN_OR_RETURN(k.algorithm, j.GetString("algorithm"));
  ASSIGN_OR_RETURN(k.public_pem, j.GetString("public_pem", ""));
  ASSIGN_OR_RETURN(k.comment, j.GetString("comment", ""));
  return k;
}

}  // namespace wire
}  // namespace gantry::registry
