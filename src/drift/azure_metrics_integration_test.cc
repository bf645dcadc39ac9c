// `gantry drift compare --azure-monitor FILE` end to end: the real binary on
// the examples/drift data posts its results to the Azure Monitor contract
// server (tests/monitor/logs_ingestion_server.js on 127.0.0.1, op "metrics"),
// token from an environment variable. Checks the path, the bearer token, the
// metric names, dimensions and aggregates against the JSON report of the same
// run, and what a refusing server (403) and a bad config file do to the exit
// code and stderr; and `validate --azure-monitor` against the KServe test
// server (tests/drift/model_server.py).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <random>
#include <string>

#include "../monitor/monitor_test_support.h"
#include "gantry/core/json.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::gantry::monitor::testing;

const std::string kExamples = std::string(GANTRY_SOURCE_DIR) + "/examples/drift";
constexpr char kResource[] =
    "/subscriptions/sub-1/resourceGroups/rg-1/providers/"
    "Microsoft.MachineLearningServices/workspaces/ws-1";

class DriftAzureMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string missing = NodeMissing("@azure/monitor-ingestion");
    ASSERT_TRUE(missing.empty()) << missing;  // install-deps.sh runs npm ci: never skip
    ::gantry::testing::CliRun prof =
        Run(fmt::format("drift profile --schema {0}/schema.yaml --data {0}/reference.csv --out {1}",
                        kExamples, dir_.Path("churn-v3.profile")));
    ASSERT_EQ(prof.rc, 0) << prof.err;
  }
  std::unique_ptr<NodeServer> Serve(std::vector<std::string> extra = {}) {
    auto s = ServeLogs(dir_.Path("rec.jsonl"), std::move(extra));
    EXPECT_TRUE(s->ok()) << s->error();
    return s;
  }
  std::string WriteConfig(const std::string& endpoint) {
    std::string path = dir_.Path("monitor.yaml");
    std::ofstream(path) << "azure_monitor:\n  metrics:\n    endpoint: " << endpoint
                        << "\n    resource_id: " << kResource
                        << "\n    credential: {type: environment_token, token_env: " << kTokenEnv
                        << "}\n";
    return path;
  }
  ::gantry::testing::CliRun Run(const std::string& args) {
    return ::gantry::testing::RunGantryShell(args, {{kTokenEnv, kToken}});
  }
  std::string Compare(const std::string& current, const std::string& extra) {
    return fmt::format("drift compare --reference {} --current {}/{} --out {} {}",
                       dir_.Path("churn-v3.profile"), kExamples, current, dir_.Path("report.json"),
                       extra);
  }
  // metric -> the recorded POST body's baseData.
  std::map<std::string, Json> PostedByMetric() {
    std::map<std::string, Json> out;
    for (const Json& p : OfOp(ReadRecords(dir_.Path("rec.jsonl")), "metrics")) {
      EXPECT_EQ(p["method"], "POST");
      EXPECT_EQ(p["path"], std::string(kResource) + "/metrics");
      EXPECT_EQ(p["headers"]["authorization"], std::string("Bearer ") + kToken);
      EXPECT_TRUE(p["body"]["time"].is_string());
      const Json& b = p["body"]["data"]["baseData"];
      EXPECT_EQ(b["namespace"], "gantry/drift");
      EXPECT_TRUE(out.emplace(b["metric"].get<std::string>(), b).second) << b.dump();
    }
    return out;
  }
  ::gantry::testing::TempDir dir_{"gantry-drift-metrics"};
};

// {"dimValues":[column, model],...} for `column` in a baseData.
Json SeriesFor(const Json& base, const std::string& column) {
  for (const Json& s : base["series"]) {
    if (s["dimValues"][0] == column) return s;
  }
  return Json();
}

