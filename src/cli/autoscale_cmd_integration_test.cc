// `gantry autoscale` as a user runs it: check, run (a service with /status,
// /metrics and /wake), status, dry runs, reloads and errors. The actuator is
// the command actuator over a file, so every action is visible.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gantry/core/http_client.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::cli {
namespace {

using gantry::testing::GantryProcess;
using gantry::testing::RunGantry;
using gantry::testing::TempDir;

class AutoscaleCmd : public ::testing::Test {
 protected:
  void SetUp() override {
    Write("count", "1\n");
    Write("queue", "0\n");
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(tmp_.path() + "/" + name + ".tmp") << text;
    std::filesystem::rename(tmp_.path() + "/" + name + ".tmp", tmp_.path() + "/" + name);
  }
  std::string Read(const std::string& name) { return tmp_.Read(name); }
  std::string Config(const std::string& extra = "") {
    std::string path = tmp_.path() + "/autoscale.yaml";
    std::ofstream(path) << "listen: 127.0.0.1:0\n"
                        << "state_dir: " << tmp_.path() << "/state\n"
                        << "targets:\n"
                        << "  - name: workers\n"
                        << "    min: 0\n"
                        << "    max: 10\n"
                        << "    interval: 1s\n"
                        << "    cooldown: 0s\n"
                        << "    behavior: {scale_down: {stabilization: 0s}}\n"
                        << "    metrics:\n"
                        << "      - name: queue\n"
                        << "        command: [/bin/cat, " << tmp_.path() << "/queue]\n"
                        << "        target: 4\n"
                        << "    actuator:\n"
                        << "      command:\n"
                        << "        read: [/bin/cat, " << tmp_.path() << "/count]\n"
                        << "        scale: [/bin/sh, -c, 'echo $0 > " << tmp_.path()
                        << "/count', '{desired}']\n"
                        << extra;
    return path;
  }
  // Waits up to 30 s for the count file to say `want`.
  bool WaitCount(const std::string& want) {
    for (int i = 0; i < 300; ++i) {
      if (Read("count") == want + "\n") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  TempDir tmp_;
};

TEST_F(AutoscaleCmd, CheckPrintsTheTargets) {
  auto r = RunGantry({"autoscale", "check", "--config", Config()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("ok, 1 target"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("workers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("queue (command target 4)"), std::string::npos) << r.out;
  auto j = RunGantry({"autoscale", "check", "--config", Config(), "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  EXPECT_EQ(j.json()["targets"][0]["actuator"], "command");
  EXPECT_EQ(j.json()["targets"][0]["max"], 10);
}

TEST_F(AutoscaleCmd, BadConfigsExitTwoNamingTheKey) {
  std::string path = tmp_.path() + "/bad.yaml";
  std::ofstream(path) << "targets:\n  - name: w\n    max: 0\n";
  auto r = RunGantry({"autoscale", "check", "--config", path});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("bad.yaml:3:10: key 'targets.0.max': 0 is below 1"), std::string::npos)
      << r.err;
  auto missing = RunGantry({"autoscale", "run", "--config", tmp_.path() + "/nope.yaml"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.err.find("nope.yaml"), std::string::npos) << missing.err;
}

TEST_F(AutoscaleCmd, RunFollowsTheQueueAndExplains) {
  Write("queue", "4\n");  // one instance's worth: the count stays 1 until the queue grows
  GantryProcess p;
  ASSERT_TRUE(p.Start({"autoscale", "run", "--config", Config(), "--log-level", "info"}).ok());
  auto ready = p.WaitForLine(R"(status on http://127\.0\.0\.1:(\d+)/status)");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  std::string url = "http://127.0.0.1:" + ready->at(1);

  Write("queue", "20\n");  // 20 / 4 per instance -> 5
  ASSERT_TRUE(WaitCount("5")) << Read("count");
  auto log = p.WaitForErrLine(R"(autoscale workers: 1 -> 5 \(scale_out\))");
  EXPECT_TRUE(log.ok()) << log.status().ToString();

  // The status shows the count read at the last evaluation: wait for the one after the action.
  gantry::testing::CliRun st;
  for (int i = 0; i < 100; ++i) {
    st = RunGantry({"autoscale", "status", "--url", url, "--json"});
    ASSERT_EQ(st.rc, 0) << st.err;
    if (st.json()["targets"][0]["capacity"]["current"] == 5) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(st.json()["targets"][0]["capacity"]["current"], 5);
  auto table = RunGantry({"autoscale", "status", "--url", url});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_NE(table.out.find("workers"), std::string::npos) << table.out;

  auto metrics = http::Get({.url = url + "/metrics"});
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("gantry_autoscale_current{target=\"workers\"} 5"), std::string::npos)
      << metrics->body;

  Write("queue", "0\n");  // nothing waiting: down to zero (cooldown 0 s)
  ASSERT_TRUE(WaitCount("0")) << Read("count");

  // Wake from zero, as the gateway does while it holds requests.
  auto wake = http::Send({.method = "POST", .url = url + "/wake/workers"});
  ASSERT_TRUE(wake.ok());
  EXPECT_EQ(wake->status, 202);
  ASSERT_TRUE(WaitCount("1")) << Read("count");
  auto nosuch = http::Send({.method = "POST", .url = url + "/wake/nosuch"});
  ASSERT_TRUE(nosuch.ok());
  EXPECT_EQ(nosuch->status, 404);

  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(), 0);
}

TEST_F(AutoscaleCmd, DryRunChangesNothing) {
  Write("queue", "40\n");
  GantryProcess p;
  ASSERT_TRUE(
      p.Start({"autoscale", "run", "--config", Config(), "--dry-run", "--log-level", "info"}).ok());
  auto line = p.WaitForErrLine(R"(1 -> 5 \(rate_limited, dry run\))");  // Pods 4 per 15 s
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ(Read("count"), "1\n");
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(), 0);
}

TEST_F(AutoscaleCmd, AReloadWithABadFileKeepsRunning) {
  std::string path = Config();
  GantryProcess p;
  ASSERT_TRUE(p.Start({"autoscale", "run", "--config", path, "--log-level", "info"}).ok());
  ASSERT_TRUE(p.WaitForLine("status on").ok());
  std::ofstream(path, std::ios::app) << "    bogus: 1\n";
  p.Signal(SIGHUP);
  auto err = p.WaitForErrLine("unknown key 'targets.0.bogus'");
  EXPECT_TRUE(err.ok()) << err.status().ToString();
  Write("queue", "8\n");  // the running configuration still acts
  EXPECT_TRUE(WaitCount("2")) << Read("count");
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(), 0);
}

}  // namespace
}  // namespace gantry::cli
