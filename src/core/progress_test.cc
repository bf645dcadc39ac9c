#include "gantry/core/progress.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace gantry {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

// Captures what a Progress writes, through a real FILE* (not a terminal).
class ProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
  }
  void TearDown() override { std::fclose(out_); }

  std::string Output() {
    std::fflush(out_);
    std::string text;
    std::rewind(out_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), out_)) > 0) text.append(buf, n);
    return text;
  }
  static size_t Redraws(const std::string& s) {
    size_t n = 0;
    for (char c : s) n += c == '\r';
    return n;
  }
  Progress::Options Opts(bool enabled = true, bool force_tty = true) {
    return {.enabled = enabled, .out = out_, .force_tty = force_tty, .clock = &clock_};
  }

  FILE* out_ = nullptr;
  FakeClock clock_;
};

TEST_F(ProgressTest, DrawsBarCountTitleLabelAndElapsedTime) {
  Progress p("all_reduce", 40, Opts());
  clock_.Advance(3200ms);
  p.Update(12, "64 MiB");
  EXPECT_TRUE(p.drawing());
  EXPECT_EQ(Output(), "\r[======>             ] 12/40 all_reduce 64 MiB  3.2 s\x1b[K");
}

TEST_F(ProgressTest, BarEndsFullAndNeverOverflows) {
  Progress p("t", 4, Opts());
  p.Update(9);  // more than total: clamp the bar, keep the honest count
  EXPECT_THAT(Output(), HasSubstr("[====================] 9/4 t"));
}

TEST_F(ProgressTest, ZeroTotalShowsAnEmptyBar) {
  Progress p("", 0, Opts());
  p.Update(0);
  EXPECT_THAT(Output(), HasSubstr("[>                   ] 0/0  0 ns"));
}

TEST_F(ProgressTest, RedrawsAtMostEvery100ms) {
  Progress p("x", 100, Opts());
  p.Update(1);  // first update draws at once
  p.Update(2);
  clock_.Advance(99ms);
  p.Update(3);
  EXPECT_EQ(Redraws(Output()), 1u);
  clock_.Advance(1ms);
  p.Update(4);
  std::string out = Output();
  EXPECT_EQ(Redraws(out), 2u);
  EXPECT_THAT(out, HasSubstr("4/100"));
  EXPECT_THAT(out, Not(HasSubstr("3/100")));
}

TEST_F(ProgressTest, FinishClearsTheLineOnceAndStopsUpdates) {
  Progress p("x", 10, Opts());
  p.Update(5);
  p.Finish();
  EXPECT_FALSE(p.drawing());
  std::string after_finish = Output();
  EXPECT_TRUE(after_finish.ends_with("\r\x1b[K")) << after_finish;
  clock_.Advance(1s);
  p.Update(6);
  p.Finish();
  EXPECT_EQ(Output(), after_finish);
}

TEST_F(ProgressTest, DestructorClearsADrawnLine) {
  {
    Progress p("x", 10, Opts());
    p.Update(1);
  }
  EXPECT_TRUE(Output().ends_with("\r\x1b[K"));
}

TEST_F(ProgressTest, SilentWhenDisabled) {
  {
    Progress p("x", 10, Opts(/*enabled=*/false));
    p.Update(5);
    EXPECT_FALSE(p.drawing());
  }
  EXPECT_EQ(Output(), "");
}

TEST_F(ProgressTest, SilentWhenNotATerminal) {
  {
    Progress p("x", 10, Opts(/*enabled=*/true, /*force_tty=*/false));  // a tmpfile is no TTY
    p.Update(5);
    EXPECT_FALSE(p.drawing());
  }
  EXPECT_EQ(Output(), "");
}

TEST_F(ProgressTest, FinishWithoutDrawingPrintsNothing) {
  Progress p("x", 10, Opts());
  p.Finish();
  EXPECT_EQ(Output(), "");
}

}  // namespace
}  // namespace gantry
