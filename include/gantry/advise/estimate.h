// The arithmetic behind `gantry advise`: memory a model needs to train or to
// serve, the FLOPs and time it takes, and what it costs under each pricing
// model. Pure functions of their inputs, so they can be checked against
// published numbers (ZeRO, Korthikanti et al., Kaplan et al., PaLM) and for
// monotonicity. Every function that takes user numbers validates them and
// returns InvalidArgument naming the field ("layers: -2 must be >= 1").
//
// Units: bytes, seconds, FLOPs, TFLOPS (1e12 FLOP/s), TB/s (1e12 B/s), USD.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::advise {

// Number formats of weights, activations and KV caches.
enum class Precision { kFp32, kBf16, kFp16, kFp8, kInt8, kInt4 };
// "fp32", "bf16", "fp16", "fp8", "int8", "int4" (also accepts "float32",
// "bfloat16", "float16", "half"); InvalidArgument lists the accepted names.
Result<Precision> ParsePrecision(std::string_view text);
std::string_view PrecisionName(Precision p);
double BytesPerElement(Precision p);  // 4, 2, 2, 1, 1, 0.5

enum class Optimizer { kAdam, kSgdMomentum, kSgd };
// "adam", "adamw" (same memory), "sgd-momentum", "sgd".
Result<Optimizer> ParseOptimizer(std::string_view text);
std::string_view OptimizerName(Optimizer o);

enum class Recompute { kNone, kSelective, kFull };
Result<Recompute> ParseRecompute(std::string_view text);  // "none", "selective", "full"
std::string_view RecomputeName(Recompute r);

// A transformer's shape. `params` is required everywhere; the rest is needed
// only by the estimates that say so (0 = not given).
struct ModelShape {
  double params = 0;   // N, number of parameters
  int layers = 0;      // L
  int hidden = 0;      // h (d_model)
  int heads = 0;       // a, attention (query) heads
  int kv_heads = 0;    // key/value heads (GQA); 0 = same as heads
  int head_dim = 0;    // 0 = hidden / heads
  int ffn_hidden = 0;  // informational; the activation formula assumes 4h
};

// ---------------------------------------------------------------- training --

struct TrainingSetup {
  ModelShape model;
  // kFp32: everything fp32. kBf16/kFp16: mixed precision (16-bit weights and
  // gradients, fp32 master weights and optimizer states). Others are refused.
  Precision precision = Precision::kBf16;
  Optimizer optimizer = Optimizer::kAdam;
  int zero_stage = 0;         // 0-3 (DeepSpeed ZeRO / FSDP: 3 = full shard)
  int data_parallel = 1;      // N_d, the GPUs model state is sharded over by ZeRO
  int tensor_parallel = 1;    // t
  int pipeline_parallel = 1;  // p: each GPU holds layers/p layers
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // FlashAttention-style kernels do not store the a*s*s attention scores.
  bool flash_attention = true;
  int64_t sequence = 0;     // s, tokens per sample
  int64_t micro_batch = 1;  // b, samples per GPU per step
};

// Bytes per GPU.
struct TrainingMemory {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;    // includes fp32 master weights under mixed precision
  double activations = 0;  // 0 when layers/hidden/heads/sequence are not given
  double total = 0;
};

// Model state per parameter (before sharding): weights W, gradients G and
// optimizer K bytes:
//   mixed (bf16/fp16): W=2 G=2, K = 4 (master) + 8 (adam) | 4 (sgd-momentum) | 0 (sgd)
//   fp32:              W=4 G=4, K = 8 (adam) | 4 (sgd-momentum) | 0 (sgd)
// (mixed Adam = 16 bytes/param: 1.5e9 params -> 24e9 bytes). Model-parallel
// degree t*p divides every term; ZeRO over N_d then gives per GPU
//   stage 0: W+G+K   stage 1: W+G+K/N_d   stage 2: W+(G+K)/N_d   stage 3: (W+G+K)/N_d.
// Activations (Korthikanti et al. 2022), bytes per layer with 16-bit
// activations (x2 for fp32), s*b*h times:
//   no TP (t=1) or TP without SP:  10 + 24/t + 5as/(ht)
//   TP with SP:                    (34 + 5as/h) / t
//   selective recompute:           34/t with SP, 10 + 24/t without (attention scores recomputed)
//   full recompute:                2               (layer input only)
// with the 5as/h term dropped when flash_attention is true, times layers (not
// layers/p: under 1F1B the first pipeline stage holds p micro-batches of its
// L/p layers, Korthikanti et al. section 4.2.3).
// Activations need layers, hidden, heads and sequence; when any is 0 they are
// 0 (callers say "activations not estimated").
Result<TrainingMemory> EstimateTrainingMemory(const TrainingSetup& setup);

