// The shared-memory collective engine. See src/comm/README.md for the design:
// one control segment of per-rank sync lines, a double-buffered staging area per
// rank, and single-copy collectives between buffers from Allocate().
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "affinity.h"
#include "gantry/comm/shm.h"
#include "gantry/config.h"
#include "reduce.h"
#include "shm_internal.h"

#if GANTRY_HAVE_NUMA
#include <numa.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gantry::comm {
namespace {

using internal::ShmTuning;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x67616e7472790001ull;  // "gantry", layout version 1
constexpr size_t kLineBytes = 128;  // two cache lines: no false sharing with adjacent-line prefetch
constexpr size_t kPageBytes = 4096;
constexpr size_t kSwapTileBytes = 32 << 10;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// One per rank and epoch parity. A rank publishes epoch t by writing the line
// of parity t % 2: payload first, then `epoch` with release order. Up to
// kInlineBytes of data travel inside the line itself, so a tiny collective costs
// one cache-line transfer per peer.
struct alignas(kLineBytes) SyncLine {
  std::atomic<uint64_t> epoch;
  uint8_t payload[internal::kInlineBytes];
};
static_assert(sizeof(SyncLine) == kLineBytes);
static_assert(offsetof(SyncLine, payload) + internal::kInlineBytes <= 64,
              "the inline payload shares the epoch's cache line");

// Setup progress of one rank, polled by its peers while the group forms.
struct alignas(kLineBytes) RankInfo {
  std::atomic<int32_t> pid;
  // 0 not yet, 1 staging segment created, 2 peers mapped, -1 setup failed.
  std::atomic<int32_t> stage;
  // CPUs this rank may run on (bit c of word c / 64), written before stage 1.
  uint64_t cpus[16];
  // 1 + the rank this one stopped waiting for (it died or never came), so that
  // peers who then see this rank exit can name the first failure instead.
  std::atomic<int32_t> gave_up_on;
};

struct alignas(kLineBytes) CtlHeader {
  std::atomic<uint64_t> magic;
  int32_t size;
  uint32_t reserved;
  uint64_t half_bytes;
};

// Where one rank's send or recv buffer lives, as published to its peers.
struct BufferRef {
  static constexpr uint64_t kUnused = ~0ull;  // the collective does not touch it on this rank
  uint64_t id_plus_one = 0;                   // 0: not from Allocate(); else buffer id + 1
  uint64_t offset = 0;
  bool registered() const { return id_plus_one != 0; }
  bool operator==(const BufferRef&) const = default;
};
struct CallRefs {
  BufferRef send;
  BufferRef recv;
};
static_assert(sizeof(CallRefs) <= internal::kInlineBytes);

// Published by Allocate() so every rank learns whether all ranks succeeded.
struct AllocReport {
  int64_t error;  // 0 or errno
  uint64_t bytes;
};

size_t RoundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }


// A shared mapping; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, size_t bytes) : base_(static_cast<uint8_t*>(base)), bytes_(bytes) {}
  Mapping(Mapping&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      Reset();
      base_ = std::exchange(o.base_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  ~Mapping() { Reset(); }
  uint8_t* data() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  void Reset() {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = nullptr;
  }
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

// Creates a segment sized `bytes` with its memory reserved up front:
// posix_fallocate reports a full /dev/shm as ENOSPC here instead of SIGBUS on
// first touch, and places the pages by this (pinned) process's NUMA policy.
Result<Mapping> CreateSegment(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return AlreadyExists("/dev/shm" + name +
                           " already exists: another group uses this session name, or a crashed "
                           "run left it behind; remove it or pick another session");
    }
    return IoError("creating /dev/shm" + name, errno);
  }
  if (const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    if (rc == ENOSPC) {
      struct statvfs vfs {};
      const uint64_t free_mib =
          statvfs("/dev/shm", &vfs) == 0 ? uint64_t{vfs.f_bavail} * vfs.f_frsize >> 20 : 0;
      return ResourceExhausted("/dev/shm is full: cannot reserve " + std::to_string(bytes >> 20) +
                               " MiB for /dev/shm" + name + " (" + std::to_string(free_mib) +
                               " MiB free); free space there or use smaller buffers");
    }
    return IoError("reserving " + std::to_string(bytes) + " bytes for /dev/shm" + name, rc);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return IoError("mapping /dev/shm" + name, err);
  }
  return Mapping(p, bytes);
}

// Maps a peer's segment, which must already exist with at least `bytes`.
Result<Mapping> OpenSegment(const std::string& name, size_t bytes, int prot) {
  const int fd = shm_open(name.c_str(), prot == PROT_READ ? O_RDONLY : O_RDWR, 0);
  if (fd < 0) return IoError("opening /dev/shm" + name, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    close(fd);
    return Internal("/dev/shm" + name + " is smaller than expected");
  }
  void* p = mmap(nullptr, bytes, prot, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) return IoError("mapping /dev/shm" + name, err);
  return Mapping(p, bytes);
}

class ShmCommunicator final : public Communicator {
 public:
  explicit ShmCommunicator(const ShmOptions& o)
      : session_(o.session),
        rank_(o.rank),
        size_(o.size),
        timeout_s_(o.timeout_s),
        tuning_(internal::DefaultShmTuning(o.size)) {}

