// The controller (controller.h): per target, metrics -> actuator read ->
// decision -> safe victims -> action, each step explained.
#include "gantry/autoscale/controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "gantry/core/log.h"
#include "gantry/core/metrics.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/gateway/admin_client.h"

namespace gantry::autoscale {
namespace {

using metrics::Counter;
using metrics::Gauge;
using metrics::Labels;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// Wall time and monotonic time may drift apart by NTP slewing; a step larger
// than this between two evaluations is a clock jump (a VM resumed, a manual
// date change), and schedules read from wall time cannot be trusted for it.
constexpr auto kClockJump = std::chrono::minutes(5);

std::string Iso(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::vector<std::string> Substitute(std::vector<std::string> argv, const Instance& inst) {
  for (std::string& a : argv) {
    for (auto [key, value] :
         {std::pair<std::string_view, const std::string&>{"{instance}", inst.id},
          {"{name}", inst.name.empty() ? inst.id : inst.name}}) {
      for (size_t at = a.find(key); at != std::string::npos; at = a.find(key, at + value.size())) {
        a.replace(at, key.size(), value);
      }
    }
  }
  return argv;
}

Result<std::unique_ptr<Actuator>> DefaultActuator(const TargetConfig& t, const Clock& clock) {
  switch (t.actuator.kind) {
    case ActuatorConfig::Kind::kVmss:
      return NewVmssActuator(t.actuator.vmss, clock);
    case ActuatorConfig::Kind::kKubernetes:
      return NewKubernetesActuator(t.actuator.kubernetes);
    case ActuatorConfig::Kind::kGateway:
      return NewGatewayActuator(t.actuator.gateway, clock);
    case ActuatorConfig::Kind::kCommand:
      return NewCommandActuator(t.actuator.command);
  }
  return Internal("unknown actuator kind");
}

}  // namespace

struct Controller::Impl {
  struct Target {
    TargetConfig config;
    std::vector<std::unique_ptr<MetricSource>> sources;
    std::unique_ptr<Actuator> actuator;
    std::unique_ptr<Decider> decider;
    nanoseconds next_due{0};
    std::atomic<bool> woken{false};
    std::vector<std::string> last_errors;  // per source, to log a failure once per change
    std::string last_reason;
    std::optional<std::pair<nanoseconds, std::chrono::system_clock::time_point>> last_clocks;

    // Published for /status (under Impl::state_mu).
    Json status = Json::object();
    // Gauges and counters (the registry owns them).
    Gauge *desired = nullptr, *current = nullptr, *ready = nullptr, *min = nullptr, *max = nullptr;
    std::vector<Gauge*> metric_value;
    std::vector<Counter*> metric_errors;
  };

  AutoscaleConfig config;
  ControllerOptions options;
  const Clock* clock = nullptr;
  std::vector<std::unique_ptr<Target>> targets;
  metrics::Registry registry;
  std::mutex eval_mu;           // one evaluation at a time
  mutable std::mutex state_mu;  // Target::status

  Target* Find(std::string_view name) {
    for (auto& t : targets) {
      if (t->config.name == name) return t.get();
    }
    return nullptr;
  }

  void Count(const Target& t, std::string_view reason) {
    auto c = registry.GetCounter("gantry_autoscale_decisions", "Decisions taken, by reason",
                                 {{"target", t.config.name}, {"reason", std::string(reason)}});
    if (c.ok()) (*c)->Inc();
  }

  void CountAction(const Target& t, std::string_view direction, std::string_view result) {
    auto c = registry.GetCounter("gantry_autoscale_actions",
                                 "Scale actions sent to the actuator, by result",
                                 {{"target", t.config.name},
                                  {"direction", std::string(direction)},
                                  {"result", std::string(result)}});
    if (c.ok()) (*c)->Inc();
  }

  void Publish(Target& t, const Json& update) {
    std::lock_guard<std::mutex> lock(state_mu);
    for (auto it = update.begin(); it != update.end(); ++it) t.status[it.key()] = it.value();
  }

  // Instances that may go, best first; at most `want`.
  std::vector<Instance> ChooseVictims(Target& t, const Capacity& cap, int64_t want,
                                      std::vector<std::string>* notes) {
    std::vector<Instance> candidates;
    for (const Instance& i : cap.instances) {
      if (i.protected_from_scale_in) {
        notes->push_back(fmt::format("{} is protected from scale-in", i.id));
        continue;
      }
      candidates.push_back(i);
    }
    // A half-started instance costs nothing to remove; among ready ones the
    // newest goes first (it holds the least warm state), then the highest id
    // (Azure's default order on a tie).
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Instance& a, const Instance& b) {
                       if (a.ready != b.ready) return !a.ready;
                       if (a.created != b.created) return a.created > b.created;
                       if (a.id.size() != b.id.size()) return a.id.size() > b.id.size();
                       return a.id > b.id;
                     });
    std::vector<Instance> out;
    for (const Instance& i : candidates) {
      if (static_cast<int64_t>(out.size()) >= want) break;
      if (!t.config.scale_in.victim_check.empty()) {
        std::vector<std::string> argv = Substitute(t.config.scale_in.victim_check, i);
        auto r = RunSubprocess(argv, std::chrono::seconds(30));
        if (!r.ok() || r->exit_code != 0) {
          notes->push_back(
              fmt::format("{} kept: victim_check {}", i.id,
                          r.ok() ? fmt::format("exit {}", r->exit_code) : r.status().message()));
          continue;
        }
      }
      out.push_back(i);
    }
    return out;
  }

  // Drains the victims' gateway backends; those that do not drain in time
  // are undrained and kept.
  std::vector<Instance> Drain(Target& t, std::vector<Instance> victims,
                              std::vector<std::string>* notes) {
    const ScaleInConfig& s = t.config.scale_in;
    if (s.drain_gateway.empty() || victims.empty()) return victims;
    const char* key = std::getenv(s.drain_admin_key_env.c_str());
    auto admin = gateway::AdminClient::Create(s.drain_gateway, key ? key : "");
    if (!admin.ok()) {
      notes->push_back(fmt::format("no drain ({}): scale-in held", admin.status().message()));
      return {};
    }
    std::vector<Instance> drained;
    for (const Instance& v : victims) {
      const std::string& backend = v.name.empty() ? v.id : v.name;
      auto r = admin->DrainAndWait(backend, s.drain_timeout, {});
      if (r.ok()) {
        drained.push_back(v);
        continue;
      }
      notes->push_back(
          fmt::format("{} kept: drain of backend '{}': {}", v.id, backend, r.status().message()));
      (void)admin->Undrain(backend);
    }
    return drained;
  }

