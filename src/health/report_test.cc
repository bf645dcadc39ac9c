// HealthReport renderers: exact output for a small report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "gantry/health/check.h"

namespace gantry::health {
namespace {

HealthReport Sample() {
  HealthReport r;
  r.profile = "generic";
  r.vm_size = "Standard_ND96isr_H100_v5";
  r.hostname = "node-1";
  r.timestamp = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  r.elapsed_s = 1.5;
  r.results = {
      {"cpu", Outcome::kPass, "2 sockets, 96 cores, 96 threads", "96", "== 96", "", 0.001},
      {"memory", Outcome::kWarn, "1.80 TiB, near the minimum", "1.80 TiB", ">= 1.79 TiB", "",
       0.002},
      {"gpu_count", Outcome::kFail, "7 GPUs <found> & \"one\" missing\nreplace it", "7", "== 8",
       "NHC2009", 0.25},
      {"swap", Outcome::kSkip, "skipped (--skip)", "", "", "", 0},
      {"nvme", Outcome::kError, "timed out after 10 s: the probe was killed", "", "", "NHCNA", 10},
  };
  r.overall = Overall(r.results);
  return r;
}

// A small XML well-formedness check: tags nest and close, attributes are
// quoted, '&' starts only a known reference and '<' only a tag.
bool WellFormed(const std::string& xml, std::string* why) {
  std::vector<std::string> stack;
  size_t i = xml.find("?>");
  if (xml.rfind("<?xml", 0) != 0 || i == std::string::npos) return *why = "no declaration", false;
  for (i += 2; i < xml.size();) {
    if (xml[i] == '&') {
      size_t semi = xml.find(';', i);
      if (semi == std::string::npos) return *why = "bad reference", false;
      std::string ref = xml.substr(i, semi - i + 1);
      static const std::vector<std::string> ok = {"&amp;",  "&lt;", "&gt;", "&quot;",
                                                  "&apos;", "&#9;", "&#10;"};
      if (std::find(ok.begin(), ok.end(), ref) == ok.end()) return *why = "reference " + ref, false;
      i = semi + 1;
    } else if (xml[i] == '<') {
      size_t end = xml.find('>', i);
      if (end == std::string::npos) return *why = "unclosed tag", false;
      std::string tag = xml.substr(i + 1, end - i - 1);
      if (tag.find('<') != std::string::npos) return *why = "'<' inside a tag", false;
      if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return *why = "quote", false;
      if (tag[0] == '/') {
        if (stack.empty() || stack.back() != tag.substr(1)) return *why = "mismatch " + tag, false;
        stack.pop_back();
      } else if (tag.back() != '/') {
        stack.push_back(tag.substr(0, tag.find(' ')));
      }
      i = end + 1;
    } else {
      if (xml[i] == '>') return *why = "stray '>'", false;
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(xml[i]))) {
        return *why = "text outside the root", false;
      }
      ++i;
    }
  }
  if (!stack.empty()) return *why = "unclosed " + stack.back(), false;
  return true;
}

TEST(ReportTest, JUnitIsWellFormedWhateverTheMessages) {
  HealthReport r = Sample();
  r.hostname = "a<b>&\"'";
  r.results[0].name = "x\x01y";
  r.results[2].message = "</failure><evil attr='1'>&amp;\t]]>";
  std::string why;
  EXPECT_TRUE(WellFormed(r.RenderJUnit(), &why)) << why << "\n" << r.RenderJUnit();
  EXPECT_TRUE(WellFormed(Sample().RenderJUnit(), &why)) << why;
  EXPECT_FALSE(WellFormed("<?xml?>\n<a><b></a>", &why));  // the checker can fail
}

TEST(ReportTest, FirstProblemPrefersAFailureOverAnError) {
  HealthReport r = Sample();
  ASSERT_NE(r.FirstProblem(), nullptr);
  EXPECT_EQ(r.FirstProblem()->name, "gpu_count");
  r.results[2].outcome = Outcome::kPass;
  EXPECT_EQ(r.FirstProblem()->name, "nvme");
  r.results[4].outcome = Outcome::kWarn;
  EXPECT_EQ(r.FirstProblem(), nullptr);
}

TEST(ReportTest, HealthyNhcLogEndsWithExitCodeZero) {
  HealthReport r;
  r.results = {{"cpu", Outcome::kPass, "ok"}, {"memory", Outcome::kWarn, "low"}};
  r.overall = Overall(r.results);
  EXPECT_EQ(r.RenderNhcLog(),
            "SUCCESS:  nhc:  Health check passed:  cpu: ok\n"
            "WARNING:  nhc:  Nearing a failure threshold:  memory: low\n"
            "Health checks completed with exit code: 0.\n");
}

