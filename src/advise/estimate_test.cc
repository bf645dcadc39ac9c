#include "gantry/advise/estimate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "gantry/core/checkpoint_interval.h"

namespace gantry::advise {
namespace {

using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Relative tolerance for values computed by hand (or by a calculator) to ~16 digits.
void ExpectRel(double actual, double expected, double rel = 1e-12) {
  EXPECT_NEAR(actual, expected, std::abs(expected) * rel) << "expected " << expected;
}

// The status is InvalidArgument and its message contains every fragment.
void ExpectInvalid(const Status& s, std::initializer_list<std::string> fragments) {
  ASSERT_FALSE(s.ok()) << "expected InvalidArgument containing '" << *fragments.begin() << "'";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  for (const std::string& f : fragments) EXPECT_THAT(s.message(), HasSubstr(f));
}

// GPT-3 175B's layer as in Korthikanti et al.: a=96, h=12288, s=2048, L=96.
TrainingSetup Gpt3Layer() {
  TrainingSetup s;
  s.model.params = 175e9;
  s.model.layers = 1;
  s.model.hidden = 12288;
  s.model.heads = 96;
  s.sequence = 2048;
  s.micro_batch = 1;
  s.flash_attention = false;
  return s;
}

ModelShape Llama31_8B() {
  ModelShape m;
  m.params = 8.03e9;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  return m;
}

// ---------------------------------------------------------------- parsing --

TEST(ParseTest, PrecisionNamesAndAliases) {
  EXPECT_EQ(*ParsePrecision("fp32"), Precision::kFp32);
  EXPECT_EQ(*ParsePrecision("Float32"), Precision::kFp32);
  EXPECT_EQ(*ParsePrecision("  BF16 "), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("bfloat16"), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("fp16"), Precision::kFp16);
  EXPECT_EQ(*ParsePrecision("float16"), Precision::kFp16);
  EXPECT_EQ(*ParsePrecision("HALF"), Precision::kFp16);
  EXPECT_EQ(*ParsePrecision("fp8"), Precision::kFp8);
  EXPECT_EQ(*ParsePrecision("int8"), Precision::kInt8);
  EXPECT_EQ(*ParsePrecision("\tint4\n"), Precision::kInt4);
  for (Precision p : {Precision::kFp32, Precision::kBf16, Precision::kFp16, Precision::kFp8,
                      Precision::kInt8, Precision::kInt4}) {
    EXPECT_EQ(*ParsePrecision(PrecisionName(p)), p) << PrecisionName(p);
  }
  ExpectInvalid(ParsePrecision("fp12").status(),
                {"precision 'fp12': use fp32, bf16, fp16, fp8, int8 or int4"});
  ExpectInvalid(ParsePrecision("").status(), {"precision ''"});
}

TEST(ParseTest, BytesPerElement) {
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kFp32), 4);
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kBf16), 2);
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kFp16), 2);
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kFp8), 1);
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kInt8), 1);
  EXPECT_DOUBLE_EQ(BytesPerElement(Precision::kInt4), 0.5);
}

TEST(ParseTest, OptimizerRecomputeAndPricing) {
  EXPECT_EQ(*ParseOptimizer("Adam"), Optimizer::kAdam);
  EXPECT_EQ(*ParseOptimizer("adamw "), Optimizer::kAdam);
  EXPECT_EQ(*ParseOptimizer("SGD-Momentum"), Optimizer::kSgdMomentum);
  EXPECT_EQ(*ParseOptimizer("sgd"), Optimizer::kSgd);
  ExpectInvalid(ParseOptimizer("lion").status(),
                {"optimizer 'lion'", "adam, adamw, sgd-momentum or sgd"});
  for (Optimizer o : {Optimizer::kAdam, Optimizer::kSgdMomentum, Optimizer::kSgd}) {
    EXPECT_EQ(*ParseOptimizer(OptimizerName(o)), o);
  }

  EXPECT_EQ(*ParseRecompute(" None"), Recompute::kNone);
  EXPECT_EQ(*ParseRecompute("SELECTIVE"), Recompute::kSelective);
  EXPECT_EQ(*ParseRecompute("full"), Recompute::kFull);
  ExpectInvalid(ParseRecompute("some").status(), {"recompute 'some'", "none, selective or full"});
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    EXPECT_EQ(*ParseRecompute(RecomputeName(r)), r);
  }

  for (PricingModel m : {PricingModel::kPayg, PricingModel::kReserved1y, PricingModel::kReserved3y,
                         PricingModel::kSavings1y, PricingModel::kSavings3y, PricingModel::kSpot}) {
    EXPECT_EQ(*ParsePricingModel(PricingModelName(m)), m) << PricingModelName(m);
  }
  EXPECT_EQ(*ParsePricingModel(" Reserved-3Y "), PricingModel::kReserved3y);
  EXPECT_EQ(PricingModelName(PricingModel::kSavings1y), "savings-1y");
  ExpectInvalid(
      ParsePricingModel("reserved-2y").status(),
      {"'reserved-2y'", "payg, reserved-1y, reserved-3y, savings-1y, savings-3y or spot"});
}

