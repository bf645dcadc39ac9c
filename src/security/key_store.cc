#include "gantry/security/key_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "gantry/security/api_key.h"

namespace gantry::security {

Json PublicKeyJson(const ApiKeyInfo& k) {
  return Json{{"id", k.id},
              {"name", k.name},
              {"role", k.role},
              {"created", k.created_unix},
              {"expires", k.expires_unix},
              {"revoked", k.revoked_unix}};
}

KeyTable::KeyTable(std::vector<ApiKeyInfo> keys) {
  keys_.reserve(keys.size());
  for (auto& k : keys) {
    std::string id = k.id;
    keys_.emplace(std::move(id), std::move(k));
  }
}

const ApiKeyInfo* KeyTable::Find(std::string_view id) const {
  auto it = keys_.find(id);
  return it == keys_.end() ? nullptr : &it->second;
}

size_t KeyTable::size() const { return keys_.size(); }

std::string_view KeyCheckName(KeyCheck c) {
  switch (c) {
    case KeyCheck::kOk:
      return "ok";
    case KeyCheck::kMalformed:
      return "malformed";
    case KeyCheck::kUnknown:
      return "unknown_key";
    case KeyCheck::kRevoked:
      return "revoked";
    case KeyCheck::kExpired:
      return "expired";
    case KeyCheck::kBadSecret:
      return "bad_secret";
  }
  return "unknown";
}

KeyCheck Authenticate(const KeyTable& table, std::string_view presented, int64_t now_unix,
                      const ApiKeyInfo** info) {
  if (info) *info = nullptr;
  auto parsed = ParseApiKey(presented);
  if (!parsed.ok()) return KeyCheck::kMalformed;
  const ApiKeyInfo* k = table.Find(parsed->id);
  if (!k) return KeyCheck::kUnknown;
  if (!VerifyApiKeySecret(k->salt_hex, k->hash_hex, parsed->secret)) return KeyCheck::kBadSecret;
  if (info) *info = k;
  if (k->revoked_unix != 0 && now_unix >= k->revoked_unix) return KeyCheck::kRevoked;
  if (k->expires_unix != 0 && now_unix >= k->expires_unix) return KeyCheck::kExpired;
  return KeyCheck::kOk;
}

namespace {

struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

constexpr const char* kColumns =
    "id, name, role, salt_hex, hash_hex, created_unix, expires_unix, revoked_unix";

std::string Text(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, col))
           : std::string();
}

ApiKeyInfo RowToInfo(sqlite3_stmt* s) {
  ApiKeyInfo k;
  k.id = Text(s, 0);
  k.name = Text(s, 1);
  k.role = Text(s, 2);
  k.salt_hex = Text(s, 3);
  k.hash_hex = Text(s, 4);
  k.created_unix = sqlite3_column_int64(s, 5);
  k.expires_unix = sqlite3_column_int64(s, 6);
  k.revoked_unix = sqlite3_column_int64(s, 7);
  return k;
}

}  // namespace

