#include "data.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace gantry::bench::internal {
namespace {

using comm::DataType;
using comm::ReduceOp;

// splitmix64's finaliser: a cheap bijective mixer, good enough to make
// neighbouring elements, ranks and seeds unrelated.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A value in [0, range) from well-mixed bits, without a division (Lemire).
uint64_t Below(uint64_t h, uint64_t range) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * range) >> 64);
}

// Element i of a stream is Mix(base + i). Streams >= 0 are ranks; negative
// streams are sentinels.
uint64_t StreamBase(uint64_t seed, int64_t stream) {
  return Mix(Mix(seed ^ 0x632be59bd9b4e019ull) +
             static_cast<uint64_t>(stream) * 0xd6e8feb86659fd93ull);
}

std::vector<uint64_t> RankBases(const DataSpec& spec) {
  std::vector<uint64_t> bases(spec.nranks);
  for (int r = 0; r < spec.nranks; ++r) bases[r] = StreamBase(spec.seed, r);
  return bases;
}

// ---------------------------------------------------------------- integers

template <typename T>
T IntInput(std::optional<ReduceOp> op, int nranks, uint64_t h) {
  if (!op) return static_cast<T>(h);
  switch (*op) {
    case ReduceOp::kProd:
      return static_cast<T>(h | 1);  // odd: the product never collapses to zero
    case ReduceOp::kAvg: {
      // The sum of nranks values must not overflow, so that sum / nranks is the
      // same whichever way a backend accumulates.
      uint64_t range = static_cast<uint64_t>(std::numeric_limits<T>::max()) / nranks;
      return static_cast<T>(range == std::numeric_limits<uint64_t>::max() ? h
                                                                          : Below(h, range + 1));
    }
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return static_cast<T>(h);
  }
  return static_cast<T>(h);
}

template <typename T>
void IntFillInput(std::optional<ReduceOp> op, int nranks, uint64_t base, uint64_t first,
                  size_t count, void* dst) {
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = IntInput<T>(op, nranks, Mix(base + first + i));
}

template <typename T>
T IntReduce(const DataSpec& spec, const std::vector<uint64_t>& bases, uint64_t index) {
  using U = std::make_unsigned_t<T>;
  ReduceOp op = *spec.op;
  U acc = op == ReduceOp::kProd ? U{1} : U{0};
  uint64_t avg_sum = 0;
  T best{};
  for (int r = 0; r < spec.nranks; ++r) {
    T v = IntInput<T>(spec.op, spec.nranks, Mix(bases[r] + index));
    switch (op) {
      case ReduceOp::kSum:
        acc = static_cast<U>(acc + static_cast<U>(v));  // wraps like two's complement
        break;
      case ReduceOp::kProd:
        acc = static_cast<U>(acc * static_cast<U>(v));
        break;
      case ReduceOp::kAvg:
        avg_sum += static_cast<uint64_t>(v);  // v >= 0 and the sum fits (see IntInput)
        break;
      case ReduceOp::kMax:
        best = r == 0 ? v : std::max(best, v);
        break;
      case ReduceOp::kMin:
        best = r == 0 ? v : std::min(best, v);
        break;
    }
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProd:
      return static_cast<T>(acc);
    case ReduceOp::kAvg:
      return static_cast<T>(avg_sum / static_cast<uint64_t>(spec.nranks));
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      return best;
  }
  return best;
}

template <typename T>
void IntFillReduced(const DataSpec& spec, uint64_t first, size_t count, void* dst) {
  std::vector<uint64_t> bases = RankBases(spec);
  T* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = IntReduce<T>(spec, bases, first + i);
}

// ------------------------------------------------------------ floating point

struct FloatFormat {
  int precision;  // significand bits: integers up to 2^precision are exact
  int max_twos;   // how many factors of 2 a product may hold
};

FloatFormat FormatOf(DataType type) {
  switch (type) {
    case DataType::kHalf:
      return {11, 15};  // 2^15 < 65504
    case DataType::kBfloat16:
      return {8, 100};
    case DataType::kFloat:
      return {24, 100};
    default:
      // double: 40 bits keeps every intermediate an exact int64 as well.
      return {40, 1000};
  }
}

uint64_t Pow2(int e) { return uint64_t{1} << e; }

int64_t Centered(uint64_t h, int64_t half_range) {
  return static_cast<int64_t>(Below(h, static_cast<uint64_t>(2 * half_range + 1))) - half_range;
}

