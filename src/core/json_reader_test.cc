#include "gantry/core/json_reader.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

constexpr char kOrigin[] = "POST /api/x body";

JsonReader Doc(std::string_view text) {
  auto r = JsonReader::Parse(text, kOrigin);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(JsonReader, RequiredAndOptionalScalars) {
  JsonReader r = Doc(R"({"name":"bert","n":-3,"u":7,"d":1.5,"b":true,"nil":null})");
  EXPECT_EQ(*r.GetString("name"), "bert");
  EXPECT_EQ(*r.GetInt("n"), -3);
  EXPECT_EQ(*r.GetUint("u"), 7u);
  EXPECT_EQ(*r.GetInt("u"), 7);
  EXPECT_DOUBLE_EQ(*r.GetDouble("d"), 1.5);
  EXPECT_DOUBLE_EQ(*r.GetDouble("u"), 7.0);
  EXPECT_TRUE(*r.GetBool("b"));
  // Absent and null are both missing: the fallback, or an error when required.
  EXPECT_EQ(*r.GetString("absent", "dflt"), "dflt");
  EXPECT_EQ(*r.GetString("nil", "dflt"), "dflt");
  EXPECT_EQ(*r.GetInt("absent", 42), 42);
  EXPECT_EQ(*r.GetUint("absent", 9), 9u);
  EXPECT_DOUBLE_EQ(*r.GetDouble("absent", 0.5), 0.5);
  EXPECT_FALSE(*r.GetBool("absent", false));
  EXPECT_TRUE(r.Has("name"));
  EXPECT_FALSE(r.Has("nil"));
  EXPECT_FALSE(r.Has("absent"));
  auto missing = r.GetString("nil");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.status().message(),
            "POST /api/x body: missing field 'nil' (expected a string)");
}

TEST(JsonReader, WrongTypesNameThePathAndTheValue) {
  JsonReader r = Doc(R"({"s":5,"i":"two","f":2.5,"neg":-1,"big":18446744073709551615,"b":"yes"})");
  EXPECT_EQ(r.GetString("s").status().message(),
            "POST /api/x body: field 's': expected a string, got 5");
  EXPECT_EQ(r.GetInt("i").status().message(),
            "POST /api/x body: field 'i': expected an integer, got 'two'");
  // Fractions are not integers; optional getters check the type too.
  EXPECT_EQ(r.GetInt("f", 0).status().message(),
            "POST /api/x body: field 'f': expected an integer, got 2.5");
  EXPECT_EQ(r.GetUint("neg").status().message(),
            "POST /api/x body: field 'neg': expected a non-negative integer, got -1");
  EXPECT_FALSE(r.GetInt("big").ok());  // above int64
  EXPECT_EQ(*r.GetUint("big"), 18446744073709551615ull);
  EXPECT_EQ(r.GetBool("b", true).status().message(),
            "POST /api/x body: field 'b': expected true or false, got 'yes'");
  EXPECT_EQ(r.GetDouble("i").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.GetDouble("neg").ok());
}

TEST(JsonReader, NestedObjectsAndArraysCarryTheirPath) {
  JsonReader r = Doc(R"({"tags":[{"key":"a"},{"key":"b"},{"key":5}],
                         "lineage":{"metrics":{"loss":"x"},"digests":["d1",2]},
                         "labels":{"team":"ml","n":1}})");
  auto tags = r.GetArray("tags");
  ASSERT_TRUE(tags.ok());
  ASSERT_EQ(tags->size(), 3u);
  EXPECT_EQ((*tags)[1].path(), "tags[1]");
  EXPECT_EQ(*(*tags)[0].GetString("key"), "a");
  EXPECT_EQ((*tags)[2].GetString("key").status().message(),
            "POST /api/x body: field 'tags[2].key': expected a string, got 5");
  auto lineage = r.GetObject("lineage");
  ASSERT_TRUE(lineage.ok());
  auto metrics = lineage->GetObject("metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->GetDouble("loss").status().message(),
            "POST /api/x body: field 'lineage.metrics.loss': expected a number, got 'x'");
  EXPECT_EQ(lineage->GetStringArray("digests").status().message(),
            "POST /api/x body: field 'lineage.digests[1]': expected a string, got 2");
  EXPECT_EQ(r.GetStringMap("labels").status().message(),
            "POST /api/x body: field 'labels.n': expected a string, got 1");
  // A getter on an element that is not an object names the element.
  auto digests = lineage->GetArray("digests");
  ASSERT_TRUE(digests.ok());
  EXPECT_EQ((*digests)[0].GetString("x").status().message(),
            "POST /api/x body: field 'lineage.digests[0]': expected an object, got 'd1'");
  // Containers of the wrong kind.
  EXPECT_EQ(r.GetObject("tags").status().message(),
            "POST /api/x body: field 'tags': expected an object, got an array");
  EXPECT_EQ(r.GetArray("lineage").status().message(),
            "POST /api/x body: field 'lineage': expected an array, got an object");
  EXPECT_EQ(r.GetArray("absent").status().message(),
            "POST /api/x body: missing field 'absent' (expected an array)");
}

