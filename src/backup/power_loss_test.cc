// Power-loss crash consistency of backups in a file:// repository: init,
// create (twice, sharing chunks), create again, then prune with garbage
// collection run on the power-loss disk (gantry/storage/power_loss.h) and
// crash at every filesystem call. On every disk a crash may leave: the
// repository opens, every backup listed is readable and verifies with its
// data, nothing committed is lost (all of it before the prune, the newest
// backup after), the newest committed backup restores byte-identical, and
// a new create and prune succeed.
#include "gantry/storage/power_loss.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "backup_test_util.h"
#include "gantry/backup/backup.h"
#include "gantry/backup/repository.h"
#include "gantry/core/clock.h"
#include "gantry/core/log.h"
#include "gantry/storage/object_store.h"

namespace gantry::backup {
namespace {

using storage::CrashState;
using storage::PowerLossFileSystem;
using testing::DescribeTree;
using testing::RandomBytes;
using testing::TempDir;
using testing::WriteFile;

// Small chunks so that a few KiB make several of them.
ChunkerParams SmallChunks() {
  ChunkerParams p;
  p.min_bytes = 1024;
  p.avg_bytes = 4096;
  p.max_bytes = 16384;
  return p;
}

class BackupPowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Backups "a" (twice, changed in between) and "b" sharing a file: the
    // later ones reuse chunks, and pruning the first "a" leaves shared
    // chunks to keep and its own chunks to collect.
    WriteFile(a1() / "shared.bin", RandomBytes(20000, 1));
    WriteFile(a1() / "old.bin", RandomBytes(9000, 2));
    WriteFile(a1() / "dir/small.txt", "hello\n");
    WriteFile(b() / "shared.bin", RandomBytes(20000, 1));
    WriteFile(b() / "only-b.bin", RandomBytes(12000, 3));
    WriteFile(a2() / "shared.bin", RandomBytes(20000, 1));
    WriteFile(a2() / "new.bin", RandomBytes(7000, 4));
    WriteFile(a2() / "dir/small.txt", "hello again\n");
  }
  testing::fs::path a1() const { return src_.path() + "/1/a"; }
  testing::fs::path a2() const { return src_.path() + "/2/a"; }
  testing::fs::path b() const { return src_.path() + "/b"; }

  struct Seen {
    std::vector<std::string> committed;  // manifest keys of backups that returned OK
    std::vector<std::string> sources;    // the source of each
    bool prune_started = false;
    bool pruned = false;
  };

  static Result<std::unique_ptr<storage::ObjectStore>> Store(storage::FileSystem& fs) {
    storage::StoreOptions o;
    o.fs = &fs;
    return storage::OpenObjectStore("file:///repo", o);
  }

  void Run(PowerLossFileSystem& fs, Seen& seen) {
    seen = Seen{};
    auto store = Store(fs);
    if (!store.ok()) return;
    auto repo = Repository::OpenOrInit(**store, std::nullopt, "", SmallChunks());
    if (!repo.ok()) return;
    FakeClock clock;
    for (const testing::fs::path& src : {a1(), b(), a2()}) {
      CreateOptions o;
      o.sources = {src.string()};
      o.parallelism = 1;  // one call at a time: the crash points are the same every run
      o.clock = &clock;
      auto m = CreateBackup(**repo, o);
      if (!m.ok()) return;
      seen.committed.push_back(m->key);
      seen.sources.push_back(src.string());
      clock.Advance(std::chrono::hours(1));
    }
    PruneOptions p;
    p.policy.keep_last = 1;
    p.gc_grace = std::chrono::seconds(0);
    p.clock = &clock;
    seen.prune_started = true;
    auto pruned = Prune(**repo, p);
    seen.pruned = pruned.ok();
  }