TEST_F(DriftAzureMetrics, CompareSendsDriftShareAndPerColumnValues) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  std::string cfg = WriteConfig(server->url());
  ::gantry::testing::CliRun r = Run(Compare("current.csv", "--azure-monitor " + cfg));
  EXPECT_EQ(r.rc, 1) << "the example window drifts: the verdict decides\n" << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("error")));
  auto report = ReadJsonFile(dir_.Path("report.json"));
  ASSERT_TRUE(report.ok()) << report.status().message();

  std::map<std::string, Json> m = PostedByMetric();
  for (const char* name : {"drift_share", "dataset_drift", "drift_statistic", "drift_p_value",
                           "drifted", "null_rate", "out_of_range_rate"}) {
    EXPECT_EQ(m.count(name), 1u) << name;
  }
  ASSERT_EQ(m.count("drift_share"), 1u);
  const Json& share = m["drift_share"];
  EXPECT_EQ(share["dimNames"].dump(), R"(["model"])");
  ASSERT_EQ(share["series"].size(), 1u);
  const Json& s0 = share["series"][0];
  EXPECT_EQ(s0["dimValues"].dump(), R"(["churn-v3"])") << "the reference file's stem";
  EXPECT_EQ(s0["count"], 1);
  EXPECT_EQ(s0["min"], (*report)["drifted_share"]);
  EXPECT_EQ(s0["max"], (*report)["drifted_share"]);
  EXPECT_EQ(s0["sum"], (*report)["drifted_share"]);
  EXPECT_DOUBLE_EQ(s0["sum"].get<double>(), 0.6);
  EXPECT_EQ(m["dataset_drift"]["series"][0]["sum"], 1.0);

  ASSERT_EQ(m.count("drift_statistic"), 1u);
  EXPECT_EQ(m["drift_statistic"]["dimNames"].dump(), R"(["column","model"])");
  EXPECT_EQ(m["drift_statistic"]["series"].size(), (*report)["columns"].size());
  size_t with_p = 0;
  for (const Json& c : (*report)["columns"]) {
    const std::string col = c["column"];
    Json st = SeriesFor(m["drift_statistic"], col);
    ASSERT_FALSE(st.is_null()) << col;
    EXPECT_EQ(st["dimValues"][1], "churn-v3");
    EXPECT_EQ(st["count"], 1);
    EXPECT_EQ(st["min"], c["statistic"]) << col;
    EXPECT_EQ(st["max"], c["statistic"]) << col;
    EXPECT_EQ(st["sum"], c["statistic"]) << col;
    Json d = SeriesFor(m["drifted"], col);
    ASSERT_FALSE(d.is_null()) << col;
    EXPECT_EQ(d["sum"], c["drifted"].get<bool>() ? 1.0 : 0.0) << col;
    Json p = SeriesFor(m["drift_p_value"], col);
    if (col == "tenure") {
      EXPECT_TRUE(p.is_null()) << "PSI is a distance: no p-value";
    } else {
      ASSERT_FALSE(p.is_null()) << col;
      EXPECT_EQ(p["sum"], c["p_value"]) << col;
      ++with_p;
    }
  }
  EXPECT_EQ(with_p, (*report)["columns"].size() - 1);
  EXPECT_EQ(SeriesFor(m["drifted"], "age")["sum"], 1.0);
  EXPECT_EQ(SeriesFor(m["drifted"], "region")["sum"], 0.0);
}

TEST_F(DriftAzureMetrics, ModelFlagNamesTheModelDimension) {
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  ::gantry::testing::CliRun r =
      Run(Compare("reference.csv", "--model churn --azure-monitor " + WriteConfig(server->url())));
  EXPECT_EQ(r.rc, 0) << r.err;
  std::map<std::string, Json> m = PostedByMetric();
  ASSERT_EQ(m.count("drift_share"), 1u);
  EXPECT_EQ(m["drift_share"]["series"][0]["dimValues"].dump(), R"(["churn"])");
  EXPECT_EQ(m["dataset_drift"]["series"][0]["sum"], 0.0);
}

TEST_F(DriftAzureMetrics, ARefusedPostFailsAPassingCheckWithAClearMessage) {
  auto server = Serve({"--fail", "403"});
  ASSERT_TRUE(server->ok());
  std::string cfg = WriteConfig(server->url());
  // No drift (the reference against itself): the failed send decides, exit 1.
  ::gantry::testing::CliRun r = Run(Compare("reference.csv", "--azure-monitor " + cfg));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Azure Monitor custom metrics not sent to " + server->url()));
  EXPECT_THAT(r.err, HasSubstr(std::string(kResource) + "/metrics: HTTP 403"));
  EXPECT_THAT(r.err, HasSubstr("Monitoring Metrics Publisher"));
  EXPECT_THAT(r.out, HasSubstr("Dataset drift: no")) << "the report is still printed";
}

TEST_F(DriftAzureMetrics, ARefusedPostKeepsTheDriftVerdict) {
  auto server = Serve({"--fail", "403,403,403,403,403,403,403"});
  ASSERT_TRUE(server->ok());
  ::gantry::testing::CliRun r =
      Run(Compare("current.csv", "--azure-monitor " + WriteConfig(server->url())));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("HTTP 403"));
}

TEST_F(DriftAzureMetrics, AnUnreachableEndpointIsNamed) {
  // A port nothing listens on: the server is started and stopped to get one.
  std::string url;
  {
    auto server = Serve();
    ASSERT_TRUE(server->ok());
    url = server->url();
  }
  std::string cfg = WriteConfig(url);
  std::ofstream(cfg, std::ios::app) << "    max_attempts: 1\n";
  ::gantry::testing::CliRun r = Run(Compare("reference.csv", "--azure-monitor " + cfg));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Azure Monitor custom metrics not sent to " + url));
}

