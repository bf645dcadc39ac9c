// The NCCL backend: one GPU per rank, buffers in device memory, every
// collective enqueued on one stream of this rank's device.
//
// NCCL has no bootstrap of its own that fits Gantry's launchers, so the
// ncclUniqueId travels over a host communicator (shm for forked ranks, MPI
// under mpirun), which is kept for HostAllReduce and Barrier.
//
// The collectives NCCL lacks before 2.28 (alltoall, gather, scatter) are
// composed from grouped ncclSend/ncclRecv, which every NCCL since 2.7 has.
// Grouped point-to-point reads and writes the buffers concurrently, so the
// in-place layouts where a rank sends from the bytes it receives into
// (alltoall, sendrecv) first copy the input to a scratch buffer.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "../backends.h"
#include "../plugins.h"
#include "gantry/comm/communicator.h"

namespace gantry::comm {
namespace internal {
namespace {

Status CudaStatus(const char* call, cudaError_t err) {
  std::string msg = std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
  cudaGetLastError();  // clear the error so later calls are not blamed for it
  if (err == cudaErrorMemoryAllocation) return ResourceExhausted(std::move(msg));
  return Unavailable(std::move(msg));
}

Status NcclStatus(const char* call, ncclResult_t res) {
  std::string msg = std::string(call) + " failed: " + ncclGetErrorString(res);
  if (res == ncclInvalidArgument || res == ncclInvalidUsage) return Internal(std::move(msg));
  return Unavailable(std::move(msg) + " (set NCCL_DEBUG=WARN for NCCL's own explanation)");
}

#define GANTRY_CUDA(call, ...)                                                       \
  do {                                                                               \
    cudaError_t gantry_cuda_err_ = call(__VA_ARGS__);                                \
    if (gantry_cuda_err_ != cudaSuccess) return CudaStatus(#call, gantry_cuda_err_); \
  } while (0)

#define GANTRY_NCCL(call, ...)                                                       \
  do {                                                                               \
    ncclResult_t gantry_nccl_res_ = call(__VA_ARGS__);                               \
    if (gantry_nccl_res_ != ncclSuccess) return NcclStatus(#call, gantry_nccl_res_); \
  } while (0)

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kInt8:
      return ncclInt8;
    case DataType::kUint8:
      return ncclUint8;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint32:
      return ncclUint32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kUint64:
      return ncclUint64;
    case DataType::kHalf:
      return ncclFloat16;
    case DataType::kFloat:
      return ncclFloat32;
    case DataType::kDouble:
      return ncclFloat64;
    case DataType::kBfloat16:
      return ncclBfloat16;
  }
  return ncclUint8;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kProd:
      return ncclProd;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CommunicatorPtr host, int device) : host_(std::move(host)), device_(device) {}
  ~NcclCommunicator() override {
    if (comm_ != nullptr) {
      // A communicator whose peers failed cannot be destroyed collectively.
      if (failed_) {
        ncclCommAbort(comm_);
      } else {
        ncclCommDestroy(comm_);
      }
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status Init();

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string_view backend() const override { return "nccl"; }
  MemoryKind memory_kind() const override { return MemoryKind::kDevice; }
  std::string DeviceDescription() const override { return description_; }

  Result<Buffer> Allocate(size_t bytes) override {
    void* ptr = nullptr;
    GANTRY_CUDA(cudaMalloc, &ptr, bytes == 0 ? 1 : bytes);
    return Buffer(ptr, bytes, [](void* p, size_t) { cudaFree(p); });
  }

  // The copies go through this rank's stream so that they are ordered after
  // the collectives enqueued before them (the stream does not synchronise
  // with the legacy default stream).
  Status CopyToHost(void* host_dst, const void* src, size_t bytes) override {
    GANTRY_CUDA(cudaMemcpyAsync, host_dst, src, bytes, cudaMemcpyDefault, stream_);
    GANTRY_CUDA(cudaStreamSynchronize, stream_);
    return Status::Ok();
  }
  Status CopyFromHost(void* dst, const void* host_src, size_t bytes) override {
    GANTRY_CUDA(cudaMemcpyAsync, dst, host_src, bytes, cudaMemcpyDefault, stream_);
    GANTRY_CUDA(cudaStreamSynchronize, stream_);
    return Status::Ok();
  }

  // Polls instead of blocking in cudaStreamSynchronize so that an NCCL error
  // on a peer (which leaves the stream stuck forever) is seen and reported.
  Status Synchronize() override {
    while (true) {
      cudaError_t err = cudaStreamQuery(stream_);
      if (err == cudaSuccess) return Status::Ok();
      if (err != cudaErrorNotReady) return CudaStatus("cudaStreamQuery", err);
      ncclResult_t async = ncclSuccess;
      ncclResult_t res = ncclCommGetAsyncError(comm_, &async);
      if (res != ncclSuccess) return NcclStatus("ncclCommGetAsyncError", res);
      if (async != ncclSuccess && async != ncclInProgress) {
        failed_ = true;
        return NcclStatus("NCCL operation (asynchronous error)", async);
      }
      std::this_thread::yield();
    }
  }

  Status AllReduce(const void* send, void* recv, size_t count, DataType type,
                   ReduceOp op) override {
    GANTRY_NCCL(ncclAllReduce, send, recv, count, NcclType(type), NcclOp(op), comm_, stream_);
    return Status::Ok();
  }
  Status AllGather(const void* send, void* recv, size_t count, DataType type) override {
    GANTRY_NCCL(ncclAllGather, send, recv, count, NcclType(type), comm_, stream_);
    return Status::Ok();
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                       ReduceOp op) override {
    GANTRY_NCCL(ncclReduceScatter, send, recv, count, NcclType(type), NcclOp(op), comm_, stream_);
    return Status::Ok();
  }
  Status Broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    GANTRY_NCCL(ncclBroadcast, send, recv, count, NcclType(type), root, comm_, stream_);
    return Status::Ok();
  }
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                int root) override {
    GANTRY_NCCL(ncclReduce, send, recv, count, NcclType(type), NcclOp(op), root, comm_, stream_);
    return Status::Ok();
  }