// ---------------------------------------------------------- model state --

TEST(TrainingMemoryTest, MixedPrecisionAdamIs16BytesPerParam) {
  TrainingSetup s;
  s.model.params = 1.5e9;  // GPT-2 1.5B, ZeRO paper section 3.1
  auto m = EstimateTrainingMemory(s);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->weights, 3e9);
  EXPECT_DOUBLE_EQ(m->gradients, 3e9);
  EXPECT_DOUBLE_EQ(m->optimizer, 18e9);
  EXPECT_DOUBLE_EQ(m->activations, 0);  // no shape given
  EXPECT_DOUBLE_EQ(m->total, 24e9);

  s.precision = Precision::kFp16;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 24e9);
}

TEST(TrainingMemoryTest, OtherOptimizersAndFp32) {
  TrainingSetup s;
  s.model.params = 1e9;
  s.optimizer = Optimizer::kSgdMomentum;
  auto m = EstimateTrainingMemory(s);
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->optimizer, 8e9);  // fp32 master + momentum
  EXPECT_DOUBLE_EQ(m->total, 12e9);
  s.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->optimizer, 4e9);  // master only
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 8e9);

  s.precision = Precision::kFp32;
  s.optimizer = Optimizer::kAdam;
  m = EstimateTrainingMemory(s);
  EXPECT_DOUBLE_EQ(m->weights, 4e9);
  EXPECT_DOUBLE_EQ(m->gradients, 4e9);
  EXPECT_DOUBLE_EQ(m->optimizer, 8e9);
  EXPECT_DOUBLE_EQ(m->total, 16e9);
  s.optimizer = Optimizer::kSgdMomentum;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 12e9);
  s.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 8e9);
}

TEST(TrainingMemoryTest, ZeroStagesMatchTheZeroPaper) {
  const double psi = 7.5e9;
  const double nd = 64;
  TrainingSetup s;
  s.model.params = psi;
  s.data_parallel = 64;
  s.zero_stage = 0;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 16 * psi);
  s.zero_stage = 1;
  auto m = EstimateTrainingMemory(s);
  ExpectRel(m->total, 4 * psi + 12 * psi / nd);
  ExpectRel(m->optimizer, 12 * psi / nd);
  s.zero_stage = 2;
  m = EstimateTrainingMemory(s);
  ExpectRel(m->total, 2 * psi + 14 * psi / nd);
  ExpectRel(m->weights, 2 * psi);
  s.zero_stage = 3;
  ExpectRel(EstimateTrainingMemory(s)->total, 16 * psi / nd);
  // The ZeRO paper's 7.5B example: 120 GB, 31.4 GB, 16.6 GB, 1.88 GB at N_d = 64.
  EXPECT_NEAR(EstimateTrainingMemory(s)->total / 1e9, 1.875, 1e-12);
}

TEST(TrainingMemoryTest, ModelParallelDividesState) {
  TrainingSetup s;
  s.model.params = 64e9;
  s.tensor_parallel = 8;
  s.pipeline_parallel = 4;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 16 * 64e9 / 32);
  s.data_parallel = 2;
  s.zero_stage = 3;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->total, 16 * 64e9 / 64);
}

