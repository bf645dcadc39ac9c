// The agent's data model: one scrape of the node (a Snapshot of metric
// families, named as node_exporter and dcgm-exporter name them), and the
// derived Signals (rates and percentages) that the history, alert rules, idle
// detection, dashboard and utilisation report work on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/metrics.h"  // metrics::Labels

namespace gantry::agent {

// kUntyped: node_exporter's netstat and vmstat families, and textfile samples
// without a TYPE line ("untyped" in the text format, "unknown" in OpenMetrics).
enum class MetricType { kCounter, kGauge, kUntyped };

struct Series {
  metrics::Labels labels;  // sorted by name
  double value = 0;
};

struct Family {
  std::string name;  // e.g. "node_cpu_seconds_total", "DCGM_FI_DEV_GPU_UTIL"
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<Series> series;
};

// One collection. `time_ms` is the clock's wall time (Unix ms) when it was taken.
struct Snapshot {
  int64_t time_ms = 0;
  std::vector<Family> families;  // sorted by name

  // The family called `name`, or nullptr.
  const Family* Find(std::string_view name) const;
};

// A derived value, e.g. {"cpu_utilization", {}, 37.5} or
// {"gpu_utilization", {{"gpu","0"}}, 98}. Names and units:
//   cpu_utilization                    percent busy over all CPUs (100 - idle - iowait - steal)
//   load1                              1-minute load average
//   memory_used_percent                100 * (1 - MemAvailable / MemTotal)
//   swap_used_percent
//   network_receive_bytes_per_second   {device}  (physical and virtual NICs except lo)
//   network_transmit_bytes_per_second  {device}
//   disk_read_bytes_per_second         {device}
//   disk_write_bytes_per_second        {device}
//   filesystem_used_percent            {mountpoint}
//   gpu_utilization                    {gpu} percent (DCGM_FI_DEV_GPU_UTIL)
//   gpu_memory_used_percent            {gpu}
//   gpu_power_watts                    {gpu}
//   gpu_temperature_celsius            {gpu}
//   gpu_xid_errors                     {gpu} last XID value (0 = none)
// Rates need two snapshots; a counter that went backwards (reset) yields no
// value for that interval.
struct Signal {
  std::string name;
  metrics::Labels labels;
  double value = 0;
};

// The signals between two consecutive snapshots (`prev` may be null: then
// only the gauge-derived signals are produced). Defined in src/agent/signals.cc.
std::vector<Signal> DeriveSignals(const Snapshot* prev, const Snapshot& cur);

// "name{a=\"x\",b=\"y\"}" - the key one series is stored and shown under.
std::string SeriesKey(std::string_view name, const metrics::Labels& labels);

}  // namespace gantry::agent
