// The registry's audit log shipped to Azure Monitor (--azure-monitor FILE):
// every line reaches the Logs Ingestion contract server as written, and the
// option without --audit-log is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../monitor/monitor_test_support.h"
#include "gantry/core/config.h"
#include "gantry/monitor/shipper.h"
#include "gantry/registry/registry.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;
namespace mt = ::gantry::monitor::testing;

TEST(RegistryAzureMonitorTest, ShipsEveryAuditLineAsWritten) {
  std::string missing = mt::NodeMissing("@azure/monitor-ingestion");
  ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  ::gantry::testing::TempDir dir("gantry-registry-monitor-test");
  auto logs = mt::ServeLogs(dir.Path("logs.jsonl"));
  ASSERT_TRUE(logs->ok()) << logs->error();
  mt::EnvCredential();
  std::ofstream(dir.Path("monitor.yaml"))
      << "azure_monitor:\n  logs:\n    endpoint: " << logs->url()
      << "\n    rule_id: dcr-1\n    stream: Custom-GantryAudit_CL\n    spool_dir: spool\n"
      << "    flush_interval: 10ms\n    credential: {type: environment_token, token_env: "
      << mt::kTokenEnv << "}\n";
  fs::create_directories(dir.Path("model"));
  std::ofstream(dir.Path("model/weights.bin")) << "weights";
  {
    auto reg = OpenRegistry({.db = dir.Path("r.sqlite"),
                             .artifacts = "file://" + dir.Path("art"),
                             .audit_log = dir.Path("audit.jsonl"),
                             .actor = "tester",
                             .azure_monitor_config = dir.Path("monitor.yaml")});
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    auto v = (*reg)->Register({.name = "m", .path = dir.Path("model")});
    ASSERT_TRUE(v.ok()) << v.status().ToString();
  }  // closing the registry closes the log, and the shipper spools and stops
  // The shipper may have stopped before sending; a second one on the same
  // spool delivers the rest.
  {
    Result<Config> c = Config::LoadFile(dir.Path("monitor.yaml"));
    ASSERT_TRUE(c.ok());
    auto o = monitor::ParseAzureMonitorLogs(*c, "azure_monitor", dir.path());
    ASSERT_TRUE(o.ok() && o->has_value());
    auto shipper = monitor::LogsShipper::Start(**o);
    ASSERT_TRUE(shipper.ok()) << shipper.status().ToString();
    ASSERT_TRUE((*shipper)->Flush(std::chrono::seconds(60)));
  }
  Result<std::string> all = ReadFile(dir.Path("audit.jsonl"));
  ASSERT_TRUE(all.ok());
  ASSERT_FALSE(all->empty());
  std::string shipped;
  for (const Json& r : mt::OfOp(mt::ReadRecords(dir.Path("logs.jsonl")), "upload")) {
    for (const auto& row : r["body"]) {
      EXPECT_EQ(row["Source"], "registry");
      shipped += row["Line"].get<std::string>() + "\n";
    }
  }
  EXPECT_EQ(shipped, *all);
}

TEST(RegistryAzureMonitorTest, RefusesAzureMonitorWithoutAnAuditLog) {
  ::gantry::testing::TempDir dir("gantry-registry-monitor-test");
  auto reg = OpenRegistry({.db = dir.Path("r.sqlite"),
                           .artifacts = "file://" + dir.Path("art"),
                           .azure_monitor_config = dir.Path("monitor.yaml")});
  ASSERT_FALSE(reg.ok());
  EXPECT_EQ(reg.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reg.status().message().find("--audit-log"), std::string::npos);
}

}  // namespace
}  // namespace gantry::registry
