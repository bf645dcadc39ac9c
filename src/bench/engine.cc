// The benchmark engine: nccl-tests' TimeTest/BenchTime loop (src/common.cu) on
// a Communicator. One engine for every collective; what differs between
// collectives is in collectives.cc (descriptor.h).
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "data.h"
#include "descriptor.h"
#include "format.h"
#include "host_memory.h"
#include "gantry/bench/collectives.h"
#include "gantry/core/json.h"
#include "gantry/core/progress.h"
#include "gantry/core/units.h"

namespace gantry::bench {
namespace {

using comm::DataType;
using comm::ReduceOp;
using internal::Layout;

// Seed of the data written before timing (nccl-tests uses 99 as well); check
// iterations use 1, 2, 3, ... so that each one sees fresh data.
constexpr uint64_t kTimingSeed = 99;
constexpr uint64_t kGiB = 1ull << 30;

// ------------------------------------------------------------------ helpers

// Text travels between ranks through HostAllReduce (doubles only): 6 bytes per
// double keeps every value an exact integer.
constexpr size_t kBytesPerDouble = 6;
constexpr size_t kHostDoubles = 11;                               // 66 bytes of hostname
constexpr size_t kDescDoubles = 30;                               // 180 bytes of device description
constexpr size_t kSlotDoubles = 2 + kHostDoubles + kDescDoubles;  // host hash, pid, texts

void EncodeText(std::string_view text, double* out, size_t ndoubles) {
  for (size_t d = 0; d < ndoubles; ++d) {
    uint64_t v = 0;
    for (size_t b = 0; b < kBytesPerDouble; ++b) {
      size_t i = d * kBytesPerDouble + b;
      uint64_t c = i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
      v |= c << (8 * b);
    }
    out[d] = static_cast<double>(v);
  }
}

std::string DecodeText(const double* in, size_t ndoubles) {
  std::string text;
  for (size_t d = 0; d < ndoubles; ++d) {
    uint64_t v = static_cast<uint64_t>(in[d]);
    for (size_t b = 0; b < kBytesPerDouble; ++b) {
      char c = static_cast<char>((v >> (8 * b)) & 0xff);
      if (c == '\0') return text;
      text += c;
    }
  }
  return text;
}

std::string ShortHostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  std::string host(buf);
  return host.substr(0, host.find('.'));  // as nccl-tests' getHostName
}

// FNV-1a, cut to 48 bits so it survives the trip through a double.
double HostHash(std::string_view host) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : host) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return static_cast<double>(h & ((1ull << 48) - 1));
}

struct Hosts {
  std::vector<std::string> device_lines;  // one per rank
  int local_ranks = 1;                    // ranks on this rank's host
};

// Every rank learns every rank's host, pid and device: for "# Using devices"
// and for sharing this host's memory among its ranks.
Result<Hosts> GatherHosts(comm::Communicator& comm) {
  const int n = comm.size();
  const int rank = comm.rank();
  const std::string host = ShortHostname();
  std::vector<double> slots(static_cast<size_t>(n) * kSlotDoubles, 0.0);
  double* mine = slots.data() + static_cast<size_t>(rank) * kSlotDoubles;
  mine[0] = HostHash(host);
  mine[1] = static_cast<double>(getpid());
  EncodeText(host, mine + 2, kHostDoubles);
  EncodeText(comm.DeviceDescription(), mine + 2 + kHostDoubles, kDescDoubles);
  RETURN_IF_ERROR(comm.HostAllReduce(slots, ReduceOp::kSum));

  Hosts hosts;
  hosts.local_ranks = 0;
  for (int r = 0; r < n; ++r) {
    const double* slot = slots.data() + static_cast<size_t>(r) * kSlotDoubles;
    int device = 0;  // index among the ranks on the same host
    for (int q = 0; q < r; ++q) device += slots[static_cast<size_t>(q) * kSlotDoubles] == slot[0];
    if (slot[0] == mine[0]) ++hosts.local_ranks;
    hosts.device_lines.push_back(
        internal::DeviceLine(r, static_cast<int>(slot[1]), DecodeText(slot + 2, kHostDoubles),
                             device, DecodeText(slot + 2 + kHostDoubles, kDescDoubles)));
  }
  return hosts;
}