  Status AllToAll(const void* send, void* recv, size_t count, DataType type) override {
    const size_t block = count * DataTypeSize(type);
    const int n = size();
    const char* src = static_cast<const char*>(send);
    char* dst = static_cast<char*>(recv);
    if (block == 0) return Status::Ok();
    if (src == dst) {
      ASSIGN_OR_RETURN(void* copy, StageInput(send, block * n));
      src = static_cast<const char*>(copy);
    }
    GANTRY_CUDA(cudaMemcpyAsync, dst + rank() * block, src + rank() * block, block,
                cudaMemcpyDeviceToDevice, stream_);
    GANTRY_NCCL(ncclGroupStart);
    for (int p = 0; p < n; ++p) {
      if (p == rank()) continue;
      GANTRY_NCCL(ncclSend, src + p * block, count, NcclType(type), p, comm_, stream_);
      GANTRY_NCCL(ncclRecv, dst + p * block, count, NcclType(type), p, comm_, stream_);
    }
    GANTRY_NCCL(ncclGroupEnd);
    return Status::Ok();
  }

  Status SendRecv(const void* send, void* recv, size_t count, DataType type, int send_peer,
                  int recv_peer) override {
    const size_t bytes = count * DataTypeSize(type);
    if (bytes == 0) return Status::Ok();
    if (send_peer == rank() && recv_peer == rank()) {
      if (send != recv) {
        GANTRY_CUDA(cudaMemcpyAsync, recv, send, bytes, cudaMemcpyDeviceToDevice, stream_);
      }
      return Status::Ok();
    }
    const void* src = send;
    if (send == recv) {
      ASSIGN_OR_RETURN(src, StageInput(send, bytes));
    }
    GANTRY_NCCL(ncclGroupStart);
    GANTRY_NCCL(ncclSend, src, count, NcclType(type), send_peer, comm_, stream_);
    GANTRY_NCCL(ncclRecv, recv, count, NcclType(type), recv_peer, comm_, stream_);
    GANTRY_NCCL(ncclGroupEnd);
    return Status::Ok();
  }

  Status Gather(const void* send, void* recv, size_t count, DataType type, int root) override {
    const size_t block = count * DataTypeSize(type);
    if (block == 0) return Status::Ok();
    if (rank() != root) {
      GANTRY_NCCL(ncclSend, send, count, NcclType(type), root, comm_, stream_);
      return Status::Ok();
    }
    char* dst = static_cast<char*>(recv);
    if (send != dst + root * block) {
      GANTRY_CUDA(cudaMemcpyAsync, dst + root * block, send, block, cudaMemcpyDeviceToDevice,
                  stream_);
    }
    GANTRY_NCCL(ncclGroupStart);
    for (int p = 0; p < size(); ++p) {
      if (p == root) continue;
      GANTRY_NCCL(ncclRecv, dst + p * block, count, NcclType(type), p, comm_, stream_);
    }
    GANTRY_NCCL(ncclGroupEnd);
    return Status::Ok();
  }

  Status Scatter(const void* send, void* recv, size_t count, DataType type, int root) override {
    const size_t block = count * DataTypeSize(type);
    if (block == 0) return Status::Ok();
    if (rank() != root) {
      GANTRY_NCCL(ncclRecv, recv, count, NcclType(type), root, comm_, stream_);
      return Status::Ok();
    }
    const char* src = static_cast<const char*>(send);
    if (recv != src + root * block) {
      GANTRY_CUDA(cudaMemcpyAsync, recv, src + root * block, block, cudaMemcpyDeviceToDevice,
                  stream_);
    }
    GANTRY_NCCL(ncclGroupStart);
    for (int p = 0; p < size(); ++p) {
      if (p == root) continue;
      GANTRY_NCCL(ncclSend, src + p * block, count, NcclType(type), p, comm_, stream_);
    }
    GANTRY_NCCL(ncclGroupEnd);
    return Status::Ok();
  }

