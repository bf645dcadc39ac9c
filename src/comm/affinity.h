// Where this process runs: its CPU affinity and NUMA nodes, for the
// "# Using devices" lines of every host backend.
#pragma once

#include <sched.h>

#include <string>

namespace gantry::comm::internal {

// "0-3,8" for a CPU set.
std::string FormatCpuList(const cpu_set_t& set);

// "cpu 0-3 numa 0" for the calling thread's affinity (NUMA part only with
// libnuma); "cpu ?" when the affinity cannot be read.
std::string DescribeCpu();

}  // namespace gantry::comm::internal
