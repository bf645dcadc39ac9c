#include "gantry/agent/report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string_view>

namespace gantry::agent {
namespace {

// 2027-01-04T00:00:00Z, a Monday.
constexpr int64_t kStartMs = 1'799'020'800'000;
constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kStepMs = 60'000;

// A week of one-minute samples from `gen(t_ms, hour_of_day)`.
std::unique_ptr<History> Week(const std::function<std::vector<Signal>(int64_t t, int hour)>& gen,
                              int days = 7) {
  auto h = History::Open(":memory:",
                         HistoryOptions{std::chrono::seconds(60), std::chrono::hours(24 * 60)});
  EXPECT_TRUE(h.ok()) << h.status().message();
  for (int64_t t = kStartMs; t < kStartMs + days * kDayMs; t += kStepMs) {
    int hour = int((t % kDayMs) / 3600'000);
    Status s = (*h)->Append(t, gen(t, hour));
    EXPECT_TRUE(s.ok()) << s.message();
  }
  return std::move(*h);
}

UtilizationOptions WeekOptions(int days = 7) {
  UtilizationOptions o;
  o.from_ms = kStartMs;
  o.to_ms = kStartMs + days * kDayMs - 1;
  o.hostname = "train-01";
  return o;
}

const SignalSummary* Find(const UtilizationReport& r, std::string_view name,
                          std::string_view gpu = "") {
  for (const SignalSummary& s : r.signals) {
    if (s.name != name) continue;
    if (gpu.empty()) return &s;
    for (const auto& [k, v] : s.labels) {
      if (k == "gpu" && v == gpu) return &s;
    }
  }
  return nullptr;
}

const Advice* FindAdvice(const UtilizationReport& r, std::string_view rule) {
  for (const Advice& a : r.advice) {
    if (a.rule == rule) return &a;
  }
  return nullptr;
}

// Office-hours training box: CPU and GPU 0 busy 09-17 UTC, GPU 1 never used,
// memory at 20 % of 1.8 TiB.
std::vector<Signal> OfficeHours(int64_t, int hour) {
  bool busy = hour >= 9 && hour < 17;
  return {{"cpu_utilization", {}, busy ? 80.0 : 2.0},
          {"memory_used_percent", {}, 20.0},
          {"gpu_utilization", {{"gpu", "0"}}, busy ? 90.0 : 1.0},
          {"gpu_utilization", {{"gpu", "1"}}, 1.0},
          {"gpu_memory_used_percent", {{"gpu", "0"}}, busy ? 60.0 : 5.0},
          {"gpu_memory_used_percent", {{"gpu", "1"}}, 0.5},
          {"network_receive_bytes_per_second", {{"device", "eth0"}}, 1e6}};
}

TEST(PercentileTest, InterpolatesBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 95), 95.05);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 100);
  EXPECT_DOUBLE_EQ(Percentile({7}, 95), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
}

TEST(UtilizationReportTest, StatisticsOfAWeek) {
  auto h = Week(OfficeHours);
  UtilizationOptions o = WeekOptions();
  o.memory_total_bytes = uint64_t(1.8 * double(uint64_t(1) << 40));
  auto r = BuildUtilizationReport(*h, o);
  ASSERT_TRUE(r.ok()) << r.status().message();

  const SignalSummary* cpu = Find(*r, "cpu_utilization");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->samples, 7u * 1440);
  EXPECT_DOUBLE_EQ(cpu->p50, 2.0);
  EXPECT_DOUBLE_EQ(cpu->p95, 80.0);
  EXPECT_DOUBLE_EQ(cpu->max, 80.0);
  EXPECT_NEAR(cpu->mean, (8 * 80.0 + 16 * 2.0) / 24, 1e-9);
  EXPECT_NEAR(cpu->busy_share, 8.0 / 24, 1e-9);
  EXPECT_EQ(cpu->unit, "%");
  EXPECT_LE(cpu->plot.size(), 240u);

  const SignalSummary* gpu1 = Find(*r, "gpu_utilization", "1");
  ASSERT_NE(gpu1, nullptr);
  EXPECT_DOUBLE_EQ(gpu1->p95, 1.0);
  EXPECT_DOUBLE_EQ(gpu1->busy_share, 0.0);
  EXPECT_TRUE(std::isnan(Find(*r, "network_receive_bytes_per_second")->busy_share));

  // Busy 09:00-17:00 every day, idle the other 16 hours.
  std::vector<int> want;
  for (int hr = 9; hr < 17; ++hr) want.push_back(hr);
  EXPECT_EQ(r->busy_hours, want);
  EXPECT_DOUBLE_EQ(r->busy_by_hour[9], 1.0);
  EXPECT_DOUBLE_EQ(r->busy_by_hour[3], 0.0);
  EXPECT_NEAR(r->idle_share, 16.0 / 24, 1e-9);
  EXPECT_EQ(r->buckets, 7u * 1440);
}

