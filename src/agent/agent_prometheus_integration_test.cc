// A real Prometheus (Debian's `prometheus`) scrapes the agent, and promtool
// checks the /metrics output. The agent runs in this process on the real
// /proc with the fake NVML; Prometheus runs as a child on a free 127.0.0.1
// port with a temporary config and storage directory.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gantry/agent/agent.h"
#include "gantry/core/http_client.h"
#include "gantry/core/json.h"
#include "testing/child_process.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/temp_dir.h"

extern char** environ;

namespace gantry::agent {
namespace {

using ::testing::HasSubstr;

using gantry::testing::FindTool;

// A child process with stdin from `stdin_path` (or /dev/null) and stdout +
// stderr into `log_path`; killed (TERM, then KILL) when destroyed.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log_path,
        const std::string& stdin_path = "/dev/null") {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~Child() { Stop(); }
  bool started() const { return pid_ > 0; }

  // Waits for exit; returns the exit status (or -1 after `timeout`).
  int Wait(std::chrono::seconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (Wait(std::chrono::seconds(10)) == -1 && pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using gantry::testing::TempDir;

class AgentPrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json s = health::testing::HealthyNode(2);
    s["gpus"][0]["utilization"] = {{"gpu", 87}, {"memory", 33}};
    s["gpus"][1]["xids"] = {79};
    nvml_.Write(s);
    AgentConfig c;
    c.listen = "127.0.0.1:0";
    c.nvml_library = health::testing::FakeNvmlPath();
    c.history_path = ":memory:";
    c.hostname = "prom-test-node";
    c.cache = std::chrono::milliseconds(0);
    auto a = Agent::Create(c);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(*a);
    ASSERT_TRUE(agent_->has_gpu_metrics());
    ASSERT_TRUE(agent_->Start().ok());
  }

  health::testing::FakeNvmlEnv nvml_;
  std::unique_ptr<Agent> agent_;
  TempDir tmp_;
};

// promtool lints the names node_exporter and dcgm-exporter use themselves
// (node_memory_MemTotal_bytes, node_netstat_Tcp_InSegs and
// node_sockstat_TCP_inuse are camelCase, node_entropy_*_bits is in bits, DCGM counters lack _total,
// DCGM_FI_DEV_PCIE_REPLAY_COUNTER names its type, modelName is a camelCase
// label); those are accepted, anything else is not.
bool KnownLint(const std::string& line) {
  bool exporter_name = line.rfind("node_memory_", 0) == 0 || line.rfind("node_netstat_", 0) == 0 ||
                       line.rfind("node_sockstat_", 0) == 0 || line.rfind("DCGM_FI_", 0) == 0;
  bool entropy = line.rfind("node_entropy_", 0) == 0 &&
                 line.find("use base unit \"bytes\" instead of \"bits\"") != std::string::npos;
  return entropy ||
         (exporter_name &&
          (line.find("should be written in 'snake_case' not 'camelCase'") != std::string::npos ||
           line.find("counter metrics should have \"_total\" suffix") != std::string::npos ||
           line.find("metric name should not include type 'counter'") != std::string::npos));
}

TEST_F(AgentPrometheusTest, PromtoolCheckMetricsAcceptsTheOutput) {
  std::string promtool = FindTool("promtool");
  ASSERT_FALSE(promtool.empty())
      << "promtool not found: install the Debian package 'prometheus' (scripts/install-deps.sh)";
  {
    std::string body = agent_->RenderMetrics(ExpositionFormat::kPrometheusText);
    std::string in = tmp_.path() + "/metrics.txt";
    std::ofstream(in) << body;
    std::string log = tmp_.path() + "/promtool.log";
    Child p({promtool, "check", "metrics"}, log, in);
    ASSERT_TRUE(p.started());
    int rc = p.Wait(std::chrono::seconds(60));
    std::string out = ReadFile(log);
    // 0: clean; 3: lint findings only (checked below); 1: the text did not parse.
    ASSERT_TRUE(rc == 0 || rc == 3) << "promtool exit " << rc << ":\n" << out.substr(0, 2000);
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      EXPECT_TRUE(KnownLint(line)) << "promtool: " << line;
    }
  }
}

TEST_F(AgentPrometheusTest, PrometheusScrapesNodeAndGpuMetrics) {
  std::string prometheus = FindTool("prometheus");
  ASSERT_FALSE(prometheus.empty())
      << "prometheus not found: install the Debian package 'prometheus' (scripts/install-deps.sh)";
  // Held for the test (Prometheus listens with SO_REUSEADDR): nothing else can
  // take the port before Prometheus binds it, so the queries below reach it.
  gantry::testing::ReservedPort reserved;
  ASSERT_NE(reserved.port(), 0);
  const uint16_t prom_port = reserved.port();
  std::string config = tmp_.path() + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                        << "scrape_configs:\n  - job_name: gantry\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << agent_->port() << "']\n";
  std::filesystem::create_directories(tmp_.path() + "/data");
  std::string log = tmp_.path() + "/prometheus.log";
  Child prom({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + tmp_.path() + "/data",
              "--web.listen-address=127.0.0.1:" + std::to_string(prom_port), "--log.level=warn"},
             log);
  ASSERT_TRUE(prom.started());

  auto query = [&](const std::string& q) -> Json {
    std::string enc;
    for (unsigned char ch : q) {
      if (isalnum(ch) || ch == '_') {
        enc.push_back(static_cast<char>(ch));
      } else {
        char b[4];
        std::snprintf(b, sizeof b, "%%%02X", ch);
        enc += b;
      }
    }
    http::Request r;
    r.url = "http://127.0.0.1:" + std::to_string(prom_port) + "/api/v1/query?query=" + enc;
    r.deadline = std::chrono::seconds(5);
    auto resp = http::Get(r);
    if (!resp.ok() || resp->status != 200) return Json();
    Json j = Json::parse(resp->body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return Json();
    return j["data"]["result"];
  };

  // Wait (up to 90 s: Prometheus starts, then scrapes every second) for both
  // families to be stored.
  Json cpu, gpu;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline) {
    cpu = query("node_cpu_seconds_total");
    gpu = query("DCGM_FI_DEV_GPU_UTIL");
    if (cpu.is_array() && !cpu.empty() && gpu.is_array() && gpu.size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(cpu.is_array() && !cpu.empty())
      << "Prometheus stored no node_cpu_seconds_total; its log:\n"
      << ReadFile(log).substr(0, 3000);
  ASSERT_TRUE(gpu.is_array() && gpu.size() == 2) << gpu.dump();

  const Json& m = cpu[0]["metric"];
  EXPECT_EQ(m.value("job", ""), "gantry");
  EXPECT_TRUE(m.contains("cpu"));
  EXPECT_TRUE(m.contains("mode"));

  bool saw_gpu0 = false;
  for (const Json& s : gpu) {
    const Json& l = s["metric"];
    if (l.value("gpu", "") != "0") continue;
    saw_gpu0 = true;
    EXPECT_EQ(l.value("UUID", ""), "GPU-fake-0");
    EXPECT_EQ(l.value("device", ""), "nvidia0");
    EXPECT_EQ(l.value("modelName", ""), "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(l.value("Hostname", ""), "prom-test-node");
    EXPECT_EQ(s["value"][1].get<std::string>(), "87");
  }
  EXPECT_TRUE(saw_gpu0) << gpu.dump();

  // A counter without _total keeps its name whichever format Prometheus
  // negotiated, and the Xid arrives as dcgm-exporter reports it.
  Json energy = query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION");
  ASSERT_TRUE(energy.is_array() && energy.size() == 2) << energy.dump();
  Json xid = query("DCGM_FI_DEV_XID_ERRORS{gpu=\"1\"}");
  ASSERT_TRUE(xid.is_array() && xid.size() == 1) << xid.dump();
  EXPECT_EQ(xid[0]["value"][1].get<std::string>(), "79");
  Json up = query("up{job=\"gantry\"}");
  ASSERT_TRUE(up.is_array() && up.size() == 1) << up.dump();
  EXPECT_EQ(up[0]["value"][1].get<std::string>(), "1");
  Json load = query("node_load1");
  EXPECT_TRUE(load.is_array() && load.size() == 1) << load.dump();
  Json mem = query("node_memory_MemAvailable_bytes");
  EXPECT_TRUE(mem.is_array() && mem.size() == 1) << mem.dump();
  EXPECT_GT(agent_->stats().scrapes, 0u);
}

}  // namespace
}  // namespace gantry::agent
