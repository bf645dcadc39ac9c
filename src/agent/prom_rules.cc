// clang-format off
// Export of the agent's static alert rules as Prometheus alerting rules over
// node_exporter and dcgm-exporter metrics, so a fleet that outgrows one node
// can move its rules to Prometheus unchanged.
//
// Each signal (gantry/agent/snapshot.h) maps to the PromQL that computes the
// same quantity from the exporters' metrics (M: the rule's label matchers,
// added to every selector; R: a rate range; "sum w/o" is sum without (cpu, mode)):
//   cpu_utilization
//     100 * (1 - sum w/o (rate(node_cpu_seconds_total{mode=~"idle|iowait|steal",M}[R]))
//                / sum w/o (rate(node_cpu_seconds_total{M}[R])))
//   load1                     node_load1{M}
//   memory_used_percent
//     100 * (1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes)
//   swap_used_percent
//     100 * (1 - node_memory_SwapFree_bytes / (node_memory_SwapTotal_bytes > 0))
//   network_*_per_second      rate(node_network_{receive,transmit}_bytes_total{device!="lo",M}[R])
//   disk_*_bytes_per_second   rate(node_disk_{read,written}_bytes_total{M}[R])
//   filesystem_used_percent
//     100 * (1 - node_filesystem_avail_bytes / (node_filesystem_size_bytes > 0))
//   gpu_utilization           DCGM_FI_DEV_GPU_UTIL{M}
//   gpu_memory_used_percent
//     100 * DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)
//   gpu_power_watts           DCGM_FI_DEV_POWER_USAGE{M}
//   gpu_temperature_celsius   DCGM_FI_DEV_GPU_TEMP{M}
//   gpu_xid_errors            DCGM_FI_DEV_XID_ERRORS{M}
// (every selector of the computed ones carries {M} too)
// Aggregation over a window W:
//   rate signals: avg -> R = W (the average rate); last or no window ->
//   irate(...[5m]) (the last interval, like the agent's own rate); min, max,
//   p95 -> min/max/quantile_over_time((E with R = 1m)[W:]) subqueries.
//   gauge signals: last or no window -> E; a plain selector -> avg/min/max/
//   quantile_over_time(sel[W]); a computed expression -> the same over (E)[W:].
// clang-format on

#include <charconv>
#include <cstdint>

#include "gantry/agent/rules.h"

