// Gantry's Logs Ingestion requests compared with those Microsoft's SDK,
// @azure/monitor-ingestion's LogsIngestionClient (tests/monitor/
// ingestion_sdk_upload.js), sends for the same records to the same kind of
// recording server: method, path, query, content type and encoding, and the
// decoded body.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "gantry/core/subprocess.h"
#include "gantry/monitor/logs_ingestion.h"
#include "monitor_test_support.h"

namespace gantry::monitor {
namespace {

using namespace std::chrono_literals;
using namespace ::gantry::monitor::testing;

TEST(LogsSdkEquivalenceTest, SendsWhatMicrosoftsSdkSends) {
  std::string missing = NodeMissing("@azure/monitor-ingestion");
  ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  ::gantry::testing::TempDir dir("gantry-logs-sdk-test");
  auto ours = ServeLogs(dir.Path("gantry.jsonl"));
  auto theirs = ServeLogs(dir.Path("sdk.jsonl"));
  ASSERT_TRUE(ours->ok()) << ours->error();
  ASSERT_TRUE(theirs->ok()) << theirs->error();

  // Records with what audit rows carry: strings with quotes and escapes,
  // numbers, a nested line of JSON.
  std::vector<std::string> rows = Rows(0, 20);
  rows.push_back(R"({"TimeGenerated":"2026-12-01T10:00:00.000Z","Kind":"record","Seq":7,)"
                 R"("Line":"{\"seq\":7,\"prev\":\"00\",\"path\":\"/v1/chat\",\"hash\":\"ab\"}"})");
  {
    std::ofstream f(dir.Path("records.jsonl"));
    for (const std::string& r : rows) f << r << "\n";
  }

  LogsIngestionOptions o;
  o.endpoint = ours->url();
  o.rule_id = kRule;
  o.stream = kStream;
  Result<std::unique_ptr<security::TokenSource>> tokens =
      security::NewAzureTokenSource(EnvCredential(), SystemClock());
  ASSERT_TRUE(tokens.ok());
  Result<std::unique_ptr<LogsIngestionClient>> client =
      LogsIngestionClient::Create(o, std::move(*tokens));
  ASSERT_TRUE(client.ok()) << client.status().message();
  UploadOutcome out = (*client)->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();

  Result<SubprocessResult> sdk =
      RunSubprocess({NodeBinary(), SourceDir() + "/tests/monitor/ingestion_sdk_upload.js",
                     "--endpoint", theirs->url(), "--rule", kRule, "--stream", kStream, "--token",
                     kToken, "--records", dir.Path("records.jsonl")},
                    60s);
  ASSERT_TRUE(sdk.ok()) << sdk.status().message();
  ASSERT_EQ(sdk->exit_code, 0) << sdk->err;

  std::vector<Json> g = OfOp(ReadRecords(dir.Path("gantry.jsonl")), "upload");
  std::vector<Json> s = OfOp(ReadRecords(dir.Path("sdk.jsonl")), "upload");
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(s.size(), 1u);
  const std::vector<std::string> headers = {"authorization", "content-type", "content-encoding"};
  EXPECT_EQ(Essence(g[0], headers).dump(2), Essence(s[0], headers).dump(2));
  EXPECT_EQ(g[0]["records"], 21);
}

}  // namespace
}  // namespace gantry::monitor
