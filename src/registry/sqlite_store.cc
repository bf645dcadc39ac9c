// SQLite (WAL) driver of the registry metadata store: the statements and the
// logic are sql_store.cc's; this file runs them on one SQLite connection.
// Write transactions are BEGIN IMMEDIATE (the write lock up front, so the
// version counter and alias compare-and-set never race between processes);
// reads are a deferred transaction (one snapshot, never blocking a writer in
// WAL mode).
#include <sqlite3.h>

#include <cerrno>
#include <filesystem>

#include "gantry/registry/registry.h"
#include "sql_store.h"
#include "store_schema.h"

namespace gantry::registry {
namespace {

using store::SqlArg;
using store::SqlRows;
using store::TxKind;

class SqliteConnection final : public store::SqlConnection {
 public:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteConnection() override { sqlite3_close(db_); }

  Status Init() {
    sqlite3_busy_timeout(db_, 10000);
    RETURN_IF_ERROR(ExecRaw("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(ExecRaw("PRAGMA synchronous=FULL"));
    return ExecRaw(store::kSchema);
  }

  Result<SqlRows> Run(std::string_view sql, const std::vector<SqlArg>& args) override {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, nullptr) !=
        SQLITE_OK) {
      sqlite3_finalize(s);
      return Err("preparing a statement");
    }
    struct Finalizer {
      sqlite3_stmt* s;
      ~Finalizer() { sqlite3_finalize(s); }
    } finalizer{s};
    for (size_t i = 0; i < args.size(); ++i) {
      int idx = static_cast<int>(i + 1);
      if (const auto* n = std::get_if<int64_t>(&args[i])) {
        sqlite3_bind_int64(s, idx, *n);
      } else {
        const auto& t = std::get<std::string>(args[i]);
        sqlite3_bind_text(s, idx, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
      }
    }
    SqlRows out;
    int columns = sqlite3_column_count(s);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::vector<std::string>& row = out.rows.emplace_back();
      row.reserve(columns);
      for (int c = 0; c < columns; ++c) {
        const auto* p = sqlite3_column_text(s, c);
        row.emplace_back(p ? std::string(reinterpret_cast<const char*>(p),
                                         static_cast<size_t>(sqlite3_column_bytes(s, c)))
                           : std::string());
      }
    }
    if (rc != SQLITE_DONE) {
      if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
        return Unavailable("registry database " + path_ + " is busy; retry");
      }
      return Err("running a statement");
    }
    out.changed = sqlite3_changes(db_);
    return out;
  }

  Status Begin(TxKind kind) override {
    return ExecRaw(kind == TxKind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN");
  }
  Status Commit() override { return ExecRaw("COMMIT"); }
  void Rollback() override { (void)ExecRaw("ROLLBACK"); }
  std::string_view LockRows() const override { return ""; }

 private:
  Status Err(std::string_view what) {
    return Internal(std::string(what) + " in " + path_ + ": " + sqlite3_errmsg(db_));
  }

  Status ExecRaw(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown";
      sqlite3_free(err);
      int code = sqlite3_errcode(db_);
      if (code == SQLITE_BUSY || code == SQLITE_LOCKED) {
        return Unavailable("registry database " + path_ + " is busy: " + msg);
      }
      return Internal("registry database " + path_ + ": " + msg);
    }
    return Status::Ok();
  }

  sqlite3* db_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<MetadataStore>> OpenSqliteMetadataStore(const std::string& path) {
  // SQLite creates the file but not its directory, and says only "unable to
  // open database file": name what is missing (a mistyped --db, a deleted registry).
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return NotFound("registry database " + path + ": the directory " + dir.string() +
                    " does not exist; create it for a new registry, or point --db (or "
                    "GANTRY_REGISTRY_DB) at the existing one");
  }
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return IoError("opening registry database " + path + " (" + msg + ")", EIO);
  }
  auto conn = std::make_unique<SqliteConnection>(db, path);
  if (Status s = conn->Init(); !s.ok()) {
    return s.WithContext("initialising registry database " + path +
                         " (is it a Gantry registry database?)");
  }
  return store::NewSqlStore(std::move(conn));
}

}  // namespace gantry::registry
