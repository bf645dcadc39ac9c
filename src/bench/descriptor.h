// What the benchmark engine needs to know about each collective (internal to
// src/bench): how nccl-tests turns a swept byte size into element counts, which
// bytes algbw counts, what every rank's receive buffer must hold afterwards, and
// how to call it on a Communicator. All per-collective knowledge lives in
// collectives.cc; the engine is written once against these functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "gantry/bench/collectives.h"
#include "gantry/comm/communicator.h"
#include "gantry/comm/types.h"
#include "gantry/core/status.h"

namespace gantry::bench::internal {

// Element counts of one measurement, as nccl-tests derives them from the swept
// size (its *GetCollByteCount). Per-rank chunks (all_gather, reduce_scatter,
// alltoall, gather, scatter) are size / elt / nranks rounded down to 16 bytes.
struct Layout {
  size_t count = 0;       // the collective's count argument; the "count" column
  size_t send_count = 0;  // elements in this rank's send buffer
  size_t recv_count = 0;  // elements in this rank's receive buffer (all checked)
  // In place, one buffer serves both: send = buf + send_inplace_offset * rank,
  // recv = buf + recv_inplace_offset * rank (elements), the layouts of
  // communicator.h.
  size_t send_inplace_offset = 0;
  size_t recv_inplace_offset = 0;

  // The "size" column: max(send, recv) bytes per rank.
  uint64_t Bytes(size_t elt) const { return std::max(send_count, recv_count) * elt; }
  // Elements of the in-place buffer that `rank` touches.
  size_t InPlaceExtent(int rank) const {
    return std::max(send_inplace_offset * rank + send_count,
                    recv_inplace_offset * rank + recv_count);
  }
};

Layout ComputeLayout(Collective c, uint64_t bytes, size_t elt, int nranks);

// Bytes algbw divides by the time (nccl-tests' *GetBw): count * elt, times
// nranks for the collectives whose count is a per-rank chunk.
double AlgorithmBytes(Collective c, const Layout& layout, size_t elt, int nranks);

// A run of the expected receive buffer: elements [dst, dst + length) equal rank
// `src_rank`'s inputs at indices [src_first, src_first + length), or, when
// src_rank is kReduced, the reduction over all ranks of those indices.
// Elements no segment covers must be left untouched by the collective.
inline constexpr int kReduced = -1;
struct Segment {
  size_t dst = 0;
  int src_rank = kReduced;
  uint64_t src_first = 0;
  size_t length = 0;
};

// Every rank's inputs are element indices [0, send_count) of its own stream
// (data.h); this says where they must end up on `rank`.
std::vector<Segment> ExpectedSegments(Collective c, const Layout& layout, int rank, int root,
                                      int nranks);

// Calls the collective. `root` is ignored by unrooted collectives and `op` by
// non-reducing ones; sendrecv sends to rank + 1 and receives from rank - 1.
Status RunCollective(comm::Communicator& comm, Collective c, const void* send, void* recv,
                     size_t count, comm::DataType type, comm::ReduceOp op, int root);

}  // namespace gantry::bench::internal
