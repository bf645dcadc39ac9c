#include "json_check.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

namespace gantry::security::internal {
namespace {

using Json = nlohmann::json;

// The reference: what nlohmann::json accepts as an object, minus reserved names.
bool Reference(const std::string& text) {
  // nlohmann stops at a NUL byte as if the input ended there ("{}\0junk" parses);
  // a raw NUL is never valid JSON, and accepting it would cut records short.
  if (text.find('\0') != std::string::npos) return false;
  size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos || text[b] != '{') return false;
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  return !j.contains("seq") && !j.contains("prev") && !j.contains("hash");
}

bool Fast(const std::string& text) {
  switch (CheckAuditObject(text)) {
    case ObjectCheck::kValid:
      return true;
    case ObjectCheck::kInvalid:
      return false;
    case ObjectCheck::kSlowPath:
      return Reference(text);  // what audit.cc does
  }
  return false;
}

TEST(JsonCheckTest, Examples) {
  EXPECT_EQ(CheckAuditObject("{}"), ObjectCheck::kValid);
  EXPECT_EQ(
      CheckAuditObject(" \n{ \"a\" : [1, -2.5e+3, true, false, null, {\"b\":\"\\u00e9\"}] }\r\n"),
      ObjectCheck::kValid);
  EXPECT_EQ(CheckAuditObject("{\"nested\":{\"seq\":1}}"), ObjectCheck::kValid);
  EXPECT_EQ(CheckAuditObject("{\"emoji\":\"\xf0\x9f\x98\x80\",\"pair\":\"\\ud83d\\ude00\"}"),
            ObjectCheck::kValid);
  EXPECT_EQ(CheckAuditObject("{\"seq\":1}"), ObjectCheck::kInvalid);
  EXPECT_EQ(CheckAuditObject("{\"a\":1,\"hash\":\"x\"}"), ObjectCheck::kInvalid);
  EXPECT_EQ(CheckAuditObject("{\"s\\u0065q\":1}"), ObjectCheck::kSlowPath);
  for (const char* bad : {"",
                          "{",
                          "}",
                          "[]",
                          "{}{}",
                          "{} x",
                          "{\"a\"}",
                          "{\"a\":}",
                          "{\"a\":1,}",
                          "{,}",
                          "{\"a\":01}",
                          "{\"a\":1.}",
                          "{\"a\":.5}",
                          "{\"a\":1e}",
                          "{\"a\":+1}",
                          "{\"a\":tru}",
                          "{\"a\":\"\\x\"}",
                          "{\"a\":\"\\ud800\"}",
                          "{\"a\":\"\\udc00\"}",
                          "{\"a\":\"\x01\"}",
                          "{\"a\":\"\xff\"}",
                          "{\"a\":\"\xc0\xaf\"}",
                          "{\"a\":\"\xed\xa0\x80\"}",
                          "{\"a\":\"\xf4\x90\x80\x80\"}",
                          "{\"a\":[1,2}",
                          "{\"a\":{]}",
                          "{'a':1}",
                          "{a:1}",
                          "{\"a\":\"unterminated}"}) {
    EXPECT_EQ(CheckAuditObject(bad), ObjectCheck::kInvalid) << bad;
    EXPECT_FALSE(Reference(bad)) << bad;
  }
  // Deep nesting does not recurse.
  std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(CheckAuditObject(deep), ObjectCheck::kValid);
}

TEST(JsonCheckTest, AgreesWithNlohmannOnMutations) {
  const std::vector<std::string> seeds = {
      R"({"time":"2026-11-30T02:00:00Z","request_id":"r1","status":200,"latency_ms":12.5})",
      R"({"a":[1,-0,0.5e-3,1E+2,true,false,null],"b":{"c":"d\"e\\f\/g\b\f\n\r\t"}})",
      "{\"u\":\"\\u00e9\\ud83d\\ude00\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
      R"({"k\u0031":1,"x":[],"y":{},"z":""})",
      "{}",
  };
  const std::string alphabet = std::string("{}[]:,\" \\/ubfnrtUe+-.0123456789aEtrufalsn\t\n\r") +
                               "\x00\x01\x7f\x80\xbf\xc2\xc3"
                               "\xe0\xed\xef\xf0\xf4\xf5\xff" +
                               std::string(1, '\0');
  std::mt19937 rng(12345);
  int mismatches = 0;
  for (int iter = 0; iter < 200000; ++iter) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s.insert(s.begin() + static_cast<long>(pos), c);
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1);
          break;
        default:
          if (pos < s.size()) s[pos] = c;
          break;
      }
    }
    if (Fast(s) != Reference(s)) {
      if (++mismatches <= 10)
        ADD_FAILURE() << "disagree on: "
                      << Json(s).dump(-1, ' ', true, Json::error_handler_t::replace);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace gantry::security::internal
