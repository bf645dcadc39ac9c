// Schema: the YAML file that names column types, roles and per-column test
// overrides (format in drift.h and docs/drift.md). Parsing goes through
// gantry::Config so that every error carries file:line and a suggestion for
// misspelt keys.
#include <fmt/format.h>

#include <set>

#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/drift/drift.h"
#include "names.h"

namespace gantry::drift {
namespace {

Result<ColumnKind> ParseKind(std::string_view text, const Config& cfg, const std::string& key) {
  if (text == "numerical" || text == "numeric" || text == "num") return ColumnKind::kNumerical;
  if (text == "categorical" || text == "cat") return ColumnKind::kCategorical;
  return InvalidArgument(fmt::format("{}: unknown column type '{}'; use numerical or categorical",
                                     cfg.Locate(key), text));
}

Result<Role> ParseRole(std::string_view text, const Config& cfg, const std::string& key) {
  if (text == "feature") return Role::kFeature;
  if (text == "target" || text == "label") return Role::kTarget;
  if (text == "prediction") return Role::kPrediction;
  if (text == "score") return Role::kScore;
  if (text == "ignore") return Role::kIgnore;
  return InvalidArgument(
      fmt::format("{}: unknown role '{}'; use feature, target, prediction, score or ignore",
                  cfg.Locate(key), text));
}

Result<ColumnSpec> ParseColumn(const Config& cfg, const std::string& name) {
  const std::string key = "columns." + name;
  ColumnSpec spec;
  spec.name = name;
  if (cfg.IsScalar(key)) {
    ASSIGN_OR_RETURN(std::string kind, cfg.GetString(key, ""));
    ASSIGN_OR_RETURN(spec.kind, ParseKind(kind, cfg, key));
    return spec;
  }
  RETURN_IF_ERROR(
      cfg.CheckKnownKeys(key, {"type", "role", "test", "threshold", "binning", "bins"}));
  if (!cfg.Has(key + ".type")) {
    return InvalidArgument(
        fmt::format("{}: column '{}' has no type; add type: numerical or "
                    "type: categorical",
                    cfg.Locate(key), name));
  }
  ASSIGN_OR_RETURN(std::string kind, cfg.GetString(key + ".type", ""));
  ASSIGN_OR_RETURN(spec.kind, ParseKind(kind, cfg, key + ".type"));
  ASSIGN_OR_RETURN(std::string role, cfg.GetString(key + ".role", "feature"));
  ASSIGN_OR_RETURN(spec.role, ParseRole(role, cfg, key + ".role"));
  if (cfg.Has(key + ".test")) {
    ASSIGN_OR_RETURN(std::string test, cfg.GetString(key + ".test", ""));
    std::optional<StatTest> t = internal::TestFromName(test);
    if (!t) {
      return InvalidArgument(fmt::format(
          "{}: unknown test '{}'; use ks, wasserstein, psi, jensenshannon, hellinger, anderson, "
          "chisquare, z or linf",
          cfg.Locate(key + ".test"), test));
    }
    bool numerical_only =
        *t == StatTest::kKs || *t == StatTest::kWasserstein || *t == StatTest::kAndersonDarling;
    bool categorical_only =
        *t == StatTest::kChiSquared || *t == StatTest::kZTest || *t == StatTest::kLInfinity;
    if ((numerical_only && spec.kind != ColumnKind::kNumerical) ||
        (categorical_only && spec.kind != ColumnKind::kCategorical)) {
      return InvalidArgument(
          fmt::format("{}: test '{}' does not apply to a {} column", cfg.Locate(key + ".test"),
                      test, spec.kind == ColumnKind::kNumerical ? "numerical" : "categorical"));
    }
    spec.test = *t;
  }
  if (cfg.Has(key + ".threshold")) {
    ASSIGN_OR_RETURN(double th, cfg.GetDouble(key + ".threshold", 0));
    if (!(th > 0)) {
      return InvalidArgument(
          fmt::format("{}: threshold must be > 0, got {}", cfg.Locate(key + ".threshold"), th));
    }
    spec.threshold = th;
  }
  if (cfg.Has(key + ".binning")) {
    ASSIGN_OR_RETURN(std::string b, cfg.GetString(key + ".binning", ""));
    std::optional<Binning> binning = internal::BinningFromName(b);
    if (!binning) {
      return InvalidArgument(
          fmt::format("{}: unknown binning '{}'; use sturges, doane, fixed or quantiles",
                      cfg.Locate(key + ".binning"), b));
    }
    spec.binning = *binning;
  }
  ASSIGN_OR_RETURN(int64_t bins, cfg.GetInt(key + ".bins", 10));
  if (bins < 1 || bins > 10000) {
    return InvalidArgument(
        fmt::format("{}: bins must be in 1..10000, got {}", cfg.Locate(key + ".bins"), bins));
  }
  spec.bins = static_cast<int>(bins);
  return spec;
}

}  // namespace

Result<Schema> Schema::LoadString(std::string_view yaml, std::string_view origin) {
  ASSIGN_OR_RETURN(Config cfg, Config::LoadString(yaml, origin));
  {
    RETURN_IF_ERROR(cfg.CheckKnownKeys("", {"columns", "drift_share", "task", "extra_columns"}));
    if (!cfg.Has("columns")) {
      return InvalidArgument(
          fmt::format("{}: no 'columns' map; list each column with its type, "
                      "e.g. columns: {{age: numerical}}",
                      cfg.origin()));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names, cfg.Keys("columns"));
    if (names.empty()) {
      return InvalidArgument(fmt::format("{}: 'columns' is empty", cfg.Locate("columns")));
    }
    Schema s;
    std::vector<ColumnSpec>& cols = s.columns_;
    for (const std::string& name : names) {
      ASSIGN_OR_RETURN(ColumnSpec spec, ParseColumn(cfg, name));
      cols.push_back(std::move(spec));
    }
    ASSIGN_OR_RETURN(double share, cfg.GetDouble("drift_share", 0.5));
    if (!(share > 0 && share <= 1)) {
      return InvalidArgument(fmt::format("{}: drift_share must be in (0, 1], got {}",
                                         cfg.Locate("drift_share"), share));
    }
    s.drift_share_ = share;
    ASSIGN_OR_RETURN(std::string extra, cfg.GetString("extra_columns", "refuse"));
    if (extra != "refuse" && extra != "ignore") {
      return InvalidArgument(fmt::format("{}: extra_columns must be refuse or ignore, got '{}'",
                                         cfg.Locate("extra_columns"), extra));
    }
    s.ignore_extra_ = extra == "ignore";
    int targets = 0, predictions = 0, scores = 0;
    const ColumnSpec* target = nullptr;
    for (const ColumnSpec& c : cols) {
      if (c.role == Role::kTarget) ++targets, target = &c;
      if (c.role == Role::kPrediction) ++predictions;
      if (c.role == Role::kScore) {
        ++scores;
        if (c.kind != ColumnKind::kNumerical) {
          return InvalidArgument(fmt::format("{}: the score column '{}' must be numerical",
                                             cfg.Locate("columns." + c.name), c.name));
        }
      }
    }
    if (targets > 1 || predictions > 1 || scores > 1) {
      return InvalidArgument(fmt::format(
          "{}: at most one column each with role target, prediction and score", cfg.origin()));
    }
    ASSIGN_OR_RETURN(std::string task, cfg.GetString("task", ""));
    if (!task.empty() && task != "classification" && task != "regression") {
      return InvalidArgument(fmt::format("{}: task must be classification or regression, got '{}'",
                                         cfg.Locate("task"), task));
    }
    if (task.empty() && target != nullptr) {
      task = target->kind == ColumnKind::kCategorical ? "classification" : "regression";
    }
    if (target == nullptr) task.clear();
    s.task_ = task;
    return s;
  }
}

Result<Schema> Schema::LoadFile(const std::string& path) {
  // Read through Config so a missing file is NotFound naming the path, then
  // parse the text with the path as origin (errors read "path:line:col").
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return LoadString(text, path);
}

const ColumnSpec* Schema::Find(std::string_view name) const {
  for (const ColumnSpec& c : columns_) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace gantry::drift
