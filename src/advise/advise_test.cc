#include "gantry/advise/advise.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gantry::advise {
namespace {

using ::testing::HasSubstr;

constexpr double kGiB = 1024.0 * 1024 * 1024;

// A small catalog with round numbers, so expected values can be computed by
// hand: G80 (80 GiB, 1000 TFLOPS bf16, 3 TB/s, MFU 0.5) and G16 (16 GiB, no
// bf16 figure).
constexpr char kCatalog[] = R"(
version: 1
currency: USD
accelerators:
  - name: G80
    memory_gib: 80
    hbm_tbps: 3
    peak_tflops: {bf16: 1000, fp16: 1000, fp32: 60, fp8: 2000}
    default_mfu: 0.5
    source: test
  - name: G16
    memory_gib: 16
    hbm_tbps: 0.3
    peak_tflops: {bf16: unknown, fp16: 65, fp32: 8}
    default_mfu: 0.3
    source: test
sizes:
  - name: Standard_ND8_G80_v1
    series: ND G80
    kind: gpu
    released: 2023
    accelerator: G80
    gpus: 8
    vcpus: 96
    ram_gib: 1900
    nvlink: NVLink
    infiniband_gbps: 3200
    prices:
      eastus: {payg: 100, spot: 20}
    source: test
  - name: Standard_NC1_G80_v1
    series: NC G80
    kind: gpu
    released: 2022
    accelerator: G80
    gpus: 1
    vcpus: 24
    ram_gib: 220
    prices:
      eastus: {payg: 4, spot: 0.5}
    source: test
  - name: Standard_NC4_G80_v1
    series: NC G80
    kind: gpu
    released: 2022
    accelerator: G80
    gpus: 4
    vcpus: 96
    ram_gib: 880
    prices:
      westus: {payg: 16}
    source: test
  - name: Standard_NC1_G16_v1
    series: NC G16
    kind: gpu
    released: 2019
    accelerator: G16
    gpus: 1
    vcpus: 8
    ram_gib: 56
    prices:
      eastus: {payg: 0.5}
    source: test
  - name: Standard_E64s_v5
    series: Esv5
    kind: cpu
    cpu_class: memory
    released: 2021
    vcpus: 64
    ram_gib: 512
    prices:
      eastus: {payg: 3}
    source: test
  - name: Standard_F16s_v2
    series: Fsv2
    kind: cpu
    cpu_class: compute
    released: 2017
    vcpus: 16
    ram_gib: 32
    prices:
      eastus: {payg: 0.7}
    source: test
)";

