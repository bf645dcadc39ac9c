// The capacity simulator behind autoscale_sim and bench/autoscale.sh (model
// in simulate.h).
#include "gantry/autoscale/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numbers>
#include <string>

#include "decide_internal.h"
#include "gantry/core/json.h"
#include "gantry/core/text.h"

namespace gantry::autoscale {
namespace {

using std::chrono::nanoseconds;

// splitmix64: a tiny generator whose sequence is the same everywhere
// (std::poisson_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Knuth's method, in chunks of 500 so that exp(-lambda) never underflows.
  int64_t Poisson(double lambda) {
    int64_t n = 0;
    while (lambda > 500) {
      n += Poisson(500);
      lambda -= 500;
    }
    const double l = std::exp(-lambda);
    double p = 1;
    int64_t k = -1;
    do {
      ++k;
      p *= Uniform();
    } while (p > l);
    return n + k;
  }

 private:
  uint64_t s_;
};

struct Instance {
  int64_t ready_at = 0;
  bool draining = false;
  int64_t inflight = 0;
  int64_t busy = 0;            // cumulative busy slot-seconds (the CPU counter)
  int64_t busy_at_scrape = 0;  // `busy` at the previous scrape
  std::vector<int64_t> ends;   // ring: requests finishing at t, indexed by t % service
};

}  // namespace

Result<RequestTrace> ParseTraceCsv(std::string_view text, std::string_view origin) {
  RequestTrace tr;
  int64_t line_no = 0, last = -1;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = TrimSpace(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (line_no == 1 && std::isalpha(static_cast<unsigned char>(line.front()))) continue;
    const size_t comma = line.find(',');
    int64_t t = 0, n = 0;
    if (comma == std::string_view::npos || !ParseNumber(line.substr(0, comma), &t) ||
        !ParseNumber(line.substr(comma + 1), &n)) {
      return InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) + ": '" +
                             std::string(line) + "' is not 't,requests' (two integers)");
    }
    if (t < 0 || n < 0) {
      return InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) +
                             ": negative time or count in '" + std::string(line) + "'");
    }
    if (t <= last) {
      return InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) + ": t " +
                             std::to_string(t) + " is not after the previous " +
                             std::to_string(last) + "; sort the trace by time");
    }
    if (t > 30 * 86400) {
      return InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) + ": t " +
                             std::to_string(t) + " is past 30 days; split the trace");
    }
    last = t;
    tr.arrivals.resize(static_cast<size_t>(t) + 1, 0);
    tr.arrivals[static_cast<size_t>(t)] = n;
  }
  if (tr.arrivals.empty()) return InvalidArgument(std::string(origin) + ": no rows 't,requests'");
  return tr;
}

Result<RequestTrace> LoadTraceCsv(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseTraceCsv(text, path);
}

std::string TraceCsv(const RequestTrace& trace) {
  std::string out = "t,requests\n";
  for (size_t t = 0; t < trace.arrivals.size(); ++t) {
    out += std::to_string(t) + "," + std::to_string(trace.arrivals[t]) + "\n";
  }
  return out;
}

RequestTrace DiurnalTrace(const DiurnalOptions& o) {
  Rng rng(o.seed);
  std::vector<double> rate(static_cast<size_t>(std::max<int64_t>(0, o.seconds)));
  for (size_t s = 0; s < rate.size(); ++s) {
    // (1 - cos) / 2 is 0 at 04:00 and 1 at 16:00; squared, the night is long and flat.
    const double hour = static_cast<double>(s) / 3600.0;
    const double c = (1 - std::cos(2 * std::numbers::pi * (hour - 4) / 24)) / 2;
    rate[s] = o.trough_rps + (o.peak_rps - o.trough_rps) * c * c;
  }
  const auto len = static_cast<size_t>(o.burst_length.count());
  for (int b = 0; b < o.bursts && !rate.empty(); ++b) {
    const auto start = static_cast<size_t>(rng.Uniform() * static_cast<double>(rate.size()));
    for (size_t i = 0; i < len && start + i < rate.size(); ++i) {
      // A 10 s ramp: bursts are sudden, not instant.
      rate[start + i] += o.burst_rps * std::min(1.0, static_cast<double>(i + 1) / 10.0);
    }
  }
  RequestTrace tr;
  tr.arrivals.reserve(rate.size());
  for (double r : rate) tr.arrivals.push_back(rng.Poisson(r));
  return tr;
}

