// ParseSweep (the `sweep:` block), PlanTrials (grid and seeded random
// sampling) and ParamText.
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gantry/core/text.h"
#include "gantry/jobs/sweep.h"

namespace gantry::jobs {
namespace {

// Azure ML caps a sweep at 1000 trials because each trial is a cloud job;
// local trials are cheap, so the cap is higher.
constexpr int64_t kMaxTrials = 100'000;

Status Bad(const Config& view, std::string_view key, std::string_view what) {
  return InvalidArgument(fmt::format("{}: {}", view.Locate(key), what));
}

// A key that must be there and is not: the place is the enclosing map's.
Status Missing(const Config& view, std::string_view key, std::string_view what) {
  return InvalidArgument(fmt::format("{}: '{}' is required ({})", view.Locate(""), key, what));
}

Result<std::string> RequiredString(const Config& view, std::string_view key,
                                   std::string_view hint) {
  if (!view.Has(key)) return Missing(view, key, hint);
  ASSIGN_OR_RETURN(std::string s, view.GetString(key, ""));
  if (s.empty()) return Bad(view, key, fmt::format("is empty ({})", hint));
  return s;
}

Result<double> RequiredDouble(const Config& view, std::string_view key) {
  if (!view.Has(key)) return Missing(view, key, "a number");
  return view.GetDouble(key, 0);
}

// An integer key in [lo, hi], `fallback` when absent.
Result<int64_t> IntInRange(const Config& view, std::string_view key, int64_t fallback, int64_t lo,
                           int64_t hi) {
  ASSIGN_OR_RETURN(int64_t v, view.GetInt(key, fallback));
  if (v < lo || v > hi) {
    return Bad(view, key, fmt::format("{} is out of range; use {}..{}", v, lo, hi));
  }
  return v;
}

// A choice value keeps its YAML type as far as the config tells it: an
// integer, else a number, else the text (true, "a", ...).
Json ScalarJson(const Config& item) {
  if (Result<int64_t> i = item.GetInt("", 0); i.ok()) return Json(*i);
  if (Result<double> d = item.GetDouble("", 0); d.ok()) return Json(*d);
  Result<std::string> s = item.GetString("", "");
  return Json(s.ok() ? *s : std::string());
}

Status ParseChoice(const Config& p, ParamDomain* d) {
  RETURN_IF_ERROR(p.CheckKnownKeys("", {"type", "values"}));
  if (!p.IsList("values")) {
    return p.Has("values") ? Bad(p, "values", "must be a list, e.g. values: [16, 32, 64]")
                           : Missing(p, "values", "a list, e.g. values: [16, 32, 64]");
  }
  ASSIGN_OR_RETURN(std::vector<Config> items, p.Items("values"));
  if (items.empty()) return Bad(p, "values", "is empty; give at least one value");
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].IsScalar("")) {
      return Bad(p, fmt::format("values.{}", i), "must be a number or a string");
    }
    d->values.push_back(ScalarJson(items[i]));
  }
  return Status::Ok();
}

Status ParseRange(const Config& p, ParamDomain* d) {
  bool q = d->kind == ParamDomain::Kind::kQUniform;
  std::vector<std::string> known = {"type", "min_value", "max_value"};
  if (q) known.push_back("q");
  RETURN_IF_ERROR(p.CheckKnownKeys("", known));
  ASSIGN_OR_RETURN(d->min_value, RequiredDouble(p, "min_value"));
  ASSIGN_OR_RETURN(d->max_value, RequiredDouble(p, "max_value"));
  if (!(d->min_value < d->max_value)) {
    return Bad(p, "max_value",
               fmt::format("{} must be greater than min_value {}", d->max_value, d->min_value));
  }
  if (d->kind == ParamDomain::Kind::kLogUniform && d->min_value <= 0) {
    return Bad(p, "min_value",
               fmt::format("{} must be > 0: loguniform takes the values themselves (not "
                           "exponents) and samples their logarithm uniformly",
                           d->min_value));
  }
  if (q) {
    ASSIGN_OR_RETURN(d->q, RequiredDouble(p, "q"));
    if (!(d->q > 0)) return Bad(p, "q", fmt::format("{} must be > 0", d->q));
  }
  return Status::Ok();
}

