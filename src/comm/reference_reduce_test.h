// Test-only: a deliberately plain, scalar reference for reductions, written
// independently of reduce.cc, plus helpers to read and write elements of any
// DataType through raw bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gantry/comm/types.h"

namespace gantry::comm::testing {

// Element i of an array of `type` as a double (exact for every value the tests use).
inline double GetAsDouble(DataType type, const void* base, size_t i) {
  const auto* p = static_cast<const uint8_t*>(base) + i * DataTypeSize(type);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (type) {
    case DataType::kInt8:
      return load(int8_t{});
    case DataType::kUint8:
      return load(uint8_t{});
    case DataType::kInt32:
      return load(int32_t{});
    case DataType::kUint32:
      return load(uint32_t{});
    case DataType::kInt64:
      return static_cast<double>(load(int64_t{}));
    case DataType::kUint64:
      return static_cast<double>(load(uint64_t{}));
    case DataType::kHalf:
      return HalfToFloat(Half{load(uint16_t{})});
    case DataType::kFloat:
      return load(float{});
    case DataType::kDouble:
      return load(double{});
    case DataType::kBfloat16:
      return Bfloat16ToFloat(Bfloat16{load(uint16_t{})});
  }
  return 0;
}

// Stores integer v as element i (wrapping for narrow integers, rounding for
// 16-bit floats).
inline void SetFromInt(DataType type, void* base, size_t i, int64_t v) {
  auto* p = static_cast<uint8_t*>(base) + i * DataTypeSize(type);
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (type) {
    case DataType::kInt8:
      return store(static_cast<int8_t>(v));
    case DataType::kUint8:
      return store(static_cast<uint8_t>(v));
    case DataType::kInt32:
      return store(static_cast<int32_t>(v));
    case DataType::kUint32:
      return store(static_cast<uint32_t>(v));
    case DataType::kInt64:
      return store(static_cast<int64_t>(v));
    case DataType::kUint64:
      return store(static_cast<uint64_t>(v));
    case DataType::kHalf:
      return store(FloatToHalf(static_cast<float>(v)).bits);
    case DataType::kFloat:
      return store(static_cast<float>(v));
    case DataType::kDouble:
      return store(static_cast<double>(v));
    case DataType::kBfloat16:
      return store(FloatToBfloat16(static_cast<float>(v)).bits);
  }
}

namespace detail {

template <typename T>
T Wrap(ReduceOp op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case ReduceOp::kProd:
      return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                           static_cast<uint64_t>(static_cast<U>(b))));
    case ReduceOp::kMax:
      return a > b ? a : b;
    case ReduceOp::kMin:
      return a < b ? a : b;
  }
  return a;
}

template <typename T>
T Float(ReduceOp op, T a, T b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return a > b ? a : b;
    case ReduceOp::kMin:
      return a < b ? a : b;
  }
  return a;
}

template <typename T>
void ReduceInts(ReduceOp op, const std::vector<const void*>& srcs, size_t i, void* out) {
  auto at = [&](size_t k) {
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(srcs[k]) + i * sizeof(T), sizeof v);
    return v;
  };
  T acc = at(0);
  for (size_t k = 1; k < srcs.size(); ++k) acc = Wrap<T>(op, acc, at(k));
  if (op == ReduceOp::kAvg) acc = static_cast<T>(acc / static_cast<int64_t>(srcs.size()));
  std::memcpy(out, &acc, sizeof acc);
}

template <typename T>
void ReduceFloats(ReduceOp op, const std::vector<const void*>& srcs, size_t i, void* out) {
  auto at = [&](size_t k) {
    T v;
    std::memcpy(&v, static_cast<const uint8_t*>(srcs[k]) + i * sizeof(T), sizeof v);
    return v;
  };
  T acc = at(0);
  for (size_t k = 1; k < srcs.size(); ++k) acc = Float<T>(op, acc, at(k));
  if (op == ReduceOp::kAvg) acc = acc / static_cast<T>(srcs.size());
  std::memcpy(out, &acc, sizeof acc);
}

// 16-bit floats: each step in float, rounded back to 16 bits.
template <typename ToFloat, typename FromFloat>
void Reduce16(ReduceOp op, const std::vector<const void*>& srcs, size_t i, void* out,
              ToFloat to_float, FromFloat from_float) {
  auto at = [&](size_t k) {
    uint16_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(srcs[k]) + i * 2, 2);
    return to_float(v);
  };
  uint16_t acc = from_float(at(0));
  for (size_t k = 1; k < srcs.size(); ++k) acc = from_float(Float<float>(op, to_float(acc), at(k)));
  if (op == ReduceOp::kAvg) acc = from_float(to_float(acc) / static_cast<float>(srcs.size()));
  std::memcpy(out, &acc, 2);
}

}  // namespace detail

// out = srcs[0][i] op srcs[1][i] op ... (left to right), one element.
inline void ReferenceReduce(DataType type, ReduceOp op, const std::vector<const void*>& srcs,
                            size_t i, void* out) {
  switch (type) {
    case DataType::kInt8:
      return detail::ReduceInts<int8_t>(op, srcs, i, out);
    case DataType::kUint8:
      return detail::ReduceInts<uint8_t>(op, srcs, i, out);
    case DataType::kInt32:
      return detail::ReduceInts<int32_t>(op, srcs, i, out);
    case DataType::kUint32:
      return detail::ReduceInts<uint32_t>(op, srcs, i, out);
    case DataType::kInt64:
      return detail::ReduceInts<int64_t>(op, srcs, i, out);
    case DataType::kUint64:
      return detail::ReduceInts<uint64_t>(op, srcs, i, out);
    case DataType::kFloat:
      return detail::ReduceFloats<float>(op, srcs, i, out);
    case DataType::kDouble:
      return detail::ReduceFloats<double>(op, srcs, i, out);
    case DataType::kHalf:
      return detail::Reduce16(
          op, srcs, i, out, [](uint16_t b) { return HalfToFloat(Half{b}); },
          [](float f) { return FloatToHalf(f).bits; });
    case DataType::kBfloat16:
      return detail::Reduce16(
          op, srcs, i, out, [](uint16_t b) { return Bfloat16ToFloat(Bfloat16{b}); },
          [](float f) { return FloatToBfloat16(f).bits; });
  }
}

}  // namespace gantry::comm::testing
