// The shipper end to end against the Logs Ingestion contract server: records
// appended are delivered once each across restarts, an endpoint that is down
// never blocks Append, a full spool drops the oldest and counts them, and an
// audit log's lines reach Log Analytics byte for byte so its chain verifies.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gantry/monitor/alert_sink.h"
#include "gantry/monitor/shipper.h"
#include "gantry/security/audit.h"
#include "monitor_test_support.h"
#include "testing/http_test_server.h"

namespace gantry::monitor {
namespace {

using namespace std::chrono_literals;
using namespace ::gantry::monitor::testing;

// Polls `done` (real time, up to 60 s); what the writer thread does has no
// other signal to wait on.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 6000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

std::vector<int> Range(int from, int to) {
  std::vector<int> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

class ShipperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = NodeMissing("@azure/monitor-ingestion");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  }
  LogsShipperOptions Options(const std::string& endpoint) {
    LogsShipperOptions o;
    o.logs.endpoint = endpoint;
    o.logs.rule_id = kRule;
    o.logs.stream = kStream;
    o.logs.timeout = 5s;
    o.logs.max_attempts = 1;  // the shipper's own retry_interval does the retrying
    o.credential = EnvCredential();
    o.spool_dir = dir_.Path("spool");
    o.flush_interval = 10ms;
    o.retry_interval = 50ms;
    return o;
  }
  std::unique_ptr<LogsShipper> Start(LogsShipperOptions o) {
    Result<std::unique_ptr<LogsShipper>> s = LogsShipper::Start(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(*s) : nullptr;
  }
  std::string Down() {
    return "http://127.0.0.1:" + std::to_string(::gantry::testing::ClosedLoopbackPort());
  }
  ::gantry::testing::TempDir dir_{"gantry-shipper-test"};
};

TEST_F(ShipperTest, ResumesAfterARestartWithoutResendingWhatWasAcknowledged) {
  auto server = ServeLogs(dir_.Path("rec.jsonl"));
  ASSERT_TRUE(server->ok()) << server->error();
  {
    auto shipper = Start(Options(server->url()));
    ASSERT_NE(shipper, nullptr);
    for (const std::string& r : Rows(0, 100)) shipper->Append(r);
    ASSERT_TRUE(shipper->Flush(60s));
    EXPECT_EQ(shipper->stats().sent, 100u);
    EXPECT_EQ(shipper->stats().pending, 0u);
  }
  {
    auto shipper = Start(Options(server->url()));
    ASSERT_NE(shipper, nullptr);
    EXPECT_EQ(shipper->stats().pending, 0u) << "the cursor survived the restart";
    for (const std::string& r : Rows(100, 150)) shipper->Append(r);
    ASSERT_TRUE(shipper->Flush(60s));
  }
  EXPECT_EQ(UploadedIds(ReadRecords(dir_.Path("rec.jsonl"))), Range(0, 150))
      << "each record once, in order";
}

TEST_F(ShipperTest, AnEndpointThatIsDownNeverBlocksAppendAndNothingIsLost) {
  {
    auto shipper = Start(Options(Down()));
    ASSERT_NE(shipper, nullptr);
    // Append returns while every call fails; the records wait in the spool.
    for (const std::string& r : Rows(0, 300)) shipper->Append(r);
    EXPECT_EQ(shipper->stats().appended, 300u);
    ASSERT_TRUE(Eventually([&] { return shipper->stats().pending == 300; }));
    ASSERT_TRUE(Eventually([&] { return shipper->stats().failed_calls > 0; }));
    EXPECT_EQ(shipper->stats().sent, 0u);
  }  // the process stops with everything unsent
  auto server = ServeLogs(dir_.Path("rec.jsonl"));
  ASSERT_TRUE(server->ok()) << server->error();
  auto shipper = Start(Options(server->url()));
  ASSERT_NE(shipper, nullptr);
  EXPECT_EQ(shipper->stats().pending, 300u);
  ASSERT_TRUE(shipper->Flush(60s));
  EXPECT_EQ(UploadedIds(ReadRecords(dir_.Path("rec.jsonl"))), Range(0, 300));
}

TEST_F(ShipperTest, WhenTheEndpointThrottlesTheSpoolFillsAndDropsTheOldestCounted) {
  auto server = ServeLogs(dir_.Path("rec.jsonl"));
  ASSERT_TRUE(server->ok()) << server->error();
  std::vector<std::string> fail(400, "429");
  std::string fails;
  for (size_t i = 0; i < fail.size(); ++i) fails += (i ? "," : "") + fail[i];
  {
    // A throttling endpoint (429 with Retry-After 0) for the first 400 calls.
    auto slow = ServeLogs(dir_.Path("throttled.jsonl"), {"--fail", fails});
    ASSERT_TRUE(slow->ok());
    LogsShipperOptions o = Options(slow->url());
    o.max_spool_bytes = 256 << 10;
    o.fsync = false;
    auto shipper = Start(o);
    ASSERT_NE(shipper, nullptr);
    for (const std::string& r : Rows(0, 4000, 100)) shipper->Append(r);  // ~550 KB
    ASSERT_TRUE(Eventually([&] {
      LogsShipper::Stats s = shipper->stats();
      return s.spool_dropped + s.pending + s.sent == 4000;
    }));
    LogsShipper::Stats s = shipper->stats();
    EXPECT_GT(s.spool_dropped, 0u) << "over the bound the oldest go";
    EXPECT_EQ(s.sent, 0u);
    EXPECT_EQ(s.queue_dropped, 0u);
  }
  LogsShipperOptions o = Options(server->url());
  o.max_spool_bytes = 256 << 10;
  auto shipper = Start(o);
  ASSERT_NE(shipper, nullptr);
  ASSERT_TRUE(shipper->Flush(60s));
  std::vector<int> ids = UploadedIds(ReadRecords(dir_.Path("rec.jsonl")));
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), 4000u);
  EXPECT_EQ(ids, Range(4000 - static_cast<int>(ids.size()), 4000))
      << "what survived is the newest, in order, each once";
}

