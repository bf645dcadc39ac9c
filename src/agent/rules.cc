// Alert rules: YAML parsing, templates, aggregation and the Evaluator (see
// gantry/agent/rules.h). Prometheus export lives in prom_rules.cc.
#include "gantry/agent/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "gantry/core/config.h"
#include "gantry/core/metrics.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry::agent {
namespace {

// The signals DeriveSignals produces (gantry/agent/snapshot.h). A rule naming
// anything else is a typo that would never fire, so it is rejected.
const std::vector<std::string>& KnownSignals() {
  static const std::vector<std::string> kSignals = {
      "cpu_utilization",
      "load1",
      "memory_used_percent",
      "swap_used_percent",
      "network_receive_bytes_per_second",
      "network_transmit_bytes_per_second",
      "disk_read_bytes_per_second",
      "disk_write_bytes_per_second",
      "filesystem_used_percent",
      "gpu_utilization",
      "gpu_memory_used_percent",
      "gpu_power_watts",
      "gpu_temperature_celsius",
      "gpu_xid_errors",
  };
  return kSignals;
}

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

std::string FormatValue(double v) {
  char buf[64];
  if (std::isfinite(v) && std::fabs(v) >= 1e6 && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);  // bytes/s read better without an exponent
  } else {
    std::snprintf(buf, sizeof buf, "%.6g", v);
  }
  return buf;
}

// A printf format with exactly one floating-point conversion (and %% escapes).
bool ValidFloatFormat(std::string_view f) {
  int conversions = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') continue;
    if (++i >= f.size()) return false;
    if (f[i] == '%') continue;
    while (i < f.size() && std::string_view("-+ #0").find(f[i]) != std::string_view::npos) ++i;
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') ++i;
    if (i < f.size() && f[i] == '.') {
      ++i;
      while (i < f.size() && f[i] >= '0' && f[i] <= '9') ++i;
    }
    if (i >= f.size() || std::string_view("eEfgG").find(f[i]) == std::string_view::npos) {
      return false;
    }
    ++conversions;
  }
  return conversions == 1 && f.size() < 64;
}

// RFC 3339 UTC with milliseconds.
std::string Rfc3339(int64_t ms) {
  if (ms == 0) return "0001-01-01T00:00:00Z";
  auto tp = std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
  char frac[8];
  std::snprintf(frac, sizeof frac, ".%03dZ", static_cast<int>(((ms % 1000) + 1000) % 1000));
  return FormatUtc(tp, "%Y-%m-%dT%H:%M:%S") + frac;
}

// ---- YAML parsing ---------------------------------------------------------

// Reads rules through gantry::Config views. Messages keep the rule-centred
// form "rules.yaml:12: rule 'GpuHot': ..." (file and line of the value at
// fault, or of the rule when the value is missing).
class RuleParser {
 public:
  Result<std::vector<Rule>> Parse(const Config& root) {
    if (!root.Has("")) return std::vector<Rule>{};
    if (root.IsMap("")) {
      ASSIGN_OR_RETURN(std::vector<UnknownKey> unknown, root.UnknownKeys("", {"rules"}));
      if (!unknown.empty()) {
        return InvalidArgument(
            fmt::format("{}: unknown top-level key '{}'; the only key is 'rules'",
                        Line(unknown[0].position), unknown[0].name));
      }
      ASSIGN_OR_RETURN(Config list, root.Sub("rules"));
      if (!list.Has("")) return std::vector<Rule>{};
      return ParseList(list);
    }
    return ParseList(root);
  }

  Result<std::vector<Rule>> ParseList(const Config& list) {
    if (!list.IsList("")) {
      return Error(list, "", "",
                   "expected a list of rules (each a map with name, signal, condition)");
    }
    ASSIGN_OR_RETURN(std::vector<Config> items, list.Items(""));
    std::vector<Rule> rules;
    std::set<std::string> names;
    for (const Config& item : items) {
      ASSIGN_OR_RETURN(Rule r, ParseRule(item));
      if (!names.insert(r.name).second) {
        return Error(item, "", r.name, "duplicate rule name; give each rule its own name");
      }
      rules.push_back(std::move(r));
    }
    return rules;
  }

 private:
  // "origin:LINE"; a position without a line (a missing key) takes the line
  // of the rule being parsed.
  std::string Line(const ConfigPosition& p) const {
    return fmt::format("{}:{}", p.origin, p.line > 0 ? p.line : current_line_);
  }

