// The NCCL backend where there is no GPU (CI): it must refuse with a clear
// FailedPrecondition. GPU runs are in nccl_communicator_gpu_test.cc (label gpu).
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../backends.h"
#include "nccl_test_host.h"

namespace gantry::comm {
namespace {

TEST(NcclCommunicatorTest, NullHostIsInvalidArgument) {
  auto comm = internal::CreateNcclCommunicator(nullptr, 0);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
}

TEST(NcclCommunicatorTest, WithoutGpuIsFailedPrecondition) {
  if (internal::CudaDeviceCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  CommunicatorPtr host = SingleRankHost();
  ASSERT_NE(host, nullptr);
  auto comm = internal::CreateNcclCommunicator(std::move(host), 0);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(comm.status().message().find("no CUDA device"), std::string::npos)
      << comm.status().message();
  EXPECT_NE(comm.status().message().find("--backend"), std::string::npos)
      << "the message should say what to use instead: " << comm.status().message();
}

}  // namespace
}  // namespace gantry::comm
