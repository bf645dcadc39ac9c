#include "gantry/comm/types.h"

#include <array>
#include <string>

namespace gantry::comm {
namespace {

constexpr std::array<DataType, kNumDataTypes> kAllTypes = {
    DataType::kInt8,   DataType::kUint8, DataType::kInt32, DataType::kUint32, DataType::kInt64,
    DataType::kUint64, DataType::kHalf,  DataType::kFloat, DataType::kDouble, DataType::kBfloat16,
};
constexpr std::array<ReduceOp, kNumReduceOps> kAllOps = {
    ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg,
};

struct TypeAlias {
  std::string_view name;
  DataType type;
};
// Canonical names first, then the aliases nccl-tests and PyTorch users type.
constexpr TypeAlias kTypeNames[] = {
    {"int8", DataType::kInt8},      {"uint8", DataType::kUint8},
    {"int32", DataType::kInt32},    {"uint32", DataType::kUint32},
    {"int64", DataType::kInt64},    {"uint64", DataType::kUint64},
    {"half", DataType::kHalf},      {"float", DataType::kFloat},
    {"double", DataType::kDouble},  {"bfloat16", DataType::kBfloat16},
    {"char", DataType::kInt8},      {"int", DataType::kInt32},
    {"float16", DataType::kHalf},   {"fp16", DataType::kHalf},
    {"float32", DataType::kFloat},  {"fp32", DataType::kFloat},
    {"float64", DataType::kDouble}, {"fp64", DataType::kDouble},
    {"bf16", DataType::kBfloat16},
};

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

std::span<const DataType> AllDataTypes() { return kAllTypes; }
std::span<const ReduceOp> AllReduceOps() { return kAllOps; }

size_t DataTypeSize(DataType type) {
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kHalf:
    case DataType::kBfloat16:
      return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat:
      return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kDouble:
      return 8;
  }
  return 0;
}

std::string_view DataTypeName(DataType type) {
  for (const TypeAlias& a : kTypeNames) {
    if (a.type == type) return a.name;  // canonical names come first
  }
  return "unknown";
}

Result<DataType> ParseDataType(std::string_view name) {
  for (const TypeAlias& a : kTypeNames) {
    if (a.name == name) return a.type;
  }
  return InvalidArgument("unknown data type '" + std::string(name) +
                         "'; expected one of int8, uint8, int32, uint32, int64, uint64, half, "
                         "float, double, bfloat16 (aliases: char, int, float16, fp16, float32, "
                         "fp32, float64, fp64, bf16)");
}

bool IsFloatingPoint(DataType type) {
  return type == DataType::kHalf || type == DataType::kFloat || type == DataType::kDouble ||
         type == DataType::kBfloat16;
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kAvg:
      return "avg";
  }
  return "unknown";
}

Result<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kAllOps) {
    if (ReduceOpName(op) == name) return op;
  }
  return InvalidArgument("unknown reduction op '" + std::string(name) +
                         "'; expected one of sum, prod, max, min, avg");
}

float HalfToFloat(Half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf, nan
  if (exp != 0) return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsToFloat(sign);
  // Subnormal: mant * 2^-24. Normalise so the leading 1 lands on bit 10.
  int e = 113;  // exponent of 2^-14 (the smallest normal half), biased for float
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return BitsToFloat(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

Half FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: quiet it and keep the top payload bits (as F16C does)
    return Half{static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};
  }
  // 65520 is halfway between 65504 (the largest half) and 65536; ties go to the
  // even neighbour, which is infinity.
  if (abs >= 0x477ff000u) return Half{static_cast<uint16_t>(sign | 0x7c00u)};
  if (abs >= 0x38800000u) {  // normal half (>= 2^-14)
    uint32_t h = ((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3ffu);
    const uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
    return Half{static_cast<uint16_t>(sign | h)};
  }
  if (abs <= 0x33000000u) return Half{sign};  // <= 2^-25 rounds to zero (ties to even)
  // Subnormal half: count units of 2^-24, rounding to nearest even.
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - (abs >> 23);  // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1u))) ++h;  // 0x400 becomes the smallest normal
  return Half{static_cast<uint16_t>(sign | h)};
}

}  // namespace gantry::comm
