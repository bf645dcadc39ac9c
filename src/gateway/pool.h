// Backend pools: the run-time state behind `pools:` and `rollouts:` of
// gateway.yaml, shared by every worker of a gateway process.
//
//   Balancer bal(clock, rng_seed);
//   bal.Configure(cfg);                       // at start and on every reload
//   Pick p = bal.Choose(route.target, {.caller = key_id, ...});
//   if (p.backend == kNoBackend) -> 503 with Retry-After p.retry_after_s (shed)
//   InFlight guard = bal.Begin(p);            // counts the request in flight
//   ... proxy to cfg.backends[p.backend] ...
//   bal.Report(p, Outcome::kOk / k5xx / kGatewayError / kConnectFailure ...);
//
// What a backend's availability means, in order of checks:
//   draining (admin)  -> no new requests; in-flight ones finish
//   ejected (outlier) -> no requests until the ejection ends or a health check passes
//   unhealthy (active health check)
//   saturated         -> in flight >= max_concurrent (circuit breaker)
// Choose() takes the first tier with an available backend; within the tier it
// prefers backends in the gateway's zone (when zone_aware and one is
// available there) and applies the pool's balancing. A pick from a tier after
// the first is `degraded` with a reason: "primary_unavailable" when the
// earlier tiers have no backend that is up (all ejected, unhealthy or
// draining), "primary_saturated" when some are up but all at max_concurrent.
//
// State is keyed by backend name: a reload that keeps a backend's name and
// address keeps its counters, ejection and health; drain marks survive too.
//
// Thread-safety: every method may be called from any thread. The hot path
// (Choose, Begin, Report, TryBeginRetry, Backoff, TryBeginPending) reads an
// immutable snapshot of the configuration and updates atomics: each thread
// caches the snapshot it last saw and checks one atomic generation number, so
// it takes a (short) lock only on its first call after a Configure or an admin
// change. Backend and pool state objects are never freed before the Balancer,
// so a Pick and an InFlight guard stay valid across reloads.
//
// Outlier detection runs with the settings of the pool the Pick came from;
// max_ejection_percent counts the ejected backends of that pool (all tiers).
// An ejection ends when its time is over or when an active health check passes
// (while the backend is healthy). The ejection multiplier drops by one for
// every base_ejection the backend then stays un-ejected.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/gateway/config.h"

namespace gantry::metrics {
class Registry;
}

namespace gantry::gateway {

namespace internal {
struct BackendState;
struct PoolState;
}  // namespace internal

inline constexpr size_t kNoBackend = static_cast<size_t>(-1);

// What the caller knows about the request, for sticky rollouts and retries.
struct PickContext {
  std::string_view caller;        // API key id / JWT subject ("" when anonymous)
  std::string_view sticky_value;  // value of the rollout's sticky header, if any
  // Backends already tried by this request (retries go elsewhere when they can).
  const std::vector<size_t>* exclude = nullptr;
};

struct Pick {
  size_t backend = kNoBackend;  // index into GatewayConfig::backends
  size_t pool = 0;              // index into GatewayConfig::pools
  size_t tier = 0;
  size_t rollout = kNoBackend;  // index into GatewayConfig::rollouts, if one chose the pool
  size_t rollout_target = 0;    // which target of that rollout
  bool degraded = false;
  std::string_view reason;         // "primary_unavailable" | "primary_saturated" when degraded
  std::string_view model_rewrite;  // the tier's `model:`, empty when none
  // When backend == kNoBackend: why ("no_backend_available" | "all_saturated")
  // and the Retry-After to send.
  std::string_view shed_reason;
  uint32_t retry_after_s = 0;

