// Internal seams between the launcher (src/comm/launch.cc) and the optional
// backends. Declared here, defined in src/comm/mpi/ or src/comm/nccl/ only when
// that backend is compiled (GANTRY_HAVE_MPI / GANTRY_HAVE_NCCL).
#pragma once

#include <functional>
#include <string>

#include "gantry/comm/launch.h"

namespace gantry::comm::internal {

// A fresh shm session name ("<pid>-<random>"), unique across concurrent jobs on
// one machine. Made once by whoever starts a group and shared with its ranks.
std::string NewShmSessionName();

// Under an MPI launcher: MPI_Init, build the communicator the backend asks for
// (mpi, auto = shm within node + MPI across leaders, shm = single-node shm
// bootstrapped over MPI, nccl = NCCL bootstrapped over MPI), run body,
// MPI_Finalize. Returns the rank's exit code.
Result<int> RunUnderMpi(const LaunchOptions& options,
                        const std::function<int(Communicator& comm)>& body);

// Builds an NCCL communicator over `host`, which it takes ownership of and uses
// to exchange the ncclUniqueId and for HostAllReduce. Uses GPU `device`.
Result<CommunicatorPtr> CreateNcclCommunicator(CommunicatorPtr host, int device);
// Number of visible CUDA devices (0 when the driver is absent).
int CudaDeviceCount();

}  // namespace gantry::comm::internal
