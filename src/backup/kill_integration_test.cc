// Real-process crashes of `gantry backup create` and `gantry backup prune`:
// the real binary on a file:// repository on a real disk ($TMPDIR or /tmp),
// SIGKILLed when the Nth chunk file appears (create) or the Nth object is
// removed (prune), N drawn from a seeded generator over a range measured from
// an unkilled run (so some kills land before the first event and some after
// the process has exited). inotify reports the events, so the kill point
// depends on what the process has done, not on how fast the machine is.
// After every kill `gantry backup verify --all --read-data` must pass, the
// newest backups that prune keeps must survive a killed prune, and the rerun
// of the killed command must succeed (and verify again). Outcomes are counted
// and printed, never required to have any distribution.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "backup_test_util.h"
#include "gantry/backup/backup.h"
#include "testing/gantry_cli.h"

namespace gantry::backup::testing {
namespace {

using gantry::testing::CliRun;
using gantry::testing::GantryProcess;

constexpr int kIterations = 24;
constexpr int kKeep = 3;  // prune --keep-last
constexpr size_t kFileBytes = 192u << 10;
constexpr int kFiles = 4;

// Counts objects appearing in and disappearing from a file:// repository.
// Watches backups/ and all 256 chunks/xx/ directories, created up front so no
// event is missed while a watch is being added (the local store creates them
// on demand and removes them when they empty, which is fine: a watch on a
// removed directory just goes quiet).
class RepoWatch {
 public:
  explicit RepoWatch(const fs::path& repo) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    EXPECT_GE(fd_, 0) << "inotify_init1: " << std::strerror(errno);
    std::vector<fs::path> dirs = {repo / "backups"};
    for (int i = 0; i < 256; ++i) {
      char hex[3];
      std::snprintf(hex, sizeof hex, "%02x", i);
      dirs.push_back(repo / "chunks" / hex);
    }
    for (const fs::path& d : dirs) {
      fs::create_directories(d);
      int wd = inotify_add_watch(fd_, d.c_str(), IN_CREATE | IN_MOVED_TO | IN_DELETE);
      EXPECT_GE(wd, 0) << "inotify_add_watch " << d << ": " << std::strerror(errno);
    }
  }
  ~RepoWatch() {
    if (fd_ >= 0) close(fd_);
  }
  RepoWatch(const RepoWatch&) = delete;
  RepoWatch& operator=(const RepoWatch&) = delete;

  // Waits up to `ms` for events and counts them (temporary files excluded).
  void Poll(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return;
    alignas(inotify_event) char buf[64 * 1024];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof buf)) > 0) {
      for (char* q = buf; q < buf + n;) {
        auto* e = reinterpret_cast<inotify_event*>(q);
        if (e->len > 0 && !std::string_view(e->name).starts_with(".gantry-tmp-")) {
          if (e->mask & (IN_CREATE | IN_MOVED_TO)) ++appeared;
          if (e->mask & IN_DELETE) ++removed;
        }
        q += sizeof(inotify_event) + e->len;
      }
    }
  }

  int appeared = 0;
  int removed = 0;

 private:
  int fd_ = -1;
};

enum class Outcome { kKilled, kFinished };

// Runs `gantry args` and SIGKILLs it as soon as `kill_now(watch)` is true;
// the exit status must be 0 (it finished first) or SIGKILL's.
Outcome RunAndKill(const std::vector<std::string>& args, RepoWatch& watch,
                   const std::function<bool(const RepoWatch&)>& kill_now, std::string* log) {
  GantryProcess p;
  Status s = p.Start(args);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (;;) {
    if (kill_now(watch)) {
      p.Signal(SIGKILL);
      break;
    }
    if (!p.Running()) break;
    watch.Poll(5);
  }
  int rc = p.Wait();
  *log = "rc " + std::to_string(rc) + "\nstdout: " + p.Out() + "\nstderr: " + p.Err();
  EXPECT_TRUE(rc == 0 || rc == 128 + SIGKILL) << *log;
  return rc == 0 ? Outcome::kFinished : Outcome::kKilled;
}

