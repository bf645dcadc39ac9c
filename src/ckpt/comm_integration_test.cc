// Two processes saving one step with a comm::Communicator plugged in (the
// shared-memory backend): its barriers replace the storage polling, and a
// failed commit on rank 0 is reported on rank 1 instead of hanging it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt_test_util.h"
#include "gantry/ckpt/manager.h"
#include "gantry/comm/shm.h"

namespace gantry::ckpt {
namespace {

using testing::TempDir;

// Saves step 7 as `rank` of 2: returns 0 when saved, 1 when the save failed,
// 2 when setup failed.
int SaveAsRank(const std::string& root, const std::string& session, int rank,
               const std::string& tensor_name) {
  auto comm = comm::CreateShmCommunicator({session, rank, 2, 30});
  if (!comm.ok()) return 2;
  Options o;
  o.root = root;
  o.run = "run";
  o.rank = rank;
  o.world_size = 2;
  o.comm = comm->get();
  auto m = CheckpointManager::Open(o);
  if (!m.ok()) return 2;
  float x[4] = {static_cast<float>(rank), 1, 2, 3};
  std::vector<TensorView> views = {{tensor_name, DType::kF32, {4}, x, sizeof(x)}};
  return (*m)->Save(7, views).ok() ? 0 : 1;
}

// Forks rank 1, runs rank 0 here; returns {rank 0 result, rank 1 result}.
std::pair<int, int> RunTwoRanks(const std::string& root, const std::string& session,
                                const std::string& name0, const std::string& name1) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(SaveAsRank(root, session, 1, name1));
  int r0 = SaveAsRank(root, session, 0, name0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {r0, WIFEXITED(status) ? WEXITSTATUS(status) : 3};
}

TEST(CommTest, RanksSaveThroughCommunicatorBarriers) {
  TempDir dir;
  auto [r0, r1] = RunTwoRanks(dir.path(), std::to_string(::getpid()) + "-ckpt-ok", "w0", "w1");
  ASSERT_EQ(r0, 0);
  ASSERT_EQ(r1, 0);
  Options o;
  o.root = dir.path();
  o.run = "run";
  auto m = CheckpointManager::Open(o);
  ASSERT_TRUE(m.ok());
  auto loaded = (*m)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->tensors.size(), 2u);
  EXPECT_EQ(loaded->tensors[1].name, "w1");
  EXPECT_EQ(static_cast<const float*>(loaded->tensors[1].data.data())[0], 1.0f);
}

TEST(CommTest, FailedCommitIsReportedOnEveryRank) {
  TempDir dir;
  // Both ranks save a tensor of the same name: rank 0 refuses to commit.
  auto [r0, r1] = RunTwoRanks(dir.path(), std::to_string(::getpid()) + "-ckpt-dup", "w", "w");
  EXPECT_EQ(r0, 1);
  EXPECT_EQ(r1, 1);
}

}  // namespace
}  // namespace gantry::ckpt