TEST(JsonReader, OptionalContainersAreEmptyWhenMissing) {
  JsonReader r = Doc(R"({"m":null,"labels":{"a":"1"},"list":["x","y"]})");
  auto o = r.GetOptionalObject("absent");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->value().empty());
  EXPECT_EQ(*o->GetString("k", "dflt"), "dflt");
  EXPECT_EQ(o->path(), "absent");
  EXPECT_TRUE(r.GetOptionalObject("m")->value().empty());
  EXPECT_TRUE(r.GetOptionalArray("m")->empty());
  EXPECT_TRUE(r.GetStringArray("absent")->empty());
  EXPECT_TRUE(r.GetStringMap("absent")->empty());
  EXPECT_EQ(*r.GetStringArray("list"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r.GetStringMap("labels")->at("a"), "1");
  EXPECT_FALSE(r.GetOptionalArray("labels").ok());
}

TEST(JsonReader, DocumentThatIsNotAnObject) {
  JsonReader r = Doc("[1,2]");
  EXPECT_EQ(r.ExpectObject().message(),
            "POST /api/x body: the document: expected an object, got an array");
  EXPECT_EQ(r.GetString("x", "").status().message(),
            "POST /api/x body: the document: expected an object, got an array");
  EXPECT_FALSE(r.Has("x"));
  EXPECT_TRUE(Doc("{}").ExpectObject().ok());
}

TEST(JsonReader, SyntaxErrorsAndTheErrorCode) {
  auto bad = JsonReader::Parse("{not json", kOrigin);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("POST /api/x body:1:3: invalid JSON"), std::string::npos)
      << bad.status().message();
  // A client reading a server's answer reports DataLoss, everywhere.
  auto answer = JsonReader::Parse("{oops", "http://h/x: answer", StatusCode::kDataLoss);
  EXPECT_EQ(answer.status().code(), StatusCode::kDataLoss);
  auto r = JsonReader::Parse(R"({"v":"1"})", "http://h/x: answer", StatusCode::kDataLoss);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->GetInt("v").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(r->GetObject("o").status().code(), StatusCode::kDataLoss);
}

TEST(JsonReader, ErrorAndFindForCustomChecks) {
  Json j = {{"version", "x1"}, {"long", std::string(100, 'z')}};
  JsonReader r(j, "request");  // borrows j
  ASSERT_NE(r.Find("version"), nullptr);
  EXPECT_EQ(r.Find("absent"), nullptr);
  EXPECT_EQ(r.Error("version", "a version number >= 1").message(),
            "request: field 'version': expected a version number >= 1, got 'x1'");
  EXPECT_EQ(r.Error("absent", "a version number").message(),
            "request: missing field 'absent' (expected a version number)");
  // Long strings are cut in messages.
  std::string msg = r.GetInt("long").status().message();
  EXPECT_NE(msg.find("'" + std::string(40, 'z') + "...'"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(std::string(41, 'z')), std::string::npos) << msg;
  // Readers from a parsed document outlive the one they came from.
  JsonReader inner = [] {
    JsonReader doc = *JsonReader::Parse(R"({"a":{"b":"c"}})", "doc");
    return *doc.GetObject("a");
  }();
  EXPECT_EQ(*inner.GetString("b"), "c");
  EXPECT_EQ(inner.Path("b"), "a.b");
}

}  // namespace
}  // namespace gantry
