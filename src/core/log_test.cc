#include "gantry/core/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <regex>
#include <string>

namespace gantry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs `fn` with fd 2 redirected to a temporary file and returns what was
// written, minus any color escapes (present when the test runs on a terminal).
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  int saved = ::dup(2);
  ::dup2(::fileno(tmp), 2);
  fn();
  spdlog::default_logger()->flush();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(tmp);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), tmp)) > 0) text.append(buf, n);
  std::fclose(tmp);
  return std::regex_replace(text, std::regex("\x1b\\[[0-9;]*m"), "");
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::Init();
    ASSERT_TRUE(log::SetLevel("info").ok());
    log::SetRank(-1);
  }
  void TearDown() override { SetUp(); }
};

TEST_F(LogTest, PatternHasPrefixAndShortLevelName) {
  std::string out = CaptureStderr([] {
    log::warn("disk {} is {}% full", "/dev/sda", 93);
    log::error("boom");
  });
  EXPECT_EQ(out, "[gantry] [warn] disk /dev/sda is 93% full\n[gantry] [error] boom\n");
}

TEST_F(LogTest, LevelFiltersMessages) {
  ASSERT_TRUE(log::SetLevel("warn").ok());
  std::string out = CaptureStderr([] {
    log::info("hidden info");
    log::debug("hidden debug");
    log::warn("shown");
  });
  EXPECT_EQ(out, "[gantry] [warn] shown\n");

  ASSERT_TRUE(log::SetLevel("trace").ok());
  out = CaptureStderr([] { log::trace("t"); });
  EXPECT_EQ(out, "[gantry] [trace] t\n");

  ASSERT_TRUE(log::SetLevel("off").ok());
  EXPECT_EQ(CaptureStderr([] { log::error("silent"); }), "");
}

TEST_F(LogTest, EveryDocumentedLevelNameIsAccepted) {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_TRUE(log::SetLevel(name).ok()) << name;
  }
}

TEST_F(LogTest, UnknownLevelListsTheValidNames) {
  Status s = log::SetLevel("verbose");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unknown log level 'verbose'; use one of trace, debug, info, warn, error, off");
  // A failed call leaves the level alone.
  EXPECT_THAT(CaptureStderr([] { log::info("still info"); }), HasSubstr("still info"));
  EXPECT_FALSE(log::SetLevel("WARN2").ok());
  EXPECT_FALSE(log::SetLevel("").ok());
}

TEST_F(LogTest, RankPrefixIsAddedAndRemoved) {
  log::SetRank(3);
  EXPECT_EQ(CaptureStderr([] { log::info("hello"); }), "[gantry] [rank 3] [info] hello\n");
  log::SetRank(-1);
  std::string out = CaptureStderr([] { log::info("hello"); });
  EXPECT_EQ(out, "[gantry] [info] hello\n");
  EXPECT_THAT(out, Not(HasSubstr("rank")));
}

TEST_F(LogTest, InitIsIdempotent) {
  auto before = spdlog::default_logger();
  log::Init();
  log::Init();
  EXPECT_EQ(spdlog::default_logger(), before);
  EXPECT_EQ(before->name(), "gantry");
}

}  // namespace
}  // namespace gantry
