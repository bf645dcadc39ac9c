#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gantry/bench/collectives.h"

namespace gantry::bench {
namespace {

// Applies `change` to default options and returns the validation message.
std::string Problem(const std::function<void(BenchOptions&)>& change,
                    Collective c = Collective::kAllReduce, int nranks = 0) {
  BenchOptions o;
  change(o);
  Status s = ValidateOptions(o, c, nranks);
  if (s.ok()) return "";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(BenchOptions, DefaultsAreValid) {
  EXPECT_EQ(Problem([](BenchOptions&) {}), "");
  EXPECT_EQ(Problem([](BenchOptions& o) {
              o.min_bytes = 8;
              o.max_bytes = 1 << 20;
              o.step_factor = 2;
              o.root = -1;
              o.check_iters = 0;
              o.warmup_iters = 0;
              o.run_cycles = 0;
              o.json_path = "out.JSON";
            }),
            "");
}

TEST(BenchOptions, RejectsBadValuesNamingTheFlag) {
  EXPECT_EQ(Problem([](BenchOptions& o) { o.min_bytes = 0; }).substr(0, 5), "-b 0:");
  EXPECT_EQ(Problem([](BenchOptions& o) {
              o.max_bytes = 0;
              o.min_bytes = 0;
            }).substr(0, 2),
            "-b");
  EXPECT_EQ(Problem([](BenchOptions& o) {
              o.min_bytes = 64 << 20;
              o.max_bytes = 8 << 20;
            }),
            "-b 67108864 is larger than -e 8388608; pass -b <= -e");
  EXPECT_EQ(Problem([](BenchOptions& o) {
              o.min_bytes = 8;
              o.step_bytes = 0;
            }).substr(0, 4),
            "-i 0");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.iters = 0; }).substr(0, 4), "-n 0");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.warmup_iters = -1; }), "-w -1: must be >= 0");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.check_iters = -2; }), "-c -2: must be >= 0");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.run_cycles = -1; }), "-N -1: must be >= 0");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.average = 4; }).substr(0, 4), "-a 4");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.blocking = 9; }).substr(0, 4), "-z 9");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.root = -2; }).substr(0, 5), "-r -2");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.types.clear(); }).substr(0, 2), "-d");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.ops.clear(); }).substr(0, 2), "-o");
  EXPECT_EQ(Problem([](BenchOptions& o) { o.json_path = "out.txt"; }).substr(0, 10), "-J out.txt");
}

TEST(BenchOptions, RootMustNameARankOfRootedCollectives) {
  auto root5 = [](BenchOptions& o) { o.root = 5; };
  EXPECT_EQ(Problem(root5, Collective::kBroadcast, 4),
            "-r 5: there are only 4 ranks; pass -r 0..3 or -r -1 for every root");
  EXPECT_EQ(Problem(root5, Collective::kBroadcast, 0), "") << "rank count unknown yet";
  EXPECT_EQ(Problem(root5, Collective::kBroadcast, 6), "");
  EXPECT_EQ(Problem(root5, Collective::kAllReduce, 4), "") << "nccl-tests ignores -r here";
}

}  // namespace
}  // namespace gantry::bench
