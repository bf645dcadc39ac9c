// Crash consistency of gantry backup: a workload of creates (snapshots that
// share chunks), a prune that only forgets, a garbage collection and a prune
// that forgets and sweeps in one run, cut short at every store call in turn
// (CrashStore: from call k on every call fails, as if the process had died
// there; object Puts are atomic, so nothing is half-written). After each
// crash the repository is opened afresh on the underlying store and must
// verify (every referenced chunk present and intact), must still list and
// restore byte-identically every snapshot committed before the crash that no
// prune had been asked to remove, and must accept the rest of the workload,
// after which it verifies again and holds exactly the chunks its one
// remaining snapshot needs. Also: prunes whose Deletes fail.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "backup_test_util.h"
#include "gantry/backup/backup.h"
#include "gantry/core/clock.h"

namespace gantry::backup::testing {
namespace {

// Small chunks, so that kilobytes of data make dozens of chunks (and dozens
// of crash points) and an edit changes only a few of them.
ChunkerParams SmallChunks() {
  ChunkerParams p;
  p.min_bytes = 256;
  p.avg_bytes = 1024;
  p.max_bytes = 4096;
  return p;
}

// MemStore objects are all modified at 1'700'000'000; creates run at
// kCreateWall + version hours, prunes at kPruneWall, so a zero grace period
// makes every unreferenced chunk collectable and kKeepAllChunks none.
constexpr int64_t kCreateWall = 1'800'000'000;
constexpr int64_t kPruneWall = 1'900'000'000;
constexpr std::chrono::seconds kKeepAllChunks{1'000'000'000};
constexpr int kListPage = 8;  // several pages per listing: crashes between pages too

// Four versions of a source tree ("<dir>/data"), each sharing most chunks
// with the one before.
struct Sources {
  explicit Sources(const TempDir& tmp) {
    auto data = [&](int v) { return tmp / std::string(1, static_cast<char>('0' + v)) / "data"; };
    fs::path v1 = data(1);
    WriteFile(v1 / "a.bin", RandomBytes(6000, 1));
    WriteFile(v1 / "b.bin", RandomBytes(6000, 2));
    WriteFile(v1 / "sub/c.txt", "hello\n");
    WriteFile(v1 / "empty.txt", "");
    fs::create_directories(v1 / "empty_dir");
    fs::create_symlink("sub/c.txt", v1 / "link");
    const auto opts = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    for (int v = 2; v <= 4; ++v) fs::create_directories(data(v).parent_path());
    fs::copy(v1, data(2), opts);  // v2: an edit in the middle of b.bin, a new file
    std::string b = ReadAll(v1 / "b.bin");
    for (size_t i = 3000; i < 3100; ++i) b[i] ^= 0x5a;
    WriteFile(data(2) / "b.bin", b);
    WriteFile(data(2) / "d.bin", RandomBytes(3000, 4));
    fs::copy(data(2), data(3), opts);  // v3: a.bin gone, another new file
    fs::remove(data(3) / "a.bin");
    WriteFile(data(3) / "e.bin", RandomBytes(2500, 5));
    fs::copy(data(3), data(4), opts);  // v4: d.bin grows
    WriteFile(data(4) / "d.bin", ReadAll(data(3) / "d.bin") + RandomBytes(700, 6));
    for (int v = 1; v <= 4; ++v) {
      dirs[v] = data(v);
      trees[v] = DescribeTree(dirs[v]);
    }
  }
  std::map<int, fs::path> dirs;
  std::map<int, std::string> trees;
};

struct Step {
  enum Kind { kCreate, kPrune } kind = kCreate;
  int version = 0;    // kCreate: which source version
  int keep_last = 0;  // kPrune
  std::chrono::seconds grace{0};
  std::set<int> forgets;  // kPrune: the versions its policy removes

  static Step Create(int version) { return Step{kCreate, version, 0, {}, {}}; }
  static Step Prune(int keep_last, std::chrono::seconds grace, std::set<int> forgets) {
    return Step{kPrune, 0, keep_last, grace, std::move(forgets)};
  }
};

const std::vector<Step>& Workload() {
  static const std::vector<Step> steps = {
      Step::Create(1),
      Step::Create(2),
      Step::Create(3),
      Step::Prune(2, kKeepAllChunks, {1}),          // forget v1, keep every chunk
      Step::Prune(2, std::chrono::seconds(0), {}),  // GC: sweep v1's garbage
      Step::Create(4),
      Step::Prune(1, std::chrono::seconds(0), {2, 3}),  // forget and sweep at once
  };
  return steps;
}

// Runs one step; a committed create records its manifest key under its version.
Status RunStep(Repository& repo, const Sources& src, const Step& step, int parallelism,
               std::map<std::string, int>& committed) {
  if (step.kind == Step::kCreate) {
    FakeClock clock(std::chrono::seconds(1000),
                    std::chrono::system_clock::time_point(
                        std::chrono::seconds(kCreateWall + 3600 * step.version)));
    CreateOptions o;
    o.sources = {src.dirs.at(step.version).string()};
    o.parallelism = parallelism;
    o.clock = &clock;
    ASSIGN_OR_RETURN(Manifest m, CreateBackup(repo, o));
    committed[m.key] = step.version;
    return Status::Ok();
  }
  FakeClock clock(std::chrono::seconds(1000),
                  std::chrono::system_clock::time_point(std::chrono::seconds(kPruneWall)));
  PruneOptions o;
  o.policy.keep_last = step.keep_last;
  o.gc_grace = step.grace;
  o.clock = &clock;
  return Prune(repo, o).status();
}

struct Run {
  size_t stopped_at = 0;  // the step that failed; Workload().size() when none did
  Status error;
  std::string refused;                   // the first call the crash refused
  std::map<std::string, int> committed;  // manifest key -> version
  int64_t calls = 0;
};

// The workload through a CrashStore that dies at call `crash_at` (-1: never),
// opening the repository (one read of config.json) as the CLI does.
Run RunWorkload(MemStore& base, const Sources& src, int64_t crash_at, int parallelism) {
  Run run;
  CrashStore store(base, crash_at);
  auto repo = Repository::Open(store, std::nullopt);
  if (!repo.ok()) {
    run.error = repo.status();
  } else {
    for (; run.stopped_at < Workload().size(); ++run.stopped_at) {
      run.error = RunStep(**repo, src, Workload()[run.stopped_at], parallelism, run.committed);
      if (!run.error.ok()) break;
    }
  }
  run.calls = store.calls();
  run.refused = store.first_refused();
  return run;
}

// Restores `m` and compares it with the source version it was made from.
void ExpectRestores(Repository& repo, const Manifest& m, const Sources& src, int version,
                    const fs::path& target, const std::string& where) {
  RestoreOptions ro;
  ro.target = target.string();
  auto r = Restore(repo, m, ro);
  ASSERT_TRUE(r.ok()) << where << ": restoring v" << version << ": " << r.status().ToString();
  EXPECT_EQ(src.trees.at(version), DescribeTree(target / "data"))
      << where << ": v" << version << " did not restore byte-identically";
  fs::remove_all(target);
}

void ExpectVerifies(Repository& repo, const std::string& where) {
  VerifyOptions vo;
  vo.read_data = true;
  auto v = Verify(repo, {}, vo);
  ASSERT_TRUE(v.ok()) << where << ": " << v.status().ToString();
  for (const VerifyReport& r : *v) {
    EXPECT_TRUE(r.ok()) << where << ": " << r.key << ": " << r.problems.at(0);
    EXPECT_EQ(r.chunks_read, r.chunks) << where << ": " << r.key;
  }
}

// Crashes the workload at every store call; `*explored` is how many crash points.
void ExploreCrashes(const TempDir& tmp, int parallelism, int64_t* explored) {
  const Sources src(tmp);
  auto fresh_store = [] {
    auto store = std::make_unique<MemStore>(kListPage);
    auto init = Repository::OpenOrInit(*store, std::nullopt, "no key", SmallChunks());
    EXPECT_TRUE(init.ok()) << init.status().ToString();
    return store;
  };

  // The uncrashed run: how many calls there are to crash at.
  int64_t total = 0;
  {
    auto store = fresh_store();
    Run full = RunWorkload(*store, src, -1, parallelism);
    EXPECT_TRUE(full.error.ok()) << full.error.ToString();
    EXPECT_EQ(full.stopped_at, Workload().size());
    total = full.calls;
  }
  EXPECT_GT(total, 50) << "the workload is smaller than intended";
  *explored = 0;

  for (int64_t k = 0; k < total; ++k) {
    const std::string where = "crash at store call " + std::to_string(k) + " of " +
                              std::to_string(total) + " (parallelism " +
                              std::to_string(parallelism) + ")";
    SCOPED_TRACE(where);
    ++*explored;
    auto base = fresh_store();
    Run run = RunWorkload(*base, src, k, parallelism);
    // Every crash point is reached, and the failure reaches the caller - but
    // for the release of a lock after the work is done, which is only logged
    // (the leftover lock is stale; the next prune removes it).
    EXPECT_GE(run.calls, k + 1);
    ASSERT_FALSE(run.refused.empty());
    if (run.stopped_at == Workload().size()) {
      EXPECT_TRUE(run.refused.starts_with("Delete locks/")) << "no step saw the crash";
    } else {
      EXPECT_NE(run.error.message().find("simulated crash"), std::string::npos)
          << run.error.ToString();
      // A store failure is not a damaged object: no advice to delete anything.
      EXPECT_EQ(run.error.message().find("Fix or delete"), std::string::npos)
          << run.error.ToString();
    }

    // What the crash may and may not have removed.
    std::set<int> forgotten, maybe_forgotten;
    for (size_t i = 0; i < run.stopped_at; ++i) {
      forgotten.insert(Workload()[i].forgets.begin(), Workload()[i].forgets.end());
    }
    if (run.stopped_at < Workload().size()) {
      const Step& cut = Workload()[run.stopped_at];
      maybe_forgotten.insert(cut.forgets.begin(), cut.forgets.end());
    }

    // Open afresh, as the next process would.
    auto repo = Repository::Open(*base, std::nullopt);
    ASSERT_TRUE(repo.ok()) << repo.status().ToString();
    ExpectVerifies(**repo, where);
    auto list = ListBackups(**repo);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    std::set<std::string> listed;
    for (const Listing& l : *list) {
      ASSERT_TRUE(l.error.empty()) << l.key << ": " << l.error;
      listed.insert(l.key);
      auto it = run.committed.find(l.key);
      ASSERT_NE(it, run.committed.end()) << l.key << " was listed but never committed";
      EXPECT_EQ(forgotten.count(it->second), 0u)
          << "v" << it->second << " survived the prune that removed it";
      ExpectRestores(**repo, l.manifest, src, it->second, tmp / "restore", where);
    }
    for (const auto& [key, version] : run.committed) {
      if (forgotten.count(version) || maybe_forgotten.count(version)) continue;
      EXPECT_EQ(listed.count(key), 1u) << "committed v" << version << " (" << key << ") was lost";
    }

    // The rest of the workload, from the step that crashed, without faults,
    // and one more prune (which removes locks the crash left behind).
    for (size_t i = run.stopped_at; i < Workload().size(); ++i) {
      Status s = RunStep(**repo, src, Workload()[i], parallelism, run.committed);
      ASSERT_TRUE(s.ok()) << "resuming step " << i << ": " << s.ToString();
    }
    Status next = RunStep(**repo, src, Step::Prune(1, std::chrono::seconds(0), {}), parallelism,
                          run.committed);
    ASSERT_TRUE(next.ok()) << "the next prune: " << next.ToString();
    EXPECT_TRUE(ListPrefix(*base, "locks/")->empty()) << "a lock was left behind";
    ExpectVerifies(**repo, where + ", resumed");
    auto final_list = ListBackups(**repo);
    ASSERT_TRUE(final_list.ok());
    ASSERT_EQ(final_list->size(), 1u) << "the last prune keeps one backup";
    const Manifest& last = (*final_list)[0].manifest;
    ASSERT_EQ(run.committed.at(last.key), 4);
    ExpectRestores(**repo, last, src, 4, tmp / "restore", where + ", resumed");
    // Garbage collection finished: the store holds exactly the chunks in use.
    std::set<std::string> needed, stored;
    for (const Entry& e : last.entries) {
      for (const ChunkRef& c : e.chunks) needed.insert(Repository::ChunkKey(c.id));
    }
    for (const std::string& key : base->Keys()) {
      if (key.starts_with(kChunkPrefix)) stored.insert(key);
    }
    EXPECT_EQ(needed, stored) << "garbage left behind or chunks missing";
  }
}

TEST(BackupCrash, EveryStoreCallSequential) {
  TempDir tmp("gantry-backup-crash");
  int64_t n = 0;
  ExploreCrashes(tmp, /*parallelism=*/1, &n);
  std::printf("backup create/prune/gc, sequential uploads: crash points explored: %lld\n",
              static_cast<long long>(n));
}

TEST(BackupCrash, EveryStoreCallParallelUploads) {
  TempDir tmp("gantry-backup-crash");
  int64_t n = 0;
  ExploreCrashes(tmp, /*parallelism=*/4, &n);
  std::printf("backup create/prune/gc, 4 parallel uploads: crash points explored: %lld\n",
              static_cast<long long>(n));
}

// A repository with three backups of growing versions, made without faults.
class PruneFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = Repository::OpenOrInit(base_, std::nullopt, "no key", SmallChunks());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    repo_ = std::move(*r);
    for (int v = 1; v <= 3; ++v) {
      ASSERT_TRUE(RunStep(*repo_, src_, Step::Create(v), 1, committed_).ok());
    }
    auto fr = Repository::Open(flaky_, std::nullopt);
    ASSERT_TRUE(fr.ok());
    flaky_repo_ = std::move(*fr);
  }
  Result<PruneResult> PruneKeepLast1() {
    FakeClock clock(std::chrono::seconds(1000),
                    std::chrono::system_clock::time_point(std::chrono::seconds(kPruneWall)));
    PruneOptions o;
    o.policy.keep_last = 1;
    o.gc_grace = std::chrono::seconds(0);
    o.clock = &clock;
    return Prune(*flaky_repo_, o);
  }
  std::string KeyOf(int version) const {
    for (const auto& [k, v] : committed_) {
      if (v == version) return k;
    }
    return {};
  }
  std::vector<std::string> Listed() {
    std::vector<std::string> out;
    auto l = ListBackups(*repo_);
    EXPECT_TRUE(l.ok());
    if (l.ok()) {
      for (const Listing& x : *l) out.push_back(x.key);
    }
    return out;
  }
  size_t ChunkCount() {
    size_t n = 0;
    for (const auto& k : base_.Keys()) n += k.starts_with(kChunkPrefix) ? 1 : 0;
    return n;
  }
  // After the retry: one backup (v3), restorable, and no garbage.
  void ExpectPruned() {
    EXPECT_EQ(Listed(), std::vector<std::string>{KeyOf(3)});
    ExpectVerifies(*repo_, "after the retry");
    auto m = LoadManifest(*repo_, KeyOf(3));
    ASSERT_TRUE(m.ok());
    ExpectRestores(*repo_, *m, src_, 3, tmp_ / "restore", "after the retry");
    std::set<std::string> needed;
    for (const Entry& e : m->entries) {
      for (const ChunkRef& c : e.chunks) needed.insert(c.id);
    }
    EXPECT_EQ(ChunkCount(), needed.size()) << "garbage left behind";
    EXPECT_TRUE(ListPrefix(base_, "locks/")->empty()) << "a lock was left behind";
  }

