// DeriveSignals: node_exporter / dcgm-exporter families -> the agent's Signals
// (names and units in gantry/agent/snapshot.h).
//
// Rates come from counter deltas between two snapshots matched by their full
// label set; a series that is new, or whose counter went down (reset, device
// re-plugged), gives no value for that interval rather than a spike.
#include <algorithm>
#include <cmath>
#include <string>

#include "gantry/agent/snapshot.h"

namespace gantry::agent {
namespace {

std::string_view Label(const metrics::Labels& labels, std::string_view name) {
  for (const auto& [k, v] : labels) {
    if (k == name) return v;
  }
  return {};
}

// The series of `prev` with exactly `labels`; tries the same index first
// because collectors emit series in a stable order.
const Series* Match(const Family& prev, size_t hint, const metrics::Labels& labels) {
  if (hint < prev.series.size() && prev.series[hint].labels == labels) return &prev.series[hint];
  for (const Series& s : prev.series) {
    if (s.labels == labels) return &s;
  }
  return nullptr;
}

// Gauge family without labels (node_load1, node_memory_*): its first value.
bool Scalar(const Snapshot& snap, std::string_view name, double* out) {
  const Family* f = snap.Find(name);
  if (!f || f->series.empty()) return false;
  *out = f->series.front().value;
  return std::isfinite(*out);
}

void Push(std::vector<Signal>* out, std::string name, metrics::Labels labels, double v) {
  if (!std::isfinite(v)) return;
  out->push_back(Signal{std::move(name), std::move(labels), v});
}

double Clamp100(double v) { return std::clamp(v, 0.0, 100.0); }

void CpuUtilization(const Snapshot& prev, const Snapshot& cur, std::vector<Signal>* out) {
  const Family* c = cur.Find("node_cpu_seconds_total");
  const Family* p = prev.Find("node_cpu_seconds_total");
  if (!c || !p) return;
  double total = 0, idle = 0;
  for (size_t i = 0; i < c->series.size(); ++i) {
    const Series& s = c->series[i];
    const Series* ps = Match(*p, i, s.labels);
    if (!ps) continue;  // a CPU that came online: counted from the next interval
    double d = s.value - ps->value;
    if (d < 0) return;  // reset: the whole interval is unreliable
    total += d;
    std::string_view mode = Label(s.labels, "mode");
    if (mode == "idle" || mode == "iowait" || mode == "steal") idle += d;
  }
  if (total <= 0) return;
  Push(out, "cpu_utilization", {}, Clamp100(100.0 * (1.0 - idle / total)));
}

// Per-device rate of a counter family, keyed by `key_label` only.
void DeviceRates(const Snapshot& prev, const Snapshot& cur, double dt_s, std::string_view family,
                 std::string_view key_label, const char* signal, bool skip_lo,
                 std::vector<Signal>* out) {
  const Family* c = cur.Find(family);
  const Family* p = prev.Find(family);
  if (!c || !p) return;
  for (size_t i = 0; i < c->series.size(); ++i) {
    const Series& s = c->series[i];
    std::string_view dev = Label(s.labels, key_label);
    if (skip_lo && dev == "lo") continue;
    const Series* ps = Match(*p, i, s.labels);
    if (!ps) continue;
    double d = s.value - ps->value;
    if (d < 0) continue;
    Push(out, signal, {{std::string(key_label), std::string(dev)}}, d / dt_s);
  }
}

// Per-GPU gauges keyed by the `gpu` label.
void GpuGauge(const Snapshot& cur, std::string_view family, const char* signal,
              std::vector<Signal>* out) {
  const Family* f = cur.Find(family);
  if (!f) return;
  for (const Series& s : f->series) {
    Push(out, signal, {{"gpu", std::string(Label(s.labels, "gpu"))}}, s.value);
  }
}

}  // namespace

std::vector<Signal> DeriveSignals(const Snapshot* prev, const Snapshot& cur) {
  std::vector<Signal> out;
  out.reserve(32);

  const double dt_s = prev ? static_cast<double>(cur.time_ms - prev->time_ms) / 1000.0 : 0;
  const bool rates = prev && dt_s > 0;
  if (rates) CpuUtilization(*prev, cur, &out);

  double v = 0;
  if (Scalar(cur, "node_load1", &v)) Push(&out, "load1", {}, v);

  double total = 0, avail = 0;
  if (Scalar(cur, "node_memory_MemTotal_bytes", &total) &&
      Scalar(cur, "node_memory_MemAvailable_bytes", &avail) && total > 0) {
    Push(&out, "memory_used_percent", {}, Clamp100(100.0 * (1.0 - avail / total)));
  }
  // No swap configured: no signal (0% of nothing would read as "healthy swap").
  if (Scalar(cur, "node_memory_SwapTotal_bytes", &total) &&
      Scalar(cur, "node_memory_SwapFree_bytes", &avail) && total > 0) {
    Push(&out, "swap_used_percent", {}, Clamp100(100.0 * (1.0 - avail / total)));
  }

  if (rates) {
    DeviceRates(*prev, cur, dt_s, "node_network_receive_bytes_total", "device",
                "network_receive_bytes_per_second", true, &out);
    DeviceRates(*prev, cur, dt_s, "node_network_transmit_bytes_total", "device",
                "network_transmit_bytes_per_second", true, &out);
    DeviceRates(*prev, cur, dt_s, "node_disk_read_bytes_total", "device",
                "disk_read_bytes_per_second", false, &out);
    DeviceRates(*prev, cur, dt_s, "node_disk_written_bytes_total", "device",
                "disk_write_bytes_per_second", false, &out);
  }

  // Filesystems: used = size - avail (what df and the usual dashboards show);
  // a mountpoint listed twice (bind mounts) counts once; size 0 (pseudo
  // filesystems) is skipped.
  if (const Family* size = cur.Find("node_filesystem_size_bytes")) {
    const Family* av = cur.Find("node_filesystem_avail_bytes");
    std::vector<std::string> seen;
    for (size_t i = 0; av && i < size->series.size(); ++i) {
      const Series& s = size->series[i];
      if (!(s.value > 0)) continue;
      const Series* a = Match(*av, i, s.labels);
      if (!a) continue;
      std::string mp(Label(s.labels, "mountpoint"));
      if (std::find(seen.begin(), seen.end(), mp) != seen.end()) continue;
      seen.push_back(mp);
      Push(&out, "filesystem_used_percent", {{"mountpoint", mp}},
           Clamp100(100.0 * (1.0 - a->value / s.value)));
    }
  }

  GpuGauge(cur, "DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", &out);
  if (const Family* used = cur.Find("DCGM_FI_DEV_FB_USED")) {
    const Family* fb_free = cur.Find("DCGM_FI_DEV_FB_FREE");
    for (size_t i = 0; fb_free && i < used->series.size(); ++i) {
      const Series& u = used->series[i];
      std::string_view gpu = Label(u.labels, "gpu");
      const Series* f = nullptr;
      for (const Series& s : fb_free->series) {
        if (Label(s.labels, "gpu") == gpu) {
          f = &s;
          break;
        }
      }
      if (!f || !(u.value + f->value > 0)) continue;
      Push(&out, "gpu_memory_used_percent", {{"gpu", std::string(gpu)}},
           Clamp100(100.0 * u.value / (u.value + f->value)));
    }
  }
  GpuGauge(cur, "DCGM_FI_DEV_POWER_USAGE", "gpu_power_watts", &out);
  GpuGauge(cur, "DCGM_FI_DEV_GPU_TEMP", "gpu_temperature_celsius", &out);
  GpuGauge(cur, "DCGM_FI_DEV_XID_ERRORS", "gpu_xid_errors", &out);
  return out;
}

}  // namespace gantry::agent
