#include "gantry/agent/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "gantry/core/http_client.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/fake_root.h"

namespace gantry::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(AgentConfigTest, DefaultsWithoutAFile) {
  auto c = LoadAgentConfig("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, ":9500");
  EXPECT_EQ(c->interval, std::chrono::seconds(15));
  EXPECT_EQ(c->cache, std::chrono::seconds(15));
  EXPECT_EQ(c->root, "/");
  EXPECT_TRUE(c->gpu);
  EXPECT_TRUE(c->dashboard);
  EXPECT_FALSE(c->idle.enabled);
  EXPECT_TRUE(c->rules.empty());
  EXPECT_FALSE(DefaultHistoryPath().empty());
}

TEST(AgentConfigTest, ParsesEverySection) {
  auto c = ParseAgentConfig(R"(
listen: 127.0.0.1:9999
hostname: gpu-node-1
collection:
  interval: 5s
  root: /host
  gpu: false
history:
  path: ":memory:"
  resolution: 10s
  retention: 7d
alerts:
  rules:
    - name: HostHighCpu
      signal: cpu_utilization
      condition: "> 90"
dashboard:
  poll_seconds: 5
  checkpoint_roots: [/mnt/ckpt]
)",
                            "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->listen, "127.0.0.1:9999");
  EXPECT_EQ(c->hostname, "gpu-node-1");
  EXPECT_EQ(c->interval, std::chrono::seconds(5));
  EXPECT_EQ(c->cache, std::chrono::seconds(5));  // follows the interval
  EXPECT_EQ(c->root, "/host");
  EXPECT_FALSE(c->gpu);
  EXPECT_EQ(c->history_path, ":memory:");
  EXPECT_EQ(c->history.resolution, std::chrono::seconds(10));
  EXPECT_EQ(c->history.retention, std::chrono::hours(24 * 7));
  ASSERT_EQ(c->rules.size(), 1u);
  EXPECT_EQ(c->rules[0].name, "HostHighCpu");
  EXPECT_EQ(c->poll_seconds, 5);
  EXPECT_EQ(c->checkpoint_roots, std::vector<std::string>{"/mnt/ckpt"});
}

TEST(AgentConfigTest, ErrorsNameTheKey) {
  auto bad_key = ParseAgentConfig("collection:\n  intervall: 5s\n", "agent.yaml");
  ASSERT_FALSE(bad_key.ok());
  EXPECT_THAT(bad_key.status().message(), HasSubstr("collection.intervall"));
  EXPECT_THAT(bad_key.status().message(), HasSubstr("did you mean 'collection.interval'"));

  auto zero = ParseAgentConfig("collection:\n  interval: 0s\n", "agent.yaml");
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("agent.yaml:2"));

  auto top = ParseAgentConfig("lisen: :9500\n", "agent.yaml");
  ASSERT_FALSE(top.ok());
  EXPECT_THAT(top.status().message(), HasSubstr("did you mean 'listen'"));

  auto unknown_collector = ParseAgentConfig(
      "collection:\n  collectors:\n    netstat: false\n    netklass: true\n", "agent.yaml");
  ASSERT_FALSE(unknown_collector.ok());
  EXPECT_THAT(unknown_collector.status().message(), HasSubstr("agent.yaml:4"));
  EXPECT_THAT(unknown_collector.status().message(), HasSubstr("collection.collectors.netklass"));
  EXPECT_THAT(unknown_collector.status().message(),
              HasSubstr("'netklass' is not a node_exporter collector"));
  EXPECT_THAT(unknown_collector.status().message(), HasSubstr("netclass"));  // the known names

  auto not_bool =
      ParseAgentConfig("collection:\n  collectors:\n    netstat: maybe\n", "agent.yaml");
  ASSERT_FALSE(not_bool.ok());
  EXPECT_THAT(not_bool.status().message(), HasSubstr("collection.collectors.netstat"));
  auto list = ParseAgentConfig("collection:\n  collectors: [netstat]\n", "agent.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("map of node_exporter collector names"));

  auto missing = LoadAgentConfig("/nonexistent/agent.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/agent.yaml"));
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.Write("/proc/stat",
                "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\n"
                "btime 1764480000\n");
    root_.Write("/proc/loadavg", "0.10 0.20 0.30 1/100 200\n");
    root_.Write("/proc/meminfo", "MemTotal: 1000 kB\nMemFree: 500 kB\nMemAvailable: 600 kB\n");
    root_.Write("/proc/net/dev", "h1\nh2\n  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n");
    nlohmann::json s = health::testing::HealthyNode(2);
    s["gpus"][0]["utilization"] = {{"gpu", 55}, {"memory", 20}};
    nvml_.Write(s);
    config_.listen = "127.0.0.1:0";
    config_.root = root_.path();
    config_.nvml_library = health::testing::FakeNvmlPath();
    config_.history_path = ":memory:";
    config_.hostname = "test-node";
  }

  std::string Get(const std::string& target, std::vector<http::Header> headers = {},
                  std::string* content_type = nullptr, int* status = nullptr) {
    http::Request r;
    r.url = "http://127.0.0.1:" + std::to_string(agent_->port()) + target;
    r.headers = std::move(headers);
    r.deadline = std::chrono::seconds(10);
    auto resp = http::Get(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    if (!resp.ok()) return "";
    if (content_type != nullptr) {
      const std::string* ct = resp->FindHeader("Content-Type");
      *content_type = ct ? *ct : "";
    }
    if (status != nullptr) *status = resp->status;
    return resp->body;
  }

  gantry::testing::FakeRoot root_;
  health::testing::FakeNvmlEnv nvml_;
  AgentConfig config_;
  std::unique_ptr<Agent> agent_;
};

