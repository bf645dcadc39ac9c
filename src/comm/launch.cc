#include "gantry/comm/launch.h"

#include <dirent.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "gantry/comm/shm.h"
#include "gantry/config.h"
#include "gantry/core/log.h"
#include "plugins.h"
#include "shm_internal.h"

#if GANTRY_HAVE_NUMA
#include <numa.h>
#endif

namespace gantry::comm {
namespace {

constexpr int kDefaultMaxRanks = 8;

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Pins the calling process to `cpu` and prefers memory on that CPU's node, so
// the segments it creates are local to it.
void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    log::warn("could not pin to CPU {}: {}", cpu, std::strerror(errno));
    return;
  }
#if GANTRY_HAVE_NUMA
  if (numa_available() >= 0) {
    const int node = numa_node_of_cpu(cpu);
    if (node >= 0) numa_set_preferred(node);
  }
#endif
}

// Removes whatever segments of `session` a crashed rank left in /dev/shm.
void RemoveSegments(const std::string& session) {
  const std::string prefix = "gantry-" + session + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) {
      const std::string name = "/dev/shm/" + std::string(e->d_name);
      unlink(name.c_str());
    }
  }
  closedir(dir);
}

int RankMain(const LaunchOptions& options, int rank, int ranks, const std::string& session,
             const std::function<int(Communicator&)>& body) {
  ShmOptions shm{session, rank, ranks, options.timeout_s};
  Result<CommunicatorPtr> comm = CreateShmCommunicator(shm);
#if GANTRY_HAVE_NCCL
  if (comm.ok() && options.backend == Backend::kNccl) {
    comm = internal::CreateNcclCommunicator(std::move(comm).value(), rank);
  }
#endif
  if (!comm.ok()) {
    std::fprintf(stderr, "gantry: rank %d: %s\n", rank, comm.status().ToString().c_str());
    return 2;
  }
  return body(**comm);
}

[[noreturn]] void RunChild(const LaunchOptions& options, int rank, int ranks, int cpu, pid_t parent,
                           const std::string& session,
                           const std::function<int(Communicator&)>& body) {
  // Die with the launcher, so no rank outlives an interrupted run.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  if (cpu >= 0) PinTo(cpu);
  log::SetRank(rank);
  int code = 1;
  // An exception must not unwind into the caller's frames, which this child
  // shares a copy of: it would go on running the parent's code.
  try {
    code = RankMain(options, rank, ranks, session, body);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry: rank %d: uncaught exception: %s\n", rank, e.what());
  } catch (...) {
    std::fprintf(stderr, "gantry: rank %d: uncaught exception\n", rank);
  }
  std::fflush(nullptr);
  _exit(code);
}

int OpenPidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

// Sleeps until a rank that is not done may have exited: a pidfd turns readable,
// or, without pidfds (kernels before 5.3), a short poll interval passes.
void WaitForAnExit(const std::vector<pid_t>& pids, const std::vector<int>& pidfds,
                   const std::vector<bool>& done) {
  std::vector<pollfd> fds;
  bool all = true;
  for (size_t r = 0; r < pids.size(); ++r) {
    if (done[r]) continue;
    if (pidfds[r] < 0) {
      all = false;
      continue;
    }
    fds.push_back(pollfd{pidfds[r], POLLIN, 0});
  }
  // A timeout even with pidfds: a lost wakeup must not hang the launcher.
  poll(fds.data(), fds.size(), all ? 1000 : 5);
}

void KillAll(const std::vector<pid_t>& pids, const std::vector<bool>& done) {
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!done[i]) kill(pids[i], SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (size_t i = 0; i < pids.size(); ++i) {
    while (!done[i]) {
      int st = 0;
      const pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i] || (r < 0 && errno == ECHILD)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[i], SIGKILL);
        waitpid(pids[i], &st, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

}  // namespace

Result<Backend> ParseBackend(std::string_view name) {
  for (Backend b : {Backend::kAuto, Backend::kShm, Backend::kMpi, Backend::kNccl}) {
    if (BackendName(b) == name) return b;
  }
  return InvalidArgument("unknown backend '" + std::string(name) +
                         "'; expected auto, shm, mpi or nccl");
}

std::string_view BackendName(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kShm:
      return "shm";
    case Backend::kMpi:
      return "mpi";
    case Backend::kNccl:
      return "nccl";
  }
  return "unknown";
}

bool BackendCompiled(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
    case Backend::kShm:
      return true;
    case Backend::kMpi:
      return GANTRY_HAVE_MPI != 0;
    case Backend::kNccl:
      return GANTRY_HAVE_NCCL != 0;
  }
  return false;
}

bool UnderMpiLauncher() {
  auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
  };
  return set("OMPI_COMM_WORLD_SIZE") || set("PMI_SIZE") || set("PMIX_RANK") ||
         (set("SLURM_STEP_NUM_TASKS") && set("SLURM_PROCID"));
}

