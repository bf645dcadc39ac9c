// API key storage (SQLite) and the lock-free lookup snapshot used on the
// request path.
//
// Schema (table `api_keys`): id TEXT PRIMARY KEY, name, role, salt_hex,
// hash_hex, created_unix, expires_unix (0 = never), revoked_unix (0 = not revoked).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::security {

struct ApiKeyInfo {
  std::string id, name, role, salt_hex, hash_hex;
  int64_t created_unix = 0;
  int64_t expires_unix = 0;  // 0 = never
  int64_t revoked_unix = 0;  // 0 = not revoked
};

// The fields of a key that may be shown (never the salt or the hash), as the
// admin API and `gantry gateway keys --json` print them:
// {"id","name","role","created","expires","revoked"} (unix seconds, 0 = none).
Json PublicKeyJson(const ApiKeyInfo& k);

// Immutable snapshot of all keys, shared by request threads without locking.
class KeyTable {
 public:
  KeyTable() = default;
  explicit KeyTable(std::vector<ApiKeyInfo> keys);

  // nullptr when `id` is unknown. The pointer lives as long as the table.
  const ApiKeyInfo* Find(std::string_view id) const;
  size_t size() const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, ApiKeyInfo, Hash, std::equal_to<>> keys_;
};

enum class KeyCheck { kOk, kMalformed, kUnknown, kRevoked, kExpired, kBadSecret };
// "ok", "malformed", "unknown_key", "revoked", "expired", "bad_secret".
std::string_view KeyCheckName(KeyCheck c);

// Parses `presented`, looks it up and verifies the secret in constant time.
// A key is expired when expires_unix != 0 and now_unix >= expires_unix; revoked
// when revoked_unix != 0 and now_unix >= revoked_unix. The secret is checked
// before revocation/expiry so that those answers are only given to holders of
// the real secret. `*info` (if `info` is not null) is set for kOk, kRevoked and
// kExpired, and to nullptr otherwise.
KeyCheck Authenticate(const KeyTable& table, std::string_view presented, int64_t now_unix,
                      const ApiKeyInfo** info);

// SQLite-backed key store. Thread-safe (one connection behind a mutex).
class KeyStore {
 public:
  // Opens or creates the database and schema. ":memory:" is allowed. Files use
  // WAL mode and a busy timeout so the CLI can edit keys while a gateway runs.
  static Result<std::unique_ptr<KeyStore>> Open(const std::string& sqlite_path);
  ~KeyStore();
  KeyStore(const KeyStore&) = delete;
  KeyStore& operator=(const KeyStore&) = delete;

  // Stores a new key and returns its info plus the plaintext key (never stored).
  // InvalidArgument for an empty name or role.
  Result<std::pair<ApiKeyInfo, std::string>> Create(std::string_view name, std::string_view role,
                                                    int64_t expires_unix, int64_t now_unix);
  // New key (new id) with the same name and role and the same lifetime
  // (expires_unix - created_unix, or never); the old key expires at now+grace_s
  // (or keeps an earlier expiry), grace 0 = revoked now. NotFound when unknown;
  // FailedPrecondition when the old key is already revoked; InvalidArgument for
  // a negative grace.
  Result<std::pair<ApiKeyInfo, std::string>> Rotate(std::string_view id, int64_t grace_s,
                                                    int64_t now_unix);
  // Marks the key revoked at now_unix (idempotent: keeps the first revocation time).
  // NotFound when unknown.
  Status Revoke(std::string_view id, int64_t now_unix);
  // NotFound when unknown.
  Result<ApiKeyInfo> Get(std::string_view id);
  // All keys ordered by creation time, then id.
  Result<std::vector<ApiKeyInfo>> List();
  // A consistent snapshot of all keys for Authenticate().
  Result<std::shared_ptr<const KeyTable>> Snapshot();
  // True when the database changed since the last Snapshot() — by this store
  // or by another connection/process (PRAGMA data_version plus local writes).
  // True before the first Snapshot().
  Result<bool> ChangedSinceSnapshot();

 private:
  struct Impl;
  explicit KeyStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::security
