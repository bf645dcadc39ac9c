// The choice of local retention on its own (ChooseDeletions): which steps a
// rule set deletes, from facts about the committed steps.
#include "retention.h"

#include <gtest/gtest.h>

#include <vector>

namespace gantry::ckpt::internal {
namespace {

using Steps = std::vector<int64_t>;

// Readable steps created at `created`, newest first.
std::vector<StepFacts> Readable(const Steps& newest_first, int64_t created = 0) {
  std::vector<StepFacts> out;
  for (int64_t s : newest_first) out.push_back({s, true, created, false});
  return out;
}

TEST(RetentionChoiceTest, EnabledByAnyRule) {
  EXPECT_FALSE(RetentionEnabled(Retention{}));
  EXPECT_TRUE(RetentionEnabled(Retention{.keep_last = 1}));
  EXPECT_TRUE(RetentionEnabled(Retention{.keep_every = 10}));
  EXPECT_TRUE(RetentionEnabled(Retention{.keep_for = std::chrono::seconds(60)}));
}

TEST(RetentionChoiceTest, KeepLastKeepsTheNewestAndDeletesAscending) {
  Retention r{.keep_last = 2};
  EXPECT_EQ(ChooseDeletions(r, Readable({50, 40, 30, 20, 10}), 50, 50, 0), (Steps{10, 20, 30}));
}

TEST(RetentionChoiceTest, KeepLastCountsOnlyReadableSteps) {
  Retention r{.keep_last = 2};
  auto facts = Readable({50, 40, 30, 20});
  facts[1].readable = false;  // 40: the manifest does not read
  // 50 and 30 are the two newest readable steps; 40 counts for nothing.
  EXPECT_EQ(ChooseDeletions(r, facts, 50, std::nullopt, 0), (Steps{20, 40}));
}

TEST(RetentionChoiceTest, NeverDeletesTheNewestGoodStepOrNewer) {
  Retention r{.keep_last = 1};
  // 5 and 4 fail verification: nothing newer than the newest good step (3)
  // goes, and 3 stays although keep_last is used up.
  EXPECT_EQ(ChooseDeletions(r, Readable({5, 4, 3, 2, 1}), 3, std::nullopt, 0), (Steps{1, 2}));
}

TEST(RetentionChoiceTest, TheStepJustSavedIsKept) {
  Retention r{.keep_last = 1};
  EXPECT_EQ(ChooseDeletions(r, Readable({9, 8, 7}), 9, 7, 0), (Steps{8}));
}

TEST(RetentionChoiceTest, StepsWaitingForUploadAreKept) {
  Retention r{.keep_last = 1};
  auto facts = Readable({4, 3, 2, 1});
  facts[1].pinned = true;  // 3
  facts[3].pinned = true;  // 1
  EXPECT_EQ(ChooseDeletions(r, facts, 4, 4, 0), (Steps{2}));
}

TEST(RetentionChoiceTest, KeepEveryKeepsMultiples) {
  Retention r{.keep_every = 10};
  EXPECT_EQ(ChooseDeletions(r, Readable({30, 25, 20, 15, 10, 5}), 30, 30, 0), (Steps{5, 15, 25}));
}

TEST(RetentionChoiceTest, KeepForUsesTheManifestTimeOfReadableSteps) {
  Retention r{.keep_for = std::chrono::seconds(100)};
  std::vector<StepFacts> facts = {
      {4, true, 1000, false},  // the newest
      {3, true, 950, false},   // 50 s old: kept
      {2, true, 900, false},   // exactly 100 s old: too old
      {1, false, 999, false},  // unreadable: its time is unknown
  };
  EXPECT_EQ(ChooseDeletions(r, facts, 4, 4, 1000), (Steps{1, 2}));
}

TEST(RetentionChoiceTest, AnyRuleKeepsAStep) {
  Retention r{.keep_last = 1, .keep_every = 4, .keep_for = std::chrono::seconds(10)};
  std::vector<StepFacts> facts = {
      {9, true, 100, false},  // newest good
      {8, true, 0, false},    // keep_every
      {7, true, 95, false},   // keep_for
      {6, true, 0, false},    // nothing
  };
  EXPECT_EQ(ChooseDeletions(r, facts, 9, 9, 100), (Steps{6}));
}

}  // namespace
}  // namespace gantry::ckpt::internal
