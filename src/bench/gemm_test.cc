#include "gantry/bench/gemm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/config.h"
#include "testing/fake_root.h"

namespace gantry::bench {
namespace {

using ::gantry::testing::FakeRoot;
using ::testing::HasSubstr;

GemmOptions Small(GemmType type, int64_t m, int64_t n, int64_t k) {
  GemmOptions o;
  o.type = type;
  o.m = m;
  o.n = n;
  o.k = k;
  o.iters = 2;
  return o;
}

TEST(GemmTest, TypeAndDeviceNamesRoundTrip) {
  for (GemmType t : {GemmType::kFp32, GemmType::kFp64, GemmType::kBf16, GemmType::kFp16}) {
    auto parsed = ParseGemmType(GemmTypeName(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_EQ(*ParseGemmDevice("cpu"), GemmDevice::kCpu);
  EXPECT_EQ(*ParseGemmDevice("cuda"), GemmDevice::kCuda);
  auto bad = ParseGemmType("float");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'float'"));
  EXPECT_EQ(ParseGemmDevice("gpu").status().code(), StatusCode::kInvalidArgument);
}

// Non-square shapes, so a transposed or mis-strided call cannot pass.
TEST(GemmTest, SmallFp32GemmIsVerified) {
  auto r = MeasureGemm(Small(GemmType::kFp32, 67, 45, 83));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->verified) << r->max_rel_error;
  EXPECT_LT(r->max_rel_error, 1e-6);
  EXPECT_EQ(r->m, 67);
  EXPECT_EQ(r->n, 45);
  EXPECT_EQ(r->k, 83);
  EXPECT_EQ(r->iters, 2);
  EXPECT_EQ(r->type, GemmType::kFp32);
  EXPECT_EQ(r->device, GemmDevice::kCpu);
  EXPECT_GT(r->seconds_per_iter, 0);
  EXPECT_DOUBLE_EQ(r->tflops, detail::GemmTflops(67, 45, 83, r->seconds_per_iter));
  EXPECT_THAT(r->backend, HasSubstr("OpenBLAS"));
  if (r->peak_tflops) {
    ASSERT_TRUE(r->mfu.has_value());
    EXPECT_DOUBLE_EQ(*r->mfu, r->tflops / *r->peak_tflops);
  } else {
    EXPECT_FALSE(r->mfu.has_value());
    EXPECT_THAT(r->peak_source, HasSubstr("unknown"));
  }
}

TEST(GemmTest, SmallFp64GemmIsVerified) {
  auto r = MeasureGemm(Small(GemmType::kFp64, 31, 70, 129));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->verified) << r->max_rel_error;
  EXPECT_LT(r->max_rel_error, 1e-14);
  EXPECT_EQ(r->tolerance, detail::GemmTolerance(GemmType::kFp64, 129));
}

TEST(GemmTest, OneThreadAndTimedRunsWork) {
  GemmOptions o = Small(GemmType::kFp32, 32, 32, 32);
  o.iters = 0;
  o.min_seconds = 0.01;
  o.warmup = 0;
  o.threads = 1;
  auto r = MeasureGemm(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GE(r->iters, 1);
  EXPECT_EQ(r->threads, 1);
  EXPECT_TRUE(r->verified);
}

TEST(GemmTest, Bf16OnCpuNeedsSbgemm) {
  auto r = MeasureGemm(Small(GemmType::kBf16, 16, 24, 40));
  if (r.ok()) {  // an OpenBLAS built with BUILD_BFLOAT16
    EXPECT_TRUE(r->verified) << r->max_rel_error;
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("cblas_sbgemm"));
  }
}

TEST(GemmTest, Fp16OnCpuIsUnimplemented) {
  auto r = MeasureGemm(Small(GemmType::kFp16, 16, 16, 16));
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("fp16"));
}

TEST(GemmTest, BadOptionsAreRefused) {
  auto expect_invalid = [](GemmOptions o, const std::string& needle) {
    auto r = MeasureGemm(o);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << needle;
    EXPECT_THAT(r.status().message(), HasSubstr(needle));
  };
  expect_invalid(Small(GemmType::kFp32, 0, 64, 64), "m = 0");
  expect_invalid(Small(GemmType::kFp32, 64, 64, 0), "k = 0");
  expect_invalid(Small(GemmType::kFp32, -4, 64, 64), "m = -4");
  expect_invalid(Small(GemmType::kFp32, 64, int64_t{1} << 40, 64), "n = ");
  GemmOptions o = Small(GemmType::kFp32, 8, 8, 8);
  o.iters = -1;
  expect_invalid(o, "iters -1");
  o = Small(GemmType::kFp32, 8, 8, 8);
  o.warmup = -2;
  expect_invalid(o, "warmup -2");
  o = Small(GemmType::kFp32, 8, 8, 8);
  o.threads = -1;
  expect_invalid(o, "threads -1");
  o = Small(GemmType::kFp32, 8, 8, 8);
  o.iters = 0;
  o.min_seconds = 0;
  expect_invalid(o, "min_seconds");
  o.min_seconds = std::numeric_limits<double>::quiet_NaN();
  expect_invalid(o, "min_seconds");
  o = Small(GemmType::kFp32, 8, 8, 8);
  o.device = GemmDevice::kCuda;
  o.threads = 2;
  expect_invalid(o, "threads");
}

TEST(GemmTest, HugeExplicitSizeIsResourceExhausted) {
  auto r = MeasureGemm(Small(GemmType::kFp64, 2000000000, 2000000000, 2000000000));
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("smaller"));
}

#if GANTRY_HAVE_CUDA
bool Mapped(const std::string& library) {
  std::ifstream in("/proc/self/maps");
  std::stringstream maps;
  maps << in.rdbuf();
  return maps.str().find("/" + library) != std::string::npos;
}

// The CUDA runtime and cuBLAS are dlopened by the first CUDA GEMM, not before
// (docs/architecture.md); binding every function they need succeeds, so the
// run either measures (a GPU) or says that no device is visible.
TEST(GemmTest, CudaLoadsCublasOnFirstUse) {
  EXPECT_FALSE(Mapped("libcublas.so")) << "cuBLAS was loaded before any CUDA GEMM";
  EXPECT_FALSE(Mapped("libcudart.so")) << "the CUDA runtime was loaded before any CUDA GEMM";
  GemmOptions o = Small(GemmType::kFp32, 64, 64, 64);
  o.device = GemmDevice::kCuda;
  auto r = MeasureGemm(o);
  if (!r.ok()) {
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr("no CUDA device visible"));
  }
  EXPECT_TRUE(Mapped("libcublas.so"));
  EXPECT_TRUE(Mapped("libcudart.so"));
}
#endif

