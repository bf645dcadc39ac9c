#include "gantry/core/json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace gantry {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class JsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("gantry_json_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // Every entry of the directory, so tests can see leftover temporary files.
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    return names;
  }

  fs::path dir_;
};

TEST(ParseJsonTest, ParsesAndKeepsKeyOrder) {
  Result<Json> j =
      ParseJson(R"({"zeta": 1, "alpha": [true, null, 2.5], "mid": {"s": "x"}})", "inline");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["zeta"], 1);
  EXPECT_EQ((*j)["alpha"][2], 2.5);
  EXPECT_EQ((*j)["mid"]["s"], "x");
  EXPECT_EQ(j->dump(), R"({"zeta":1,"alpha":[true,null,2.5],"mid":{"s":"x"}})");
}

TEST(ParseJsonTest, ErrorNamesOriginLineColumnAndByte) {
  Result<Json> j = ParseJson("{\n  \"a\": 1,\n  \"b\": tru\n}", "report.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  std::string m = j.status().message();
  // nlohmann reports the last byte it read: the newline after "tru".
  EXPECT_THAT(m, StartsWith("report.json:3:11: invalid JSON at byte 23: "));
  EXPECT_THAT(m, HasSubstr("invalid literal"));
  EXPECT_THAT(m, Not(HasSubstr("[json.exception")));  // library noise is stripped
}

TEST(ParseJsonTest, RejectsEmptyTruncatedAndTrailingInput) {
  EXPECT_THAT(ParseJson("", "stdin").status().message(), StartsWith("stdin:1:1: invalid JSON"));
  EXPECT_THAT(ParseJson("[1, 2", "stdin").status().message(), HasSubstr("byte 6"));
  EXPECT_THAT(ParseJson("{} {}", "stdin").status().message(), HasSubstr("byte 4"));
  EXPECT_FALSE(ParseJson("\"\xff\"", "stdin").ok());  // invalid UTF-8
}

TEST_F(JsonFileTest, WriteThenReadBack) {
  std::string path = Path("out.json");
  ASSERT_TRUE(WriteFileAtomic(path, R"({"ok": true})").ok());
  Result<Json> j = ReadJsonFile(path);
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["ok"], true);
  EXPECT_EQ(Entries(), std::vector<std::string>{"out.json"});  // no temporary left behind
}

TEST_F(JsonFileTest, WriteReplacesExistingFile) {
  std::string path = Path("f.txt");
  ASSERT_TRUE(WriteFileAtomic(path, "a much longer first version\n").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "v2").ok());
  EXPECT_EQ(*ReadFile(path), "v2");
  EXPECT_EQ(Entries().size(), 1u);
}

TEST_F(JsonFileTest, WriteEmptyAndBinaryContent) {
  std::string path = Path("bin");
  std::string data("a\0b\xff", 4);
  ASSERT_TRUE(WriteFileAtomic(path, data).ok());
  EXPECT_EQ(*ReadFile(path), data);
  ASSERT_TRUE(WriteFileAtomic(path, "").ok());
  EXPECT_EQ(*ReadFile(path), "");
}

TEST_F(JsonFileTest, WriteRespectsUmask) {
  mode_t old = ::umask(022);
  std::string path = Path("perm");
  Status s = WriteFileAtomic(path, "x");
  ::umask(old);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

TEST_F(JsonFileTest, WriteIntoMissingDirectoryIsNotFoundAndNamesThePath) {
  std::string path = Path("no/such/dir/out.json");
  Status s = WriteFileAtomic(path, "{}");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(path));
}

TEST_F(JsonFileTest, WriteOverADirectoryFailsAndCleansUp) {
  fs::create_directory(Path("sub"));
  Status s = WriteFileAtomic(Path("sub"), "x");
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(Path("sub")));
  EXPECT_EQ(Entries(), std::vector<std::string>{"sub"});  // the temporary was removed
}

TEST_F(JsonFileTest, ReadMissingFileIsNotFound) {
  Result<std::string> r = ReadFile(Path("missing.json"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("missing.json"));
  EXPECT_EQ(ReadJsonFile(Path("missing.json")).status().code(), StatusCode::kNotFound);
}

TEST_F(JsonFileTest, ReadDirectoryIsAnIoError) {
  Result<std::string> r = ReadFile(dir_.string());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_THAT(r.status().message(), HasSubstr("Is a directory"));
}

TEST_F(JsonFileTest, ReadJsonFileErrorsNameTheFile) {
  std::string path = Path("bad.json");
  ASSERT_TRUE(WriteFileAtomic(path, "[1,\n 2,,]").ok());
  Result<Json> j = ReadJsonFile(path);
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(j.status().message(), StartsWith(path + ":2:4: invalid JSON at byte 8"));
}

TEST_F(JsonFileTest, ReadsFilesLargerThanOneBuffer) {
  std::string big(300'000, 'x');
  big[123'456] = 'y';
  ASSERT_TRUE(WriteFileAtomic(Path("big"), big).ok());
  EXPECT_EQ(*ReadFile(Path("big")), big);
}

}  // namespace
}  // namespace gantry
