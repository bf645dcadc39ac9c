// `gantry advise`: which VM size, how many, how long and at what cost, for one
// training or inference workload, with the reasons.
//
//   ASSIGN_OR_RETURN(Config cfg, Config::LoadFile("workload.yaml"));
//   ASSIGN_OR_RETURN(Workload w, ParseWorkload(cfg));
//   ASSIGN_OR_RETURN(Catalog cat, Catalog::Default());
//   ASSIGN_OR_RETURN(Advice advice, Recommend(w, cat, AdviseOptions{}));
//   std::cout << RenderAdviceText(advice, 5);
//
// The rules applied come from the Azure Cloud Adoption Framework's compute
// table (docs/advise.md quotes it): training and inference of generative or
// complex models go to GPU sizes (training prefers ND with RDMA and NVLink,
// multi-node training requires InfiniBand; inference avoids InfiniBand
// sizes), small non-generative models to memory-optimised (training) or
// compute-optimised (inference) CPU sizes; newer sizes win ties. Every
// candidate the rules allow is evaluated; the ones that do not fit, miss the
// deadline or the latency target, or exceed the budget are kept with the
// reason so users can see why.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/advise/catalog.h"
#include "gantry/advise/estimate.h"
#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::advise {

enum class Stage { kTraining, kInference };
enum class ModelKind { kGenerative, kComplex, kSmall };
enum class Objective { kCost, kTime };
std::string_view StageName(Stage s);          // "training", "inference"
std::string_view ModelKindName(ModelKind k);  // "generative", "complex", "small"
std::string_view ObjectiveName(Objective o);  // "cost", "time"

// A workload, from YAML (see ParseWorkload) or flags. Zero means "not given"
// for optional numbers.
struct Workload {
  std::string name;
  Stage stage = Stage::kTraining;
  ModelKind kind = ModelKind::kGenerative;
  ModelShape model;

  // Training.
  Precision precision = Precision::kBf16;  // training: mixed bf16 by default; inference: weights
  Optimizer optimizer = Optimizer::kAdam;
  int zero_stage = -1;  // -1: the lowest stage that fits
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  bool flash_attention = true;
  int64_t sequence = 0;
  int64_t micro_batch = 1;
  double tokens = 0;  // D, training tokens (all epochs)

  // Inference.
  Precision kv_cache = Precision::kBf16;
  int64_t context = 0;  // tokens held per sequence; 0 = prompt + output tokens
  int64_t batch = 1;    // concurrent sequences per replica
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  double target_token_ms = 0;        // time per output token
  double target_first_token_ms = 0;  // time to first token
  double target_rps = 0;             // requests per second, all replicas
  double hours_per_month = kHoursPerMonth;

  // Constraints and choices.
  std::string region = "eastus";
  double deadline_h = 0;  // training: wall-clock limit
  double budget_usd = 0;  // training: per run; inference: per month
  int max_nodes = 16;
  Objective objective = Objective::kCost;
  std::optional<bool> interruptible;  // default: training yes (with checkpoints), inference no

  // Performance inputs.
  double mfu = 0;  // measured model FLOPs utilisation; 0 = the catalog's default per GPU
  // When set, `mfu` applies only to accelerators this device name matches
  // (see AcceleratorMatchesDevice): it came from a measurement on that GPU.
  std::string mfu_device;
  std::string mfu_source;            // where `mfu` came from, for the explanation
  double evictions_per_hour = 0.05;  // spot eviction rate assumed per VM
  double restart_s = 600;            // re-provision and reload after an eviction
  double ckpt_write_gbps = 2.0;      // checkpoint write bandwidth per VM, GB/s
};

// Reads a workload file: top-level keys `name, stage, kind`, and the maps
// `model` (params, layers, hidden, heads, kv_heads, head_dim), `training`
// (precision, optimizer, zero_stage, tensor_parallel, pipeline_parallel,
// sequence_parallel, recompute, flash_attention, sequence, micro_batch,
// tokens), `inference` (precision, kv_cache, context, batch, prompt_tokens,
// output_tokens, target_token_ms, target_first_token_ms, target_rps,
// hours_per_month), `constraints` (region, deadline, budget_usd, max_nodes,
// objective, interruptible) and `performance` (mfu, evictions_per_hour,
// restart, ckpt_write_gbps). Counts accept suffixes ("8B", "1.5e9", "2T");
// durations accept "48h". Unknown keys are refused with a suggestion; errors
// name file:line and key.
Result<Workload> ParseWorkload(const Config& config);
// A workload field that `gantry advise` also takes as a flag (--params 70B).
struct WorkloadFlag {
  std::string_view name;  // the flag without "--": "params"
  std::string_view key;   // the workload key it sets: "model.params"; "@.x" is x of the
                          // stage's section (training.x or inference.x)
  std::string_view help;  // for --help: "parameters: 8B, 70B, 1.5e9, 125M"
};
// Every workload flag, in the order --help lists them.
const std::vector<WorkloadFlag>& WorkloadFlags();

// The workload file at `path` (none when empty) with `flags` (WorkloadFlag
// name -> the value as typed) laid over it with Config::WithOverrides, so the
// flags and the file share one parser and one set of checks. The flags'
// values are typed as in a file; errors about them name "command-line flags"
// and the key, errors about the file's values its file and line. Errors also:
// those of Config::LoadFile, a flag of the other stage ("--batch applies to
// inference; pass --stage inference (the workload is training)"), and an
// unknown flag name (the caller's bug).
Result<Workload> LoadWorkload(const std::string& path,
                              const std::map<std::string, std::string>& flags);