Result<ParamDomain> ParseParam(const Config& space, const std::string& name) {
  ASSIGN_OR_RETURN(Config p, space.Sub(name));
  if (!p.IsMap("")) {
    return Bad(space, name,
               "must be a map such as {type: choice, values: [1, 2]} or "
               "{type: uniform, min_value: 0, max_value: 1}");
  }
  ParamDomain d;
  d.name = name;
  static const std::vector<std::string> kTypes = {"choice", "uniform", "loguniform", "quniform",
                                                  "randint"};
  ASSIGN_OR_RETURN(std::string type, RequiredString(p, "type", Join(kTypes, ", ")));
  if (type == "choice") {
    d.kind = ParamDomain::Kind::kChoice;
    RETURN_IF_ERROR(ParseChoice(p, &d));
  } else if (type == "uniform" || type == "loguniform" || type == "quniform") {
    d.kind = type == "uniform"      ? ParamDomain::Kind::kUniform
             : type == "loguniform" ? ParamDomain::Kind::kLogUniform
                                    : ParamDomain::Kind::kQUniform;
    RETURN_IF_ERROR(ParseRange(p, &d));
  } else if (type == "randint") {
    d.kind = ParamDomain::Kind::kRandInt;
    RETURN_IF_ERROR(p.CheckKnownKeys("", {"type", "upper"}));
    if (!p.Has("upper")) return Missing(p, "upper", "randint draws from 0..upper-1");
    ASSIGN_OR_RETURN(d.upper, IntInRange(p, "upper", 1, 1, int64_t{1} << 53));
  } else {
    std::optional<std::string> near = ClosestMatch(type, kTypes, 3);
    return Bad(
        p, "type",
        fmt::format("unknown parameter type '{}'{}; use one of {}", type,
                    near ? fmt::format(" (did you mean '{}'?)", *near) : "", Join(kTypes, ", ")));
  }
  return d;
}

Status ParseSpace(const Config& view, SweepSpec* spec) {
  if (!view.IsMap("search_space")) {
    constexpr std::string_view kWhat =
        "a map of parameter name to domain, e.g. "
        "lr: {type: loguniform, min_value: 1.0e-4, max_value: 0.1}";
    return view.Has("search_space") ? Bad(view, "search_space", fmt::format("must be {}", kWhat))
                                    : Missing(view, "search_space", kWhat);
  }
  ASSIGN_OR_RETURN(Config space, view.Sub("search_space"));
  ASSIGN_OR_RETURN(std::vector<std::string> names, space.Keys(""));
  if (names.empty()) return Bad(view, "search_space", "is empty; name at least one parameter");
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(ParamDomain d, ParseParam(space, name));
    spec->space.push_back(std::move(d));
  }
  return Status::Ok();
}

Status ParseSampling(const Config& view, SweepSpec* spec) {
  std::string type = "random";
  Config at = view;
  std::string key = "sampling_algorithm";
  if (view.IsMap(key)) {
    ASSIGN_OR_RETURN(at, view.Sub(key));
    RETURN_IF_ERROR(at.CheckKnownKeys("", {"type", "seed"}));
    ASSIGN_OR_RETURN(type, at.GetString("type", "random"));
    ASSIGN_OR_RETURN(int64_t seed, IntInRange(at, "seed", 0, 0, INT64_MAX));
    spec->seed = static_cast<uint64_t>(seed);
    key = "type";
  } else {
    ASSIGN_OR_RETURN(type, view.GetString(key, "random"));
  }
  if (type == "grid") {
    spec->sampling = SweepSpec::Sampling::kGrid;
  } else if (type == "random") {
    spec->sampling = SweepSpec::Sampling::kRandom;
  } else if (type == "bayesian") {
    return Bad(at, key, "bayesian sampling is not supported; use random (with a seed) or grid");
  } else {
    return Bad(at, key, fmt::format("unknown sampling '{}'; use grid or random", type));
  }
  if (spec->sampling == SweepSpec::Sampling::kRandom) return Status::Ok();
  for (const ParamDomain& d : spec->space) {
    if (d.kind != ParamDomain::Kind::kChoice) {
      return Bad(view, fmt::format("search_space.{}", d.name),
                 fmt::format("grid sampling takes only choice parameters and '{}' is not one; "
                             "make it {{type: choice, values: [...]}} or use random sampling",
                             d.name));
    }
  }
  return Status::Ok();
}

