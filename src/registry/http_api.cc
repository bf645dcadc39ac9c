// MLflow-shaped read-only HTTP API (see http_api.h).
#include "gantry/registry/http_api.h"

#include <charconv>

namespace gantry::registry {
namespace {

constexpr std::string_view kPrefix = "/api/2.0/mlflow/";

void Reply(http::ServerResponse* resp, int status, const Json& body) {
  resp->status = status;
  resp->content_type = "application/json";
  resp->body = body.dump();
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
    default:
      break;
  }
  Reply(resp, status, Json{{"error_code", code}, {"message", s.message()}});
}

void Handle(Registry& reg, const http::ServerRequest& req, http::ServerResponse* resp) {
  std::string_view path = req.path;
  if (!path.starts_with(kPrefix)) return Error(resp, NotFound("unknown path " + req.path));
  std::string_view ep = path.substr(kPrefix.size());
  if (req.method != "GET") {
    return Error(resp, PermissionDenied(req.method + " " + req.path +
                                        ": this server is read-only (no authentication yet); "
                                        "change the registry with `gantry registry`"));
  }
  std::string name = req.QueryParam("name");
  if (ep == "registered-models/get") {
    auto m = reg.meta().GetModel(name);
    if (!m.ok()) return Error(resp, m.status());
    return Reply(resp, 200, Json{{"registered_model", ToJson(*m)}});
  }
  if (ep == "registered-models/search") {
    auto ms = reg.meta().ListModels();
    if (!ms.ok()) return Error(resp, ms.status());
    int max = 100;
    std::string mr = req.QueryParam("max_results");
    if (!mr.empty()) {
      auto [p, ec] = std::from_chars(mr.data(), mr.data() + mr.size(), max);
      if (ec != std::errc() || p != mr.data() + mr.size() || max < 1 || max > 1000) {
        return Error(resp, InvalidArgument("max_results '" + mr + "' must be 1..1000"));
      }
    }
    Json out = Json::array();
    for (const auto& m : *ms) {
      if (static_cast<int>(out.size()) >= max) break;
      out.push_back(ToJson(m));
    }
    return Reply(resp, 200, Json{{"registered_models", out}});
  }
  if (ep == "model-versions/get") {
    auto v = reg.Resolve(name + "/" + req.QueryParam("version"));
    if (!v.ok()) return Error(resp, v.status());
    return Reply(resp, 200, Json{{"model_version", ToJson(*v)}});
  }
  if (ep == "registered-models/alias") {
    auto v = reg.Resolve(name + "@" + req.QueryParam("alias"));
    if (!v.ok()) return Error(resp, v.status());
    return Reply(resp, 200, Json{{"model_version", ToJson(*v)}});
  }
  if (ep == "model-versions/search") {
    SearchQuery q;
    q.run_id = req.QueryParam("run_id");
    q.alias = req.QueryParam("alias");
    auto vs = reg.meta().Search(q);
    if (!vs.ok()) return Error(resp, vs.status());
    Json out = Json::array();
    for (const auto& v : *vs) {
      if (!name.empty() && v.model != name) continue;
      out.push_back(ToJson(v));
    }
    return Reply(resp, 200, Json{{"model_versions", out}});
  }
  return Error(resp, NotFound("unknown endpoint " + req.path));
}

}  // namespace

void AddHttpRoutes(Registry& reg, http::Server& server) {
  server.Handle(std::string(kPrefix),
                [&reg](const http::ServerRequest& req, http::ServerResponse* resp) {
                  Handle(reg, req, resp);
                });
}

}  // namespace gantry::registry
