#include "anomaly.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/config.h"

namespace gantry::gateway {
namespace {

using ::testing::HasSubstr;

// ---- ParseAnomalyConfig ------------------------------------------------------------

Result<AnomalyConfig> Parse(const std::string& yaml) {
  Result<Config> c = Config::LoadString(yaml, "gateway.yaml");
  if (!c.ok()) return c.status();
  return ParseAnomalyConfig(*c, "anomaly");
}

TEST(ParseAnomalyConfig, ReadsEveryKey) {
  Result<AnomalyConfig> c = Parse(R"(# gateway
anomaly:
  window: 2m
  min_requests: 7
  signals: [latency, outputs]
  sensitivity: high
  direction: above
  seasonality: daily
  min_history: 2h
  min_samples: 40
  history: 3d
  violations: 2
  of: 4
  resolve_after: 5
  max_models: 12
  notify:
    receiver: ml
    sinks:
      - type: webhook
        url: http://127.0.0.1:5001/hook
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->window, std::chrono::minutes(2));
  EXPECT_EQ(c->min_requests, 7u);
  EXPECT_EQ(c->signals, (std::vector<Signal>{Signal::kLatency, Signal::kOutputs}));
  EXPECT_EQ(c->threshold.sensitivity, alerting::Sensitivity::kHigh);
  EXPECT_EQ(c->threshold.direction, alerting::Direction::kAbove);
  EXPECT_EQ(c->threshold.seasonality, alerting::Seasonality::kDaily);
  EXPECT_EQ(c->threshold.min_history, std::chrono::hours(2));
  EXPECT_EQ(c->threshold.min_samples, 40u);
  EXPECT_EQ(c->history, std::chrono::hours(72));
  EXPECT_EQ(c->violations, 2);
  EXPECT_EQ(c->of, 4);
  EXPECT_EQ(c->resolve_after, 5);
  EXPECT_EQ(c->max_models, 12u);
  EXPECT_EQ(c->notify.meta.receiver, "ml");
  ASSERT_EQ(c->notify.sinks.size(), 1u);
  EXPECT_EQ(c->notify.sinks[0].url, "http://127.0.0.1:5001/hook");
}

TEST(ParseAnomalyConfig, DefaultsAndAbsentSection) {
  Result<AnomalyConfig> absent = Parse("listen: 0.0.0.0:8080\n");
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_FALSE(absent->enabled);

  Result<AnomalyConfig> c = Parse("anomaly: {}\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enabled);  // present, if empty: all defaults
  EXPECT_EQ(c->window, std::chrono::minutes(1));
  Result<AnomalyConfig> d = Parse("anomaly:\n  window: 1m\n");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->enabled);
  EXPECT_EQ(d->min_requests, 5u);
  EXPECT_EQ(d->signals.size(), 5u);
  EXPECT_EQ(d->threshold.min_history, std::chrono::hours(1));  // gateway default, not 3d
  EXPECT_EQ(d->threshold.min_samples, 30u);
  EXPECT_EQ(d->history, std::chrono::hours(7 * 24));
  EXPECT_EQ(d->violations, 3);
  EXPECT_EQ(d->of, 5);
  EXPECT_EQ(d->resolve_after, 3);
  EXPECT_EQ(d->max_models, 100u);
  EXPECT_TRUE(d->notify.sinks.empty());

  Result<AnomalyConfig> off = Parse("anomaly:\n  enabled: false\n");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->enabled);
}

struct BadConfig {
  std::string line;  // the third line of the file, under "anomaly:"
  std::vector<std::string> want;
};

TEST(ParseAnomalyConfig, ErrorsNameFileLineAndKey) {
  const std::vector<BadConfig> cases = {
      {"  windw: 1m", {"gateway.yaml:3", "anomaly.windw", "did you mean 'anomaly.window'"}},
      {"  signals: [latency, latncy]",
       {"gateway.yaml:3", "unknown signal 'latncy'",
        "latency, error_rate, response_bytes, completion_tokens, outputs"}},
      {"  signals: latency", {"gateway.yaml:3", "anomaly.signals", "expected a list"}},
      {"  signals: []", {"gateway.yaml:3", "no signals listed"}},
      {"  violations: 6", {"gateway.yaml:3", "anomaly.violations", "more than of 5"}},
      {"  window: 500ms", {"gateway.yaml:3", "anomaly.window", "at least 1s"}},
      {"  window: soon", {"gateway.yaml:3", "anomaly.window"}},
      {"  min_requests: 0", {"gateway.yaml:3", "anomaly.min_requests", "between 1"}},
      {"  min_samples: 0", {"gateway.yaml:3", "anomaly.min_samples"}},
      {"  of: 0", {"gateway.yaml:3", "anomaly.of"}},
      {"  resolve_after: 0", {"gateway.yaml:3", "anomaly.resolve_after"}},
      {"  max_models: 0", {"gateway.yaml:3", "anomaly.max_models"}},
      {"  sensitivity: extreme", {"gateway.yaml:3", "anomaly.sensitivity", "low, medium or high"}},
      {"  direction: sideways", {"gateway.yaml:3", "anomaly.direction"}},
      {"  seasonality: yearly", {"gateway.yaml:3", "anomaly.seasonality"}},
      {"  history: 30m", {"gateway.yaml:3", "anomaly.history", "too short for min_history"}},
      {"  enabled: maybe", {"gateway.yaml:3", "anomaly.enabled"}},
      {"  notify: {sinks: [{type: pager}]}",
       {"gateway.yaml:3", "anomaly.notify.sinks.0", "unknown 'pager'"}},
  };
  for (const BadConfig& bc : cases) {
    Result<AnomalyConfig> c = Parse("# gateway\nanomaly:\n" + bc.line + "\n");
    ASSERT_FALSE(c.ok()) << bc.line;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << bc.line;
    for (const std::string& w : bc.want) {
      EXPECT_THAT(c.status().message(), HasSubstr(w)) << bc.line;
    }
  }
  // history must also hold min_samples windows.
  Result<AnomalyConfig> c =
      Parse("anomaly:\n  window: 1h\n  min_history: 1h\n  history: 10h\n  min_samples: 30\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("fewer than min_samples 30"));
}

// ---- KserveOutputStats -------------------------------------------------------------

const TensorStats* Find(const std::vector<TensorStats>& v, const std::string& name) {
  for (const TensorStats& t : v) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

TEST(KserveOutputStats, FlattensNestedDataPerOutput) {
  auto r = KserveOutputStats(R"({"model_name":"m","model_version":"1","outputs":[
    {"name":"probs","datatype":"FP32","shape":[2,2],"data":[[0.1,0.9],[0.3,0.7]]},
    {"data":[4,-2,1],"shape":[3],"datatype":"INT64","name":"label"},
    {"name":"big","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  const TensorStats* p = Find(*r, "probs");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->count, 4u);
  EXPECT_NEAR(p->mean, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(p->min, 0.1);
  EXPECT_DOUBLE_EQ(p->max, 0.9);
  const TensorStats* l = Find(*r, "label");  // keys in any order
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->count, 3u);
  EXPECT_NEAR(l->mean, 1.0, 1e-12);
  EXPECT_EQ(l->min, -2);
  EXPECT_EQ(l->max, 4);
  EXPECT_NE(Find(*r, "big"), nullptr);
}

TEST(KserveOutputStats, BoolCountsBytesAndNonFiniteSkipped) {
  auto r = KserveOutputStats(R"({"outputs":[
    {"name":"flags","datatype":"BOOL","shape":[4],"data":[true,false,true,true]},
    {"name":"text","datatype":"BYTES","shape":[2],"data":["a",["b"]]},
    {"name":"x","datatype":"FP64","shape":[4],"data":[1,null,3,null]},
    {"name":"allnan","datatype":"FP32","shape":[1],"data":[null]},
    {"name":"binary","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const TensorStats* f = Find(*r, "flags");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->mean, 0.75);
  EXPECT_EQ(f->min, 0);
  EXPECT_EQ(f->max, 1);
  const TensorStats* x = Find(*r, "x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->count, 2u);
  EXPECT_DOUBLE_EQ(x->mean, 2);
  EXPECT_EQ(Find(*r, "text"), nullptr);
  EXPECT_EQ(Find(*r, "allnan"), nullptr);
  EXPECT_EQ(Find(*r, "binary"), nullptr);

  // Python's encoders write NaN/Infinity; they are skipped like null, and a
  // string that merely contains the word is left alone.
  auto py = KserveOutputStats(
      R"({"id":"NaN Infinity","outputs":[{"name":"y","datatype":"FP32","data":[NaN,2,-Infinity,Infinity,4]}]})");
  ASSERT_TRUE(py.ok()) << py.status().ToString();
  ASSERT_EQ(py->size(), 1u);
  EXPECT_EQ((*py)[0].count, 2u);
  EXPECT_DOUBLE_EQ((*py)[0].mean, 3);
}

TEST(KserveOutputStats, MalformedBodiesAreInvalidArgumentNamingTheOutput) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "invalid JSON"},
      {"", "invalid JSON"},
      {R"({"outputs":[]} trailing)", "invalid JSON"},
      {"[1,2]", "not a JSON object"},
      {std::string(R"({"outputs":[]})") + '\0' + "junk", "NUL byte at offset 14"},
      {"{}", "no 'outputs'"},
      {R"({"outputs":3})", "'outputs' is not a list"},
      {R"({"outputs":[1]})", "outputs[0] is not an object"},
      {R"({"outputs":[{"name":5,"datatype":"FP32","data":[1]}]})",
       "outputs[0]: 'name' is not a string"},
      {R"({"outputs":[{"datatype":"FP32","data":[1]}]})", "outputs[0] has no 'name'"},
      {R"({"outputs":[{"name":"a","data":[1]}]})", "outputs[0] ('a') has no 'datatype'"},
      {R"({"outputs":[{"name":"a","datatype":"FLOAT","data":[1]}]})", "unknown datatype 'FLOAT'"},
      {R"({"outputs":[{"name":"a","datatype":"FP32","data":1}]})", "'data' is not a list"},
      {R"({"outputs":[{"name":"ok","datatype":"FP32","data":[1]},{"name":"b","datatype":"FP32","data":[1,"x"]}]})",
       "outputs[1] ('b'): 'data' of a FP32 tensor holds a string"},
      {R"({"outputs":[{"name":"c","datatype":"INT8","data":[{"v":1}]}]})", "holds an object"},
  };
  for (const auto& [body, want] : cases) {
    auto r = KserveOutputStats(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << body;
  }
}

TEST(KserveOutputStats, HugeNestingIsRejectedWithoutRecursion) {
  std::string deep = R"({"outputs":[{"name":"a","datatype":"FP32","data":)";
  deep += std::string(200'000, '[') + "1" + std::string(200'000, ']') + "}]}";
  auto r = KserveOutputStats(deep);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nested deeper than 40"));
  // Unclosed and in a key we do not read: same.
  auto r2 = KserveOutputStats(R"({"parameters":)" + std::string(100'000, '{'));
  EXPECT_FALSE(r2.ok());
  // A rank-8 tensor is fine.
  std::string ok = R"({"outputs":[{"name":"a","datatype":"FP32","data":)";
  ok += std::string(8, '[') + "2" + std::string(8, ']') + "}]}";
  auto r3 = KserveOutputStats(ok);
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  ASSERT_EQ(r3->size(), 1u);
  EXPECT_EQ((*r3)[0].mean, 2);
}

// ---- AnomalyDetector ---------------------------------------------------------------

// Every alert handed to the sink, in order.
struct AlertLog {
  std::mutex mu;
  std::vector<alerting::Alert> alerts;
  std::vector<alerting::Alert> Get() {
    std::lock_guard<std::mutex> l(mu);
    return alerts;
  }
};

class RecordingSink : public alerting::Sink {
 public:
  explicit RecordingSink(std::shared_ptr<AlertLog> log) : log_(std::move(log)) {}
  const std::string& name() const override { return name_; }
  Status Send(const std::vector<alerting::Alert>& alerts, int64_t) override {
    std::lock_guard<std::mutex> l(log_->mu);
    log_->alerts.insert(log_->alerts.end(), alerts.begin(), alerts.end());
    return Status::Ok();
  }

 private:
  std::shared_ptr<AlertLog> log_;
  std::string name_ = "recording";
};

constexpr int64_t kT0 = 1'800'000'000'000;  // a multiple of one minute
constexpr int64_t kMinute = 60'000;

AnomalyConfig TestConfig() {
  AnomalyConfig c;
  c.enabled = true;
  c.window = std::chrono::minutes(1);
  c.min_requests = 5;
  c.threshold.min_history = std::chrono::minutes(30);
  c.threshold.min_samples = 30;
  c.threshold.seasonality = alerting::Seasonality::kNone;
  c.violations = 3;
  c.of = 5;
  c.resolve_after = 3;
  return c;
}

// Small deterministic noise around 100 ms: 96, 98, 100, 102, 104 ms.
double Latency(int i) { return 0.100 + 0.002 * ((i * 7) % 5 - 2); }

struct Harness {
  explicit Harness(AnomalyConfig cfg = TestConfig()) : log(std::make_shared<AlertLog>()) {
    std::vector<std::unique_ptr<alerting::Sink>> sinks;
    sinks.push_back(std::make_unique<RecordingSink>(log));
    det = std::make_unique<AnomalyDetector>(cfg, &registry, clock, std::move(sinks));
  }

  // One window of `n` requests of `model`/`version`, then the close.
  AnomalyDetector::WindowSummary Window(int n, double latency_s, int errors = 0,
                                        const std::vector<TensorStats>* outputs = nullptr,
                                        const std::string& model = "llama",
                                        const std::string& version = "v2") {
    for (int i = 0; i < n; ++i) {
      OutputRecord r;
      r.model = model;
      r.version = version;
      r.latency_s = latency_s;
      r.error = i < errors;
      r.response_bytes = 1000;
      r.completion_tokens = 50;
      r.outputs = outputs;
      det->Record(r);
    }
    now += kMinute;
    return det->CloseWindow(now);
  }

  std::vector<alerting::Alert> Alerts() {
    EXPECT_TRUE(det->Flush(std::chrono::seconds(10)));
    return log->Get();
  }

  const SignalState* State(const std::string& model, const std::string& signal) {
    states = det->States();
    for (const SignalState& s : states) {
      if (s.model == model && s.signal == signal) return &s;
    }
    return nullptr;
  }

  double Gauge(const std::string& name, const std::string& signal) {
    auto g =
        registry.GetGauge(name, "", {{"model", "llama"}, {"version", "v2"}, {"signal", signal}});
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? (*g)->Value() : NAN;
  }

  FakeClock clock;
  metrics::Registry registry;
  std::shared_ptr<AlertLog> log;
  std::unique_ptr<AnomalyDetector> det;
  std::vector<SignalState> states;
  int64_t now = kT0;
};

// 40 windows of stable latency: the baseline.
void Baseline(Harness& h, int windows = 40) {
  for (int i = 0; i < windows; ++i) h.Window(10, Latency(i));
}

TEST(AnomalyDetector, LatencyStepFiresAfterThreeOfFiveWithLabelsAndWebhookShape) {
  Harness h;
  Baseline(h);
  EXPECT_TRUE(h.Alerts().empty());
  const SignalState* s = h.State("llama", "latency");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->ready) << s->not_ready_reason;
  EXPECT_EQ(s->windows, 40u);
  EXPECT_LT(s->upper, 0.12);
  EXPECT_GT(s->lower, 0.08);

  auto w = h.Window(10, 0.3);
  EXPECT_EQ(w.fired, 0u);
  h.Window(10, 0.3);
  EXPECT_TRUE(h.Alerts().empty());  // 2 of 5: not yet
  s = h.State("llama", "latency");
  EXPECT_EQ(s->recent_violations, 2);
  EXPECT_FALSE(s->firing);

  w = h.Window(10, 0.3);
  EXPECT_EQ(w.fired, 1u);
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  const alerting::Alert& a = alerts[0];
  EXPECT_TRUE(a.firing);
  EXPECT_EQ(a.labels, (std::map<std::string, std::string>{{"alertname", "GantryModelOutputAnomaly"},
                                                          {"model", "llama"},
                                                          {"version", "v2"},
                                                          {"signal", "latency"},
                                                          {"severity", "warning"}}));
  EXPECT_EQ(a.starts_at_ms, h.now);
  EXPECT_EQ(a.ends_at_ms, 0);
  EXPECT_DOUBLE_EQ(a.value, 0.3);
  EXPECT_THAT(a.annotations.at("summary"), HasSubstr("latency of model llama (v2)"));
  EXPECT_THAT(a.annotations.at("description"), HasSubstr("was 0.3 "));
  EXPECT_THAT(a.annotations.at("description"), HasSubstr("3 of the last 5"));
  EXPECT_TRUE(h.State("llama", "latency")->firing);

  alerting::WebhookMeta meta;
  meta.group_by = {"alertname"};
  std::vector<Json> payloads = alerting::WebhookPayloads(alerts, meta, h.now);
  ASSERT_EQ(payloads.size(), 1u);
  const Json& p = payloads[0];
  EXPECT_EQ(p["version"], "4");
  EXPECT_EQ(p["status"], "firing");
  EXPECT_EQ(p["commonLabels"]["alertname"], "GantryModelOutputAnomaly");
  ASSERT_EQ(p["alerts"].size(), 1u);
  EXPECT_EQ(p["alerts"][0]["labels"]["signal"], "latency");
  EXPECT_EQ(p["alerts"][0]["startsAt"], alerting::FormatRfc3339(h.now));
  EXPECT_EQ(p["alerts"][0]["endsAt"], "0001-01-01T00:00:00Z");
  EXPECT_EQ(p["alerts"][0]["fingerprint"], alerting::Fingerprint(a.labels));

  // A fourth bad window does not fire again.
  h.Window(10, 0.3);
  EXPECT_EQ(h.Alerts().size(), 1u);
}

TEST(AnomalyDetector, ResolvesAfterCleanWindowsInARow) {
  Harness h;
  Baseline(h);
  for (int i = 0; i < 3; ++i) h.Window(10, 0.3);
  ASSERT_EQ(h.Alerts().size(), 1u);
  const int64_t fired_at = h.now;
  h.Window(10, Latency(1));
  h.Window(10, Latency(2));
  EXPECT_EQ(h.Alerts().size(), 1u);  // 2 clean windows: still firing
  EXPECT_TRUE(h.State("llama", "latency")->firing);
  auto w = h.Window(10, Latency(3));
  EXPECT_EQ(w.resolved, 1u);
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  const alerting::Alert& r = alerts[1];
  EXPECT_FALSE(r.firing);
  EXPECT_EQ(r.labels, alerts[0].labels);
  EXPECT_EQ(r.starts_at_ms, fired_at);
  EXPECT_EQ(r.ends_at_ms, h.now);
  EXPECT_FALSE(h.State("llama", "latency")->firing);
  std::vector<Json> p = alerting::WebhookPayloads({r}, alerting::WebhookMeta{}, h.now + 5);
  EXPECT_EQ(p[0]["status"], "resolved");
  EXPECT_EQ(p[0]["alerts"][0]["endsAt"], alerting::FormatRfc3339(h.now));
  // One more bad window after resolving does not re-fire from old violations.
  h.Window(10, 0.3);
  EXPECT_EQ(h.Alerts().size(), 2u);
}

TEST(AnomalyDetector, SustainedStepBecomesTheNewNormalOnlyAfterFiring) {
  Harness h;
  Baseline(h);
  int fired_at = -1, resolved_at = -1, first_normal = -1;
  for (int k = 1; k <= 120; ++k) {
    auto w = h.Window(10, 0.3);
    const SignalState* s = h.State("llama", "latency");
    ASSERT_NE(s, nullptr);
    if (w.fired) {
      EXPECT_EQ(fired_at, -1) << "fired twice";
      fired_at = k;
    }
    if (w.resolved) resolved_at = k;
    if (first_normal < 0 && s->last_value <= s->upper) first_normal = k;
  }
  EXPECT_EQ(fired_at, 3);
  ASSERT_GT(first_normal, 0) << "the step never became normal";
  // Violating values are learned, so the step is absorbed -- but only once
  // it has been outside the band for about as long as the old baseline.
  EXPECT_GT(first_normal, 30);
  EXPECT_GT(first_normal, fired_at);
  EXPECT_EQ(resolved_at, first_normal + 2);  // resolve_after 3 clean windows
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_TRUE(alerts[0].firing);
  EXPECT_FALSE(alerts[1].firing);
  EXPECT_EQ(h.State("llama", "latency")->windows, 160u);
}

TEST(AnomalyDetector, NoAlertsBeforeMinimumHistory) {
  AnomalyConfig cfg = TestConfig();
  cfg.threshold.min_history = std::chrono::hours(1);  // gateway default
  Harness h(cfg);
  Baseline(h, 20);
  for (int i = 0; i < 20; ++i) h.Window(10, 5.0);
  EXPECT_TRUE(h.Alerts().empty());
  const SignalState* s = h.State("llama", "latency");
  ASSERT_NE(s, nullptr);
  EXPECT_FALSE(s->ready);
  EXPECT_THAT(s->not_ready_reason, HasSubstr("need 30"));
  EXPECT_EQ(s->windows, 40u);  // still learned
  EXPECT_EQ(s->recent_violations, 0);
}

TEST(AnomalyDetector, ErrorRateSpikeFires) {
  Harness h;
  // One error in every fourth window (5%): over the 1-point floor, but never
  // 3 of 5, so no alert.
  for (int i = 0; i < 40; ++i) h.Window(20, 0.1, i % 4 == 0 ? 1 : 0);
  EXPECT_TRUE(h.Alerts().empty());
  for (int i = 0; i < 3; ++i) h.Window(20, 0.1, 10);
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].labels.at("signal"), "error_rate");
  EXPECT_DOUBLE_EQ(alerts[0].value, 0.5);
  EXPECT_EQ(h.Gauge("gantry_gateway_anomaly_firing", "error_rate"), 1);
  EXPECT_EQ(h.Gauge("gantry_gateway_anomaly_firing", "latency"), 0);
}

TEST(AnomalyDetector, KserveOutputMeanDriftFiresOnTheOutputSignal) {
  Harness h;
  for (int i = 0; i < 40; ++i) {
    std::vector<TensorStats> out = {{"probs", 0.5 + 0.01 * ((i * 3) % 5 - 2), 0.0, 1.0, 10}};
    h.Window(10, 0.1, 0, &out);
  }
  EXPECT_TRUE(h.Alerts().empty());
  EXPECT_NE(h.State("llama", "output:probs:min"), nullptr);
  EXPECT_NE(h.State("llama", "output:probs:max"), nullptr);
  std::vector<TensorStats> drifted = {{"probs", 0.8, 0.0, 1.0, 10}};
  for (int i = 0; i < 3; ++i) h.Window(10, 0.1, 0, &drifted);
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].labels.at("signal"), "output:probs:mean");
  EXPECT_DOUBLE_EQ(alerts[0].value, 0.8);
}

TEST(AnomalyDetector, WindowsUnderMinRequestsAreSkipped) {
  Harness h;
  for (int i = 0; i < 50; ++i) {
    auto w = h.Window(4, i % 2 ? 0.1 : 9.0);
    EXPECT_EQ(w.requests, 4u);
    EXPECT_EQ(w.skipped, 1u);
    EXPECT_EQ(w.learned, 0u);
  }
  EXPECT_TRUE(h.det->States().empty());
  auto w = h.Window(5, 0.1);
  EXPECT_EQ(w.skipped, 0u);
  const SignalState* s = h.State("llama", "latency");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->windows, 1u);
  // No completion tokens reported -> no completion_tokens value.
  OutputRecord r;
  r.model = "quiet";
  r.latency_s = 0.2;
  for (int i = 0; i < 5; ++i) h.det->Record(r);
  h.now += kMinute;
  h.det->CloseWindow(h.now);
  EXPECT_NE(h.State("quiet", "latency"), nullptr);
  EXPECT_EQ(h.State("quiet", "completion_tokens"), nullptr);
}

TEST(AnomalyDetector, PairsBeyondMaxModelsAreCountedAsOther) {
  AnomalyConfig cfg = TestConfig();
  cfg.max_models = 2;
  cfg.min_requests = 1;
  Harness h(cfg);
  auto rec = [&](const char* model, const char* version, double latency) {
    OutputRecord r;
    r.model = model;
    r.version = version;
    r.latency_s = latency;
    h.det->Record(r);
  };
  rec("a", "1", 1.0);
  rec("a", "2", 2.0);  // another version is another pair
  rec("c", "", 3.0);
  rec("d", "", 5.0);
  rec("a", "1", 1.0);  // admitted pairs stay admitted
  h.now += kMinute;
  auto w = h.det->CloseWindow(h.now);
  EXPECT_EQ(w.requests, 5u);
  std::set<std::pair<std::string, std::string>> pairs;
  for (const SignalState& s : h.det->States()) pairs.insert({s.model, s.version});
  EXPECT_EQ(pairs,
            (std::set<std::pair<std::string, std::string>>{{"a", "1"}, {"a", "2"}, {"other", ""}}));
  const SignalState* other = h.State("other", "latency");
  ASSERT_NE(other, nullptr);
  EXPECT_DOUBLE_EQ(other->last_value, 4.0);  // mean of c and d
}

TEST(AnomalyDetector, ExpiredPairsAreForgottenResolvedAndFreeTheirPlace) {
  AnomalyConfig cfg = TestConfig();
  cfg.history = std::chrono::minutes(40);
  cfg.max_models = 1;
  Harness h(cfg);
  Baseline(h);
  for (int i = 0; i < 3; ++i) h.Window(10, 0.3);
  ASSERT_EQ(h.Alerts().size(), 1u);
  EXPECT_EQ(h.State("llama", "latency")->windows, 40u);  // bounded by history
  // A newcomer while llama holds the only place: "other".
  h.Window(5, 0.1, 0, nullptr, "newcomer", "");
  EXPECT_NE(h.State("other", "latency"), nullptr);
  // No traffic for longer than the history: llama is forgotten and resolved.
  h.now += 41 * kMinute;
  h.det->CloseWindow(h.now);
  EXPECT_TRUE(h.det->States().empty());
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_FALSE(alerts[1].firing);
  EXPECT_THAT(alerts[1].annotations.at("description"), HasSubstr("no traffic"));
  EXPECT_EQ(h.Gauge("gantry_gateway_anomaly_firing", "latency"), 0);
  // The place is free again.
  h.Window(5, 0.1, 0, nullptr, "newcomer", "");
  EXPECT_NE(h.State("newcomer", "latency"), nullptr);
  EXPECT_EQ(h.State("other", "latency"), nullptr);
}

TEST(AnomalyDetector, MetricsFollowWindowsAndAlerts) {
  Harness h;
  Baseline(h);
  for (int i = 0; i < 3; ++i) h.Window(10, 0.3);
  const SignalState* s = h.State("llama", "latency");
  ASSERT_NE(s, nullptr);
  EXPECT_DOUBLE_EQ(h.Gauge("gantry_gateway_anomaly_value", "latency"), 0.3);
  EXPECT_DOUBLE_EQ(h.Gauge("gantry_gateway_anomaly_band_lower", "latency"), s->lower);
  EXPECT_DOUBLE_EQ(h.Gauge("gantry_gateway_anomaly_band_upper", "latency"), s->upper);
  EXPECT_LT(s->upper, 0.3);
  EXPECT_EQ(h.Gauge("gantry_gateway_anomaly_firing", "latency"), 1);
  EXPECT_DOUBLE_EQ(h.Gauge("gantry_gateway_anomaly_value", "response_bytes"), 1000);
  EXPECT_DOUBLE_EQ(h.Gauge("gantry_gateway_anomaly_value", "completion_tokens"), 50);
  std::string text = h.registry.Render();
  EXPECT_THAT(
      text, HasSubstr("gantry_gateway_anomaly_alerts_total{model=\"llama\",signal=\"latency\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE gantry_gateway_anomaly_firing gauge"));
}

TEST(AnomalyDetector, ConcurrentRecordWhileClosingLosesNothing) {
  AnomalyConfig cfg = TestConfig();
  cfg.min_requests = 1;
  Harness h(cfg);
  constexpr int kThreads = 4, kPerThread = 100'000;
  std::atomic<int> done{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<TensorStats> out = {{"y", 1, 0, 2, 3}};
      while (!go.load()) std::this_thread::yield();  // all at once, for contention
      for (int i = 0; i < kPerThread; ++i) {
        std::string model = "m" + std::to_string((t + i) % 8);
        OutputRecord r;
        r.model = model;
        r.version = i % 2 ? "1" : "2";
        r.latency_s = 0.01;
        r.outputs = &out;
        h.det->Record(r);
      }
      done.fetch_add(1);
    });
  }
  uint64_t total = 0;
  int closes = 0;
  go.store(true);
  while (done.load() < kThreads) {
    h.now += kMinute;
    total += h.det->CloseWindow(h.now).requests;
    ++closes;
  }
  for (std::thread& t : threads) t.join();
  h.now += kMinute;
  total += h.det->CloseWindow(h.now).requests;
  EXPECT_EQ(total, uint64_t{kThreads} * kPerThread) << "over " << closes << " closes";
  for (const SignalState& s : h.det->States()) {
    if (s.signal == "latency") {
      EXPECT_NEAR(s.last_value, 0.01, 1e-12) << s.model;
    }
    if (s.signal == "output:y:max") {
      EXPECT_NEAR(s.last_value, 2, 1e-12) << s.model;
    }
  }
}

TEST(AnomalyDetector, ReconfigureKeepsHistoryAndResolvesDroppedSignals) {
  Harness h;
  Baseline(h);
  for (int i = 0; i < 3; ++i) h.Window(10, 0.3);
  ASSERT_EQ(h.Alerts().size(), 1u);
  AnomalyConfig cfg = TestConfig();
  cfg.signals = {Signal::kErrorRate};
  cfg.violations = 1;
  cfg.of = 1;
  ASSERT_TRUE(h.det->Reconfigure(cfg).ok());
  std::vector<alerting::Alert> alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  EXPECT_FALSE(alerts[1].firing);
  EXPECT_EQ(alerts[1].labels.at("signal"), "latency");
  EXPECT_THAT(alerts[1].annotations.at("summary"), HasSubstr("no longer watched"));
  EXPECT_EQ(h.State("llama", "latency"), nullptr);
  const SignalState* e = h.State("llama", "error_rate");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->windows, 43u);  // learned history kept
  // The new N of M applies at once: one bad window fires.
  h.Window(10, 0.1, 8);
  alerts = h.Alerts();
  ASSERT_EQ(alerts.size(), 3u);
  EXPECT_EQ(alerts[2].labels.at("signal"), "error_rate");

  AnomalyConfig bad = cfg;
  bad.violations = 4;
  EXPECT_FALSE(h.det->Reconfigure(bad).ok());
}

TEST(AnomalyDetector, ThreadClosesWindowsAndStopsPromptly) {
  AnomalyConfig cfg = TestConfig();
  cfg.window = std::chrono::seconds(1);
  cfg.min_requests = 1;
  auto det = AnomalyDetector::Create(cfg, nullptr);
  ASSERT_TRUE(det.ok()) << det.status().ToString();
  (*det)->Start();
  (*det)->Start();  // idempotent
  bool closed = false;
  for (int i = 0; i < 400 && !closed; ++i) {  // up to ~20 s
    OutputRecord r;
    r.model = "live";
    r.latency_s = 0.05;
    (*det)->Record(r);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const SignalState& s : (*det)->States()) closed = closed || s.model == "live";
  }
  EXPECT_TRUE(closed) << "no window was closed by the thread";
  det->reset();  // joins the thread (a long sleep would hang the test)

  cfg.window = std::chrono::hours(1);
  auto slow = AnomalyDetector::Create(cfg, nullptr);
  ASSERT_TRUE(slow.ok());
  (*slow)->Start();
  slow->reset();  // must not wait for the hour
}

TEST(AnomalyDetector, CreateNamesABadSink) {
  AnomalyConfig cfg = TestConfig();
  alerting::SinkConfig s;
  s.type = alerting::SinkType::kWebhook;
  s.name = "hook";
  s.url = "https://example.com/";  // http_client speaks plain http only
  cfg.notify.sinks.push_back(s);
  auto det = AnomalyDetector::Create(cfg, nullptr);
  ASSERT_FALSE(det.ok());
  EXPECT_THAT(det.status().message(), HasSubstr("anomaly.notify"));
}

}  // namespace
}  // namespace gantry::gateway
