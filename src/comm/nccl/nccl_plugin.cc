// The entry point of libgantry_plugin_nccl.so (src/comm/plugins.h).
#include "../plugins.h"
#include "gantry/core/plugin.h"

namespace {

const gantry::comm::internal::NcclPluginV1 kTable = {
    sizeof(gantry::comm::internal::NcclPluginV1),
    &gantry::comm::internal::CreateNcclCommunicatorInPlugin,
    &gantry::comm::internal::CudaDeviceCountInPlugin,
};

}  // namespace

GANTRY_PLUGIN_ENTRY gantry_plugin_nccl_v1() { return &kTable; }