Result<SimResult> Simulate(const RequestTrace& trace, const CapacityModel& model,
                           const RuleSet& rules) {
  if (model.concurrency < 1 || model.service < Seconds(1) || model.startup < Seconds(0)) {
    return InvalidArgument(
        "capacity model: concurrency must be >= 1, service >= 1 s, startup >= 0");
  }
  if (rules.interval < Seconds(1) || rules.interval_at_zero < Seconds(1)) {
    return InvalidArgument("rule set '" + rules.name + "': intervals must be >= 1 s");
  }
  if (rules.scrape < Seconds(0) || rules.scrape_phase < Seconds(0) ||
      (rules.scrape > Seconds(0) && rules.scrape_phase >= rules.scrape)) {
    return InvalidArgument("rule set '" + rules.name +
                           "': scrape must be >= 0 s and scrape_phase in [0, scrape)");
  }
  std::unique_ptr<Decider> decider;
  double util_target = 0;
  std::string metric;
  if (rules.spec) {
    ASSIGN_OR_RETURN(decider, NewDecider(*rules.spec, nanoseconds(0)));
    if (rules.spec->mode != Mode::kHpa) {
      return InvalidArgument("rule set '" + rules.name + "': the simulator drives mode hpa only");
    }
    metric = rules.spec->hpa.metrics.front().name;
    util_target = rules.spec->hpa.metrics.front().target;
  }
  const int64_t service = model.service.count();
  const int64_t startup = model.startup.count();
  auto make = [&](int64_t ready_at) {
    Instance in;
    in.ready_at = ready_at;
    in.ends.assign(static_cast<size_t>(service), 0);
    return in;
  };
  std::vector<Instance> instances;  // oldest first
  const int64_t initial = rules.spec ? rules.initial : rules.fixed;
  for (int64_t i = 0; i < initial; ++i) instances.push_back(make(0));

  std::deque<std::pair<int64_t, int64_t>> queue;  // (arrival second, count), FIFO
  int64_t queued = 0;
  SimResult r;
  r.name = rules.name;
  double instance_seconds = 0, wait_sum = 0;
  std::vector<double> costs;
  int64_t next_eval = 0;
  const int64_t scrape = rules.scrape.count(), phase = rules.scrape_phase.count();
  bool published = false;  // a scrape has happened
  double pub_queue = 0, pub_usage = 0;
  int64_t pub_samples = 0;
  const auto trace_len = static_cast<int64_t>(trace.arrivals.size());
  const auto wall0 = std::chrono::system_clock::time_point(std::chrono::seconds(1796601600));

  for (int64_t t = 0;; ++t) {
    if (t >= trace_len && queued == 0) {
      r.seconds = t;
      break;
    }
    // 2. Completions (1. readiness is ready_at <= t).
    const auto slot = static_cast<size_t>(t % service);
    for (Instance& in : instances) {
      in.inflight -= in.ends[slot];
      in.ends[slot] = 0;
    }
    // 3. Arrivals.
    if (t < trace_len && trace.arrivals[static_cast<size_t>(t)] > 0) {
      queue.emplace_back(t, trace.arrivals[static_cast<size_t>(t)]);
      queued += trace.arrivals[static_cast<size_t>(t)];
      r.requests += trace.arrivals[static_cast<size_t>(t)];
    }
    // 4. Dispatch, FIFO, onto free slots of ready instances.
    for (Instance& in : instances) {
      if (queue.empty()) break;
      if (in.draining || in.ready_at > t) continue;
      int64_t free = model.concurrency - in.inflight;
      while (free > 0 && !queue.empty()) {
        auto& [arrived, count] = queue.front();
        const int64_t n = std::min(free, count);
        const int64_t wait = t - arrived;
        if (wait > model.wait_threshold.count()) {
          r.waited += n;
          const auto hour = static_cast<size_t>(t / 3600);
          if (r.waited_by_hour.size() <= hour) r.waited_by_hour.resize(hour + 1, 0);
          r.waited_by_hour[hour] += n;
        }
        r.max_wait_s = std::max(r.max_wait_s, wait);
        wait_sum += static_cast<double>(wait) * static_cast<double>(n);
        in.inflight += n;
        in.ends[slot] += n;  // finishes at t + service, the same ring slot
        free -= n;
        queued -= n;
        count -= n;
        if (count == 0) queue.pop_front();
      }
    }
    // 5. Drained instances leave.
    std::erase_if(instances, [](const Instance& in) { return in.draining && in.inflight == 0; });
    // The scrapers: the kubelet's CPU counter advances by the slots busy this
    // second; metrics-server / Prometheus publish at their phase.
    for (Instance& in : instances) in.busy += in.inflight;
    if (scrape > 0 && t % scrape == phase) {
      pub_queue = static_cast<double>(queued);
      pub_usage = 0;
      pub_samples = 0;
      for (Instance& in : instances) {
        // A sample only for a pod ready for the whole window (the CPU
        // initialization period); a draining pod is terminating: no sample.
        if (!in.draining && in.ready_at <= t + 1 - scrape) {
          pub_usage += 100.0 * static_cast<double>(in.busy - in.busy_at_scrape) /
                       static_cast<double>(scrape * model.concurrency);
          ++pub_samples;
        }
        in.busy_at_scrape = in.busy;
      }
      published = true;
    }

    // 6. Evaluate.
    int64_t current = 0, ready = 0, inflight_ready = 0, inflight = 0;
    for (const Instance& in : instances) {
      inflight += in.inflight;
      if (in.draining) continue;
      ++current;
      if (in.ready_at <= t) {
        ++ready;
        inflight_ready += in.inflight;
      }
    }
    const bool woken = rules.wake && current == 0 && queued > 0;
    if (decider && (t >= next_eval || woken)) {
      Observation obs;
      obs.now = std::chrono::seconds(t);
      obs.wall = wall0 + std::chrono::seconds(t);
      obs.current = current;
      obs.ready = ready;
      obs.wake = woken;
      MetricSample m;
      m.name = metric;
      switch (rules.signal) {
        case Signal::kUtilization: {
          double sum = 0;
          int64_t n = 0;
          if (scrape == 0) {  // live: this second's busy slots of the ready instances
            sum = ready > 0 ? 100.0 * static_cast<double>(inflight_ready) /
                                  static_cast<double>(model.concurrency)
                            : 0;
            n = ready;
          } else if (published) {
            sum = pub_usage;
            n = std::min(pub_samples, current);
          }
          if (n > 0 && current > 0) {
            const double avg = sum / static_cast<double>(n);
            const double unready = avg > util_target ? 0 : util_target;
            m.value = (avg * static_cast<double>(n) + unready * static_cast<double>(current - n)) /
                      static_cast<double>(current);
          } else {
            m.error = "no ready instance reports utilisation";
          }
          break;
        }
        case Signal::kQueue:
          if (scrape == 0) {
            m.value = static_cast<double>(queued);
          } else if (published) {
            m.value = pub_queue;
          } else {
            m.error = "no scrape yet";
          }
          break;
        case Signal::kQueueAware:
          m.value = static_cast<double>(inflight + queued);
          break;
      }
      obs.metrics.push_back(m);
      const auto t0 = std::chrono::steady_clock::now();
      const Decision d = decider->Decide(obs);
      const auto t1 = std::chrono::steady_clock::now();
      costs.push_back(static_cast<double>(std::chrono::nanoseconds(t1 - t0).count()));
      ++r.decisions;
      if (d.desired != current) {
        decider->Applied(obs.now, current, d.desired);
        if (d.desired > current) {
          ++r.scale_outs;
          for (int64_t i = current; i < d.desired; ++i) instances.push_back(make(t + startup));
        } else {
          ++r.scale_ins;
          int64_t remove = current - d.desired;
          // Victims: not ready first, then the newest (controller.h).
          for (int pass = 0; pass < 2 && remove > 0; ++pass) {
            for (auto it = instances.rbegin(); it != instances.rend() && remove > 0; ++it) {
              if (it->draining) continue;
              const bool not_ready = it->ready_at > t;
              if (pass == 0 && !not_ready) continue;
              it->draining = true;
              --remove;
            }
          }
          std::erase_if(instances,
                        [&](const Instance& in) { return in.draining && in.inflight == 0; });
        }
        current = d.desired;
      }
      next_eval = t + (current == 0 ? rules.interval_at_zero : rules.interval).count();
    }
    // 7. Billing.
    instance_seconds += static_cast<double>(instances.size());
    const auto hour = static_cast<size_t>(t / 3600);
    if (r.instances_by_hour.size() <= hour) r.instances_by_hour.resize(hour + 1, 0);
    r.instances_by_hour[hour] += static_cast<double>(instances.size()) / 3600.0;
    r.peak_instances = std::max<int64_t>(r.peak_instances, static_cast<int64_t>(instances.size()));
  }
  r.instance_hours = instance_seconds / 3600.0;
  r.mean_wait_s = r.requests > 0 ? wait_sum / static_cast<double>(r.requests) : 0;
  if (!costs.empty()) {
    double sum = 0;
    for (double c : costs) sum += c;
    r.decide_ns_mean = sum / static_cast<double>(costs.size());
    std::sort(costs.begin(), costs.end());
    r.decide_ns_max = costs.back();
    r.decide_ns_p99 = costs[std::min(costs.size() - 1, costs.size() * 99 / 100)];
  }
  return r;
}