Status ParseObjective(const Config& view, SweepSpec* spec) {
  if (!view.IsMap("objective")) {
    constexpr std::string_view kWhat = "a map such as {primary_metric: accuracy, goal: maximize}";
    return view.Has("objective") ? Bad(view, "objective", fmt::format("must be {}", kWhat))
                                 : Missing(view, "objective", kWhat);
  }
  ASSIGN_OR_RETURN(Config obj, view.Sub("objective"));
  RETURN_IF_ERROR(obj.CheckKnownKeys("", {"primary_metric", "goal"}));
  ASSIGN_OR_RETURN(spec->primary_metric,
                   RequiredString(obj, "primary_metric", "the metric name the trials report"));
  ASSIGN_OR_RETURN(std::string goal, RequiredString(obj, "goal", "maximize or minimize"));
  if (goal == "maximize") {
    spec->goal = Goal::kMaximize;
  } else if (goal == "minimize") {
    spec->goal = Goal::kMinimize;
  } else {
    return Bad(obj, "goal", fmt::format("'{}' is neither maximize nor minimize", goal));
  }
  return Status::Ok();
}

Status ParseAzurePolicyInterval(const Config& et, PolicySpec* p) {
  ASSIGN_OR_RETURN(int64_t interval, IntInRange(et, "evaluation_interval", 1, 1, INT32_MAX));
  ASSIGN_OR_RETURN(int64_t delay, IntInRange(et, "delay_evaluation", 0, 0, INT32_MAX));
  p->evaluation_interval = static_cast<int>(interval);
  p->delay_evaluation = static_cast<int>(delay);
  return Status::Ok();
}

Status ParseBandit(const Config& et, PolicySpec* p) {
  RETURN_IF_ERROR(et.CheckKnownKeys(
      "", {"type", "slack_factor", "slack_amount", "evaluation_interval", "delay_evaluation"}));
  RETURN_IF_ERROR(ParseAzurePolicyInterval(et, p));
  bool factor = et.Has("slack_factor"), amount = et.Has("slack_amount");
  if (factor == amount) {
    return Bad(et, "",
               factor ? "gives both slack_factor and slack_amount; keep one"
                      : "needs slack_factor (a ratio) or slack_amount (absolute)");
  }
  std::string key = factor ? "slack_factor" : "slack_amount";
  ASSIGN_OR_RETURN(double v, et.GetDouble(key, 0));
  if (!(v >= 0)) return Bad(et, key, fmt::format("{} must be >= 0", v));
  (factor ? p->slack_factor : p->slack_amount) = v;
  return Status::Ok();
}

Status ParseAsha(const Config& et, PolicySpec* p) {
  RETURN_IF_ERROR(et.CheckKnownKeys("", {"type", "grace_period", "reduction_factor", "max_t"}));
  ASSIGN_OR_RETURN(p->grace_period, IntInRange(et, "grace_period", 1, 1, INT64_MAX / 2));
  ASSIGN_OR_RETURN(p->reduction_factor, IntInRange(et, "reduction_factor", 4, 2, 1'000'000));
  ASSIGN_OR_RETURN(p->max_t, IntInRange(et, "max_t", 100, 1, INT64_MAX / 2));
  return Status::Ok();
}

