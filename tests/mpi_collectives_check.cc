// mpi_collectives_check: run under mpirun, checks every collective of a
// communicator built by RunUnderMpi, for every type, op and root, in and out
// of place, against exact expected values.
//
//   mpirun -np 4 mpi_collectives_check mpi|auto|shm|nccl
//
// Inputs are small integers (at most a few hundred, products at most 2^ranks),
// exact in every type including int8, half and bfloat16, and avg inputs sum to
// a multiple of the rank count, so every result must match bit for bit.
// Buffers come from Allocate() (device memory for nccl, staged through
// CopyFromHost/CopyToHost); on host backends some counts use plain heap memory
// instead, to run the staged paths too. For the mpi backend the same suite runs
// again on an MpiCommunicator limited to 5 elements per MPI call, so the paths
// that split counts above INT_MAX are exercised on small buffers.
//
// Exit code: 0 when every check passed on every rank, 1 on a wrong result or a
// collective error, 2 when the communicator could not be set up.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends.h"
#include "gantry/comm/communicator.h"
#include "gantry/comm/launch.h"
#include "gantry/comm/types.h"
#include "mpi_communicator.h"

namespace gantry::comm {
namespace {

void Put(DataType t, void* p, size_t i, double v) {
  switch (t) {
    case DataType::kInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case DataType::kUint8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case DataType::kUint32:
      static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kUint64:
      static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
      break;
    case DataType::kHalf:
      static_cast<Half*>(p)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kFloat:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DataType::kDouble:
      static_cast<double*>(p)[i] = v;
      break;
    case DataType::kBfloat16:
      static_cast<Bfloat16*>(p)[i] = FloatToBfloat16(static_cast<float>(v));
      break;
  }
}

double Get(DataType t, const void* p, size_t i) {
  switch (t) {
    case DataType::kInt8:
      return static_cast<const int8_t*>(p)[i];
    case DataType::kUint8:
      return static_cast<const uint8_t*>(p)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(p)[i];
    case DataType::kUint32:
      return static_cast<const uint32_t*>(p)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::kUint64:
      return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case DataType::kHalf:
      return HalfToFloat(static_cast<const Half*>(p)[i]);
    case DataType::kFloat:
      return static_cast<const float*>(p)[i];
    case DataType::kDouble:
      return static_cast<const double*>(p)[i];
    case DataType::kBfloat16:
      return Bfloat16ToFloat(static_cast<const Bfloat16*>(p)[i]);
  }
  return 0;
}

// Input of rank r at element i for a reduction with `op` over n ranks.
double ReduceInput(ReduceOp op, int r, int n, size_t i) {
  switch (op) {
    case ReduceOp::kProd:
      return 1 + (r + i) % 2;
    case ReduceOp::kAvg: {
      // Rank 0 adds n-1, the others subtract 1: the sum is n * u exactly.
      double u = 1 + i % 3;
      return r == 0 ? u + (n - 1) : u - 1;
    }
    default:
      return 1 + (3 * r + i) % 7;
  }
}

double Expected(ReduceOp op, int n, size_t i) {
  double acc = ReduceInput(op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    double v = ReduceInput(op, r, n, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc += v;
        break;
      case ReduceOp::kProd:
        acc *= v;
        break;
      case ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
    }
  }
  return op == ReduceOp::kAvg ? acc / n : acc;
}

// A payload value identifying (block owner or pair, element).
double Id(int block, size_t i) { return 1 + (block * 37 + i * 11) % 101; }

class Checker {
 public:
  Checker(Communicator& comm, std::string label) : comm_(comm), label_(std::move(label)) {}

  int failures() const { return failures_; }
  long checks() const { return checks_; }

  void Run(size_t count, DataType type, bool plain_memory) {
    type_ = type;
    count_ = count;
    es_ = DataTypeSize(type);
    plain_ = plain_memory && comm_.memory_kind() == MemoryKind::kHost;
    const int n = comm_.size();
    if (!Alloc(&a_, n * count * es_) || !Alloc(&b_, n * count * es_)) return;
    for (ReduceOp op : AllReduceOps()) {
      for (bool ip : {false, true}) {
        AllReduce(op, ip);
        ReduceScatter(op, ip);
        for (int root = 0; root < n; ++root) Reduce(op, root, ip);
      }
    }
    for (bool ip : {false, true}) {
      AllGather(ip);
      AllToAll(ip);
      SendRecv(ip);
      for (int root = 0; root < n; ++root) {
        Broadcast(root, ip);
        Gather(root, ip);
        Scatter(root, ip);
      }
    }
    Call("barrier", comm_.Barrier());
  }

