// The NCCL backend on a GPU machine (label gpu: `make test-gpu`, never in CI,
// which has no GPU). These fail, not skip, when no device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../backends.h"
#include "nccl_test_host.h"

namespace gantry::comm {
namespace {

TEST(NcclCommunicatorTest, DeviceBeyondVisibleCountIsFailedPrecondition) {
  const int visible = internal::CudaDeviceCount();
  ASSERT_GT(visible, 0) << "label gpu tests need a CUDA device";
  auto comm = internal::CreateNcclCommunicator(SingleRankHost(), visible);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition);
}

// One rank on GPU 0: every collective is a copy, which still goes through
// NCCL, device memory and the stream.
TEST(NcclCommunicatorTest, SingleRankCollectivesOnGpu) {
  ASSERT_GT(internal::CudaDeviceCount(), 0) << "label gpu tests need a CUDA device";
  auto made = internal::CreateNcclCommunicator(SingleRankHost(), 0);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Communicator& comm = **made;
  EXPECT_EQ(comm.backend(), "nccl");
  EXPECT_EQ(comm.memory_kind(), MemoryKind::kDevice);
  EXPECT_EQ(comm.DeviceDescription().front(), '[');

  constexpr size_t kCount = 1000;
  std::vector<float> in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>(i % 97) + 0.5f;
  auto a = comm.Allocate(kCount * sizeof(float));
  auto b = comm.Allocate(kCount * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(comm.CopyFromHost(a->data(), in.data(), kCount * sizeof(float)).ok());

  auto expect_copy = [&](const char* what, const Status& s) {
    ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
    ASSERT_TRUE(comm.Synchronize().ok());
    std::fill(out.begin(), out.end(), -1.0f);
    ASSERT_TRUE(comm.CopyToHost(out.data(), b->data(), kCount * sizeof(float)).ok());
    EXPECT_EQ(out, in) << what;
  };
  const void* send = a->data();
  void* recv = b->data();
  expect_copy("all_reduce", comm.AllReduce(send, recv, kCount, DataType::kFloat, ReduceOp::kSum));
  expect_copy("all_reduce avg",
              comm.AllReduce(send, recv, kCount, DataType::kFloat, ReduceOp::kAvg));
  expect_copy("all_gather", comm.AllGather(send, recv, kCount, DataType::kFloat));
  expect_copy("reduce_scatter",
              comm.ReduceScatter(send, recv, kCount, DataType::kFloat, ReduceOp::kMax));
  expect_copy("broadcast", comm.Broadcast(send, recv, kCount, DataType::kFloat, 0));
  expect_copy("reduce", comm.Reduce(send, recv, kCount, DataType::kFloat, ReduceOp::kMin, 0));
  expect_copy("alltoall", comm.AllToAll(send, recv, kCount, DataType::kFloat));
  expect_copy("sendrecv", comm.SendRecv(send, recv, kCount, DataType::kFloat, 0, 0));
  expect_copy("gather", comm.Gather(send, recv, kCount, DataType::kFloat, 0));
  expect_copy("scatter", comm.Scatter(send, recv, kCount, DataType::kFloat, 0));
  EXPECT_TRUE(comm.Barrier().ok());
  std::vector<double> v = {2.5};
  ASSERT_TRUE(comm.HostAllReduce(v, ReduceOp::kSum).ok());
  EXPECT_EQ(v[0], 2.5);
}

}  // namespace
}  // namespace gantry::comm