TEST_F(ShipperTest, AnAuditLogsLinesArriveByteForByteSoTheChainVerifies) {
  auto server = ServeLogs(dir_.Path("rec.jsonl"));
  ASSERT_TRUE(server->ok()) << server->error();
  std::shared_ptr<LogsShipper> shipper = Start(Options(server->url()));
  ASSERT_NE(shipper, nullptr);
  const std::string path = dir_.Path("audit.jsonl");
  {
    security::AuditOptions ao;
    ao.path = path;
    ao.checkpoint_every = 16;
    ao.on_written = AuditForwarder(shipper, "gateway", path);
    Result<std::unique_ptr<security::AuditLog>> log = security::AuditLog::Open(ao);
    ASSERT_TRUE(log.ok()) << log.status().message();
    for (int i = 0; i < 50; ++i) {
      (*log)->Append(R"({"time":"2026-12-01T10:00:00Z","action":"chat","key":"k)" +
                     std::to_string(i) + R"(","note":"quote \" and é"})");
    }
    ASSERT_TRUE((*log)->Close().ok());
  }
  ASSERT_TRUE(shipper->Flush(60s));

  // Rebuild the log and its sidecar from the rows alone, as docs/azure-monitor.md
  // does from a KQL export: de-duplicate by RecordId, order by Seq (records
  // count from 1; a checkpoint with count N right after record N).
  std::map<std::string, Json> by_id;
  for (const Json& r : OfOp(ReadRecords(dir_.Path("rec.jsonl")), "upload")) {
    for (const auto& row : r["body"]) by_id[row["RecordId"].get<std::string>()] = row;
  }
  std::vector<Json> rows;
  for (auto& [id, row] : by_id) rows.push_back(row);
  auto order = [](const Json& r) {
    uint64_t seq = r["Seq"].get<uint64_t>();
    bool cp = r["Kind"] == "checkpoint";
    return std::pair<uint64_t, int>(seq, cp ? 1 : 0);  // count == seq of the last record
  };
  std::sort(rows.begin(), rows.end(),
            [&](const Json& a, const Json& b) { return order(a) < order(b); });
  const std::string copy = dir_.Path("copy.jsonl");
  std::string log_text, side_text;
  size_t records = 0;
  for (const Json& row : rows) {
    EXPECT_EQ(row["Source"], "gateway");
    EXPECT_EQ(row["AuditLog"], path);
    std::string line = row["Line"].get<std::string>() + "\n";
    log_text += line;
    if (row["Kind"] == "checkpoint")
      side_text += line;
    else
      ++records;
  }
  EXPECT_EQ(records, 50u);
  Result<std::string> original = ReadFile(path);
  ASSERT_TRUE(original.ok());
  EXPECT_EQ(log_text, *original) << "the rows hold the log byte for byte";
  std::ofstream(copy) << log_text;
  std::ofstream(copy + ".checkpoints") << side_text;
  Result<security::AuditVerifyReport> report = security::VerifyAuditLog(copy, "");
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_TRUE(report->ok) << report->reason;
  EXPECT_EQ(report->records, 50u);
  EXPECT_GE(report->checkpoints, 3u);
}

