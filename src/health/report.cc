// HealthReport renderers: JSON, the human table, NHC log lines and JUnit XML.
#include <fmt/format.h>

#include <ctime>

#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/health/check.h"

namespace gantry::health {
namespace {

constexpr int kReportVersion = 1;


// One log line per result: NHC parsers split on newlines.
std::string OneLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  return out;
}


std::string Plural(int n, std::string_view one) {
  return fmt::format("{} {}{}", n, one, n == 1 ? "" : "s");
}

struct Counts {
  int pass = 0, warn = 0, fail = 0, skip = 0, error = 0;
};

Counts Count(const std::vector<CheckResult>& results) {
  Counts c;
  for (const auto& r : results) {
    switch (r.outcome) {
      case Outcome::kPass:
        ++c.pass;
        break;
      case Outcome::kWarn:
        ++c.warn;
        break;
      case Outcome::kFail:
        ++c.fail;
        break;
      case Outcome::kSkip:
        ++c.skip;
        break;
      case Outcome::kError:
        ++c.error;
        break;
    }
  }
  return c;
}

// The exit code `gantry health` uses: errors count like failures.
int ExitCode(Outcome overall) {
  return (overall == Outcome::kFail || overall == Outcome::kError) ? 1 : 0;
}

std::string FaultCodeOf(const CheckResult& r) {
  if (!r.fault_code.empty()) return r.fault_code;
  return r.outcome == Outcome::kError ? "NHCNA" : "";
}

}  // namespace

Json HealthReport::ToJson() const {
  Json j;
  j["report"] = "gantry.health";
  j["version"] = kReportVersion;
  j["profile"] = profile;
  j["vm_size"] = vm_size;
  j["hostname"] = hostname;
  j["timestamp"] = FormatUtc(timestamp, "%Y-%m-%dT%H:%M:%SZ");
  j["elapsed_s"] = elapsed_s;
  j["overall"] = std::string(OutcomeName(overall));
  Json results_json = Json::array();
  for (const auto& r : results) results_json.push_back(r.ToJson());
  j["results"] = std::move(results_json);
  return j;
}

std::string HealthReport::RenderTable() const {
  Table t({"check", "status", "measured", "threshold", "message"});
  for (const auto& r : results) {
    t.AddRow(
        {r.name, std::string(OutcomeName(r.outcome)), r.measured, r.threshold,
         // Many checks' message is their measurement; say it once.
         r.message == r.measured ? std::string() : OneLine(r.message)});
  }
  Counts c = Count(results);
  std::string out = t.Render();
  out +=
      fmt::format("verdict: {}: {} passed, {}, {} failed, {}, {} skipped (profile {}, {:.2f} s)\n",
                  OutcomeName(overall), c.pass, Plural(c.warn, "warning"), c.fail,
                  Plural(c.error, "error"), c.skip, profile.empty() ? "-" : profile, elapsed_s);
  if (const CheckResult* p = FirstProblem()) {
    out += fmt::format("first problem: {}: {}\n", p->name, OneLine(p->message));
  }
  return out;
}

std::string HealthReport::RenderNhcLog() const {
  std::string out;
  for (const auto& r : results) {
    std::string msg = OneLine(r.message);
    switch (r.outcome) {
      case Outcome::kPass:
        out += fmt::format("SUCCESS:  nhc:  Health check passed:  {}: {}\n", r.name, msg);
        break;
      case Outcome::kSkip:
        // NHC has no "skipped"; a skip is not a problem, so it is a SUCCESS
        // line that says so.
        if (!msg.starts_with("skipped")) msg = "skipped: " + msg;
        out += fmt::format("SUCCESS:  nhc:  Health check passed:  {}: {}\n", r.name, msg);
        break;
      case Outcome::kWarn:
        out += fmt::format("WARNING:  nhc:  Nearing a failure threshold:  {}: {}\n", r.name, msg);
        break;
      case Outcome::kFail:
      case Outcome::kError: {
        std::string code = FaultCodeOf(r);
        out += fmt::format("ERROR:  nhc:  Health check failed:  {}: {}{}\n", r.name, msg,
                           code.empty() ? "" : " FaultCode: " + code);
        break;
      }
    }
  }
  out += fmt::format("Health checks completed with exit code: {}.\n", ExitCode(overall));
  return out;
}

std::string HealthReport::RenderJUnit() const {
  Counts c = Count(results);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuite name=\"gantry.health\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "skipped=\"{}\" time=\"{:.3f}\" timestamp=\"{}\" hostname=\"{}\">\n",
      results.size(), c.fail, c.error, c.skip, elapsed_s, FormatUtc(timestamp, "%Y-%m-%dT%H:%M:%S"),
      EscapeMarkup(hostname));
  out += fmt::format("  <properties>\n    <property name=\"profile\" value=\"{}\"/>\n",
                     EscapeMarkup(profile));
  out += fmt::format("    <property name=\"vm_size\" value=\"{}\"/>\n  </properties>\n",
                     EscapeMarkup(vm_size));
  const std::string classname = EscapeMarkup("gantry.health." + (profile.empty() ? "-" : profile));
  for (const auto& r : results) {
    out += fmt::format("  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", classname,
                       EscapeMarkup(r.name), r.seconds);
    std::string detail;
    if (!r.measured.empty()) detail += "measured: " + r.measured;
    if (!r.threshold.empty())
      detail += (detail.empty() ? "" : "; ") + ("threshold: " + r.threshold);
    switch (r.outcome) {
      case Outcome::kPass:
        out += "/>\n";
        break;
      case Outcome::kWarn:
        out += fmt::format(">\n    <system-out>warn: {}</system-out>\n  </testcase>\n",
                           EscapeMarkup(r.message, false));
        break;
      case Outcome::kSkip:
        out +=
            fmt::format(">\n    <skipped message=\"{}\"/>\n  </testcase>\n", EscapeMarkup(r.message));
        break;
      case Outcome::kFail:
      case Outcome::kError: {
        const char* tag = r.outcome == Outcome::kFail ? "failure" : "error";
        std::string code = FaultCodeOf(r);
        out +=
            fmt::format(">\n    <{} message=\"{}\" type=\"{}\">{}</{}>\n  </testcase>\n", tag,
                        EscapeMarkup(r.message), EscapeMarkup(code.empty() ? tag : code),
                        EscapeMarkup(r.message + (detail.empty() ? "" : "\n" + detail), false), tag);
        break;
      }
    }
  }
  out += "</testsuite>\n";
  return out;
}

const CheckResult* HealthReport::FirstProblem() const {
  for (const auto& r : results) {
    if (r.outcome == Outcome::kFail) return &r;
  }
  for (const auto& r : results) {
    if (r.outcome == Outcome::kError) return &r;
  }
  return nullptr;
}

}  // namespace gantry::health
