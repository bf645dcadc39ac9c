// A request trace replayed through a Decider in simulated time against a model
// of capacity, to compare rule sets on cost (instance-hours) and on waiting
// (requests that queued), and to measure what a decision costs. Used by the
// autoscale_sim tool and bench/autoscale.sh.
//
// The model, one step per second:
//   1. instances whose startup has elapsed become ready;
//   2. requests whose service time has elapsed leave their instance;
//   3. the second's arrivals join one FIFO queue (the gateway holds them while
//      there is no free capacity; nothing is dropped);
//   4. queued requests start on free slots of ready instances (`concurrency`
//      slots each, `service` seconds per request); a request's wait is the
//      time from its arrival to its start;
//   5. draining instances with nothing in flight are removed;
//   6. when an evaluation is due, the rule set's signal is read, the decider
//      decides (timed with steady_clock), Applied() is told, and the count
//      changes: new instances start (ready after `startup`), victims are the
//      not-ready ones first, then the newest; a ready victim drains (takes no
//      new request, finishes what it holds) and is removed when empty;
//   7. every instance that exists in the second is billed for it, from its
//      start to its removal, startup and draining included.
// The run lasts the trace and then until the queue is empty.
//
// Signal paths (what each rule set's decider can know at an evaluation), from
// the documented defaults:
//   * HPA on CPU. kube-controller-manager --horizontal-pod-autoscaler-sync-
//     period 15 s (kubernetes/website concepts/workloads/autoscaling/
//     horizontal-pod-autoscale.md; k8s.io/kubernetes/pkg/controller/
//     podautoscaler/config). The CPU figure is not instantaneous: "CPU is
//     reported as the average usage ... over a period of time ... a rate over
//     a cumulative CPU counter ... The kubelet chooses the window"
//     (kubernetes-sigs/metrics-server FAQ.md, "How CPU usage is calculated?";
//     "latest values (last 15s)"). metrics-server scrapes every
//     --metric-resolution: 15 s in the upstream manifests (kubernetes/
//     kubernetes#117121 "Set metrics-server's metric-resolution to 15s ...
//     align with the upstream manifests"; the binary's own default was 60 s,
//     FAQ.md "How often metrics are scraped?"), so the HPA reads a 15 s
//     average published up to 15 s before. Unready pods (B5,
//     ../shared/reference/jobs-autoscale.md; replica_calculator.go):
//     --horizontal-pod-autoscaler-cpu-initialization-period 5 min: within it
//     a pod's sample is set aside unless the pod was ready for the whole
//     sample window; --horizontal-pod-autoscaler-initial-readiness-delay 30 s
//     (after it, readiness flaps still set samples aside; none here). Set-aside
//     pods count 0 % on a scale-up, as target otherwise (HPA rebalancing).
//     Modelled: scrape 15 s; an instance's sample = busy slots / concurrency
//     averaged over the 15 s before the scrape, only if it was ready for the
//     whole window (a startup is < 5 min here, so the init period always
//     applies to a new instance's first window).
//   * KEDA on Prometheus. pollingInterval 30 s at zero, the HPA's 15 s at
//     1..N (B5, keda-docs scaledobject-spec.md). The Prometheus scaler runs
//     an instant query, so it sees the series as of the last scrape.
//     Prometheus's own default scrape_interval is 1 m; its shipped example
//     config and most KEDA examples use 15 s ("scrape_interval: 15s # ...
//     Default is every 1 minute", prometheus.yml). Modelled: 15 s (the
//     examples; the shorter, the stronger KEDA is).
//   * The scrapers and controllers are not synchronised; the sample's age at
//     an evaluation is uniform over the interval. Deterministic model: every
//     scrape at phase 7 s of the 15 s evaluation grid (the mean age, 8 s at
//     the evaluation; the HPA's CPU window thus ends 8 s and starts 23 s
//     before it).
//   * Gantry reads the gateway's gauges live: the controller scrapes the
//     gateway's /metrics when it evaluates (src/autoscale/metrics.cc).
//
// Thread-safety: the functions are pure; a run owns its decider.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/autoscale/decide.h"
#include "gantry/core/status.h"

