// The Logs Ingestion client against a contract server that follows the
// published REST shape (tests/monitor/logs_ingestion_server.js): path,
// api-version, headers, gzip'd JSON array body, the call size bound,
// retries on 429/5xx after Retry-After, 413 halving the call.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gantry/monitor/logs_ingestion.h"
#include "monitor_test_support.h"
#include "testing/http_test_server.h"

namespace gantry::monitor {
namespace {

using namespace std::chrono_literals;
using namespace ::gantry::monitor::testing;

class LogsIngestionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = NodeMissing("@azure/monitor-ingestion");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
  }
  std::unique_ptr<NodeServer> Serve(std::vector<std::string> extra = {}) {
    auto s = ServeLogs(dir_.Path("rec.jsonl"), std::move(extra));
    EXPECT_TRUE(s->ok()) << s->error();
    return s;
  }
  std::vector<Json> Recorded() { return ReadRecords(dir_.Path("rec.jsonl")); }

  LogsIngestionOptions Options(const NodeServer& server) {
    LogsIngestionOptions o;
    o.endpoint = server.url() + "/";  // a trailing slash is not doubled
    o.rule_id = kRule;
    o.stream = kStream;
    o.timeout = 10s;
    return o;
  }
  std::unique_ptr<LogsIngestionClient> Client(
      LogsIngestionOptions o, security::AzureCredentialOptions cred = EnvCredential()) {
    Result<std::unique_ptr<security::TokenSource>> tokens =
        security::NewAzureTokenSource(cred, clock_);
    EXPECT_TRUE(tokens.ok()) << tokens.status().message();
    Result<std::unique_ptr<LogsIngestionClient>> c =
        LogsIngestionClient::Create(std::move(o), std::move(*tokens), clock_);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? std::move(*c) : nullptr;
  }

  ::gantry::testing::TempDir dir_{"gantry-logs-test"};
  FakeClock clock_;
};

TEST_F(LogsIngestionTest, PostsAGzippedJsonArrayToTheStreamWithABearerToken) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  auto client = Client(Options(*server));
  ASSERT_NE(client, nullptr);
  std::vector<std::string> rows = Rows(0, 5);
  UploadOutcome out = client->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.delivered, 5u);
  EXPECT_EQ(out.calls, 1u);

  std::vector<Json> rec = OfOp(Recorded(), "upload");
  ASSERT_EQ(rec.size(), 1u);
  const Json& r = rec[0];
  EXPECT_EQ(r["method"], "POST");
  EXPECT_EQ(r["path"], std::string("/dataCollectionRules/") + kRule + "/streams/" + kStream);
  EXPECT_EQ(r["query"].dump(), R"({"api-version":"2023-01-01"})");
  EXPECT_EQ(r["headers"]["authorization"], std::string("Bearer ") + kToken);
  EXPECT_EQ(r["headers"]["content-type"], "application/json");
  EXPECT_EQ(r["headers"]["content-encoding"], "gzip");
  ASSERT_TRUE(r["body"].is_array()) << r.dump();
  EXPECT_EQ(r["body"].dump(), JsonArray(rows)) << "decoded body is the records, in order";
  EXPECT_LT(r["raw_bytes"].get<size_t>(), JsonArray(rows).size()) << "the body was compressed";
}

TEST_F(LogsIngestionTest, WithoutGzipTheBodyIsPlainJson) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  LogsIngestionOptions o = Options(*server);
  o.gzip = false;
  auto client = Client(o);
  std::vector<std::string> rows = Rows(0, 3);
  ASSERT_TRUE(client->Upload(rows).status.ok());
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_FALSE(rec[0]["headers"].contains("content-encoding"));
  EXPECT_EQ(rec[0]["raw_bytes"].get<size_t>(), JsonArray(rows).size());
}

TEST_F(LogsIngestionTest, CutsRecordsIntoCallsUnderTheBatchBound) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  LogsIngestionOptions o = Options(*server);
  o.max_batch_bytes = 2000;
  auto client = Client(o);
  std::vector<std::string> rows = Rows(0, 200, 60);  // ~20 KB of JSON
  UploadOutcome out = client->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.delivered, 200u);
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  EXPECT_GE(rec.size(), 10u);
  EXPECT_EQ(out.calls, rec.size());
  for (const Json& r : rec) {
    EXPECT_LE(r["body"].dump().size(), 2000u) << "each call's JSON is within the bound";
  }
  std::vector<int> want;
  for (int i = 0; i < 200; ++i) want.push_back(i);
  EXPECT_EQ(UploadedIds(rec), want) << "all records once, in order";
}