  TempDir tmp_{"gantry-backup-prune-faults"};
  Sources src_{tmp_};
  MemStore base_{kListPage};
  FlakyStore flaky_{base_};
  std::unique_ptr<Repository> repo_;        // on base_
  std::unique_ptr<Repository> flaky_repo_;  // on flaky_
  std::map<std::string, int> committed_;
};

TEST_F(PruneFaults, ManifestDeleteFailsThenRetryCompletes) {
  const size_t chunks_before = ChunkCount();
  flaky_.FailDeletesMatching(KeyOf(2));  // the second manifest to go
  auto r = PruneKeepLast1();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find("deleting manifest mem://test/" + KeyOf(2)),
            std::string::npos)
      << r.status().message();
  // v1 is gone, v2 stays (its delete failed), v3 is untouched, and no chunk was
  // deleted while a manifest that could still be listed references it.
  EXPECT_EQ(Listed(), (std::vector<std::string>{KeyOf(2), KeyOf(3)}));
  EXPECT_EQ(ChunkCount(), chunks_before);
  EXPECT_EQ(flaky_.deletes.load(), 2) << "v1's manifest and, on the way out, the prune's lock";
  ExpectVerifies(*repo_, "after the failed prune");

  flaky_.FailDeletesMatching("");
  auto retry = PruneKeepLast1();
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_GT(retry->chunks_deleted, 0u);
  ExpectPruned();
}

