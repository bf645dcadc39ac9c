// `gantry drift profile|compare|validate`: flag parsing and printing only;
// the work is in gantry::drift (include/gantry/drift/).
//
// Exit codes: profile 0 ok / 2 usage or bad input; compare 0 no dataset
// drift / 1 dataset drift / 2 usage or bad input; validate 0 thresholds met /
// 1 below a threshold or the endpoint failed / 2 usage or bad input.
// --azure-monitor FILE (compare, validate) also sends the results as Azure
// Monitor custom metrics; a failed send is an error on stderr naming the
// endpoint and turns exit 0 into 1, never a drift verdict of 1 into
// something else (docs/drift.md, "Azure Monitor custom metrics").
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli.h"
#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/drift/azure_metrics.h"
#include "gantry/drift/drift.h"
#include "gantry/drift/validate.h"
#include "gantry/monitor/custom_metrics.h"

namespace gantry::cli {
namespace {

struct DriftFlags {
  CommonFlags common;
  std::string schema, data, out, format;
  // compare
  std::string reference, current, html, prom;
  std::string azure_monitor;  // compare, validate: a YAML with azure_monitor.metrics
  int threads = 0;
  uint64_t max_exact_rows = 5'000'000;
  // validate
  std::string endpoint, protocol = "kserve", model, api_key;
  int batch = 64;
  bool per_column = false;
  double timeout_s = 30;
  std::optional<double> min_accuracy, min_f1, max_rmse;
};

// A note on stderr before reading a big file, so a long read is not silent.
void NoteRead(const std::string& path, bool json) {
  struct stat st;
  if (json || !isatty(STDERR_FILENO) || stat(path.c_str(), &st) != 0) return;
  if (st.st_size >= (64 << 20)) {
    std::cerr << fmt::format("reading {} ({:.0f} MiB)...\n", path, st.st_size / 1048576.0);
  }
}

Result<drift::Table> Read(const DriftFlags& f, const std::string& path, const drift::Schema& s) {
  NoteRead(path, f.common.json);
  return drift::ReadTable(path, s, f.format);
}

using MetricsConfig = std::optional<monitor::AzureMonitorMetricsConfig>;

// --azure-monitor FILE, read before any work so that a bad file is exit 2 at once.
Result<MetricsConfig> LoadMetricsConfig(const std::string& path) {
  if (path.empty()) return MetricsConfig();
  ASSIGN_OR_RETURN(Config c, Config::LoadFile(path));
  ASSIGN_OR_RETURN(MetricsConfig m, monitor::ParseAzureMonitorMetrics(c));
  if (!m) {
    return InvalidArgument(fmt::format(
        "--azure-monitor {}: no azure_monitor.metrics block (see docs/azure-monitor.md, "
        "\"Custom metrics\")",
        path));
  }
  return m;
}

// Sends the metrics; returns the exit code: `verdict` unless the send failed
// while the check itself passed (a job that silently stops reporting would
// look healthy on every dashboard).
int SendMetrics(std::string_view command, const monitor::AzureMonitorMetricsConfig& cfg,
                const std::vector<monitor::MetricValue>& values, int verdict) {
  Status s = monitor::SendCustomMetrics(cfg, values);
  if (s.ok()) return verdict;
  std::cerr << fmt::format(
      "gantry {}: error: Azure Monitor custom metrics not sent to {} (resource {}): {}\n", command,
      cfg.options.endpoint, cfg.options.resource_id, s.message());
  return verdict == kExitOk ? kExitCheckFailed : verdict;
}

int RunProfile(const DriftFlags& f) {
  Result<drift::Schema> schema = drift::Schema::LoadFile(f.schema);
  if (!schema.ok()) return Fail("drift profile", schema.status());
  Result<drift::Table> table = Read(f, f.data, *schema);
  if (!table.ok()) return Fail("drift profile", table.status());
  drift::ProfileOptions po;
  po.max_exact_rows = f.max_exact_rows;
  Result<drift::Profile> profile = drift::Profile::Build(*table, po);
  if (!profile.ok()) return Fail("drift profile", profile.status());
  Status s = profile->Save(f.out);
  if (!s.ok()) return Fail("drift profile", s);
  if (f.common.json) {
    Json j = {{"profile", f.out}, {"rows", table->rows}, {"columns", table->columns.size()}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("Wrote {}: {} rows, {} columns.\n", f.out, table->rows,
                             table->columns.size());
  }
  return kExitOk;
}

// The schema of a profile's columns, so the current window is read with the
// same types (the schema file is not needed at compare time).
std::string SchemaYamlFromProfile(const drift::Profile& p, bool ignore_extra) {
  std::string y = "columns:\n";
  for (const auto& c : p.columns()) {
    const char* role = "feature";
    switch (c.spec.role) {
      case drift::Role::kTarget:
        role = "target";
        break;
      case drift::Role::kPrediction:
        role = "prediction";
        break;
      case drift::Role::kScore:
        role = "score";
        break;
      default:
        break;
    }
    y += fmt::format("  {}: {{type: {}, role: {}}}\n", Json(c.spec.name).dump(),
                     c.spec.kind == drift::ColumnKind::kNumerical ? "numerical" : "categorical",
                     role);
  }
  if (!p.task().empty()) y += "task: " + p.task() + "\n";
  if (ignore_extra) y += "extra_columns: ignore\n";
  return y;
}

int RunCompare(const DriftFlags& f) {
  Result<MetricsConfig> metrics = LoadMetricsConfig(f.azure_monitor);
  if (!metrics.ok()) return Fail("drift compare", metrics.status());
  Result<drift::Profile> profile = drift::Profile::Load(f.reference);
  // The profile is this command's input: one that is not a profile (or is
  // damaged) is a bad --reference value, exit 2, not a failed comparison.
  if (!profile.ok()) {
    Status s = profile.status();
    if (s.code() == StatusCode::kDataLoss) s = InvalidArgument(s.message());
    return Fail("drift compare", s.WithContext("--reference"));
  }
  Result<drift::Schema> schema =
      f.schema.empty()
          ? drift::Schema::LoadString(SchemaYamlFromProfile(*profile, /*ignore_extra=*/true),
                                      f.reference + " (columns)")
          : drift::Schema::LoadFile(f.schema);
  if (!schema.ok()) return Fail("drift compare", schema.status());
  Result<drift::Table> current = Read(f, f.current, *schema);
  if (!current.ok()) return Fail("drift compare", current.status());
  drift::CompareOptions co;
  co.threads = f.threads;
  Result<drift::DriftReport> report = drift::Compare(*profile, *current, co);
  if (!report.ok()) return Fail("drift compare", report.status());
  if (!f.out.empty()) {
    Status s = WriteFileAtomic(f.out, report->ToJson().dump(2) + "\n");
    if (!s.ok()) return Fail("drift compare", s);
  }
  if (!f.html.empty()) {
    Status s = WriteFileAtomic(f.html, report->RenderHtml());
    if (!s.ok()) return Fail("drift compare", s);
  }
  if (!f.prom.empty()) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    Status s = WriteFileAtomic(f.prom, report->RenderPrometheus(now));
    if (!s.ok()) return Fail("drift compare", s);
  }
  if (f.common.json) {
    std::cout << report->ToJson().dump(2) << "\n";
  } else {
    std::cout << report->RenderTable();
  }
  const int verdict = report->dataset_drift ? kExitCheckFailed : kExitOk;
  if (!*metrics) return verdict;
  const std::string model =
      f.model.empty() ? std::filesystem::path(f.reference).stem().string() : f.model;
  return SendMetrics("drift compare", **metrics,
                     drift::DriftMetrics(*report, model, (*metrics)->namespace_), verdict);
}

// The `model` dimension of validate's metrics: --model, else <name> of a
// ".../v2/models/<name>/..." endpoint, else the data file's stem.
std::string ValidateModelName(const DriftFlags& f) {
  if (!f.model.empty()) return f.model;
  const std::string_view marker = "/v2/models/";
  size_t at = f.endpoint.find(marker);
  if (at != std::string::npos) {
    std::string rest = f.endpoint.substr(at + marker.size());
    rest = rest.substr(0, rest.find('/'));
    if (!rest.empty()) return rest;
  }
  return std::filesystem::path(f.data).stem().string();
}

int RunValidate(const DriftFlags& f) {
  Result<MetricsConfig> metrics = LoadMetricsConfig(f.azure_monitor);
  if (!metrics.ok()) return Fail("drift validate", metrics.status());
  Result<drift::Protocol> protocol = drift::ParseProtocol(f.protocol);
  if (!protocol.ok()) return Fail("drift validate", protocol.status());
  Result<drift::Schema> schema = drift::Schema::LoadFile(f.schema);
  if (!schema.ok()) return Fail("drift validate", schema.status());
  Result<drift::Table> data = Read(f, f.data, *schema);
  if (!data.ok()) return Fail("drift validate", data.status());
  drift::ValidateOptions o;
  o.endpoint = f.endpoint;
  o.protocol = *protocol;
  o.model = f.model;
  o.batch = f.batch;
  o.per_column_tensors = f.per_column;
  o.api_key = f.api_key;
  if (o.api_key.empty()) {
    if (const char* k = std::getenv("GANTRY_API_KEY")) o.api_key = k;
  }
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.timeout_s * 1000));
  o.min_accuracy = f.min_accuracy;
  o.min_f1 = f.min_f1;
  o.max_rmse = f.max_rmse;
  Result<drift::ValidateResult> r = drift::Validate(*data, o);
  // Endpoint failures (unreachable, timeouts, bad responses: Unavailable,
  // DataLoss) fail the revalidation job with exit 1, so schedulers alert as for
  // a bad model.
  if (!r.ok()) return Fail("drift validate", r.status());
  if (!f.out.empty()) {
    Status s = WriteFileAtomic(f.out, r->ToJson().dump(2) + "\n");
    if (!s.ok()) return Fail("drift validate", s);
  }
  if (f.common.json)
    std::cout << r->ToJson().dump(2) << "\n";
  else
    std::cout << r->Render();
  const int verdict = r->passed ? kExitOk : kExitCheckFailed;
  if (!*metrics) return verdict;
  return SendMetrics("drift validate", **metrics,
                     drift::ValidateMetrics(*r, ValidateModelName(f), (*metrics)->namespace_),
                     verdict);
}

}  // namespace