TEST_F(ShipperTest, AlertsFromANotifierArriveAsAlertRows) {
  auto server = ServeLogs(dir_.Path("rec.jsonl"));
  ASSERT_TRUE(server->ok()) << server->error();
  std::shared_ptr<LogsShipper> shipper = Start(Options(server->url()));
  ASSERT_NE(shipper, nullptr);
  {
    std::vector<std::unique_ptr<alerting::Sink>> sinks;
    sinks.push_back(NewAlertSink(shipper, "gateway"));
    alerting::Notifier notifier(std::move(sinks), 16);
    alerting::Alert a;
    a.labels = {{"alertname", "OutputDrift"}, {"model", "m1"}};
    a.annotations = {{"summary", "refusal rate up"}};
    a.starts_at_ms = 1'800'000'000'000;
    a.value = 0.25;
    notifier.Notify({a});
    ASSERT_TRUE(notifier.Flush(30s));
  }
  ASSERT_TRUE(shipper->Flush(60s));
  std::vector<Json> up = OfOp(ReadRecords(dir_.Path("rec.jsonl")), "upload");
  ASSERT_EQ(up.size(), 1u);
  ASSERT_EQ(up[0]["body"].size(), 1u);
  const auto& row = up[0]["body"][0];
  EXPECT_EQ(row["Kind"], "alert");
  EXPECT_EQ(row["Source"], "gateway");
  std::map<std::string, std::string> labels = {{"alertname", "OutputDrift"}, {"model", "m1"}};
  EXPECT_EQ(row["Hash"], alerting::Fingerprint(labels));
  Result<Json> line = ParseJson(row["Line"].get<std::string>(), "Line");
  ASSERT_TRUE(line.ok());
  EXPECT_EQ((*line)["status"], "firing");
  EXPECT_EQ((*line)["labels"]["alertname"], "OutputDrift");
  EXPECT_EQ((*line)["startsAt"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ((*line)["value"], 0.25);
}

TEST(AuditRowTest, CarriesTheChainColumnsAndTheLineAsIs) {
  std::string line = R"({"seq":3,"prev":")" + std::string(64, 'a') + R"(","action":"x","hash":")" +
                     std::string(64, 'b') + R"("})";
  auto t = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'800'000'000'123));
  Result<Json> row = ParseJson(AuditRow(line, "registry", "host-1", "/var/log/a.jsonl", t), "row");
  ASSERT_TRUE(row.ok());
  EXPECT_EQ((*row)["TimeGenerated"], "2027-01-15T08:00:00.123Z");
  EXPECT_EQ((*row)["Kind"], "record");
  EXPECT_EQ((*row)["Seq"], 3);
  EXPECT_EQ((*row)["Prev"], std::string(64, 'a'));
  EXPECT_EQ((*row)["Hash"], std::string(64, 'b'));
  EXPECT_EQ((*row)["RecordId"], "host-1|/var/log/a.jsonl|record|3");
  EXPECT_EQ((*row)["Line"], line);
  std::string cp = R"({"type":"checkpoint","count":4,"head":")" + std::string(64, 'c') +
                   R"(","time_ms":1,"key_id":"k","sig":"s"})";
  Result<Json> c = ParseJson(AuditRow(cp, "registry", "host-1", "a", t), "row");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)["Kind"], "checkpoint");
  EXPECT_EQ((*c)["Seq"], 4);
  EXPECT_EQ((*c)["Hash"], std::string(64, 'c'));
  EXPECT_EQ(AuditRow("{\"other\":1}", "g", "h", "a", t), "");
}