// In a CUDA build this path is covered by gemm_gpu_test.cc (label gpu).
#if !GANTRY_HAVE_CUDA
TEST(GemmTest, CudaWithoutCudaIsUnavailable) {
  EXPECT_FALSE(CudaGemmAvailable());
  GemmOptions o = Small(GemmType::kBf16, 64, 64, 64);
  o.device = GemmDevice::kCuda;
  auto r = MeasureGemm(o);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("--device cpu"));
  EXPECT_EQ(detail::RunCudaGemm(o).status().code(), StatusCode::kUnavailable);
}
#endif

TEST(GemmTest, TflopsArithmetic) {
  EXPECT_DOUBLE_EQ(detail::GemmTflops(1000, 2000, 3000, 0.5),
                   2.0 * 1000 * 2000 * 3000 / 0.5 / 1e12);
  EXPECT_DOUBLE_EQ(detail::GemmTflops(8192, 8192, 8192, 1.0), 1.099511627776);
  EXPECT_EQ(detail::GemmTflops(10, 10, 10, 0), 0);
}

TEST(GemmTest, HalfPrecisionConversions) {
  EXPECT_EQ(detail::FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(detail::FloatToBf16(-2.0f), 0xc000);
  // 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(detail::FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(detail::FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(detail::Bf16ToFloat(0x3fc0), 1.5f);
  EXPECT_EQ(detail::FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(detail::FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(detail::FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(detail::FloatToFp16(70000.0f), 0x7c00);
  EXPECT_EQ(detail::FloatToFp16(std::ldexp(1.0f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(detail::FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(detail::Fp16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(detail::Fp16ToFloat(0xbc00), -1.0f);
  EXPECT_TRUE(std::isinf(detail::Fp16ToFloat(0x7c00)));
  EXPECT_TRUE(std::isnan(detail::Fp16ToFloat(0x7e00)));
  // Every generated input is exact in both formats.
  for (int q = -256; q < 256; ++q) {
    const float v = static_cast<float>(q) / 256.0f;
    EXPECT_EQ(detail::Bf16ToFloat(detail::FloatToBf16(v)), v) << q;
    EXPECT_EQ(detail::Fp16ToFloat(detail::FloatToFp16(v)), v) << q;
  }
}

TEST(GemmTest, InputsAreMultiplesOf1Over256InRange) {
  std::vector<float> v(4096);
  detail::FillInputs(GemmType::kFp32, v.data(), v.size(), 7);
  bool negative = false, positive = false;
  for (float x : v) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 1.0f);
    EXPECT_EQ(x * 256, std::round(x * 256));
    negative |= x < 0;
    positive |= x > 0;
  }
  EXPECT_TRUE(negative && positive);
  std::vector<float> again(4096);
  detail::FillInputs(GemmType::kFp32, again.data(), again.size(), 7);
  EXPECT_EQ(v, again);
}

TEST(GemmTest, SampleIndicesCoverCornersAndStayInRange) {
  auto all = detail::SampleIndices(3, 5);
  EXPECT_EQ(all.size(), 15u);
  auto some = detail::SampleIndices(100, 300);
  EXPECT_EQ(some.size(), 64u);
  for (int64_t corner : {int64_t{0}, int64_t{299}, int64_t{99 * 300}, int64_t{100 * 300 - 1}}) {
    EXPECT_NE(std::find(some.begin(), some.end(), corner), some.end()) << corner;
  }
  for (int64_t i : some) {
    EXPECT_GE(i, 0);
    EXPECT_LT(i, 100 * 300);
  }
}

// A reference GEMM in double, stored as float, for checking the checker.
struct Fp32Case {
  int64_t m, n, k;
  std::vector<float> a, b, c;
  Fp32Case(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_), a(m * k), b(k * n), c(m * n) {
    detail::FillInputs(GemmType::kFp32, a.data(), a.size(), 1);
    detail::FillInputs(GemmType::kFp32, b.data(), b.size(), 2);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += static_cast<double>(a[i * k + p]) * b[p * n + j];
        c[i * n + j] = static_cast<float>(s);
      }
    }
  }
  double Error() const {
    return detail::SampledError(GemmType::kFp32, a.data(), b.data(), GemmType::kFp32, c.data(), m,
                                n, k, detail::SampleIndices(m, n));
  }
};

TEST(GemmTest, CheckerAcceptsACorrectResult) {
  Fp32Case ok(40, 90, 300);
  EXPECT_LT(ok.Error(), 1e-6);
  EXPECT_LE(ok.Error(), detail::GemmTolerance(GemmType::kFp32, 300));
}

TEST(GemmTest, CheckerRejectsCorruptedOutputs) {
  const double tol = detail::GemmTolerance(GemmType::kFp32, 300);
  {
    Fp32Case bad(40, 90, 300);
    bad.c[40 * 90 - 1] += 1.0f;  // one corner element off by one
    EXPECT_GT(bad.Error(), tol);
  }
  {
    Fp32Case bad(40, 90, 300);
    for (float& x : bad.c) x = 0;  // nothing written
    EXPECT_GT(bad.Error(), tol);
  }
  {
    Fp32Case bad(40, 90, 300);
    bad.c[0] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isinf(bad.Error()));
  }
  {
    // Right values in the wrong places (a layout or stride mix-up).
    Fp32Case bad(40, 90, 300);
    const std::vector<float> right = bad.c;
    for (int64_t i = 0; i < 40 * 90; ++i) bad.c[i] = right[(i * 7 + 1) % (40 * 90)];
    EXPECT_GT(bad.Error(), tol);
  }
  // Sampled elements only: a small GEMM is checked in full, so any element counts.
  {
    Fp32Case bad(5, 6, 7);
    bad.c[13] *= 1.5f;
    bad.c[13] += 0.25f;
    EXPECT_GT(bad.Error(), detail::GemmTolerance(GemmType::kFp32, 7));
  }
}

TEST(GemmTest, TolerancesFollowTheErrorBound) {
  EXPECT_EQ(detail::GemmTolerance(GemmType::kFp32, 8192), 1e-3);
  EXPECT_GT(detail::GemmTolerance(GemmType::kFp32, 1 << 20), 1e-3);  // k*u grows past the floor
  EXPECT_EQ(detail::GemmTolerance(GemmType::kFp64, 8192), 1e-10);
  EXPECT_EQ(detail::GemmTolerance(GemmType::kBf16, 8192), 1e-2);
  EXPECT_EQ(detail::GemmTolerance(GemmType::kFp16, 1024), 2e-3);
}

// A /proc/cpuinfo with `n` processors; `extra` lines go into every block.
std::string Cpuinfo(int n, const std::string& flags, const std::string& extra = "",
                    const std::string& vendor = "GenuineIntel", int family = 6) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += "processor\t: " + std::to_string(i) + "\nvendor_id\t: " + vendor +
         "\ncpu family\t: " + std::to_string(family) + "\nmodel name\t: Test CPU\n" + extra +
         "flags\t\t: " + flags + "\n\n";
  }
  return s;
}

const char kAvx512Flags[] = "fpu sse sse2 avx fma avx2 avx512f avx512bw avx512_bf16";

TEST(CpuPeakTest, Avx512WithSmtAndCpufreq) {
  FakeRoot root;
  root.Write("/proc/cpuinfo", Cpuinfo(4, kAvx512Flags, "cpu MHz\t\t: 1200.000\n"));
  // Two cores with two hardware threads each: cpu0+cpu2, cpu1+cpu3.
  for (int cpu = 0; cpu < 4; ++cpu) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu);
    root.Write(dir + "/topology/thread_siblings_list", cpu % 2 == 0 ? "0,2\n" : "1,3\n");
    root.Write(dir + "/cpufreq/cpuinfo_max_freq", "2800000\n");
  }
  auto fp32 = CpuPeakTflops(GemmType::kFp32, root.path());
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  EXPECT_EQ(fp32->cores, 2);
  EXPECT_DOUBLE_EQ(fp32->ghz, 2.8);
  EXPECT_EQ(fp32->flops_per_cycle, 64);
  EXPECT_DOUBLE_EQ(fp32->tflops, 2 * 2.8 * 64 / 1e3);
  EXPECT_THAT(fp32->how, HasSubstr("2 cores x 2.80 GHz x 64 FLOP/cycle (AVX-512, 2 FMA units"));
  EXPECT_THAT(fp32->how, HasSubstr("cpufreq"));

  auto fp64 = CpuPeakTflops(GemmType::kFp64, root.path());
  ASSERT_TRUE(fp64.ok());
  EXPECT_EQ(fp64->flops_per_cycle, 32);
  EXPECT_DOUBLE_EQ(fp64->tflops, fp32->tflops / 2);

  auto bf16 = CpuPeakTflops(GemmType::kBf16, root.path());
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->flops_per_cycle, 128);

  EXPECT_EQ(CpuPeakTflops(GemmType::kFp16, root.path()).status().code(),
            StatusCode::kUnimplemented);
}