// ---------------------------------------------------------- activations --
// GPT-3 layer: sbh = 2048 * 12288 = 25165824 and 5as/h = 5*96*2048/12288 = 80.

TEST(ActivationTest, NoParallelism) {
  TrainingSetup s = Gpt3Layer();
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 2868903936.0);  // sbh (34 + 80)
  s.flash_attention = true;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 855638016.0);  // sbh * 34
  s.flash_attention = false;
  s.model.layers = 96;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 275414777856.0);
  s.micro_batch = 3;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 3 * 275414777856.0);
}

TEST(ActivationTest, TensorParallelWithoutSequenceParallel) {
  TrainingSetup s = Gpt3Layer();
  s.tensor_parallel = 8;
  // 10 + 24/8 + 80/8 = 23
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 578813952.0);
  s.flash_attention = true;  // 10 + 3 = 13
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 327155712.0);
}

TEST(ActivationTest, TensorAndSequenceParallel) {
  TrainingSetup s = Gpt3Layer();
  s.tensor_parallel = 8;
  s.sequence_parallel = true;
  // (34 + 80) / 8 = 14.25
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 358612992.0);
  s.flash_attention = true;  // 34 / 8
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 106954752.0);
  // SP at t = 1 changes nothing.
  s.tensor_parallel = 1;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 855638016.0);
}

TEST(ActivationTest, SelectiveRecompute) {
  TrainingSetup s = Gpt3Layer();
  s.recompute = Recompute::kSelective;
  s.tensor_parallel = 8;
  s.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 106954752.0);  // 34/8
  s.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 327155712.0);  // 10 + 24/8
  s.flash_attention = true;  // already without the score term
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 327155712.0);
}

TEST(ActivationTest, FullRecompute) {
  TrainingSetup s = Gpt3Layer();
  s.recompute = Recompute::kFull;
  s.model.layers = 96;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 4831838208.0);  // 2 sbh L
  s.tensor_parallel = 8;
  s.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 4831838208.0);
}

TEST(ActivationTest, Fp32DoublesAndPipelineKeepsAllLayers) {
  TrainingSetup s = Gpt3Layer();
  s.model.layers = 96;
  s.precision = Precision::kFp32;
  EXPECT_DOUBLE_EQ(EstimateTrainingMemory(s)->activations, 2 * 275414777856.0);
  s.precision = Precision::kBf16;
  // 1F1B: the first stage holds p micro-batches of L/p layers = L layers.
  s.pipeline_parallel = 8;
  auto m = EstimateTrainingMemory(s);
  EXPECT_DOUBLE_EQ(m->activations, 275414777856.0);
  EXPECT_DOUBLE_EQ(m->weights, 2 * 175e9 / 8);
  EXPECT_DOUBLE_EQ(m->total, 16 * 175e9 / 8 + 275414777856.0);
}

TEST(ActivationTest, ZeroWhenShapeIncomplete) {
  for (int missing = 0; missing < 4; ++missing) {
    TrainingSetup s = Gpt3Layer();
    if (missing == 0) s.model.layers = 0;
    if (missing == 1) s.model.hidden = 0;
    if (missing == 2) s.model.heads = 0;
    if (missing == 3) s.sequence = 0;
    auto m = EstimateTrainingMemory(s);
    ASSERT_TRUE(m.ok()) << missing << ": " << m.status().ToString();
    EXPECT_DOUBLE_EQ(m->activations, 0) << missing;
    EXPECT_DOUBLE_EQ(m->total, 16 * 175e9) << missing;
  }
}

// ---------------------------------------------------------------- FLOPs --

TEST(FlopsTest, SixNDAndAttentionTerm) {
  ModelShape m;
  m.params = 8e9;
  EXPECT_DOUBLE_EQ(*TrainingFlops(m, 1e12, 0), 4.8e22);
  EXPECT_DOUBLE_EQ(*TrainingFlops(m, 1e12, 8192), 4.8e22);  // no layers/hidden: no term
  m.layers = 32;
  m.hidden = 4096;
  EXPECT_DOUBLE_EQ(*TrainingFlops(m, 1e12, 0), 4.8e22);  // no sequence: no term
  // 12 * 32 * 4096 * 8192 * 1e12 = 1.2884901888e22
  ExpectRel(*TrainingFlops(m, 1e12, 8192), 4.8e22 + 1.2884901888e22);
}

