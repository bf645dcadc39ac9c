// `gantry backup verify` and `gantry backup prune` (retention + mark and sweep).
#include <algorithm>
#include <deque>
#include <future>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "gantry/backup/backup.h"
#include "gantry/core/log.h"
#include "lock.h"

namespace gantry::backup {
namespace {

// Downloads and decodes one chunk; empty string when it checks out.
std::string CheckChunk(const Repository& repo, const std::string& id, uint64_t size) {
  std::string key = Repository::ChunkKey(id);
  auto object = repo.store().Get(key);
  if (!object.ok()) return "chunk " + key + ": " + object.status().message();
  auto plain = repo.DecodeChunk(id, *object);
  if (!plain.ok()) return plain.status().message();
  if (plain->size() != size) {
    return "chunk " + key + " has " + std::to_string(plain->size()) + " bytes, the manifest says " +
           std::to_string(size);
  }
  return {};
}

}  // namespace

Result<std::vector<VerifyReport>> Verify(Repository& repo, const std::vector<std::string>& keys,
                                         const VerifyOptions& options) {
  std::vector<std::string> todo = keys;
  if (todo.empty()) {
    ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kBackupPrefix));
    for (const auto& o : objects) {
      if (o.key.ends_with(".json")) todo.push_back(o.key);
    }
    std::sort(todo.begin(), todo.end());
  }
  // One listing answers "is it there" for every chunk of every backup.
  std::unordered_map<std::string, uint64_t> present;
  {
    ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kChunkPrefix));
    for (const auto& o : objects) {
      std::string id = Repository::IdFromChunkKey(o.key);
      if (!id.empty()) present[id] = o.size;
    }
  }
  std::unordered_map<std::string, std::string> checked;  // id -> problem ("" = ok), read_data
  std::vector<VerifyReport> reports;
  const size_t window = static_cast<size_t>(std::max(1, options.parallelism)) * 2;
  for (const std::string& key : todo) {
    VerifyReport r;
    r.key = key;
    auto m = LoadManifest(repo, key);
    if (!m.ok()) {
      r.problems.push_back(m.status().message());
      reports.push_back(std::move(r));
      continue;
    }
    r.id = m->id;
    // Distinct chunks, each with the first file that uses it (for messages).
    std::map<std::string, std::pair<uint64_t, std::string>> chunks;
    for (const Entry& e : m->entries) {
      for (const ChunkRef& c : e.chunks) chunks.emplace(c.id, std::make_pair(c.size, e.path));
    }
    r.chunks = chunks.size();
    uint64_t total = 0, done = 0;
    for (const auto& [id, v] : chunks) total += v.first;
    std::deque<std::pair<std::string, std::future<std::string>>> pending;
    auto finish_one = [&] {
      auto [id, fut] = std::move(pending.front());
      pending.pop_front();
      std::string problem = fut.get();
      const auto& [size, path] = chunks.at(id);
      if (!problem.empty()) r.problems.push_back(problem + " (used by " + path + ")");
      checked[id] = problem;
      ++r.chunks_read;
      r.bytes_read += size;
      done += size;
      if (options.progress) options.progress(done, total, path);
    };
    for (const auto& [id, v] : chunks) {
      const auto& [size, path] = v;
      if (!present.count(id)) {
        r.problems.push_back("chunk " + Repository::ChunkKey(id) + " is missing (used by " + path +
                             ")");
        continue;
      }
      if (!options.read_data) continue;
      if (auto it = checked.find(id); it != checked.end()) {
        // Read and checked for an earlier backup in this run: same object, same verdict.
        if (!it->second.empty()) r.problems.push_back(it->second + " (used by " + path + ")");
        ++r.chunks_read;
        r.bytes_read += size;
        continue;
      }
      while (pending.size() >= window) finish_one();
      pending.emplace_back(id,
                           std::async(std::launch::async, CheckChunk, std::cref(repo), id, size));
    }
    while (!pending.empty()) finish_one();
    reports.push_back(std::move(r));
  }
  return reports;
}

