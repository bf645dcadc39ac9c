// Backend pools at run time: an immutable snapshot of the configuration read
// lock-free by the request path, plus per-backend and per-pool atomics that
// live as long as the Balancer (kept across reloads by name).
#include "pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "gantry/core/metrics.h"
#include "health_check.h"

namespace gantry::gateway {

using internal::BackendState;
using internal::PoolState;

namespace {

constexpr std::string_view kPrimaryUnavailable = "primary_unavailable";
constexpr std::string_view kPrimarySaturated = "primary_saturated";
constexpr std::string_view kNoBackendAvailable = "no_backend_available";
constexpr std::string_view kAllSaturated = "all_saturated";
constexpr uint64_t kMaxRolloutWeightSum = 1'000'000;

// FNV-1a, 64 bit, then a splitmix64 finish so that similar keys spread over
// the whole range: a stable hash for sticky rollouts (the same key lands on
// the same target in every process and after restarts).
uint64_t StableHash(std::string_view salt, std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : salt) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  h = (h ^ 0xff) * 0x100000001b3ull;
  for (char c : key) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

std::string Address(const BackendConfig& b) { return fmt::format("{}:{}", b.host, b.port); }

// A few indexes without a heap allocation in the common case.
class SmallList {
 public:
  void push_back(uint32_t v) {
    if (n_ < kInline) {
      inline_[n_++] = v;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_, inline_ + kInline);
    heap_.push_back(v);
    ++n_;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  uint32_t operator[](size_t i) const { return n_ <= kInline ? inline_[i] : heap_[i]; }
  void clear() {
    n_ = 0;
    heap_.clear();
  }

 private:
  static constexpr size_t kInline = 32;
  uint32_t inline_[kInline];
  std::vector<uint32_t> heap_;
  size_t n_ = 0;
};

}  // namespace

struct PoolRt {
  PoolConfig cfg;
  PoolState* state = nullptr;
  std::vector<uint32_t> members;              // distinct backends of all tiers
  std::vector<std::string_view> tier_models;  // interned
};

struct RolloutRt {
  RolloutConfig cfg;
  std::vector<uint32_t> weights;  // current, per target
  uint64_t total = 0;
};

struct Snapshot {
  std::string zone;
  std::vector<BackendConfig> backends;
  std::vector<BackendState*> states;  // per backend
  // The outlier settings that govern each backend's multiplier decay (its
  // first pool with outlier detection), for status.
  std::vector<std::chrono::milliseconds> decay_base;
  std::vector<PoolRt> pools;
  std::vector<RolloutRt> rollouts;
};

struct RolloutState {
  std::vector<std::pair<std::string, uint32_t>> configured, current, previous;
  bool has_previous = false;
  uint64_t changes = 0;
};

// Keeps the metrics collect hook from reaching a destroyed Balancer.
struct MetricsLink {
  std::mutex mu;
  Balancer* balancer = nullptr;
};

uint64_t NextBalancerId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

struct Balancer::Impl {
  Impl(const Clock& c, uint64_t seed) : clock(c), rng(seed) {}