  Status Init();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "shm"; }
  std::string DeviceDescription() const override { return device_; }

  Result<Buffer> Allocate(size_t bytes) override;

  Status AllReduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override;
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override;
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                       ReduceOp op) override;
  Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root) override;
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                int root) override;
  Status AllToAll(const void* send, void* recv, size_t count, DataType type) override;
  Status SendRecv(const void* send, void* recv, size_t count, DataType type, int send_peer,
                  int recv_peer) override;
  Status Gather(const void* send, void* recv, size_t count, DataType type, int root) override;
  Status Scatter(const void* send, void* recv, size_t count, DataType type, int root) override;
  Status Barrier() override;
  Status HostAllReduce(std::span<double> values, ReduceOp op) override;

 private:
  struct Region {
    uint64_t id;
    std::vector<Mapping> maps;  // maps[q]: rank q's buffer `id`, mapped here
    size_t bytes;               // as requested (the mappings are page-rounded)
  };

  std::string SegmentName(std::string_view suffix) const {
    std::string name = "/gantry-";
    name.append(session_).append("-").append(suffix);
    return name;
  }
  std::string RankSegmentName(int rank, std::string_view what) const {
    std::string suffix = "r";
    suffix.append(std::to_string(rank)).append("-").append(what);
    return SegmentName(suffix);
  }

  SyncLine& Line(int q, uint64_t epoch) const {
    return lines_[static_cast<size_t>(q) * 2 + (epoch & 1)];
  }
  // Where this rank puts data that it publishes at `epoch`: inside its sync line
  // when small, else the staging half of that parity. A rank reads what peers
  // published at epoch t only before it arrives at t + 1, so when it refills a
  // half for t + 2 every reader of that half's previous contents is done.
  uint8_t* Outbox(uint64_t epoch, size_t bytes) const {
    if (bytes <= internal::kInlineBytes) return Line(rank_, epoch).payload;
    return staging_[rank_].data() + (epoch & 1) * tuning_.half_bytes;
  }
  const uint8_t* Inbox(int q, uint64_t epoch, size_t bytes) const {
    if (bytes <= internal::kInlineBytes) return Line(q, epoch).payload;
    return staging_[q].data() + (epoch & 1) * tuning_.half_bytes;
  }
  uint64_t next_epoch() const { return epoch_ + 1; }

  // Publishes the next epoch and waits until every peer has published it.
  Status Sync();
  Status WaitFor(int q, uint64_t epoch);
  Status WaitSlow(int q, uint64_t epoch);
  // Unavailable when a peer's process is gone; *culprit is the rank to blame.
  Status CheckPeersAlive(int* culprit) const;
  // Polls until every rank's setup stage is >= `stage` (group formation only).
  Status WaitStage(int stage, const char* what);

  // Guards every public call: a failed communicator stays failed.
  template <typename F>
  Status Guard(const char* what, F&& body) {
    if (!failed_.ok()) return failed_;
    what_ = what;
    Status s = body();
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument) failed_ = s;
    return s;
  }

  BufferRef Lookup(const void* p, size_t bytes, bool used) const;
  // Exchanges where each rank's buffers live. Returns true and fills send_/recv_
  // (rank q's buffers in this address space) when every buffer the call uses on
  // every rank came from Allocate(); false means take the staged path.
  Result<bool> ExchangeRefs(const void* send, size_t send_bytes, bool send_used, const void* recv,
                            size_t recv_bytes, bool recv_used);
  // AllReduce results this large go out with non-temporal stores.
  bool Stream(size_t bytes) const { return bytes >= tuning_.stream_bytes; }
  // Element range of rank q's share when `count` elements are split across
  // ranks in whole cache lines.
  std::pair<size_t, size_t> Share(size_t count, size_t elem, int q) const;
  // Elements per pipeline step when each rank publishes `blocks` blocks.
  size_t StepElems(size_t elem, int blocks) const;

  Status ReduceImpl(const uint8_t* send, uint8_t* recv, size_t count, DataType type, ReduceOp op,
                    int root);
  Status StagedReduce(const uint8_t* send, uint8_t* recv, size_t count, DataType type, ReduceOp op,
                      int root);
  Status FinishDirect(bool streamed);

  std::string session_;
  int rank_;
  int size_;
  double timeout_s_;
  ShmTuning tuning_;
  std::string device_;
  int spin_limit_ = 0;
  const char* what_ = "setup";

  Mapping ctl_;
  CtlHeader* header_ = nullptr;
  SyncLine* lines_ = nullptr;  // [rank][parity]
  RankInfo* info_ = nullptr;   // [rank]
  std::vector<Mapping> staging_;
  uint64_t epoch_ = 0;
  Status failed_;

  std::vector<Region> regions_;
  uint64_t next_buffer_id_ = 0;
  // Rank q's send / recv pointers for the current single-copy call.
  std::vector<uint8_t*> send_;
  std::vector<uint8_t*> recv_;
  std::vector<bool> in_place_;
  std::vector<CallRefs> refs_;  // what every rank published for the current call
  std::vector<const void*> srcs_;
  std::vector<void*> dsts_;
  std::vector<uint8_t*> copy_dsts_;
  std::vector<uint8_t> swap_tiles_;  // 2 * kSwapTileBytes, for in-place alltoall
};

// ---------------------------------------------------------------------------
// Forming the group.