Catalog TestCatalog() {
  Result<Catalog> c = Catalog::LoadString(kCatalog, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

Workload Training(double params, double tokens) {
  Workload w;
  w.stage = Stage::kTraining;
  w.kind = ModelKind::kGenerative;
  w.model.params = params;
  w.tokens = tokens;
  return w;
}

Workload Serving8B() {
  Workload w;
  w.stage = Stage::kInference;
  w.kind = ModelKind::kGenerative;
  w.model.params = 8e9;
  w.model.layers = 32;
  w.model.hidden = 4096;
  w.model.heads = 32;
  w.model.kv_heads = 8;
  w.batch = 8;
  w.prompt_tokens = 1000;
  w.output_tokens = 200;
  return w;
}

const Candidate* Find(const std::vector<Candidate>& list, std::string_view name) {
  for (const Candidate& c : list) {
    if (c.size->name == name) return &c;
  }
  return nullptr;
}

Advice MustRecommend(const Workload& w, const Catalog& cat) {
  Result<Advice> a = Recommend(w, cat, AdviseOptions{});
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(*a) : Advice{};
}

// ------------------------------------------------------------- parsing --

TEST(ParseCountTest, SuffixesAndErrors) {
  EXPECT_DOUBLE_EQ(*ParseCount("params", "8B"), 8e9);
  EXPECT_DOUBLE_EQ(*ParseCount("params", "1.5e9"), 1.5e9);
  EXPECT_DOUBLE_EQ(*ParseCount("params", "125M"), 125e6);
  EXPECT_DOUBLE_EQ(*ParseCount("tokens", "2T"), 2e12);
  EXPECT_DOUBLE_EQ(*ParseCount("tokens", " 7k "), 7e3);
  EXPECT_DOUBLE_EQ(*ParseCount("x", "70.6G"), 70.6e9);
  Result<double> bad = ParseCount("model.params", "8X");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("model.params: '8X' is not a count"));
  EXPECT_FALSE(ParseCount("p", "").ok());
  EXPECT_FALSE(ParseCount("p", "-1").ok());
  EXPECT_FALSE(ParseCount("p", "B").ok());
}

TEST(ParseWorkloadTest, ReadsEveryTrainingField) {
  Result<Config> cfg = Config::LoadString(R"(
name: ft
stage: training
kind: complex
model: {params: 8B, layers: 32, hidden: 4096, heads: 32, kv_heads: 8}
training:
  precision: fp16
  optimizer: sgd-momentum
  zero_stage: 2
  tensor_parallel: 2
  pipeline_parallel: 2
  sequence_parallel: true
  recompute: full
  flash_attention: false
  sequence: 4k
  micro_batch: 2
  tokens: 1.5T
constraints: {region: WestUS, deadline: 3d, budget_usd: 5000, max_nodes: 4, objective: time, interruptible: false}
performance: {mfu: 0.45, evictions_per_hour: 0.1, restart: 5m, ckpt_write_gbps: 4}
)",
                                          "w.yaml");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  Result<Workload> w = ParseWorkload(*cfg);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->name, "ft");
  EXPECT_EQ(w->kind, ModelKind::kComplex);
  EXPECT_DOUBLE_EQ(w->model.params, 8e9);
  EXPECT_EQ(w->model.kv_heads, 8);
  EXPECT_EQ(w->precision, Precision::kFp16);
  EXPECT_EQ(w->optimizer, Optimizer::kSgdMomentum);
  EXPECT_EQ(w->zero_stage, 2);
  EXPECT_EQ(w->tensor_parallel, 2);
  EXPECT_EQ(w->pipeline_parallel, 2);
  EXPECT_TRUE(w->sequence_parallel);
  EXPECT_EQ(w->recompute, Recompute::kFull);
  EXPECT_FALSE(w->flash_attention);
  EXPECT_EQ(w->sequence, 4000);
  EXPECT_EQ(w->micro_batch, 2);
  EXPECT_DOUBLE_EQ(w->tokens, 1.5e12);
  EXPECT_EQ(w->region, "westus");
  EXPECT_DOUBLE_EQ(w->deadline_h, 72);
  EXPECT_DOUBLE_EQ(w->budget_usd, 5000);
  EXPECT_EQ(w->max_nodes, 4);
  EXPECT_EQ(w->objective, Objective::kTime);
  ASSERT_TRUE(w->interruptible.has_value());
  EXPECT_FALSE(*w->interruptible);
  EXPECT_DOUBLE_EQ(w->mfu, 0.45);
  EXPECT_DOUBLE_EQ(w->evictions_per_hour, 0.1);
  EXPECT_DOUBLE_EQ(w->restart_s, 300);
  EXPECT_DOUBLE_EQ(w->ckpt_write_gbps, 4);
}

TEST(ParseWorkloadTest, ReadsInferenceAndAutoZero) {
  Result<Config> cfg = Config::LoadString(R"(
stage: inference
model: {params: 70B, layers: 80, hidden: 8192, heads: 64, kv_heads: 8}
inference: {precision: int4, kv_cache: fp8, context: 8k, batch: 4, prompt_tokens: 1000,
            output_tokens: 100, target_token_ms: 40, target_first_token_ms: 900, target_rps: 2,
            hours_per_month: 200}
)",
                                          "w.yaml");
  ASSERT_TRUE(cfg.ok());
  Result<Workload> w = ParseWorkload(*cfg);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->stage, Stage::kInference);
  EXPECT_EQ(w->precision, Precision::kInt4);
  EXPECT_EQ(w->kv_cache, Precision::kFp8);
  EXPECT_EQ(w->context, 8000);
  EXPECT_DOUBLE_EQ(w->target_first_token_ms, 900);
  EXPECT_DOUBLE_EQ(w->hours_per_month, 200);

  Result<Config> t = Config::LoadString(
      "stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B, zero_stage: auto}\n", "t.yaml");
  ASSERT_TRUE(t.ok());
  Result<Workload> tw = ParseWorkload(*t);
  ASSERT_TRUE(tw.ok()) << tw.status().ToString();
  EXPECT_EQ(tw->zero_stage, -1);
}

