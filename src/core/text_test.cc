#include "gantry/core/text.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gantry