  uint64_t Random() {
    // splitmix64 over an atomic counter: lock-free, thread-safe and
    // deterministic for a given seed in single-threaded tests.
    uint64_t z =
        rng.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed) + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Random()) * n) >> 64);
  }

  // The current snapshot, for admin paths (a short lock).
  std::shared_ptr<const Snapshot> Load() const {
    std::lock_guard<std::mutex> lock(snap_mu);
    return snap;
  }
  void Store(std::shared_ptr<const Snapshot> s) {
    std::lock_guard<std::mutex> lock(snap_mu);
    snap = std::move(s);
    generation.fetch_add(1, std::memory_order_release);
  }
  // The hot path's snapshot: each thread keeps the last one it saw and only
  // takes the lock (and touches the shared count) when a Configure or admin
  // change published a new generation, so a request costs one atomic load.
  // The reference stays valid until this thread's next Hot() call.
  const Snapshot& Hot() const {
    struct Cache {
      uint64_t owner = 0;
      uint64_t generation = 0;
      std::shared_ptr<const Snapshot> snap;
    };
    thread_local Cache cache;
    uint64_t g = generation.load(std::memory_order_acquire);
    if (cache.owner != id || cache.generation != g || !cache.snap) {
      std::lock_guard<std::mutex> lock(snap_mu);
      cache.owner = id;
      cache.generation = generation.load(std::memory_order_relaxed);
      cache.snap = snap;
    }
    return *cache.snap;
  }

  static bool Ejected(const BackendState& s, int64_t now) {
    return s.ejected_until.load(std::memory_order_relaxed) > now;
  }
  static bool Up(const BackendState& s, int64_t now) {
    return !s.draining.load(std::memory_order_relaxed) && !Ejected(s, now) &&
           s.healthy.load(std::memory_order_relaxed);
  }

  // The multiplier after lazy decay (one per `base` un-ejected), unchanged state.
  static uint32_t DecayedTimes(const BackendState& s, std::chrono::milliseconds base, int64_t now,
                               int64_t* new_decay_from) {
    uint32_t times = s.times_ejected.load();
    int64_t from = s.decay_from.load();
    if (new_decay_from) *new_decay_from = from;
    if (times == 0 || Ejected(s, now) || now <= from) return times;
    int64_t base_ns = std::chrono::nanoseconds(base).count();
    if (base_ns <= 0) return 0;
    int64_t steps = (now - from) / base_ns;
    if (steps <= 0) return times;
    if (new_decay_from) *new_decay_from = from + steps * base_ns;
    return steps >= times ? 0 : times - static_cast<uint32_t>(steps);
  }

  const PoolRt* ResolvePool(const Snapshot& s, const Pick& p) const {
    if (p.pool_state != nullptr) {
      if (p.pool < s.pools.size() && s.pools[p.pool].state == p.pool_state) return &s.pools[p.pool];
      for (const PoolRt& pr : s.pools) {
        if (pr.state == p.pool_state) return &pr;
      }
      return nullptr;  // the pool went away in a reload
    }
    return p.pool < s.pools.size() ? &s.pools[p.pool] : nullptr;
  }

  void MaybeEject(const Snapshot& s, const PoolRt& pool, BackendState& b, int64_t now) {
    const OutlierConfig& o = pool.cfg.outlier;
    std::lock_guard<std::mutex> lock(eject_mu);  // rare path: only at a streak threshold
    b.consecutive_5xx.store(0);
    b.consecutive_gateway_errors.store(0);
    if (Ejected(b, now)) return;
    size_t ejected = 0;
    for (uint32_t m : pool.members) {
      if (Ejected(*s.states[m], now)) ++ejected;
    }
    size_t allowed = std::max<size_t>(1, pool.members.size() * o.max_ejection_percent / 100);
    if (ejected >= allowed) return;
    int64_t decay_from = 0;
    uint32_t times = DecayedTimes(b, o.base_ejection, now, &decay_from) + 1;
    auto dur = std::min<std::chrono::milliseconds>(o.base_ejection * times, o.max_ejection);
    int64_t until = now + std::chrono::nanoseconds(dur).count();
    b.times_ejected.store(times);
    b.decay_from.store(until);
    b.ejected_until.store(until);
    b.ejections.fetch_add(1);
    if (metrics::Counter* c = b.ejections_metric.load(std::memory_order_relaxed)) c->Inc();
  }

  // A passing health check ends an ejection (Envoy).
  void Uneject(BackendState& b, int64_t now) {
    std::lock_guard<std::mutex> lock(eject_mu);
    if (Ejected(b, now)) {
      b.ejected_until.store(0);
      b.decay_from.store(now);
    }
    b.consecutive_5xx.store(0);
    b.consecutive_gateway_errors.store(0);
  }

  void OnHealth(const internal::HealthTarget& t, bool ok, const std::string& error) {
    BackendState& b = *t.state;
    int64_t now = clock.Now().count();
    if (ok) {
      b.health_fail_streak.store(0);
      uint32_t streak = b.health_ok_streak.fetch_add(1) + 1;
      // A backend added at run time waited unhealthy for its first check
      // only; it was never seen failing.
      bool first = b.first_check.exchange(false);
      if (!b.healthy.load() &&
          (first || streak >= std::max<uint32_t>(1, t.cfg.healthy_threshold))) {
        b.healthy.store(true);
      }
      if (b.healthy.load()) Uneject(b, now);
      return;
    }
    b.health_ok_streak.store(0);
    uint32_t streak = b.health_fail_streak.fetch_add(1) + 1;
    if (b.healthy.load() && streak >= std::max<uint32_t>(1, t.cfg.unhealthy_threshold)) {
      b.healthy.store(false);
    }
    std::lock_guard<std::mutex> lock(b.mu);
    b.last_health_error = error;
  }

  BackendStatus StatusOf(const Snapshot& s, size_t i, int64_t now) const {
    const BackendState& b = *s.states[i];
    BackendStatus st;
    st.name = b.name;
    st.zone = s.backends[i].zone;
    st.address = b.address;
    st.healthy = b.healthy.load();
    st.draining = b.draining.load();
    int64_t until = b.ejected_until.load();
    st.ejected = until > now;
    if (st.ejected) st.ejected_for_ms = (until - now + 999'999) / 1'000'000;
    st.times_ejected = DecayedTimes(b, s.decay_base[i], now, nullptr);
    st.in_flight = b.in_flight.load();
    st.requests = b.requests.load();
    st.failures = b.failures.load();
    st.ejections = b.ejections.load();
    std::lock_guard<std::mutex> lock(b.mu);
    st.last_health_error = b.last_health_error;
    return st;
  }

  // Under `mu`: the snapshot with the rollouts' current weights.
  void FillRolloutWeights(Snapshot& s) {
    for (RolloutRt& r : s.rollouts) {
      const RolloutState& rs = rollout_states[r.cfg.name];
      r.weights.assign(r.cfg.targets.size(), 0);
      r.total = 0;
      for (size_t t = 0; t < r.cfg.targets.size(); ++t) {
        const std::string& pool = s.pools[r.cfg.targets[t].pool].cfg.name;
        for (const auto& [name, w] : rs.current) {
          if (name == pool) r.weights[t] = w;
        }
        r.total += r.weights[t];
      }
    }
  }

  // Under `mu`.
  void RegisterMetrics(const Snapshot& s) {
    if (registry == nullptr) return;
    for (size_t i = 0; i < s.states.size(); ++i) {
      BackendState& b = *s.states[i];
      metrics::Labels l{{"backend", b.name}};
      metrics::Labels lz{{"backend", b.name}, {"zone", s.backends[i].zone}};
      if (b.up_gauge == nullptr) {
        auto up = registry->GetGauge("gantry_gateway_backend_up",
                                     "1 when the backend may take requests (not draining, "
                                     "ejected or unhealthy)",
                                     lz);
        if (up.ok()) b.up_gauge = *up;
      }
      if (b.ejected_gauge == nullptr) {
        auto g = registry->GetGauge("gantry_gateway_backend_ejected",
                                    "1 while outlier detection has ejected the backend", l);
        if (g.ok()) b.ejected_gauge = *g;
      }
      if (b.in_flight_gauge == nullptr) {
        auto g = registry->GetGauge("gantry_gateway_backend_in_flight",
                                    "Requests in flight to the backend", l);
        if (g.ok()) b.in_flight_gauge = *g;
      }
      if (b.draining_gauge == nullptr) {
        auto g = registry->GetGauge("gantry_gateway_backend_draining",
                                    "1 while the backend is drained by the admin API", l);
        if (g.ok()) b.draining_gauge = *g;
      }
      if (b.ejections_metric.load() == nullptr) {
        auto c = registry->GetCounter("gantry_gateway_backend_ejections_total",
                                      "Outlier ejections of the backend", l);
        if (c.ok()) b.ejections_metric.store(*c);
      }
    }
    for (const PoolRt& p : s.pools) {
      PoolState& ps = *p.state;
      auto counter = [&](std::atomic<metrics::Counter*>& slot, std::string_view name,
                         std::string_view help, const metrics::Labels& labels) {
        if (slot.load() != nullptr) return;
        auto c = registry->GetCounter(name, help, labels);
        if (c.ok()) slot.store(*c);
      };
      constexpr std::string_view kShedHelp =
          "Requests shed with 503 because no backend could serve";
      constexpr std::string_view kDegHelp = "Requests served by a fallback tier";
      counter(ps.shed_no_backend, "gantry_gateway_shed_total", kShedHelp,
              {{"pool", ps.name}, {"reason", std::string(kNoBackendAvailable)}});
      counter(ps.shed_saturated, "gantry_gateway_shed_total", kShedHelp,
              {{"pool", ps.name}, {"reason", std::string(kAllSaturated)}});
      counter(ps.degraded_unavailable, "gantry_gateway_degraded_total", kDegHelp,
              {{"pool", ps.name}, {"reason", std::string(kPrimaryUnavailable)}});
      counter(ps.degraded_saturated, "gantry_gateway_degraded_total", kDegHelp,
              {{"pool", ps.name}, {"reason", std::string(kPrimarySaturated)}});
      counter(ps.retries_metric, "gantry_gateway_retries_total",
              "Retries admitted by the pool's retry budget", {{"pool", ps.name}});
      constexpr std::string_view kHeldHelp =
          "Requests held for a backend (scale_from_zero), by how they left the queue";
      counter(ps.held_released, "gantry_gateway_held_total", kHeldHelp,
              {{"pool", ps.name}, {"outcome", "released"}});
      counter(ps.held_timeout, "gantry_gateway_held_total", kHeldHelp,
              {{"pool", ps.name}, {"outcome", "timeout"}});
      counter(ps.held_overflow, "gantry_gateway_held_total", kHeldHelp,
              {{"pool", ps.name}, {"outcome", "overflow"}});
      auto gauge = [&](metrics::Gauge*& slot, std::string_view name, std::string_view help) {
        if (slot != nullptr) return;
        auto g = registry->GetGauge(name, help, {{"pool", ps.name}});
        if (g.ok()) slot = *g;
      };
      gauge(ps.in_flight_gauge, "gantry_gateway_pool_in_flight",
            "Requests in flight to the pool's backends");
      gauge(ps.pending_gauge, "gantry_gateway_pool_pending",
            "Requests waiting for a slot when the pool is saturated (max_pending)");
      gauge(ps.held_gauge, "gantry_gateway_pool_held",
            "Requests held until a backend is available (scale_from_zero)");
      gauge(ps.up_gauge, "gantry_gateway_pool_backends_up",
            "Backends of the pool that may take requests (not draining, ejected or unhealthy)");
    }
  }

  std::string_view Intern(const std::string& s) {
    if (s.empty()) return {};
    return *interned.insert(s).first;
  }

  const Clock& clock;
  std::atomic<uint64_t> rng;
  // Never reused, so a thread's cached snapshot cannot be taken for another
  // Balancer's at the same address.
  const uint64_t id = NextBalancerId();
  mutable std::mutex snap_mu;
  std::shared_ptr<const Snapshot> snap;  // guarded by snap_mu
  std::atomic<uint64_t> generation{0};   // bumped under snap_mu with each new snapshot

  mutable std::mutex mu;  // Configure, admin changes, metrics registration
  std::map<std::string, std::unique_ptr<BackendState>> backend_states;  // name + '\n' + address
  std::map<std::string, std::unique_ptr<PoolState>> pool_states;
  std::map<std::string, RolloutState> rollout_states;
  std::set<std::string> interned;  // tier models: Pick::model_rewrite outlives reloads
  metrics::Registry* registry = nullptr;
  std::shared_ptr<MetricsLink> link;
  std::unique_ptr<internal::HealthChecker> checker;

  std::mutex eject_mu;
};