TEST_F(PruneFaults, ChunkDeleteFailsThenRetryCompletes) {
  // Two manifest deletes, one chunk delete, then every Delete fails.
  const size_t chunks_before = ChunkCount();
  flaky_.fail_after_deletes = 3;
  auto r = PruneKeepLast1();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  const std::string msg = r.status().message();
  const std::string prefix = "deleting unreferenced chunk mem://test/chunks/";
  size_t at = msg.find(prefix);
  ASSERT_NE(at, std::string::npos) << msg;
  const std::string failed_key = msg.substr(at + prefix.size() - 7, 7 + 3 + 64);
  EXPECT_FALSE(Repository::IdFromChunkKey(failed_key).empty()) << failed_key;
  EXPECT_TRUE(base_.Stat(failed_key).ok()) << "a failed delete removed " << failed_key;
  EXPECT_EQ(flaky_.deletes.load(), 3);
  EXPECT_EQ(ChunkCount(), chunks_before - 1) << "prune went on deleting after a failure";
  // The chunk, and the prune's own lock on the way out (left behind, stale).
  EXPECT_EQ(flaky_.failed_deletes.load(), 2);
  EXPECT_EQ(Listed(), std::vector<std::string>{KeyOf(3)});
  ExpectVerifies(*repo_, "after the failed prune");

  flaky_.fail_after_deletes = -1;
  auto retry = PruneKeepLast1();
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_GT(retry->chunks_deleted, 0u);
  ExpectPruned();
}

