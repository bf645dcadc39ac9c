// Alert rules of `gantry agent`: parsed from YAML, evaluated against the local
// History, and exportable as Prometheus alerting rules.
//
// Rules file (examples/agent/rules.yaml):
//
//   rules:
//     - name: HostHighCpu                      # the alertname; [A-Za-z_][A-Za-z0-9_]*
//       signal: cpu_utilization                # a signal name (gantry/agent/snapshot.h)
//       # signal: 'gpu_temperature_celsius{gpu!="3"}'   with label matchers (= and !=)
//       aggregation: avg                       # avg | min | max | p95 | last (default last)
//       window: 5m                             # the points aggregated, per series (default 0:
//                                              # the latest point within the last 5m)
//       condition: {op: ">", threshold: 90}    # static: op is > >= < <=; or the short form "> 90"
//       for: 10m                               # pending this long before firing (default 0)
//       labels: {severity: warning}
//       annotations:
//         summary: "CPU busy on {{ $labels.instance }}"
//         description: "{{ $value }}% busy for 10 minutes"
//     - name: NetworkAnomaly
//       signal: network_receive_bytes_per_second
//       aggregation: avg
//       window: 5m
//       condition:
//         dynamic:
//           sensitivity: medium                # low | medium | high
//           direction: both                    # above | below | both
//           min_history: 3d                    # no alert before this much history
//           min_samples: 30
//           seasonality: auto                  # auto | none | hourly | daily | weekly
//           violations: 4 of 5                 # N of the last M evaluations outside the band
//           learn_window: 10d                  # history learned from (default 10d; 28d for
//                                              # weekly and auto)
//
// Templates in labels and annotations: {{ $labels.NAME }} (a label of the
// alert, "" when absent), {{ $value }} (the evaluated value, 6 significant
// digits) and {{ printf "%.1f" $value }}; anything else is a parse error.
//
// Evaluation (Evaluator::Evaluate at time `now_ms`): for every rule, every
// stored series of its signal that matches the selector is aggregated over
// [now - window, now] (window 0: its newest point no older than 5 minutes).
// A series without points there has no value: its condition is false. A
// static condition compares the value; a dynamic one checks it against a
// DynamicThresholdModel learned from the series' history (refitted every
// `refit_every`, default 15 minutes of evaluation time, and at every
// evaluation while the model is not yet ready), and is true while at least N
// of the last M evaluations were outside the band. Dynamic models learn from
// the stored points older than the evaluated window (not from window
// aggregates), so a current anomaly does not teach the band to accept it.
//
// States per (rule, series): inactive -> pending (condition true) -> firing
// (true for at least `for`; at once when `for` is 0) -> resolved (false again,
// or the series vanished). A pending alert whose condition turns false goes
// back to inactive. The alert's labels are the series labels, then the rule's
// labels, then alertname = rule name, then Options::external_labels (which do
// not override). startsAt is when it started firing; endsAt when it resolved.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/agent/history.h"
#include "gantry/alerting/dynamic_threshold.h"
#include "gantry/alerting/notify.h"  // Alert
#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::agent {

// Alerting building blocks live in gantry/alerting (shared with the gateway).
using alerting::Alert;
using alerting::Direction;
using alerting::DynamicThresholdModel;
using alerting::DynamicThresholdOptions;
using alerting::FormatRfc3339;
using alerting::ParseDirection;
using alerting::ParseSeasonality;
using alerting::ParseSensitivity;
using alerting::Seasonality;
using alerting::Sensitivity;
using alerting::TimedValue;
using alerting::Verdict;
using alerting::ViolationWindow;

enum class Aggregation { kLast, kAvg, kMin, kMax, kP95 };
enum class CompareOp { kGt, kGe, kLt, kLe };

std::string_view AggregationName(Aggregation a);  // "last", "avg", ...
std::string_view CompareOpText(CompareOp op);     // ">", ">=", "<", "<="

struct LabelMatcher {
  std::string name;
  std::string value;
  bool equal = true;  // false: !=
};

struct StaticCondition {
  CompareOp op = CompareOp::kGt;
  double threshold = 0;
};

struct DynamicCondition {
  DynamicThresholdOptions options;            // defaults as in DynamicThresholdOptions
  int violations = 4;                         // N ... (Azure's default: 4 of 4)
  int of = 4;                                 // ... of M evaluations
  std::chrono::milliseconds learn_window{0};  // 0: 10d, or 28d for weekly/auto
};

struct Rule {
  std::string name;  // alertname
  std::string signal;
  std::vector<LabelMatcher> matchers;
  Aggregation aggregation = Aggregation::kLast;
  std::chrono::milliseconds window{0};
  bool dynamic = false;
  StaticCondition static_condition;    // when !dynamic
  DynamicCondition dynamic_condition;  // when dynamic
  std::chrono::milliseconds for_duration{0};
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string origin;  // "rules.yaml:12" (where the rule starts), for messages
};

