#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "gantry/core/json.h"
#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

using ::testing::HasSubstr;

class ProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gantry_drift_profile_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }

  static Table MakeTable(int n) {
    auto s = Schema::LoadString(
        "columns:\n  x: numerical\n  c: {type: categorical, test: psi, threshold: 0.3}\n"
        "  y: {type: categorical, role: target}\ndrift_share: 0.4\n",
        "s");
    EXPECT_TRUE(s.ok());
    std::mt19937_64 rng(7);
    std::normal_distribution<double> norm(5, 2);
    std::string csv = "x,c,y\n";
    for (int i = 0; i < n; ++i) {
      csv += (i % 10 == 3 ? std::string("") : fmt::format("{}", norm(rng))) + "," + "abc"[i % 3] +
             "," + (i % 2 ? "yes" : "no") + "\n";
    }
    auto t = ReadTableString(csv, "csv", *s, "t.csv");
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return *t;
  }

  std::filesystem::path dir_;
};

TEST_F(ProfileTest, BuildComputesStats) {
  Table t = MakeTable(1000);
  auto p = Profile::Build(t, ProfileOptions{});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->rows(), 1000u);
  EXPECT_EQ(p->task(), "classification");
  EXPECT_DOUBLE_EQ(p->drift_share(), 0.4);
  ASSERT_EQ(p->columns().size(), 3u);
  const auto& x = p->columns()[0];
  EXPECT_EQ(x.nulls, 100u);
  ASSERT_EQ(x.numerical.sorted.size(), 900u);
  EXPECT_TRUE(std::is_sorted(x.numerical.sorted.begin(), x.numerical.sorted.end()));
  EXPECT_EQ(x.numerical.min, x.numerical.sorted.front());
  EXPECT_EQ(x.numerical.max, x.numerical.sorted.back());
  EXPECT_NEAR(x.numerical.mean, 5, 0.3);
  EXPECT_NEAR(x.numerical.std, 2, 0.3);
  EXPECT_EQ(x.n_unique, 900u);
  EXPECT_TRUE(x.numerical.exact);
  const auto& c = p->columns()[1];
  EXPECT_EQ(c.n_unique, 3u);
  EXPECT_EQ(c.categorical.dictionary, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(c.categorical.counts, (std::vector<uint64_t>{334, 333, 333}));
  EXPECT_EQ(c.spec.test, StatTest::kPsi);
}

TEST_F(ProfileTest, SketchAboveMaxExactRows) {
  Table t = MakeTable(5000);
  ProfileOptions o;
  o.max_exact_rows = 1000;
  o.sketch_points = 101;
  auto p = Profile::Build(t, o);
  ASSERT_TRUE(p.ok());
  const auto& x = p->columns()[0];
  EXPECT_FALSE(x.numerical.exact);
  ASSERT_EQ(x.numerical.sorted.size(), 101u);
  EXPECT_EQ(x.numerical.sorted.front(), x.numerical.min);
  EXPECT_EQ(x.numerical.sorted.back(), x.numerical.max);
  ASSERT_TRUE(p->Save(Path("s.profile")).ok());
  auto back = Profile::Load(Path("s.profile"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->columns()[0].numerical.exact);
  EXPECT_EQ(back->columns()[0].numerical.sorted, x.numerical.sorted);
}

TEST_F(ProfileTest, RoundTrip) {
  Table t = MakeTable(1000);
  auto p = Profile::Build(t, ProfileOptions{});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Save(Path("r.profile")).ok());
  auto q = Profile::Load(Path("r.profile"));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->rows(), p->rows());
  EXPECT_EQ(q->task(), p->task());
  EXPECT_EQ(q->drift_share(), p->drift_share());
  ASSERT_EQ(q->columns().size(), p->columns().size());
  for (size_t i = 0; i < p->columns().size(); ++i) {
    const auto& a = p->columns()[i];
    const auto& b = q->columns()[i];
    EXPECT_EQ(a.spec.name, b.spec.name);
    EXPECT_EQ(a.spec.kind, b.spec.kind);
    EXPECT_EQ(a.spec.role, b.spec.role);
    EXPECT_EQ(a.spec.test, b.spec.test);
    EXPECT_EQ(a.spec.threshold, b.spec.threshold);
    EXPECT_EQ(a.rows, b.rows);
    EXPECT_EQ(a.nulls, b.nulls);
    EXPECT_EQ(a.n_unique, b.n_unique);
    EXPECT_EQ(a.numerical.sorted, b.numerical.sorted);  // bit-exact
    EXPECT_EQ(a.numerical.mean, b.numerical.mean);
    EXPECT_EQ(a.categorical.dictionary, b.categorical.dictionary);
    EXPECT_EQ(a.categorical.counts, b.categorical.counts);
  }
  EXPECT_EQ(q->header()["version"], 1);
}

TEST_F(ProfileTest, TruncatedOrFlippedFilesAreDataLoss) {
  Table t = MakeTable(300);
  auto p = Profile::Build(t, ProfileOptions{});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Save(Path("c.profile")).ok());
  std::string good;
  {
    std::ifstream in(Path("c.profile"), std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto write = [&](const std::string& bytes) {
    std::ofstream(Path("x.profile"), std::ios::binary | std::ios::trunc) << bytes;
    return Profile::Load(Path("x.profile"));
  };
  // Every truncation length, and a byte flipped at many offsets: always a
  // clean DataLoss naming the file, never a crash.
  for (size_t len = 0; len < good.size(); len += std::max<size_t>(1, good.size() / 97)) {
    auto r = write(good.substr(0, len));
    ASSERT_FALSE(r.ok()) << len;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << len;
    EXPECT_THAT(r.status().message(), HasSubstr("x.profile")) << len;
  }
  for (size_t off = 0; off < good.size(); off += std::max<size_t>(1, good.size() / 211)) {
    std::string bad = good;
    bad[off] ^= 0x5A;
    auto r = write(bad);
    ASSERT_FALSE(r.ok()) << off;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << off;
  }
  auto empty = write("");
  EXPECT_THAT(empty.status().message(), HasSubstr("rebuild it with `gantry drift profile`"));
  EXPECT_EQ(Profile::Load(Path("none.profile")).status().code(), StatusCode::kNotFound);
}

TEST_F(ProfileTest, SaveIsAtomicAndEmptyTableRefused) {
  Table t = MakeTable(50);
  auto p = Profile::Build(t, ProfileOptions{});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Save(Path("a.profile")).ok());
  ASSERT_TRUE(p->Save(Path("a.profile")).ok());  // replaces
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary left behind
  Table empty;
  EXPECT_EQ(Profile::Build(empty, ProfileOptions{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(p->Save("/nonexistent-dir/p.profile").ok());
}

}  // namespace
}  // namespace gantry::drift