TEST(ParseWorkloadTest, RefusesBadFilesWithLocation) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B, optimiser: adam}\n",
       "did you mean 'training.optimizer'?"},
      {"model: {params: 1B}\n", "missing 'stage'"},
      {"stage: training\ntraining: {tokens: 1B}\n", "missing 'model.params'"},
      {"stage: training\nmodel: {params: 1B}\n", "training.tokens"},
      {"stage: traning\nmodel: {params: 1B}\n", "stage 'traning': use training or inference"},
      {"stage: training\nmodel: {params: lots}\ntraining: {tokens: 1B}\n",
       "w.yaml:2:17: key 'model.params': 'lots' is not a count"},
      {"stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B, precision: int4}\n",
       "not modelled for training"},
      {"stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B}\ninference: {batch: 2}\n",
       "a training workload has no 'inference' section"},
      {"stage: inference\nmodel: {params: 8B}\ninference: {batch: 2}\n",
       "needs layers, heads"},
      {"stage: inference\nmodel: {params: 8B, layers: 2, hidden: 64, heads: 2}\n",
       "give prompt_tokens and output_tokens"},
      {"stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B, zero_stage: 5}\n",
       "zero_stage: 5"},
      {"stage: training\nmodel: {params: 1B}\ntraining: {tokens: 1B}\nperformance: {mfu: 40}\n",
       "performance.mfu: 40"},
      {"stage: training\nkind: huge\nmodel: {params: 1B}\ntraining: {tokens: 1B}\n",
       "kind 'huge'"},
  };
  for (const Case& c : cases) {
    Result<Config> cfg = Config::LoadString(c.yaml, "w.yaml");
    ASSERT_TRUE(cfg.ok()) << c.yaml;
    Result<Workload> w = ParseWorkload(*cfg);
    ASSERT_FALSE(w.ok()) << c.yaml;
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(w.status().message(), HasSubstr(c.message)) << c.yaml;
  }
}

// ------------------------------------------------------------ training --

TEST(RecommendTrainingTest, CheapestFittingSizeFirstWithHandComputedTimeAndCost) {
  Catalog cat = TestCatalog();
  // 1.5B params, mixed Adam: 24e9 bytes of state (22.4 GiB) fit one G80 (72 GiB usable).
  // 6 * 1.5e9 * 1e10 = 9e19 FLOPs; one G80 at 1000 TFLOPS x 0.5 = 5e14 FLOP/s -> 50 h.
  Advice a = MustRecommend(Training(1.5e9, 1e10), cat);
  ASSERT_GE(a.ranked.size(), 2u);
  const Candidate& first = a.ranked[0];
  EXPECT_EQ(first.size->name, "Standard_NC1_G80_v1");
  EXPECT_EQ(first.nodes, 1);
  EXPECT_EQ(first.zero_stage, 0);
  ASSERT_TRUE(first.hours.has_value());
  EXPECT_NEAR(*first.hours, 50.0, 1e-9);
  EXPECT_NEAR(first.memory_needed, 24e9, 1);
  EXPECT_NEAR(first.memory_usable, 80 * kGiB * 0.9, 1);
  const CostLine* payg = first.Cost(PricingModel::kPayg);
  ASSERT_NE(payg, nullptr);
  ASSERT_TRUE(payg->run_usd.has_value());
  EXPECT_NEAR(*payg->run_usd, 200.0, 1e-6);  // 50 h x $4
  EXPECT_NEAR(*payg->month_usd, 4 * 730.0, 1e-6);
  // ND8: 8 GPUs -> 6.25 h x $100 = $625: second.
  const Candidate& second = a.ranked[1];
  EXPECT_EQ(second.size->name, "Standard_ND8_G80_v1");
  EXPECT_NEAR(*second.hours, 6.25, 1e-9);
  EXPECT_NEAR(*second.Cost(PricingModel::kPayg)->run_usd, 625.0, 1e-6);
  // Reservation rates derived from the default discounts, marked as such.
  const CostLine* r1 = second.Cost(PricingModel::kReserved1y);
  ASSERT_TRUE(r1 && r1->rate_per_hour);
  EXPECT_NEAR(*r1->rate_per_hour, 100 * (1 - Discounts{}.reserved_1y), 1e-9);
  EXPECT_FALSE(r1->rate_from_catalog);
  // CPU sizes are ruled out for a generative model, with the rule as reason.
  const Candidate* cpu = Find(a.rejected, "Standard_E64s_v5");
  ASSERT_NE(cpu, nullptr);
  EXPECT_THAT(cpu->reasons_out.front(), HasSubstr("needs GPU sizes"));
  // No bf16 peak on G16: it fits but its time is unknown, so it ranks after the priced runs.
  const Candidate* g16 = Find(a.rejected, "Standard_NC1_G16_v1");
  EXPECT_NE(g16, nullptr) << "24e9 bytes do not fit 16 GiB";
}

