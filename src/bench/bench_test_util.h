// Test-only helpers for src/bench/*_test.cc: an independent element-wise
// reduction (what a backend computes) and a communicator whose ranks are
// threads of the test process, with optional injected faults.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "gantry/comm/communicator.h"
#include "gantry/comm/types.h"

namespace gantry::bench::testing {

using comm::DataType;
using comm::ReduceOp;

// Elements travel as raw bit patterns in a uint64_t.
inline uint64_t LoadRaw(DataType t, const void* p, size_t i) {
  uint64_t v = 0;
  size_t elt = comm::DataTypeSize(t);
  std::memcpy(&v, static_cast<const char*>(p) + i * elt, elt);
  return v;
}
inline void StoreRaw(DataType t, void* p, size_t i, uint64_t v) {
  size_t elt = comm::DataTypeSize(t);
  std::memcpy(static_cast<char*>(p) + i * elt, &v, elt);
}

template <typename T>
T FromRaw(uint64_t v) {
  T t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}
template <typename T>
uint64_t ToRaw(T t) {
  uint64_t v = 0;
  std::memcpy(&v, &t, sizeof t);
  return v;
}

// Integer arithmetic wraps (done in the unsigned type of the same width).
template <typename T>
uint64_t CombineInt(ReduceOp op, uint64_t a_raw, uint64_t b_raw) {
  using U = std::make_unsigned_t<T>;
  T a = FromRaw<T>(a_raw), b = FromRaw<T>(b_raw);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return ToRaw(static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))));
    case ReduceOp::kProd:
      return ToRaw(static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))));
    case ReduceOp::kMax:
      return ToRaw(std::max(a, b));
    case ReduceOp::kMin:
      return ToRaw(std::min(a, b));
  }
  return 0;
}

inline double ToDouble(DataType t, uint64_t raw) {
  switch (t) {
    case DataType::kHalf:
      return comm::HalfToFloat(comm::Half{static_cast<uint16_t>(raw)});
    case DataType::kBfloat16:
      return comm::Bfloat16ToFloat(comm::Bfloat16{static_cast<uint16_t>(raw)});
    case DataType::kFloat:
      return FromRaw<float>(raw);
    default:
      return FromRaw<double>(raw);
  }
}

// Rounds like the type: half and bfloat16 are computed in float and rounded back.
inline uint64_t FromDouble(DataType t, double v) {
  switch (t) {
    case DataType::kHalf:
      return comm::FloatToHalf(static_cast<float>(v)).bits;
    case DataType::kBfloat16:
      return comm::FloatToBfloat16(static_cast<float>(v)).bits;
    case DataType::kFloat:
      return ToRaw(static_cast<float>(v));
    default:
      return ToRaw(v);
  }
}

inline uint64_t CombineFloat(DataType t, ReduceOp op, uint64_t a_raw, uint64_t b_raw) {
  if (t == DataType::kDouble) {
    double a = FromRaw<double>(a_raw), b = FromRaw<double>(b_raw);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return ToRaw(a + b);
      case ReduceOp::kProd:
        return ToRaw(a * b);
      case ReduceOp::kMax:
        return ToRaw(std::max(a, b));
      case ReduceOp::kMin:
        return ToRaw(std::min(a, b));
    }
  }
  float a = static_cast<float>(ToDouble(t, a_raw)), b = static_cast<float>(ToDouble(t, b_raw));
  float r = 0;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      r = a + b;
      break;
    case ReduceOp::kProd:
      r = a * b;
      break;
    case ReduceOp::kMax:
      r = std::max(a, b);
      break;
    case ReduceOp::kMin:
      r = std::min(a, b);
      break;
  }
  return FromDouble(t, r);
}

// a op b (for avg: the running sum; finish with FinishAvg).
inline uint64_t Combine(DataType t, ReduceOp op, uint64_t a, uint64_t b) {
  switch (t) {
    case DataType::kInt8:
      return CombineInt<int8_t>(op, a, b);
    case DataType::kUint8:
      return CombineInt<uint8_t>(op, a, b);
    case DataType::kInt32:
      return CombineInt<int32_t>(op, a, b);
    case DataType::kUint32:
      return CombineInt<uint32_t>(op, a, b);
    case DataType::kInt64:
      return CombineInt<int64_t>(op, a, b);
    case DataType::kUint64:
      return CombineInt<uint64_t>(op, a, b);
    default:
      return CombineFloat(t, op, a, b);
  }
}