Status ShmCommunicator::Init() {
  device_ = internal::DescribeCpu();
  send_.resize(size_);
  recv_.resize(size_);
  in_place_.resize(size_);
  refs_.resize(size_);
  srcs_.resize(size_);
  dsts_.resize(size_);
  copy_dsts_.resize(size_);
  swap_tiles_.resize(2 * kSwapTileBytes);

  const size_t ctl_bytes =
      RoundUp(sizeof(CtlHeader) + size_ * (2 * sizeof(SyncLine) + sizeof(RankInfo)), kPageBytes);
  const std::string ctl_name = SegmentName("ctl");
  const auto start = Clock::now();
  auto timed_out = [&] {
    return timeout_s_ > 0 &&
           std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_;
  };
  if (rank_ == 0) {
    ASSIGN_OR_RETURN(ctl_, CreateSegment(ctl_name, ctl_bytes));
    header_ = reinterpret_cast<CtlHeader*>(ctl_.data());
    header_->size = size_;
    header_->half_bytes = tuning_.half_bytes;
    header_->magic.store(kMagic, std::memory_order_release);
  } else {
    // Rank 0 may not have created the segment yet, or not finished sizing it.
    // Look at the header alone first: a group of another size has a segment of
    // another size.
    while (true) {
      auto m = OpenSegment(ctl_name, kPageBytes, PROT_READ);
      if (m.ok()) {
        const auto* h = reinterpret_cast<const CtlHeader*>(m->data());
        if (h->magic.load(std::memory_order_acquire) == kMagic) {
          if (h->size != size_ || h->half_bytes != tuning_.half_bytes) {
            return InvalidArgument("rank " + std::to_string(rank_) + " was started with " +
                                   std::to_string(size_) + " ranks but rank 0 with " +
                                   std::to_string(h->size) +
                                   "; start every rank with the same size");
          }
          ASSIGN_OR_RETURN(ctl_, OpenSegment(ctl_name, ctl_bytes, PROT_READ | PROT_WRITE));
          header_ = reinterpret_cast<CtlHeader*>(ctl_.data());
          break;
        }
      }
      if (timed_out()) {
        return DeadlineExceeded("rank " + std::to_string(rank_) + ": no shared-memory group '" +
                                session_ + "' from rank 0 after " + std::to_string(timeout_s_) +
                                " s (/dev/shm" + ctl_name +
                                "); was rank 0 started with the same session?");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  lines_ = reinterpret_cast<SyncLine*>(ctl_.data() + sizeof(CtlHeader));
  info_ =
      reinterpret_cast<RankInfo*>(ctl_.data() + sizeof(CtlHeader) + size_ * 2 * sizeof(SyncLine));

  // My staging area, created and touched by me so its pages are local to me.
  staging_.resize(size_);
  const std::string my_staging = RankSegmentName(rank_, "s");
  info_[rank_].pid.store(getpid(), std::memory_order_relaxed);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
  for (int c = 0; c < std::min(CPU_SETSIZE, 1024); ++c) {
    if (CPU_ISSET(c, &mine)) info_[rank_].cpus[c / 64] |= uint64_t{1} << (c % 64);
  }
  auto created = CreateSegment(my_staging, 2 * tuning_.half_bytes);
  if (!created.ok()) {
    info_[rank_].stage.store(-1, std::memory_order_release);
    if (rank_ == 0) shm_unlink(ctl_name.c_str());
    return created.status();
  }
  staging_[rank_] = std::move(created).value();
  info_[rank_].stage.store(1, std::memory_order_release);

  Status s = WaitStage(1, "create its staging segment");
  // Every rank has the control segment mapped once it reached stage 1; after a
  // failure nobody else may join.
  if (rank_ == 0) shm_unlink(ctl_name.c_str());
  // More ranks than the CPUs they may use between them: a spinning rank holds
  // the CPU a peer needs, so waits give it up almost at once.
  int usable = 0;
  for (int w = 0; w < 16 && s.ok(); ++w) {
    uint64_t any = 0;
    for (int q = 0; q < size_; ++q) any |= info_[q].cpus[w];
    usable += std::popcount(any);
  }
  spin_limit_ = size_ > usable ? tuning_.spins_oversubscribed : tuning_.spins;
  for (int q = 0; q < size_ && s.ok(); ++q) {
    if (q == rank_) continue;
    auto m = OpenSegment(RankSegmentName(q, "s"), 2 * tuning_.half_bytes, PROT_READ);
    if (m.ok()) {
      staging_[q] = std::move(m).value();
    } else {
      s = m.status();
    }
  }
  if (s.ok()) {
    info_[rank_].stage.store(2, std::memory_order_release);
    s = WaitStage(2, "map the staging segments");
  } else {
    info_[rank_].stage.store(-1, std::memory_order_release);
  }
  shm_unlink(my_staging.c_str());
  return s;
}

Status ShmCommunicator::WaitStage(int stage, const char* what) {
  const auto start = Clock::now();
  for (int q = 0; q < size_; ++q) {
    while (true) {
      const int st = info_[q].stage.load(std::memory_order_acquire);
      if (st >= stage) break;
      if (st < 0) {
        return Unavailable("rank " + std::to_string(q) + " failed to " + what + " (see its error)");
      }
      const pid_t pid = info_[q].pid.load(std::memory_order_relaxed);
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
        return Unavailable("rank " + std::to_string(q) + " (pid " + std::to_string(pid) +
                           ") exited while the shared-memory group was forming");
      }
      if (timeout_s_ > 0 &&
          std::chrono::duration<double>(Clock::now() - start).count() > timeout_s_) {
        return DeadlineExceeded("rank " + std::to_string(q) + " did not " + what + " within " +
                                std::to_string(timeout_s_) + " s; start all " +
                                std::to_string(size_) + " ranks with the same session");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Synchronisation.

Status ShmCommunicator::Sync() {
  const uint64_t t = ++epoch_;
  Line(rank_, t).epoch.store(t, std::memory_order_release);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    if (Line(q, t).epoch.load(std::memory_order_acquire) >= t) continue;
    RETURN_IF_ERROR(WaitFor(q, t));
  }
  return Status::Ok();
}

Status ShmCommunicator::WaitFor(int q, uint64_t t) {
  const std::atomic<uint64_t>& e = Line(q, t).epoch;
  for (int i = 0; i < spin_limit_; ++i) {
    CpuRelax();
    if (e.load(std::memory_order_acquire) >= t) return Status::Ok();
  }
  return WaitSlow(q, t);
}

// Past the spin budget: yield the CPU (oversubscribed ranks need it), and every
// few milliseconds check that the peers still exist and the deadline holds.
Status ShmCommunicator::WaitSlow(int q, uint64_t t) {
  const std::atomic<uint64_t>& e = Line(q, t).epoch;
  const auto start = Clock::now();
  auto next_check = start + std::chrono::milliseconds(5);
  for (uint64_t i = 0;; ++i) {
    if (e.load(std::memory_order_acquire) >= t) return Status::Ok();
    if ((i & 31) != 0) {
      sched_yield();
      continue;
    }
    const auto now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start).count();
    // A peer that is busy for long (printing, checking results) should not cost
    // a whole CPU: after a second, nap between polls.
    if (waited > 1.0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (now < next_check) {
      sched_yield();
      continue;
    }
    next_check = now + std::chrono::milliseconds(5);
    int culprit = -1;
    if (Status alive = CheckPeersAlive(&culprit); !alive.ok()) {
      if (e.load(std::memory_order_acquire) >= t) return Status::Ok();  // arrived, then left
      info_[rank_].gave_up_on.store(culprit + 1, std::memory_order_relaxed);
      return Status(alive.code(), alive.message() + " while rank " + std::to_string(rank_) +
                                      " waited in " + what_);
    }
    if (timeout_s_ > 0 && waited > timeout_s_) {
      info_[rank_].gave_up_on.store(q + 1, std::memory_order_relaxed);
      const pid_t pid = info_[q].pid.load(std::memory_order_relaxed);
      return DeadlineExceeded("rank " + std::to_string(rank_) + " waited " +
                              std::to_string(timeout_s_) + " s in " + what_ + " for rank " +
                              std::to_string(q) + " (pid " + std::to_string(pid) +
                              "), which is alive but did not arrive; did every rank call the "
                              "same collectives in the same order?");
    }
  }
}

Status ShmCommunicator::CheckPeersAlive(int* culprit) const {
  // A rank that gave up on another exits soon after; prefer to name a rank that
  // exited on its own, the first failure.
  int follower = -1;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    const pid_t pid = info_[q].pid.load(std::memory_order_relaxed);
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (info_[q].gave_up_on.load(std::memory_order_relaxed) == 0) {
      *culprit = q;
      return Unavailable("rank " + std::to_string(q) + " (pid " + std::to_string(pid) + ") exited");
    }
    if (follower < 0) follower = q;
  }
  if (follower < 0) return Status::Ok();
  const int first = info_[follower].gave_up_on.load(std::memory_order_relaxed) - 1;
  *culprit = first;
  return Unavailable("rank " + std::to_string(follower) + " (pid " +
                     std::to_string(info_[follower].pid.load(std::memory_order_relaxed)) +
                     ") exited after giving up on rank " + std::to_string(first));
}

Status ShmCommunicator::Barrier() {
  return Guard("barrier", [&] { return Sync(); });
}

// ---------------------------------------------------------------------------
// Registered memory.

Result<Buffer> ShmCommunicator::Allocate(size_t bytes) {
  if (!failed_.ok()) return failed_;
  if (bytes == 0) return Buffer();
  what_ = "allocate";
  const uint64_t id = next_buffer_id_++;
  const size_t mapped = RoundUp(bytes, kPageBytes);
  const std::string my_name = RankSegmentName(rank_, "b" + std::to_string(id));
  Region region{id, {}, bytes};
  region.maps.resize(size_);
  auto created = CreateSegment(my_name, mapped);
  if (created.ok()) region.maps[rank_] = std::move(created).value();
  // Removes my segment's name once every peer has mapped it (or gave up).
  auto unlink_mine = [&] {
    if (created.ok()) shm_unlink(my_name.c_str());
  };

  // Round 1: did everybody create theirs, with the same size? Every rank reads
  // the same reports, so every rank reaches the same verdict.
  AllocReport mine{created.ok() ? 0 : ENOMEM, bytes};
  uint64_t t = next_epoch();
  std::memcpy(Outbox(t, sizeof mine), &mine, sizeof mine);
  if (Status s = Sync(); !s.ok()) {
    unlink_mine();
    failed_ = s;
    return s;
  }
  for (int q = 0; q < size_; ++q) {
    AllocReport r;
    std::memcpy(&r, Inbox(q, t, sizeof r), sizeof r);
    if (r.bytes != bytes) {
      unlink_mine();
      return InvalidArgument("Allocate(" + std::to_string(bytes) + ") on rank " +
                             std::to_string(rank_) + " but Allocate(" + std::to_string(r.bytes) +
                             ") on rank " + std::to_string(q) +
                             "; every rank must allocate the same sizes in the same order");
    }
    if (r.error != 0) {
      unlink_mine();
      if (q == rank_) return created.status();
      return ResourceExhausted("rank " + std::to_string(q) + " could not allocate " +
                               std::to_string(bytes) + " bytes of shared memory (see its error)");
    }
  }

  // Round 2: map every peer's buffer, then agree that everybody could.
  Status mapped_all;
  for (int q = 0; q < size_ && mapped_all.ok(); ++q) {
    if (q == rank_) continue;
    auto m =
        OpenSegment(RankSegmentName(q, "b" + std::to_string(id)), mapped, PROT_READ | PROT_WRITE);
    if (m.ok()) {
      region.maps[q] = std::move(m).value();
    } else {
      mapped_all = m.status();
    }
  }
  mine.error = mapped_all.ok() ? 0 : EIO;
  t = next_epoch();
  std::memcpy(Outbox(t, sizeof mine), &mine, sizeof mine);
  Status s = Sync();
  unlink_mine();
  if (!s.ok()) {
    failed_ = s;
    return s;
  }
  if (!mapped_all.ok()) return mapped_all;
  for (int q = 0; q < size_; ++q) {
    AllocReport r;
    std::memcpy(&r, Inbox(q, t, sizeof r), sizeof r);
    if (r.error != 0) {
      return Unavailable("rank " + std::to_string(q) + " could not map the other ranks' " +
                         std::to_string(bytes) + "-byte buffers (see its error)");
    }
  }
  uint8_t* data = region.maps[rank_].data();
  regions_.push_back(std::move(region));
  return Buffer(data, bytes, [this, id](void*, size_t) {
    std::erase_if(regions_, [id](const Region& r) { return r.id == id; });
  });
}

BufferRef ShmCommunicator::Lookup(const void* p, size_t bytes, bool used) const {
  if (!used) return BufferRef{BufferRef::kUnused, 0};
  const auto* b = static_cast<const uint8_t*>(p);
  for (const Region& r : regions_) {
    const uint8_t* base = r.maps[rank_].data();
    if (b >= base && bytes <= r.bytes && static_cast<size_t>(b - base) <= r.bytes - bytes) {
      return BufferRef{r.id + 1, static_cast<uint64_t>(b - base)};
    }
  }
  return BufferRef{};
}

Result<bool> ShmCommunicator::ExchangeRefs(const void* send, size_t send_bytes, bool send_used,
                                           const void* recv, size_t recv_bytes, bool recv_used) {
  const CallRefs mine{Lookup(send, send_bytes, send_used), Lookup(recv, recv_bytes, recv_used)};
  const uint64_t t = next_epoch();
  std::memcpy(Outbox(t, sizeof mine), &mine, sizeof mine);
  RETURN_IF_ERROR(Sync());
  std::vector<CallRefs>& all = refs_;
  bool registered = true;
  for (int q = 0; q < size_; ++q) {
    std::memcpy(&all[q], Inbox(q, t, sizeof(CallRefs)), sizeof(CallRefs));
    registered = registered && all[q].send.registered() && all[q].recv.registered();
  }
  if (!registered) return false;
  auto resolve = [&](int q, const BufferRef& ref) -> uint8_t* {
    if (ref.id_plus_one == BufferRef::kUnused) return nullptr;
    for (const Region& r : regions_) {
      if (r.id + 1 == ref.id_plus_one) return r.maps[q].data() + ref.offset;
    }
    return nullptr;
  };
  for (int q = 0; q < size_; ++q) {
    send_[q] = resolve(q, all[q].send);
    recv_[q] = resolve(q, all[q].recv);
    in_place_[q] = all[q].send == all[q].recv;
    if ((send_[q] == nullptr && all[q].send.id_plus_one != BufferRef::kUnused) ||
        (recv_[q] == nullptr && all[q].recv.id_plus_one != BufferRef::kUnused)) {
      return FailedPrecondition("rank " + std::to_string(q) +
                                " passed a buffer from Allocate() "
                                "that rank " +
                                std::to_string(rank_) +
                                " has already freed; free buffers on every rank together");
    }
  }
  return true;
}

// Single-copy calls end with a barrier: afterwards every rank's output is
// written and nobody reads this rank's input any more.
Status ShmCommunicator::FinishDirect(bool streamed) {
  if (streamed) internal::StreamFence();
  return Sync();
}

std::pair<size_t, size_t> ShmCommunicator::Share(size_t count, size_t elem, int q) const {
  const size_t unit = std::max<size_t>(1, 64 / elem);
  const size_t units = (count + unit - 1) / unit;
  const size_t per = (units + size_ - 1) / size_ * unit;
  const size_t begin = std::min(count, per * q);
  return {begin, std::min(count, begin + per) - begin};
}

size_t ShmCommunicator::StepElems(size_t elem, int blocks) const {
  size_t n = tuning_.half_bytes / (elem * blocks);
  if (n >= 64) n -= n % 64;  // whole cache lines for every element size
  return std::max<size_t>(n, 1);
}

// Copies src to every destination, tile by tile so each tile is read from
// memory once.
void CopyToMany(uint8_t* const* dsts, int ndst, const uint8_t* src, size_t bytes) {
  constexpr size_t kTile = 64 << 10;
  for (size_t o = 0; o < bytes; o += kTile) {
    const size_t len = std::min(kTile, bytes - o);
    for (int d = 0; d < ndst; ++d) {
      if (dsts[d] != src) std::memcpy(dsts[d] + o, src + o, len);  // equal: in place
    }
  }
}

void CopyIfDistinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) std::memcpy(dst, src, bytes);
}

bool Overflows(size_t count, size_t factor) { return factor != 0 && count > SIZE_MAX / factor; }

// ---------------------------------------------------------------------------
// Collectives.

struct UsedBuffer {
  const void* p;
  const char* name;
  bool used = true;  // false: the collective ignores it on this rank
};

Status ValidateCall(const char* what, size_t count, size_t elem, int nranks,
                    std::initializer_list<UsedBuffer> buffers) {
  if (elem == 0) return InvalidArgument(std::string(what) + ": unknown data type");
  if (Overflows(count, elem * static_cast<size_t>(nranks))) {
    return InvalidArgument(std::string(what) + ": count " + std::to_string(count) +
                           " overflows the address space");
  }
  if (count == 0) return Status::Ok();
  for (const UsedBuffer& b : buffers) {
    if (b.used && b.p == nullptr) {
      return InvalidArgument(std::string(what) + ": " + b.name + " buffer is null");
    }
  }
  return Status::Ok();
}

Status CheckRank(const char* what, const char* role, int r, int size) {
  if (r < 0 || r >= size) {
    return InvalidArgument(std::string(what) + ": " + role + " " + std::to_string(r) +
                           " is not a rank of this " + std::to_string(size) + "-rank group");
  }
  return Status::Ok();
}

// AllReduce and Reduce (root >= 0: only root's recv is written).
Status ShmCommunicator::ReduceImpl(const uint8_t* send, uint8_t* recv, size_t count, DataType type,
                                   ReduceOp op, int root) {
  const size_t elem = DataTypeSize(type);
  const size_t bytes = count * elem;
  if (count == 0) return Status::Ok();
  const bool writes = root < 0 || root == rank_;
  if (bytes > tuning_.small_bytes) {
    ASSIGN_OR_RETURN(const bool direct, ExchangeRefs(send, bytes, true, recv, bytes, writes));
    if (direct) {
      // My share of every rank's input, reduced once, written to every output.
      const auto [begin, len] = Share(count, elem, rank_);
      int ndst = 0;
      for (int q = 0; q < size_; ++q) {
        srcs_[q] = send_[q] + begin * elem;
        if (root < 0 || q == root) dsts_[ndst++] = recv_[q] + begin * elem;
      }
      const bool stream = root < 0 && Stream(bytes);
      if (len != 0) {
        internal::ReduceN(dsts_.data(), ndst, srcs_.data(), size_, len, type, op, stream);
      }
      return FinishDirect(stream);
    }
  }
  return StagedReduce(send, recv, count, type, op, root);
}

// Pipelined through the staging halves. With few ranks every rank reduces the
// whole step (one sync per step, and it reads less than the split would); with
// many ranks each reduces its share and the shares are gathered after a second
// sync.
Status ShmCommunicator::StagedReduce(const uint8_t* send, uint8_t* recv, size_t count,
                                     DataType type, ReduceOp op, int root) {
  const size_t elem = DataTypeSize(type);
  const size_t step = StepElems(elem, 1);
  const bool writes = root < 0 || root == rank_;
  for (size_t o = 0; o < count; o += step) {
    const size_t n = std::min(step, count - o);
    const size_t bytes = n * elem;
    const uint64_t t = next_epoch();
    const bool split = size_ >= tuning_.split_ranks && bytes >= tuning_.split_bytes;
    if (!split) {
      std::memcpy(Outbox(t, bytes), send + o * elem, bytes);
      RETURN_IF_ERROR(Sync());
      if (!writes) continue;
      for (int q = 0; q < size_; ++q) srcs_[q] = Inbox(q, t, bytes);
      srcs_[rank_] = send + o * elem;  // my own input is closer in my buffer
      internal::ReduceN(recv + o * elem, srcs_.data(), size_, n, type, op);
      continue;
    }
    // Publish only the shares my peers reduce; reduce mine straight from my
    // buffer into my output and my next outbox; then collect the other shares.
    uint8_t* out = Outbox(t, bytes);
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const auto [b, l] = Share(n, elem, q);
      std::memcpy(out + b * elem, send + (o + b) * elem, l * elem);
    }
    RETURN_IF_ERROR(Sync());
    const auto [begin, len] = Share(n, elem, rank_);
    for (int q = 0; q < size_; ++q) srcs_[q] = Inbox(q, t, bytes) + begin * elem;
    srcs_[rank_] = send + (o + begin) * elem;
    int ndst = 0;
    if (writes) dsts_[ndst++] = recv + (o + begin) * elem;
    if (root != rank_) dsts_[ndst++] = Outbox(t + 1, bytes) + begin * elem;
    if (len != 0 && ndst != 0) {
      internal::ReduceN(dsts_.data(), ndst, srcs_.data(), size_, len, type, op);
    }
    RETURN_IF_ERROR(Sync());
    if (!writes) continue;
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const auto [b, l] = Share(n, elem, q);
      std::memcpy(recv + (o + b) * elem, Inbox(q, t + 1, bytes) + b * elem, l * elem);
    }
  }
  return Status::Ok();
}

