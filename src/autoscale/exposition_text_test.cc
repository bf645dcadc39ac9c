#include "exposition_text.h"

#include <gtest/gtest.h>

namespace gantry::autoscale {
namespace {

TEST(ExpositionText, ReadsNamesLabelsAndValues) {
  auto r = ParseExpositionText(
      "# HELP gantry_gateway_pool_in_flight Requests in flight\n"
      "# TYPE gantry_gateway_pool_in_flight gauge\n"
      "gantry_gateway_pool_in_flight{pool=\"llm\"} 3\n"
      "gantry_gateway_pool_in_flight{pool=\"a \\\"b\\\"\\\\c\\nd\",zone=\"1\"} 2.5e1 "
      "1700000000000\n"
      "\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\",} 12345.5\n"
      "up 1\n"
      "weird NaN\n"
      "inf_value +Inf\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].name, "gantry_gateway_pool_in_flight");
  EXPECT_EQ((*r)[0].Label("pool"), "llm");
  EXPECT_EQ((*r)[0].value, 3);
  EXPECT_EQ((*r)[1].Label("pool"), "a \"b\"\\c\nd");
  EXPECT_EQ((*r)[1].Label("zone"), "1");
  EXPECT_EQ((*r)[1].value, 25);
  EXPECT_EQ((*r)[2].Label("mode"), "idle");
  EXPECT_EQ((*r)[2].Label("absent"), "");
  EXPECT_EQ((*r)[3].name, "up");
}

TEST(ExpositionText, MalformedLinesAreErrorsWithTheLineNumber) {
  for (const char* text : {"ok 1\n{pool=\"x\"} 1\n", "ok 1\nm{pool=x} 1\n", "ok 1\nm{pool=\"x} 1\n",
                           "ok 1\nm{pool=\"x\"}\n", "ok 1\nm{=\"x\"} 1\n", "ok 1\nm one\n"}) {
    auto r = ParseExpositionText(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace gantry::autoscale