TEST_F(PruneFaults, ChunkThatCannotBeDeletedIsNamedOnEveryRetry) {
  // Find a chunk that only v1 uses: it is garbage once v1 is forgotten.
  auto m1 = LoadManifest(*repo_, KeyOf(1));
  auto m3 = LoadManifest(*repo_, KeyOf(3));
  ASSERT_TRUE(m1.ok() && m3.ok());
  std::set<std::string> in3;
  for (const Entry& e : m3->entries) {
    for (const ChunkRef& c : e.chunks) in3.insert(c.id);
  }
  std::string victim;
  for (const Entry& e : m1->entries) {
    for (const ChunkRef& c : e.chunks) {
      if (!in3.count(c.id)) victim = Repository::ChunkKey(c.id);
    }
  }
  ASSERT_FALSE(victim.empty());
  flaky_.FailDeletesMatching(victim);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto r = PruneKeepLast1();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(victim), std::string::npos) << r.status().message();
    EXPECT_TRUE(base_.Stat(victim).ok());
    ExpectVerifies(*repo_, "attempt " + std::to_string(attempt));
  }
  flaky_.FailDeletesMatching("");
  auto retry = PruneKeepLast1();
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  ExpectPruned();
  EXPECT_EQ(base_.Stat(victim).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::backup::testing