  // Set by Choose(): the chosen backend's and pool's run-time state, so that
  // Begin/Report/TryBeginRetry stay right across a reload that renumbers
  // backends. A hand-made Pick (null here) is resolved by its indexes.
  internal::BackendState* state = nullptr;
  internal::PoolState* pool_state = nullptr;
  // The names behind `pool` and `backend` in the configuration Choose() used,
  // so a caller holding an older configuration (a request that began before
  // a reload) can tell that the indexes mean something else now. Like
  // model_rewrite, valid until this thread's next Choose().
  std::string_view pool_name;
  std::string_view backend_name;
};

// How an exchange with a backend ended, as far as outlier detection cares.
enum class Outcome {
  kOk,              // any response below 500 (4xx is the client's fault)
  k5xx,             // 500, 501, 505.. from the backend
  kGatewayError,    // 502, 503, 504 from the backend
  kConnectFailure,  // refused / unreachable / connect timeout: nothing was sent
  kReset,           // connection closed or reset after sending
  kTimeout,         // no (complete) answer in time
};

// Per-backend counters and state shown by the admin API and metrics.
struct BackendStatus {
  std::string name;
  std::string zone;
  std::string address;  // host:port
  bool healthy = true;
  bool draining = false;
  bool ejected = false;
  int64_t ejected_for_ms = 0;  // remaining, when ejected
  uint32_t times_ejected = 0;  // the current ejection multiplier
  int64_t in_flight = 0;
  uint64_t requests = 0;
  uint64_t failures = 0;          // non-kOk outcomes
  uint64_t ejections = 0;         // total ejections since start
  std::string last_health_error;  // the latest failed check's reason; kept after recovery
};

// One pool as GET /admin/pools shows it.
struct PoolStatus {
  std::string name;
  std::vector<std::string> backends;  // every tier's, in tier order
  std::vector<std::string> added;     // those added through the admin API
  int64_t up = 0;                     // backends that may take requests now
  int64_t in_flight = 0;              // requests in flight to the pool's backends
  int64_t pending = 0;                // waiting for a slot (max_pending)
  int64_t held = 0;                   // held for a backend (scale_from_zero)
  bool implicit = false;
  ScaleFromZeroConfig scale_from_zero;
};

// How a held request (scale from zero) left its pool's queue.
enum class HoldOutcome { kReleased, kTimeout, kOverflow };

struct RolloutStatus {
  std::string name;
  std::vector<std::pair<std::string, uint32_t>> weights;   // pool name, current weight
  std::vector<std::pair<std::string, uint32_t>> previous;  // before the last change (rollback)
  std::vector<std::pair<std::string, uint32_t>> configured;
  std::string sticky;  // "none" | "key" | "header:<name>"
  uint64_t changes = 0;
};

class Balancer {
 public:
  // `rng_seed` seeds the random choices (weighted picks, power of two
  // choices, backoff jitter) so tests can be deterministic; 0 picks a random seed.
  explicit Balancer(const Clock& clock = SystemClock(), uint64_t rng_seed = 0);
  ~Balancer();
  Balancer(const Balancer&) = delete;
  Balancer& operator=(const Balancer&) = delete;

  // Installs `cfg`'s backends, pools and rollouts. Backend state is kept by
  // name (and address); rollout weights changed at run time are kept when the
  // rollout keeps the same pool names, else reset to the configured ones.
  // Starts/stops active health checks as configured (a thread of its own,
  // started on the first pool with health checks).
  void Configure(const GatewayConfig& cfg);

  // Chooses a backend for a request to `target`. Never blocks.
  Pick Choose(const Target& target, const PickContext& ctx);

  // Counts a request in flight on p.backend (for least-request balancing, the
  // circuit breaker and drain) until the guard is destroyed.
  class InFlight {
   public:
    InFlight() = default;
    InFlight(InFlight&& o) noexcept;
    InFlight& operator=(InFlight&& o) noexcept;
    ~InFlight();
    void Release();

   private:
    friend class Balancer;
    // Both decremented on release (a request counts on its backend and its
    // pool); the pointees live as long as the Balancer.
    std::atomic<int64_t>* counter_ = nullptr;
    std::atomic<int64_t>* counter2_ = nullptr;
  };
  InFlight Begin(const Pick& p);

  // Feeds outlier detection with the result of one exchange with p.backend.
  void Report(const Pick& p, Outcome outcome);

  // Retry budget of p.pool: true (and a retry counted until the returned guard
  // ends) when a retry may start now. See RetryConfig.
  std::optional<InFlight> TryBeginRetry(const Pick& p);
  // The jittered wait before retry number `n` (1-based) for pool `pool`:
  // uniform in [0, min(backoff_max, backoff_base * 2^(n-1))) ms (0 when that
  // bound is 0; defaults when `pool` is out of range).
  std::chrono::milliseconds Backoff(size_t pool, uint32_t n);

  // Pending requests when every tier is saturated (max_pending). Returns a
  // guard when the request may wait for a slot, nullopt when it must be shed.
  std::optional<InFlight> TryBeginPending(size_t pool);