  Status Barrier() override {
    RETURN_IF_ERROR(Synchronize());
    return host_->Barrier();
  }

  Status HostAllReduce(std::span<double> values, ReduceOp op) override {
    return host_->HostAllReduce(values, op);
  }

 private:
  // Copies `bytes` of device input to the scratch buffer (grown as needed) on
  // the stream, so that a later in-place exchange reads a stable copy.
  Result<void*> StageInput(const void* src, size_t bytes) {
    if (scratch_bytes_ < bytes) {
      // Earlier work on the stream may still read the old scratch.
      GANTRY_CUDA(cudaStreamSynchronize, stream_);
      if (scratch_ != nullptr) cudaFree(scratch_);
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      GANTRY_CUDA(cudaMalloc, &scratch_, bytes);
      scratch_bytes_ = bytes;
    }
    GANTRY_CUDA(cudaMemcpyAsync, scratch_, src, bytes, cudaMemcpyDeviceToDevice, stream_);
    return scratch_;
  }

  CommunicatorPtr host_;
  const int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool failed_ = false;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::string description_;
};

// Checks this rank's GPU, then agrees with every rank on whether all of them
// can go on: NCCL initialisation is collective, so a rank that stopped alone
// would leave the others waiting for it forever.
Status CheckDevice(Communicator& host, int device) {
  int visible = 0;
  cudaError_t err = cudaGetDeviceCount(&visible);
  Status local;
  if (err != cudaSuccess || visible == 0) {
    std::string why = err != cudaSuccess
                          ? std::string(cudaGetErrorName(err)) + ", " + cudaGetErrorString(err)
                          : "no devices";
    cudaGetLastError();
    local = FailedPrecondition("no CUDA device is visible to rank " + std::to_string(host.rank()) +
                               " (cudaGetDeviceCount: " + why +
                               "); the nccl backend needs one GPU per rank: check nvidia-smi and "
                               "CUDA_VISIBLE_DEVICES, or use --backend shm, mpi or auto");
  } else if (device < 0 || device >= visible) {
    local = FailedPrecondition("rank " + std::to_string(host.rank()) + " needs GPU " +
                               std::to_string(device) + " but only " + std::to_string(visible) +
                               " are visible; start at most " + std::to_string(visible) +
                               " ranks per node");
  }
  double failed = local.ok() ? 0 : 1;
  RETURN_IF_ERROR(host.HostAllReduce({&failed, 1}, ReduceOp::kMax));
  if (!local.ok()) return local;
  if (failed > 0) {
    return FailedPrecondition(
        "another rank could not use its GPU (see its error); the nccl "
        "backend needs one GPU per rank");
  }
  return Status::Ok();
}

Status NcclCommunicator::Init() {
  RETURN_IF_ERROR(CheckDevice(*host_, device_));
  GANTRY_CUDA(cudaSetDevice, device_);
  GANTRY_CUDA(cudaStreamCreateWithFlags, &stream_, cudaStreamNonBlocking);
  cudaDeviceProp prop;
  GANTRY_CUDA(cudaGetDeviceProperties, &prop, device_);
  char bus[32];
  std::snprintf(bus, sizeof bus, "[%04x:%02x:%02x]", prop.pciDomainID, prop.pciBusID,
                prop.pciDeviceID);
  description_ = std::string(bus) + " " + prop.name;

  // Rank 0's ncclGetUniqueId result travels with the id, so that a failure
  // there stops every rank instead of hanging them in ncclCommInitRank.
  struct {
    ncclUniqueId id;
    int32_t result;
  } hello{};
  if (rank() == 0) hello.result = ncclGetUniqueId(&hello.id);
  RETURN_IF_ERROR(host_->Broadcast(&hello, &hello, sizeof hello, DataType::kUint8, 0)
                      .WithContext("exchanging the NCCL unique id"));
  if (hello.result != ncclSuccess) {
    return NcclStatus("ncclGetUniqueId (on rank 0)", static_cast<ncclResult_t>(hello.result));
  }
  GANTRY_NCCL(ncclCommInitRank, &comm_, size(), hello.id, rank());
  return Status::Ok();
}

}  // namespace

Result<CommunicatorPtr> CreateNcclCommunicatorInPlugin(CommunicatorPtr host, int device) {
  if (host == nullptr)
    return InvalidArgument("CreateNcclCommunicator: the host communicator is null");
  auto comm = std::make_unique<NcclCommunicator>(std::move(host), device);
  RETURN_IF_ERROR(comm->Init());
  return CommunicatorPtr(std::move(comm));
}

int CudaDeviceCountInPlugin() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace internal
}  // namespace gantry::comm
