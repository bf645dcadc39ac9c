// The shared-memory backend: ranks are processes on one node that map one
// control segment plus one data segment per rank from /dev/shm.
#pragma once

#include <string>

#include "gantry/comm/communicator.h"

namespace gantry::comm {

struct ShmOptions {
  // Names the group; every rank passes the same one, unique to this group
  // (letters, digits, '-', '_', '.'). Segments are /dev/shm/gantry-<session>-*,
  // unlinked as soon as every rank has mapped them.
  std::string session;
  int rank = 0;
  int size = 1;
  // Give up waiting for peers after this many seconds (a peer that died or never
  // started). 0 waits forever (but a peer whose process is gone is still
  // detected).
  double timeout_s = 300;
};

// Collective: every rank of the group calls it. Rank 0 creates the control
// segment, every rank its own staging segment; the others wait for them (up to
// timeout_s). Errors: InvalidArgument for bad options or ranks that disagree on
// the size, DeadlineExceeded / Unavailable when a rank never comes or dies,
// ResourceExhausted when /dev/shm is full.
Result<CommunicatorPtr> CreateShmCommunicator(const ShmOptions& options);

}  // namespace gantry::comm