  Result<Decision> Evaluate(Target& t) {
    std::lock_guard<std::mutex> lock(eval_mu);
    nanoseconds now = clock->Now();
    auto wall = clock->WallNow();
    const std::string& name = t.config.name;
    t.next_due = now + t.config.interval;
    bool wake = t.woken.exchange(false);

    Observation obs{.now = now, .wall = wall, .wake = wake};
    Json metric_json = Json::object();
    for (size_t i = 0; i < t.sources.size(); ++i) {
      const std::string& metric = t.config.metrics[i].name;
      MetricSample sample{.name = metric};
      Result<double> v = t.sources[i]->Read();
      if (v.ok()) {
        sample.value = *v;
        t.metric_value[i]->Set(*v);
        if (!t.last_errors[i].empty()) log::info("autoscale {}: metric {} is back", name, metric);
        t.last_errors[i].clear();
        metric_json[metric] = *v;
      } else {
        sample.error = v.status().message();
        t.metric_value[i]->Set(std::numeric_limits<double>::quiet_NaN());
        t.metric_errors[i]->Inc();
        if (t.last_errors[i] != sample.error) {
          log::warn("autoscale {}: metric {} missing: {}", name, metric, sample.error);
        }
        t.last_errors[i] = sample.error;
        metric_json[metric] = {{"error", sample.error}};
      }
      obs.metrics.push_back(std::move(sample));
    }

    auto hold = [&](std::string reason, std::string why) -> Result<Decision> {
      Count(t, reason);
      if (t.last_reason != reason) log::warn("autoscale {}: holding ({}): {}", name, reason, why);
      t.last_reason = reason;
      Publish(t,
              {{"metrics", metric_json},
               {"last_decision", {{"reason", reason}, {"explanation", why}, {"at", Iso(wall)}}}});
      return Decision{.reason = Reason::kNoChange, .explanation = why};
    };

    // Clock jump: compare how far each clock moved since the last evaluation.
    auto last = t.last_clocks;
    t.last_clocks = std::make_pair(now, wall);
    if (last) {
      auto mono = now - last->first;
      auto walld = std::chrono::duration_cast<nanoseconds>(wall - last->second);
      auto skew = walld - mono;
      if (skew > kClockJump || skew < -kClockJump) {
        return hold("clock_jump",
                    fmt::format("wall clock moved {} s while {} s passed; holding capacity for "
                                "this evaluation",
                                std::chrono::duration_cast<std::chrono::seconds>(walld).count(),
                                std::chrono::duration_cast<std::chrono::seconds>(mono).count()));
      }
    }

    Result<Capacity> cap = t.actuator->Read();
    if (!cap.ok()) return hold("actuator_error", cap.status().message());
    obs.current = cap->target;
    obs.ready = cap->ready;
    t.current->Set(static_cast<double>(cap->target));
    t.ready->Set(static_cast<double>(cap->ready));
    Json capacity_json = {{"current", cap->target}, {"ready", cap->ready}, {"busy", cap->busy}};
    Publish(t, {{"capacity", capacity_json}});
    if (cap->busy) {
      return hold("actuator_busy",
                  fmt::format("{} is still applying an earlier change ({} of {} ready)",
                              t.actuator->kind(), cap->ready, cap->target));
    }

    Decision d = t.decider->Decide(obs);
    d.current = cap->target;
    std::string reason(ReasonName(d.reason));
    Count(t, reason);
    t.desired->Set(static_cast<double>(d.desired));
    bool changed = d.desired != d.current;
    if (changed || reason != t.last_reason) {
      log::info("autoscale {}: {} -> {} ({}{}): {}", name, d.current, d.desired, reason,
                options.dry_run && changed ? ", dry run" : "", d.explanation);
    }
    t.last_reason = reason;
    Json decision = {{"reason", reason},     {"explanation", d.explanation},
                     {"current", d.current}, {"desired", d.desired},
                     {"at", Iso(wall)},      {"dry_run", options.dry_run}};
    Publish(t, {{"metrics", metric_json},
                {"last_decision", decision},
                {"desired", d.desired},
                {"decider", t.decider->State()}});
    if (!changed || options.dry_run) return d;

    Json action = {{"from", d.current}, {"at", Iso(wall)}};
    if (d.desired > d.current) {
      action["direction"] = "out";
      action["to"] = d.desired;
      Status s = t.actuator->ScaleOut(d.desired);
      CountAction(t, "out", s.ok() ? "ok" : "error");
      if (s.ok()) {
        t.decider->Applied(now, d.current, d.desired);
      } else {
        log::error("autoscale {}: scale out to {} failed: {}", name, d.desired, s.message());
        action["error"] = s.message();
      }
      Publish(t, {{"last_action", action}});
      return d;
    }

    action["direction"] = "in";
    std::vector<std::string> notes;
    int64_t to = d.desired;
    Status s;
    if (t.actuator->CanChooseVictims()) {
      std::vector<Instance> victims = ChooseVictims(t, *cap, d.current - d.desired, &notes);
      victims = Drain(t, std::move(victims), &notes);
      to = d.current - static_cast<int64_t>(victims.size());
      if (to < d.desired) to = d.desired;
      std::vector<std::string> ids;
      for (const Instance& v : victims) ids.push_back(v.id);
      action["victims"] = ids;
      if (ids.empty()) {
        std::string why = fmt::format("no instance is safe to remove ({})", Join(notes, "; "));
        CountAction(t, "in", "no_victims");
        log::warn("autoscale {}: scale in to {} held: {}", name, d.desired, why);
        action["error"] = why;
        Publish(t, {{"last_action", action}});
        return d;
      }
      if (to > d.desired)
        notes.push_back(
            fmt::format("victims_short: {} of {} may go", ids.size(), d.current - d.desired));
      s = t.actuator->ScaleIn(to, ids);
    } else {
      s = t.actuator->ScaleIn(d.desired, {});
    }
    action["to"] = to;
    if (!notes.empty()) action["notes"] = notes;
    CountAction(t, "in", s.ok() ? "ok" : "error");
    if (s.ok()) {
      t.decider->Applied(now, d.current, to);
      if (!notes.empty())
        log::info("autoscale {}: scale in to {}: {}", name, to, Join(notes, "; "));
    } else {
      log::error("autoscale {}: scale in to {} failed: {}", name, to, s.message());
      action["error"] = s.message();
    }
    Publish(t, {{"last_action", action}});
    return d;
  }
};

