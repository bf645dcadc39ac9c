#include "affinity.h"

#include <algorithm>
#include <vector>

#include "gantry/config.h"

#if GANTRY_HAVE_NUMA
#include <numa.h>
#endif

namespace gantry::comm::internal {

std::string FormatCpuList(const cpu_set_t& set) {
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (end > c) out += '-' + std::to_string(end);
    c = end;
  }
  return out;
}

std::string DescribeCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "cpu ?";
  std::string out = "cpu " + FormatCpuList(set);
#if GANTRY_HAVE_NUMA
  if (numa_available() >= 0) {
    std::vector<int> nodes;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &set)) continue;
      const int node = numa_node_of_cpu(c);
      if (node >= 0 && std::find(nodes.begin(), nodes.end(), node) == nodes.end()) {
        nodes.push_back(node);
      }
    }
    std::sort(nodes.begin(), nodes.end());
    std::string list;
    for (int n : nodes) {
      if (!list.empty()) list += ',';
      list += std::to_string(n);
    }
    if (!list.empty()) out += " numa " + list;
  }
#endif
  return out;
}

}  // namespace gantry::comm::internal
