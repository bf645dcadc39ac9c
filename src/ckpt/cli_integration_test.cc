// `gantry ckpt ls|show|verify|prune|export` end to end: checkpoints written
// with the library, inspected with the real binary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "ckpt_test_util.h"
#include "gantry/ckpt/manager.h"
#include "testing/gantry_cli.h"

namespace gantry::ckpt {
namespace {

using testing::State;
using testing::TempDir;

struct CliRun {
  int rc = -1;
  std::string out;  // stdout and stderr
};

CliRun Gantry(const std::string& args) {
  gantry::testing::CliRun r = gantry::testing::RunGantryShell(args);
  return {r.rc, r.out + r.err};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o;
    o.root = dir_.path();
    o.run = "run";
    auto m = CheckpointManager::Open(o);
    ASSERT_TRUE(m.ok());
    for (int64_t step : {100, 200, 300}) {
      ASSERT_TRUE((*m)->Save(step, State(step).Views(), Json{{"epoch", step / 100}}).ok());
    }
    run_ = dir_.path() + "/run";
  }
  TempDir dir_;
  std::string run_;
};

TEST_F(CliTest, LsAndShow) {
  CliRun ls = Gantry("ckpt ls " + run_);
  ASSERT_EQ(ls.rc, 0) << ls.out;
  EXPECT_NE(ls.out.find("300"), std::string::npos) << ls.out;
  CliRun json = Gantry("ckpt ls --json " + run_);
  ASSERT_EQ(json.rc, 0);
  auto j = ParseJson(json.out, "ls");
  ASSERT_TRUE(j.ok()) << json.out;
  ASSERT_EQ(j->size(), 3u);
  EXPECT_EQ((*j)[0]["step"], 100);
  EXPECT_EQ((*j)[0]["tensors"], 3);
  CliRun show = Gantry("ckpt show " + run_);
  ASSERT_EQ(show.rc, 0) << show.out;
  EXPECT_NE(show.out.find("step 300"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("model.a"), std::string::npos);
  EXPECT_NE(show.out.find("{\"epoch\":3}"), std::string::npos);
}

TEST_F(CliTest, LsMarksAnUnreadableManifest) {
  const std::string manifest = run_ + "/step-0000000200/manifest.json";
  ASSERT_EQ(::truncate(manifest.c_str(), 10), 0);
  CliRun ls = Gantry("ckpt ls " + run_);
  ASSERT_EQ(ls.rc, 0) << ls.out;
  EXPECT_NE(ls.out.find("unreadable manifest"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("step 200:"), std::string::npos) << ls.out;
  CliRun json = Gantry("ckpt ls --json " + run_);
  auto j = ParseJson(json.out.substr(0, json.out.rfind(']') + 1), "ls");
  ASSERT_TRUE(j.ok()) << json.out;
  ASSERT_EQ(j->size(), 3u);
  EXPECT_TRUE((*j)[1].contains("error"));
  EXPECT_FALSE((*j)[1].contains("tensors"));
}

TEST_F(CliTest, VerifyFailsOnCorruptionAndNamesIt) {
  ASSERT_EQ(Gantry("ckpt verify " + run_).rc, 0);
  const std::string shard = run_ + "/step-0000000200/shard-00000-of-00001.safetensors";
  int fd = ::open(shard.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "\xff", 1, 4096 + 5), 1);
  ::close(fd);
  CliRun v = Gantry("ckpt verify " + run_);
  EXPECT_EQ(v.rc, 1) << v.out;
  EXPECT_NE(v.out.find("step 200: FAILED: checksum mismatch in shard " + shard), std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("step 300: ok"), std::string::npos) << v.out;
  EXPECT_EQ(Gantry("ckpt verify --step 300 " + run_).rc, 0);
}

TEST_F(CliTest, PruneKeepsTheNewest) {
  CliRun p = Gantry("ckpt prune --keep-last 1 " + run_);
  ASSERT_EQ(p.rc, 0) << p.out;
  EXPECT_NE(p.out.find("deleted 2 checkpoint(s) 100 200"), std::string::npos) << p.out;
  EXPECT_EQ(Gantry("ckpt prune " + run_).rc, 2);  // no rule given
}

TEST_F(CliTest, ExportWritesPlainSafetensors) {
  const std::string out = dir_.path() + "/export.safetensors";
  CliRun e = Gantry("ckpt export --step 200 --names model.a,optim.step -o " + out + " " + run_);
  ASSERT_EQ(e.rc, 0) << e.out;
  auto tensors = ReadSafetensors(out);
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  ASSERT_EQ(tensors->size(), 2u);
  EXPECT_EQ((*tensors)[1].name, "optim.step");
  EXPECT_EQ(*static_cast<const int64_t*>((*tensors)[1].data.data()), 200);
  CliRun missing = Gantry("ckpt export --names nope -o " + out + " " + run_);
  EXPECT_EQ(missing.rc, 2) << missing.out;
  EXPECT_NE(missing.out.find("'nope'"), std::string::npos);
}

TEST_F(CliTest, MissingRunIsAUsageError) {
  CliRun r = Gantry("ckpt show " + dir_.path() + "/empty");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("no checkpoint run directory"), std::string::npos) << r.out;
  // Inspecting never creates anything.
  EXPECT_EQ(storage::LocalFileSystem().Stat(dir_.path() + "/empty").status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE(storage::LocalFileSystem().CreateDirs(dir_.path() + "/empty").ok());
  CliRun none = Gantry("ckpt show " + dir_.path() + "/empty");
  EXPECT_EQ(none.rc, 2) << none.out;
  EXPECT_NE(none.out.find("no committed checkpoint"), std::string::npos) << none.out;
}

}  // namespace
}  // namespace gantry::ckpt