TEST(FlopsTest, ComputeSeconds) {
  // 4.8e22 / (64 * 989.4e12 * 0.4)
  ExpectRel(*ComputeSeconds(4.8e22, 64, 989.4, 0.4), 1895087.9320800486);
  EXPECT_DOUBLE_EQ(*ComputeSeconds(0, 8, 312, 1), 0);
  EXPECT_DOUBLE_EQ(*ComputeSeconds(312e12, 1, 312, 1), 1);
}

// ------------------------------------------------------------- inference --

TEST(InferenceTest, KvCachePerTokenKnownModels) {
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(Llama31_8B(), Precision::kBf16), 131072);
  ModelShape llama70b;
  llama70b.params = 70.6e9;
  llama70b.layers = 80;
  llama70b.hidden = 8192;
  llama70b.heads = 64;
  llama70b.kv_heads = 8;
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(llama70b, Precision::kBf16), 327680);
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(llama70b, Precision::kFp8), 163840);
  // kv_heads 0 = multi-head attention: all 64 heads cached.
  llama70b.kv_heads = 0;
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(llama70b, Precision::kBf16), 8 * 327680);
  // Explicit head_dim wins over hidden/heads (Gemma-7B: 28 layers, 16 heads of 256).
  ModelShape gemma;
  gemma.params = 8.5e9;
  gemma.layers = 28;
  gemma.hidden = 3072;
  gemma.heads = 16;
  gemma.head_dim = 256;
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(gemma, Precision::kBf16), 2.0 * 28 * 16 * 256 * 2);
  // kv_heads and head_dim alone are enough.
  ModelShape bare;
  bare.params = 1e9;
  bare.layers = 10;
  bare.kv_heads = 4;
  bare.head_dim = 64;
  EXPECT_DOUBLE_EQ(*KvCacheBytesPerToken(bare, Precision::kFp32), 2.0 * 10 * 4 * 64 * 4);
}

TEST(InferenceTest, MemoryKnownAnswer) {
  InferenceSetup s;
  s.model = Llama31_8B();
  s.model.params = 8e9;
  s.context = 8192;
  s.batch = 4;
  s.overhead = 0.15;
  auto m = EstimateInferenceMemory(s);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->weights, 16e9);
  EXPECT_DOUBLE_EQ(m->kv_per_token, 131072);
  EXPECT_DOUBLE_EQ(m->kv_cache, 131072.0 * 8192 * 4);  // 4 GiB
  ExpectRel(m->overhead, 0.15 * (16e9 + 4294967296.0));
  ExpectRel(m->total, 1.15 * (16e9 + 4294967296.0));

  s.weights = Precision::kInt4;
  s.overhead = 0;
  s.context = 0;
  m = EstimateInferenceMemory(s);
  EXPECT_DOUBLE_EQ(m->weights, 4e9);
  EXPECT_DOUBLE_EQ(m->kv_cache, 0);
  EXPECT_DOUBLE_EQ(m->total, 4e9);
}

TEST(InferenceTest, MemoryWithoutShapeNeedsNoContext) {
  InferenceSetup s;
  s.model.params = 7e9;
  auto m = EstimateInferenceMemory(s);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_DOUBLE_EQ(m->kv_per_token, 0);
  ExpectRel(m->total, 14e9 * 1.15);
  s.context = 4096;  // now the cache must be sized
  ExpectInvalid(EstimateInferenceMemory(s).status(), {"layers"});
}

