// End to end: the dashboard on a real http::Server with a live, changing
// source, opened in headless Debian chromium through playwright-core
// (tests/agent/dashboard_e2e.mjs). Keeps a screenshot in the build dir:
// <build>/test-artifacts/agent-dashboard.png.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gantry/agent/dashboard.h"

extern char** environ;

namespace gantry::agent {
namespace {

namespace fs = std::filesystem;

constexpr const char* kNode = "/usr/bin/node";
constexpr const char* kChromium = "/usr/bin/chromium";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A node that changes every call: CPU and GPU load waves, network traffic.
std::vector<Signal> FakeSignals(int64_t t) {
  const double phase = double(t) / 40000.0;  // a wave of about four minutes
  return {{"cpu_utilization", {}, 45 + 35 * std::sin(phase) + double(t % 997) / 997.0},
          {"load1", {}, 3.5},
          {"memory_used_percent", {}, 40 + 5 * std::sin(phase / 3)},
          {"swap_used_percent", {}, 1},
          {"network_receive_bytes_per_second", {{"device", "eth0"}}, 2e7 + 1e7 * std::sin(phase)},
          {"network_receive_bytes_per_second", {{"device", "ib0"}}, 5e8},
          {"network_transmit_bytes_per_second", {{"device", "eth0"}}, 8e6 + 4e6 * std::cos(phase)},
          {"gpu_utilization", {{"gpu", "0"}}, 80 + 15 * std::sin(phase * 1.3)},
          {"gpu_utilization", {{"gpu", "1"}}, 30 + 20 * std::cos(phase)},
          {"gpu_memory_used_percent", {{"gpu", "0"}}, 72},
          {"gpu_memory_used_percent", {{"gpu", "1"}}, 35},
          {"gpu_temperature_celsius", {{"gpu", "0"}}, 66 + 4 * std::sin(phase)},
          {"gpu_temperature_celsius", {{"gpu", "1"}}, 52},
          {"gpu_power_watts", {{"gpu", "0"}}, 550 + 100 * std::sin(phase)},
          {"gpu_power_watts", {{"gpu", "1"}}, 240}};
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(DashboardE2E, ChromiumRendersLiveData) {
  const fs::path src = GANTRY_SOURCE_DIR;
  const fs::path script = src / "tests/agent/dashboard_e2e.mjs";
  ASSERT_TRUE(fs::exists(kNode)) << "node not found at " << kNode
                                 << ": install Debian's nodejs (scripts/install-deps.sh)";
  ASSERT_TRUE(fs::exists(kChromium)) << "chromium not found at " << kChromium
                                     << ": install Debian's chromium (scripts/install-deps.sh)";
  ASSERT_TRUE(fs::exists(src / "node_modules/playwright-core/package.json"))
      << "playwright-core missing under " << src / "node_modules"
      << ": run `npm ci` in " << src;

  const fs::path tmp =
      fs::temp_directory_path() / ("gantry_dash_e2e_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path p;
    ~Cleanup() { fs::remove_all(p); }
  } cleanup{tmp};

  // Ten minutes of history at 15 s, so the charts have a past to draw.
  auto history = History::Open(":memory:");
  ASSERT_TRUE(history.ok()) << history.status().message();
  const int64_t start = NowMs();
  for (int64_t t = start - 600'000; t < start; t += 15'000) {
    ASSERT_TRUE((*history)->Append(t, FakeSignals(t)).ok());
  }

  // gantry health --json output with one warning.
  const fs::path health = tmp / "health.json";
  std::ofstream(health) << R"({"report":"gantry.health","version":1,"profile":"nd-h100-v5",
    "hostname":"e2e-node","timestamp":"2026-11-30T06:00:00Z","overall":"warn","results":[
    {"name":"gpu_count","outcome":"pass","message":"2 GPUs"},
    {"name":"nccl_allreduce","outcome":"warn","message":"bus bandwidth 310 GB/s below 360"}]})";
  // Two committed steps and one that is still being written.
  for (const char* step : {"step-0000001100", "step-0000001200", "step-0000001300"}) {
    fs::create_directories(tmp / "ckpt/llama" / step);
    if (std::string(step) != "step-0000001300") {
      std::ofstream(tmp / "ckpt/llama" / step / "COMMITTED") << "sha256 00\n";
    }
  }

  std::atomic<int> polls{0};
  DashboardSources sources;
  sources.latest = [&] {
    ++polls;
    const int64_t t = NowMs();
    // Every summary is a new sample, as a collector at a 1 s interval would give.
    return LatestSignals{t, FakeSignals(t)};
  };
  sources.history = history->get();
  sources.firing_alerts = [] {
    return Json::array(
        {{{"labels", {{"alertname", "GpuTemperatureHigh"}, {"severity", "warning"}, {"gpu", "0"}}},
          {"annotations", {{"summary", "GPU 0 at 84 C <b>not markup</b>"}}},
          {"startsAt", "2026-11-30T06:10:00Z"}}});
  };
  sources.health_json_path = health.string();
  sources.checkpoint_roots = {(tmp / "ckpt").string()};
  sources.hostname = "e2e-node";
  sources.poll_seconds = 1;

  http::Server server;
  RegisterDashboard(server, std::move(sources));
  Status st = server.Start({.listen = "127.0.0.1:0"});
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/";

  const fs::path artifacts = fs::path(GANTRY_BINARY_DIR) / "test-artifacts";
  fs::create_directories(artifacts);
  const fs::path shot = artifacts / "agent-dashboard.png";
  fs::remove(shot);
  const fs::path log = tmp / "e2e.log";

  std::vector<std::string> args = {kNode,          script.string(), "--url",      url,
                                   "--screenshot", shot.string(),   "--chromium", kChromium};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addchdir_np(&fa, src.c_str());
  // Its own process group, so a timeout can kill node and chromium together.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, kNode, &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ASSERT_EQ(rc, 0) << "cannot start " << kNode << ": " << std::strerror(rc);

  // Generous: a cold chromium start on a loaded CI machine takes a while. On
  // timeout the process group is killed so no browser is left behind.
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (done == 0) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    server.Stop();
    FAIL() << "dashboard_e2e.mjs did not finish within 150 s; output:\n" << ReadAll(log);
  }
  server.Stop();
  const std::string output = ReadAll(log);
  std::cout << output;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "dashboard_e2e.mjs failed (status " << status << "):\n"
      << output;
  EXPECT_NE(output.find("all checks passed"), std::string::npos) << output;
  EXPECT_GE(polls.load(), 3);
  ASSERT_TRUE(fs::exists(shot)) << shot;
  EXPECT_GT(fs::file_size(shot), 20'000u) << "screenshot suspiciously small: " << shot;
}

}  // namespace
}  // namespace gantry::agent