Status ShmCommunicator::AllReduce(const void* send, void* recv, size_t count, DataType type,
                                  ReduceOp op) {
  return Guard("all_reduce", [&]() -> Status {
    RETURN_IF_ERROR(
        ValidateCall("all_reduce", count, DataTypeSize(type), 1, {{send, "send"}, {recv, "recv"}}));
    return ReduceImpl(static_cast<const uint8_t*>(send), static_cast<uint8_t*>(recv), count, type,
                      op, -1);
  });
}

Status ShmCommunicator::Reduce(const void* send, void* recv, size_t count, DataType type,
                               ReduceOp op, int root) {
  return Guard("reduce", [&]() -> Status {
    RETURN_IF_ERROR(CheckRank("reduce", "root", root, size_));
    RETURN_IF_ERROR(ValidateCall("reduce", count, DataTypeSize(type), 1,
                                 {{send, "send"}, {recv, "recv", rank_ == root}}));
    return ReduceImpl(static_cast<const uint8_t*>(send), static_cast<uint8_t*>(recv), count, type,
                      op, root);
  });
}

Status ShmCommunicator::ReduceScatter(const void* send_v, void* recv_v, size_t count, DataType type,
                                      ReduceOp op) {
  return Guard("reduce_scatter", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(
        ValidateCall("reduce_scatter", count, elem, size_, {{send_v, "send"}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t block = count * elem;
    if (block * size_ > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, block * size_, true, recv, block, true));
      if (direct) {
        // My block of every rank's input: the work splits evenly by itself.
        for (int q = 0; q < size_; ++q) srcs_[q] = send_[q] + rank_ * block;
        internal::ReduceN(recv, srcs_.data(), size_, count, type, op);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, size_);
    for (size_t o = 0; o < count; o += step) {
      const size_t n = std::min(step, count - o);
      const size_t piece = n * elem;
      const uint64_t t = next_epoch();
      uint8_t* out = Outbox(t, piece * size_);
      for (int q = 0; q < size_; ++q) {
        if (q != rank_) std::memcpy(out + q * piece, send + q * block + o * elem, piece);
      }
      RETURN_IF_ERROR(Sync());
      for (int q = 0; q < size_; ++q) srcs_[q] = Inbox(q, t, piece * size_) + rank_ * piece;
      srcs_[rank_] = send + rank_ * block + o * elem;
      internal::ReduceN(recv + o * elem, srcs_.data(), size_, n, type, op);
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::AllGather(const void* send_v, void* recv_v, size_t count, DataType type) {
  return Guard("all_gather", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(
        ValidateCall("all_gather", count, elem, size_, {{send_v, "send"}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t block = count * elem;
    if (block > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, block, true, recv, block * size_, true));
      if (direct) {
        // Push my block into every rank's output: read once, written n times.
        for (int q = 0; q < size_; ++q) copy_dsts_[q] = recv_[q] + rank_ * block;
        CopyToMany(copy_dsts_.data(), size_, send, block);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, 1);
    for (size_t o = 0; o < count; o += step) {
      const size_t bytes = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      std::memcpy(Outbox(t, bytes), send + o * elem, bytes);
      RETURN_IF_ERROR(Sync());
      for (int q = 0; q < size_; ++q) {
        const uint8_t* src = q == rank_ ? send + o * elem : Inbox(q, t, bytes);
        CopyIfDistinct(recv + q * block + o * elem, src, bytes);
      }
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::Broadcast(const void* send_v, void* recv_v, size_t count, DataType type,
                                  int root) {
  return Guard("broadcast", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(CheckRank("broadcast", "root", root, size_));
    RETURN_IF_ERROR(ValidateCall("broadcast", count, elem, 1,
                                 {{send_v, "send", rank_ == root}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t bytes = count * elem;
    if (bytes > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, bytes, rank_ == root, recv, bytes, true));
      if (direct) {
        // Each rank carries its share of root's data to every rank.
        const auto [begin, len] = Share(count, elem, rank_);
        for (int q = 0; q < size_; ++q) copy_dsts_[q] = recv_[q] + begin * elem;
        CopyToMany(copy_dsts_.data(), size_, send_[root] + begin * elem, len * elem);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, 1);
    for (size_t o = 0; o < count; o += step) {
      const size_t n = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      if (rank_ == root) std::memcpy(Outbox(t, n), send + o * elem, n);
      RETURN_IF_ERROR(Sync());
      CopyIfDistinct(recv + o * elem, rank_ == root ? send + o * elem : Inbox(root, t, n), n);
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::AllToAll(const void* send_v, void* recv_v, size_t count, DataType type) {
  return Guard("alltoall", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(
        ValidateCall("alltoall", count, elem, size_, {{send_v, "send"}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t block = count * elem;
    if (block * size_ > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, block * size_, true, recv, block * size_, true));
      if (direct) {
        // Ranks r and q swap block (r->q) and block (q->r); r moves the first
        // half of both, q the second. Reading both pieces before writing either
        // makes this correct when either rank works in place.
        CopyIfDistinct(recv + rank_ * block, send + rank_ * block, block);
        constexpr size_t kTile = kSwapTileBytes;
        uint8_t* tmp = swap_tiles_.data();
        const size_t half = (block / 2 + 63) / 64 * 64;
        for (int q = 0; q < size_; ++q) {
          if (q == rank_) continue;
          const size_t lo = rank_ < q ? 0 : std::min(half, block);
          const size_t hi = rank_ < q ? std::min(half, block) : block;
          const uint8_t* mine = send_[rank_] + q * block;    // goes to q's recv block rank_
          const uint8_t* theirs = send_[q] + rank_ * block;  // goes to my recv block q
          uint8_t* to_q = recv_[q] + rank_ * block;
          uint8_t* to_me = recv_[rank_] + q * block;
          const bool swap = in_place_[rank_] || in_place_[q];
          for (size_t o = lo; o < hi; o += kTile) {
            const size_t len = std::min(kTile, hi - o);
            if (swap) {
              std::memcpy(tmp, mine + o, len);
              std::memcpy(tmp + kTile, theirs + o, len);
              std::memcpy(to_q + o, tmp, len);
              std::memcpy(to_me + o, tmp + kTile, len);
            } else {
              std::memcpy(to_q + o, mine + o, len);
              std::memcpy(to_me + o, theirs + o, len);
            }
          }
        }
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, size_);
    for (size_t o = 0; o < count; o += step) {
      const size_t piece = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      uint8_t* out = Outbox(t, piece * size_);
      for (int q = 0; q < size_; ++q) {
        if (q != rank_) std::memcpy(out + q * piece, send + q * block + o * elem, piece);
      }
      RETURN_IF_ERROR(Sync());
      for (int q = 0; q < size_; ++q) {
        const uint8_t* src =
            q == rank_ ? send + q * block + o * elem : Inbox(q, t, piece * size_) + rank_ * piece;
        CopyIfDistinct(recv + q * block + o * elem, src, piece);
      }
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::SendRecv(const void* send_v, void* recv_v, size_t count, DataType type,
                                 int send_peer, int recv_peer) {
  return Guard("sendrecv", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(CheckRank("sendrecv", "send peer", send_peer, size_));
    RETURN_IF_ERROR(CheckRank("sendrecv", "recv peer", recv_peer, size_));
    RETURN_IF_ERROR(ValidateCall("sendrecv", count, elem, 1, {{send_v, "send"}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t bytes = count * elem;
    if (bytes > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct, ExchangeRefs(send, bytes, true, recv, bytes, true));
      // In place, a rank would overwrite what its send peer is still reading:
      // those calls go through the staging halves.
      const bool any_in_place =
          direct && std::find(in_place_.begin(), in_place_.end(), true) != in_place_.end();
      if (direct && !any_in_place) {
        std::memcpy(recv, send_[recv_peer], bytes);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, 1);
    for (size_t o = 0; o < count; o += step) {
      const size_t n = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      std::memcpy(Outbox(t, n), send + o * elem, n);
      RETURN_IF_ERROR(Sync());
      std::memcpy(recv + o * elem, Inbox(recv_peer, t, n), n);
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::Gather(const void* send_v, void* recv_v, size_t count, DataType type,
                               int root) {
  return Guard("gather", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(CheckRank("gather", "root", root, size_));
    RETURN_IF_ERROR(ValidateCall("gather", count, elem, size_,
                                 {{send_v, "send"}, {recv_v, "recv", rank_ == root}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t block = count * elem;
    if (block > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, block, true, recv, block * size_, rank_ == root));
      if (direct) {
        CopyIfDistinct(recv_[root] + rank_ * block, send, block);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, 1);
    for (size_t o = 0; o < count; o += step) {
      const size_t n = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      if (rank_ != root) std::memcpy(Outbox(t, n), send + o * elem, n);
      RETURN_IF_ERROR(Sync());
      if (rank_ != root) continue;
      for (int q = 0; q < size_; ++q) {
        CopyIfDistinct(recv + q * block + o * elem, q == root ? send + o * elem : Inbox(q, t, n),
                       n);
      }
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::Scatter(const void* send_v, void* recv_v, size_t count, DataType type,
                                int root) {
  return Guard("scatter", [&]() -> Status {
    const size_t elem = DataTypeSize(type);
    RETURN_IF_ERROR(CheckRank("scatter", "root", root, size_));
    RETURN_IF_ERROR(ValidateCall("scatter", count, elem, size_,
                                 {{send_v, "send", rank_ == root}, {recv_v, "recv"}}));
    if (count == 0) return Status::Ok();
    const auto* send = static_cast<const uint8_t*>(send_v);
    auto* recv = static_cast<uint8_t*>(recv_v);
    const size_t block = count * elem;
    if (block * size_ > tuning_.small_bytes) {
      ASSIGN_OR_RETURN(const bool direct,
                       ExchangeRefs(send, block * size_, rank_ == root, recv, block, true));
      if (direct) {
        CopyIfDistinct(recv, send_[root] + rank_ * block, block);
        return FinishDirect(false);
      }
    }
    const size_t step = StepElems(elem, size_);
    for (size_t o = 0; o < count; o += step) {
      const size_t piece = std::min(step, count - o) * elem;
      const uint64_t t = next_epoch();
      if (rank_ == root) {
        uint8_t* out = Outbox(t, piece * size_);
        for (int q = 0; q < size_; ++q) {
          if (q != root) std::memcpy(out + q * piece, send + q * block + o * elem, piece);
        }
      }
      RETURN_IF_ERROR(Sync());
      const uint8_t* src = rank_ == root ? send + rank_ * block + o * elem
                                         : Inbox(root, t, piece * size_) + rank_ * piece;
      CopyIfDistinct(recv + o * elem, src, piece);
    }
    return Status::Ok();
  });
}

Status ShmCommunicator::HostAllReduce(std::span<double> values, ReduceOp op) {
  return AllReduce(values.data(), values.data(), values.size(), DataType::kDouble, op);
}

}  // namespace

namespace internal {
namespace {

// Size of CPU 0's cache of `level` from sysfs, or 0. Under a hypervisor CPUID
// (and so sysconf) may describe the host's caches rather than this guest's.
size_t CacheBytes(int level) {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::FILE* lf = std::fopen((dir + "level").c_str(), "r");
    if (lf == nullptr) break;
    int got_level = 0;
    const bool has_level = std::fscanf(lf, "%d", &got_level) == 1;
    std::fclose(lf);
    if (!has_level || got_level != level) continue;
    std::FILE* sf = std::fopen((dir + "size").c_str(), "r");
    if (sf == nullptr) continue;
    unsigned long long size = 0;
    char unit = 0;
    const int got = std::fscanf(sf, "%llu%c", &size, &unit);
    std::fclose(sf);
    if (got < 1) continue;
    if (unit == 'K') size <<= 10;
    if (unit == 'M') size <<= 20;
    return size;
  }
  return 0;
}

}  // namespace

ShmTuning DefaultShmTuning(int size) {
  ShmTuning t;
  // A step must stay in L2 (measured: 1 MiB halves run at a third of the speed
  // of 256 KiB ones with a 1 MiB L2), and the halves of all ranks together
  // cache-sized, so staging shrinks beyond 32 ranks.
  const size_t budget = size_t{8} << 20;
  t.half_bytes =
      std::clamp<size_t>(budget / std::max(size, 1), size_t{64} << 10, size_t{256} << 10);
  t.half_bytes = RoundUp(t.half_bytes, kPageBytes);
  // Measured on 2 ranks: from 2 KiB the single-copy path is faster even with its
  // extra sync.
  t.small_bytes = 2048;
  // Measured on 2 ranks: once a rank's share of inputs and outputs (2x the
  // message) overflows its L2, streaming stores win (they skip fetching the
  // destination lines), even while everything would still fit in L3.
  const size_t l2_probe = CacheBytes(2);
  const size_t l2 = l2_probe != 0 ? l2_probe : size_t{1} << 20;
  t.stream_bytes = std::max<size_t>(l2 / 2, size_t{256} << 10);
  return t;
}

}  // namespace internal

Result<CommunicatorPtr> CreateShmCommunicator(const ShmOptions& options) {
  if (options.size < 1 || options.size > internal::kMaxShmRanks) {
    return InvalidArgument("shared-memory group size " + std::to_string(options.size) +
                           " is out of range; use 1.." + std::to_string(internal::kMaxShmRanks));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("rank " + std::to_string(options.rank) + " is not in 0.." +
                           std::to_string(options.size - 1));
  }
  if (options.session.empty() || options.session.size() > 200 ||
      options.session.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_.") != std::string::npos) {
    return InvalidArgument("shared-memory session name '" + options.session +
                           "' must be 1-200 characters of letters, digits, '-', '_' or '.'");
  }
  if (options.timeout_s < 0) {
    return InvalidArgument("shared-memory timeout " + std::to_string(options.timeout_s) +
                           " s is negative; use 0 to wait forever");
  }
  auto comm = std::make_unique<ShmCommunicator>(options);
  RETURN_IF_ERROR(comm->Init());
  return CommunicatorPtr(std::move(comm));
}

}  // namespace gantry::comm