uint64_t ShmFreeBytes() {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

// The largest -e this rank can afford, nccl-tests style: keep back 1 GiB per
// 16 GiB (at most 4 GiB) plus 1 GiB, then split what is left among this host's
// ranks and the buffers each one needs: send + receive from Allocate() when
// they are host memory, and three host staging buffers (inputs, readback,
// expected values) when checking.
uint64_t PerRankByteLimit(const comm::Communicator& comm, int local_ranks, bool check) {
  uint64_t limit = std::numeric_limits<uint64_t>::max();
  const bool host_buffers = comm.memory_kind() == comm::MemoryKind::kHost;
  const uint64_t per_rank_buffers = (host_buffers ? 2 : 0) + (check ? 3 : 0);
  const uint64_t avail = internal::MemAvailableBytes();
  if (per_rank_buffers > 0 && avail != std::numeric_limits<uint64_t>::max()) {
    uint64_t reserve = std::min((avail + 16 * kGiB - 1) / (16 * kGiB) * kGiB, 4 * kGiB) + kGiB;
    uint64_t usable = avail > reserve ? avail - reserve : 0;
    limit = usable / local_ranks / per_rank_buffers;
  }
  // The shared-memory backends put Allocate() in /dev/shm, which can be
  // smaller than memory.
  if (host_buffers && (comm.backend() == "shm" || comm.backend() == "auto")) {
    const uint64_t shm = ShmFreeBytes();
    if (shm != std::numeric_limits<uint64_t>::max()) limit = std::min(limit, shm / local_ranks / 2);
  }
  return limit;
}

// Opens `path`, or path.0, path.1, ... if it exists (nccl-tests never
// overwrites a JSON file). Returns the name it took.
Result<std::string> ReserveJsonFile(const std::string& path) {
  std::string candidate = path;
  for (int i = 0;; ++i) {
    int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      return candidate;
    }
    if (errno != EEXIST) return IoError("-J: cannot create " + candidate, errno);
    candidate = path + "." + std::to_string(i);
  }
}

