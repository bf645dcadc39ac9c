// `gantry backup` end to end through the real binary on a file:// repository:
// create / list / verify / restore / prune, --json output, encryption keys
// from a file and a command, and exit codes (0 ok, 1 check failed or damaged
// data, 2 usage or configuration).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "backup_test_util.h"
#include "gantry/core/json.h"
#include "testing/gantry_cli.h"

namespace gantry::backup::testing {
namespace {

const std::string kGantry = std::string(GANTRY_BINARY_DIR) + "/bin/gantry";

using CliRun = gantry::testing::CliRun;

class BackupCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kGantry)) << kGantry << " is missing; build the gantry target first";
  }
  std::string P(const std::string& name) const { return (tmp_ / name).string(); }
  CliRun Gantry(const std::string& args) {
    return gantry::testing::RunGantryShell("backup " + args);
  }
  TempDir tmp_;
};

TEST_F(BackupCli, CreateListVerifyRestorePrune) {
  fs::path src = tmp_ / "src";
  MakeTree(src, 5u << 20);
  WriteFile(src / "cache/x.tmp", "scratch");
  const std::string repo = "--repo file://" + P("repo");

  CliRun c1 = Gantry("create " + repo + " --tag env=test --exclude '*.tmp' --json " + src.string());
  ASSERT_EQ(c1.rc, 0) << c1.err;
  auto j1 = ParseJson(c1.out, "create output");
  ASSERT_TRUE(j1.ok()) << c1.out;
  const std::string id1 = (*j1)["id"].get<std::string>();
  EXPECT_EQ((*j1)["tags"]["env"], "test");
  EXPECT_GT((*j1)["stats"]["new_chunks"].get<int>(), 3);

  CliRun c2 = Gantry("create " + repo + " --exclude '*.tmp' " + src.string());
  ASSERT_EQ(c2.rc, 0) << c2.err;
  EXPECT_NE(c2.out.find("0 new chunks"), std::string::npos) << c2.out;

  CliRun ls = Gantry("list " + repo);
  ASSERT_EQ(ls.rc, 0) << ls.err;
  EXPECT_NE(ls.out.find(id1), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("env=test"), std::string::npos) << ls.out;
  CliRun lsj = Gantry("list --json " + repo);
  ASSERT_EQ(lsj.rc, 0);
  auto arr = ParseJson(lsj.out, "list output");
  ASSERT_TRUE(arr.ok());
  ASSERT_EQ(arr->size(), 2u);

  CliRun v = Gantry("verify --all --read-data " + repo);
  ASSERT_EQ(v.rc, 0) << v.out << v.err;
  EXPECT_NE(v.out.find(id1 + ": ok"), std::string::npos) << v.out;

  CliRun r = Gantry("restore " + id1.substr(0, 8) + " --to " + P("out") + " " + repo);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("every chunk verified"), std::string::npos);
  std::string want = DescribeTree(src);
  size_t excluded = want.find("cache/x.tmp ");
  ASSERT_NE(excluded, std::string::npos);
  want.erase(excluded, want.find('\n', excluded) + 1 - excluded);
  EXPECT_EQ(want, DescribeTree(tmp_ / "out/src"));

  CliRun rl = Gantry("restore latest --json --include 'src/a' --to " + P("out2") + " " + repo);
  ASSERT_EQ(rl.rc, 0) << rl.err;
  EXPECT_TRUE(fs::exists(tmp_ / "out2/src/a/b/c/deep.txt"));
  EXPECT_FALSE(fs::exists(tmp_ / "out2/src/models"));

  CliRun dry = Gantry("prune --keep-last 1 --dry-run " + repo);
  ASSERT_EQ(dry.rc, 0) << dry.err;
  EXPECT_NE(dry.out.find("would remove"), std::string::npos) << dry.out;
  CliRun pr = Gantry("prune --keep-last 1 --gc-grace 0s --json " + repo);
  ASSERT_EQ(pr.rc, 0) << pr.err;
  auto pj = ParseJson(pr.out, "prune output");
  ASSERT_TRUE(pj.ok()) << pr.out;
  EXPECT_EQ((*pj)["removed"], 1);
  EXPECT_EQ(ParseJson(Gantry("list --json " + repo).out, "list")->size(), 1u);
  EXPECT_EQ(Gantry("verify latest --read-data " + repo).rc, 0);

  // Usage errors exit 2 with a message naming the problem.
  CliRun noid = Gantry("restore deadbeef --to " + P("out3") + " " + repo);
  EXPECT_EQ(noid.rc, 2);
  EXPECT_NE(noid.err.find("no backup with id 'deadbeef'"), std::string::npos) << noid.err;
  CliRun norepo = Gantry("list --repo file://" + P("nothing-here"));
  EXPECT_EQ(norepo.rc, 2);
  EXPECT_NE(norepo.err.find("gantry backup create"), std::string::npos) << norepo.err;
  EXPECT_EQ(Gantry("prune " + repo).rc, 2);
  EXPECT_EQ(Gantry("verify " + repo).rc, 2);

  // Damage: a corrupt chunk makes verify --read-data and restore exit 1.
  auto chunks = fs::recursive_directory_iterator(tmp_ / "repo/chunks");
  fs::path victim;
  for (const auto& e : chunks) {
    if (e.is_regular_file() && fs::file_size(e.path()) > 1000) victim = e.path();
  }
  ASSERT_FALSE(victim.empty());
  std::string data = ReadAll(victim);
  data[data.size() / 2] ^= 1;
  WriteFile(victim, data);
  CliRun bad = Gantry("verify --all --read-data " + repo);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("FAILED"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find(victim.filename().string()), std::string::npos) << bad.out;
  EXPECT_EQ(Gantry("verify --all " + repo).rc, 0) << "presence-only verify downloads nothing";
  CliRun badr = Gantry("restore latest --to " + P("out4") + " " + repo);
  EXPECT_EQ(badr.rc, 1);
  EXPECT_NE(badr.err.find("corrupt"), std::string::npos) << badr.err;
}

