#include "reduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reference_reduce_test.h"

namespace gantry::comm::internal {
namespace {

using testing::ReferenceReduce;

// Random inputs of every type. Floats get fractional values so that rounding
// matters; products stay near 1 so they do not all overflow.
std::vector<uint8_t> RandomArray(DataType type, ReduceOp op, size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(count * DataTypeSize(type) + 1);  // +1: never empty
  std::uniform_real_distribution<double> wide(-100.0, 100.0);
  std::uniform_real_distribution<double> near_one(0.5, 2.0);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = out.data() + i * DataTypeSize(type);
    const double d = op == ReduceOp::kProd ? near_one(rng) : wide(rng);
    const uint64_t bits = rng();
    switch (type) {
      case DataType::kHalf: {
        const uint16_t h = FloatToHalf(static_cast<float>(d)).bits;
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kBfloat16: {
        const uint16_t h = FloatToBfloat16(static_cast<float>(d)).bits;
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::kFloat: {
        const float f = static_cast<float>(d);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::kDouble:
        std::memcpy(p, &d, 8);
        break;
      default:  // integers: any bit pattern, sums and products wrap
        std::memcpy(p, &bits, DataTypeSize(type));
    }
  }
  return out;
}

std::string Describe(DataType t, ReduceOp op, int nsrc, size_t count) {
  return std::string(DataTypeName(t)) + " " + std::string(ReduceOpName(op)) +
         " nsrc=" + std::to_string(nsrc) + " count=" + std::to_string(count);
}

std::vector<uint8_t> Expected(DataType type, ReduceOp op, const std::vector<const void*>& srcs,
                              size_t count) {
  const size_t elem = DataTypeSize(type);
  std::vector<uint8_t> out(count * elem + 1);
  for (size_t i = 0; i < count; ++i) ReferenceReduce(type, op, srcs, i, out.data() + i * elem);
  return out;
}

// 5000 elements cross several 8 KiB tiles whatever the element size.
constexpr size_t kCounts[] = {0, 1, 7, 33, 5000};
constexpr int kSources[] = {1, 2, 3, 5};

TEST(ReduceNTest, MatchesReferenceForEveryTypeOpAndSourceCount) {
  for (DataType type : AllDataTypes()) {
    const size_t elem = DataTypeSize(type);
    for (ReduceOp op : AllReduceOps()) {
      for (int nsrc : kSources) {
        for (size_t count : kCounts) {
          std::vector<std::vector<uint8_t>> inputs;
          std::vector<const void*> srcs;
          for (int k = 0; k < nsrc; ++k) {
            inputs.push_back(RandomArray(type, op, count, 1000 * k + count));
          }
          for (auto& in : inputs) srcs.push_back(in.data());
          const std::vector<uint8_t> expected = Expected(type, op, srcs, count);
          std::vector<uint8_t> got(count * elem + 1, 0xee);
          ReduceN(got.data(), srcs.data(), nsrc, count, type, op);
          ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), count * elem))
              << Describe(type, op, nsrc, count);
          ASSERT_EQ(got[count * elem], 0xee)
              << "wrote past the end: " << Describe(type, op, nsrc, count);
        }
      }
    }
  }
}

TEST(ReduceNTest, ManyDestinationsAndStreamingStoresGetTheSameResult) {
  for (DataType type : AllDataTypes()) {
    const size_t elem = DataTypeSize(type);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kAvg}) {
      for (bool stream : {false, true}) {
        const size_t count = 5000;
        auto a = RandomArray(type, op, count, 1);
        auto b = RandomArray(type, op, count, 2);
        auto c = RandomArray(type, op, count, 3);
        std::vector<const void*> srcs = {a.data(), b.data(), c.data()};
        const auto expected = Expected(type, op, srcs, count);
        // Destinations at odd offsets, so streaming stores meet unaligned heads and tails.
        std::vector<std::vector<uint8_t>> outs(3, std::vector<uint8_t>(count * elem + 64, 0));
        void* dsts[3] = {outs[0].data() + elem, outs[1].data() + 3 * elem, outs[2].data()};
        ReduceN(dsts, 3, srcs.data(), 3, count, type, op, stream);
        StreamFence();
        for (void* d : dsts) {
          ASSERT_EQ(0, std::memcmp(d, expected.data(), count * elem))
              << Describe(type, op, 3, count) << (stream ? " streamed" : "");
        }
      }
    }
  }
}

