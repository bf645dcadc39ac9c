// `gantry report utilization`: statistics, busy hours, idle share and
// right-sizing advice from the agent's History (include/gantry/agent/report.h).
#include "gantry/agent/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>

#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry::agent {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kPlotPoints = 240;

struct SignalSpec {
  std::string_view name;
  std::string_view unit;
  std::string_view title;  // for tables and plots
};

// The report's signals in the order they are shown.
constexpr SignalSpec kSignals[] = {
    {"cpu_utilization", "%", "CPU utilisation"},
    {"load1", "", "load (1 min)"},
    {"memory_used_percent", "%", "memory used"},
    {"swap_used_percent", "%", "swap used"},
    {"gpu_utilization", "%", "GPU utilisation"},
    {"gpu_memory_used_percent", "%", "GPU memory used"},
    {"gpu_power_watts", "W", "GPU power"},
    {"gpu_temperature_celsius", "°C", "GPU temperature"},
    {"network_receive_bytes_per_second", "B/s", "network receive"},
    {"network_transmit_bytes_per_second", "B/s", "network transmit"},
    {"disk_read_bytes_per_second", "B/s", "disk read"},
    {"disk_write_bytes_per_second", "B/s", "disk write"},
};

std::string_view TitleOf(std::string_view name) {
  for (const SignalSpec& s : kSignals) {
    if (s.name == name) return s.title;
  }
  return name;
}

bool IsUtilization(std::string_view name) {
  return name == "cpu_utilization" || name == "gpu_utilization";
}

std::string LabelOf(const metrics::Labels& labels, std::string_view key) {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

// "gpu=0,device=eth0" style text for tables.
std::string LabelsText(const metrics::Labels& labels) {
  std::string s;
  for (const auto& [k, v] : labels) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

// GPU "10" sorts after GPU "2".
bool NaturalLess(const std::string& a, const std::string& b) {
  bool an = !a.empty() && std::all_of(a.begin(), a.end(), ::isdigit);
  bool bn = !b.empty() && std::all_of(b.begin(), b.end(), ::isdigit);
  if (an && bn && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

bool LabelsLess(const metrics::Labels& a, const metrics::Labels& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i].first != b[i].first) return a[i].first < b[i].first;
    if (a[i].second != b[i].second) return NaturalLess(a[i].second, b[i].second);
  }
  return a.size() < b.size();
}

std::string Pct(double v) {
  if (std::isnan(v)) return "-";
  // "11%", "5%", "0.5%": one decimal only where it says something.
  bool whole = std::fabs(v) >= 10 || std::fabs(v - std::round(v)) < 0.05;
  return whole ? fmt::format("{:.0f}%", v) : fmt::format("{:.1f}%", v);
}

std::string ValueText(double v, std::string_view unit) {
  if (std::isnan(v)) return "-";
  if (unit == "%") return Pct(v);
  if (unit == "B/s") return FormatSize(uint64_t(std::max(0.0, std::round(v)))) + "/s";
  std::string n = std::fabs(v) >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}", v);
  return unit.empty() ? n : n + " " + std::string(unit);
}

std::string Utc(int64_t ms, const char* format = "%Y-%m-%dT%H:%M:%SZ") {
  return FormatUtc(std::chrono::system_clock::time_point(std::chrono::milliseconds(ms)), format);
}

Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

std::vector<Point> PlotPoints(const std::vector<Point>& pts, int64_t from_ms, int64_t to_ms) {
  if (pts.size() <= kPlotPoints) return pts;
  std::vector<Point> out;
  const double width = std::max(1.0, double(to_ms - from_ms) / double(kPlotPoints));
  size_t i = 0;
  while (i < pts.size()) {
    auto bucket_of = [&](int64_t t) {
      return std::clamp<int64_t>(int64_t(std::floor(double(t - from_ms) / width)), 0,
                                 int64_t(kPlotPoints) - 1);
    };
    int64_t b = bucket_of(pts[i].time_ms);
    int64_t t0 = pts[i].time_ms, tsum = 0;
    double sum = 0;
    size_t n = 0;
    for (; i < pts.size() && bucket_of(pts[i].time_ms) == b; ++i, ++n) {
      sum += pts[i].value;
      tsum += pts[i].time_ms - t0;
    }
    out.push_back({t0 + tsum / int64_t(n), sum / double(n)});
  }
  return out;
}

