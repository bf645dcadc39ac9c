#include "gantry/agent/rules.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "gantry/core/clock.h"

namespace gantry::agent {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = 60 * kMin;
constexpr int64_t kDay = 24 * kHour;
// 2026-11-30 00:00:00 UTC.
constexpr int64_t kT0 = 1'795'996'800'000;

std::vector<Rule> MustParse(const std::string& yaml) {
  auto r = ParseRules(yaml, "rules.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Rule>{};
}

std::string ParseError(const std::string& yaml) {
  auto r = ParseRules(yaml, "rules.yaml");
  EXPECT_FALSE(r.ok()) << yaml;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// A fake wall clock in Unix ms that the tests advance by hand (no sleeps).
struct Time {
  FakeClock clock{std::chrono::seconds(1),
                  std::chrono::system_clock::time_point(std::chrono::milliseconds(kT0))};
  int64_t now() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
        .count();
  }
  void Advance(int64_t ms) { clock.Advance(std::chrono::milliseconds(ms)); }
};

std::unique_ptr<History> MemHistory(seconds resolution = seconds(60)) {
  HistoryOptions o;
  o.resolution = resolution;
  o.retention = std::chrono::hours(24 * 60);
  auto h = History::Open(":memory:", o);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return std::move(h).value();
}

TEST(AlertRules, FullRule) {
  auto rules = MustParse(R"(
rules:
  - name: GpuHot
    signal: 'gpu_temperature_celsius{gpu!="3", gpu="1"}'
    aggregation: max
    window: 5m
    condition: {op: ">=", threshold: 85.5}
    for: 10m
    labels: {severity: critical}
    annotations:
      summary: 'GPU {{ $labels.gpu }} at {{ $value }} C'
  - name: NetAnomaly
    signal: network_receive_bytes_per_second
    aggregation: p95
    window: 10m
    condition:
      dynamic:
        sensitivity: high
        direction: above
        min_history: 2d
        min_samples: 50
        seasonality: daily
        violations: 3 of 5
        learn_window: 7d
  - name: DiskFull
    signal: filesystem_used_percent
    condition: "> 90"
)");
  ASSERT_EQ(rules.size(), 3u);
  const Rule& g = rules[0];
  EXPECT_EQ(g.name, "GpuHot");
  EXPECT_EQ(g.signal, "gpu_temperature_celsius");
  ASSERT_EQ(g.matchers.size(), 2u);
  EXPECT_EQ(g.matchers[0].name, "gpu");
  EXPECT_EQ(g.matchers[0].value, "3");
  EXPECT_FALSE(g.matchers[0].equal);
  EXPECT_TRUE(g.matchers[1].equal);
  EXPECT_EQ(g.aggregation, Aggregation::kMax);
  EXPECT_EQ(g.window, minutes(5));
  EXPECT_FALSE(g.dynamic);
  EXPECT_EQ(g.static_condition.op, CompareOp::kGe);
  EXPECT_DOUBLE_EQ(g.static_condition.threshold, 85.5);
  EXPECT_EQ(g.for_duration, minutes(10));
  EXPECT_EQ(g.labels.at("severity"), "critical");
  EXPECT_EQ(g.origin, "rules.yaml:3");

  const Rule& n = rules[1];
  EXPECT_TRUE(n.dynamic);
  EXPECT_EQ(n.aggregation, Aggregation::kP95);
  const DynamicCondition& d = n.dynamic_condition;
  EXPECT_EQ(d.options.sensitivity, Sensitivity::kHigh);
  EXPECT_EQ(d.options.direction, Direction::kAbove);
  EXPECT_EQ(d.options.min_history, std::chrono::hours(48));
  EXPECT_EQ(d.options.min_samples, 50u);
  EXPECT_EQ(d.options.seasonality, Seasonality::kDaily);
  EXPECT_EQ(d.violations, 3);
  EXPECT_EQ(d.of, 5);
  EXPECT_EQ(d.learn_window, std::chrono::hours(24 * 7));

  EXPECT_EQ(rules[2].static_condition.op, CompareOp::kGt);
  EXPECT_DOUBLE_EQ(rules[2].static_condition.threshold, 90);
  EXPECT_EQ(rules[2].aggregation, Aggregation::kLast);
}

TEST(AlertRules, BareListAndEmptyDocument) {
  EXPECT_EQ(MustParse("- {name: A, signal: load1, condition: '> 4'}\n").size(), 1u);
  EXPECT_TRUE(MustParse("").empty());
  EXPECT_TRUE(MustParse("rules: []\n").empty());
}

TEST(AlertRules, ErrorsNameLineRuleAndFix) {
  std::string e = ParseError(R"(rules:
  - name: A
    signal: load1
    condition: "> 4"
    severity: high
)");
  EXPECT_NE(e.find("rules.yaml:5"), std::string::npos) << e;
  EXPECT_NE(e.find("rule 'A'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'severity'"), std::string::npos) << e;
  EXPECT_NE(e.find("valid keys: name, signal"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition: {op: '=>', threshold: 1}\n");
  EXPECT_NE(e.find("rules.yaml:4"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown op '=>'"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition: '> 4'\n    for: 5 minutes\n");
  EXPECT_NE(e.find("rules.yaml:5"), std::string::npos) << e;
  EXPECT_NE(e.find("'for'"), std::string::npos) << e;

  e = ParseError("rules:\n  - name: A\n    signal: cpu_utilisation\n    condition: '> 4'\n");
  EXPECT_NE(e.find("unknown signal 'cpu_utilisation'"), std::string::npos) << e;
  EXPECT_NE(e.find("cpu_utilization"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: 'gpu_utilization{gpu=~\"1\"}'\n    condition: '> 4'\n");
  EXPECT_NE(e.find("regular expression"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition: '> 4'\n"
      "    annotations: {summary: '{{ $labels }}'}\n");
  EXPECT_NE(e.find("rules.yaml:5"), std::string::npos) << e;
  EXPECT_NE(e.find("not supported"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - {name: A, signal: load1, condition: '> 4'}\n"
      "  - {name: A, signal: load1, condition: '> 5'}\n");
  EXPECT_NE(e.find("rules.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("duplicate"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition:\n      dynamic:\n"
      "        violations: 5 of 3\n");
  EXPECT_NE(e.find("rules.yaml:6"), std::string::npos) << e;
  EXPECT_NE(e.find("N of M"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition:\n      dynamic: {seasonality: "
      "monthly}\n");
  EXPECT_NE(e.find("auto, none, hourly, daily or weekly"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    aggregation: avg\n    condition: '> 1'\n");
  EXPECT_NE(e.find("needs a window"), std::string::npos) << e;

  e = ParseError("rules:\n  - name: A\n    signal: load1\n");
  EXPECT_NE(e.find("missing 'condition'"), std::string::npos) << e;

  e = ParseError("rules:\n  - name: A\n    signal: [load1\n");
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;

  e = ParseError("groups: []\n");
  EXPECT_NE(e.find("unknown top-level key 'groups'"), std::string::npos) << e;

  e = ParseError(
      "rules:\n  - name: A\n    signal: load1\n    condition: '> 1'\n    labels: {alertname: x}\n");
  EXPECT_NE(e.find("alertname"), std::string::npos) << e;
}

TEST(AlertRules, RulesInsideALargerDocument) {
  const std::string agent_yaml = R"(listen: ":9500"
alerts:
  rules:
    - {name: A, signal: load1, condition: '> 4'}
    - {name: B, signal: load1, condition: '> 4', bogus: 1}
)";
  auto r = ParseRulesAt(agent_yaml, "agent.yaml", "alerts.rules");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("agent.yaml:5: rule 'B': unknown key 'bogus'"),
            std::string::npos)
      << r.status().message();
  auto ok = ParseRulesAt("alerts:\n  rules:\n    - {name: A, signal: load1, condition: '> 4'}\n",
                         "agent.yaml", "alerts.rules");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 1u);
  auto none = ParseRulesAt("listen: x\n", "agent.yaml", "alerts.rules");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = ParseRulesAt("alerts: 3\n", "agent.yaml", "alerts.rules");
  EXPECT_FALSE(bad.ok());
}

TEST(AlertRules, ParseRulesOfALoadedDocumentLeavesTheDocumentAlone) {
  auto doc =
      Config::LoadString("rules:\n  - {name: A, signal: load1, condition: '> 4'}\n", "inline");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto r = ParseRules(*doc);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 1u);
  EXPECT_TRUE(doc->IsMap(""));
  EXPECT_TRUE(doc->IsList("rules"));
}

TEST(AlertRules, UnknownKeysSuggestTheClosestValidKey) {
  std::string e = ParseError("rules:\n  - name: A\n    signal: load1\n    condtion: '> 4'\n");
  EXPECT_NE(e.find("rules.yaml:4: rule 'A': unknown key 'condtion' in a rule (did you mean "
                   "'condition'?); valid keys: name, signal"),
            std::string::npos)
      << e;
}

TEST(AlertRules, RulesOfAMergedConfigNameTheFileEachValueCameFrom) {
  auto base = Config::LoadString(
      "alerts:\n  rules:\n    - {name: A, signal: load1, condition: '> 4'}\n", "agent.yaml");
  auto site = Config::LoadString(
      "# site\nalerts:\n  rules:\n    - {name: A, signal: load1, condition: '> 4'}\n"
      "    - {name: B, signal: load1, condition: '> 4', for: soon}\n",
      "site.yaml");
  ASSERT_TRUE(base.ok() && site.ok());
  auto r = ParseRulesAt(base->Merge(*site), "alerts.rules");  // the list is replaced
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("site.yaml:5: rule 'B': 'for'"), std::string::npos)
      << r.status().message();
  auto ok = ParseRulesAt(*base, "alerts.rules");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].origin, "agent.yaml:3");
}

TEST(AlertRules, LoadRulesFileNamesMissingPath) {
  auto r = LoadRulesFile("/nonexistent/gantry-rules.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/gantry-rules.yaml"), std::string::npos);
}

TEST(AlertRules, ExampleFileParses) {
  auto r = LoadRulesFile(std::string(GANTRY_SOURCE_DIR) + "/examples/agent/rules.yaml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->size(), 6u);
  bool dynamic = false;
  for (const Rule& rule : *r) dynamic = dynamic || rule.dynamic;
  EXPECT_TRUE(dynamic);
}

TEST(AlertSelector, ParsesAndRejects) {
  std::string name;
  std::vector<LabelMatcher> m;
  ASSERT_TRUE(ParseSelector("load1", &name, &m).ok());
  EXPECT_EQ(name, "load1");
  EXPECT_TRUE(m.empty());
  ASSERT_TRUE(
      ParseSelector(R"( filesystem_used_percent{ mountpoint = "/a\"b" , x!=""} )", &name, &m).ok());
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].value, "/a\"b");
  EXPECT_FALSE(m[1].equal);
  EXPECT_FALSE(ParseSelector("a{b=\"c\"", &name, &m).ok());
  EXPECT_FALSE(ParseSelector("a{b=c}", &name, &m).ok());
  EXPECT_FALSE(ParseSelector("{b=\"c\"}", &name, &m).ok());
  EXPECT_FALSE(ParseSelector("a{b=\"c\"} x", &name, &m).ok());
}

TEST(AlertTemplate, LabelsValueAndPrintf) {
  std::map<std::string, std::string> labels{{"gpu", "3"}, {"alertname", "GpuHot"}};
  auto s = ExpandTemplate(
      "{{$labels.alertname}}: GPU {{ $labels.gpu }}{{ $labels.none }} at "
      "{{ $value }} ({{ printf \"%.1f\" $value }})",
      labels, 91.256);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, "GpuHot: GPU 3 at 91.256 (91.3)");
  EXPECT_EQ(*ExpandTemplate("{{ $value }}", {}, 123456789.0), "123456789");
  EXPECT_FALSE(ExpandTemplate("{{ printf \"%s\" $value }}", {}, 1).ok());
  EXPECT_FALSE(ExpandTemplate("{{ $value", {}, 1).ok());
  EXPECT_FALSE(ExpandTemplate("{{ .Value }}", {}, 1).ok());
}

TEST(AlertAggregate, Functions) {
  std::vector<Point> p;
  for (int i = 1; i <= 21; ++i) p.push_back({i * 1000, static_cast<double>(i)});
  EXPECT_DOUBLE_EQ(Aggregate(Aggregation::kAvg, p), 11);
  EXPECT_DOUBLE_EQ(Aggregate(Aggregation::kMin, p), 1);
  EXPECT_DOUBLE_EQ(Aggregate(Aggregation::kMax, p), 21);
  EXPECT_DOUBLE_EQ(Aggregate(Aggregation::kLast, p), 21);
  EXPECT_DOUBLE_EQ(Aggregate(Aggregation::kP95, p), 20);  // rank 0.95 * 20 = 19 -> value 20
  EXPECT_TRUE(std::isnan(Aggregate(Aggregation::kAvg, {})));
}

// ---- Evaluator --------------------------------------------------------------

TEST(AlertEvaluator, PendingThenFiringAfterForThenResolved) {
  Time t;
  auto h = MemHistory();
  auto rules = MustParse(R"(
rules:
  - name: GpuHot
    signal: 'gpu_temperature_celsius{gpu!="1"}'
    condition: "> 85"
    for: 3m
    labels: {severity: critical}
    annotations: {summary: 'GPU {{ $labels.gpu }} is {{ $value }} C on {{ $labels.instance }}'}
)");
  Evaluator::Options opt;
  opt.external_labels = {{"instance", "node-7"}};
  opt.generator_url = "http://node-7:9500/#alerts";
  Evaluator ev(rules, h.get(), opt);

  auto tick = [&](double gpu0, double gpu1) {
    EXPECT_TRUE(h->Append(t.now(), {{"gpu_temperature_celsius", {{"gpu", "0"}}, gpu0},
                                    {"gpu_temperature_celsius", {{"gpu", "1"}}, gpu1}})
                    .ok());
    auto tr = ev.Evaluate(t.now());
    EXPECT_TRUE(ev.last_errors().empty());
    return tr;
  };

  EXPECT_TRUE(tick(70, 99).empty()) << "gpu 1 is excluded by the != matcher";
  t.Advance(kMin);
  auto tr = tick(90, 99);
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].from, AlertState::kInactive);
  EXPECT_EQ(tr[0].to, AlertState::kPending);
  EXPECT_TRUE(NotifiableAlerts(tr).empty());
  EXPECT_TRUE(ev.Firing().empty());
  const int64_t active_at = t.now();
  ASSERT_EQ(ev.Active().size(), 1u);
  EXPECT_EQ(ev.Active()[0].state, AlertState::kPending);

  t.Advance(kMin);
  EXPECT_TRUE(tick(91, 99).empty());  // 1 minute of 3
  t.Advance(kMin);
  EXPECT_TRUE(tick(92, 99).empty());  // 2 minutes of 3
  t.Advance(kMin);
  tr = tick(93, 99);  // 3 minutes: fires
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].from, AlertState::kPending);
  EXPECT_EQ(tr[0].to, AlertState::kFiring);
  auto firing = ev.Firing();
  ASSERT_EQ(firing.size(), 1u);
  const Alert& a = firing[0];
  EXPECT_TRUE(a.firing);
  EXPECT_EQ(a.labels.at("alertname"), "GpuHot");
  EXPECT_EQ(a.labels.at("gpu"), "0");
  EXPECT_EQ(a.labels.at("severity"), "critical");
  EXPECT_EQ(a.labels.at("instance"), "node-7");
  EXPECT_EQ(a.annotations.at("summary"), "GPU 0 is 93 C on node-7");
  EXPECT_EQ(a.starts_at_ms, t.now());
  EXPECT_EQ(a.ends_at_ms, 0);
  EXPECT_DOUBLE_EQ(a.value, 93);
  EXPECT_EQ(a.generator_url, "http://node-7:9500/#alerts");
  EXPECT_EQ(ev.Active()[0].active_since_ms, active_at);
  const int64_t fired_at = t.now();