bool CorruptForTest() {
  const char* v = std::getenv("GANTRY_BENCH_CORRUPT_FOR_TEST");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// ------------------------------------------------------------------ engine

// One (type, op, root) combination of the sweep.
struct Case {
  DataType type;
  std::optional<ReduceOp> op;  // nullopt for non-reducing collectives
  int root;                    // -1 for unrooted collectives
};

class Sweep {
 public:
  Sweep(comm::Communicator& comm, Collective collective, const BenchOptions& options,
        std::FILE* text_out)
      : comm_(comm),
        collective_(collective),
        o_(options),
        rank_(comm.rank()),
        nranks_(comm.size()),
        out_(rank_ == 0 ? text_out : nullptr),
        corrupt_(CorruptForTest() && rank_ == 0) {}

  Result<Report> Run();

 private:
  Result<Report> RunSweep();
  Status Setup(Report& report);
  std::vector<Case> Cases() const;
  Status TimeTest(const Case& c, Report& report);
  Result<Measurement> BenchTime(const Case& c, const Layout& l, bool in_place);
  Result<int64_t> Check(const Case& c, const Layout& l, bool in_place);
  Status Stage(const Case& c, const Layout& l, bool in_place, uint64_t seed, bool want_expected);
  Status Launch(const Case& c, const Layout& l, bool in_place, int iter);
  Status ReduceTimes(std::vector<double>& seconds);
  void Print(const std::string& text);

  size_t Elt(const Case& c) const { return comm::DataTypeSize(c.type); }
  internal::DataSpec Spec(const Case& c, uint64_t seed) const {
    return internal::DataSpec{c.type, c.op, nranks_, seed};
  }
  // nccl-tests moves the buffers along by one message per iteration (within
  // the allocation) so that consecutive iterations do not hit warm caches.
  size_t Shift(const Case& c, const Layout& l, int iter) const {
    size_t total = l.Bytes(Elt(c));
    size_t steps = total ? max_bytes_ / total : 1;
    return total * (static_cast<size_t>(iter) % steps);
  }
  char* SendPtr(const Case& c, const Layout& l, bool in_place, size_t shift) const {
    if (!in_place) return send_.as<char>() + shift;
    return recv_.as<char>() + shift + l.send_inplace_offset * rank_ * Elt(c);
  }
  char* RecvPtr(const Case& c, const Layout& l, bool in_place, size_t shift) const {
    return recv_.as<char>() + shift + (in_place ? l.recv_inplace_offset * rank_ * Elt(c) : 0);
  }

  comm::Communicator& comm_;
  const Collective collective_;
  const BenchOptions& o_;
  const int rank_;
  const int nranks_;
  std::FILE* const out_;  // rank 0's text output, else null
  const bool corrupt_;    // test hook: damage one received element per check
  uint64_t max_bytes_ = 0;
  comm::Buffer send_;
  comm::Buffer recv_;
  std::vector<std::byte> send_host_;  // inputs, staged for CopyFromHost
  std::vector<std::byte> image_;      // receive buffer contents (before, then after)
  std::vector<std::byte> expected_;
  uint64_t check_seed_ = 0;
  int64_t ranks_with_errors_ = 0;  // "Out of bounds values"
  std::string json_path_;          // reserved -J file (rank 0)
  std::optional<Progress> progress_;
  uint64_t rows_done_ = 0;
  double busbw_sum_ = 0;
  int64_t busbw_count_ = 0;
};

void Sweep::Print(const std::string& text) {
  if (out_ == nullptr) return;
  std::fputs(text.c_str(), out_);
  std::fflush(out_);
}

Status Sweep::Setup(Report& report) {
  ASSIGN_OR_RETURN(Hosts hosts, GatherHosts(comm_));
  report.devices = hosts.device_lines;

  std::vector<double> limit{static_cast<double>(std::min<uint64_t>(
      PerRankByteLimit(comm_, hosts.local_ranks, o_.check_iters > 0), uint64_t{1} << 52))};
  RETURN_IF_ERROR(comm_.HostAllReduce(limit, ReduceOp::kMin));
  const uint64_t affordable = static_cast<uint64_t>(limit[0]);
  max_bytes_ = std::min(o_.max_bytes, affordable);
  if (o_.min_bytes > max_bytes_) {
    return ResourceExhausted(
        "-b " + std::to_string(o_.min_bytes) + " (" + FormatSize(o_.min_bytes) +
        ") does not fit in memory: each rank can afford " + FormatSize(affordable) +
        " per buffer; lower -b, use fewer ranks per host or -c 0");
  }

  // -J is rank 0's alone; agree on failure so no rank is left waiting.
  Status json_status;
  if (rank_ == 0 && !o_.json_path.empty()) {
    Result<std::string> path = ReserveJsonFile(o_.json_path);
    if (path.ok()) {
      json_path_ = *path;
    } else {
      json_status = path.status();
    }
  }
  std::vector<double> failed{json_status.ok() ? 0.0 : 1.0};
  RETURN_IF_ERROR(comm_.HostAllReduce(failed, ReduceOp::kMax));
  if (!json_status.ok()) return json_status;
  if (failed[0] != 0) return FailedPrecondition("rank 0 could not create the -J file");

  if (!json_path_.empty()) Print("# Writing JSON output to " + json_path_ + "\n");
  Print(internal::PreambleText(report));
  if (max_bytes_ < o_.max_bytes) Print(internal::ReducedMaxText(max_bytes_));
  Print(internal::TableHeaderText(o_));

  ASSIGN_OR_RETURN(send_, comm_.Allocate(max_bytes_));
  ASSIGN_OR_RETURN(recv_, comm_.Allocate(max_bytes_));
  return Status::Ok();
}

std::vector<Case> Sweep::Cases() const {
  std::vector<std::optional<ReduceOp>> ops;
  if (TakesReduceOp(collective_)) {
    ops.assign(o_.ops.begin(), o_.ops.end());
  } else {
    ops.push_back(std::nullopt);
  }
  std::vector<int> roots;
  if (!TakesRoot(collective_)) {
    roots.push_back(-1);
  } else if (o_.root == -1) {
    for (int r = 0; r < nranks_; ++r) roots.push_back(r);
  } else {
    roots.push_back(o_.root);
  }
  // nccl-tests' order: types, then ops, then roots.
  std::vector<Case> cases;
  for (DataType type : o_.types) {
    for (const auto& op : ops) {
      for (int root : roots) cases.push_back(Case{type, op, root});
    }
  }
  return cases;
}

// Sizes of one sweep: -b, then *-f or +-i, up to -e.
std::vector<uint64_t> SweepSizes(const BenchOptions& o, uint64_t max_bytes) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = o.min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    uint64_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
    if (next <= size) break;  // overflow, or a sweep that cannot advance (-b == -e)
    size = next;
  }
  return sizes;
}

