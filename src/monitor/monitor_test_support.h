// Test support for the monitor module: the Logs Ingestion contract server
// (tests/monitor/logs_ingestion_server.js) run by node on a free loopback
// port, reusing the autoscale tests' runner for node contract servers.
#pragma once

#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "../autoscale/node_contract_server.h"
#include "gantry/monitor/logs_ingestion.h"
#include "testing/temp_dir.h"

namespace gantry::monitor::testing {

using autoscale::testing::Essence;
using autoscale::testing::NodeBinary;
using autoscale::testing::NodeMissing;
using autoscale::testing::NodeServer;
using autoscale::testing::OfOp;
using autoscale::testing::ReadRecords;
using autoscale::testing::SourceDir;

inline constexpr char kToken[] = "monitor-test-token";
inline constexpr char kTokenEnv[] = "GANTRY_TEST_MONITOR_TOKEN";
inline constexpr char kRule[] = "dcr-00112233445566778899aabbccddeeff";
inline constexpr char kStream[] = "Custom-GantryAudit_CL";

// `node logs_ingestion_server.js --record <path> --token kToken extra...`.
// NodeServer looks in tests/autoscale/, hence the relative script path.
inline std::unique_ptr<NodeServer> ServeLogs(const std::string& record_path,
                                             std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--record", record_path, "--token", kToken};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<NodeServer>("../monitor/logs_ingestion_server.js", args);
}

inline security::AzureCredentialOptions EnvCredential() {
  ::setenv(kTokenEnv, kToken, 1);
  security::AzureCredentialOptions c;
  c.kind = security::AzureIdentity::kEnvironmentToken;
  c.token_env = kTokenEnv;
  c.resource = kLogsIngestionResource;
  return c;
}

// Records {"TimeGenerated":..., "Id": i, "Msg": <pad>} for i in [from, to).
inline std::vector<std::string> Rows(int from, int to, size_t pad = 20) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) {
    out.push_back("{\"TimeGenerated\":\"2026-12-01T10:00:00.000Z\",\"Id\":" + std::to_string(i) +
                  ",\"Msg\":\"" + std::string(pad, 'x') + "\"}");
  }
  return out;
}

// The ids of every uploaded record, in arrival order.
inline std::vector<int> UploadedIds(const std::vector<Json>& records) {
  std::vector<int> ids;
  for (const Json& r : OfOp(records, "upload")) {
    if (!r["body"].is_array()) continue;
    for (const auto& row : r["body"]) ids.push_back(row.value("Id", -1));
  }
  return ids;
}

}  // namespace gantry::monitor::testing
