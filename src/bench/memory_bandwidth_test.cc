#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gantry/bench/memory.h"

namespace gantry::bench {
namespace {

using ::testing::HasSubstr;

TEST(MemcpyBandwidthTest, RejectsBadArguments) {
  auto tiny = MeasureMemcpyBandwidth(1023, 0.01);
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(tiny.status().message(), HasSubstr("1023"));
  EXPECT_EQ(MeasureMemcpyBandwidth(4096, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureMemcpyBandwidth(4096, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureMemcpyBandwidth(4096, std::numeric_limits<double>::quiet_NaN()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureMemcpyBandwidth(4096, std::numeric_limits<double>::infinity()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(MemcpyBandwidthTest, SizesBeyondPhysicalMemoryAreResourceExhausted) {
  auto huge = MeasureMemcpyBandwidth(1ull << 62, 0.01);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
}

TEST(MemcpyBandwidthTest, ReportsTheBestCopy) {
  constexpr uint64_t kBytes = 1 << 20;
  auto r = MeasureMemcpyBandwidth(kBytes, 0.02);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, kBytes);
  EXPECT_GE(r->iterations, 1);
  EXPECT_GT(r->seconds, 0);
  EXPECT_TRUE(std::isfinite(r->bandwidth_gbs));
  EXPECT_DOUBLE_EQ(r->bandwidth_gbs, static_cast<double>(kBytes) / r->seconds / 1e9);
}

TEST(MemcpyBandwidthTest, SmallestSizeWorks) {
  auto r = MeasureMemcpyBandwidth(1024, 0.001);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bytes, 1024u);
  EXPECT_GT(r->bandwidth_gbs, 0);
}

}  // namespace
}  // namespace gantry::bench
