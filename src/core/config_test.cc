#include "gantry/core/config.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gantry {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kSample = R"(# gantry.yaml
bench:
  ranks: 4
  max_bytes: 64M
  min_bytes: 1024
  timeout: 30s
  check: yes
  ratio: 0.75
  name: nightly
  ops: [all_reduce, broadcast]
doctor:
  skip:
    - gpu
    - "numa"
empty:
)";

Config Load(std::string_view yaml, std::string_view origin = "gantry.yaml") {
  Result<Config> c = Config::LoadString(yaml, origin);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return std::move(*Config::LoadString("", origin));
  return std::move(c).value();
}

template <typename T>
std::string ErrorOf(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ConfigTest, ReadsEveryType) {
  Config c = Load(kSample);
  EXPECT_EQ(*c.GetInt("bench.ranks", 0), 4);
  EXPECT_EQ(*c.GetSize("bench.max_bytes", 0), 64u << 20);
  EXPECT_EQ(*c.GetSize("bench.min_bytes", 0), 1024u);
  EXPECT_EQ(*c.GetDuration("bench.timeout", 0s), 30s);
  EXPECT_TRUE(*c.GetBool("bench.check", false));
  EXPECT_DOUBLE_EQ(*c.GetDouble("bench.ratio", 0), 0.75);
  EXPECT_EQ(*c.GetString("bench.name", ""), "nightly");
  EXPECT_EQ(*c.GetString("bench.ranks", ""), "4");  // any scalar reads as a string
  EXPECT_THAT(*c.GetStringList("bench.ops"), ElementsAre("all_reduce", "broadcast"));
  EXPECT_THAT(*c.GetStringList("doctor.skip"), ElementsAre("gpu", "numa"));
  EXPECT_EQ(c.origin(), "gantry.yaml");
}

TEST(ConfigTest, MissingAndNullKeysGiveTheFallback) {
  Config c = Load(kSample);
  EXPECT_EQ(*c.GetInt("bench.iters", 20), 20);
  EXPECT_EQ(*c.GetInt("nope.deeper.still", 7), 7);
  EXPECT_EQ(*c.GetInt("empty.x", 3), 3);  // "empty:" is null, so it holds nothing
  EXPECT_EQ(*c.GetString("empty", "d"), "d");
  EXPECT_EQ(*c.GetDuration("bench.warmup", 5s), 5s);
  EXPECT_THAT(*c.GetStringList("bench.none"), IsEmpty());
  EXPECT_TRUE(c.Has("bench.ranks"));
  EXPECT_TRUE(c.Has("bench"));
  EXPECT_FALSE(c.Has("bench.iters"));
  EXPECT_FALSE(c.Has("empty"));
  EXPECT_FALSE(c.Has("bench.ranks.x"));  // a scalar holds no keys
}

TEST(ConfigTest, WrongTypeNamesFileLineColumnKeyAndValue) {
  Config c = Load("bench:\n  ranks: two\n  check: maybe\n  ratio: 1.5x\n");
  EXPECT_EQ(ErrorOf(c.GetInt("bench.ranks", 0)),
            "gantry.yaml:2:10: key 'bench.ranks': expected an integer, got 'two'");
  EXPECT_EQ(ErrorOf(c.GetBool("bench.check", false)),
            "gantry.yaml:3:10: key 'bench.check': expected true or false, got 'maybe'");
  EXPECT_EQ(ErrorOf(c.GetDouble("bench.ratio", 0)),
            "gantry.yaml:4:10: key 'bench.ratio': expected a number, got '1.5x'");
}