  Status Error(const Config& c, std::string_view key, const std::string& rule,
               const std::string& msg) const {
    std::string where = Line(c.Position(key));
    if (!rule.empty()) where += ": rule '" + rule + "'";
    return InvalidArgument(where + ": " + msg);
  }

  Result<std::string> Scalar(const Config& c, std::string_view key, const std::string& rule) {
    if (!c.IsScalar(key))
      return Error(c, key, rule, fmt::format("'{}' must be a single value", key));
    return c.GetString(key, "");
  }

  Result<double> Number(const Config& c, std::string_view key, const std::string& rule) {
    ASSIGN_OR_RETURN(std::string s, Scalar(c, key, rule));
    double v = 0;
    if (!ParseNumber(s, &v)) {
      return Error(c, key, rule, fmt::format("'{}': expected a number, got '{}'", key, s));
    }
    return v;
  }

  Result<std::chrono::milliseconds> Duration(const Config& c, std::string_view key,
                                             const std::string& rule) {
    ASSIGN_OR_RETURN(std::string s, Scalar(c, key, rule));
    auto d = ParseDuration(s);
    if (!d.ok()) {
      return Error(c, key, rule,
                   fmt::format("'{}': {} (e.g. 30s, 5m, 3d)", key, d.status().message()));
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }

  // Duplicate keys never get here: Config refuses them when loading.
  Status CheckKeys(const Config& map, const std::string& rule, const std::string& what,
                   const std::vector<std::string>& known) {
    ASSIGN_OR_RETURN(std::vector<UnknownKey> unknown, map.UnknownKeys("", known));
    if (unknown.empty()) return Status::Ok();
    const UnknownKey& u = unknown[0];
    std::string where = Line(u.position);
    if (!rule.empty()) where += ": rule '" + rule + "'";
    return InvalidArgument(
        fmt::format("{}: unknown key '{}' in {}{}; valid keys: {}", where, u.name, what,
                    u.suggestion ? fmt::format(" (did you mean '{}'?)", *u.suggestion) : "",
                    Join(known, ", ")));
  }

  Result<std::map<std::string, std::string>> StringMap(const Config& c, std::string_view key,
                                                       const std::string& rule, bool label_names) {
    std::map<std::string, std::string> out;
    if (!c.Has(key)) return out;
    if (!c.IsMap(key)) {
      return Error(c, key, rule, fmt::format("'{}' must be a map of names to strings", key));
    }
    ASSIGN_OR_RETURN(Config map, c.Sub(key));
    ASSIGN_OR_RETURN(std::vector<std::string> names, map.Keys(""));
    for (const std::string& k : names) {
      if (label_names && !metrics::ValidLabelName(k)) {
        return Error(map, k, rule,
                     "label name '" + k + "' is not valid; use [a-zA-Z_][a-zA-Z0-9_]*");
      }
      if (label_names && k == "alertname") {
        return Error(map, k, rule, "label 'alertname' is set from the rule name; remove it");
      }
      if (!map.IsScalar(k)) {
        return Error(map, k, rule, fmt::format("'{}.{}' must be a string", key, k));
      }
      ASSIGN_OR_RETURN(std::string v, map.GetString(k, ""));
      auto expanded = ExpandTemplate(v, {}, 0);
      if (!expanded.ok()) {
        return Error(map, k, rule, fmt::format("'{}.{}': {}", key, k, expanded.status().message()));
      }
      out.emplace(k, v);
    }
    return out;
  }

  Status ParseCompare(std::string_view text, const Config& c, std::string_view key,
                      const std::string& rule, StaticCondition* cond) {
    std::string t(TrimSpace(text));
    if (t == ">")
      cond->op = CompareOp::kGt;
    else if (t == ">=")
      cond->op = CompareOp::kGe;
    else if (t == "<")
      cond->op = CompareOp::kLt;
    else if (t == "<=")
      cond->op = CompareOp::kLe;
    else
      return Error(c, key, rule, "unknown op '" + t + "'; use >, >=, < or <=");
    return Status::Ok();
  }

  Status ParseCondition(const Config& n, Rule* r) {
    if (n.IsScalar("")) {
      // Short form: "> 90".
      ASSIGN_OR_RETURN(std::string text, n.GetString("", ""));
      std::string s(TrimSpace(text));
      size_t i = 0;
      while (i < s.size() && (s[i] == '>' || s[i] == '<' || s[i] == '=')) ++i;
      if (i == 0) {
        return Error(n, "", r->name, "condition '" + s + "': expected e.g. \"> 90\" or a map");
      }
      RETURN_IF_ERROR(ParseCompare(s.substr(0, i), n, "", r->name, &r->static_condition));
      std::string num(TrimSpace(std::string_view(s).substr(i)));
      double v = 0;
      if (!ParseNumber(num, &v)) {
        return Error(n, "", r->name, "condition '" + s + "': '" + num + "' is not a number");
      }
      r->static_condition.threshold = v;
      r->dynamic = false;
      return Status::Ok();
    }
    if (!n.IsMap("")) {
      return Error(n, "", r->name,
                   "condition must be \"> 90\", {op, threshold} or {dynamic: {...}}");
    }
    // Presence, not Has(): "dynamic:" with nothing under it means all defaults.
    ASSIGN_OR_RETURN(std::vector<std::string> keys, n.Keys(""));
    auto present = [&](std::string_view k) {
      return std::find(keys.begin(), keys.end(), k) != keys.end();
    };
    if (present("dynamic")) {
      RETURN_IF_ERROR(CheckKeys(n, r->name, "condition", {"dynamic"}));
      ASSIGN_OR_RETURN(Config dynamic, n.Sub("dynamic"));
      return ParseDynamic(dynamic, r);
    }
    Config s = n;
    if (present("static")) {
      RETURN_IF_ERROR(CheckKeys(n, r->name, "condition", {"static", "dynamic"}));
      ASSIGN_OR_RETURN(s, n.Sub("static"));
    }
    if (!s.IsMap("")) {
      return Error(s, "", r->name, "condition.static must be a map {op, threshold}");
    }
    RETURN_IF_ERROR(CheckKeys(s, r->name, "condition", {"op", "threshold"}));
    if (!s.Has("op") || !s.Has("threshold")) {
      return Error(s, "", r->name, "a static condition needs 'op' (> >= < <=) and 'threshold'");
    }
    ASSIGN_OR_RETURN(std::string op, Scalar(s, "op", r->name));
    RETURN_IF_ERROR(ParseCompare(op, s, "op", r->name, &r->static_condition));
    ASSIGN_OR_RETURN(r->static_condition.threshold, Number(s, "threshold", r->name));
    r->dynamic = false;
    return Status::Ok();
  }

  Status ParseDynamic(const Config& n, Rule* r) {
    r->dynamic = true;
    DynamicCondition& d = r->dynamic_condition;
    if (!n.Has("")) return Status::Ok();  // all defaults
    if (!n.IsMap("")) return Error(n, "", r->name, "condition.dynamic must be a map");
    RETURN_IF_ERROR(CheckKeys(n, r->name, "condition.dynamic",
                              {"sensitivity", "direction", "min_history", "min_samples",
                               "seasonality", "violations", "learn_window", "min_spread"}));
    auto word = [&](const char* key, auto parse, auto* out) -> Status {
      if (!n.Has(key)) return Status::Ok();
      ASSIGN_OR_RETURN(std::string s, Scalar(n, key, r->name));
      auto v = parse(s);
      if (!v.ok()) return Error(n, key, r->name, std::string(key) + ": " + v.status().message());
      *out = *v;
      return Status::Ok();
    };
    RETURN_IF_ERROR(word("sensitivity", ParseSensitivity, &d.options.sensitivity));
    RETURN_IF_ERROR(word("direction", ParseDirection, &d.options.direction));
    RETURN_IF_ERROR(word("seasonality", ParseSeasonality, &d.options.seasonality));
    if (n.Has("min_history")) {
      ASSIGN_OR_RETURN(d.options.min_history, Duration(n, "min_history", r->name));
    }
    if (n.Has("learn_window")) {
      ASSIGN_OR_RETURN(d.learn_window, Duration(n, "learn_window", r->name));
    }
    if (n.Has("min_samples")) {
      ASSIGN_OR_RETURN(double v, Number(n, "min_samples", r->name));
      if (v < 1 || v != std::floor(v)) {
        return Error(n, "min_samples", r->name, "min_samples must be a whole number >= 1");
      }
      d.options.min_samples = static_cast<size_t>(v);
    }
    if (n.Has("min_spread")) {
      ASSIGN_OR_RETURN(d.options.min_spread, Number(n, "min_spread", r->name));
      if (d.options.min_spread < 0) {
        return Error(n, "min_spread", r->name, "min_spread must not be negative");
      }
    }
    if (n.Has("violations")) {
      ASSIGN_OR_RETURN(std::string s, Scalar(n, "violations", r->name));
      int a = 0, b = 0;
      char extra = 0;
      int got = std::sscanf(s.c_str(), " %d of %d %c", &a, &b, &extra);
      if (got == 1 && s.find("of") == std::string::npos) b = a;  // "3" means 3 of 3
      if (!(got == 2 || (got == 1 && b == a)) || a < 1 || b < a || b > 1000) {
        return Error(n, "violations", r->name,
                     "violations '" + s +
                         "': expected \"N of M\" with 1 <= N <= M <= 1000, "
                         "e.g. \"4 of 5\"");
      }
      d.violations = a;
      d.of = b;
    }
    return Status::Ok();
  }

  Result<Rule> ParseRule(const Config& n) {
    if (int line = n.Position("").line; line > 0) current_line_ = line;
    if (!n.IsMap(""))
      return Error(n, "", "", "each rule must be a map with name, signal, condition");
    Rule r;
    r.origin = Line(n.Position(""));
    std::string name_for_errors;
    if (n.IsScalar("name")) {
      ASSIGN_OR_RETURN(name_for_errors, n.GetString("name", ""));
    }
    RETURN_IF_ERROR(CheckKeys(
        n, name_for_errors, "a rule",
        {"name", "signal", "aggregation", "window", "condition", "for", "labels", "annotations"}));
    if (!n.Has("name")) return Error(n, "", "", "rule without 'name'; add name: SomeAlertName");
    ASSIGN_OR_RETURN(r.name, Scalar(n, "name", ""));
    if (!metrics::ValidMetricName(r.name) || r.name.find(':') != std::string::npos) {
      return Error(n, "name", "",
                   "rule name '" + r.name + "' is not valid; use [A-Za-z_][A-Za-z0-9_]*");
    }
    if (!n.Has("signal")) {
      return Error(n, "", r.name, "missing 'signal' (e.g. signal: cpu_utilization)");
    }
    ASSIGN_OR_RETURN(std::string sel, Scalar(n, "signal", r.name));
    Status st = ParseSelector(sel, &r.signal, &r.matchers);
    if (!st.ok()) return Error(n, "signal", r.name, st.message());
    const auto& known = KnownSignals();
    if (std::find(known.begin(), known.end(), r.signal) == known.end()) {
      return Error(n, "signal", r.name,
                   "unknown signal '" + r.signal + "'; known signals: " + Join(known, ", "));
    }
    if (n.Has("aggregation")) {
      ASSIGN_OR_RETURN(std::string a, Scalar(n, "aggregation", r.name));
      if (a == "last")
        r.aggregation = Aggregation::kLast;
      else if (a == "avg")
        r.aggregation = Aggregation::kAvg;
      else if (a == "min")
        r.aggregation = Aggregation::kMin;
      else if (a == "max")
        r.aggregation = Aggregation::kMax;
      else if (a == "p95")
        r.aggregation = Aggregation::kP95;
      else {
        return Error(n, "aggregation", r.name,
                     "unknown aggregation '" + a + "'; use avg, min, max, p95 or last");
      }
    }
    if (n.Has("window")) {
      ASSIGN_OR_RETURN(r.window, Duration(n, "window", r.name));
    }
    if (r.window.count() == 0 && r.aggregation != Aggregation::kLast) {
      return Error(n, "aggregation", r.name,
                   "aggregation '" + std::string(AggregationName(r.aggregation)) +
                       "' needs a window (e.g. window: 5m)");
    }
    if (!n.Has("condition")) {
      return Error(n, "", r.name,
                   "missing 'condition' (e.g. condition: \"> 90\" or dynamic: {...})");
    }
    ASSIGN_OR_RETURN(Config condition, n.Sub("condition"));
    RETURN_IF_ERROR(ParseCondition(condition, &r));
    if (n.Has("for")) {
      ASSIGN_OR_RETURN(r.for_duration, Duration(n, "for", r.name));
    }
    ASSIGN_OR_RETURN(r.labels, StringMap(n, "labels", r.name, true));
    ASSIGN_OR_RETURN(r.annotations, StringMap(n, "annotations", r.name, false));
    return r;
  }

  int current_line_ = 1;
};

}  // namespace

