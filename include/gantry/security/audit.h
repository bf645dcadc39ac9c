// Tamper-evident, hash-chained audit log (JSON lines).
//
// Record line (byte exact):
//   {"seq":N,"prev":"<64 hex>",<caller object members>,"hash":"<64 hex>"}
// hash = SHA-256 of the line's bytes before `,"hash":`. prev of the first record
// is 64 zeros (a resumed file continues its own chain).
// Checkpoint line (also appended to "<path>.checkpoints"):
//   {"type":"checkpoint","count":N,"head":"<hex>","time_ms":T,"key_id":"..","sig":"<b64url>"}
// sig = Ed25519 over "gantry-audit-checkpoint-v1\n<count>\n<head>\n<time_ms>\n"
// (key_id and sig are empty strings when no signing key is configured).
// See src/security/README.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry::security {

struct AuditOptions {
  std::string path;
  std::string signing_key_pem;        // Ed25519 private key PEM; empty: unsigned checkpoints
  uint64_t checkpoint_every = 1000;   // records between checkpoints (0: only by time / at Close)
  double checkpoint_interval_s = 10;  // seconds between checkpoints when new records exist (0: off)
  size_t max_queue = 1 << 20;         // records waiting for the writer; beyond: drop and count
  bool fsync_checkpoints = true;      // fsync log and sidecar when writing a checkpoint
  // Group commit: after the first waiting record the writer waits up to this
  // long (or until batch_records are waiting) before writing, so that under
  // load it wakes and writes once per batch rather than once per record.
  // Flush() and Close() do not wait for it. 0: write as soon as possible;
  // at most 60 (Open refuses more, and NaN).
  double batch_delay_s = 0.005;
  size_t batch_records = 1024;
  // When set, called on the writer thread after each successful write with
  // the exact bytes written: whole lines, records and checkpoint lines, in
  // file order. A shipper (monitor::LogsShipper) forwards them so that a copy
  // elsewhere keeps the chain byte for byte. It must not block (it delays the
  // log's writer) and must not call back into this AuditLog.
  std::function<void(std::string_view lines)> on_written;
};

// Thread-safe. Append() only enqueues; one writer thread validates, chains,
// writes (one write() per batch) and signs checkpoints.
class AuditLog {
 public:
  // Opens or creates the log. An existing log's last record is re-hashed and
  // the chain continues from it; a torn or tampered tail is refused with
  // DataLoss naming the line (run `gantry audit verify`). InvalidArgument for a
  // bad signing key.
  static Result<std::unique_ptr<AuditLog>> Open(AuditOptions options);
  ~AuditLog();  // calls Close()
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // `record` is one JSON object text ({"time":..,...}). Never blocks on I/O.
  // Text that is not a JSON object is logged as {"type":"invalid_record",
  // "raw":"<text as a JSON string>"}. When max_queue records are waiting the
  // record is dropped and counted; a {"type":"gap","dropped":K} record follows.
  // Appends after Close() are counted as dropped.
  void Append(std::string_view record);
  // Like Append for a record the caller wrote itself and vouches for, so the
  // writer thread does not check it again: exactly one JSON object from '{' to
  // '}' with nothing around it, only ASCII (strings escaped, no raw control
  // bytes), no top-level "seq", "prev" or "hash". The gateway's access records
  // qualify when none of their fields holds a byte >= 0x80. Debug builds check
  // the promise and abort when it is broken; release builds would chain the
  // bytes as given.
  void AppendWellFormed(std::string_view record);
  // Returns once everything appended before the call is written and covered
  // by a checkpoint. The first write error is sticky and returned here.
  Status Flush();
  // Flush, final checkpoint, stop the writer. Idempotent.
  Status Close();

  uint64_t written() const;      // records in the chain written by this instance
  uint64_t dropped() const;      // records dropped because the queue was full
  std::string head_hex() const;  // hash of the last written record

 private:
  struct Impl;
  explicit AuditLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct AuditVerifyReport {
  bool ok = false;
  uint64_t records = 0, checkpoints = 0;
  uint64_t first_bad_line = 0;  // 1-based line of the log, 0 = none (or a sidecar-only fault)
  uint64_t first_bad_seq = 0;   // the seq the chain expected at that point (last good seq + 1)
  std::string reason;           // one line: what is wrong and where
};

// Verifies the chain, every checkpoint (signatures when public_pem is given;
// without a key only count/head are checked) and the sidecar
// "<path>.checkpoints" (truncation: the sidecar names a count/head that the log
// does not contain). IoError only when the log cannot be read; InvalidArgument
// when public_pem is not an Ed25519 public key. A missing sidecar is accepted
// only when the log has no checkpoints. Records appended after the last
// checkpoint that reached the sidecar can be cut off undetected: that window is
// what checkpoint_every / checkpoint_interval_s bound.
Result<AuditVerifyReport> VerifyAuditLog(const std::string& path, std::string_view public_pem);

}  // namespace gantry::security