// The value (before rounding to the type) that a rank contributes at an index.
// Parameters are worked out once per fill, not per element.
class FloatGen {
 public:
  explicit FloatGen(const DataSpec& spec) : op_(*spec.op), n_(spec.nranks) {
    const FloatFormat f = FormatOf(spec.type);
    const int64_t exact = static_cast<int64_t>(Pow2(f.precision));
    // sum: only the first 2^p ranks contribute (all of them unless there are
    // thousands), each at most 2^p / contributors in magnitude.
    contributors_ = std::min<int64_t>(n_, exact);
    sum_half_range_ = exact / contributors_;
    twos_ranks_ = std::min<int64_t>(n_, f.max_twos);
    avg_range_ = Pow2(f.precision - 1) + 1;
    maxmin_range_ = std::max<int64_t>(1, exact / n_);
  }

  double operator()(int rank, uint64_t index, uint64_t h) const {
    switch (op_) {
      case ReduceOp::kSum:
        return rank < contributors_ ? static_cast<double>(Centered(h, sum_half_range_)) : 0.0;
      case ReduceOp::kProd: {
        double sign = (h & 1) ? -1.0 : 1.0;
        return rank < twos_ranks_ && (h & 2) ? 2.0 * sign : sign;
      }
      case ReduceOp::kAvg: {
        // Non-negative, so that a backend which scales each input by 1/n before
        // summing (NCCL's PreMulSum) also lands within 2 ulps: no cancellation.
        int64_t a = static_cast<int64_t>(index % static_cast<uint64_t>(n_));
        if (rank != a && rank != (a + 1) % n_) return 0.0;
        return static_cast<double>(Below(h, avg_range_));
      }
      case ReduceOp::kMax:
      case ReduceOp::kMin: {
        // Distinct per rank: q * n + rank, centred on zero.
        int64_t q = static_cast<int64_t>(Below(h, static_cast<uint64_t>(maxmin_range_)));
        return static_cast<double>(q * n_ + rank - maxmin_range_ * n_ / 2);
      }
    }
    return 0.0;
  }

 private:
  ReduceOp op_;
  int64_t n_;
  int64_t contributors_;
  int64_t sum_half_range_;
  int64_t twos_ranks_;
  uint64_t avg_range_;
  int64_t maxmin_range_;
};

// Rounds v to the type and stores it at dst[i].
void StoreFloat(DataType type, double v, void* dst, size_t i) {
  switch (type) {
    case DataType::kHalf:
      static_cast<comm::Half*>(dst)[i] = comm::FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBfloat16:
      static_cast<comm::Bfloat16*>(dst)[i] = comm::FloatToBfloat16(static_cast<float>(v));
      break;
    case DataType::kFloat:
      static_cast<float*>(dst)[i] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(dst)[i] = v;
      break;
  }
}

double Rounded(DataType type, double v) {
  switch (type) {
    case DataType::kHalf:
      return comm::HalfToFloat(comm::FloatToHalf(static_cast<float>(v)));
    case DataType::kBfloat16:
      return comm::Bfloat16ToFloat(comm::FloatToBfloat16(static_cast<float>(v)));
    case DataType::kFloat:
      return static_cast<float>(v);
    default:
      return v;
  }
}

// Pseudo-random bits with the top exponent bit cleared: always finite (normal,
// subnormal or zero), so a copy can be compared bit for bit.
template <typename Bits>
void FiniteBitsFill(uint64_t base, uint64_t first, size_t count, Bits clear, void* dst) {
  Bits* out = static_cast<Bits*>(dst);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<Bits>(Mix(base + first + i)) & ~clear;
}

void CopyPatternFill(DataType type, uint64_t base, uint64_t first, size_t count, void* dst) {
  switch (type) {
    case DataType::kHalf:
    case DataType::kBfloat16:
      return FiniteBitsFill<uint16_t>(base, first, count, 0x4000u, dst);
    case DataType::kFloat:
      return FiniteBitsFill<uint32_t>(base, first, count, 0x40000000u, dst);
    case DataType::kDouble:
      return FiniteBitsFill<uint64_t>(base, first, count, uint64_t{1} << 62, dst);
    case DataType::kInt8:
      return IntFillInput<int8_t>(std::nullopt, 1, base, first, count, dst);
    case DataType::kUint8:
      return IntFillInput<uint8_t>(std::nullopt, 1, base, first, count, dst);
    case DataType::kInt32:
      return IntFillInput<int32_t>(std::nullopt, 1, base, first, count, dst);
    case DataType::kUint32:
      return IntFillInput<uint32_t>(std::nullopt, 1, base, first, count, dst);
    case DataType::kInt64:
      return IntFillInput<int64_t>(std::nullopt, 1, base, first, count, dst);
    case DataType::kUint64:
      return IntFillInput<uint64_t>(std::nullopt, 1, base, first, count, dst);
  }
}

