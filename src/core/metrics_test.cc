#include "gantry/core/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

namespace gantry::metrics {
namespace {

TEST(MetricsTest, RendersSmallRegistryExactly) {
  Registry r;
  auto req = r.GetCounter("gantry_requests_total", "Requests served.", {{"code", "200"}});
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  (*req)->Inc();
  (*req)->Inc(2);
  auto req404 = r.GetCounter("gantry_requests_total", "ignored", {{"code", "404"}});
  ASSERT_TRUE(req404.ok());
  (*req404)->Inc();
  auto conns = r.GetGauge("gantry_active_connections", "Open client connections.");
  ASSERT_TRUE(conns.ok());
  (*conns)->Set(5);
  (*conns)->Dec(2);
  (*conns)->Inc(0.5);
  auto lat =
      r.GetHistogram("gantry_latency_seconds", "Latency.", {{"route", "/v1/"}}, {0.001, 0.25, 1});
  ASSERT_TRUE(lat.ok());
  (*lat)->Observe(0.0005);
  (*lat)->Observe(0.25);
  (*lat)->Observe(3);

  EXPECT_EQ(r.Render(),
            "# HELP gantry_active_connections Open client connections.\n"
            "# TYPE gantry_active_connections gauge\n"
            "gantry_active_connections 3.5\n"
            "# HELP gantry_latency_seconds Latency.\n"
            "# TYPE gantry_latency_seconds histogram\n"
            "gantry_latency_seconds_bucket{route=\"/v1/\",le=\"0.001\"} 1\n"
            "gantry_latency_seconds_bucket{route=\"/v1/\",le=\"0.25\"} 2\n"
            "gantry_latency_seconds_bucket{route=\"/v1/\",le=\"1\"} 2\n"
            "gantry_latency_seconds_bucket{route=\"/v1/\",le=\"+Inf\"} 3\n"
            "gantry_latency_seconds_sum{route=\"/v1/\"} 3.2505\n"
            "gantry_latency_seconds_count{route=\"/v1/\"} 3\n"
            "# HELP gantry_requests_total Requests served.\n"
            "# TYPE gantry_requests_total counter\n"
            "gantry_requests_total{code=\"200\"} 3\n"
            "gantry_requests_total{code=\"404\"} 1\n");
}

TEST(MetricsTest, EmptyRegistryRendersNothing) {
  Registry r;
  EXPECT_EQ(r.Render(), "");
}

TEST(MetricsTest, SameNameAndLabelsGiveSameObject) {
  Registry r;
  auto a = r.GetCounter("x_total", "h", {{"a", "1"}, {"b", "2"}});
  auto b = r.GetCounter("x_total", "h", {{"b", "2"}, {"a", "1"}});  // order does not matter
  auto c = r.GetCounter("x", "h", {{"a", "1"}, {"b", "2"}});        // _total appended
  auto d = r.GetCounter("x_total", "h", {{"a", "1"}, {"b", "3"}});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(*a, *c);
  EXPECT_NE(*a, *d);
  auto g1 = r.GetGauge("g", "h");
  auto g2 = r.GetGauge("g", "h");
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_EQ(*g1, *g2);
}

TEST(MetricsTest, CounterNameGetsTotalSuffix) {
  Registry r;
  ASSERT_TRUE(r.GetCounter("gantry_bytes", "Bytes.").ok());
  EXPECT_EQ(r.Render(),
            "# HELP gantry_bytes_total Bytes.\n# TYPE gantry_bytes_total counter\n"
            "gantry_bytes_total 0\n");
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  Registry r;
  auto g = r.GetGauge("g", "line1\nback\\slash \"quoted\"", {{"v", "a\\b\"c\nd"}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(r.Render(),
            "# HELP g line1\\nback\\\\slash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{v=\"a\\\\b\\\"c\\nd\"} 0\n");
}

TEST(MetricsTest, NumberFormatting) {
  Registry r;
  auto a = r.GetGauge("a", "h");
  auto b = r.GetGauge("b", "h");
  auto c = r.GetGauge("c", "h");
  auto d = r.GetGauge("d", "h");
  auto e = r.GetGauge("e", "h");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok() && e.ok());
  (*a)->Set(-2);
  (*b)->Set(0.1);
  (*c)->Set(std::numeric_limits<double>::infinity());
  (*d)->Set(std::nan(""));
  (*e)->Set(1e300);
  std::string text = r.Render();
  EXPECT_NE(text.find("\na -2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nb 0.1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nc +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nd NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ne 1e+300\n"), std::string::npos) << text;
}

TEST(MetricsTest, CounterIgnoresNegativeAndNaN) {
  Counter c;
  c.Inc(2);
  c.Inc(-1);
  c.Inc(std::nan(""));
  EXPECT_EQ(c.Value(), 2);
}

TEST(MetricsTest, ConcurrentIncrementsAreExact) {
  Registry r;
  auto c = r.GetCounter("c_total", "h");
  auto g = r.GetGauge("g", "h");
  auto h = r.GetHistogram("h", "h", {}, {1, 2});
  ASSERT_TRUE(c.ok() && g.ok() && h.ok());
  constexpr int kThreads = 4;
  constexpr int kIters = 1000000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        (*c)->Inc();
        (*g)->Inc();
        if (t % 2 == 0) (*g)->Dec(0.5);
        (*h)->Observe(t);  // buckets: t=0,1 -> le=1; t=2 -> le=2; t=3 -> +Inf
      }
    });
  }
  // Render concurrently with the writers: must not crash or deadlock.
  for (int i = 0; i < 10; ++i) (void)r.Render();
  for (auto& th : threads) th.join();
  EXPECT_EQ((*c)->Value(), double{kThreads} * kIters);
  EXPECT_EQ((*g)->Value(), double{kThreads} * kIters - 0.5 * 2 * kIters);
  EXPECT_EQ((*h)->Count(), uint64_t{kThreads} * kIters);
  EXPECT_EQ((*h)->BucketCount(0), 2u * kIters);
  EXPECT_EQ((*h)->BucketCount(1), 1u * kIters);
  EXPECT_EQ((*h)->BucketCount(2), 1u * kIters);
  EXPECT_EQ((*h)->Sum(), (0.0 + 1 + 2 + 3) * kIters);
}

