// cuBLAS GEMMs on a real device: label gpu (`make test-gpu`), not part of
// `make test`, which runs where no GPU is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gantry/bench/gemm.h"

namespace gantry::bench {
namespace {

using ::testing::HasSubstr;

TEST(GemmGpuTest, SmallGemmsOfEveryTypeAreVerified) {
  ASSERT_TRUE(CudaGemmAvailable()) << "no CUDA device (or a build without CUDA)";
  for (GemmType t : {GemmType::kFp32, GemmType::kFp64, GemmType::kBf16, GemmType::kFp16}) {
    GemmOptions o;
    o.type = t;
    o.device = GemmDevice::kCuda;
    o.m = 96;
    o.n = 160;
    o.k = 224;
    o.iters = 2;
    auto r = MeasureGemm(o);
    ASSERT_TRUE(r.ok()) << GemmTypeName(t) << ": " << r.status().ToString();
    EXPECT_TRUE(r->verified) << GemmTypeName(t) << " error " << r->max_rel_error;
    EXPECT_EQ(r->iters, 2);
    EXPECT_THAT(r->backend, HasSubstr("cuBLAS"));
  }
}

TEST(GemmGpuTest, DefaultSizeReportsMfuAgainstTheDatasheetPeak) {
  ASSERT_TRUE(CudaGemmAvailable());
  GemmOptions o;
  o.type = GemmType::kBf16;
  o.device = GemmDevice::kCuda;
  o.min_seconds = 0.5;
  auto r = MeasureGemm(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->verified);
  EXPECT_GT(r->tflops, 0);
  if (r->peak_tflops) {
    ASSERT_TRUE(r->mfu.has_value());
    EXPECT_GT(*r->mfu, 0.0);
    EXPECT_LT(*r->mfu, 1.2) << r->device_name;  // above the datasheet means a wrong peak
  }
}

}  // namespace
}  // namespace gantry::bench
