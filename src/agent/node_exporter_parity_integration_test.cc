// Parity with node_exporter on this machine: Debian's prometheus-node-exporter
// and the agent (in this process, as `gantry agent` runs it) both serve
// /metrics on free 127.0.0.1 ports from the real /proc and /sys. Every name
// of the "Node Exporter Full" dashboard (tests/agent/node-exporter-full-names.txt)
// that node_exporter serves here must be served by the agent with the same
// TYPE, HELP and label names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "gantry/agent/agent.h"
#include "gantry/core/http_client.h"
#include "testing/child_process.h"
#include "testing/temp_dir.h"

namespace gantry::agent {
namespace {

using gantry::testing::ChildProcess;
using gantry::testing::FindTool;
using gantry::testing::FreePort;
using gantry::testing::Listening;
using gantry::testing::TempDir;

struct Exposed {
  std::string help, type;
  std::set<std::string> label_names;
  size_t samples = 0;
};

// name -> what a Prometheus text exposition says about it. Sample names
// are the keys (HELP/TYPE are attached to the same name in the text format).
std::map<std::string, Exposed> ParseExposition(const std::string& text) {
  std::map<std::string, Exposed> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream l(line);
      std::string hash, kind, name;
      l >> hash >> kind >> name;
      std::string rest;
      std::getline(l, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (kind == "HELP") out[name].help = rest;
      if (kind == "TYPE") out[name].type = rest;
      continue;
    }
    size_t end = line.find_first_of("{ ");
    std::string name = line.substr(0, end);
    Exposed& e = out[name];
    ++e.samples;
    if (end != std::string::npos && line[end] == '{') {
      // label="value" pairs; values may hold escaped quotes.
      size_t i = end + 1;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos) break;
        e.label_names.insert(line.substr(i, eq - i));
        i = eq + 2;  // past ="
        while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
        i += 1;  // past the closing quote
        if (i < line.size() && line[i] == ',') ++i;
      }
    }
  }
  return out;
}

std::string Fetch(uint16_t port) {
  http::Request r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  r.deadline = std::chrono::seconds(20);
  auto resp = http::Get(r);
  if (!resp.ok() || resp->status != 200) return "";
  return resp->body;
}

std::vector<std::string> DashboardNames() {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) + "/tests/agent/node-exporter-full-names.txt");
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.push_back(line);
  }
  return names;
}

class NodeExporterParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    names_ = DashboardNames();
    ASSERT_GT(names_.size(), 100u) << "tests/agent/node-exporter-full-names.txt is missing";

    std::string exporter = FindTool("prometheus-node-exporter");
    ASSERT_FALSE(exporter.empty()) << "prometheus-node-exporter not found: install the Debian "
                                      "package 'prometheus-node-exporter'";
    uint16_t port = FreePort();
    exporter_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{exporter,
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        tmp_.path() + "/node_exporter.log");
    ASSERT_TRUE(exporter_->started());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!Listening(port) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(Listening(port)) << "node_exporter did not listen; its log:\n" << exporter_->Log();
    std::string theirs = Fetch(port);
    ASSERT_FALSE(theirs.empty()) << exporter_->Log();
    theirs_ = ParseExposition(theirs);

    AgentConfig c;
    c.listen = "127.0.0.1:0";
    c.history_path = ":memory:";
    c.gpu = false;
    c.cache = std::chrono::milliseconds(0);
    auto a = Agent::Create(c);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    agent_ = std::move(*a);
    ASSERT_TRUE(agent_->Start().ok());
    std::string ours = Fetch(agent_->port());
    ASSERT_FALSE(ours.empty());
    ours_ = ParseExposition(ours);
  }

  TempDir tmp_;
  std::vector<std::string> names_;
  std::unique_ptr<ChildProcess> exporter_;
  std::unique_ptr<Agent> agent_;
  std::map<std::string, Exposed> theirs_, ours_;
};

TEST_F(NodeExporterParityTest, ServesEveryDashboardNameNodeExporterServesHere) {
  std::vector<std::string> missing;
  size_t served_by_them = 0;
  for (const std::string& n : names_) {
    auto t = theirs_.find(n);
    if (t == theirs_.end() || t->second.samples == 0) continue;
    ++served_by_them;
    auto o = ours_.find(n);
    if (o == ours_.end() || o->second.samples == 0) missing.push_back(n);
  }
  // This machine's node_exporter serves most of the dashboard.
  EXPECT_GT(served_by_them, 100u);
  std::string list;
  for (const std::string& n : missing) list += "  " + n + "\n";
  EXPECT_TRUE(missing.empty()) << missing.size()
                               << " names node_exporter serves here but the agent does not:\n"
                               << list;
}

// Every name both serve (the dashboard's and the rest), not only the dashboard's.
TEST_F(NodeExporterParityTest, SameTypeHelpAndLabelNames) {
  std::string diffs;
  for (const auto& entry : ours_) {
    const std::string& n = entry.first;
    auto t = theirs_.find(n);
    auto o = ours_.find(n);
    if (t == theirs_.end() || o == ours_.end() || t->second.samples == 0 ||
        o->second.samples == 0) {
      continue;
    }
    if (t->second.type != o->second.type) {
      diffs += "  " + n + ": TYPE " + o->second.type + ", node_exporter " + t->second.type + "\n";
    }
    if (t->second.help != o->second.help) {
      diffs +=
          "  " + n + ": HELP '" + o->second.help + "', node_exporter '" + t->second.help + "'\n";
    }
    if (t->second.label_names != o->second.label_names) {
      auto join = [](const std::set<std::string>& s) {
        std::string r;
        for (const std::string& x : s) r += (r.empty() ? "" : ",") + x;
        return "{" + r + "}";
      };
      diffs += "  " + n + ": labels " + join(o->second.label_names) + ", node_exporter " +
               join(t->second.label_names) + "\n";
    }
  }
  EXPECT_TRUE(diffs.empty()) << "differences from node_exporter:\n" << diffs;
}

}  // namespace
}  // namespace gantry::agent
