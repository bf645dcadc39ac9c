#include "quota_store.h"

#include <sqlite3.h>

namespace gantry::gateway {
namespace {

Status SqlError(sqlite3* db, const std::string& path, std::string_view what) {
  return Unavailable("quota state " + path + ": " + std::string(what) + ": " +
                     (db ? sqlite3_errmsg(db) : "out of memory") +
                     " (check that the file is writable and not locked by another program)");
}

// Owns a prepared statement.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

}  // namespace

Result<std::unique_ptr<QuotaStore>> QuotaStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = SqlError(db, path, "open");
    sqlite3_close(db);
    return s;
  }
  // The key store of the same process may hold the write lock briefly.
  sqlite3_busy_timeout(db, 5000);
  const char* setup =
      "PRAGMA journal_mode=WAL;"
      "PRAGMA synchronous=NORMAL;"
      "CREATE TABLE IF NOT EXISTS gateway_quota_usage ("
      "  subject TEXT NOT NULL, period TEXT NOT NULL,"
      "  calls INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0,"
      "  PRIMARY KEY (subject, period));";
  char* err = nullptr;
  if (sqlite3_exec(db, setup, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite3_close(db);
    return Unavailable("quota state " + path + ": creating table gateway_quota_usage: " + msg);
  }
  return std::unique_ptr<QuotaStore>(new QuotaStore(db, path));
}

QuotaStore::~QuotaStore() { sqlite3_close(db_); }

Result<std::vector<UsageRow>> QuotaStore::Query(std::string_view subject_prefix) const {
  std::lock_guard lock(mu_);
  Stmt st;
  const char* sql =
      "SELECT subject, period, calls, tokens FROM gateway_quota_usage "
      "WHERE substr(subject, 1, ?1) = ?2 ORDER BY subject, period";
  if (sqlite3_prepare_v2(db_, sql, -1, &st.s, nullptr) != SQLITE_OK) {
    return SqlError(db_, path_, "query");
  }
  sqlite3_bind_int64(st.s, 1, static_cast<int64_t>(subject_prefix.size()));
  sqlite3_bind_text(st.s, 2, subject_prefix.data(), static_cast<int>(subject_prefix.size()),
                    SQLITE_TRANSIENT);
  std::vector<UsageRow> rows;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    UsageRow r;
    r.subject = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    r.period = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1));
    r.calls = sqlite3_column_int64(st.s, 2);
    r.tokens = sqlite3_column_int64(st.s, 3);
    rows.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return SqlError(db_, path_, "query");
  return rows;
}

Status QuotaStore::Save(const std::vector<UsageRow>& rows) {
  if (rows.empty()) return Status::Ok();
  std::lock_guard lock(mu_);
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqlError(db_, path_, "begin");
  }
  Stmt st;
  const char* sql =
      "INSERT INTO gateway_quota_usage(subject, period, calls, tokens) VALUES (?1, ?2, ?3, ?4) "
      "ON CONFLICT(subject, period) DO UPDATE SET calls = excluded.calls, tokens = excluded.tokens";
  Status status;
  if (sqlite3_prepare_v2(db_, sql, -1, &st.s, nullptr) != SQLITE_OK) {
    status = SqlError(db_, path_, "prepare upsert");
  } else {
    for (const auto& r : rows) {
      sqlite3_bind_text(st.s, 1, r.subject.data(), static_cast<int>(r.subject.size()),
                        SQLITE_STATIC);
      sqlite3_bind_text(st.s, 2, r.period.data(), static_cast<int>(r.period.size()), SQLITE_STATIC);
      sqlite3_bind_int64(st.s, 3, r.calls);
      sqlite3_bind_int64(st.s, 4, r.tokens);
      if (sqlite3_step(st.s) != SQLITE_DONE) {
        status = SqlError(db_, path_, "write usage of " + r.subject);
        break;
      }
      sqlite3_reset(st.s);
    }
  }
  if (status.ok()) {
    if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      status = SqlError(db_, path_, "commit");
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }
  } else {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  return status;
}

}  // namespace gantry::gateway