TEST_F(BackupCli, EncryptedRepository) {
  fs::path src = tmp_ / "data";
  WriteFile(src / "w.txt", "weights");
  WriteFile(P("key"), "k3y-material\n");
  WriteFile(P("wrong"), "other\n");
  const std::string repo = "--repo " + P("enc");
  CliRun c = Gantry("create --encrypt-key-file " + P("key") + " " + repo + " " + src.string());
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("(encrypted)"), std::string::npos) << c.out;

  CliRun nokey = Gantry("list " + repo);
  EXPECT_EQ(nokey.rc, 2);
  EXPECT_NE(nokey.err.find("is encrypted"), std::string::npos) << nokey.err;
  CliRun wrong = Gantry("list --encrypt-key-file " + P("wrong") + " " + repo);
  EXPECT_EQ(wrong.rc, 2);
  EXPECT_NE(wrong.err.find("wrong encryption key"), std::string::npos) << wrong.err;
  EXPECT_NE(wrong.err.find(P("wrong")), std::string::npos) << wrong.err;
  CliRun badcmd = Gantry("list --encrypt-key-command 'exit 4' " + repo);
  EXPECT_EQ(badcmd.rc, 2);
  EXPECT_NE(badcmd.err.find("exit status 4"), std::string::npos) << badcmd.err;

  CliRun viacmd = Gantry("restore latest --to " + P("out") + " --encrypt-key-command 'cat " +
                         P("key") + "' " + repo);
  ASSERT_EQ(viacmd.rc, 0) << viacmd.err;
  EXPECT_EQ(ReadAll(tmp_ / "out/data/w.txt"), "weights");
  // The key never reaches the repository.
  for (const auto& e : fs::recursive_directory_iterator(tmp_ / "enc")) {
    if (e.is_regular_file()) {
      EXPECT_EQ(ReadAll(e.path()).find("k3y-material"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace gantry::backup::testing
