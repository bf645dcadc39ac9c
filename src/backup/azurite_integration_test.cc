// gantry backup against Azure Blob Storage on Azurite (started on a free
// loopback port by the storage module's fixture): the same behaviour suite as
// on file://, plus a backup that moves between the two stores.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "backup_suite.h"
#include "testing/azurite_fixture.h"
#include "testing/gantry_cli.h"

namespace gantry::backup::testing {
namespace {

using storage::testing::AzuriteFixture;
using storage::testing::SharedAzurite;

struct AzuriteBackend {
  static std::unique_ptr<storage::ObjectStore> Open(const TempDir&, const std::string& name) {
    AzuriteFixture& az = SharedAzurite();
    if (!az.running()) {
      ADD_FAILURE() << "Azurite is not running (see the first failure)";
      return nullptr;
    }
    static std::atomic<int> n{0};
    storage::StoreOptions o;
    // One container per store; a prefix too, so keys are not at the container root.
    o.container = "bk" + std::to_string(getpid()) + "x" + std::to_string(++n);
    o.prefix = name;
    o.retry.initial_backoff = std::chrono::milliseconds(10);
    o.retry.max_backoff = std::chrono::milliseconds(200);
    auto s = storage::OpenObjectStore(az.connection_string(), o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Azurite, BackupSuite, AzuriteBackend);

TEST(BackupAzurite, EncryptedBackupRestoresThroughBlob) {
  TempDir tmp;
  auto store = AzuriteBackend::Open(tmp, "enc-rt");
  ASSERT_TRUE(store);
  fs::path src = tmp / "src";
  MakeTree(src, 9u << 20);
  auto repo = Repository::OpenOrInit(*store, std::string("k3y"), "test key");
  ASSERT_TRUE(repo.ok()) << repo.status().ToString();
  CreateOptions co;
  co.sources = {src.string()};
  co.parallelism = 8;
  auto m = CreateBackup(**repo, co);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // A new process would reopen from scratch: do the same.
  auto reopened = Repository::Open(*store, std::string("k3y"), "test key");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  auto latest = FindBackup(**reopened, "latest");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  RestoreOptions ro;
  ro.target = (tmp / "out").string();
  ro.parallelism = 8;
  auto r = Restore(**reopened, *latest, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DescribeTree(src), DescribeTree(tmp / "out/src"));
}

// The CLI against Blob: an az:// URL with the credentials and endpoint from
// the environment, as an operator would run it.
TEST(BackupAzurite, CliCreateVerifyRestoreOverAzUrl) {
  const std::string gantry = std::string(GANTRY_BINARY_DIR) + "/bin/gantry";
  ASSERT_TRUE(fs::exists(gantry)) << gantry << " is missing; build the gantry target first";
  AzuriteFixture& az = SharedAzurite();
  ASSERT_TRUE(az.running());
  TempDir tmp;
  fs::path src = tmp / "src";
  MakeTree(src, 3u << 20);
  WriteFile(tmp / "key", "blob-key");
  const std::string env =
      "AZURE_STORAGE_CONNECTION_STRING= AZURE_STORAGE_SAS_TOKEN= "
      "AZURE_STORAGE_KEY='" +
      az.key() + "' AZURE_STORAGE_BLOB_ENDPOINT='" + az.endpoint() + "' ";
  const std::string repo = " --repo az://" + az.account() + "/clibk" + std::to_string(getpid()) +
                           "/team/models --encrypt-key-file " + (tmp / "key").string() + " ";
  auto run = [&](const std::string& args) {
    gantry::testing::CliRun r =
        gantry::testing::RunShell("env " + env + gantry + " backup " + args);
    return std::make_pair(r.rc, r.out + r.err);
  };
  auto [rc1, out1] = run("create" + repo + src.string());
  ASSERT_EQ(rc1, 0) << out1;
  EXPECT_NE(out1.find("(encrypted)"), std::string::npos) << out1;
  EXPECT_EQ(out1.find(az.key()), std::string::npos) << "the account key leaked into output";
  auto [rc2, out2] = run("verify --all --read-data" + repo);
  EXPECT_EQ(rc2, 0) << out2;
  auto [rc3, out3] = run("restore latest --to " + (tmp / "out").string() + repo);
  ASSERT_EQ(rc3, 0) << out3;
  EXPECT_EQ(DescribeTree(src), DescribeTree(tmp / "out/src"));
  auto [rc4, out4] = run("prune --keep-last 1 --json" + repo);
  EXPECT_EQ(rc4, 0) << out4;
}

}  // namespace
}  // namespace gantry::backup::testing
