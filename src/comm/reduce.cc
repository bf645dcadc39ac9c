#include "reduce.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 conversion intrinsics start from _mm512_undefined_*(), which
// -Wmaybe-uninitialized reports at every inlined call (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The loops below are element-wise: out[i] depends only on element i of each
// input. An output that is the very same array as an input is therefore safe,
// and this pragma stops the vectoriser from falling back to scalar code when it
// cannot prove the arrays are distinct.
#if defined(__clang__)
#define GANTRY_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define GANTRY_IVDEP _Pragma("GCC ivdep")
#else
#define GANTRY_IVDEP
#endif

namespace gantry::comm::internal {
namespace {

// Work happens tile by tile so that partial results stay in L1 while the inputs
// stream past once.
constexpr size_t kTileBytes = 8192;

// Integers wrap: compute in the unsigned type of the same width.
template <typename T, bool = std::is_integral_v<T>>
struct ArithOf {
  using type = T;
};
template <typename T>
struct ArithOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Arith = typename ArithOf<T>::type;

struct SumOp {
  static constexpr bool kRounds = true;  // the float result needs rounding to 16 bits
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b));
  }
};
struct ProdOp {
  static constexpr bool kRounds = true;
  template <typename T>
  static T Apply(T a, T b) {
    return static_cast<T>(static_cast<Arith<T>>(a) * static_cast<Arith<T>>(b));
  }
};
struct MaxOp {
  static constexpr bool kRounds = false;  // picks an input, already representable
  template <typename T>
  static T Apply(T a, T b) {
    return a > b ? a : b;
  }
};
struct MinOp {
  static constexpr bool kRounds = false;
  template <typename T>
  static T Apply(T a, T b) {
    return a < b ? a : b;
  }
};

template <typename T, typename Op>
void Combine(T* out, const T* a, const T* b, size_t n) {
  GANTRY_IVDEP
  for (size_t i = 0; i < n; ++i) out[i] = Op::Apply(a[i], b[i]);
}

template <typename T>
void Divide(T* x, size_t n, int d) {
  // int8/uint8 divide in int: the rank count may not fit in the element type.
  using Divisor = std::conditional_t<(sizeof(T) < sizeof(int)), int, T>;
  const Divisor div = static_cast<Divisor>(d);
  GANTRY_IVDEP
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<T>(x[i] / div);
}

void CopyOut(void* const* dsts, int ndst, size_t offset, const void* tile, size_t bytes,
             bool stream) {
  for (int d = 0; d < ndst; ++d) {
    void* dst = static_cast<uint8_t*>(dsts[d]) + offset;
    if (dst == tile) continue;
    if (stream) {
      CopyStream(dst, tile, bytes);
    } else {
      std::memcpy(dst, tile, bytes);
    }
  }
}

// int*, uint*, float, double: computed in their own type.
template <typename T, typename Op, bool kAvg>
void ReduceNative(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
                  bool stream) {
  constexpr size_t kTile = kTileBytes / sizeof(T);
  alignas(64) T tile[kTile];
  auto src = [&](int k) { return static_cast<const T*>(srcs[k]); };
  // With one plain destination, compute straight into it, unless it is one of
  // the inputs read after the first pass (it would be overwritten too early).
  bool direct = ndst == 1 && !stream;
  for (int k = 2; k < nsrc && direct; ++k) direct = dsts[0] != srcs[k];
  for (size_t base = 0; base < count; base += kTile) {
    const size_t n = std::min(kTile, count - base);
    T* out = direct ? static_cast<T*>(dsts[0]) + base : tile;
    if (nsrc == 1) {
      if (out != src(0) + base) std::memcpy(out, src(0) + base, n * sizeof(T));
    } else {
      Combine<T, Op>(out, src(0) + base, src(1) + base, n);
      for (int k = 2; k < nsrc; ++k) Combine<T, Op>(out, out, src(k) + base, n);
    }
    if constexpr (kAvg) Divide(out, n, nsrc);
    if (!direct) CopyOut(dsts, ndst, base * sizeof(T), tile, n * sizeof(T), stream);
  }
}

// binary16 <-> float, vectorised with F16C / AVX-512 where the build has them.
// The hardware conversions round to nearest even and treat NaN exactly like
// HalfToFloat/FloatToHalf (the tests compare them over every bit pattern).
struct HalfFormat {
  static void Load(float* out, const uint16_t* in, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
      _mm512_storeu_ps(
          out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i))));
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(out + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
    }
#endif
    for (; i < n; ++i) out[i] = HalfToFloat(Half{in[i]});
  }
  static void Store(uint16_t* out, const float* in, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(out + i),
          _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      _mm_storeu_si128(
          reinterpret_cast<__m128i*>(out + i),
          _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#endif
    for (; i < n; ++i) out[i] = FloatToHalf(in[i]).bits;
  }
  static void Round(float* x, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
      const __m256i h =
          _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm512_storeu_ps(x + i, _mm512_cvtph_ps(h));
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      const __m128i h =
          _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
#endif
    for (; i < n; ++i) x[i] = HalfToFloat(FloatToHalf(x[i]));
  }
};

// bfloat16 is the top half of a float; plain integer code the compiler vectorises.
struct Bfloat16Format {
  // Same rounding as FloatToBfloat16, keeping the result in float.
  static uint32_t RoundBits(uint32_t u) {
    const uint32_t nan = (u | 0x400000u) & 0xffff0000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  }
  static void Load(float* out, const uint16_t* in, size_t n) {
    for (size_t i = 0; i < n; ++i)
      out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
  }
  static void Store(uint16_t* out, const float* in, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      out[i] = static_cast<uint16_t>(RoundBits(std::bit_cast<uint32_t>(in[i])) >> 16);
    }
  }
  static void Round(float* x, size_t n) {
    for (size_t i = 0; i < n; ++i)
      x[i] = std::bit_cast<float>(RoundBits(std::bit_cast<uint32_t>(x[i])));
  }
};

