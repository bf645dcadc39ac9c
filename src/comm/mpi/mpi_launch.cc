// RunUnderMpi, in libgantry_plugin_mpi.so (see ../plugins.h): one process is
// one rank; MPI starts the job and wires it up, then the chosen backend's
// communicator carries the collectives.
#include <sched.h>

#include <string>
#include <vector>

#include "../backends.h"
#include "../plugins.h"
#include "gantry/config.h"
#include "gantry/core/log.h"
#include "mpi_communicator.h"

namespace gantry::comm::internal {
namespace {

// Pins this process to the local_rank-th CPU it may run on, when there is one
// CPU per local rank. A launcher that already bound each rank to fewer CPUs
// (Open MPI binds to a core for small jobs) is left alone.
void PinToCore(int local_rank, int local_size) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (static_cast<int>(cpus.size()) < local_size || local_size <= 1) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[local_rank], &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) {
    log::warn("could not pin local rank {} to CPU {}; running unpinned", local_rank,
              cpus[local_rank]);
  }
}

Result<CommunicatorPtr> BuildCommunicator(const LaunchOptions& options,
                                          [[maybe_unused]] int local_rank) {
  switch (options.backend) {
    case Backend::kMpi:
      return CreateMpiCommunicator(MPI_COMM_WORLD);
    case Backend::kAuto:
      return CreateHierarchicalCommunicator(MPI_COMM_WORLD, options.timeout_s);
    case Backend::kShm:
      return CreateShmCommunicatorOverMpi(MPI_COMM_WORLD, options.timeout_s);
    case Backend::kNccl: {
#if GANTRY_HAVE_NCCL
      ASSIGN_OR_RETURN(CommunicatorPtr host, CreateMpiCommunicator(MPI_COMM_WORLD));
      return CreateNcclCommunicator(std::move(host), local_rank);
#else
      return FailedPrecondition(
          "the nccl backend is not compiled into this gantry (CUDA or NCCL was not found at "
          "build time); rebuild on a machine with both, or use --backend mpi");
#endif
    }
  }
  return Internal("unknown backend");
}

// Pins the rank (before any buffer is touched, so memory lands on its NUMA
// node), builds the communicator, then agrees across ranks that every rank has
// one: a rank that failed alone would otherwise leave the rest waiting in
// their first collective.
Result<CommunicatorPtr> SetUp(const LaunchOptions& options) {
  ASSIGN_OR_RETURN(MPI_Comm node, SplitByNode(MPI_COMM_WORLD));
  int local_rank = 0, local_size = 1;
  int rc_rank = MPI_Comm_rank(node, &local_rank);
  int rc_size = MPI_Comm_size(node, &local_size);
  MPI_Comm_free(&node);
  RETURN_IF_ERROR(MpiStatus("MPI_Comm_rank", rc_rank));
  RETURN_IF_ERROR(MpiStatus("MPI_Comm_size", rc_size));
  if (options.pin) PinToCore(local_rank, local_size);

  Result<CommunicatorPtr> comm = BuildCommunicator(options, local_rank);
  int ok = comm.ok() ? 1 : 0;
  GANTRY_MPI(MPI_Allreduce, MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!comm.ok()) return comm.status();
  if (ok == 0) {
    return FailedPrecondition("another rank could not set up the " +
                              std::string(BackendName(options.backend)) +
                              " backend (see its error)");
  }
  return comm;
}

}  // namespace

Result<int> RunUnderMpiInPlugin(const LaunchOptions& options,
                                const std::function<int(Communicator& comm)>& body,
                                void (*set_rank)(int rank)) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    RETURN_IF_ERROR(MpiStatus("MPI_Init_thread",
                              MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided)));
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  set_rank(rank);

  // The communicator holds MPI handles, so it lives in this scope and is gone
  // before MPI_Finalize.
  Result<int> result = [&]() -> Result<int> {
    ASSIGN_OR_RETURN(CommunicatorPtr comm, SetUp(options));
    return body(*comm);
  }();
  // Only the process that initialised MPI finalises it.
  if (!initialized) MPI_Finalize();
  return result;
}

}  // namespace gantry::comm::internal