SignalSummary Summarise(const SeriesPoints& s, std::string_view unit,
                        const UtilizationOptions& opt) {
  SignalSummary r;
  r.name = s.name;
  r.labels = s.labels;
  r.unit = std::string(unit);
  std::vector<double> v;
  v.reserve(s.points.size());
  for (const Point& p : s.points) {
    if (std::isfinite(p.value)) v.push_back(p.value);
  }
  r.samples = v.size();
  r.busy_share = IsUtilization(s.name) ? 0 : kNaN;
  if (v.empty()) {
    r.p50 = r.p95 = r.max = r.mean = kNaN;
    if (IsUtilization(s.name)) r.busy_share = kNaN;
    return r;
  }
  double sum = 0;
  size_t busy = 0;
  for (double x : v) {
    sum += x;
    if (x >= opt.busy_percent) ++busy;
  }
  r.mean = sum / double(v.size());
  r.max = *std::max_element(v.begin(), v.end());
  std::sort(v.begin(), v.end());
  r.p50 = Percentile(v, 50);
  r.p95 = Percentile(v, 95);
  if (IsUtilization(s.name)) r.busy_share = double(busy) / double(v.size());
  r.first_ms = s.points.front().time_ms;
  r.last_ms = s.points.back().time_ms;
  r.plot = PlotPoints(s.points, opt.from_ms, opt.to_ms);
  return r;
}

// One history bucket's utilisation across CPU and GPUs.
struct Bucket {
  bool has_cpu = false;
  double cpu = 0;
  int gpus = 0;
  double gpu_max = -std::numeric_limits<double>::infinity();
};

void BusyAndIdle(const std::vector<SeriesPoints>& cpu, const std::vector<SeriesPoints>& gpu,
                 const UtilizationOptions& opt, UtilizationReport* r) {
  std::map<int64_t, Bucket> buckets;
  for (const SeriesPoints& s : cpu) {
    for (const Point& p : s.points) {
      if (!std::isfinite(p.value)) continue;
      Bucket& b = buckets[p.time_ms];
      b.has_cpu = true;
      b.cpu = p.value;
    }
  }
  for (const SeriesPoints& s : gpu) {
    for (const Point& p : s.points) {
      if (!std::isfinite(p.value)) continue;
      Bucket& b = buckets[p.time_ms];
      ++b.gpus;
      b.gpu_max = std::max(b.gpu_max, p.value);
    }
  }
  std::array<size_t, 24> total{}, busy{};
  size_t idle = 0;
  for (const auto& [t, b] : buckets) {
    const bool is_busy =
        (b.has_cpu && b.cpu >= opt.busy_percent) || (b.gpus > 0 && b.gpu_max >= opt.busy_percent);
    const bool is_idle =
        (!b.has_cpu || b.cpu < opt.idle_percent) && (b.gpus == 0 || b.gpu_max < opt.idle_percent);
    int64_t local_s = t / 1000 + int64_t(opt.utc_offset_minutes) * 60;
    int64_t sec_of_day = ((local_s % 86400) + 86400) % 86400;
    size_t hour = size_t(sec_of_day / 3600);
    ++total[hour];
    if (is_busy) ++busy[hour];
    if (is_idle) ++idle;
  }
  r->buckets = buckets.size();
  r->idle_share = buckets.empty() ? kNaN : double(idle) / double(buckets.size());
  for (int h = 0; h < 24; ++h) {
    r->busy_by_hour[h] = total[h] ? double(busy[h]) / double(total[h]) : kNaN;
    if (total[h] && r->busy_by_hour[h] >= 0.5) r->busy_hours.push_back(h);
  }
}

std::string GpuList(const std::vector<std::string>& gpus) {
  std::string s;
  for (const std::string& g : gpus) s += (s.empty() ? "" : ", ") + g;
  return s;
}

