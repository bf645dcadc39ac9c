#include "gantry/advise/estimate.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "gantry/core/checkpoint_interval.h"

namespace gantry::advise {
namespace {

// ------------------------------------------------------------- parsing ----

std::string Normalize(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename E, size_t N>
Result<E> ParseName(std::string_view what, std::string_view text,
                    const std::array<std::pair<std::string_view, E>, N>& names,
                    std::string_view accepted) {
  std::string key = Normalize(text);
  for (const auto& [name, value] : names) {
    if (key == name) return value;
  }
  return InvalidArgument(fmt::format("{} '{}': use {}", what, text, accepted));
}

// ---------------------------------------------------------- validation ----

// Each check returns OK or InvalidArgument "<field>: <value> must ...". The
// negated comparisons also reject NaN.
Status Positive(std::string_view field, double v) {
  if (!(std::isfinite(v) && v > 0)) {
    return InvalidArgument(fmt::format("{}: {} must be a finite number > 0", field, v));
  }
  return Status::Ok();
}

Status NonNegative(std::string_view field, double v) {
  if (!(std::isfinite(v) && v >= 0)) {
    return InvalidArgument(fmt::format("{}: {} must be a finite number >= 0", field, v));
  }
  return Status::Ok();
}

Status AtLeast(std::string_view field, int64_t v, int64_t min) {
  if (v < min) return InvalidArgument(fmt::format("{}: {} must be >= {}", field, v, min));
  return Status::Ok();
}

// (0, 1]: utilisations and efficiencies.
Status Fraction(std::string_view field, double v) {
  if (!(std::isfinite(v) && v > 0 && v <= 1)) {
    return InvalidArgument(fmt::format("{}: {} must be in (0, 1]", field, v));
  }
  return Status::Ok();
}

Status ValidateShape(const ModelShape& m) {
  RETURN_IF_ERROR(Positive("params", m.params));
  RETURN_IF_ERROR(AtLeast("layers", m.layers, 0));
  RETURN_IF_ERROR(AtLeast("hidden", m.hidden, 0));
  RETURN_IF_ERROR(AtLeast("heads", m.heads, 0));
  RETURN_IF_ERROR(AtLeast("kv_heads", m.kv_heads, 0));
  RETURN_IF_ERROR(AtLeast("head_dim", m.head_dim, 0));
  RETURN_IF_ERROR(AtLeast("ffn_hidden", m.ffn_hidden, 0));
  // kv_heads alone (heads 0) is allowed: the KV cache needs only kv_heads.
  if (m.heads > 0 && m.kv_heads > m.heads) {
    return InvalidArgument(fmt::format(
        "kv_heads: {} must be <= heads ({}); GQA shares each KV head among several query heads",
        m.kv_heads, m.heads));
  }
  if (m.head_dim == 0 && m.heads > 0 && m.hidden > 0 && m.hidden % m.heads != 0) {
    return InvalidArgument(
        fmt::format("heads: {} must divide hidden ({}) when head_dim is not given; give head_dim",
                    m.heads, m.hidden));
  }
  return Status::Ok();
}

Status ValidateTraining(const TrainingSetup& s) {
  RETURN_IF_ERROR(ValidateShape(s.model));
  if (s.precision != Precision::kFp32 && s.precision != Precision::kBf16 &&
      s.precision != Precision::kFp16) {
    return InvalidArgument(fmt::format(
        "precision: {}: train in fp32, bf16 or fp16 (mixed precision); {} training is not modelled",
        PrecisionName(s.precision), PrecisionName(s.precision)));
  }
  if (s.zero_stage < 0 || s.zero_stage > 3) {
    return InvalidArgument(fmt::format("zero_stage: {} must be 0, 1, 2 or 3", s.zero_stage));
  }
  RETURN_IF_ERROR(AtLeast("data_parallel", s.data_parallel, 1));
  RETURN_IF_ERROR(AtLeast("tensor_parallel", s.tensor_parallel, 1));
  RETURN_IF_ERROR(AtLeast("pipeline_parallel", s.pipeline_parallel, 1));
  if (s.model.heads > 0 && s.model.heads % s.tensor_parallel != 0) {
    return InvalidArgument(fmt::format(
        "tensor_parallel: {} must divide heads ({}); each GPU holds whole attention heads",
        s.tensor_parallel, s.model.heads));
  }
  RETURN_IF_ERROR(AtLeast("sequence", s.sequence, 0));
  RETURN_IF_ERROR(AtLeast("micro_batch", s.micro_batch, 1));
  return Status::Ok();
}

Status ValidateInference(const InferenceSetup& s) {
  RETURN_IF_ERROR(ValidateShape(s.model));
  RETURN_IF_ERROR(AtLeast("context", s.context, 0));
  RETURN_IF_ERROR(AtLeast("batch", s.batch, 1));
  if (!(std::isfinite(s.overhead) && s.overhead >= 0 && s.overhead <= 1)) {
    return InvalidArgument(fmt::format("overhead: {} must be in [0, 1]", s.overhead));
  }
  return Status::Ok();
}

// Per-parameter bytes of model state before any sharding.
struct StateBytes {
  double w, g, k;
};

StateBytes StatePerParam(Precision precision, Optimizer optimizer) {
  double moments = 0;  // optimizer moments, always fp32
  switch (optimizer) {
    case Optimizer::kAdam:
      moments = 8;
      break;
    case Optimizer::kSgdMomentum:
      moments = 4;
      break;
    case Optimizer::kSgd:
      moments = 0;
      break;
  }
  if (precision == Precision::kFp32) return {4, 4, moments};
  // Mixed precision keeps an fp32 master copy next to the 16-bit weights.
  return {2, 2, 4 + moments};
}

// Korthikanti et al. 2022, activation bytes per layer per GPU divided by
// s*b*h, for 16-bit activations.
double ActivationCoefficient(const TrainingSetup& s) {
  const double t = s.tensor_parallel;
  const double a = s.model.heads;
  const double h = s.model.hidden;
  const double seq = static_cast<double>(s.sequence);
  switch (s.recompute) {
    case Recompute::kFull:
      return 2;  // only the layer input is kept; the rest is recomputed
    case Recompute::kSelective:
      // The attention-score block (the 5as/h term) is what selective
      // recompute drops; the rest is as without recompute.
      return s.sequence_parallel ? 34 / t : 10 + 24 / t;
    case Recompute::kNone:
      break;
  }
  const double scores = s.flash_attention ? 0 : 5 * a * seq / h;
  // With SP the 10 sbh of layer-norm and dropout activations are sharded too;
  // at t = 1 both forms are 34 + 5as/h.
  if (s.sequence_parallel) return (34 + scores) / t;
  return 10 + 24 / t + scores / t;
}

}  // namespace

// ------------------------------------------------------------- names ----

Result<Precision> ParsePrecision(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, Precision>, 10> kNames = {{
      {"fp32", Precision::kFp32},
      {"float32", Precision::kFp32},
      {"bf16", Precision::kBf16},
      {"bfloat16", Precision::kBf16},
      {"fp16", Precision::kFp16},
      {"float16", Precision::kFp16},
      {"half", Precision::kFp16},
      {"fp8", Precision::kFp8},
      {"int8", Precision::kInt8},
      {"int4", Precision::kInt4},
  }};
  return ParseName("precision", text, kNames, "fp32, bf16, fp16, fp8, int8 or int4");
}

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
    case Precision::kInt8:
      return "int8";
    case Precision::kInt4:
      return "int4";
  }
  return "unknown";
}