std::string_view AggregationName(Aggregation a) {
  switch (a) {
    case Aggregation::kLast:
      return "last";
    case Aggregation::kAvg:
      return "avg";
    case Aggregation::kMin:
      return "min";
    case Aggregation::kMax:
      return "max";
    case Aggregation::kP95:
      return "p95";
  }
  return "last";
}

std::string_view CompareOpText(CompareOp op) {
  switch (op) {
    case CompareOp::kGt:
      return ">";
    case CompareOp::kGe:
      return ">=";
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
  }
  return ">";
}

std::string_view AlertStateName(AlertState s) {
  switch (s) {
    case AlertState::kInactive:
      return "inactive";
    case AlertState::kPending:
      return "pending";
    case AlertState::kFiring:
      return "firing";
    case AlertState::kResolved:
      return "resolved";
  }
  return "inactive";
}

Status ParseSelector(std::string_view text, std::string* name,
                     std::vector<LabelMatcher>* matchers) {
  std::string_view s = TrimSpace(text);
  matchers->clear();
  size_t i = 0;
  while (i < s.size() && IsIdentChar(s[i])) ++i;
  if (i == 0 || !IsIdentStart(s[0])) {
    return InvalidArgument("selector '" + std::string(text) +
                           "': expected a signal name, e.g. gpu_temperature_celsius{gpu=\"0\"}");
  }
  *name = std::string(s.substr(0, i));
  auto skip_ws = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  };
  skip_ws();
  if (i == s.size()) return Status::Ok();
  auto bad = [&](const std::string& why) {
    return InvalidArgument("selector '" + std::string(text) + "': " + why + " at position " +
                           std::to_string(i + 1) +
                           "; expected name{label=\"value\",label!=\"value\"}");
  };
  if (s[i] != '{') return bad("unexpected '" + std::string(1, s[i]) + "'");
  ++i;
  skip_ws();
  if (i < s.size() && s[i] == '}') {
    ++i;
  } else {
    while (true) {
      skip_ws();
      size_t start = i;
      while (i < s.size() && IsIdentChar(s[i])) ++i;
      LabelMatcher m;
      m.name = std::string(s.substr(start, i - start));
      if (!metrics::ValidLabelName(m.name)) return bad("invalid label name '" + m.name + "'");
      skip_ws();
      if (s.substr(i, 2) == "!=") {
        m.equal = false;
        i += 2;
      } else if (s.substr(i, 2) == "=~" || s.substr(i, 2) == "!~") {
        return bad("regular expression matchers are not supported (use = or !=)");
      } else if (i < s.size() && s[i] == '=') {
        ++i;
      } else {
        return bad("expected = or !=");
      }
      skip_ws();
      if (i >= s.size() || s[i] != '"') return bad("expected a double-quoted value");
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) {
          ++i;
          m.value += s[i] == 'n' ? '\n' : s[i];
        } else {
          m.value += s[i];
        }
        ++i;
      }
      if (i >= s.size()) return bad("unterminated value");
      ++i;
      matchers->push_back(std::move(m));
      skip_ws();
      if (i < s.size() && s[i] == ',') {
        ++i;
        skip_ws();
        if (i < s.size() && s[i] == '}') {
          ++i;
          break;
        }
        continue;
      }
      if (i < s.size() && s[i] == '}') {
        ++i;
        break;
      }
      return bad("expected , or }");
    }
  }
  skip_ws();
  if (i != s.size()) return bad("unexpected text after }");
  return Status::Ok();
}

