#include "gantry/advise/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gantry::advise {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

const Catalog& Builtin() {
  static const Catalog cat = [] {
    Result<Catalog> r = Catalog::Default();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Catalog();
  }();
  return cat;
}

const VmSize& Size(const Catalog& cat, std::string_view name) {
  const VmSize* s = cat.FindSize(name);
  EXPECT_NE(s, nullptr) << name;
  static const VmSize kEmpty;
  return s ? *s : kEmpty;
}

// ------------------------------------------------------------ built-in data --

TEST(DefaultCatalog, Loads) {
  Result<Catalog> cat = Catalog::Default();
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_EQ(cat->currency(), "USD");
  EXPECT_EQ(cat->sizes().size(), 29u);
  EXPECT_EQ(cat->accelerators().size(), 12u);
  EXPECT_THAT(cat->origin(), HasSubstr("built-in"));
  EXPECT_THAT(std::string(DefaultCatalogText()), HasSubstr("version: 1"));
}

TEST(DefaultCatalog, TextMatchesTheSourceFile) {
  std::ifstream in(std::string(GANTRY_SOURCE_DIR) + "/data/advise/azure.yaml");
  ASSERT_TRUE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(DefaultCatalogText(), text);
}

TEST(DefaultCatalog, LoadFileOfTheSourceGivesTheSameSizes) {
  std::string path = std::string(GANTRY_SOURCE_DIR) + "/data/advise/azure.yaml";
  Result<Catalog> cat = Catalog::LoadFile(path);
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_EQ(cat->origin(), path);
  ASSERT_EQ(cat->sizes().size(), Builtin().sizes().size());
  for (size_t i = 0; i < cat->sizes().size(); ++i) {
    EXPECT_EQ(cat->sizes()[i].name, Builtin().sizes()[i].name);
  }
}

struct GpuRow {
  const char* name;
  double gpus;
  const char* accelerator;
  double memory_gib;  // per GPU
  double infiniband_gbps;
};

TEST(DefaultCatalog, HasEveryRequiredGpuSize) {
  const GpuRow rows[] = {
      {"Standard_ND96isr_H100_v5", 8, "H100-SXM-80GB", 80, 3200},
      {"Standard_ND96isr_H200_v5", 8, "H200-141GB", 141, 3200},
      {"Standard_ND96isr_MI300X_v5", 8, "MI300X-192GB", 192, 3200},
      {"Standard_ND128isr_NDR_GB200_v6", 4, "GB200-192GB", 192, 1600},
      {"Standard_ND96amsr_A100_v4", 8, "A100-80GB", 80, 1600},
      {"Standard_ND96asr_v4", 8, "A100-40GB", 40, 1600},
      {"Standard_NC24ads_A100_v4", 1, "A100-80GB", 80, 0},
      {"Standard_NC48ads_A100_v4", 2, "A100-80GB", 80, 0},
      {"Standard_NC96ads_A100_v4", 4, "A100-80GB", 80, 0},
      {"Standard_NC40ads_H100_v5", 1, "H100-NVL-94GB", 94, 0},
      {"Standard_NC80adis_H100_v5", 2, "H100-NVL-94GB", 94, 0},
      {"Standard_NC4as_T4_v3", 1, "T4-16GB", 16, 0},
      {"Standard_NC8as_T4_v3", 1, "T4-16GB", 16, 0},
      {"Standard_NC16as_T4_v3", 1, "T4-16GB", 16, 0},
      {"Standard_NC64as_T4_v3", 4, "T4-16GB", 16, 0},
      {"Standard_NV6ads_A10_v5", 1, "A10-1/6", 4, 0},
      {"Standard_NV12ads_A10_v5", 1, "A10-1/3", 8, 0},
      {"Standard_NV18ads_A10_v5", 1, "A10-1/2", 12, 0},
      {"Standard_NV36ads_A10_v5", 1, "A10-24GB", 24, 0},
      {"Standard_NV36adms_A10_v5", 1, "A10-24GB", 24, 0},
      {"Standard_NV72ads_A10_v5", 2, "A10-24GB", 24, 0},
  };
  const Catalog& cat = Builtin();
  for (const GpuRow& row : rows) {
    SCOPED_TRACE(row.name);
    const VmSize* s = cat.FindSize(row.name);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name, row.name);
    EXPECT_EQ(s->kind, SizeKind::kGpu);
    EXPECT_EQ(s->cpu_class, CpuClass::kNone);
    EXPECT_DOUBLE_EQ(s->gpus, row.gpus);
    EXPECT_EQ(s->accelerator, row.accelerator);
    EXPECT_DOUBLE_EQ(s->infiniband_gbps, row.infiniband_gbps);
    EXPECT_EQ(s->rdma(), row.infiniband_gbps > 0);
    const Accelerator* a = cat.AcceleratorOf(*s);
    ASSERT_NE(a, nullptr);
    EXPECT_DOUBLE_EQ(a->memory_gib, row.memory_gib);
  }
}