Result<Report> Sweep::Run() {
  Result<Report> report = RunSweep();
  // A failed run leaves no empty -J file behind.
  if (!report.ok() && !json_path_.empty()) ::unlink(json_path_.c_str());
  return report;
}

Result<Report> Sweep::RunSweep() {
  Report report;
  report.collective = std::string(CollectiveName(collective_));
  report.backend = std::string(comm_.backend());
  report.nranks = nranks_;
  report.options = o_;
  report.start_time = internal::NowString();
  RETURN_IF_ERROR(Setup(report));

  const std::vector<Case> cases = Cases();
  const uint64_t rows_per_cycle = cases.size() * SweepSizes(o_, max_bytes_).size();
  // The bar helps when the table goes to a file; on a terminal the rows
  // themselves show progress and a bar would interleave with them.
  if (out_ != nullptr && ::isatty(::fileno(out_)) == 0) {
    progress_.emplace(report.collective,
                      rows_per_cycle * static_cast<uint64_t>(std::max(o_.run_cycles, 1)),
                      Progress::Options{});
  }
  for (const Case& c : cases) RETURN_IF_ERROR(TimeTest(c, report));
  if (progress_) progress_->Finish();

  report.avg_busbw_gbs = busbw_count_ ? busbw_sum_ / busbw_count_ : 0.0;
  report.out_of_bounds = ranks_with_errors_;
  report.end_time = internal::NowString();
  Print(internal::FooterText(report));
  send_ = comm::Buffer();
  recv_ = comm::Buffer();

  if (rank_ == 0 && !json_path_.empty()) {
    RETURN_IF_ERROR(WriteFileAtomic(json_path_, report.ToJson().dump() + "\n"));
  }
  if (rank_ == 0 && !o_.csv_path.empty()) {
    RETURN_IF_ERROR(WriteFileAtomic(o_.csv_path, internal::CsvText(report)));
  }
  return report;
}

