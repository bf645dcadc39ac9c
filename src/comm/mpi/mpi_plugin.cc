// The entry point of libgantry_plugin_mpi.so (src/comm/plugins.h).
#include "../plugins.h"
#include "gantry/core/plugin.h"

namespace {

const gantry::comm::internal::MpiPluginV1 kTable = {
    sizeof(gantry::comm::internal::MpiPluginV1),
    &gantry::comm::internal::RunUnderMpiInPlugin,
};

}  // namespace

GANTRY_PLUGIN_ENTRY gantry_plugin_mpi_v1() { return &kTable; }
