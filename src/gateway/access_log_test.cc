// The JSON escaping of access/audit records: EscapeJsonTo (the in-place
// writer of Finish) and AppendJsonEscaped produce the same, valid bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "internal.h"

namespace gantry::gateway::internal {
namespace {

std::string Escaped(std::string_view s) {
  std::string out(6 * s.size() + 8, '\xff');
  char* end = EscapeJsonTo(s, out.data());
  EXPECT_LE(static_cast<size_t>(end - out.data()), 6 * s.size());
  out.resize(static_cast<size_t>(end - out.data()));
  return out;
}

// The escape of one byte, from the rule rather than from the code.
std::string Expected(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
  }
  if (c < 0x20) {
    char b[8];
    std::snprintf(b, sizeof(b), "\\u%04x", c);
    return b;
  }
  return std::string(1, static_cast<char>(c));
}

TEST(AccessLogEscape, EveryByteAloneAndInsideAPlainRun) {
  for (int i = 0; i < 256; ++i) {
    const auto c = static_cast<unsigned char>(i);
    const std::string one(1, static_cast<char>(c));
    EXPECT_EQ(Escaped(one), Expected(c)) << i;
    // At every position of a run long enough for the word-at-a-time path.
    for (size_t at = 0; at < 20; ++at) {
      std::string s(20, 'a');
      s[at] = static_cast<char>(c);
      std::string want = std::string(at, 'a') + Expected(c) + std::string(19 - at, 'a');
      EXPECT_EQ(Escaped(s), want) << i << " at " << at;
    }
  }
}

TEST(AccessLogEscape, MatchesAppendJsonEscapedAndParsesBack) {
  std::mt19937 rng(7);
  // Pieces picked whole, so the strings stay valid UTF-8 (é and € included).
  const std::vector<std::string> pieces = {
      "a",  "Z",  "0",  " ",    "-",    "/",    ".",        "\"",           "\\",
      "\n", "\r", "\t", "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "plainword"};
  for (int n = 0; n < 2000; ++n) {
    std::string s;
    size_t len = rng() % 24;
    for (size_t i = 0; i < len; ++i) s += pieces[rng() % pieces.size()];
    std::string appended;
    AppendJsonEscaped(s, &appended);
    const std::string written = Escaped(s);
    ASSERT_EQ(written, appended) << n;
    // Valid JSON that means the original bytes.
    nlohmann::json j = nlohmann::json::parse("\"" + written + "\"", nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << written;
    EXPECT_EQ(j.get<std::string>(), s) << n;
  }
}

// The flag that lets Finish hand ASCII records to the audit log unchecked: set
// by any byte >= 0x80 (UTF-8 or not), never by ASCII, escaped or not.
TEST(AccessLogEscape, ReportsNonAsciiBytes) {
  char out[512];
  for (std::string ascii : {std::string(""), std::string("tiny-lm"),
                            std::string("a \"quoted\" \\ path\n\t\x01 and a long plain run"),
                            std::string("\x7f\x1f")}) {
    bool non_ascii = false;
    EscapeJsonTo(ascii, out, &non_ascii);
    EXPECT_FALSE(non_ascii) << ascii;
  }
  for (std::string high :
       {std::string("caf\xc3\xa9"), std::string("\xff"), std::string("0123456789abcdef\x80"),
        std::string("\xe2\x82\xac 12345678")}) {
    bool non_ascii = false;
    EscapeJsonTo(high, out, &non_ascii);
    EXPECT_TRUE(non_ascii) << high;
  }
  EscapeJsonTo("caf\xc3\xa9", out);  // without the flag: still escapes
}

}  // namespace
}  // namespace gantry::gateway::internal