// ---------------------------------------------------------------------------

Balancer::Balancer(const Clock& clock, uint64_t rng_seed)
    : impl_(std::make_unique<Impl>(clock, rng_seed != 0 ? rng_seed : std::random_device()())) {
  impl_->Store(std::make_shared<const Snapshot>());
}

Balancer::~Balancer() {
  std::unique_ptr<internal::HealthChecker> checker;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    checker = std::move(impl_->checker);
  }
  checker.reset();  // joins; no health callback runs after this
  if (impl_->link) {
    std::lock_guard<std::mutex> lock(impl_->link->mu);
    impl_->link->balancer = nullptr;
  }
}

void Balancer::Configure(const GatewayConfig& cfg) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  auto s = std::make_shared<Snapshot>();
  s->zone = cfg.zone;
  s->backends = cfg.backends;
  s->decay_base.assign(cfg.backends.size(), OutlierConfig().base_ejection);
  std::map<std::string, BackendState*> by_name;
  for (const auto& [key, st] : im.backend_states) by_name[st->name] = st.get();
  std::set<BackendState*> fresh;  // states made by this call
  for (const BackendConfig& b : cfg.backends) {
    std::string addr = Address(b);
    std::unique_ptr<BackendState>& slot = im.backend_states[b.name + "\n" + addr];
    if (!slot) {
      slot = std::make_unique<BackendState>();
      fresh.insert(slot.get());
      slot->name = b.name;
      slot->address = addr;
      // A drain mark is about the backend's name, not its address.
      auto old = by_name.find(b.name);
      if (old != by_name.end()) slot->draining.store(old->second->draining.load());
    }
    slot->zone = b.zone;
    s->states.push_back(slot.get());
  }
  std::vector<bool> decay_set(cfg.backends.size(), false);
  for (const PoolConfig& p : cfg.pools) {
    PoolRt pr;
    pr.cfg = p;
    std::unique_ptr<PoolState>& ps = im.pool_states[p.name];
    if (!ps) {
      ps = std::make_unique<PoolState>();
      ps->name = p.name;
    }
    pr.state = ps.get();
    std::set<uint32_t> seen;
    for (const TierConfig& t : p.tiers) {
      pr.tier_models.push_back(im.Intern(t.model));
      for (size_t b : t.backends) {
        if (b >= cfg.backends.size()) continue;  // the parser rejects these
        if (seen.insert(static_cast<uint32_t>(b)).second) {
          pr.members.push_back(static_cast<uint32_t>(b));
        }
        if (p.outlier.enabled && !decay_set[b]) {
          decay_set[b] = true;
          s->decay_base[b] = p.outlier.base_ejection;
        }
      }
    }
    s->pools.push_back(std::move(pr));
  }
  std::map<std::string, RolloutState> rollouts;
  for (const RolloutConfig& r : cfg.rollouts) {
    RolloutRt rr;
    rr.cfg = r;
    RolloutState st;
    for (const RolloutTarget& t : r.targets) {
      if (t.pool < cfg.pools.size()) st.configured.emplace_back(cfg.pools[t.pool].name, t.weight);
    }
    st.current = st.configured;
    auto old = im.rollout_states.find(r.name);
    if (old != im.rollout_states.end()) {
      auto names = [](const std::vector<std::pair<std::string, uint32_t>>& v) {
        std::set<std::string> out;
        for (const auto& [n, w] : v) out.insert(n);
        return out;
      };
      if (names(old->second.configured) == names(st.configured)) {
        st.current = old->second.current;
        st.previous = old->second.previous;
        st.has_previous = old->second.has_previous;
        st.changes = old->second.changes;
      }
    }
    rollouts[r.name] = std::move(st);
    s->rollouts.push_back(std::move(rr));
  }
  im.rollout_states = std::move(rollouts);
  im.FillRolloutWeights(*s);
  im.RegisterMetrics(*s);

  std::vector<internal::HealthTarget> targets;
  for (const PoolRt& p : s->pools) {
    if (!p.cfg.health.enabled || p.cfg.implicit) continue;
    for (uint32_t m : p.members) {
      // A backend added at run time takes no traffic before it passes a
      // check: a process that is still loading a model must not get any.
      if (cfg.backends[m].added_at_runtime && fresh.count(s->states[m]) != 0) {
        s->states[m]->healthy.store(false);
        s->states[m]->first_check.store(true);
      }
      internal::HealthTarget t;
      t.pool = p.cfg.name;
      t.backend = cfg.backends[m].name;
      t.state = s->states[m];
      t.host = cfg.backends[m].host;
      t.port = cfg.backends[m].port;
      t.host_header = cfg.backends[m].host_header;
      t.cfg = p.cfg.health;
      targets.push_back(std::move(t));
    }
  }
  // Backends that are no longer checked go back to healthy: nothing watches
  // them any more, and passive outlier detection still applies.
  std::set<BackendState*> checked;
  for (const auto& t : targets) checked.insert(t.state);
  for (BackendState* b : s->states) {
    if (checked.count(b) == 0 && !b->healthy.load()) {
      b->healthy.store(true);
      b->health_ok_streak.store(0);
      b->health_fail_streak.store(0);
    }
  }

  im.Store(std::move(s));

  if (targets.empty()) {
    im.checker.reset();  // joins the thread; its callbacks take no lock of ours
  } else {
    if (!im.checker) {
      Impl* ip = &im;
      im.checker = std::make_unique<internal::HealthChecker>(
          [ip](const internal::HealthTarget& t, bool ok, const std::string& err) {
            ip->OnHealth(t, ok, err);
          });
    }
    im.checker->Update(std::move(targets));
  }
}

