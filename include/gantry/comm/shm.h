// The shared-memory backend: ranks are processes on one node that map one
// control segment plus one data segment per rank from /dev/shm.
#pragma once

#include <string>

#include "gantry/comm/communicator.h"

namespace gantry::comm {

struct ShmOptions {
  // Names the group; every rank passes the same one. Segments are
  // /dev/shm/gantry-<session>-*, removed when the last rank closes.
  std::string session;
  int rank = 0;
  int size = 1;
  // Give up waiting for peers after this many seconds (a peer that died or never
  // started). 0 waits forever (but a peer whose process is gone is still
  // detected).
  double timeout_s = 300;
};

// Collective: every rank of the group calls it. Rank 0 creates the segments;
// the others wait for them (up to timeout_s).
Result<CommunicatorPtr> CreateShmCommunicator(const ShmOptions& options);

}  // namespace gantry::comm