// Training FLOPs for `tokens` tokens: 6*N*D, plus the attention term
// 12*L*h*s*D (PaLM's 12*L*H*Q*T with H*Q = heads*head_dim = h) when layers,
// hidden and sequence are known.
Result<double> TrainingFlops(const ModelShape& model, double tokens, int64_t sequence);

// Seconds to do `flops` on `gpus` accelerators of `peak_tflops` each at model
// FLOPs utilisation `mfu` (0, 1].
Result<double> ComputeSeconds(double flops, double gpus, double peak_tflops, double mfu);

// --------------------------------------------------------------- inference --

struct InferenceSetup {
  ModelShape
      model;  // needs layers, kv_heads (or heads) and head_dim (or hidden/heads) for the KV cache
  Precision weights = Precision::kBf16;
  Precision kv_cache = Precision::kBf16;
  int64_t context = 0;     // tokens per sequence held in the cache (prompt + output)
  int64_t batch = 1;       // concurrent sequences
  double overhead = 0.15;  // runtime overhead as a share of weights + KV (heuristic; [0, 1])
};

// Bytes for the whole model (divide by the GPUs it is sharded over).
struct InferenceMemory {
  double weights = 0;
  double kv_cache = 0;
  double kv_per_token = 0;  // one token of one sequence, all layers
  double overhead = 0;
  double total = 0;
};

// KV cache = 2 * layers * kv_heads * head_dim * bytes per token (Llama-3.1-8B:
// 32 layers, 8 KV heads, head_dim 128, bf16 -> 131072 bytes); times context
// times batch. InvalidArgument when the shape lacks layers or heads.
Result<double> KvCacheBytesPerToken(const ModelShape& model, Precision kv_cache);
Result<InferenceMemory> EstimateInferenceMemory(const InferenceSetup& setup);

// A roofline estimate of serving on `gpus` accelerators with tensor
// parallelism: prefill is compute-bound (2*N FLOPs per prompt token at
// `mfu` of peak), each decode step is memory-bound (all weights plus the
// batch's KV cache read once per step at `bandwidth_efficiency` of HBM
// bandwidth). Time to first token is one request's prefill (continuous
// batching admits requests as they come) plus one decode step; throughput
// counts the whole batch's prefill. Queueing is not modelled.
struct InferencePerf {
  double prefill_s = 0;       // prefill of the whole batch's prompts
  double first_token_s = 0;   // one request's prompt prefill plus one decode step (TTFT)
  double per_token_s = 0;     // one decode step (time per output token)
  double request_s = 0;       // prefill + output_tokens decode steps
  double tokens_per_s = 0;    // output tokens per second, whole batch
  double requests_per_s = 0;  // batch / request_s, one replica
};
Result<InferencePerf> EstimateInferencePerf(const InferenceSetup& setup, int64_t prompt_tokens,
                                            int64_t output_tokens, double gpus, double peak_tflops,
                                            double hbm_tbps, double mfu,
                                            double bandwidth_efficiency = 0.6);

// -------------------------------------------------------------------- cost --

enum class PricingModel { kPayg, kReserved1y, kReserved3y, kSavings1y, kSavings3y, kSpot };
// "payg", "reserved-1y", "reserved-3y", "savings-1y", "savings-3y", "spot".
std::string_view PricingModelName(PricingModel m);
Result<PricingModel> ParsePricingModel(std::string_view text);

// Discounts off the PAYG rate used when a catalog row has no rate of its own
// for a commitment. Defaults are documented in docs/advise.md: Azure quotes
// "up to 72%" for reservations and "up to 65%" for savings plans; typical
// GPU rates are lower, so the defaults are conservative mid values.
struct Discounts {
  double reserved_1y = 0.35;
  double reserved_3y = 0.55;
  double savings_1y = 0.25;
  double savings_3y = 0.45;
};
// Each in [0, 1); InvalidArgument names the field.
Status ValidateDiscounts(const Discounts& d);

// Expected overhead of running an interruptible job on spot VMs, as a share of
// the useful run time: checkpoints at the Daly interval for the eviction MTBF
// (1 / evictions_per_hour) plus the rework and `restart_s` per eviction
// (PlanInterval's overhead + restart_s * evictions per second).
struct SpotOverhead {
  double mtbf_s = 0;
  double interval_s = 0;         // Daly's optimum checkpoint interval
  double overhead_fraction = 0;  // multiply the run time by (1 + this)
};
// evictions_per_hour > 0, save_s > 0, restart_s >= 0.
Result<SpotOverhead> EstimateSpotOverhead(double evictions_per_hour, double save_s,
                                          double restart_s);

// Utilisation (share of hours the VM is actually needed) above which an
// always-billed commitment at `committed_per_hour` costs less than PAYG at
// `payg_per_hour`: committed / payg. Both > 0; a value >= 1 means never.
Result<double> BreakEvenUtilization(double payg_per_hour, double committed_per_hour);

inline constexpr double kHoursPerMonth = 730;  // Azure's billing month

}  // namespace gantry::advise
