#include "gantry/comm/types.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace gantry::comm {
namespace {

TEST(DataTypeTest, NamesRoundTripInNcclTestsOrder) {
  const char* expected[] = {"int8",   "uint8", "int32", "uint32", "int64",
                            "uint64", "half",  "float", "double", "bfloat16"};
  ASSERT_EQ(AllDataTypes().size(), static_cast<size_t>(kNumDataTypes));
  for (int i = 0; i < kNumDataTypes; ++i) {
    const DataType t = AllDataTypes()[i];
    EXPECT_EQ(DataTypeName(t), expected[i]);
    auto parsed = ParseDataType(expected[i]);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
}

TEST(DataTypeTest, ParsesAliases) {
  const std::pair<const char*, DataType> aliases[] = {
      {"char", DataType::kInt8},      {"int", DataType::kInt32},     {"float16", DataType::kHalf},
      {"fp16", DataType::kHalf},      {"float32", DataType::kFloat}, {"fp32", DataType::kFloat},
      {"float64", DataType::kDouble}, {"fp64", DataType::kDouble},   {"bf16", DataType::kBfloat16},
  };
  for (const auto& [name, type] : aliases) {
    auto parsed = ParseDataType(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, type) << name;
  }
}

TEST(DataTypeTest, RejectsUnknownNamesWithTheValidOnes) {
  auto r = ParseDataType("float8");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'float8'"), std::string::npos);
  EXPECT_NE(r.status().message().find("bfloat16"), std::string::npos);
  EXPECT_FALSE(ParseDataType("").ok());
  EXPECT_FALSE(ParseDataType("Float").ok());  // names are case-sensitive, as in nccl-tests
}

TEST(DataTypeTest, SizesAndFloatingPoint) {
  EXPECT_EQ(DataTypeSize(DataType::kInt8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kUint8), 1u);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kUint32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kUint64), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kHalf), 2u);
  EXPECT_EQ(DataTypeSize(DataType::kFloat), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kDouble), 8u);
  EXPECT_EQ(DataTypeSize(DataType::kBfloat16), 2u);
  int fp = 0;
  for (DataType t : AllDataTypes()) fp += IsFloatingPoint(t);
  EXPECT_EQ(fp, 4);
  EXPECT_TRUE(IsFloatingPoint(DataType::kBfloat16));
  EXPECT_FALSE(IsFloatingPoint(DataType::kUint64));
}

TEST(ReduceOpTest, NamesRoundTrip) {
  const char* expected[] = {"sum", "prod", "max", "min", "avg"};
  ASSERT_EQ(AllReduceOps().size(), static_cast<size_t>(kNumReduceOps));
  for (int i = 0; i < kNumReduceOps; ++i) {
    EXPECT_EQ(ReduceOpName(AllReduceOps()[i]), expected[i]);
    auto parsed = ParseReduceOp(expected[i]);
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, AllReduceOps()[i]);
  }
  auto bad = ParseReduceOp("mulsum");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'mulsum'"), std::string::npos);
}

uint16_t H(float f) { return FloatToHalf(f).bits; }
float F(uint16_t h) { return HalfToFloat(Half{h}); }

TEST(HalfTest, KnownValues) {
  EXPECT_EQ(H(0.0f), 0x0000);
  EXPECT_EQ(H(-0.0f), 0x8000);
  EXPECT_EQ(H(1.0f), 0x3c00);
  EXPECT_EQ(H(-2.0f), 0xc000);
  EXPECT_EQ(H(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(H(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(H(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(H(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(H(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(F(0x3555), 0.333251953125f);
  EXPECT_EQ(F(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_TRUE(std::isinf(F(0x7c00)));
  EXPECT_TRUE(std::isnan(F(0x7e00)));
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even (1.0).
  EXPECT_EQ(H(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(H(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Just above halfway rounds up.
  EXPECT_EQ(H(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3c01);
  // Overflow threshold: 65520 is halfway to 65536 and rounds to infinity.
  EXPECT_EQ(H(65519.99f), 0x7bff);
  EXPECT_EQ(H(65520.0f), 0x7c00);
  // Subnormal ties: 2^-25 is halfway between 0 and 2^-24 (ties to 0);
  // 3 * 2^-25 is halfway between 2^-24 and 2^-23 (ties to 2^-23).
  EXPECT_EQ(H(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(H(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(H(3 * std::ldexp(1.0f, -25)), 0x0002);
  // Rounding up out of the subnormal range gives the smallest normal.
  EXPECT_EQ(H(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
  EXPECT_EQ(H(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(H(-std::numeric_limits<float>::denorm_min()), 0x8000);
}

TEST(HalfTest, NanStaysQuietNan) {
  const float snan = std::bit_cast<float>(0x7f800001u);
  const uint16_t h = H(snan);
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x03ff, 0);
  EXPECT_NE(h & 0x0200, 0);  // quiet
  EXPECT_EQ(H(-std::numeric_limits<float>::quiet_NaN()) & 0x8000, 0x8000);
}

TEST(HalfTest, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = F(h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_EQ(H(f), h | 0x0200) << std::hex << b;  // quietened, payload kept
    } else {
      ASSERT_EQ(H(f), h) << std::hex << b;
      // The conversion to float is exact: compare with the decoded value.
      const int exp = (h >> 10) & 0x1f;
      const int mant = h & 0x3ff;
      double v = exp == 0    ? std::ldexp(mant, -24)
                 : exp == 31 ? std::numeric_limits<double>::infinity()
                             : std::ldexp(1024 + mant, exp - 25);
      if (h & 0x8000) v = -v;
      ASSERT_EQ(static_cast<double>(f), v) << std::hex << b;
    }
  }
}

#if defined(__F16C__)
// The hardware conversion is the reference for FloatToHalf. Sample the whole
// float range with a stride coprime to 2^32 (every exponent, both signs).
TEST(HalfTest, MatchesF16CAcrossTheFloatRange) {
  constexpr uint32_t kStride = 4099;
  uint32_t bits = 0;
  for (uint64_t n = 0; n < (uint64_t{1} << 32) / kStride; ++n, bits += kStride) {
    const float f = std::bit_cast<float>(bits);
    const uint16_t hw =
        static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    ASSERT_EQ(H(f), hw) << std::hex << bits;
  }
  // And every float near the half range's interesting boundaries.
  for (uint32_t centre : {0x33000000u, 0x38800000u, 0x477ff000u, 0x3f800000u}) {
    for (uint32_t d = 0; d < 20000; ++d) {
      for (uint32_t b : {centre + d, centre - d, (centre + d) | 0x80000000u}) {
        const float f = std::bit_cast<float>(b);
        const uint16_t hw =
            static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        ASSERT_EQ(H(f), hw) << std::hex << b;
      }
    }
  }
}
#endif

TEST(Bfloat16Test, RoundsToNearestEvenAndKeepsNan) {
  auto bf = [](float f) { return FloatToBfloat16(f).bits; };
  EXPECT_EQ(bf(1.0f), 0x3f80);
  EXPECT_EQ(bf(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(bf(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to inf
  const uint16_t nan = bf(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x7f, 0);
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = Bfloat16ToFloat(Bfloat16{static_cast<uint16_t>(b)});
    if (!std::isnan(f)) {
      ASSERT_EQ(bf(f), b);
    }
  }
}

}  // namespace
}  // namespace gantry::comm
