// Element types and reduction operators of Gantry's collectives, named as
// nccl-tests names them so that `-d` and `-o` take the same words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::comm {

enum class DataType : uint8_t {
  kInt8,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kHalf,      // IEEE 754 binary16
  kFloat,     // binary32
  kDouble,    // binary64
  kBfloat16,  // bfloat16 (upper half of a binary32)
};
inline constexpr int kNumDataTypes = 10;

enum class ReduceOp : uint8_t { kSum, kProd, kMax, kMin, kAvg };
inline constexpr int kNumReduceOps = 5;

// Every type and op, in nccl-tests' `-d all` / `-o all` order.
std::span<const DataType> AllDataTypes();
std::span<const ReduceOp> AllReduceOps();

size_t DataTypeSize(DataType type);
// "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
// "double", "bfloat16".
std::string_view DataTypeName(DataType type);
// Also accepts nccl-tests' aliases: char, int, float16/fp16, float32/fp32,
// float64/fp64, bf16.
Result<DataType> ParseDataType(std::string_view name);
bool IsFloatingPoint(DataType type);

// "sum", "prod", "max", "min", "avg".
std::string_view ReduceOpName(ReduceOp op);
Result<ReduceOp> ParseReduceOp(std::string_view name);

// 16-bit float storage types. Arithmetic is done in float and rounded back
// (round-to-nearest-even), which is what NCCL does for these types on the host.
struct Half {
  uint16_t bits;
};
struct Bfloat16 {
  uint16_t bits;
};

float HalfToFloat(Half h);
Half FloatToHalf(float f);
inline float Bfloat16ToFloat(Bfloat16 b) {
  uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline Bfloat16 FloatToBfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return Bfloat16{static_cast<uint16_t>((u >> 16) | 0x40)};  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return Bfloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace gantry::comm
