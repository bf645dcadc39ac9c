#include "gantry/core/text.h"

#include <gtest/gtest.h>

#include <cstring>

namespace gantry {
namespace {

TEST(TextTest, EscapeMarkup) {
  EXPECT_EQ(EscapeMarkup("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(EscapeMarkup("x\ty\nz"), "x&#9;y&#10;z");
  EXPECT_EQ(EscapeMarkup("x\ty\nz", /*attribute=*/false), "x\ty\nz");
  EXPECT_EQ(EscapeMarkup(std::string("a\x01" "b\x1f", 4)), "a?b?");
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

}  // namespace
}  // namespace gantry