TEST(RecommendTrainingTest, DeadlineAndObjectiveTimeAddNodes) {
  Catalog cat = TestCatalog();
  Workload w = Training(1.5e9, 1e10);
  w.deadline_h = 10;
  Advice a = MustRecommend(w, cat);
  ASSERT_FALSE(a.ranked.empty());
  EXPECT_EQ(a.ranked[0].size->name, "Standard_ND8_G80_v1");
  const Candidate* nc = Find(a.rejected, "Standard_NC1_G80_v1");
  ASSERT_NE(nc, nullptr);
  EXPECT_THAT(nc->reasons_out.front(), HasSubstr("misses the 10.0 h deadline"));

  w.deadline_h = 2;  // needs 4 VMs of 8 GPUs: 50 h / 32 = 1.5625 h
  a = MustRecommend(w, cat);
  ASSERT_FALSE(a.ranked.empty());
  EXPECT_EQ(a.ranked[0].nodes, 4);
  EXPECT_NEAR(*a.ranked[0].hours, 50.0 / 32, 1e-9);

  w.deadline_h = 0;
  w.objective = Objective::kTime;
  w.max_nodes = 3;
  a = MustRecommend(w, cat);
  ASSERT_FALSE(a.ranked.empty());
  EXPECT_EQ(a.ranked[0].size->name, "Standard_ND8_G80_v1");
  EXPECT_EQ(a.ranked[0].nodes, 3);
}

TEST(RecommendTrainingTest, LargeModelNeedsZero3AcrossInfiniBandNodes) {
  Catalog cat = TestCatalog();
  // 70B x 16 bytes = 1.12e12 bytes. ZeRO-3 over 8 GPUs: 140e9 per GPU > 72 GiB;
  // over 16 GPUs (2 VMs): 70e9 = 65.2 GiB, fits.
  Advice a = MustRecommend(Training(70e9, 1e9), cat);
  ASSERT_EQ(a.ranked.size(), 1u);
  const Candidate& nd = a.ranked[0];
  EXPECT_EQ(nd.size->name, "Standard_ND8_G80_v1");
  EXPECT_EQ(nd.nodes, 2);
  EXPECT_EQ(nd.zero_stage, 3);
  EXPECT_NEAR(nd.memory_needed, 70e9, 1);
  const Candidate* nc = Find(a.rejected, "Standard_NC1_G80_v1");
  ASSERT_NE(nc, nullptr);
  EXPECT_THAT(nc->reasons_out.front(), HasSubstr("does not fit"));
  EXPECT_THAT(nc->reasons_out.front(), HasSubstr("no InfiniBand"));
}

TEST(RecommendTrainingTest, BudgetRejectsWithTheCost) {
  Catalog cat = TestCatalog();
  Workload w = Training(1.5e9, 1e10);
  w.budget_usd = 150;  // the cheapest run costs $200
  Advice a = MustRecommend(w, cat);
  const Candidate* nc = Find(a.rejected, "Standard_NC1_G80_v1");
  ASSERT_NE(nc, nullptr);
  EXPECT_THAT(nc->reasons_out.front(), HasSubstr("over the $150 budget: $200"));
}