TEST(AzureMonitorConfigTest, ParsesTheLogsBlock) {
  Result<Config> cfg = Config::LoadString(R"(
azure_monitor:
  logs:
    endpoint: https://dce-1.westeurope-1.ingest.monitor.azure.com
    rule_id: dcr-0011
    stream: Custom-GantryAudit_CL
    spool_dir: spool
    max_spool_bytes: 64M
    flush_interval: 2s
    credential: {type: managed_identity, client_id: 1234}
)",
                                          "gw.yaml");
  ASSERT_TRUE(cfg.ok());
  Result<std::optional<LogsShipperOptions>> o =
      ParseAzureMonitorLogs(*cfg, "azure_monitor", "/etc/g");
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->has_value());
  EXPECT_EQ((*o)->logs.rule_id, "dcr-0011");
  EXPECT_EQ((*o)->spool_dir, "/etc/g/spool");
  EXPECT_EQ((*o)->max_spool_bytes, 64ull << 20);
  EXPECT_EQ((*o)->flush_interval, 2s);
  EXPECT_TRUE((*o)->logs.gzip);
  EXPECT_EQ((*o)->credential.kind, security::AzureIdentity::kManagedIdentity);
  EXPECT_EQ((*o)->credential.client_id, "1234");

  Result<Config> none = Config::LoadString("other: 1\n", "gw.yaml");
  Result<std::optional<LogsShipperOptions>> n = ParseAzureMonitorLogs(*none);
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(n->has_value());
}

TEST(AzureMonitorConfigTest, ErrorsNameFileLineAndKey) {
  auto error = [](const std::string& yaml) {
    Result<Config> cfg = Config::LoadString(yaml, "gw.yaml");
    EXPECT_TRUE(cfg.ok());
    Result<std::optional<LogsShipperOptions>> o = ParseAzureMonitorLogs(*cfg);
    EXPECT_FALSE(o.ok());
    return o.ok() ? std::string() : o.status().message();
  };
  const std::string head =
      "azure_monitor:\n  logs:\n    endpoint: https://dce\n    rule_id: dcr-1\n"
      "    stream: Custom-X_CL\n";
  std::string m = error(head + "    spool_dir: /s\n    strem: x\n");
  EXPECT_NE(m.find("gw.yaml:7"), std::string::npos) << m;
  EXPECT_NE(m.find("azure_monitor.logs.strem"), std::string::npos) << m;
  m = error(head);
  EXPECT_NE(m.find("azure_monitor.logs.spool_dir"), std::string::npos) << m;
  m = error(head + "    spool_dir: /s\n    max_batch_bytes: 2M\n");
  EXPECT_NE(m.find("gw.yaml:7"), std::string::npos) << m;
  EXPECT_NE(m.find("max_batch_bytes"), std::string::npos) << m;
  m = error(head + "    spool_dir: /s\n    credential: {type: environment_token}\n");
  EXPECT_NE(m.find("azure_monitor.logs.credential.type"), std::string::npos) << m;
  EXPECT_NE(m.find("needs token_env"), std::string::npos) << m;
  m = error("azure_monitor:\n  logs:\n    endpoint: ftp://dce\n");
  EXPECT_NE(m.find("gw.yaml:3"), std::string::npos) << m;
}

}  // namespace
}  // namespace gantry::monitor