// Parses a rules document: a map with a `rules:` list (the only top-level
// key), or the list itself. `origin` names the text in errors. Errors are
// InvalidArgument "origin:LINE: rule 'NAME': ..." for YAML syntax errors,
// unknown keys (with the valid ones), missing name/signal/condition, a bad
// selector, aggregation, op, duration, sensitivity, seasonality, direction,
// violations ("N of M" with 1 <= N <= M), an invalid label name, a template
// that is not understood, or a duplicate rule name.
Result<std::vector<Rule>> ParseRules(std::string_view yaml_text, std::string_view origin);
// The same for a loaded document or a view of one (a `rules:` list or a map
// holding one). Messages name the file and line each value was written at,
// also in a merged config.
Result<std::vector<Rule>> ParseRules(const Config& rules);
// Reads and parses a file; NotFound naming the path when it does not exist.
Result<std::vector<Rule>> LoadRulesFile(const std::string& path);
// The rules list at dotted `key` of a larger document (e.g. "alerts.rules" of
// agent.yaml, already loaded); an absent key gives no rules. Errors as
// ParseRules, plus a key that holds no list or whose parent is not a map.
Result<std::vector<Rule>> ParseRulesAt(const Config& document, std::string_view key);
// The same for a document given as text.
Result<std::vector<Rule>> ParseRulesAt(std::string_view yaml_text, std::string_view origin,
                                       std::string_view key);

// "name{a="x",b!="y"}" -> name and matchers. InvalidArgument for junk.
Status ParseSelector(std::string_view text, std::string* name, std::vector<LabelMatcher>* matchers);

// Expands {{ $labels.x }}, {{ $value }} and {{ printf "FMT" $value }} in `text`.
Result<std::string> ExpandTemplate(std::string_view text,
                                   const std::map<std::string, std::string>& labels, double value);

// Aggregates points per `a` (p95: linear interpolation between ranks, as
// Prometheus' quantile_over_time). Empty input: NaN.
double Aggregate(Aggregation a, const std::vector<Point>& points);

enum class AlertState { kInactive, kPending, kFiring, kResolved };
std::string_view AlertStateName(AlertState s);  // "inactive", "pending", "firing", "resolved"

struct AlertTransition {
  std::string rule;
  std::string series_key;  // SeriesKey of the signal series
  AlertState from = AlertState::kInactive;
  AlertState to = AlertState::kInactive;
  Alert alert;  // as of this evaluation (firing false when resolved)
};

// The transitions a notifier should be told about: those to firing and to
// resolved (pending and back to inactive are not sent, as in Prometheus).
std::vector<Alert> NotifiableAlerts(const std::vector<AlertTransition>& transitions);

// A pending or firing alert, for the dashboard.
struct ActiveAlert {
  std::string rule;
  AlertState state = AlertState::kPending;
  Alert alert;
  int64_t active_since_ms = 0;  // when the condition became true
};

class Evaluator {
 public:
  struct Options {
    // Added to every alert's labels unless the alert has them (e.g. instance).
    std::map<std::string, std::string> external_labels;
    // Put in Alert::generator_url (e.g. "http://host:9500/#alerts").
    std::string generator_url;
    // How often dynamic models are refitted (evaluation time).
    std::chrono::milliseconds refit_every = std::chrono::minutes(15);
    // Window-0 rules take the newest point no older than this.
    std::chrono::milliseconds lookback = std::chrono::minutes(5);
    // Called at the end of Evaluate (outside the evaluator's lock, on the
    // caller's thread) with NotifiableAlerts of the round when there are any,
    // e.g. [&](std::vector<Alert> a) { notifier->Notify(std::move(a)); }.
    std::function<void(std::vector<Alert>)> notify;
  };

  // `history` is not owned and must outlive the evaluator.
  Evaluator(std::vector<Rule> rules, History* history, Options options);
  Evaluator(std::vector<Rule> rules, History* history);
  ~Evaluator();

  // Evaluates every rule at `now_ms` (Unix ms; call it at a steady interval,
  // e.g. the history resolution). Returns the state changes of this round.
  // A rule whose history query fails is skipped for this round; its error is
  // kept in last_errors().
  std::vector<AlertTransition> Evaluate(int64_t now_ms);

  // Currently firing alerts (sorted by alertname, then labels).
  std::vector<Alert> Firing() const;
  // Pending and firing alerts.
  std::vector<ActiveAlert> Active() const;
  // The firing and pending alerts as the dashboard's JSON array:
  // [{"labels", "annotations", "state", "startsAt", "activeAt", "value",
  //   "generatorURL"}] (times RFC 3339).
  Json FiringJson() const;
  // Errors of the last Evaluate ("rule 'X': ..."); empty when all went well.
  std::vector<std::string> last_errors() const;

  const std::vector<Rule>& rules() const { return rules_; }

 private:
  struct SeriesState;
  struct RuleState;
  void EvaluateRule(size_t index, int64_t now_ms, std::vector<AlertTransition>* out);

  std::vector<Rule> rules_;
  History* history_;
  Options options_;
  mutable std::mutex mu_;  // guards rule_states_ and errors_ (Evaluate vs. readers)
  std::vector<std::unique_ptr<RuleState>> rule_states_;
  std::vector<std::string> errors_;
};

// Prometheus alerting rules YAML (one group "gantry-agent") equivalent to the
// static rules, over node_exporter and dcgm-exporter metric names (see
// src/agent/prom_rules.cc for the expression of each signal). Dynamic rules
// cannot be expressed in PromQL: each is listed in `skipped` (when not null)
// as "NAME: reason" and as a comment at the top of the output.
// InvalidArgument when a rule's signal has no PromQL equivalent.
Result<std::string> ExportPrometheusRules(const std::vector<Rule>& rules,
                                          std::vector<std::string>* skipped = nullptr);

// The PromQL expression (without comparison) for a rule's aggregated signal.
Result<std::string> PromQLForRule(const Rule& rule);

}  // namespace gantry::agent