// collection.collectors and collection.textfile_directory reach the node
// collector: a switched-off collector is gone from /metrics, the textfile
// directory's families are served.
TEST_F(AgentTest, CollectorSwitchesAndTextfileReachMetrics) {
  root_.Write("/proc/vmstat", "pgfault 10\n");
  root_.Write("/proc/sys/fs/file-nr", "100 0 1000\n");
  root_.Write("/tf/job.prom", "# TYPE job_done gauge\njob_done{job=\"x\"} 1\n");
  config_.gpu = false;
  auto parsed = ParseAgentConfig("collection:\n  collectors:\n    vmstat: false\n", "agent.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  config_.collectors = parsed->collectors;
  config_.textfile_directory = root_.path() + "/tf";
  auto a = Agent::Create(config_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(*a);
  std::string text = agent_->RenderMetrics(ExpositionFormat::kPrometheusText);
  EXPECT_THAT(text, Not(HasSubstr("node_vmstat_pgfault")));
  EXPECT_THAT(text, Not(HasSubstr("collector=\"vmstat\"")));
  EXPECT_THAT(text, HasSubstr("node_filefd_allocated 100\n"));
  EXPECT_THAT(text, HasSubstr("job_done{job=\"x\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("node_textfile_scrape_error 0\n"));
  EXPECT_THAT(text, HasSubstr("node_scrape_collector_success{collector=\"filefd\"} 1\n"));
}

// dcgm-exporter parity in process (the same check runs against the binary in
// dcgm_parity_integration_test): with Hopper GPUs, every default counter in
// tests/agent/dcgm-exporter-default-counters.txt is on the first /metrics,
// as a family or, for DCGM_FI_DRIVER_VERSION, as a label.
TEST_F(AgentTest, ServesEveryDcgmExporterDefaultCounter) {
  nvml_.Write(health::testing::HopperNode(2));
  config_.cache = std::chrono::milliseconds(0);
  auto a = Agent::Create(config_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(*a);
  ASSERT_TRUE(agent_->Start().ok());
  std::string body = Get("/metrics");
  std::set<std::string> families;
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != '#') families.insert(line.substr(0, line.find_first_of("{ ")));
  }
  std::ifstream list(std::string(GANTRY_SOURCE_DIR) +
                     "/tests/agent/dcgm-exporter-default-counters.txt");
  std::vector<std::string> missing;
  int counters = 0;
  while (std::getline(list, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++counters;
    bool as_label = body.find("," + line + "=\"") != std::string::npos ||
                    body.find("{" + line + "=\"") != std::string::npos;
    if (families.count(line) == 0 && !as_label) missing.push_back(line);
  }
  EXPECT_EQ(counters, 26);
  EXPECT_TRUE(missing.empty()) << "missing from /metrics: " << ::testing::PrintToString(missing);
}

TEST_F(AgentTest, ServesMetricsHealthzAndNegotiatesOpenMetrics) {
  auto a = Agent::Create(config_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(*a);
  ASSERT_TRUE(agent_->has_gpu_metrics());
  ASSERT_TRUE(agent_->Start().ok());

  std::string ct;
  std::string text = Get("/metrics", {}, &ct);
  EXPECT_EQ(ct, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(text, HasSubstr("# TYPE node_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, HasSubstr("node_memory_MemAvailable_bytes 614400\n"));
  EXPECT_THAT(text, HasSubstr("node_network_receive_bytes_total{device=\"eth0\"} 1000\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_UTIL{DCGM_FI_DRIVER_VERSION=\"550.54.15\","
                              "Hostname=\"test-node\",UUID=\"GPU-fake-0\","
                              "device=\"nvidia0\",gpu=\"0\",modelName=\"NVIDIA H100 80GB HBM3\","
                              "pci_bus_id=\"00000001:00:00.0\"} 55\n"));
  EXPECT_THAT(text, Not(HasSubstr("# EOF")));

  std::string om = Get(
      "/metrics", {{"Accept", "application/openmetrics-text;version=1.0.0;q=0.9,*/*;q=0.1"}}, &ct);
  EXPECT_EQ(ct, "application/openmetrics-text; version=1.0.0; charset=utf-8");
  EXPECT_THAT(om, HasSubstr("# TYPE node_cpu_seconds counter\n"));
  EXPECT_THAT(om, HasSubstr("\n# EOF\n"));

  std::string health = Get("/healthz", {}, &ct);
  EXPECT_EQ(ct, "application/json");
  EXPECT_THAT(health, HasSubstr("\"status\":\"ok\""));
  EXPECT_THAT(health, HasSubstr("\"gpu_metrics\":true"));

  int status = 0;
  Get("/nope/x", {}, nullptr, &status);
  EXPECT_EQ(status, 404);
  agent_->Stop();
  agent_->Stop();
}

TEST_F(AgentTest, ScrapesUseTheCacheUntilItIsOlderThanConfigured) {
  FakeClock clock;
  config_.cache = std::chrono::seconds(10);
  config_.gpu = false;
  auto a = Agent::Create(config_, clock);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(*a);
  EXPECT_FALSE(agent_->has_gpu_metrics());
  std::string first = agent_->RenderMetrics(ExpositionFormat::kPrometheusText);
  EXPECT_EQ(agent_->stats().collections, 1u);
  root_.Write("/proc/loadavg", "7.50 0.20 0.30 1/100 200\n");
  clock.Advance(std::chrono::seconds(9));
  std::string second = agent_->RenderMetrics(ExpositionFormat::kPrometheusText);
  EXPECT_EQ(agent_->stats().collections, 1u);
  EXPECT_EQ(first, second);
  EXPECT_THAT(second, HasSubstr("node_load1 0.1\n"));
  clock.Advance(std::chrono::seconds(1));
  std::string third = agent_->RenderMetrics(ExpositionFormat::kPrometheusText);
  EXPECT_EQ(agent_->stats().collections, 2u);
  EXPECT_THAT(third, HasSubstr("node_load1 7.5\n"));
  EXPECT_THAT(third, Not(HasSubstr("DCGM_")));

  // cache 0: every scrape collects.
  config_.cache = std::chrono::milliseconds(0);
  auto b = Agent::Create(config_, clock);
  ASSERT_TRUE(b.ok());
  (*b)->RenderMetrics(ExpositionFormat::kPrometheusText);
  (*b)->RenderMetrics(ExpositionFormat::kPrometheusText);
  EXPECT_EQ((*b)->stats().collections, 2u);
}

TEST_F(AgentTest, TicksDeriveSignalsIntoHistory) {
  FakeClock clock;
  auto a = Agent::Create(config_, clock);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  agent_ = std::move(*a);
  agent_->Tick();
  clock.Advance(std::chrono::seconds(15));
  root_.Write("/proc/stat",
              "cpu  200 0 200 1000 0 0 0 0 0 0\ncpu0 200 0 200 1000 0 0 0 0 0 0\n"
              "btime 1764480000\n");
  agent_->Tick();
  EXPECT_EQ(agent_->stats().ticks, 2u);
  LatestSignals latest = agent_->Latest();
  EXPECT_GT(latest.time_ms, 0);
  bool cpu = false, gpu = false;
  for (const Signal& s : latest.signals) {
    if (s.name == "cpu_utilization") {
      cpu = true;
      EXPECT_NEAR(s.value, 50.0, 1e-9);  // 200 busy of 400 ticks
    }
    if (s.name == "gpu_utilization" && s.labels == metrics::Labels{{"gpu", "0"}}) {
      gpu = true;
      EXPECT_EQ(s.value, 55);
    }
  }
  EXPECT_TRUE(cpu);
  EXPECT_TRUE(gpu);
  auto names = agent_->history()->Names();
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_THAT(*names, ::testing::Contains("cpu_utilization"));
  EXPECT_THAT(*names, ::testing::Contains("gpu_utilization"));
}

TEST_F(AgentTest, BusyPortIsAnErrorNamingTheAddress) {
  auto a = Agent::Create(config_);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Start().ok());
  config_.listen = "127.0.0.1:" + std::to_string((*a)->port());
  auto b = Agent::Create(config_);
  ASSERT_TRUE(b.ok());
  Status st = (*b)->Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr(config_.listen));
}

TEST(AgentConfigTest, CollectorSwitchesAndTextfileDirectory) {
  auto c = ParseAgentConfig(R"(
collection:
  collectors:
    netstat: false
    systemd: true
    textfile: true
  textfile_directory: /var/lib/node_exporter
)",
                            "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->collectors.size(), 3u);
  EXPECT_EQ(c->collectors[0], (std::pair<std::string, bool>("netstat", false)));
  EXPECT_EQ(c->collectors[1], (std::pair<std::string, bool>("systemd", true)));
  EXPECT_EQ(c->textfile_directory, "/var/lib/node_exporter");
  auto defaults = ParseAgentConfig("listen: :9500\n", "agent.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->collectors.empty());
  EXPECT_TRUE(defaults->textfile_directory.empty());
}

}  // namespace
}  // namespace gantry::agent
