#include "textfile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace gantry::agent {
namespace {

using ::testing::HasSubstr;

TEST(PrometheusTextTest, ParsesHelpTypeLabelsEscapesAndSpecialValues) {
  std::vector<TextFamily> out;
  Status s = ParsePrometheusText(
      "# A comment\n"
      "# HELP backup_bytes Bytes written by\\nthe backup \\\\ job.\n"
      "# TYPE backup_bytes counter\n"
      "backup_bytes{path=\"/a \\\"b\\\"\",host=\"x\"} 1024\n"
      "backup_bytes{host=\"y\",path=\"c\\\\d\\ne\",} +Inf\n"
      "\n"
      "  temp_celsius -12.5e0\n"
      "nan_value NaN\n"
      "neg_inf -Inf\n",
      "a.prom", &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.size(), 4u);
  const TextFamily& b = out[0];
  EXPECT_EQ(b.name, "backup_bytes");
  EXPECT_EQ(b.help, "Bytes written by\nthe backup \\ job.");
  EXPECT_EQ(b.type, MetricType::kCounter);
  ASSERT_EQ(b.samples.size(), 2u);
  // Labels sorted by name.
  ASSERT_EQ(b.samples[0].labels.size(), 2u);
  EXPECT_EQ(b.samples[0].labels[0].first, "host");
  EXPECT_EQ(b.samples[0].labels[1].second, "/a \"b\"");
  EXPECT_EQ(b.samples[1].labels[1].second, "c\\d\ne");
  EXPECT_TRUE(std::isinf(b.samples[1].value));
  EXPECT_EQ(out[1].name, "temp_celsius");
  EXPECT_EQ(out[1].type, MetricType::kUntyped);
  EXPECT_EQ(out[1].samples[0].value, -12.5);
  EXPECT_TRUE(std::isnan(out[2].samples[0].value));
  EXPECT_TRUE(std::isinf(out[3].samples[0].value) && out[3].samples[0].value < 0);
}

TEST(PrometheusTextTest, HistogramSamplesBecomeUntypedFamiliesWithTheHelp) {
  std::vector<TextFamily> out;
  Status s = ParsePrometheusText(
      "# HELP req_seconds Request latency.\n"
      "# TYPE req_seconds histogram\n"
      "req_seconds_bucket{le=\"0.1\"} 3\n"
      "req_seconds_bucket{le=\"+Inf\"} 5\n"
      "req_seconds_sum 1.5\n"
      "req_seconds_count 5\n",
      "h.prom", &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].name, "req_seconds_bucket");
  EXPECT_EQ(out[0].samples.size(), 2u);
  EXPECT_EQ(out[0].help, "Request latency.");
  EXPECT_EQ(out[0].type, MetricType::kUntyped);
  EXPECT_EQ(out[2].name, "req_seconds_count");
}

TEST(PrometheusTextTest, MergesFilesAndRejectsConflicts) {
  std::vector<TextFamily> out;
  ASSERT_TRUE(ParsePrometheusText("# TYPE x gauge\nx{a=\"1\"} 1\n", "a.prom", &out).ok());
  ASSERT_TRUE(ParsePrometheusText("# TYPE x gauge\nx{a=\"2\"} 2\n", "b.prom", &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].samples.size(), 2u);

  Status type = ParsePrometheusText("# TYPE x counter\nx{a=\"3\"} 3\n", "c.prom", &out);
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.message(), HasSubstr("c.prom"));
  EXPECT_THAT(type.message(), HasSubstr("different TYPE"));
  Status dup = ParsePrometheusText("# TYPE x gauge\nx{a=\"1\"} 9\ny 1\n", "d.prom", &out);
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.message(), HasSubstr("repeats a series"));
  // All or nothing: the rejected files added nothing.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].samples.size(), 2u);
}

TEST(PrometheusTextTest, BadInputIsAnErrorNamingFileAndLine) {
  struct Case {
    const char* text;
    const char* want;
  };
  const Case cases[] = {
      {"bad line {{{\n", "expected a number"},
      {"x\n", "expected a space and a value"},
      {"x 1 1700000000000\n", "timestamps are not supported"},
      {"x{a=\"1\" 1\n", "expected ',' or '}'"},
      {"x{a=1} 1\n", "expected '\"'"},
      {"x{a=\"1} 1\n", "unterminated value"},
      {"x{a=\"\\q\"} 1\n", "invalid escape"},
      {"x{a=\"1\",a=\"2\"} 1\n", "given twice"},
      {"x{=\"1\"} 1\n", "expected a label name"},
      {"x{a} 1\n", "expected '='"},
      {"x 1\nx 2\n", "seen twice"},
      {"# TYPE x gauges\nx 1\n", "unknown metric type"},
      {"# TYPE x gauge\n# TYPE x gauge\n", "second TYPE"},
      {"x 1\n# TYPE x gauge\n", "after its samples"},
      {"# HELP\n", "HELP without a metric name"},
      {"# TYPE 1x gauge\n", "TYPE without a metric name"},
      {"{} 1\n", "expected a metric name"},
      {"x 0x10\n", "expected a number"},
      {"x --1\n", "expected a number"},
      {"x \"1\"\n", "expected a number"},
  };
  for (const Case& c : cases) {
    std::vector<TextFamily> out;
    Status s = ParsePrometheusText(c.text, "/tf/bad.prom", &out);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_THAT(s.message(), HasSubstr(c.want)) << c.text;
    EXPECT_THAT(s.message(), HasSubstr("/tf/bad.prom:")) << c.text;
    EXPECT_TRUE(out.empty()) << c.text;
  }
  std::vector<TextFamily> out;
  Status s = ParsePrometheusText("ok 1\nok2 2\nbroken\n", "f.prom", &out);
  EXPECT_THAT(s.message(), HasSubstr("f.prom:3:"));
}

TEST(PrometheusTextTest, ArbitraryBytesNeverCrash) {
  // A fixed pseudo-random sequence over the format's significant characters.
  const char alphabet[] = "ab_:{}=\",\\# \n\t01.eE+-InfNaHELPTYPE\x00\xff";
  uint32_t x = 12345;
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    int len = static_cast<int>(x % 64);
    for (int i = 0; i < len; ++i) {
      x = x * 1103515245u + 12345u;
      text.push_back(alphabet[(x >> 16) % (sizeof alphabet - 1)]);
    }
    std::vector<TextFamily> out;
    Status s = ParsePrometheusText(text, "r.prom", &out);
    if (!s.ok()) EXPECT_TRUE(out.empty());
  }
}

}  // namespace
}  // namespace gantry::agent
