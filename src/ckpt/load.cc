// Loader: list, verify and load committed steps of one StepSource (see load.h).
#include "load.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <tuple>

#include "gantry/core/log.h"

namespace gantry::ckpt::internal {
namespace {

// Loads split the bytes to read into kLoadThreads contiguous ranges, one per
// thread, each read front to back in pieces of about kLoadPiece through the
// thread's own file descriptors. More threads than cores: an uncached read
// waits on the device. Own descriptors and contiguous ranges: the kernel keeps
// readahead state per open file, and threads taking turns on one descriptor
// look random to it (measured on a virtio disk: 0.55 GB/s that way, 2.1-2.4
// GB/s with a range and a descriptor per thread, dd 2.0 GB/s).
constexpr size_t kLoadPiece = 8u << 20;
constexpr size_t kLoadThreads = 8;

// A step selected by the sample verify mode: first and last chunk of every
// tensor plus every 16th chunk overall.
bool SampleChunk(size_t index, size_t count, size_t global) {
  return index == 0 || index + 1 == count || global % 16 == 0;
}

}  // namespace

Result<std::vector<CheckpointInfo>> Loader::List() {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, source_.CommittedSteps());
  std::vector<CheckpointInfo> out;
  for (int64_t step : steps) {
    CheckpointInfo info;
    info.step = step;
    info.path = source_.StepDir(step);
    auto m = source_.ReadManifest(step);
    if (m.ok()) {
      for (const TensorEntry& t : m->tensors) info.bytes += t.length;
      info.tensors = m->tensors.size();
      info.world_size = m->world_size;
      info.created = m->created;
      info.created_unix_s = m->created_unix_s;
      info.metadata = m->metadata;
    } else {
      info.error = m.status().message();
    }
    out.push_back(std::move(info));
  }
  return out;
}

Result<LatestResult> Loader::Latest() {
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, source_.CommittedSteps());
  std::vector<int64_t> newest_first(steps.rbegin(), steps.rend());
  return NewestVerified(
      newest_first, fallback_, [&](int64_t s) { return Verify(s, verify_); }, where_);
}

// Reading and verifying happen in one pass, so the newest step is not read
// twice.
Result<LoadedCheckpoint> Loader::Load(std::optional<int64_t> step,
                                      std::span<const std::string> names) {
  if (step) return LoadStep(*step, names);
  ASSIGN_OR_RETURN(std::vector<int64_t> steps, source_.CommittedSteps());
  std::vector<int64_t> newest_first(steps.rbegin(), steps.rend());
  return NewestLoadable(
      newest_first, fallback_,
      [&](int64_t s, bool* missing_name) { return LoadStep(s, names, missing_name); }, where_);
}

Result<VerifyReport> Loader::Verify(int64_t step, VerifyMode mode) {
  ASSIGN_OR_RETURN(Manifest m, source_.ReadManifest(step));
  VerifyReport report;
  report.step = step;
  RETURN_IF_ERROR(source_.CheckShardSizes(step, m));
  if (mode == VerifyMode::kNone) return report;
  // One chunk at most, but no more than the largest tensor needs.
  uint64_t largest = 0;
  for (const TensorEntry& t : m.tensors) largest = std::max(largest, t.length);
  std::vector<char> buf(std::min(m.chunk_bytes, largest));
  size_t global = 0;
  ShardFiles files;
  for (const TensorEntry& t : m.tensors) {
    for (size_t i = 0; i < t.chunks.size(); ++i, ++global) {
      if (mode == VerifyMode::kSample && !SampleChunk(i, t.chunks.size(), global)) continue;
      uint64_t off = i * m.chunk_bytes;
      size_t len = std::min<uint64_t>(m.chunk_bytes, t.length - off);
      RETURN_IF_ERROR(source_.ReadShard(step, m, t.shard, files, t.offset + off, buf.data(), len));
      RETURN_IF_ERROR(CheckChunk(step, m, t, i, buf.data(), len));
      report.bytes_checked += len;
      ++report.chunks_checked;
    }
  }
  return report;
}

Status Loader::CheckChunk(int64_t step, const Manifest& m, const TensorEntry& t, size_t i,
                          const void* data, size_t len) {
  if (Xxh3(data, len) == t.chunks[i]) return Status::Ok();
  uint64_t off = t.offset + i * m.chunk_bytes;
  return DataLoss("checksum mismatch in shard " + source_.StepDir(step) + "/" +
                  m.shards[t.shard].file + ", tensor '" + t.name + "', chunk " + std::to_string(i) +
                  " (file bytes [" + std::to_string(off) + ", " + std::to_string(off + len) +
                  ")): the checkpoint is corrupt");
}

