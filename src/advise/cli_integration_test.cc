// `gantry advise` end to end through the real binary: golden outputs for the
// documented examples (so docs/advise.md shows what the tool prints), exit
// codes and error messages. Regenerate the goldens after an intended change
// with GANTRY_UPDATE_GOLDEN=1 and review the diff.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gantry/core/json.h"
#include "testing/gantry_cli.h"

namespace gantry::advise {
namespace {

using ::testing::HasSubstr;

struct CliRun {
  int rc = -1;
  std::string out;  // stdout only
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CliRun Gantry(const std::string& args) {
  // Run from the source tree so example paths read as in the docs.
  gantry::testing::CliRun r =
      gantry::testing::RunShell(std::string("cd '") + GANTRY_SOURCE_DIR + "' && '" +
                                gantry::testing::GantryBinary() + "' " + args);
  return {r.rc, r.out, r.err};
}

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(GANTRY_SOURCE_DIR) + "/src/advise/testdata/" + name;
  if (const char* u = std::getenv("GANTRY_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  const std::string expected = ReadFile(path);
  ASSERT_FALSE(expected.empty()) << path << " is missing; run with GANTRY_UPDATE_GOLDEN=1";
  EXPECT_EQ(actual, expected) << "output differs from " << path
                              << " (GANTRY_UPDATE_GOLDEN=1 regenerates it)";
}

TEST(AdviseCliTest, FineTuneExampleMatchesGolden) {
  CliRun r = Gantry("advise --workload examples/advise/finetune-8b.yaml");
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectGolden("finetune-8b.txt", r.out);
}

TEST(AdviseCliTest, ServeExampleMatchesGolden) {
  CliRun r = Gantry("advise --workload examples/advise/serve-70b.yaml --top 3");
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectGolden("serve-70b.txt", r.out);
}

TEST(AdviseCliTest, MarkdownReportMatchesGolden) {
  CliRun r = Gantry("advise --workload examples/advise/serve-70b.yaml --top 2 --markdown");
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectGolden("serve-70b.md", r.out);
}

TEST(AdviseCliTest, CommitMatchesGolden) {
  CliRun r = Gantry("advise commit --size Standard_ND96amsr_A100_v4 --nodes 2 --utilization 0.6");
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectGolden("commit-ndm-a100.txt", r.out);
}

TEST(AdviseCliTest, CatalogMatchesGolden) {
  CliRun r = Gantry("advise catalog");
  ASSERT_EQ(r.rc, 0) << r.err;
  ExpectGolden("catalog.txt", r.out);
  CliRun dump = Gantry("advise catalog --dump");
  ASSERT_EQ(dump.rc, 0);
  EXPECT_EQ(dump.out, ReadFile(std::string(GANTRY_SOURCE_DIR) + "/data/advise/azure.yaml"));
}

TEST(AdviseCliTest, FlagsOverrideTheFileAndJsonParses) {
  CliRun r = Gantry(
      "advise --workload examples/advise/finetune-8b.yaml --tokens 20B --deadline 24h --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  Result<Json> j = ParseJson(r.out, "stdout");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  ASSERT_FALSE((*j)["ranked"].empty());
  for (const Json& c : (*j)["ranked"]) {
    ASSERT_FALSE(c["hours"].is_null()) << c["size"];
    EXPECT_LE(c["hours"].get<double>(), 24.0) << c["size"];
  }
  EXPECT_EQ((*j)["workload"]["name"], "finetune-8b");
}

TEST(AdviseCliTest, FlagsAloneDescribeAWorkload) {
  CliRun r = Gantry("advise --stage inference --kind small --params 30M --precision fp32 --top 1");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Standard_F"));  // compute-optimised CPU
}

TEST(AdviseCliTest, NothingFitsExitsOne) {
  CliRun r = Gantry("advise --workload examples/advise/serve-70b.yaml --target-token-ms 0.5");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("no size fits this workload"));
  EXPECT_THAT(r.out, HasSubstr("ms per token target"));
}

TEST(AdviseCliTest, UsageErrorsExitTwoAndSayWhatToDo) {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"advise", "give --workload"},
      {"advise --workload /nonexistent.yaml", "/nonexistent.yaml"},
      {"advise --stage training --params 8B", "training.tokens"},
      {"advise --stage training --params 8Q --tokens 1B", "'8Q' is not a count"},
      {"advise --workload examples/advise/finetune-8b.yaml --batch 4",
       "--batch applies to inference"},
      {"advise --workload examples/advise/serve-70b.yaml --top 0", "--top 0"},
      {"advise --workload examples/advise/serve-70b.yaml --prices /nonexistent.csv",
       "/nonexistent.csv"},
      {"advise --workload examples/advise/serve-70b.yaml --discount-reserved-1y 1.5",
       "reserved_1y"},
      {"advise commit --size Standard_ND99", "not in the catalog"},
      {"advise commit --size Standard_ND96isr_H200_v5", "no PAYG price in eastus"},
      {"advise commit --size Standard_ND96amsr_A100_v4 --utilization 2", "utilization 2"},
  };
  for (const Case& c : cases) {
    CliRun r = Gantry(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
  }
}

TEST(AdviseCliTest, PriceSheetChangesTheRanking) {
  char path[] = "/tmp/gantry-prices-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string csv = "size,region,payg,spot\nStandard_ND96isr_H200_v5,eastus,20,2\n";
  ASSERT_EQ(::write(fd, csv.data(), csv.size()), static_cast<ssize_t>(csv.size()));
  ::close(fd);
  CliRun r = Gantry(std::string("advise --workload examples/advise/finetune-8b.yaml --top 1 "
                                "--prices ") +
                    path);
  ::unlink(path);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("1  Standard_ND96isr_H200_v5"));
}

}  // namespace
}  // namespace gantry::advise
