#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;

Schema MakeSchema(std::string_view yaml) {
  auto s = Schema::LoadString(yaml, "schema");
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

Table Read(const std::string& csv, const Schema& s) {
  auto t = ReadTableString(csv, "csv", s, "t.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

Profile Build(const Table& t) {
  auto p = Profile::Build(t, ProfileOptions{});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

const ColumnDrift& Col(const DriftReport& r, std::string_view name) {
  for (const auto& c : r.columns) {
    if (c.column == name) return c;
  }
  ADD_FAILURE() << "no column " << name;
  static ColumnDrift none;
  return none;
}

// Four features: x (continuous), k (5 distinct values), c (3 categories),
// b (binary). `shift` moves every distribution.
std::string Data(int n, uint64_t seed, double shift, bool shift_all = true) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> norm(shift, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::string csv = "x,k,c,b\n";
  for (int i = 0; i < n; ++i) {
    double x = norm(rng);
    double s2 = shift_all ? shift : 0;
    int k = std::min(4, static_cast<int>(u(rng) * (5 - 2 * std::min(s2, 1.0))));
    double r = u(rng);
    const char* c = r < 0.5 - 0.3 * std::min(s2, 1.0) ? "red" : r < 0.8 ? "green" : "blue";
    const char* b = u(rng) < 0.5 + 0.3 * std::min(s2, 1.0) ? "t" : "f";
    csv += fmt::format("{},{},{},{}\n", x, k, c, b);
  }
  return csv;
}

constexpr const char* kSchema =
    "columns:\n  x: numerical\n  k: numerical\n  c: categorical\n  b: categorical\n";

TEST(CompareTest, SmallReferenceUsesKsChiSquaredAndZ) {
  Schema s = MakeSchema(kSchema);
  Profile p = Build(Read(Data(800, 1, 0), s));
  auto r = Compare(p, Read(Data(500, 2, 0), s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Col(*r, "x").test, StatTest::kKs);
  EXPECT_EQ(Col(*r, "k").test, StatTest::kChiSquared);  // 5 distinct values
  EXPECT_EQ(Col(*r, "c").test, StatTest::kChiSquared);
  EXPECT_EQ(Col(*r, "b").test, StatTest::kZTest);
  for (const auto& c : r->columns) {
    EXPECT_GE(c.p_value, 0) << c.column;
    EXPECT_EQ(c.threshold, 0.05) << c.column;
  }
  EXPECT_FALSE(r->dataset_drift);
}

TEST(CompareTest, LargeReferenceUsesWassersteinAndJensenShannon) {
  Schema s = MakeSchema(kSchema);
  Profile p = Build(Read(Data(3000, 1, 0), s));
  auto r = Compare(p, Read(Data(3000, 2, 0), s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Col(*r, "x").test, StatTest::kWasserstein);
  EXPECT_EQ(Col(*r, "k").test, StatTest::kJensenShannon);
  EXPECT_EQ(Col(*r, "c").test, StatTest::kJensenShannon);
  EXPECT_EQ(Col(*r, "b").test, StatTest::kJensenShannon);
  for (const auto& c : r->columns) {
    EXPECT_EQ(c.p_value, -1) << c.column;
    EXPECT_EQ(c.threshold, 0.1) << c.column;
    EXPECT_FALSE(c.drifted) << c.column << " " << c.statistic;
  }
  EXPECT_FALSE(r->dataset_drift);
  EXPECT_EQ(r->drifted_share, 0);
  EXPECT_EQ(r->reference_rows, 3000u);
  EXPECT_EQ(r->current_rows, 3000u);
}

TEST(CompareTest, KnownDriftIsFound) {
  Schema s = MakeSchema(kSchema);
  for (int n : {600, 3000}) {
    Profile p = Build(Read(Data(n, 1, 0), s));
    auto r = Compare(p, Read(Data(n, 2, 1.0), s), CompareOptions{});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& c : r->columns) EXPECT_TRUE(c.drifted) << n << " " << c.column;
    EXPECT_TRUE(r->dataset_drift);
    EXPECT_EQ(r->drifted_share, 1.0);
  }
}

TEST(CompareTest, DatasetDriftRuleIsShareAtLeastDriftShare) {
  // Only x drifts (shift_all = false): 1 of 4 columns.
  for (auto [share, want] : {std::pair{0.5, false}, {0.25, true}, {0.3, false}}) {
    Schema s = MakeSchema(std::string(kSchema) + fmt::format("drift_share: {}\n", share));
    Profile p = Build(Read(Data(3000, 1, 0), s));
    auto r = Compare(p, Read(Data(3000, 2, 2.0, /*shift_all=*/false), s), CompareOptions{});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(Col(*r, "x").drifted);
    EXPECT_DOUBLE_EQ(r->drifted_share, 0.25);
    EXPECT_EQ(r->dataset_drift, want) << share;
  }
}

TEST(CompareTest, OverridesFromTheSchema) {
  Schema s = MakeSchema(
      "columns:\n  x: {type: numerical, test: psi, threshold: 0.25, binning: quantiles, bins: 5}\n"
      "  c: {type: categorical, test: linf, threshold: 0.5}\n");
  std::string ref = "x,c\n", cur = "x,c\n";
  for (int i = 0; i < 100; ++i) ref += fmt::format("{},{}\n", i, i % 2 ? "a" : "b");
  for (int i = 0; i < 100; ++i) cur += fmt::format("{},{}\n", i + 50, "a");
  auto r = Compare(Build(Read(ref, s)), Read(cur, s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& x = Col(*r, "x");
  EXPECT_EQ(x.test, StatTest::kPsi);
  EXPECT_EQ(x.threshold, 0.25);
  EXPECT_TRUE(x.drifted);
  EXPECT_EQ(x.edges.size(), 6u);  // 5 quantile bins honoured
  const auto& c = Col(*r, "c");
  EXPECT_EQ(c.test, StatTest::kLInfinity);
  EXPECT_NEAR(c.statistic, 0.5, 1e-12);
  EXPECT_TRUE(c.drifted);  // distance >= threshold
}

TEST(CompareTest, DataQuality) {
  Schema s = MakeSchema("columns:\n  x: numerical\n  c: categorical\n");
  std::string ref = "x,c\n", cur = "x,c\n";
  for (int i = 0; i < 100; ++i) ref += fmt::format("{},{}\n", i % 10, "abc"[i % 3]);
  // current: 10 nulls (5 of them type errors), 20 out of range numbers, 25 unseen categories
  for (int i = 0; i < 100; ++i) {
    std::string x = i < 5 ? "" : i < 10 ? "oops" : i < 30 ? "100" : std::to_string(i % 10);
    std::string c = i < 25 ? "zzz" : std::string(1, "abc"[i % 3]);
    cur += x + "," + c + "\n";
  }
  auto r = Compare(Build(Read(ref, s)), Read(cur, s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& x = Col(*r, "x");
  EXPECT_DOUBLE_EQ(x.null_rate, 0.10);
  EXPECT_DOUBLE_EQ(x.type_error_rate, 0.05);
  EXPECT_DOUBLE_EQ(x.out_of_range_rate, 0.20);
  const auto& c = Col(*r, "c");
  EXPECT_DOUBLE_EQ(c.null_rate, 0);
  EXPECT_DOUBLE_EQ(c.out_of_range_rate, 0.25);
  EXPECT_THAT(c.categories, ::testing::Contains("zzz"));
  EXPECT_EQ(c.categories.size(), c.reference_shares.size());
}

TEST(CompareTest, AllNullCurrentColumnIsNotTestedNotAnError) {
  Schema s = MakeSchema("columns:\n  x: numerical\n  c: categorical\n");
  auto r =
      Compare(Build(Read("x,c\n1,a\n2,b\n3,a\n", s)), Read("x,c\n,\n,\n", s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& c : r->columns) {
    EXPECT_FALSE(c.drifted);
    EXPECT_THAT(c.note, HasSubstr("no non-null values"));
    EXPECT_DOUBLE_EQ(c.null_rate, 1.0);
  }
}

TEST(CompareTest, MissingColumnsAreNamed) {
  Schema s = MakeSchema(kSchema);
  Profile p = Build(Read(Data(50, 1, 0), s));
  Schema small = MakeSchema("columns:\n  x: numerical\n  c: categorical\n");
  auto r = Compare(p, Read("x,c\n1,a\n", small), CompareOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'k', 'b'"));
}

TEST(CompareTest, ThreadCountDoesNotChangeResults) {
  Schema s = MakeSchema(kSchema);
  Profile p = Build(Read(Data(2000, 1, 0), s));
  Table cur = Read(Data(1500, 3, 0.3), s);
  auto a = Compare(p, cur, CompareOptions{.threads = 1});
  auto b = Compare(p, cur, CompareOptions{.threads = 4});
  ASSERT_TRUE(a.ok() && b.ok());
  Json ja = a->ToJson(), jb = b->ToJson();
  ja.erase("seconds");
  jb.erase("seconds");
  EXPECT_EQ(ja, jb);
}

TEST(CompareTest, ClassificationQualityAndPredictionDrift) {
  Schema s = MakeSchema(
      "columns:\n  x: numerical\n  y: {type: categorical, role: target}\n"
      "  p: {type: categorical, role: prediction}\n  s: {type: numerical, role: score}\n");
  std::string ref = "x,y,p,s\n", cur = "x,y,p,s\n";
  for (int i = 0; i < 40; ++i) ref += fmt::format("{},{},{},{}\n", i, i % 2, i % 2, 0.5);
  // 8 rows: labels 1,1,1,1,0,0,0,0; predictions 1,1,1,0,0,0,0,1 -> accuracy 0.75
  const int y[] = {1, 1, 1, 1, 0, 0, 0, 0}, pr[] = {1, 1, 1, 0, 0, 0, 0, 1};
  const double sc[] = {0.9, 0.8, 0.7, 0.4, 0.3, 0.2, 0.1, 0.6};
  for (int i = 0; i < 8; ++i) cur += fmt::format("{},{},{},{}\n", i, y[i], pr[i], sc[i]);
  auto r = Compare(Build(Read(ref, s)), Read(cur, s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->classification.has_value());
  EXPECT_DOUBLE_EQ(r->classification->accuracy, 0.75);
  EXPECT_DOUBLE_EQ(r->classification->f1_macro, 0.75);
  EXPECT_NEAR(r->classification->roc_auc, 0.9375, 1e-12);  // 15 of 16 pairs ordered
  EXPECT_FALSE(r->regression.has_value());
  // The prediction column is compared (prediction drift) but does not count
  // towards dataset drift.
  EXPECT_EQ(r->columns.size(), 2u);
  EXPECT_EQ(Col(*r, "p").column, "p");
}

TEST(CompareTest, RegressionQuality) {
  Schema s = MakeSchema(
      "columns:\n  x: numerical\n  y: {type: numerical, role: target}\n"
      "  p: {type: numerical, role: prediction}\n");
  std::string ref = "x,y,p\n", cur = "x,y,p\n";
  for (int i = 0; i < 20; ++i) ref += fmt::format("{},{},{}\n", i, i, i);
  // errors: +1, -1, +2, -2, null row skipped
  cur += "0,1,2\n1,2,1\n2,3,5\n3,4,2\n4,,3\n";
  auto r = Compare(Build(Read(ref, s)), Read(cur, s), CompareOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->regression.has_value());
  EXPECT_DOUBLE_EQ(r->regression->mae, 1.5);
  EXPECT_DOUBLE_EQ(r->regression->mse, 2.5);
  EXPECT_DOUBLE_EQ(r->regression->rmse, std::sqrt(2.5));
}

}  // namespace
}  // namespace gantry::drift
