// `gantry storage` end to end through the real binary: put/get/ls/stat/rm on a
// file:// store and on Azurite (a real Blob service), the --json shapes, and the
// exit codes of cli::ExitCode (2 for a bad URL, a missing or existing object;
// 1 for a store that does not answer).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "testing/azurite_fixture.h"
#include "testing/gantry_cli.h"
#include "testing/temp_dir.h"

namespace gantry::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(42);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

class StorageCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = RandomBytes(3 << 20);  // several 1 MiB blocks with --block-size 1M
    std::ofstream(dir_.Path("in.bin"), std::ios::binary) << data_;
  }
  TempDir dir_{"gantry-storage-cli"};
  std::string data_;
};

TEST_F(StorageCli, FileStoreRoundTripAndJsonShapes) {
  const std::string store = dir_.Path("store");
  const std::string obj = "file://" + store + "/models/w.bin";
  CliRun put = RunGantry({"storage", "put", dir_.Path("in.bin"), obj, "--json"});
  ASSERT_EQ(put.rc, 0) << put.err;
  Json pj = put.json();
  EXPECT_EQ(pj["op"], "put");
  EXPECT_EQ(pj["bytes"], data_.size());
  for (const char* k : {"from", "to", "seconds", "mb_per_s"}) EXPECT_TRUE(pj.contains(k)) << k;

  CliRun stat = RunGantry({"storage", "stat", obj, "--json"});
  ASSERT_EQ(stat.rc, 0) << stat.err;
  Json sj = stat.json();
  EXPECT_EQ(sj["key"], "w.bin");
  EXPECT_EQ(sj["size"], data_.size());
  for (const char* k : {"etag", "modified", "modified_unix"}) EXPECT_TRUE(sj.contains(k)) << k;

  CliRun ls = RunGantry({"storage", "ls", "file://" + store, "--json"});
  ASSERT_EQ(ls.rc, 0) << ls.err;
  Json lj = ls.json();
  ASSERT_EQ(lj["objects"].size(), 1u) << ls.out;
  EXPECT_EQ(lj["objects"][0]["key"], "models/w.bin");
  EXPECT_TRUE(lj.contains("store") && lj.contains("prefix"));
  CliRun table = RunGantry({"storage", "ls", "file://" + store});
  ASSERT_EQ(table.rc, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("models/w.bin"));
  EXPECT_THAT(table.out, HasSubstr("1 objects"));

  CliRun get = RunGantry({"storage", "get", obj, dir_.Path("out.bin")});
  ASSERT_EQ(get.rc, 0) << get.err;
  EXPECT_EQ(ReadAll(dir_.Path("out.bin")), data_);
  CliRun cat = RunGantry({"storage", "get", obj, "-"});
  ASSERT_EQ(cat.rc, 0) << cat.err;
  EXPECT_EQ(cat.out, data_);

  CliRun rm = RunGantry({"storage", "rm", obj, "--json"});
  ASSERT_EQ(rm.rc, 0) << rm.err;
  EXPECT_EQ(rm.json()["deleted"].size(), 1u);
}

TEST_F(StorageCli, ExitCodesFollowTheOneMap) {
  const std::string store = "file://" + dir_.Path("store");
  ASSERT_EQ(RunGantry({"storage", "put", dir_.Path("in.bin"), store + "/a"}).rc, 0);

  // A missing object: 2, naming it.
  CliRun missing = RunGantry({"storage", "stat", store + "/nope"});
  EXPECT_EQ(missing.rc, 2) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("nope"));
  EXPECT_EQ(RunGantry({"storage", "get", store + "/nope", dir_.Path("x")}).rc, 2);
  // rm goes on past a missing object and exits 2 for it.
  ASSERT_EQ(RunGantry({"storage", "put", dir_.Path("in.bin"), store + "/b"}).rc, 0);
  CliRun rm = RunGantry({"storage", "rm", store + "/nope", store + "/b", "--json"});
  EXPECT_EQ(rm.rc, 2) << rm.err;
  EXPECT_EQ(rm.json()["deleted"], Json::array({store + "/b"}));
  // An existing object with --if-none-match: 2.
  CliRun exists =
      RunGantry({"storage", "put", "--if-none-match", dir_.Path("in.bin"), store + "/a"});
  EXPECT_EQ(exists.rc, 2) << exists.err;
  EXPECT_THAT(exists.err, HasSubstr("already exists"));
  // Usage: a URL of another kind, a bad flag value, a missing local file.
  CliRun url = RunGantry({"storage", "stat", "ftp://host/x"});
  EXPECT_EQ(url.rc, 2);
  EXPECT_THAT(url.err, HasSubstr("ftp://host/x"));
  CliRun bs = RunGantry({"storage", "put", "--block-size", "1", dir_.Path("in.bin"), store + "/c"});
  EXPECT_EQ(bs.rc, 2);
  EXPECT_THAT(bs.err, HasSubstr("--block-size"));
  EXPECT_EQ(RunGantry({"storage", "put", dir_.Path("none.bin"), store + "/c"}).rc, 2);
  EXPECT_EQ(RunGantry({"storage", "bogus"}).rc, 2);
  // A Blob endpoint where nothing listens: the store did not answer, 1.
  const std::string dead =
      "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey="
      "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
      "BlobEndpoint=http://127.0.0.1:1/devstoreaccount1";
  CliRun down = RunGantry(
      {"storage", "stat", "--store", dead, "--container", "ckpts", "--retries", "1", "k"});
  EXPECT_EQ(down.rc, 1) << down.err;
  EXPECT_THAT(down.err, HasSubstr("ckpts"));
}

// The same verbs against a real Blob service (Azurite from package.json).
TEST_F(StorageCli, AzuriteRoundTrip) {
  storage::testing::AzuriteFixture azurite;
  Status started = azurite.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  // put and get also take --block-size: 1M makes the 3 MiB file a multi-block upload.
  auto with = [&](std::vector<std::string> args) {
    std::vector<std::string> where = {"--store", azurite.connection_string(), "--container", "cli"};
    if (args[1] == "put" || args[1] == "get") where.insert(where.end(), {"--block-size", "1M"});
    args.insert(args.begin() + 2, where.begin(), where.end());
    return RunGantry(args);
  };
  CliRun put = with({"storage", "put", dir_.Path("in.bin"), "dir/w.bin", "--json"});
  ASSERT_EQ(put.rc, 0) << put.err;
  EXPECT_EQ(put.json()["bytes"], data_.size());
  CliRun stat = with({"storage", "stat", "dir/w.bin", "--json"});
  ASSERT_EQ(stat.rc, 0) << stat.err;
  EXPECT_EQ(stat.json()["size"], data_.size());
  CliRun ls = with({"storage", "ls", "dir/", "--json"});
  ASSERT_EQ(ls.rc, 0) << ls.err;
  ASSERT_EQ(ls.json()["objects"].size(), 1u) << ls.out;
  CliRun get = with({"storage", "get", "dir/w.bin", dir_.Path("az.bin")});
  ASSERT_EQ(get.rc, 0) << get.err;
  EXPECT_EQ(ReadAll(dir_.Path("az.bin")), data_);
  EXPECT_EQ(with({"storage", "put", "--if-none-match", dir_.Path("in.bin"), "dir/w.bin"}).rc, 2);
  EXPECT_EQ(with({"storage", "stat", "dir/nope"}).rc, 2);
  ASSERT_EQ(with({"storage", "rm", "dir/w.bin"}).rc, 0);
  EXPECT_EQ(with({"storage", "stat", "dir/w.bin"}).rc, 2);
}

}  // namespace
}  // namespace gantry::testing