Pick Balancer::Choose(const Target& target, const PickContext& ctx) {
  Impl& im = *impl_;
  const Snapshot* sp = &im.Hot();
  const Snapshot& s = *sp;
  Pick pick;
  size_t pool_index = target.index;
  if (target.kind == Target::Kind::kRollout) {
    if (target.index >= s.rollouts.size()) {
      pick.shed_reason = kNoBackendAvailable;
      pick.retry_after_s = 1;
      return pick;
    }
    const RolloutRt& r = s.rollouts[target.index];
    pick.rollout = target.index;
    if (r.total == 0 || r.cfg.targets.empty()) {
      pick.shed_reason = kNoBackendAvailable;
      pick.retry_after_s = 1;
      return pick;
    }
    std::string_view sticky;
    if (r.cfg.sticky == RolloutConfig::Sticky::kKey) sticky = ctx.caller;
    if (r.cfg.sticky == RolloutConfig::Sticky::kHeader) sticky = ctx.sticky_value;
    uint64_t x = sticky.empty() ? im.Below(r.total) : StableHash(r.cfg.name, sticky) % r.total;
    size_t t = 0;
    for (; t + 1 < r.weights.size(); ++t) {
      if (x < r.weights[t]) break;
      x -= r.weights[t];
    }
    pick.rollout_target = t;
    pool_index = r.cfg.targets[t].pool;
  }
  pick.pool = pool_index;
  if (pool_index >= s.pools.size()) {
    pick.shed_reason = kNoBackendAvailable;
    pick.retry_after_s = 1;
    return pick;
  }
  const PoolRt& pool = s.pools[pool_index];
  pick.pool_state = pool.state;
  pick.pool_name = pool.cfg.name;
  int64_t now = im.clock.Now().count();
  bool zone_pref = pool.cfg.zone_aware && !s.zone.empty();
  bool earlier_up = false;
  SmallList avail, narrowed;
  // A retry goes to another backend of the same tier when there is one, else
  // to a later tier (the first pass skips tiers whose every available backend
  // already failed this request: repeating the failed primary while a fallback
  // is up would turn a crashed primary into errors); only when no later tier
  // can serve does the second pass try a failed backend again.
  const bool retrying = ctx.exclude != nullptr && !ctx.exclude->empty();
  bool skipped_tried = false;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1 && !skipped_tried) break;
    earlier_up = false;
    for (size_t t = 0; t < pool.cfg.tiers.size(); ++t) {
      const TierConfig& tier = pool.cfg.tiers[t];
      avail.clear();
      bool tier_up = false;
      for (size_t b : tier.backends) {
        if (b >= s.states.size()) continue;
        const BackendState& st = *s.states[b];
        if (!Impl::Up(st, now)) continue;
        tier_up = true;
        uint32_t max = s.backends[b].max_concurrent;
        if (max != 0 && st.in_flight.load(std::memory_order_relaxed) >= static_cast<int64_t>(max)) {
          continue;
        }
        avail.push_back(static_cast<uint32_t>(b));
      }
      if (avail.empty()) {
        earlier_up = earlier_up || tier_up;
        continue;
      }
      if (retrying) {
        narrowed.clear();
        for (size_t i = 0; i < avail.size(); ++i) {
          if (std::find(ctx.exclude->begin(), ctx.exclude->end(), avail[i]) == ctx.exclude->end()) {
            narrowed.push_back(avail[i]);
          }
        }
        if (!narrowed.empty()) {
          std::swap(avail, narrowed);
        } else if (pass == 0 && t + 1 < pool.cfg.tiers.size()) {
          skipped_tried = true;  // failed for this request: not "up" for the degraded reason
          continue;
        }
      }
      if (zone_pref) {
        narrowed.clear();
        for (size_t i = 0; i < avail.size(); ++i) {
          if (s.backends[avail[i]].zone == s.zone) narrowed.push_back(avail[i]);
        }
        if (!narrowed.empty()) std::swap(avail, narrowed);
      }
      uint32_t chosen = avail[0];
      if (avail.size() > 1) {
        switch (pool.cfg.balance) {
          case Balance::kRoundRobin:
            chosen = avail[pool.state->rr.fetch_add(1, std::memory_order_relaxed) % avail.size()];
            break;
          case Balance::kWeighted: {
            uint64_t total = 0;
            for (size_t i = 0; i < avail.size(); ++i)
              total += std::max<uint32_t>(1, s.backends[avail[i]].weight);
            uint64_t x = im.Below(total);
            for (size_t i = 0; i < avail.size(); ++i) {
              uint64_t w = std::max<uint32_t>(1, s.backends[avail[i]].weight);
              if (x < w) {
                chosen = avail[i];
                break;
              }
              x -= w;
            }
            break;
          }
          case Balance::kLeastRequest: {
            // Power of two choices: two distinct random candidates, the one with
            // fewer requests in flight per unit of weight wins.
            size_t i = im.Below(avail.size());
            size_t j = im.Below(avail.size() - 1);
            if (j >= i) ++j;
            uint32_t a = avail[i], b = avail[j];
            int64_t fa = s.states[a]->in_flight.load(std::memory_order_relaxed);
            int64_t fb = s.states[b]->in_flight.load(std::memory_order_relaxed);
            uint64_t wa = std::max<uint32_t>(1, s.backends[a].weight);
            uint64_t wb = std::max<uint32_t>(1, s.backends[b].weight);
            // fa/wa <= fb/wb without division; ties go to the first (random) one.
            chosen = static_cast<uint64_t>(std::max<int64_t>(0, fa)) * wb <=
                             static_cast<uint64_t>(std::max<int64_t>(0, fb)) * wa
                         ? a
                         : b;
            break;
          }
        }
      }
      pick.backend = chosen;
      pick.state = s.states[chosen];
      pick.backend_name = s.backends[chosen].name;
      pick.tier = t;
      pick.model_rewrite = pool.tier_models[t];
      if (t > 0) {
        pick.degraded = true;
        pick.reason = earlier_up ? kPrimarySaturated : kPrimaryUnavailable;
        std::atomic<metrics::Counter*>& slot =
            earlier_up ? pool.state->degraded_saturated : pool.state->degraded_unavailable;
        if (metrics::Counter* c = slot.load(std::memory_order_relaxed)) c->Inc();
        if (!earlier_up && pool.cfg.scale_from_zero.enabled) {
          pool.state->fallback_served.fetch_add(1, std::memory_order_relaxed);
        }
      }
      return pick;
    }
  }
  // Nothing can serve: shed.
  bool any_up = earlier_up;
  int64_t earliest_return = 0;
  for (uint32_t m : pool.members) {
    int64_t until = s.states[m]->ejected_until.load(std::memory_order_relaxed);
    if (until > now && (earliest_return == 0 || until < earliest_return)) earliest_return = until;
  }
  pick.shed_reason = any_up ? kAllSaturated : kNoBackendAvailable;
  pick.retry_after_s = pool.cfg.shed_retry_after_s;
  if (earliest_return != 0) {
    int64_t secs = (earliest_return - now + 999'999'999) / 1'000'000'000;
    uint32_t ra = static_cast<uint32_t>(std::max<int64_t>(1, secs));
    if (ra < pick.retry_after_s || pick.retry_after_s == 0) pick.retry_after_s = ra;
  }
  std::atomic<metrics::Counter*>& slot =
      any_up ? pool.state->shed_saturated : pool.state->shed_no_backend;
  if (metrics::Counter* c = slot.load(std::memory_order_relaxed)) c->Inc();
  return pick;
}

