// The power-loss model itself: which disks a crash may leave, and that the
// exploration catches the classic bugs (rename before fsync, no directory
// fsync) while passing the correct protocol.
#include "gantry/storage/power_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace gantry::storage {
namespace {

std::string Bytes(size_t n, char c) { return std::string(n, c); }

void Put(PowerLossFileSystem& fs, const std::string& path, const std::string& data, bool sync) {
  auto f = fs.Create(path, false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(WriteAll(**f, data.data(), data.size(), path).ok());
  if (sync) {
    ASSERT_TRUE((*f)->Sync().ok());
  }
  ASSERT_TRUE((*f)->Close().ok());
}

// The set of names present in each possible state, as sorted strings.
std::set<std::string> NameSets(const PowerLossFileSystem& fs) {
  std::set<std::string> out;
  for (const CrashState& s : fs.PossibleStates()) {
    std::string names;
    for (const auto& [path, data] : s.image.entries) names += path + " ";
    out.insert(names);
  }
  return out;
}

TEST(PowerLossTest, UnsyncedDataIsDroppedCompleteOrTornAtBlocks) {
  PowerLossFileSystem fs(4096);
  auto f = fs.Create("/f", false);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  const std::string synced = Bytes(4096 + 100, 'a');
  const std::string tail = Bytes(2 * 4096, 'b');  // ends mid-block: 3 blocks touched
  ASSERT_TRUE(WriteAll(**f, synced.data(), synced.size(), "/f").ok());
  ASSERT_TRUE((*f)->Sync().ok());
  ASSERT_TRUE(WriteAll(**f, tail.data(), tail.size(), "/f").ok());

  std::set<std::string> contents;
  for (const CrashState& s : fs.PossibleStates()) {
    ASSERT_TRUE(s.image.entries.count("/f")) << s.how;
    const std::string& data = *s.image.entries.at("/f");
    // The synced part is never lost.
    ASSERT_GE(data.size(), synced.size()) << s.how;
    EXPECT_EQ(data.substr(0, synced.size()), synced) << s.how;
    contents.insert(data);
  }
  std::string head_kept = synced + tail;  // blocks 1 (partly), 2, 3: keep block 1 only
  std::fill(head_kept.begin() + 2 * 4096, head_kept.end(), '\0');
  std::string tail_kept = synced + tail;  // keep block 3 only
  std::fill(tail_kept.begin() + static_cast<std::ptrdiff_t>(synced.size()),
            tail_kept.begin() + 3 * 4096, '\0');
  EXPECT_TRUE(contents.count(synced));         // dropped
  EXPECT_TRUE(contents.count(synced + tail));  // complete
  EXPECT_TRUE(contents.count(head_kept));
  EXPECT_TRUE(contents.count(tail_kept));
  EXPECT_EQ(contents.size(), 4u);
  // The running process sees everything.
  EXPECT_EQ(*fs.Visible().entries.at("/f"), synced + tail);
}

TEST(PowerLossTest, EntryWithoutDirectoryFsyncMayVanish) {
  PowerLossFileSystem fs;
  ASSERT_TRUE(fs.CreateDir("/d").ok());
  Put(fs, "/d/f", "data", /*sync=*/true);
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"", "/d ", "/d /d/f "}));
  ASSERT_TRUE(fs.SyncDir("/d").ok());
  // /d itself still waits for "/"; /d/f is durable inside it.
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"", "/d /d/f "}));
  ASSERT_TRUE(fs.SyncDir("/").ok());
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"/d /d/f "}));
}

TEST(PowerLossTest, PendingChangesPersistInOrder) {
  PowerLossFileSystem fs;
  Put(fs, "/x", "1", true);
  Put(fs, "/y", "2", true);
  // Never /y without /x.
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"", "/x ", "/x /y "}));
}

TEST(PowerLossTest, RenameIsAtomicAndNeedsBothDirectoriesSynced) {
  PowerLossFileSystem fs;
  ASSERT_TRUE(fs.CreateDir("/a").ok());
  ASSERT_TRUE(fs.CreateDir("/b").ok());
  Put(fs, "/a/f", "x", true);
  ASSERT_TRUE(fs.SyncDir("/a").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  ASSERT_TRUE(fs.Rename("/a/f", "/b/f").ok());
  const std::set<std::string> either{"/a /a/f /b ", "/a /b /b/f "};
  EXPECT_EQ(NameSets(fs), either);
  ASSERT_TRUE(fs.SyncDir("/a").ok());
  EXPECT_EQ(NameSets(fs), either) << "the target directory is not synced yet";
  ASSERT_TRUE(fs.SyncDir("/b").ok());
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"/a /b /b/f "}));
  EXPECT_EQ(fs.Rename("/b/f", "/b/f").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(fs.Rename("/a/missing", "/b/g").code(), StatusCode::kNotFound);
}

TEST(PowerLossTest, RemoveAllUnlinksChildrenFirst) {
  PowerLossFileSystem fs;
  ASSERT_TRUE(fs.CreateDirs("/d/e").ok());
  Put(fs, "/d/e/f", "x", true);
  ASSERT_TRUE(fs.SyncDir("/d/e").ok());
  ASSERT_TRUE(fs.SyncDir("/d").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  ASSERT_TRUE(fs.RemoveAll("/d").ok());
  EXPECT_EQ(fs.Stat("/d").status().code(), StatusCode::kNotFound);
  // Each unlink waits for its own directory's fsync, and they persist in
  // order, so a crash shows the tree partly removed (children first) or
  // whole: never /d/e/f without /d/e.
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"/d /d/e /d/e/f ", "/d /d/e ", "/d ", ""}));
  EXPECT_TRUE(fs.RemoveAll("/d").ok()) << "removing a missing path is OK";
}

