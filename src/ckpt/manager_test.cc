#include "gantry/ckpt/manager.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iterator>

#include "ckpt_test_util.h"
#include "format.h"
#include "gantry/core/clock.h"
#include "gantry/storage/fault_injecting.h"

namespace gantry::ckpt {
namespace {

using testing::State;
using testing::TempDir;

class ManagerTest : public ::testing::Test {
 protected:
  Options Opts() {
    Options o;
    o.root = dir_.path();
    o.run = "run";
    o.clock = &clock_;
    o.chunk_bytes = 256;  // many chunks even for small tensors
    return o;
  }
  std::unique_ptr<CheckpointManager> OpenOrDie(Options o) {
    auto m = CheckpointManager::Open(std::move(o));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return std::move(m).value();
  }
  std::string RunDir() const { return dir_.path() + "/run"; }
  std::vector<std::string> RunEntries() {
    std::vector<std::string> out;
    auto entries = storage::LocalFileSystem().ListDir(RunDir());
    for (const auto& e : *entries) out.push_back(e.name);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Flips one bit of `file` at `offset`.
  static void FlipBit(const std::string& file, off_t offset) {
    int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << file;
    unsigned char c;
    ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
    c ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
    ::close(fd);
  }

  TempDir dir_;
  FakeClock clock_;
};

TEST_F(ManagerTest, SaveLoadRoundTripWithMetadata) {
  auto m = OpenOrDie(Opts());
  State s(7);
  ASSERT_TRUE(m->Save(7, s.Views(), Json{{"epoch", 3}, {"lr", 0.1}}).ok());
  auto loaded = m->Load(7);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 7);
  EXPECT_EQ(loaded->metadata["epoch"], 3);
  s.ExpectEquals(*loaded);
  // The committed directory holds the shard, the manifest and the marker only.
  auto files = storage::LocalFileSystem().ListDir(m->StepDir(7));
  ASSERT_TRUE(files.ok());
  std::vector<std::string> names;
  for (const auto& e : *files) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"COMMITTED", "manifest.json",
                                             "shard-00000-of-00001.safetensors"}));
  EXPECT_EQ(m->StepDir(7), RunDir() + "/step-0000000007");
}

TEST_F(ManagerTest, ShardIsPlainSafetensors) {
  auto m = OpenOrDie(Opts());
  State s(3);
  ASSERT_TRUE(m->Save(3, s.Views()).ok());
  const std::string shard = m->StepDir(3) + "/shard-00000-of-00001.safetensors";
  auto tensors = ReadSafetensors(shard);
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  LoadedCheckpoint as_loaded;
  as_loaded.tensors = std::move(tensors).value();
  s.ExpectEquals(as_loaded);
  // The buffer is exactly covered by the tensors (no trailing padding).
  std::ifstream f(shard, std::ios::binary);
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  uint64_t data_bytes = 0;
  for (const auto& v : s.Views()) data_bytes += v.bytes;
  EXPECT_EQ(storage::LocalFileSystem().Stat(shard)->size, 8 + n + data_bytes);
  EXPECT_EQ((8 + n) % storage::kDirectIoAlignment, 0u);  // data starts aligned
}

TEST_F(ManagerTest, LoadSelectsTensorsByName) {
  auto m = OpenOrDie(Opts());
  State s(1);
  ASSERT_TRUE(m->Save(1, s.Views()).ok());
  std::vector<std::string> names = {"optim.step"};
  auto loaded = m->Load(1, names);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->tensors.size(), 1u);
  EXPECT_EQ(*static_cast<const int64_t*>(loaded->tensors[0].data.data()), 1);
  std::vector<std::string> missing = {"nope"};
  auto bad = m->Load(1, missing);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("'nope'"), std::string::npos);
}

TEST_F(ManagerTest, LatestAndListFollowCommittedSteps) {
  auto m = OpenOrDie(Opts());
  EXPECT_EQ(m->Latest().status().code(), StatusCode::kNotFound);
  for (int64_t step : {10, 20, 30}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 30);
  EXPECT_TRUE(latest->skipped.empty());
  auto list = m->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[0].step, 10);
  EXPECT_EQ((*list)[2].tensors, 3u);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->step, 30);
}

TEST_F(ManagerTest, CommittedStepIsImmutable) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(5, State(5).Views()).ok());
  Status again = m->Save(5, State(6).Views());
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  State(5).ExpectEquals(*m->Load(5));
}

