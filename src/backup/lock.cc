// Repository locks between create and prune (see lock.h).
#include "lock.h"

#include <openssl/rand.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/core/text.h"

namespace gantry::backup::internal {
namespace {

// Ids of the locks this process holds: a lock naming this process's pid and
// an id not in here was left by an operation of this process that is over.
std::mutex held_mu;
std::set<std::string>& Held() {
  static std::set<std::string> held;
  return held;
}
void Hold(const std::string& id) {
  std::lock_guard lock(held_mu);
  Held().insert(id);
}
void Unhold(const std::string& id) {
  std::lock_guard lock(held_mu);
  Held().erase(id);
}
bool Holds(const std::string& id) {
  std::lock_guard lock(held_mu);
  return Held().count(id) > 0;
}

std::string Hostname() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "unknown";
  return host;
}

int64_t UnixNow(const Clock& clock) {
  return std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch())
      .count();
}

const char* KindName(LockKind k) { return k == LockKind::kCreate ? "create" : "prune"; }

struct LockInfo {
  std::string kind;  // "create", "prune"; empty when unreadable
  std::string id;
  std::string hostname;
  int64_t pid = 0;
  int64_t time_unix = 0;
  std::string error;  // why it could not be read
};

Json ToJson(const LockInfo& i) {
  return Json{{"kind", i.kind},
              {"id", i.id},
              {"hostname", i.hostname},
              {"pid", i.pid},
              {"time_unix", i.time_unix}};
}

Status WriteLock(Repository& repo, const std::string& key, const LockInfo& info, bool create) {
  ASSIGN_OR_RETURN(std::string object, repo.EncodeManifest(key, ToJson(info)));
  storage::PutOptions po;
  po.if_none_match = create;
  po.content_type = repo.encrypted() ? "application/octet-stream" : "application/json";
  return repo.store()
      .Put(key, std::span(reinterpret_cast<const std::byte*>(object.data()), object.size()), po)
      .WithContext("writing lock " + repo.url() + "/" + key);
}

// NotFound when it was released meanwhile; other store errors as they come.
Result<LockInfo> ReadLock(Repository& repo, const std::string& key) {
  auto object = repo.store().Get(key);
  if (!object.ok()) return object.status();
  LockInfo info;
  auto j = repo.DecodeManifest(key, *object);
  if (!j.ok()) {
    info.error = j.status().message();
    return info;
  }
  try {
    info.kind = j->at("kind").get<std::string>();
    info.id = j->value("id", "");
    info.hostname = j->at("hostname").get<std::string>();
    info.pid = j->at("pid").get<int64_t>();
    info.time_unix = j->at("time_unix").get<int64_t>();
  } catch (const Json::exception& e) {
    info = LockInfo{};
    info.error = std::string("not a gantry backup lock (") + e.what() + ")";
  }
  return info;
}

// Empty when the lock is live, else why it is stale.
std::string Staleness(const LockInfo& i, int64_t now, const LockTiming& timing,
                      const std::string& host) {
  if (!i.error.empty()) return {};  // unknown holder: assume it is alive
  if (i.hostname == host) {
    if (i.pid == static_cast<int64_t>(getpid())) {
      return Holds(i.id) ? std::string() : "left by an earlier operation of this process";
    }
    if (i.pid > 0 && kill(static_cast<pid_t>(i.pid), 0) != 0 && errno == ESRCH) {
      return "process " + std::to_string(i.pid) + " on this host is not running";
    }
    return {};
  }
  if (now - i.time_unix > timing.stale.count()) {
    return "not refreshed for " + std::to_string(now - i.time_unix) + " s";
  }
  return {};
}

std::string Describe(const LockInfo& i) {
  if (!i.error.empty()) return "unreadable: " + i.error;
  return "held by " + i.hostname + " pid " + std::to_string(i.pid) + ", last refreshed " +
         FormatUtc(std::chrono::system_clock::time_point(std::chrono::seconds(i.time_unix)),
                   "%Y-%m-%dT%H:%M:%SZ");
}

}  // namespace