  // Still firing: no transition, the value and annotation follow the data.
  t.Advance(kMin);
  EXPECT_TRUE(tick(95, 99).empty());
  EXPECT_EQ(ev.Firing()[0].annotations.at("summary"), "GPU 0 is 95 C on node-7");
  EXPECT_EQ(ev.Firing()[0].starts_at_ms, fired_at);

  Json j = ev.FiringJson();
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["state"], "firing");
  EXPECT_EQ(j[0]["labels"]["alertname"], "GpuHot");
  EXPECT_EQ(j[0]["startsAt"], "2026-11-30T00:04:00.000Z");
  EXPECT_EQ(j[0]["activeAt"], "2026-11-30T00:01:00.000Z");
  EXPECT_EQ(j[0]["generatorURL"], "http://node-7:9500/#alerts");

  t.Advance(kMin);
  tr = tick(80, 99);
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].from, AlertState::kFiring);
  EXPECT_EQ(tr[0].to, AlertState::kResolved);
  EXPECT_FALSE(tr[0].alert.firing);
  EXPECT_EQ(tr[0].alert.starts_at_ms, fired_at);
  EXPECT_EQ(tr[0].alert.ends_at_ms, t.now());
  EXPECT_EQ(NotifiableAlerts(tr).size(), 1u);
  EXPECT_TRUE(ev.Firing().empty());
  EXPECT_TRUE(ev.Active().empty());
}