Result<std::string> ExpandTemplate(std::string_view text,
                                   const std::map<std::string, std::string>& labels, double value) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("{{", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    out.append(text.substr(pos, open - pos));
    size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) {
      return InvalidArgument("template '" + std::string(text) + "': '{{' without '}}'");
    }
    std::string_view expr = TrimSpace(text.substr(open + 2, close - open - 2));
    pos = close + 2;
    if (expr == "$value") {
      out += FormatValue(value);
    } else if (expr.substr(0, 8) == "$labels.") {
      std::string_view name = expr.substr(8);
      if (!metrics::ValidLabelName(name)) {
        return InvalidArgument("template '" + std::string(text) + "': '" + std::string(name) +
                               "' is not a label name");
      }
      auto it = labels.find(std::string(name));
      if (it != labels.end()) out += it->second;
    } else if (expr.substr(0, 6) == "printf") {
      // printf "FMT" $value
      std::string_view rest = TrimSpace(expr.substr(6));
      size_t q2 = rest.size() > 1 && rest[0] == '"' ? rest.find('"', 1) : std::string_view::npos;
      std::string fmt(q2 == std::string_view::npos ? "" : rest.substr(1, q2 - 1));
      if (q2 == std::string_view::npos || TrimSpace(rest.substr(q2 + 1)) != "$value" ||
          !ValidFloatFormat(fmt)) {
        return InvalidArgument("template '" + std::string(text) + "': '{{ " + std::string(expr) +
                               " }}' is not supported; use {{ printf \"%.1f\" $value }}");
      }
      char buf[128];
      std::snprintf(buf, sizeof buf, fmt.c_str(), value);
      out += buf;
    } else {
      return InvalidArgument("template '" + std::string(text) + "': '{{ " + std::string(expr) +
                             " }}' is not supported; use {{ $value }}, {{ $labels.NAME }} or "
                             "{{ printf \"%.1f\" $value }}");
    }
  }
}

double Aggregate(Aggregation a, const std::vector<Point>& points) {
  if (points.empty()) return std::nan("");
  switch (a) {
    case Aggregation::kLast:
      return points.back().value;
    case Aggregation::kAvg: {
      double sum = 0;
      for (const Point& p : points) sum += p.value;
      return sum / static_cast<double>(points.size());
    }
    case Aggregation::kMin: {
      double m = points.front().value;
      for (const Point& p : points) m = std::min(m, p.value);
      return m;
    }
    case Aggregation::kMax: {
      double m = points.front().value;
      for (const Point& p : points) m = std::max(m, p.value);
      return m;
    }
    case Aggregation::kP95: {
      std::vector<double> v;
      v.reserve(points.size());
      for (const Point& p : points) v.push_back(p.value);
      std::sort(v.begin(), v.end());
      double rank = 0.95 * static_cast<double>(v.size() - 1);
      size_t lo = static_cast<size_t>(std::floor(rank));
      size_t hi = std::min(lo + 1, v.size() - 1);
      double w = rank - static_cast<double>(lo);
      return v[lo] * (1 - w) + v[hi] * w;
    }
  }
  return std::nan("");
}

Result<std::vector<Rule>> ParseRules(const Config& rules) { return RuleParser().Parse(rules); }

Result<std::vector<Rule>> ParseRules(std::string_view yaml_text, std::string_view origin) {
  ASSIGN_OR_RETURN(Config doc, Config::LoadDocument(yaml_text, origin));
  return ParseRules(doc);
}

Result<std::vector<Rule>> ParseRulesAt(const Config& document, std::string_view key) {
  ASSIGN_OR_RETURN(Config list, document.Sub(key));
  if (!list.Has("")) return std::vector<Rule>{};
  if (!list.IsList("")) {
    ConfigPosition p = list.Position("");
    return InvalidArgument(
        fmt::format("{}:{}: '{}' must be a list of rules", p.origin, p.line, list.prefix()));
  }
  return ParseRules(list);
}

Result<std::vector<Rule>> ParseRulesAt(std::string_view yaml_text, std::string_view origin,
                                       std::string_view key) {
  ASSIGN_OR_RETURN(Config doc, Config::LoadString(yaml_text, origin));
  return ParseRulesAt(doc, key);
}

Result<std::vector<Rule>> LoadRulesFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status().WithContext("loading alert rules");
  return ParseRules(*text, path);
}

std::vector<Alert> NotifiableAlerts(const std::vector<AlertTransition>& transitions) {
  std::vector<Alert> out;
  for (const AlertTransition& t : transitions) {
    if (t.to == AlertState::kFiring || t.to == AlertState::kResolved) out.push_back(t.alert);
  }
  return out;
}

// ---- Evaluator ------------------------------------------------------------

struct Evaluator::SeriesState {
  AlertState state = AlertState::kInactive;
  int64_t active_since_ms = 0;
  int64_t fired_at_ms = 0;
  Alert alert;
};

struct Evaluator::RuleState {
  std::map<std::string, SeriesState> series;            // pending or firing, by series key
  std::map<std::string, ViolationWindow> windows;       // dynamic rules: N-of-M per series
  std::map<std::string, DynamicThresholdModel> models;  // dynamic rules: per series
  int64_t last_fit_ms = 0;
  bool fitted = false;
};

Evaluator::Evaluator(std::vector<Rule> rules, History* history)
    : Evaluator(std::move(rules), history, Options()) {}

Evaluator::Evaluator(std::vector<Rule> rules, History* history, Options options)
    : rules_(std::move(rules)), history_(history), options_(std::move(options)) {
  for (size_t i = 0; i < rules_.size(); ++i) rule_states_.push_back(std::make_unique<RuleState>());
}

Evaluator::~Evaluator() = default;

std::vector<AlertTransition> Evaluator::Evaluate(int64_t now_ms) {
  std::vector<AlertTransition> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.clear();
    for (size_t i = 0; i < rules_.size(); ++i) EvaluateRule(i, now_ms, &out);
  }
  if (options_.notify) {
    std::vector<Alert> batch = NotifiableAlerts(out);
    if (!batch.empty()) options_.notify(std::move(batch));
  }
  return out;
}

void Evaluator::EvaluateRule(size_t index, int64_t now_ms, std::vector<AlertTransition>* out) {
  const Rule& rule = rules_[index];
  RuleState& rs = *rule_states_[index];
  if (!history_) {
    errors_.push_back("rule '" + rule.name + "': no history to evaluate against");
    return;
  }
  metrics::Labels eq;
  for (const LabelMatcher& m : rule.matchers) {
    if (m.equal) eq.emplace_back(m.name, m.value);
  }
  std::sort(eq.begin(), eq.end());
  auto selected = [&](const metrics::Labels& labels) {
    for (const LabelMatcher& m : rule.matchers) {
      std::string_view v;
      for (const auto& [k, val] : labels) {
        if (k == m.name) v = val;
      }
      if ((v == m.value) != m.equal) return false;
    }
    return true;
  };

  const int64_t span = rule.window.count() > 0 ? rule.window.count() : options_.lookback.count();
  const int64_t from = now_ms - span;
  auto q = history_->Query(rule.signal, eq, from, now_ms);
  if (!q.ok()) {
    errors_.push_back("rule '" + rule.name + "': " + q.status().message());
    return;
  }

  // Dynamic rules: (re)fit the models from the learning window before `from`.
  if (rule.dynamic) {
    // Refit early while a model is not ready yet or a new series appeared, so
    // an alert is possible from the first evaluation that has enough history.
    bool any_unready = !rs.fitted;
    for (const auto& [key, model] : rs.models) any_unready = any_unready || !model.ready();
    for (const SeriesPoints& sp : *q) {
      if (selected(sp.labels) && !rs.models.count(SeriesKey(rule.signal, sp.labels))) {
        any_unready = true;
      }
    }
    if (any_unready || now_ms - rs.last_fit_ms >= options_.refit_every.count()) {
      const DynamicCondition& dc = rule.dynamic_condition;
      int64_t learn = dc.learn_window.count();
      if (learn <= 0) {
        bool long_period = dc.options.seasonality == Seasonality::kWeekly ||
                           dc.options.seasonality == Seasonality::kAuto;
        learn = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::hours(24 * (long_period ? 28 : 10)))
                    .count();
      }
      auto hist = history_->Query(rule.signal, eq, from - learn, from - 1);
      if (!hist.ok()) {
        errors_.push_back("rule '" + rule.name + "': " + hist.status().message());
        return;
      }
      rs.models.clear();
      for (const SeriesPoints& sp : *hist) {
        if (!selected(sp.labels)) continue;
        std::vector<TimedValue> samples;
        samples.reserve(sp.points.size());
        for (const Point& p : sp.points) samples.push_back({p.time_ms, p.value});
        rs.models.emplace(SeriesKey(rule.signal, sp.labels),
                          DynamicThresholdModel::Fit(samples, dc.options));
      }
      rs.last_fit_ms = now_ms;
      rs.fitted = true;
    }
  }

  std::set<std::string> seen;
  auto make_alert = [&](const metrics::Labels& series_labels, double value) {
    Alert a;
    for (const auto& [k, v] : series_labels) a.labels[k] = v;
    a.labels["alertname"] = rule.name;
    std::map<std::string, std::string> tmpl_labels = a.labels;
    for (const auto& [k, v] : rule.labels) {
      a.labels[k] = ExpandTemplate(v, tmpl_labels, value).value_or(v);
    }
    for (const auto& [k, v] : options_.external_labels) a.labels.emplace(k, v);
    for (const auto& [k, v] : rule.annotations) {
      a.annotations[k] = ExpandTemplate(v, a.labels, value).value_or(v);
    }
    a.generator_url = options_.generator_url;
    a.value = value;
    return a;
  };

  auto step = [&](const std::string& key, const metrics::Labels& labels, bool active,
                  double value) {
    auto it = rs.series.find(key);
    if (!active) {
      if (it == rs.series.end()) return;
      SeriesState& st = it->second;
      AlertTransition t;
      t.rule = rule.name;
      t.series_key = key;
      t.from = st.state;
      if (st.state == AlertState::kFiring) {
        t.to = AlertState::kResolved;
        st.alert.firing = false;
        st.alert.ends_at_ms = now_ms;
      } else {
        t.to = AlertState::kInactive;
      }
      t.alert = st.alert;
      out->push_back(std::move(t));
      rs.series.erase(it);
      return;
    }
    if (it == rs.series.end()) {
      it = rs.series.emplace(key, SeriesState{}).first;
      it->second.active_since_ms = now_ms;
    }
    SeriesState& st = it->second;
    Alert a = make_alert(labels, value);
    a.starts_at_ms = st.fired_at_ms;
    st.alert = std::move(a);
    AlertState next = st.state;
    if (now_ms - st.active_since_ms >= rule.for_duration.count()) {
      next = AlertState::kFiring;
    } else {
      next = AlertState::kPending;
    }
    if (next != st.state) {
      if (next == AlertState::kFiring) {
        st.fired_at_ms = now_ms;
        st.alert.starts_at_ms = now_ms;
      }
      AlertTransition t;
      t.rule = rule.name;
      t.series_key = key;
      t.from = st.state;
      t.to = next;
      st.state = next;
      t.alert = st.alert;
      out->push_back(std::move(t));
    }
  };

  for (const SeriesPoints& sp : *q) {
    if (!selected(sp.labels)) continue;
    std::string key = SeriesKey(rule.signal, sp.labels);
    std::vector<Point> pts;
    pts.reserve(sp.points.size());
    for (const Point& p : sp.points) {
      if (p.time_ms >= from && p.time_ms <= now_ms) pts.push_back(p);
    }
    if (pts.empty()) continue;  // no value: handled as vanished below
    seen.insert(key);
    double value = rule.window.count() > 0 ? Aggregate(rule.aggregation, pts) : pts.back().value;
    bool active = false;
    if (!rule.dynamic) {
      const double th = rule.static_condition.threshold;
      switch (rule.static_condition.op) {
        case CompareOp::kGt:
          active = value > th;
          break;
        case CompareOp::kGe:
          active = value >= th;
          break;
        case CompareOp::kLt:
          active = value < th;
          break;
        case CompareOp::kLe:
          active = value <= th;
          break;
      }
    } else {
      const DynamicCondition& dc = rule.dynamic_condition;
      auto w = rs.windows.find(key);
      if (w == rs.windows.end())
        w = rs.windows.emplace(key, ViolationWindow(dc.violations, dc.of)).first;
      auto m = rs.models.find(key);
      bool violated = false;
      if (m != rs.models.end()) {
        Verdict v = m->second.Check(now_ms, value);
        violated = v == Verdict::kAbove || v == Verdict::kBelow;
      }
      active = w->second.Push(violated);
    }
    step(key, sp.labels, active, value);
  }
  // Series that have no value this round: conditions are false.
  std::vector<std::string> gone;
  for (const auto& [key, st] : rs.series) {
    if (!seen.count(key)) gone.push_back(key);
  }
  for (const std::string& key : gone) step(key, {}, false, 0);
  for (auto it = rs.windows.begin(); it != rs.windows.end();) {
    it = seen.count(it->first) ? std::next(it) : rs.windows.erase(it);
  }
}