// --- InFlight ---

Balancer::InFlight::InFlight(InFlight&& o) noexcept : counter_(o.counter_), counter2_(o.counter2_) {
  o.counter_ = nullptr;
  o.counter2_ = nullptr;
}

Balancer::InFlight& Balancer::InFlight::operator=(InFlight&& o) noexcept {
  if (this != &o) {
    Release();
    counter_ = o.counter_;
    counter2_ = o.counter2_;
    o.counter_ = nullptr;
    o.counter2_ = nullptr;
  }
  return *this;
}

Balancer::InFlight::~InFlight() { Release(); }

void Balancer::InFlight::Release() {
  if (counter_ != nullptr) counter_->fetch_sub(1, std::memory_order_relaxed);
  if (counter2_ != nullptr) counter2_->fetch_sub(1, std::memory_order_relaxed);
  counter_ = nullptr;
  counter2_ = nullptr;
}

Balancer::InFlight Balancer::Begin(const Pick& p) {
  InFlight g;
  BackendState* b = p.state;
  PoolState* ps = p.pool_state;
  if (b == nullptr || ps == nullptr) {
    const Snapshot* s = &impl_->Hot();
    if (b == nullptr && p.backend < s->states.size()) b = s->states[p.backend];
    if (ps == nullptr && p.pool < s->pools.size()) ps = s->pools[p.pool].state;
  }
  if (b != nullptr) {
    b->in_flight.fetch_add(1, std::memory_order_relaxed);
    b->requests.fetch_add(1, std::memory_order_relaxed);
    g.counter_ = &b->in_flight;
  }
  if (ps != nullptr) {
    ps->active.fetch_add(1, std::memory_order_relaxed);
    g.counter2_ = &ps->active;
  }
  return g;
}