  void HostAllReduce() {
    const int n = comm_.size();
    for (ReduceOp op : AllReduceOps()) {
      std::vector<double> v = {ReduceInput(op, comm_.rank(), n, 0),
                               ReduceInput(op, comm_.rank(), n, 1)};
      if (!Call("host_all_reduce", comm_.HostAllReduce(v, op))) continue;
      ctx_ = std::string(ReduceOpName(op));
      for (size_t i = 0; i < v.size(); ++i) Expect("host_all_reduce", i, v[i], Expected(op, n, i));
    }
  }

 private:
  struct Mem {
    Buffer owned;
    std::vector<char> plain;
    char* ptr = nullptr;
  };

  bool Alloc(Mem* m, size_t bytes) {
    m->plain.clear();
    m->owned = Buffer();
    if (plain_) {
      m->plain.resize(bytes + 64);
      m->ptr = m->plain.data() + 8;  // deliberately not 64-byte aligned
      return true;
    }
    auto buf = comm_.Allocate(bytes);
    if (!Call("allocate", buf.status())) return false;
    m->owned = std::move(*buf);
    m->ptr = m->owned.as<char>();
    return true;
  }

  // Host staging of `elems` elements at element offset `at` of a buffer.
  void Upload(char* dst, const std::vector<double>& values) {
    std::vector<char> host(values.size() * es_);
    for (size_t i = 0; i < values.size(); ++i) Put(type_, host.data(), i, values[i]);
    Call("copy_from_host", comm_.CopyFromHost(dst, host.data(), host.size()));
  }
  std::vector<double> Download(const char* src, size_t elems) {
    std::vector<char> host(elems * es_);
    std::vector<double> out(elems, -1);
    if (!Call("synchronize", comm_.Synchronize())) return out;
    if (!Call("copy_to_host", comm_.CopyToHost(host.data(), src, host.size()))) return out;
    for (size_t i = 0; i < elems; ++i) out[i] = Get(type_, host.data(), i);
    return out;
  }
  void Fill(char* dst, size_t elems, double v) { Upload(dst, std::vector<double>(elems, v)); }

  bool Call(const char* what, const Status& s) {
    if (s.ok()) return true;
    Report(std::string(what) + ": " + s.ToString());
    return false;
  }
  void Report(const std::string& msg) {
    ++failures_;
    if (failures_ <= 20) {
      std::fprintf(stderr, "rank %d [%s] %s %s count %zu: %s\n", comm_.rank(), label_.c_str(),
                   std::string(DataTypeName(type_)).c_str(), ctx_.c_str(), count_, msg.c_str());
    }
  }
  void Expect(const char* what, size_t i, double got, double want) {
    ++checks_;
    if (got == want) return;
    Report(std::string(what) + " element " + std::to_string(i) + " = " + std::to_string(got) +
           ", expected " + std::to_string(want));
  }
  void ExpectAll(const char* what, const std::vector<double>& got,
                 const std::function<double(size_t)>& want) {
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want(i)) {
        Expect(what, i, got[i], want(i));
        return;  // one report per call is enough
      }
    }
    ++checks_;
  }
  void SetContext(bool in_place, int root = -1, std::optional<ReduceOp> op = std::nullopt) {
    ctx_ = op ? std::string(ReduceOpName(*op)) + " " : std::string();
    ctx_ += in_place ? "in-place" : "out-of-place";
    if (root >= 0) ctx_ += " root " + std::to_string(root);
  }
  std::vector<double> Inputs(ReduceOp op, size_t elems, size_t first = 0) {
    std::vector<double> v(elems);
    for (size_t i = 0; i < elems; ++i)
      v[i] = ReduceInput(op, comm_.rank(), comm_.size(), first + i);
    return v;
  }

