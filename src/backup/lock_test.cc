// Concurrent `create` and `prune` on one repository. Prune collects chunks
// that no manifest references; a create that is still running references
// chunks that no manifest names yet - those it uploaded (protected by the
// grace period) and, worse, old chunks it found already stored and reuses
// without uploading. A hook runs one operation at an exact point of the other
// one, on the same store, and the repository must verify afterwards.
#include "lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <thread>

#include "backup_test_util.h"
#include "gantry/backup/backup.h"
#include "gantry/core/clock.h"

namespace gantry::backup::testing {
namespace {

constexpr int64_t kCreateWall = 1'800'000'000;
constexpr int64_t kPruneWall = 1'900'000'000;  // MemStore objects date from 1'700'000'000

class Concurrent : public ::testing::Test {
 protected:
  void SetUp() override {
    ChunkerParams p;
    p.min_bytes = 256;
    p.avg_bytes = 1024;
    p.max_bytes = 4096;
    auto r = Repository::OpenOrInit(base_, std::nullopt, "no key", p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    repo_ = std::move(*r);
    WriteFile(tmp_ / "one/data/a.bin", RandomBytes(20000, 1));
    WriteFile(tmp_ / "one/data/b.bin", RandomBytes(20000, 2));
    WriteFile(tmp_ / "two/data/c.bin", RandomBytes(20000, 3));
  }
  static Result<Manifest> Create(Repository& repo, const fs::path& dir, int hour) {
    FakeClock clock(
        std::chrono::seconds(1000),
        std::chrono::system_clock::time_point(std::chrono::seconds(kCreateWall + 3600 * hour)));
    CreateOptions o;
    o.sources = {(dir / "data").string()};  // every backup is named "data"
    o.clock = &clock;
    o.parallelism = 1;
    return CreateBackup(repo, o);
  }
  static Result<PruneResult> PruneKeepLast(Repository& repo, int keep) {
    FakeClock clock(std::chrono::seconds(1000),
                    std::chrono::system_clock::time_point(std::chrono::seconds(kPruneWall)));
    PruneOptions o;
    o.policy.keep_last = keep;
    o.gc_grace = std::chrono::hours(1);  // the default: chunks of a day-old backup are fair game
    o.clock = &clock;
    return Prune(repo, o);
  }
  void ExpectVerifies(const std::string& where) {
    VerifyOptions vo;
    vo.read_data = true;
    auto v = Verify(*repo_, {}, vo);
    ASSERT_TRUE(v.ok()) << where << ": " << v.status().ToString();
    for (const VerifyReport& r : *v) {
      EXPECT_TRUE(r.ok()) << where << ": " << r.key << ": " << r.problems.at(0);
    }
  }
  void ExpectRestores(const Manifest& m, const fs::path& src) {
    RestoreOptions ro;
    ro.target = (tmp_ / "restore").string();
    auto r = Restore(*repo_, m, ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(DescribeTree(src / "data"), DescribeTree(tmp_ / "restore/data"));
    fs::remove_all(tmp_ / "restore");
  }
  std::unique_ptr<Repository> OpenOn(storage::ObjectStore& store) {
    auto r = Repository::Open(store, std::nullopt);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }
  void PutLock(const std::string& key, const std::string& kind, const std::string& host,
               int64_t pid, int64_t time_unix) {
    std::string text =
        Json{{"kind", kind}, {"hostname", host}, {"pid", pid}, {"time_unix", time_unix}}.dump();
    ASSERT_TRUE(base_.Put(key, std::as_bytes(std::span(text.data(), text.size())), {}).ok());
  }

  TempDir tmp_{"gantry-backup-concurrent"};
  MemStore base_;
  std::unique_ptr<Repository> repo_;
};

// The race: a create lists the stored chunks, finds one.bin's chunks there
// (from an old backup) and reuses them; before its manifest is written, a
// prune forgets that old backup and collects its chunks, which nothing visible
// references. Without coordination the new backup is then committed with
// missing chunks.
TEST_F(Concurrent, PruneWhileACreateReusesOldChunks) {
  auto old_one = Create(*repo_, tmp_ / "one", 1);
  ASSERT_TRUE(old_one.ok()) << old_one.status().ToString();
  ASSERT_TRUE(Create(*repo_, tmp_ / "two", 2).ok());

  std::optional<Result<PruneResult>> during;
  HookStore hooked(base_, [&](std::string_view op, std::string_view key) {
    if (!during && op == "Put" && key.starts_with(kBackupPrefix)) {
      auto other = OpenOn(base_);  // another process, as far as the store can tell
      during = PruneKeepLast(*other, 1);
    }
  });
  auto creating = OpenOn(hooked);
  auto again = Create(*creating, tmp_ / "one", 3);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->stats.new_chunks, 0u) << "the create was meant to reuse the old chunks";
  ASSERT_TRUE(during.has_value());
  ExpectVerifies("after a prune ran during a create");
  ExpectRestores(*again, tmp_ / "one");
  // The prune stood aside for the running backup, naming its lock.
  ASSERT_FALSE(during->ok());
  EXPECT_EQ(during->status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(during->status().message().find("locks/create-"), std::string::npos)
      << during->status().message();

  // Afterwards prune runs, and keeps what the new backup uses.
  auto later = PruneKeepLast(*repo_, 1);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ExpectVerifies("after the next prune");
  ExpectRestores(*again, tmp_ / "one");
  EXPECT_TRUE(ListPrefix(base_, "locks/")->empty()) << "a lock was left behind";
}

// The other order: a create starts while a prune is sweeping.
TEST_F(Concurrent, CreateWhileAPruneSweeps) {
  ASSERT_TRUE(Create(*repo_, tmp_ / "one", 1).ok());
  ASSERT_TRUE(Create(*repo_, tmp_ / "two", 2).ok());

  std::optional<Result<Manifest>> during;
  HookStore hooked(base_, [&](std::string_view op, std::string_view key) {
    if (!during && op == "Delete" && key.starts_with(kChunkPrefix)) {
      auto other = OpenOn(base_);
      during = Create(*other, tmp_ / "one", 3);
    }
  });
  auto pruning = OpenOn(hooked);
  auto pr = PruneKeepLast(*pruning, 1);
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  ASSERT_TRUE(during.has_value()) << "the prune deleted no chunk";
  ExpectVerifies("after a create ran during a prune");
  ASSERT_FALSE(during->ok()) << "a create during the sweep was committed";
  EXPECT_EQ(during->status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(during->status().message().find("locks/prune-"), std::string::npos)
      << during->status().message();

  auto rerun = Create(*repo_, tmp_ / "one", 3);
  ASSERT_TRUE(rerun.ok()) << rerun.status().ToString();
  ExpectVerifies("after the rerun");
  ExpectRestores(*rerun, tmp_ / "one");
  EXPECT_TRUE(ListPrefix(base_, "locks/")->empty()) << "a lock was left behind";
}

// Creates do not exclude each other.
TEST_F(Concurrent, TwoCreatesAtOnce) {
  std::optional<Result<Manifest>> during;
  std::atomic<bool> fired{false};  // chunk Puts run on several threads
  HookStore hooked(base_, [&](std::string_view op, std::string_view key) {
    if (op == "Put" && key.starts_with(kChunkPrefix) && !fired.exchange(true)) {
      auto other = OpenOn(base_);
      during = Create(*other, tmp_ / "two", 1);
    }
  });
  auto creating = OpenOn(hooked);
  auto first = Create(*creating, tmp_ / "one", 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(during.has_value());
  ASSERT_TRUE(during->ok()) << during->status().ToString();
  EXPECT_EQ(ListBackups(*repo_)->size(), 2u);
  ExpectVerifies("two creates");
}

// Locks of processes that are gone do not block anybody; prune removes them.
TEST_F(Concurrent, StaleAndLiveLocks) {
  ASSERT_TRUE(Create(*repo_, tmp_ / "one", 1).ok());
  ASSERT_TRUE(Create(*repo_, tmp_ / "two", 2).ok());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // `child` is now a pid nobody runs

  // Another host's create, refreshed a minute ago (by the prune's clock): live.
  const std::string live = "locks/create-00000000000000aa.json";
  PutLock(live, "create", "other-host.example", 4242, kPruneWall - 60);
  auto refused = PruneKeepLast(*repo_, 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(live), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("other-host.example"), std::string::npos);
  EXPECT_EQ(ListBackups(*repo_)->size(), 2u) << "a refused prune forgot a backup";
  ASSERT_TRUE(base_.Delete(live).ok());

  // Another host's prune lock blocks a create the same way.
  const std::string live_prune = "locks/prune-00000000000000bb.json";
  PutLock(live_prune, "prune", "other-host.example", 4242, kCreateWall + 3 * 3600 - 60);
  auto blocked = Create(*repo_, tmp_ / "one", 3);
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(blocked.status().message().find(live_prune), std::string::npos)
      << blocked.status().message();
  ASSERT_TRUE(base_.Delete(live_prune).ok());

  // Stale: another host's lock not refreshed for hours; this host's lock of a
  // dead process; this process's own pid on a lock it does not hold.
  const std::string old_other = "locks/create-00000000000000cc.json";
  const std::string dead = "locks/prune-00000000000000dd.json";
  const std::string mine = "locks/create-00000000000000ee.json";
  PutLock(old_other, "create", "other-host.example", 4242, kPruneWall - 7200);
  PutLock(dead, "prune", host, child, kPruneWall);
  PutLock(mine, "create", host, getpid(), kPruneWall);
  auto created = Create(*repo_, tmp_ / "one", 3);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto pruned = PruneKeepLast(*repo_, 1);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_TRUE(ListPrefix(base_, "locks/")->empty()) << "prune leaves stale locks behind";
  ExpectVerifies("after pruning with stale locks");
}

// A holder rewrites its lock with its clock's time while it runs, so that
// other hosts do not take it for stale; the lock is gone once released.
TEST_F(Concurrent, HolderRefreshesItsLock) {
  FakeClock clock(std::chrono::seconds(1000),
                  std::chrono::system_clock::time_point(std::chrono::seconds(kCreateWall)));
  internal::LockTiming timing;
  timing.refresh = std::chrono::seconds(1);
  std::string key;
  {
    auto lock = internal::RepoLock::Acquire(*repo_, internal::LockKind::kCreate, clock, timing);
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    key = (*lock)->key();
    EXPECT_TRUE(key.starts_with("locks/create-")) << key;
    auto time_of = [&]() -> int64_t {
      auto text = base_.Get(key);
      if (!text.ok()) return -1;
      auto j = ParseJson(*text, key);
      return j.ok() ? j->value("time_unix", int64_t{-1}) : -1;
    };
    EXPECT_EQ(time_of(), kCreateWall);
    clock.Advance(std::chrono::hours(1));
    // Wait for the refresh (every second) to write the new time; bounded.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (time_of() != kCreateWall + 3600 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(time_of(), kCreateWall + 3600) << "the lock was not refreshed";
  }
  EXPECT_EQ(base_.Stat(key).status().code(), StatusCode::kNotFound) << "not released";
}

}  // namespace
}  // namespace gantry::backup::testing
