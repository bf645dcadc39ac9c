#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <vector>

#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

DriftReport Sample() {
  DriftReport r;
  r.reference_rows = 1000;
  r.current_rows = 500;
  r.drift_share = 0.5;
  ColumnDrift a;
  a.column = "age<script>alert(1)</script>";
  a.kind = ColumnKind::kNumerical;
  a.test = StatTest::kWasserstein;
  a.statistic = 0.31;
  a.threshold = 0.1;
  a.drifted = true;
  a.edges = {0, 1, 2, 3};
  a.reference_shares = {0.2, 0.5, 0.3};
  a.current_shares = {0.1, 0.3, 0.6};
  a.null_rate = 0.02;
  ColumnDrift b;
  b.column = "plan & \"tier\"";
  b.kind = ColumnKind::kCategorical;
  b.test = StatTest::kChiSquared;
  b.statistic = 1.5;
  b.p_value = 0.47;
  b.threshold = 0.05;
  b.categories = {"basic", "<pro>", "it's"};
  b.reference_shares = {0.5, 0.3, 0.2};
  b.current_shares = {0.45, 0.35, 0.2};
  b.out_of_range_rate = 0.01;
  ColumnDrift c;
  c.column = "empty";
  c.statistic = std::nan("");
  c.note = "the current window has no non-null values";
  r.columns = {a, b, c};
  r.drifted_share = 1.0 / 3;
  r.dataset_drift = false;
  ClassificationQuality q;
  q.accuracy = 0.9;
  q.f1_macro = 0.85;
  q.roc_auc = 0.93;
  r.classification = q;
  return r;
}

TEST(ReportTest, JsonHasStableKeys) {
  Json j = Sample().ToJson();
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"report", "version", "reference_rows", "current_rows",
                                            "dataset_drift", "drifted_share", "drift_share",
                                            "columns", "quality", "seconds"}));
  EXPECT_EQ(j["report"], "gantry.drift");
  const Json& a = j["columns"][0];
  EXPECT_EQ(a["test"], "wasserstein");
  EXPECT_TRUE(a["p_value"].is_null());
  EXPECT_EQ(a["histogram"]["edges"].size(), 4u);
  EXPECT_EQ(j["columns"][1]["test"], "chisquare");
  EXPECT_EQ(j["columns"][1]["p_value"], 0.47);
  EXPECT_EQ(j["columns"][1]["histogram"]["categories"][1], "<pro>");
  EXPECT_TRUE(j["columns"][2]["statistic"].is_null());  // NaN is null, valid JSON
  EXPECT_EQ(j["columns"][2]["note"], "the current window has no non-null values");
  EXPECT_EQ(j["quality"]["task"], "classification");
  EXPECT_EQ(j["quality"]["roc_auc"], 0.93);
  EXPECT_TRUE(ParseJson(j.dump(), "report").ok());
}

TEST(ReportTest, TableNamesColumnsAndVerdict) {
  std::string t = Sample().RenderTable();
  EXPECT_THAT(t, HasSubstr("column"));
  EXPECT_THAT(t, HasSubstr("p-value"));
  EXPECT_THAT(t, HasSubstr("wasserstein"));
  EXPECT_THAT(t, HasSubstr("YES"));
  EXPECT_THAT(t, HasSubstr("n/a"));
  EXPECT_THAT(t, HasSubstr("Dataset drift: no"));
  EXPECT_THAT(t, HasSubstr("accuracy 0.9000"));
}

// A tiny well-formedness check: every non-void element closes in order.
bool Balanced(const std::string& html, std::string* why) {
  static const std::vector<std::string> kVoid = {"meta", "br", "line",  "rect",
                                                 "img",  "hr", "input", "link"};
  std::vector<std::string> stack;
  std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)([^>]*)>)");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator();
       ++it) {
    std::string name = (*it)[2];
    bool closing = (*it)[1] == "/";
    std::string rest = (*it)[3];
    bool self_closing = !rest.empty() && rest.back() == '/';
    if (name == "DOCTYPE" || self_closing) continue;
    if (!closing && std::find(kVoid.begin(), kVoid.end(), name) != kVoid.end()) continue;
    if (!closing) {
      stack.push_back(name);
    } else {
      if (stack.empty() || stack.back() != name) {
        *why = "unexpected </" + name + "> (open: " + (stack.empty() ? "none" : stack.back()) + ")";
        return false;
      }
      stack.pop_back();
    }
  }
  if (!stack.empty()) *why = "unclosed <" + stack.back() + ">";
  return stack.empty();
}

TEST(ReportTest, HtmlIsSelfContainedBalancedAndEscaped) {
  std::string h = Sample().RenderHtml();
  std::string why;
  EXPECT_TRUE(Balanced(h, &why)) << why;
  EXPECT_THAT(h, Not(HasSubstr("<script")));
  EXPECT_THAT(h, HasSubstr("&lt;script&gt;"));
  EXPECT_THAT(h, HasSubstr("plan &amp; &quot;tier&quot;"));
  EXPECT_THAT(h, HasSubstr("&lt;pro&gt;"));
  EXPECT_THAT(h, HasSubstr("it&apos;s"));
  EXPECT_THAT(h, Not(HasSubstr("src=")));
  EXPECT_THAT(h, Not(HasSubstr("href=\"http")));
  EXPECT_THAT(h, Not(HasSubstr("@import")));
  size_t svgs = 0;
  for (size_t p = h.find("<svg"); p != std::string::npos; p = h.find("<svg", p + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u);  // one per column
  EXPECT_THAT(h, HasSubstr("<style>"));
  EXPECT_THAT(h, HasSubstr("Dataset drift: not detected"));
  EXPECT_THAT(h, HasSubstr("class=\"ref\""));
  EXPECT_THAT(h, HasSubstr("class=\"cur\""));
  EXPECT_THAT(h, HasSubstr("ROC-AUC"));
}

TEST(ReportTest, BalancedCheckCanFail) {
  std::string why;
  EXPECT_FALSE(Balanced("<html><body><div></body></html>", &why));
  EXPECT_FALSE(Balanced("<p>", &why));
  EXPECT_TRUE(Balanced("<p><svg><rect/></svg></p>", &why));
}

}  // namespace
}  // namespace gantry::drift
