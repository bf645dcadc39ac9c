// Several ranks saving one step through the storage barrier (no MPI): each
// rank writes its own shard, rank 0 commits once all are durable.
#include <gtest/gtest.h>

#include <thread>

#include "ckpt_test_util.h"
#include "gantry/ckpt/manager.h"

namespace gantry::ckpt {
namespace {

using testing::TempDir;

constexpr int kWorld = 3;

Options RankOpts(const std::string& root, int rank) {
  Options o;
  o.root = root;
  o.run = "dist";
  o.rank = rank;
  o.world_size = kWorld;
  o.chunk_bytes = 1024;
  o.barrier_timeout = std::chrono::seconds(60);
  return o;
}

TEST(DistributedTest, EveryRankWritesAShardAndRankZeroCommits) {
  TempDir dir;
  std::vector<std::vector<float>> data(kWorld);
  std::vector<Status> results(kWorld);
  std::vector<std::unique_ptr<CheckpointManager>> managers;
  for (int r = 0; r < kWorld; ++r) {
    auto m = CheckpointManager::Open(RankOpts(dir.path(), r));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    managers.push_back(std::move(m).value());
    data[r].assign(1000 + r * 100, static_cast<float>(r));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      std::vector<TensorView> views = {{"rank" + std::to_string(r) + ".w",
                                        DType::kF32,
                                        {static_cast<int64_t>(data[r].size())},
                                        data[r].data(),
                                        data[r].size() * 4}};
      results[r] = managers[r]->Save(5, views, r == 0 ? Json{{"world", kWorld}} : Json());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r)
    ASSERT_TRUE(results[r].ok()) << r << ": " << results[r].ToString();

  auto list = managers[1]->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].world_size, kWorld);
  EXPECT_EQ((*list)[0].tensors, static_cast<size_t>(kWorld));
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(storage::LocalFileSystem()
                    .Stat(managers[0]->StepDir(5) + "/" + "shard-0000" + std::to_string(r) +
                          "-of-00003.safetensors")
                    .ok());
  }
  // Any rank can load any tensor by name.
  std::vector<std::string> names = {"rank2.w"};
  auto loaded = managers[0]->Load(std::nullopt, names);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->tensors.size(), 1u);
  EXPECT_EQ(loaded->tensors[0].data.size(), 1200u * 4);
  EXPECT_EQ(static_cast<const float*>(loaded->tensors[0].data.data())[0], 2.0f);
  EXPECT_EQ(loaded->metadata["world"], kWorld);
}

TEST(DistributedTest, DuplicateNamesAcrossRanksAreRefused) {
  TempDir dir;
  Options o0 = RankOpts(dir.path(), 0);
  Options o1 = RankOpts(dir.path(), 1);
  o0.world_size = o1.world_size = 2;
  auto m0 = CheckpointManager::Open(o0);
  auto m1 = CheckpointManager::Open(o1);
  ASSERT_TRUE(m0.ok() && m1.ok());
  float x = 1;
  std::vector<TensorView> views = {{"same", DType::kF32, {1}, &x, 4}};
  Status s0, s1;
  std::thread t([&] { s1 = (*m1)->Save(1, views); });
  s0 = (*m0)->Save(1, views);
  t.join();
  EXPECT_EQ(s0.code(), StatusCode::kInvalidArgument) << s0.ToString();
  EXPECT_NE(s0.message().find("'same' is saved by more than one rank"), std::string::npos)
      << s0.message();
  EXPECT_EQ(s1.code(), StatusCode::kFailedPrecondition) << s1.ToString();
  EXPECT_NE(s1.message().find("rank 0 abandoned"), std::string::npos) << s1.message();
}

}  // namespace
}  // namespace gantry::ckpt
