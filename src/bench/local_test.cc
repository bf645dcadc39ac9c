// RunBenchmarkLocal with real forked ranks on the shared-memory backend.
#include <gtest/gtest.h>

#include "gantry/bench/collectives.h"

namespace gantry::bench {
namespace {

comm::LaunchOptions TwoShmRanks() {
  comm::LaunchOptions launch;
  launch.backend = comm::Backend::kShm;
  launch.ranks = 2;
  launch.pin = false;
  return launch;
}

BenchOptions Small() {
  BenchOptions o;
  o.min_bytes = 1024;
  o.max_bytes = 64 * 1024;
  o.step_factor = 4;
  o.iters = 2;
  o.types = {comm::DataType::kFloat, comm::DataType::kInt32};
  return o;
}

TEST(BenchLocal, ReturnsRankZerosReport) {
  Result<Report> r = RunBenchmarkLocal(TwoShmRanks(), Collective::kReduceScatter, Small());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->collective, "reduce_scatter");
  EXPECT_EQ(r->backend, "shm");
  EXPECT_EQ(r->nranks, 2);
  EXPECT_EQ(r->devices.size(), 2u);
  EXPECT_EQ(r->rows.size(), 2u * 4);  // two types, 1K..64K by 4
  EXPECT_FALSE(r->wrong_results());
  for (const Row& row : r->rows) {
    EXPECT_EQ(row.out_of_place.wrong, 0);
    EXPECT_EQ(row.in_place.wrong, 0);
    EXPECT_GT(row.out_of_place.time_us, 0);
  }
  EXPECT_GT(r->peak_busbw_gbs, 0);
  EXPECT_GE(r->peak_busbw_gbs, r->avg_busbw_gbs);
}

TEST(BenchLocal, PassesRankErrorsBack) {
  BenchOptions o = Small();
  o.min_bytes = 0;
  Result<Report> bad = RunBenchmarkLocal(TwoShmRanks(), Collective::kAllReduce, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);

  // Only the ranks know there are two of them: -r 5 fails inside RunBenchmark.
  o = Small();
  o.root = 5;
  bad = RunBenchmarkLocal(TwoShmRanks(), Collective::kBroadcast, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("-r 5"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace gantry::bench
