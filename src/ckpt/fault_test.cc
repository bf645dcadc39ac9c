// Storage faults during a save: each must fail with a clear error, leave the
// previous checkpoint loadable and leave no temporaries behind.
#include <gtest/gtest.h>

#include <cerrno>

#include "ckpt_test_util.h"
#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/storage/fault_injecting.h"

namespace gantry::ckpt {
namespace {

using storage::FaultOp;
using storage::FaultRule;
using testing::State;
using testing::TempDir;

struct FaultCase {
  std::string name;
  FaultOp op;
  int error;
  std::string path_contains;
  StatusCode want;
  std::string want_text;  // a piece of the error message
};

FaultRule Rule(const FaultCase& c) {
  FaultRule r;
  r.op = c.op;
  r.error = c.error;
  r.path_contains = c.path_contains;
  return r;
}

class FaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(FaultTest, SaveFailsCleanlyAndPreviousStepSurvives) {
  const FaultCase& c = GetParam();
  TempDir dir;
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  Options o;
  o.root = dir.path();
  o.run = "run";
  o.fs = &faulty;
  o.chunk_bytes = 512;
  auto m = CheckpointManager::Open(o);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE((*m)->Save(1, State(1).Views()).ok());

  faulty.AddRule(Rule(c));
  Status s = (*m)->Save(2, State(2).Views());
  EXPECT_EQ(faulty.fired(), 1);
  EXPECT_EQ(s.code(), c.want) << s.ToString();
  EXPECT_NE(s.message().find(c.want_text), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("saving step 2"), std::string::npos) << s.message();

  auto latest = (*m)->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->step, 1);
  auto loaded = (*m)->Load();
  ASSERT_TRUE(loaded.ok());
  State(1).ExpectEquals(*loaded);
  auto entries = storage::LocalFileSystem().ListDir(dir.path() + "/run");
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries) {
    EXPECT_FALSE(e.name.starts_with(".tmp-")) << "temporary left behind: " << e.name;
  }
  // The fault is gone: the same step now saves.
  ASSERT_TRUE((*m)->Save(2, State(2).Views()).ok());
  State(2).ExpectEquals(*(*m)->Load());
}

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultTest,
    ::testing::Values(FaultCase{"EnospcOnShardWrite", FaultOp::kWrite, ENOSPC, "shard-",
                                StatusCode::kResourceExhausted, "no space left on device"},
                      FaultCase{"EioOnShardWrite", FaultOp::kWrite, EIO, "shard-",
                                StatusCode::kIoError, "Input/output error"},
                      FaultCase{"EnospcOnManifest", FaultOp::kWrite, ENOSPC, "manifest.json",
                                StatusCode::kResourceExhausted, "manifest.json"},
                      FaultCase{"FsyncOfShard", FaultOp::kSync, EIO, "shard-", StatusCode::kIoError,
                                "fsync"},
                      FaultCase{"FsyncOfMarker", FaultOp::kSync, EIO, "COMMITTED",
                                StatusCode::kIoError, "COMMITTED"},
                      FaultCase{"FsyncOfTempDir", FaultOp::kSyncDir, EIO, ".tmp-step",
                                StatusCode::kIoError, "fsync directory"},
                      FaultCase{"RenameToFinal", FaultOp::kRename, EIO, "step-0000000002",
                                StatusCode::kIoError, "renaming"},
                      FaultCase{"CreateShard", FaultOp::kCreate, EACCES, "shard-",
                                StatusCode::kIoError, "Permission denied"},
                      FaultCase{"CreateTempDir", FaultOp::kCreateDir, ENOSPC, ".tmp-step",
                                StatusCode::kResourceExhausted, "no space left"}),
    [](const ::testing::TestParamInfo<FaultCase>& p) { return p.param.name; });

TEST(ShortWriteTest, ShortWritesAreRetriedAndTheCheckpointIsComplete) {
  TempDir dir;
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  Options o;
  o.root = dir.path();
  o.fs = &faulty;
  o.direct_io = false;
  auto m = CheckpointManager::Open(o);
  ASSERT_TRUE(m.ok());
  FaultRule r;
  r.op = FaultOp::kWrite;
  r.error = 0;
  r.short_bytes = 100;
  r.sticky = true;  // every write is short
  r.path_contains = "shard-";
  faulty.AddRule(r);
  ASSERT_TRUE((*m)->Save(3, State(3).Views()).ok());
  EXPECT_GT(faulty.fired(), 3);
  auto loaded = (*m)->Load(3);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  State(3).ExpectEquals(*loaded);
}

TEST(ShortWriteTest, AWriteThatMakesNoProgressIsAnError) {
  TempDir dir;
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  Options o;
  o.root = dir.path();
  o.fs = &faulty;
  auto m = CheckpointManager::Open(o);
  ASSERT_TRUE(m.ok());
  FaultRule r;
  r.op = FaultOp::kWrite;
  r.error = 0;
  r.short_bytes = 0;
  r.path_contains = "shard-";
  faulty.AddRule(r);
  Status s = (*m)->Save(1, State(1).Views());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("made no progress"), std::string::npos) << s.message();
  EXPECT_EQ((*m)->Latest().status().code(), StatusCode::kNotFound);
}

// The run directory's entry in the root must be durable before the first
// commit relies on it, so Open syncs the root (a failing sync is reported).
TEST(DurabilityTest, OpenSyncsTheRootDirectory) {
  TempDir dir;
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  faulty.AddRule({.op = FaultOp::kSyncDir, .error = EIO, .path_contains = dir.path()});
  Options o;
  o.root = dir.path();
  o.run = "run";
  o.fs = &faulty;
  auto m = CheckpointManager::Open(o);
  EXPECT_EQ(faulty.fired(), 1);
  ASSERT_EQ(m.status().code(), StatusCode::kIoError) << m.status().ToString();
  EXPECT_NE(m.status().message().find(dir.path()), std::string::npos) << m.status().message();
}

TEST(DurabilityTest, WriteSafetensorsSyncsTheParentAfterTheRename) {
  TempDir dir;
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  faulty.AddRule({.op = FaultOp::kSyncDir, .error = EIO, .path_contains = dir.path()});
  float x = 1;
  std::vector<TensorView> t = {{"x", DType::kF32, {1}, &x, 4}};
  const std::string path = dir.path() + "/out.safetensors";
  Status s = internal::WriteSafetensorsTo(faulty, path, t);
  EXPECT_EQ(faulty.fired(), 1);
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.ToString();
  faulty.ClearRules();
  EXPECT_TRUE(internal::WriteSafetensorsTo(faulty, path, t).ok());
  EXPECT_TRUE(ReadSafetensors(path).ok());
}

}  // namespace
}  // namespace gantry::ckpt
