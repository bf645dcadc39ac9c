// Internal to the gateway: the per-backend and per-pool run-time state of the
// Balancer (pool.cc) and the active health checker (health_check.cc) that
// updates it from a thread of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gantry/core/metrics.h"
#include "gantry/gateway/config.h"

namespace gantry::gateway::internal {

// One backend's state. Lives as long as its Balancer (kept across reloads by
// name and address), so raw pointers to it stay valid; every field that the
// hot path touches is an atomic.
struct BackendState {
  std::string name;
  std::string address;  // host:port
  std::string zone;     // as last configured (status only)

  std::atomic<int64_t> in_flight{0};
  std::atomic<uint32_t> consecutive_5xx{0};
  std::atomic<uint32_t> consecutive_gateway_errors{0};
  // Clock ns at which the current ejection ends; 0 (or past): not ejected.
  std::atomic<int64_t> ejected_until{0};
  // The ejection multiplier, and the clock ns from which it decays by one per
  // base_ejection interval while the backend is not ejected.
  std::atomic<uint32_t> times_ejected{0};
  std::atomic<int64_t> decay_from{0};
  std::atomic<bool> healthy{true};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> failures{0};
  std::atomic<uint64_t> ejections{0};
  std::atomic<uint32_t> health_ok_streak{0};
  std::atomic<uint32_t> health_fail_streak{0};
  // Added at run time to a pool with health checks: unhealthy until its first
  // check passes (then healthy at once, whatever healthy_threshold says).
  std::atomic<bool> first_check{false};

  mutable std::mutex mu;  // guards last_health_error
  std::string last_health_error;

  // Metric series (null until AttachMetrics).
  std::atomic<metrics::Counter*> ejections_metric{nullptr};
  metrics::Gauge* up_gauge = nullptr;  // written under the Balancer's mutex
  metrics::Gauge* ejected_gauge = nullptr;
  metrics::Gauge* in_flight_gauge = nullptr;
  metrics::Gauge* draining_gauge = nullptr;
};

// One pool's counters, kept across reloads by pool name.
struct PoolState {
  std::string name;
  std::atomic<uint64_t> rr{0};      // round-robin cursor
  std::atomic<int64_t> active{0};   // requests in flight (Begin guards)
  std::atomic<int64_t> retries{0};  // retries in flight (TryBeginRetry guards)
  std::atomic<int64_t> pending{0};  // TryBeginPending guards
  std::atomic<metrics::Counter*> shed_no_backend{nullptr};
  std::atomic<metrics::Counter*> shed_saturated{nullptr};
  std::atomic<metrics::Counter*> degraded_unavailable{nullptr};
  std::atomic<metrics::Counter*> degraded_saturated{nullptr};
  std::atomic<metrics::Counter*> retries_metric{nullptr};

  // Scale from zero: the tickets of held requests in arrival order.
  mutable std::mutex hold_mu;
  std::deque<uint64_t> held_queue;  // guarded by hold_mu
  uint64_t next_ticket = 1;         // guarded by hold_mu
  std::atomic<int64_t> held{0};     // held_queue.size(), readable without the lock
  static constexpr int64_t kNeverWoken = INT64_MIN;
  std::atomic<int64_t> last_wake_ns{kNeverWoken};
  // Requests a later tier served because tier 0 had no backend up, since the
  // last wake call: a pool with a fallback tier never holds, so these are what
  // wake its primary from zero.
  std::atomic<int64_t> fallback_served{0};
  std::atomic<metrics::Counter*> held_released{nullptr};
  std::atomic<metrics::Counter*> held_timeout{nullptr};
  std::atomic<metrics::Counter*> held_overflow{nullptr};
  metrics::Gauge* in_flight_gauge = nullptr;  // written under the Balancer's mutex
  metrics::Gauge* pending_gauge = nullptr;
  metrics::Gauge* held_gauge = nullptr;
  metrics::Gauge* up_gauge = nullptr;
};

// What one health-check loop probes.
struct HealthTarget {
  std::string pool;
  std::string backend;
  BackendState* state = nullptr;
  std::string host;  // numeric or "localhost"
  uint16_t port = 0;
  std::string host_header;
  HealthCheckConfig cfg;
};

// Called from the checker's thread after each probe; `error` is empty on
// success ("connect: Connection refused", "status 503", "timed out after
// 1000 ms" otherwise).
using HealthResultFn =
    std::function<void(const HealthTarget& target, bool ok, const std::string& error)>;

// Runs one loop per target on an io_context of its own thread: a probe at
// once, then one every cfg.interval, each bounded by cfg.timeout (connect and
// answer). Thread-safe; the destructor stops the loops and joins the thread
// (no callback runs after it returns).
class HealthChecker {
 public:
  explicit HealthChecker(HealthResultFn on_result);
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  // Replaces the set of loops: loops whose target (pool, backend, address,
  // settings) is unchanged keep running on their schedule; others stop, and
  // new ones probe at once.
  void Update(std::vector<HealthTarget> targets);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::gateway::internal