TEST(ReduceNTest, DestinationMayBeAnyOfTheInputs) {
  for (DataType type : AllDataTypes()) {
    const size_t elem = DataTypeSize(type);
    for (ReduceOp op : AllReduceOps()) {
      for (int which = 0; which < 3; ++which) {
        const size_t count = 5000;
        std::vector<std::vector<uint8_t>> in = {RandomArray(type, op, count, 7),
                                                RandomArray(type, op, count, 8),
                                                RandomArray(type, op, count, 9)};
        std::vector<const void*> srcs = {in[0].data(), in[1].data(), in[2].data()};
        const auto expected = Expected(type, op, srcs, count);
        ReduceN(in[which].data(), srcs.data(), 3, count, type, op);
        ASSERT_EQ(0, std::memcmp(in[which].data(), expected.data(), count * elem))
            << Describe(type, op, 3, count) << " in place on input " << which;
      }
    }
  }
}

TEST(AccumulateTest, PairwiseAccumulationThenDivideEqualsReduceN) {
  for (DataType type : AllDataTypes()) {
    const size_t elem = DataTypeSize(type);
    for (ReduceOp op : AllReduceOps()) {
      const size_t count = 3001;
      std::vector<std::vector<uint8_t>> in;
      std::vector<const void*> srcs;
      for (int k = 0; k < 4; ++k) in.push_back(RandomArray(type, op, count, 50 + k));
      for (auto& v : in) srcs.push_back(v.data());
      std::vector<uint8_t> want(count * elem + 1);
      ReduceN(want.data(), srcs.data(), 4, count, type, op);
      std::vector<uint8_t> acc = in[0];
      for (int k = 1; k < 4; ++k) Accumulate(acc.data(), in[k].data(), count, type, op);
      if (op == ReduceOp::kAvg) DivideBy(acc.data(), count, type, 4);
      ASSERT_EQ(0, std::memcmp(acc.data(), want.data(), count * elem))
          << Describe(type, op, 4, count);
    }
  }
}

TEST(AvgTest, DividesAtTheEnd) {
  // Integers truncate: (1 + 2 + 4) / 3 = 2, and -7 / 2 = -3.
  int32_t a[] = {1, -3}, b[] = {2, -4}, c[] = {4, 0};
  int32_t out[2];
  const void* three[] = {a, b, c};
  ReduceN(out, three, 3, 2, DataType::kInt32, ReduceOp::kAvg);
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[1], -2);  // (-3 - 4 + 0) / 3 = -7 / 3
  const void* two[] = {a, b};
  ReduceN(out, two, 2, 2, DataType::kInt32, ReduceOp::kAvg);
  EXPECT_EQ(out[1], -3);  // -7 / 2
  // int8 with more ranks than an int8 can count.
  std::vector<int8_t> ones(300, 1);
  std::vector<const void*> many(300, ones.data());
  int8_t r8;
  ReduceN(&r8, many.data(), 300, 1, DataType::kInt8, ReduceOp::kAvg);
  EXPECT_EQ(r8, static_cast<int8_t>(static_cast<int8_t>(300) / 300));  // sum wraps to 44
  // Floats: x / n.
  float fa[] = {1.0f}, fb[] = {2.0f}, fc[] = {2.0f};
  const void* f3[] = {fa, fb, fc};
  float fo;
  ReduceN(&fo, f3, 3, 1, DataType::kFloat, ReduceOp::kAvg);
  EXPECT_EQ(fo, 5.0f / 3.0f);
}

TEST(Reduce16Test, HalfSumRoundsEveryStep) {
  // 2048 + 1 + 1: in half, 2048 + 1 = 2049 ties to 2048 each time, so the sum
  // stays 2048; summing in float and rounding once would give 2050.
  const uint16_t big = FloatToHalf(2048.0f).bits, one = FloatToHalf(1.0f).bits;
  const void* srcs[] = {&big, &one, &one};
  uint16_t out;
  ReduceN(&out, srcs, 3, 1, DataType::kHalf, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(Half{out}), 2048.0f);
  // Order matters and is fixed: 1 + 1 + 2048 = 2050.
  const void* srcs2[] = {&one, &one, &big};
  ReduceN(&out, srcs2, 3, 1, DataType::kHalf, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(Half{out}), 2050.0f);
}

TEST(CopyStreamTest, CopiesEveryLengthAndAlignment) {
  std::vector<uint8_t> src(4096 + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  for (size_t len : {0u, 1u, 63u, 64u, 65u, 200u, 4096u}) {
    for (size_t off : {0u, 1u, 17u, 63u}) {
      std::vector<uint8_t> dst(len + 128, 0x5a);
      CopyStream(dst.data() + off, src.data() + 3, len);
      StreamFence();
      ASSERT_EQ(0, std::memcmp(dst.data() + off, src.data() + 3, len)) << len << " " << off;
      for (size_t i = 0; i < off; ++i) ASSERT_EQ(dst[i], 0x5a);
      for (size_t i = off + len; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x5a);
    }
  }
}

}  // namespace
}  // namespace gantry::comm::internal
