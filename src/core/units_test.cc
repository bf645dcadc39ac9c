#include "gantry/core/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace gantry {
namespace {

using std::chrono::nanoseconds;
using ::testing::HasSubstr;

constexpr uint64_t kKi = 1024, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;

uint64_t Size(std::string_view text) {
  Result<uint64_t> r = ParseSize(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.value_or(0);
}

std::string SizeError(std::string_view text) {
  Result<uint64_t> r = ParseSize(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << r.value_or(0);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ParseSizeTest, PlainBytes) {
  EXPECT_EQ(Size("0"), 0u);
  EXPECT_EQ(Size("8"), 8u);
  EXPECT_EQ(Size("8B"), 8u);
  EXPECT_EQ(Size("1048576"), kMi);
}

TEST(ParseSizeTest, BinarySuffixesInEveryForm) {
  for (std::string_view s : {"64M", "64m", "64MB", "64mb", "64MiB", "64mib", "64 MiB"}) {
    EXPECT_EQ(Size(s), 64 * kMi) << s;
  }
  EXPECT_EQ(Size("1K"), kKi);
  EXPECT_EQ(Size("1g"), kGi);
  EXPECT_EQ(Size("2T"), 2 * kTi);
  EXPECT_EQ(Size("1P"), kTi * 1024);
  EXPECT_EQ(Size("+4K"), 4 * kKi);
  EXPECT_EQ(Size("  16K  "), 16 * kKi);
}

TEST(ParseSizeTest, FractionsWithSuffixRoundToNearestByte) {
  EXPECT_EQ(Size("1.5G"), kGi + kGi / 2);
  EXPECT_EQ(Size("0.5K"), 512u);
  EXPECT_EQ(Size(".25M"), kMi / 4);
  EXPECT_EQ(Size("1.1K"), 1126u);                        // 1126.4
  EXPECT_EQ(Size("0.0005K"), 1u);                        // 0.512 rounds up
  EXPECT_EQ(Size("1.0000000000000000000000001K"), kKi);  // digits past 18 are ignored
}

TEST(ParseSizeTest, LargestAcceptedIsTwoToThe63) {
  EXPECT_EQ(Size("8388608T"), uint64_t{1} << 63);
  EXPECT_EQ(Size("8E"), uint64_t{1} << 63);
  EXPECT_EQ(Size("9223372036854775808"), uint64_t{1} << 63);
  EXPECT_EQ(Size("8388607.99999999999T"), (uint64_t{1} << 63) - 11);  // just below
}

TEST(ParseSizeTest, RejectsOverflowWithoutWrapping) {
  EXPECT_THAT(SizeError("9223372036854775809"), HasSubstr("larger than 2^63"));
  EXPECT_THAT(SizeError("8388609T"), HasSubstr("larger than 2^63"));
  EXPECT_THAT(SizeError("16E"), HasSubstr("larger than 2^63"));
  // 2^64 + 1024 would wrap to a small number in 64-bit arithmetic.
  EXPECT_THAT(SizeError("18014398509481985K"), HasSubstr("larger than 2^63"));
  EXPECT_THAT(SizeError("99999999999999999999999999999999999999999999M"),
              HasSubstr("larger than 2^63"));
  EXPECT_THAT(SizeError("8388608.000001T"), HasSubstr("larger than 2^63"));
}

TEST(ParseSizeTest, ErrorsQuoteTheInput) {
  EXPECT_EQ(SizeError(""), "invalid size '': empty; expected a byte count such as 64M or 1048576");
  EXPECT_THAT(SizeError("-5M"), HasSubstr("'-5M': sizes cannot be negative"));
  EXPECT_THAT(SizeError("64X"), HasSubstr("'64X': unknown suffix 'X'"));
  EXPECT_THAT(SizeError("64MX"), HasSubstr("unknown suffix 'MX'"));
  EXPECT_THAT(SizeError("64KiBB"), HasSubstr("unknown suffix 'KiBB'"));
  EXPECT_THAT(SizeError("M"), HasSubstr("'M': expected a number"));
  EXPECT_THAT(SizeError("."), HasSubstr("expected a number"));
  EXPECT_THAT(SizeError("1.5"), HasSubstr("'1.5': a byte count must be a whole number"));
  EXPECT_THAT(SizeError("1.5B"), HasSubstr("whole number"));
  EXPECT_THAT(SizeError("1e6"), HasSubstr("unknown suffix 'e6'"));
  EXPECT_THAT(SizeError("0x10"), HasSubstr("unknown suffix 'x10'"));
  EXPECT_THAT(SizeError("1,024"), HasSubstr("unknown suffix ',024'"));
  EXPECT_THAT(SizeError("++1"), HasSubstr("expected a number"));
}

TEST(FormatSizeTest, PicksTheLargestUnitWithThreeSignificantDigits) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(8), "8 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(1024), "1 KiB");
  EXPECT_EQ(FormatSize(1536), "1.5 KiB");
  EXPECT_EQ(FormatSize(268435456), "256 MiB");
  EXPECT_EQ(FormatSize(12 * kMi + 300 * kKi), "12.3 MiB");
  EXPECT_EQ(FormatSize(kGi + kGi / 3), "1.33 GiB");
  EXPECT_EQ(FormatSize(uint64_t{1} << 63), "8 EiB");
  EXPECT_EQ(FormatSize(std::numeric_limits<uint64_t>::max()), "16 EiB");
}

TEST(FormatSizeTest, OutputParsesBackWithinRounding) {
  for (uint64_t v : {uint64_t{1}, uint64_t{1000}, uint64_t{1536}, 3 * kMi + 17, kGi + kGi / 3,
                     5 * kTi - 1, uint64_t{1} << 62}) {
    uint64_t back = Size(FormatSize(v));
    double err = std::abs(static_cast<double>(back) - static_cast<double>(v));
    EXPECT_LE(err, static_cast<double>(v) * 0.005) << v << " -> " << FormatSize(v);
  }
}

nanoseconds Duration(std::string_view text) {
  Result<nanoseconds> r = ParseDuration(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.value_or(nanoseconds(-1));
}

std::string DurationError(std::string_view text) {
  Result<nanoseconds> r = ParseDuration(text);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << r.value_or(nanoseconds(0)).count();
  return r.status().message();
}

TEST(ParseDurationTest, EveryUnit) {
  using namespace std::chrono_literals;
  EXPECT_EQ(Duration("7ns"), 7ns);
  EXPECT_EQ(Duration("5us"), 5us);
  EXPECT_EQ(Duration("250ms"), 250ms);
  EXPECT_EQ(Duration("30s"), 30s);
  EXPECT_EQ(Duration("1.5m"), 90s);
  EXPECT_EQ(Duration("2h"), 2h);
  EXPECT_EQ(Duration("1d"), 24h);
  EXPECT_EQ(Duration("30S"), 30s);
  EXPECT_EQ(Duration("1.25 s"), 1250ms);
}

TEST(ParseDurationTest, BareNumberIsSeconds) {
  using namespace std::chrono_literals;
  EXPECT_EQ(Duration("10"), 10s);
  EXPECT_EQ(Duration("0.5"), 500ms);
  EXPECT_EQ(Duration("0"), 0ns);
}

TEST(ParseDurationTest, RejectsNegativesJunkAndOverflow) {
  EXPECT_THAT(DurationError("-1s"), HasSubstr("'-1s': durations cannot be negative"));
  EXPECT_THAT(DurationError("5 sec"), HasSubstr("'5 sec': unknown unit 'sec'"));
  EXPECT_THAT(DurationError("s"), HasSubstr("expected a number"));
  EXPECT_THAT(DurationError(""), HasSubstr("empty"));
  EXPECT_THAT(DurationError("107000d"), HasSubstr("too long"));
  EXPECT_THAT(DurationError("9223372036854775808ns"), HasSubstr("too long"));
}

TEST(ParseDurationTest, LargestAcceptedIsInt64Nanoseconds) {
  EXPECT_EQ(Duration("9223372036854775807ns").count(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Duration("106751d"), std::chrono::hours(24 * 106751));
}

TEST(FormatDurationTest, LargestSensibleUnit) {
  using namespace std::chrono_literals;
  EXPECT_EQ(FormatDuration(0ns), "0 ns");
  EXPECT_EQ(FormatDuration(12ns), "12 ns");
  EXPECT_EQ(FormatDuration(830us), "830 us");
  EXPECT_EQ(FormatDuration(1500ns), "1.5 us");
  EXPECT_EQ(FormatDuration(12345us), "12.3 ms");
  EXPECT_EQ(FormatDuration(1250ms), "1.25 s");
  EXPECT_EQ(FormatDuration(59s), "59 s");
  EXPECT_EQ(FormatDuration(150s), "2m30s");
  EXPECT_EQ(FormatDuration(2min), "2m");
  EXPECT_EQ(FormatDuration(1h + 5s), "1h5s");
  EXPECT_EQ(FormatDuration(76h), "3d4h");
  EXPECT_EQ(FormatDuration(-1500ms), "-1.5 s");
  EXPECT_EQ(FormatDuration(89999500ms), "1d1h");  // 24:59:59.5 rounds up to 25 h
  EXPECT_EQ(FormatDuration(nanoseconds::max()), "106751d23h47m17s");  // no overflow
  EXPECT_EQ(FormatDuration(nanoseconds::min()), "-106751d23h47m17s");
}

TEST(ParseIntTest, AcceptsSignedDecimal) {
  EXPECT_EQ(*ParseInt("-n", "42"), 42);
  EXPECT_EQ(*ParseInt("-n", "-7"), -7);
  EXPECT_EQ(*ParseInt("-n", "+7"), 7);
  EXPECT_EQ(*ParseInt("-n", "9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*ParseInt("-n", "-9223372036854775808"), std::numeric_limits<int64_t>::min());
}

TEST(ParseIntTest, ErrorsNameTheFlag) {
  EXPECT_EQ(ParseInt("-n", "abc").status().message(), "-n: 'abc' is not an integer");
  EXPECT_EQ(ParseInt("--iters", "").status().message(), "--iters: '' is not an integer");
  EXPECT_EQ(ParseInt("-n", "12x").status().message(), "-n: '12x' is not an integer");
  EXPECT_EQ(ParseInt("-n", " 1").status().message(), "-n: ' 1' is not an integer");
  EXPECT_EQ(ParseInt("-n", "1.0").status().message(), "-n: '1.0' is not an integer");
  EXPECT_EQ(ParseInt("-n", "+").status().message(), "-n: '+' is not an integer");
  EXPECT_EQ(ParseInt("-n", "9223372036854775808").status().message(),
            "-n: '9223372036854775808' is out of range for a 64-bit signed integer");
}

}  // namespace
}  // namespace gantry
