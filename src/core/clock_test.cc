#include "gantry/core/clock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gantry {
namespace {

using namespace std::chrono_literals;

TEST(SystemClockTest, IsASingletonAndMonotonic) {
  EXPECT_EQ(&SystemClock(), &SystemClock());
  auto a = SystemClock().Now();
  SystemClock().SleepFor(1ms);
  auto b = SystemClock().Now();
  EXPECT_GE(b - a, 1ms);  // sleep_for never returns early
}

TEST(SystemClockTest, WallClockIsRealTime) {
  // Any date after 2020 proves this is the system clock, not a fake or steady epoch.
  EXPECT_GT(SystemClock().WallNow().time_since_epoch(), std::chrono::seconds(1'577'836'800));
}

TEST(FakeClockTest, StartsWhereToldAndMovesOnlyWhenAdvanced) {
  FakeClock clock(5s, std::chrono::system_clock::time_point(100s));
  EXPECT_EQ(clock.Now(), 5s);
  EXPECT_EQ(clock.WallNow().time_since_epoch(), 100s);
  EXPECT_EQ(clock.Now(), 5s);
  clock.Advance(250ms);
  EXPECT_EQ(clock.Now(), 5250ms);
  EXPECT_EQ(clock.WallNow().time_since_epoch(), 100250ms);
}

TEST(FakeClockTest, SleepAdvancesInsteadOfBlocking) {
  FakeClock clock;
  auto before = clock.Now();
  const Clock& as_clock = clock;
  as_clock.SleepFor(24h);  // would hang the test on a real clock
  EXPECT_EQ(clock.Now() - before, 24h);
}

TEST(FakeClockTest, NeverGoesBackwards) {
  FakeClock clock;
  auto before = clock.Now();
  auto wall_before = clock.WallNow();
  clock.Advance(-5s);
  clock.SleepFor(0s);
  EXPECT_EQ(clock.Now(), before);
  EXPECT_EQ(clock.WallNow(), wall_before);
}

TEST(FakeClockTest, ConcurrentAdvancesAllCount) {
  FakeClock clock(0ns);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        clock.Advance(1ns);
        (void)clock.Now();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(clock.Now(), 4000ns);
}

}  // namespace
}  // namespace gantry
