// `gantry drift`: columnar tables read from CSV or JSON Lines with a schema,
// reference profiles saved once, and a comparison of a production window
// against a profile: per-column drift (the test chosen per column, see
// stats.h), dataset drift (share of drifted columns >= drift_share), data
// quality (nulls, type errors, out of range) and model quality when labels
// and predictions are present.
//
//   ASSIGN_OR_RETURN(Schema schema, Schema::LoadFile("schema.yaml"));
//   ASSIGN_OR_RETURN(Table ref, ReadTable("train.csv", schema));
//   ASSIGN_OR_RETURN(Profile profile, Profile::Build(ref, ProfileOptions{}));
//   RETURN_IF_ERROR(profile.Save("ref.profile"));
//   ASSIGN_OR_RETURN(Table cur, ReadTable("window.jsonl", schema));
//   ASSIGN_OR_RETURN(DriftReport r, Compare(profile, cur, CompareOptions{}));
//   std::cout << r.RenderTable();  WriteFile("report.html", r.RenderHtml());
//
// Schema file (YAML):
//   columns:
//     age: numerical
//     country: categorical
//     label: {type: categorical, role: target}        # roles: feature (default), target, prediction, score, ignore
//     pred: {type: categorical, role: prediction}
//     score: {type: numerical, role: score}            # positive-class score for ROC-AUC
//     # per-column overrides: {type: numerical, test: psi, threshold: 0.2, binning: quantiles, bins: 10}
//   drift_share: 0.5
//   task: classification | regression                 # for model quality (default from the target's type)
// Columns in the data but not in the schema are refused unless
// `extra_columns: ignore`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/drift/stats.h"

namespace gantry::drift {

enum class Role { kFeature, kTarget, kPrediction, kScore, kIgnore };

struct ColumnSpec {
  std::string name;
  ColumnKind kind = ColumnKind::kNumerical;
  Role role = Role::kFeature;
  std::optional<StatTest> test;      // override of DefaultStatTest
  std::optional<double> threshold;   // override of DefaultThreshold
  Binning binning = Binning::kSturges;
  int bins = 10;                     // for fixed and quantile binning
};

class Schema {
 public:
  static Result<Schema> LoadFile(const std::string& path);
  static Result<Schema> LoadString(std::string_view yaml, std::string_view origin);
  const std::vector<ColumnSpec>& columns() const { return columns_; }
  double drift_share() const { return drift_share_; }
  bool ignore_extra_columns() const { return ignore_extra_; }
  // "classification" or "regression"; "" when there is no target.
  const std::string& task() const { return task_; }
  const ColumnSpec* Find(std::string_view name) const;

 private:
  std::vector<ColumnSpec> columns_;
  double drift_share_ = 0.5;
  bool ignore_extra_ = false;
  std::string task_;
};

// One column, stored by kind. Categorical values are dictionary codes into
// `dictionary` (-1 = null). Numerical nulls are NaN.
struct Column {
  ColumnSpec spec;
  std::vector<double> numbers;         // kNumerical
  std::vector<int32_t> codes;          // kCategorical
  std::vector<std::string> dictionary; // kCategorical
  uint64_t nulls = 0;
  uint64_t type_errors = 0;  // numerical cells that did not parse (counted as null)
};

struct Table {
  uint64_t rows = 0;
  std::vector<Column> columns;  // in schema order (columns with role ignore are left out)
  // Schema-level settings, copied by ReadTable so a profile built from the
  // table carries them.
  double drift_share = 0.5;
  std::string task;
  const Column* Find(std::string_view name) const;
};

// CSV (RFC 4180: quotes, embedded commas/newlines, a header row) or JSON
// Lines (one object per line), chosen by extension (.csv, .jsonl/.ndjson) or
// `format` ("csv", "jsonl"). Empty cells, "NA", "null" and JSON null are
// nulls. Errors name file:line and the column. Parsing is multithreaded over
// row blocks; the result is the same as a serial read.
Result<Table> ReadTable(const std::string& path, const Schema& schema, std::string_view format = "");
Result<Table> ReadTableString(std::string_view text, std::string_view format, const Schema& schema,
                              std::string_view origin);

struct ProfileOptions {
  // Numerical columns keep their sorted non-null values up to this many rows
  // (exact KS and Wasserstein later); above it, a quantile sketch of
  // `sketch_points` points (results then approximate, said in the report).
  uint64_t max_exact_rows = 5'000'000;
  int sketch_points = 10'000;
};

// What a comparison needs of the reference, computed once: per column its
// kind and spec, row and null counts, distinct-value count, min/max (numbers)
// or category set with counts (categories), the sorted values (or sketch),
// mean and std. Saved as one file: a JSON header and binary arrays
// (little-endian float64), versioned; loading checks the version and sizes.
class Profile {
 public:
  static Result<Profile> Build(const Table& reference, const ProfileOptions& options);
  static Result<Profile> Load(const std::string& path);
  Status Save(const std::string& path) const;  // atomic (temp file + rename)
  const Json& header() const { return header_; }
  uint64_t rows() const;