TEST_F(LogsIngestionTest, TheDefaultBoundKeepsCallsUnderTheApisOneMegabyte) {
  auto server = Serve({"--max-bytes", "1000000"});
  ASSERT_TRUE(server->ok());
  LogsIngestionOptions o = Options(*server);
  o.gzip = false;  // the bound holds uncompressed, where it is tightest
  auto client = Client(o);
  std::vector<std::string> rows = Rows(0, 3000, 900);  // ~2.9 MB
  UploadOutcome out = client->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.delivered, rows.size());
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  EXPECT_GE(rec.size(), 3u);
  for (const Json& r : rec) EXPECT_LE(r["raw_bytes"].get<size_t>(), kMaxCallBytes);
}

TEST_F(LogsIngestionTest, RetriesThrottlingAndServerErrorsAfterRetryAfter) {
  auto server = Serve({"--fail", "429,503", "--retry-after", "7"});
  ASSERT_TRUE(server->ok());
  auto client = Client(Options(*server));
  auto start = clock_.Now();
  std::vector<std::string> rows = Rows(0, 4);
  UploadOutcome out = client->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.delivered, 4u);
  EXPECT_EQ(out.calls, 3u);
  // The fake clock moves only by the waits: 7 s after each of the two answers.
  EXPECT_EQ(clock_.Now() - start, 14s);
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  ASSERT_EQ(rec.size(), 3u);
  EXPECT_EQ(rec[2]["body"].dump(), JsonArray(rows)) << "the retry sends the same records";
}

TEST_F(LogsIngestionTest, GivesUpAfterMaxAttemptsWithTheLastStatus) {
  auto server = Serve({"--fail", "500,500,500,500"});
  ASSERT_TRUE(server->ok());
  LogsIngestionOptions o = Options(*server);
  o.max_attempts = 3;
  auto client = Client(o);
  std::vector<std::string> rows = Rows(0, 2);
  UploadOutcome out = client->Upload(rows);
  EXPECT_EQ(out.status.code(), StatusCode::kUnavailable) << out.status.message();
  EXPECT_NE(out.status.message().find("HTTP 500"), std::string::npos) << out.status.message();
  EXPECT_EQ(out.delivered, 0u);
  EXPECT_EQ(out.calls, 3u);
}

TEST_F(LogsIngestionTest, A413HalvesTheCallUntilItFits) {
  auto server = Serve({"--max-bytes", "900"});
  ASSERT_TRUE(server->ok());
  LogsIngestionOptions o = Options(*server);
  o.gzip = false;
  auto client = Client(o);
  std::vector<std::string> rows = Rows(0, 16, 40);  // ~1.3 KB: over the server's 900
  UploadOutcome out = client->Upload(rows);
  ASSERT_TRUE(out.status.ok()) << out.status.message();
  EXPECT_EQ(out.delivered, 16u);
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  ASSERT_GE(rec.size(), 3u);
  EXPECT_EQ(rec[0]["records"], 16) << "the first try had all of them";
  std::vector<int> accepted;
  for (size_t i = 1; i < rec.size(); ++i) {
    if (rec[i]["raw_bytes"].get<size_t>() > 900) continue;  // refused again, split again
    for (const auto& row : rec[i]["body"]) accepted.push_back(row.value("Id", -1));
  }
  std::vector<int> want;
  for (int i = 0; i < 16; ++i) want.push_back(i);
  EXPECT_EQ(accepted, want);
}

