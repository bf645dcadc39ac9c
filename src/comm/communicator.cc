#include "gantry/comm/communicator.h"

#include <cstring>

namespace gantry::comm {

// Host backends: memory from Allocate() is ordinary host memory.
Status Communicator::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(host_dst, src, bytes);
  return Status::Ok();
}

Status Communicator::CopyFromHost(void* dst, const void* host_src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, host_src, bytes);
  return Status::Ok();
}

}  // namespace gantry::comm
