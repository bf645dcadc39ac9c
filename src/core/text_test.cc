#include "gantry/core/text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace gantry {
namespace {

TEST(TextTest, EscapeMarkup) {
  EXPECT_EQ(EscapeMarkup("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(EscapeMarkup("x\ty\nz"), "x&#9;y&#10;z");
  EXPECT_EQ(EscapeMarkup("x\ty\nz", /*attribute=*/false), "x\ty\nz");
  EXPECT_EQ(EscapeMarkup(std::string("a\x01"
                                     "b\x1f",
                                     4)),
            "a?b?");
  EXPECT_EQ(EscapeMarkup("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes through
}

TEST(TextTest, TrimSpace) {
  EXPECT_EQ(TrimSpace(" \t a b \r\n"), "a b");
  EXPECT_EQ(TrimSpace("   "), "");
  EXPECT_EQ(TrimSpace(""), "");
}

TEST(TextTest, FormatUtc) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1764480000));
  EXPECT_EQ(FormatUtc(t, "%Y-%m-%dT%H:%M:%SZ"), "2025-11-30T05:20:00Z");
}

// Every byte value at every position of a word, after plain and before
// arbitrary bytes: the prefix ends exactly at the first byte that is not
// printable ASCII other than '"' and '\\'.
TEST(JsonPlainPrefix8Test, EveryByteAtEveryPosition) {
  EXPECT_EQ(JsonPlainPrefix8("abcdefgh"), 8u);
  for (int b = 0; b < 256; ++b) {
    const bool plain = b >= 0x20 && b < 0x80 && b != '"' && b != '\\';
    for (int pos = 0; pos < 8; ++pos) {
      for (int after : {int{'a'}, 0x00, 0x1f, 0x22, 0x5c, 0x80, 0xff}) {
        char w[8];
        std::memset(w, 'a', sizeof(w));
        w[pos] = static_cast<char>(b);
        for (int k = pos + 1; k < 8; ++k) w[k] = static_cast<char>(after);
        size_t want = 0;
        while (want < 8) {
          auto c = static_cast<unsigned char>(w[want]);
          if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
          ++want;
        }
        EXPECT_EQ(JsonPlainPrefix8(w), want) << "byte " << b << " at " << pos << ", then " << after;
        if (!plain) EXPECT_EQ(JsonPlainPrefix8(w), static_cast<size_t>(pos));
      }
    }
  }
}

TEST(TextTest, Join) {
  EXPECT_EQ(Join({}, ", "), "");
  EXPECT_EQ(Join({"a"}, ", "), "a");
  EXPECT_EQ(Join({"a", "", "c"}, "; "), "a; ; c");
}

TEST(TextTest, AsciiCase) {
  EXPECT_EQ(AsciiLower("Standard_ND96 H100"), "standard_nd96 h100");
  EXPECT_EQ(AsciiLower("\xc3\x89T\xc3\x89"), "\xc3\x89t\xc3\x89");  // UTF-8 bytes untouched
  EXPECT_TRUE(EqualsIgnoreCase("EastUS", "eastus"));
  EXPECT_FALSE(EqualsIgnoreCase("eastus", "eastus2"));
  EXPECT_FALSE(EqualsIgnoreCase("a", "b"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
}

TEST(TextTest, ParseNumberTakesAWholeDecimalNumber) {
  int64_t i = 0;
  EXPECT_TRUE(ParseNumber(" 42\n", &i));
  EXPECT_EQ(i, 42);
  EXPECT_TRUE(ParseNumber("-7", &i));
  EXPECT_EQ(i, -7);
  EXPECT_TRUE(ParseNumber("+7", &i));
  EXPECT_EQ(i, 7);
  for (std::string_view bad : {"", " ", "4x", "0x10", "1.5", "+-1", "+", "99999999999999999999"}) {
    EXPECT_FALSE(ParseNumber(bad, &i)) << bad;
  }
  uint32_t u = 0;
  EXPECT_FALSE(ParseNumber("-1", &u));
  EXPECT_FALSE(ParseNumber("4294967296", &u));
  EXPECT_TRUE(ParseNumber("4294967295", &u));
  EXPECT_EQ(u, std::numeric_limits<uint32_t>::max());

  double d = 0;
  EXPECT_TRUE(ParseNumber("-2.5e3", &d));
  EXPECT_DOUBLE_EQ(d, -2500);
  EXPECT_TRUE(ParseNumber("+0.75", &d));
  EXPECT_DOUBLE_EQ(d, 0.75);
  for (std::string_view bad : {"inf", "-inf", "nan", "1e999", "1.5x", "0x1p3", ""}) {
    EXPECT_FALSE(ParseNumber(bad, &d)) << bad;
  }
}

TEST(TextTest, EditDistanceCountsTranspositionsAsOneEdit) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("ranks", "ranks"), 0u);
  EXPECT_EQ(EditDistance("rnaks", "ranks"), 1u);  // adjacent transposition
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("memroy", "memory"), 1u);
  EXPECT_EQ(EditDistance("ca", "abc"), 3u);  // optimal string alignment, not Damerau
}

TEST(TextTest, ClosestMatchPrefersTheFirstNearest) {
  const std::vector<std::string> known = {"ranks", "iters", "ranges"};
  EXPECT_EQ(ClosestMatch("rnaks", known, 2), "ranks");
  EXPECT_EQ(ClosestMatch("rankes", known, 2), "ranks");  // ranks and ranges both 1 away: first
  EXPECT_EQ(ClosestMatch("colour", known, 2), std::nullopt);
  EXPECT_EQ(ClosestMatch("iter", known, 0), std::nullopt);
  EXPECT_EQ(ClosestMatch("iter", known, 1), "iters");
  EXPECT_EQ(ClosestMatch("x", {}, 5), std::nullopt);
}

TEST(TextTest, UpperPluralAndThousands) {
  EXPECT_EQ(AsciiUpper("gantry-ml-001 \xc3\xa9"),
            "GANTRY-ML-001 \xc3\xa9");  // UTF-8 bytes untouched
  EXPECT_EQ(Plural(1, "failure", "failures"), "1 failure");
  EXPECT_EQ(Plural(0, "failure", "failures"), "0 failures");
  EXPECT_EQ(GroupThousands(0), "0");
  EXPECT_EQ(GroupThousands(999), "999");
  EXPECT_EQ(GroupThousands(1000), "1,000");
  EXPECT_EQ(GroupThousands(143547), "143,547");
  EXPECT_EQ(GroupThousands(-1234567), "-1,234,567");
  EXPECT_EQ(GroupThousands(INT64_MIN), "-9,223,372,036,854,775,808");
}

}  // namespace
}  // namespace gantry