double BytesPerElement(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return 4;
    case Precision::kBf16:
    case Precision::kFp16:
      return 2;
    case Precision::kFp8:
    case Precision::kInt8:
      return 1;
    case Precision::kInt4:
      return 0.5;
  }
  return 0;
}

Result<Optimizer> ParseOptimizer(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, Optimizer>, 4> kNames = {{
      {"adam", Optimizer::kAdam},
      {"adamw", Optimizer::kAdam},
      {"sgd-momentum", Optimizer::kSgdMomentum},
      {"sgd", Optimizer::kSgd},
  }};
  return ParseName("optimizer", text, kNames, "adam, adamw, sgd-momentum or sgd");
}

std::string_view OptimizerName(Optimizer o) {
  switch (o) {
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kSgdMomentum:
      return "sgd-momentum";
    case Optimizer::kSgd:
      return "sgd";
  }
  return "unknown";
}

Result<Recompute> ParseRecompute(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, Recompute>, 3> kNames = {{
      {"none", Recompute::kNone},
      {"selective", Recompute::kSelective},
      {"full", Recompute::kFull},
  }};
  return ParseName("recompute", text, kNames, "none, selective or full");
}

std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "unknown";
}

std::string_view PricingModelName(PricingModel m) {
  switch (m) {
    case PricingModel::kPayg:
      return "payg";
    case PricingModel::kReserved1y:
      return "reserved-1y";
    case PricingModel::kReserved3y:
      return "reserved-3y";
    case PricingModel::kSavings1y:
      return "savings-1y";
    case PricingModel::kSavings3y:
      return "savings-3y";
    case PricingModel::kSpot:
      return "spot";
  }
  return "unknown";
}

