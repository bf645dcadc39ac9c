// PostgreSQL driver of the registry metadata store, for a registry shared by
// many machines (`--db postgresql://user@host/db`). The statements and the
// logic are sql_store.cc's (the same as SQLite's); this file runs them on one
// libpq connection:
//   - reads run in REPEATABLE READ READ ONLY (a version and its
//     files/tags/aliases are one snapshot), writes in READ COMMITTED, and the
//     models row a writer depends on is taken with SELECT ... FOR UPDATE;
//   - '?' placeholders become $n;
//   - the schema is created on first use under a transaction-scoped advisory
//     lock and versioned in the gantry_registry_meta table; a database
//     written by a newer schema is refused rather than guessed at.
// One connection per store; calls on one store are serialized (open one
// store per thread for parallelism). A dropped connection is re-established
// once per call.
#include <libpq-fe.h>

#include <charconv>
#include <cstring>
#include <memory>
#include <variant>

#include "gantry/registry/registry.h"
#include "sql_store.h"
#include "store_schema.h"

namespace gantry::registry {
namespace {

constexpr int64_t kSchemaVersion = 1;
// Arbitrary constant key for pg_advisory_xact_lock while creating the schema.
constexpr int64_t kSchemaLockKey = 0x47616e7472795267;  // "GantryRg"

// PostgreSQL alone records the schema version (many machines share one
// database and must agree on it).
constexpr const char* kMetaTable =
    "CREATE TABLE IF NOT EXISTS gantry_registry_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);";
using store::SqlArg;
using store::SqlRows;
using store::TxKind;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// "database 'reg' on db.example:5432 as user 'gantry'" - never the password.
std::string DescribeUri(const std::string& uri) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (!opts) {
    if (err) PQfreemem(err);
    return "PostgreSQL database <unparsable connection URI>";
  }
  std::string host, port, db, user;
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (!o->val) continue;
    std::string_view k = o->keyword;
    if (k == "host") host = o->val;
    if (k == "hostaddr" && host.empty()) host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") db = o->val;
    if (k == "user") user = o->val;
  }
  PQconninfoFree(opts);
  std::string out = "PostgreSQL database '" + (db.empty() ? std::string("<default>") : db) + "'";
  out += " on " + (host.empty() ? std::string("<default host>") : host);
  if (!port.empty()) out += ":" + port;
  if (!user.empty()) out += " as user '" + user + "'";
  return out;
}

int64_t ParseInt(const char* text) {
  int64_t v = 0;
  if (text) std::from_chars(text, text + std::strlen(text), v);
  return v;
}

class PostgresConnection final : public store::SqlConnection {
 public:
  PostgresConnection(PGconn* conn, std::string uri)
      : conn_(conn), uri_(std::move(uri)), what_(DescribeUri(uri_)) {}
  ~PostgresConnection() override { PQfinish(conn_); }

  // Creates the schema on first use, under a transaction-scoped advisory lock
  // (concurrent CREATE TABLE IF NOT EXISTS can otherwise collide), and
  // refuses a database written by a newer schema.
  Status Init() {
    RETURN_IF_ERROR(Begin(TxKind::kWrite));
    Status s = [&]() -> Status {
      RETURN_IF_ERROR(Run("SELECT pg_advisory_xact_lock(?)", {kSchemaLockKey}).status());
      RETURN_IF_ERROR(ExecScript(kMetaTable));
      RETURN_IF_ERROR(ExecScript(store::kSchema));
      ASSIGN_OR_RETURN(
          SqlRows r,
          Run("SELECT value FROM gantry_registry_meta WHERE key = 'schema_version'", {}));
      if (r.empty()) {
        return Run("INSERT INTO gantry_registry_meta (key, value) VALUES ('schema_version', ?)",
                   {std::to_string(kSchemaVersion)})
            .status();
      }
      int64_t have = r.Int(0, 0);
      if (have > kSchemaVersion) {
        return FailedPrecondition(what_ + " has registry schema version " + std::to_string(have) +
                                  ", newer than this gantry supports (" +
                                  std::to_string(kSchemaVersion) + "); upgrade gantry");
      }
      return Status::Ok();
    }();
    if (!s.ok()) {
      Rollback();
      return s;
    }
    return Commit();
  }

