// Crash consistency: a child process saves checkpoints in a loop (sync and
// async) and is killed with SIGKILL after it reported a chosen number of
// commits (plus a random delay, so the kill falls inside a save). After every kill the
// newest committed checkpoint must verify and load with the expected
// contents, and reopening the run must clear the dead writer's temporaries.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
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

// Reports on `report_fd` (one int64 per message, written atomically): 0 once
// the run is open and saving starts, then each step as soon as its save has
// returned OK (committed). The parent kills on these events, not on a timer,
// so where the kill lands does not depend on how fast this machine is.
[[noreturn]] void SaveForever(const std::string& root, int report_fd) {
  auto m = CheckpointManager::Open(Opts(root));
  if (!m.ok()) ::_exit(3);
  int64_t step = 1;
  if (auto latest = (*m)->Latest(); latest.ok()) step = latest->step + 1;
  auto report = [&](int64_t v) {
    if (::write(report_fd, &v, sizeof v) != sizeof v) ::_exit(5);
  };
  report(0);
  for (;; ++step) {
    State s(step, kFloats);
    Status st = step % 2 ? (*m)->Save(step, s.Views()) : (*m)->SaveAsync(step, s.Views());
    if (st.ok() && step % 2 == 0) st = (*m)->Wait();
    if (!st.ok()) ::_exit(4);
    report(step);
  }
}

// Reads one report; false when the child died first (EOF).
bool ReadReport(int fd, int64_t* v) {
  size_t got = 0;
  auto* p = reinterpret_cast<char*>(v);
  while (got < sizeof *v) {
    ssize_t n = ::read(fd, p + got, sizeof *v - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

TEST(SigkillTest, LatestAlwaysLoadsAfterKillAtRandomPoints) {
  TempDir dir;
  std::mt19937 rng(20261130);
  // Each round the child is killed after it has reported `commits` more
  // committed steps (0: right after opening the run), plus a random delay
  // that usually lands the kill inside the next save, wherever that is.
  std::uniform_int_distribution<int> commits_before_kill(0, 2);
  std::uniform_int_distribution<int> delay_us(0, 20000);
  int64_t committed = 0;  // the newest step a child reported as committed
  int64_t last_step = 0;
  int64_t reported = 0;  // commits waited for, over all rounds
  int mid_save = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    // The first round always gets a commit in, so every later one has one.
    const int commits = kill == 0 ? 1 : commits_before_kill(rng);
    const int delay = delay_us(rng);
    int report[2];
    ASSERT_EQ(::pipe(report), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(report[0]);
      SaveForever(dir.path(), report[1]);
    }
    ::close(report[1]);
    reported += commits;
    int64_t v = -1;
    bool alive = ReadReport(report[0], &v);  // opened
    for (int i = 0; alive && i < commits; ++i) {
      alive = ReadReport(report[0], &v);
      if (alive) {
        ASSERT_GT(v, committed) << "the child resumed at an old step after kill " << kill;
        committed = v;
      }
    }
    if (alive) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    // Commits reported during the delay count too.
    while (ReadReport(report[0], &v)) committed = std::max(committed, v);
    ::close(report[0]);
    ASSERT_TRUE(WIFSIGNALED(status))
        << "the saver exited by itself with status " << WEXITSTATUS(status) << " at kill " << kill;
    ASSERT_TRUE(alive) << "the saver died before being killed at kill " << kill;

    // Kills that left a save's temporaries behind (reported, not asserted:
    // where a kill lands depends on the machine).
    if (auto before = storage::LocalFileSystem().ListDir(dir.path() + "/run"); before.ok()) {
      mid_save += std::any_of(before->begin(), before->end(),
                              [](const auto& e) { return e.name.starts_with(".tmp-"); });
    }
    auto m = CheckpointManager::Open(Opts(dir.path()));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto latest = (*m)->Latest();
    if (!latest.ok()) {
      ASSERT_EQ(latest.status().code(), StatusCode::kNotFound) << latest.status().ToString();
      ASSERT_EQ(committed, 0) << "committed step " << committed << " lost after kill " << kill;
      continue;
    }
    // Nothing a save returned OK for is lost; a save the kill interrupted may
    // or may not have committed.
    ASSERT_GE(latest->step, committed) << "a committed step was lost after kill " << kill;
    ASSERT_LE(latest->step, committed + 1) << "kill " << kill;
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
    // What the next child resumes from.
    committed = latest->step;
  }
  // Every round from the first on had a checkpoint to verify (the first
  // waits for a commit), and each round's commits moved the run on.
  EXPECT_GE(last_step, reported);
  std::printf("sigkill: %d kills, %d mid-save (temporaries left), %lld steps committed\n", kKills,
              mid_save, static_cast<long long>(last_step));
  RecordProperty("kills_mid_save", mid_save);
}

}  // namespace
}  // namespace gantry::ckpt
