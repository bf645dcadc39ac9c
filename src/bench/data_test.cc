#include "data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bench_test_util.h"

namespace gantry::bench::internal {
namespace {

using comm::DataType;
using comm::ReduceOp;
using testing::Combine;
using testing::FinishAvg;
using testing::LoadRaw;
using testing::StoreRaw;

constexpr size_t kCount = 515;  // odd, and past any vector width

std::string Name(DataType t, ReduceOp op, int n) {
  return std::string(comm::DataTypeName(t)) + "/" + std::string(comm::ReduceOpName(op)) +
         "/n=" + std::to_string(n);
}

struct Inputs {
  std::vector<std::vector<std::byte>> ranks;
  std::vector<std::byte> expected;
};

Inputs Make(const DataSpec& spec, uint64_t first) {
  const size_t elt = comm::DataTypeSize(spec.type);
  Inputs in;
  for (int r = 0; r < spec.nranks; ++r) {
    in.ranks.emplace_back(kCount * elt);
    FillInput(spec, r, first, kCount, in.ranks.back().data());
  }
  in.expected.resize(kCount * elt);
  FillReduced(spec, first, kCount, in.expected.data());
  return in;
}

// Reduces element i of the ranks in `order`, one rounding per step.
uint64_t Sequential(const DataSpec& spec, const Inputs& in, const std::vector<int>& order,
                    size_t i) {
  uint64_t acc = LoadRaw(spec.type, in.ranks[order[0]].data(), i);
  for (size_t k = 1; k < order.size(); ++k) {
    acc = Combine(spec.type, *spec.op, acc, LoadRaw(spec.type, in.ranks[order[k]].data(), i));
  }
  return *spec.op == ReduceOp::kAvg ? FinishAvg(spec.type, acc, spec.nranks) : acc;
}

// Reduces element i as a binary tree over the ranks (recursive halving).
uint64_t Tree(const DataSpec& spec, const Inputs& in, size_t i) {
  std::vector<uint64_t> level;
  for (const auto& r : in.ranks) level.push_back(LoadRaw(spec.type, r.data(), i));
  while (level.size() > 1) {
    std::vector<uint64_t> next;
    for (size_t k = 0; k + 1 < level.size(); k += 2) {
      next.push_back(Combine(spec.type, *spec.op, level[k], level[k + 1]));
    }
    if (level.size() % 2) next.push_back(level.back());
    level = next;
  }
  return *spec.op == ReduceOp::kAvg ? FinishAvg(spec.type, level[0], spec.nranks) : level[0];
}

TEST(BenchData, ReductionsAreExactInEveryOrder) {
  for (DataType t : comm::AllDataTypes()) {
    for (ReduceOp op : comm::AllReduceOps()) {
      for (int n = 1; n <= 8; ++n) {
        for (uint64_t seed : {1ull, 77ull}) {
          for (uint64_t first : {0ull, 1000003ull}) {
            DataSpec spec{t, op, n, seed};
            Inputs in = Make(spec, first);
            std::vector<int> forward, backward;
            for (int r = 0; r < n; ++r) forward.push_back(r);
            backward.assign(forward.rbegin(), forward.rend());
            std::vector<int> interleaved;  // 0, n-1, 1, n-2, ...
            for (int lo = 0, hi = n - 1; lo <= hi; ++lo, --hi) {
              interleaved.push_back(lo);
              if (hi != lo) interleaved.push_back(hi);
            }
            const size_t elt = comm::DataTypeSize(t);
            std::vector<std::byte> got(kCount * elt);
            for (const auto* order : {&forward, &backward, &interleaved}) {
              for (size_t i = 0; i < kCount; ++i)
                StoreRaw(t, got.data(), i, Sequential(spec, in, *order, i));
              ASSERT_EQ(CountWrong(t, op, got.data(), in.expected.data(), kCount), 0)
                  << Name(t, op, n);
            }
            for (size_t i = 0; i < kCount; ++i) StoreRaw(t, got.data(), i, Tree(spec, in, i));
            ASSERT_EQ(CountWrong(t, op, got.data(), in.expected.data(), kCount), 0)
                << Name(t, op, n);
          }
        }
      }
    }
  }
}

// NCCL computes a floating-point avg as a sum of inputs pre-scaled by 1/n; that
// must land within the 2-ulp tolerance as well.
TEST(BenchData, PreScaledAverageIsWithinTolerance) {
  for (DataType t : {DataType::kHalf, DataType::kBfloat16, DataType::kFloat, DataType::kDouble}) {
    for (int n = 1; n <= 8; ++n) {
      DataSpec spec{t, ReduceOp::kAvg, n, 5};
      Inputs in = Make(spec, 0);
      std::vector<std::byte> got(kCount * comm::DataTypeSize(t));
      for (size_t i = 0; i < kCount; ++i) {
        uint64_t acc = 0;
        for (int r = 0; r < n; ++r) {
          double scaled = testing::ToDouble(t, LoadRaw(t, in.ranks[r].data(), i)) * (1.0 / n);
          uint64_t term = testing::FromDouble(t, scaled);
          acc = r == 0 ? term : Combine(t, ReduceOp::kSum, acc, term);
        }
        StoreRaw(t, got.data(), i, acc);
      }
      EXPECT_EQ(CountWrong(t, ReduceOp::kAvg, got.data(), in.expected.data(), kCount), 0)
          << Name(t, ReduceOp::kAvg, n);
    }
  }
}

TEST(BenchData, InputsDependOnRankSeedAndIndex) {
  for (DataType t : comm::AllDataTypes()) {
    for (std::optional<ReduceOp> op :
         {std::optional<ReduceOp>(), std::optional(ReduceOp::kSum), std::optional(ReduceOp::kProd),
          std::optional(ReduceOp::kMax), std::optional(ReduceOp::kAvg)}) {
      const size_t elt = comm::DataTypeSize(t);
      auto fill = [&](int rank, uint64_t seed, uint64_t first) {
        std::vector<std::byte> v(kCount * elt);
        FillInput(DataSpec{t, op, 4, seed}, rank, first, kCount, v.data());
        return v;
      };
      auto base = fill(1, 3, 0);
      EXPECT_NE(base, fill(2, 3, 0)) << comm::DataTypeName(t);
      EXPECT_NE(base, fill(1, 4, 0)) << comm::DataTypeName(t);
      EXPECT_NE(base, fill(1, 3, 1)) << comm::DataTypeName(t);
      EXPECT_EQ(base, fill(1, 3, 0)) << "deterministic";
      // A window starting at element 10 is the same data as elements 10.. of the whole.
      auto shifted = fill(1, 3, 10);
      EXPECT_TRUE(std::equal(shifted.begin(), shifted.end() - 10 * elt, base.begin() + 10 * elt));
    }
  }
}

TEST(BenchData, FloatInputsAreFiniteAndMaxMinDistinct) {
  for (DataType t : {DataType::kHalf, DataType::kBfloat16, DataType::kFloat, DataType::kDouble}) {
    for (std::optional<ReduceOp> op : {std::optional<ReduceOp>(), std::optional(ReduceOp::kMax)}) {
      const int n = 8;
      std::vector<std::vector<std::byte>> ranks;
      for (int r = 0; r < n; ++r) {
        ranks.emplace_back(kCount * comm::DataTypeSize(t));
        FillInput(DataSpec{t, op, n, 9}, r, 0, kCount, ranks.back().data());
      }
      for (size_t i = 0; i < kCount; ++i) {
        for (int r = 0; r < n; ++r) {
          double v = testing::ToDouble(t, LoadRaw(t, ranks[r].data(), i));
          ASSERT_TRUE(std::isfinite(v)) << comm::DataTypeName(t);
          for (int q = 0; op && q < r; ++q) {
            ASSERT_NE(v, testing::ToDouble(t, LoadRaw(t, ranks[q].data(), i)))
                << comm::DataTypeName(t) << " max/min inputs must differ between ranks";
          }
        }
      }
    }
  }
}

TEST(BenchData, SentinelDiffersFromInputs) {
  for (DataType t : comm::AllDataTypes()) {
    const size_t elt = comm::DataTypeSize(t);
    std::vector<std::byte> input(kCount * elt), sentinel(kCount * elt), other(kCount * elt);
    FillInput(DataSpec{t, std::nullopt, 2, 1}, 0, 0, kCount, input.data());
    FillSentinel(t, 1, 0, kCount, sentinel.data());
    FillSentinel(t, 1, 1, kCount, other.data());
    // Random bytes: at most a few coincidences per type.
    EXPECT_GT(CountWrong(t, std::nullopt, sentinel.data(), input.data(), kCount), kCount * 9 / 10);
    EXPECT_GT(CountWrong(t, std::nullopt, sentinel.data(), other.data(), kCount), kCount * 9 / 10);
  }
}

TEST(BenchData, CountWrongIsBitExactExceptFloatAverage) {
  float want[4] = {1.0f, -2.5f, 0.0f, 1e-3f};
  float got[4];
  std::copy(want, want + 4, got);
  got[0] = std::nextafter(std::nextafter(want[0], 2.0f), 2.0f);  // 2 ulps up
  got[1] = std::nextafter(want[1], 0.0f);                        // 1 ulp toward zero
  got[2] = -0.0f;                                                // same value, other bits
  EXPECT_EQ(CountWrong(DataType::kFloat, ReduceOp::kAvg, got, want, 4), 0);
  EXPECT_EQ(CountWrong(DataType::kFloat, ReduceOp::kSum, got, want, 4), 3);
  EXPECT_EQ(CountWrong(DataType::kFloat, std::nullopt, got, want, 4), 3);
  got[3] = std::nextafter(std::nextafter(std::nextafter(want[3], 1.0f), 1.0f), 1.0f);  // 3 ulps
  EXPECT_EQ(CountWrong(DataType::kFloat, ReduceOp::kAvg, got, want, 4), 1);

  int32_t iwant[2] = {7, -7}, igot[2] = {8, -7};
  EXPECT_EQ(CountWrong(DataType::kInt32, ReduceOp::kAvg, igot, iwant, 2), 1);

  uint16_t hwant[2] = {comm::FloatToHalf(1.0f).bits, comm::FloatToHalf(-3.0f).bits};
  uint16_t hgot[2] = {static_cast<uint16_t>(hwant[0] + 2), static_cast<uint16_t>(hwant[1] + 3)};
  EXPECT_EQ(CountWrong(DataType::kHalf, ReduceOp::kAvg, hgot, hwant, 2), 1);
  EXPECT_EQ(CountWrong(DataType::kHalf, ReduceOp::kMax, hgot, hwant, 2), 2);
}

}  // namespace
}  // namespace gantry::bench::internal