TEST(DefaultCatalog, HasEveryRequiredCpuSize) {
  struct Row {
    const char* name;
    CpuClass cls;
    int vcpus;
    double ram_gib;
    double payg;
  };
  const Row rows[] = {
      {"Standard_F8s_v2", CpuClass::kCompute, 8, 16, 0.338},
      {"Standard_F16s_v2", CpuClass::kCompute, 16, 32, 0.677},
      {"Standard_F72s_v2", CpuClass::kCompute, 72, 144, 3.045},
      {"Standard_D8s_v5", CpuClass::kGeneral, 8, 32, 0.384},
      {"Standard_D96s_v5", CpuClass::kGeneral, 96, 384, 4.608},
      {"Standard_E96s_v5", CpuClass::kMemory, 96, 672, 6.048},
      {"Standard_M128s", CpuClass::kMemory, 128, 2048, 13.338},
      {"Standard_M416ms_v2", CpuClass::kMemory, 416, 11400, 99.15},
  };
  const Catalog& cat = Builtin();
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const VmSize* s = cat.FindSize(row.name);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->kind, SizeKind::kCpu);
    EXPECT_EQ(s->cpu_class, row.cls);
    EXPECT_EQ(s->vcpus, row.vcpus);
    EXPECT_DOUBLE_EQ(s->ram_gib, row.ram_gib);
    EXPECT_DOUBLE_EQ(s->gpus, 0);
    EXPECT_EQ(s->accelerator, "");
    EXPECT_EQ(cat.AcceleratorOf(*s), nullptr);
    EXPECT_FALSE(s->rdma());
    ASSERT_TRUE(s->PriceIn("eastus").payg.has_value());
    EXPECT_DOUBLE_EQ(*s->PriceIn("eastus").payg, row.payg);
  }
}

TEST(DefaultCatalog, EveryGpuSizeHasAnAcceleratorWithMemoryAndMfu) {
  int gpu_sizes = 0;
  for (const VmSize& s : Builtin().sizes()) {
    SCOPED_TRACE(s.name);
    EXPECT_FALSE(s.source.empty());
    EXPECT_FALSE(s.series.empty());
    EXPECT_GT(s.released, 2000);
    if (s.kind != SizeKind::kGpu) continue;
    ++gpu_sizes;
    const Accelerator* a = Builtin().AcceleratorOf(s);
    ASSERT_NE(a, nullptr);
    EXPECT_GT(a->memory_gib, 0);
    EXPECT_GT(a->default_mfu, 0);
    EXPECT_LE(a->default_mfu, 1);
    EXPECT_FALSE(a->source.empty());
    // Every GPU we list has a known 16-bit peak for the time estimate.
    EXPECT_TRUE(a->PeakTflops(NumberFormat::kFp16).has_value());
  }
  EXPECT_EQ(gpu_sizes, 21);
}

TEST(DefaultCatalog, NoPriceIsNegativeAndOnlyEastusIsPriced) {
  for (const VmSize& s : Builtin().sizes()) {
    for (const auto& [region, p] : s.prices) {
      for (const std::optional<double>& v :
           {p.payg, p.spot, p.reserved_1y, p.reserved_3y, p.savings_1y, p.savings_3y}) {
        if (v) {
          EXPECT_GE(*v, 0) << s.name << " " << region;
        }
      }
      // The snapshot has no reservation or savings-plan rates.
      EXPECT_FALSE(p.reserved_1y || p.reserved_3y || p.savings_1y || p.savings_3y) << s.name;
    }
  }
  EXPECT_THAT(Builtin().Regions(), ElementsAre("eastus"));
}

