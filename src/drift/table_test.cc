#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;

Schema MakeSchema(std::string_view yaml) {
  auto s = Schema::LoadString(yaml, "schema");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

const char* kXY = "columns:\n  x: numerical\n  c: categorical\n";

std::string Cat(const Column& c, size_t row) {
  return c.codes[row] < 0 ? "<null>" : c.dictionary[c.codes[row]];
}

TEST(CsvTest, QuotesEmbeddedCommasNewlinesCrlfBom) {
  Schema s = MakeSchema(kXY);
  std::string text =
      "\xEF\xBB\xBFx,c\r\n"
      "1.5,plain\r\n"
      "2,\"with, comma\"\r\n"
      "3,\"two\nlines\"\r\n"
      "4,\"say \"\"hi\"\"\"\r\n"
      ",NA\r\n"
      "abc,\"\"\r\n";
  auto t = ReadTableString(text, "csv", s, "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->rows, 6u);
  const Column& x = t->columns[0];
  const Column& c = t->columns[1];
  EXPECT_EQ(x.numbers[0], 1.5);
  EXPECT_EQ(x.numbers[3], 4);
  EXPECT_TRUE(std::isnan(x.numbers[4]));
  EXPECT_TRUE(std::isnan(x.numbers[5]));
  EXPECT_EQ(x.nulls, 2u);
  EXPECT_EQ(x.type_errors, 1u);  // "abc"
  EXPECT_EQ(Cat(c, 0), "plain");
  EXPECT_EQ(Cat(c, 1), "with, comma");
  EXPECT_EQ(Cat(c, 2), "two\nlines");
  EXPECT_EQ(Cat(c, 3), "say \"hi\"");
  EXPECT_EQ(Cat(c, 4), "<null>");
  EXPECT_EQ(Cat(c, 5), "<null>");
  EXPECT_EQ(c.nulls, 2u);
}

// Found by fuzz_drift_readers: many quoted fields in one record used to leave
// earlier fields pointing into moved strings.
TEST(CsvTest, ManyQuotedFieldsInOneRecord) {
  Schema s = MakeSchema(
      "columns:\n  a: categorical\n  b: categorical\n  c: categorical\n  d: categorical\n"
      "  e: categorical\n");
  auto t = ReadTableString("\"a\",\"b\",\"c\",\"d\",\"e\"\n\"v1\",\"v2\",\"v3\",\"v4\",\"v5\"\n",
                           "csv", s, "q.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Cat(t->columns[i], 0), "v" + std::to_string(i + 1));
  }
}

TEST(CsvTest, RaggedRowNamesTheLineCountingEmbeddedNewlines) {
  Schema s = MakeSchema(kXY);
  auto t = ReadTableString("x,c\n1,\"a\nb\"\n2,b,extra\n", "csv", s, "r.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("r.csv:4"));
  EXPECT_THAT(t.status().message(), HasSubstr("3 fields, the header has 2"));
  auto short_row = ReadTableString("x,c\n1\n", "csv", s, "r.csv");
  ASSERT_FALSE(short_row.ok());
  EXPECT_THAT(short_row.status().message(), HasSubstr("r.csv:2"));
}

TEST(CsvTest, UnclosedQuoteAndStrayCharacters) {
  Schema s = MakeSchema(kXY);
  auto t = ReadTableString("x,c\n1,a\n2,\"open\n", "csv", s, "q.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("q.csv:3"));
  EXPECT_THAT(t.status().message(), HasSubstr("never closed"));
  auto u = ReadTableString("x,c\n1,\"a\"b\n", "csv", s, "q.csv");
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.status().message(), HasSubstr("after a closing quote"));
}

TEST(CsvTest, EmptyFileHeaderOnlyAndBlankLines) {
  Schema s = MakeSchema(kXY);
  auto e = ReadTableString("", "csv", s, "e.csv");
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("e.csv: empty file"));
  auto h = ReadTableString("x,c\n", "csv", s, "h.csv");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->rows, 0u);
  auto b = ReadTableString("x,c\n\n1,a\n\n2,b\n", "csv", s, "b.csv");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->rows, 2u);
}

// Live inputs come without labels: a target column may be missing (and is
// then not in the table); every other column must be there.
TEST(CsvTest, AWindowWithoutItsTargetColumnReadsWithoutIt) {
  Schema s = MakeSchema(
      "columns:\n  x: numerical\n  y: {type: categorical, role: target}\n"
      "  p: {type: categorical, role: prediction}\n");
  auto t = ReadTableString("x,p\n1,a\n2,b\n", "csv", s, "live.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->rows, 2u);
  EXPECT_EQ(t->Find("y"), nullptr);
  ASSERT_NE(t->Find("x"), nullptr);
  auto no_pred = ReadTableString("x,y\n1,a\n", "csv", s, "live.csv");
  ASSERT_FALSE(no_pred.ok());
  EXPECT_THAT(no_pred.status().message(), HasSubstr("no column 'p'"));
}

TEST(CsvTest, HeaderMismatches) {
  Schema s = MakeSchema(kXY);
  auto extra = ReadTableString("x,c,cc\n1,a,b\n", "csv", s, "h.csv");
  ASSERT_FALSE(extra.ok());
  EXPECT_THAT(extra.status().message(), HasSubstr("column 'cc' is not in the schema"));
  EXPECT_THAT(extra.status().message(), HasSubstr("did you mean 'c'"));
  auto missing = ReadTableString("x\n1\n", "csv", s, "h.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no column 'c'"));
  auto dup = ReadTableString("x,c,x\n1,a,2\n", "csv", s, "h.csv");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("appears twice"));
  Schema ign = MakeSchema(
      "columns:\n  x: numerical\n  c: {type: categorical, role: ignore}\n"
      "extra_columns: ignore\n");
  auto ok = ReadTableString("z,c,x\nq,a,7\n", "csv", ign, "h.csv");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->columns.size(), 1u);  // the ignored column is left out
  EXPECT_EQ(ok->columns[0].numbers[0], 7);
}

