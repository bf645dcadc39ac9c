// Loader over an in-memory StepSource (what verify modes read and what they
// catch), and the fallback rules shared by one-tier and two-tier reads.
#include "load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace gantry::ckpt::internal {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kChunk = 16;

// One committed step (1) with one shard held in memory.
class MemorySource : public StepSource {
 public:
  // Tensor "a" has 40 chunks, "b" 3 (the last one short).
  MemorySource() {
    bytes_.resize(40 * kChunk + 40);
    for (size_t i = 0; i < bytes_.size(); ++i) bytes_[i] = static_cast<char>(i * 7 + 1);
    m_.step = 1;
    m_.chunk_bytes = kChunk;
    m_.shards.push_back({"shard", 0, bytes_.size()});
    Add("a", 0, 40 * kChunk);
    Add("b", 40 * kChunk, 40);
  }
  void Corrupt(size_t offset) { bytes_[offset] ^= 1; }
  size_t reads() const { return reads_; }

  std::string StepDir(int64_t step) const override { return "mem/step-" + std::to_string(step); }
  Result<std::vector<int64_t>> CommittedSteps() override { return std::vector<int64_t>{1}; }
  Result<Manifest> ReadManifest(int64_t step) override {
    if (step != 1) return NotFound("no step " + std::to_string(step));
    return m_;
  }
  Status CheckShardSizes(int64_t, const Manifest&) override { return Status::Ok(); }
  Status ProbeShard(int64_t, const Manifest&, int) override { return Status::Ok(); }
  Status ReadShard(int64_t, const Manifest&, int, ShardFiles&, uint64_t offset, void* dst,
                   size_t len) override {
    if (offset + len > bytes_.size()) return Internal("read past the shard");
    std::memcpy(dst, bytes_.data() + offset, len);
    ++reads_;
    return Status::Ok();
  }

 private:
  void Add(const std::string& name, uint64_t offset, uint64_t length) {
    TensorEntry t;
    t.name = name;
    t.dtype = DType::kU8;
    t.shape = {static_cast<int64_t>(length)};
    t.offset = offset;
    t.length = length;
    t.chunks = ChunkChecksums(bytes_.data() + offset, length, kChunk);
    m_.tensors.push_back(std::move(t));
  }

  std::vector<char> bytes_;
  Manifest m_;
  size_t reads_ = 0;
};

TEST(LoaderTest, VerifyModesReadWhatTheySay) {
  MemorySource src;
  Loader loader(src, VerifyMode::kFull, true, "mem");
  auto full = loader.Verify(1, VerifyMode::kFull);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->chunks_checked, 43u);
  EXPECT_EQ(full->bytes_checked, 40 * kChunk + 40);
  // Sample: first and last chunk of every tensor and every 16th overall:
  // a's 0, 16, 32 and 39, b's first (global 40) and last (42).
  auto sample = loader.Verify(1, VerifyMode::kSample);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->chunks_checked, 6u);
  EXPECT_EQ(sample->bytes_checked, 5 * kChunk + 8);
  const size_t reads = src.reads();
  auto none = loader.Verify(1, VerifyMode::kNone);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->chunks_checked, 0u);
  EXPECT_EQ(src.reads(), reads);
}

TEST(LoaderTest, FullVerifyNamesTheBadChunkThatSamplingSkips) {
  MemorySource src;
  src.Corrupt(5 * kChunk + 3);  // a's chunk 5: not sampled
  Loader loader(src, VerifyMode::kFull, true, "mem");
  EXPECT_TRUE(loader.Verify(1, VerifyMode::kSample).ok());
  auto full = loader.Verify(1, VerifyMode::kFull);
  ASSERT_EQ(full.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(full.status().message(),
            "checksum mismatch in shard mem/step-1/shard, tensor 'a', chunk 5 (file bytes [80, "
            "96)): the checkpoint is corrupt");
  auto loaded = loader.LoadStep(1, {});
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  Loader sampling(src, VerifyMode::kSample, true, "mem");
  EXPECT_TRUE(sampling.LoadStep(1, {}).ok());
}

TEST(LoaderTest, LoadStepReadsTheSelectedTensors) {
  MemorySource src;
  Loader loader(src, VerifyMode::kFull, true, "mem");
  const std::vector<std::string> b = {"b"};
  auto loaded = loader.LoadStep(1, b);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->tensors.size(), 1u);
  EXPECT_EQ(loaded->tensors[0].name, "b");
  ASSERT_EQ(loaded->tensors[0].data.size(), 40u);
  const char* d = static_cast<const char*>(loaded->tensors[0].data.data());
  for (size_t i = 0; i < 40; ++i) {
    ASSERT_EQ(d[i], static_cast<char>((40 * kChunk + i) * 7 + 1)) << i;
  }
  bool missing = false;
  const std::vector<std::string> c = {"c"};
  auto absent = loader.LoadStep(1, c, &missing);
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr("tensor 'c' is not in step 1 (2 tensors)"));
  EXPECT_TRUE(missing);
}