Status ParseOptuna(const Config& et, bool percentile, PolicySpec* p) {
  std::vector<std::string> known = {"type", "n_startup_trials", "n_warmup_steps", "interval_steps",
                                    "n_min_trials"};
  if (percentile) known.push_back("percentile");
  RETURN_IF_ERROR(et.CheckKnownKeys("", known));
  if (percentile) {
    ASSIGN_OR_RETURN(p->percentile, RequiredDouble(et, "percentile"));
    if (!(p->percentile >= 0 && p->percentile <= 100)) {
      return Bad(et, "percentile", fmt::format("{} is outside 0..100", p->percentile));
    }
  }
  ASSIGN_OR_RETURN(int64_t startup, IntInRange(et, "n_startup_trials", 5, 0, INT32_MAX));
  ASSIGN_OR_RETURN(p->n_warmup_steps, IntInRange(et, "n_warmup_steps", 0, 0, INT64_MAX / 2));
  ASSIGN_OR_RETURN(p->interval_steps, IntInRange(et, "interval_steps", 1, 1, INT64_MAX / 2));
  ASSIGN_OR_RETURN(int64_t min_trials, IntInRange(et, "n_min_trials", 1, 1, INT32_MAX));
  p->n_startup_trials = static_cast<int>(startup);
  p->n_min_trials = static_cast<int>(min_trials);
  return Status::Ok();
}

Status ParsePolicy(const Config& view, PolicySpec* p) {
  if (!view.Has("early_termination")) return Status::Ok();
  if (!view.IsMap("early_termination")) {
    return Bad(view, "early_termination", "must be a map, e.g. {type: bandit, slack_factor: 0.1}");
  }
  ASSIGN_OR_RETURN(Config et, view.Sub("early_termination"));
  static const std::vector<std::string> kTypes = {
      "bandit", "median_stopping", "truncation_selection",
      "asha",   "optuna_median",   "optuna_percentile"};
  ASSIGN_OR_RETURN(std::string type, RequiredString(et, "type", Join(kTypes, ", ")));
  if (type == "bandit") {
    p->kind = PolicyKind::kBandit;
    return ParseBandit(et, p);
  }
  if (type == "median_stopping") {
    p->kind = PolicyKind::kMedian;
    RETURN_IF_ERROR(et.CheckKnownKeys("", {"type", "evaluation_interval", "delay_evaluation"}));
    return ParseAzurePolicyInterval(et, p);
  }
  if (type == "truncation_selection") {
    p->kind = PolicyKind::kTruncation;
    RETURN_IF_ERROR(et.CheckKnownKeys(
        "", {"type", "truncation_percentage", "evaluation_interval", "delay_evaluation"}));
    if (!et.Has("truncation_percentage")) {
      return Missing(et, "truncation_percentage", "1..99");
    }
    ASSIGN_OR_RETURN(int64_t pct, IntInRange(et, "truncation_percentage", 0, 1, 99));
    p->truncation_percentage = static_cast<int>(pct);
    return ParseAzurePolicyInterval(et, p);
  }
  if (type == "asha") {
    p->kind = PolicyKind::kAsha;
    return ParseAsha(et, p);
  }
  if (type == "optuna_median" || type == "optuna_percentile") {
    bool percentile = type == "optuna_percentile";
    p->kind = percentile ? PolicyKind::kOptunaPercentile : PolicyKind::kOptunaMedian;
    return ParseOptuna(et, percentile, p);
  }
  std::optional<std::string> near = ClosestMatch(type, kTypes, 3);
  return Bad(
      et, "type",
      fmt::format("unknown early_termination type '{}'{}; use one of {}", type,
                  near ? fmt::format(" (did you mean '{}'?)", *near) : "", Join(kTypes, ", ")));
}

Result<std::chrono::seconds> Seconds(const Config& lim, std::string_view key,
                                     std::chrono::seconds fallback) {
  ASSIGN_OR_RETURN(std::chrono::nanoseconds d, lim.GetDuration(key, fallback));
  auto s = std::chrono::duration_cast<std::chrono::seconds>(d);
  if (lim.Has(key) && s.count() < 1) {
    return Bad(lim, key, "must be at least 1s (e.g. 30m, 2h or a number of seconds)");
  }
  return s;
}

