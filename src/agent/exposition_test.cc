#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gantry/agent/collector.h"

namespace gantry::agent {
namespace {

Snapshot Sample() {
  Snapshot s;
  SnapshotWriter w(&s, 1000);
  auto load = w.Begin("node_load1", "1m load average.", MetricType::kGauge);
  w.Add(load, 0.25);
  auto cpu = w.Begin("node_cpu_seconds_total", "Seconds the CPUs spent in each mode.",
                     MetricType::kCounter);
  w.Add(cpu, 123.5, {{"cpu", "0"}, {"mode", "idle"}});
  w.Add(cpu, 7, {{"cpu", "0"}, {"mode", "user"}});
  auto energy = w.Begin("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Energy \"mJ\"\nback\\slash",
                        MetricType::kCounter);
  w.Add(energy, 12345678901, {{"UUID", "GPU-1"}, {"gpu", "0"}});
  auto odd = w.Begin("x_gauge", "", MetricType::kGauge);
  w.Add(odd, std::numeric_limits<double>::quiet_NaN(), {{"v", "a\"b\\c\nd"}});
  w.Add(odd, std::numeric_limits<double>::infinity(), {{"v", "inf"}});
  w.Add(odd, -std::numeric_limits<double>::infinity(), {{"v", "minf"}});
  w.Add(odd, 1e21, {{"v", "big"}});
  w.Add(odd, -0.001, {{"v", "small"}});
  auto empty = w.Begin("zz_empty", "dropped", MetricType::kGauge);
  (void)empty;
  w.Finish();
  return s;
}

TEST(ExpositionTest, PrometheusText004) {
  std::string out = "leftover";
  RenderExposition(Sample(), ExpositionFormat::kPrometheusText, &out);
  EXPECT_EQ(out,
            "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Energy \"mJ\"\\nback\\\\slash\n"
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=\"GPU-1\",gpu=\"0\"} 12345678901\n"
            "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
            "# TYPE node_cpu_seconds_total counter\n"
            "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 123.5\n"
            "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 7\n"
            "# HELP node_load1 1m load average.\n"
            "# TYPE node_load1 gauge\n"
            "node_load1 0.25\n"
            "# TYPE x_gauge gauge\n"
            "x_gauge{v=\"a\\\"b\\\\c\\nd\"} NaN\n"
            "x_gauge{v=\"inf\"} +Inf\n"
            "x_gauge{v=\"minf\"} -Inf\n"
            "x_gauge{v=\"big\"} 1e+21\n"
            "x_gauge{v=\"small\"} -0.001\n");
}

TEST(ExpositionTest, OpenMetrics100) {
  std::string out;
  RenderExposition(Sample(), ExpositionFormat::kOpenMetrics, &out);
  EXPECT_EQ(out,
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"
            "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Energy \\\"mJ\\\"\\nback\\\\slash\n"
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{UUID=\"GPU-1\",gpu=\"0\"} 12345678901\n"
            "# TYPE node_cpu_seconds counter\n"
            "# HELP node_cpu_seconds Seconds the CPUs spent in each mode.\n"
            "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 123.5\n"
            "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} 7\n"
            "# TYPE node_load1 gauge\n"
            "# HELP node_load1 1m load average.\n"
            "node_load1 0.25\n"
            "# TYPE x_gauge gauge\n"
            "x_gauge{v=\"a\\\"b\\\\c\\nd\"} NaN\n"
            "x_gauge{v=\"inf\"} +Inf\n"
            "x_gauge{v=\"minf\"} -Inf\n"
            "x_gauge{v=\"big\"} 1e+21\n"
            "x_gauge{v=\"small\"} -0.001\n"
            "# EOF\n");
}

// node_exporter's netstat/vmstat families carry no type: "untyped" in the
// text format, "unknown" in OpenMetrics, the sample name unchanged.
TEST(ExpositionTest, UntypedFamilies) {
  Snapshot snap;
  SnapshotWriter w(&snap, 1);
  auto f = w.Begin("node_netstat_Tcp_InSegs", "Statistic TcpInSegs.", MetricType::kUntyped);
  w.Add(f, 42);
  w.Finish();
  std::string text;
  RenderExposition(snap, ExpositionFormat::kPrometheusText, &text);
  EXPECT_EQ(text,
            "# HELP node_netstat_Tcp_InSegs Statistic TcpInSegs.\n"
            "# TYPE node_netstat_Tcp_InSegs untyped\n"
            "node_netstat_Tcp_InSegs 42\n");
  RenderExposition(snap, ExpositionFormat::kOpenMetrics, &text);
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE node_netstat_Tcp_InSegs unknown\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\nnode_netstat_Tcp_InSegs 42\n"));
}

TEST(ExpositionTest, NegotiatesOpenMetricsOnlyWhenAsked) {
  EXPECT_EQ(NegotiateFormat(nullptr), ExpositionFormat::kPrometheusText);
  std::string prom3 =
      "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
      "application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;"
      "escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
  EXPECT_EQ(NegotiateFormat(&prom3), ExpositionFormat::kOpenMetrics);
  std::string plain = "text/plain;version=0.0.4;q=1,*/*;q=0.1";
  EXPECT_EQ(NegotiateFormat(&plain), ExpositionFormat::kPrometheusText);
  std::string refused = "application/openmetrics-text; q=0, text/plain";
  EXPECT_EQ(NegotiateFormat(&refused), ExpositionFormat::kPrometheusText);
  std::string upper = "Application/OpenMetrics-Text";
  EXPECT_EQ(NegotiateFormat(&upper), ExpositionFormat::kOpenMetrics);
  EXPECT_EQ(ContentType(ExpositionFormat::kPrometheusText),
            "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(ContentType(ExpositionFormat::kOpenMetrics),
            "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

TEST(SnapshotWriterTest, ReusesFamiliesAndSeriesAcrossCollections) {
  Snapshot s;
  for (int round = 0; round < 3; ++round) {
    SnapshotWriter w(&s, round);
    // Begin order differs from name order, and from round to round.
    auto b = w.Begin("b", "", MetricType::kGauge);
    auto a = w.Begin(round == 1 ? "c" : "a", "", MetricType::kCounter);
    w.Add(b, round, {{"x", "1"}});
    w.Add(a, round * 10);
    if (round == 2) w.Add(b, 99, {{"x", "2"}});
    w.Finish();
    ASSERT_EQ(s.families.size(), 2u);
    EXPECT_EQ(s.families[0].name, round == 1 ? "b" : "a");
    EXPECT_EQ(s.time_ms, round);
  }
  ASSERT_NE(s.Find("b"), nullptr);
  ASSERT_EQ(s.Find("b")->series.size(), 2u);
  EXPECT_EQ(s.Find("b")->series[1].value, 99);
  EXPECT_EQ(s.Find("a")->series[0].value, 20);
  EXPECT_EQ(s.Find("c"), nullptr);
}

}  // namespace
}  // namespace gantry::agent