TEST_F(ManagerTest, TwoWritersOnOneRunAreRefused) {
  auto first = OpenOrDie(Opts());
  auto second = OpenOrDie(Opts());
  // Hold the run's writer lock as an in-progress save of `first` would.
  auto lock = storage::LocalFileSystem().TryLock(RunDir() + "/.writer.lock");
  ASSERT_TRUE(lock.ok());
  Status s = second->Save(4, State(4).Views());
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_NE(s.message().find("another writer"), std::string::npos) << s.message();
  lock->reset();
  EXPECT_TRUE(second->Save(4, State(4).Views()).ok());
  EXPECT_EQ(RunEntries(), (std::vector<std::string>{".writer.lock", "step-0000000004"}));
}

TEST_F(ManagerTest, BitFlipIsDetectedAndNamed) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  const std::string shard = m->StepDir(1) + "/shard-00000-of-00001.safetensors";
  // 4096 is the data start: flip a bit inside the second chunk of model.a.
  FlipBit(shard, 4096 + 300);
  auto v = m->Verify(1, VerifyMode::kFull);
  ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(v.status().message().find(shard), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find("tensor 'model.a', chunk 1"), std::string::npos)
      << v.status().message();
  EXPECT_EQ(m->Load(1).status().code(), StatusCode::kDataLoss);
  // Sizes still match, so mode none does not read the data.
  EXPECT_TRUE(m->Verify(1, VerifyMode::kNone).ok());
}

TEST_F(ManagerTest, TruncationIsDetectedAndNamed) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  const std::string shard = m->StepDir(1) + "/shard-00000-of-00001.safetensors";
  ASSERT_EQ(::truncate(shard.c_str(), 5000), 0);
  auto v = m->Verify(1, VerifyMode::kNone);
  ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(v.status().message().find("truncated"), std::string::npos);
  EXPECT_NE(v.status().message().find(shard), std::string::npos);
}

TEST_F(ManagerTest, ManifestTamperingIsDetected) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  const std::string manifest = m->StepDir(1) + "/manifest.json";
  FlipBit(manifest, 40);
  auto v = m->Verify(1, VerifyMode::kNone);
  ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(v.status().message().find("SHA-256"), std::string::npos);
}

TEST_F(ManagerTest, LatestFallsBackPastACorruptStep) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  ASSERT_TRUE(m->Save(2, State(2).Views()).ok());
  FlipBit(m->StepDir(2) + "/shard-00000-of-00001.safetensors", 4096 + 10);
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 1);
  ASSERT_EQ(latest->skipped.size(), 1u);
  EXPECT_TRUE(latest->skipped[0].starts_with("step 2: checksum mismatch")) << latest->skipped[0];
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok());
  State(1).ExpectEquals(*loaded);

  Options strict = Opts();
  strict.fallback = false;
  auto m2 = OpenOrDie(strict);
  EXPECT_EQ(m2->Latest().status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(m2->Load().status().code(), StatusCode::kDataLoss);
}

TEST_F(ManagerTest, SampleModeChecksFewerChunks) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1, 100000).Views()).ok());
  auto full = m->Verify(1, VerifyMode::kFull);
  auto sample = m->Verify(1, VerifyMode::kSample);
  ASSERT_TRUE(full.ok() && sample.ok());
  EXPECT_LT(sample->chunks_checked, full->chunks_checked / 4);
  EXPECT_GT(sample->chunks_checked, 0u);
}

TEST_F(ManagerTest, RetentionKeepLastAndEvery) {
  Options o = Opts();
  o.retention.keep_last = 2;
  o.retention.keep_every = 10;
  auto m = OpenOrDie(o);
  for (int64_t step = 5; step <= 40; step += 5)
    ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
  auto list = m->List();
  std::vector<int64_t> steps;
  for (const auto& c : *list) steps.push_back(c.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 20, 30, 35, 40}));
  // Deleted steps leave no temporaries behind.
  for (const std::string& name : RunEntries()) EXPECT_FALSE(name.starts_with(".tmp-")) << name;
}

TEST_F(ManagerTest, RetentionKeepForUsesManifestTime) {
  Options o = Opts();
  o.retention.keep_for = std::chrono::hours(1);
  auto m = OpenOrDie(o);
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  clock_.Advance(std::chrono::minutes(50));
  ASSERT_TRUE(m->Save(2, State(2).Views()).ok());
  clock_.Advance(std::chrono::minutes(20));
  ASSERT_TRUE(m->Save(3, State(3).Views()).ok());  // step 1 is now 70 minutes old
  auto list = m->List();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].step, 2);
}

