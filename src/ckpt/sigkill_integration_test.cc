// Crash consistency: a child process saves checkpoints in a loop (sync and
// async) and is killed with SIGKILL at random moments. After every kill the
// newest committed checkpoint must verify and load with the expected
// contents, and reopening the run must clear the dead writer's temporaries.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "ckpt_test_util.h"
#include "gantry/ckpt/manager.h"

namespace gantry::ckpt {
namespace {

using testing::State;
using testing::TempDir;

constexpr size_t kFloats = 1 << 20;  // 4 MiB per step: a save spans many kill points
constexpr int kKills = 60;

Options Opts(const std::string& root) {
  Options o;
  o.root = root;
  o.run = "run";
  o.chunk_bytes = 64 << 10;
  o.retention.keep_last = 3;
  o.fallback = false;  // a corrupt newest step must fail the test, not be skipped
  return o;
}

// Writes one byte to `ready_fd` once the run is open and saving starts, so the
// parent's random delay falls inside the save loop however slowly the child
// started (a loaded CI machine spends most of a short delay in fork and Open).
[[noreturn]] void SaveForever(const std::string& root, int ready_fd) {
  auto m = CheckpointManager::Open(Opts(root));
  if (!m.ok()) ::_exit(3);
  int64_t step = 1;
  if (auto latest = (*m)->Latest(); latest.ok()) step = latest->step + 1;
  char one = 1;
  if (::write(ready_fd, &one, 1) != 1) ::_exit(5);
  for (;; ++step) {
    State s(step, kFloats);
    Status st = step % 2 ? (*m)->Save(step, s.Views()) : (*m)->SaveAsync(step, s.Views());
    if (st.ok() && step % 2 == 0) st = (*m)->Wait();
    if (!st.ok()) ::_exit(4);
  }
}

TEST(SigkillTest, LatestAlwaysLoadsAfterKillAtRandomPoints) {
  TempDir dir;
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_us(0, 60000);
  int64_t last_step = 0;
  int with_checkpoint = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(ready[0]);
      SaveForever(dir.path(), ready[1]);
    }
    ::close(ready[1]);
    char byte = 0;
    ssize_t got = ::read(ready[0], &byte, 1);  // 0 when the child died before saving
    ::close(ready[0]);
    if (got == 1) std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the saver exited by itself with status " << WEXITSTATUS(status) << " at kill " << kill;

    auto m = CheckpointManager::Open(Opts(dir.path()));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto latest = (*m)->Latest();
    if (!latest.ok()) {
      ASSERT_EQ(latest.status().code(), StatusCode::kNotFound) << latest.status().ToString();
      ASSERT_EQ(last_step, 0) << "committed steps disappeared after kill " << kill;
      continue;
    }
    ++with_checkpoint;
    ASSERT_GE(latest->step, last_step) << "latest went backwards after kill " << kill;
    last_step = latest->step;
    auto loaded = (*m)->Load(latest->step);
    ASSERT_TRUE(loaded.ok()) << "kill " << kill << ": " << loaded.status().ToString();
    State(latest->step, kFloats).ExpectEquals(*loaded);
    auto list = (*m)->List();
    ASSERT_TRUE(list.ok());
    for (const CheckpointInfo& c : *list) {
      ASSERT_TRUE((*m)->Verify(c.step, VerifyMode::kFull).ok()) << "step " << c.step;
    }
    auto entries = storage::LocalFileSystem().ListDir(dir.path() + "/run");
    for (const auto& e : *entries) {
      ASSERT_FALSE(e.name.starts_with(".tmp-"))
          << "reopen left " << e.name << " after kill " << kill;
    }
  }
  // Most kills happen after the first commit; the loop must have exercised
  // the interesting case many times.
  EXPECT_GE(with_checkpoint, kKills / 2);
  EXPECT_GT(last_step, 5);
}

}  // namespace
}  // namespace gantry::ckpt
