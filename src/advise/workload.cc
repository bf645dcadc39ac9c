// Workload files and their validation (see include/gantry/advise/advise.h).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>

#include "gantry/advise/advise.h"
#include "gantry/core/json.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry::advise {

std::string_view StageName(Stage s) { return s == Stage::kTraining ? "training" : "inference"; }

std::string_view ModelKindName(ModelKind k) {
  switch (k) {
    case ModelKind::kGenerative:
      return "generative";
    case ModelKind::kComplex:
      return "complex";
    case ModelKind::kSmall:
      return "small";
  }
  return "?";
}

std::string_view ObjectiveName(Objective o) { return o == Objective::kCost ? "cost" : "time"; }

namespace {

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

Result<Stage> ParseStage(std::string_view text) {
  std::string t = Lower(text);
  if (t == "training" || t == "train") return Stage::kTraining;
  if (t == "inference" || t == "serving" || t == "serve") return Stage::kInference;
  return InvalidArgument(fmt::format("stage '{}': use training or inference", text));
}

Result<ModelKind> ParseKind(std::string_view text) {
  std::string t = Lower(text);
  if (t == "generative") return ModelKind::kGenerative;
  if (t == "complex") return ModelKind::kComplex;
  if (t == "small") return ModelKind::kSmall;
  return InvalidArgument(fmt::format(
      "kind '{}': use generative (LLMs, diffusion), complex (large non-generative models such "
      "as vision or speech) or small (classical ML and small networks)",
      text));
}

Result<Objective> ParseObjective(std::string_view text) {
  std::string t = Lower(text);
  if (t == "cost") return Objective::kCost;
  if (t == "time") return Objective::kTime;
  return InvalidArgument(fmt::format("objective '{}': use cost or time", text));
}

// Adds "file:line:col: key 'k'" to an error about one value.
Status At(const Config& cfg, std::string_view key, const Status& s) {
  return InvalidArgument(fmt::format("{}: {}", cfg.Locate(key), s.message()));
}

template <typename T, typename Parse>
Status ReadEnum(const Config& cfg, std::string_view key, T* out, Parse parse) {
  if (!cfg.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(std::string text, cfg.GetString(key, ""));
  Result<T> v = parse(text);
  if (!v.ok()) return At(cfg, key, v.status());
  *out = *v;
  return Status::Ok();
}

Status ReadCount(const Config& cfg, std::string_view key, double* out) {
  if (!cfg.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(std::string text, cfg.GetString(key, ""));
  Result<double> v = ParseCount("", text);  // At() names the key
  if (!v.ok()) return At(cfg, key, v.status());
  *out = *v;
  return Status::Ok();
}

template <typename Int>
Status ReadInt(const Config& cfg, std::string_view key, Int* out) {
  if (!cfg.Has(key)) return Status::Ok();
  // Counts such as "8k" are welcome for sequence lengths and token numbers.
  double v = 0;
  RETURN_IF_ERROR(ReadCount(cfg, key, &v));
  if (v != std::floor(v) || v > 1e15) {
    return At(cfg, key, InvalidArgument(fmt::format("{} is not a whole number", v)));
  }
  *out = static_cast<Int>(v);
  return Status::Ok();
}

Status ReadDouble(const Config& cfg, std::string_view key, double* out) {
  if (!cfg.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(*out, cfg.GetDouble(key, *out));
  return Status::Ok();
}

Status ReadHours(const Config& cfg, std::string_view key, double* out) {
  if (!cfg.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(std::chrono::nanoseconds d, cfg.GetDuration(key, std::chrono::nanoseconds(0)));
  *out = std::chrono::duration<double>(d).count() / 3600.0;
  return Status::Ok();
}

Status ReadSeconds(const Config& cfg, std::string_view key, double* out) {
  if (!cfg.Has(key)) return Status::Ok();
  ASSIGN_OR_RETURN(std::chrono::nanoseconds d, cfg.GetDuration(key, std::chrono::nanoseconds(0)));
  *out = std::chrono::duration<double>(d).count();
  return Status::Ok();
}

}  // namespace

Result<double> ParseCount(std::string_view what, std::string_view text) {
  std::string t(text);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  size_t start = 0;
  while (start < t.size() && std::isspace(static_cast<unsigned char>(t[start]))) ++start;
  t = t.substr(start);
  const std::string prefix = what.empty() ? "" : std::string(what) + ": ";
  auto bad = [&] {
    return InvalidArgument(
        fmt::format("{}'{}' is not a count; write a number, optionally with k, M, B (or G) or T "
                    "(\"8B\", \"1.5e9\", \"125M\")",
                    prefix, text));
  };
  if (t.empty()) return bad();
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str()) return bad();
  std::string suffix(end);
  double scale = 1;
  if (suffix == "k" || suffix == "K") {
    scale = 1e3;
  } else if (suffix == "M" || suffix == "m") {
    scale = 1e6;
  } else if (suffix == "B" || suffix == "b" || suffix == "G" || suffix == "g") {
    scale = 1e9;
  } else if (suffix == "T" || suffix == "t") {
    scale = 1e12;
  } else if (!suffix.empty()) {
    return bad();
  }
  v *= scale;
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(
        fmt::format("{}'{}' must be a finite, non-negative count", prefix, text));
  }
  return v;
}

namespace {

// True when `token` occurs in `text` not followed by a digit or letter that
// would make it another model ("A10" in "A100", "H100" in "H100X").
bool HasToken(const std::string& text, const std::string& token) {
  for (size_t pos = text.find(token); pos != std::string::npos; pos = text.find(token, pos + 1)) {
    const size_t end = pos + token.size();
    const bool left_ok = pos == 0 || !std::isalnum(static_cast<unsigned char>(text[pos - 1]));
    const bool right_ok =
        end == text.size() || !std::isalnum(static_cast<unsigned char>(text[end]));
    if (left_ok && right_ok) return true;
  }
  return false;
}

}  // namespace

bool AcceleratorMatchesDevice(std::string_view accelerator, std::string_view device_name) {
  const std::string acc = AsciiUpper(accelerator);
  const std::string dev = AsciiUpper(device_name);
  const std::string model = acc.substr(0, acc.find('-'));  // "H100", "A100", "MI300X", "T4"
  if (model.empty() || !HasToken(dev, model)) return false;
  if ((acc.find("NVL") != std::string::npos) != HasToken(dev, "NVL")) return false;
  for (const char* mem : {"16GB", "24GB", "40GB", "80GB", "94GB", "141GB", "192GB"}) {
    if (HasToken(dev, mem) && acc.find(mem) == std::string::npos) return false;
  }
  return true;
}

Status TakeMfuFromReport(const Json& report, std::string_view origin, Workload* w) {
  const Json* g = &report;
  if (report.is_object() && report.contains("gemm")) g = &report["gemm"];
  if (!g->is_object() || !g->contains("mfu") || !g->contains("device")) {
    return InvalidArgument(fmt::format(
        "{}: no GEMM measurement; pass the JSON of `gantry bench gemm --json` or `gantry doctor "
        "--json` run on a GPU node",
        origin));
  }
  if ((*g)["device"] != "cuda") {
    return InvalidArgument(fmt::format(
        "{}: the GEMM ran on the CPU; CPU sizes have no peak in the catalog, so a CPU MFU cannot "
        "be applied (measure on a GPU node, or pass --mfu)",
        origin));
  }
  if (!(*g)["mfu"].is_number()) {
    return InvalidArgument(fmt::format(
        "{}: the GEMM has no MFU (its GPU's peak was unknown); pass --mfu instead", origin));
  }
  const double mfu = (*g)["mfu"].get<double>();
  if (!(mfu > 0 && mfu <= 1)) {
    return InvalidArgument(fmt::format("{}: MFU {} is outside (0, 1]", origin, mfu));
  }
  w->mfu = mfu;
  w->mfu_device = (*g).value("device_name", "");
  w->mfu_source = fmt::format("{} ({} GEMM on {})", origin, (*g).value("type", "?"),
                              w->mfu_device.empty() ? "a GPU" : w->mfu_device);
  return Status::Ok();
}

Result<Workload> ParseWorkload(const Config& cfg) {
  RETURN_IF_ERROR(cfg.CheckKnownKeys("", {"name", "stage", "kind", "model", "training", "inference",
                                          "constraints", "performance"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "model", {"params", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "training",
      {"precision", "optimizer", "zero_stage", "tensor_parallel", "pipeline_parallel",
       "sequence_parallel", "recompute", "flash_attention", "sequence", "micro_batch", "tokens"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys(
      "inference", {"precision", "kv_cache", "context", "batch", "prompt_tokens", "output_tokens",
                    "target_token_ms", "target_first_token_ms", "target_rps", "hours_per_month"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys("constraints", {"region", "deadline", "budget_usd",
                                                     "max_nodes", "objective", "interruptible"}));
  RETURN_IF_ERROR(cfg.CheckKnownKeys("performance",
                                     {"mfu", "evictions_per_hour", "restart", "ckpt_write_gbps"}));

  Workload w;
  ASSIGN_OR_RETURN(w.name, cfg.GetString("name", ""));
  if (!cfg.Has("stage")) {
    return InvalidArgument(fmt::format(
        "{}: missing 'stage': write stage: training or stage: inference", cfg.origin()));
  }
  RETURN_IF_ERROR(ReadEnum(cfg, "stage", &w.stage, ParseStage));
  RETURN_IF_ERROR(ReadEnum(cfg, "kind", &w.kind, ParseKind));

  if (!cfg.Has("model.params")) {
    return InvalidArgument(fmt::format(
        "{}: missing 'model.params': give the parameter count (e.g. params: 8B)", cfg.origin()));
  }
  RETURN_IF_ERROR(ReadCount(cfg, "model.params", &w.model.params));
  RETURN_IF_ERROR(ReadInt(cfg, "model.layers", &w.model.layers));
  RETURN_IF_ERROR(ReadInt(cfg, "model.hidden", &w.model.hidden));
  RETURN_IF_ERROR(ReadInt(cfg, "model.heads", &w.model.heads));
  RETURN_IF_ERROR(ReadInt(cfg, "model.kv_heads", &w.model.kv_heads));
  RETURN_IF_ERROR(ReadInt(cfg, "model.head_dim", &w.model.head_dim));
  RETURN_IF_ERROR(ReadInt(cfg, "model.ffn_hidden", &w.model.ffn_hidden));

  if (w.stage == Stage::kTraining) {
    if (cfg.Has("inference")) {
      return InvalidArgument(fmt::format(
          "{}: a training workload has no 'inference' section; remove it or set stage: inference",
          cfg.Locate("inference")));
    }
    RETURN_IF_ERROR(ReadEnum(cfg, "training.precision", &w.precision, ParsePrecision));
    RETURN_IF_ERROR(ReadEnum(cfg, "training.optimizer", &w.optimizer, ParseOptimizer));
    if (cfg.Has("training.zero_stage")) {
      ASSIGN_OR_RETURN(std::string z, cfg.GetString("training.zero_stage", ""));
      if (Lower(z) == "auto") {
        w.zero_stage = -1;
      } else {
        ASSIGN_OR_RETURN(int64_t stage, cfg.GetInt("training.zero_stage", -1));
        w.zero_stage = static_cast<int>(stage);
      }
    }
    RETURN_IF_ERROR(ReadInt(cfg, "training.tensor_parallel", &w.tensor_parallel));
    RETURN_IF_ERROR(ReadInt(cfg, "training.pipeline_parallel", &w.pipeline_parallel));
    ASSIGN_OR_RETURN(w.sequence_parallel, cfg.GetBool("training.sequence_parallel", false));
    RETURN_IF_ERROR(ReadEnum(cfg, "training.recompute", &w.recompute, ParseRecompute));
    ASSIGN_OR_RETURN(w.flash_attention, cfg.GetBool("training.flash_attention", true));
    RETURN_IF_ERROR(ReadInt(cfg, "training.sequence", &w.sequence));
    RETURN_IF_ERROR(ReadInt(cfg, "training.micro_batch", &w.micro_batch));
    RETURN_IF_ERROR(ReadCount(cfg, "training.tokens", &w.tokens));
  } else {
    if (cfg.Has("training")) {
      return InvalidArgument(fmt::format(
          "{}: an inference workload has no 'training' section; remove it or set stage: training",
          cfg.Locate("training")));
    }
    RETURN_IF_ERROR(ReadEnum(cfg, "inference.precision", &w.precision, ParsePrecision));
    RETURN_IF_ERROR(ReadEnum(cfg, "inference.kv_cache", &w.kv_cache, ParsePrecision));
    RETURN_IF_ERROR(ReadInt(cfg, "inference.context", &w.context));
    RETURN_IF_ERROR(ReadInt(cfg, "inference.batch", &w.batch));
    RETURN_IF_ERROR(ReadInt(cfg, "inference.prompt_tokens", &w.prompt_tokens));
    RETURN_IF_ERROR(ReadInt(cfg, "inference.output_tokens", &w.output_tokens));
    RETURN_IF_ERROR(ReadDouble(cfg, "inference.target_token_ms", &w.target_token_ms));
    RETURN_IF_ERROR(ReadDouble(cfg, "inference.target_first_token_ms", &w.target_first_token_ms));
    RETURN_IF_ERROR(ReadDouble(cfg, "inference.target_rps", &w.target_rps));
    RETURN_IF_ERROR(ReadDouble(cfg, "inference.hours_per_month", &w.hours_per_month));
  }

  ASSIGN_OR_RETURN(w.region, cfg.GetString("constraints.region", w.region));
  w.region = Lower(w.region);
  RETURN_IF_ERROR(ReadHours(cfg, "constraints.deadline", &w.deadline_h));
  RETURN_IF_ERROR(ReadDouble(cfg, "constraints.budget_usd", &w.budget_usd));
  RETURN_IF_ERROR(ReadInt(cfg, "constraints.max_nodes", &w.max_nodes));
  RETURN_IF_ERROR(ReadEnum(cfg, "constraints.objective", &w.objective, ParseObjective));
  if (cfg.Has("constraints.interruptible")) {
    ASSIGN_OR_RETURN(bool b, cfg.GetBool("constraints.interruptible", false));
    w.interruptible = b;
  }

  RETURN_IF_ERROR(ReadDouble(cfg, "performance.mfu", &w.mfu));
  RETURN_IF_ERROR(ReadDouble(cfg, "performance.evictions_per_hour", &w.evictions_per_hour));
  RETURN_IF_ERROR(ReadSeconds(cfg, "performance.restart", &w.restart_s));
  RETURN_IF_ERROR(ReadDouble(cfg, "performance.ckpt_write_gbps", &w.ckpt_write_gbps));

  Status s = ValidateWorkload(w);
  if (!s.ok()) return InvalidArgument(fmt::format("{}: {}", cfg.origin(), s.message()));
  return w;
}

Status ValidateWorkload(const Workload& w) {
  auto bad = [](std::string msg) { return InvalidArgument(std::move(msg)); };
  if (!(w.model.params > 0)) {
    return bad("model.params: give the parameter count (e.g. 8B); it must be > 0");
  }
  if (w.model.layers < 0 || w.model.hidden < 0 || w.model.heads < 0 || w.model.kv_heads < 0 ||
      w.model.head_dim < 0) {
    return bad("model: layers, hidden, heads, kv_heads and head_dim must not be negative");
  }
  if (w.max_nodes < 1 || w.max_nodes > 4096) {
    return bad(fmt::format("constraints.max_nodes: {} must be in 1..4096", w.max_nodes));
  }
  if (w.deadline_h < 0 || w.budget_usd < 0) {
    return bad("constraints: deadline and budget_usd must not be negative");
  }
  if (w.mfu < 0 || w.mfu > 1) {
    return bad(fmt::format("performance.mfu: {} must be in (0, 1] (0.4 means 40%)", w.mfu));
  }
  if (w.evictions_per_hour <= 0 || !std::isfinite(w.evictions_per_hour)) {
    return bad(
        fmt::format("performance.evictions_per_hour: {} must be > 0 (0.05 = one eviction "
                    "per 20 VM hours)",
                    w.evictions_per_hour));
  }
  if (w.restart_s < 0) return bad("performance.restart must not be negative");
  if (!(w.ckpt_write_gbps > 0)) {
    return bad(fmt::format("performance.ckpt_write_gbps: {} must be > 0", w.ckpt_write_gbps));
  }
  if (w.stage == Stage::kTraining) {
    if (!(w.tokens > 0)) {
      return bad("training.tokens: give the number of training tokens (all epochs), e.g. 2B");
    }
    if (w.precision != Precision::kFp32 && w.precision != Precision::kBf16 &&
        w.precision != Precision::kFp16) {
      return bad(
          fmt::format("training.precision: {} is not modelled for training; use fp32, "
                      "bf16 or fp16 (mixed precision)",
                      PrecisionName(w.precision)));
    }
    if (w.zero_stage < -1 || w.zero_stage > 3) {
      return bad(fmt::format("training.zero_stage: {} must be 0, 1, 2, 3 or auto", w.zero_stage));
    }
    if (w.tensor_parallel < 1 || w.pipeline_parallel < 1 || w.micro_batch < 1) {
      return bad("training: tensor_parallel, pipeline_parallel and micro_batch must be >= 1");
    }
    if (w.sequence < 0) return bad("training.sequence must not be negative");
  } else {
    if (w.batch < 1) return bad(fmt::format("inference.batch: {} must be >= 1", w.batch));
    if (w.prompt_tokens < 0 || w.output_tokens < 0 || w.context < 0) {
      return bad("inference: context, prompt_tokens and output_tokens must not be negative");
    }
    if (w.target_token_ms < 0 || w.target_first_token_ms < 0 || w.target_rps < 0) {
      return bad("inference: targets must not be negative");
    }
    if (!(w.hours_per_month > 0) || w.hours_per_month > kHoursPerMonth) {
      return bad(fmt::format("inference.hours_per_month: {} must be in (0, {}]", w.hours_per_month,
                             kHoursPerMonth));
    }
    if (w.kind != ModelKind::kSmall) {
      if (w.model.layers == 0 || (w.model.heads == 0 && w.model.kv_heads == 0) ||
          (w.model.head_dim == 0 && w.model.hidden == 0)) {
        return bad(
            "model: serving a generative or complex model needs layers, heads (or kv_heads) and "
            "hidden (or head_dim) for the KV cache");
      }
      if (w.output_tokens < 1 || w.prompt_tokens < 1) {
        return bad(
            "inference: give prompt_tokens and output_tokens (typical request) so latency and "
            "throughput can be estimated");
      }
    }
  }
  return Status::Ok();
}

const std::vector<WorkloadFlag>& WorkloadFlags() {
  static const auto* flags = new std::vector<WorkloadFlag>{
      {"stage", "stage", "training or inference"},
      {"kind", "kind", "generative, complex or small"},
      {"name", "name", "a name for the report"},
      {"params", "model.params", "parameters: 8B, 70B, 1.5e9, 125M"},
      {"layers", "model.layers", "transformer layers"},
      {"hidden", "model.hidden", "hidden size (d_model)"},
      {"heads", "model.heads", "attention heads"},
      {"kv-heads", "model.kv_heads", "key/value heads (GQA)"},
      {"head-dim", "model.head_dim", "head dimension (default hidden/heads)"},
      {"precision", "@.precision",
       "training: fp32, bf16, fp16; inference weights: also fp8, int8, int4"},
      {"optimizer", "training.optimizer", "adam, adamw, sgd-momentum, sgd"},
      {"zero-stage", "training.zero_stage", "0-3 or auto (lowest that fits)"},
      {"tensor-parallel", "training.tensor_parallel", "training tensor-parallel degree"},
      {"pipeline-parallel", "training.pipeline_parallel", "training pipeline-parallel degree"},
      {"recompute", "training.recompute", "activation recompute: none, selective, full"},
      {"sequence", "training.sequence", "training sequence length"},
      {"micro-batch", "training.micro_batch", "training micro-batch per GPU"},
      {"tokens", "training.tokens", "training tokens (all epochs): 2B, 1T"},
      {"kv-cache", "inference.kv_cache", "KV-cache precision"},
      {"context", "inference.context", "tokens held per sequence (default prompt + output)"},
      {"batch", "inference.batch", "concurrent sequences per replica"},
      {"prompt-tokens", "inference.prompt_tokens", "prompt tokens of a typical request"},
      {"output-tokens", "inference.output_tokens", "output tokens of a typical request"},
      {"target-token-ms", "inference.target_token_ms", "target time per output token, ms"},
      {"target-first-token-ms", "inference.target_first_token_ms",
       "target time to first token, ms"},
      {"target-rps", "inference.target_rps", "requests per second to serve (all replicas)"},
      {"hours-per-month", "inference.hours_per_month", "serving hours per month (default 730)"},
      {"region", "constraints.region", "Azure region for prices (default eastus)"},
      {"deadline", "constraints.deadline", "training wall-clock limit: 48h, 3d"},
      {"budget", "constraints.budget_usd", "USD: training per run, inference per month"},
      {"max-nodes", "constraints.max_nodes", "most VMs to consider (default 16)"},
      {"objective", "constraints.objective", "rank by cost (default) or time"},
      {"interruptible", "constraints.interruptible", "true/false: may the work be evicted (spot)"},
      {"mfu", "performance.mfu",
       "measured model FLOPs utilisation, 0-1 (default per GPU in the catalog)"},
      {"evictions-per-hour", "performance.evictions_per_hour",
       "spot evictions per VM hour (default 0.05)"},
      {"restart", "performance.restart", "time to recover from an eviction (default 10m)"},
      {"ckpt-write-gbps", "performance.ckpt_write_gbps",
       "checkpoint write GB/s per VM (default 2)"},
  };
  return *flags;
}

Result<Workload> LoadWorkload(const std::string& path,
                              const std::map<std::string, std::string>& flags) {
  Config base = Config::Empty("");
  if (!path.empty()) {
    ASSIGN_OR_RETURN(base, Config::LoadFile(path));
    if (flags.empty()) return ParseWorkload(base);
  }
  // The stage decides which section a flag such as --precision sets.
  ASSIGN_OR_RETURN(std::string stage, base.GetString("stage", ""));
  if (auto it = flags.find("stage"); it != flags.end()) stage = it->second;
  const std::string section =
      stage.rfind("inf", 0) == 0 || stage.rfind("serv", 0) == 0 ? "inference" : "training";
  std::map<std::string, std::string> overrides;
  for (const auto& [flag, value] : flags) {
    const std::string_view name = flag;  // a structured binding cannot be captured (clang 14)
    auto known = std::find_if(WorkloadFlags().begin(), WorkloadFlags().end(),
                              [name](const WorkloadFlag& f) { return f.name == name; });
    if (known == WorkloadFlags().end()) {
      return InvalidArgument(fmt::format("--{} is not a workload flag", flag));
    }
    std::string key(known->key);
    if (key.rfind("@.", 0) == 0) key = section + key.substr(1);
    if (key.rfind("training.", 0) == 0 && section != "training") {
      return InvalidArgument(
          fmt::format("--{} applies to training; this workload is inference", flag));
    }
    if (key.rfind("inference.", 0) == 0 && section != "inference") {
      return InvalidArgument(fmt::format(
          "--{} applies to inference; pass --stage inference (the workload is training)", flag));
    }
    overrides[key] = value;
  }
  ASSIGN_OR_RETURN(Config cfg, base.WithOverrides(overrides, "command-line flags"));
  return ParseWorkload(cfg);
}

}  // namespace gantry::advise