TEST_F(ManagerTest, NewestStepIsNeverPruned) {
  Options o = Opts();
  o.retention.keep_for = std::chrono::seconds(1);
  auto m = OpenOrDie(o);
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  clock_.Advance(std::chrono::hours(5));
  auto deleted = m->Prune();
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(deleted->empty());
  EXPECT_TRUE(m->Latest().ok());
}

std::vector<int64_t> Steps(CheckpointManager& m) {
  std::vector<int64_t> out;
  auto list = m.List();
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  for (const auto& c : *list) out.push_back(c.step);
  return out;
}

TEST_F(ManagerTest, RetentionAfterRollbackKeepsTheStepJustSavedAndTheNewestGoodOne) {
  {
    auto m = OpenOrDie(Opts());
    for (int64_t step : {10, 20}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
  }
  Options o = Opts();
  o.retention.keep_last = 1;
  auto m = OpenOrDie(o);
  // The run resumes from 10 (say 20 was a diverged branch) and saves 11.
  ASSERT_TRUE(m->Save(11, State(11).Views()).ok());
  EXPECT_EQ(Steps(*m), (std::vector<int64_t>{11, 20}));
  auto loaded = m->Load(11);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  State(11).ExpectEquals(*loaded);
}

TEST_F(ManagerTest, RetentionAfterFallbackNeverLeavesOnlyACorruptStep) {
  {
    auto m = OpenOrDie(Opts());
    for (int64_t step : {10, 20}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
    FlipBit(m->StepDir(20) + "/shard-00000-of-00001.safetensors", 4096 + 10);
  }
  Options o = Opts();
  o.retention.keep_last = 1;
  auto m = OpenOrDie(o);
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  ASSERT_EQ(latest->step, 10);
  ASSERT_TRUE(m->Save(11, State(11).Views()).ok());
  // 11 was just saved and is the newest step that verifies; 20 is newer
  // than it, so retention does not judge it; 10 is beyond keep_last.
  EXPECT_EQ(Steps(*m), (std::vector<int64_t>{11, 20}));
  latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 11);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  State(11).ExpectEquals(*loaded);
}

TEST_F(ManagerTest, StepsWithUnreadableManifestsDoNotCountTowardKeepLast) {
  {
    auto m = OpenOrDie(Opts());
    for (int64_t step : {1, 2, 3}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
    ASSERT_EQ(::unlink((m->StepDir(3) + "/manifest.json").c_str()), 0);
  }
  Options o = Opts();
  o.retention.keep_last = 1;
  auto m = OpenOrDie(o);
  auto deleted = m->Prune();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, (std::vector<int64_t>{1}));
  EXPECT_EQ(Steps(*m), (std::vector<int64_t>{2, 3}));
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  State(2).ExpectEquals(*loaded);
}

// Rewrites step `dir`'s manifest with `edit` and a matching COMMITTED marker,
// as a hostile or buggy writer could.
void RewriteManifest(const std::string& dir, const std::function<void(Json&)>& edit) {
  std::ifstream in(dir + "/manifest.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto j = ParseJson(text, "manifest");
  ASSERT_TRUE(j.ok());
  edit(*j);
  text = j->dump(1) + "\n";
  std::ofstream(dir + "/manifest.json", std::ios::trunc) << text;
  std::ofstream(dir + "/COMMITTED", std::ios::trunc)
      << "sha256 " << internal::Sha256Hex(text) << "\n";
}

TEST_F(ManagerTest, HostileChunkBytesIsDataLossNotACrash) {
  auto m = OpenOrDie(Opts());
  ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  ASSERT_TRUE(m->Save(2, State(2).Views()).ok());
  RewriteManifest(m->StepDir(2), [](Json& j) { j["chunk_bytes"] = uint64_t{1} << 62; });
  for (VerifyMode mode : {VerifyMode::kFull, VerifyMode::kSample, VerifyMode::kNone}) {
    auto v = m->Verify(2, mode);
    ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(v.status().message().find(m->StepDir(2) + "/manifest.json: chunk_bytes"),
              std::string::npos)
        << v.status().message();
  }
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 1);
  Options huge = Opts();
  huge.chunk_bytes = (size_t{1} << 30) + 1;
  EXPECT_EQ(CheckpointManager::Open(huge).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ManagerTest, OversizedMarkerAndManifestAreDataLossNamingThem) {
  auto m = OpenOrDie(Opts());
  for (int64_t step : {1, 2, 3}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
  // Sparse files: the size is what a reader would allocate.
  const std::string marker = m->StepDir(3) + "/COMMITTED";
  const std::string manifest = m->StepDir(2) + "/manifest.json";
  ASSERT_EQ(::truncate(marker.c_str(), off_t{8} << 40), 0);
  ASSERT_EQ(::truncate(manifest.c_str(), off_t{1} << 40), 0);
  auto v = m->Verify(3, VerifyMode::kNone);
  ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(v.status().message().starts_with(marker + " has 8796093022208 bytes"))
      << v.status().message();
  v = m->Verify(2, VerifyMode::kNone);
  ASSERT_EQ(v.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(v.status().message().starts_with(manifest + " has")) << v.status().message();
  EXPECT_EQ(Steps(*m), (std::vector<int64_t>{1, 2, 3}));
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 1);
  EXPECT_EQ(latest->skipped.size(), 2u);
}

TEST_F(ManagerTest, NonUtf8NamesAndMetadataAreInvalidArgumentsNotExceptions) {
  auto m = OpenOrDie(Opts());
  float x = 1;
  std::vector<TensorView> bad = {{"w\xff", DType::kF32, {1}, &x, 4}};
  EXPECT_EQ(m->Save(1, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->SaveAsync(1, bad).code(), StatusCode::kInvalidArgument);
  std::vector<TensorView> good = {{"w", DType::kF32, {1}, &x, 4}};
  Status s = m->SaveAsync(1, good, Json{{"note", "caf\xe9"}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("UTF-8"), std::string::npos) << s.message();
  EXPECT_EQ(m->Save(1, good, Json{{"k\xff", 1}}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(m->Wait().ok());
  EXPECT_TRUE(m->Save(1, good).ok());
}

TEST_F(ManagerTest, LoadFallsBackLikeLatestButNotPastANewerFormat) {
  auto m = OpenOrDie(Opts());
  for (int64_t step : {1, 2, 3}) ASSERT_TRUE(m->Save(step, State(step).Views()).ok());
  // Step 3 is committed but its manifest is gone (NotFound, not DataLoss).
  ASSERT_EQ(::unlink((m->StepDir(3) + "/manifest.json").c_str()), 0);
  EXPECT_EQ(m->Latest()->step, 2);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  State(2).ExpectEquals(*loaded);
  // A missing tensor is the caller's error, not a reason to go back.
  const std::string missing[] = {"nope"};
  EXPECT_EQ(m->Load(std::nullopt, missing).status().code(), StatusCode::kNotFound);
  // A newer format is not silently skipped.
  RewriteManifest(m->StepDir(2), [](Json& j) { j["format_version"] = kFormatVersion + 1; });
  EXPECT_EQ(m->Load().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ManagerTest, StaleTemporariesAreCleanedWhenNoWriterHoldsTheLock) {
  {
    auto m = OpenOrDie(Opts());
    ASSERT_TRUE(m->Save(1, State(1).Views()).ok());
  }
  ASSERT_TRUE(storage::LocalFileSystem().CreateDirs(RunDir() + "/.tmp-step-0000000002").ok());
  {
    // A live writer holds the lock: its temporary must survive.
    auto lock = storage::LocalFileSystem().TryLock(RunDir() + "/.writer.lock");
    auto m = OpenOrDie(Opts());
    EXPECT_TRUE(storage::LocalFileSystem().Stat(RunDir() + "/.tmp-step-0000000002").ok());
  }
  auto m = OpenOrDie(Opts());
  EXPECT_EQ(RunEntries(), (std::vector<std::string>{".writer.lock", "step-0000000001"}));
  // An uncommitted step directory (no marker) is not a checkpoint.
  ASSERT_TRUE(storage::LocalFileSystem().CreateDirs(RunDir() + "/step-0000000009").ok());
  EXPECT_EQ(m->Latest()->step, 1);
}

TEST_F(ManagerTest, SaveAsyncCopiesBeforeReturning) {
  auto m = OpenOrDie(Opts());
  std::vector<float> w(5000, 1.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {5000}, w.data(), w.size() * 4}};
  ASSERT_TRUE(m->SaveAsync(1, views).ok());
  std::fill(w.begin(), w.end(), 2.0f);  // training continues and changes the weights
  ASSERT_TRUE(m->SaveAsync(2, views).ok());
  ASSERT_TRUE(m->Wait().ok());
  auto one = m->Load(1);
  auto two = m->Load(2);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(static_cast<const float*>(one->tensors[0].data.data())[4999], 1.0f);
  EXPECT_EQ(static_cast<const float*>(two->tensors[0].data.data())[4999], 2.0f);
}

TEST_F(ManagerTest, AsyncErrorSurfacesOnNextCallOnce) {
  storage::FaultInjectingFileSystem faulty(storage::LocalFileSystem());
  Options o = Opts();
  o.fs = &faulty;
  auto m = OpenOrDie(o);
  storage::FaultRule rule;
  rule.op = storage::FaultOp::kSync;
  rule.error = EIO;
  faulty.AddRule(rule);
  ASSERT_TRUE(m->SaveAsync(1, State(1).Views()).ok());
  Status next = m->SaveAsync(2, State(2).Views());
  EXPECT_EQ(next.code(), StatusCode::kIoError) << next.ToString();
  EXPECT_NE(next.message().find("saving step 1"), std::string::npos) << next.message();
  ASSERT_TRUE(m->SaveAsync(2, State(2).Views()).ok());
  EXPECT_TRUE(m->Wait().ok());
  EXPECT_TRUE(m->Wait().ok());
  EXPECT_EQ(m->Latest()->step, 2);
}

TEST_F(ManagerTest, InvalidInputsAreRejectedWithTheirName) {
  auto m = OpenOrDie(Opts());
  float x = 1;
  std::vector<TensorView> dup = {{"x", DType::kF32, {1}, &x, 4}, {"x", DType::kF32, {1}, &x, 4}};
  Status s = m->Save(1, dup);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x' appears twice"), std::string::npos);
  std::vector<TensorView> wrong = {{"y", DType::kF64, {2}, &x, 4}};
  EXPECT_NE(m->Save(1, wrong).message().find("need 16 bytes"), std::string::npos);
  EXPECT_EQ(m->Save(-1, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->Save(1, {}, Json::array()).code(), StatusCode::kInvalidArgument);
  Options bad = Opts();
  bad.run = "../escape";
  EXPECT_EQ(CheckpointManager::Open(bad).status().code(), StatusCode::kInvalidArgument);
  bad = Opts();
  bad.rank = 2;
  bad.world_size = 2;
  EXPECT_EQ(CheckpointManager::Open(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ManagerTest, EmptyAndScalarTensorsRoundTrip) {
  auto m = OpenOrDie(Opts());
  int32_t scalar = 42;
  std::vector<TensorView> views = {{"empty", DType::kF16, {0, 3}, nullptr, 0},
                                   {"scalar", DType::kI32, {}, &scalar, 4}};
  ASSERT_TRUE(m->Save(1, views).ok());
  auto loaded = m->Load(1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tensors[0].shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(loaded->tensors[0].data.size(), 0u);
  EXPECT_EQ(*static_cast<const int32_t*>(loaded->tensors[1].data.data()), 42);
}

TEST_F(ManagerTest, LargeTensorLoadsInPiecesAndAnyPieceIsVerified) {
  Options o = Opts();
  o.chunk_bytes = 1 << 20;
  auto m = OpenOrDie(o);
  std::vector<float> big(20 << 20);  // 80 MiB: several load pieces
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 65521);
  std::vector<TensorView> views = {{"big", DType::kF32, {5, 4 << 20}, big.data(), big.size() * 4}};
  ASSERT_TRUE(m->Save(1, views).ok());
  auto loaded = m->Load(1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->tensors[0].data.size(), big.size() * 4);
  EXPECT_EQ(std::memcmp(loaded->tensors[0].data.data(), big.data(), big.size() * 4), 0);
  // Chunk 75 lies in the last piece.
  FlipBit(m->StepDir(1) + "/shard-00000-of-00001.safetensors", 4096 + 75 * (1 << 20) + 123);
  auto bad = m->Load(1);
  ASSERT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("tensor 'big', chunk 75 "), std::string::npos)
      << bad.status().message();
}

TEST_F(ManagerTest, ReadOnlyManagerNeverWrites) {
  Options o = Opts();
  o.read_only = true;
  EXPECT_EQ(CheckpointManager::Open(o).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(OpenOrDie(Opts())->Save(1, State(1).Views()).ok());
  ASSERT_TRUE(storage::LocalFileSystem().CreateDirs(RunDir() + "/.tmp-step-0000000002").ok());
  auto m = OpenOrDie(o);
  EXPECT_EQ(m->Latest()->step, 1);
  EXPECT_EQ(m->Save(2, State(2).Views()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->SaveAsync(2, State(2).Views()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->Prune().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(storage::LocalFileSystem().Stat(RunDir() + "/.tmp-step-0000000002").ok());
}

TEST_F(ManagerTest, AlignedBufferReleaseTransfersOwnership) {
  auto b = AlignedBuffer::Allocate(10000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 4096, 0u);
  void* p = b->Release();
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(b->size(), 0u);
  AlignedFree(p);
}

}  // namespace
}  // namespace gantry::ckpt
