// The MPI-based communicators (internal to gantry_comm and its tests):
//   mpi   MpiCommunicator: every collective is one MPI call on an MPI_Comm
//   auto  hierarchical: shm inside each node, MPI between nodes
//   shm   the shared-memory communicator, bootstrapped over MPI (one node only)
// RunUnderMpi (backends.h) picks one of them per --backend.
//
// Every function here is collective over the MPI communicator it is given, and
// must be called between MPI_Init and MPI_Finalize. The communicators they return
// hold MPI handles of their own: destroy them before MPI_Finalize.
#pragma once

// The C API only: Open MPI's deprecated C++ bindings would otherwise come along.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <climits>
#include <cstddef>
#include <memory>

#include "gantry/comm/communicator.h"
#include "gantry/core/status.h"

namespace gantry::comm::internal {

// Splits `world` into one communicator per node (MPI_COMM_TYPE_SHARED), local
// ranks ordered as in `world`. For tests only: GANTRY_TEST_NODE_SPLIT=<k> in
// the environment instead puts rank r on fake node r / k, so that one machine
// can run the inter-node code paths. The caller frees the result.
Result<MPI_Comm> SplitByNode(MPI_Comm world);

// MPI_Comm_dup's `comm` (the caller keeps and frees its own handle) and runs
// every collective as MPI calls on the duplicate, whose error handler is set to
// MPI_ERRORS_RETURN so MPI errors come back as Status.
//
// Counts above `max_count` elements are split into several MPI calls of at most
// that many elements (MPI counts are int). Tests pass a small `max_count` to
// run the split paths on small buffers.
//
// Thread safety: one thread at a time (MPI_THREAD_FUNNELED is enough).
Result<std::unique_ptr<Communicator>> CreateMpiCommunicator(MPI_Comm comm,
                                                            size_t max_count = INT_MAX);

// The "auto" backend over `world`: ranks on one node share a shm communicator
// and nodes talk over MPI.
//   all_reduce  shm reduce_scatter, MPI allreduce of each slice between the
//               ranks with the same local rank on every node, shm all_gather
//   broadcast   MPI broadcast among the root's local-rank peers, then shm
//               broadcast in each node
//   reduce      shm reduce in each node, then MPI reduce among the root's
//               local-rank peers
//   barrier     shm barrier, MPI barrier of node leaders, shm barrier
// The three rooted/reducing collectives need the same number of ranks on every
// node; otherwise they, and all_gather, reduce_scatter, alltoall, gather,
// scatter and sendrecv always, run as MPI collectives on `world`. On a single
// node every collective is the shm communicator's; with one rank per node
// every collective is MPI's.
// `shm_timeout_s` is the shm communicators' ShmOptions::timeout_s.
Result<CommunicatorPtr> CreateHierarchicalCommunicator(MPI_Comm world, double shm_timeout_s = 300);

// The shm backend under an MPI launcher: one shm communicator over every rank
// of `world`. FailedPrecondition when the ranks span more than one node.
Result<CommunicatorPtr> CreateShmCommunicatorOverMpi(MPI_Comm world, double shm_timeout_s = 300);

// "<call> failed: <MPI_Error_string>" as an Unavailable status; OK for MPI_SUCCESS.
Status MpiStatus(const char* call, int rc);

}  // namespace gantry::comm::internal

// Calls an MPI function and returns its error as a Status from the enclosing
// function: GANTRY_MPI(MPI_Barrier, comm).
#define GANTRY_MPI(call, ...)                                            \
  do {                                                                   \
    int gantry_mpi_rc_ = call(__VA_ARGS__);                              \
    if (gantry_mpi_rc_ != MPI_SUCCESS) {                                 \
      return ::gantry::comm::internal::MpiStatus(#call, gantry_mpi_rc_); \
    }                                                                    \
  } while (0)