TEST(InferenceTest, PerfKnownAnswer) {
  InferenceSetup s;
  s.model = Llama31_8B();
  s.model.params = 8e9;
  s.batch = 4;
  s.context = 0;  // = prompt + output = 2000
  auto p = EstimateInferencePerf(s, 1000, 1000, 1, 989.4, 3.35, 0.5, 0.6);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // 2 * 8e9 * 1000 * 4 / (989.4e12 * 0.5)
  ExpectRel(p->prefill_s, 0.12937133616333132);
  // (16e9 + 131072 * 2000 * 4) / (3.35e12 * 0.6)
  ExpectRel(p->per_token_s, 0.008481878606965174);
  ExpectRel(p->request_s, 0.12937133616333132 + 1000 * 0.008481878606965174);
  ExpectRel(p->tokens_per_s, 4 / 0.008481878606965174);
  ExpectRel(p->requests_per_s, 4 / (0.12937133616333132 + 1000 * 0.008481878606965174));
  // TTFT: one request's 1000-token prompt (a quarter of the batch's) plus one decode step.
  ExpectRel(p->first_token_s, 0.12937133616333132 / 4 + 0.008481878606965174);

  // An explicit context is used as given; 4 GPUs divide both phases by 4.
  s.context = 2000;
  auto q = EstimateInferencePerf(s, 1000, 1000, 4, 989.4, 3.35, 0.5, 0.6);
  ASSERT_TRUE(q.ok());
  ExpectRel(q->prefill_s, 0.12937133616333132 / 4);
  ExpectRel(q->per_token_s, 0.008481878606965174 / 4);
  // Default bandwidth efficiency is 0.6.
  ExpectRel(EstimateInferencePerf(s, 1000, 1000, 4, 989.4, 3.35, 0.5)->per_token_s, q->per_token_s);
}

// ------------------------------------------------------------------ cost --

TEST(CostTest, SpotOverheadMatchesDalyPlusRestart) {
  auto o = EstimateSpotOverhead(1, 60, 30);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_DOUBLE_EQ(o->mtbf_s, 3600);
  auto plan = PlanInterval(60, 3600);
  ASSERT_TRUE(plan.ok());
  EXPECT_DOUBLE_EQ(o->interval_s, plan->daly_s);
  EXPECT_DOUBLE_EQ(o->overhead_fraction, plan->overhead_fraction + 30.0 / 3600);
  // By hand: Daly tau = sqrt(2*60*3600) (1 + sqrt(r)/3 + r/9) - 60 with r = 60/7200.
  ExpectRel(o->interval_s, 617.8756496256495, 1e-10);
  ExpectRel(o->overhead_fraction, 0.19125631371272658, 1e-10);

  auto two = EstimateSpotOverhead(2, 60, 0);
  ASSERT_TRUE(two.ok());
  EXPECT_DOUBLE_EQ(two->mtbf_s, 1800);
  EXPECT_DOUBLE_EQ(two->overhead_fraction, PlanInterval(60, 1800)->overhead_fraction);
}

TEST(CostTest, BreakEvenAndDiscounts) {
  EXPECT_DOUBLE_EQ(*BreakEvenUtilization(4.0, 2.6), 0.65);
  EXPECT_DOUBLE_EQ(*BreakEvenUtilization(1.0, 1.2), 1.2);  // >= 1: never pays off
  EXPECT_TRUE(ValidateDiscounts(Discounts{}).ok());
  EXPECT_TRUE(ValidateDiscounts(Discounts{0, 0, 0, 0}).ok());
  EXPECT_TRUE(ValidateDiscounts(Discounts{0.99, 0.99, 0.99, 0.99}).ok());
}

// ------------------------------------------------------------ monotonicity --

TEST(MonotonicTest, MoreParamsNeverNeedLessMemory) {
  TrainingSetup t = Gpt3Layer();
  InferenceSetup inf;
  inf.model = Llama31_8B();
  inf.context = 4096;
  double prev_train = 0, prev_inf = 0;
  for (double params = 1e6; params < 2e12; params *= 1.7) {
    t.model.params = params;
    inf.model.params = params;
    auto tm = EstimateTrainingMemory(t);
    auto im = EstimateInferenceMemory(inf);
    ASSERT_TRUE(tm.ok() && im.ok());
    EXPECT_GT(tm->total, prev_train) << params;
    EXPECT_GT(im->total, prev_inf) << params;
    prev_train = tm->total;
    prev_inf = im->total;
  }
}

