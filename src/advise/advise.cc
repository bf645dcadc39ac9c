// Recommend() and AdviseCommit(): the rules, the search over node counts and
// parallel layouts, and the costs (see include/gantry/advise/advise.h).
#include "gantry/advise/advise.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "format.h"
#include "gantry/core/text.h"

namespace gantry::advise {
namespace {

using internal::kGiB;

NumberFormat ComputeFormat(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return NumberFormat::kFp32;
    case Precision::kFp16:
      return NumberFormat::kFp16;
    case Precision::kFp8:
      return NumberFormat::kFp8;
    // Weight-only int8/int4 quantisation still multiplies in 16-bit.
    case Precision::kBf16:
    case Precision::kInt8:
    case Precision::kInt4:
      return NumberFormat::kBf16;
  }
  return NumberFormat::kBf16;
}

// The dense peak for `p`. A GPU without a bf16 figure (T4: no bf16 support)
// is estimated in fp16, which is what users run there; `note` says so.
std::optional<double> Peak(const Accelerator& acc, Precision p, std::string* note) {
  std::optional<double> peak = acc.PeakTflops(ComputeFormat(p));
  if (!peak && ComputeFormat(p) == NumberFormat::kBf16) {
    peak = acc.PeakTflops(NumberFormat::kFp16);
    if (peak) {
      *note = fmt::format(
          "{} has no bf16 figure in the catalog: estimated in fp16 (convert the "
          "model to fp16 there)",
          acc.name);
    }
  }
  return peak;
}

std::string GiB(double bytes) { return internal::GibNumber(bytes) + " GiB"; }

// Rates per VM hour for every pricing model, with where they came from.
struct Rates {
  std::array<std::optional<double>, 6> rate;
  std::array<bool, 6> from_catalog{};
};

constexpr std::array<PricingModel, 6> kModels = {
    PricingModel::kPayg,      PricingModel::kReserved1y, PricingModel::kReserved3y,
    PricingModel::kSavings1y, PricingModel::kSavings3y,  PricingModel::kSpot};

Rates RatesFor(const VmSize& size, std::string_view region, const Discounts& d) {
  Price p = size.PriceIn(region);
  Rates r;
  auto set = [&](PricingModel m, std::optional<double> own, double discount) {
    size_t i = static_cast<size_t>(m);
    if (own) {
      r.rate[i] = own;
      r.from_catalog[i] = true;
    } else if (p.payg && m != PricingModel::kSpot && m != PricingModel::kPayg) {
      r.rate[i] = *p.payg * (1 - discount);
    }
  };
  set(PricingModel::kPayg, p.payg, 0);
  set(PricingModel::kReserved1y, p.reserved_1y, d.reserved_1y);
  set(PricingModel::kReserved3y, p.reserved_3y, d.reserved_3y);
  set(PricingModel::kSavings1y, p.savings_1y, d.savings_1y);
  set(PricingModel::kSavings3y, p.savings_3y, d.savings_3y);
  set(PricingModel::kSpot, p.spot, 0);
  return r;
}

// Which families the rules send a workload to, and how much they like each.
// Returns nullopt when the rules exclude the size, with the reason.
struct RuleVerdict {
  bool allowed = true;
  int tier = 0;
  std::string note;  // said about the candidate
};

RuleVerdict ApplyRules(const Workload& w, const VmSize& s) {
  const bool gpu = s.kind == SizeKind::kGpu;
  RuleVerdict v;
  if (w.kind == ModelKind::kSmall) {
    if (gpu) {
      v.tier = 2;
      v.note =
          "rule: small non-generative models run on CPU; a GPU size is allowed but not advised";
      return v;
    }
    const CpuClass wanted = w.stage == Stage::kTraining ? CpuClass::kMemory : CpuClass::kCompute;
    if (s.cpu_class == wanted) {
      v.note = w.stage == Stage::kTraining
                   ? "rule: small models train on memory-optimised CPU sizes"
                   : "rule: small models serve on compute-optimised CPU sizes";
    } else {
      v.tier = 1;
      v.note = fmt::format("rule: {} CPU sizes are a second choice for {} of small models",
                           CpuClassName(s.cpu_class), StageName(w.stage));
    }
    return v;
  }
  if (!gpu) {
    v.allowed = false;
    v.note = fmt::format("rule: {} of {} models needs GPU sizes (ND or NC)", StageName(w.stage),
                         ModelKindName(w.kind));
    return v;
  }
  const std::string family = s.Family();
  if (w.stage == Stage::kTraining) {
    if (family == "ND") {
      v.note = "rule: training prefers ND (NVLink and InfiniBand RDMA; scales past one VM)";
    } else if (family == "NC") {
      v.note = "rule: NC is the training alternative to ND: Ethernet only, so one VM at most";
    } else {
      v.tier = 1;
      v.note = fmt::format(
          "rule: {} sizes are built for graphics and light inference; a last "
          "resort for training",
          family);
    }
  } else {
    if (s.rdma()) {
      v.tier = 1;
      v.note =
          "rule: inference avoids InfiniBand sizes (the fabric is paid for and unused); "
          "chosen only when nothing smaller serves the model";
    } else {
      v.note = "rule: inference runs on NC/NV sizes without InfiniBand";
    }
  }
  return v;
}

// The MFU for an accelerator: the workload's when it was given for this GPU
// (or for any), else the catalog's default. `note` says which.
bool MfuMeasuredFor(const Workload& w, const Accelerator& acc) {
  return w.mfu > 0 && (w.mfu_device.empty() || AcceleratorMatchesDevice(acc.name, w.mfu_device));
}

double MfuFor(const Workload& w, const Accelerator& acc, std::string* note) {
  if (MfuMeasuredFor(w, acc)) {
    if (!w.mfu_source.empty()) {
      *note = fmt::format(
          "MFU {:.2f} from {}: a GEMM's share of peak, an upper bound for a "
          "training step, so this time is optimistic",
          w.mfu, w.mfu_source);
    }
    return w.mfu;
  }
  return acc.default_mfu;
}

// Full recompute runs every forward pass twice (8ND instead of 6ND of
// hardware work); a catalog MFU does not know that, a measured one does.
bool FullRecomputePenalty(const Workload& w, const Accelerator* acc) {
  return w.recompute == Recompute::kFull && acc && !MfuMeasuredFor(w, *acc);
}

// Checkpoint bytes of a training job: weights plus optimizer state (the
// gradients are not saved).
double CheckpointBytes(const Workload& w) {
  TrainingSetup t;
  t.model = w.model;
  t.precision = w.precision;
  t.optimizer = w.optimizer;
  Result<TrainingMemory> m = EstimateTrainingMemory(t);
  return m.ok() ? m->weights + m->optimizer : w.model.params * 16;
}

void FillCosts(const Workload& w, const Rates& rates, Candidate* c) {
  c->costs.clear();
  for (PricingModel m : kModels) {
    CostLine line;
    line.model = m;
    size_t i = static_cast<size_t>(m);
    line.rate_from_catalog = rates.from_catalog[i];
    if (rates.rate[i]) {
      line.rate_per_hour = *rates.rate[i] * c->nodes;
      line.month_usd = *line.rate_per_hour * w.hours_per_month;
      if (w.stage == Stage::kTraining && c->hours) {
        if (m == PricingModel::kPayg) {
          line.run_usd = *line.rate_per_hour * *c->hours;
        } else if (m == PricingModel::kSpot && c->spot) {
          line.run_usd = *line.rate_per_hour * *c->hours * (1 + c->spot->overhead_fraction);
        }
      }
    }
    c->costs.push_back(line);
  }
}

// Spot advice for a candidate whose costs and hours are known.
void AdviseSpot(const Workload& w, const Rates& rates, Candidate* c) {
  const bool interruptible = w.interruptible.value_or(w.stage == Stage::kTraining);
  const auto& spot = rates.rate[static_cast<size_t>(PricingModel::kSpot)];
  const auto& payg = rates.rate[static_cast<size_t>(PricingModel::kPayg)];
  if (w.stage == Stage::kTraining) {
    // Each VM is evicted independently, so the job sees nodes times the rate.
    double save_s = CheckpointBytes(w) / (w.ckpt_write_gbps * 1e9 * c->nodes);
    save_s = std::max(save_s, 1.0);
    Result<SpotOverhead> o =
        EstimateSpotOverhead(w.evictions_per_hour * c->nodes, save_s, w.restart_s);
    if (o.ok()) c->spot = *o;
  }
  if (!interruptible) {
    c->spot_reason = w.stage == Stage::kInference
                         ? "spot not advised: an eviction drops in-flight requests of an online "
                           "service (set constraints.interruptible for batch inference)"
                         : "spot not advised: the workload is marked not interruptible";
    return;
  }
  if (!spot) {
    c->spot_reason = fmt::format("spot price unknown in {} (add it with --prices)", w.region);
    return;
  }
  if (w.stage == Stage::kInference) {
    c->spot_advisable = true;
    c->spot_reason =
        payg ? fmt::format(
                   "spot advised for interruptible serving: {:.0f}% below PAYG; evicted "
                   "work must be retried",
                   100 * (1 - *spot / *payg))
             : "spot advised for interruptible serving";
    return;
  }
  if (c->spot && c->spot->interval_s >= c->spot->mtbf_s) {
    c->spot_reason = fmt::format(
        "spot not advised: a checkpoint takes too long for the eviction rate (evictions every "
        "{:.0f} min across {} VM(s))",
        c->spot->mtbf_s / 60, c->nodes);
    return;
  }
  if (!c->spot || !c->hours) {
    c->spot_reason = "spot cost unknown: the run time is unknown";
    return;
  }
  const double spot_hours = *c->hours * (1 + c->spot->overhead_fraction);
  if (w.deadline_h > 0 && spot_hours > w.deadline_h) {
    c->spot_reason = fmt::format(
        "spot not advised: evictions stretch the run to {} (checkpoint every {:.0f} min, {:.1f}% "
        "overhead), past the {} deadline",
        internal::FormatHours(spot_hours), c->spot->interval_s / 60,
        100 * c->spot->overhead_fraction, internal::FormatHours(w.deadline_h));
    return;
  }
  const double spot_cost = *spot * spot_hours;
  const double payg_cost = payg ? *payg * *c->hours : std::numeric_limits<double>::infinity();
  if (spot_cost >= payg_cost) {
    c->spot_reason = "spot not advised: with eviction overhead it costs no less than PAYG";
    return;
  }
  c->spot_advisable = true;
  c->spot_reason = fmt::format(
      "spot advised: {:.0f}% cheaper than PAYG after {:.1f}% overhead for evictions ({:.2f}/h "
      "per VM assumed), checkpointing every {:.0f} min (Daly) and {:.0f} s restarts",
      payg ? 100 * (1 - spot_cost / payg_cost) : 0.0, 100 * c->spot->overhead_fraction,
      w.evictions_per_hour, c->spot->interval_s / 60, w.restart_s);
}

double RateOrInf(const Candidate& c, PricingModel m) {
  const CostLine* l = c.Cost(m);
  return l && l->rate_per_hour ? *l->rate_per_hour : std::numeric_limits<double>::infinity();
}

// -------------------------------------------------------------- training --

void EvaluateTraining(const Workload& w, const AdviseOptions& opt, const Rates& rates,
                      Candidate* c) {
  const VmSize& s = *c->size;
  const bool gpu = s.kind == SizeKind::kGpu;
  std::optional<double> peak;
  if (gpu) {
    std::string note;
    peak = Peak(*c->accelerator, w.precision, &note);
    if (!note.empty()) c->notes.push_back(note);
    std::string mfu_note;
    c->mfu = MfuFor(w, *c->accelerator, &mfu_note);
    if (!mfu_note.empty()) c->notes.push_back(mfu_note);
    if (!peak) {
      c->notes.push_back(fmt::format("{} has no {} peak in the catalog: time and run cost unknown",
                                     c->accelerator->name, PrecisionName(w.precision)));
    } else {
      c->peak_tflops = *peak;
    }
  }
  const double usable = gpu ? c->accelerator->memory_gib * kGiB * opt.usable_memory_fraction
                            : s.ram_gib * kGiB * opt.usable_memory_fraction;
  c->memory_usable = usable;
  c->gpus_per_node = gpu ? s.gpus : 0;
  Result<double> flops = TrainingFlops(w.model, w.tokens, w.sequence);

  const int mp = w.tensor_parallel * w.pipeline_parallel;
  const int max_nodes = gpu && s.rdma() ? w.max_nodes : 1;
  std::string last_reason;
  std::optional<Candidate> best;
  for (int n = 1; n <= max_nodes; ++n) {
    Candidate trial = *c;
    trial.nodes = n;
    const double total_gpus = gpu ? s.gpus * n : 1;
    const int dp = gpu ? static_cast<int>(std::floor(total_gpus / mp + 1e-9)) : 1;
    if (gpu && dp < 1) {
      last_reason = fmt::format(
          "tensor x pipeline parallel = {} needs more GPUs than {} VM(s) of "
          "{} have",
          mp, n, s.gpus);
      continue;
    }
    TrainingSetup t;
    t.model = w.model;
    t.precision = w.precision;
    t.optimizer = w.optimizer;
    t.data_parallel = dp;
    t.tensor_parallel = gpu ? w.tensor_parallel : 1;
    t.pipeline_parallel = gpu ? w.pipeline_parallel : 1;
    t.sequence_parallel = w.sequence_parallel;
    t.recompute = w.recompute;
    t.flash_attention = w.flash_attention;
    t.sequence = w.sequence;
    t.micro_batch = w.micro_batch;
    bool fits = false;
    const int first_stage = w.zero_stage >= 0 ? w.zero_stage : 0;
    const int last_stage = w.zero_stage >= 0 ? w.zero_stage : (gpu ? 3 : 0);
    for (int z = first_stage; z <= last_stage; ++z) {
      t.zero_stage = z;
      Result<TrainingMemory> m = EstimateTrainingMemory(t);
      if (!m.ok()) {
        last_reason = m.status().message();
        break;
      }
      trial.training_memory = *m;
      trial.memory_needed = m->total;
      trial.zero_stage = z;
      if (m->total <= usable) {
        fits = true;
        break;
      }
    }
    if (!fits) {
      last_reason = fmt::format(
          "does not fit: needs {} per {} (ZeRO-{}{}), {} usable{}", GiB(trial.memory_needed),
          gpu ? "GPU" : "VM", trial.zero_stage, gpu ? fmt::format(", {} GPUs", dp * mp) : "",
          GiB(usable),
          gpu && !s.rdma() && n == 1 ? "; no InfiniBand, so it cannot span more VMs" : "");
      continue;
    }
    if (gpu && peak && flops.ok()) {
      Result<double> secs = ComputeSeconds(*flops, dp * mp, *peak, trial.mfu);
      if (secs.ok()) {
        trial.hours = *secs / 3600 * (FullRecomputePenalty(w, c->accelerator) ? 4.0 / 3.0 : 1.0);
      }
    }
    if (w.deadline_h > 0 && trial.hours && *trial.hours > w.deadline_h) {
      last_reason =
          fmt::format("misses the {} deadline: {} on {} VM(s)", internal::FormatHours(w.deadline_h),
                      internal::FormatHours(*trial.hours), n);
      continue;
    }
    FillCosts(w, rates, &trial);
    const CostLine* payg = trial.Cost(PricingModel::kPayg);
    if (w.budget_usd > 0 && payg && payg->run_usd && *payg->run_usd > w.budget_usd) {
      last_reason = fmt::format("over the ${:.0f} budget: ${:.0f} on {} VM(s) at PAYG",
                                w.budget_usd, *payg->run_usd, n);
      // More VMs cost the same or more; only time can get better.
      break;
    }
    best = std::move(trial);
    // Cost: the fewest VMs that fit and meet the deadline (ideal scaling makes
    // more VMs cost the same, and real scaling makes them cost more). Time:
    // keep adding VMs while the budget allows.
    if (w.objective == Objective::kCost || !best->hours) break;
  }
  if (!best) {
    c->feasible = false;
    c->reasons_out.push_back(last_reason.empty() ? "no layout fits" : last_reason);
    if (gpu && !s.rdma() && w.max_nodes > 1) {
      c->notes.push_back("no InfiniBand: multi-node training needs RDMA, so one VM at most");
    }
    return;
  }
  *c = std::move(*best);
  c->feasible = true;
  if (c->nodes > 1) {
    c->notes.push_back(
        fmt::format("{} VMs over InfiniBand ({:.0f} Gb/s per VM)", c->nodes, s.infiniband_gbps));
  }
  if (w.zero_stage < 0 && gpu) {
    c->notes.push_back(
        c->zero_stage == 0
            ? "ZeRO-0 (plain data parallel) fits"
            : fmt::format("ZeRO-{} is the lowest stage that fits ({})", c->zero_stage,
                          c->zero_stage == 3   ? "FSDP FULL_SHARD"
                          : c->zero_stage == 2 ? "FSDP SHARD_GRAD_OP"
                                               : "DeepSpeed; FSDP's nearest is SHARD_GRAD_OP"));
  }
  if (FullRecomputePenalty(w, c->accelerator) && c->hours) {
    c->notes.push_back(
        "full recompute: time includes a second forward pass (x4/3); pass a "
        "measured --mfu to replace this");
  }
  if (c->training_memory && c->training_memory->activations == 0) {
    c->notes.push_back(
        "activations not estimated (give model.layers, hidden, heads and training.sequence)");
  }
  if (!gpu) {
    c->notes.push_back("time unknown: the catalog has no CPU peak; measure a few steps");
  }
  AdviseSpot(w, rates, c);
  FillCosts(w, rates, c);
}

// ------------------------------------------------------------- inference --

void EvaluateInference(const Workload& w, const AdviseOptions& opt, const Rates& rates,
                       Candidate* c) {
  const VmSize& s = *c->size;
  const bool gpu = s.kind == SizeKind::kGpu;
  InferenceSetup setup;
  setup.model = w.model;
  setup.weights = w.precision;
  setup.kv_cache = w.kv_cache;
  setup.context = w.context > 0 ? w.context : w.prompt_tokens + w.output_tokens;
  setup.batch = w.batch;
  if (w.kind == ModelKind::kSmall && setup.context == 0) {
    setup.context = 1;  // no KV cache to speak of
  }
  Result<InferenceMemory> mem = EstimateInferenceMemory(setup);
  if (!mem.ok() && w.kind == ModelKind::kSmall) {
    // Small non-transformer models: weights and overhead only.
    InferenceMemory m;
    m.weights = w.model.params * BytesPerElement(w.precision);
    m.overhead = m.weights * setup.overhead;
    m.total = m.weights + m.overhead;
    mem = m;
  }
  if (!mem.ok()) {
    c->feasible = false;
    c->reasons_out.push_back(mem.status().message());
    return;
  }
  c->inference_memory = *mem;
  if (!gpu) {
    c->memory_usable = s.ram_gib * kGiB * opt.usable_memory_fraction;
    c->memory_needed = mem->total;
    if (mem->total > c->memory_usable) {
      c->feasible = false;
      c->reasons_out.push_back(fmt::format("does not fit: needs {}, {} of RAM usable",
                                           GiB(mem->total), GiB(c->memory_usable)));
      return;
    }
    c->feasible = true;
    c->nodes = 1;
    c->replicas_per_node = 1;
    c->notes.push_back(
        "latency and throughput unknown on CPU (no CPU peak in the catalog); "
        "measure with your model");
    if (w.target_rps > 0) c->notes.push_back("fleet size for target_rps needs a measurement");
    AdviseSpot(w, rates, c);
    FillCosts(w, rates, c);
    return;
  }
  const Accelerator& acc = *c->accelerator;
  if (w.kind == ModelKind::kSmall && w.model.layers == 0) {
    // A small non-transformer model on a GPU: weights fit or not; the
    // roofline needs a transformer shape, so speed is left to a measurement.
    c->gpus_per_node = s.gpus;
    c->memory_usable = acc.memory_gib * kGiB * opt.usable_memory_fraction;
    c->memory_needed = mem->total;
    if (mem->total > c->memory_usable) {
      c->feasible = false;
      c->reasons_out.push_back(fmt::format("does not fit: needs {}, {} usable per GPU",
                                           GiB(mem->total), GiB(c->memory_usable)));
      return;
    }
    c->feasible = true;
    c->replicas_per_node = static_cast<int>(std::max(1.0, std::floor(s.gpus)));
    c->notes.push_back("latency and throughput unknown without a transformer shape; measure");
    AdviseSpot(w, rates, c);
    FillCosts(w, rates, c);
    return;
  }
  std::string peak_note;
  std::optional<double> peak = Peak(acc, w.precision, &peak_note);
  if (!peak_note.empty()) c->notes.push_back(peak_note);
  std::string mfu_note;
  c->mfu = MfuFor(w, acc, &mfu_note);
  if (!mfu_note.empty()) c->notes.push_back(mfu_note);
  c->gpus_per_node = s.gpus;
  const double usable = acc.memory_gib * kGiB * opt.usable_memory_fraction;
  c->memory_usable = usable;
  if (!peak || !acc.hbm_tbps) {
    c->feasible = false;
    c->reasons_out.push_back(fmt::format("{} has no {} peak or memory bandwidth in the catalog",
                                         acc.name, PrecisionName(w.precision)));
    return;
  }
  c->peak_tflops = *peak;
  std::string last_reason;
  bool found = false;
  for (int tp = 1; tp <= s.gpus + 1e-9; tp *= 2) {
    if (w.model.heads > 0 && w.model.heads % tp != 0) continue;
    const double per_gpu = mem->total / tp;
    if (per_gpu > usable) {
      last_reason = fmt::format(
          "does not fit: needs {} in all ({} per GPU at tensor parallel {}), "
          "{} usable per GPU; multi-VM serving is not modelled",
          GiB(mem->total), GiB(per_gpu), tp, GiB(usable));
      continue;
    }
    Result<InferencePerf> perf = EstimateInferencePerf(setup, w.prompt_tokens, w.output_tokens, tp,
                                                       *peak, *acc.hbm_tbps, c->mfu);
    if (!perf.ok()) {
      last_reason = perf.status().message();
      break;
    }
    c->tensor_parallel = tp;
    c->memory_needed = per_gpu;
    c->perf = *perf;
    if (w.target_token_ms > 0 && perf->per_token_s * 1000 > w.target_token_ms) {
      last_reason = fmt::format(
          "misses the {:.0f} ms per token target: {:.1f} ms at tensor "
          "parallel {}",
          w.target_token_ms, perf->per_token_s * 1000, tp);
      continue;
    }
    if (w.target_first_token_ms > 0 && perf->first_token_s * 1000 > w.target_first_token_ms) {
      last_reason = fmt::format(
          "misses the {:.0f} ms first-token target: {:.0f} ms at tensor "
          "parallel {}",
          w.target_first_token_ms, perf->first_token_s * 1000, tp);
      continue;
    }
    found = true;
    break;
  }
  if (!found) {
    c->feasible = false;
    c->reasons_out.push_back(last_reason.empty() ? "no tensor-parallel layout fits" : last_reason);
    return;
  }
  c->replicas_per_node = static_cast<int>(std::floor(s.gpus / c->tensor_parallel + 1e-9));
  c->nodes = 1;
  if (w.target_rps > 0) {
    const double replicas = std::ceil(w.target_rps / c->perf->requests_per_s - 1e-9);
    const double nodes = std::ceil(replicas / c->replicas_per_node - 1e-9);
    if (nodes > w.max_nodes) {
      c->feasible = false;
      c->reasons_out.push_back(fmt::format(
          "needs {:.0f} VMs for {:.1f} requests/s ({:.2f} per replica), above max_nodes {}", nodes,
          w.target_rps, c->perf->requests_per_s, w.max_nodes));
      return;
    }
    c->nodes = static_cast<int>(std::max(1.0, nodes));
  }
  c->feasible = true;
  AdviseSpot(w, rates, c);
  FillCosts(w, rates, c);
  const CostLine* payg = c->Cost(PricingModel::kPayg);
  if (w.budget_usd > 0 && payg && payg->month_usd && *payg->month_usd > w.budget_usd) {
    c->feasible = false;
    c->reasons_out.push_back(fmt::format("over the ${:.0f} monthly budget: ${:.0f} at PAYG",
                                         w.budget_usd, *payg->month_usd));
  }
}

}  // namespace