TEST(CpuPeakTest, Avx2WithoutCpufreqUsesCpuMhz) {
  FakeRoot root;
  root.Write("/proc/cpuinfo", Cpuinfo(3, "fpu sse sse2 avx fma avx2", "cpu MHz\t\t: 3000.000\n"));
  for (int cpu = 0; cpu < 3; ++cpu) {
    root.Write(
        "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list",
        std::to_string(cpu) + "\n");
  }
  auto p = CpuPeakTflops(GemmType::kFp32, root.path());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cores, 3);
  EXPECT_EQ(p->flops_per_cycle, 32);
  EXPECT_DOUBLE_EQ(p->tflops, 3 * 3.0 * 32 / 1e3);
  EXPECT_THAT(p->how, HasSubstr("3 cores x 3.00 GHz x 32 FLOP/cycle (AVX2+FMA"));
  EXPECT_THAT(p->how, HasSubstr("cpu MHz"));
  auto bf16 = CpuPeakTflops(GemmType::kBf16, root.path());
  EXPECT_EQ(bf16.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(bf16.status().message(), HasSubstr("avx512_bf16"));
}

TEST(CpuPeakTest, NoSysTreeCountsCoresFromCpuinfo) {
  FakeRoot root;
  // 4 logical CPUs on 2 physical cores of one package.
  std::string text;
  for (int i = 0; i < 4; ++i) {
    text += "processor\t: " + std::to_string(i) +
            "\nphysical id\t: 0\ncore id\t\t: " + std::to_string(i % 2) +
            "\ncpu MHz\t\t: 2000.0\nflags\t\t: sse sse2\n\n";
  }
  root.Write("/proc/cpuinfo", text);
  auto p = CpuPeakTflops(GemmType::kFp64, root.path());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cores, 2);
  EXPECT_EQ(p->flops_per_cycle, 4);  // SSE: 8 fp32, half for fp64
  EXPECT_DOUBLE_EQ(p->tflops, 2 * 2.0 * 4 / 1e3);
  EXPECT_THAT(p->how, HasSubstr("SSE"));
}

