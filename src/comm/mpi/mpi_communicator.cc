// The "mpi" backend: each collective is one MPI call (or a few, for counts
// beyond MPI's int). It is the reference Gantry's own engines are measured
// against, so it adds nothing of its own on the data path: Open MPI picks the
// algorithms.
//
// MPI has no 16-bit float types; half and bfloat16 travel as MPI_UINT16_T and
// are reduced by user-defined commutative MPI_Ops that call the same kernels as
// the shm engine (reduce.h), so the three backends round identically. MPI has
// no average either: avg is a sum followed by a division on the ranks that get
// the result.
#include "mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../affinity.h"
#include "../reduce.h"

namespace gantry::comm::internal {

Status MpiStatus(const char* call, int rc) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) {
    len = std::snprintf(text, sizeof text, "MPI error code %d", rc);
  }
  return Unavailable(std::string(call) + " failed: " + std::string(text, len));
}

Result<MPI_Comm> SplitByNode(MPI_Comm world) {
  int rank = 0;
  GANTRY_MPI(MPI_Comm_rank, world, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  const char* split = std::getenv("GANTRY_TEST_NODE_SPLIT");
  if (split != nullptr && *split != '\0') {
    char* end = nullptr;
    long k = std::strtol(split, &end, 10);
    if (*end != '\0' || k < 1 || k > INT_MAX) {
      return InvalidArgument(std::string("GANTRY_TEST_NODE_SPLIT='") + split +
                             "': expected a positive integer k (test-only: rank r goes to fake "
                             "node r / k); unset it for real runs");
    }
    GANTRY_MPI(MPI_Comm_split, world, rank / static_cast<int>(k), rank, &node);
  } else {
    GANTRY_MPI(MPI_Comm_split_type, world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  }
  return node;
}

namespace {

// Reductions MPI cannot be trusted with, as MPI_User_functions: half and
// bfloat16 (MPI has no such types; they travel as MPI_UINT16_T), and 8-bit
// integers, whose sums Open MPI 4.1's AVX op component saturates instead of
// wrapping (open-mpi/ompi#8045), so our kernels reduce them. avg reduces as sum.
template <DataType kType, ReduceOp kOp>
void Combine(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  Accumulate(inout, in, static_cast<size_t>(*len), kType, kOp);
}

template <DataType kType>
constexpr MPI_User_function* kCombine[] = {
    &Combine<kType, ReduceOp::kSum>, &Combine<kType, ReduceOp::kProd>,
    &Combine<kType, ReduceOp::kMax>, &Combine<kType, ReduceOp::kMin>};

// The types reduced by kCombine, in the order of MpiCommunicator::custom_ops_.
constexpr DataType kCustomOpTypes[] = {DataType::kHalf, DataType::kBfloat16, DataType::kInt8,
                                       DataType::kUint8};
constexpr int kNumCustomOpTypes = 4;

// Index into kCustomOpTypes, or -1 when MPI's builtin ops are used.
int CustomOpTypeIndex(DataType type) {
  for (int i = 0; i < kNumCustomOpTypes; ++i) {
    if (kCustomOpTypes[i] == type) return i;
  }
  return -1;
}

int OpIndex(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return 0;
    case ReduceOp::kProd:
      return 1;
    case ReduceOp::kMax:
      return 2;
    case ReduceOp::kMin:
      return 3;
  }
  return 0;
}

MPI_Datatype MpiType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return MPI_INT8_T;
    case DataType::kUint8:
      return MPI_UINT8_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kUint32:
      return MPI_UINT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kUint64:
      return MPI_UINT64_T;
    case DataType::kHalf:
    case DataType::kBfloat16:
      return MPI_UINT16_T;
    case DataType::kFloat:
      return MPI_FLOAT;
    case DataType::kDouble:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op BuiltinOp(ReduceOp op) {
  // Not constexpr: Open MPI's handles are addresses of globals, not constant expressions for clang.
  const MPI_Op kOps[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  return kOps[OpIndex(op)];
}

// A committed derived datatype, freed on scope exit.
class ScopedType {
 public:
  ScopedType() = default;
  ScopedType(const ScopedType&) = delete;
  ScopedType& operator=(const ScopedType&) = delete;
  ~ScopedType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype* out() { return &type_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// How one chunk of per-rank blocks is described to a gather-like MPI call:
// `n` elements of `base` at the start of each block, blocks `stride` bytes
// apart. When the chunk is the whole block that is just (n, base); otherwise a
// resized type makes consecutive ranks' pieces one extent apart.
struct BlockLayout {
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  ScopedType owned;
};

Status MakeBlockLayout(MPI_Datatype base, int n, size_t block_elems, size_t stride,
                       BlockLayout* layout) {
  if (static_cast<size_t>(n) == block_elems) {
    layout->count = n;
    layout->type = base;
    return Status::Ok();
  }
  ScopedType contiguous;
  GANTRY_MPI(MPI_Type_contiguous, n, base, contiguous.out());
  GANTRY_MPI(MPI_Type_create_resized, contiguous.get(), 0, static_cast<MPI_Aint>(stride),
             layout->owned.out());
  GANTRY_MPI(MPI_Type_commit, layout->owned.out());
  layout->count = 1;
  layout->type = layout->owned.get();
  return Status::Ok();
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(size_t max_count) : max_count_(max_count) {
    for (auto& ops : custom_ops_) std::fill(std::begin(ops), std::end(ops), MPI_OP_NULL);
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;  // the handles died with MPI
    for (auto& ops : custom_ops_) {
      for (MPI_Op& op : ops) {
        if (op != MPI_OP_NULL) MPI_Op_free(&op);
      }
    }
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  Status Init(MPI_Comm parent) {
    if (max_count_ == 0 || max_count_ > static_cast<size_t>(INT_MAX)) {
      return InvalidArgument("MPI communicator: max_count must be in [1, INT_MAX]");
    }
    GANTRY_MPI(MPI_Comm_dup, parent, &comm_);
    GANTRY_MPI(MPI_Comm_set_errhandler, comm_, MPI_ERRORS_RETURN);
    GANTRY_MPI(MPI_Comm_rank, comm_, &rank_);
    GANTRY_MPI(MPI_Comm_size, comm_, &size_);
    for (int i = 0; i < 4; ++i) {
      GANTRY_MPI(MPI_Op_create, kCombine<DataType::kHalf>[i], 1, &custom_ops_[0][i]);
      GANTRY_MPI(MPI_Op_create, kCombine<DataType::kBfloat16>[i], 1, &custom_ops_[1][i]);
      GANTRY_MPI(MPI_Op_create, kCombine<DataType::kInt8>[i], 1, &custom_ops_[2][i]);
      GANTRY_MPI(MPI_Op_create, kCombine<DataType::kUint8>[i], 1, &custom_ops_[3][i]);
    }
    description_ = DescribeCpu();  // the nccl-tests row already names the host
    return Status::Ok();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend() const override { return "mpi"; }
  std::string DeviceDescription() const override { return description_; }

  // Page-aligned (2 MiB for large buffers, so transparent huge pages can back
  // them) and zero-filled here, so the pages are first touched, and therefore
  // placed, on this rank's NUMA node.
  Result<Buffer> Allocate(size_t bytes) override {
    const size_t align = bytes >= (2u << 20) ? (2u << 20) : 4096;
    const size_t rounded = std::max(align, (bytes + align - 1) / align * align);
    void* p = std::aligned_alloc(align, rounded);
    if (p == nullptr) {
      return ResourceExhausted("MPI backend: cannot allocate " + std::to_string(bytes) +
                               " bytes of host memory; use a smaller -e");
    }
    std::memset(p, 0, rounded);
    return Buffer(p, bytes, [](void* q, size_t) { std::free(q); });
  }

  Status AllReduce(const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op) override {
    const size_t es = DataTypeSize(type);
    const bool in_place = send == recv;
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    RETURN_IF_ERROR(ForChunks(count, [&](size_t off, int n) {
      return MpiStatus("MPI_Allreduce",
                       MPI_Allreduce(in_place ? MPI_IN_PLACE : s + off * es, r + off * es, n,
                                     MpiType(type), Op(type, op), comm_));
    }));
    if (op == ReduceOp::kAvg && count > 0) DivideBy(recv, count, type, size_);
    return Status::Ok();
  }

  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool in_place = s == r + rank_ * count * es;
    return ForChunks(count, [&](size_t off, int n) {
      BlockLayout block;
      RETURN_IF_ERROR(MakeBlockLayout(MpiType(type), n, count, count * es, &block));
      return MpiStatus("MPI_Allgather",
                       MPI_Allgather(in_place ? MPI_IN_PLACE : s + off * es, n, MpiType(type),
                                     r + off * es, block.count, block.type, comm_));
    });
  }

  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                       ReduceOp op) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    // MPI forbids aliased send and receive buffers, and its own in-place form
    // would overwrite block 0 of the input; reduce into scratch and copy.
    const bool in_place = recv == s + rank_ * count * es;
    char* out = in_place ? Scratch(count * es) : static_cast<char*>(recv);
    if (count == 0) return Status::Ok();
    if (count <= max_count_) {
      RETURN_IF_ERROR(MpiStatus("MPI_Reduce_scatter_block",
                                MPI_Reduce_scatter_block(send, out, static_cast<int>(count),
                                                         MpiType(type), Op(type, op), comm_)));
    } else {
      // Piecewise, MPI would need a strided datatype, which predefined
      // reduction ops do not accept: reduce each block to its owner instead.
      Status chunked = ForChunks(count, [&](size_t off, int n) {
        for (int p = 0; p < size_; ++p) {
          RETURN_IF_ERROR(
              MpiStatus("MPI_Reduce", MPI_Reduce(s + (p * count + off) * es, out + off * es, n,
                                                 MpiType(type), Op(type, op), p, comm_)));
        }
        return Status::Ok();
      });
      RETURN_IF_ERROR(chunked);
    }
    if (op == ReduceOp::kAvg) DivideBy(out, count, type, size_);
    if (in_place) std::memcpy(recv, out, count * es);
    return Status::Ok();
  }

  Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    const size_t es = DataTypeSize(type);
    // MPI_Bcast only reads the root's buffer, so the root sends straight from
    // `send` and copies to its own `recv` afterwards.
    char* buf = rank_ == root ? const_cast<char*>(static_cast<const char*>(send))
                              : static_cast<char*>(recv);
    RETURN_IF_ERROR(ForChunks(count, [&](size_t off, int n) {
      return MpiStatus("MPI_Bcast", MPI_Bcast(buf + off * es, n, MpiType(type), root, comm_));
    }));
    if (rank_ == root && send != recv && count > 0) std::memcpy(recv, send, count * es);
    return Status::Ok();
  }

  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                int root) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool is_root = rank_ == root;
    const bool in_place = is_root && send == recv;
    RETURN_IF_ERROR(ForChunks(count, [&](size_t off, int n) {
      return MpiStatus("MPI_Reduce", MPI_Reduce(in_place ? MPI_IN_PLACE : s + off * es,
                                                is_root ? r + off * es : nullptr, n, MpiType(type),
                                                Op(type, op), root, comm_));
    }));
    if (is_root && op == ReduceOp::kAvg && count > 0) DivideBy(recv, count, type, size_);
    return Status::Ok();
  }

  Status AllToAll(const void* send, void* recv, size_t count, DataType type) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool in_place = send == recv;
    return ForChunks(count, [&](size_t off, int n) {
      BlockLayout block;
      RETURN_IF_ERROR(MakeBlockLayout(MpiType(type), n, count, count * es, &block));
      return MpiStatus("MPI_Alltoall",
                       MPI_Alltoall(in_place ? MPI_IN_PLACE : s + off * es, block.count, block.type,
                                    r + off * es, block.count, block.type, comm_));
    });
  }

  Status SendRecv(const void* send, void* recv, size_t count, DataType type, int send_peer,
                  int recv_peer) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    return ForChunks(count, [&](size_t off, int n) {
      if (send == recv) {
        return MpiStatus("MPI_Sendrecv_replace",
                         MPI_Sendrecv_replace(r + off * es, n, MpiType(type), send_peer, 0,
                                              recv_peer, 0, comm_, MPI_STATUS_IGNORE));
      }
      return MpiStatus("MPI_Sendrecv",
                       MPI_Sendrecv(s + off * es, n, MpiType(type), send_peer, 0, r + off * es, n,
                                    MpiType(type), recv_peer, 0, comm_, MPI_STATUS_IGNORE));
    });
  }

  Status Gather(const void* send, void* recv, size_t count, DataType type, int root) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool is_root = rank_ == root;
    const bool in_place = is_root && s == r + root * count * es;
    return ForChunks(count, [&](size_t off, int n) {
      BlockLayout block;
      if (is_root) RETURN_IF_ERROR(MakeBlockLayout(MpiType(type), n, count, count * es, &block));
      return MpiStatus("MPI_Gather",
                       MPI_Gather(in_place ? MPI_IN_PLACE : s + off * es, n, MpiType(type),
                                  is_root ? r + off * es : nullptr, block.count,
                                  is_root ? block.type : MpiType(type), root, comm_));
    });
  }

  Status Scatter(const void* send, void* recv, size_t count, DataType type, int root) override {
    const size_t es = DataTypeSize(type);
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    const bool is_root = rank_ == root;
    const bool in_place = is_root && r == s + root * count * es;
    return ForChunks(count, [&](size_t off, int n) {
      BlockLayout block;
      if (is_root) RETURN_IF_ERROR(MakeBlockLayout(MpiType(type), n, count, count * es, &block));
      return MpiStatus("MPI_Scatter", MPI_Scatter(is_root ? s + off * es : nullptr, block.count,
                                                  is_root ? block.type : MpiType(type),
                                                  in_place ? MPI_IN_PLACE : r + off * es, n,
                                                  MpiType(type), root, comm_));
    });
  }

  Status Barrier() override { return MpiStatus("MPI_Barrier", MPI_Barrier(comm_)); }

  Status HostAllReduce(std::span<double> values, ReduceOp op) override {
    if (values.empty()) return Status::Ok();
    if (values.size() > static_cast<size_t>(INT_MAX)) {
      return InvalidArgument("HostAllReduce: too many values for one MPI call");
    }
    RETURN_IF_ERROR(MpiStatus(
        "MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                       MPI_DOUBLE, BuiltinOp(op), comm_)));
    if (op == ReduceOp::kAvg) {
      for (double& v : values) v /= size_;
    }
    return Status::Ok();
  }

 private:
  MPI_Op Op(DataType type, ReduceOp op) const {
    int t = CustomOpTypeIndex(type);
    return t < 0 ? BuiltinOp(op) : custom_ops_[t][OpIndex(op)];
  }

  // Calls fn(offset, n) for consecutive pieces of at most max_count_ elements.
  template <typename Fn>
  Status ForChunks(size_t count, Fn&& fn) {
    for (size_t off = 0; off < count; off += max_count_) {
      RETURN_IF_ERROR(fn(off, static_cast<int>(std::min(max_count_, count - off))));
    }
    return Status::Ok();
  }

  char* Scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  const size_t max_count_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  MPI_Op custom_ops_[kNumCustomOpTypes][4];  // MPI_OP_NULL until Init()
  std::vector<char> scratch_;
  std::string description_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> CreateMpiCommunicator(MPI_Comm comm, size_t max_count) {
  auto mpi = std::make_unique<MpiCommunicator>(max_count);
  RETURN_IF_ERROR(mpi->Init(comm));
  return std::unique_ptr<Communicator>(std::move(mpi));
}

}  // namespace gantry::comm::internal