// The sum divided by n: truncating for integers, rounded for floats.
inline uint64_t FinishAvg(DataType t, uint64_t sum, int n) {
  switch (t) {
    case DataType::kInt8:
      return ToRaw(static_cast<int8_t>(FromRaw<int8_t>(sum) / n));
    case DataType::kUint8:
      return ToRaw(static_cast<uint8_t>(FromRaw<uint8_t>(sum) / n));
    case DataType::kInt32:
      return ToRaw(static_cast<int32_t>(FromRaw<int32_t>(sum) / n));
    case DataType::kUint32:
      return ToRaw(static_cast<uint32_t>(FromRaw<uint32_t>(sum) / static_cast<uint32_t>(n)));
    case DataType::kInt64:
      return ToRaw(static_cast<int64_t>(FromRaw<int64_t>(sum) / n));
    case DataType::kUint64:
      return ToRaw(static_cast<uint64_t>(FromRaw<uint64_t>(sum) / static_cast<uint64_t>(n)));
    case DataType::kDouble:
      return ToRaw(FromRaw<double>(sum) / n);
    default:
      return FromDouble(t, static_cast<float>(ToDouble(t, sum)) / static_cast<float>(n));
  }
}

// Reduces element i of every buffer, left to right, as a backend would.
inline void ReduceBuffers(DataType t, ReduceOp op, const std::vector<const void*>& inputs,
                          size_t count, void* out) {
  for (size_t i = 0; i < count; ++i) {
    uint64_t acc = LoadRaw(t, inputs[0], i);
    for (size_t r = 1; r < inputs.size(); ++r) acc = Combine(t, op, acc, LoadRaw(t, inputs[r], i));
    if (op == ReduceOp::kAvg) acc = FinishAvg(t, acc, static_cast<int>(inputs.size()));
    StoreRaw(t, out, i, acc);
  }
}

// ------------------------------------------------------------------------
// A communicator whose ranks are threads. Every collective first copies each
// rank's input aside (so in-place calls are safe), then each rank computes its
// own output from the copies: a slow, obviously correct reference.

enum class Fault {
  kNone,
  kFlipFirstOnRank0,   // rank 0 damages the first element it receives
  kNonRootWrites,      // non-root ranks of reduce/gather overwrite their receive buffer
  kDamageLastElement,  // every receiving rank overwrites its last received element
};

class ThreadGroup {
 public:
  explicit ThreadGroup(int n, Fault fault = Fault::kNone)
      : n_(n), fault_(fault), barrier_(n), staged_(n), host_(n) {}
  int size() const { return n_; }
  Fault fault() const { return fault_; }
  void Wait() { barrier_.arrive_and_wait(); }
  std::vector<std::byte>& staged(int r) { return staged_[r]; }
  std::vector<double>& host(int r) { return host_[r]; }

 private:
  const int n_;
  const Fault fault_;
  std::barrier<> barrier_;
  std::vector<std::vector<std::byte>> staged_;
  std::vector<std::vector<double>> host_;
};