TEST(ConfigTest, SizeAndDurationErrorsExplainWhy) {
  Config c = Load("a:\n  size: 64X\n  big: 9999999T\n  wait: 5 sec\n");
  EXPECT_EQ(ErrorOf(c.GetSize("a.size", 0)),
            "gantry.yaml:2:9: key 'a.size': expected a size such as 64M or 1048576, got '64X' "
            "(unknown suffix 'X'; use B, K, M, G or T (KB and KiB also work))");
  EXPECT_THAT(ErrorOf(c.GetSize("a.big", 0)),
              HasSubstr("key 'a.big': expected a size such as 64M or 1048576, got '9999999T' "
                        "(larger than 2^63 bytes)"));
  EXPECT_EQ(ErrorOf(c.GetDuration("a.wait", 0s)),
            "gantry.yaml:4:9: key 'a.wait': expected a duration such as 30s or 250ms, "
            "got '5 sec' (unknown unit 'sec'; use ns, us, ms, s, m, h or d)");
}

TEST(ConfigTest, MapsAndListsWhereScalarsBelong) {
  Config c = Load(kSample);
  EXPECT_EQ(ErrorOf(c.GetInt("bench", 0)),
            "gantry.yaml:3:3: key 'bench': expected an integer, got a map");
  EXPECT_EQ(ErrorOf(c.GetString("bench.ops", "")),
            "gantry.yaml:10:8: key 'bench.ops': expected a string, got a list");
  EXPECT_EQ(ErrorOf(c.GetStringList("bench.name")),
            "gantry.yaml:9:9: key 'bench.name': expected a list of strings, got 'nightly'");
}

TEST(ConfigTest, ScalarOnThePathIsAnError) {
  Config c = Load(kSample);
  EXPECT_EQ(ErrorOf(c.GetInt("bench.ranks.inner", 0)),
            "gantry.yaml:3:10: key 'bench.ranks': expected a map, got '4'");
}

TEST(ConfigTest, ListItemsMustBeStrings) {
  Config c = Load("hosts:\n  - a\n  - {name: b}\n");
  EXPECT_EQ(ErrorOf(c.GetStringList("hosts")),
            "gantry.yaml:3:5: key 'hosts[1]': expected a string, got a map");
}

TEST(ConfigTest, IntegersAreStrictAndOverflowSafe) {
  Config c = Load("a: 1.0\nb: 99999999999999999999\nc: -3\nd: 0x10\n");
  EXPECT_THAT(ErrorOf(c.GetInt("a", 0)), HasSubstr("expected an integer, got '1.0'"));
  EXPECT_THAT(ErrorOf(c.GetInt("b", 0)), HasSubstr("got '99999999999999999999'"));
  EXPECT_EQ(*c.GetInt("c", 0), -3);
  EXPECT_THAT(ErrorOf(c.GetInt("d", 0)), HasSubstr("got '0x10'"));
}

TEST(ConfigTest, BoolSpellings) {
  Config c = Load("a: true\nb: False\nc: on\nd: NO\ne: 1\n");
  EXPECT_TRUE(*c.GetBool("a", false));
  EXPECT_FALSE(*c.GetBool("b", true));
  EXPECT_TRUE(*c.GetBool("c", false));
  EXPECT_FALSE(*c.GetBool("d", true));
  EXPECT_THAT(ErrorOf(c.GetBool("e", false)), HasSubstr("expected true or false, got '1'"));
}

TEST(ConfigTest, DoublesRejectNonFinite) {
  Config c = Load("a: inf\nb: nan\nc: -2.5e3\n");
  EXPECT_THAT(ErrorOf(c.GetDouble("a", 0)), HasSubstr("expected a number, got 'inf'"));
  EXPECT_FALSE(c.GetDouble("b", 0).ok());
  EXPECT_DOUBLE_EQ(*c.GetDouble("c", 0), -2500);
}

TEST(ConfigTest, SizesAcceptIntegersAndSuffixedStrings) {
  Config c = Load("a: 1048576\nb: \"1.5G\"\nc: 8 KiB\n");
  EXPECT_EQ(*c.GetSize("a", 0), 1048576u);
  EXPECT_EQ(*c.GetSize("b", 0), 1536u << 20);
  EXPECT_EQ(*c.GetSize("c", 0), 8192u);
}