// Reads the selected tensors straight into their final buffers, in pieces
// of whole checksum chunks spread over a few threads that each read and
// verify their piece (the page cache or the device is the limit, not one
// core's hashing).
Result<LoadedCheckpoint> Loader::LoadStep(int64_t step, std::span<const std::string> names,
                                          bool* missing_name) {
  ASSIGN_OR_RETURN(Manifest m, source_.ReadManifest(step));
  RETURN_IF_ERROR(source_.CheckShardSizes(step, m));
  for (const std::string& n : names) {
    bool found = std::any_of(m.tensors.begin(), m.tensors.end(),
                             [&](const TensorEntry& t) { return t.name == n; });
    if (!found) {
      if (missing_name) *missing_name = true;
      return NotFound("tensor '" + n + "' is not in step " + std::to_string(step) + " (" +
                      std::to_string(m.tensors.size()) + " tensors)");
    }
  }
  LoadedCheckpoint out;
  out.step = step;
  out.metadata = m.metadata;
  struct Piece {
    const TensorEntry* entry;
    char* dst;
    int shard;
    size_t first_chunk, end_chunk;
    size_t global;  // index of first_chunk among all chunks (sample mode)
    uint64_t bytes;
  };
  std::vector<bool> probed(m.shards.size(), false);
  std::vector<Piece> pieces;
  const size_t chunks_per_piece = std::max<size_t>(1, kLoadPiece / m.chunk_bytes);
  size_t global = 0;
  for (const TensorEntry& t : m.tensors) {
    if (!names.empty() && std::find(names.begin(), names.end(), t.name) == names.end()) {
      global += t.chunks.size();
      continue;
    }
    if (!probed[t.shard]) {
      probed[t.shard] = true;
      // Here once so that a missing shard fails before any thread starts.
      RETURN_IF_ERROR(source_.ProbeShard(step, m, t.shard));
    }
    Tensor tensor;
    tensor.name = t.name;
    tensor.dtype = t.dtype;
    tensor.shape = t.shape;
    ASSIGN_OR_RETURN(tensor.data, AlignedBuffer::Allocate(t.length));
    char* dst = static_cast<char*>(tensor.data.data());
    for (size_t c = 0; c < t.chunks.size(); c += chunks_per_piece) {
      size_t e = std::min(t.chunks.size(), c + chunks_per_piece);
      uint64_t bytes = std::min<uint64_t>(e * m.chunk_bytes, t.length) - c * m.chunk_bytes;
      pieces.push_back({&t, dst, t.shard, c, e, global + c, bytes});
    }
    global += t.chunks.size();
    out.tensors.push_back(std::move(tensor));
  }
  // File order, so that each thread's range is one sequential stream.
  std::sort(pieces.begin(), pieces.end(), [&m](const Piece& a, const Piece& b) {
    uint64_t ao = a.entry->offset + a.first_chunk * m.chunk_bytes;
    uint64_t bo = b.entry->offset + b.first_chunk * m.chunk_bytes;
    return std::tie(a.shard, ao) < std::tie(b.shard, bo);
  });
  size_t threads = std::min<size_t>({pieces.size(), kLoadThreads});
  uint64_t total = 0;
  for (const Piece& p : pieces) total += p.bytes;
  // Range k is the pieces whose start falls in bytes [k*total/T, (k+1)*total/T).
  std::vector<size_t> bounds(threads + 1, pieces.size());
  bounds[0] = 0;
  {
    uint64_t seen = 0;
    size_t k = 1;
    for (size_t i = 0; i < pieces.size() && k < threads; ++i) {
      while (k < threads && seen >= total * k / threads) bounds[k++] = i;
      seen += pieces[i].bytes;
    }
    for (; k < threads; ++k) bounds[k] = pieces.size();
  }
  std::atomic<bool> stop{false};
  std::mutex err_mu;
  Status first_error;
  auto work = [&](size_t range) {
    ShardFiles files;  // this thread's descriptors
    for (size_t i = bounds[range]; i < bounds[range + 1] && !stop.load(); ++i) {
      const Piece& p = pieces[i];
      uint64_t begin = p.first_chunk * m.chunk_bytes;
      uint64_t end = std::min<uint64_t>(p.end_chunk * m.chunk_bytes, p.entry->length);
      Status st = source_.ReadShard(step, m, p.shard, files, p.entry->offset + begin, p.dst + begin,
                                    end - begin);
      for (size_t c = p.first_chunk; st.ok() && c < p.end_chunk; ++c) {
        if (verify_ == VerifyMode::kNone) break;
        if (verify_ == VerifyMode::kSample &&
            !SampleChunk(c, p.entry->chunks.size(), p.global + (c - p.first_chunk))) {
          continue;
        }
        uint64_t off = c * m.chunk_bytes;
        st = CheckChunk(step, m, *p.entry, c, p.dst + off,
                        std::min<uint64_t>(m.chunk_bytes, p.entry->length - off));
      }
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (first_error.ok()) first_error = std::move(st);
        stop = true;  // stop the others early
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work, i);
  if (threads > 0) work(0);
  for (std::thread& t : pool) t.join();
  RETURN_IF_ERROR(first_error);
  return out;
}

Result<LatestResult> NewestVerified(std::span<const int64_t> newest_first, bool fallback,
                                    const std::function<Result<VerifyReport>(int64_t)>& verify,
                                    std::string_view where) {
  LatestResult r;
  for (int64_t step : newest_first) {
    auto v = verify(step);
    if (v.ok()) {
      r.step = step;
      return r;
    }
    if (!fallback) return v.status();
    std::string why = "step " + std::to_string(step) + ": " + v.status().message();
    log::warn("skipping checkpoint {}; falling back to an older one", why);
    r.skipped.push_back(std::move(why));
  }
  std::string msg = "no committed checkpoint in " + std::string(where);
  if (!r.skipped.empty()) msg += " verifies (" + std::to_string(r.skipped.size()) + " failed)";
  return NotFound(msg);
}

Result<LoadedCheckpoint> NewestLoadable(std::span<const int64_t> newest_first, bool fallback,
                                        const StepLoadFn& load, std::string_view where) {
  std::vector<std::string> skipped;
  for (int64_t step : newest_first) {
    bool missing_name = false;
    auto loaded = load(step, &missing_name);
    if (loaded.ok() || !fallback || missing_name ||
        loaded.status().code() == StatusCode::kFailedPrecondition) {
      return loaded;
    }
    log::warn("checkpoint step {} cannot be loaded ({}), falling back to an older one", step,
              loaded.status().message());
    skipped.push_back(loaded.status().message());
  }
  return NotFound("no committed checkpoint in " + std::string(where) +
                  (skipped.empty() ? std::string() : " loads without errors"));
}

}  // namespace gantry::ckpt::internal