TEST(DefaultCatalog, UnknownPricesStayUnknown) {
  const Catalog& cat = Builtin();
  Price h200 = Size(cat, "Standard_ND96isr_H200_v5").PriceIn("eastus");
  EXPECT_FALSE(h200.payg.has_value());
  EXPECT_FALSE(h200.spot.has_value());
  EXPECT_FALSE(Size(cat, "Standard_ND96isr_MI300X_v5").PriceIn("eastus").payg.has_value());
  EXPECT_FALSE(Size(cat, "Standard_ND128isr_NDR_GB200_v6").PriceIn("eastus").payg.has_value());

  // The catalog's H100 spot price is a data error (equal to PAYG) and is not used.
  Price h100 = Size(cat, "Standard_ND96isr_H100_v5").PriceIn("eastus");
  ASSERT_TRUE(h100.payg.has_value());
  EXPECT_DOUBLE_EQ(*h100.payg, 98.32);
  EXPECT_FALSE(h100.spot.has_value());
  EXPECT_THAT(Size(cat, "Standard_ND96isr_H100_v5").source, HasSubstr("AcceleratorCount=12"));

  Price ndm = Size(cat, "Standard_ND96amsr_A100_v4").PriceIn("EastUS");
  EXPECT_DOUBLE_EQ(ndm.payg.value_or(-1), 32.77);
  EXPECT_DOUBLE_EQ(ndm.spot.value_or(-1), 3.60);
  EXPECT_DOUBLE_EQ(Size(cat, "NC4as_T4_v3").PriceIn("eastus").spot.value_or(-1), 0.0627);
  EXPECT_FALSE(Size(cat, "NC8as_T4_v3").PriceIn("eastus").spot.has_value());

  // A region nobody priced is all unknown.
  Price nowhere = Size(cat, "Standard_ND96asr_v4").PriceIn("westeurope");
  EXPECT_FALSE(nowhere.payg || nowhere.spot);
}

TEST(DefaultCatalog, AcceleratorPeaks) {
  auto find = [](std::string_view name) -> const Accelerator* {
    for (const Accelerator& a : Builtin().accelerators()) {
      if (a.name == name) return &a;
    }
    return nullptr;
  };
  const Accelerator* h100 = find("H100-SXM-80GB");
  ASSERT_NE(h100, nullptr);
  EXPECT_DOUBLE_EQ(h100->PeakTflops(NumberFormat::kBf16).value_or(0), 989.4);
  EXPECT_DOUBLE_EQ(h100->PeakTflops(NumberFormat::kFp8).value_or(0), 1978.9);
  EXPECT_DOUBLE_EQ(h100->PeakTflops(NumberFormat::kFp32).value_or(0), 66.9);
  EXPECT_DOUBLE_EQ(h100->hbm_tbps.value_or(0), 3.35);
  EXPECT_DOUBLE_EQ(h100->default_mfu, 0.40);

  const Accelerator* a100 = find("A100-40GB");
  ASSERT_NE(a100, nullptr);
  EXPECT_DOUBLE_EQ(a100->PeakTflops(NumberFormat::kBf16).value_or(0), 312);
  EXPECT_FALSE(a100->PeakTflops(NumberFormat::kFp8).has_value());
  EXPECT_DOUBLE_EQ(a100->hbm_tbps.value_or(0), 1.555);

  const Accelerator* t4 = find("T4-16GB");
  ASSERT_NE(t4, nullptr);
  EXPECT_FALSE(t4->PeakTflops(NumberFormat::kBf16).has_value());  // Turing has no bf16
  EXPECT_DOUBLE_EQ(t4->PeakTflops(NumberFormat::kFp16).value_or(0), 65);
  EXPECT_DOUBLE_EQ(t4->default_mfu, 0.30);

  const Accelerator* mi300x = find("MI300X-192GB");
  ASSERT_NE(mi300x, nullptr);
  EXPECT_DOUBLE_EQ(mi300x->PeakTflops(NumberFormat::kBf16).value_or(0), 1307.4);

  // NV A10 v5 partitions: memory the VM sees, peak scaled by the fraction.
  const Accelerator* sixth = find("A10-1/6");
  ASSERT_NE(sixth, nullptr);
  EXPECT_DOUBLE_EQ(sixth->memory_gib, 4);
  EXPECT_NEAR(sixth->PeakTflops(NumberFormat::kBf16).value_or(0), 125.0 / 6, 0.01);
  EXPECT_THAT(find("H100-NVL-94GB")->source, HasSubstr("not cross-checked"));
}

TEST(DefaultCatalog, SizeDetails) {
  const Catalog& cat = Builtin();
  const VmSize& h100 = Size(cat, "Standard_ND96isr_H100_v5");
  EXPECT_EQ(h100.series, "ND H100 v5");
  EXPECT_EQ(h100.vcpus, 96);
  EXPECT_DOUBLE_EQ(h100.ram_gib, 1900);
  EXPECT_DOUBLE_EQ(h100.local_nvme_gib, 28672);
  EXPECT_EQ(h100.nvlink, "NVLink 4.0");
  EXPECT_EQ(h100.released, 2023);
  EXPECT_EQ(Size(cat, "Standard_ND96isr_MI300X_v5").nvlink, "Infinity Fabric");
  EXPECT_EQ(Size(cat, "Standard_ND128isr_NDR_GB200_v6").released, 2025);
  EXPECT_EQ(Size(cat, "Standard_ND96asr_v4").released, 2020);
  EXPECT_EQ(Size(cat, "Standard_M416ms_v2").released, 2019);
  EXPECT_EQ(Size(cat, "Standard_NC24ads_A100_v4").nvlink, "");
  EXPECT_FALSE(Size(cat, "Standard_NC24ads_A100_v4").rdma());
}