TEST(MetricsTest, ConcurrentRegistrationGivesOneObject) {
  Registry r;
  std::vector<Counter*> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        auto c = r.GetCounter("shared_total", "h", {{"k", std::to_string(i % 10)}});
        if (c.ok() && i == 3) got[t] = *c;
        if (c.ok()) (*c)->Inc();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 1; t < 8; ++t) EXPECT_EQ(got[t], got[0]);
  ASSERT_NE(got[0], nullptr);
  EXPECT_EQ(got[0]->Value(), 800);
}

TEST(MetricsTest, HistogramBucketEdgesAreInclusive) {
  Histogram h({0.1, 1, 10});
  h.Observe(0.1);  // == le 0.1
  h.Observe(1);    // == le 1
  h.Observe(1.0000001);
  h.Observe(10);            // == le 10
  h.Observe(10.5);          // +Inf
  h.Observe(-5);            // below the first bound: first bucket
  h.Observe(std::nan(""));  // ignored
  EXPECT_EQ(h.BucketCount(0), 2u);
  EXPECT_EQ(h.BucketCount(1), 1u);
  EXPECT_EQ(h.BucketCount(2), 2u);
  EXPECT_EQ(h.BucketCount(3), 1u);
  EXPECT_EQ(h.BucketCount(4), 0u);  // out of range reads 0
  EXPECT_EQ(h.Count(), 6u);
  EXPECT_DOUBLE_EQ(h.Sum(), 0.1 + 1 + 1.0000001 + 10 + 10.5 - 5);
}

