#include "gantry/core/checkpoint_interval.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(PlanTest, DalyMatchesThePaper) {
  // Daly 2006: C = 5 min; M = 24 h -> 117 min, 6 h -> 57 min, 15 min -> 9.1 min.
  auto p = PlanInterval(300, 24 * 3600);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->daly_s / 60, 116.7, 0.1);
  EXPECT_NEAR(p->young_s / 60, 120.0, 0.1);
  EXPECT_NEAR(PlanInterval(300, 6 * 3600)->daly_s / 60, 56.7, 0.1);
  EXPECT_NEAR(PlanInterval(300, 15 * 60)->daly_s / 60, 9.14, 0.02);
  EXPECT_EQ(PlanInterval(300, 100)->daly_s, 100);  // C >= 2M: checkpoint every M
}

TEST(PlanTest, BandwidthAndErrors) {
  auto p = PlanInterval(300, 24 * 3600, 100ull << 30, 0.1);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->needed_bytes_per_s, (100.0 * (1 << 30)) / (0.1 * p->daly_s), 1);
  EXPECT_EQ(PlanInterval(0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInterval(1, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInterval(1, 10, 0, 1.5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry
