// autoscale.yaml -> AutoscaleConfig, through core's one YAML reader so that
// every error names the file, line and key (see config.h for the format).
#include "gantry/autoscale/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <set>

#include "gantry/core/config.h"
#include "gantry/core/text.h"
#include "gantry/security/azure_credential.h"

namespace gantry::autoscale {
namespace {

using std::chrono::milliseconds;

Status Bad(const Config& c, std::string_view key, std::string_view what) {
  return InvalidArgument(fmt::format("{}: {}", c.Locate(key), what));
}

Result<milliseconds> Millis(const Config& c, std::string_view key, milliseconds fallback,
                            milliseconds min = milliseconds(0)) {
  ASSIGN_OR_RETURN(std::chrono::nanoseconds d, c.GetDuration(key, fallback));
  auto ms = std::chrono::duration_cast<milliseconds>(d);
  if (ms < min) {
    return Bad(c, key, fmt::format("expected at least {} ms, got {} ms", min.count(), ms.count()));
  }
  return ms;
}

Result<Seconds> Secs(const Config& c, std::string_view key, Seconds fallback) {
  ASSIGN_OR_RETURN(milliseconds ms, Millis(c, key, fallback));
  return std::chrono::duration_cast<Seconds>(ms);
}

// A list of program arguments: non-empty strings, at least one.
Result<std::vector<std::string>> Argv(const Config& c, std::string_view key, bool required) {
  if (!c.Has(key)) {
    if (required) return Bad(c, key, "expected a command as a list, e.g. [/usr/bin/prog, arg]");
    return std::vector<std::string>{};
  }
  if (!c.IsList(key)) {
    return Bad(c, key, "expected a command as a list of arguments (no shell), e.g. [prog, arg]");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> argv, c.GetStringList(key));
  if (argv.empty() || argv[0].empty()) return Bad(c, key, "the command is empty");
  return argv;
}

Result<std::string> Required(const Config& c, std::string_view key) {
  ASSIGN_OR_RETURN(std::string v, c.GetString(key, ""));
  if (v.empty()) return Bad(c, key, "is required");
  return v;
}

// "08:00" -> minutes of the day; "24:00" allowed as an end.
Result<int> MinuteOfDay(const Config& c, std::string_view key, int fallback) {
  if (!c.Has(key)) return fallback;
  ASSIGN_OR_RETURN(std::string s, c.GetString(key, ""));
  int h = 0, m = 0;
  char extra = 0;
  if (std::sscanf(s.c_str(), "%d:%d%c", &h, &m, &extra) != 2 || h < 0 || h > 24 || m < 0 ||
      m > 59 || (h == 24 && m != 0)) {
    return Bad(c, key, fmt::format("expected a time of day HH:MM (00:00 .. 24:00), got '{}'", s));
  }
  return h * 60 + m;
}

// "+01:00", "-05:30", "Z" / "UTC" -> minutes east of UTC.
Result<int> UtcOffset(const Config& c, std::string_view key) {
  ASSIGN_OR_RETURN(std::string s, c.GetString(key, "+00:00"));
  if (s == "Z" || s == "UTC" || s == "utc") return 0;
  int h = 0, m = 0;
  char sign = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%c%d:%d%c", &sign, &h, &m, &extra) != 3 ||
      (sign != '+' && sign != '-') || h > 14 || m > 59) {
    return Bad(c, key, fmt::format("expected a UTC offset such as +01:00 or -05:30, got '{}'", s));
  }
  return (sign == '-' ? -1 : 1) * (h * 60 + m);
}

// days: [mon, tue] or "mon-fri" or "weekdays" / "weekends" / "all".
Result<uint8_t> Days(const Config& c, std::string_view key) {
  static const char* kNames[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
  auto day = [&](std::string name) -> int {
    name = AsciiLower(name);
    for (int i = 0; i < 7; ++i) {
      if (name == kNames[i] || (name.size() > 3 && name.starts_with(kNames[i]))) return i;
    }
    return -1;
  };
  std::vector<std::string> items;
  if (!c.Has(key)) return static_cast<uint8_t>(0x7f);
  if (c.IsList(key)) {
    ASSIGN_OR_RETURN(items, c.GetStringList(key));
  } else {
    ASSIGN_OR_RETURN(std::string s, c.GetString(key, ""));
    items.push_back(s);
  }
  uint8_t mask = 0;
  for (const std::string& item : items) {
    std::string s = AsciiLower(item);
    if (s == "all" || s == "daily") {
      mask |= 0x7f;
    } else if (s == "weekdays") {
      mask |= 0x3e;
    } else if (s == "weekends") {
      mask |= 0x41;
    } else if (size_t dash = s.find('-'); dash != std::string::npos) {
      int a = day(s.substr(0, dash)), b = day(s.substr(dash + 1));
      if (a < 0 || b < 0) return Bad(c, key, fmt::format("unknown day range '{}'", item));
      for (int d = a;; d = (d + 1) % 7) {
        mask |= static_cast<uint8_t>(1u << d);
        if (d == b) break;
      }
    } else {
      int d = day(s);
      if (d < 0) {
        return Bad(
            c, key,
            fmt::format("unknown day '{}'; use mon..sun, a range mon-fri, weekdays or all", item));
      }
      mask |= static_cast<uint8_t>(1u << d);
    }
  }
  if (mask == 0) return Bad(c, key, "names no day");
  return mask;
}

Result<WeeklyWindow> Window(const Config& c) {
  RETURN_IF_ERROR(c.CheckKnownKeys("", {"name", "days", "from", "to", "utc_offset", "min"}));
  WeeklyWindow w;
  ASSIGN_OR_RETURN(w.days, Days(c, "days"));
  ASSIGN_OR_RETURN(w.from_minute, MinuteOfDay(c, "from", 0));
  ASSIGN_OR_RETURN(w.to_minute, MinuteOfDay(c, "to", 24 * 60));
  ASSIGN_OR_RETURN(w.utc_offset_minutes, UtcOffset(c, "utc_offset"));
  if (w.from_minute == 24 * 60) return Bad(c, "from", "24:00 is only an end");
  return w;
}

// ISO 8601 UTC "2026-12-24T00:00:00Z".
Result<std::chrono::system_clock::time_point> Timestamp(const Config& c, std::string_view key) {
  ASSIGN_OR_RETURN(std::string s, Required(c, key));
  std::tm tm{};
  char z = 0;
  if (std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d%c", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &z) != 7 ||
      z != 'Z') {
    return Bad(c, key,
               fmt::format("expected a UTC time such as 2026-12-24T00:00:00Z, got '{}'", s));
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Result<DirectionBehavior> Behavior(const Config& c, std::string_view key, DirectionBehavior def) {
  if (!c.Has(key)) return def;
  ASSIGN_OR_RETURN(Config b, c.Sub(key));
  RETURN_IF_ERROR(b.CheckKnownKeys("", {"stabilization", "tolerance", "select", "policies"}));
  DirectionBehavior out = def;
  ASSIGN_OR_RETURN(out.stabilization, Secs(b, "stabilization", def.stabilization));
  if (out.stabilization > Seconds(3600)) {
    return Bad(b, "stabilization", "expected at most 3600 s (the HPA's limit)");
  }
  ASSIGN_OR_RETURN(out.tolerance, b.GetDouble("tolerance", def.tolerance));
  if (out.tolerance < 0 || out.tolerance >= 1) return Bad(b, "tolerance", "expected 0 <= x < 1");
  ASSIGN_OR_RETURN(std::string select, b.GetString("select", "max"));
  select = AsciiLower(select);
  if (select == "max") {
    out.select = SelectPolicy::kMax;
  } else if (select == "min") {
    out.select = SelectPolicy::kMin;
  } else if (select == "disabled") {
    out.select = SelectPolicy::kDisabled;
  } else {
    return Bad(b, "select", fmt::format("expected max, min or disabled, got '{}'", select));
  }
  if (b.Has("policies")) {
    out.policies.clear();
    ASSIGN_OR_RETURN(std::vector<Config> items, b.Items("policies"));
    for (const Config& p : items) {
      RETURN_IF_ERROR(p.CheckKnownKeys("", {"type", "value", "period"}));
      ScalingPolicy pol;
      ASSIGN_OR_RETURN(std::string type, p.GetString("type", ""));
      type = AsciiLower(type);
      if (type == "pods" || type == "instances") {
        pol.type = ScalingPolicy::Type::kPods;
      } else if (type == "percent") {
        pol.type = ScalingPolicy::Type::kPercent;
      } else {
        return Bad(p, "type", fmt::format("expected pods or percent, got '{}'", type));
      }
      ASSIGN_OR_RETURN(pol.value, p.GetInt("value", 0));
      if (pol.value < 1) return Bad(p, "value", "expected an integer >= 1");
      ASSIGN_OR_RETURN(pol.period, Secs(p, "period", Seconds(15)));
      if (pol.period < Seconds(1) || pol.period > Seconds(1800)) {
        return Bad(p, "period", "expected 1 s .. 1800 s (the HPA's limits)");
      }
      out.policies.push_back(pol);
    }
  }
  return out;
}

Result<MetricSourceConfig> Metric(const Config& c, Mode mode, MetricTarget* target,
                                  bool* has_target) {
  RETURN_IF_ERROR(c.CheckKnownKeys("", {"name", "prometheus", "gateway", "agent", "command",
                                        "timeout", "type", "target", "activation"}));
  MetricSourceConfig m;
  ASSIGN_OR_RETURN(m.name, Required(c, "name"));
  ASSIGN_OR_RETURN(m.timeout, Millis(c, "timeout", m.timeout, milliseconds(1)));
  int kinds = 0;
  if (c.Has("prometheus")) {
    ++kinds;
    m.kind = MetricSourceConfig::Kind::kPrometheus;
    ASSIGN_OR_RETURN(Config p, c.Sub("prometheus"));
    RETURN_IF_ERROR(p.CheckKnownKeys("", {"url", "query", "ignore_null_values", "timeout"}));
    ASSIGN_OR_RETURN(m.url, Required(p, "url"));
    ASSIGN_OR_RETURN(m.query, Required(p, "query"));
    ASSIGN_OR_RETURN(m.ignore_null_values, p.GetBool("ignore_null_values", true));
    ASSIGN_OR_RETURN(m.timeout, Millis(p, "timeout", m.timeout, milliseconds(1)));
  }
  if (c.Has("gateway")) {
    ++kinds;
    m.kind = MetricSourceConfig::Kind::kGateway;
    ASSIGN_OR_RETURN(Config g, c.Sub("gateway"));
    RETURN_IF_ERROR(g.CheckKnownKeys("", {"url", "pool", "signal", "timeout"}));
    ASSIGN_OR_RETURN(m.url, Required(g, "url"));
    ASSIGN_OR_RETURN(m.pool, Required(g, "pool"));
    ASSIGN_OR_RETURN(m.signal, g.GetString("signal", "in_flight_and_pending"));
    static const std::set<std::string> kSignals = {
        "in_flight", "pending", "held", "in_flight_and_pending", "request_rate", "shed_rate"};
    if (!kSignals.contains(m.signal)) {
      return Bad(g, "signal",
                 fmt::format("unknown gateway signal '{}'; use in_flight, pending, held, "
                             "in_flight_and_pending, request_rate or shed_rate",
                             m.signal));
    }
    ASSIGN_OR_RETURN(m.timeout, Millis(g, "timeout", m.timeout, milliseconds(1)));
  }
  if (c.Has("agent")) {
    ++kinds;
    m.kind = MetricSourceConfig::Kind::kAgent;
    ASSIGN_OR_RETURN(Config a, c.Sub("agent"));
    RETURN_IF_ERROR(a.CheckKnownKeys("", {"url", "signal", "timeout"}));
    ASSIGN_OR_RETURN(m.url, Required(a, "url"));
    ASSIGN_OR_RETURN(m.signal, Required(a, "signal"));
    static const std::set<std::string> kSignals = {"gpu_utilization", "cpu_utilization",
                                                   "gpu_memory_used_ratio"};
    if (!kSignals.contains(m.signal)) {
      return Bad(a, "signal",
                 fmt::format("unknown agent signal '{}'; use gpu_utilization, cpu_utilization "
                             "or gpu_memory_used_ratio",
                             m.signal));
    }
    ASSIGN_OR_RETURN(m.timeout, Millis(a, "timeout", m.timeout, milliseconds(1)));
  }
  if (c.Has("command")) {
    ++kinds;
    m.kind = MetricSourceConfig::Kind::kCommand;
    ASSIGN_OR_RETURN(m.command, Argv(c, "command", true));
  }
  if (kinds != 1) {
    return Bad(c, "",
               fmt::format("metric '{}' needs exactly one of prometheus, gateway, agent or "
                           "command (found {})",
                           m.name, kinds));
  }
  for (char ch : m.url) {
    if (std::isspace(static_cast<unsigned char>(ch))) return Bad(c, "", "a URL contains a space");
  }
  *has_target = c.Has("target");
  target->name = m.name;
  if (*has_target) {
    if (mode == Mode::kRules) {
      return Bad(c, "target", "mode: rules compares metrics in the profiles' rules; remove target");
    }
    ASSIGN_OR_RETURN(target->target, c.GetDouble("target", 0));
    if (!(target->target > 0)) return Bad(c, "target", "expected a number > 0");
    ASSIGN_OR_RETURN(target->activation, c.GetDouble("activation", 0));
    ASSIGN_OR_RETURN(std::string type, c.GetString("type", "average_value"));
    if (type == "average_value") {
      target->type = TargetType::kAverageValue;
    } else if (type == "value") {
      target->type = TargetType::kValue;
    } else if (type == "utilization") {
      target->type = TargetType::kUtilization;
    } else {
      return Bad(c, "type",
                 fmt::format("expected average_value, value or utilization, got '{}'", type));
    }
  } else if (c.Has("type") || c.Has("activation")) {
    return Bad(c, c.Has("type") ? "type" : "activation", "is only used together with target");
  }
  return m;
}

Result<Op> ParseOp(const Config& c, std::string_view key) {
  ASSIGN_OR_RETURN(std::string s, Required(c, key));
  std::string l = AsciiLower(s);
  if (l == ">" || l == "greaterthan") return Op::kGreaterThan;
  if (l == ">=" || l == "greaterthanorequal") return Op::kGreaterThanOrEqual;
  if (l == "<" || l == "lessthan") return Op::kLessThan;
  if (l == "<=" || l == "lessthanorequal") return Op::kLessThanOrEqual;
  if (l == "==" || l == "equals") return Op::kEquals;
  if (l == "!=" || l == "notequals") return Op::kNotEquals;
  return Bad(c, key,
             fmt::format("unknown operator '{}'; use GreaterThan, GreaterThanOrEqual, LessThan, "
                         "LessThanOrEqual, Equals, NotEquals (or > >= < <= == !=)",
                         s));
}

Result<Rule> ParseRule(const Config& c, const std::set<std::string>& metrics) {
  RETURN_IF_ERROR(
      c.CheckKnownKeys("", {"metric", "aggregation", "window", "divide_per_instance", "operator",
                            "threshold", "direction", "type", "value", "cooldown"}));
  Rule r;
  ASSIGN_OR_RETURN(r.metric, Required(c, "metric"));
  if (!metrics.contains(r.metric)) {
    return Bad(c, "metric", fmt::format("no metric named '{}' in this target's metrics", r.metric));
  }
  ASSIGN_OR_RETURN(std::string agg, c.GetString("aggregation", "Average"));
  static const std::pair<const char*, TimeAggregation> kAgg[] = {
      {"average", TimeAggregation::kAverage}, {"minimum", TimeAggregation::kMinimum},
      {"maximum", TimeAggregation::kMaximum}, {"total", TimeAggregation::kTotal},
      {"count", TimeAggregation::kCount},     {"last", TimeAggregation::kLast}};
  bool found = false;
  for (const auto& [name, value] : kAgg) {
    if (AsciiLower(agg) == name) r.aggregation = value, found = true;
  }
  if (!found) {
    return Bad(
        c, "aggregation",
        fmt::format("expected Average, Minimum, Maximum, Total, Count or Last, got '{}'", agg));
  }
  ASSIGN_OR_RETURN(r.window, Secs(c, "window", r.window));
  if (r.window < Seconds(60) || r.window > Seconds(12 * 3600)) {
    return Bad(c, "window", "expected 1 min .. 12 h (Azure autoscale's limits)");
  }
  ASSIGN_OR_RETURN(r.divide_per_instance, c.GetBool("divide_per_instance", false));
  ASSIGN_OR_RETURN(r.op, ParseOp(c, "operator"));
  if (!c.Has("threshold")) return Bad(c, "threshold", "is required");
  ASSIGN_OR_RETURN(r.threshold, c.GetDouble("threshold", 0));
  ASSIGN_OR_RETURN(std::string dir, Required(c, "direction"));
  dir = AsciiLower(dir);
  if (dir == "increase" || dir == "out") {
    r.direction = Direction::kIncrease;
  } else if (dir == "decrease" || dir == "in") {
    r.direction = Direction::kDecrease;
  } else {
    return Bad(c, "direction", fmt::format("expected Increase or Decrease, got '{}'", dir));
  }
  ASSIGN_OR_RETURN(std::string type, c.GetString("type", "ChangeCount"));
  type = AsciiLower(type);
  if (type == "changecount") {
    r.type = ActionType::kChangeCount;
  } else if (type == "percentchangecount") {
    r.type = ActionType::kPercentChangeCount;
  } else if (type == "exactcount") {
    r.type = ActionType::kExactCount;
  } else {
    return Bad(
        c, "type",
        fmt::format("expected ChangeCount, PercentChangeCount or ExactCount, got '{}'", type));
  }
  ASSIGN_OR_RETURN(r.value, c.GetInt("value", 1));
  if (r.value < (r.type == ActionType::kExactCount ? 0 : 1)) {
    return Bad(c, "value", "expected an integer >= 1 (>= 0 for ExactCount)");
  }
  ASSIGN_OR_RETURN(r.cooldown, Secs(c, "cooldown", r.cooldown));
  if (r.cooldown < Seconds(60) || r.cooldown > Seconds(7 * 24 * 3600)) {
    return Bad(c, "cooldown", "expected 1 min .. 1 week (Azure autoscale's limits)");
  }
  return r;
}

Result<Profile> ParseProfile(const Config& c, const std::set<std::string>& metrics) {
  RETURN_IF_ERROR(
      c.CheckKnownKeys("", {"name", "min", "max", "default", "recurrence", "fixed_date", "rules"}));
  Profile p;
  ASSIGN_OR_RETURN(p.name, Required(c, "name"));
  ASSIGN_OR_RETURN(p.minimum, c.GetInt("min", 0));
  ASSIGN_OR_RETURN(p.maximum, c.GetInt("max", 1));
  ASSIGN_OR_RETURN(p.default_count, c.GetInt("default", p.minimum));
  if (p.minimum < 0 || p.maximum < p.minimum || p.maximum < 1) {
    return Bad(c, "max",
               fmt::format("expected 0 <= min <= max and max >= 1, got min {} max {}", p.minimum,
                           p.maximum));
  }
  if (p.default_count < p.minimum || p.default_count > p.maximum) {
    return Bad(c, "default",
               fmt::format("expected min <= default <= max, got {}", p.default_count));
  }
  if (c.Has("recurrence") && c.Has("fixed_date")) {
    return Bad(c, "fixed_date", "a profile has a recurrence or a fixed date, not both");
  }
  if (c.Has("recurrence")) {
    ASSIGN_OR_RETURN(Config r, c.Sub("recurrence"));
    ASSIGN_OR_RETURN(WeeklyWindow w, Window(r));
    p.recurrence = w;
  }
  if (c.Has("fixed_date")) {
    ASSIGN_OR_RETURN(Config f, c.Sub("fixed_date"));
    RETURN_IF_ERROR(f.CheckKnownKeys("", {"start", "end"}));
    ASSIGN_OR_RETURN(auto start, Timestamp(f, "start"));
    ASSIGN_OR_RETURN(auto end, Timestamp(f, "end"));
    if (end <= start) return Bad(f, "end", "must be after start");
    p.fixed_date = std::make_pair(start, end);
  }
  ASSIGN_OR_RETURN(std::vector<Config> rules, c.Items("rules"));
  if (rules.size() > 10) return Bad(c, "rules", "at most 10 rules per profile (as in Azure)");
  for (const Config& r : rules) {
    ASSIGN_OR_RETURN(Rule rule, ParseRule(r, metrics));
    p.rules.push_back(std::move(rule));
  }
  return p;
}

Result<VmssConfig> Vmss(const Config& c) {
  RETURN_IF_ERROR(
      c.CheckKnownKeys("", {"subscription", "resource_group", "name", "endpoint", "api_version",
                            "force_deletion", "timeout", "operation_timeout", "credential"}));
  VmssConfig v;
  ASSIGN_OR_RETURN(v.subscription, Required(c, "subscription"));
  ASSIGN_OR_RETURN(v.resource_group, Required(c, "resource_group"));
  ASSIGN_OR_RETURN(v.name, Required(c, "name"));
  ASSIGN_OR_RETURN(v.endpoint, c.GetString("endpoint", v.endpoint));
  ASSIGN_OR_RETURN(v.api_version, c.GetString("api_version", v.api_version));
  ASSIGN_OR_RETURN(v.force_deletion, c.GetBool("force_deletion", false));
  ASSIGN_OR_RETURN(v.timeout, Millis(c, "timeout", v.timeout, milliseconds(1)));
  ASSIGN_OR_RETURN(v.operation_timeout,
                   Millis(c, "operation_timeout", v.operation_timeout, milliseconds(1)));
  ASSIGN_OR_RETURN(v.credential, security::ParseAzureCredential(c, "credential"));
  return v;
}

Result<ActuatorConfig> Actuator(const Config& c, const std::string& target,
                                const std::string& state_dir) {
  ActuatorConfig a;
  if (!c.IsMap("")) {
    return Bad(c, "", "expected exactly one of vmss, kubernetes, gateway or command");
  }
  RETURN_IF_ERROR(c.CheckKnownKeys("", {"vmss", "kubernetes", "gateway", "command"}));
  ASSIGN_OR_RETURN(std::vector<std::string> keys, c.Keys(""));
  if (keys.size() != 1) {
    return Bad(c, "", "expected exactly one of vmss, kubernetes, gateway or command");
  }
  ASSIGN_OR_RETURN(Config s, c.Sub(keys[0]));
  if (keys[0] == "vmss") {
    a.kind = ActuatorConfig::Kind::kVmss;
    ASSIGN_OR_RETURN(a.vmss, Vmss(s));
  } else if (keys[0] == "kubernetes") {
    a.kind = ActuatorConfig::Kind::kKubernetes;
    RETURN_IF_ERROR(s.CheckKnownKeys("", {"kind", "namespace", "name", "kubeconfig", "context",
                                          "in_cluster", "service_account_dir", "timeout"}));
    KubernetesConfig& k = a.kubernetes;
    ASSIGN_OR_RETURN(k.kind, s.GetString("kind", k.kind));
    if (k.kind != "Deployment" && k.kind != "StatefulSet") {
      return Bad(s, "kind", fmt::format("expected Deployment or StatefulSet, got '{}'", k.kind));
    }
    ASSIGN_OR_RETURN(k.namespace_, s.GetString("namespace", k.namespace_));
    ASSIGN_OR_RETURN(k.name, Required(s, "name"));
    ASSIGN_OR_RETURN(k.kubeconfig, s.GetString("kubeconfig", ""));
    ASSIGN_OR_RETURN(k.context, s.GetString("context", ""));
    ASSIGN_OR_RETURN(k.in_cluster, s.GetBool("in_cluster", false));
    ASSIGN_OR_RETURN(k.service_account_dir,
                     s.GetString("service_account_dir", k.service_account_dir));
    ASSIGN_OR_RETURN(k.timeout, Millis(s, "timeout", k.timeout, milliseconds(1)));
    if (k.in_cluster == !k.kubeconfig.empty()) {
      return Bad(s, "", "expected exactly one of kubeconfig: FILE or in_cluster: true");
    }
    if (k.kubeconfig.starts_with("~/")) {
      const char* home = std::getenv("HOME");
      k.kubeconfig = std::string(home ? home : "") + k.kubeconfig.substr(1);
    }
  } else if (keys[0] == "gateway") {
    a.kind = ActuatorConfig::Kind::kGateway;
    RETURN_IF_ERROR(
        s.CheckKnownKeys("", {"url", "admin_key_env", "pool", "start", "ports", "backend_prefix",
                              "ready_timeout", "drain_timeout", "stop_grace"}));
    GatewayActuatorConfig& g = a.gateway;
    ASSIGN_OR_RETURN(g.url, Required(s, "url"));
    ASSIGN_OR_RETURN(g.admin_key_env, s.GetString("admin_key_env", g.admin_key_env));
    ASSIGN_OR_RETURN(g.pool, Required(s, "pool"));
    ASSIGN_OR_RETURN(g.start, Argv(s, "start", true));
    ASSIGN_OR_RETURN(std::string ports, s.GetString("ports", "20000-20999"));
    char extra = 0;
    if (std::sscanf(ports.c_str(), "%d-%d%c", &g.port_min, &g.port_max, &extra) != 2 ||
        g.port_min < 1 || g.port_max > 65535 || g.port_min > g.port_max) {
      return Bad(s, "ports",
                 fmt::format("expected a port range such as 20000-20999, got '{}'", ports));
    }
    ASSIGN_OR_RETURN(g.backend_prefix, s.GetString("backend_prefix", target + "-"));
    ASSIGN_OR_RETURN(g.ready_timeout, Millis(s, "ready_timeout", g.ready_timeout, milliseconds(1)));
    ASSIGN_OR_RETURN(g.drain_timeout, Millis(s, "drain_timeout", g.drain_timeout));
    ASSIGN_OR_RETURN(g.stop_grace, Millis(s, "stop_grace", g.stop_grace));
    g.state_dir = state_dir + "/" + target;
  } else {
    a.kind = ActuatorConfig::Kind::kCommand;
    RETURN_IF_ERROR(s.CheckKnownKeys("", {"read", "scale", "timeout"}));
    ASSIGN_OR_RETURN(a.command.read, Argv(s, "read", true));
    ASSIGN_OR_RETURN(a.command.scale, Argv(s, "scale", true));
    ASSIGN_OR_RETURN(a.command.timeout, Millis(s, "timeout", a.command.timeout, milliseconds(1)));
  }
  return a;
}

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
  });
}

Result<TargetConfig> Target(const Config& c, const std::string& state_dir) {
  RETURN_IF_ERROR(
      c.CheckKnownKeys("", {"name", "min", "max", "interval", "mode", "metrics", "behavior",
                            "cooldown", "initial_cooldown", "fallback", "schedules", "floor_metric",
                            "profiles", "scale_in", "actuator"}));
  TargetConfig t;
  ASSIGN_OR_RETURN(t.name, Required(c, "name"));
  if (!ValidName(t.name)) {
    return Bad(c, "name",
               fmt::format("'{}' is not a name: use letters, digits, - _ . (<= 63)", t.name));
  }
  DecisionSpec& d = t.decision;
  d.target = t.name;
  if (!c.Has("max")) return Bad(c, "max", "is required (the most instances this target may have)");
  ASSIGN_OR_RETURN(d.min, c.GetInt("min", 0));
  ASSIGN_OR_RETURN(d.max, c.GetInt("max", 1));
  if (d.min < 0) return Bad(c, "min", fmt::format("{} is negative", d.min));
  if (d.max < 1) return Bad(c, "max", fmt::format("{} is below 1", d.max));
  if (d.max < d.min) return Bad(c, "max", fmt::format("{} is below min {}", d.max, d.min));
  ASSIGN_OR_RETURN(t.interval, Millis(c, "interval", t.interval, milliseconds(1000)));
  ASSIGN_OR_RETURN(std::string mode, c.GetString("mode", "hpa"));
  if (mode == "hpa") {
    d.mode = Mode::kHpa;
  } else if (mode == "rules") {
    d.mode = Mode::kRules;
  } else {
    return Bad(c, "mode", fmt::format("expected hpa or rules, got '{}'", mode));
  }

  ASSIGN_OR_RETURN(std::vector<Config> metrics, c.Items("metrics"));
  std::set<std::string> names;
  for (const Config& m : metrics) {
    MetricTarget mt;
    bool has_target = false;
    ASSIGN_OR_RETURN(MetricSourceConfig source, Metric(m, d.mode, &mt, &has_target));
    if (!names.insert(source.name).second) {
      return Bad(m, "name", fmt::format("a second metric named '{}'", source.name));
    }
    if (has_target) d.hpa.metrics.push_back(mt);
    t.metrics.push_back(std::move(source));
  }
  ASSIGN_OR_RETURN(d.floor_metric, c.GetString("floor_metric", ""));
  if (!d.floor_metric.empty() && !names.contains(d.floor_metric)) {
    return Bad(c, "floor_metric",
               fmt::format("no metric named '{}' in this target's metrics", d.floor_metric));
  }

  if (d.mode == Mode::kHpa) {
    for (const char* key : {"profiles"}) {
      if (c.Has(key)) return Bad(c, key, "profiles are for mode: rules");
    }
    if (d.hpa.metrics.empty() && c.Has("metrics")) {
      return Bad(c, "metrics",
                 "no metric has a target; mode: hpa scales on metrics with target: N");
    }
    ASSIGN_OR_RETURN(Config behavior, c.Sub("behavior"));
    RETURN_IF_ERROR(behavior.CheckKnownKeys("", {"scale_up", "scale_down"}));
    ASSIGN_OR_RETURN(d.hpa.up, Behavior(behavior, "scale_up", DefaultScaleUp()));
    ASSIGN_OR_RETURN(d.hpa.down, Behavior(behavior, "scale_down", DefaultScaleDown()));
    ASSIGN_OR_RETURN(d.hpa.cooldown, Secs(c, "cooldown", d.hpa.cooldown));
    ASSIGN_OR_RETURN(d.hpa.initial_cooldown, Secs(c, "initial_cooldown", d.hpa.initial_cooldown));
    if (c.Has("fallback")) {
      ASSIGN_OR_RETURN(Config f, c.Sub("fallback"));
      RETURN_IF_ERROR(f.CheckKnownKeys("", {"failure_threshold", "replicas"}));
      ASSIGN_OR_RETURN(int64_t n, f.GetInt("failure_threshold", 3));
      if (n < 1 || n > 1000) return Bad(f, "failure_threshold", "expected 1 .. 1000");
      d.hpa.fallback.failure_threshold = static_cast<int>(n);
      if (!f.Has("replicas")) return Bad(f, "replicas", "is required");
      ASSIGN_OR_RETURN(d.hpa.fallback.replicas, f.GetInt("replicas", 0));
      if (d.hpa.fallback.replicas < d.min || d.hpa.fallback.replicas > d.max) {
        return Bad(f, "replicas", fmt::format("expected min {} .. max {}", d.min, d.max));
      }
    }
  } else {
    for (const char* key : {"behavior", "cooldown", "initial_cooldown", "fallback"}) {
      if (c.Has(key)) return Bad(c, key, "is for mode: hpa; mode: rules uses each rule's cooldown");
    }
    ASSIGN_OR_RETURN(std::vector<Config> profiles, c.Items("profiles"));
    if (profiles.empty()) return Bad(c, "profiles", "mode: rules needs at least one profile");
    if (profiles.size() > 20) return Bad(c, "profiles", "at most 20 profiles (as in Azure)");
    int defaults = 0;
    for (const Config& p : profiles) {
      ASSIGN_OR_RETURN(Profile profile, ParseProfile(p, names));
      if (profile.minimum < d.min || profile.maximum > d.max) {
        return Bad(p, "max",
                   fmt::format("profile '{}' ({}..{}) goes outside the target's {}..{}",
                               profile.name, profile.minimum, profile.maximum, d.min, d.max));
      }
      if (!profile.recurrence && !profile.fixed_date) ++defaults;
      d.profiles.push_back(std::move(profile));
    }
    if (defaults != 1) {
      return Bad(c, "profiles",
                 fmt::format("expected exactly one default profile (without recurrence or "
                             "fixed_date), found {}",
                             defaults));
    }
  }
  if (d.mode == Mode::kHpa && d.hpa.metrics.empty() && !c.Has("schedules")) {
    return Bad(c, "metrics", "a target needs metrics with a target, or schedules");
  }

  ASSIGN_OR_RETURN(std::vector<Config> schedules, c.Items("schedules"));
  for (const Config& s : schedules) {
    Schedule sched;
    ASSIGN_OR_RETURN(sched.name,
                     s.GetString("name", fmt::format("schedule-{}", d.schedules.size())));
    ASSIGN_OR_RETURN(sched.window, Window(s));
    if (!s.Has("min")) return Bad(s, "min", "is required (the floor during the window)");
    ASSIGN_OR_RETURN(sched.min, s.GetInt("min", 0));
    if (sched.min < 0 || sched.min > d.max) {
      return Bad(s, "min", fmt::format("expected 0 .. max {}, got {}", d.max, sched.min));
    }
    d.schedules.push_back(std::move(sched));
  }

  if (c.Has("scale_in")) {
    ASSIGN_OR_RETURN(Config s, c.Sub("scale_in"));
    RETURN_IF_ERROR(s.CheckKnownKeys("", {"drain", "victim_check"}));
    if (s.Has("drain")) {
      ASSIGN_OR_RETURN(Config dr, s.Sub("drain"));
      RETURN_IF_ERROR(dr.CheckKnownKeys("", {"gateway", "admin_key_env", "timeout"}));
      ASSIGN_OR_RETURN(t.scale_in.drain_gateway, Required(dr, "gateway"));
      ASSIGN_OR_RETURN(t.scale_in.drain_admin_key_env,
                       dr.GetString("admin_key_env", t.scale_in.drain_admin_key_env));
      ASSIGN_OR_RETURN(t.scale_in.drain_timeout, Millis(dr, "timeout", t.scale_in.drain_timeout));
    }
    ASSIGN_OR_RETURN(t.scale_in.victim_check, Argv(s, "victim_check", false));
  }
  if (!c.Has("actuator")) {
    return Bad(c, "actuator", "is required: one of vmss, kubernetes, gateway or command");
  }
  ASSIGN_OR_RETURN(Config act, c.Sub("actuator"));
  ASSIGN_OR_RETURN(t.actuator, Actuator(act, t.name, state_dir));
  if (Status s = ValidateSpec(d); !s.ok()) return Bad(c, "", s.message());
  return t;
}

Result<SlurmPowerConfig> Slurm(const Config& c) {
  RETURN_IF_ERROR(c.CheckKnownKeys(
      "", {"nodes", "vmss", "resume_command", "suspend_command", "resume_timeout", "log_file"}));
  SlurmPowerConfig s;
  ASSIGN_OR_RETURN(s.nodes, Required(c, "nodes"));
  s.use_vmss = c.Has("vmss");
  if (s.use_vmss) {
    ASSIGN_OR_RETURN(Config v, c.Sub("vmss"));
    ASSIGN_OR_RETURN(s.vmss, Vmss(v));
    if (c.Has("resume_command") || c.Has("suspend_command")) {
      return Bad(c, "vmss", "use vmss or resume_command/suspend_command, not both");
    }
  } else {
    ASSIGN_OR_RETURN(s.resume_command, Argv(c, "resume_command", true));
    ASSIGN_OR_RETURN(s.suspend_command, Argv(c, "suspend_command", true));
  }
  ASSIGN_OR_RETURN(s.resume_timeout,
                   Millis(c, "resume_timeout", s.resume_timeout, milliseconds(1)));
  ASSIGN_OR_RETURN(s.log_file, c.GetString("log_file", ""));
  return s;
}

}  // namespace

Result<AutoscaleConfig> ParseAutoscaleConfig(const Config& config) {
  RETURN_IF_ERROR(config.CheckKnownKeys("", {"listen", "state_dir", "targets", "slurm"}));
  AutoscaleConfig out;
  out.path = config.Position("").origin;
  ASSIGN_OR_RETURN(out.listen, config.GetString("listen", ""));
  ASSIGN_OR_RETURN(out.state_dir, config.GetString("state_dir", "/var/lib/gantry/autoscale"));
  if (out.state_dir.empty()) return Bad(config, "state_dir", "is empty");
  ASSIGN_OR_RETURN(std::vector<Config> targets, config.Items("targets"));
  std::set<std::string> names;
  for (const Config& t : targets) {
    ASSIGN_OR_RETURN(TargetConfig target, Target(t, out.state_dir));
    if (!names.insert(target.name).second) {
      return Bad(t, "name", fmt::format("a second target named '{}'", target.name));
    }
    out.targets.push_back(std::move(target));
  }
  if (config.Has("slurm")) {
    ASSIGN_OR_RETURN(Config s, config.Sub("slurm"));
    ASSIGN_OR_RETURN(SlurmPowerConfig slurm, Slurm(s));
    out.slurm = std::move(slurm);
  }
  if (out.targets.empty() && !out.slurm) {
    return InvalidArgument(fmt::format(
        "{}: no targets and no slurm section: nothing to scale; add targets: [...]", out.path));
  }
  return out;
}

Result<AutoscaleConfig> LoadAutoscaleConfig(const std::string& path) {
  ASSIGN_OR_RETURN(Config config, Config::LoadFile(path));
  ASSIGN_OR_RETURN(AutoscaleConfig out, ParseAutoscaleConfig(config));
  out.path = path;
  return out;
}

}  // namespace gantry::autoscale