Result<PruneResult> Prune(Repository& repo, const PruneOptions& options) {
  if (options.policy.empty()) {
    return InvalidArgument(
        "prune needs a retention rule: give at least one of --keep-last, --keep-daily, "
        "--keep-weekly, --keep-monthly (a policy that keeps nothing would delete every backup)");
  }
  const Clock& clock = options.clock ? *options.clock : SystemClock();
  const int64_t start =
      std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch()).count();
  const int64_t cutoff = start - options.gc_grace.count();
  // Exclusive: a running create relies on chunks no manifest references yet
  // (old ones it reuses without uploading them again), so the sweep below
  // would take them from under it (see lock.h). A dry run changes nothing.
  std::unique_ptr<internal::RepoLock> lock;
  if (!options.dry_run) {
    ASSIGN_OR_RETURN(lock, internal::RepoLock::Acquire(repo, internal::LockKind::kPrune, clock));
  }

  // Chunks first: only chunks that exist now are candidates for deletion, so a
  // chunk uploaded after this listing is never touched.
  ASSIGN_OR_RETURN(auto chunk_objects, ListPrefix(repo.store(), kChunkPrefix));
  ASSIGN_OR_RETURN(auto listings, ListBackups(repo));
  PruneResult result;
  std::vector<RetentionInput> inputs;
  std::unordered_set<std::string> seen_keys;
  for (const Listing& l : listings) {
    seen_keys.insert(l.key);
    if (!l.error.empty()) {
      result.unreadable.push_back(l.key);
      const StatusCode c = l.error_code;
      if (c != StatusCode::kDataLoss && c != StatusCode::kInvalidArgument &&
          c != StatusCode::kPermissionDenied && c != StatusCode::kFailedPrecondition) {
        // The store failed, not the manifest: telling the user to delete it
        // would be wrong advice.
        return Status(c, "reading manifest " + repo.url() + "/" + l.key + " failed (" + l.error +
                             "); prune stopped before deleting anything, re-run it");
      }
      return FailedPrecondition("manifest " + repo.url() + "/" + l.key + " cannot be read (" +
                                l.error +
                                "); prune does not know which chunks it needs and stops. Fix or "
                                "delete it, or check the key");
    }
    inputs.push_back({l.key, l.manifest.name, l.manifest.time_unix});
  }
  result.decisions = ApplyRetention(inputs, options.policy);

  // Mark: every chunk of every kept backup.
  std::unordered_set<std::string> referenced;
  auto mark = [&](const Manifest& m) {
    for (const Entry& e : m.entries) {
      for (const ChunkRef& c : e.chunks) referenced.insert(c.id);
    }
  };
  for (size_t i = 0; i < listings.size(); ++i) {
    if (result.decisions[i].keep) mark(listings[i].manifest);
  }
  // Forget: delete the manifests first, so that a crash between here and the
  // sweep leaves only unreferenced chunks (garbage the next prune collects),
  // never a backup with missing chunks.
  if (!options.dry_run) {
    for (const RetentionDecision& d : result.decisions) {
      if (d.keep) continue;
      Status s = repo.store().Delete(d.key);
      if (!s.ok() && s.code() != StatusCode::kNotFound) {
        return s.WithContext("deleting manifest " + repo.url() + "/" + d.key);
      }
      log::info("gantry backup prune: removed {}", d.key);
    }
    // A backup that finished while we were deciding references chunks too.
    ASSIGN_OR_RETURN(auto now_objects, ListPrefix(repo.store(), kBackupPrefix));
    for (const auto& o : now_objects) {
      if (!o.key.ends_with(".json") || seen_keys.count(o.key)) continue;
      auto m = LoadManifest(repo, o.key);
      if (!m.ok()) {
        return FailedPrecondition("manifest " + o.key +
                                  " appeared during prune and cannot be read (" +
                                  m.status().message() + "); no chunk was deleted, re-run prune");
      }
      mark(*m);
    }
  }

  // Sweep.
  uint64_t done = 0;
  for (const auto& o : chunk_objects) {
    std::string id = Repository::IdFromChunkKey(o.key);
    if (id.empty()) continue;  // not ours; leave it alone
    ++result.chunks_total;
    if (referenced.count(id)) {
      ++result.chunks_referenced;
      continue;
    }
    if (o.modified_unix >= cutoff) {
      ++result.chunks_kept_recent;
      continue;
    }
    ++result.chunks_deleted;
    result.bytes_deleted += o.size;
    if (!options.dry_run) {
      Status s = repo.store().Delete(o.key);
      if (!s.ok() && s.code() != StatusCode::kNotFound) {
        return s.WithContext("deleting unreferenced chunk " + repo.url() + "/" + o.key);
      }
    }
    if (options.progress) options.progress(++done, 0, o.key);
  }
  return result;
}

}  // namespace gantry::backup