Result<PricingModel> ParsePricingModel(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, PricingModel>, 6> kNames = {{
      {"payg", PricingModel::kPayg},
      {"reserved-1y", PricingModel::kReserved1y},
      {"reserved-3y", PricingModel::kReserved3y},
      {"savings-1y", PricingModel::kSavings1y},
      {"savings-3y", PricingModel::kSavings3y},
      {"spot", PricingModel::kSpot},
  }};
  return ParseName("pricing model", text, kNames,
                   "payg, reserved-1y, reserved-3y, savings-1y, savings-3y or spot");
}

// ------------------------------------------------------------ training ----

Result<TrainingMemory> EstimateTrainingMemory(const TrainingSetup& setup) {
  RETURN_IF_ERROR(ValidateTraining(setup));
  const StateBytes per = StatePerParam(setup.precision, setup.optimizer);
  // Tensor and pipeline parallelism split the parameters themselves; ZeRO
  // then shards the (already split) state over the data-parallel group.
  const double psi =
      setup.model.params / (static_cast<double>(setup.tensor_parallel) * setup.pipeline_parallel);
  const double nd = setup.data_parallel;
  TrainingMemory m;
  m.weights = per.w * psi / (setup.zero_stage >= 3 ? nd : 1);
  m.gradients = per.g * psi / (setup.zero_stage >= 2 ? nd : 1);
  m.optimizer = per.k * psi / (setup.zero_stage >= 1 ? nd : 1);

  const ModelShape& shape = setup.model;
  if (shape.layers > 0 && shape.hidden > 0 && shape.heads > 0 && setup.sequence > 0) {
    const double sbh =
        static_cast<double>(setup.sequence) * static_cast<double>(setup.micro_batch) * shape.hidden;
    // Korthikanti's figures are for 16-bit activations; fp32 doubles them.
    const double width = setup.precision == Precision::kFp32 ? 2 : 1;
    // Pipeline parallelism: a stage holds L/p layers, but under 1F1B the
    // first stage has p micro-batches in flight before its first backward,
    // so it stores p * (L/p) = L layers' worth (Korthikanti et al. 2022,
    // section 4.2.3). The first stage is the peak, hence no division by p.
    m.activations = width * sbh * ActivationCoefficient(setup) * shape.layers;
  }
  m.total = m.weights + m.gradients + m.optimizer + m.activations;
  return m;
}

Result<double> TrainingFlops(const ModelShape& model, double tokens, int64_t sequence) {
  RETURN_IF_ERROR(ValidateShape(model));
  RETURN_IF_ERROR(Positive("tokens", tokens));
  RETURN_IF_ERROR(AtLeast("sequence", sequence, 0));
  double flops = 6 * model.params * tokens;
  if (model.layers > 0 && model.hidden > 0 && sequence > 0) {
    // PaLM's attention term: each token attends over the sequence in every
    // layer (QK^T and AV, forward and backward).
    flops += 12.0 * model.layers * model.hidden * static_cast<double>(sequence) * tokens;
  }
  return flops;
}

Result<double> ComputeSeconds(double flops, double gpus, double peak_tflops, double mfu) {
  RETURN_IF_ERROR(NonNegative("flops", flops));
  RETURN_IF_ERROR(Positive("gpus", gpus));
  RETURN_IF_ERROR(Positive("peak_tflops", peak_tflops));
  RETURN_IF_ERROR(Fraction("mfu", mfu));
  return flops / (gpus * peak_tflops * 1e12 * mfu);
}

// ----------------------------------------------------------- inference ----

Result<double> KvCacheBytesPerToken(const ModelShape& model, Precision kv_cache) {
  RETURN_IF_ERROR(ValidateShape(model));
  if (model.layers <= 0) {
    return InvalidArgument("layers: 0: the KV cache needs the number of layers; give layers");
  }
  const int kv_heads = model.kv_heads > 0 ? model.kv_heads : model.heads;
  if (kv_heads <= 0) {
    return InvalidArgument(
        "heads: 0: the KV cache needs the number of KV heads; give kv_heads or heads");
  }
  double head_dim = model.head_dim;
  if (head_dim <= 0) {
    if (model.heads <= 0 || model.hidden <= 0) {
      return InvalidArgument(
          "head_dim: 0: the KV cache needs the head size; give head_dim, or hidden and heads");
    }
    head_dim = static_cast<double>(model.hidden) / model.heads;
  }
  // One key and one value vector per KV head per layer.
  return 2.0 * model.layers * kv_heads * head_dim * BytesPerElement(kv_cache);
}

Result<InferenceMemory> EstimateInferenceMemory(const InferenceSetup& setup) {
  RETURN_IF_ERROR(ValidateInference(setup));
  InferenceMemory m;
  m.weights = setup.model.params * BytesPerElement(setup.weights);
  if (setup.context > 0) {
    ASSIGN_OR_RETURN(m.kv_per_token, KvCacheBytesPerToken(setup.model, setup.kv_cache));
  } else {
    // No cache to size, so a shape without layers/heads is fine; still
    // report the per-token figure when the shape allows it.
    m.kv_per_token = KvCacheBytesPerToken(setup.model, setup.kv_cache).value_or(0);
  }
  m.kv_cache =
      m.kv_per_token * static_cast<double>(setup.context) * static_cast<double>(setup.batch);
  m.overhead = setup.overhead * (m.weights + m.kv_cache);
  m.total = m.weights + m.kv_cache + m.overhead;
  return m;
}

