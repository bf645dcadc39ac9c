// `gantry agent` end to end through the real binary: check (table, --json, a
// typo with file:line and did-you-mean), rules export, idle cancel, and the
// service itself on the service runner: the readiness line, /metrics, systemd
// notifications (READY, STOPPING), SIGHUP logged as ignored, SIGTERM exit 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gantry/core/http_client.h"
#include "testing/gantry_cli.h"
#include "testing/notify_socket.h"
#include "testing/temp_dir.h"

namespace gantry::testing {
namespace {

using ::testing::HasSubstr;

class AgentCli : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.Path("agent.yaml")) << "listen: 127.0.0.1:0\n"
                                              "collection:\n  interval: 1s\n"
                                              "history:\n  path: "
                                           << dir_.Path("history.db")
                                           << "\n"
                                              "alerts:\n"
                                              "  rules:\n"
                                              "    - name: HotCpu\n"
                                              "      signal: cpu_utilization\n"
                                              "      condition: \"> 95\"\n"
                                              "      for: 5m\n"
                                              "idle:\n  cancel_file: "
                                           << dir_.Path("idle.cancel") << "\n";
  }
  TempDir dir_{"gantry-agent-cli"};
};

TEST_F(AgentCli, CheckReportsOkAndTyposWithTheirLine) {
  CliRun ok = RunGantry({"agent", "check", "--config", dir_.Path("agent.yaml")});
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr(": ok (listen 127.0.0.1:0, 1 rule(s)"));
  CliRun js = RunGantry({"agent", "check", "--config", dir_.Path("agent.yaml"), "--json"});
  ASSERT_EQ(js.rc, 0) << js.err;
  Json j = js.json();
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["rules"], 1);
  EXPECT_TRUE(j["idle"].is_boolean());
  EXPECT_EQ(j["listen"], "127.0.0.1:0");

  std::ofstream(dir_.Path("typo.yaml")) << "listen: :9500\ncollection:\n  intervall: 5s\n";
  CliRun typo = RunGantry({"agent", "check", "--config", dir_.Path("typo.yaml")});
  EXPECT_EQ(typo.rc, 2);
  EXPECT_THAT(typo.err, HasSubstr("typo.yaml:3"));
  EXPECT_THAT(typo.err, HasSubstr("did you mean 'collection.interval'"));
  CliRun none = RunGantry({"agent", "check", "--config", dir_.Path("none.yaml")});
  EXPECT_EQ(none.rc, 2);
  EXPECT_THAT(none.err, HasSubstr("none.yaml"));
}

TEST_F(AgentCli, RulesExportAndIdleCancel) {
  CliRun exp =
      RunGantry({"agent", "rules", "export", "--prometheus", "--config", dir_.Path("agent.yaml")});
  ASSERT_EQ(exp.rc, 0) << exp.err;
  EXPECT_THAT(exp.out, HasSubstr("alert: HotCpu"));
  EXPECT_THAT(exp.out, HasSubstr("for: 5m"));
  CliRun noformat = RunGantry({"agent", "rules", "export", "--config", dir_.Path("agent.yaml")});
  EXPECT_EQ(noformat.rc, 2);
  CliRun nosource = RunGantry({"agent", "rules", "export", "--prometheus"});
  EXPECT_EQ(nosource.rc, 2);
  EXPECT_THAT(nosource.err, HasSubstr("--config"));

  CliRun cancel = RunGantry({"agent", "idle", "cancel", "--config", dir_.Path("agent.yaml")});
  ASSERT_EQ(cancel.rc, 0) << cancel.err;
  EXPECT_TRUE(std::filesystem::exists(dir_.Path("idle.cancel")));
}

// The agent as a service: readiness line, scrapes, systemd notify, signals.
TEST_F(AgentCli, ServesOnTheServiceRunner) {
  NotifySocket systemd(dir_.Path("notify.sock"));
  auto next_message = [&] { return systemd.Next(); };

  GantryProcess agent;
  ASSERT_TRUE(agent
                  .Start({"agent", "--config", dir_.Path("agent.yaml")},
                         {{"NOTIFY_SOCKET", systemd.path()}})
                  .ok());
  Result<std::vector<std::string>> ready =
      agent.WaitForLine(R"(gantry agent listening on 127\.0\.0\.1:0 \(port (\d+)\))");
  ASSERT_TRUE(ready.ok()) << ready.status().message();
  EXPECT_EQ(next_message(), "READY=1");
  const std::string base = "http://127.0.0.1:" + (*ready)[1];

  Result<http::Response> metrics = http::Get({.url = base + "/metrics"});
  ASSERT_TRUE(metrics.ok()) << metrics.status().message();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_THAT(metrics->body, HasSubstr("node_cpu_seconds_total{"));
  Result<http::Response> health = http::Get({.url = base + "/healthz"});
  ASSERT_TRUE(health.ok()) << health.status().message();
  EXPECT_EQ(health->status, 200);

  // The agent does not reload: SIGHUP is logged and changes nothing.
  agent.Signal(SIGHUP);
  Result<std::vector<std::string>> ignored = agent.WaitForErrLine("SIGHUP ignored.*restart");
  ASSERT_TRUE(ignored.ok()) << ignored.status().message();
  EXPECT_THAT(next_message(), HasSubstr("RELOADING=1"));
  EXPECT_EQ(next_message(), "READY=1");
  EXPECT_TRUE(agent.Running());
  ASSERT_TRUE(http::Get({.url = base + "/healthz"}).ok());

  agent.Signal(SIGTERM);
  EXPECT_EQ(agent.Wait(), 0) << agent.Err();
  EXPECT_EQ(next_message(), "STOPPING=1");
}

TEST_F(AgentCli, AListenAddressInUseExits1) {
  GantryProcess first;
  ASSERT_TRUE(first.Start({"agent", "--config", dir_.Path("agent.yaml")}).ok());
  Result<std::vector<std::string>> ready = first.WaitForLine(R"(\(port (\d+)\))");
  ASSERT_TRUE(ready.ok()) << ready.status().message();
  CliRun second = RunGantry(
      {"agent", "--config", dir_.Path("agent.yaml"), "--listen", "127.0.0.1:" + (*ready)[1]});
  EXPECT_NE(second.rc, 0);
  EXPECT_THAT(second.err, HasSubstr((*ready)[1]));
  first.Signal(SIGTERM);
  EXPECT_EQ(first.Wait(), 0);
}

}  // namespace
}  // namespace gantry::testing