void Balancer::Report(const Pick& p, Outcome outcome) {
  Impl& im = *impl_;
  const Snapshot* sp = &im.Hot();
  const Snapshot& s = *sp;
  BackendState* b = p.state;
  if (b == nullptr && p.backend < s.states.size()) b = s.states[p.backend];
  if (b == nullptr) return;
  if (outcome == Outcome::kOk) {
    // Plain stores only when needed: most reports are OKs on a clean streak.
    if (b->consecutive_5xx.load(std::memory_order_relaxed) != 0) b->consecutive_5xx.store(0);
    if (b->consecutive_gateway_errors.load(std::memory_order_relaxed) != 0) {
      b->consecutive_gateway_errors.store(0);
    }
    return;
  }
  b->failures.fetch_add(1, std::memory_order_relaxed);
  const PoolRt* pool = im.ResolvePool(s, p);
  if (pool == nullptr || !pool->cfg.outlier.enabled || pool->cfg.implicit) return;
  const OutlierConfig& o = pool->cfg.outlier;
  // Envoy: every 5xx (gateway errors included) counts toward consecutive_5xx;
  // gateway errors and local failures also count toward their own streak.
  uint32_t c5 = b->consecutive_5xx.fetch_add(1) + 1;
  uint32_t cg = 0;
  if (outcome != Outcome::k5xx) cg = b->consecutive_gateway_errors.fetch_add(1) + 1;
  bool trip = (o.consecutive_5xx > 0 && c5 >= o.consecutive_5xx) ||
              (o.consecutive_gateway_errors > 0 && cg >= o.consecutive_gateway_errors);
  if (!trip) return;
  // The ejection counts against this pool's max_ejection_percent; a backend
  // picked by index only (no state) is looked up in the same snapshot.
  im.MaybeEject(s, *pool, *b, im.clock.Now().count());
}

std::optional<Balancer::InFlight> Balancer::TryBeginRetry(const Pick& p) {
  Impl& im = *impl_;
  const Snapshot* sp = &im.Hot();
  const PoolRt* pool = im.ResolvePool(*sp, p);
  if (pool == nullptr) return std::nullopt;
  PoolState& ps = *pool->state;
  const RetryConfig& r = pool->cfg.retry;
  double active = static_cast<double>(std::max<int64_t>(0, ps.active.load()));
  int64_t limit = std::max<int64_t>(r.min_retry_concurrency,
                                    static_cast<int64_t>(active * r.budget_percent / 100.0));
  int64_t now_retries = ps.retries.fetch_add(1) + 1;
  if (now_retries > limit) {
    ps.retries.fetch_sub(1);
    return std::nullopt;
  }
  if (metrics::Counter* c = ps.retries_metric.load(std::memory_order_relaxed)) c->Inc();
  InFlight g;
  g.counter_ = &ps.retries;
  return g;
}

std::chrono::milliseconds Balancer::Backoff(size_t pool, uint32_t n) {
  Impl& im = *impl_;
  const Snapshot* sp = &im.Hot();
  RetryConfig r;
  if (pool < sp->pools.size()) r = sp->pools[pool].cfg.retry;
  int64_t base = std::max<int64_t>(0, r.backoff_base.count());
  int64_t max = std::max<int64_t>(0, r.backoff_max.count());
  uint32_t shift = n == 0 ? 0 : std::min<uint32_t>(n - 1, 40);
  int64_t cap = base;
  for (uint32_t i = 0; i < shift && cap < max; ++i) cap *= 2;
  cap = std::min(cap, max);
  if (cap <= 0) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(static_cast<int64_t>(im.Below(static_cast<uint64_t>(cap))));
}

std::optional<Balancer::InFlight> Balancer::TryBeginPending(size_t pool) {
  Impl& im = *impl_;
  const Snapshot* sp = &im.Hot();
  if (pool >= sp->pools.size()) return std::nullopt;
  PoolState& ps = *sp->pools[pool].state;
  int64_t max = sp->pools[pool].cfg.max_pending;
  int64_t now_pending = ps.pending.fetch_add(1) + 1;
  if (now_pending > max) {
    ps.pending.fetch_sub(1);
    return std::nullopt;
  }
  InFlight g;
  g.counter_ = &ps.pending;
  return g;
}

// --- scale from zero ---

Balancer::Held::Held(Held&& o) noexcept : pool_(o.pool_), ticket_(o.ticket_) { o.pool_ = nullptr; }

Balancer::Held& Balancer::Held::operator=(Held&& o) noexcept {
  if (this != &o) {
    Leave();
    pool_ = o.pool_;
    ticket_ = o.ticket_;
    o.pool_ = nullptr;
  }
  return *this;
}

// Destroyed while queued: the request's coroutine went with its worker, and
// nothing is counted.
Balancer::Held::~Held() { Leave(); }

void Balancer::Held::Leave() {
  if (pool_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_->hold_mu);
  auto& q = pool_->held_queue;
  auto it = std::find(q.begin(), q.end(), ticket_);
  if (it != q.end()) q.erase(it);
  pool_->held.store(static_cast<int64_t>(q.size()));
}

void Balancer::Held::End(HoldOutcome outcome) {
  if (pool_ == nullptr) return;
  Leave();
  std::atomic<metrics::Counter*>& slot =
      outcome == HoldOutcome::kReleased ? pool_->held_released : pool_->held_timeout;
  if (metrics::Counter* c = slot.load(std::memory_order_relaxed)) c->Inc();
  pool_ = nullptr;
}

bool Balancer::Holding(const Pick& p) const {
  return p.pool_state != nullptr && p.pool_state->held.load(std::memory_order_relaxed) > 0;
}

std::optional<Balancer::Held> Balancer::TryHold(const Pick& p) {
  Impl& im = *impl_;
  const PoolRt* pool = im.ResolvePool(im.Hot(), p);
  if (pool == nullptr || !pool->cfg.scale_from_zero.enabled) return std::nullopt;
  PoolState& ps = *pool->state;
  {
    std::lock_guard<std::mutex> lock(ps.hold_mu);
    if (ps.held_queue.size() < pool->cfg.scale_from_zero.hold) {
      Held h;
      h.pool_ = &ps;
      h.ticket_ = ps.next_ticket++;
      ps.held_queue.push_back(h.ticket_);
      ps.held.store(static_cast<int64_t>(ps.held_queue.size()));
      return h;
    }
  }
  if (metrics::Counter* c = ps.held_overflow.load(std::memory_order_relaxed)) c->Inc();
  return std::nullopt;
}

bool Balancer::FirstInLine(const Held& h) const {
  if (h.pool_ == nullptr) return true;
  std::lock_guard<std::mutex> lock(h.pool_->hold_mu);
  return h.pool_->held_queue.empty() || h.pool_->held_queue.front() == h.ticket_;
}

