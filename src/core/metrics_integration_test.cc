// Checks Registry::Render() output with the reference parser and linter,
// `promtool check metrics` (Debian package `prometheus`). The test fails, not
// skips, when promtool is missing: the format check is the point of it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gantry/core/metrics.h"

namespace gantry::metrics {
namespace {

std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  std::string dirs = std::string(path ? path : "") + ":/usr/bin:/usr/local/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      std::string candidate = dir + "/promtool";
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

struct CheckResult {
  int exit_code = -1;
  std::string output;
};

// Writes `text` to a temp file and runs `promtool check metrics < file`.
CheckResult PromtoolCheck(const std::string& promtool, const std::string& text) {
  char tmpl[] = "/tmp/gantry_metrics_XXXXXX";
  int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  CheckResult r;
  if (fd < 0) return r;
  close(fd);
  {
    std::ofstream f(tmpl, std::ios::binary);
    f << text;
  }
  std::string cmd = promtool + " check metrics < " + tmpl + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  if (p != nullptr) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
    int st = pclose(p);
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  unlink(tmpl);
  return r;
}

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
