#include "gantry/gateway/admin_client.h"

#include <fmt/format.h>

#include <thread>

#include "gantry/core/http_client.h"
#include "gantry/core/http_status.h"

namespace gantry::gateway {
namespace {

// A name or id as one path segment.
std::string Segment(std::string_view s) { return http::PercentEncode(s); }

}  // namespace

Result<AdminClient> AdminClient::Create(std::string url, std::string admin_key,
                                        std::chrono::milliseconds timeout) {
  if (url.empty()) {
    return InvalidArgument("--url (the running gateway, e.g. http://127.0.0.1:8080) is required");
  }
  if (admin_key.empty()) {
    return InvalidArgument(
        "--admin-key (a key whose role has action 'admin') is required with --url");
  }
  while (url.size() > 1 && url.back() == '/') url.pop_back();
  return AdminClient(std::move(url), std::move(admin_key), timeout);
}

Result<Json> AdminClient::Call(std::string_view method, const std::string& path,
                               const Json* body) const {
  http::Request req;
  req.method = std::string(method);
  req.url = url_ + path;
  req.headers = {{"Authorization", "Bearer " + key_}, {"Content-Type", "application/json"}};
  if (body != nullptr) req.body = body->dump();
  req.deadline = timeout_;
  ASSIGN_OR_RETURN(http::Response resp, http::Send(req));
  Json j = Json::parse(resp.body, nullptr, false);
  if (resp.status >= 400) {
    // The admin API answers {"error": {"code": ..., "message": ...}}.
    std::string msg = resp.body.substr(0, 300);
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
        j["error"].contains("message") && j["error"]["message"].is_string()) {
      msg = j["error"]["message"].get<std::string>();
    }
    return Status(http::StatusCodeForHttp(resp.status),
                  fmt::format("{} {}: HTTP {}: {}", method, path, resp.status, msg));
  }
  if (j.is_discarded()) return DataLoss(fmt::format("{}: the answer is not JSON", req.url));
  return j;
}

Result<Json> AdminClient::ListKeys() const { return Call("GET", "/admin/keys", nullptr); }

Result<Json> AdminClient::CreateKey(std::string_view name, std::string_view role,
                                    int64_t expires_in_s) const {
  Json body{{"name", name}, {"role", role}};
  if (expires_in_s > 0) body["expires_in_s"] = expires_in_s;
  return Call("POST", "/admin/keys", &body);
}

Result<Json> AdminClient::RotateKey(std::string_view id, int64_t grace_s) const {
  Json body{{"grace_s", grace_s}};
  return Call("POST", "/admin/keys/" + Segment(id) + "/rotate", &body);
}

Result<Json> AdminClient::RevokeKey(std::string_view id) const {
  return Call("DELETE", "/admin/keys/" + Segment(id), nullptr);
}

Result<Json> AdminClient::Backends() const { return Call("GET", "/admin/backends", nullptr); }

Result<Json> AdminClient::Backend(std::string_view name) const {
  return Call("GET", "/admin/backends/" + Segment(name), nullptr);
}

Result<Json> AdminClient::Drain(std::string_view backend) const {
  return Call("POST", "/admin/backends/" + Segment(backend) + "/drain", nullptr);
}

Result<Json> AdminClient::Undrain(std::string_view backend) const {
  return Call("POST", "/admin/backends/" + Segment(backend) + "/undrain", nullptr);
}

Result<Json> AdminClient::DrainAndWait(std::string_view backend, std::chrono::milliseconds timeout,
                                       const std::function<void(int64_t)>& progress,
                                       std::chrono::milliseconds poll) const {
  ASSIGN_OR_RETURN(Json state, Drain(backend));
  const auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int64_t in_flight = state.value("in_flight", int64_t{0});
    if (progress) progress(in_flight);
    if (in_flight <= 0) return state;
    if (std::chrono::steady_clock::now() >= until) {
      return DeadlineExceeded(fmt::format(
          "backend '{}' still has {} requests in flight after {} ms; it stays drained (undo "
          "with: gantry gateway undrain {})",
          backend, in_flight, timeout.count(), backend));
    }
    std::this_thread::sleep_for(poll);
    ASSIGN_OR_RETURN(state, Backend(backend));
  }
}

Result<Json> AdminClient::Pools() const { return Call("GET", "/admin/pools", nullptr); }

Result<Json> AdminClient::AddBackend(std::string_view pool, std::string_view name,
                                     std::string_view address, std::string_view zone,
                                     uint32_t weight) const {
  Json body{{"name", name}, {"address", address}};
  if (!zone.empty()) body["zone"] = zone;
  if (weight != 0) body["weight"] = weight;
  return Call("POST", "/admin/pools/" + Segment(pool) + "/backends", &body);
}

Result<Json> AdminClient::RemoveBackend(std::string_view pool, std::string_view name,
                                        bool force) const {
  return Call(
      "DELETE",
      "/admin/pools/" + Segment(pool) + "/backends/" + Segment(name) + (force ? "?force=true" : ""),
      nullptr);
}

Result<Json> AdminClient::Rollouts() const { return Call("GET", "/admin/rollouts", nullptr); }

Result<Json> AdminClient::Rollout(std::string_view name) const {
  return Call("GET", "/admin/rollouts/" + Segment(name), nullptr);
}

Result<Json> AdminClient::SetRolloutWeights(
    std::string_view name, const std::vector<std::pair<std::string, uint64_t>>& weights) const {
  Json w = Json::object();
  for (const auto& [pool, weight] : weights) w[pool] = weight;
  Json body{{"weights", w}};
  return Call("PUT", "/admin/rollouts/" + Segment(name), &body);
}

Result<Json> AdminClient::RollbackRollout(std::string_view name) const {
  return Call("POST", "/admin/rollouts/" + Segment(name) + "/rollback", nullptr);
}

Result<Json> AdminClient::Anomalies() const { return Call("GET", "/admin/anomalies", nullptr); }

}  // namespace gantry::gateway