TEST(PowerLossTest, CrashFailsThatCallAndEverythingAfter) {
  PowerLossFileSystem fs;
  fs.CrashAfter(2);
  ASSERT_TRUE(fs.CreateDir("/a").ok());
  ASSERT_TRUE(fs.SyncDir("/").ok());
  Status s = fs.CreateDir("/b");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("simulated power loss after 2 operations (at: mkdir /b)"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(fs.crashed());
  EXPECT_FALSE(fs.Stat("/a").ok()) << "the process is gone: reads fail too";
  EXPECT_FALSE(fs.Tick("upload").ok());
  EXPECT_EQ(fs.mutations(), 2);
  EXPECT_EQ(fs.RecentOps(10), (std::vector<std::string>{"mkdir /a", "fsync dir /"}));
  EXPECT_EQ(NameSets(fs), (std::set<std::string>{"/a "}));
}

TEST(PowerLossTest, MountedImageIsDurable) {
  DiskImage image;
  image.entries["/r"] = std::nullopt;
  image.entries["/r/f"] = std::string("hello");
  image.entries["/r/s"] = std::nullopt;
  PowerLossFileSystem fs(image);
  EXPECT_EQ(fs.Visible(), image);
  auto states = fs.PossibleStates();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].image, image);
  auto text = ReadSmallFile(fs, "/r/f");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello");
  auto list = fs.ListDir("/r");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "f");
  EXPECT_FALSE((*list)[0].is_dir);
  EXPECT_TRUE((*list)[1].is_dir);
  EXPECT_EQ(image.Describe().substr(0, 7), "d /r\nf ");
}

TEST(PowerLossTest, LocksConflictUntilReleased) {
  PowerLossFileSystem fs;
  auto a = fs.TryLock("/lock");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(fs.TryLock("/lock").status().code(), StatusCode::kFailedPrecondition);
  a->reset();
  EXPECT_TRUE(fs.TryLock("/lock").ok());
  EXPECT_EQ(fs.TryLock("/missing/lock").status().code(), StatusCode::kNotFound);
}

// "Atomic replace" the way it is often written: new content in a temporary,
// rename, directory fsync. `fsync_data` is the step that is often missing.
// Sets `*v1_committed` once the first version is durable.
void AtomicWrite(PowerLossFileSystem& fs, bool fsync_data, bool* v1_committed) {
  *v1_committed = false;
  if (!WriteSmallFile(fs, "/v1", Bytes(6000, '1')).ok()) return;
  if (!fs.SyncDir("/").ok()) return;
  *v1_committed = true;
  auto f = fs.Create("/v2.tmp", false);
  if (!f.ok()) return;
  const std::string data = Bytes(6000, '2');
  if (!WriteAll(**f, data.data(), data.size(), "/v2.tmp").ok()) return;
  if (fsync_data && !(*f)->Sync().ok()) return;
  if (!(*f)->Close().ok()) return;
  if (!fs.Rename("/v2.tmp", "/v2").ok()) return;
  (void)fs.SyncDir("/");
}

// A reader's promise: /v2 when present is whole, else /v1 is (once it was
// committed).
bool Consistent(PowerLossFileSystem& fs, bool v1_committed) {
  auto v2 = ReadSmallFile(fs, "/v2");
  if (v2.ok()) return *v2 == Bytes(6000, '2');
  if (!v1_committed) return true;
  auto v1 = ReadSmallFile(fs, "/v1");
  return v1.ok() && *v1 == Bytes(6000, '1');
}

TEST(PowerLossTest, ExplorationCatchesRenameBeforeFsync) {
  int64_t bad = 0;
  bool v1 = false;
  CrashExploration e =
      ExploreCrashes([&](PowerLossFileSystem& fs) { AtomicWrite(fs, /*fsync_data=*/false, &v1); },
                     [&](int64_t, PowerLossFileSystem& fs, const CrashState&) {
                       if (!Consistent(fs, v1)) ++bad;
                       return true;
                     });
  EXPECT_GT(bad, 0) << "a rename before the data fsync must leave a torn /v2 in some crash";
  EXPECT_EQ(e.crash_points, e.operations + 1);
}

TEST(PowerLossTest, ExplorationPassesTheCorrectProtocol) {
  bool v1 = false;
  CrashExploration e = ExploreCrashes(
      [&](PowerLossFileSystem& fs) { AtomicWrite(fs, /*fsync_data=*/true, &v1); },
      [&](int64_t k, PowerLossFileSystem& fs, const CrashState& s) {
        EXPECT_TRUE(Consistent(fs, v1)) << "crash point " << k << ": " << s.how << "\n"
                                        << s.image.Describe();
        return !::testing::Test::HasFailure();
      });
  // create, write, fsync, close(not counted), fsync dir, create, write,
  // fsync, rename, fsync dir: 9 calls (WriteSmallFile writes once).
  EXPECT_EQ(e.operations, 9);
  EXPECT_EQ(e.crash_points, 10);
  EXPECT_GT(e.states_checked, e.crash_points);
}

}  // namespace
}  // namespace gantry::storage