const CostLine* Candidate::Cost(PricingModel m) const {
  for (const CostLine& l : costs) {
    if (l.model == m) return &l;
  }
  return nullptr;
}

Result<Advice> Recommend(const Workload& w, const Catalog& catalog, const AdviseOptions& options) {
  RETURN_IF_ERROR(ValidateWorkload(w));
  RETURN_IF_ERROR(ValidateDiscounts(options.discounts));
  if (!(options.usable_memory_fraction > 0 && options.usable_memory_fraction <= 1)) {
    return InvalidArgument(
        fmt::format("usable memory fraction {} must be in (0, 1]", options.usable_memory_fraction));
  }
  for (const std::string& name : options.only_sizes) {
    if (!catalog.FindSize(name)) {
      return NotFound(fmt::format("size '{}' is not in the catalog {}", name, catalog.origin()));
    }
  }
  Advice advice;
  advice.workload = w;
  advice.catalog_origin = catalog.origin();
  advice.currency = catalog.currency();
  if (w.kind == ModelKind::kSmall) {
    advice.rules.push_back(
        w.stage == Stage::kTraining
            ? "small non-generative models train on memory-optimised CPU sizes (E, M)"
            : "small non-generative models serve on compute-optimised CPU sizes (F)");
  } else if (w.stage == Stage::kTraining) {
    advice.rules.push_back(fmt::format(
        "{} models train on GPUs: prefer ND (NVLink, InfiniBand RDMA), otherwise NC with Ethernet",
        ModelKindName(w.kind)));
    advice.rules.push_back("training across VMs needs RDMA (InfiniBand): only ND sizes scale out");
  } else {
    advice.rules.push_back(
        fmt::format("{} models serve on GPUs (NC or ND)", ModelKindName(w.kind)));
    advice.rules.push_back(
        "inference avoids InfiniBand sizes unless nothing else serves the model");
  }
  advice.rules.push_back("newer sizes win ties");
  if (w.stage == Stage::kTraining) {
    advice.rules.push_back(
        "spot for interruptible training with checkpoints; reservations or "
        "savings plans for steady use (see `gantry advise commit`)");
  } else {
    advice.rules.push_back("spot only for interruptible (batch) inference");
  }

  for (const VmSize& s : catalog.sizes()) {
    if (!options.only_sizes.empty() &&
        std::none_of(options.only_sizes.begin(), options.only_sizes.end(),
                     [&](const std::string& n) { return catalog.FindSize(n) == &s; })) {
      continue;
    }
    Candidate c;
    c.size = &s;
    c.accelerator = catalog.AcceleratorOf(s);
    RuleVerdict rule = ApplyRules(w, s);
    c.tier = rule.tier;
    if (!rule.note.empty()) c.notes.push_back(rule.note);
    if (!rule.allowed) {
      c.reasons_out.push_back(rule.note);
      advice.rejected.push_back(std::move(c));
      continue;
    }
    Rates rates = RatesFor(s, w.region, options.discounts);
    if (w.stage == Stage::kTraining) {
      EvaluateTraining(w, options, rates, &c);
    } else {
      EvaluateInference(w, options, rates, &c);
    }
    if (!c.PaygKnown()) {
      c.notes.push_back(fmt::format("PAYG price unknown in {} (add it with --prices)", w.region));
    }
    if (c.feasible) {
      if (w.objective == Objective::kTime) {
        if (w.stage == Stage::kTraining) {
          c.rank_value = c.hours;
        } else if (c.perf) {
          c.rank_value = c.perf->request_s;
        }
      } else {
        const CostLine* payg = c.Cost(PricingModel::kPayg);
        if (payg && payg->rate_per_hour) {
          if (w.stage == Stage::kTraining && payg->run_usd) {
            c.rank_value = payg->run_usd;
          } else if (w.stage == Stage::kInference) {
            c.rank_value = payg->month_usd;
          } else if (s.kind == SizeKind::kCpu) {
            // CPU training time is unknown; the hourly rate is the only cost signal.
            c.rank_value = payg->rate_per_hour;
          }
        }
      }
      advice.ranked.push_back(std::move(c));
    } else {
      advice.rejected.push_back(std::move(c));
    }
  }
  std::stable_sort(
      advice.ranked.begin(), advice.ranked.end(), [](const Candidate& a, const Candidate& b) {
        auto key = [](const Candidate& c) {
          return std::make_tuple(c.tier, c.rank_value ? 0 : 1, c.rank_value.value_or(0),
                                 RateOrInf(c, PricingModel::kPayg), -c.size->released);
        };
        return key(a) < key(b);
      });
  return advice;
}