void AddAdvice(UtilizationReport* r) {
  const UtilizationOptions& o = r->options;
  auto find = [&](std::string_view name) {
    std::vector<const SignalSummary*> out;
    for (const SignalSummary& s : r->signals) {
      if (s.name == name && s.samples > 0) out.push_back(&s);
    }
    return out;
  };
  auto add = [&](std::string rule, std::string resource, std::string text, double value,
                 double threshold) {
    r->advice.push_back({std::move(rule), std::move(resource), std::move(text), value, threshold});
  };

  auto cpu = find("cpu_utilization");
  if (cpu.empty()) {
    add("no_data", "node",
        fmt::format("no CPU samples in the history between {} and {}: is `gantry agent` running "
                    "with history enabled?",
                    Utc(r->from_ms), Utc(r->to_ms)),
        0, 0);
    return;
  }
  const int64_t coverage = cpu[0]->last_ms - cpu[0]->first_ms;
  if (coverage < o.min_coverage_ms) {
    add("short_history", "node",
        fmt::format("only {} of history: advice is tentative; {} or more shows daily patterns",
                    FormatDuration(std::chrono::milliseconds(coverage)),
                    FormatDuration(std::chrono::milliseconds(o.min_coverage_ms))),
        double(coverage) / 3.6e6, double(o.min_coverage_ms) / 3.6e6);
  }

  auto gpu = find("gpu_utilization");
  if (!gpu.empty()) {
    double max_p95 = 0;
    for (const SignalSummary* g : gpu) max_p95 = std::max(max_p95, g->p95);
    if (max_p95 < o.gpu_low_p95) {
      add("gpu_underused", "gpu",
          fmt::format("GPU p95 utilisation {}: a smaller size would do", Pct(max_p95)), max_p95,
          o.gpu_low_p95);
    } else {
      std::vector<std::string> idle;
      double idle_max = 0;
      for (const SignalSummary* g : gpu) {
        if (g->p95 < o.idle_percent) {
          idle.push_back(LabelOf(g->labels, "gpu"));
          idle_max = std::max(idle_max, g->p95);
        }
      }
      if (!idle.empty()) {
        add("gpu_idle_devices", "gpu",
            fmt::format("GPU {} p95 utilisation under {}: a size with fewer GPUs would do",
                        GpuList(idle), Pct(o.idle_percent)),
            idle_max, o.idle_percent);
      }
    }
  }
  std::vector<std::string> full;
  double full_max = 0;
  for (const SignalSummary* g : find("gpu_memory_used_percent")) {
    if (g->p95 >= o.gpu_memory_high_p95) {
      full.push_back(LabelOf(g->labels, "gpu"));
      full_max = std::max(full_max, g->p95);
    }
  }
  if (!full.empty()) {
    add("gpu_memory_full", "gpu",
        fmt::format("GPU {} memory p95 {}: nearly full, a size with more GPU memory would avoid "
                    "out-of-memory errors and offloading",
                    GpuList(full), Pct(full_max)),
        full_max, o.gpu_memory_high_p95);
  }

  const double cpu_p95 = cpu[0]->p95;
  if (cpu_p95 >= o.cpu_high_p95) {
    add("cpu_bound", "cpu",
        fmt::format("CPU p95 {}: CPU-bound, a size with more vCPUs or faster CPUs", Pct(cpu_p95)),
        cpu_p95, o.cpu_high_p95);
  } else if (gpu.empty() && cpu_p95 < o.cpu_low_p95) {
    // On GPU sizes the vCPU count comes with the GPUs; only CPU-only nodes
    // can shrink by CPU alone.
    add("cpu_underused", "cpu",
        fmt::format("CPU p95 {}: a size with fewer vCPUs would do", Pct(cpu_p95)), cpu_p95,
        o.cpu_low_p95);
  }

  auto mem = find("memory_used_percent");
  if (!mem.empty()) {
    const double p95 = mem[0]->p95;
    std::string of =
        r->memory_total_bytes ? " of " + FormatSize(*r->memory_total_bytes) : std::string();
    if (p95 < o.memory_low_p95) {
      add("memory_underused", "memory",
          fmt::format("memory p95 {}{}: a size with less memory would do", Pct(p95), of), p95,
          o.memory_low_p95);
    } else if (p95 >= o.memory_high_p95) {
      add("memory_full", "memory",
          fmt::format("memory p95 {}{}: nearly full, a size with more memory would avoid "
                      "swapping and out-of-memory kills",
                      Pct(p95), of),
          p95, o.memory_high_p95);
    }
  }
  auto swap = find("swap_used_percent");
  if (!swap.empty() && swap[0]->p95 >= o.swap_high_p95) {
    add("memory_full", "memory",
        fmt::format("swap p95 {}: the node swaps, a size with more memory would do",
                    Pct(swap[0]->p95)),
        swap[0]->p95, o.swap_high_p95);
  }

  if (std::isfinite(r->idle_share) && r->idle_share >= o.mostly_idle_share) {
    add("mostly_idle", "node",
        fmt::format("idle {} of the time (CPU{} under {}): stop or deallocate it when idle "
                    "(gantry agent idle shutdown)",
                    Pct(100 * r->idle_share), gpu.empty() ? "" : " and every GPU",
                    Pct(o.idle_percent)),
        r->idle_share, o.mostly_idle_share);
  }
}

