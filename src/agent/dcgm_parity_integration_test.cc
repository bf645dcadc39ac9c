// `gantry agent` (the real binary) against the fake NVML with Hopper GPUs:
// every counter dcgm-exporter enables by default
// (tests/agent/dcgm-exporter-default-counters.txt) must be on /metrics, from
// the first scrape. Fails listing each one that is missing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/core/http_client.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::agent {
namespace {

using gantry::testing::GantryProcess;
using gantry::testing::TempDir;

std::vector<std::string> DefaultCounters() {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) +
                   "/tests/agent/dcgm-exporter-default-counters.txt");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

// Family names with at least one sample, and label names used by DCGM_ series.
struct Exposition {
  std::set<std::string> families, dcgm_labels;
};

Exposition Parse(const std::string& body) {
  Exposition e;
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t end = line.find_first_of("{ ");
    std::string name = line.substr(0, end);
    e.families.insert(name);
    if (name.rfind("DCGM_", 0) != 0 || end == std::string::npos || line[end] != '{') continue;
    // {k="v",k2="v2"} without escapes in our values: split on '=' and '",'.
    size_t pos = end + 1;
    while (pos < line.size() && line[pos] != '}') {
      size_t eq = line.find('=', pos);
      if (eq == std::string::npos) break;
      e.dcgm_labels.insert(line.substr(pos, eq - pos));
      size_t close = line.find('"', eq + 2);
      if (close == std::string::npos) break;
      pos = close + 1;
      if (pos < line.size() && line[pos] == ',') ++pos;
    }
  }
  return e;
}

TEST(DcgmParity, EveryDefaultCounterIsServed) {
  std::vector<std::string> counters = DefaultCounters();
  ASSERT_EQ(counters.size(), 26u) << "tests/agent/dcgm-exporter-default-counters.txt unreadable?";

  health::testing::FakeNvmlEnv nvml;
  nvml.Write(health::testing::HopperNode(2));
  TempDir dir("gantry-dcgm-parity");
  std::ofstream(dir.Path("agent.yaml"))
      << "listen: 127.0.0.1:0\n"
      << "collection:\n  interval: 1s\n  cache: 0s\n  nvml_library: "
      << health::testing::FakeNvmlPath() << "\n"
      << "history:\n  path: " << dir.Path("history.db") << "\n";
  GantryProcess agent;
  ASSERT_TRUE(agent
                  .Start({"agent", "--config", dir.Path("agent.yaml")},
                         {{"GANTRY_FAKE_NVML_SCENARIO", nvml.scenario_path()}})
                  .ok());
  auto ready = agent.WaitForLine(R"(gantry agent listening on .* \(port (\d+)\))");
  ASSERT_TRUE(ready.ok()) << ready.status().message() << "\n" << agent.Err();
  http::Request req;
  req.url = "http://127.0.0.1:" + (*ready)[1] + "/metrics";
  req.deadline = std::chrono::seconds(30);
  auto metrics = http::Get(req);
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  ASSERT_EQ(metrics->status, 200);
  Exposition e = Parse(metrics->body);

  std::vector<std::string> missing;
  for (const std::string& c : counters) {
    if (e.families.count(c) == 0 && e.dcgm_labels.count(c) == 0) missing.push_back(c);
  }
  EXPECT_TRUE(missing.empty()) << "dcgm-exporter default counters missing from /metrics: "
                               << ::testing::PrintToString(missing) << "\nagent log:\n"
                               << agent.Err();
  // The driver version is a label on the GPU series, as dcgm-exporter adds it.
  EXPECT_THAT(metrics->body, ::testing::HasSubstr("DCGM_FI_DRIVER_VERSION=\"550.54.15\""));

  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Err();
}

}  // namespace
}  // namespace gantry::agent
