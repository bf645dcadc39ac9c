// Machine facts read from /proc, /sys and /dev/shm: the host checks of
// `gantry health` and `gantry doctor` both use them.
//
// Every function takes `root`, the directory that stands for "/" ("/" on a real
// machine, a temporary tree in tests), and reads only below it. None of them
// log; all are safe to call from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::health {

// `path` (absolute, "/proc/cpuinfo") under `root` ("/" or a test's fake tree),
// with exactly one slash between them.
std::string RootPath(const std::string& root, std::string_view path);


struct CpuInfo {
  std::string model;  // "model name" of /proc/cpuinfo ("Model" on Arm), "unknown" if absent
  int sockets = 0;
  int cores = 0;    // physical cores over all sockets
  int threads = 0;  // online logical CPUs
};

struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;              // MemAvailable (MemFree on kernels without it)
  std::optional<uint64_t> swap_total_bytes;  // SwapTotal; nullopt without a valid line
};

struct GpuInfo {
  int count = 0;
  std::vector<std::string> models;  // one per GPU, e.g. "NVIDIA H100 80GB HBM3"
  std::string source;               // "/proc/driver/nvidia/gpus", "nvidia-smi -L" or "none"
  std::string error;                // nvidia-smi exists but failed ("" otherwise)
};

struct ShmInfo {
  std::string path;  // as seen by this process, e.g. "/dev/shm"
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;  // available to unprivileged users
};

// Parses a Linux CPU or node list such as "0-3,8,10-11" into the ids it names.
// Errors: InvalidArgument quoting the text.
Result<std::vector<int>> ParseIdList(std::string_view text);

// /proc/cpuinfo (model), /sys/devices/system/cpu/online and
// cpuN/topology/{physical_package_id,core_id} (topology). Without sysfs
// topology it falls back to the "physical id"/"core id" fields of /proc/cpuinfo,
// and without those to one socket with one core per thread.
// Errors: NotFound when /proc/cpuinfo is missing; DataLoss when it lists no
// processor.
Result<CpuInfo> DetectCpu(const std::string& root);

// /proc/meminfo (values in kB). Errors: NotFound when missing; DataLoss naming
// the file when MemTotal is missing or malformed.
Result<MemoryInfo> DetectMemory(const std::string& root);

// /sys/devices/system/node/online, else the nodeN directories; 1 when the
// kernel exposes no NUMA information.
int DetectNumaNodes(const std::string& root);

// NVIDIA GPUs from /proc/driver/nvidia/gpus/*/information (the driver's own
// list). When that is empty and `nvidia_smi` is not "", runs `<nvidia_smi> -L`
// (a path, or a name looked up in PATH; absence is not an error) and gives it
// `deadline` to finish. Never fails: problems land in GpuInfo::error.
GpuInfo DetectGpus(const std::string& root, const std::string& nvidia_smi,
                   std::chrono::milliseconds deadline = std::chrono::seconds(10));

// statvfs of <root>/dev/shm. Errors: NotFound when it does not exist.
Result<ShmInfo> DetectShm(const std::string& root);

}  // namespace gantry::health