TEST(AlertEvaluator, NotifyCallbackGetsFiringAndResolvedOnly) {
  Time t;
  auto h = MemHistory();
  std::vector<std::vector<Alert>> batches;
  Evaluator::Options opt;
  opt.notify = [&](std::vector<Alert> a) { batches.push_back(std::move(a)); };
  Evaluator ev(MustParse("- {name: Load, signal: load1, condition: '> 4', for: 1m}\n"), h.get(),
               opt);
  for (double v : {8.0, 8.0, 8.0, 1.0}) {
    ASSERT_TRUE(h->Append(t.now(), {{"load1", {}, v}}).ok());
    ev.Evaluate(t.now());
    t.Advance(kMin);
  }
  // pending (not sent), firing, still firing (nothing), resolved.
  ASSERT_EQ(batches.size(), 2u);
  ASSERT_EQ(batches[0].size(), 1u);
  EXPECT_TRUE(batches[0][0].firing);
  EXPECT_EQ(batches[0][0].labels.at("alertname"), "Load");
  ASSERT_EQ(batches[1].size(), 1u);
  EXPECT_FALSE(batches[1][0].firing);
  EXPECT_GT(batches[1][0].ends_at_ms, batches[1][0].starts_at_ms);
}

TEST(AlertEvaluator, PendingGoesBackToInactive) {
  Time t;
  auto h = MemHistory();
  Evaluator ev(MustParse("- {name: Load, signal: load1, condition: '> 4', for: 5m}\n"), h.get());
  ASSERT_TRUE(h->Append(t.now(), {{"load1", {}, 8}}).ok());
  auto tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].to, AlertState::kPending);
  t.Advance(kMin);
  ASSERT_TRUE(h->Append(t.now(), {{"load1", {}, 1}}).ok());
  tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].from, AlertState::kPending);
  EXPECT_EQ(tr[0].to, AlertState::kInactive);
  EXPECT_TRUE(NotifiableAlerts(tr).empty());
  // A new pending period starts from scratch.
  t.Advance(kMin);
  ASSERT_TRUE(h->Append(t.now(), {{"load1", {}, 8}}).ok());
  EXPECT_EQ(ev.Evaluate(t.now())[0].to, AlertState::kPending);
  EXPECT_EQ(ev.Active()[0].active_since_ms, t.now());
}

