// StagingPool on its own: the shard it lays out is the file the writers
// send, byte for byte, whichever copy path filled it.
#include "staging.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "ckpt_test_util.h"
#include "format.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt::internal {
namespace {

using ckpt::testing::State;
using ckpt::testing::TempDir;

constexpr size_t kChunk = 256;

size_t Padded(size_t bytes) {
  return (bytes + storage::kDirectIoAlignment - 1) / storage::kDirectIoAlignment *
         storage::kDirectIoAlignment;
}

TEST(StagingTest, LaysTheShardOutAsASafetensorsFile) {
  State state(7);
  const auto views = state.Views();
  StagingPool pool(/*rank=*/2, kChunk);
  ASSERT_TRUE(pool.Layout(7, views, Json{{"epoch", 3}}).ok());
  pool.CopyAndHash(views);
  const StagedShard& shard = pool.shard();
  EXPECT_EQ(shard.step, 7);
  EXPECT_EQ(shard.metadata, (Json{{"epoch", 3}}));

  // The safetensors prefix, padded so that the data is aligned for O_DIRECT,
  // then the tensors back to back in save order.
  const std::string prefix = SafetensorsPrefix(views, storage::kDirectIoAlignment, Json());
  ASSERT_EQ(prefix.size() % storage::kDirectIoAlignment, 0u);
  EXPECT_EQ(std::string(pool.data(), prefix.size()), prefix);
  ASSERT_EQ(shard.entries.size(), views.size());
  uint64_t off = prefix.size();
  for (size_t k = 0; k < views.size(); ++k) {
    const TensorEntry& e = shard.entries[k];
    EXPECT_EQ(e.name, views[k].name);
    EXPECT_EQ(e.dtype, views[k].dtype);
    EXPECT_EQ(e.shape, views[k].shape);
    EXPECT_EQ(e.shard, 2);
    EXPECT_EQ(e.offset, off) << e.name;
    EXPECT_EQ(e.length, views[k].bytes) << e.name;
    EXPECT_EQ(std::memcmp(pool.data() + off, views[k].data, views[k].bytes), 0) << e.name;
    EXPECT_EQ(e.chunks, ChunkChecksums(views[k].data, views[k].bytes, kChunk)) << e.name;
    off += views[k].bytes;
  }
  EXPECT_EQ(shard.file_bytes, off);
  EXPECT_GE(pool.capacity(), Padded(shard.file_bytes));

  // Any safetensors reader accepts the bytes as they are.
  TempDir dir;
  const std::string path = dir.path() + "/shard.safetensors";
  std::ofstream(path, std::ios::binary).write(pool.data(), shard.file_bytes);
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), views.size());
  for (size_t k = 0; k < views.size(); ++k) {
    EXPECT_EQ((*read)[k].name, views[k].name);
    ASSERT_EQ((*read)[k].data.size(), views[k].bytes);
    EXPECT_EQ(std::memcmp((*read)[k].data.data(), views[k].data, views[k].bytes), 0);
  }
}

TEST(StagingTest, ParallelCopyThenHashEqualsCopyAndHash) {
  State state(3, 50000);
  const auto views = state.Views();
  StagingPool serial(0, kChunk), parallel(0, kChunk);
  ASSERT_TRUE(serial.Layout(3, views, Json()).ok());
  ASSERT_TRUE(parallel.Layout(3, views, Json()).ok());
  serial.CopyAndHash(views);
  parallel.ParallelCopy(views);
  parallel.HashStaged();
  ASSERT_EQ(serial.shard().file_bytes, parallel.shard().file_bytes);
  const size_t padded = Padded(serial.shard().file_bytes);
  EXPECT_EQ(std::memcmp(serial.data(), parallel.data(), padded), 0);
  ASSERT_EQ(serial.shard().entries.size(), parallel.shard().entries.size());
  for (size_t k = 0; k < serial.shard().entries.size(); ++k) {
    EXPECT_EQ(serial.shard().entries[k].chunks, parallel.shard().entries[k].chunks) << k;
    EXPECT_FALSE(parallel.shard().entries[k].chunks.empty()) << k;
  }
  EXPECT_EQ(parallel.shard().metadata, Json::object());  // null metadata becomes {}
}