class ThreadCommunicator : public comm::Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  std::string_view backend() const override { return "threads"; }
  std::string DeviceDescription() const override { return "test thread " + std::to_string(rank_); }

  Result<comm::Buffer> Allocate(size_t bytes) override {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    return comm::Buffer(p, bytes, [](void* data, size_t) { std::free(data); });
  }

  Status AllReduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op) override {
    Stage(send, count, t);
    ReduceInto(recv, 0, count, t, op);
    return Finish(recv, count, t, true);
  }
  Status AllGather(const void* send, void* recv, size_t count, DataType t) override {
    Stage(send, count, t);
    for (int p = 0; p < size(); ++p) CopyFrom(p, 0, recv, p * count, count, t);
    return Finish(recv, count * size(), t, true);
  }
  Status ReduceScatter(const void* send, void* recv, size_t count, DataType t,
                       ReduceOp op) override {
    Stage(send, count * size(), t);
    ReduceInto(recv, rank_ * count, count, t, op);
    return Finish(recv, count, t, true);
  }
  Status Broadcast(const void* send, void* recv, size_t count, DataType t, int root) override {
    Stage(send, count, t);
    CopyFrom(root, 0, recv, 0, count, t);
    return Finish(recv, count, t, true);
  }
  Status Reduce(const void* send, void* recv, size_t count, DataType t, ReduceOp op,
                int root) override {
    Stage(send, count, t);
    if (rank_ == root) ReduceInto(recv, 0, count, t, op);
    return Finish(recv, count, t, rank_ == root);
  }
  Status AllToAll(const void* send, void* recv, size_t count, DataType t) override {
    Stage(send, count * size(), t);
    for (int p = 0; p < size(); ++p) CopyFrom(p, rank_ * count, recv, p * count, count, t);
    return Finish(recv, count * size(), t, true);
  }
  Status SendRecv(const void* send, void* recv, size_t count, DataType t, int send_peer,
                  int recv_peer) override {
    Stage(send, count, t);
    CopyFrom(recv_peer, 0, recv, 0, count, t);
    return Finish(recv, count, t, true);
  }
  Status Gather(const void* send, void* recv, size_t count, DataType t, int root) override {
    Stage(send, count, t);
    if (rank_ == root) {
      for (int p = 0; p < size(); ++p) CopyFrom(p, 0, recv, p * count, count, t);
    }
    return Finish(recv, rank_ == root ? count * size() : count, t, rank_ == root);
  }
  Status Scatter(const void* send, void* recv, size_t count, DataType t, int root) override {
    Stage(send, rank_ == root ? count * size() : 0, t);
    CopyFrom(root, rank_ * count, recv, 0, count, t);
    return Finish(recv, count, t, true);
  }
  Status Barrier() override {
    group_.Wait();
    return Status::Ok();
  }
  Status HostAllReduce(std::span<double> values, ReduceOp op) override {
    group_.host(rank_).assign(values.begin(), values.end());
    group_.Wait();
    for (size_t i = 0; i < values.size(); ++i) {
      double acc = group_.host(0)[i];
      for (int r = 1; r < size(); ++r) {
        double v = group_.host(r)[i];
        acc = op == ReduceOp::kMax   ? std::max(acc, v)
              : op == ReduceOp::kMin ? std::min(acc, v)
                                     : acc + v;
      }
      values[i] = op == ReduceOp::kAvg ? acc / size() : acc;
    }
    group_.Wait();
    return Status::Ok();
  }

 private:
  void Stage(const void* send, size_t count, DataType t) {
    const auto* p = static_cast<const std::byte*>(send);
    group_.staged(rank_).assign(p, p + count * comm::DataTypeSize(t));
    group_.Wait();
  }
  void CopyFrom(int peer, size_t src_elem, void* recv, size_t dst_elem, size_t count, DataType t) {
    size_t elt = comm::DataTypeSize(t);
    if (count == 0) return;
    std::memcpy(static_cast<char*>(recv) + dst_elem * elt,
                group_.staged(peer).data() + src_elem * elt, count * elt);
  }
  void ReduceInto(void* recv, size_t src_elem, size_t count, DataType t, ReduceOp op) {
    size_t elt = comm::DataTypeSize(t);
    std::vector<const void*> inputs;
    for (int p = 0; p < size(); ++p) inputs.push_back(group_.staged(p).data() + src_elem * elt);
    ReduceBuffers(t, op, inputs, count, recv);
  }
  // Second barrier: nobody restages before every rank has read the copies.
  // Then apply the injected fault, if any.
  Status Finish(void* recv, size_t received, DataType t, bool receives) {
    group_.Wait();
    switch (group_.fault()) {
      case Fault::kNone:
        break;
      case Fault::kFlipFirstOnRank0:
        if (rank_ == 0 && receives && received > 0) {
          StoreRaw(t, recv, 0,
                   LoadRaw(t, recv, 0) ^ (uint64_t{1} << (comm::DataTypeSize(t) * 8 - 2)));
        }
        break;
      case Fault::kNonRootWrites:
        if (!receives && received > 0) StoreRaw(t, recv, 0, LoadRaw(t, recv, 0) ^ 1);
        break;
      case Fault::kDamageLastElement:
        if (receives && received > 0) StoreRaw(t, recv, received - 1, 0x5a5a5a5a5a5a5a5aull);
        break;
    }
    return Status::Ok();
  }

  ThreadGroup& group_;
  const int rank_;
};

// Runs fn(comm) on n threads, one per rank; returns once all are done.
template <typename Fn>
void RunThreads(int n, Fault fault, Fn fn) {
  ThreadGroup group(n, fault);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&group, r, &fn] {
      ThreadCommunicator comm(group, r);
      fn(comm);
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace gantry::bench::testing
