// The NCCL backend where there is no GPU (CI): it must refuse with a clear
// FailedPrecondition. GPU runs are in nccl_communicator_gpu_test.cc (label gpu).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../backends.h"
#include "../plugins.h"
#include "nccl_test_host.h"

namespace gantry::comm {
namespace {

bool Mapped(const std::string& library) {
  std::ifstream in("/proc/self/maps");
  std::stringstream maps;
  maps << in.rdbuf();
  return maps.str().find("/" + library) != std::string::npos;
}

// NCCL and the CUDA runtime come with libgantry_plugin_nccl.so, loaded by the
// first call of the backend (src/comm/plugins.h); this test binary links neither.
TEST(NcclCommunicatorTest, LoadsThePluginOnFirstUse) {
  EXPECT_FALSE(Mapped("libnccl.so")) << "NCCL was loaded before the nccl backend was used";
  EXPECT_FALSE(Mapped("libgantry_plugin_nccl.so"));
  auto plugin = internal::NcclPlugin();
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  EXPECT_GE(internal::CudaDeviceCount(), 0);
  EXPECT_TRUE(Mapped("libgantry_plugin_nccl.so"));
  EXPECT_TRUE(Mapped("libnccl.so"));
  EXPECT_TRUE(Mapped("libcudart.so"));
}

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