namespace gantry::autoscale {

// Arrivals per second, second 0 first.
struct RequestTrace {
  std::vector<int64_t> arrivals;
};

// Parses CSV `t,requests` (t in whole seconds, ascending; a header line that
// starts with a letter is skipped; seconds not listed have no arrivals).
// Errors name `origin` and the line.
Result<RequestTrace> ParseTraceCsv(std::string_view text, std::string_view origin);
Result<RequestTrace> LoadTraceCsv(const std::string& path);
std::string TraceCsv(const RequestTrace& trace);

// A day of diurnal load with bursts, deterministic for a seed (its own
// generator, so the same on every platform): a smooth daily curve from
// `trough_rps` (04:00) to `peak_rps` (16:00), plus `bursts` bursts of
// `burst_rps` for `burst_length`, starting at random times of the day;
// Poisson arrivals per second.
struct DiurnalOptions {
  uint64_t seed = 1;
  int64_t seconds = 86400;
  double peak_rps = 40;
  double trough_rps = 0.05;
  int bursts = 10;
  double burst_rps = 24;
  Seconds burst_length{120};
};
RequestTrace DiurnalTrace(const DiurnalOptions& options);

struct CapacityModel {
  Seconds startup{90};        // scale-out to ready: a GPU VM or pod loading its model
  int64_t concurrency = 8;    // requests a ready instance serves at once
  Seconds service{2};         // each request's service time
  Seconds wait_threshold{1};  // a request "waited" when its wait is above this
};

// What the decider's metric measures (each anchor's signal).
enum class Signal {
  // HPA on CPU-like utilisation: percent busy slots averaged over the
  // instances with a sample (see RuleSet::scrape), the others counted as 0 %
  // when those are above target and as 100 % of target otherwise (the HPA's
  // rule for unready pods, B5); missing when no instance has a sample.
  kUtilization,
  // KEDA on a queue length (Prometheus-like): the requests waiting, total.
  kQueue,
  // Gantry from the gateway: requests in flight + pending + held, total.
  kQueueAware,
};

struct RuleSet {
  std::string name;
  // The decider's spec; its first metric receives the signal. nullopt: a
  // fixed count (`fixed`) for the whole run and no decider.
  std::optional<DecisionSpec> spec;
  int64_t fixed = 0;
  Signal signal = Signal::kQueueAware;
  Seconds interval{15};          // evaluation period
  Seconds interval_at_zero{15};  // at 0 instances (KEDA polls every 30 s)
  // Where the signal comes from (see "Signal paths" above). scrape 0: read
  // live at the evaluation (Gantry scrapes the gateway itself). Otherwise a
  // scraper publishes a sample every `scrape` seconds, at t = phase (mod
  // scrape), after the second's dispatch; the decider reads the last one
  // published. kUtilization's sample is each instance's busy slots averaged
  // over the scrape's window (the kubelet's CPU rate); kQueue's is the gauge.
  Seconds scrape{0};
  Seconds scrape_phase{0};
  // The gateway wakes the target when it holds requests at 0 instances: an
  // evaluation at once, with Observation::wake.
  bool wake = false;
  int64_t initial = 1;  // instances at t = 0, already ready
  std::string notes;    // the settings in words, for the report
};

struct SimResult {
  std::string name;
  int64_t seconds = 0;  // simulated, trace plus the drain of the queue
  double instance_hours = 0;
  int64_t requests = 0;
  int64_t waited = 0;  // wait > wait_threshold
  int64_t max_wait_s = 0;
  double mean_wait_s = 0;
  std::vector<int64_t> waited_by_hour;    // waited requests by the hour they started
  std::vector<double> instances_by_hour;  // mean instances in each hour
  int64_t peak_instances = 0;
  int64_t scale_outs = 0, scale_ins = 0;
  int64_t decisions = 0;
  double decide_ns_mean = 0, decide_ns_p99 = 0, decide_ns_max = 0;
};

// Runs `rules` over `trace`. InvalidArgument for a bad model or spec.
Result<SimResult> Simulate(const RequestTrace& trace, const CapacityModel& model,
                           const RuleSet& rules);

// Gantry's settings in the comparison (the baselines have none: they run at
// their documented defaults).
struct GantrySettings {
  // Load target per instance as a fraction of its concurrency: the HPA
  // baseline's 70 % utilisation, so both keep the same headroom for a burst
  // during startup and the comparison is about the signal and the scale-in.
  double target_fraction = 0.7;
  // Scale-down stabilization: the load is counted, not sampled from a noisy
  // utilisation, so a shorter window than the HPA's 300 s.
  Seconds down_window{120};
  // Period of the scale-up policies (Pods 4, Percent 100); 0: the model's
  // startup. What was asked for within one startup cannot have relieved the
  // queue yet, and the queue that grows meanwhile would otherwise be read as
  // ever more concurrency (81 instances after a burst that needed 24, at 15 s).
  Seconds up_period{0};
  int64_t min = 0;  // 0: scale to zero, the gateway holds and wakes
};

// The rule sets bench/autoscale.sh compares, the baselines at their documented
// defaults (simulate.cc says which): fixed capacity sized for the trace's peak
// minute, the HPA on utilisation, KEDA on queue length, and Gantry on the
// gateway's queue-aware signal.
std::vector<RuleSet> StandardRuleSets(const RequestTrace& trace, const CapacityModel& model,
                                      const GantrySettings& gantry = {});

}  // namespace gantry::autoscale
