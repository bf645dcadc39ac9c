// LoadWorkload: workload files with command-line flags laid over them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "gantry/advise/advise.h"

namespace gantry::advise {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class WorkloadFlagsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("gantry_workload_" + std::to_string(::getpid()) + ".yaml"))
                .string();
    std::ofstream(path_) << "name: ft\nstage: training\nmodel:\n  params: 8B\n"
                            "training:\n  precision: bf16\n  tokens: 2B\n"
                            "constraints:\n  deadline: 72h\n";
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::string Error(const std::map<std::string, std::string>& flags) {
    Result<Workload> w = LoadWorkload(path_, flags);
    EXPECT_FALSE(w.ok());
    if (w.ok()) return "";
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
    return w.status().message();
  }

  std::string path_;
};

TEST_F(WorkloadFlagsTest, FlagsOverrideTheFileKeyByKey) {
  Result<Workload> w =
      LoadWorkload(path_, {{"tokens", "20B"}, {"deadline", "24h"}, {"precision", "fp16"}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->name, "ft");                   // from the file
  EXPECT_DOUBLE_EQ(w->model.params, 8e9);     // from the file
  EXPECT_DOUBLE_EQ(w->tokens, 20e9);          // --tokens
  EXPECT_DOUBLE_EQ(w->deadline_h, 24);        // --deadline
  EXPECT_EQ(w->precision, Precision::kFp16);  // --precision: training.precision
  Result<Workload> file_only = LoadWorkload(path_, {});
  ASSERT_TRUE(file_only.ok()) << file_only.status().ToString();
  EXPECT_DOUBLE_EQ(file_only->tokens, 2e9);
}

TEST_F(WorkloadFlagsTest, PrecisionFollowsTheStageAFlagSets) {
  Result<Workload> w = LoadWorkload("", {{"stage", "inference"},
                                         {"params", "70B"},
                                         {"precision", "fp8"},
                                         {"batch", "8"},
                                         {"prompt-tokens", "1000"},
                                         {"output-tokens", "200"},
                                         {"layers", "80"},
                                         {"hidden", "8192"},
                                         {"heads", "64"}});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->stage, Stage::kInference);
  EXPECT_EQ(w->precision, Precision::kFp8);  // inference.precision
  EXPECT_EQ(w->batch, 8);
}

TEST_F(WorkloadFlagsTest, ErrorsNameTheFlagsOrTheFile) {
  EXPECT_EQ(Error({{"params", "8Q"}}),
            "command-line flags: key 'model.params': '8Q' is not a count; write a number, "
            "optionally with k, M, B (or G) or T (\"8B\", \"1.5e9\", \"125M\")");
  EXPECT_THAT(Error({{"deadline", "soon"}}),
              StartsWith("command-line flags: key 'constraints.deadline': expected a duration"));
  EXPECT_EQ(Error({{"batch", "4"}}),
            "--batch applies to inference; pass --stage inference (the workload is training)");
  EXPECT_EQ(Error({{"stage", "inference"}, {"tokens", "1B"}}),
            "--tokens applies to training; this workload is inference");
  EXPECT_THAT(Error({{"mfu", "2"}}),
              StartsWith(path_ + " with command-line flags: performance.mfu: 2 must be in (0, 1]"));
  EXPECT_EQ(Error({{"no-such-flag", "1"}}), "--no-such-flag is not a workload flag");
  // A bad value in the file still names the file and line.
  std::ofstream(path_) << "name: ft\nstage: training\nmodel:\n  params: 8B\ntraining:\n"
                          "  tokens: lots\n";
  EXPECT_EQ(Error({{"deadline", "24h"}}),
            path_ +
                ":6:11: key 'training.tokens': 'lots' is not a count; write a number, "
                "optionally with k, M, B (or G) or T (\"8B\", \"1.5e9\", \"125M\")");
}

TEST_F(WorkloadFlagsTest, MissingFileIsNotFound) {
  Result<Workload> w = LoadWorkload("/nonexistent/w.yaml", {{"tokens", "1B"}});
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("/nonexistent/w.yaml"));
}

TEST(WorkloadFlagTable, NamesAreUniqueAndKeysAreWorkloadKeys) {
  std::set<std::string_view> names;
  for (const WorkloadFlag& f : WorkloadFlags()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    const std::string_view key = f.key;
    const bool sectioned = key.starts_with("model.") || key.starts_with("training.") ||
                           key.starts_with("inference.") || key.starts_with("constraints.") ||
                           key.starts_with("performance.") || key.starts_with("@.");
    EXPECT_TRUE(sectioned || key == "stage" || key == "kind" || key == "name") << key;
  }
  EXPECT_EQ(names.size(), 37u);
}

}  // namespace
}  // namespace gantry::advise