  bool Recovers(const Seen& seen, int64_t k, PowerLossFileSystem& fs, const CrashState& state) {
    const std::string where = "crash point " + std::to_string(k) + ", " + state.how + "\ndisk:\n" +
                              state.image.Describe();
    auto store = Store(fs);
    EXPECT_TRUE(store.ok()) << store.status().ToString() << "\n" << where;
    if (!store.ok()) return false;
    auto repo = Repository::Open(**store, std::nullopt);
    if (!repo.ok() && repo.status().code() == StatusCode::kNotFound) {
      // No config.json: the repository was never created durably, so no
      // backup can have been committed.
      EXPECT_TRUE(seen.committed.empty()) << repo.status().ToString() << "\n" << where;
      return !::testing::Test::HasFailure();
    }
    EXPECT_TRUE(repo.ok()) << repo.status().ToString() << "\n" << where;
    if (!repo.ok()) return false;
    auto listed = ListBackups(**repo);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString() << "\n" << where;
    if (!listed.ok()) return false;
    std::set<std::string> present;
    std::vector<std::string> keys;
    for (const Listing& l : *listed) {
      EXPECT_TRUE(l.error.empty()) << l.key << ": " << l.error << "\n" << where;
      present.insert(l.key);
      keys.push_back(l.key);
    }
    // Nothing committed is lost: before the prune everything, after it
    // began everything but the first "a" (keep_last = 1 per name).
    for (size_t i = 0; i < seen.committed.size(); ++i) {
      if (seen.prune_started && i == 0) continue;
      EXPECT_TRUE(present.count(seen.committed[i]))
          << "committed backup " << seen.committed[i] << " was lost\n"
          << where;
    }
    if (seen.pruned) {
      EXPECT_FALSE(present.count(seen.committed[0])) << "a finished prune's deletion was undone\n"
                                                     << where;
      // ...and its garbage stays collected: no chunk is unreferenced.
      EXPECT_EQ(Unreferenced(**repo), 0u) << where;
    }
    if (!keys.empty()) {
      VerifyOptions vo;
      vo.read_data = true;
      vo.parallelism = 1;
      auto reports = Verify(**repo, keys, vo);
      EXPECT_TRUE(reports.ok()) << reports.status().ToString() << "\n" << where;
      if (reports.ok()) {
        for (const VerifyReport& r : *reports) {
          EXPECT_TRUE(r.ok()) << r.key << ": " << r.problems.front() << "\n" << where;
        }
      }
    }
    if (!seen.committed.empty()) {
      auto m = LoadManifest(**repo, seen.committed.back());
      EXPECT_TRUE(m.ok()) << m.status().ToString() << "\n" << where;
      if (m.ok()) {
        TempDir out;
        RestoreOptions ro;
        ro.target = out.path();
        ro.parallelism = 1;
        auto r = Restore(**repo, *m, ro);
        EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << where;
        const std::string& src = seen.sources.back();
        EXPECT_EQ(DescribeTree(src),
                  DescribeTree(out.path() + "/" + testing::fs::path(src).filename().string()))
            << where;
      }
    }
    // Work goes on: a new backup (newer than the workload's) and a prune
    // succeed and verify.
    FakeClock later(std::chrono::seconds(1000),
                    std::chrono::system_clock::time_point(std::chrono::seconds(1'900'000'000)));
    CreateOptions o;
    o.sources = {b().string()};
    o.parallelism = 1;
    o.clock = &later;
    auto again = CreateBackup(**repo, o);
    EXPECT_TRUE(again.ok()) << again.status().ToString() << "\n" << where;
    PruneOptions p;
    p.policy.keep_last = 1;
    p.gc_grace = std::chrono::seconds(0);
    p.clock = &later;
    auto pruned = Prune(**repo, p);
    EXPECT_TRUE(pruned.ok()) << pruned.status().ToString() << "\n" << where;
    if (again.ok() && pruned.ok()) {
      VerifyOptions vo;
      vo.read_data = true;
      auto reports = Verify(**repo, {again->key}, vo);
      EXPECT_TRUE(reports.ok() && reports->size() == 1 && (*reports)[0].ok())
          << (reports.ok() && !reports->empty() && !(*reports)[0].ok()
                  ? (*reports)[0].problems.front()
                  : reports.status().ToString())
          << "\n"
          << where;
    }
    return !::testing::Test::HasFailure();
  }

  // Chunks that no listed backup references.
  static size_t Unreferenced(Repository& repo) {
    std::set<std::string> referenced;
    auto listed = ListBackups(repo);
    if (!listed.ok()) return SIZE_MAX;
    for (const Listing& l : *listed) {
      for (const Entry& e : l.manifest.entries) {
        for (const ChunkRef& c : e.chunks) referenced.insert(c.id);
      }
    }
    auto chunks = ListPrefix(repo.store(), kChunkPrefix);
    if (!chunks.ok()) return SIZE_MAX;
    size_t n = 0;
    for (const auto& o : *chunks) n += !referenced.count(Repository::IdFromChunkKey(o.key));
    return n;
  }

  TempDir src_;
};

TEST_F(BackupPowerLossTest, CreatePruneAndGcRecoverFromEveryCrash) {
  (void)log::SetLevel("off");  // every recovery logs
  Seen seen;
  storage::CrashExploration e =
      storage::ExploreCrashes([&](PowerLossFileSystem& fs) { Run(fs, seen); },
                              [&](int64_t k, PowerLossFileSystem& fs, const CrashState& state) {
                                return Recovers(seen, k, fs, state);
                              });
  (void)log::SetLevel("info");
  std::printf(
      "backup create+prune+gc: %lld operations, crash points explored: %lld, disks "
      "checked: %lld\n",
      static_cast<long long>(e.operations), static_cast<long long>(e.crash_points),
      static_cast<long long>(e.states_checked));
  EXPECT_GT(e.operations, 50) << "the workload did not run";
  if (!::testing::Test::HasFailure()) {
    EXPECT_EQ(e.crash_points, e.operations + 1);
  }
}

}  // namespace
}  // namespace gantry::backup