std::vector<Balancer::WakeCall> Balancer::DueWakes(std::chrono::milliseconds every) {
  Impl& im = *impl_;
  std::shared_ptr<const Snapshot> s = im.Load();
  int64_t now = im.clock.Now().count();
  int64_t every_ns = std::chrono::nanoseconds(every).count();
  std::vector<WakeCall> out;
  for (const PoolRt& p : s->pools) {
    const ScaleFromZeroConfig& z = p.cfg.scale_from_zero;
    if (!z.enabled || z.wake.empty()) continue;
    int64_t held = p.state->held.load();
    int64_t fallback = p.state->fallback_served.load();
    if (held <= 0 && fallback <= 0) continue;
    int64_t last = p.state->last_wake_ns.load();
    if (last != PoolState::kNeverWoken && now - last < every_ns) continue;
    if (!p.state->last_wake_ns.compare_exchange_strong(last, now)) continue;
    p.state->fallback_served.fetch_sub(fallback);
    out.push_back(WakeCall{p.cfg.name, z.wake, held, fallback});
  }
  return out;
}

// --- administration ---

namespace {

std::string KnownBackends(const Snapshot& s) {
  std::string out;
  for (const BackendConfig& b : s.backends) out += (out.empty() ? "" : ", ") + b.name;
  return out.empty() ? "none" : out;
}

std::string KnownRollouts(const Snapshot& s) {
  std::string out;
  for (const RolloutRt& r : s.rollouts) out += (out.empty() ? "" : ", ") + r.cfg.name;
  return out.empty() ? "none" : out;
}

std::string StickyName(const RolloutConfig& r) {
  switch (r.sticky) {
    case RolloutConfig::Sticky::kKey:
      return "key";
    case RolloutConfig::Sticky::kHeader:
      return "header:" + r.sticky_header;
    case RolloutConfig::Sticky::kNone:
      break;
  }
  return "none";
}

}  // namespace

Status Balancer::SetDraining(std::string_view backend, bool draining) {
  std::shared_ptr<const Snapshot> s = impl_->Load();
  for (BackendState* b : s->states) {
    if (b->name == backend) {
      b->draining.store(draining);
      return Status::Ok();
    }
  }
  return NotFound(fmt::format("no backend '{}' (backends: {})", backend, KnownBackends(*s)));
}

Result<BackendStatus> Balancer::Backend(std::string_view backend) const {
  std::shared_ptr<const Snapshot> s = impl_->Load();
  int64_t now = impl_->clock.Now().count();
  for (size_t i = 0; i < s->states.size(); ++i) {
    if (s->states[i]->name == backend) return impl_->StatusOf(*s, i, now);
  }
  return NotFound(fmt::format("no backend '{}' (backends: {})", backend, KnownBackends(*s)));
}

std::vector<BackendStatus> Balancer::Backends() const {
  std::shared_ptr<const Snapshot> s = impl_->Load();
  int64_t now = impl_->clock.Now().count();
  std::vector<BackendStatus> out;
  for (size_t i = 0; i < s->states.size(); ++i) out.push_back(impl_->StatusOf(*s, i, now));
  return out;
}

std::vector<PoolStatus> Balancer::Pools() const {
  std::shared_ptr<const Snapshot> s = impl_->Load();
  int64_t now = impl_->clock.Now().count();
  std::vector<PoolStatus> out;
  for (const PoolRt& p : s->pools) {
    if (p.cfg.implicit) continue;
    PoolStatus st;
    st.name = p.cfg.name;
    st.implicit = p.cfg.implicit;
    st.scale_from_zero = p.cfg.scale_from_zero;
    for (uint32_t m : p.members) {
      st.backends.push_back(s->backends[m].name);
      if (s->backends[m].added_at_runtime) st.added.push_back(s->backends[m].name);
      if (Impl::Up(*s->states[m], now)) ++st.up;
    }
    st.in_flight = p.state->active.load();
    st.pending = p.state->pending.load();
    st.held = p.state->held.load();
    out.push_back(std::move(st));
  }
  return out;
}

Status Balancer::SetRolloutWeights(std::string_view rollout,
                                   const std::vector<std::pair<std::string, uint32_t>>& weights) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  std::shared_ptr<const Snapshot> old = im.Load();
  auto it = im.rollout_states.find(std::string(rollout));
  if (it == im.rollout_states.end()) {
    return NotFound(fmt::format("no rollout '{}' (rollouts: {})", rollout, KnownRollouts(*old)));
  }
  RolloutState& rs = it->second;
  std::string pools;
  for (const auto& [name, w] : rs.configured) pools += (pools.empty() ? "" : ", ") + name;
  std::map<std::string, uint32_t> given;
  uint64_t sum = 0;
  for (const auto& [name, w] : weights) {
    // Not captured as `name`: clang before 16 cannot capture structured bindings.
    const std::string& pool_name = name;
    bool known = std::any_of(rs.configured.begin(), rs.configured.end(),
                             [&](const auto& c) { return c.first == pool_name; });
    if (!known) {
      return InvalidArgument(
          fmt::format("rollout '{}' has no pool '{}' (its pools: {})", rollout, name, pools));
    }
    if (!given.emplace(name, w).second) {
      return InvalidArgument(fmt::format(
          "rollout '{}': pool '{}' is given twice; give each pool once", rollout, name));
    }
    sum += w;
  }
  if (sum == 0) {
    return InvalidArgument(fmt::format(
        "rollout '{}': the weights are all zero; give at least one of {} a weight above 0", rollout,
        pools));
  }
  if (sum > kMaxRolloutWeightSum) {
    return InvalidArgument(
        fmt::format("rollout '{}': the weights sum to {}, above {}; scale them down", rollout, sum,
                    kMaxRolloutWeightSum));
  }
  rs.previous = rs.current;
  rs.has_previous = true;
  for (auto& [name, w] : rs.current) {
    auto g = given.find(name);
    w = g == given.end() ? 0 : g->second;
  }
  ++rs.changes;
  auto s = std::make_shared<Snapshot>(*old);
  im.FillRolloutWeights(*s);
  im.Store(std::move(s));
  return Status::Ok();
}

Status Balancer::RollbackRollout(std::string_view rollout) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  std::shared_ptr<const Snapshot> old = im.Load();
  auto it = im.rollout_states.find(std::string(rollout));
  if (it == im.rollout_states.end()) {
    return NotFound(fmt::format("no rollout '{}' (rollouts: {})", rollout, KnownRollouts(*old)));
  }
  RolloutState& rs = it->second;
  if (!rs.has_previous) {
    return FailedPrecondition(fmt::format(
        "rollout '{}' has no earlier weights to go back to (its weights were never changed)",
        rollout));
  }
  std::swap(rs.current, rs.previous);
  ++rs.changes;
  auto s = std::make_shared<Snapshot>(*old);
  im.FillRolloutWeights(*s);
  im.Store(std::move(s));
  return Status::Ok();
}

