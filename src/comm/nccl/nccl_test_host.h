// Test helper: a one-rank shm host communicator for NCCL tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "gantry/comm/shm.h"

namespace gantry::comm {

inline CommunicatorPtr SingleRankHost() {
  ShmOptions options;
  options.session = "nccltest-" + std::to_string(getpid());
  options.rank = 0;
  options.size = 1;
  auto host = CreateShmCommunicator(options);
  EXPECT_TRUE(host.ok()) << host.status().ToString();
  return host.ok() ? std::move(*host) : nullptr;
}

}  // namespace gantry::comm
