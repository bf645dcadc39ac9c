#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "gantry/assess/resource.h"

namespace gantry::assess {
namespace {

using ::testing::HasSubstr;

SourceDoc MustParse(std::string_view text) {
  Result<SourceDoc> r = ParseSource(text, "t.json");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : SourceDoc();
}

TEST(ParseSourceTest, ValuesMatchNlohmann) {
  const std::string text = R"({
  "a": [1, -2, 3.5, 1e3, 18446744073709551615, -9223372036854775808],
  "s": "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00 \u20ac é",
  "t": true, "f": false, "n": null,
  "o": {"k": {}}, "e": []
})";
  SourceDoc doc = MustParse(text);
  EXPECT_EQ(doc.value, Json::parse(text));
  EXPECT_EQ(doc.path, "t.json");
  EXPECT_TRUE(doc.value["a"][0].is_number_integer());
  EXPECT_TRUE(doc.value["a"][4].is_number_unsigned());
  EXPECT_TRUE(doc.value["a"][2].is_number_float());
}

TEST(ParseSourceTest, KeepsKeyOrderAndLastDuplicateWins) {
  std::string text = "{\"z\": 1, \"a\": 2, \"z\": 3}";
  SourceDoc doc = MustParse(text);
  EXPECT_EQ(doc.value.dump(), R"({"z":3,"a":2})");
  // The same through the hash-set path of large objects.
  text = "{";
  for (int i = 0; i < 40; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k3\": 99, \"k39\": 100}";
  doc = MustParse(text);
  EXPECT_EQ(doc.value.size(), 40u);
  EXPECT_EQ(doc.value["k3"], 99);
  EXPECT_EQ(doc.value["k39"], 100);
  EXPECT_EQ(doc.value.begin().key(), "k0");
}

TEST(ParseSourceTest, LinesOfObjectsAndArrays) {
  const std::string text =
      "{\n"                                  // 1
      "  \"resources\": [\n"                 // 2
      "    {\n"                              // 3
      "      \"name\": \"a\",\n"             // 4
      "      \"properties\": {\"x\": [\n"    // 5
      "1]}\n"                                // 6
      "    },\n"                             // 7
      "    // a comment\n"                   // 8
      "    /* and\n"                         // 9
      "       another */ {\"a/b~c\": {}}\n"  // 10
      "  ]\n"
      "}\n";
  SourceDoc doc = MustParse(text);
  EXPECT_EQ(doc.lines.at(""), 1);
  EXPECT_EQ(doc.lines.at("/resources"), 2);
  EXPECT_EQ(doc.lines.at("/resources/0"), 3);
  EXPECT_EQ(doc.lines.at("/resources/0/properties"), 5);
  EXPECT_EQ(doc.lines.at("/resources/0/properties/x"), 5);
  EXPECT_EQ(doc.lines.at("/resources/1"), 10);
  EXPECT_EQ(doc.lines.at("/resources/1/a~1b~0c"), 10);
  EXPECT_EQ(doc.lines.count("/resources/0/name"), 0u);  // scalars are not listed
  EXPECT_EQ(doc.LineOf("/resources/0/name"), 3);
  EXPECT_EQ(doc.LineOf("/nothing/here"), 1);
}

TEST(ParseSourceTest, ByteOrderMarkIsSkipped) {
  SourceDoc doc = MustParse("\xEF\xBB\xBF{\"a\": 1}");
  EXPECT_EQ(doc.value["a"], 1);
}

struct BadCase {
  const char* text;
  const char* message;  // a substring of the error
};

TEST(ParseSourceTest, MalformedTextNamesLineAndColumn) {
  const BadCase cases[] = {
      {"", "t.json:1:1: invalid JSON: the file is empty"},
      {"   \n  ", "t.json:2:3: invalid JSON: the file is empty"},
      {"{\"a\": 1,\n \"b\" 2}", "t.json:2:6: invalid JSON: expected ':' after \"b\""},
      {"{\"a\": tru}", "t.json:1:7: invalid JSON: unexpected word; expected 'true'"},
      {"[1, 2", "t.json:1:6: invalid JSON: unexpected end of input inside an array"},
      {"[1 2]", "t.json:1:4: invalid JSON: expected ',' or ']'"},
      {"{\"a\": 1} x", "t.json:1:10: invalid JSON: unexpected text after the JSON value"},
      {"\"abc", "not closed"},
      {"\"a\nb\"", "not closed before the end of the line"},
      {"\"\\x\"", "invalid escape '\\x'"},
      {"\"\\u12\"", "four hex digits"},
      {"\"\\ud800\"", "low surrogate"},
      {"\"\\udc00\"", "without a high surrogate"},
      {"\"\xff\"", "invalid UTF-8"},
      {"\"\xc0\xaf\"", "invalid UTF-8"},
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},
      {"-", "expected a digit after '-'"},
      {"1.", "expected a digit after '.'"},
      {"1e", "exponent"},
      {"1e999", "out of range"},
      {"/* open", "not closed with */"},
      {"{,}", "expected a member name"},
      {"[\x01]", "unexpected character '\\x01'"},
  };
  for (const BadCase& c : cases) {
    Result<SourceDoc> r = ParseSource(c.text, "t.json");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(ParseSourceTest, DeepNestingIsRefusedNotRecursedInto) {
  std::string ok(kMaxJsonDepth, '[');
  ok += std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(ParseSource(ok, "t.json").ok());
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  Result<SourceDoc> r = ParseSource(deep, "t.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("limit of 256"));
  // A million open brackets: an error, not a stack overflow.
  std::string hostile(1 << 20, '[');
  r = ParseSource(hostile, "t.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("t.json:1:257:"));
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_FALSE(ParseSource(objects, "t.json").ok());
}

TEST(ParseSourceTest, OversizedInputIsRefused) {
  std::string big(kMaxInputBytes + 1, ' ');
  Result<SourceDoc> r = ParseSource(big, "big.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("big.json"));
  EXPECT_THAT(r.status().message(), HasSubstr("256 MiB"));
}

TEST(ReadSourceFileTest, ReadsFilesAndNamesMissingOnes) {
  const std::string dir = ::testing::TempDir() + "/source_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/a.json";
  { std::ofstream(path) << "{\n  \"x\": [1]\n}\n"; }
  Result<SourceDoc> r = ReadSourceFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->path, path);
  EXPECT_EQ(r->lines.at("/x"), 2);

  r = ReadSourceFile(dir + "/missing.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("missing.json"));

  r = ReadSourceFile(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is a directory"));

  { std::ofstream(path) << "{\n  \"x\": [1,,]\n}\n"; }
  r = ReadSourceFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path + ":2:11:"));
}

// A 5,000-resource template of about 10 MB parses well under 0.3 s.
TEST(ParseSourceTest, ReadsALargeTemplateWithItsLines) {
  std::string text = "{\"$schema\": \"x\", \"resources\": [\n";
  for (int i = 0; i < 5000; ++i) {
    if (i) text += ",\n";
    text += R"({"type": "Microsoft.MachineLearningServices/workspaces/computes",
      "apiVersion": "2024-10-01", "name": "[format('ws/cluster-{0}', copyIndex())]",
      "location": "[resourceGroup().location]", "tags": {"env": "prod", "owner": "ml-team"},
      "properties": {"computeType": "AmlCompute", "disableLocalAuth": true,
        "properties": {"vmSize": "Standard_ND96isr_H100_v5", "vmPriority": "Dedicated",
          "scaleSettings": {"minNodeCount": 0, "maxNodeCount": 4,
                            "nodeIdleTimeBeforeScaleDown": "PT5M"},
          "subnet": {"id": "[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet', 'ml')]"},
          "enableNodePublicIp": false, "remoteLoginPortPublicAccess": "Disabled",
          "description": ")";
    text += std::string(1500, 'd');
    text +=
        R"("}}, "dependsOn": ["[resourceId('Microsoft.MachineLearningServices/workspaces', 'ws')]"]})";
  }
  text += "\n]}\n";
  ASSERT_GT(text.size(), 9u << 20);
  auto t0 = std::chrono::steady_clock::now();
  Result<SourceDoc> r = ParseSource(text, "big.json");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->value["resources"].size(), 5000u);
  EXPECT_EQ(r->lines.at("/resources/4999"), 4999 * 10 + 2);
  RecordProperty("parse_seconds", std::to_string(s));
  std::printf("parsed %zu bytes in %.3f s\n", text.size(), s);
  // Timing is measured by bench/assess.sh, not asserted here (a shared CI machine).
}

}  // namespace
}  // namespace gantry::assess