TEST_F(DriftAzureMetrics, ABadConfigFileIsAUsageErrorBeforeAnyWork) {
  std::string path = dir_.Path("bad.yaml");
  std::ofstream(path) << "azure_monitor:\n  metrics:\n    endpoint: ftp://x\n"
                      << "    resource_id: " << kResource << "\n";
  ::gantry::testing::CliRun r = Run(Compare("current.csv", "--azure-monitor " + path));
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:3:15: key 'azure_monitor.metrics.endpoint'"));
  EXPECT_THAT(r.out, Not(HasSubstr("Dataset drift"))) << "nothing compared";

  std::ofstream(path, std::ios::trunc) << "azure_monitor:\n  logs: {}\n";
  r = Run(Compare("current.csv", "--azure-monitor " + path));
  EXPECT_EQ(r.rc, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no azure_monitor.metrics block"));
}

// 100 labelled rows for tests/drift/model_server.py's "sign" model (label =
// x0 > 0) with every 10th label flipped: accuracy exactly 0.9.
class DriftAzureMetricsValidate : public DriftAzureMetrics {
 protected:
  void TearDown() override {
    if (model_ > 0) {
      kill(model_, SIGTERM);
      waitpid(model_, nullptr, 0);
    }
  }
  int StartModelServer() {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    model_ = fork();
    if (model_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::string script = std::string(GANTRY_SOURCE_DIR) + "/tests/drift/model_server.py";
      execl("/usr/bin/python3", "python3", script.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    return line.empty() ? -1 : std::stoi(line);
  }
  void WriteLabelled() {
    std::ofstream(dir_.Path("schema.yaml")) << "columns:\n  x0: numerical\n  x1: numerical\n"
                                            << "  label: {type: categorical, role: target}\n";
    std::ofstream d(dir_.Path("labelled.csv"));
    d << "x0,x1,label\n";
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<double> u(-1, 1);
    for (int i = 0; i < 100; ++i) {
      double x0 = u(rng);
      if (x0 == 0) x0 = 0.5;
      int label = x0 > 0;
      if (i % 10 == 0) label = 1 - label;
      d << fmt::format("{},{},{}\n", x0, u(rng), label);
    }
  }
  pid_t model_ = -1;
};

TEST_F(DriftAzureMetricsValidate, ValidateSendsQualityMetrics) {
  WriteLabelled();
  int port = StartModelServer();
  ASSERT_GT(port, 0);
  auto server = Serve();
  ASSERT_TRUE(server->ok());
  ::gantry::testing::CliRun r = Run(fmt::format(
      "drift validate --model-endpoint http://127.0.0.1:{}/v2/models/sign/infer --data {} "
      "--schema {} --min-accuracy 0.85 --out {} --azure-monitor {}",
      port, dir_.Path("labelled.csv"), dir_.Path("schema.yaml"), dir_.Path("result.json"),
      WriteConfig(server->url())));
  EXPECT_EQ(r.rc, 0) << r.err;
  auto result = ReadJsonFile(dir_.Path("result.json"));
  ASSERT_TRUE(result.ok()) << result.status().message();
  const Json& q = (*result)["quality"];
  std::map<std::string, Json> m = PostedByMetric();
  const std::map<std::string, std::string> expected = {{"accuracy", "accuracy"},
                                                       {"precision", "precision_macro"},
                                                       {"recall", "recall_macro"},
                                                       {"f1", "f1_macro"}};
  for (const auto& [metric, key] : expected) {
    ASSERT_EQ(m.count(metric), 1u) << metric;
    const Json& b = m[metric];
    EXPECT_EQ(b["dimNames"].dump(), R"(["model"])") << metric;
    ASSERT_EQ(b["series"].size(), 1u) << metric;
    const Json& s = b["series"][0];
    EXPECT_EQ(s["dimValues"].dump(), R"(["sign"])") << "the endpoint's model name";
    EXPECT_EQ(s["count"], 1) << metric;
    EXPECT_EQ(s["min"], q[key]) << metric;
    EXPECT_EQ(s["max"], q[key]) << metric;
    EXPECT_EQ(s["sum"], q[key]) << metric;
  }
  EXPECT_DOUBLE_EQ(m["accuracy"]["series"][0]["sum"].get<double>(), 0.9);
  ASSERT_EQ(m.count("validation_passed"), 1u);
  EXPECT_EQ(m["validation_passed"]["series"][0]["sum"], 1.0);
}

}  // namespace
}  // namespace gantry::drift