std::vector<RuleSet> StandardRuleSets(const RequestTrace& trace, const CapacityModel& model,
                                      const GantrySettings& gs) {
  std::vector<RuleSet> out;
  const double per_instance_rps =
      static_cast<double>(model.concurrency) / static_cast<double>(model.service.count());

  // Fixed capacity for the busiest minute of the trace.
  double peak_minute = 0, window = 0;
  const auto& a = trace.arrivals;
  for (size_t i = 0; i < a.size(); ++i) {
    window += static_cast<double>(a[i]);
    if (i >= 60) window -= static_cast<double>(a[i - 60]);
    peak_minute = std::max(peak_minute, window / 60.0);
  }
  RuleSet fixed;
  fixed.name = "fixed (peak)";
  fixed.fixed =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(peak_minute / per_instance_rps)));
  fixed.initial = fixed.fixed;
  fixed.notes = std::to_string(fixed.fixed) + " instances: the busiest minute (" +
                std::to_string(static_cast<int64_t>(std::lround(peak_minute))) + " req/s) / " +
                std::to_string(static_cast<int64_t>(per_instance_rps)) + " req/s per instance";
  out.push_back(fixed);

  // The HPA on CPU-like utilisation: min 1 (minReplicas default), target 70 %,
  // every behavior at its default, evaluated every 15 s.
  DecisionSpec hpa;
  hpa.target = "hpa";
  hpa.min = 1;
  hpa.max = 100;
  hpa.mode = Mode::kHpa;
  hpa.hpa.metrics = {{.name = "cpu", .type = TargetType::kUtilization, .target = 70}};
  RuleSet h;
  h.name = "HPA (cpu 70%)";
  h.spec = hpa;
  h.signal = Signal::kUtilization;
  h.scrape = Seconds(15);  // metrics-server --metric-resolution (simulate.h)
  h.scrape_phase = Seconds(7);
  h.notes =
      "utilisation target 70 %, min 1, default behavior (up max(4 pods, 100 %)/15 s, "
      "down 300 s window, 100 %/15 s), every 15 s, on a 15 s CPU average scraped 8 s "
      "before";
  out.push_back(h);

  // KEDA on a queue length: threshold one instance's concurrency of waiting
  // requests, minReplicaCount 0, cooldownPeriod 300 s, activationThreshold 0,
  // pollingInterval 30 s at zero; the HPA's default behavior at 1..N.
  DecisionSpec keda = hpa;
  keda.target = "keda";
  keda.min = 0;
  keda.hpa.metrics = {{.name = "queue",
                       .type = TargetType::kAverageValue,
                       .target = static_cast<double>(model.concurrency),
                       .activation = 0}};
  RuleSet k;
  k.name = "KEDA (queue)";
  k.spec = keda;
  k.signal = Signal::kQueue;
  k.interval_at_zero = Seconds(30);
  k.scrape = Seconds(15);  // Prometheus scrape_interval (simulate.h)
  k.scrape_phase = Seconds(7);
  k.notes = "queue length, threshold " + std::to_string(model.concurrency) +
            " per instance, min 0, cooldown 300 s, activation 0, polling 30 s at 0, "
            "HPA defaults at 1..N, on a Prometheus sample scraped every 15 s (8 s before)";
  out.push_back(k);

  // Gantry: in flight + pending + held from the gateway (GantrySettings: the
  // HPA's 70 % headroom, a 120 s scale-down window, scale-up at most
  // max(4, 100 %) per 90 s, scale to zero with the gateway holding).
  DecisionSpec g = keda;
  g.target = "gantry";
  g.min = gs.min;
  const double target = gs.target_fraction * static_cast<double>(model.concurrency);
  g.hpa.metrics = {
      {.name = "load", .type = TargetType::kAverageValue, .target = target, .activation = 0}};
  g.hpa.down.stabilization = gs.down_window;
  const Seconds up_period = gs.up_period > Seconds(0) ? gs.up_period : model.startup;
  for (ScalingPolicy& p : g.hpa.up.policies) {
    p.period = std::clamp(up_period, Seconds(1), Seconds(1800));
  }
  RuleSet gantry;
  gantry.name = "Gantry (queue-aware)";
  gantry.spec = g;
  gantry.signal = Signal::kQueueAware;
  gantry.wake = gs.min == 0;
  gantry.notes = "in flight + pending + held, target " + internal::Num(target) +
                 " per instance, min " + std::to_string(gs.min) +
                 (gs.min == 0 ? " (gateway holds and wakes)" : "") + ", down window " +
                 std::to_string(gs.down_window.count()) + " s, up max(4 pods, 100 %)/" +
                 std::to_string(up_period.count()) + " s, cooldown 300 s";
  out.push_back(gantry);
  return out;
}

}  // namespace gantry::autoscale
