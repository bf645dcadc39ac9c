#include "format.h"

#include <gtest/gtest.h>

#include "gantry/ckpt/dtype.h"
#include "gantry/ckpt/plan.h"

namespace gantry::ckpt {
namespace {

TEST(DTypeTest, NamesRoundTripAndSizes) {
  for (int i = 0; i <= static_cast<int>(DType::kF8E5M2); ++i) {
    DType d = static_cast<DType>(i);
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeName(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(ParseDType("f32").status().code(), StatusCode::kInvalidArgument);
}

TEST(FormatTest, StepNames) {
  EXPECT_EQ(internal::StepName(42), "step-0000000042");
  int64_t step = 0;
  EXPECT_TRUE(internal::ParseStepName("step-0000000042", &step));
  EXPECT_EQ(step, 42);
  EXPECT_FALSE(internal::ParseStepName("step-42", &step));
  EXPECT_FALSE(internal::ParseStepName(".tmp-step-0000000042", &step));
  EXPECT_FALSE(internal::ParseStepName("step-00000000x2", &step));
}

TEST(FormatTest, SafetensorsPrefixLayout) {
  float a[3] = {1, 2, 3};
  std::vector<TensorView> t = {{"a", DType::kF32, {3}, a, 12}, {"b", DType::kF32, {}, a, 4}};
  std::string p = internal::SafetensorsPrefix(t, 4096, Json{{"k", 1}});
  ASSERT_EQ(p.size() % 4096, 0u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(p[i]);
  EXPECT_EQ(n + 8, p.size());
  auto j = ParseJson(std::string_view(p).substr(8), "header");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"]["data_offsets"], Json::array({0, 12}));
  EXPECT_EQ((*j)["b"]["data_offsets"], Json::array({12, 16}));
  EXPECT_EQ((*j)["b"]["shape"], Json::array());
  EXPECT_EQ((*j)["__metadata__"]["k"], "1");  // safetensors metadata is string to string
}

TEST(FormatTest, ManifestRoundTripAndValidation) {
  internal::Manifest m;
  m.step = 9;
  m.created = "2026-11-30T00:00:00Z";
  m.chunk_bytes = 4;
  m.shards.push_back({"shard-00000-of-00001.safetensors", 0, 100});
  m.tensors.push_back({"w", DType::kBF16, {2, 3}, 0, 4096, 12, {1, 2, 0xffffffffffffffffull}});
  Json j = internal::ManifestToJson(m);
  auto back = internal::ManifestFromJson(j, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tensors[0].chunks, m.tensors[0].chunks);
  EXPECT_EQ(back->tensors[0].dtype, DType::kBF16);
  j["tensors"][0]["chunks"].erase(0);
  auto bad = internal::ManifestFromJson(j, "m.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("tensor 'w' has 2 chunk checksums, expected 3"),
            std::string::npos);
  j = internal::ManifestToJson(m);
  j["format_version"] = kFormatVersion + 1;
  EXPECT_EQ(internal::ManifestFromJson(j, "m.json").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(FormatTest, ChunkChecksumsCoverTheTail) {
  std::string data(10, 'x');
  auto c = internal::ChunkChecksums(data.data(), data.size(), 4);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], c[1]);
  EXPECT_NE(c[1], c[2]);  // the tail is 2 bytes
  EXPECT_EQ(internal::Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(PlanTest, DalyMatchesThePaper) {
  // Daly 2006: C = 5 min; M = 24 h -> 117 min, 6 h -> 57 min, 15 min -> 9.1 min.
  auto p = PlanInterval(300, 24 * 3600);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->daly_s / 60, 116.7, 0.1);
  EXPECT_NEAR(p->young_s / 60, 120.0, 0.1);
  EXPECT_NEAR(PlanInterval(300, 6 * 3600)->daly_s / 60, 56.7, 0.1);
  EXPECT_NEAR(PlanInterval(300, 15 * 60)->daly_s / 60, 9.14, 0.02);
  EXPECT_EQ(PlanInterval(300, 100)->daly_s, 100);  // C >= 2M: checkpoint every M
}

TEST(PlanTest, BandwidthAndErrors) {
  auto p = PlanInterval(300, 24 * 3600, 100ull << 30, 0.1);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->needed_bytes_per_s, (100.0 * (1 << 30)) / (0.1 * p->daly_s), 1);
  EXPECT_EQ(PlanInterval(0, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInterval(1, -1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanInterval(1, 10, 0, 1.5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::ckpt