Controller::Controller(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Controller::~Controller() = default;

Result<std::unique_ptr<Controller>> Controller::Create(AutoscaleConfig config,
                                                       ControllerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->clock = options.clock ? options.clock : &SystemClock();
  const Clock& clock = *impl->clock;
  for (const TargetConfig& tc : config.targets) {
    auto t = std::make_unique<Impl::Target>();
    t->config = tc;
    const Labels labels = {{"target", tc.name}};
    for (const MetricSourceConfig& m : tc.metrics) {
      auto src = options.metric_factory ? options.metric_factory(m) : NewMetricSource(m, clock);
      if (!src.ok()) {
        return InvalidArgument(fmt::format("{}: target '{}': metric '{}': {}", config.path, tc.name,
                                           m.name, src.status().message()));
      }
      t->sources.push_back(std::move(*src));
      t->last_errors.emplace_back();
      Labels ml = {{"target", tc.name}, {"metric", m.name}};
      ASSIGN_OR_RETURN(Gauge * g,
                       impl->registry.GetGauge("gantry_autoscale_metric_value",
                                               "The last value read (NaN: missing)", ml));
      ASSIGN_OR_RETURN(Counter * c, impl->registry.GetCounter("gantry_autoscale_metric_errors",
                                                              "Failed metric reads", ml));
      t->metric_value.push_back(g);
      t->metric_errors.push_back(c);
    }
    auto act = options.actuator_factory ? options.actuator_factory(tc) : DefaultActuator(tc, clock);
    if (!act.ok()) {
      return Status(act.status().code(), fmt::format("{}: target '{}': actuator: {}", config.path,
                                                     tc.name, act.status().message()));
    }
    t->actuator = std::move(*act);
    ASSIGN_OR_RETURN(t->decider, NewDecider(tc.decision, clock.Now()));
    metrics::Registry& r = impl->registry;
    ASSIGN_OR_RETURN(t->desired, r.GetGauge("gantry_autoscale_desired", "Desired count", labels));
    ASSIGN_OR_RETURN(t->current,
                     r.GetGauge("gantry_autoscale_current", "Count the actuator reports", labels));
    ASSIGN_OR_RETURN(t->ready, r.GetGauge("gantry_autoscale_ready", "Instances ready", labels));
    ASSIGN_OR_RETURN(t->min, r.GetGauge("gantry_autoscale_min", "Configured minimum", labels));
    ASSIGN_OR_RETURN(t->max, r.GetGauge("gantry_autoscale_max", "Configured maximum", labels));
    t->min->Set(static_cast<double>(tc.decision.min));
    t->max->Set(static_cast<double>(tc.decision.max));
    t->status = {{"name", tc.name},
                 {"mode", tc.decision.mode == Mode::kHpa ? "hpa" : "rules"},
                 {"min", tc.decision.min},
                 {"max", tc.decision.max},
                 {"interval_ms", tc.interval.count()},
                 {"actuator", std::string(t->actuator->kind())}};
    impl->targets.push_back(std::move(t));
  }
  impl->config = std::move(config);
  impl->options = std::move(options);
  return std::unique_ptr<Controller>(new Controller(std::move(impl)));
}

milliseconds Controller::RunDue() {
  nanoseconds now = impl_->clock->Now();
  for (auto& t : impl_->targets) {
    if (t->woken.load() || t->next_due <= now) (void)impl_->Evaluate(*t);
  }
  now = impl_->clock->Now();
  nanoseconds next = std::chrono::hours(1);
  for (auto& t : impl_->targets) {
    if (t->woken.load()) return milliseconds(0);
    next = std::min(next, t->next_due - now);
  }
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(next));
}

Result<Decision> Controller::Evaluate(std::string_view target) {
  Impl::Target* t = impl_->Find(target);
  if (t == nullptr) return NotFound(fmt::format("no target '{}'", target));
  return impl_->Evaluate(*t);
}

Status Controller::Wake(std::string_view target) {
  Impl::Target* t = impl_->Find(target);
  if (t == nullptr) {
    std::vector<std::string> names;
    for (auto& x : impl_->targets) names.push_back(x->config.name);
    return NotFound(fmt::format("no target '{}' (targets: {})", target, Join(names, ", ")));
  }
  t->woken.store(true);
  return Status::Ok();
}

Json Controller::StatusJson() const {
  std::lock_guard<std::mutex> lock(impl_->state_mu);
  Json targets = Json::array();
  for (const auto& t : impl_->targets) targets.push_back(t->status);
  return {
      {"config", impl_->config.path}, {"dry_run", impl_->options.dry_run}, {"targets", targets}};
}

std::string Controller::MetricsText() const { return impl_->registry.Render(); }

}  // namespace gantry::autoscale