TEST(MonotonicTest, HigherZeroStageAndMoreDataParallelNeverNeedMore) {
  for (Optimizer opt : {Optimizer::kAdam, Optimizer::kSgdMomentum, Optimizer::kSgd}) {
    for (Precision prec : {Precision::kFp32, Precision::kBf16}) {
      for (int nd : {1, 2, 3, 8, 64, 1024}) {
        double prev = INFINITY;
        for (int stage = 0; stage <= 3; ++stage) {
          TrainingSetup s = Gpt3Layer();
          s.optimizer = opt;
          s.precision = prec;
          s.data_parallel = nd;
          s.zero_stage = stage;
          double total = EstimateTrainingMemory(s)->total;
          EXPECT_LE(total, prev) << "stage " << stage << " nd " << nd;
          prev = total;
        }
      }
      for (int stage = 0; stage <= 3; ++stage) {
        double prev = INFINITY;
        for (int nd = 1; nd <= 4096; nd = nd * 2 + 1) {
          TrainingSetup s = Gpt3Layer();
          s.optimizer = opt;
          s.precision = prec;
          s.data_parallel = nd;
          s.zero_stage = stage;
          double total = EstimateTrainingMemory(s)->total;
          EXPECT_LE(total, prev) << "stage " << stage << " nd " << nd;
          if (stage > 0 && nd > 1 && opt != Optimizer::kSgd) {
            EXPECT_LT(total, prev);
          }
          prev = total;
        }
      }
    }
  }
}

TEST(MonotonicTest, MoreGpusNeverTakeLonger) {
  double prev = INFINITY;
  for (double gpus = 0.5; gpus <= 100000; gpus *= 1.3) {
    double secs = *ComputeSeconds(4.8e22, gpus, 989.4, 0.4);
    EXPECT_LT(secs, prev) << gpus;
    prev = secs;
  }
}

TEST(MonotonicTest, LongerContextNeverShrinksKv) {
  InferenceSetup s;
  s.model = Llama31_8B();
  double prev = -1;
  for (int64_t ctx = 0; ctx <= (int64_t{1} << 20); ctx = ctx * 2 + 1) {
    s.context = ctx;
    auto m = EstimateInferenceMemory(s);
    ASSERT_TRUE(m.ok());
    EXPECT_GT(m->kv_cache, prev) << ctx;
    prev = m->kv_cache;
  }
}

TEST(MonotonicTest, MoreEvictionsNeverLowerSpotOverhead) {
  // PlanInterval uses Daly's piecewise optimum, which jumps from
  // ~0.89 M to M where the save time reaches 2 M; its overhead drops there
  // (2.69 -> 2.5). So the range stays below that point (save_s < mtbf_s / 2),
  // where spot is at least plausible.
  for (double save_s : {5.0, 60.0, 300.0}) {
    for (double restart_s : {0.0, 120.0}) {
      double prev = 0;
      const double max_eph = 3600 / (2 * save_s);
      for (double eph = 0.001; eph < max_eph; eph *= 1.15) {
        auto o = EstimateSpotOverhead(eph, save_s, restart_s);
        ASSERT_TRUE(o.ok()) << o.status().ToString();
        EXPECT_GE(o->overhead_fraction, prev) << "eph " << eph << " save " << save_s;
        prev = o->overhead_fraction;
      }
    }
  }
}

// ------------------------------------------------------------- validation --

TEST(ValidationTest, ModelShapeFields) {
  TrainingSetup base = Gpt3Layer();
  auto check = [&](auto mutate, std::initializer_list<std::string> fragments) {
    TrainingSetup s = base;
    mutate(s.model);
    ExpectInvalid(EstimateTrainingMemory(s).status(), fragments);
    InferenceSetup i;
    i.model = s.model;
    ExpectInvalid(EstimateInferenceMemory(i).status(), fragments);
    ExpectInvalid(TrainingFlops(s.model, 1e9, 0).status(), fragments);
    ExpectInvalid(KvCacheBytesPerToken(s.model, Precision::kBf16).status(), fragments);
  };
  check([](ModelShape& m) { m.params = 0; }, {"params", "0", "> 0"});
  check([](ModelShape& m) { m.params = -1; }, {"params", "-1"});
  check([](ModelShape& m) { m.params = kNaN; }, {"params", "nan"});
  check([](ModelShape& m) { m.params = kInf; }, {"params", "inf"});
  check([](ModelShape& m) { m.layers = -2; }, {"layers: -2 must be >= 0"});
  check([](ModelShape& m) { m.hidden = -1; }, {"hidden: -1"});
  check([](ModelShape& m) { m.heads = -3; }, {"heads: -3"});
  check([](ModelShape& m) { m.kv_heads = -1; }, {"kv_heads: -1"});
  check([](ModelShape& m) { m.head_dim = -64; }, {"head_dim: -64"});
  check([](ModelShape& m) { m.ffn_hidden = -1; }, {"ffn_hidden: -1"});
  check([](ModelShape& m) { m.kv_heads = 128; }, {"kv_heads: 128", "heads (96)"});
  check([](ModelShape& m) { m.hidden = 1000; }, {"heads: 96", "hidden (1000)", "head_dim"});
  // With head_dim given, hidden need not be a multiple of heads.
  TrainingSetup ok = base;
  ok.model.hidden = 1000;
  ok.model.head_dim = 128;
  EXPECT_TRUE(EstimateTrainingMemory(ok).ok());
}