TEST(CsvTest, ParallelReadEqualsExpectedValues) {
  Schema s = MakeSchema(kXY);
  std::string text = "x,c\n";
  const int n = 100000;  // several blocks
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 7)
      text += ",\"multi\nline " + std::to_string(i % 3) + "\"\n";
    else
      text += std::to_string(i) + ",cat" + std::to_string((i * 7) % 13) + "\n";
  }
  auto t = ReadTableString(text, "csv", s, "big.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->rows, static_cast<uint64_t>(n));
  const Column& x = t->columns[0];
  const Column& c = t->columns[1];
  for (int i = 0; i < n; ++i) {
    if (i % 1000 == 7) {
      ASSERT_TRUE(std::isnan(x.numbers[i])) << i;
      ASSERT_EQ(Cat(c, i), "multi\nline " + std::to_string(i % 3)) << i;
    } else {
      ASSERT_EQ(x.numbers[i], i);
      ASSERT_EQ(Cat(c, i), "cat" + std::to_string((i * 7) % 13)) << i;
    }
  }
  // Dictionary order is first appearance, as a serial read.
  EXPECT_EQ(c.dictionary[0], "cat0");
  EXPECT_EQ(c.dictionary[1], "cat7");
  // A ragged row deep in the file names its line.
  std::string bad = text + "1,a,b\n";
  auto b = ReadTableString(bad, "csv", s, "big.csv");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr(fmt::format("big.csv:{}:", 1 + n + n / 1000 + 1)));
}

TEST(JsonlTest, MissingKeysAreNullsAndWrongTypesAreTypeErrors) {
  Schema s = MakeSchema(kXY);
  std::string text =
      "{\"x\": 1.5, \"c\": \"a\"}\n"
      "{\"c\": \"b\"}\n"
      "\n"
      "{\"x\": \"2.5\", \"c\": 3}\r\n"
      "{\"x\": true, \"c\": null}\n"
      "{\"x\": [1], \"c\": {\"k\": 1}}\n";
  auto t = ReadTableString(text, "jsonl", s, "t.jsonl");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->rows, 5u);
  const Column& x = t->columns[0];
  const Column& c = t->columns[1];
  EXPECT_EQ(x.numbers[0], 1.5);
  EXPECT_TRUE(std::isnan(x.numbers[1]));
  EXPECT_EQ(x.numbers[2], 2.5);
  EXPECT_TRUE(std::isnan(x.numbers[3]));
  EXPECT_EQ(x.nulls, 3u);
  EXPECT_EQ(x.type_errors, 2u);
  EXPECT_EQ(Cat(c, 2), "3");
  EXPECT_EQ(Cat(c, 3), "<null>");
  EXPECT_EQ(c.type_errors, 1u);
}

TEST(JsonlTest, ErrorsNameTheLine) {
  Schema s = MakeSchema(kXY);
  auto t = ReadTableString("{\"x\": 1}\n[1,2]\n", "jsonl", s, "e.jsonl");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("e.jsonl:2: not a JSON object"));
  auto k = ReadTableString("{\"x\": 1}\n\n{\"xx\": 1}\n", "jsonl", s, "e.jsonl");
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("e.jsonl:3: key 'xx' is not in the schema"));
  EXPECT_THAT(k.status().message(), HasSubstr("did you mean 'x'"));
}

TEST(ReadTableTest, FormatsFromExtensionAndParquetIsExplained) {
  Schema s = MakeSchema(kXY);
  auto dir =
      std::filesystem::temp_directory_path() / ("gantry_drift_table_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.csv") << "x,c\n1,a\n";
  std::ofstream(dir / "a.ndjson") << "{\"x\": 1, \"c\": \"a\"}\n";
  auto a = ReadTable((dir / "a.csv").string(), s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->rows, 1u);
  auto b = ReadTable((dir / "a.ndjson").string(), s);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  auto p = ReadTable((dir / "a.parquet").string(), s);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(p.status().message(), HasSubstr("Debian"));
  auto u = ReadTable((dir / "a.txt").string(), s);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.status().message(), HasSubstr("cannot tell the format"));
  auto m = ReadTable((dir / "missing.csv").string(), s);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gantry::drift