// ------------------------------------------------------------ lookups --------

TEST(Catalog, FindSizeIgnoresCaseAndPrefix) {
  const Catalog& cat = Builtin();
  const VmSize* want = cat.FindSize("Standard_ND96isr_H100_v5");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(cat.FindSize("standard_nd96isr_h100_v5"), want);
  EXPECT_EQ(cat.FindSize("STANDARD_ND96ISR_H100_V5"), want);
  EXPECT_EQ(cat.FindSize("ND96isr_H100_v5"), want);
  EXPECT_EQ(cat.FindSize("nd96isr_h100_v5"), want);
  EXPECT_EQ(cat.FindSize("ND96isr_H100"), nullptr);
  EXPECT_EQ(cat.FindSize("Standard_"), nullptr);
  EXPECT_EQ(cat.FindSize(""), nullptr);
  EXPECT_EQ(cat.FindSize("Standard_ND96isr_H100_v5x"), nullptr);
}

TEST(Catalog, Family) {
  const Catalog& cat = Builtin();
  EXPECT_EQ(Size(cat, "Standard_ND96isr_H100_v5").Family(), "ND");
  EXPECT_EQ(Size(cat, "Standard_ND96asr_v4").Family(), "ND");
  EXPECT_EQ(Size(cat, "Standard_ND128isr_NDR_GB200_v6").Family(), "ND");
  EXPECT_EQ(Size(cat, "Standard_NC24ads_A100_v4").Family(), "NC");
  EXPECT_EQ(Size(cat, "Standard_NV6ads_A10_v5").Family(), "NV");
  EXPECT_EQ(Size(cat, "Standard_F8s_v2").Family(), "F");
  EXPECT_EQ(Size(cat, "Standard_D96s_v5").Family(), "D");
  EXPECT_EQ(Size(cat, "Standard_E96s_v5").Family(), "E");
  EXPECT_EQ(Size(cat, "Standard_M416ms_v2").Family(), "M");
  VmSize bare;
  bare.name = "nc4as_T4_v3";  // no prefix, lower case
  EXPECT_EQ(bare.Family(), "NC");
}

TEST(Catalog, Names) {
  EXPECT_EQ(NumberFormatName(NumberFormat::kFp32), "fp32");
  EXPECT_EQ(NumberFormatName(NumberFormat::kBf16), "bf16");
  EXPECT_EQ(NumberFormatName(NumberFormat::kFp16), "fp16");
  EXPECT_EQ(NumberFormatName(NumberFormat::kFp8), "fp8");
  EXPECT_EQ(CpuClassName(CpuClass::kNone), "");
  EXPECT_EQ(CpuClassName(CpuClass::kCompute), "compute");
  EXPECT_EQ(CpuClassName(CpuClass::kGeneral), "general");
  EXPECT_EQ(CpuClassName(CpuClass::kMemory), "memory");
}

// ------------------------------------------------------------ validation -----

// A small valid catalog; tests change one thing at a time.
constexpr const char* kSmall = R"(version: 1
currency: USD
accelerators:
  - name: X-80GB
    memory_gib: 80
    hbm_tbps: 2.0
    peak_tflops: {bf16: 300, fp16: 300, fp32: 20, fp8: unknown}
    default_mfu: 0.4
    source: "test"
sizes:
  - name: Standard_NC8x_X_v1
    series: NC X v1
    kind: gpu
    released: 2022
    accelerator: X-80GB
    gpus: 2
    vcpus: 16
    ram_gib: 128
    local_nvme_gib: 100
    nvlink: ""
    infiniband_gbps: 0
    prices:
      EastUS: {payg: 2.5, spot: unknown}
      westus2: {payg: 3}
    source: "test"
  - name: Standard_F4s_v9
    series: Fsv9
    kind: cpu
    cpu_class: compute
    vcpus: 4
    ram_gib: 8
    source: "test"
)";

