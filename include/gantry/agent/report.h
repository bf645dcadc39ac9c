// `gantry report utilization`: how busy this node was, from the agent's
// History, and whether a different VM size would fit it better.
//
//   ASSIGN_OR_RETURN(auto history, agent::History::Open(path));
//   agent::UtilizationOptions opt;
//   opt.to_ms = now_ms;  opt.from_ms = now_ms - 7 * 86400'000;
//   ASSIGN_OR_RETURN(agent::UtilizationReport r, agent::BuildUtilizationReport(*history, opt));
//   std::cout << agent::RenderUtilizationTable(r);
//
// Statistics (per series in [from_ms, to_ms]): p50 and p95 by linear
// interpolation between closest ranks (numpy's default), max and mean of the
// stored samples (one per history bucket, so samples weigh equal time).
//
// Busy hours: a history bucket is busy when CPU utilisation or any GPU's
// utilisation is at or above `busy_percent`; the hour-of-day profile (UTC plus
// `utc_offset_minutes`) is the share of busy buckets per hour, and a busy hour
// is one whose share is at least 0.5. Idle share: the share of buckets where
// CPU and every GPU are below `idle_percent` (the idle detector's defaults).
//
// Right-sizing rules (each advice names its rule, the measured value and the
// threshold; defaults in UtilizationOptions):
//   gpu_underused      max over GPUs of p95 gpu_utilization < gpu_low_p95 (30%):
//                      "GPU p95 utilisation 11%: a smaller size would do"
//   gpu_idle_devices   some GPUs have p95 < idle_percent while others are busy:
//                      "GPU 2, 3 p95 utilisation under 5%: a size with fewer GPUs would do"
//   gpu_memory_full    any GPU's p95 gpu_memory_used_percent >= gpu_memory_high_p95 (95%)
//   cpu_bound          p95 cpu_utilization >= cpu_high_p95 (90%):
//                      "CPU p95 95%: CPU-bound, a size with more vCPUs or faster CPUs"
//   cpu_underused      no GPUs and p95 cpu_utilization < cpu_low_p95 (20%)
//   memory_underused   p95 memory_used_percent < memory_low_p95 (30%):
//                      "memory p95 23% of 1.8 TiB: a size with less memory would do"
//   memory_full        p95 memory_used_percent >= memory_high_p95 (90%), or any swap use
//                      at p95 >= 10%
//   mostly_idle        idle share >= mostly_idle_share (0.5): suggests idle shutdown
//   short_history      less than min_coverage (24 h) of CPU samples: advice is tentative
// No advice at all means nothing stood out.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gantry/agent/history.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::agent {

struct UtilizationOptions {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::string hostname;  // shown in the report; empty -> none
  // MemTotal in bytes, for the memory advice text ("of 1.8 TiB"); unset -> left out.
  std::optional<uint64_t> memory_total_bytes;
  int utc_offset_minutes = 0;  // busy-hours profile in local time when set

  double busy_percent = 50;
  double idle_percent = 5;
  double gpu_low_p95 = 30;
  double gpu_memory_high_p95 = 95;
  double cpu_high_p95 = 90;
  double cpu_low_p95 = 20;
  double memory_low_p95 = 30;
  double memory_high_p95 = 90;
  double swap_high_p95 = 10;
  double mostly_idle_share = 0.5;
  int64_t min_coverage_ms = 24 * 3600'000;
};

struct SignalSummary {
  std::string name;  // e.g. "gpu_utilization"
  metrics::Labels labels;
  std::string unit;  // "%", "B/s", "W", "°C", ""
  size_t samples = 0;
  double p50 = 0, p95 = 0, max = 0, mean = 0;
  int64_t first_ms = 0, last_ms = 0;
  // Utilisation signals only (cpu_utilization, gpu_utilization): share of
  // samples at or above busy_percent; NaN for others.
  double busy_share = 0;
  // Up to 240 (time, mean) points for plots.
  std::vector<Point> plot;
};

struct Advice {
  std::string rule;      // "gpu_underused", ...
  std::string resource;  // "gpu", "cpu", "memory", "node"
  std::string text;      // one line, no trailing period
  double value = 0;      // the measured value the rule looked at
  double threshold = 0;
};

struct UtilizationReport {
  int64_t from_ms = 0, to_ms = 0;
  std::string hostname;
  std::optional<uint64_t> memory_total_bytes;
  UtilizationOptions options;
  std::vector<SignalSummary> signals;  // in a fixed order: CPU, memory, GPU, network, disk
  // Busy share per hour of day; NaN where the hour has no samples.
  std::array<double, 24> busy_by_hour{};
  std::vector<int> busy_hours;  // hours with share >= 0.5, ascending
  size_t buckets = 0;           // buckets with a CPU or GPU utilisation sample
  double idle_share = 0;        // NaN without samples
  std::vector<Advice> advice;
};

// p-th percentile (0..100) of `values` (unsorted; copied) by linear
// interpolation between closest ranks; NaN when empty.
double Percentile(std::vector<double> values, double p);

// Reads every reported signal from `history` for [from_ms, to_ms]. Errors:
// InvalidArgument when from_ms >= to_ms; History errors as they come.
Result<UtilizationReport> BuildUtilizationReport(History& history,
                                                 const UtilizationOptions& options);

// {"report": "gantry.utilization", "version": 1, "from", "to" (ISO-8601 UTC),
//  "from_ms", "to_ms", "hostname", "memory_total_bytes", "thresholds": {...},
//  "signals": [{"name", "labels", "unit", "samples", "p50", "p95", "max",
//  "mean", "busy_share"}], "busy_hours": {"threshold_percent", "utc_offset_minutes",
//  "by_hour": [24 x share|null], "hours": [..]}, "idle_share", "advice":
//  [{"rule", "resource", "text", "value", "threshold"}]}. NaN -> null.
Json UtilizationToJson(const UtilizationReport& report);
// Terminal tables: statistics, busy hours, advice.
std::string RenderUtilizationTable(const UtilizationReport& report);
// One self-contained HTML page (inline CSS and SVG, no scripts, nothing
// external); every label from the data is escaped.
std::string RenderUtilizationHtml(const UtilizationReport& report);

}  // namespace gantry::agent