// "09:00-18:00, 20:00-21:00" from sorted hours.
std::string HourRanges(const std::vector<int>& hours) {
  std::string s;
  for (size_t i = 0; i < hours.size();) {
    size_t j = i;
    while (j + 1 < hours.size() && hours[j + 1] == hours[j] + 1) ++j;
    s += fmt::format("{}{:02d}:00-{:02d}:00", s.empty() ? "" : ", ", hours[i], hours[j] + 1);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

std::string ZoneText(int offset_minutes) {
  if (offset_minutes == 0) return "UTC";
  return fmt::format("UTC{}{:02d}:{:02d}", offset_minutes < 0 ? '-' : '+',
                     std::abs(offset_minutes) / 60, std::abs(offset_minutes) % 60);
}

// ---- HTML ----------------------------------------------------------------

constexpr std::string_view kPalette[] = {"#2f6fca", "#e8710a", "#1e8e3e", "#d93025",
                                         "#9334e6", "#12a4af", "#b06000", "#5f6368"};

// All series of one signal name as lines in one SVG plot.
std::string LinePlot(const std::vector<const SignalSummary*>& series, const UtilizationReport& r) {
  const double w = 640, h = 150, left = 64, top = 10, bottom = 22, right = 10;
  double peak = 0;
  std::string_view unit = series.empty() ? "" : std::string_view(series[0]->unit);
  for (const SignalSummary* s : series) {
    for (const Point& p : s->plot) {
      if (std::isfinite(p.value)) peak = std::max(peak, p.value);
    }
  }
  if (unit == "%") peak = std::max(peak, 100.0);
  if (peak <= 0) peak = 1;
  const std::string title(TitleOf(series.empty() ? "" : series[0]->name));
  std::string s = fmt::format(
      "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" "
      "height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" aria-label=\"{2}\">",
      w + left + right, h + top + bottom, EscapeMarkup(title + " over time"));
  for (int i = 0; i <= 4; ++i) {
    double y = top + h - h * i / 4;
    s += fmt::format(
        "<line class=\"grid\" x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\"/>", left, y,
        left + w, y);
    s += fmt::format("<text class=\"lbl\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                     left - 4, y + 3, EscapeMarkup(ValueText(peak * i / 4, unit)));
  }
  s += fmt::format("<text class=\"lbl\" x=\"{:.0f}\" y=\"{:.0f}\">{}</text>", left, top + h + 16,
                   EscapeMarkup(Utc(r.from_ms, "%Y-%m-%d %H:%M")));
  s += fmt::format("<text class=\"lbl\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"end\">{}</text>",
                   left + w, top + h + 16, EscapeMarkup(Utc(r.to_ms, "%Y-%m-%d %H:%M")));
  const double span = std::max<double>(1, double(r.to_ms - r.from_ms));
  // Breaks lines across gaps (agent stopped) longer than 3 plot buckets.
  const double gap = 3 * span / double(kPlotPoints);
  for (size_t i = 0; i < series.size(); ++i) {
    std::string d;
    int64_t prev = std::numeric_limits<int64_t>::min();
    for (const Point& p : series[i]->plot) {
      if (!std::isfinite(p.value)) continue;
      double x = left + w * double(p.time_ms - r.from_ms) / span;
      double y = top + h - h * std::min(p.value, peak) / peak;
      bool move = prev == std::numeric_limits<int64_t>::min() || double(p.time_ms - prev) > gap;
      d += fmt::format("{}{:.1f},{:.1f}", move ? (d.empty() ? "M" : " M") : " L", x, y);
      prev = p.time_ms;
    }
    if (!d.empty()) {
      s += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.3\"/>", d,
                       kPalette[i % std::size(kPalette)]);
    }
  }
  s += "</svg>";
  return s;
}

std::string HourPlot(const UtilizationReport& r) {
  const double bw = 24, h = 100, left = 40, top = 10, bottom = 20;
  std::string s = fmt::format(
      "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" "
      "height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" role=\"img\" aria-label=\"busy share by "
      "hour of day\">",
      left + 24 * bw + 10, h + top + bottom);
  for (int i = 0; i <= 2; ++i) {
    double y = top + h - h * i / 2;
    s += fmt::format(
        "<line class=\"grid\" x1=\"{:.0f}\" y1=\"{:.1f}\" x2=\"{:.0f}\" y2=\"{:.1f}\"/>", left, y,
        left + 24 * bw, y);
    s += fmt::format("<text class=\"lbl\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}%</text>",
                     left - 4, y + 3, 50 * i);
  }
  for (int hr = 0; hr < 24; ++hr) {
    double v = r.busy_by_hour[hr];
    double x = left + hr * bw;
    if (std::isfinite(v)) {
      double bh = h * v;
      s += fmt::format(
          "<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"><title>"
          "{:02d}:00 busy {}</title></rect>",
          v >= 0.5 ? "busy" : "calm", x + 2, top + h - bh, bw - 4, bh, hr, Pct(100 * v));
    }
    if (hr % 3 == 0) {
      s += fmt::format("<text class=\"lbl\" x=\"{:.1f}\" y=\"{:.0f}\">{:02d}</text>", x + 2,
                       top + h + 14, hr);
    }
  }
  s += "</svg>";
  return s;
}

constexpr std::string_view kCss = R"css(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid #ddd;padding:.35em .5em;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.advice{padding:.8em 1.2em;border-radius:6px;margin:1em 0;background:#fff6e0;border:1px solid #e0a030}
.advice.none{background:#e1f5e4;border-color:#4caf62}
.advice li{margin:.3em 0}.rule{color:#777;font-size:.85em}
.plot .grid{stroke:#e4e4e4}.plot .lbl{font-size:10px;fill:#555}
.plot .busy{fill:#d93025;fill-opacity:.7}.plot .calm{fill:#2f6fca;fill-opacity:.55}
.key span{display:inline-block;width:.9em;height:.9em;margin:0 .3em 0 1em;vertical-align:middle}
.meta{color:#666;font-size:.85em}
)css";

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return kNaN;
  if (!std::is_sorted(values.begin(), values.end())) std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * double(values.size() - 1);
  const size_t lo = size_t(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - double(lo));
}

Result<UtilizationReport> BuildUtilizationReport(History& history,
                                                 const UtilizationOptions& options) {
  if (options.from_ms >= options.to_ms) {
    return InvalidArgument(fmt::format("utilisation report: the period {} .. {} is empty",
                                       Utc(options.from_ms), Utc(options.to_ms)));
  }
  UtilizationReport r;
  r.from_ms = options.from_ms;
  r.to_ms = options.to_ms;
  r.hostname = options.hostname;
  r.memory_total_bytes = options.memory_total_bytes;
  r.options = options;
  std::vector<SeriesPoints> cpu, gpu;
  for (const SignalSpec& spec : kSignals) {
    ASSIGN_OR_RETURN(std::vector<SeriesPoints> series,
                     history.Query(spec.name, {}, options.from_ms, options.to_ms));
    std::sort(series.begin(), series.end(), [](const SeriesPoints& a, const SeriesPoints& b) {
      return LabelsLess(a.labels, b.labels);
    });
    for (const SeriesPoints& s : series) {
      if (s.points.empty()) continue;
      r.signals.push_back(Summarise(s, spec.unit, options));
    }
    if (spec.name == "cpu_utilization") cpu = std::move(series);
    if (spec.name == "gpu_utilization") gpu = std::move(series);
  }
  BusyAndIdle(cpu, gpu, options, &r);
  AddAdvice(&r);
  return r;
}

Json UtilizationToJson(const UtilizationReport& r) {
  const UtilizationOptions& o = r.options;
  Json j;
  j["report"] = "gantry.utilization";
  j["version"] = 1;
  j["hostname"] = r.hostname;
  j["from"] = Utc(r.from_ms);
  j["to"] = Utc(r.to_ms);
  j["from_ms"] = r.from_ms;
  j["to_ms"] = r.to_ms;
  j["memory_total_bytes"] = r.memory_total_bytes ? Json(*r.memory_total_bytes) : Json(nullptr);
  j["thresholds"] = {{"busy_percent", o.busy_percent},
                     {"idle_percent", o.idle_percent},
                     {"gpu_low_p95", o.gpu_low_p95},
                     {"gpu_memory_high_p95", o.gpu_memory_high_p95},
                     {"cpu_high_p95", o.cpu_high_p95},
                     {"cpu_low_p95", o.cpu_low_p95},
                     {"memory_low_p95", o.memory_low_p95},
                     {"memory_high_p95", o.memory_high_p95},
                     {"swap_high_p95", o.swap_high_p95},
                     {"mostly_idle_share", o.mostly_idle_share},
                     {"min_coverage_s", o.min_coverage_ms / 1000}};
  Json sig = Json::array();
  for (const SignalSummary& s : r.signals) {
    Json labels = Json::object();
    for (const auto& [k, v] : s.labels) labels[k] = v;
    sig.push_back({{"name", s.name},
                   {"labels", std::move(labels)},
                   {"unit", s.unit},
                   {"samples", s.samples},
                   {"p50", Number(s.p50)},
                   {"p95", Number(s.p95)},
                   {"max", Number(s.max)},
                   {"mean", Number(s.mean)},
                   {"busy_share", Number(s.busy_share)}});
  }
  j["signals"] = std::move(sig);
  Json by_hour = Json::array();
  for (double v : r.busy_by_hour) by_hour.push_back(Number(v));
  j["busy_hours"] = {{"threshold_percent", o.busy_percent},
                     {"utc_offset_minutes", o.utc_offset_minutes},
                     {"by_hour", std::move(by_hour)},
                     {"hours", r.busy_hours}};
  j["buckets"] = r.buckets;
  j["idle_share"] = Number(r.idle_share);
  Json adv = Json::array();
  for (const Advice& a : r.advice) {
    adv.push_back({{"rule", a.rule},
                   {"resource", a.resource},
                   {"text", a.text},
                   {"value", Number(a.value)},
                   {"threshold", Number(a.threshold)}});
  }
  j["advice"] = std::move(adv);
  return j;
}

std::string RenderUtilizationTable(const UtilizationReport& r) {
  std::string out =
      fmt::format("Utilisation{}{} from {} to {} ({})\n\n", r.hostname.empty() ? "" : " of ",
                  r.hostname, Utc(r.from_ms, "%Y-%m-%d %H:%M"), Utc(r.to_ms, "%Y-%m-%d %H:%M UTC"),
                  FormatDuration(std::chrono::milliseconds(r.to_ms - r.from_ms)));
  Table t({"signal", "labels", "samples", "p50", "p95", "max", "mean", "busy"});
  for (size_t c = 2; c < 8; ++c) t.SetAlign(c, Table::Align::kRight);
  for (const SignalSummary& s : r.signals) {
    t.AddRow({std::string(TitleOf(s.name)), LabelsText(s.labels), std::to_string(s.samples),
              ValueText(s.p50, s.unit), ValueText(s.p95, s.unit), ValueText(s.max, s.unit),
              ValueText(s.mean, s.unit),
              std::isnan(s.busy_share) ? std::string() : Pct(100 * s.busy_share)});
  }
  out += t.rows() ? t.Render() : std::string("no samples in this period\n");
  // One character per hour: how often the node was busy then.
  static constexpr std::string_view kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::string profile;
  for (double v : r.busy_by_hour) {
    profile += std::isfinite(v) ? std::string(kBars[std::min(7, int(v * 8))]) : std::string("·");
  }
  out += fmt::format(
      "\nBusy hours ({}; CPU or a GPU at or above {} in at least half the samples): {}\n"
      "  00h {} 23h\n",
      ZoneText(r.options.utc_offset_minutes), Pct(r.options.busy_percent), HourRanges(r.busy_hours),
      profile);
  out += fmt::format("Idle share (CPU and GPUs under {}): {}\n", Pct(r.options.idle_percent),
                     std::isfinite(r.idle_share) ? Pct(100 * r.idle_share) : std::string("-"));
  out += "\nAdvice:\n";
  if (r.advice.empty()) out += "  nothing stands out: this size fits the measured use\n";
  for (const Advice& a : r.advice) out += fmt::format("  - {}  [{}]\n", a.text, a.rule);
  return out;
}

std::string RenderUtilizationHtml(const UtilizationReport& r) {
  const std::string host = r.hostname.empty() ? std::string() : " of " + r.hostname;
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<title>" + EscapeMarkup("Utilisation" + host, false) + "</title>";
  h += "<style>" + std::string(kCss) + "</style></head><body>\n";
  h += "<h1>" + EscapeMarkup("Utilisation" + host, false) + "</h1>\n";
  h += fmt::format("<p class=\"meta\">{} to {} ({}); generated by gantry report utilization</p>\n",
                   EscapeMarkup(Utc(r.from_ms, "%Y-%m-%d %H:%M")),
                   EscapeMarkup(Utc(r.to_ms, "%Y-%m-%d %H:%M UTC")),
                   EscapeMarkup(FormatDuration(std::chrono::milliseconds(r.to_ms - r.from_ms))));
  if (r.advice.empty()) {
    h += "<div class=\"advice none\">Nothing stands out: this size fits the measured use.</div>\n";
  } else {
    h += "<div class=\"advice\"><strong>Advice</strong><ul>";
    for (const Advice& a : r.advice) {
      h += "<li>" + EscapeMarkup(a.text, false) + " <span class=\"rule\">" +
           EscapeMarkup(a.rule, false) + "</span></li>";
    }
    h += "</ul></div>\n";
  }
  h += "<h2>Statistics</h2>\n<table><thead><tr><th>signal</th><th>labels</th><th>samples</th>"
       "<th>p50</th><th>p95</th><th>max</th><th>mean</th><th>busy</th></tr></thead><tbody>\n";
  for (const SignalSummary& s : r.signals) {
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
        "<td class=\"n\">{}</td></tr>\n",
        EscapeMarkup(TitleOf(s.name), false), EscapeMarkup(LabelsText(s.labels), false), s.samples,
        EscapeMarkup(ValueText(s.p50, s.unit), false),
        EscapeMarkup(ValueText(s.p95, s.unit), false),
        EscapeMarkup(ValueText(s.max, s.unit), false),
        EscapeMarkup(ValueText(s.mean, s.unit), false),
        std::isnan(s.busy_share) ? std::string() : EscapeMarkup(Pct(100 * s.busy_share), false));
  }
  h += "</tbody></table>\n";
  h += fmt::format(
      "<h2>Busy hours</h2>\n<p>Share of samples per hour of day ({}) with CPU or a GPU at or "
      "above {}; busy hours: {}. Idle share (CPU and GPUs under {}): {}.</p>\n",
      EscapeMarkup(ZoneText(r.options.utc_offset_minutes), false),
      EscapeMarkup(Pct(r.options.busy_percent), false),
      EscapeMarkup(HourRanges(r.busy_hours), false),
      EscapeMarkup(Pct(r.options.idle_percent), false),
      EscapeMarkup(std::isfinite(r.idle_share) ? Pct(100 * r.idle_share) : "-", false));
  h += HourPlot(r) + "\n";
  // One plot per signal name, every series of it as a line.
  for (const SignalSpec& spec : kSignals) {
    std::vector<const SignalSummary*> group;
    for (const SignalSummary& s : r.signals) {
      if (s.name == spec.name) group.push_back(&s);
    }
    if (group.empty()) continue;
    h += "<h2>" + EscapeMarkup(spec.title, false) + "</h2>\n<div class=\"key\">";
    for (size_t i = 0; i < group.size(); ++i) {
      std::string label = LabelsText(group[i]->labels);
      h += fmt::format("<span style=\"background:{}\"></span>{}", kPalette[i % std::size(kPalette)],
                       EscapeMarkup(label.empty() ? std::string(spec.name) : label, false));
    }
    h += "</div>\n" + LinePlot(group, r) + "\n";
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace gantry::agent