void RegisterDrift(CLI::App& app, Action* action) {
  auto flags = std::make_shared<DriftFlags>();
  CLI::App* drift = app.add_subcommand(
      "drift",
      "Data drift, data quality and model revalidation: profile a reference, compare a window, "
      "validate a model endpoint (gantry drift --help)");
  drift->require_subcommand(1);
  auto set = [&](CLI::App* c, int (*fn)(const DriftFlags&)) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* profile = drift->add_subcommand(
      "profile", "Read reference data with a schema and save its profile (exit 0 ok, 2 usage)");
  profile->add_option("--schema", flags->schema, "Schema YAML (column types and roles)")
      ->required();
  profile->add_option("--data", flags->data, "Reference data: .csv, .jsonl or .ndjson")->required();
  profile->add_option("--out", flags->out, "Profile file to write (atomically)")->required();
  profile->add_option("--format", flags->format, "csv or jsonl when the extension does not say");
  profile
      ->add_option("--max-exact-rows", flags->max_exact_rows,
                   "Above this many values a numerical column is stored as a quantile sketch")
      ->capture_default_str();
  set(profile, RunProfile);

  CLI::App* compare = drift->add_subcommand(
      "compare",
      "Compare a current window with a reference profile (exit 0 no dataset drift, 1 dataset "
      "drift, 2 usage)");
  compare->add_option("--reference", flags->reference, "Profile from gantry drift profile")
      ->required();
  compare->add_option("--current", flags->current, "Current window: .csv, .jsonl or .ndjson")
      ->required();
  compare->add_option("--schema", flags->schema,
                      "Schema for reading the window (default: the profile's columns; extra "
                      "columns are ignored)");
  compare->add_option("--format", flags->format, "csv or jsonl when the extension does not say");
  compare->add_option("--html", flags->html, "Write a self-contained HTML report");
  compare->add_option("--prom", flags->prom,
                      "Write the results as Prometheus metrics (e.g. into node_exporter's textfile "
                      "collector directory, as <name>.prom), atomically");
  compare->add_option("--out", flags->out, "Write the JSON report to this file");
  compare->add_option("--threads", flags->threads, "Columns compared in parallel (0 = all cores)")
      ->capture_default_str();
  compare->add_option("--model", flags->model,
                      "The model dimension of the Azure Monitor metrics (default: the "
                      "reference file's stem)");
  compare->add_option("--azure-monitor", flags->azure_monitor,
                      "A YAML file with an azure_monitor.metrics block: send the results as "
                      "Azure Monitor custom metrics too (docs/azure-monitor.md)");
  set(compare, RunCompare);

  CLI::App* validate = drift->add_subcommand(
      "validate",
      "Send labelled data through a model endpoint and check quality thresholds (exit 0 ok, 1 "
      "below a threshold or endpoint failure, 2 usage)");
  validate
      ->add_option("--model-endpoint", flags->endpoint,
                   "KServe: http://host:port/v2/models/<name>/infer (or base URL + --model); "
                   "OpenAI: http://host:port/v1/chat/completions")
      ->required();
  validate->add_option("--protocol", flags->protocol, "kserve or openai")->capture_default_str();
  validate->add_option("--model", flags->model, "Model name (KServe base URL; OpenAI \"model\")");
  validate->add_option("--data", flags->data, "Labelled data: .csv, .jsonl or .ndjson")->required();
  validate->add_option("--schema", flags->schema, "Schema YAML with a target column")->required();
  validate->add_option("--format", flags->format, "csv or jsonl when the extension does not say");
  validate->add_option("--batch", flags->batch, "Rows per KServe request")->capture_default_str();
  validate->add_flag("--per-column-tensors", flags->per_column,
                     "KServe: one input tensor per feature instead of one FP64 [batch, features]");
  validate->add_option("--api-key", flags->api_key,
                       "Sent as 'Authorization: Bearer <key>' (default: $GANTRY_API_KEY)");
  validate->add_option("--timeout", flags->timeout_s, "Seconds per request")->capture_default_str();
  auto* acc = validate->add_option("--min-accuracy", flags->min_accuracy,
                                   "Classification: fail when accuracy is below");
  auto* f1 = validate->add_option("--min-f1", flags->min_f1,
                                  "Classification: fail when macro F1 is below");
  auto* rmse =
      validate->add_option("--max-rmse", flags->max_rmse, "Regression: fail when RMSE is above");
  acc->excludes(rmse);
  f1->excludes(rmse);
  validate->add_option("--out", flags->out, "Write the JSON result to this file");
  validate->add_option("--azure-monitor", flags->azure_monitor,
                       "A YAML file with an azure_monitor.metrics block: send the quality "
                       "metrics as Azure Monitor custom metrics too (model dimension: --model, "
                       "else the endpoint's /v2/models/<name>, else the data file's stem)");
  set(validate, RunValidate);
}

}  // namespace gantry::cli