TEST(ReportTest, Table) {
  EXPECT_EQ(Sample().RenderTable(), R"golden(check      status  measured  threshold    message
---------  ------  --------  -----------  ------------------------------------------
cpu        pass    96        == 96        2 sockets, 96 cores, 96 threads
memory     warn    1.80 TiB  >= 1.79 TiB  1.80 TiB, near the minimum
gpu_count  fail    7         == 8         7 GPUs <found> & "one" missing replace it
swap       skip                           skipped (--skip)
nvme       error                          timed out after 10 s: the probe was killed
verdict: fail: 1 passed, 1 warning, 1 failed, 1 error, 1 skipped (profile generic, 1.50 s)
first problem: gpu_count: 7 GPUs <found> & "one" missing replace it
)golden");
}

TEST(ReportTest, NhcLog) {
  EXPECT_EQ(Sample().RenderNhcLog(),
            R"golden(SUCCESS:  nhc:  Health check passed:  cpu: 2 sockets, 96 cores, 96 threads
WARNING:  nhc:  Nearing a failure threshold:  memory: 1.80 TiB, near the minimum
ERROR:  nhc:  Health check failed:  gpu_count: 7 GPUs <found> & "one" missing replace it FaultCode: NHC2009
SUCCESS:  nhc:  Health check passed:  swap: skipped (--skip)
ERROR:  nhc:  Health check failed:  nvme: timed out after 10 s: the probe was killed FaultCode: NHCNA
Health checks completed with exit code: 1.
)golden");
}

TEST(ReportTest, JUnit) {
  EXPECT_EQ(Sample().RenderJUnit(), R"golden(<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="gantry.health" tests="5" failures="1" errors="1" skipped="1" time="1.500" timestamp="2027-01-15T08:00:00" hostname="node-1">
  <properties>
    <property name="profile" value="generic"/>
    <property name="vm_size" value="Standard_ND96isr_H100_v5"/>
  </properties>
  <testcase classname="gantry.health.generic" name="cpu" time="0.001"/>
  <testcase classname="gantry.health.generic" name="memory" time="0.002">
    <system-out>warn: 1.80 TiB, near the minimum</system-out>
  </testcase>
  <testcase classname="gantry.health.generic" name="gpu_count" time="0.250">
    <failure message="7 GPUs &lt;found&gt; &amp; &quot;one&quot; missing&#10;replace it" type="NHC2009">7 GPUs &lt;found&gt; &amp; &quot;one&quot; missing
replace it
measured: 7; threshold: == 8</failure>
  </testcase>
  <testcase classname="gantry.health.generic" name="swap" time="0.000">
    <skipped message="skipped (--skip)"/>
  </testcase>
  <testcase classname="gantry.health.generic" name="nvme" time="10.000">
    <error message="timed out after 10 s: the probe was killed" type="NHCNA">timed out after 10 s: the probe was killed</error>
  </testcase>
</testsuite>
)golden");
}

TEST(ReportTest, Json) {
  EXPECT_EQ(Sample().ToJson().dump(1), R"golden({
 "report": "gantry.health",
 "version": 1,
 "profile": "generic",
 "vm_size": "Standard_ND96isr_H100_v5",
 "hostname": "node-1",
 "timestamp": "2027-01-15T08:00:00Z",
 "elapsed_s": 1.5,
 "overall": "fail",
 "results": [
  {
   "name": "cpu",
   "outcome": "pass",
   "message": "2 sockets, 96 cores, 96 threads",
   "measured": "96",
   "threshold": "== 96",
   "fault_code": "",
   "seconds": 0.001
  },
  {
   "name": "memory",
   "outcome": "warn",
   "message": "1.80 TiB, near the minimum",
   "measured": "1.80 TiB",
   "threshold": ">= 1.79 TiB",
   "fault_code": "",
   "seconds": 0.002
  },
  {
   "name": "gpu_count",
   "outcome": "fail",
   "message": "7 GPUs <found> & \"one\" missing\nreplace it",
   "measured": "7",
   "threshold": "== 8",
   "fault_code": "NHC2009",
   "seconds": 0.25
  },
  {
   "name": "swap",
   "outcome": "skip",
   "message": "skipped (--skip)",
   "measured": "",
   "threshold": "",
   "fault_code": "",
   "seconds": 0.0
  },
  {
   "name": "nvme",
   "outcome": "error",
   "message": "timed out after 10 s: the probe was killed",
   "measured": "",
   "threshold": "",
   "fault_code": "NHCNA",
   "seconds": 10.0
  }
 ]
})golden");
}

}  // namespace
}  // namespace gantry::health
