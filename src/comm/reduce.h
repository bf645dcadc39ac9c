// Element-wise reduction and copy kernels shared by the shared-memory engine and
// the MPI backend (its custom MPI_Op for half and bfloat16).
//
// Determinism: every kernel combines its inputs left to right,
//   ((srcs[0] op srcs[1]) op srcs[2]) op ...
// one element at a time, with no reassociation. half and bfloat16 are computed
// in float and rounded back (round-to-nearest-even) after every step, exactly as
// HalfToFloat/FloatToHalf and Bfloat16ToFloat/FloatToBfloat16 would. So any two
// callers that pass the same inputs in the same order get bit-identical results,
// whichever rank, process or vector width computes them.
//
// Integer sum and prod wrap (two's complement); avg is the sum divided by the
// number of inputs at the end: integer division (truncating) for integers, x / n
// for floating point (in float for half and bfloat16, then rounded).
//
// Pointers need no particular alignment. A destination may be the very same
// array as a source (in-place) but must not partially overlap one. Thread-safe:
// the kernels keep no state.
#pragma once

#include <cstddef>

#include "gantry/comm/types.h"

namespace gantry::comm::internal {

// dsts[d][i] = srcs[0][i] op ... op srcs[nsrc-1][i] for every d < ndst, i < count.
// Each source is read once and each destination written once (tiles live in L1).
// kAvg divides the sum by nsrc. `stream` writes the destinations with
// non-temporal stores (for results far larger than the caches); call StreamFence()
// before another thread may read them. Requires nsrc >= 1, ndst >= 1.
void ReduceN(void* const* dsts, int ndst, const void* const* srcs, int nsrc, size_t count,
             DataType type, ReduceOp op, bool stream = false);
inline void ReduceN(void* dst, const void* const* srcs, int nsrc, size_t count, DataType type,
                    ReduceOp op) {
  ReduceN(&dst, 1, srcs, nsrc, count, type, op, false);
}

// inout[i] = inout[i] op in[i]. kAvg accumulates like kSum; finish with
// DivideBy(). This is the shape of an MPI_User_function.
void Accumulate(void* inout, const void* in, size_t count, DataType type, ReduceOp op);

// data[i] = data[i] / n (the last step of kAvg after Accumulate). n >= 1.
void DivideBy(void* data, size_t count, DataType type, int n);

// memcpy for destinations that should bypass the caches (large results another
// core reads later). Call StreamFence() before publishing what was written.
void CopyStream(void* dst, const void* src, size_t bytes);
// Orders earlier non-temporal stores before later stores (sfence on x86).
void StreamFence();

}  // namespace gantry::comm::internal