// "8B" -> 8e9; "1.5e9", "125M", "2T", "7k"; InvalidArgument names `what`.
Result<double> ParseCount(std::string_view what, std::string_view text);
// Cross-field checks (params given, stage-specific requirements, ranges).
Status ValidateWorkload(const Workload& w);

// Reads the MFU of a `gantry bench gemm --json` or `gantry doctor --json`
// report (its "gemm" section) into w->mfu, w->mfu_device and w->mfu_source.
// A GEMM's share of peak is an upper bound for a training step's MFU, so
// estimates made with it are optimistic; the explanation says so.
// InvalidArgument for a report without a GPU GEMM with a known peak.
Status TakeMfuFromReport(const Json& report, std::string_view origin, Workload* w);

// True when an NVIDIA/AMD device name (as NVML or the GEMM report spells it,
// "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA H100 NVL") is the
// catalog accelerator `accelerator` ("H100-SXM-80GB", "A100-40GB",
// "H100-NVL-94GB"): same model token, NVL only with NVL, and the same memory
// size when the device name states one.
bool AcceleratorMatchesDevice(std::string_view accelerator, std::string_view device_name);

struct AdviseOptions {
  Discounts discounts;
  // Share of accelerator (or VM) memory a plan may use; the rest is headroom
  // for the CUDA context, allocator fragmentation and the OS.
  double usable_memory_fraction = 0.9;
  // Only these sizes (case-insensitive names) when non-empty: `gantry doctor`
  // asks about the node it runs on.
  std::vector<std::string> only_sizes;
};

// One pricing model's numbers for a candidate. Unknown rates stay nullopt.
struct CostLine {
  PricingModel model = PricingModel::kPayg;
  std::optional<double> rate_per_hour;  // for all the candidate's VMs together
  std::optional<double> run_usd;        // training: the whole run; inference: unset
  std::optional<double> month_usd;      // rate * hours per month
  bool rate_from_catalog = false;       // false: derived from a default discount
};

struct Candidate {
  const VmSize* size = nullptr;              // points into the Catalog passed to Recommend
  const Accelerator* accelerator = nullptr;  // nullptr for CPU sizes
  bool feasible = false;
  std::vector<std::string> reasons_out;  // why not feasible (empty when feasible)
  std::vector<std::string> notes;        // rules applied, caveats
  int tier = 0;                          // 0: the rules' first choice, 1: allowed, 2: avoided

  int nodes = 1;  // VMs per training job or serving fleet
  double gpus_per_node = 0;
  // Memory: bytes per GPU (or per VM for CPU sizes) and what is usable.
  double memory_needed = 0;
  double memory_usable = 0;
  int zero_stage = 0;       // training: the stage chosen
  int tensor_parallel = 1;  // inference: GPUs per replica
  std::optional<TrainingMemory> training_memory;
  std::optional<InferenceMemory> inference_memory;

  // Training time (wall clock on PAYG), nullopt when the peak is unknown.
  std::optional<double> hours;
  double mfu = 0;
  double peak_tflops = 0;

  // Inference.
  std::optional<InferencePerf> perf;
  int replicas_per_node = 0;

  std::vector<CostLine> costs;  // PAYG, reservations, savings plans, spot
  // Spot: expected extra time and whether it is advisable, with the reason.
  std::optional<SpotOverhead> spot;
  bool spot_advisable = false;
  std::string spot_reason;

  // The number the ranking uses (cost or hours); nullopt sorts last.
  std::optional<double> rank_value;

  const CostLine* Cost(PricingModel m) const;
  bool PaygKnown() const;  // a PAYG rate is known in the workload's region
};

struct Advice {
  Workload workload;
  std::vector<std::string> rules;   // the rules that chose the families, in words
  std::vector<Candidate> ranked;    // feasible candidates, best first
  std::vector<Candidate> rejected;  // infeasible, with reasons_out, in catalog order
  std::string catalog_origin;
  std::string currency;

  Json ToJson() const;
};

// Errors: InvalidArgument for a workload that fails ValidateWorkload or bad
// options; never for a size that merely does not fit (that is a rejection).
Result<Advice> Recommend(const Workload& w, const Catalog& catalog, const AdviseOptions& options);

// A table of the best `top` candidates, their explanations, and a line per
// rejected family; for a terminal.
std::string RenderAdviceText(const Advice& advice, int top);
// A short Markdown report (workload, rules, ranked table, explanations).
std::string RenderAdviceMarkdown(const Advice& advice, int top);

// Commitment break-even for one size in one region: per pricing model its
// hourly rate, the monthly cost at `utilization` (PAYG bills only the used
// hours; commitments bill every hour) and the break-even utilisation.
struct CommitLine {
  PricingModel model = PricingModel::kPayg;
  std::optional<double> rate_per_hour;
  bool rate_from_catalog = false;
  std::optional<double> month_usd;   // at `utilization`
  std::optional<double> break_even;  // share of hours; nullopt for PAYG/unknown
};
struct CommitAdvice {
  const VmSize* size = nullptr;
  std::string region;
  int nodes = 1;
  double utilization = 1;
  std::vector<CommitLine> lines;
  std::optional<PricingModel> cheapest;  // at `utilization`, among known rates (spot excluded)
  Json ToJson() const;
  std::string RenderText() const;
};
// NotFound for an unknown size (with the closest names); InvalidArgument for a
// utilisation outside (0, 1] or nodes < 1; FailedPrecondition when the size
// has no PAYG price in the region (say which regions have one).
Result<CommitAdvice> AdviseCommit(const Catalog& catalog, std::string_view size,
                                  std::string_view region, int nodes, double utilization,
                                  const Discounts& discounts);

}  // namespace gantry::advise
