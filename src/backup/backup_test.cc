// gantry backup on the local file:// store: the shared behaviour suite plus
// what only needs a local store (path safety, include/exclude, keys, retention).
#include "gantry/backup/backup.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <set>

#include "backup_suite.h"

namespace gantry::backup::testing {
namespace {

struct FileBackend {
  static std::unique_ptr<storage::ObjectStore> Open(const TempDir& tmp, const std::string& name) {
    auto s = storage::OpenObjectStore("file://" + (tmp / ("repo-" + name)).string());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(File, BackupSuite, FileBackend);

class BackupLocal : public ::testing::Test {
 protected:
  TempDir tmp_;  // before store_: the store lives inside it
  std::unique_ptr<storage::ObjectStore> store_ = FileBackend::Open(tmp_, "local");
};

TEST(SafePath, RefusesTraversal) {
  for (const char* ok : {"a", "a/b", "a/.hidden", "a/b..c"})
    EXPECT_TRUE(CheckSafePath(ok).ok()) << ok;
  for (std::string bad :
       {std::string(""), std::string("/etc/passwd"), std::string("a/../../x"), std::string(".."),
        std::string("a//b"), std::string("a/./b"), std::string("a/"), std::string("a\0b", 3)}) {
    Status s = CheckSafePath(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("outside the target"), std::string::npos);
  }
}

Json MinimalManifest(const std::string& path, const std::string& type) {
  Manifest m;
  m.id = "0123456789abcdef";
  m.name = "t";
  m.time = "2026-01-01T00:00:00Z";
  Json j = m.ToJson();
  j["entries"] = Json::array({Json{{"path", path},
                                   {"type", type},
                                   {"mode", 0644},
                                   {"mtime_ns", 0},
                                   {"size", 0},
                                   {"chunks", Json::array()},
                                   {"target", "x"}}});
  return j;
}

TEST(ManifestParse, RejectsUnsafeAndInconsistentEntries) {
  EXPECT_TRUE(Manifest::FromJson(MinimalManifest("top", "dir"), "m").ok());
  auto trav = Manifest::FromJson(MinimalManifest("../evil", "file"), "m.json");
  ASSERT_FALSE(trav.ok());
  EXPECT_EQ(trav.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(trav.status().message().find("'../evil'"), std::string::npos)
      << trav.status().message();
  EXPECT_NE(trav.status().message().find("m.json"), std::string::npos);
  EXPECT_FALSE(Manifest::FromJson(MinimalManifest("/abs", "file"), "m").ok());
  // A child without its parent directory (it could sit behind a symlink).
  auto orphan = Manifest::FromJson(MinimalManifest("link/passwd", "file"), "m");
  EXPECT_NE(orphan.status().message().find("parent"), std::string::npos);
  Json j = MinimalManifest("f", "file");
  j["entries"][0]["size"] = 10;  // no chunks add up to 10
  EXPECT_NE(Manifest::FromJson(j, "m").status().message().find("add up"), std::string::npos);
  j = MinimalManifest("f", "fifo");
  EXPECT_NE(Manifest::FromJson(j, "m").status().message().find("unknown type"), std::string::npos);
}

TEST_F(BackupLocal, RestoreRefusesTraversalAndSymlinkedParents) {
  auto repo = Repository::OpenOrInit(*store_, std::nullopt);
  ASSERT_TRUE(repo.ok());
  // A manifest built in memory (bypassing the parser) is still checked.
  Manifest m;
  m.id = "0123456789abcdef";
  Entry e;
  e.path = "../outside.txt";
  m.entries.push_back(e);
  RestoreOptions ro;
  ro.target = (tmp_ / "out").string();
  auto r = Restore(**repo, m, ro);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(tmp_ / "outside.txt"));

  // A symlink already in the target is not followed.
  fs::create_directories(tmp_ / "out");
  fs::create_directories(tmp_ / "elsewhere");
  fs::create_symlink(tmp_ / "elsewhere", tmp_ / "out/src");
  fs::path src = tmp_ / "src";
  WriteFile(src / "a.txt", "a");
  CreateOptions co;
  co.sources = {src.string()};
  auto made = CreateBackup(**repo, co);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto r2 = Restore(**repo, *made, ro);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("symlink"), std::string::npos) << r2.status().message();
  EXPECT_FALSE(fs::exists(tmp_ / "elsewhere/a.txt"));

  // A traversal written into the repository is refused when read.
  Json j = MinimalManifest("../../etc/evil", "file");
  std::string text = j.dump();
  std::string key = "backups/20300101T000000Z-0123456789abcdef.json";
  ASSERT_TRUE(store_->Put(key, std::as_bytes(std::span(text.data(), text.size()))).ok());
  auto bad = FindBackup(**repo, "0123");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("outside the target"), std::string::npos);
}

TEST_F(BackupLocal, ExcludeIncludeAndMultipleSources) {
  auto repo = Repository::OpenOrInit(*store_, std::nullopt);
  ASSERT_TRUE(repo.ok());
  WriteFile(tmp_ / "models/a.bin", "A");
  WriteFile(tmp_ / "models/tmp/scratch", "S");
  WriteFile(tmp_ / "models/b.tmp", "B");
  WriteFile(tmp_ / "configs/train.yaml", "lr: 1");
  WriteFile(tmp_ / "configs/sub/x.yaml", "x: 1");
  CreateOptions co;
  co.sources = {(tmp_ / "models").string(), (tmp_ / "configs").string()};
  co.excludes = {"*.tmp", "models/tmp"};
  co.tags = {{"run", "42"}};
  auto m = CreateBackup(**repo, co);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->name, "models,configs");
  EXPECT_EQ(m->tags.at("run"), "42");
  std::set<std::string> paths;
  for (const Entry& e : m->entries) paths.insert(e.path);
  EXPECT_TRUE(paths.count("models/a.bin"));
  EXPECT_FALSE(paths.count("models/b.tmp"));
  EXPECT_FALSE(paths.count("models/tmp"));
  EXPECT_TRUE(paths.count("configs/sub/x.yaml"));

