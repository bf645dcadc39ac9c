#include "gantry/storage/filesystem.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gantry/storage/fault_injecting.h"

namespace gantry::storage {
namespace {

class FileSystemTest : public ::testing::Test {
 protected:
  FileSystemTest() {
    char tmpl[] = "/tmp/gantry-storage-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  ~FileSystemTest() override { EXPECT_TRUE(fs_.RemoveAll(dir_).ok()); }
  FileSystem& fs_ = LocalFileSystem();
  std::string dir_;
};

TEST_F(FileSystemTest, WriteReadRoundTripWithDirectIo) {
  const std::string path = dir_ + "/a.bin";
  void* buf = nullptr;
  ASSERT_EQ(::posix_memalign(&buf, kDirectIoAlignment, 3 * kDirectIoAlignment), 0);
  std::memset(buf, 7, 3 * kDirectIoAlignment);
  {
    auto f = fs_.Create(path, /*direct=*/true);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE(WriteAll(**f, buf, 2 * kDirectIoAlignment, path).ok());
    // An unaligned tail falls back to buffered I/O instead of failing.
    ASSERT_TRUE(WriteAll(**f, buf, 100, path).ok());
    ASSERT_TRUE((*f)->Sync().ok());
    ASSERT_TRUE((*f)->Close().ok());
  }
  ::free(buf);
  auto info = fs_.Stat(path);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, 2 * kDirectIoAlignment + 100);
  auto text = ReadSmallFile(fs_, path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->at(8291), 7);
  EXPECT_EQ(fs_.Create(path, false).status().code(), StatusCode::kAlreadyExists);
}

TEST_F(FileSystemTest, ReadExactNamesTruncatedFile) {
  ASSERT_TRUE(WriteSmallFile(fs_, dir_ + "/small", "abc").ok());
  auto f = fs_.Open(dir_ + "/small");
  ASSERT_TRUE(f.ok());
  char out[10];
  Status s = ReadExact(**f, 1, out, 5, dir_ + "/small");
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("small is truncated"), std::string::npos) << s.message();
  EXPECT_EQ(fs_.Open(dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

TEST_F(FileSystemTest, ReadSmallFileRefusesFilesOverItsLimit) {
  const std::string path = dir_ + "/marker";
  ASSERT_TRUE(WriteSmallFile(fs_, path, "12345").ok());
  EXPECT_EQ(*ReadSmallFile(fs_, path, 5), "12345");
  auto r = ReadSmallFile(fs_, path, 4);
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(r.status().message().starts_with(path + " has 5 bytes")) << r.status().message();
  // A sparse 8 TiB file is refused by the default limit, not allocated.
  ASSERT_EQ(::truncate(path.c_str(), off_t{8} << 40), 0);
  r = ReadSmallFile(fs_, path);
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
}

TEST_F(FileSystemTest, RenameNeverReplaces) {
  ASSERT_TRUE(fs_.CreateDir(dir_ + "/a").ok());
  ASSERT_TRUE(fs_.CreateDir(dir_ + "/b").ok());
  EXPECT_EQ(fs_.CreateDir(dir_ + "/a").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(fs_.Rename(dir_ + "/a", dir_ + "/b").code(), StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs_.Rename(dir_ + "/a", dir_ + "/c").ok());
  EXPECT_TRUE(fs_.SyncDir(dir_).ok());
  auto entries = fs_.ListDir(dir_);
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 2u);
}

TEST_F(FileSystemTest, CreateDirsAndRemoveAll) {
  ASSERT_TRUE(fs_.CreateDirs(dir_ + "/x/y/z").ok());
  ASSERT_TRUE(fs_.CreateDirs(dir_ + "/x/y/z").ok());
  ASSERT_TRUE(WriteSmallFile(fs_, dir_ + "/x/y/z/f", "1").ok());
  ASSERT_TRUE(fs_.RemoveAll(dir_ + "/x").ok());
  EXPECT_EQ(fs_.Stat(dir_ + "/x").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(fs_.RemoveAll(dir_ + "/x").ok());
}

TEST_F(FileSystemTest, LocksConflictWithinOneProcess) {
  auto a = fs_.TryLock(dir_ + "/lock");
  ASSERT_TRUE(a.ok());
  auto b = fs_.TryLock(dir_ + "/lock");
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  a->reset();
  EXPECT_TRUE(fs_.TryLock(dir_ + "/lock").ok());
}

TEST_F(FileSystemTest, FaultRulesFireOnTheNthMatchingCall) {
  FaultInjectingFileSystem faulty(fs_);
  FaultRule r;
  r.op = FaultOp::kCreateDir;
  r.nth = 2;
  r.error = ENOSPC;
  r.path_contains = "want";
  faulty.AddRule(r);
  EXPECT_TRUE(faulty.CreateDir(dir_ + "/other").ok());  // does not match the path
  EXPECT_TRUE(faulty.CreateDir(dir_ + "/want1").ok());  // first match
  Status s = faulty.CreateDir(dir_ + "/want2");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("want2 (injected fault)"), std::string::npos) << s.message();
  EXPECT_TRUE(faulty.CreateDir(dir_ + "/want3").ok());  // not sticky
  EXPECT_EQ(faulty.fired(), 1);
}

TEST_F(FileSystemTest, ShortAndFailingWrites) {
  FaultInjectingFileSystem faulty(fs_);
  FaultRule shortw;
  shortw.op = FaultOp::kWrite;
  shortw.error = 0;
  shortw.short_bytes = 2;
  faulty.AddRule(shortw);
  auto f = faulty.Create(dir_ + "/f", false);
  ASSERT_TRUE(f.ok());
  auto n = (*f)->Write("hello", 5);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  FaultRule fail;
  fail.op = FaultOp::kSync;
  fail.error = EIO;
  faulty.AddRule(fail);
  EXPECT_EQ((*f)->Sync().code(), StatusCode::kIoError);
  EXPECT_TRUE((*f)->Sync().ok());
  faulty.ClearRules();
  EXPECT_TRUE((*f)->Close().ok());
}

}  // namespace
}  // namespace gantry::storage
