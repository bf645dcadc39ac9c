// Starting ranks and building their communicators.
//
// `gantry bench --ranks N` (no MPI launcher) forks N local processes that meet
// in shared memory. Under mpirun/srun each process is one rank and the backend
// decides how ranks talk:
//   shm   all ranks must be on one node; MPI only exchanges the segment name
//   mpi   MPI collectives everywhere (Open MPI's own algorithms, the reference)
//   auto  hierarchical: shm inside each node, MPI between node leaders;
//         without an MPI launcher it is shm
//   nccl  one GPU per rank; bootstraps over shm (local spawn) or MPI
#pragma once

#include <functional>
#include <string_view>

#include "gantry/comm/communicator.h"
#include "gantry/core/status.h"

namespace gantry::comm {

enum class Backend { kAuto, kShm, kMpi, kNccl };

Result<Backend> ParseBackend(std::string_view name);  // "auto", "shm", "mpi", "nccl"
std::string_view BackendName(Backend backend);
// True when the backend was compiled in (shm and auto always are).
bool BackendCompiled(Backend backend);
// True when this process was started by mpirun/srun/another PMI launcher
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK or SLURM_STEP_NUM_TASKS with SLURM_PROCID).
bool UnderMpiLauncher();

struct LaunchOptions {
  Backend backend = Backend::kAuto;
  // Local ranks to fork when not under an MPI launcher. 0 picks one per
  // available CPU core, capped at 8 (or one per GPU for nccl).
  int ranks = 0;
  // Pin rank i to CPU core i (and its NUMA node) when there are at least as many
  // cores as local ranks.
  bool pin = true;
  // Forked shm ranks give up waiting for a peer after this many seconds (0 waits
  // forever; a peer whose process is gone is detected either way).
  double timeout_s = 300;
};

// Runs `body` on every rank with that rank's communicator and returns this
// process's exit code: the largest code any local rank returned, or 1 for a rank
// that crashed (its signal is reported on stderr). Setup failures that happen
// before any rank runs (backend not compiled in, bad rank count, no shared
// memory) are returned as a Status so the CLI can exit 2.
//
// `body` runs in a child process for forked ranks: it must not rely on state it
// changes being visible to the caller.
Result<int> RunRanks(const LaunchOptions& options,
                     const std::function<int(Communicator& comm)>& body);

}  // namespace gantry::comm