std::vector<Alert> Evaluator::Firing() const {
  std::vector<Alert> out;
  for (const ActiveAlert& a : Active()) {
    if (a.state == AlertState::kFiring) out.push_back(a.alert);
  }
  return out;
}

std::vector<ActiveAlert> Evaluator::Active() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ActiveAlert> out;
  for (size_t i = 0; i < rules_.size(); ++i) {
    for (const auto& [key, st] : rule_states_[i]->series) {
      out.push_back(ActiveAlert{rules_[i].name, st.state, st.alert, st.active_since_ms});
    }
  }
  std::sort(out.begin(), out.end(), [](const ActiveAlert& a, const ActiveAlert& b) {
    return a.alert.labels < b.alert.labels;  // alertname is a label: sorts by it among others
  });
  std::stable_sort(out.begin(), out.end(),
                   [](const ActiveAlert& a, const ActiveAlert& b) { return a.rule < b.rule; });
  return out;
}

Json Evaluator::FiringJson() const {
  Json arr = Json::array();
  for (const ActiveAlert& a : Active()) {
    Json j;
    j["labels"] = Json::object();
    for (const auto& [k, v] : a.alert.labels) j["labels"][k] = v;
    j["annotations"] = Json::object();
    for (const auto& [k, v] : a.alert.annotations) j["annotations"][k] = v;
    j["state"] = std::string(AlertStateName(a.state));
    j["activeAt"] = Rfc3339(a.active_since_ms);
    j["startsAt"] = a.state == AlertState::kFiring ? Rfc3339(a.alert.starts_at_ms) : "";
    j["value"] = std::isfinite(a.alert.value) ? Json(a.alert.value) : Json(nullptr);
    j["generatorURL"] = a.alert.generator_url;
    arr.push_back(std::move(j));
  }
  return arr;
}

std::vector<std::string> Evaluator::last_errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

}  // namespace gantry::agent