void FloatFillReduced(const DataSpec& spec, uint64_t first, size_t count, void* dst) {
  std::vector<uint64_t> bases = RankBases(spec);
  const FloatGen gen(spec);
  ReduceOp op = *spec.op;
  for (size_t i = 0; i < count; ++i) {
    uint64_t index = first + i;
    double acc = op == ReduceOp::kProd ? 1.0 : 0.0;
    for (int r = 0; r < spec.nranks; ++r) {
      double v = gen(r, index, Mix(bases[r] + index));
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc += v;  // exact: small integers
          break;
        case ReduceOp::kProd:
          acc *= v;  // exact: +-2^k
          break;
        case ReduceOp::kMax:
        case ReduceOp::kMin: {
          // max/min return one of the stored inputs, so compare those.
          double stored = Rounded(spec.type, v);
          acc = r == 0 ? stored
                       : (op == ReduceOp::kMax ? std::max(acc, stored) : std::min(acc, stored));
          break;
        }
      }
    }
    if (op == ReduceOp::kAvg) acc /= spec.nranks;
    StoreFloat(spec.type, acc, dst, i);
  }
}

// Maps a float's bit pattern to an integer that orders like the value, so the
// distance between two keys counts representable values (ulps) between them.
int64_t OrderedKey(uint64_t bits, int width_bits) {
  uint64_t sign = uint64_t{1} << (width_bits - 1);
  int64_t magnitude = static_cast<int64_t>(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

uint64_t LoadBits(const void* p, size_t i, size_t elt) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(p) + i * elt, elt);
  return v;
}

}  // namespace

void FillInput(const DataSpec& spec, int rank, uint64_t first, size_t count, void* dst) {
  uint64_t base = StreamBase(spec.seed, rank);
  if (!spec.op) return CopyPatternFill(spec.type, base, first, count, dst);
  switch (spec.type) {
    case DataType::kInt8:
      return IntFillInput<int8_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kUint8:
      return IntFillInput<uint8_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kInt32:
      return IntFillInput<int32_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kUint32:
      return IntFillInput<uint32_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kInt64:
      return IntFillInput<int64_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kUint64:
      return IntFillInput<uint64_t>(spec.op, spec.nranks, base, first, count, dst);
    case DataType::kHalf:
    case DataType::kBfloat16:
    case DataType::kFloat:
    case DataType::kDouble: {
      const FloatGen gen(spec);
      for (size_t i = 0; i < count; ++i) {
        uint64_t index = first + i;
        StoreFloat(spec.type, gen(rank, index, Mix(base + index)), dst, i);
      }
      return;
    }
  }
}

void FillReduced(const DataSpec& spec, uint64_t first, size_t count, void* dst) {
  switch (spec.type) {
    case DataType::kInt8:
      return IntFillReduced<int8_t>(spec, first, count, dst);
    case DataType::kUint8:
      return IntFillReduced<uint8_t>(spec, first, count, dst);
    case DataType::kInt32:
      return IntFillReduced<int32_t>(spec, first, count, dst);
    case DataType::kUint32:
      return IntFillReduced<uint32_t>(spec, first, count, dst);
    case DataType::kInt64:
      return IntFillReduced<int64_t>(spec, first, count, dst);
    case DataType::kUint64:
      return IntFillReduced<uint64_t>(spec, first, count, dst);
    case DataType::kHalf:
    case DataType::kBfloat16:
    case DataType::kFloat:
    case DataType::kDouble:
      return FloatFillReduced(spec, first, count, dst);
  }
}

void FillSentinel(DataType type, uint64_t seed, int rank, size_t count, void* dst) {
  CopyPatternFill(type, StreamBase(seed, -1 - static_cast<int64_t>(rank)), 0, count, dst);
}

int64_t CountWrong(DataType type, std::optional<ReduceOp> op, const void* got, const void* want,
                   size_t count) {
  if (count == 0) return 0;  // the buffers may be null
  const size_t elt = comm::DataTypeSize(type);
  const bool tolerant = comm::IsFloatingPoint(type) && op == ReduceOp::kAvg;
  if (!tolerant) {
    // Fast path: whole-buffer comparison first; most checks pass.
    if (std::memcmp(got, want, count * elt) == 0) return 0;
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      wrong += std::memcmp(static_cast<const char*>(got) + i * elt,
                           static_cast<const char*>(want) + i * elt, elt) != 0;
    }
    return wrong;
  }
  const int width = static_cast<int>(elt * 8);
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t a = OrderedKey(LoadBits(got, i, elt), width);
    int64_t b = OrderedKey(LoadBits(want, i, elt), width);
    __int128 distance = static_cast<__int128>(a) - b;  // cannot overflow
    wrong += distance > 2 || distance < -2;
  }
  return wrong;
}

}  // namespace gantry::bench::internal