class BackupKill : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(gantry::testing::GantryBinary()))
        << gantry::testing::GantryBinary() << " is missing; build the gantry target first";
    // Small chunks (16 KiB on average) so a few hundred KiB make dozens of
    // chunk files; the CLI reads the chunker parameters from config.json.
    auto store = storage::OpenObjectStore("file://" + repo_.string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ChunkerParams p;
    p.min_bytes = 4u << 10;
    p.avg_bytes = 16u << 10;
    p.max_bytes = 64u << 10;
    auto repo = Repository::OpenOrInit(**store, std::nullopt, "no key", p);
    ASSERT_TRUE(repo.ok()) << repo.status().ToString();
    for (int i = 0; i < kFiles; ++i) Rewrite(i, 1000 + i);
  }
  void Rewrite(int file, uint64_t seed) {
    WriteFile(src_ / ("f" + std::to_string(file) + ".bin"), RandomBytes(kFileBytes, seed));
  }
  std::vector<std::string> Args(std::vector<std::string> a) {
    a.insert(a.begin(), "backup");
    a.push_back("--repo");
    a.push_back("file://" + repo_.string());
    return a;
  }
  CliRun Gantry(std::vector<std::string> a) { return gantry::testing::RunGantry(Args(a)); }
  void ExpectVerifies(const std::string& where) {
    CliRun v = Gantry({"verify", "--all", "--read-data"});
    EXPECT_EQ(v.rc, 0) << where << ": verify failed\n" << v.out << v.err;
  }
  std::vector<std::string> ListIds() {
    CliRun l = Gantry({"list", "--json"});
    EXPECT_EQ(l.rc, 0) << l.out << l.err;
    std::vector<std::string> ids;
    Json j = l.json();
    if (j.is_array()) {
      for (const auto& m : j) ids.push_back(m.value("id", "?"));
    }
    return ids;
  }
  bool NoLocks() { return !fs::exists(repo_ / "locks") || fs::is_empty(repo_ / "locks"); }
  // Chunk files look an hour older, as if the backups had been made an hour
  // apart, so that prune --gc-grace 0s may collect every unreferenced one.
  void AgeChunks() {
    struct timespec ts[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
    for (const auto& e : fs::recursive_directory_iterator(repo_ / "chunks")) {
      if (e.is_regular_file()) utimensat(AT_FDCWD, e.path().c_str(), ts, AT_SYMLINK_NOFOLLOW);
    }
  }

  TempDir tmp_{"gantry-backup-kill"};
  fs::path repo_ = tmp_ / "repo";
  fs::path src_ = tmp_ / "src";
};