struct KeyStore::Impl {
  std::mutex mu;
  sqlite3* db = nullptr;
  std::string path;
  int64_t snapshot_data_version = -1;  // -1: no snapshot yet
  bool local_change = true;            // written by this connection since the last snapshot

  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }

  Status Error(std::string_view what) const {
    return Internal(std::string(what) + " on key store " + path + ": " + sqlite3_errmsg(db));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Internal(std::string("SQL \"") + sql + "\" failed on key store " + path + ": " + msg);
    }
    return Status::Ok();
  }

  Result<StmtPtr> Prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
    return StmtPtr(s);
  }

  Result<int64_t> DataVersion() {
    ASSIGN_OR_RETURN(StmtPtr s, Prepare("PRAGMA data_version"));
    if (sqlite3_step(s.get()) != SQLITE_ROW) return Error("PRAGMA data_version");
    return sqlite3_column_int64(s.get(), 0);
  }

  Result<ApiKeyInfo> GetLocked(std::string_view id) {
    std::string sql = std::string("SELECT ") + kColumns + " FROM api_keys WHERE id = ?1";
    ASSIGN_OR_RETURN(StmtPtr s, Prepare(sql.c_str()));
    sqlite3_bind_text(s.get(), 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    int rc = sqlite3_step(s.get());
    if (rc == SQLITE_ROW) return RowToInfo(s.get());
    if (rc == SQLITE_DONE) {
      return NotFound("no API key with id '" + std::string(id) +
                      "'; list keys with `gantry gateway keys list`");
    }
    return Error("reading key " + std::string(id));
  }

  // Inserts a fresh key; retries on the (astronomically unlikely) id collision.
  Result<std::pair<ApiKeyInfo, std::string>> InsertNewLocked(std::string_view name,
                                                             std::string_view role,
                                                             int64_t expires_unix,
                                                             int64_t now_unix) {
    std::string sql = std::string("INSERT INTO api_keys (") + kColumns +
                      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)";
    for (int attempt = 0; attempt < 4; ++attempt) {
      NewApiKey nk = GenerateApiKey();
      ASSIGN_OR_RETURN(StmtPtr s, Prepare(sql.c_str()));
      sqlite3_bind_text(s.get(), 1, nk.id.data(), static_cast<int>(nk.id.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(s.get(), 2, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(s.get(), 3, role.data(), static_cast<int>(role.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(s.get(), 4, nk.salt_hex.data(), static_cast<int>(nk.salt_hex.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_text(s.get(), 5, nk.hash_hex.data(), static_cast<int>(nk.hash_hex.size()),
                        SQLITE_TRANSIENT);
      sqlite3_bind_int64(s.get(), 6, now_unix);
      sqlite3_bind_int64(s.get(), 7, expires_unix);
      int rc = sqlite3_step(s.get());
      if (rc == SQLITE_DONE) {
        local_change = true;
        ApiKeyInfo info;
        info.id = nk.id;
        info.name = std::string(name);
        info.role = std::string(role);
        info.salt_hex = nk.salt_hex;
        info.hash_hex = nk.hash_hex;
        info.created_unix = now_unix;
        info.expires_unix = expires_unix;
        return std::make_pair(std::move(info), std::move(nk.key));
      }
      if (rc != SQLITE_CONSTRAINT) return Error("inserting a key");
    }
    return Internal("could not generate a unique API key id after 4 attempts");
  }
};

KeyStore::KeyStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KeyStore::~KeyStore() = default;

Result<std::unique_ptr<KeyStore>> KeyStore::Open(const std::string& sqlite_path) {
  auto impl = std::make_unique<Impl>();
  impl->path = sqlite_path;
  int rc =
      sqlite3_open_v2(sqlite_path.c_str(), &impl->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = impl->db ? sqlite3_errmsg(impl->db) : sqlite3_errstr(rc);
    return InvalidArgument("cannot open key store " + sqlite_path + ": " + msg +
                           "; check the `state:` path and its directory permissions");
  }
  // A second process (the CLI) may hold a write lock briefly; wait rather than fail.
  sqlite3_busy_timeout(impl->db, 5000);
  if (sqlite_path != ":memory:" && !sqlite_path.empty()) {
    // WAL lets the gateway read snapshots while `gantry gateway keys` writes.
    RETURN_IF_ERROR(impl->Exec("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(impl->Exec("PRAGMA synchronous=NORMAL"));
  }
  RETURN_IF_ERROR(
      impl->Exec("CREATE TABLE IF NOT EXISTS api_keys ("
                 " id TEXT PRIMARY KEY NOT NULL,"
                 " name TEXT NOT NULL,"
                 " role TEXT NOT NULL,"
                 " salt_hex TEXT NOT NULL,"
                 " hash_hex TEXT NOT NULL,"
                 " created_unix INTEGER NOT NULL,"
                 " expires_unix INTEGER NOT NULL DEFAULT 0,"
                 " revoked_unix INTEGER NOT NULL DEFAULT 0)"));
  return std::unique_ptr<KeyStore>(new KeyStore(std::move(impl)));
}

Result<std::pair<ApiKeyInfo, std::string>> KeyStore::Create(std::string_view name,
                                                            std::string_view role,
                                                            int64_t expires_unix,
                                                            int64_t now_unix) {
  if (name.empty()) return InvalidArgument("API key name is empty; give a name such as 'ci-bot'");
  if (role.empty()) return InvalidArgument("API key role is empty; give a role from `roles:`");
  if (expires_unix < 0) return InvalidArgument("API key expiry is negative");
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->InsertNewLocked(name, role, expires_unix, now_unix);
}

Result<std::pair<ApiKeyInfo, std::string>> KeyStore::Rotate(std::string_view id, int64_t grace_s,
                                                            int64_t now_unix) {
  if (grace_s < 0) {
    return InvalidArgument("rotation grace is negative (" + std::to_string(grace_s) +
                           "s); use 0 to revoke the old key now");
  }
  int64_t grace_until = 0;
  if (__builtin_add_overflow(now_unix, grace_s, &grace_until)) {
    return InvalidArgument("rotation grace is too long (" + std::to_string(grace_s) + "s)");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  RETURN_IF_ERROR(impl_->Exec("BEGIN IMMEDIATE"));
  auto body = [&]() -> Result<std::pair<ApiKeyInfo, std::string>> {
    ASSIGN_OR_RETURN(ApiKeyInfo old, impl_->GetLocked(id));
    if (old.revoked_unix != 0) {
      return FailedPrecondition("API key '" + old.id + "' is revoked; create a new key instead");
    }
    int64_t new_expiry = 0;
    if (old.expires_unix != 0) {
      int64_t lifetime = std::max<int64_t>(1, old.expires_unix - old.created_unix);
      new_expiry = lifetime > std::numeric_limits<int64_t>::max() - now_unix
                       ? std::numeric_limits<int64_t>::max()
                       : now_unix + lifetime;
    }
    ASSIGN_OR_RETURN(auto created,
                     impl_->InsertNewLocked(old.name, old.role, new_expiry, now_unix));
    ASSIGN_OR_RETURN(
        StmtPtr s,
        impl_->Prepare(grace_s == 0 ? "UPDATE api_keys SET revoked_unix = ?2 WHERE id = ?1"
                                    : "UPDATE api_keys SET expires_unix = CASE WHEN "
                                      "expires_unix != 0 AND expires_unix < ?2 THEN "
                                      "expires_unix ELSE ?2 END WHERE id = ?1"));
    sqlite3_bind_text(s.get(), 1, old.id.data(), static_cast<int>(old.id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(s.get(), 2, grace_until);
    if (sqlite3_step(s.get()) != SQLITE_DONE) return impl_->Error("updating key " + old.id);
    return created;
  };
  auto r = body();
  if (!r.ok()) {
    (void)impl_->Exec("ROLLBACK");
    return r;
  }
  RETURN_IF_ERROR(impl_->Exec("COMMIT"));
  impl_->local_change = true;
  return r;
}

Status KeyStore::Revoke(std::string_view id, int64_t now_unix) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare("UPDATE api_keys SET revoked_unix = CASE WHEN "
                                             "revoked_unix != 0 THEN revoked_unix ELSE ?2 END "
                                             "WHERE id = ?1"));
  sqlite3_bind_text(s.get(), 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.get(), 2, now_unix);
  if (sqlite3_step(s.get()) != SQLITE_DONE) return impl_->Error("revoking key " + std::string(id));
  if (sqlite3_changes(impl_->db) == 0) {
    return NotFound("no API key with id '" + std::string(id) +
                    "'; list keys with `gantry gateway keys list`");
  }
  impl_->local_change = true;
  return Status::Ok();
}

Result<ApiKeyInfo> KeyStore::Get(std::string_view id) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->GetLocked(id);
}

Result<std::vector<ApiKeyInfo>> KeyStore::List() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::string sql = std::string("SELECT ") + kColumns + " FROM api_keys ORDER BY created_unix, id";
  ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare(sql.c_str()));
  std::vector<ApiKeyInfo> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(RowToInfo(s.get()));
  if (rc != SQLITE_DONE) return impl_->Error("listing keys");
  return out;
}

Result<std::shared_ptr<const KeyTable>> KeyStore::Snapshot() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  // Read the version first: a change that lands during the SELECT is then
  // reported by the next ChangedSinceSnapshot() (a spare reload, never a missed one).
  ASSIGN_OR_RETURN(int64_t version, impl_->DataVersion());
  std::string sql = std::string("SELECT ") + kColumns + " FROM api_keys";
  ASSIGN_OR_RETURN(StmtPtr s, impl_->Prepare(sql.c_str()));
  std::vector<ApiKeyInfo> keys;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) keys.push_back(RowToInfo(s.get()));
  if (rc != SQLITE_DONE) return impl_->Error("reading keys");
  impl_->snapshot_data_version = version;
  impl_->local_change = false;
  return std::shared_ptr<const KeyTable>(std::make_shared<KeyTable>(std::move(keys)));
}

Result<bool> KeyStore::ChangedSinceSnapshot() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->local_change || impl_->snapshot_data_version < 0) return true;
  ASSIGN_OR_RETURN(int64_t version, impl_->DataVersion());
  return version != impl_->snapshot_data_version;
}

}  // namespace gantry::security