TEST(ValidationTest, TrainingFields) {
  auto check = [](auto mutate, std::initializer_list<std::string> fragments) {
    TrainingSetup s = Gpt3Layer();
    mutate(s);
    ExpectInvalid(EstimateTrainingMemory(s).status(), fragments);
  };
  check([](TrainingSetup& s) { s.precision = Precision::kFp8; },
        {"precision: fp8",
         "train in fp32, bf16 or fp16 (mixed precision); fp8 training is not modelled"});
  check([](TrainingSetup& s) { s.precision = Precision::kInt8; }, {"precision: int8"});
  check([](TrainingSetup& s) { s.precision = Precision::kInt4; }, {"precision: int4"});
  check([](TrainingSetup& s) { s.zero_stage = 4; }, {"zero_stage: 4", "0, 1, 2 or 3"});
  check([](TrainingSetup& s) { s.zero_stage = -1; }, {"zero_stage: -1"});
  check([](TrainingSetup& s) { s.data_parallel = 0; }, {"data_parallel: 0 must be >= 1"});
  check([](TrainingSetup& s) { s.tensor_parallel = 0; }, {"tensor_parallel: 0 must be >= 1"});
  check([](TrainingSetup& s) { s.pipeline_parallel = -4; }, {"pipeline_parallel: -4"});
  check([](TrainingSetup& s) { s.tensor_parallel = 5; }, {"tensor_parallel: 5", "heads (96)"});
  check([](TrainingSetup& s) { s.sequence = -1; }, {"sequence: -1"});
  check([](TrainingSetup& s) { s.micro_batch = 0; }, {"micro_batch: 0 must be >= 1"});
  // Without heads, any tensor-parallel degree is accepted.
  TrainingSetup s;
  s.model.params = 1e9;
  s.tensor_parallel = 5;
  EXPECT_TRUE(EstimateTrainingMemory(s).ok());
}

TEST(ValidationTest, FlopsAndComputeFields) {
  ModelShape m;
  m.params = 1e9;
  ExpectInvalid(TrainingFlops(m, 0, 0).status(), {"tokens: 0"});
  ExpectInvalid(TrainingFlops(m, kNaN, 0).status(), {"tokens: nan"});
  ExpectInvalid(TrainingFlops(m, 1e9, -5).status(), {"sequence: -5"});
  ExpectInvalid(ComputeSeconds(-1, 1, 1, 0.5).status(), {"flops: -1"});
  ExpectInvalid(ComputeSeconds(1, 0, 1, 0.5).status(), {"gpus: 0"});
  ExpectInvalid(ComputeSeconds(1, 1, -312, 0.5).status(), {"peak_tflops: -312"});
  ExpectInvalid(ComputeSeconds(1, 1, kInf, 0.5).status(), {"peak_tflops: inf"});
  ExpectInvalid(ComputeSeconds(1, 1, 1, 0).status(), {"mfu: 0 must be in (0, 1]"});
  ExpectInvalid(ComputeSeconds(1, 1, 1, 1.5).status(), {"mfu: 1.5"});
  ExpectInvalid(ComputeSeconds(1, 1, 1, kNaN).status(), {"mfu: nan"});
  EXPECT_TRUE(ComputeSeconds(1, 1, 1, 1).ok());
}