TEST_F(LogsIngestionTest, RefusalsAreFinalAndSayWhy) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  // A wrong token: 401, not retried.
  ::setenv("GANTRY_TEST_MONITOR_WRONG", "wrong", 1);
  security::AzureCredentialOptions wrong = EnvCredential();
  wrong.token_env = "GANTRY_TEST_MONITOR_WRONG";
  auto client = Client(Options(*server), wrong);
  std::vector<std::string> rows = Rows(0, 2);
  UploadOutcome out = client->Upload(rows);
  EXPECT_EQ(out.status.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(out.status.message().find("Monitoring Metrics Publisher"), std::string::npos);
  EXPECT_EQ(out.calls, 1u);
  // A record over the bound is refused before anything is sent.
  LogsIngestionOptions o = Options(*server);
  o.max_batch_bytes = 100;
  auto small = Client(o);
  std::vector<std::string> big = Rows(0, 1, 200);
  UploadOutcome b = small->Upload(big);
  EXPECT_EQ(b.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.calls, 0u);
}

TEST_F(LogsIngestionTest, TakesItsTokenFromManagedIdentityForTheMonitorAudience) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  std::string token = "imds-token";
  std::string body =
      R"({"access_token":")" + token +
      R"(","expires_in":"3600","token_type":"Bearer","resource":"https://monitor.azure.com"})";
  ::gantry::testing::ScriptedHttpServer imds(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body}});
  security::AzureCredentialOptions mi;
  mi.kind = security::AzureIdentity::kManagedIdentity;
  mi.imds_endpoint = "http://127.0.0.1:" + std::to_string(imds.port());
  mi.resource = kLogsIngestionResource;
  auto client = Client(Options(*server), mi);
  std::vector<std::string> rows = Rows(0, 1);
  UploadOutcome out = client->Upload(rows);
  // The contract server only takes kToken, so 401 here shows the IMDS token was sent.
  EXPECT_EQ(out.status.code(), StatusCode::kPermissionDenied) << out.status.message();
  std::vector<Json> rec = OfOp(Recorded(), "upload");
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0]["headers"]["authorization"], "Bearer " + token);
  EXPECT_NE(imds.request().find("resource=https%3A%2F%2Fmonitor.azure.com"), std::string::npos)
      << imds.request();
  EXPECT_NE(imds.request().find("Metadata: true"), std::string::npos);
}

TEST(LogsIngestionOptionsTest, CreateNamesTheFieldAtFault) {
  auto tokens = [] {
    return std::move(*security::NewAzureTokenSource(EnvCredential(), SystemClock()));
  };
  LogsIngestionOptions o;
  o.endpoint = "ftp://x";
  o.rule_id = kRule;
  o.stream = kStream;
  Result<std::unique_ptr<LogsIngestionClient>> c = LogsIngestionClient::Create(o, tokens());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ftp://x"), std::string::npos);
  o.endpoint = "https://dce.westeurope-1.ingest.monitor.azure.com";
  o.max_batch_bytes = kMaxCallBytes + 1;
  c = LogsIngestionClient::Create(o, tokens());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("max_batch_bytes"), std::string::npos);
  o.max_batch_bytes = kMaxCallBytes;
  o.rule_id = "dcr a/b";
  c = LogsIngestionClient::Create(o, tokens());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->url(),
            "https://dce.westeurope-1.ingest.monitor.azure.com/dataCollectionRules/dcr%20a%2Fb/"
            "streams/Custom-GantryAudit_CL?api-version=2023-01-01")
      << "names cannot add path segments";
}

TEST(LogsIngestionCodecTest, GzipRoundTripsAndRetryAfterReadsAllThreeHeaders) {
  std::string text = JsonArray(Rows(0, 50));
  Result<std::string> z = Gzip(text);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(static_cast<unsigned char>((*z)[0]), 0x1f) << "a gzip header, not raw zlib";
  EXPECT_EQ(*Gunzip(*z), text);
  EXPECT_FALSE(Gunzip("not gzip").ok());
  http::Response r;
  EXPECT_EQ(RetryAfter(r), 0ms);
  r.headers = {{"Retry-After", "3"}};
  EXPECT_EQ(RetryAfter(r), 3000ms);
  r.headers = {{"retry-after-ms", "250"}, {"Retry-After", "3"}};
  EXPECT_EQ(RetryAfter(r), 250ms);
  r.headers = {{"x-ms-retry-after-ms", "40"}};
  EXPECT_EQ(RetryAfter(r), 40ms);
  r.headers = {{"Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT"}};
  EXPECT_EQ(RetryAfter(r), 0ms);
}

}  // namespace
}  // namespace gantry::monitor