TEST_F(BackupKill, KilledCreateAndPruneLeaveAVerifyingRepository) {
  uint64_t seed = 24;
  if (const char* s = std::getenv("GANTRY_BACKUP_KILL_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::printf(
      "backup kill test: seed %llu (GANTRY_BACKUP_KILL_SEED=%llu replays the kill points)\n",
      static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const std::vector<std::string> create = Args({"create", src_.string()});
  const std::vector<std::string> prune =
      Args({"prune", "--keep-last", std::to_string(kKeep), "--gc-grace", "0s"});

  // Unkilled runs measure the ranges: new chunks of a create after one file
  // changed, removals of a prune that forgets one backup.
  ASSERT_EQ(Gantry({"create", src_.string()}).rc, 0);
  int create_events = 0, prune_events = 0;
  for (int i = 0; i < kKeep; ++i) {
    Rewrite(i % kFiles, 2000 + i);
    RepoWatch w(repo_);
    std::string log;
    ASSERT_EQ(RunAndKill(
                  create, w, [](const RepoWatch&) { return false; }, &log),
              Outcome::kFinished)
        << log;
    create_events = std::max(create_events, w.appeared);
  }
  {
    AgeChunks();
    RepoWatch w(repo_);
    std::string log;
    ASSERT_EQ(RunAndKill(
                  prune, w, [](const RepoWatch&) { return false; }, &log),
              Outcome::kFinished)
        << log;
    prune_events = w.removed;
  }
  ASSERT_GT(create_events, 5) << "a create should upload several chunks";
  ASSERT_GT(prune_events, 2) << "a prune should remove a manifest and chunks";
  std::printf("unkilled: a create adds %d objects, a prune removes %d\n", create_events,
              prune_events);

  int create_killed = 0, create_finished = 0, prune_killed = 0, prune_finished = 0;
  for (int it = 0; it < kIterations; ++it) {
    const std::string where =
        "iteration " + std::to_string(it) + " (seed " + std::to_string(seed) + ")";
    SCOPED_TRACE(where);
    const int file = static_cast<int>(rng() % kFiles);
    Rewrite(file, rng());

    // create, killed at the Nth object (chunk or manifest) to appear.
    const int n_create = static_cast<int>(rng() % static_cast<uint64_t>(create_events + 4));
    std::string log;
    Outcome oc;
    {
      RepoWatch w(repo_);
      oc = RunAndKill(
          create, w, [&](const RepoWatch& x) { return x.appeared >= n_create; }, &log);
    }
    (oc == Outcome::kKilled ? create_killed : create_finished)++;
    ExpectVerifies(where + ", create killed after " + std::to_string(n_create) + " objects");
    CliRun rerun = Gantry({"create", "--json", src_.string()});
    ASSERT_EQ(rerun.rc, 0) << where << ": rerun of create\n" << rerun.out << rerun.err;
    ExpectVerifies(where + ", create rerun");
    fs::path out = tmp_ / "restore";
    CliRun r = Gantry({"restore", rerun.json().value("id", "latest"), "--to", out.string()});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(DescribeTree(src_), DescribeTree(out / "src")) << where;
    fs::remove_all(out);

    // prune, killed at the Nth object removed. The newest kKeep backups stay
    // whatever happens.
    std::vector<std::string> before = ListIds();
    ASSERT_GE(before.size(), static_cast<size_t>(kKeep));
    const std::vector<std::string> keep(before.end() - kKeep, before.end());
    AgeChunks();
    const int n_prune = static_cast<int>(rng() % static_cast<uint64_t>(prune_events + 3));
    {
      RepoWatch w(repo_);
      oc = RunAndKill(
          prune, w, [&](const RepoWatch& x) { return x.removed >= n_prune; }, &log);
    }
    (oc == Outcome::kKilled ? prune_killed : prune_finished)++;
    const std::string after_kill =
        where + ", prune killed after " + std::to_string(n_prune) + " removals";
    ExpectVerifies(after_kill);
    std::vector<std::string> left = ListIds();
    for (const std::string& id : keep) {
      EXPECT_NE(std::find(left.begin(), left.end(), id), left.end())
          << after_kill << ": backup " << id << " was lost";
    }
    CliRun again =
        Gantry({"prune", "--json", "--keep-last", std::to_string(kKeep), "--gc-grace", "0s"});
    ASSERT_EQ(again.rc, 0) << where << ": rerun of prune\n" << again.out << again.err;
    ExpectVerifies(where + ", prune rerun");
    EXPECT_EQ(ListIds(), keep) << where;
    EXPECT_TRUE(NoLocks()) << where << ": the rerun prune left a lock behind";
    if (HasFatalFailure()) break;
  }
  // Every unreferenced chunk was collected in the end (reruns included).
  AgeChunks();
  CliRun dry = Gantry(
      {"prune", "--json", "--dry-run", "--keep-last", std::to_string(kKeep), "--gc-grace", "0s"});
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_EQ(dry.json().value("chunks_deleted", -1), 0) << dry.out;
  std::printf(
      "backup kill test: %d iterations; create killed %d, finished before the kill %d; prune "
      "killed %d, finished before the kill %d\n",
      kIterations, create_killed, create_finished, prune_killed, prune_finished);
}

// create and prune started at the same moment, over and over, while the
// source flips between two states: each create reuses the chunks of the
// backup before last, which a prune with --keep-last 1 forgets and would
// collect. Each command either succeeds or stands aside (exit 2, "is
// running"), and the repository verifies after every round.
TEST_F(BackupKill, CreateAndPruneAtOnce) {
  const std::vector<std::string> create = Args({"create", src_.string()});
  const std::vector<std::string> prune = Args({"prune", "--keep-last", "1", "--gc-grace", "0s"});
  for (int state = 0; state < 2; ++state) {
    Rewrite(0, 5000 + state);
    ASSERT_EQ(Gantry({"create", src_.string()}).rc, 0);
  }
  int ok[2] = {0, 0}, stood_aside[2] = {0, 0};
  for (int round = 0; round < 8; ++round) {
    const std::string where = "round " + std::to_string(round);
    Rewrite(0, 5000 + round % 2);
    AgeChunks();
    GantryProcess c, p;
    ASSERT_TRUE(c.Start(create).ok());
    ASSERT_TRUE(p.Start(prune).ok());
    GantryProcess* procs[2] = {&c, &p};
    for (int i = 0; i < 2; ++i) {
      int rc = procs[i]->Wait();
      if (rc == 0) {
        ++ok[i];
      } else {
        EXPECT_EQ(rc, 2) << where << "\n" << procs[i]->Err();
        EXPECT_NE(procs[i]->Err().find("is running"), std::string::npos) << where << "\n"
                                                                         << procs[i]->Err();
        ++stood_aside[i];
      }
    }
    ExpectVerifies(where);
    if (HasFailure()) break;
  }
  ASSERT_EQ(Gantry({"prune", "--keep-last", "1", "--gc-grace", "0s"}).rc, 0);
  ExpectVerifies("after the rounds");
  EXPECT_TRUE(NoLocks());
  std::printf(
      "create and prune at once, 8 rounds: create ok %d, stood aside %d; prune ok %d, stood aside "
      "%d\n",
      ok[0], stood_aside[0], ok[1], stood_aside[1]);
}

}  // namespace
}  // namespace gantry::backup::testing