TEST(RecommendTrainingTest, SpotAdviceFollowsDeadlineAndInterruptibility) {
  Catalog cat = TestCatalog();
  Workload w = Training(1.5e9, 1e10);
  Advice a = MustRecommend(w, cat);
  const Candidate& nc = a.ranked[0];
  ASSERT_TRUE(nc.spot.has_value());
  EXPECT_TRUE(nc.spot_advisable) << nc.spot_reason;
  EXPECT_THAT(nc.spot_reason, HasSubstr("cheaper than PAYG"));
  // Spot run = $0.5 x 50 h x (1 + overhead).
  const CostLine* spot = nc.Cost(PricingModel::kSpot);
  ASSERT_TRUE(spot && spot->run_usd);
  EXPECT_NEAR(*spot->run_usd, 0.5 * 50 * (1 + nc.spot->overhead_fraction), 1e-9);
  EXPECT_GT(nc.spot->overhead_fraction, 0);

  w.interruptible = false;
  a = MustRecommend(w, cat);
  EXPECT_FALSE(a.ranked[0].spot_advisable);
  EXPECT_THAT(a.ranked[0].spot_reason, HasSubstr("not interruptible"));

  w.interruptible = std::nullopt;
  w.deadline_h = 50.0001;  // PAYG makes it, eviction overhead does not
  a = MustRecommend(w, cat);
  EXPECT_EQ(a.ranked[0].size->name, "Standard_NC1_G80_v1");
  EXPECT_FALSE(a.ranked[0].spot_advisable);
  EXPECT_THAT(a.ranked[0].spot_reason, HasSubstr("past the"));
}

TEST(RecommendTrainingTest, SmallModelsGoToMemoryOptimisedCpu) {
  Catalog cat = TestCatalog();
  Workload w = Training(50e6, 1e9);
  w.kind = ModelKind::kSmall;
  w.precision = Precision::kFp32;
  Advice a = MustRecommend(w, cat);
  ASSERT_GE(a.ranked.size(), 3u);
  EXPECT_EQ(a.ranked[0].size->name, "Standard_E64s_v5");
  EXPECT_EQ(a.ranked[0].tier, 0);
  EXPECT_EQ(a.ranked[1].size->name, "Standard_F16s_v2");
  EXPECT_EQ(a.ranked[1].tier, 1);
  EXPECT_EQ(a.ranked.back().tier, 2);
  EXPECT_EQ(a.ranked.back().size->kind, SizeKind::kGpu);
}

TEST(RecommendTrainingTest, UnknownPriceRanksLastAndSaysSo) {
  Catalog cat = TestCatalog();
  Workload w = Training(1.5e9, 1e10);
  Advice a = MustRecommend(w, cat);
  const Candidate* nc4 = Find(a.ranked, "Standard_NC4_G80_v1");
  ASSERT_NE(nc4, nullptr);  // priced only in westus
  EXPECT_EQ(&a.ranked.back(), nc4);
  EXPECT_FALSE(nc4->rank_value.has_value());
  EXPECT_THAT(::testing::PrintToString(nc4->notes), HasSubstr("PAYG price unknown in eastus"));
  w.region = "westus";
  a = MustRecommend(w, cat);
  EXPECT_EQ(a.ranked[0].size->name, "Standard_NC4_G80_v1");  // 12.5 h x $16 = $200
}

TEST(RecommendTrainingTest, MoreParametersNeverFitMoreSizes) {
  Catalog cat = TestCatalog();
  size_t previous = SIZE_MAX;
  for (double params = 1e8; params <= 4e11; params *= 1.7) {
    Advice a = MustRecommend(Training(params, 1e9), cat);
    EXPECT_LE(a.ranked.size(), previous) << params;
    previous = a.ranked.size();
  }
  // 1T parameters x 16 bytes need more than 16 VMs x 8 GPUs x 72 GiB.
  EXPECT_TRUE(MustRecommend(Training(1e12, 1e9), cat).ranked.empty());
}

TEST(RecommendTrainingTest, OnlySizesAndErrors) {
  Catalog cat = TestCatalog();
  AdviseOptions o;
  o.only_sizes = {"nc1_g80_v1"};
  Result<Advice> a = Recommend(Training(1.5e9, 1e10), cat, o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->ranked.size() + a->rejected.size(), 1u);
  o.only_sizes = {"Standard_XX"};
  EXPECT_EQ(Recommend(Training(1.5e9, 1e10), cat, o).status().code(), StatusCode::kNotFound);
  Workload bad = Training(0, 1e9);
  EXPECT_EQ(Recommend(bad, cat, AdviseOptions{}).status().code(), StatusCode::kInvalidArgument);
  AdviseOptions bad_discount;
  bad_discount.discounts.reserved_1y = 1.5;
  EXPECT_FALSE(Recommend(Training(1e9, 1e9), cat, bad_discount).ok());
}