TEST(MetricsTest, DefaultLatencyBucketsAreAscendingAndCoverSubMillisecond) {
  auto b = DefaultLatencyBuckets();
  ASSERT_GE(b.size(), 14u);
  EXPECT_DOUBLE_EQ(b.front(), 0.0001);
  EXPECT_DOUBLE_EQ(b.back(), 60);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
  EXPECT_NE(std::find(b.begin(), b.end(), 0.00025), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 0.0005), b.end());
  EXPECT_NE(std::find(b.begin(), b.end(), 0.001), b.end());
  Registry r;
  ASSERT_TRUE(r.GetHistogram("lat_seconds", "h", {}, b).ok());
  std::string text = r.Render();
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.0001\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.00025\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"60\"} 0\n"), std::string::npos) << text;
}

TEST(MetricsTest, NameValidity) {
  EXPECT_TRUE(ValidMetricName("a"));
  EXPECT_TRUE(ValidMetricName("_a:b_1"));
  EXPECT_TRUE(ValidMetricName(":x"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_FALSE(ValidMetricName("1a"));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_FALSE(ValidMetricName("a b"));
  EXPECT_FALSE(ValidMetricName("é"));
  EXPECT_TRUE(ValidLabelName("code"));
  EXPECT_TRUE(ValidLabelName("_x9"));
  EXPECT_FALSE(ValidLabelName(""));
  EXPECT_FALSE(ValidLabelName("__name__"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  EXPECT_FALSE(ValidLabelName("9a"));
}

// Each row: the call fails with InvalidArgument and a message containing `want`.
TEST(MetricsTest, RegistrationErrors) {
  Registry r;
  ASSERT_TRUE(r.GetCounter("c_total", "h", {{"a", "1"}}).ok());
  ASSERT_TRUE(r.GetHistogram("h_seconds", "h", {}, {1, 2}).ok());
  struct Row {
    Status status;
    std::string want;
  };
  std::vector<Row> rows = {
      {r.GetCounter("bad-name", "h").status(), "metric name 'bad-name' is invalid"},
      {r.GetGauge("g", "h", {{"bad-label", "x"}}).status(), "label name 'bad-label' is invalid"},
      {r.GetGauge("g", "h", {{"__reserved", "x"}}).status(), "label name '__reserved'"},
      {r.GetGauge("g", "h", {{"a", "1"}, {"a", "2"}}).status(), "label 'a' given twice"},
      {r.GetGauge("c_total", "h", {{"a", "1"}}).status(), "already registered as a counter"},
      {r.GetCounter("c_total", "h", {{"b", "1"}}).status(), "already registered with labels {a}"},
      {r.GetCounter("c_total", "h").status(), "already registered with labels {a}, not {}"},
      {r.GetHistogram("h_seconds", "h", {}, {1, 3}).status(), "other buckets"},
      {r.GetHistogram("h2", "h", {}, {}).status(), "no buckets"},
      {r.GetHistogram("h2", "h", {}, {2, 1}).status(), "strictly ascending"},
      {r.GetHistogram("h2", "h", {}, {1, 1}).status(), "strictly ascending"},
      {r.GetHistogram("h2", "h", {}, {1, INFINITY}).status(), "not finite"},
      {r.GetHistogram("h2", "h", {{"le", "1"}}, {1}).status(), "'le' is reserved"},
  };
  for (const auto& row : rows) {
    EXPECT_EQ(row.status.code(), StatusCode::kInvalidArgument) << row.want;
    EXPECT_NE(row.status.message().find(row.want), std::string::npos)
        << "got: " << row.status.message() << "\nwant: " << row.want;
  }
  // Failed registrations leave nothing half-registered behind.
  EXPECT_EQ(r.Render().find("h2"), std::string::npos);
  EXPECT_EQ(r.Render().find("bad"), std::string::npos);
}

TEST(MetricsTest, CollectHooksRunAtRender) {
  Registry r;
  int calls = 0;
  r.AddCollectHook([&] {
    ++calls;
    auto g = r.GetGauge("computed", "Computed at render.");  // hooks may register
    if (g.ok()) (*g)->Set(calls * 10);
  });
  std::string first = r.Render();
  EXPECT_NE(first.find("\ncomputed 10\n"), std::string::npos) << first;
  std::string second = r.Render();
  EXPECT_NE(second.find("\ncomputed 20\n"), std::string::npos) << second;
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace gantry::metrics