TEST(AlertEvaluator, ZeroForFiresAtOnceAndVanishedSeriesResolves) {
  Time t;
  auto h = MemHistory();
  Evaluator ev(MustParse("- {name: Xid, signal: gpu_xid_errors, condition: '> 0'}\n"), h.get());
  ASSERT_TRUE(h->Append(t.now(), {{"gpu_xid_errors", {{"gpu", "2"}}, 79}}).ok());
  auto tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].from, AlertState::kInactive);
  EXPECT_EQ(tr[0].to, AlertState::kFiring);
  EXPECT_EQ(ev.Firing().size(), 1u);
  // No new points: after the 5-minute lookback the series has no value.
  t.Advance(4 * kMin);
  EXPECT_TRUE(ev.Evaluate(t.now()).empty());
  t.Advance(2 * kMin);
  tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].to, AlertState::kResolved);
  EXPECT_EQ(tr[0].alert.labels.at("gpu"), "2");
}

TEST(AlertEvaluator, WindowAggregation) {
  Time t;
  auto h = MemHistory();
  Evaluator ev(MustParse("- {name: Cpu, signal: cpu_utilization, aggregation: avg, window: 5m, "
                         "condition: '> 80'}\n"),
               h.get());
  // One spike of 100 among 50s: the 5-minute average stays below 80.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(h->Append(t.now(), {{"cpu_utilization", {}, i == 4 ? 100.0 : 50.0}}).ok());
    EXPECT_TRUE(ev.Evaluate(t.now()).empty());
    t.Advance(kMin);
  }
  // Then 100s: the window [now-5m, now] holds 6 points at 1-minute resolution.
  // Minute 5: (4*50 + 2*100)/6 = 66.7, minute 6: 75, minute 7: 83.3 -> fires.
  for (int minute = 5; minute <= 7; ++minute) {
    ASSERT_TRUE(h->Append(t.now(), {{"cpu_utilization", {}, 100}}).ok());
    auto tr = ev.Evaluate(t.now());
    if (minute < 7) {
      EXPECT_TRUE(tr.empty()) << minute;
    } else {
      ASSERT_EQ(tr.size(), 1u);
      EXPECT_EQ(tr[0].to, AlertState::kFiring);
      EXPECT_NEAR(tr[0].alert.value, (2 * 50.0 + 4 * 100) / 6, 1e-9);
    }
    t.Advance(kMin);
  }
}

