// The controller behind `gantry autoscale run`: one evaluation loop per target
// (each on its own interval), reading metrics, reading the actuator, deciding
// (decide.h), choosing safe victims, acting, and explaining every decision in
// the log, in /metrics and in /status.
//
// One evaluation of a target:
//   1. read every metric (a failure is a missing sample, logged once per change);
//   2. read the actuator; a failure or a busy actuator holds ("actuator_error",
//      "actuator_busy"): nothing is decided on a count we do not know;
//   3. decide; with dry_run stop here (the decision is logged and counted);
//   4. scale out: ScaleOut(desired); scale in: choose victims among the
//      instances that are not protected, ready ones last... (see victims below),
//      drain them through the gateway when configured, then ScaleIn.
// Victims: not protected_from_scale_in, passing victim_check (exit 0), not
// ready first (a half-started instance costs nothing), then newest first. When
// fewer are safe than asked, fewer go ("victims_short" in the explanation).
//
// Restarts: nothing but the decider history is kept in memory; the count is
// read from the actuator each time, and actuators set absolute counts, so a
// restarted controller continues where the capacity stands. A clock jump (wall
// time moving more than 1 h between evaluations, or backwards) is logged and
// that evaluation holds.
//
// HTTP (when `listen` is set): GET /status (JSON), GET /metrics
// (gantry_autoscale_desired, _current, _ready, _min, _max{target},
// _decisions_total{target,reason}, _actions_total{target,direction,result},
// _metric_value{target,metric}, _metric_errors_total{target,metric}),
// GET /healthz, POST /wake/<target> (the gateway holds requests for it:
// evaluate now, activating from zero).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/autoscale/actuator.h"
#include "gantry/autoscale/config.h"
#include "gantry/autoscale/metrics.h"
#include "gantry/core/clock.h"
#include "gantry/core/json.h"
#include "gantry/core/service.h"
#include "gantry/core/status.h"

namespace gantry::autoscale {

struct ControllerOptions {
  const Clock* clock = nullptr;  // default SystemClock()
  bool dry_run = false;
  // Test seams: build a target's metric sources and actuator (default: the
  // factories of metrics.h / actuator.h).
  std::function<Result<std::unique_ptr<MetricSource>>(const MetricSourceConfig&)> metric_factory;
  std::function<Result<std::unique_ptr<Actuator>>(const TargetConfig&)> actuator_factory;
};

class Controller {
 public:
  static Result<std::unique_ptr<Controller>> Create(AutoscaleConfig config,
                                                    ControllerOptions options);
  ~Controller();

  // Evaluates every target whose interval has come (or that was woken) once.
  // Returns how long until the next one is due.
  std::chrono::milliseconds RunDue();
  // Evaluates one target now; the decision taken (tests).
  Result<Decision> Evaluate(std::string_view target);
  // Marks a target woken; the next RunDue evaluates it at once.
  Status Wake(std::string_view target);

  Json StatusJson() const;
  std::string MetricsText() const;

 private:
  struct Impl;
  explicit Controller(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The controller as a core::Service with its HTTP endpoints and loop thread.
Result<std::unique_ptr<Service>> NewAutoscaleService(const std::string& config_path,
                                                     ControllerOptions options);

}  // namespace gantry::autoscale