Status Sweep::TimeTest(const Case& c, Report& report) {
  const size_t elt = Elt(c);
  RETURN_IF_ERROR(comm_.Barrier());
  // Warm-up over every size, doubling (nccl-tests since 2.17), out of place.
  for (uint64_t size = o_.min_bytes; size <= max_bytes_ && size > 0; size *= 2) {
    Layout l = internal::ComputeLayout(collective_, size, elt, nranks_);
    for (int iter = 0; iter < o_.warmup_iters; ++iter) RETURN_IF_ERROR(Launch(c, l, false, iter));
    RETURN_IF_ERROR(comm_.Synchronize());
  }

  const std::vector<uint64_t> sizes = SweepSizes(o_, max_bytes_);
  for (int cycle = 0; o_.run_cycles == 0 || cycle < o_.run_cycles; ++cycle) {
    for (uint64_t size : sizes) {
      Layout l = internal::ComputeLayout(collective_, size, elt, nranks_);
      if (progress_) {
        progress_->Update(rows_done_,
                          FormatSize(size) + " " + std::string(comm::DataTypeName(c.type)));
      }
      Row row;
      row.size_bytes = l.Bytes(elt);
      row.count = l.count;
      row.type = c.type;
      row.op = c.op;
      row.root = c.root;
      ASSIGN_OR_RETURN(row.out_of_place, BenchTime(c, l, false));
      ASSIGN_OR_RETURN(row.in_place, BenchTime(c, l, true));
      if (o_.timestamps) row.timestamp = internal::NowString();
      for (const Measurement* m : {&row.out_of_place, &row.in_place}) {
        busbw_sum_ += m->busbw_gbs;
        ++busbw_count_;
        report.peak_busbw_gbs = std::max(report.peak_busbw_gbs, m->busbw_gbs);
      }
      Print(internal::RowText(row));
      report.rows.push_back(std::move(row));
      ++rows_done_;
    }
  }
  return Status::Ok();
}

Status Sweep::Launch(const Case& c, const Layout& l, bool in_place, int iter) {
  size_t shift = Shift(c, l, iter);
  return internal::RunCollective(comm_, collective_, SendPtr(c, l, in_place, shift),
                                 RecvPtr(c, l, in_place, shift), l.count, c.type,
                                 c.op.value_or(ReduceOp::kSum), c.root);
}

Status Sweep::ReduceTimes(std::vector<double>& seconds) {
  // -a: 0 rank 0's times, 1 the mean, 2 the minimum, 3 the maximum over ranks.
  if (o_.average == 0 && rank_ != 0) std::fill(seconds.begin(), seconds.end(), 0.0);
  ReduceOp op = o_.average == 2   ? ReduceOp::kMin
                : o_.average == 3 ? ReduceOp::kMax
                                  : ReduceOp::kSum;
  RETURN_IF_ERROR(comm_.HostAllReduce(seconds, op));
  if (o_.average == 1) {
    for (double& s : seconds) s /= nranks_;
  }
  return Status::Ok();
}

Result<Measurement> Sweep::BenchTime(const Case& c, const Layout& l, bool in_place) {
  using Clock = std::chrono::steady_clock;
  if (o_.check_iters > 0) RETURN_IF_ERROR(Stage(c, l, in_place, kTimingSeed, false));
  // One untimed op, then line everyone up.
  RETURN_IF_ERROR(Launch(c, l, in_place, 0));
  RETURN_IF_ERROR(comm_.Synchronize());
  RETURN_IF_ERROR(comm_.Barrier());

  Clock::duration untimed{0};
  const Clock::time_point start = Clock::now();
  for (int iter = 0; iter < o_.iters; ++iter) {
    RETURN_IF_ERROR(Launch(c, l, in_place, iter));
    if (o_.blocking != 0) RETURN_IF_ERROR(comm_.Synchronize());
    if (o_.blocking == 1) RETURN_IF_ERROR(comm_.Barrier());
    if (o_.blocking == 3) {
      Clock::time_point before = Clock::now();
      RETURN_IF_ERROR(comm_.Barrier());
      untimed += Clock::now() - before;
    }
  }
  const Clock::duration launched = Clock::now() - start - untimed;
  RETURN_IF_ERROR(comm_.Synchronize());
  const Clock::duration elapsed = Clock::now() - start - untimed;

  auto per_iter = [&](Clock::duration d) {
    return std::chrono::duration<double>(d).count() / o_.iters;
  };
  std::vector<double> times{per_iter(elapsed), per_iter(launched)};
  RETURN_IF_ERROR(ReduceTimes(times));
  const double seconds = times[0];

  Measurement m;
  m.time_us = (o_.report_cputime ? times[1] : seconds) * 1e6;
  m.algbw_gbs = internal::AlgorithmBytes(collective_, l, Elt(c), nranks_) / 1e9 / seconds;
  m.busbw_gbs = m.algbw_gbs * BusBandwidthFactor(collective_, nranks_);
  RETURN_IF_ERROR(comm_.Barrier());

  if (o_.check_iters == 0) return m;  // "N/A"
  m.wrong = 0;
  for (int i = 0; i < o_.check_iters && m.wrong == 0; ++i) {
    ASSIGN_OR_RETURN(m.wrong, Check(c, l, in_place));
  }
  return m;
}