std::string Replace(std::string text, std::string_view from, std::string_view to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Loads `yaml` and returns the error message ("" when it loaded).
std::string LoadError(const std::string& yaml) {
  Result<Catalog> cat = Catalog::LoadString(yaml, "t.yaml");
  if (cat.ok()) return "";
  EXPECT_EQ(cat.status().code(), StatusCode::kInvalidArgument) << cat.status().ToString();
  return cat.status().message();
}

TEST(CatalogLoad, SmallCatalogLoads) {
  Result<Catalog> cat = Catalog::LoadString(kSmall, "t.yaml");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_EQ(cat->origin(), "t.yaml");
  ASSERT_EQ(cat->sizes().size(), 2u);
  const VmSize& gpu = cat->sizes()[0];
  EXPECT_EQ(gpu.released, 2022);
  EXPECT_DOUBLE_EQ(gpu.gpus, 2);
  EXPECT_DOUBLE_EQ(gpu.local_nvme_gib, 100);
  const VmSize& cpu = cat->sizes()[1];
  EXPECT_EQ(cpu.released, 0);  // absent = unknown
  EXPECT_DOUBLE_EQ(cpu.local_nvme_gib, 0);
  EXPECT_TRUE(cpu.prices.empty());
  // Region keys are lower-cased; lookups ignore case.
  EXPECT_THAT(cat->Regions(), ElementsAre("eastus", "westus2"));
  EXPECT_EQ(gpu.prices.count("eastus"), 1u);
  EXPECT_DOUBLE_EQ(gpu.PriceIn("EASTUS").payg.value_or(0), 2.5);
  EXPECT_FALSE(gpu.PriceIn("eastus").spot.has_value());
  EXPECT_DOUBLE_EQ(gpu.PriceIn("westus2").payg.value_or(0), 3);
  const Accelerator& x = cat->accelerators()[0];
  EXPECT_FALSE(x.fp8_tflops.has_value());
  EXPECT_DOUBLE_EQ(x.bf16_tflops.value_or(0), 300);
}

TEST(CatalogLoad, UnknownIsAcceptedForOptionalNumbers) {
  std::string yaml = Replace(kSmall, "hbm_tbps: 2.0", "hbm_tbps: unknown");
  yaml = Replace(yaml, "released: 2022", "released: unknown");
  Result<Catalog> cat = Catalog::LoadString(yaml, "t.yaml");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_FALSE(cat->accelerators()[0].hbm_tbps.has_value());
  EXPECT_EQ(cat->sizes()[0].released, 0);
}

TEST(CatalogLoad, RefusesNegativeNumbers) {
  std::string msg = LoadError(Replace(kSmall, "local_nvme_gib: 100", "local_nvme_gib: -1"));
  EXPECT_THAT(msg, MatchesRegex("t\\.yaml:[0-9]+:[0-9]+: key 'sizes\\.0\\.local_nvme_gib': "
                                "must not be negative, got -1.*"));
  msg = LoadError(Replace(kSmall, "ram_gib: 128", "ram_gib: -128"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.ram_gib': must be greater than 0, got -128"));
  msg = LoadError(Replace(kSmall, "payg: 2.5", "payg: -2.5"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.prices.EastUS.payg': must not be negative"));
  msg = LoadError(Replace(kSmall, "fp32: 20", "fp32: -20"));
  EXPECT_THAT(msg, HasSubstr("key 'accelerators.0.peak_tflops.fp32'"));
  msg = LoadError(Replace(kSmall, "gpus: 2", "gpus: 0"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.gpus': must be greater than 0"));
}

TEST(CatalogLoad, RefusesNonNumbers) {
  std::string msg = LoadError(Replace(kSmall, "vcpus: 16", "vcpus: many"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.vcpus'"));
  EXPECT_THAT(msg, HasSubstr("'many'"));
  msg = LoadError(Replace(kSmall, "vcpus: 16", "vcpus: 16.5"));
  EXPECT_THAT(msg, HasSubstr("whole number of vCPUs"));
  msg = LoadError(Replace(kSmall, "hbm_tbps: 2.0", "hbm_tbps: fast"));
  EXPECT_THAT(msg, HasSubstr("expected a number or 'unknown', got 'fast'"));
  msg = LoadError(Replace(kSmall, "hbm_tbps: 2.0", "hbm_tbps: .inf"));
  EXPECT_THAT(msg, HasSubstr("key 'accelerators.0.hbm_tbps'"));
  msg = LoadError(Replace(kSmall, "released: 2022", "released: 22"));
  EXPECT_THAT(msg, HasSubstr("expected a year"));
}

TEST(CatalogLoad, RefusesMissingRequiredFields) {
  std::string msg = LoadError(Replace(kSmall, "    vcpus: 16\n", ""));
  EXPECT_THAT(msg, MatchesRegex("t\\.yaml:[0-9]+:[0-9]+: key 'sizes\\.0': missing required key "
                                "'vcpus' for size 'Standard_NC8x_X_v1'; add it"));
  msg = LoadError(Replace(kSmall, "    memory_gib: 80\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'memory_gib' for accelerator 'X-80GB'"));
  msg = LoadError(Replace(kSmall, "    default_mfu: 0.4\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'default_mfu'"));
  msg = LoadError(Replace(kSmall, "    series: Fsv9\n", ""));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.1': missing required key 'series'"));
  msg = LoadError(Replace(kSmall, "    kind: gpu\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'kind'"));
  msg = LoadError(Replace(kSmall, "    gpus: 2\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'gpus'"));
  msg = LoadError(Replace(kSmall, "    cpu_class: compute\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'cpu_class' for size 'Standard_F4s_v9'"));
  msg = LoadError(Replace(kSmall, "memory_gib: 80", "memory_gib: unknown"));
  EXPECT_THAT(msg, HasSubstr("cannot be 'unknown'"));
  msg = LoadError(Replace(kSmall, "  - name: Standard_F4s_v9\n", "  - nam: Standard_F4s_v9\n"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'sizes.1.name'?"));
}

TEST(CatalogLoad, RefusesUnknownKeysWithASuggestion) {
  std::string msg = LoadError(Replace(kSmall, "vcpus: 16", "vcpu: 16"));
  EXPECT_THAT(msg, MatchesRegex("t\\.yaml:[0-9]+:[0-9]+: unknown key 'sizes\\.0\\.vcpu' \\(did "
                                "you mean 'sizes\\.0\\.vcpus'\\?\\).*"));
  msg = LoadError(Replace(kSmall, "fp8: unknown", "fp4: unknown"));
  EXPECT_THAT(msg, HasSubstr("unknown key 'accelerators.0.peak_tflops.fp4'"));
  msg = LoadError(Replace(kSmall, "spot: unknown", "spto: unknown"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'sizes.0.prices.EastUS.spot'?"));
  msg = LoadError(Replace(kSmall, "currency: USD", "currency: USD\nsize: []"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'sizes'?"));
}

TEST(CatalogLoad, RefusesDuplicateSizesIgnoringCase) {
  std::string dup =
      Replace(kSmall, "  - name: Standard_F4s_v9\n", "  - name: standard_nc8X_x_V1\n");
  std::string msg = LoadError(dup);
  EXPECT_THAT(msg, HasSubstr("key 'sizes.1.name': size 'standard_nc8X_x_V1' is listed twice"));
  EXPECT_THAT(msg, HasSubstr("first at t.yaml:"));
  // Without the prefix it is still the same size.
  msg = LoadError(Replace(kSmall, "  - name: Standard_F4s_v9\n", "  - name: NC8x_X_v1\n"));
  EXPECT_THAT(msg, HasSubstr("listed twice"));
}

TEST(CatalogLoad, RefusesDuplicateAccelerators) {
  std::string yaml = Replace(kSmall, "sizes:\n",
                             "  - name: x-80gb\n    memory_gib: 40\n    default_mfu: 0.3\n"
                             "    source: dup\nsizes:\n");
  std::string msg = LoadError(yaml);
  EXPECT_THAT(msg, HasSubstr("key 'accelerators.1.name': accelerator 'x-80gb' is defined twice"));
}

TEST(CatalogLoad, RefusesAnUndefinedAccelerator) {
  std::string msg = LoadError(Replace(kSmall, "accelerator: X-80GB", "accelerator: Y-40GB"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.accelerator': accelerator 'Y-40GB' is not defined"));
  EXPECT_THAT(msg, HasSubstr("X-80GB"));  // lists what is defined
  // Case differences resolve to the canonical name.
  Result<Catalog> cat =
      Catalog::LoadString(Replace(kSmall, "accelerator: X-80GB", "accelerator: x-80gb"), "t");
  ASSERT_TRUE(cat.ok()) << cat.status().ToString();
  EXPECT_EQ(cat->sizes()[0].accelerator, "X-80GB");
  EXPECT_NE(cat->AcceleratorOf(cat->sizes()[0]), nullptr);
}

TEST(CatalogLoad, RefusesABadKindAndMixedUpFields) {
  std::string msg = LoadError(Replace(kSmall, "kind: gpu", "kind: tpu"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.0.kind': kind must be 'gpu' or 'cpu', got 'tpu'"));
  msg = LoadError(Replace(kSmall, "cpu_class: compute", "cpu_class: fast"));
  EXPECT_THAT(msg, HasSubstr("cpu_class must be 'compute', 'general' or 'memory'"));
  msg = LoadError(
      Replace(kSmall, "cpu_class: compute", "cpu_class: compute\n    accelerator: X-80GB"));
  EXPECT_THAT(msg, HasSubstr("key 'sizes.1.accelerator': a cpu size has no accelerator"));
  msg = LoadError(Replace(kSmall, "cpu_class: compute", "cpu_class: compute\n    gpus: 1"));
  EXPECT_THAT(msg, HasSubstr("a cpu size has no GPUs"));
  msg = LoadError(Replace(kSmall, "kind: gpu", "kind: gpu\n    cpu_class: memory"));
  EXPECT_THAT(msg, HasSubstr("cpu_class is for cpu sizes only"));
}

TEST(CatalogLoad, RefusesDefaultMfuOutOfRange) {
  std::string msg = LoadError(Replace(kSmall, "default_mfu: 0.4", "default_mfu: 1.5"));
  EXPECT_THAT(msg, HasSubstr("key 'accelerators.0.default_mfu': must be in (0, 1], got 1.5"));
  msg = LoadError(Replace(kSmall, "default_mfu: 0.4", "default_mfu: 0"));
  EXPECT_THAT(msg, HasSubstr("key 'accelerators.0.default_mfu': must be greater than 0"));
  EXPECT_TRUE(LoadError(Replace(kSmall, "default_mfu: 0.4", "default_mfu: 1")).empty());
}

TEST(CatalogLoad, RefusesOtherVersions) {
  std::string msg = LoadError(Replace(kSmall, "version: 1", "version: 2"));
  EXPECT_THAT(msg, MatchesRegex("t\\.yaml:1:[0-9]+: key 'version': catalog format version 2 is "
                                "not supported; this Gantry reads version 1"));
  msg = LoadError(Replace(kSmall, "version: 1\n", ""));
  EXPECT_THAT(msg, HasSubstr("missing required key 'version'"));
}

TEST(CatalogLoad, RefusesDuplicateRegionsAndEmptyCatalogs) {
  std::string msg = LoadError(Replace(kSmall, "westus2:", "eastus:"));
  EXPECT_THAT(msg, HasSubstr("region 'eastus' is listed twice"));
  msg = LoadError("version: 1\naccelerators: []\nsizes: []\n");
  EXPECT_THAT(msg, HasSubstr("lists no sizes"));
  msg = LoadError("version: 1\nsizes: [\n");
  EXPECT_THAT(msg, HasSubstr("t.yaml"));
}

TEST(CatalogLoad, LoadFileOfAMissingFileIsNotFound) {
  Result<Catalog> cat = Catalog::LoadFile("/nonexistent/gantry/catalog.yaml");
  ASSERT_FALSE(cat.ok());
  EXPECT_EQ(cat.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(cat.status().message(), HasSubstr("/nonexistent/gantry/catalog.yaml"));
}

// ------------------------------------------------------------ price sheets ---

TEST(PriceSheet, Applies) {
  Catalog cat = Builtin();
  Result<int> n = cat.MergePriceSheetString(
      "size,region,payg,spot,reserved_1y,reserved_3y,savings_1y,savings_3y\n"
      "Standard_ND96isr_H200_v5,eastus,84.5,,50.1,,60,\n"
      "nc24ads_a100_v4,WestUS2,4.1,0.5,,,,\n",
      "prices.csv");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  Price h200 = Size(cat, "Standard_ND96isr_H200_v5").PriceIn("eastus");
  EXPECT_DOUBLE_EQ(h200.payg.value_or(0), 84.5);
  EXPECT_DOUBLE_EQ(h200.reserved_1y.value_or(0), 50.1);
  EXPECT_DOUBLE_EQ(h200.savings_1y.value_or(0), 60);
  EXPECT_FALSE(h200.spot.has_value());
  EXPECT_FALSE(h200.reserved_3y.has_value());
  Price nc = Size(cat, "Standard_NC24ads_A100_v4").PriceIn("westus2");
  EXPECT_DOUBLE_EQ(nc.payg.value_or(0), 4.1);
  EXPECT_DOUBLE_EQ(nc.spot.value_or(0), 0.5);
  EXPECT_THAT(cat.Regions(), ElementsAre("eastus", "westus2"));
  // The built-in catalog itself is untouched.
  EXPECT_FALSE(Size(Builtin(), "Standard_ND96isr_H200_v5").PriceIn("eastus").payg.has_value());
}

TEST(PriceSheet, ShortHeaderQuotesCrlfAndComments) {
  Catalog cat = Builtin();
  Result<int> n = cat.MergePriceSheetString(
      "\xEF\xBB\xBF# refreshed from the Retail Prices API\r\n"
      " Size , Region , SPOT \r\n"
      "\r\n"
      "\"Standard_F16s_v2\",eastus, 0.07 \r\n",
      "prices.csv");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  Price f16 = Size(cat, "Standard_F16s_v2").PriceIn("eastus");
  EXPECT_DOUBLE_EQ(f16.spot.value_or(0), 0.07);
  EXPECT_DOUBLE_EQ(f16.payg.value_or(0), 0.677);  // not in the sheet: kept
}

TEST(PriceSheet, UnknownAndEmptyCellsLeaveTheValue) {
  Catalog cat = Builtin();
  Result<int> n = cat.MergePriceSheetString(
      "size,region,payg,spot\n"
      "Standard_ND96isr_H100_v5,eastus,,unknown\n"
      "Standard_NC4as_T4_v3,eastus,UNKNOWN,0.05\n"
      "Standard_NC8as_T4_v3,northeurope,,\n",
      "prices.csv");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);  // only the T4 row changed anything
  Price h100 = Size(cat, "Standard_ND96isr_H100_v5").PriceIn("eastus");
  EXPECT_DOUBLE_EQ(h100.payg.value_or(0), 98.32);
  EXPECT_FALSE(h100.spot.has_value());
  Price t4 = Size(cat, "Standard_NC4as_T4_v3").PriceIn("eastus");
  EXPECT_DOUBLE_EQ(t4.payg.value_or(0), 0.526);
  EXPECT_DOUBLE_EQ(t4.spot.value_or(0), 0.05);
  // An all-empty row adds no region.
  EXPECT_EQ(Size(cat, "Standard_NC8as_T4_v3").prices.count("northeurope"), 0u);
  EXPECT_THAT(cat.Regions(), ElementsAre("eastus"));
}

Status MergeError(std::string_view csv) {
  Catalog cat = Builtin();
  Result<int> n = cat.MergePriceSheetString(csv, "prices.csv");
  EXPECT_FALSE(n.ok());
  if (n.ok()) return Status::Ok();
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument);
  // A refused sheet changes nothing, even rows before the bad one.
  EXPECT_DOUBLE_EQ(Size(cat, "Standard_F8s_v2").PriceIn("eastus").payg.value_or(0), 0.338);
  return n.status();
}

TEST(PriceSheet, RefusesAnUnknownSizeNamingTheLine) {
  Status s = MergeError(
      "size,region,payg\n"
      "Standard_F8s_v2,eastus,9.99\n"
      "Standard_ND96isr_H100_v6,eastus,90\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:3: size 'Standard_ND96isr_H100_v6' is not in "
                                     "the catalog"));
  EXPECT_THAT(s.message(), HasSubstr("did you mean 'Standard_ND96isr_H100_v5'?"));
}

TEST(PriceSheet, RefusesNegativeAndNonNumericPrices) {
  Status s =
      MergeError("size,region,payg\nStandard_F8s_v2,eastus,9.99\nStandard_D8s_v5,eastus,-1\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:3: column 'payg': '-1' is not a price"));
  s = MergeError("size,region,payg,spot\nStandard_F8s_v2,eastus,1,cheap\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:2: column 'spot': 'cheap' is not a price"));
  s = MergeError("size,region,payg\nStandard_F8s_v2,eastus,nan\n");
  EXPECT_THAT(s.message(), HasSubstr("'nan' is not a price"));
}

TEST(PriceSheet, RefusesBadHeaders) {
  Status s = MergeError("Standard_F8s_v2,eastus,1\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:1: expected the header row 'size,region,payg"));
  s = MergeError("size,region,price\nStandard_F8s_v2,eastus,1\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:1: unknown column 'price'"));
  s = MergeError("size,region,payg,payg\n");
  EXPECT_THAT(s.message(), HasSubstr("column 'payg' appears twice"));
  s = MergeError("");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv: the price sheet is empty"));
}

TEST(PriceSheet, RefusesMalformedLines) {
  Status s = MergeError("size,region,payg\nStandard_F8s_v2,eastus\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:2: 2 cells, but the header has 3 columns"));
  s = MergeError("size,region,payg\nStandard_F8s_v2,,1\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:2: '' is not a region name"));
  s = MergeError("size,region,payg\nStandard_F8s_v2,eastus,1\nstandard_f8s_v2,EastUS,2\n");
  EXPECT_THAT(s.message(), HasSubstr("prices.csv:3: size 'standard_f8s_v2' in region 'eastus' "
                                     "was already given at line 2"));
}

TEST(PriceSheet, FromAFile) {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("gantry_catalog_test_" + std::to_string(::getpid()) + ".csv");
  {
    std::ofstream out(path);
    out << "size,region,payg\nStandard_M128s,eastus,12.5\n";
  }
  Catalog cat = Builtin();
  Result<int> n = cat.MergePriceSheet(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_DOUBLE_EQ(Size(cat, "Standard_M128s").PriceIn("eastus").payg.value_or(0), 12.5);

  Result<int> missing = cat.MergePriceSheet("/nonexistent/gantry/prices.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::advise