  void AllReduce(ReduceOp op, bool ip) {
    SetContext(ip, -1);
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr : b_.ptr;
    Upload(send, Inputs(op, count_));
    if (!ip) Fill(recv, count_, 0);
    if (!Call("all_reduce", comm_.AllReduce(send, recv, count_, type_, op))) return;
    const int n = comm_.size();
    ExpectAll("all_reduce", Download(recv, count_), [&](size_t i) { return Expected(op, n, i); });
    if (!ip) {
      ExpectAll("all_reduce input kept", Download(send, count_),
                [&](size_t i) { return ReduceInput(op, comm_.rank(), n, i); });
    }
  }

  void ReduceScatter(ReduceOp op, bool ip) {
    SetContext(ip, -1);
    const int n = comm_.size(), r = comm_.rank();
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr + r * count_ * es_ : b_.ptr;
    Upload(send, Inputs(op, n * count_));
    if (!ip) Fill(recv, count_, 0);
    if (!Call("reduce_scatter", comm_.ReduceScatter(send, recv, count_, type_, op))) return;
    ExpectAll("reduce_scatter", Download(recv, count_),
              [&](size_t i) { return Expected(op, n, r * count_ + i); });
  }

  void Reduce(ReduceOp op, int root, bool ip) {
    SetContext(ip, root);
    const int n = comm_.size();
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr : b_.ptr;
    Upload(send, Inputs(op, count_));
    if (!ip) Fill(recv, count_, 0);
    if (!Call("reduce", comm_.Reduce(send, recv, count_, type_, op, root))) return;
    if (comm_.rank() != root) return;
    ExpectAll("reduce", Download(recv, count_), [&](size_t i) { return Expected(op, n, i); });
  }

  void AllGather(bool ip) {
    SetContext(ip);
    const int n = comm_.size(), r = comm_.rank();
    char* recv = b_.ptr;
    char* send = ip ? recv + r * count_ * es_ : a_.ptr;
    Fill(recv, n * count_, 0);
    std::vector<double> mine(count_);
    for (size_t i = 0; i < count_; ++i) mine[i] = Id(r, i);
    Upload(send, mine);
    if (!Call("all_gather", comm_.AllGather(send, recv, count_, type_))) return;
    ExpectAll("all_gather", Download(recv, n * count_),
              [&](size_t j) { return Id(static_cast<int>(j / count_), j % count_); });
  }

  void AllToAll(bool ip) {
    SetContext(ip);
    const int n = comm_.size(), r = comm_.rank();
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr : b_.ptr;
    // Block p of rank r's input is Id(r * n + p, i); it lands in block r of p.
    std::vector<double> in(n * count_);
    for (size_t j = 0; j < in.size(); ++j)
      in[j] = Id(r * n + static_cast<int>(j / count_), j % count_);
    Upload(send, in);
    if (!ip) Fill(recv, n * count_, 0);
    if (!Call("alltoall", comm_.AllToAll(send, recv, count_, type_))) return;
    ExpectAll("alltoall", Download(recv, n * count_),
              [&](size_t j) { return Id(static_cast<int>(j / count_) * n + r, j % count_); });
  }

  void SendRecv(bool ip) {
    SetContext(ip);
    const int n = comm_.size(), r = comm_.rank();
    const int to = (r + 1) % n, from = (r + n - 1) % n;
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr : b_.ptr;
    std::vector<double> mine(count_);
    for (size_t i = 0; i < count_; ++i) mine[i] = Id(r, i);
    Upload(send, mine);
    if (!ip) Fill(recv, count_, 0);
    if (!Call("sendrecv", comm_.SendRecv(send, recv, count_, type_, to, from))) return;
    ExpectAll("sendrecv", Download(recv, count_), [&](size_t i) { return Id(from, i); });
  }

  void Broadcast(int root, bool ip) {
    SetContext(ip, root);
    const int r = comm_.rank();
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr : b_.ptr;
    std::vector<double> data(count_);
    for (size_t i = 0; i < count_; ++i) data[i] = r == root ? Id(root, i) : 0;
    Upload(send, data);
    if (!ip) Fill(recv, count_, 0);
    if (!Call("broadcast", comm_.Broadcast(send, recv, count_, type_, root))) return;
    ExpectAll("broadcast", Download(recv, count_), [&](size_t i) { return Id(root, i); });
  }