// half and bfloat16: widened to float, rounded back to 16 bits after every step.
template <typename Format, typename Op, bool kAvg>
void Reduce16(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
              bool stream) {
  constexpr size_t kTile = kTileBytes / sizeof(float);
  alignas(64) float acc[kTile];
  alignas(64) float in[kTile];
  alignas(64) uint16_t out[kTile];
  auto src = [&](int k) { return static_cast<const uint16_t*>(srcs[k]); };
  for (size_t base = 0; base < count; base += kTile) {
    const size_t n = std::min(kTile, count - base);
    Format::Load(acc, src(0) + base, n);
    for (int k = 1; k < nsrc; ++k) {
      Format::Load(in, src(k) + base, n);
      Combine<float, Op>(acc, acc, in, n);
      if constexpr (Op::kRounds) Format::Round(acc, n);
    }
    if constexpr (kAvg) Divide(acc, n, nsrc);  // the store below rounds the quotient
    // Every input of this tile has been read, so writing a destination that is
    // also an input is safe.
    if (ndst == 1 && !stream) {
      Format::Store(static_cast<uint16_t*>(dsts[0]) + base, acc, n);
    } else {
      Format::Store(out, acc, n);
      CopyOut(dsts, ndst, base * sizeof(uint16_t), out, n * sizeof(uint16_t), stream);
    }
  }
}

template <typename Op, bool kAvg>
void Dispatch(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
              DataType type, bool stream) {
  switch (type) {
    case DataType::kInt8:
      return ReduceNative<int8_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kUint8:
      return ReduceNative<uint8_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kInt32:
      return ReduceNative<int32_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kUint32:
      return ReduceNative<uint32_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kInt64:
      return ReduceNative<int64_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kUint64:
      return ReduceNative<uint64_t, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kHalf:
      return Reduce16<HalfFormat, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kFloat:
      return ReduceNative<float, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kDouble:
      return ReduceNative<double, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
    case DataType::kBfloat16:
      return Reduce16<Bfloat16Format, Op, kAvg>(dsts, ndst, srcs, nsrc, count, stream);
  }
}

template <typename T>
void DivideNative(void* data, size_t count, int n) {
  Divide(static_cast<T*>(data), count, n);
}

template <typename Format>
void Divide16(void* data, size_t count, int n) {
  constexpr size_t kTile = kTileBytes / sizeof(float);
  alignas(64) float tile[kTile];
  auto* p = static_cast<uint16_t*>(data);
  for (size_t base = 0; base < count; base += kTile) {
    const size_t len = std::min(kTile, count - base);
    Format::Load(tile, p + base, len);
    Divide(tile, len, n);
    Format::Store(p + base, tile, len);
  }
}

}  // namespace

void ReduceN(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
             DataType type, ReduceOp op, bool stream) {
  switch (op) {
    case ReduceOp::kSum:
      return Dispatch<SumOp, false>(dsts, ndst, srcs, nsrc, count, type, stream);
    case ReduceOp::kProd:
      return Dispatch<ProdOp, false>(dsts, ndst, srcs, nsrc, count, type, stream);
    case ReduceOp::kMax:
      return Dispatch<MaxOp, false>(dsts, ndst, srcs, nsrc, count, type, stream);
    case ReduceOp::kMin:
      return Dispatch<MinOp, false>(dsts, ndst, srcs, nsrc, count, type, stream);
    case ReduceOp::kAvg:
      return Dispatch<SumOp, true>(dsts, ndst, srcs, nsrc, count, type, stream);
  }
}

void Accumulate(void* inout, const void* in, size_t count, DataType type, ReduceOp op) {
  const void* srcs[2] = {inout, in};
  ReduceN(&inout, 1, srcs, 2, count, type, op == ReduceOp::kAvg ? ReduceOp::kSum : op, false);
}

void DivideBy(void* data, size_t count, DataType type, int n) {
  switch (type) {
    case DataType::kInt8:
      return DivideNative<int8_t>(data, count, n);
    case DataType::kUint8:
      return DivideNative<uint8_t>(data, count, n);
    case DataType::kInt32:
      return DivideNative<int32_t>(data, count, n);
    case DataType::kUint32:
      return DivideNative<uint32_t>(data, count, n);
    case DataType::kInt64:
      return DivideNative<int64_t>(data, count, n);
    case DataType::kUint64:
      return DivideNative<uint64_t>(data, count, n);
    case DataType::kHalf:
      return Divide16<HalfFormat>(data, count, n);
    case DataType::kFloat:
      return DivideNative<float>(data, count, n);
    case DataType::kDouble:
      return DivideNative<double>(data, count, n);
    case DataType::kBfloat16:
      return Divide16<Bfloat16Format>(data, count, n);
  }
}

void CopyStream(void* dst, const void* src, size_t bytes) {
#if defined(__SSE2__)
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  // Non-temporal stores need an aligned destination: copy up to the first 64-byte
  // boundary normally.
  const size_t head = std::min(bytes, (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
#elif defined(__AVX__)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32)));
#else
    for (int k = 0; k < 64; k += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + k)));
    }
#endif
  }
  std::memcpy(d, s, bytes);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace gantry::comm::internal