  RestoreOptions ro;
  ro.target = (tmp_ / "out").string();
  ro.includes = {"configs/sub"};
  auto r = Restore(**repo, *m, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fs::exists(tmp_ / "out/configs/sub/x.yaml"));
  EXPECT_FALSE(fs::exists(tmp_ / "out/configs/train.yaml"));
  EXPECT_FALSE(fs::exists(tmp_ / "out/models"));
  ro.includes = {"*.yaml"};
  ro.target = (tmp_ / "out2").string();
  ASSERT_TRUE(Restore(**repo, *m, ro).ok());
  EXPECT_TRUE(fs::exists(tmp_ / "out2/configs/train.yaml"));
  EXPECT_FALSE(fs::exists(tmp_ / "out2/models/a.bin"));
  ro.includes = {"nothing-matches"};
  EXPECT_EQ(Restore(**repo, *m, ro).status().code(), StatusCode::kNotFound);

  // Two sources with the same base name cannot share the namespace.
  WriteFile(tmp_ / "x/models/c", "c");
  co.sources = {(tmp_ / "models").string(), (tmp_ / "x/models").string()};
  auto dup = CreateBackup(**repo, co);
  EXPECT_EQ(dup.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(BackupLocal, LatestIsTheNewestEvenWithinOneSecond) {
  auto repo = Repository::OpenOrInit(*store_, std::nullopt);
  ASSERT_TRUE(repo.ok());
  WriteFile(tmp_ / "d/f", "f");
  CreateOptions co;
  co.sources = {(tmp_ / "d").string()};
  // Random ids alone would order same-second backups by chance.
  for (int i = 0; i < 6; ++i) {
    auto m = CreateBackup(**repo, co);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    auto latest = FindBackup(**repo, "latest");
    ASSERT_TRUE(latest.ok());
    EXPECT_EQ(latest->id, m->id) << "round " << i;
  }
}

TEST_F(BackupLocal, BadSourcesAreClearErrors) {
  auto repo = Repository::OpenOrInit(*store_, std::nullopt);
  ASSERT_TRUE(repo.ok());
  CreateOptions co;
  co.sources = {(tmp_ / "missing").string()};
  auto r = CreateBackup(**repo, co);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing"), std::string::npos);
  WriteFile(tmp_ / "plain.txt", "x");
  co.sources = {(tmp_ / "plain.txt").string()};
  EXPECT_EQ(CreateBackup(**repo, co).status().code(), StatusCode::kInvalidArgument);

  // A file that cannot be read when its turn comes (deleted after the scan,
  // which works even as root): the backup fails naming it and records nothing.
  fs::path src = tmp_ / "src";
  for (char c = 'a'; c <= 'f'; ++c) WriteFile(src / std::string(1, c), std::string(1000, c));
  WriteFile(src / "z", "z");
  co.sources = {src.string()};
  co.parallelism = 1;
  bool removed = false;
  co.progress = [&](uint64_t, uint64_t, std::string_view) {
    if (!removed) removed = fs::remove(src / "z");
  };
  auto gone = CreateBackup(**repo, co);
  ASSERT_TRUE(removed);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kIoError);
  EXPECT_NE(gone.status().message().find((src / "z").string()), std::string::npos)
      << gone.status().message();
  EXPECT_TRUE(ListBackups(**repo)->empty());

  // A file name that JSON cannot hold is refused by name, not mangled or a crash.
  fs::path odd = tmp_ / "odd";
  WriteFile(odd / "ok.txt", "ok");
  WriteFile(odd / std::string("bad\xff\xfe.bin"), "x");
  co.sources = {odd.string()};
  co.progress = nullptr;
  auto bad = CreateBackup(**repo, co);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("not valid UTF-8"), std::string::npos)
      << bad.status().message();
}

TEST_F(BackupLocal, RepositoryErrors) {
  auto missing = Repository::Open(*store_, std::nullopt);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("gantry backup create"), std::string::npos);
  auto plain = Repository::OpenOrInit(*store_, std::nullopt);
  ASSERT_TRUE(plain.ok());
  auto keyed = Repository::Open(*store_, std::string("k"), "key file /x");
  EXPECT_EQ(keyed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(keyed.status().message().find("not encrypted"), std::string::npos);
  std::string junk = "{\"format\": \"gantry-backup\", \"version\": 99}";
  auto other = FileBackend::Open(tmp_, "v99");
  ASSERT_TRUE(other->Put("config.json", std::as_bytes(std::span(junk.data(), junk.size()))).ok());
  auto v99 = Repository::Open(*other, std::nullopt);
  EXPECT_NE(v99.status().message().find("version 99"), std::string::npos) << v99.status().message();
}

TEST_F(BackupLocal, LoadKeyFromFileAndCommand) {
  WriteFile(tmp_ / "key", "s3cret\n");
  auto k = LoadKey({(tmp_ / "key").string(), ""});
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, "s3cret");
  auto c = LoadKey({"", "printf 'from-cmd\\n'"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, "from-cmd");
  auto fail = LoadKey({"", "exit 3"});
  EXPECT_EQ(fail.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(fail.status().message().find("exit status 3"), std::string::npos);
  EXPECT_EQ(LoadKey({"", "true"}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(LoadKey({(tmp_ / "nokey").string(), ""}).status().code(), StatusCode::kNotFound);
  WriteFile(tmp_ / "empty", "\n");
  EXPECT_EQ(LoadKey({(tmp_ / "empty").string(), ""}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadKey({"a", "b"}).status().code(), StatusCode::kInvalidArgument);
}

TEST(Retention, ResticSemantics) {
  // One backup a day at 12:00 UTC from 2027-01-15 for 70 days, a second one at
  // 18:00 on the last day, and one backup of another name. Expected values
  // come from an independent Python model of restic's rules.
  const int64_t day0 = 1'800'000'000 + 4 * 3600;  // 2027-01-15T12:00:00Z
  std::vector<RetentionInput> in;
  for (int d = 0; d < 70; ++d) {
    char key[16];
    snprintf(key, sizeof key, "d%02d", d);
    in.push_back({key, "ds", day0 + d * 86400});
  }
  in.push_back({"d69b", "ds", day0 + 69 * 86400 + 6 * 3600});
  in.push_back({"other", "configs", day0});
  RetentionPolicy p;
  p.keep_last = 3;
  p.keep_daily = 7;
  p.keep_weekly = 4;
  p.keep_monthly = 3;
  std::map<std::string, std::vector<std::string>> expected = {
      {"d16", {"monthly"}},
      {"d44", {"monthly"}},
      {"d51", {"weekly"}},
      {"d58", {"weekly"}},
      {"d63", {"daily"}},
      {"d64", {"daily"}},
      {"d65", {"daily", "weekly"}},
      {"d66", {"daily"}},
      {"d67", {"daily"}},
      {"d68", {"last", "daily"}},
      {"d69", {"last"}},
      {"d69b", {"last", "daily", "weekly", "monthly"}},
      {"other", {"last", "daily", "weekly", "monthly"}}};
  auto d = ApplyRetention(in, p);
  ASSERT_EQ(d.size(), in.size());
  std::map<std::string, std::vector<std::string>> got;
  for (const auto& x : d) {
    if (x.keep)
      got[x.key] = x.reasons;
    else
      EXPECT_TRUE(x.reasons.empty()) << x.key;
  }
  EXPECT_EQ(got, expected);

  RetentionPolicy last_only;
  last_only.keep_last = 1;
  auto d2 = ApplyRetention(in, last_only);
  int kept = 0;
  for (const auto& x : d2) kept += x.keep;
  EXPECT_EQ(kept, 2);  // per name
  EXPECT_TRUE(d2[70].keep);
  EXPECT_TRUE(d2[71].keep);
}

}  // namespace
}  // namespace gantry::backup::testing
