// The fronts of backends.h: each loads its plugin on first use (see plugins.h).
#include "plugins.h"

#include <utility>

#include "backends.h"
#include "gantry/core/log.h"
#include "gantry/core/plugin.h"

namespace gantry::comm::internal {
namespace {

template <typename Table>
Result<const Table*> Load(const plugin::PluginSpec& spec) {
  ASSIGN_OR_RETURN(const void* table, plugin::LoadPlugin(spec));
  const auto* t = static_cast<const Table*>(table);
  if (t->size < sizeof(Table)) {
    return FailedPrecondition("the Gantry plugin " + spec.file +
                              " is older than this gantry; reinstall gantry with its plugins");
  }
  return t;
}

}  // namespace

Result<const MpiPluginV1*> MpiPlugin() {
  // Open MPI's components (mca_*.so) resolve libmpi's symbols from the global
  // scope, so the MPI plugin and its libraries are loaded RTLD_GLOBAL.
  static const plugin::PluginSpec spec{
      "libgantry_plugin_mpi.so",
      "gantry_plugin_mpi_v1",
      "the mpi backend",
      "the MPI library (Open MPI libmpi.so.40)",
      "install Open MPI (Debian: libopenmpi3 openmpi-bin), or use --backend shm",
      true};
  return Load<MpiPluginV1>(spec);
}

Result<const NcclPluginV1*> NcclPlugin() {
  static const plugin::PluginSpec spec{
      "libgantry_plugin_nccl.so",
      "gantry_plugin_nccl_v1",
      "the nccl backend",
      "the CUDA runtime (libcudart.so) and NCCL (libnccl.so.2)",
      "install the CUDA runtime and NCCL (libnccl2), or use --backend shm or mpi",
      false};
  return Load<NcclPluginV1>(spec);
}

Result<int> RunUnderMpi(const LaunchOptions& options,
                        const std::function<int(Communicator& comm)>& body) {
  ASSIGN_OR_RETURN(const MpiPluginV1* mpi, MpiPlugin());
  return mpi->run_under_mpi(options, body, &log::SetRank);
}

Result<CommunicatorPtr> CreateNcclCommunicator(CommunicatorPtr host, int device) {
  ASSIGN_OR_RETURN(const NcclPluginV1* nccl, NcclPlugin());
  return nccl->create_communicator(std::move(host), device);
}

int CudaDeviceCount() {
  Result<const NcclPluginV1*> nccl = NcclPlugin();
  return nccl.ok() ? (*nccl)->cuda_device_count() : 0;
}

}  // namespace gantry::comm::internal
