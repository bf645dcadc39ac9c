// `gantry drift` end to end: the real binary on the examples/drift data
// (golden table), the HTML and JSON reports, exit codes, and `validate`
// against a live KServe v2 / OpenAI-compatible test server
// (tests/drift/model_server.py on a free 127.0.0.1 port).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "gantry/core/json.h"
#include "testing/gantry_cli.h"

namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kGantry = std::string(GANTRY_BINARY_DIR) + "/bin/gantry";
const std::string kExamples = std::string(GANTRY_SOURCE_DIR) + "/examples/drift";

using CliRun = gantry::testing::CliRun;

class DriftCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kGantry)) << kGantry << " is missing; build the gantry target first";
    dir_ = fs::temp_directory_path() / ("gantry_drift_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (server_ > 0) {
      kill(server_, SIGTERM);
      waitpid(server_, nullptr, 0);
    }
    fs::remove_all(dir_);
  }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }

  CliRun Gantry(const std::string& args) { return gantry::testing::RunGantryShell(args); }

  // Starts the model server; returns its port.
  int StartServer(const std::string& extra = "") {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    server_ = fork();
    if (server_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::string script = std::string(GANTRY_SOURCE_DIR) + "/tests/drift/model_server.py";
      if (extra.empty()) {
        execl("/usr/bin/python3", "python3", script.c_str(), nullptr);
      } else {
        execl("/usr/bin/python3", "python3", script.c_str(), "--key", extra.c_str(), nullptr);
      }
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    return line.empty() ? -1 : std::stoi(line);
  }

  // 100 rows; the server's model is label = x0 > 0; every 10th label is
  // flipped, so accuracy is exactly 0.9.
  void WriteLabelled() {
    std::ofstream s(P("schema.yaml"));
    s << "columns:\n  x0: numerical\n  x1: numerical\n  label: {type: categorical, role: target}\n";
    std::ofstream d(P("labelled.csv"));
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

  fs::path dir_;
  pid_t server_ = -1;
};

TEST_F(DriftCli, HelpEverywhere) {
  for (const char* sub : {"drift", "drift profile", "drift compare", "drift validate"}) {
    CliRun r = Gantry(std::string(sub) + " --help");
    EXPECT_EQ(r.rc, 0) << sub;
    EXPECT_THAT(r.out, HasSubstr("--")) << sub;
  }
  EXPECT_EQ(Gantry("drift").rc, 2);
  EXPECT_EQ(Gantry("drift compare --current x.csv").rc, 2);  // --reference missing
}

TEST_F(DriftCli, ExamplesGoldenJsonAndHtml) {
  CliRun prof =
      Gantry(fmt::format("drift profile --schema {0}/schema.yaml --data {0}/reference.csv "
                         "--out {1}",
                         kExamples, P("ref.profile")));
  ASSERT_EQ(prof.rc, 0) << prof.err;
  CliRun cmp =
      Gantry(fmt::format("drift compare --reference {} --current {}/current.csv --html {} "
                         "--out {}",
                         P("ref.profile"), kExamples, P("report.html"), P("report.json")));
  EXPECT_EQ(cmp.rc, 1) << cmp.err;  // the example window drifts
  // Golden table (regenerate with GANTRY_UPDATE_GOLDEN=1 after a deliberate change).
  const std::string golden_path = kExamples + "/compare.golden.txt";
  if (const char* u = getenv("GANTRY_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    std::ofstream(golden_path) << cmp.out;
  }
  std::ifstream g(golden_path);
  std::string golden((std::istreambuf_iterator<char>(g)), {});
  EXPECT_EQ(cmp.out, golden);

  auto j = gantry::ReadJsonFile(P("report.json"));
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["report"], "gantry.drift");
  EXPECT_EQ((*j)["dataset_drift"], true);
  std::map<std::string, bool> drifted;
  for (const auto& c : (*j)["columns"]) drifted[c["column"]] = c["drifted"];
  EXPECT_TRUE(drifted["age"]);
  EXPECT_TRUE(drifted["income"]);
  EXPECT_TRUE(drifted["plan"]);
  EXPECT_FALSE(drifted["region"]);
  EXPECT_EQ((*j)["quality"]["task"], "classification");

  std::ifstream h(P("report.html"));
  std::string html((std::istreambuf_iterator<char>(h)), {});
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, (*j)["columns"].size());
  EXPECT_EQ(html.find("<script"), std::string::npos);

  // The reference against itself: no drift, exit 0; --json is the report.
  CliRun same = Gantry(fmt::format("drift compare --reference {} --current {}/reference.csv --json",
                                   P("ref.profile"), kExamples));
  EXPECT_EQ(same.rc, 0) << same.err;
  auto sj = gantry::ParseJson(same.out, "stdout");
  ASSERT_TRUE(sj.ok());
  EXPECT_EQ((*sj)["dataset_drift"], false);
}