namespace gantry::agent {
namespace {

std::string PromDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms <= 0) return "0s";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

std::string Number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string Quote(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Expr {
  std::string text;
  bool plain_selector = false;  // a single vector selector (no subquery needed)
};

class Builder {
 public:
  explicit Builder(const Rule& r) : rule_(r) {
    for (const LabelMatcher& m : r.matchers) {
      matchers_ += ",";
      matchers_ += m.name + (m.equal ? "=" : "!=") + Quote(m.value);
    }
  }

  // `metric{extra,M}` (extra may be empty).
  std::string Sel(const std::string& metric, const std::string& extra = "") const {
    std::string inner = extra + matchers_;
    if (!inner.empty() && inner[0] == ',') inner.erase(0, 1);
    return inner.empty() ? metric : metric + "{" + inner + "}";
  }

  // The signal's expression with rate function `fn` ("rate" or "irate") and
  // range `range`; `is_rate` tells whether the signal is a rate.
  Result<Expr> Signal(const std::string& fn, const std::string& range, bool* is_rate) const {
    const std::string& s = rule_.signal;
    *is_rate = false;
    auto rate = [&](const std::string& metric, const std::string& extra) {
      *is_rate = true;
      return fn + "(" + Sel(metric, extra) + "[" + range + "])";
    };
    if (s == "cpu_utilization") {
      std::string idle = rate("node_cpu_seconds_total", "mode=~\"idle|iowait|steal\"");
      std::string all = rate("node_cpu_seconds_total", "");
      return Expr{"100 * (1 - sum without (cpu, mode) (" + idle + ") / sum without (cpu, mode) (" +
                      all + "))",
                  false};
    }
    if (s == "network_receive_bytes_per_second") {
      return Expr{rate("node_network_receive_bytes_total", "device!=\"lo\""), false};
    }
    if (s == "network_transmit_bytes_per_second") {
      return Expr{rate("node_network_transmit_bytes_total", "device!=\"lo\""), false};
    }
    if (s == "disk_read_bytes_per_second") {
      return Expr{rate("node_disk_read_bytes_total", ""), false};
    }
    if (s == "disk_write_bytes_per_second") {
      return Expr{rate("node_disk_written_bytes_total", ""), false};
    }
    if (s == "load1") return Expr{Sel("node_load1"), true};
    if (s == "memory_used_percent") {
      return Expr{"100 * (1 - " + Sel("node_memory_MemAvailable_bytes") + " / " +
                      Sel("node_memory_MemTotal_bytes") + ")",
                  false};
    }
    if (s == "swap_used_percent") {
      return Expr{"100 * (1 - " + Sel("node_memory_SwapFree_bytes") + " / (" +
                      Sel("node_memory_SwapTotal_bytes") + " > 0))",
                  false};
    }
    if (s == "filesystem_used_percent") {
      return Expr{"100 * (1 - " + Sel("node_filesystem_avail_bytes") + " / (" +
                      Sel("node_filesystem_size_bytes") + " > 0))",
                  false};
    }
    if (s == "gpu_utilization") return Expr{Sel("DCGM_FI_DEV_GPU_UTIL"), true};
    if (s == "gpu_memory_used_percent") {
      std::string used = Sel("DCGM_FI_DEV_FB_USED");
      return Expr{"100 * " + used + " / (" + used + " + " + Sel("DCGM_FI_DEV_FB_FREE") + ")",
                  false};
    }
    if (s == "gpu_power_watts") return Expr{Sel("DCGM_FI_DEV_POWER_USAGE"), true};
    if (s == "gpu_temperature_celsius") return Expr{Sel("DCGM_FI_DEV_GPU_TEMP"), true};
    if (s == "gpu_xid_errors") return Expr{Sel("DCGM_FI_DEV_XID_ERRORS"), true};
    return InvalidArgument(rule_.origin + ": rule '" + rule_.name + "': signal '" + s +
                           "' has no PromQL equivalent; export it by hand or drop the rule");
  }

 private:
  const Rule& rule_;
  std::string matchers_;
};

std::string OverTime(Aggregation a, const std::string& range_vector) {
  switch (a) {
    case Aggregation::kAvg:
      return "avg_over_time(" + range_vector + ")";
    case Aggregation::kMin:
      return "min_over_time(" + range_vector + ")";
    case Aggregation::kMax:
      return "max_over_time(" + range_vector + ")";
    case Aggregation::kP95:
      return "quantile_over_time(0.95, " + range_vector + ")";
    case Aggregation::kLast:
      return "last_over_time(" + range_vector + ")";
  }
  return range_vector;
}

}  // namespace

Result<std::string> PromQLForRule(const Rule& rule) {
  Builder b(rule);
  bool is_rate = false;
  const bool windowed = rule.window.count() > 0 && rule.aggregation != Aggregation::kLast;
  const std::string w = PromDuration(rule.window);
  if (!windowed) {
    // The latest value: for rates, the last interval.
    ASSIGN_OR_RETURN(Expr e, b.Signal("irate", "5m", &is_rate));
    return e.text;
  }
  ASSIGN_OR_RETURN(Expr probe, b.Signal("rate", w, &is_rate));
  if (is_rate) {
    if (rule.aggregation == Aggregation::kAvg) return probe.text;  // the average rate over W
    ASSIGN_OR_RETURN(Expr inner, b.Signal("rate", "1m", &is_rate));
    return OverTime(rule.aggregation, "(" + inner.text + ")[" + w + ":]");
  }
  if (probe.plain_selector) return OverTime(rule.aggregation, probe.text + "[" + w + "]");
  return OverTime(rule.aggregation, "(" + probe.text + ")[" + w + ":]");
}

Result<std::string> ExportPrometheusRules(const std::vector<Rule>& rules,
                                          std::vector<std::string>* skipped) {
  std::vector<std::string> skip;
  YamlWriter out;
  out.BeginMap().Key("groups").BeginList();
  out.BeginMap().Key("name").Value("gantry-agent");
  out.Key("rules").BeginList();
  for (const Rule& r : rules) {
    if (r.dynamic) {
      skip.push_back(r.name +
                     ": dynamic thresholds are learned by the agent and have no PromQL "
                     "equivalent; keep this rule in the agent");
      continue;
    }
    ASSIGN_OR_RETURN(std::string expr, PromQLForRule(r));
    // A computed expression is parenthesised so the comparison applies to all of it.
    bool simple = expr.find(' ') == std::string::npos;
    std::string full = (simple ? expr : "(" + expr + ")") + " " +
                       std::string(CompareOpText(r.static_condition.op)) + " " +
                       Number(r.static_condition.threshold);
    out.BeginMap();
    out.Key("alert").Value(r.name);
    out.Key("expr").Value(full);
    if (r.for_duration.count() > 0) out.Key("for").Value(PromDuration(r.for_duration));
    if (!r.labels.empty()) {
      out.Key("labels").BeginMap();
      for (const auto& [k, v] : r.labels) out.Key(k).Value(v);
      out.EndMap();
    }
    if (!r.annotations.empty()) {
      out.Key("annotations").BeginMap();
      for (const auto& [k, v] : r.annotations) out.Key(k).QuotedValue(v);
      out.EndMap();
    }
    out.EndMap();
  }
  out.EndList().EndMap().EndList().EndMap();
  Result<std::string> yaml = out.Finish();
  if (!yaml.ok()) return yaml.status().WithContext("writing Prometheus rules");

  std::string text =
      "# Prometheus alerting rules generated by `gantry agent rules export --prometheus`\n"
      "# from the agent's static rules, over node_exporter and dcgm-exporter metrics.\n";
  for (const std::string& s : skip) text += "# skipped " + s + "\n";
  text += *yaml;
  text += "\n";
  if (skipped) *skipped = std::move(skip);
  return text;
}

}  // namespace gantry::agent