TEST(ConfigTest, KeysInFileOrder) {
  Config c = Load(kSample);
  EXPECT_THAT(*c.Keys(""), ElementsAre("bench", "doctor", "empty"));
  EXPECT_THAT(*c.Keys("bench"), ElementsAre("ranks", "max_bytes", "min_bytes", "timeout", "check",
                                            "ratio", "name", "ops"));
  EXPECT_THAT(*c.Keys("missing"), IsEmpty());
  EXPECT_EQ(ErrorOf(c.Keys("doctor.skip")),
            "gantry.yaml:13:5: key 'doctor.skip': expected a map, got a list");
}

TEST(ConfigTest, CheckKnownKeysSuggestsTheClosestName) {
  Config c = Load("bench:\n  rnaks: 4\n  max_bytes: 1M\n");
  Status s = c.CheckKnownKeys("bench", {"ranks", "min_bytes", "max_bytes"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "gantry.yaml:2:3: unknown key 'bench.rnaks' (did you mean 'bench.ranks'?)");
}

TEST(ConfigTest, CheckKnownKeysListsKnownNamesWhenNothingIsClose) {
  Config c = Load("bench:\n  ranks: 4\n  colour: red\n  zzz: 1\n");
  Status s = c.CheckKnownKeys("bench", {"ranks", "iters"});
  EXPECT_EQ(s.message(),
            "gantry.yaml:3:3: unknown key 'bench.colour' (known keys under 'bench': ranks, "
            "iters); gantry.yaml:4:3: unknown key 'bench.zzz' (known keys under 'bench': ranks, "
            "iters)");
}

TEST(ConfigTest, CheckKnownKeysAtTopLevelAndOnMissingSections) {
  Config c = Load(kSample);
  EXPECT_TRUE(c.CheckKnownKeys("", {"bench", "doctor", "empty"}).ok());
  EXPECT_EQ(c.CheckKnownKeys("", {"bench", "doctor", "empty", "gateway"}), Status::Ok());
  EXPECT_THAT(c.CheckKnownKeys("", {"bench", "doctr"}).message(),
              AllOf(HasSubstr("unknown key 'doctor' (did you mean 'doctr'?)"),
                    HasSubstr("unknown key 'empty'")));
  EXPECT_TRUE(c.CheckKnownKeys("gateway", {}).ok());  // nothing there, nothing unknown
  EXPECT_THAT(c.CheckKnownKeys("bench.ranks", {}).message(),
              HasSubstr("key 'bench.ranks': expected a map, got '4'"));
}

TEST(ConfigTest, EmptyAndCommentOnlyFilesAreEmptyConfigs) {
  for (std::string_view text : {"", "# nothing here\n", "---\n", "~\n"}) {
    Result<Config> c = Config::LoadString(text, "x.yaml");
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    EXPECT_THAT(*c->Keys(""), IsEmpty());
  }
}

TEST(ConfigTest, SyntaxErrorsNameFileLineAndColumn) {
  Result<Config> c = Config::LoadString("bench:\n  ranks: [1, 2\n  iters: 3\n", "gantry.yaml");
  EXPECT_THAT(ErrorOf(c), StartsWith("gantry.yaml:"));
  EXPECT_THAT(ErrorOf(c), HasSubstr("invalid YAML"));

  c = Config::LoadString("a: \"unterminated", "gantry.yaml");
  EXPECT_THAT(ErrorOf(c), StartsWith("gantry.yaml:1:"));

  c = Config::LoadString("a:\n  b: 1\n c: 2\n", "bad.yaml");
  EXPECT_THAT(ErrorOf(c), StartsWith("bad.yaml:3:2: invalid YAML:"));
}

TEST(ConfigTest, TopLevelMustBeAMap) {
  EXPECT_EQ(ErrorOf(Config::LoadString("- a\n- b\n", "g.yaml")),
            "g.yaml:1:1: expected a map of settings at the top level, got a list");
  EXPECT_EQ(ErrorOf(Config::LoadString("just text", "g.yaml")),
            "g.yaml:1:1: expected a map of settings at the top level, got 'just text'");
}

TEST(ConfigTest, DuplicateKeysAreRejected) {
  EXPECT_EQ(ErrorOf(Config::LoadString("bench:\n  ranks: 2\nbench:\n  ranks: 4\n", "g.yaml")),
            "g.yaml:3:1: key 'bench': appears twice; keep one");
  EXPECT_EQ(ErrorOf(Config::LoadString("hosts:\n  - {a: 1, a: 2}\n", "g.yaml")),
            "g.yaml:2:12: key 'hosts[0].a': appears twice; keep one");
}

TEST(ConfigTest, NonScalarKeysAreRejected) {
  EXPECT_THAT(ErrorOf(Config::LoadString("? [a, b]\n: 1\n", "g.yaml")),
              HasSubstr("expected a plain name, got a list"));
}

TEST(ConfigTest, MultipleDocumentsAreRejected) {
  EXPECT_EQ(ErrorOf(Config::LoadString("a: 1\n---\nb: 2\n", "g.yaml")),
            "g.yaml:2:1: a second YAML document (or stray text) starts here; put all settings "
            "in one");
  EXPECT_TRUE(Config::LoadString("---\na: 1\n...\n", "g.yaml").ok());  // explicit markers
}

TEST(ConfigTest, StrayCommaFailsInsteadOfLoopingForever) {
  // yaml-cpp 0.7's LoadAll never returns on these.
  for (std::string_view text : {",", " ,", ",a", "a: 1\n,\n"}) {
    EXPECT_THAT(ErrorOf(Config::LoadString(text, "g.yaml")), StartsWith("g.yaml:")) << text;
  }
}

TEST(ConfigTest, HostileNestingAndSelfReferencesAreRejected) {
  std::string deep = std::string(200, '[') + std::string(200, ']');
  EXPECT_THAT(ErrorOf(Config::LoadString("a: " + deep, "g.yaml")),
              HasSubstr("nested deeper than 64 levels"));
  EXPECT_THAT(ErrorOf(Config::LoadString("a: &x [*x]\n", "g.yaml")),
              HasSubstr("nested deeper than 64 levels"));
}

TEST(ConfigTest, AliasesExpandingExponentiallyAreRejected) {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {  // each level refers to the previous one ten times
    std::vector<std::string> refs(10, fmt::format("*a{}", i - 1));
    yaml += fmt::format("a{0}: &a{0} [{1}]\n", i, fmt::join(refs, ", "));
  }
  EXPECT_THAT(ErrorOf(Config::LoadString(yaml, "g.yaml")),
              HasSubstr("more than 100000 YAML nodes"));
}

TEST(ConfigTest, LookupsDoNotModifyTheTree) {
  // yaml-cpp nodes alias each other; a careless lookup can rewrite the tree.
  Config c = Load(kSample);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(*c.GetInt("bench.ranks", 0), 4);
    EXPECT_EQ(*c.GetInt("bench.nope", 1), 1);
    EXPECT_FALSE(c.Has("x.y.z"));
    EXPECT_THAT(*c.Keys(""), ElementsAre("bench", "doctor", "empty"));
  }
}

TEST(ConfigTest, MovedConfigKeepsItsContent) {
  Config a = Load("x: 1\n", "moved.yaml");
  Config b = std::move(a);
  EXPECT_EQ(*b.GetInt("x", 0), 1);
  EXPECT_EQ(b.origin(), "moved.yaml");
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("gantry_config_test_" + std::to_string(::getpid()) + ".yaml");
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::filesystem::path path_;
};

TEST_F(ConfigFileTest, LoadFileUsesThePathAsOrigin) {
  std::ofstream(path_) << "bench:\n  ranks: lots\n";
  Result<Config> c = Config::LoadFile(path_.string());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->origin(), path_.string());
  EXPECT_EQ(ErrorOf(c->GetInt("bench.ranks", 0)),
            path_.string() + ":2:10: key 'bench.ranks': expected an integer, got 'lots'");
}

TEST_F(ConfigFileTest, MissingFileIsNotFound) {
  Result<Config> c = Config::LoadFile(path_.string());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr(path_.string()));
}

}  // namespace
}  // namespace gantry