// Noise in [-2, 2], deterministic.
double Noise(int64_t i) {
  uint64_t z = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
  z ^= z >> 29;
  return static_cast<double>(z % 4001) / 1000.0 - 2.0;
}

TEST(AlertEvaluator, DynamicWaitsForMinHistoryThenNofM) {
  Time t;
  auto h = MemHistory();
  Evaluator ev(MustParse(R"(
- name: NetAnomaly
  signal: network_receive_bytes_per_second
  condition:
    dynamic: {min_history: 1h, min_samples: 30, seasonality: none, violations: 2 of 3}
)"),
               h.get());
  auto put = [&](double v, int64_t i) {
    ASSERT_TRUE(
        h->Append(t.now(),
                  {{"network_receive_bytes_per_second", {{"device", "eth0"}}, v + Noise(i)}})
            .ok());
  };
  int64_t i = 0;
  // 40 minutes of ~1000 B/s, then a spike: too little history, no alert.
  for (; i < 40; ++i, t.Advance(kMin)) {
    put(1000, i);
    EXPECT_TRUE(ev.Evaluate(t.now()).empty());
  }
  for (int k = 0; k < 3; ++k, ++i, t.Advance(kMin)) {
    put(5000, i);
    EXPECT_TRUE(ev.Evaluate(t.now()).empty()) << "no dynamic alert before min_history";
  }
  // Normal traffic until well past an hour of history.
  for (; i < 100; ++i, t.Advance(kMin)) {
    put(1000, i);
    EXPECT_TRUE(ev.Evaluate(t.now()).empty()) << i;
  }
  // First violation: 1 of 3, nothing yet.
  put(5000, i++);
  EXPECT_TRUE(ev.Evaluate(t.now()).empty());
  t.Advance(kMin);
  // Second: 2 of 3 -> firing (for is 0).
  put(5000, i++);
  auto tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].to, AlertState::kFiring);
  EXPECT_EQ(tr[0].alert.labels.at("device"), "eth0");
  t.Advance(kMin);
  // Back to normal: T T F still holds 2 of 3; T F F resolves.
  put(1000, i++);
  EXPECT_TRUE(ev.Evaluate(t.now()).empty());
  t.Advance(kMin);
  put(1000, i++);
  tr = ev.Evaluate(t.now());
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].to, AlertState::kResolved);
  // A dip is an anomaly too (direction both by default).
  t.Advance(kMin);
  put(10, i++);
  EXPECT_TRUE(ev.Evaluate(t.now()).empty());
  t.Advance(kMin);
  put(10, i++);
  ASSERT_EQ(ev.Evaluate(t.now()).size(), 1u);
}