Result<RolloutStatus> Balancer::Rollout(std::string_view rollout) const {
  for (RolloutStatus& r : Rollouts()) {
    if (r.name == rollout) return std::move(r);
  }
  return NotFound(
      fmt::format("no rollout '{}' (rollouts: {})", rollout, KnownRollouts(*impl_->Load())));
}

std::vector<RolloutStatus> Balancer::Rollouts() const {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  std::shared_ptr<const Snapshot> s = im.Load();
  std::vector<RolloutStatus> out;
  for (const RolloutRt& r : s->rollouts) {
    const RolloutState& rs = im.rollout_states[r.cfg.name];
    RolloutStatus st;
    st.name = r.cfg.name;
    st.weights = rs.current;
    if (rs.has_previous) st.previous = rs.previous;
    st.configured = rs.configured;
    st.sticky = StickyName(r.cfg);
    st.changes = rs.changes;
    out.push_back(std::move(st));
  }
  return out;
}

void Balancer::SetHealthForTest(std::string_view backend, bool healthy) {
  std::shared_ptr<const Snapshot> s = impl_->Load();
  int64_t now = impl_->clock.Now().count();
  for (BackendState* b : s->states) {
    if (b->name != backend) continue;
    b->healthy.store(healthy);
    if (healthy) impl_->Uneject(*b, now);
  }
}

// --- metrics ---

void Balancer::AttachMetrics(metrics::Registry* registry) {
  Impl& im = *impl_;
  bool add_hook = false;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    if (registry == nullptr || im.registry != nullptr) return;
    im.registry = registry;
    im.RegisterMetrics(*im.Load());
    im.link = std::make_shared<MetricsLink>();
    im.link->balancer = this;
    add_hook = true;
  }
  if (add_hook) {
    std::weak_ptr<MetricsLink> weak = im.link;
    registry->AddCollectHook([weak] {
      std::shared_ptr<MetricsLink> link = weak.lock();
      if (!link) return;
      std::lock_guard<std::mutex> lock(link->mu);
      if (link->balancer != nullptr) link->balancer->RefreshMetrics();
    });
  }
}

void Balancer::RefreshMetrics() {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.mu);
  std::shared_ptr<const Snapshot> s = im.Load();
  int64_t now = im.clock.Now().count();
  std::set<const BackendState*> current(s->states.begin(), s->states.end());
  for (const auto& [key, b] : im.backend_states) {
    if (b->up_gauge == nullptr) continue;
    bool configured = current.count(b.get()) != 0;
    b->up_gauge->Set(configured && Impl::Up(*b, now) ? 1 : 0);
    b->ejected_gauge->Set(Impl::Ejected(*b, now) ? 1 : 0);
    b->in_flight_gauge->Set(static_cast<double>(b->in_flight.load()));
    b->draining_gauge->Set(b->draining.load() ? 1 : 0);
  }
  std::map<const PoolState*, const PoolRt*> pools;
  for (const PoolRt& p : s->pools) pools[p.state] = &p;
  for (const auto& [name, ps] : im.pool_states) {
    if (ps->in_flight_gauge == nullptr) continue;
    auto it = pools.find(ps.get());
    int64_t up = 0;
    if (it != pools.end()) {
      for (uint32_t m : it->second->members) {
        if (Impl::Up(*s->states[m], now)) ++up;
      }
    }
    ps->in_flight_gauge->Set(static_cast<double>(ps->active.load()));
    ps->pending_gauge->Set(static_cast<double>(ps->pending.load()));
    ps->held_gauge->Set(static_cast<double>(ps->held.load()));
    ps->up_gauge->Set(static_cast<double>(up));
  }
}

// --- text ---

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk:
      return "ok";
    case Outcome::k5xx:
      return "5xx";
    case Outcome::kGatewayError:
      return "gateway_error";
    case Outcome::kConnectFailure:
      return "connect_failure";
    case Outcome::kReset:
      return "reset";
    case Outcome::kTimeout:
      return "timeout";
  }
  return "unknown";
}

Json BackendStatusJson(const BackendStatus& s) {
  Json j;
  j["name"] = s.name;
  j["zone"] = s.zone;
  j["address"] = s.address;
  j["healthy"] = s.healthy;
  j["draining"] = s.draining;
  j["ejected"] = s.ejected;
  j["ejected_for_ms"] = s.ejected_for_ms;
  j["times_ejected"] = s.times_ejected;
  j["in_flight"] = s.in_flight;
  j["requests"] = s.requests;
  j["failures"] = s.failures;
  j["ejections"] = s.ejections;
  j["last_health_error"] = s.last_health_error;
  return j;
}

Json PoolStatusJson(const PoolStatus& s) {
  Json j;
  j["name"] = s.name;
  j["backends"] = s.backends;
  j["added"] = s.added;
  j["up"] = s.up;
  j["in_flight"] = s.in_flight;
  j["pending"] = s.pending;
  j["held"] = s.held;
  if (s.scale_from_zero.enabled) {
    const ScaleFromZeroConfig& z = s.scale_from_zero;
    Json sz;
    sz["hold"] = z.hold;
    sz["hold_timeout_ms"] = z.hold_timeout.count();
    sz["wake"] = z.wake;
    sz["retry_after_s"] = z.retry_after_s;
    j["scale_from_zero"] = sz;
  } else {
    j["scale_from_zero"] = nullptr;
  }
  return j;
}

Json RolloutStatusJson(const RolloutStatus& s) {
  auto weights = [](const std::vector<std::pair<std::string, uint32_t>>& v) {
    Json o = Json::object();
    for (const auto& [name, w] : v) o[name] = w;
    return o;
  };
  Json j;
  j["name"] = s.name;
  j["sticky"] = s.sticky;
  j["weights"] = weights(s.weights);
  j["previous"] = weights(s.previous);
  j["configured"] = weights(s.configured);
  j["changes"] = s.changes;
  return j;
}

}  // namespace gantry::gateway