  struct NumericalColumn {
    std::vector<double> sorted;  // non-null values, sorted (or the sketch)
    bool exact = true;
    double min = 0, max = 0, mean = 0, std = 0;
  };
  struct CategoricalColumn {
    std::vector<std::string> dictionary;
    std::vector<uint64_t> counts;
  };
  struct ColumnProfile {
    ColumnSpec spec;
    uint64_t rows = 0, nulls = 0, n_unique = 0;
    NumericalColumn numerical;
    CategoricalColumn categorical;
  };
  const std::vector<ColumnProfile>& columns() const { return columns_; }
  const std::string& task() const { return task_; }
  double drift_share() const { return drift_share_; }

 private:
  Json header_;
  std::vector<ColumnProfile> columns_;
  std::string task_;
  double drift_share_ = 0.5;
};

struct CompareOptions {
  int threads = 0;  // 0 = all cores; columns are compared in parallel
};

struct ColumnDrift {
  std::string column;
  Role role = Role::kFeature;  // kFeature or kPrediction (prediction drift, not in drifted_share)
  ColumnKind kind = ColumnKind::kNumerical;
  StatTest test = StatTest::kKs;
  double statistic = 0;
  double p_value = -1;      // -1 for distances
  double threshold = 0;
  bool drifted = false;
  bool exact = true;        // false when the reference was a sketch
  // For the HTML histograms: shared edges (numerical) or category names, and
  // the two distributions as shares.
  std::vector<double> edges;
  std::vector<std::string> categories;
  std::vector<double> reference_shares, current_shares;
  // Data quality of the current window.
  double null_rate = 0;
  double type_error_rate = 0;
  double out_of_range_rate = 0;  // outside the reference [min, max] or category set
  // Why the test could not run (e.g. no non-null current values); drifted is
  // then false. Empty normally.
  std::string note;
};

struct DriftReport {
  uint64_t reference_rows = 0, current_rows = 0;
  std::vector<ColumnDrift> columns;  // features (and the prediction column: prediction drift)
  double drift_share = 0.5;
  double drifted_share = 0;
  bool dataset_drift = false;        // drifted_share >= drift_share
  std::optional<ClassificationQuality> classification;
  std::optional<RegressionQuality> regression;
  double seconds = 0;

  // Stable keys: report ("gantry.drift"), version, reference_rows, current_rows,
  // dataset_drift, drifted_share, drift_share, columns[], quality.
  Json ToJson() const;
  // column, type, test, statistic, p-value, threshold, drifted, null %, out-of-range %.
  std::string RenderTable() const;
  // One self-contained HTML page (inline CSS and SVG, no scripts or external
  // files): summary, the table, and per column the two histograms overlaid.
  std::string RenderHtml() const;
  // Prometheus text exposition (0.0.4) for node_exporter's textfile collector
  // or a Pushgateway, so a scheduled comparison (cron, Slurm, the agent)
  // becomes metrics and alert rules: gantry_drift_dataset_drift,
  // gantry_drift_drifted_share, per column (labels column, test)
  // gantry_drift_column_{statistic,p_value,threshold,drifted,null_rate,
  // out_of_range_rate}, gantry_drift_model_{accuracy,f1_macro,roc_auc,mae,rmse,r2}
  // when computed, and gantry_drift_last_run_timestamp_seconds (`unix_time`).
  std::string RenderPrometheus(double unix_time) const;
};

// Compares `current` (read with the same schema) with the profile. Columns of
// the profile missing from `current` are an InvalidArgument naming them.
Result<DriftReport> Compare(const Profile& reference, const Table& current,
                            const CompareOptions& options);

}  // namespace gantry::drift