Result<InferencePerf> EstimateInferencePerf(const InferenceSetup& setup, int64_t prompt_tokens,
                                            int64_t output_tokens, double gpus, double peak_tflops,
                                            double hbm_tbps, double mfu,
                                            double bandwidth_efficiency) {
  RETURN_IF_ERROR(ValidateInference(setup));
  RETURN_IF_ERROR(AtLeast("prompt_tokens", prompt_tokens, 1));
  RETURN_IF_ERROR(AtLeast("output_tokens", output_tokens, 1));
  RETURN_IF_ERROR(Positive("gpus", gpus));
  RETURN_IF_ERROR(Positive("peak_tflops", peak_tflops));
  RETURN_IF_ERROR(Positive("hbm_tbps", hbm_tbps));
  RETURN_IF_ERROR(Fraction("mfu", mfu));
  RETURN_IF_ERROR(Fraction("bandwidth_efficiency", bandwidth_efficiency));

  // context 0 means "prompt + output" (as in advise.h); sizing the cache at the
  // full length is the conservative end of a decode that grows it token by token.
  const double context =
      setup.context > 0 ? static_cast<double>(setup.context)
                        : static_cast<double>(prompt_tokens) + static_cast<double>(output_tokens);
  ASSIGN_OR_RETURN(double kv_per_token, KvCacheBytesPerToken(setup.model, setup.kv_cache));
  const double batch = static_cast<double>(setup.batch);
  const double weights_bytes = setup.model.params * BytesPerElement(setup.weights);
  const double kv_bytes = kv_per_token * context * batch;

  InferencePerf p;
  p.prefill_s = 2 * setup.model.params * static_cast<double>(prompt_tokens) * batch /
                (gpus * peak_tflops * 1e12 * mfu);
  // Tensor parallelism splits the bytes each step reads over the GPUs' HBM.
  p.per_token_s = (weights_bytes + kv_bytes) / (gpus * hbm_tbps * 1e12 * bandwidth_efficiency);
  p.request_s = p.prefill_s + static_cast<double>(output_tokens) * p.per_token_s;
  // One request's own prompt: with continuous batching a new request is
  // prefilled as it arrives, not together with the whole batch.
  p.first_token_s = p.prefill_s / batch + p.per_token_s;
  p.tokens_per_s = batch / p.per_token_s;
  p.requests_per_s = batch / p.request_s;
  return p;
}

// ---------------------------------------------------------------- cost ----

Status ValidateDiscounts(const Discounts& d) {
  const std::array<std::pair<std::string_view, double>, 4> fields = {{
      {"reserved_1y", d.reserved_1y},
      {"reserved_3y", d.reserved_3y},
      {"savings_1y", d.savings_1y},
      {"savings_3y", d.savings_3y},
  }};
  for (const auto& [name, v] : fields) {
    if (!(std::isfinite(v) && v >= 0 && v < 1)) {
      return InvalidArgument(fmt::format(
          "discount {}: {} must be in [0, 1) (a share off the PAYG rate, e.g. 0.35)", name, v));
    }
  }
  return Status::Ok();
}

Result<SpotOverhead> EstimateSpotOverhead(double evictions_per_hour, double save_s,
                                          double restart_s) {
  RETURN_IF_ERROR(Positive("evictions_per_hour", evictions_per_hour));
  RETURN_IF_ERROR(Positive("save_s", save_s));
  RETURN_IF_ERROR(NonNegative("restart_s", restart_s));
  SpotOverhead o;
  o.mtbf_s = 3600 / evictions_per_hour;
  ASSIGN_OR_RETURN(IntervalPlan plan, PlanInterval(save_s, o.mtbf_s));
  o.interval_s = plan.daly_s;
  // Checkpoint writes and rework come from the plan; each eviction also costs
  // a restart (new VM, load the checkpoint), 1/mtbf of them per second.
  o.overhead_fraction = plan.overhead_fraction + restart_s / o.mtbf_s;
  return o;
}

Result<double> BreakEvenUtilization(double payg_per_hour, double committed_per_hour) {
  RETURN_IF_ERROR(Positive("payg_per_hour", payg_per_hour));
  RETURN_IF_ERROR(Positive("committed_per_hour", committed_per_hour));
  return committed_per_hour / payg_per_hour;
}

}  // namespace gantry::advise
