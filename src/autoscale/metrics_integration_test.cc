// The metric sources against the real things: Debian's Prometheus scraping a
// page this test serves, the agent (in this process, fake NVML) and commands.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "gantry/agent/agent.h"
#include "gantry/autoscale/metrics.h"
#include "gantry/core/http_server.h"
#include "testing/child_process.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

using gantry::testing::ChildProcess;
using gantry::testing::FindTool;
using gantry::testing::FreePort;
using gantry::testing::TempDir;

// A /metrics page whose text the test sets.
class Page {
 public:
  Page() {
    server_.Handle("/metrics", [this](const http::ServerRequest&, http::ServerResponse* r) {
      std::lock_guard<std::mutex> lock(mu_);
      r->content_type = "text/plain; version=0.0.4";
      r->body = text_;
    });
    EXPECT_TRUE(server_.Start({.listen = "127.0.0.1:0"}).ok());
  }
  void Set(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    text_ = std::move(text);
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }

 private:
  http::Server server_;
  std::mutex mu_;
  std::string text_;
};

MetricSourceConfig Prom(const std::string& url, const std::string& query, bool ignore_null = true) {
  return {.name = "m",
          .kind = MetricSourceConfig::Kind::kPrometheus,
          .url = url,
          .query = query,
          .ignore_null_values = ignore_null};
}

TEST(AutoscaleMetrics, PrometheusInstantQueries) {
  std::string prometheus = FindTool("prometheus");
  ASSERT_FALSE(prometheus.empty())
      << "prometheus not found: install the Debian package 'prometheus' (scripts/install-deps.sh)";
  Page page;
  page.Set("queue_depth{model=\"a\"} 30\nqueue_depth{model=\"b\"} 7\ngpu_busy{gpu=\"0\"} 80\n");
  TempDir tmp;
  uint16_t port = FreePort();
  std::string config = tmp.path() + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                        << "scrape_configs:\n  - job_name: app\n    static_configs:\n"
                        << "      - targets: ['" << page.Url().substr(7) << "']\n";
  std::filesystem::create_directories(tmp.path() + "/data");
  ChildProcess prom(
      {prometheus, "--config.file=" + config, "--storage.tsdb.path=" + tmp.path() + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
      tmp.path() + "/prometheus.log");
  ASSERT_TRUE(prom.started());
  std::string url = "http://127.0.0.1:" + std::to_string(port);

  auto sum = NewMetricSource(Prom(url, "sum(queue_depth)"), SystemClock());
  ASSERT_TRUE(sum.ok());
  // Prometheus starts, then scrapes every second: wait up to 90 s for data.
  Result<double> v = Unavailable("not yet");
  for (int i = 0; i < 180; ++i) {
    v = (*sum)->Read();
    if (v.ok() && *v == 37) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(v.ok()) << v.status().ToString() << "\n" << prom.Log().substr(0, 2000);
  EXPECT_EQ(*v, 37);

  // A scalar works as well.
  auto scalar = NewMetricSource(Prom(url, "scalar(sum(gpu_busy)) / 2"), SystemClock());
  ASSERT_TRUE(scalar.ok());
  Result<double> s = (*scalar)->Read();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, 40);

  // Two series: KEDA's rule is one element; the message says what to do.
  auto two = NewMetricSource(Prom(url, "queue_depth"), SystemClock());
  Result<double> t = (*two)->Read();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("returned 2 series; make it return one"), std::string::npos)
      << t.status().message();

  // No series: 0 with ignore_null_values (KEDA's default), else missing.
  auto none = NewMetricSource(Prom(url, "sum(nosuch_metric)"), SystemClock());
  Result<double> n = (*none)->Read();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0);
  auto strict = NewMetricSource(Prom(url, "sum(nosuch_metric)", false), SystemClock());
  EXPECT_FALSE((*strict)->Read().ok());

  // A bad query is Prometheus's 400, quoted.
  auto bad = NewMetricSource(Prom(url, "sum(("), SystemClock());
  Result<double> b = (*bad)->Read();
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("HTTP 400"), std::string::npos) << b.status().message();

  // Prometheus gone: an error, never a made-up value.
  prom.Stop();
  Result<double> gone = (*sum)->Read();
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable) << gone.status().ToString();
}