TEST(CpuPeakTest, Zen4RunsAvx512AtHalfWidth) {
  FakeRoot root;
  root.Write("/proc/cpuinfo",
             Cpuinfo(1, kAvx512Flags, "cpu MHz\t\t: 2500.0\n", "AuthenticAMD", 25));
  auto p = CpuPeakTflops(GemmType::kFp32, root.path());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->flops_per_cycle, 32);
  EXPECT_THAT(p->how, HasSubstr("Zen 4"));
}

TEST(CpuPeakTest, MissingCpuinfoNamesTheFile) {
  FakeRoot root;
  root.Mkdir("/sys/devices/system/cpu");
  auto p = CpuPeakTflops(GemmType::kFp32, root.path());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr(root.path() + "/proc/cpuinfo"));
}

TEST(CpuPeakTest, NoClockIsNotFound) {
  FakeRoot root;
  root.Write("/proc/cpuinfo", Cpuinfo(2, kAvx512Flags));
  auto p = CpuPeakTflops(GemmType::kFp32, root.path());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(p.status().message(), HasSubstr("cpu MHz"));
}

TEST(GpuPeakTest, KnownAndUnknownGpus) {
  auto h100 = detail::GpuPeakTflops("NVIDIA H100 80GB HBM3", GemmType::kBf16);
  ASSERT_TRUE(h100.ok());
  EXPECT_DOUBLE_EQ(h100->tflops, 989.4);
  EXPECT_THAT(h100->how, HasSubstr("H100 SXM"));
  auto pcie = detail::GpuPeakTflops("NVIDIA H100 PCIe", GemmType::kFp32);
  ASSERT_TRUE(pcie.ok());
  EXPECT_DOUBLE_EQ(pcie->tflops, 51.2);
  auto gh = detail::GpuPeakTflops("NVIDIA GH200 480GB", GemmType::kFp16);
  ASSERT_TRUE(gh.ok());
  EXPECT_THAT(gh->how, HasSubstr("GH200"));
  auto a100 = detail::GpuPeakTflops("NVIDIA A100-SXM4-80GB", GemmType::kFp64);
  ASSERT_TRUE(a100.ok());
  EXPECT_DOUBLE_EQ(a100->tflops, 19.5);
  auto t4 = detail::GpuPeakTflops("Tesla T4", GemmType::kFp16);
  EXPECT_EQ(t4.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(t4.status().message(), HasSubstr("Tesla T4"));
}

TEST(GemmTest, JsonCarriesEveryFieldAndNullsUnknowns) {
  GemmResult r;
  r.device_name = "Test CPU";
  r.backend = "OpenBLAS";
  r.type = GemmType::kFp64;
  r.m = 1;
  r.n = 2;
  r.k = 3;
  r.iters = 4;
  r.seconds_per_iter = 0.5;
  r.tflops = 2.5;
  r.peak_source = "peak unknown: x";
  r.max_rel_error = std::numeric_limits<double>::infinity();
  Json j = GemmResultJson(r);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["type"], "fp64");
  EXPECT_EQ(j["m"], 1);
  EXPECT_EQ(j["k"], 3);
  EXPECT_EQ(j["iters"], 4);
  EXPECT_EQ(j["tflops"], 2.5);
  EXPECT_TRUE(j["peak_tflops"].is_null());
  EXPECT_TRUE(j["mfu"].is_null());
  EXPECT_TRUE(j["max_rel_error"].is_null());
  EXPECT_EQ(j["verified"], false);
  r.peak_tflops = 10;
  r.mfu = 0.25;
  r.max_rel_error = 1e-7;
  j = GemmResultJson(r);
  EXPECT_EQ(j["peak_tflops"], 10.0);
  EXPECT_EQ(j["mfu"], 0.25);
  EXPECT_EQ(j["max_rel_error"], 1e-7);
}

}  // namespace
}  // namespace gantry::bench