TEST(UtilizationReportTest, AdviceForOfficeHoursBox) {
  auto h = Week(OfficeHours);
  UtilizationOptions o = WeekOptions();
  o.memory_total_bytes = uint64_t(1.8 * double(uint64_t(1) << 40));
  auto r = BuildUtilizationReport(*h, o);
  ASSERT_TRUE(r.ok());
  const Advice* idle_gpu = FindAdvice(*r, "gpu_idle_devices");
  ASSERT_NE(idle_gpu, nullptr);
  EXPECT_EQ(idle_gpu->text, "GPU 1 p95 utilisation under 5%: a size with fewer GPUs would do");
  const Advice* mem = FindAdvice(*r, "memory_underused");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->text, "memory p95 20% of 1.8 TiB: a size with less memory would do");
  const Advice* idle = FindAdvice(*r, "mostly_idle");
  ASSERT_NE(idle, nullptr);
  EXPECT_NE(idle->text.find("idle 67% of the time"), std::string::npos) << idle->text;
  EXPECT_EQ(FindAdvice(*r, "gpu_underused"), nullptr);  // GPU 0 is well used
  EXPECT_EQ(FindAdvice(*r, "cpu_bound"), nullptr);
  EXPECT_EQ(FindAdvice(*r, "cpu_underused"), nullptr);  // GPU node: vCPUs come with the GPUs
  EXPECT_EQ(FindAdvice(*r, "short_history"), nullptr);
}

TEST(UtilizationReportTest, UnderusedGpuAndCpuBound) {
  // GPU mostly at 5-11 %, CPU pegged at 95 %, memory 93 %.
  auto h = Week([](int64_t t, int) -> std::vector<Signal> {
    double gpu = (t / kStepMs) % 10 == 0 ? 11.0 : 5.0;
    return {{"cpu_utilization", {}, 95.0},
            {"memory_used_percent", {}, 93.0},
            {"gpu_utilization", {{"gpu", "0"}}, gpu}};
  });
  auto r = BuildUtilizationReport(*h, WeekOptions());
  ASSERT_TRUE(r.ok());
  const Advice* gpu = FindAdvice(*r, "gpu_underused");
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->text, "GPU p95 utilisation 11%: a smaller size would do");
  EXPECT_DOUBLE_EQ(gpu->value, 11.0);
  EXPECT_DOUBLE_EQ(gpu->threshold, 30.0);
  const Advice* cpu = FindAdvice(*r, "cpu_bound");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->text, "CPU p95 95%: CPU-bound, a size with more vCPUs or faster CPUs");
  const Advice* mem = FindAdvice(*r, "memory_full");
  ASSERT_NE(mem, nullptr);
  EXPECT_NE(mem->text.find("memory p95 93%: nearly full"), std::string::npos) << mem->text;
  EXPECT_EQ(r->busy_hours.size(), 24u);  // CPU busy all day
  EXPECT_DOUBLE_EQ(r->idle_share, 0.0);
  EXPECT_EQ(FindAdvice(*r, "mostly_idle"), nullptr);
}

TEST(UtilizationReportTest, QuietCpuOnlyNodeAndShortHistory) {
  auto h = Week(
      [](int64_t, int) -> std::vector<Signal> {
        return {{"cpu_utilization", {}, 3.0}, {"memory_used_percent", {}, 50.0}};
      },
      1);
  UtilizationOptions o = WeekOptions(1);
  o.to_ms = kStartMs + 10 * 3600'000;  // ten hours of it
  auto r = BuildUtilizationReport(*h, o);
  ASSERT_TRUE(r.ok());
  ASSERT_NE(FindAdvice(*r, "cpu_underused"), nullptr);
  EXPECT_EQ(FindAdvice(*r, "cpu_underused")->text, "CPU p95 3%: a size with fewer vCPUs would do");
  const Advice* s = FindAdvice(*r, "short_history");
  ASSERT_NE(s, nullptr);
  EXPECT_NE(s->text.find("only 10h of history"), std::string::npos) << s->text;
  EXPECT_EQ(FindAdvice(*r, "memory_underused"), nullptr);
  EXPECT_EQ(FindAdvice(*r, "memory_full"), nullptr);
  EXPECT_TRUE(r->busy_hours.empty());
  EXPECT_DOUBLE_EQ(r->idle_share, 1.0);
  EXPECT_TRUE(std::isnan(r->busy_by_hour[12]));  // no samples at noon
}

