// Checks Registry::Render() output with the reference parser and linter,
// `promtool check metrics` (Debian package `prometheus`). The test fails, not
// skips, when promtool is missing: the format check is the point of it.
#include <gtest/gtest.h>

#include <string>

#include "gantry/core/metrics.h"
#include "testing/promtool.h"

namespace gantry::metrics {
namespace {

struct CheckResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CheckResult PromtoolCheck(const std::string&, const std::string& text) {
  testing::CliRun r = testing::PromtoolCheckMetrics(text);
  return {r.rc, r.out + r.err};
}

std::string FindPromtool() { return testing::PromtoolPath(); }

TEST(MetricsIntegrationTest, PromtoolAcceptsRenderedRegistry) {
  std::string promtool = FindPromtool();
  ASSERT_FALSE(promtool.empty())
      << "promtool not found; install it with `sudo apt-get install prometheus`";

  Registry r;
  auto requests = r.GetCounter("gantry_gateway_requests_total", "Requests by route and code.",
                               {{"route", "/v1/"}, {"code", "200"}});
  auto requests5 = r.GetCounter("gantry_gateway_requests_total", "Requests by route and code.",
                                {{"route", "/v1/"}, {"code", "502"}});
  auto tokens = r.GetCounter("gantry_gateway_tokens", "Tokens counted.",  // _total appended
                             {{"model", "tiny \"quoted\" \\ back\nslash"}, {"kind", "prompt"}});
  auto active = r.GetGauge("gantry_gateway_active_connections", "Open client connections.");
  auto up = r.GetGauge("gantry_gateway_backend_up", "1 when the backend answers.\nSecond line.",
                       {{"backend", "llm"}});
  auto latency = r.GetHistogram("gantry_gateway_request_duration_seconds",
                                "Time from request head to last response byte.",
                                {{"route", "/v1/"}}, DefaultLatencyBuckets());
  auto sizes = r.GetHistogram("gantry_gateway_request_size_bytes", "Request body sizes.", {},
                              {64, 1024, 65536});
  ASSERT_TRUE(requests.ok() && requests5.ok() && tokens.ok() && active.ok() && up.ok() &&
              latency.ok() && sizes.ok());
  (*requests)->Inc(41);
  (*requests5)->Inc();
  (*tokens)->Inc(1234);
  (*active)->Set(7);
  (*up)->Set(1);
  for (double v : {0.00005, 0.0001, 0.0003, 0.002, 0.7, 90.0}) (*latency)->Observe(v);
  (*sizes)->Observe(1024);
  r.AddCollectHook([&] { (*active)->Inc(); });

  std::string text = r.Render();
  CheckResult c = PromtoolCheck(promtool, text);
  EXPECT_EQ(c.exit_code, 0) << "promtool output:\n" << c.output << "\nrendered:\n" << text;
  EXPECT_EQ(c.output.find("error"), std::string::npos) << c.output;
}

// Proves the check above can fail: promtool rejects malformed exposition text.
TEST(MetricsIntegrationTest, PromtoolRejectsBrokenText) {
  std::string promtool = FindPromtool();
  ASSERT_FALSE(promtool.empty())
      << "promtool not found; install it with `sudo apt-get install prometheus`";
  CheckResult c = PromtoolCheck(promtool, "# TYPE x counter\nx{a=\"unterminated} 1\n");
  EXPECT_NE(c.exit_code, 0) << c.output;
}

}  // namespace
}  // namespace gantry::metrics
