// Power-loss crash consistency of the checkpoint engine: saves (sync and
// async), commits, local retention and tiering run on the power-loss disk
// (gantry/storage/power_loss.h), crashed at every filesystem or store call;
// every disk the crash may leave must recover: each step that looks
// committed loads and verifies, nothing committed is lost, the manager
// opens and saves again and leaves no temporaries. The store of the tiering
// case is a real file:// store whose calls die with the machine.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "ckpt_test_util.h"
#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/log.h"
#include "gantry/storage/object_store.h"
#include "gantry/storage/power_loss.h"

namespace gantry::ckpt {
namespace {

using storage::CrashState;
using storage::PowerLossFileSystem;
using testing::State;
using testing::TempDir;

constexpr size_t kFloats = 1500;  // ~8 KiB shards: three 4 KiB blocks that can tear

// An object store on the crashing machine's network: its calls count as
// crash points of the disk's clock and fail once the machine is gone. What
// a Put stored stays stored (a remote store survives the client).
class DyingStore : public storage::ObjectStore {
 public:
  DyingStore(storage::ObjectStore& base, PowerLossFileSystem& machine)
      : base_(base), machine_(machine) {}
  std::string url() const override { return base_.url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    RETURN_IF_ERROR(machine_.Tick("put " + std::string(key)));
    return base_.Put(key, data, o);
  }
  // The uploader names a local file; it lives on the simulated disk.
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    RETURN_IF_ERROR(machine_.Tick("put " + std::string(key)));
    ASSIGN_OR_RETURN(std::string data, storage::ReadSmallFile(machine_, path));
    return base_.Put(key, std::as_bytes(std::span(data)), o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    RETURN_IF_ERROR(machine_.Tick("put " + std::string(key)));
    return base_.PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override {
    RETURN_IF_ERROR(Alive(key));
    return base_.Get(key);
  }
  Status GetRange(std::string_view key, uint64_t off, std::span<std::byte> out) override {
    RETURN_IF_ERROR(Alive(key));
    return base_.GetRange(key, off, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    return Unimplemented("GetFile writes the local disk outside the FileSystem seam");
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override {
    RETURN_IF_ERROR(Alive(key));
    return base_.Stat(key);
  }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    RETURN_IF_ERROR(Alive(prefix));
    return base_.List(prefix, next, max_results);
  }
  Status Delete(std::string_view key) override {
    RETURN_IF_ERROR(machine_.Tick("delete " + std::string(key)));
    return base_.Delete(key);
  }

 private:
  Status Alive(std::string_view key) {
    if (machine_.crashed())
      return Unavailable("machine lost power (reading " + std::string(key) + ")");
    return Status::Ok();
  }
  storage::ObjectStore& base_;
  PowerLossFileSystem& machine_;
};

struct Workload {
  bool async = false;
  bool tiering = false;
  int steps = 4;
  int keep_last = 2;
};

// What the workload saw succeed before the crash.
struct Seen {
  std::vector<int64_t> committed;  // Save (or Wait) returned OK
  std::vector<int64_t> uploaded;   // WaitForUploads returned OK after this step
  std::unique_ptr<TempDir> store_dir;
  std::unique_ptr<storage::ObjectStore> store;
};

Options Opts(storage::FileSystem* fs, const Workload& w, storage::ObjectStore* persist) {
  Options o;
  o.root = "/ckpt";
  o.run = "run";
  o.fs = fs;
  o.chunk_bytes = 1024;
  o.retention.keep_last = w.keep_last;
  o.persist_store = persist;
  if (persist) o.persist_retention.keep_last = w.keep_last;
  return o;
}

void Run(PowerLossFileSystem& fs, const Workload& w, Seen& seen) {
  seen.committed.clear();
  seen.uploaded.clear();
  std::unique_ptr<DyingStore> dying;
  if (w.tiering) {
    seen.store_dir = std::make_unique<TempDir>();
    auto store = storage::OpenObjectStore("file://" + seen.store_dir->path() + "/bucket");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    seen.store = std::move(*store);
    dying = std::make_unique<DyingStore>(*seen.store, fs);
  }
  {
    auto m = CheckpointManager::Open(Opts(&fs, w, dying.get()));
    if (!m.ok()) return;
    for (int step = 1; step <= w.steps; ++step) {
      State s(step, kFloats);
      Status st = w.async ? (*m)->SaveAsync(step, s.Views()) : (*m)->Save(step, s.Views());
      if (st.ok() && w.async) st = (*m)->Wait();
      if (!st.ok()) break;
      seen.committed.push_back(step);
      if (w.tiering) {
        if (!(*m)->WaitForUploads().ok()) break;
        seen.uploaded.push_back(step);
      }
    }
  }  // the destructor waits for uploads (they fail once crashed)
}

std::string Where(int64_t k, const CrashState& state) {
  return "crash point " + std::to_string(k) + ", " + state.how + "\ndisk:\n" +
         state.image.Describe();
}

// The promises, checked on one recovered disk. Returns false after a
// failure so that the exploration stops at the first bad state.
bool Recovers(const Workload& w, const Seen& seen, int64_t k, PowerLossFileSystem& fs,
              const CrashState& state) {
  const std::string where = Where(k, state);
  auto m = CheckpointManager::Open(Opts(&fs, w, nullptr));
  EXPECT_TRUE(m.ok()) << m.status().ToString() << "\n" << where;
  if (!m.ok()) return false;
  auto list = (*m)->List();
  EXPECT_TRUE(list.ok()) << list.status().ToString() << "\n" << where;
  if (!list.ok()) return false;
  std::set<int64_t> present;
  // Atomicity: a step that looks committed is complete and is the step
  // that was saved.
  for (const CheckpointInfo& info : *list) {
    present.insert(info.step);
    auto loaded = (*m)->Load(info.step);
    EXPECT_TRUE(loaded.ok()) << "step " << info.step << ": " << loaded.status().ToString() << "\n"
                             << where;
    if (!loaded.ok()) return false;
    State(info.step, kFloats).ExpectEquals(*loaded);
  }
  // Durability: the newest `keep_last` committed steps are all there
  // (retention only removes older ones).
  const size_t n = seen.committed.size();
  for (size_t i = n > static_cast<size_t>(w.keep_last) ? n - w.keep_last : 0; i < n; ++i) {
    EXPECT_TRUE(present.count(seen.committed[i]))
        << "committed step " << seen.committed[i] << " was lost\n"
        << where;
  }
  if (n > 0) {
    auto latest = (*m)->Latest();
    EXPECT_TRUE(latest.ok()) << latest.status().ToString() << "\n" << where;
    if (latest.ok()) {
      EXPECT_GE(latest->step, seen.committed.back()) << where;
      EXPECT_TRUE(latest->skipped.empty()) << latest->skipped.front() << "\n" << where;
    }
  }
  // The run goes on: a new step saves, loads, and no temporary is left.
  const int64_t next = (present.empty() ? 0 : *present.rbegin()) + 1;
  Status saved = (*m)->Save(next, State(next, kFloats).Views());
  EXPECT_TRUE(saved.ok()) << saved.ToString() << "\n" << where;
  if (saved.ok()) {
    auto loaded = (*m)->Load();
    EXPECT_TRUE(loaded.ok()) << loaded.status().ToString() << "\n" << where;
    if (loaded.ok()) {
      State(next, kFloats).ExpectEquals(*loaded);
    }
  }
  auto entries = fs.ListDir("/ckpt/run");
  EXPECT_TRUE(entries.ok()) << where;
  if (entries.ok()) {
    for (const auto& e : *entries) {
      EXPECT_FALSE(e.name.starts_with(internal::kTmpPrefix)) << "temporary left: " << e.name << "\n"
                                                             << where;
    }
  }
  // Tiering: what was uploaded is on the store, whole, whatever the local
  // disk kept; the store's committed steps all load there.
  if (w.tiering && seen.store) {
    Options d;
    d.root = "unused";
    d.root_store = seen.store.get();
    d.run = "run";
    d.chunk_bytes = 1024;
    d.read_only = true;
    auto direct = CheckpointManager::Open(d);
    if (!direct.ok() && direct.status().code() == StatusCode::kNotFound) {
      // Nothing was ever committed to the store.
      EXPECT_TRUE(seen.uploaded.empty()) << direct.status().ToString() << "\n" << where;
      return !::testing::Test::HasFailure();
    }
    EXPECT_TRUE(direct.ok()) << direct.status().ToString() << "\n" << where;
    if (!direct.ok()) return false;
    auto remote = (*direct)->List();
    EXPECT_TRUE(remote.ok()) << where;
    std::set<int64_t> on_store;
    if (remote.ok()) {
      for (const CheckpointInfo& info : *remote) {
        on_store.insert(info.step);
        auto loaded = (*direct)->Load(info.step);
        EXPECT_TRUE(loaded.ok()) << "stored step " << info.step << ": "
                                 << loaded.status().ToString() << "\n"
                                 << where;
        if (loaded.ok()) {
          State(info.step, kFloats).ExpectEquals(*loaded);
        }
      }
    }
    if (!seen.uploaded.empty()) {
      EXPECT_TRUE(on_store.count(seen.uploaded.back()))
          << "uploaded step " << seen.uploaded.back() << " is not on the store\n"
          << where;
    }
  }
  return !::testing::Test::HasFailure();
}

void Explore(const Workload& w, const char* name) {
  (void)log::SetLevel("off");  // thousands of recoveries and dead uploads log
  Seen seen;
  storage::CrashExploration e =
      storage::ExploreCrashes([&](PowerLossFileSystem& fs) { Run(fs, w, seen); },
                              [&](int64_t k, PowerLossFileSystem& fs, const CrashState& state) {
                                return Recovers(w, seen, k, fs, state);
                              });
  (void)log::SetLevel("info");
  // The numbers docs/reliability.md quotes.
  std::printf("%s: %lld operations, crash points explored: %lld, disks checked: %lld\n", name,
              static_cast<long long>(e.operations), static_cast<long long>(e.crash_points),
              static_cast<long long>(e.states_checked));
  EXPECT_GT(e.operations, 10 * w.steps) << "the workload did not run";
  if (!::testing::Test::HasFailure()) {
    EXPECT_EQ(e.crash_points, e.operations + 1);
  }
}

TEST(CrashConsistencyTest, SaveCommitAndRetention) { Explore({}, "save+retention"); }

TEST(CrashConsistencyTest, AsyncSave) {
  Workload w;
  w.async = true;
  w.steps = 3;
  Explore(w, "async save");
}

TEST(CrashConsistencyTest, TieringUploadAndStoreRetention) {
  Workload w;
  w.tiering = true;
  w.steps = 3;
  Explore(w, "tiering");
}

}  // namespace
}  // namespace gantry::ckpt