TEST(AutoscaleMetrics, GatewaySignalsFromItsMetricsPage) {
  Page page;
  FakeClock clock;
  auto src = [&](const std::string& signal) {
    auto s = NewMetricSource({.name = "g",
                              .kind = MetricSourceConfig::Kind::kGateway,
                              .url = page.Url(),
                              .pool = "llm",
                              .signal = signal},
                             clock);
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  };
  page.Set(
      "gantry_gateway_pool_in_flight{pool=\"llm\"} 3\n"
      "gantry_gateway_pool_in_flight{pool=\"other\"} 50\n"
      "gantry_gateway_pool_pending{pool=\"llm\"} 2\n"
      "gantry_gateway_pool_held{pool=\"llm\"} 4\n"
      "gantry_gateway_requests_total{pool=\"llm\",code=\"200\"} 100\n"
      "gantry_gateway_requests_total{pool=\"llm\",code=\"503\"} 20\n");
  EXPECT_EQ(*src("in_flight")->Read(), 3);
  EXPECT_EQ(*src("held")->Read(), 4);
  // Waiting requests count, held ones included: they all need an instance.
  EXPECT_EQ(*src("in_flight_and_pending")->Read(), 9);

  auto rate = src("request_rate");
  Result<double> first = rate->Read();
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("first scrape"), std::string::npos);
  clock.Advance(std::chrono::seconds(10));
  page.Set(
      "gantry_gateway_pool_in_flight{pool=\"llm\"} 3\n"
      "gantry_gateway_requests_total{pool=\"llm\",code=\"200\"} 150\n"
      "gantry_gateway_requests_total{pool=\"llm\",code=\"503\"} 20\n");
  Result<double> r = rate->Read();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(*r, 5.0);  // 50 requests in 10 s
  // A restarted gateway (counters reset) counts from zero, never negative.
  clock.Advance(std::chrono::seconds(10));
  page.Set(
      "gantry_gateway_pool_in_flight{pool=\"llm\"} 0\n"
      "gantry_gateway_requests_total{pool=\"llm\",code=\"200\"} 30\n");
  EXPECT_DOUBLE_EQ(*rate->Read(), 3.0);

  // A pool the gateway does not know is an error naming it.
  page.Set("gantry_gateway_pool_in_flight{pool=\"other\"} 1\n");
  Result<double> missing = src("in_flight")->Read();
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("pool 'llm'"), std::string::npos)
      << missing.status().message();
  // Garbage is an error with the line.
  page.Set("gantry_gateway_pool_in_flight{pool=llm} 1\n");
  EXPECT_FALSE(src("in_flight")->Read().ok());
}

TEST(AutoscaleMetrics, AgentGpuAndCpuSignals) {
  health::testing::FakeNvmlEnv nvml;
  nlohmann::json scenario = health::testing::HealthyNode(2);
  scenario["gpus"][0]["utilization"] = {{"gpu", 90}, {"memory", 10}};
  scenario["gpus"][1]["utilization"] = {{"gpu", 30}, {"memory", 10}};
  nvml.Write(scenario);
  agent::AgentConfig c;
  c.listen = "127.0.0.1:0";
  c.nvml_library = health::testing::FakeNvmlPath();
  c.history_path = ":memory:";
  c.cache = std::chrono::milliseconds(0);
  auto a = agent::Agent::Create(c);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE((*a)->Start().ok());
  std::string url = "http://127.0.0.1:" + std::to_string((*a)->port());
  auto src = [&](const std::string& signal) {
    auto s = NewMetricSource(
        {.name = "a", .kind = MetricSourceConfig::Kind::kAgent, .url = url, .signal = signal},
        SystemClock());
    EXPECT_TRUE(s.ok());
    return std::move(*s);
  };
  Result<double> gpu = src("gpu_utilization")->Read();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_DOUBLE_EQ(*gpu, 60);  // the mean of 90 and 30
  Result<double> mem = src("gpu_memory_used_ratio")->Read();
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_GE(*mem, 0);
  EXPECT_LE(*mem, 1);

  auto cpu = src("cpu_utilization");
  EXPECT_FALSE(cpu->Read().ok());  // a share of busy time needs two scrapes
  // Keep a core busy so the counters move.
  std::atomic<bool> stop{false};
  std::thread spin([&] {
    volatile uint64_t x = 0;
    while (!stop.load()) ++x;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  Result<double> busy = cpu->Read();
  stop = true;
  spin.join();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_GT(*busy, 0);
  EXPECT_LE(*busy, 100);
  (*a)->Stop();
}

TEST(AutoscaleMetrics, Commands) {
  auto ok = NewMetricSource({.name = "c",
                             .kind = MetricSourceConfig::Kind::kCommand,
                             .command = {"/bin/echo", "12.5", "jobs"}},
                            SystemClock());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*(*ok)->Read(), 12.5);
  auto fails = NewMetricSource(
      {.name = "c", .kind = MetricSourceConfig::Kind::kCommand, .command = {"/bin/false"}},
      SystemClock());
  Result<double> f = (*fails)->Read();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("exit 1"), std::string::npos);
  auto words = NewMetricSource(
      {.name = "c", .kind = MetricSourceConfig::Kind::kCommand, .command = {"/bin/echo", "many"}},
      SystemClock());
  Result<double> w = (*words)->Read();
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("expected a number"), std::string::npos);
  auto slow = NewMetricSource({.name = "c",
                               .kind = MetricSourceConfig::Kind::kCommand,
                               .command = {"/bin/sleep", "5"},
                               .timeout = std::chrono::milliseconds(200)},
                              SystemClock());
  EXPECT_FALSE((*slow)->Read().ok());
}

}  // namespace
}  // namespace gantry::autoscale