  Result<SqlRows> Run(std::string_view sql, const std::vector<SqlArg>& args) override {
    std::vector<std::string> text;
    text.reserve(args.size());
    for (const auto& a : args) {
      if (const auto* n = std::get_if<int64_t>(&a)) {
        text.push_back(std::to_string(*n));
      } else {
        text.push_back(std::get<std::string>(a));
      }
    }
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (const auto& t : text) {
      values.push_back(t.c_str());
      lengths.push_back(static_cast<int>(t.size()));
      formats.push_back(0);
    }
    std::string numbered = store::NumberPlaceholders(sql);
    PgResult r(PQexecParams(conn_, numbered.c_str(), static_cast<int>(values.size()), nullptr,
                            values.data(), lengths.data(), formats.data(), 0));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ErrorFrom(r.get(), "querying");
    SqlRows out;
    int rows = PQntuples(r.get()), cols = PQnfields(r.get());
    out.rows.reserve(rows);
    for (int i = 0; i < rows; ++i) {
      std::vector<std::string>& row = out.rows.emplace_back();
      row.reserve(cols);
      for (int c = 0; c < cols; ++c) {
        row.emplace_back(PQgetvalue(r.get(), i, c),
                         static_cast<size_t>(PQgetlength(r.get(), i, c)));
      }
    }
    out.changed = ParseInt(PQcmdTuples(r.get()));
    return out;
  }

  // A dropped connection is re-established once, at the start of a call.
  Status Begin(TxKind kind) override {
    RETURN_IF_ERROR(EnsureConnected());
    return Run(kind == TxKind::kRead ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                                     : "BEGIN ISOLATION LEVEL READ COMMITTED",
               {})
        .status();
  }
  Status Commit() override { return Run("COMMIT", {}).status(); }
  void Rollback() override { PgResult(PQexec(conn_, "ROLLBACK")); }
  std::string_view LockRows() const override { return " FOR UPDATE"; }

 private:
  // Maps a failed result to a Status naming the database and what to do.
  Status ErrorFrom(PGresult* r, std::string_view what) {
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    std::string sqlstate = state ? state : "";
    if (PQstatus(conn_) == CONNECTION_BAD) {
      return Unavailable("lost the connection to the registry " + what_ + " while " +
                         std::string(what) + ": " + msg +
                         "; check that the server is up and reachable, then retry");
    }
    if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03") {
      return Unavailable("registry " + what_ + " is busy (" + msg + "); retry");
    }
    if (sqlstate.rfind("42501", 0) == 0) {
      return PermissionDenied("registry " + what_ + ": " + msg +
                              "; grant the user rights on the registry tables");
    }
    return Internal("registry " + what_ + " while " + std::string(what) + ": " + msg +
                    (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")"));
  }

  Status EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      std::string msg = PQerrorMessage(conn_);
      while (!msg.empty() && msg.back() == '\n') msg.pop_back();
      return Unavailable("cannot reconnect to the registry " + what_ + ": " + msg +
                         "; check that the server is up and reachable");
    }
    return Status::Ok();
  }

  // Several statements at once (the schema); no parameters.
  Status ExecScript(const char* sql) {
    PgResult r(PQexec(conn_, sql));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return ErrorFrom(r.get(), "creating the registry schema");
    }
    return Status::Ok();
  }

  PGconn* conn_;
  std::string uri_;
  std::string what_;
};

}  // namespace

Result<std::unique_ptr<MetadataStore>> OpenPostgresMetadataStore(const std::string& uri) {
  const std::string what = DescribeUri(uri);
  PGconn* conn = PQconnectdb(uri.c_str());
  if (!conn) return ResourceExhausted("out of memory connecting to the registry " + what);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    PQfinish(conn);
    return Unavailable("cannot connect to the registry " + what + ": " + msg +
                       "; check the --db URI (postgresql://user@host:port/dbname), that the "
                       "server is running and the database exists (createdb)");
  }
  // Drop server NOTICEs (e.g. "relation ... already exists, skipping") instead
  // of libpq printing them on stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  auto store = std::make_unique<PostgresConnection>(conn, uri);
  if (Status s = store->Init(); !s.ok()) {
    return s.WithContext("initialising the registry schema in " + what);
  }
  return store::NewSqlStore(std::move(store));
}

}  // namespace gantry::registry
