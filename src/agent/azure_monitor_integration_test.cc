// The agent's alert notifications reach Log Analytics: an alert rule fires on
// a fake node, and the Logs Ingestion contract server (node, on 127.0.0.1)
// records one "alert" row for it, with the agent as its source.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../monitor/monitor_test_support.h"
#include "gantry/agent/agent.h"
#include "testing/fake_nvml_scenario.h"
#include "testing/fake_root.h"

namespace gantry::agent {
namespace {

namespace mt = ::gantry::monitor::testing;
using ::testing::HasSubstr;

TEST(AgentAzureMonitorTest, FiringAlertIsShippedAsOneAlertRow) {
  std::string missing = mt::NodeMissing("@azure/monitor-ingestion");
  ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  gantry::testing::TempDir dir("gantry-agent-azmon");
  auto logs = mt::ServeLogs(dir.Path("logs.jsonl"));
  ASSERT_TRUE(logs->ok()) << logs->error();
  mt::EnvCredential();  // sets the token variable

  gantry::testing::FakeRoot root;
  root.Write("/proc/stat",
             "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\nbtime 1764480000\n");
  root.Write("/proc/loadavg", "0.10 0.20 0.30 1/100 200\n");
  root.Write("/proc/meminfo", "MemTotal: 1000 kB\nMemFree: 500 kB\nMemAvailable: 600 kB\n");
  const std::string yaml =
      "listen: 127.0.0.1:0\nhostname: node-7\ncollection:\n  root: " + root.path() +
      "\n  gpu: false\nhistory:\n  path: \":memory:\"\n"
      "alerts:\n  rules:\n    - name: HostHighCpu\n"
      "      signal: cpu_utilization\n      condition: \"> 10\"\n"
      "azure_monitor:\n  logs:\n    endpoint: " +
      logs->url() +
      "\n    rule_id: dcr-1\n    stream: Custom-GantryAudit_CL\n"
      "    spool_dir: spool\n    flush_interval: 10ms\n"
      "    credential: {type: environment_token, token_env: " +
      std::string(mt::kTokenEnv) + "}\n";
  const std::string path = dir.Path("agent.yaml");
  std::ofstream(path) << yaml;
  Result<AgentConfig> config = LoadAgentConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(config->azure_monitor_logs.has_value());
  // The spool is relative to the config file's folder.
  EXPECT_EQ(std::filesystem::path(config->azure_monitor_logs->spool_dir),
            std::filesystem::path(dir.Path("spool")));

  FakeClock clock;
  {
    Result<std::unique_ptr<Agent>> agent = Agent::Create(*config, clock);
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    (*agent)->Tick();
    clock.Advance(std::chrono::seconds(15));
    root.Write(
        "/proc/stat",
        "cpu  200 0 200 1000 0 0 0 0 0 0\ncpu0 200 0 200 1000 0 0 0 0 0 0\nbtime 1764480000\n");
    (*agent)->Tick();  // 50% busy: HostHighCpu fires
    bool cpu = false;
    for (const Signal& sig : (*agent)->Latest().signals) cpu |= sig.name == "cpu_utilization";
    ASSERT_TRUE(cpu) << "the fake node gives no cpu_utilization: the rule cannot fire";
    (*agent)->Stop();  // delivers the alert, then flushes the shipper
  }
  int alerts = 0;
  for (const Json& r : mt::OfOp(mt::ReadRecords(dir.Path("logs.jsonl")), "upload")) {
    ASSERT_TRUE(r["body"].is_array()) << r.dump();
    for (const Json& row : r["body"]) {
      ASSERT_EQ(row.value("Kind", ""), "alert") << row.dump();
      ++alerts;
      EXPECT_EQ(row["Source"], "agent");
      Json alert = Json::parse(row["Line"].get<std::string>());
      EXPECT_EQ(alert["labels"]["alertname"], "HostHighCpu") << alert.dump();
      EXPECT_EQ(alert["labels"]["instance"], "node-7") << alert.dump();
      EXPECT_EQ(alert["status"], "firing") << alert.dump();
      EXPECT_THAT(row["RecordId"].get<std::string>(), HasSubstr("|agent|alert|"));
    }
  }
  EXPECT_EQ(alerts, 1);
}

TEST(AgentAzureMonitorTest, ConfigErrorsNameTheKey) {
  Result<AgentConfig> c = ParseAgentConfig("azure_monitor:\n  logs:\n    endpoint: ftp://x\n",
                                           "/etc/gantry/agent.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("/etc/gantry/agent.yaml:3"));
  c = ParseAgentConfig("azure_monitor: {logz: {}}\n", "agent.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("azure_monitor.logz"));
}

}  // namespace
}  // namespace gantry::agent