TEST(ValidationTest, InferenceFields) {
  InferenceSetup s;
  s.model = Llama31_8B();
  s.context = 1024;
  auto mem = [&](auto mutate, std::initializer_list<std::string> fragments) {
    InferenceSetup c = s;
    mutate(c);
    ExpectInvalid(EstimateInferenceMemory(c).status(), fragments);
    ExpectInvalid(EstimateInferencePerf(c, 10, 10, 1, 1, 1, 0.5).status(), fragments);
  };
  mem([](InferenceSetup& c) { c.context = -1; }, {"context: -1"});
  mem([](InferenceSetup& c) { c.batch = 0; }, {"batch: 0 must be >= 1"});
  mem([](InferenceSetup& c) { c.overhead = 1.5; }, {"overhead: 1.5 must be in [0, 1]"});
  mem([](InferenceSetup& c) { c.overhead = -0.1; }, {"overhead: -0.1"});

  ExpectInvalid(EstimateInferencePerf(s, 0, 10, 1, 1, 1, 0.5).status(), {"prompt_tokens: 0"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 0, 1, 1, 1, 0.5).status(), {"output_tokens: 0"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 0, 1, 1, 0.5).status(), {"gpus: 0"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 0, 1, 0.5).status(), {"peak_tflops: 0"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 1, -2, 0.5).status(), {"hbm_tbps: -2"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 1, 1, 2).status(), {"mfu: 2"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 1, 1, 0.5, 0).status(),
                {"bandwidth_efficiency: 0"});
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 1, 1, 0.5, 1.01).status(),
                {"bandwidth_efficiency: 1.01"});
  EXPECT_TRUE(EstimateInferencePerf(s, 10, 10, 1, 1, 1, 1, 1).ok());
}

TEST(ValidationTest, KvCacheNeedsShape) {
  ModelShape m;
  m.params = 1e9;
  ExpectInvalid(KvCacheBytesPerToken(m, Precision::kBf16).status(), {"layers"});
  m.layers = 16;
  ExpectInvalid(KvCacheBytesPerToken(m, Precision::kBf16).status(), {"heads", "kv_heads"});
  m.kv_heads = 4;
  ExpectInvalid(KvCacheBytesPerToken(m, Precision::kBf16).status(), {"head_dim"});
  m.head_dim = 64;
  EXPECT_TRUE(KvCacheBytesPerToken(m, Precision::kBf16).ok());
  // The perf estimate needs the cache even when context is 0 (prompt + output).
  InferenceSetup s;
  s.model.params = 1e9;
  ExpectInvalid(EstimateInferencePerf(s, 10, 10, 1, 1, 1, 0.5).status(), {"layers"});
}

TEST(ValidationTest, CostFields) {
  ExpectInvalid(ValidateDiscounts(Discounts{1.0, 0.5, 0.2, 0.4}), {"reserved_1y: 1", "[0, 1)"});
  ExpectInvalid(ValidateDiscounts(Discounts{0.3, -0.1, 0.2, 0.4}), {"reserved_3y: -0.1"});
  ExpectInvalid(ValidateDiscounts(Discounts{0.3, 0.5, kNaN, 0.4}), {"savings_1y: nan"});
  ExpectInvalid(ValidateDiscounts(Discounts{0.3, 0.5, 0.2, 1.5}), {"savings_3y: 1.5"});

  ExpectInvalid(EstimateSpotOverhead(0, 60, 0).status(), {"evictions_per_hour: 0"});
  ExpectInvalid(EstimateSpotOverhead(-1, 60, 0).status(), {"evictions_per_hour: -1"});
  ExpectInvalid(EstimateSpotOverhead(1, 0, 0).status(), {"save_s: 0"});
  ExpectInvalid(EstimateSpotOverhead(1, 60, -1).status(), {"restart_s: -1"});
  ExpectInvalid(EstimateSpotOverhead(1, 60, kInf).status(), {"restart_s: inf"});

  ExpectInvalid(BreakEvenUtilization(0, 1).status(), {"payg_per_hour: 0"});
  ExpectInvalid(BreakEvenUtilization(1, -1).status(), {"committed_per_hour: -1"});
}

}  // namespace
}  // namespace gantry::advise
