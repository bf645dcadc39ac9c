// `gantry report utilization`: flag parsing and printing only; the work is in
// gantry::agent (include/gantry/agent/report.h).
//
// Exit codes: 0 report written (advice or not), 2 usage, missing or unreadable
// history.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli.h"
#include "gantry/agent/agent.h"
#include "gantry/agent/history.h"
#include "gantry/agent/report.h"
#include "gantry/core/json.h"
#include "gantry/core/units.h"

namespace gantry::cli {
namespace {

struct ReportFlags {
  CommonFlags common;
  std::string since = "7d";
  std::string history = agent::DefaultHistoryPath();  // as `gantry agent` uses it
  std::string html;
  double busy_percent = 50;
  double idle_percent = 5;
  int utc_offset_minutes = 0;
};

// MemTotal of this node (the history is local, so it describes this node).
std::optional<uint64_t> MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

int RunUtilization(const ReportFlags& f) {
  auto since = ParseDuration(f.since);
  if (!since.ok()) return Fail("report utilization", since.status().WithContext("--since"));
  if (since->count() <= 0)
    return Fail("report utilization",
                InvalidArgument("--since must be longer than 0 (for example 7d)"));
  struct stat sb;
  // History::Open would create an empty database; a report needs the agent's.
  if (f.history != ":memory:" && ::stat(f.history.c_str(), &sb) != 0) {
    return Fail("report utilization",
                NotFound("no agent history at " + f.history +
                         "; pass --history PATH (history.path in agent.yaml) or run `gantry "
                         "agent` first"));
  }
  auto history = agent::History::Open(f.history);
  if (!history.ok()) return Fail("report utilization", history.status());

  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  agent::UtilizationOptions opt;
  opt.to_ms = now_ms;
  opt.from_ms = now_ms - std::chrono::duration_cast<std::chrono::milliseconds>(*since).count();
  opt.hostname = Hostname();
  opt.memory_total_bytes = MemTotalBytes();
  opt.busy_percent = f.busy_percent;
  opt.idle_percent = f.idle_percent;
  opt.utc_offset_minutes = f.utc_offset_minutes;
  auto report = agent::BuildUtilizationReport(**history, opt);
  if (!report.ok()) return Fail("report utilization", report.status());

  if (!f.html.empty()) {
    Status s = WriteFileAtomic(f.html, agent::RenderUtilizationHtml(*report));
    if (!s.ok()) return Fail("report utilization", s.WithContext("--html"));
  }
  if (f.common.json) {
    std::cout << agent::UtilizationToJson(*report).dump(2, ' ', false,
                                                        Json::error_handler_t::replace)
              << "\n";
  } else {
    std::cout << agent::RenderUtilizationTable(*report);
    if (!f.html.empty()) std::cout << "\nWrote " << f.html << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterReport(CLI::App& app, Action* action) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* report = app.add_subcommand(
      "report", "Reports from the agent's local history (gantry report utilization --since 7d)");
  report->require_subcommand(1);
  CLI::App* util = report->add_subcommand(
      "utilization",
      "CPU/GPU/memory/network percentiles, busy hours, idle share and right-sizing advice "
      "(exit 0 ok, 2 usage or no history)");
  util->alias("utilisation");
  AddCommonFlags(util, &flags->common);
  util->add_option("--since", flags->since, "How far back: 24h, 7d, 30d")->capture_default_str();
  util->add_option("--history", flags->history, "The agent's history database")
      ->capture_default_str();
  util->add_option("--html", flags->html,
                   "Also write a self-contained HTML page with plots to this file");
  util->add_option("--busy-percent", flags->busy_percent,
                   "CPU or GPU utilisation at or above this counts as busy (busy hours)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  util->add_option("--idle-percent", flags->idle_percent,
                   "CPU and every GPU below this counts as idle (idle share)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  util->add_option("--utc-offset-minutes", flags->utc_offset_minutes,
                   "Show busy hours in local time, e.g. 60 for UTC+01:00")
      ->capture_default_str()
      ->check(CLI::Range(-14 * 60, 14 * 60));
  util->callback([flags, action] {
    *action = [flags] {
      if (!ApplyCommonFlags(flags->common)) return kExitUsage;
      return RunUtilization(*flags);
    };
  });
}

}  // namespace gantry::cli
