// A client of a running gateway's admin API (docs/gateway.md, "Admin API"), used by
// `gantry gateway keys|backends|drain|undrain|rollout|anomalies --url`:
//
//   ASSIGN_OR_RETURN(gateway::AdminClient admin,
//                    gateway::AdminClient::Create("http://127.0.0.1:8080", admin_key));
//   ASSIGN_OR_RETURN(Json backends, admin.Backends());   // {"backends": [...]}
//
// Every call returns the API's JSON document as the gateway sent it (so `--json`
// prints what the API documents). An error answer becomes the Status that
// http::StatusCodeForHttp gives its HTTP status (404 NotFound, 400 InvalidArgument,
// 401/403 PermissionDenied, 409 FailedPrecondition, 5xx Unavailable) with the
// gateway's own message, e.g. "GET /admin/rollouts/nosuch: HTTP 404: no rollout
// 'nosuch'". Transport errors are those of http::Send (Unavailable when nothing
// listens, DeadlineExceeded after the timeout). Names and ids are percent-encoded
// into the path.
//
// Thread-safety: an AdminClient holds only its URL and key; calls may run on any
// number of threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::gateway {

class AdminClient {
 public:
  // `url` is the gateway's base URL (http://host:port); `admin_key` a key whose
  // role has the action 'admin'. InvalidArgument naming the flag when either is
  // empty.
  static Result<AdminClient> Create(std::string url, std::string admin_key,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Keys: {"keys": [{id, name, role, created, expires, revoked}, ...]}; the
  // create/rotate answers carry the new secret once, as "key".
  Result<Json> ListKeys() const;
  // expires_in_s 0: never expires.
  Result<Json> CreateKey(std::string_view name, std::string_view role, int64_t expires_in_s) const;
  Result<Json> RotateKey(std::string_view id, int64_t grace_s) const;
  Result<Json> RevokeKey(std::string_view id) const;

  // Backends: {"backends": [...]} and one backend's state object.
  Result<Json> Backends() const;
  Result<Json> Backend(std::string_view name) const;
  Result<Json> Drain(std::string_view backend) const;
  Result<Json> Undrain(std::string_view backend) const;
  // Drains `backend`, then polls every `poll` until it has no requests in flight
  // and returns its last state. `progress` (may be empty) sees the in-flight count
  // after each poll. DeadlineExceeded naming the backend and the count when
  // `timeout` passes first (the backend stays drained).
  Result<Json> DrainAndWait(std::string_view backend, std::chrono::milliseconds timeout,
                            const std::function<void(int64_t in_flight)>& progress,
                            std::chrono::milliseconds poll = std::chrono::milliseconds(100)) const;

  // Pools: {"pools": [{name, backends, added, up, in_flight, pending, held,
  // scale_from_zero}, ...]}.
  Result<Json> Pools() const;
  // Adds a backend at `address` ("host:port", numeric host) to tier 0 of
  // `pool`; the answer is its state object (as Backend()) with "pool".
  // FailedPrecondition (HTTP 409) when the name is taken, NotFound for an
  // unknown pool, InvalidArgument naming the field at fault. In a pool with
  // health checks it takes traffic once one check passes.
  Result<Json> AddBackend(std::string_view pool, std::string_view name, std::string_view address,
                          std::string_view zone = "", uint32_t weight = 0) const;
  // Removes a backend that AddBackend added. FailedPrecondition while it has
  // requests in flight unless `force` (those then finish on it); drain it
  // first (DrainAndWait).
  Result<Json> RemoveBackend(std::string_view pool, std::string_view name, bool force) const;

  // Rollouts: {"rollouts": [...]} and one rollout's state object.
  Result<Json> Rollouts() const;
  Result<Json> Rollout(std::string_view name) const;
  // Pools not named get weight 0.
  Result<Json> SetRolloutWeights(
      std::string_view name, const std::vector<std::pair<std::string, uint64_t>>& weights) const;
  Result<Json> RollbackRollout(std::string_view name) const;

  // Output anomaly detection: {"enabled": bool, "signals": [...]}.
  Result<Json> Anomalies() const;

  const std::string& url() const { return url_; }

 private:
  AdminClient(std::string url, std::string key, std::chrono::milliseconds timeout)
      : url_(std::move(url)), key_(std::move(key)), timeout_(timeout) {}
  Result<Json> Call(std::string_view method, const std::string& path, const Json* body) const;

  std::string url_;
  std::string key_;
  std::chrono::milliseconds timeout_;
};

}  // namespace gantry::gateway