TEST(UtilizationReportTest, EmptyHistoryAndBadPeriod) {
  auto h = History::Open(":memory:");
  ASSERT_TRUE(h.ok());
  auto r = BuildUtilizationReport(**h, WeekOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->signals.empty());
  ASSERT_EQ(r->advice.size(), 1u);
  EXPECT_EQ(r->advice[0].rule, "no_data");
  EXPECT_TRUE(std::isnan(r->idle_share));
  Json j = UtilizationToJson(*r);
  EXPECT_TRUE(j["idle_share"].is_null());
  EXPECT_NE(RenderUtilizationTable(*r).find("no samples"), std::string::npos);

  UtilizationOptions bad = WeekOptions();
  bad.to_ms = bad.from_ms;
  EXPECT_EQ(BuildUtilizationReport(**h, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(UtilizationReportTest, JsonShape) {
  auto h = Week(OfficeHours, 2);
  auto r = BuildUtilizationReport(*h, WeekOptions(2));
  ASSERT_TRUE(r.ok());
  Json j = UtilizationToJson(*r);
  EXPECT_EQ(j["report"], "gantry.utilization");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["hostname"], "train-01");
  EXPECT_EQ(j["from"], "2027-01-04T00:00:00Z");
  EXPECT_EQ(j["from_ms"], kStartMs);
  EXPECT_TRUE(j["memory_total_bytes"].is_null());
  EXPECT_EQ(j["thresholds"]["gpu_low_p95"], 30.0);
  ASSERT_TRUE(j["signals"].is_array());
  const Json& first = j["signals"][0];
  for (const char* key :
       {"name", "labels", "unit", "samples", "p50", "p95", "max", "mean", "busy_share"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_EQ(first["name"], "cpu_utilization");
  EXPECT_EQ(j["signals"][2]["labels"]["gpu"], "0");  // cpu, memory, then GPUs in order
  EXPECT_EQ(j["signals"][3]["labels"]["gpu"], "1");
  EXPECT_EQ(j["busy_hours"]["by_hour"].size(), 24u);
  EXPECT_EQ(j["busy_hours"]["hours"][0], 9);
  EXPECT_TRUE(j["advice"][0].contains("rule"));
  EXPECT_TRUE(j["advice"][0].contains("text"));
  // Round-trips as strict JSON.
  EXPECT_TRUE(ParseJson(j.dump(), "report").ok());
}

TEST(UtilizationReportTest, TableMentionsEverything) {
  auto h = Week(OfficeHours, 2);
  auto r = BuildUtilizationReport(*h, WeekOptions(2));
  ASSERT_TRUE(r.ok());
  std::string t = RenderUtilizationTable(*r);
  EXPECT_NE(t.find("Utilisation of train-01"), std::string::npos) << t;
  EXPECT_NE(t.find("CPU utilisation"), std::string::npos);
  EXPECT_NE(t.find("gpu=1"), std::string::npos);
  EXPECT_NE(t.find("977 KiB/s"), std::string::npos) << t;  // 1e6 B/s
  EXPECT_NE(t.find("09:00-17:00"), std::string::npos);
  EXPECT_NE(t.find("[gpu_idle_devices]"), std::string::npos);
}

// Tags must nest; void elements and self-closing SVG tags excepted.
bool WellFormed(std::string_view html, std::string* why) {
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string_view::npos) {
    size_t end = html.find('>', i);
    if (end == std::string_view::npos) {
      *why = "unterminated tag at " + std::to_string(i);
      return false;
    }
    std::string_view tag = html.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.starts_with('!')) continue;
    bool closing = tag.starts_with('/');
    if (closing) tag.remove_prefix(1);
    std::string name(tag.substr(0, tag.find_first_of(" \t\n/")));
    if (!closing) {
      if (tag.ends_with('/') || name == "meta" || name == "br") continue;
      stack.push_back(name);
      continue;
    }
    if (stack.empty() || stack.back() != name) {
      *why = "</" + name + "> closes <" + (stack.empty() ? "" : stack.back()) + ">";
      return false;
    }
    stack.pop_back();
  }
  if (!stack.empty()) *why = "<" + stack.back() + "> never closed";
  return stack.empty();
}

TEST(UtilizationReportTest, HtmlIsSelfContainedAndEscaped) {
  auto h = Week(
      [](int64_t, int hour) -> std::vector<Signal> {
        return {{"cpu_utilization", {}, hour >= 12 ? 70.0 : 10.0},
                {"network_transmit_bytes_per_second",
                 {{"device", "<script>alert('x')&\"</script>"}},
                 5e5}};
      },
      2);
  UtilizationOptions o = WeekOptions(2);
  o.hostname = "evil<b>host</b>";
  auto r = BuildUtilizationReport(*h, o);
  ASSERT_TRUE(r.ok());
  std::string html = RenderUtilizationHtml(*r);
  std::string why;
  EXPECT_TRUE(WellFormed(html, &why)) << why;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(&apos;x&apos;)&amp;&quot;&lt;/script&gt;"),
            std::string::npos);
  EXPECT_NE(html.find("evil&lt;b&gt;host&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("<path d=\"M"), std::string::npos);
  EXPECT_NE(html.find("busy share by hour of day"), std::string::npos);
  // Nothing loaded from elsewhere (the SVG namespace is an identifier, not a fetch).
  std::string stripped = html;
  for (size_t p; (p = stripped.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    stripped.erase(p, 34);
  EXPECT_EQ(stripped.find("http"), std::string::npos);
  EXPECT_EQ(stripped.find("src="), std::string::npos);
}

}  // namespace
}  // namespace gantry::agent