Status ParseLimits(const Config& view, SweepSpec* spec) {
  ASSIGN_OR_RETURN(Config lim, view.Sub("limits"));
  RETURN_IF_ERROR(lim.CheckKnownKeys(
      "", {"max_total_trials", "max_concurrent_trials", "timeout", "trial_timeout"}));
  ASSIGN_OR_RETURN(int64_t total, IntInRange(lim, "max_total_trials", 1000, 1, kMaxTrials));
  ASSIGN_OR_RETURN(int64_t conc, IntInRange(lim, "max_concurrent_trials", 0, 0, kMaxTrials));
  if (lim.Has("max_concurrent_trials") && conc == 0) {
    return Bad(lim, "max_concurrent_trials", "must be at least 1 (leave it out for no limit)");
  }
  spec->max_total_trials = static_cast<int>(total);
  spec->max_concurrent_trials = static_cast<int>(conc);
  ASSIGN_OR_RETURN(spec->timeout, Seconds(lim, "timeout", spec->timeout));
  ASSIGN_OR_RETURN(spec->trial_timeout, Seconds(lim, "trial_timeout", spec->trial_timeout));
  return Status::Ok();
}

Status ParseCheckpoint(const Config& view, SweepSpec* spec) {
  ASSIGN_OR_RETURN(std::string mode, view.GetString("checkpoint", "kill"));
  if (mode == "kill") return Status::Ok();
  if (mode != "pause") {
    return Bad(view, "checkpoint", fmt::format("'{}' is neither kill nor pause", mode));
  }
  if (spec->policy.kind != PolicyKind::kAsha) {
    return Bad(view, "checkpoint",
               "pause needs early_termination type asha, the only policy that resumes "
               "(promotes) a pruned trial; use checkpoint: kill with this policy");
  }
  spec->pause_on_prune = true;
  return Status::Ok();
}

Status ParseRegister(const Config& view, SweepSpec* spec) {
  if (!view.Has("register")) return Status::Ok();
  if (!view.IsMap("register")) {
    return Bad(view, "register", "must be a map {name: ..., path: ..., registry: ...}");
  }
  ASSIGN_OR_RETURN(Config reg, view.Sub("register"));
  RETURN_IF_ERROR(reg.CheckKnownKeys("", {"name", "path", "registry"}));
  RegisterSpec r;
  ASSIGN_OR_RETURN(r.name, RequiredString(reg, "name", "the model name"));
  ASSIGN_OR_RETURN(r.path, RequiredString(reg, "path", "relative to the best trial's directory"));
  ASSIGN_OR_RETURN(r.registry, RequiredString(reg, "registry", "a registry root directory"));
  spec->register_best = std::move(r);
  return Status::Ok();
}

// ---- Sampling

// [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution whose algorithm the standard leaves open.
double Unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform in [0, n) without modulo bias.
uint64_t Below(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

// Digits after the point in the shortest form of `q` (0.05 -> 2), so that
// 3 * 0.1 is stored as 0.3 and not 0.30000000000000004.
int Decimals(double q) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, q);
  std::string_view s(buf, end - buf);
  size_t e = s.find('e');
  int exp = 0;
  if (e != std::string_view::npos) {
    ParseNumber(s.substr(e + 1), &exp);
    s = s.substr(0, e);
  }
  size_t dot = s.find('.');
  int frac = dot == std::string_view::npos ? 0 : static_cast<int>(s.size() - dot - 1);
  return std::max(0, frac - exp);
}

Json QUniform(const ParamDomain& d, double u) {
  double k = std::round((d.min_value + u * (d.max_value - d.min_value)) / d.q);
  double v = k * d.q;
  if (d.q == std::floor(d.q) && std::fabs(v) < 0x1.0p53) return Json(static_cast<int64_t>(v));
  int places = Decimals(d.q);
  if (places > 0 && places < 17) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, places);
    double rounded = v;
    if (ec == std::errc() && ParseNumber(std::string_view(buf, end - buf), &rounded)) v = rounded;
  }
  return Json(v);
}