Result<int> RunRanks(const LaunchOptions& options,
                     const std::function<int(Communicator& comm)>& body) {
  if (!BackendCompiled(options.backend)) {
    if (options.backend == Backend::kNccl) {
      return FailedPrecondition("nccl backend not compiled in: rebuild with CUDA and NCCL");
    }
    return FailedPrecondition(
        "mpi backend not compiled in: install an MPI (libopenmpi-dev) and "
        "rebuild");
  }
  if (UnderMpiLauncher()) {
#if GANTRY_HAVE_MPI
    return internal::RunUnderMpi(options, body);
#else
    return FailedPrecondition(
        "started by an MPI launcher, but this Gantry was built without "
        "MPI: rebuild with MPI, or run without mpirun/srun to fork local "
        "ranks");
#endif
  }
  if (options.backend == Backend::kMpi) {
    return FailedPrecondition(
        "the mpi backend needs an MPI launcher: run `mpirun -np N gantry "
        "...`, or use --backend shm for local ranks");
  }

#if GANTRY_HAVE_NCCL
  // Every rank would fail alike: say once that the plugin or its libraries are missing.
  if (options.backend == Backend::kNccl) RETURN_IF_ERROR(internal::NcclPlugin().status());
#endif
  const std::vector<int> cpus = AllowedCpus();
  const int cores = std::max<int>(1, static_cast<int>(cpus.size()));
  int ranks = options.ranks;
  if (ranks == 0) {
#if GANTRY_HAVE_NCCL
    if (options.backend == Backend::kNccl) {
      ASSIGN_OR_RETURN(const internal::NcclPluginV1* nccl, internal::NcclPlugin());
      ranks = nccl->cuda_device_count();
      if (ranks == 0) return FailedPrecondition("nccl backend: no CUDA device is visible");
    } else {
      ranks = std::min(cores, kDefaultMaxRanks);
    }
#else
    ranks = std::min(cores, kDefaultMaxRanks);
#endif
  }
  if (ranks < 1 || ranks > internal::kMaxShmRanks) {
    return InvalidArgument("--ranks " + std::to_string(ranks) + " is out of range; use 1.." +
                           std::to_string(internal::kMaxShmRanks));
  }
  // Every rank needs its staging area in /dev/shm before anything else.
  struct statvfs vfs {};
  if (statvfs("/dev/shm", &vfs) != 0) {
    return FailedPrecondition("/dev/shm is not available (" + std::string(std::strerror(errno)) +
                              "); the shm backend needs a tmpfs there");
  }
  const uint64_t need = static_cast<uint64_t>(ranks) * internal::ShmStagingBytes(ranks);
  const uint64_t avail = uint64_t{vfs.f_bavail} * vfs.f_frsize;
  if (need > avail) {
    return ResourceExhausted(std::to_string(ranks) + " ranks need " + std::to_string(need >> 20) +
                             " MiB of /dev/shm but only " + std::to_string(avail >> 20) +
                             " MiB are free; use fewer ranks or enlarge /dev/shm");
  }

  const bool pin = options.pin && cores >= ranks && !cpus.empty();
  const std::string session = internal::NewShmSessionName();
  const pid_t parent = getpid();
  std::fflush(nullptr);  // or children would print the parent's buffered output again
  std::vector<pid_t> pids;
  std::vector<bool> done;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) RunChild(options, r, ranks, pin ? cpus[r] : -1, parent, session, body);
    if (pid < 0) {
      const int err = errno;
      KillAll(pids, std::vector<bool>(pids.size(), false));
      RemoveSegments(session);
      return ResourceExhausted("could not start rank " + std::to_string(r) + " of " +
                               std::to_string(ranks) + ": fork: " + std::strerror(err));
    }
    pids.push_back(pid);
    done.push_back(false);
  }

  // Wait for our own children only (the caller may have others), and reap them
  // promptly: peers detect a dead rank by its pid disappearing, which happens
  // only once it is reaped. pidfds let us sleep until one exits instead of
  // waking up (and disturbing a pinned rank) every millisecond.
  std::vector<int> pidfds(ranks, -1);
  for (int r = 0; r < ranks; ++r) pidfds[r] = OpenPidfd(pids[r]);
  int code = 0;
  int remaining = ranks;
  while (remaining > 0) {
    WaitForAnExit(pids, pidfds, done);
    bool crashed = false;
    for (int r = 0; r < ranks; ++r) {
      if (done[r]) continue;
      int st = 0;
      const pid_t got = waitpid(pids[r], &st, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR)) continue;
      done[r] = true;
      --remaining;
      if (got > 0 && WIFEXITED(st)) {
        code = std::max(code, WEXITSTATUS(st));
      } else if (got > 0 && WIFSIGNALED(st)) {
        std::fprintf(stderr, "gantry: rank %d killed by signal %d (%s)\n", r, WTERMSIG(st),
                     strsignal(WTERMSIG(st)));
        code = std::max(code, 1);
        crashed = true;
      }
    }
    if (crashed) {
      KillAll(pids, done);
      break;
    }
  }
  for (int fd : pidfds) {
    if (fd >= 0) close(fd);
  }
  RemoveSegments(session);
  return code;
}

namespace internal {

std::string NewShmSessionName() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d-%08x", static_cast<int>(getpid()), rd());
  return buf;
}

}  // namespace internal
}  // namespace gantry::comm
