// StagingPool: the shard laid out in memory as its file (see staging.h).
#include "staging.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <thread>

#include "gantry/config.h"
#include "gantry/storage/filesystem.h"

namespace gantry::ckpt::internal {
namespace {

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

}  // namespace

Status StagingPool::Reserve(size_t bytes) {
  ASSIGN_OR_RETURN(buf_, AlignedBuffer::Allocate(RoundUp(bytes, storage::kDirectIoAlignment)));
  return Status::Ok();
}

// The prefix is copied here; the tensors follow with CopyAndHash or
// ParallelCopy, so the writer can start on the prefix at once.
Status StagingPool::Layout(int64_t step, std::span<const TensorView> tensors,
                           const Json& metadata) {
  if (step < 0 || step > 9'999'999'999) {
    return InvalidArgument("step " + std::to_string(step) + " is outside [0, 9999999999]");
  }
  // dump() throws on strings that are not UTF-8; the manifest is written
  // later (possibly on the worker thread), so catch that here.
  std::string metadata_text;
  try {
    metadata_text = metadata.dump();
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("checkpoint metadata cannot be written as JSON (") +
                           e.what() + "); use UTF-8 strings");
  }
  if (!metadata.is_null() && !metadata.is_object()) {
    return InvalidArgument("checkpoint metadata must be a JSON object, got " + metadata_text);
  }
  RETURN_IF_ERROR(ValidateTensors(tensors));
  std::string prefix = SafetensorsPrefix(tensors, storage::kDirectIoAlignment, Json());
  size_t total = prefix.size();
  for (const TensorView& t : tensors) total += t.bytes;
  size_t padded = RoundUp(total, storage::kDirectIoAlignment);
  if (buf_.size() < padded) {
    buf_ = AlignedBuffer();  // free first: the peak stays one pool
    ASSIGN_OR_RETURN(buf_, AlignedBuffer::Allocate(padded));
  }
  char* base = static_cast<char*>(buf_.data());
  std::memcpy(base, prefix.data(), prefix.size());
  // Zero the padding so that no stale pool bytes reach the disk.
  std::memset(base + total, 0, padded - total);
  staged_ = StagedShard();
  staged_.step = step;
  staged_.metadata = metadata.is_null() ? Json::object() : metadata;
  staged_.file_bytes = total;
  uint64_t off = prefix.size();
  for (const TensorView& t : tensors) {
    TensorEntry e;
    e.name = t.name;
    e.dtype = t.dtype;
    e.shape = t.shape;
    e.shard = rank_;
    e.offset = off;
    e.length = t.bytes;
    staged_.entries.push_back(std::move(e));
    off += t.bytes;
  }
  std::lock_guard<std::mutex> lock(progress_mu_);
  ready_ = prefix.size();
  return Status::Ok();
}

void StagingPool::MarkReady(size_t end) {
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    ready_ = end;
  }
  progress_cv_.notify_one();
}

void StagingPool::WaitReady(size_t end) {
  std::unique_lock<std::mutex> lock(progress_mu_);
  progress_cv_.wait(lock, [&] { return ready_ >= end; });
}

void StagingPool::CopyAndHash(std::span<const TensorView> tensors) {
  char* base = static_cast<char*>(buf_.data());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorView& t = tensors[k];
    TensorEntry& e = staged_.entries[k];
    const char* src = static_cast<const char*>(t.data);
    for (size_t off = 0; off < t.bytes; off += chunk_bytes_) {
      size_t len = std::min(chunk_bytes_, t.bytes - off);
      std::memcpy(base + e.offset + off, src + off, len);
      e.chunks.push_back(Xxh3(base + e.offset + off, len));
      MarkReady(e.offset + off + len);
    }
  }
  MarkReady(staged_.file_bytes);
}

// The time SaveAsync blocks the caller is this copy, hence the threads.
void StagingPool::ParallelCopy(std::span<const TensorView> tensors) {
  struct Piece {
    char* dst;
    const char* src;
    size_t len;
  };
  std::vector<Piece> pieces;
  char* base = static_cast<char*>(buf_.data());
  size_t bytes = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (tensors[k].bytes == 0) continue;
    pieces.push_back({base + staged_.entries[k].offset, static_cast<const char*>(tensors[k].data),
                      tensors[k].bytes});
    bytes += tensors[k].bytes;
  }
  constexpr size_t kPerThread = 64u << 20;
  size_t threads =
      std::clamp<size_t>(bytes / kPerThread, 1, std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<size_t>(threads, 8);
  size_t share = (bytes + threads - 1) / threads;
  // Thread i copies the byte range [i * share, (i + 1) * share) of the
  // concatenated tensors.
  auto copy_range = [&](size_t begin, size_t end) {
    size_t pos = 0;
    for (const Piece& p : pieces) {
      size_t lo = std::max(begin, pos), hi = std::min(end, pos + p.len);
      if (lo < hi) std::memcpy(p.dst + (lo - pos), p.src + (lo - pos), hi - lo);
      pos += p.len;
    }
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) {
    pool.emplace_back(copy_range, i * share, std::min(bytes, (i + 1) * share));
  }
  copy_range(0, std::min(bytes, share));
  for (std::thread& t : pool) t.join();
  MarkReady(staged_.file_bytes);
}

void StagingPool::HashStaged() {
  const char* base = static_cast<const char*>(buf_.data());
  for (TensorEntry& e : staged_.entries) {
    e.chunks = ChunkChecksums(base + e.offset, e.length, chunk_bytes_);
  }
}

Manifest BaseManifest(const StagedShard& s, int world_size, size_t chunk_bytes,
                      int64_t now_unix_s) {
  Manifest m;
  m.step = s.step;
  m.created_unix_s = now_unix_s;
  m.created = IsoTime(m.created_unix_s);
  m.creator = std::string("gantry ") + GANTRY_VERSION + " on " + HostName() + " pid " +
              std::to_string(::getpid());
  m.world_size = world_size;
  m.chunk_bytes = chunk_bytes;
  m.metadata = s.metadata;
  return m;
}

}  // namespace gantry::ckpt::internal
