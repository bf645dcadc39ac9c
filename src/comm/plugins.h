// The tables of the comm plugins (include/gantry/core/plugin.h): the MPI
// backends live in libgantry_plugin_mpi.so (src/comm/mpi/, links MPI) and the
// NCCL backend in libgantry_plugin_nccl.so (src/comm/nccl/, links the CUDA
// runtime and NCCL), so that gantry_comm itself links neither. The functions
// of backends.h are the fronts: they load the plugin on first use and call
// through its table. A table only grows: new members go at the end, and the
// front checks `size` before using them.
#pragma once

#include <cstdint>
#include <functional>

#include "gantry/comm/communicator.h"
#include "gantry/comm/launch.h"
#include "gantry/core/status.h"

namespace gantry::comm::internal {

struct MpiPluginV1 {
  uint32_t size;  // sizeof(MpiPluginV1) as the plugin was built
  // RunUnderMpi (backends.h); `set_rank` is the caller's log::SetRank, so that
  // the rank prefix lands in the caller's logger, not the plugin's copy.
  Result<int> (*run_under_mpi)(const LaunchOptions& options,
                               const std::function<int(Communicator& comm)>& body,
                               void (*set_rank)(int rank));
};

struct NcclPluginV1 {
  uint32_t size;  // sizeof(NcclPluginV1) as the plugin was built
  Result<CommunicatorPtr> (*create_communicator)(CommunicatorPtr host, int device);
  int (*cuda_device_count)();
};

// Loads the plugin once; FailedPrecondition naming the plugin, its libraries
// and the dlerror text when it cannot.
Result<const MpiPluginV1*> MpiPlugin();
Result<const NcclPluginV1*> NcclPlugin();

// The implementations, compiled into the plugins only.
Result<int> RunUnderMpiInPlugin(const LaunchOptions& options,
                                const std::function<int(Communicator& comm)>& body,
                                void (*set_rank)(int rank));
Result<CommunicatorPtr> CreateNcclCommunicatorInPlugin(CommunicatorPtr host, int device);
int CudaDeviceCountInPlugin();

}  // namespace gantry::comm::internal
