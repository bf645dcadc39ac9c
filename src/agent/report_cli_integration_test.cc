// `gantry report utilization` from the outside: a history file written
// through History, then the binary's table, JSON and HTML outputs and its
// exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gantry/agent/history.h"
#include "gantry/core/json.h"

namespace gantry::agent {
namespace {

namespace fs = std::filesystem;

const std::string kGantry = std::string(GANTRY_BINARY_DIR) + "/bin/gantry";

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun Gantry(const std::string& args, const fs::path& dir) {
  const fs::path out = dir / "stdout", err = dir / "stderr";
  std::string cmd = kGantry + " " + args + " >" + out.string() + " 2>" + err.string();
  int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = read(out);
  r.err = read(err);
  return r;
}

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kGantry)) << kGantry << " not built: build the `gantry` target first";
    dir_ = fs::temp_directory_path() / ("gantry_report_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "history.db").string();
    auto h =
        History::Open(db_, HistoryOptions{std::chrono::seconds(60), std::chrono::hours(24 * 30)});
    ASSERT_TRUE(h.ok()) << h.status().message();
    // Two days up to now: GPU mostly idle at 8 %, CPU pegged.
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (int64_t t = now - 2 * 86'400'000; t < now; t += 60'000) {
      ASSERT_TRUE((*h)->Append(t, {{"cpu_utilization", {}, 96},
                                   {"memory_used_percent", {}, 50},
                                   {"gpu_utilization", {{"gpu", "0"}}, 8}})
                      .ok());
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string db_;
};

TEST_F(ReportCli, TableJsonAndHtml) {
  CliRun table = Gantry("report utilization --since 7d --history " + db_, dir_);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("GPU p95 utilisation 8%: a smaller size would do"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("CPU p95 96%: CPU-bound"), std::string::npos) << table.out;

  const fs::path html = dir_ / "util.html";
  CliRun json = Gantry(
      "report utilization --since 3d --json --history " + db_ + " --html " + html.string(), dir_);
  ASSERT_EQ(json.code, 0) << json.err;
  auto j = ParseJson(json.out, "stdout");
  ASSERT_TRUE(j.ok()) << json.out;
  EXPECT_EQ((*j)["report"], "gantry.utilization");
  EXPECT_EQ((*j)["signals"][0]["name"], "cpu_utilization");
  EXPECT_GT((*j)["signals"][0]["samples"].get<int64_t>(), 2800);
  bool underused = false;
  for (const Json& a : (*j)["advice"]) underused |= a["rule"] == "gpu_underused";
  EXPECT_TRUE(underused) << j->dump();
  ASSERT_TRUE(fs::exists(html));
  std::ifstream in(html);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

TEST_F(ReportCli, UsageErrorsExitTwo) {
  CliRun missing = Gantry("report utilization --history " + (dir_ / "nope.db").string(), dir_);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("nope.db"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir_ / "nope.db"));  // a report never creates a history
  CliRun since = Gantry("report utilization --since lastweek --history " + db_, dir_);
  EXPECT_EQ(since.code, 2);
  EXPECT_NE(since.err.find("--since"), std::string::npos) << since.err;
}

}  // namespace
}  // namespace gantry::agent