TEST(StagingTest, SmallerShardReusesThePoolAndZeroesItsPadding) {
  StagingPool pool(0, kChunk);
  State big(1, 100000);
  ASSERT_TRUE(pool.Layout(1, big.Views(), Json()).ok());
  pool.CopyAndHash(big.Views());
  const char* first = pool.data();
  const size_t capacity = pool.capacity();

  State small(2, 10);
  ASSERT_TRUE(pool.Layout(2, small.Views(), Json()).ok());
  const size_t end = pool.shard().file_bytes, padded = Padded(end);
  ASSERT_LT(end, padded);
  EXPECT_EQ(pool.data(), first);
  EXPECT_EQ(pool.capacity(), capacity);
  pool.CopyAndHash(small.Views());
  // The padding after the small file held the big state's bytes; none of
  // them may reach the disk.
  EXPECT_TRUE(std::all_of(pool.data() + end, pool.data() + padded, [](char c) { return c == 0; }));
}

TEST(StagingTest, LargerShardGrowsThePool) {
  StagingPool pool(0, kChunk);
  ASSERT_TRUE(pool.Reserve(1000).ok());
  EXPECT_EQ(pool.capacity(), storage::kDirectIoAlignment);  // rounded up
  State state(1, 100000);
  ASSERT_TRUE(pool.Layout(1, state.Views(), Json()).ok());
  EXPECT_GE(pool.capacity(), Padded(pool.shard().file_bytes));
  EXPECT_GT(pool.capacity(), storage::kDirectIoAlignment);
}

TEST(StagingTest, LayoutRejectsBadRequestsAndKeepsTheStagedShard) {
  State state(3);
  StagingPool pool(0, kChunk);
  ASSERT_TRUE(pool.Layout(3, state.Views(), Json()).ok());
  const auto views = state.Views();

  Status s = pool.Layout(-1, views, Json());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("step -1"), std::string::npos) << s.message();
  EXPECT_EQ(pool.Layout(10'000'000'000, views, Json()).code(), StatusCode::kInvalidArgument);
  s = pool.Layout(4, views, Json::array({1, 2}));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("must be a JSON object, got [1,2]"), std::string::npos) << s.message();
  s = pool.Layout(4, views, Json{{"name", "\xff"}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("use UTF-8"), std::string::npos) << s.message();
  std::vector<TensorView> twice = {views[0], views[0]};
  EXPECT_EQ(pool.Layout(4, twice, Json()).code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(pool.shard().step, 3);
  EXPECT_EQ(pool.shard().entries.size(), views.size());
}

TEST(StagingTest, WaitReadyReturnsOnlyWhenTheBytesAreThere) {
  State state(5, 200000);
  const auto views = state.Views();
  StagingPool pool(0, kChunk);
  ASSERT_TRUE(pool.Layout(5, views, Json()).ok());
  std::thread copier([&] { pool.CopyAndHash(views); });
  const StagedShard& shard = pool.shard();
  pool.WaitReady(shard.file_bytes);
  // What a writer reads right after WaitReady: every tensor's bytes.
  for (size_t k = 0; k < views.size(); ++k) {
    EXPECT_EQ(std::memcmp(pool.data() + shard.entries[k].offset, views[k].data, views[k].bytes), 0)
        << views[k].name;
  }
  copier.join();
}

TEST(StagingTest, BaseManifestCarriesTheStagedFields) {
  State state(9);
  StagingPool pool(0, kChunk);
  ASSERT_TRUE(pool.Layout(9, state.Views(), Json{{"lr", 0.1}}).ok());
  Manifest m = BaseManifest(pool.shard(), /*world_size=*/4, kChunk, 1764464523);
  EXPECT_EQ(m.step, 9);
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.chunk_bytes, kChunk);
  EXPECT_EQ(m.metadata, (Json{{"lr", 0.1}}));
  EXPECT_EQ(m.created_unix_s, 1764464523);
  EXPECT_EQ(m.created, IsoTime(1764464523));
  EXPECT_TRUE(m.creator.starts_with("gantry ")) << m.creator;
  EXPECT_TRUE(m.shards.empty());
  EXPECT_TRUE(m.tensors.empty());
}

}  // namespace
}  // namespace gantry::ckpt::internal