TEST(FallbackTest, NewestVerifiedSkipsFailuresWithFallback) {
  const std::vector<int64_t> steps = {30, 20, 10};
  std::vector<int64_t> tried;
  auto verify = [&](int64_t s) -> Result<VerifyReport> {
    tried.push_back(s);
    if (s == 30) return DataLoss("bad chunk");
    return VerifyReport{s, 0, 0};
  };
  auto r = NewestVerified(steps, /*fallback=*/true, verify, "run");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->step, 20);
  EXPECT_EQ(r->skipped, std::vector<std::string>{"step 30: bad chunk"});
  EXPECT_EQ(tried, (std::vector<int64_t>{30, 20}));

  tried.clear();
  auto strict = NewestVerified(steps, /*fallback=*/false, verify, "run");
  EXPECT_EQ(strict.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(tried, std::vector<int64_t>{30});
}

TEST(FallbackTest, NewestVerifiedSaysHowManyFailed) {
  auto bad = [](int64_t) -> Result<VerifyReport> { return DataLoss("x"); };
  auto none = NewestVerified({}, true, bad, "/ckpt/run");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(none.status().message(), "no committed checkpoint in /ckpt/run");
  const std::vector<int64_t> steps = {2, 1};
  auto all_bad = NewestVerified(steps, true, bad, "/ckpt/run");
  EXPECT_EQ(all_bad.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(all_bad.status().message(), "no committed checkpoint in /ckpt/run verifies (2 failed)");
}

TEST(FallbackTest, NewestLoadableStopsWhereAnOlderStepWouldBeWrong) {
  const std::vector<int64_t> steps = {3, 2, 1};
  std::vector<int64_t> tried;
  auto load_with = [&](StatusCode newest) {
    tried.clear();
    return NewestLoadable(
        steps, true,
        [&](int64_t s, bool* missing) -> Result<LoadedCheckpoint> {
          tried.push_back(s);
          if (s == 3) {
            if (newest == StatusCode::kNotFound) {
              *missing = true;
              return NotFound("tensor 'x' is not in step 3");
            }
            return Status(newest, "newest fails");
          }
          LoadedCheckpoint c;
          c.step = s;
          return c;
        },
        "run");
  };
  // Damage falls back to the previous step.
  auto damaged = load_with(StatusCode::kDataLoss);
  ASSERT_TRUE(damaged.ok());
  EXPECT_EQ(damaged->step, 2);
  EXPECT_EQ(tried, (std::vector<int64_t>{3, 2}));
  // A newer format or a tensor the caller asked for and the step lacks do not.
  EXPECT_EQ(load_with(StatusCode::kFailedPrecondition).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(tried, std::vector<int64_t>{3});
  EXPECT_EQ(load_with(StatusCode::kNotFound).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(tried, std::vector<int64_t>{3});
}

TEST(FallbackTest, NewestLoadableWithoutFallbackOrWithNothingLeft) {
  const std::vector<int64_t> steps = {2, 1};
  int calls = 0;
  auto bad = [&](int64_t, bool*) -> Result<LoadedCheckpoint> {
    ++calls;
    return DataLoss("bad");
  };
  EXPECT_EQ(NewestLoadable(steps, false, bad, "run").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(calls, 1);
  auto all_bad = NewestLoadable(steps, true, bad, "run");
  EXPECT_EQ(all_bad.status().message(), "no committed checkpoint in run loads without errors");
  EXPECT_EQ(NewestLoadable({}, true, bad, "run").status().message(),
            "no committed checkpoint in run");
}

}  // namespace
}  // namespace gantry::ckpt::internal