  void Gather(int root, bool ip) {
    SetContext(ip, root);
    const int n = comm_.size(), r = comm_.rank();
    char* recv = b_.ptr;
    char* send = ip ? recv + root * count_ * es_ : a_.ptr;
    if (r == root) Fill(recv, n * count_, 0);
    std::vector<double> mine(count_);
    for (size_t i = 0; i < count_; ++i) mine[i] = Id(r, i);
    Upload(send, mine);
    if (!Call("gather", comm_.Gather(send, recv, count_, type_, root))) return;
    if (r != root) return;
    ExpectAll("gather", Download(recv, n * count_),
              [&](size_t j) { return Id(static_cast<int>(j / count_), j % count_); });
  }

  void Scatter(int root, bool ip) {
    SetContext(ip, root);
    const int n = comm_.size(), r = comm_.rank();
    char* send = a_.ptr;
    char* recv = ip ? a_.ptr + root * count_ * es_ : b_.ptr;
    std::vector<double> all(n * count_, 0);
    if (r == root) {
      for (size_t j = 0; j < all.size(); ++j)
        all[j] = Id(static_cast<int>(j / count_) + 7, j % count_);
      Upload(send, all);
    }
    if (!ip || r != root) Fill(recv, count_, 0);  // the root's in-place block is its input
    if (!Call("scatter", comm_.Scatter(send, recv, count_, type_, root))) return;
    ExpectAll("scatter", Download(recv, count_), [&](size_t i) { return Id(r + 7, i); });
  }

  Communicator& comm_;
  std::string label_;
  DataType type_ = DataType::kFloat;
  size_t count_ = 0;
  size_t es_ = 4;
  bool plain_ = false;
  Mem a_, b_;
  std::string ctx_;
  int failures_ = 0;
  long checks_ = 0;
};

// Runs the whole suite on `comm`; returns the failures on this rank.
int RunSuite(Communicator& comm, const std::string& label, const std::vector<size_t>& counts) {
  Checker checker(comm, label);
  checker.HostAllReduce();
  for (size_t c = 0; c < counts.size(); ++c) {
    for (DataType type : AllDataTypes()) checker.Run(counts[c], type, /*plain_memory=*/c % 2 == 1);
  }
  if (comm.rank() == 0) {
    std::printf("[%s] %d ranks, backend %s, device \"%s\": %ld checks, %d failures on rank 0\n",
                label.c_str(), comm.size(), std::string(comm.backend()).c_str(),
                comm.DeviceDescription().c_str(), checker.checks(), checker.failures());
  }
  return checker.failures();
}

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np N %s mpi|auto|shm|nccl\n", argv[0]);
    return 2;
  }
  auto backend = ParseBackend(argv[1]);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 2;
  }
  LaunchOptions options;
  options.backend = *backend;
  options.pin = false;
  // 1 (below the node count for auto), 7 (a remainder after splitting into
  // slices), 1001 in plain memory, and one count past the small-message paths.
  const std::vector<size_t> counts = {1, 7, 1001, 70001};
  auto rc = internal::RunUnderMpi(options, [&](Communicator& comm) {
    int failures = RunSuite(comm, std::string(argv[1]), counts);
    if (*backend == Backend::kMpi) {
      auto chunked = internal::CreateMpiCommunicator(MPI_COMM_WORLD, /*max_count=*/5);
      if (!chunked.ok()) {
        std::fprintf(stderr, "chunked MPI communicator: %s\n", chunked.status().ToString().c_str());
        ++failures;
      } else {
        failures += RunSuite(**chunked, "mpi, 5 elements per MPI call", {7, 13});
      }
    }
    double total = failures;
    if (!comm.HostAllReduce({&total, 1}, ReduceOp::kSum).ok()) return 1;
    if (comm.rank() == 0) {
      std::printf("%s: %.0f failures over all ranks\n", total == 0 ? "PASS" : "FAIL", total);
    }
    return total == 0 ? 0 : 1;
  });
  if (!rc.ok()) {
    std::fprintf(stderr, "mpi_collectives_check: %s\n", rc.status().ToString().c_str());
    return 2;
  }
  return *rc;
}

}  // namespace
}  // namespace gantry::comm

int main(int argc, char** argv) { return gantry::comm::Main(argc, argv); }
