// Verifiable data for the collective benchmark (internal to src/bench).
//
// Every input element is a pure function of (type, op, nranks, seed, rank,
// index), so each rank fills its buffers on its own and can compute what any
// peer sent and what any reduction must produce, without communicating.
//
// Values are chosen so that the reduction is exact in every order of
// evaluation, for every type:
//   integers, sum/prod   full-width pseudo-random values (odd ones for prod);
//                        the result wraps mod 2^bits, and wrapping arithmetic is
//                        associative and commutative, so every order agrees.
//   integers, avg        non-negative values small enough that the sum of all
//                        ranks fits the type; expected = sum / nranks (truncating).
//   floats, sum          small integers whose partial sums never exceed the
//                        significand (2^11 half, 2^8 bfloat16, 2^24 float).
//   floats, prod         +-1 or +-2, so every partial product is +-2^k with k far
//                        below the exponent limit.
//   floats, avg          as nccl-tests: two ranks per element hold small
//                        non-negative integers, the others zero; expected =
//                        sum / nranks, compared within 2 units in the last place.
//   max, min             distinct values per rank (value = q * nranks + rank).
//   copies (no op)       pseudo-random bit patterns (finite for float types).
// Thread-safe: no state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "gantry/comm/types.h"

namespace gantry::bench::internal {

struct DataSpec {
  comm::DataType type = comm::DataType::kFloat;
  std::optional<comm::ReduceOp> op;  // nullopt: the collective only moves data
  int nranks = 1;
  uint64_t seed = 0;  // a different seed gives different data
};

// Writes rank `rank`'s input elements [first, first + count) to dst.
void FillInput(const DataSpec& spec, int rank, uint64_t first, size_t count, void* dst);

// Writes the reduction over all ranks (spec.op) of elements [first, first + count).
// Precondition: spec.op has a value.
void FillReduced(const DataSpec& spec, uint64_t first, size_t count, void* dst);

// Writes the pattern a receive buffer holds before the collective runs, so that
// elements a collective must leave alone (non-root ranks of reduce and gather)
// are checked too. Different from every rank's input.
void FillSentinel(comm::DataType type, uint64_t seed, int rank, size_t count, void* dst);

// Number of elements of `got` whose bit pattern differs from `want`. Float
// types with avg allow a distance of 2 units in the last place; everything else
// must match bit for bit.
int64_t CountWrong(comm::DataType type, std::optional<comm::ReduceOp> op, const void* got,
                   const void* want, size_t count);

}  // namespace gantry::bench::internal