Status Sweep::Stage(const Case& c, const Layout& l, bool in_place, uint64_t seed,
                    bool want_expected) {
  const size_t elt = Elt(c);
  if (l.Bytes(elt) == 0) {  // a size too small to give every rank an element
    expected_.clear();
    return Status::Ok();
  }
  const internal::DataSpec spec = Spec(c, seed);
  send_host_.resize(l.send_count * elt);
  internal::FillInput(spec, rank_, 0, l.send_count, send_host_.data());

  // The receive side starts as a sentinel pattern; in place, the inputs sit
  // inside it where communicator.h's layouts put them.
  const size_t extent = in_place ? l.InPlaceExtent(rank_) : l.recv_count;
  image_.resize(extent * elt);
  internal::FillSentinel(c.type, seed, rank_, extent, image_.data());
  if (in_place) {
    std::memcpy(image_.data() + l.send_inplace_offset * rank_ * elt, send_host_.data(),
                send_host_.size());
  } else {
    RETURN_IF_ERROR(
        comm_.CopyFromHost(SendPtr(c, l, false, 0), send_host_.data(), send_host_.size()));
  }
  RETURN_IF_ERROR(comm_.CopyFromHost(recv_.data(), image_.data(), image_.size()));
  if (!want_expected) return Status::Ok();

  // Elements the collective does not define must come back unchanged.
  const std::byte* before = image_.data() + (in_place ? l.recv_inplace_offset * rank_ * elt : 0);
  expected_.assign(before, before + l.recv_count * elt);
  for (const internal::Segment& s :
       internal::ExpectedSegments(collective_, l, rank_, c.root, nranks_)) {
    std::byte* dst = expected_.data() + s.dst * elt;
    if (s.src_rank == internal::kReduced) {
      internal::FillReduced(spec, s.src_first, s.length, dst);
    } else {
      internal::FillInput(spec, s.src_rank, s.src_first, s.length, dst);
    }
  }
  return Status::Ok();
}

Result<int64_t> Sweep::Check(const Case& c, const Layout& l, bool in_place) {
  const size_t elt = Elt(c);
  RETURN_IF_ERROR(Stage(c, l, in_place, ++check_seed_, true));
  RETURN_IF_ERROR(Launch(c, l, in_place, 0));
  RETURN_IF_ERROR(comm_.Synchronize());
  image_.resize(l.recv_count * elt);
  if (!image_.empty()) {
    RETURN_IF_ERROR(comm_.CopyToHost(image_.data(), RecvPtr(c, l, in_place, 0), image_.size()));
  }
  if (corrupt_ && !image_.empty()) image_[elt - 1] ^= std::byte{0x40};  // sign/exponent bits
  const int64_t local =
      internal::CountWrong(c.type, c.op, image_.data(), expected_.data(), l.recv_count);
  // nccl-tests: #wrong sums the ranks; "Out of bounds values" counts the ranks
  // (per check) that saw any wrong element.
  std::vector<double> totals{static_cast<double>(local), local > 0 ? 1.0 : 0.0};
  RETURN_IF_ERROR(comm_.HostAllReduce(totals, ReduceOp::kSum));
  ranks_with_errors_ += static_cast<int64_t>(totals[1]);
  return static_cast<int64_t>(totals[0]);
}

}  // namespace

Result<Report> RunBenchmark(comm::Communicator& comm, Collective collective,
                            const BenchOptions& options, std::FILE* text_out) {
  RETURN_IF_ERROR(ValidateOptions(options, collective, comm.size()));
  Sweep sweep(comm, collective, options, text_out);
  return sweep.Run();
}

}  // namespace gantry::bench