Json Draw(const ParamDomain& d, std::mt19937_64& rng) {
  switch (d.kind) {
    case ParamDomain::Kind::kChoice:
      return d.values[Below(rng, d.values.size())];
    case ParamDomain::Kind::kUniform:
      return Json(d.min_value + Unit(rng) * (d.max_value - d.min_value));
    case ParamDomain::Kind::kLogUniform: {
      double lo = std::log(d.min_value), hi = std::log(d.max_value);
      return Json(std::exp(lo + Unit(rng) * (hi - lo)));
    }
    case ParamDomain::Kind::kQUniform:
      return QUniform(d, Unit(rng));
    case ParamDomain::Kind::kRandInt:
      return Json(static_cast<int64_t>(Below(rng, static_cast<uint64_t>(d.upper))));
  }
  return Json();
}

std::vector<ParamValues> Grid(const SweepSpec& spec) {
  std::vector<ParamValues> out;
  std::vector<size_t> index(spec.space.size(), 0);
  while (out.size() < static_cast<size_t>(spec.max_total_trials)) {
    ParamValues trial;
    for (size_t i = 0; i < spec.space.size(); ++i) {
      trial.emplace_back(spec.space[i].name, spec.space[i].values[index[i]]);
    }
    out.push_back(std::move(trial));
    // Odometer: the last parameter varies fastest.
    size_t i = spec.space.size();
    while (i > 0) {
      --i;
      if (++index[i] < spec.space[i].values.size()) break;
      index[i] = 0;
      if (i == 0) return out;
    }
  }
  return out;
}

}  // namespace

Result<SweepSpec> ParseSweep(const Config& view) {
  if (!view.IsMap("")) {
    return Bad(view, "",
               "must be a map with search_space, objective and optionally "
               "sampling_algorithm, early_termination, limits, checkpoint, register");
  }
  RETURN_IF_ERROR(
      view.CheckKnownKeys("", {"search_space", "sampling_algorithm", "objective",
                               "early_termination", "limits", "checkpoint", "register"}));
  SweepSpec spec;
  RETURN_IF_ERROR(ParseSpace(view, &spec));
  RETURN_IF_ERROR(ParseSampling(view, &spec));
  RETURN_IF_ERROR(ParseObjective(view, &spec));
  RETURN_IF_ERROR(ParsePolicy(view, &spec.policy));
  RETURN_IF_ERROR(ParseLimits(view, &spec));
  RETURN_IF_ERROR(ParseCheckpoint(view, &spec));
  RETURN_IF_ERROR(ParseRegister(view, &spec));
  return spec;
}

Result<std::vector<ParamValues>> PlanTrials(const SweepSpec& spec) {
  if (spec.space.empty()) return InvalidArgument("sweep: the search space is empty");
  if (spec.max_total_trials < 1) {
    return InvalidArgument(
        fmt::format("sweep: max_total_trials is {}; it must be at least 1", spec.max_total_trials));
  }
  for (const ParamDomain& d : spec.space) {
    bool grid_ok = d.kind == ParamDomain::Kind::kChoice;
    if (spec.sampling == SweepSpec::Sampling::kGrid && !grid_ok) {
      return InvalidArgument(fmt::format(
          "sweep: grid sampling takes only choice parameters; '{}' is not one", d.name));
    }
    if (d.kind == ParamDomain::Kind::kChoice && d.values.empty()) {
      return InvalidArgument(fmt::format("sweep: parameter '{}' has no values", d.name));
    }
  }
  if (spec.sampling == SweepSpec::Sampling::kGrid) return Grid(spec);
  std::mt19937_64 rng(spec.seed);
  std::vector<ParamValues> out;
  out.reserve(static_cast<size_t>(spec.max_total_trials));
  for (int t = 0; t < spec.max_total_trials; ++t) {
    ParamValues trial;
    for (const ParamDomain& d : spec.space) trial.emplace_back(d.name, Draw(d, rng));
    out.push_back(std::move(trial));
  }
  return out;
}

std::string ParamText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value.get<double>());
    return std::string(buf, end);
  }
  return value.dump();
}

}  // namespace gantry::jobs