std::string RandomId() {
  unsigned char b[8];
  if (RAND_bytes(b, sizeof b) != 1) std::abort();
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// Rewrites the lock every `refresh` until stopped.
struct RepoLock::Refresher {
  Refresher(Repository& repo, std::string key, LockInfo info, const Clock& clock,
            std::chrono::seconds every)
      : thread(
            [this, &repo, key = std::move(key), info = std::move(info), &clock, every]() mutable {
              std::unique_lock lock(mu);
              while (!cv.wait_for(lock, every, [this] { return stop; })) {
                lock.unlock();
                info.time_unix = UnixNow(clock);
                Status s = WriteLock(repo, key, info, /*create=*/false);
                if (!s.ok()) log::warn("gantry backup: could not refresh a lock: {}", s.message());
                lock.lock();
              }
            }) {}
  ~Refresher() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread thread;  // last: starts once the rest is constructed
};

RepoLock::RepoLock(Repository& repo, std::string key, std::string id)
    : repo_(repo), key_(std::move(key)), id_(std::move(id)) {}

RepoLock::~RepoLock() {
  refresher_.reset();
  Status s = repo_.store().Delete(key_);
  if (!s.ok() && s.code() != StatusCode::kNotFound) {
    log::warn(
        "gantry backup: could not remove lock {}/{} ({}); it goes stale when this process "
        "exits",
        repo_.url(), key_, s.message());
  }
  Unhold(id_);
}

Result<std::unique_ptr<RepoLock>> RepoLock::Acquire(Repository& repo, LockKind kind,
                                                    const Clock& clock, LockTiming timing) {
  const std::string host = Hostname();
  LockInfo mine;
  mine.kind = KindName(kind);
  mine.id = RandomId();
  mine.hostname = host;
  mine.pid = getpid();
  mine.time_unix = UnixNow(clock);
  const std::string key = std::string(kLockPrefix) + mine.kind + "-" + mine.id + ".json";
  Hold(mine.id);
  Status put = WriteLock(repo, key, mine, /*create=*/true);
  if (!put.ok()) {
    Unhold(mine.id);
    return put;
  }
  // From here on the destructor removes the lock again, on every return.
  std::unique_ptr<RepoLock> lock(new RepoLock(repo, key, mine.id));

  ASSIGN_OR_RETURN(auto objects, ListPrefix(repo.store(), kLockPrefix));
  std::vector<std::string> stale;
  for (const auto& o : objects) {
    if (o.key == key || !o.key.ends_with(".json")) continue;
    auto other = ReadLock(repo, o.key);
    if (!other.ok()) {
      if (other.status().code() == StatusCode::kNotFound) continue;  // released meanwhile
      return other.status().WithContext("reading lock " + repo.url() + "/" + o.key);
    }
    std::string why = Staleness(*other, mine.time_unix, timing, host);
    if (!why.empty()) {
      log::info("gantry backup: ignoring stale lock {}/{} ({})", repo.url(), o.key, why);
      stale.push_back(o.key);
      continue;
    }
    const bool other_prune = other->kind == "prune" || !other->error.empty();
    if (kind == LockKind::kCreate && !other_prune) continue;  // creates run side by side
    std::string what = other->kind == "create"  ? "a backup (gantry backup create)"
                       : other->kind == "prune" ? "a prune"
                                                : "another operation";
    std::string advice =
        kind == LockKind::kCreate
            ? "a prune deletes chunks a backup may reuse; run the backup when the prune has "
              "finished"
            : (other->kind == "create"
                   ? "prune could delete chunks the backup is reusing; prune when it has finished"
                   : "run one prune at a time");
    return FailedPrecondition(what + " is running on " + repo.url() + " (lock " + o.key + ", " +
                              Describe(*other) + "): " + advice + ", or delete " + repo.url() +
                              "/" + o.key + " if it is no longer running");
  }
  if (kind == LockKind::kPrune) {
    for (const std::string& k : stale) {
      Status s = repo.store().Delete(k);
      if (!s.ok() && s.code() != StatusCode::kNotFound) {
        log::warn("gantry backup prune: could not remove stale lock {}/{}: {}", repo.url(), k,
                  s.message());
      }
    }
  }
  if (timing.refresh.count() > 0) {
    lock->refresher_ = std::make_unique<Refresher>(repo, key, mine, clock, timing.refresh);
  }
  return lock;
}

}  // namespace gantry::backup::internal
