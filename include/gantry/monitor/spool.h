// A bounded, durable queue of records on local disk, for at-least-once
// delivery to a service that may be down: records are appended to segment
// files (fsync'd before Append returns), a sender reads a batch from the
// cursor (Peek), sends it, and only after the service acknowledged it moves
// the cursor past it (Ack: the cursor file is replaced atomically, temp file +
// fsync + rename + fsync of the directory).
//
//   <dir>/seg-0000000000000001.jsonl   one record per line
//   <dir>/seg-0000000000000002.jsonl
//   <dir>/cursor                       {"segment":1,"offset":4096}
//
// After a crash the spool resumes at the cursor: what was acknowledged is
// not sent again; the one batch that was sent but whose Ack did not reach
// the disk is sent again (at-least-once, never at-most-once). Consumers
// de-duplicate by a record id.
//
// Bounded: when the segments hold more than max_bytes, whole oldest segments
// are deleted, acknowledged or not; the records lost are counted (dropped())
// and logged. A torn last line (a crash mid-append) is cut off at Open.
//
// Thread-safety: all methods may be called from any thread (one mutex); the
// intended use is one appending thread and one sending thread.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::monitor {

struct SpoolOptions {
  std::string dir;                      // created when missing
  uint64_t max_bytes = 256ull << 20;    // at least 2 * segment_bytes
  uint64_t segment_bytes = 4ull << 20;  // a segment is closed past this size
  bool fsync = true;                    // tests of the bound may turn it off
};

// A place in the spool: the byte offset in a segment.
struct SpoolPosition {
  uint64_t segment = 0;
  uint64_t offset = 0;
  auto operator<=>(const SpoolPosition&) const = default;
};

struct SpoolBatch {
  std::vector<std::string> records;  // in order, without the newlines
  std::vector<SpoolPosition> ends;   // ends[i]: just past records[i] (Ack a prefix)
  SpoolPosition end;                 // Ack(end) consumes them all
};

class Spool {
 public:
  // Errors: InvalidArgument for bounds that do not fit (naming them); IoError
  // naming the directory or file that cannot be made or read; DataLoss for a
  // cursor file that is not what Ack writes (naming it: delete it to resend
  // everything spooled).
  static Result<std::unique_ptr<Spool>> Open(SpoolOptions options);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends each record as one line and makes them durable (fdatasync) before
  // returning. Records must not contain '\n' (InvalidArgument, nothing
  // written). Then enforces the bound.
  Status Append(std::span<const std::string> records);

  // Records from the cursor on, whose JSON array ("[a,b]") is at most
  // max_array_bytes, and at most max_records; at least one record when any is
  // waiting, however long. Empty when nothing waits.
  Result<SpoolBatch> Peek(size_t max_array_bytes, size_t max_records = SIZE_MAX);

  // Moves the cursor to `end` (from a Peek) and makes it durable; segments
  // wholly behind the cursor are deleted. A position behind the cursor (the
  // bound dropped what was being sent meanwhile) changes nothing.
  Status Ack(SpoolPosition end);

  uint64_t pending_records() const;  // appended and not acknowledged
  uint64_t pending_bytes() const;    // bytes of all live segments from the cursor on
  uint64_t dropped() const;          // records lost to the bound since Open
  SpoolPosition cursor() const;

 private:
  struct Impl;
  explicit Spool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::monitor