TEST_F(DriftCli, UsageErrorsExit2WithMessages) {
  std::ofstream(P("bad.profile")) << "not a profile";
  CliRun r = Gantry(fmt::format("drift compare --reference {} --current {}/current.csv",
                                P("bad.profile"), kExamples));
  EXPECT_EQ(r.rc, 2);
  EXPECT_THAT(r.err, HasSubstr("not a valid gantry drift profile"));
  std::ofstream(P("s.yaml")) << "columns:\n  age: {type: numerical, tset: ks}\n";
  CliRun s = Gantry(fmt::format("drift profile --schema {} --data {}/reference.csv --out {}",
                                P("s.yaml"), kExamples, P("x.profile")));
  EXPECT_EQ(s.rc, 2);
  EXPECT_THAT(s.err, HasSubstr("tset"));
  CliRun pq = Gantry(fmt::format("drift profile --schema {}/schema.yaml --data {} --out {}",
                                 kExamples, P("data.parquet"), P("x.profile")));
  EXPECT_EQ(pq.rc, 2);
  EXPECT_THAT(pq.err, HasSubstr("Parquet"));
}

TEST_F(DriftCli, ValidateAgainstLiveKServeAndOpenAIServer) {
  WriteLabelled();
  int port = StartServer();
  ASSERT_GT(port, 0);
  const std::string base = fmt::format("http://127.0.0.1:{}", port);
  const std::string common =
      fmt::format("--data {} --schema {}", P("labelled.csv"), P("schema.yaml"));

  CliRun ok =
      Gantry(fmt::format("drift validate --model-endpoint {}/v2/models/sign/infer {} "
                         "--min-accuracy 0.85 --batch 7 --json",
                         base, common));
  EXPECT_EQ(ok.rc, 0) << ok.err;
  auto j = gantry::ParseJson(ok.out, "stdout");
  ASSERT_TRUE(j.ok()) << ok.out;
  EXPECT_DOUBLE_EQ((*j)["quality"]["accuracy"].get<double>(), 0.9);
  EXPECT_EQ((*j)["requests"], 15);  // ceil(100 / 7)
  EXPECT_EQ((*j)["passed"], true);

  CliRun low =
      Gantry(fmt::format("drift validate --model-endpoint {} --model sign {} "
                         "--min-accuracy 0.95",
                         base, common));
  EXPECT_EQ(low.rc, 1);
  EXPECT_THAT(low.out, HasSubstr("FAIL: accuracy 0.9000 < 0.9500"));

  CliRun proba =
      Gantry(fmt::format("drift validate --model-endpoint {}/v2/models/sign_proba/infer "
                         "{} --per-column-tensors --min-f1 0.8 --json",
                         base, common));
  EXPECT_EQ(proba.rc, 0) << proba.err;
  auto pj = gantry::ParseJson(proba.out, "stdout");
  ASSERT_TRUE(pj.ok());
  EXPECT_DOUBLE_EQ((*pj)["quality"]["accuracy"].get<double>(), 0.9);
  EXPECT_TRUE((*pj)["quality"]["roc_auc"].is_number());

  CliRun openai =
      Gantry(fmt::format("drift validate --protocol openai --model-endpoint "
                         "{}/v1/chat/completions --model m {} --min-accuracy 0.9 --json",
                         base, common));
  EXPECT_EQ(openai.rc, 0) << openai.err;
  auto oj = gantry::ParseJson(openai.out, "stdout");
  ASSERT_TRUE(oj.ok());
  EXPECT_DOUBLE_EQ((*oj)["quality"]["accuracy"].get<double>(), 0.9);

  CliRun rmse =
      Gantry(fmt::format("drift validate --model-endpoint {}/v2/models/sign/infer {} "
                         "--max-rmse 1",
                         base, common));
  EXPECT_EQ(rmse.rc, 2);  // a regression threshold on a classification task
  EXPECT_THAT(rmse.err, HasSubstr("--max-rmse applies to regression"));

  CliRun nf = Gantry(
      fmt::format("drift validate --model-endpoint {}/v2/models/nope/infer {}", base, common));
  EXPECT_EQ(nf.rc, 1);
  EXPECT_THAT(nf.err, HasSubstr("HTTP 404"));
}

TEST_F(DriftCli, ValidateSendsTheApiKeyAndUnreachableIsExit1) {
  WriteLabelled();
  int port = StartServer("secret");
  ASSERT_GT(port, 0);
  std::string args = fmt::format(
      "drift validate --model-endpoint "
      "http://127.0.0.1:{}/v2/models/sign/infer --data {} --schema {}",
      port, P("labelled.csv"), P("schema.yaml"));
  CliRun denied = Gantry(args);
  EXPECT_NE(denied.rc, 0);
  EXPECT_THAT(denied.err, HasSubstr("401"));
  EXPECT_EQ(Gantry(args + " --api-key secret").rc, 0);
  kill(server_, SIGTERM);
  waitpid(server_, nullptr, 0);
  server_ = -1;
  CliRun down = Gantry(args + " --api-key secret");
  EXPECT_EQ(down.rc, 1);
  EXPECT_THAT(down.err, HasSubstr("127.0.0.1"));
}

}  // namespace
