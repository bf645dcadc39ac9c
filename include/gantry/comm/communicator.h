// The communicator: one rank's handle on a group of ranks that run collectives
// together. Every backend (shared memory, MPI, MPI+shared memory, NCCL)
// implements this interface, so the benchmark engine, health checks and the
// checkpoint engine's barrier are written once against it.
//
// Semantics follow NCCL's:
//  * Every collective is called by every rank of the communicator, in the same
//    order, with the same count, type, op and root.
//  * Counts are in elements, not bytes.
//  * A call returns when this rank's output is complete and its input may be
//    reused. For device backends (NCCL) "complete" means enqueued; call
//    Synchronize() before reading results or timing.
//  * In-place operation is allowed with the layouts NCCL and nccl-tests use:
//      AllReduce, Broadcast, Reduce, AllToAll, SendRecv: send == recv
//      AllGather:      send == recv + rank * count
//      ReduceScatter:  recv == send + rank * count
//      Gather (root):  send == recv + root * count
//      Scatter (root): recv == send + root * count
//  * Errors are returned, never thrown. After an error (a peer died, a timeout)
//    the communicator is unusable; destroy it.
//
// Thread safety: a communicator is used by one thread at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "gantry/comm/types.h"
#include "gantry/core/status.h"

namespace gantry::comm {

enum class MemoryKind { kHost, kDevice };

// Memory returned by Communicator::Allocate. Move-only; frees itself. Must not
// outlive the communicator that allocated it.
class Buffer {
 public:
  using Release = std::function<void(void* data, size_t bytes)>;
  Buffer() = default;
  Buffer(void* data, size_t bytes, Release release)
      : data_(data), bytes_(bytes), release_(std::move(release)) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      release_ = std::move(o.release_);
      o.release_ = nullptr;
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void Reset() {
    if (data_ != nullptr && release_) release_(data_, bytes_);
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Release release_;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "shm", "mpi", "auto" (MPI between nodes + shm within), "nccl".
  virtual std::string_view backend() const = 0;
  // Where Allocate() puts memory and where collective buffers must live.
  virtual MemoryKind memory_kind() const { return MemoryKind::kHost; }
  // One line describing this rank's device for the "# Using devices" block,
  // e.g. "cpu 0-1 numa 0" or "[0000:18:00] NVIDIA H100 80GB HBM3".
  virtual std::string DeviceDescription() const = 0;

  // Allocates `bytes` of memory suited to this backend. Collective: every rank
  // calls it with the same size, in the same order. The shm backend returns
  // memory its peers can map, which enables its single-copy path; NCCL returns
  // device memory. Other memory works everywhere, through a staged path.
  virtual Result<Buffer> Allocate(size_t bytes) = 0;
  // Copies between host memory and memory from Allocate() (plain memcpy for host
  // backends).
  virtual Status CopyToHost(void* host_dst, const void* src, size_t bytes);
  virtual Status CopyFromHost(void* dst, const void* host_src, size_t bytes);
  // Waits until all enqueued collectives have completed. No-op for host backends.
  virtual Status Synchronize() { return Status::Ok(); }

  virtual Status AllReduce(const void* send, void* recv, size_t count, DataType type,
                           ReduceOp op) = 0;
  // recv holds size() * count elements; rank r's block lands at r * count.
  virtual Status AllGather(const void* send, void* recv, size_t count, DataType type) = 0;
  // send holds size() * count elements; this rank receives the reduction of block rank().
  virtual Status ReduceScatter(const void* send, void* recv, size_t count, DataType type,
                               ReduceOp op) = 0;
  // root's send is copied to every rank's recv.
  virtual Status Broadcast(const void* send, void* recv, size_t count, DataType type,
                           int root) = 0;
  // recv is written on root only.
  virtual Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        int root) = 0;
  // send and recv hold size() * count elements; block p of send goes to rank p and
  // lands at block rank() of p's recv.
  virtual Status AllToAll(const void* send, void* recv, size_t count, DataType type) = 0;
  // Sends count elements to send_peer and receives count elements from recv_peer.
  virtual Status SendRecv(const void* send, void* recv, size_t count, DataType type, int send_peer,
                          int recv_peer) = 0;
  // root's recv (size() * count elements) gets rank r's send at block r.
  virtual Status Gather(const void* send, void* recv, size_t count, DataType type, int root) = 0;
  // Block r of root's send (size() * count elements) lands in rank r's recv.
  virtual Status Scatter(const void* send, void* recv, size_t count, DataType type, int root) = 0;
  virtual Status Barrier() = 0;

  // Reduces a few host-side doubles across ranks in place (every rank gets the
  // result). For timings and error counts; works on every backend, including
  // NCCL, whose buffers live on the device.
  virtual Status HostAllReduce(std::span<double> values, ReduceOp op) = 0;
};

using CommunicatorPtr = std::unique_ptr<Communicator>;

}  // namespace gantry::comm