  // --- scale from zero (ScaleFromZeroConfig) ---
  // A request whose Choose() found no backend available in a pool that
  // scales from zero waits in the pool's queue; so does a new request while
  // others are queued (arrival order). A Held is its place in the queue until
  // End() (or destruction, which counts nothing: the gateway is stopping).
  class Held {
   public:
    Held() = default;
    Held(Held&& o) noexcept;
    Held& operator=(Held&& o) noexcept;
    ~Held();
    // Leaves the queue, counting `outcome` in gantry_gateway_held_total.
    void End(HoldOutcome outcome);

   private:
    friend class Balancer;
    void Leave();
    internal::PoolState* pool_ = nullptr;
    uint64_t ticket_ = 0;
  };
  // Whether requests of p's pool are queued now.
  bool Holding(const Pick& p) const;
  // Queues a request of p's pool; nullopt (counted as an overflow) when the
  // pool's `hold` requests are queued already, or the pool does not scale
  // from zero.
  std::optional<Held> TryHold(const Pick& p);
  // True when every request queued before `h` has left the queue.
  bool FirstInLine(const Held& h) const;
  // The wake calls due now: pools with a wake URL that hold requests, or
  // whose fallback tier served requests because tier 0 had no backend up
  // (such a pool never holds: without this its primary would stay at zero),
  // at most one per pool per `every`. Marks them called.
  struct WakeCall {
    std::string pool;
    std::string url;
    int64_t held = 0;
    int64_t fallback_served = 0;  // since the previous wake call
  };
  std::vector<WakeCall> DueWakes(std::chrono::milliseconds every = std::chrono::seconds(1));

  // --- administration (admin API, CLI) ---
  // Errors: NotFound naming the backend or rollout and listing the known ones;
  // InvalidArgument for weights that name unknown pools, are all zero, or sum
  // above 1'000'000.
  Status SetDraining(std::string_view backend, bool draining);
  Result<BackendStatus> Backend(std::string_view backend) const;
  std::vector<BackendStatus> Backends() const;
  // The named pools (not the implicit ones of bare `backend:` routes).
  std::vector<PoolStatus> Pools() const;
  // Sets a rollout's weights by pool name (pools not named get 0). Weights
  // set here survive a Configure that keeps the rollout's set of pool names.
  Status SetRolloutWeights(std::string_view rollout,
                           const std::vector<std::pair<std::string, uint32_t>>& weights);
  // Goes back to the weights before the last change (FailedPrecondition when
  // there was none).
  Status RollbackRollout(std::string_view rollout);
  Result<RolloutStatus> Rollout(std::string_view rollout) const;
  std::vector<RolloutStatus> Rollouts() const;

  // For health-check tests and the admin API's view.
  // Marks a backend healthy/unhealthy as a health check would (healthy also
  // ends an ejection).
  void SetHealthForTest(std::string_view backend, bool healthy);

  // --- metrics ---
  // Registers, in `registry` (which must outlive every later call on this
  // Balancer, or the Balancer itself):
  //   gauges   gantry_gateway_backend_up{backend,zone}      1 when up (not
  //                                                          draining, ejected or unhealthy)
  //            gantry_gateway_backend_ejected{backend}
  //            gantry_gateway_backend_in_flight{backend}
  //            gantry_gateway_backend_draining{backend}
  //   counters gantry_gateway_backend_ejections_total{backend}
  //            gantry_gateway_shed_total{pool,reason}
  //            gantry_gateway_degraded_total{pool,reason}
  //            gantry_gateway_retries_total{pool}            (TryBeginRetry granted)
  //            gantry_gateway_held_total{pool,outcome}       released|timeout|overflow
  //   gauges   gantry_gateway_pool_in_flight{pool}, gantry_gateway_pool_pending{pool},
  //            gantry_gateway_pool_held{pool}, gantry_gateway_pool_backends_up{pool}
  // Counters are bumped on the hot path (one atomic add). Gauges are computed
  // on demand: AttachMetrics adds a collect hook to `registry` that calls
  // RefreshMetrics() at every Render(), so nothing else has to call it.
  // Backends and pools added by a later Configure are registered then.
  void AttachMetrics(metrics::Registry* registry);
  void RefreshMetrics();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::string_view OutcomeName(Outcome o);

// BackendStatus / RolloutStatus as the admin API returns them.
Json BackendStatusJson(const BackendStatus& s);
Json RolloutStatusJson(const RolloutStatus& s);
Json PoolStatusJson(const PoolStatus& s);

}  // namespace gantry::gateway