// ----------------------------------------------------------- inference --

TEST(RecommendInferenceTest, AvoidsInfiniBandAndComputesRoofline) {
  Catalog cat = TestCatalog();
  Workload w = Serving8B();
  Advice a = MustRecommend(w, cat);
  ASSERT_GE(a.ranked.size(), 2u);
  const Candidate& nc = a.ranked[0];
  EXPECT_EQ(nc.size->name, "Standard_NC1_G80_v1");
  EXPECT_EQ(nc.tensor_parallel, 1);
  ASSERT_TRUE(nc.perf.has_value());
  // Decode step: 16e9 weight bytes + KV (131072 B/token x 1200 tokens x 8) read at
  // 3e12 x 0.6 B/s.
  const double kv = 131072.0 * 1200 * 8;
  EXPECT_NEAR(nc.perf->per_token_s, (16e9 + kv) / (3e12 * 0.6), 1e-12);
  // Prefill: 2 x 8e9 x 1000 tokens x 8 sequences at 1000 TFLOPS x 0.5.
  EXPECT_NEAR(nc.perf->prefill_s, 2 * 8e9 * 1000 * 8 / 5e14, 1e-12);
  // ND8 has InfiniBand: allowed, ranked after the non-InfiniBand sizes.
  const Candidate* nd = Find(a.ranked, "Standard_ND8_G80_v1");
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->tier, 1);
  EXPECT_THAT(::testing::PrintToString(nd->notes), HasSubstr("avoids InfiniBand"));
  EXPECT_EQ(nd->replicas_per_node, 8);
  // Online serving: spot not advised by default.
  EXPECT_FALSE(nc.spot_advisable);
  EXPECT_THAT(nc.spot_reason, HasSubstr("drops in-flight requests"));
  // G16: 16e9 bytes of weights do not fit 14.4 GiB.
  const Candidate* g16 = Find(a.rejected, "Standard_NC1_G16_v1");
  ASSERT_NE(g16, nullptr);
  EXPECT_THAT(g16->reasons_out.front(), HasSubstr("does not fit"));
}

TEST(RecommendInferenceTest, LatencyTargetPicksTensorParallelAndRpsSizesTheFleet) {
  Catalog cat = TestCatalog();
  Workload w = Serving8B();
  Advice base = MustRecommend(w, cat);
  const double tp1_ms = base.ranked[0].perf->per_token_s * 1000;
  w.target_token_ms = tp1_ms * 0.6;  // needs TP 2: half the bytes per GPU
  Advice a = MustRecommend(w, cat);
  const Candidate* nd = Find(a.ranked, "Standard_ND8_G80_v1");
  ASSERT_NE(nd, nullptr);
  EXPECT_EQ(nd->tensor_parallel, 2);
  EXPECT_EQ(nd->replicas_per_node, 4);
  const Candidate* nc1 = Find(a.rejected, "Standard_NC1_G80_v1");
  ASSERT_NE(nc1, nullptr);
  EXPECT_THAT(nc1->reasons_out.front(), HasSubstr("ms per token target"));

  w.target_token_ms = 0;
  const double per_replica = base.ranked[0].perf->requests_per_s;
  w.target_rps = per_replica * 2.5;  // 3 replicas
  a = MustRecommend(w, cat);
  EXPECT_EQ(Find(a.ranked, "Standard_NC1_G80_v1")->nodes, 3);
  EXPECT_EQ(Find(a.ranked, "Standard_ND8_G80_v1")->nodes, 1);
  EXPECT_NEAR(*Find(a.ranked, "Standard_NC1_G80_v1")->Cost(PricingModel::kPayg)->month_usd,
              3 * 4 * 730.0, 1e-6);

  w.target_rps = 0;
  w.target_token_ms = 0.001;  // impossible
  a = MustRecommend(w, cat);
  EXPECT_TRUE(a.ranked.empty());
}