bool Candidate::PaygKnown() const {
  const CostLine* l = Cost(PricingModel::kPayg);
  return l && l->rate_per_hour;
}

// ---------------------------------------------------------------- commit --

Result<CommitAdvice> AdviseCommit(const Catalog& catalog, std::string_view size_name,
                                  std::string_view region, int nodes, double utilization,
                                  const Discounts& discounts) {
  RETURN_IF_ERROR(ValidateDiscounts(discounts));
  if (!(utilization > 0 && utilization <= 1)) {
    return InvalidArgument(fmt::format(
        "utilization {} must be in (0, 1]: the share of hours the VMs are needed", utilization));
  }
  if (nodes < 1) return InvalidArgument(fmt::format("nodes {} must be >= 1", nodes));
  const VmSize* size = catalog.FindSize(size_name);
  if (!size) {
    std::string hint;
    const std::string want = AsciiLower(size_name);
    for (const VmSize& s : catalog.sizes()) {
      std::string n = AsciiLower(s.name);
      if (!want.empty() &&
          n.find(want.substr(0, std::min<size_t>(want.size(), 6))) != std::string::npos) {
        hint += (hint.empty() ? "" : ", ") + s.name;
      }
    }
    return NotFound(fmt::format(
        "size '{}' is not in the catalog {}{}; `gantry advise catalog` "
        "lists the sizes",
        size_name, catalog.origin(), hint.empty() ? "" : " (did you mean " + hint + "?)"));
  }
  CommitAdvice out;
  out.size = size;
  out.region = AsciiLower(region);
  out.nodes = nodes;
  out.utilization = utilization;
  Rates rates = RatesFor(*size, out.region, discounts);
  const auto& payg = rates.rate[static_cast<size_t>(PricingModel::kPayg)];
  if (!payg) {
    std::vector<std::string> regions;
    for (const auto& [r, p] : size->prices) {
      if (p.payg) regions.push_back(r);
    }
    return FailedPrecondition(fmt::format(
        "{} has no PAYG price in {}{}; add one with --prices", size->name, out.region,
        regions.empty() ? "" : fmt::format(" (priced in: {})", fmt::join(regions, ", "))));
  }
  double best = std::numeric_limits<double>::infinity();
  for (PricingModel m : kModels) {
    CommitLine line;
    line.model = m;
    size_t i = static_cast<size_t>(m);
    line.rate_from_catalog = rates.from_catalog[i];
    if (rates.rate[i]) {
      line.rate_per_hour = *rates.rate[i] * nodes;
      // PAYG and spot bill the hours used; commitments bill every hour.
      const bool metered = m == PricingModel::kPayg || m == PricingModel::kSpot;
      line.month_usd = *line.rate_per_hour * kHoursPerMonth * (metered ? utilization : 1.0);
      if (!metered) {
        Result<double> be = BreakEvenUtilization(*payg, *rates.rate[i]);
        if (be.ok()) line.break_even = *be;
      }
      if (m != PricingModel::kSpot && *line.month_usd < best) {
        best = *line.month_usd;
        out.cheapest = m;
      }
    }
    out.lines.push_back(line);
  }
  return out;
}

}  // namespace gantry::advise
