#include "format.h"

#include <gtest/gtest.h>

#include <fstream>

#include "ckpt_test_util.h"
#include "gantry/ckpt/dtype.h"

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
  m.shards.push_back({"shard-00000-of-00001.safetensors", 0, 5000});
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

// A valid one-tensor manifest that the hostile tests below corrupt.
Json GoodManifest() {
  internal::Manifest m;
  m.step = 1;
  m.chunk_bytes = 4;
  m.shards.push_back({"shard-00000-of-00001.safetensors", 0, 4096 + 12});
  m.tensors.push_back({"w", DType::kBF16, {2, 3}, 0, 4096, 12, {1, 2, 3}});
  return internal::ManifestToJson(m);
}

TEST(FormatTest, ManifestWithHugeChunkBytesIsDataLoss) {
  ASSERT_TRUE(internal::ManifestFromJson(GoodManifest(), "m.json").ok());
  for (uint64_t cb : {uint64_t{0}, (uint64_t{1} << 30) + 1, uint64_t{1} << 62}) {
    Json j = GoodManifest();
    j["chunk_bytes"] = cb;
    auto r = internal::ManifestFromJson(j, "m.json");
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << cb;
    EXPECT_NE(r.status().message().find("m.json: chunk_bytes " + std::to_string(cb)),
              std::string::npos)
        << r.status().message();
  }
}

// Found by fuzz_ckpt_format: integers in a manifest that are floats, too big
// for their field or negative where a size is meant were cast blindly.
TEST(FormatTest, ManifestIntegersMustBeIntegersInRange) {
  const std::vector<std::pair<std::string, Json>> cases = {
      {"step", Json(1.79e87)},       {"world_size", Json(uint64_t{1} << 40)},
      {"chunk_bytes", Json(-1)},     {"format_version", Json("1")},
      {"created_unix_s", Json(0.5)},
  };
  for (const auto& [key, value] : cases) {
    Json j = GoodManifest();
    j[key] = value;
    auto r = internal::ManifestFromJson(j, "m.json");
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << key << "=" << value.dump();
    EXPECT_NE(r.status().message().find("m.json"), std::string::npos) << r.status().message();
  }
  Json j = GoodManifest();
  j["tensors"][0]["shape"] = Json::array({2.5});
  EXPECT_EQ(internal::ManifestFromJson(j, "m.json").status().code(), StatusCode::kDataLoss);
  j = GoodManifest();
  j["tensors"][0]["offset"] = -4096;
  EXPECT_EQ(internal::ManifestFromJson(j, "m.json").status().code(), StatusCode::kDataLoss);
}

TEST(FormatTest, ManifestTensorOutsideItsShardIsDataLossNamingIt) {
  Json j = GoodManifest();
  j["shards"][0]["bytes"] = 4096 + 11;
  auto r = internal::ManifestFromJson(j, "m.json");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("tensor 'w' claims bytes"), std::string::npos)
      << r.status().message();
  // offset + length wraps around 2^64.
  j = GoodManifest();
  j["tensors"][0]["offset"] = ~uint64_t{0} - 4;
  r = internal::ManifestFromJson(j, "m.json");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("tensor 'w'"), std::string::npos);
}

TEST(FormatTest, ManifestLengthMustMatchShapeWithoutOverflow) {
  Json j = GoodManifest();
  j["tensors"][0]["length"] = 10;
  j["tensors"][0]["chunks"] = Json::array({"1", "2", "3"});
  auto r = internal::ManifestFromJson(j, "m.json");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("tensor 'w' has 10 bytes, which does not match"),
            std::string::npos)
      << r.status().message();
  // 2^62 x 4 bytes wraps to 0 in 64 bits.
  j = GoodManifest();
  j["tensors"][0]["dtype"] = "U8";
  j["tensors"][0]["shape"] = Json::array({int64_t{1} << 62, 4});
  j["tensors"][0]["length"] = 0;
  j["tensors"][0]["chunks"] = Json::array();
  EXPECT_EQ(internal::ManifestFromJson(j, "m.json").status().code(), StatusCode::kDataLoss);
  // length 2^64 - 1 (shape 3*5*17*257*641*65537*6700417) with chunk_bytes 4:
  // (length + 3) / 4 wraps to 0 chunks.
  j = GoodManifest();
  j["shards"][0]["bytes"] = ~uint64_t{0};
  j["tensors"][0]["dtype"] = "U8";
  j["tensors"][0]["shape"] = Json::array({3, 5, 17, 257, 641, 65537, 6700417});
  j["tensors"][0]["offset"] = 0;
  j["tensors"][0]["length"] = ~uint64_t{0};
  j["tensors"][0]["chunks"] = Json::array();
  r = internal::ManifestFromJson(j, "m.json");
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("chunk checksums, expected 4611686018427387904"),
            std::string::npos)
      << r.status().message();
}

TEST(FormatTest, ValidateTensorsRejectsOverflowAndNonUtf8Names) {
  char byte = 0;
  std::vector<TensorView> huge = {{"h", DType::kU8, {int64_t{1} << 62, 4}, &byte, 0}};
  auto st = internal::ValidateTensors(huge);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tensor 'h'"), std::string::npos) << st.message();
  for (std::string bad : {std::string("w\xff"), std::string("\xc0\xaf"), std::string("a\xe2\x82"),
                          std::string("\xed\xa0\x80")}) {
    std::vector<TensorView> t = {{bad, DType::kU8, {1}, &byte, 1}};
    st = internal::ValidateTensors(t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("not valid UTF-8"), std::string::npos) << st.message();
  }
  std::vector<TensorView> ok = {
      {"caf\xc3\xa9.\xe2\x82\xac.\xf0\x9f\x98\x80", DType::kU8, {1}, &byte, 1}};
  EXPECT_TRUE(internal::ValidateTensors(ok).ok());
}

// Writes a safetensors file with `header` and `data_bytes` bytes of data.
std::string WriteRawSafetensors(const std::string& dir, const std::string& header,
                                size_t data_bytes) {
  const std::string path = dir + "/raw.safetensors";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
  f << header << std::string(data_bytes, 'd');
  return path;
}

TEST(FormatTest, HostileSafetensorsHeadersAreDataLossNamingTheTensor) {
  testing::TempDir tmp;
  const std::string& dir = tmp.path();
  struct Case {
    std::string header;
    std::string want;
  } cases[] = {
      // data_start + end wraps around 2^64 and would pass a naive bound.
      {R"({"t":{"dtype":"U8","shape":[10],"data_offsets":[18446744073709551596,18446744073709551606]}})",
       "tensor 't' has data_offsets outside the file"},
      {R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})",
       "tensor 't' spans 8 bytes, which does not match"},
      {R"({"t":{"dtype":"U8","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
       "tensor 't' spans 0 bytes, which does not match"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteRawSafetensors(dir, c.header, 16);
    auto r = ReadSafetensors(path);
    ASSERT_EQ(r.status().code(), StatusCode::kDataLoss) << c.header;
    EXPECT_NE(r.status().message().find(path + ": " + c.want), std::string::npos)
        << r.status().message();
  }
  const std::string path =
      WriteRawSafetensors(dir, R"({"t":{"dtype":"U8","shape":[2,8],"data_offsets":[0,16]}})", 16);
  auto r = ReadSafetensors(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].data.size(), 16u);
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

}  // namespace
}  // namespace gantry::ckpt