TEST(RecommendInferenceTest, InterruptibleServingMayUseSpot) {
  Catalog cat = TestCatalog();
  Workload w = Serving8B();
  w.interruptible = true;
  Advice a = MustRecommend(w, cat);
  EXPECT_TRUE(a.ranked[0].spot_advisable);
  EXPECT_THAT(a.ranked[0].spot_reason, HasSubstr("88% below PAYG"));  // 0.5 vs 4
}

TEST(RecommendInferenceTest, SmallModelServesOnComputeCpu) {
  Catalog cat = TestCatalog();
  Workload w;
  w.stage = Stage::kInference;
  w.kind = ModelKind::kSmall;
  w.model.params = 20e6;
  w.precision = Precision::kFp32;
  Advice a = MustRecommend(w, cat);
  ASSERT_FALSE(a.ranked.empty());
  EXPECT_EQ(a.ranked[0].size->name, "Standard_F16s_v2");
  EXPECT_EQ(a.ranked[0].tier, 0);
}

TEST(MfuFromReportTest, MatchesTheMeasuredGpuOnly) {
  EXPECT_TRUE(AcceleratorMatchesDevice("H100-SXM-80GB", "NVIDIA H100 80GB HBM3"));
  EXPECT_FALSE(AcceleratorMatchesDevice("H100-NVL-94GB", "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(AcceleratorMatchesDevice("H100-NVL-94GB", "NVIDIA H100 NVL"));
  EXPECT_FALSE(AcceleratorMatchesDevice("H100-SXM-80GB", "NVIDIA H100 NVL"));
  EXPECT_TRUE(AcceleratorMatchesDevice("A100-40GB", "NVIDIA A100-SXM4-40GB"));
  EXPECT_FALSE(AcceleratorMatchesDevice("A100-80GB", "NVIDIA A100-SXM4-40GB"));
  EXPECT_FALSE(AcceleratorMatchesDevice("A10-24GB", "NVIDIA A100-SXM4-80GB"));
  EXPECT_TRUE(AcceleratorMatchesDevice("A10-24GB", "NVIDIA A10"));
  EXPECT_TRUE(AcceleratorMatchesDevice("T4-16GB", "Tesla T4"));
  EXPECT_TRUE(AcceleratorMatchesDevice("MI300X-192GB", "AMD Instinct MI300X"));

  Catalog cat = TestCatalog();
  Workload w = Training(1.5e9, 1e10);
  Json doctor = {{"report", "gantry.doctor"},
                 {"gemm",
                  {{"device", "cuda"}, {"device_name", "Fake G80"}, {"type", "bf16"},
                   {"mfu", 0.8}}}};
  ASSERT_TRUE(TakeMfuFromReport(doctor, "d.json", &w).ok());
  EXPECT_DOUBLE_EQ(w.mfu, 0.8);
  Advice a = MustRecommend(w, cat);
  // G80 matches "G80": 9e19 FLOPs / (1000 TFLOPS x 0.8) = 31.25 h instead of 50 h.
  const Candidate* nc = Find(a.ranked, "Standard_NC1_G80_v1");
  ASSERT_NE(nc, nullptr);
  EXPECT_NEAR(*nc->hours, 31.25, 1e-9);
  EXPECT_THAT(::testing::PrintToString(nc->notes), HasSubstr("MFU 0.80 from d.json"));

  Json cpu = {{"device", "cpu"}, {"mfu", 0.7}};
  EXPECT_THAT(TakeMfuFromReport(cpu, "c.json", &w).message(), HasSubstr("ran on the CPU"));
  Json no_peak = {{"device", "cuda"}, {"mfu", nullptr}};
  EXPECT_THAT(TakeMfuFromReport(no_peak, "n.json", &w).message(), HasSubstr("no MFU"));
  EXPECT_FALSE(TakeMfuFromReport(Json::array(), "x.json", &w).ok());
  Json wrong = {{"device", "cuda"}, {"mfu", 1.7}};
  EXPECT_FALSE(TakeMfuFromReport(wrong, "w.json", &w).ok());
}

// -------------------------------------------------------------- commit --

TEST(AdviseCommitTest, BreakEvenAndCheapestAtUtilisation) {
  Catalog cat = TestCatalog();
  Discounts d;
  Result<CommitAdvice> half = AdviseCommit(cat, "Standard_ND8_G80_v1", "eastus", 2, 0.5, d);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  ASSERT_EQ(half->lines.size(), 6u);
  EXPECT_EQ(half->lines[0].model, PricingModel::kPayg);
  EXPECT_NEAR(*half->lines[0].month_usd, 2 * 100 * 730 * 0.5, 1e-6);
  EXPECT_NEAR(*half->lines[1].rate_per_hour, 2 * 100 * (1 - d.reserved_1y), 1e-9);
  EXPECT_NEAR(*half->lines[1].month_usd, 2 * 100 * (1 - d.reserved_1y) * 730, 1e-6);
  EXPECT_NEAR(*half->lines[1].break_even, 1 - d.reserved_1y, 1e-12);
  EXPECT_FALSE(half->lines[0].break_even.has_value());
  ASSERT_TRUE(half->cheapest.has_value());
  EXPECT_EQ(*half->cheapest, PricingModel::kReserved3y);  // 45% of PAYG < 50% use

  Result<CommitAdvice> low = AdviseCommit(cat, "nd8_g80_v1", "EastUS", 1, 0.3, d);
  ASSERT_TRUE(low.ok());
  EXPECT_EQ(*low->cheapest, PricingModel::kPayg);
  EXPECT_THAT(low->RenderText(), HasSubstr("PAYG is cheaper at this use"));
  EXPECT_EQ(low->ToJson()["cheapest"], "payg");

  EXPECT_EQ(AdviseCommit(cat, "ND9", "eastus", 1, 1, d).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(AdviseCommit(cat, "Standard_ND8_G80_v1", "eastus", 1, 0, d).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AdviseCommit(cat, "Standard_ND8_G80_v1", "eastus", 0, 1, d).status().code(),
            StatusCode::kInvalidArgument);
  Result<CommitAdvice> unpriced = AdviseCommit(cat, "Standard_NC4_G80_v1", "eastus", 1, 1, d);
  EXPECT_EQ(unpriced.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(unpriced.status().message(), HasSubstr("priced in: westus"));
}

// ------------------------------------------------------ default catalog --

TEST(RecommendDefaultCatalogTest, SeventyBillionDoesNotFitOneA100ButServesOnEight) {
  Result<Catalog> cat = Catalog::Default();
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  Workload w = Serving8B();
  w.model.params = 70.6e9;
  w.model.layers = 80;
  w.model.hidden = 8192;
  w.model.heads = 64;
  Advice a = MustRecommend(w, *cat);
  const Candidate* nc24 = Find(a.rejected, "Standard_NC24ads_A100_v4");
  ASSERT_NE(nc24, nullptr);
  EXPECT_THAT(nc24->reasons_out.front(), HasSubstr("does not fit"));
  ASSERT_FALSE(a.ranked.empty());
  for (const Candidate& c : a.ranked) {
    EXPECT_GE(c.accelerator->memory_gib * c.tensor_parallel, 141) << c.size->name;
  }
}

TEST(RenderTest, TextMarkdownAndJsonCarryTheRanking) {
  Catalog cat = TestCatalog();
  Advice a = MustRecommend(Training(1.5e9, 1e10), cat);
  std::string text = RenderAdviceText(a, 2);
  EXPECT_THAT(text, HasSubstr("Standard_NC1_G80_v1"));
  EXPECT_THAT(text, HasSubstr("$200"));
  EXPECT_THAT(text, HasSubstr("2.1 d"));  // 50 h
  EXPECT_THAT(text, HasSubstr("more feasible sizes"));
  EXPECT_THAT(text, HasSubstr("ruled out:"));
  std::string md = RenderAdviceMarkdown(a, 2);
  EXPECT_THAT(md, HasSubstr("| 1 | Standard_NC1_G80_v1 |"));
  EXPECT_THAT(md, HasSubstr("## Rules applied"));
  Json j = a.ToJson();
  EXPECT_EQ(j["ranked"][0]["size"], "Standard_NC1_G80_v1");
  EXPECT_DOUBLE_EQ(j["ranked"][0]["hours"].get<double>(), 50.0);
  EXPECT_EQ(j["workload"]["stage"], "training");
}

}  // namespace
}  // namespace gantry::advise
