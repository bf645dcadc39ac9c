// `gantry tune`: GPU clocks to their maximum, as Azure's guidance asks
// (reference: shared/reference/health.md §4), through NVML.
//
//   ASSIGN_OR_RETURN(auto nvml, Nvml::Load());
//   ASSIGN_OR_RETURN(std::vector<GpuTuneState> gpus, ReadTuneState(*nvml));
//   TunePlan plan = PlanTune(gpus, TuneOptions{});        // what --apply would do
//   for (const TuneCall& c : plan.calls) std::cout << c.ToString() << "\n";   // --dry-run
//   RETURN_IF_ERROR(RequireRoot(geteuid()));
//   RETURN_IF_ERROR(ApplyTune(*nvml, plan));
//
// Semantics:
//   apply  persistence mode on (nvmlDeviceSetPersistenceMode), then the
//          application clocks set to the maximum memory and graphics clocks
//          (nvmlDeviceSetApplicationsClocks), as max_gpu_app_clocks.sh does
//          with `nvidia-smi -ac`. GPUs already there get no call, so a second
//          apply changes nothing (idempotent).
//   lock   instead of application clocks: nvmlDeviceSetGpuLockedClocks with
//          min = max = the maximum graphics clock (`nvidia-smi -lgc`). NVML
//          cannot read locked clocks back, so --lock always issues the call
//          (setting the same lock again is harmless).
//   reset  nvmlDeviceResetApplicationsClocks where the application clocks
//          differ from the defaults, and nvmlDeviceResetGpuLockedClocks on
//          every GPU (locked state is unknown). Persistence mode is left as
//          it is: it only keeps the driver loaded, and services
//          (nvidia-persistenced) may own it.
// All of these need root; clock changes last until reboot or driver reload.
#pragma once

#include <string>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/health/nvml.h"

namespace gantry::health {

// What `gantry tune` shows per GPU.
struct GpuTuneState {
  int index = 0;
  std::string name, pci_bus_id;
  bool persistence_known = false, persistence = false;
  bool clocks_known = false;  // false: the GPU does not report application clocks
  GpuClocks clocks;
  std::string problem;  // why something is unknown ("" when all read)

  bool AtMax() const {
    return clocks_known && clocks.app_graphics >= clocks.max_graphics &&
           clocks.app_memory >= clocks.max_memory;
  }
  Json ToJson() const;
};

// Reads every GPU. Errors only when NVML cannot count GPUs; per-GPU
// problems (a query not supported, a lost GPU) land in `problem`.
Result<std::vector<GpuTuneState>> ReadTuneState(Nvml& nvml);

// GPU, name, persistence, application clocks, maximum, default, state.
std::string RenderTuneTable(const std::vector<GpuTuneState>& gpus);

enum class TuneMode { kApply, kReset };

struct TuneOptions {
  TuneMode mode = TuneMode::kApply;
  bool lock = false;  // apply: locked clocks instead of application clocks
};

// One NVML call of a plan.
struct TuneCall {
  enum class Kind {
    kSetPersistenceMode,
    kSetApplicationsClocks,
    kResetApplicationsClocks,
    kSetGpuLockedClocks,
    kResetGpuLockedClocks,
  };
  Kind kind = Kind::kSetPersistenceMode;
  int gpu = 0;
  // kSetApplicationsClocks: a = memory MHz, b = graphics MHz;
  // kSetGpuLockedClocks: a = min MHz, b = max MHz; kSetPersistenceMode: a = 1.
  unsigned a = 0, b = 0;

  // "nvmlDeviceSetApplicationsClocks(GPU 0, mem 2619 MHz, graphics 1980 MHz)".
  std::string ToString() const;
  Json ToJson() const;  // {"call": "...", "gpu": 0, ...}
  bool operator==(const TuneCall&) const = default;
};

struct TunePlan {
  std::vector<TuneCall> calls;     // in order; empty when nothing needs to change
  std::vector<std::string> notes;  // "GPU 0: application clocks already at maximum (...)"
};

// Pure: the calls that bring `gpus` to the state `options` asks for.
TunePlan PlanTune(const std::vector<GpuTuneState>& gpus, const TuneOptions& options);

// PermissionDenied ("... needs root ...") unless `euid` is 0. The caller
// passes geteuid(); tests pass other ids.
Status RequireRoot(unsigned euid, std::string_view what);

// Runs the calls in order. Every call is attempted; the result is OK or the
// first failure with the others appended ("nvmlDeviceSetApplicationsClocks(GPU
// 2): Insufficient Permissions (run as root); ...").
Status ApplyTune(Nvml& nvml, const TunePlan& plan);

}  // namespace gantry::health
