// Custom metrics against the contract server (tests/monitor/
// logs_ingestion_server.js, op "metrics"): the published body shape,
// per-minute and per-dimension-set aggregation, series cut per call,
// retries after Retry-After, a minute kept when retries run out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gantry/monitor/custom_metrics.h"
#include "monitor_test_support.h"

namespace gantry::monitor {
namespace {

using namespace std::chrono_literals;
using namespace ::gantry::monitor::testing;

constexpr char kResource[] =
    "/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachines/vm-1";

class CustomMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = NodeMissing("@azure/monitor-ingestion");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  }
  std::unique_ptr<NodeServer> Serve(std::vector<std::string> extra = {}) {
    auto s = ServeLogs(dir_.Path("rec.jsonl"), std::move(extra));
    EXPECT_TRUE(s->ok()) << s->error();
    return s;
  }
  std::vector<Json> Posted() { return OfOp(ReadRecords(dir_.Path("rec.jsonl")), "metrics"); }
  std::unique_ptr<CustomMetrics> New(const NodeServer& server, size_t per_call = 50,
                                     int attempts = 4) {
    CustomMetricsOptions o;
    o.endpoint = server.url();
    o.resource_id = kResource;
    o.max_series_per_call = per_call;
    o.max_attempts = attempts;
    security::AzureCredentialOptions cred = EnvCredential();
    cred.resource = kCustomMetricsResource;
    auto tokens = security::NewAzureTokenSource(cred, clock_);
    EXPECT_TRUE(tokens.ok());
    auto m = CustomMetrics::Create(o, std::move(*tokens), clock_);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return m.ok() ? std::move(*m) : nullptr;
  }
  std::chrono::system_clock::time_point T(int minute, int second) {
    return std::chrono::system_clock::time_point(std::chrono::minutes(29'600'000 + minute) +
                                                 std::chrono::seconds(second));
  }
  ::gantry::testing::TempDir dir_{"gantry-metrics-test"};
  FakeClock clock_;
};

TEST_F(CustomMetricsTest, PostsOneAggregatePerMinuteAndDimensionSet) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  auto m = New(*server);
  ASSERT_NE(m, nullptr);
  m->Record({"drift_share", "gantry/drift", {{"model", "m1"}}, 0.1}, T(0, 5));
  m->Record({"drift_share", "gantry/drift", {{"model", "m1"}}, 0.3}, T(0, 50));
  m->Record({"drift_share", "gantry/drift", {{"model", "m2"}}, 0.5}, T(0, 20));
  m->Record({"drift_share", "gantry/drift", {{"model", "m1"}}, 0.7}, T(1, 1));  // next minute
  ASSERT_TRUE(m->Flush(T(1, 30)).ok());
  std::vector<Json> p = Posted();
  ASSERT_EQ(p.size(), 1u) << "only the minute that is over";
  EXPECT_EQ(p[0]["method"], "POST");
  EXPECT_EQ(p[0]["path"], std::string(kResource) + "/metrics");
  EXPECT_EQ(p[0]["headers"]["authorization"], std::string("Bearer ") + kToken);
  EXPECT_EQ(p[0]["headers"]["content-type"], "application/json");
  const Json& body = p[0]["body"];
  EXPECT_EQ(body["time"], "2026-04-12T13:20:00Z");
  const Json& b = body["data"]["baseData"];
  EXPECT_EQ(b["metric"], "drift_share");
  EXPECT_EQ(b["namespace"], "gantry/drift");
  EXPECT_EQ(b["dimNames"].dump(), R"(["model"])");
  ASSERT_EQ(b["series"].size(), 2u);
  EXPECT_EQ(b["series"][0].dump(),
            R"({"dimValues":["m1"],"min":0.1,"max":0.3,"sum":0.4,"count":2})");
  EXPECT_EQ(b["series"][1].dump(),
            R"({"dimValues":["m2"],"min":0.5,"max":0.5,"sum":0.5,"count":1})");
  ASSERT_TRUE(m->Flush(T(1, 30), /*everything=*/true).ok());
  EXPECT_EQ(Posted().size(), 2u);
  EXPECT_EQ(m->posted(), 2u);
}

TEST_F(CustomMetricsTest, CutsSeriesIntoCallsAndRetriesThrottling) {
  auto server = Serve({"--fail", "429", "--retry-after", "3"});
  ASSERT_TRUE(server->ok());
  auto m = New(*server, /*per_call=*/2);
  for (int i = 0; i < 5; ++i) {
    m->Record({"f1", "gantry/drift", {{"column", "c" + std::to_string(i)}}, 1.0 * i}, T(0, 1));
  }
  auto start = clock_.Now();
  ASSERT_TRUE(m->Flush(T(2, 0)).ok());
  EXPECT_EQ(clock_.Now() - start, 3s) << "waited the Retry-After once";
  std::vector<Json> p = Posted();
  ASSERT_EQ(p.size(), 4u);  // one 429, then 2 + 2 + 1 series
  size_t series = 0;
  for (size_t i = 1; i < p.size(); ++i) series += p[i]["body"]["data"]["baseData"]["series"].size();
  EXPECT_EQ(series, 5u);
}

TEST_F(CustomMetricsTest, AMinuteIsKeptWhenRetriesRunOut) {
  auto server = Serve({"--fail", "503,503"});
  ASSERT_TRUE(server->ok());
  auto m = New(*server, 50, /*attempts=*/2);
  m->Record({"accuracy", "gantry/drift", {}, 0.9}, T(0, 1));
  Status s = m->Flush(T(1, 0));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  ASSERT_TRUE(m->Flush(T(1, 0)).ok());
  std::vector<Json> p = Posted();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2]["body"]["data"]["baseData"]["series"][0]["count"], 1);
}

TEST_F(CustomMetricsTest, SendCustomMetricsReportsARefusalWithItsCode) {
  auto server = Serve({"--fail", "403"});
  ASSERT_TRUE(server->ok());
  AzureMonitorMetricsConfig cfg;
  cfg.options.endpoint = server->url();
  cfg.options.resource_id = kResource;
  cfg.credential = EnvCredential();
  cfg.credential.resource = kCustomMetricsResource;
  std::vector<MetricValue> values = {{"drift_share", "gantry/drift", {{"model", "m1"}}, 0.25},
                                     {"drifted", "gantry/drift", {{"column", "age"}}, 1}};
  Status s = SendCustomMetrics(cfg, values, clock_);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.message();
  EXPECT_NE(s.message().find("1 of 2 series refused"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::string(kResource) + "/metrics: HTTP 403"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("Monitoring Metrics Publisher"), std::string::npos) << s.message();
  // The other metric went through: a refusal does not stop the rest.
  std::vector<Json> p = Posted();
  ASSERT_EQ(p.size(), 2u);

  // Accepted: OK, every value posted at the clock's minute.
  auto ok_server = Serve();
  ASSERT_TRUE(ok_server->ok());
  cfg.options.endpoint = ok_server->url();
  ASSERT_TRUE(SendCustomMetrics(cfg, values, clock_).ok());
  EXPECT_EQ(Posted().size(), 4u);
}

}  // namespace
}  // namespace gantry::monitor