TEST(AlertEvaluator, SeasonalityPicksTheHourBucket) {
  Time t;
  auto h = MemHistory(seconds(300));
  // Four days: quiet at night (UTC 00-11: 10%), busy by day (12-23: 90%).
  int64_t i = 0;
  for (; t.now() < kT0 + 4 * kDay; t.Advance(5 * kMin), ++i) {
    int hour = static_cast<int>((t.now() % kDay) / kHour);
    ASSERT_TRUE(
        h->Append(t.now(),
                  {{"gpu_utilization", {{"gpu", "0"}}, (hour < 12 ? 10.0 : 90.0) + Noise(i)}})
            .ok());
  }
  auto rules = MustParse(R"(
- name: GpuUnusual
  signal: gpu_utilization
  condition:
    dynamic: {min_history: 3d, seasonality: daily, violations: 1 of 1}
- name: GpuUnusualFlat
  signal: gpu_utilization
  condition:
    dynamic: {min_history: 3d, seasonality: none, violations: 1 of 1}
- name: GpuUnusualAuto
  signal: gpu_utilization
  condition:
    dynamic: {min_history: 3d, seasonality: auto, violations: 1 of 1}
)");
  Evaluator ev(rules, h.get());
  // 90% at 03:00 is unusual for the hour, though normal for the day as a whole.
  t.Advance(3 * kHour);
  ASSERT_TRUE(h->Append(t.now(), {{"gpu_utilization", {{"gpu", "0"}}, 90}}).ok());
  auto tr = ev.Evaluate(t.now());
  std::set<std::string> fired;
  for (const auto& x : tr) {
    if (x.to == AlertState::kFiring) fired.insert(x.rule);
  }
  EXPECT_EQ(fired, (std::set<std::string>{"GpuUnusual", "GpuUnusualAuto"}));
  // 90% at 15:00 is normal for that hour.
  t.Advance(12 * kHour);
  ASSERT_TRUE(h->Append(t.now(), {{"gpu_utilization", {{"gpu", "0"}}, 90}}).ok());
  tr = ev.Evaluate(t.now());
  for (const auto& x : tr) EXPECT_EQ(x.to, AlertState::kResolved) << x.rule;
  EXPECT_TRUE(ev.Firing().empty());
}

TEST(AlertEvaluator, HistoryErrorsAreReportedNotFatal) {
  Evaluator ev(MustParse("- {name: Load, signal: load1, condition: '> 4'}\n"), nullptr);
  EXPECT_TRUE(ev.Evaluate(kT0).empty());
  ASSERT_EQ(ev.last_errors().size(), 1u);
  EXPECT_NE(ev.last_errors()[0].find("rule 'Load'"), std::string::npos);
}

}  // namespace
}  // namespace gantry::agent
