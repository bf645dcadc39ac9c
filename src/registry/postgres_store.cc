// PostgreSQL implementation of registry::MetadataStore, for a registry shared
// by many machines (`--db postgresql://user@host/db`).
//
// Same tables and semantics as the SQLite store (sqlite_store.cc), with
// BIGINT numbers and $n placeholders. Concurrency:
//   - every call runs in one transaction (reads in REPEATABLE READ READ ONLY
//     so a version and its files/tags/aliases are one snapshot);
//   - writers that depend on what they read (version allocation, alias
//     compare-and-set) first take the model's row lock with
//     SELECT ... FOR UPDATE. Under READ COMMITTED each later statement sees
//     everything committed before the lock was granted, so two registers of
//     the same model get distinct numbers and of two alias moves expecting
//     the same target exactly one wins - across processes and machines.
//   - the schema is created on first use under a transaction-scoped advisory
//     lock (concurrent CREATE TABLE IF NOT EXISTS can otherwise collide) and
//     versioned in the gantry_registry_meta table; a database written by a
//     newer schema is refused rather than guessed at.
// One connection per store; calls on one store are serialized by a mutex
// (open one store per thread for parallelism). A dropped connection is
// re-established once per call.
#include <libpq-fe.h>

#include <charconv>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <variant>

#include "gantry/registry/registry.h"
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
using store::kSchema;
using store::kVersionTables;
using store::NextVersionKey;

using Arg = std::variant<int64_t, std::string>;

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

class PostgresStore final : public MetadataStore {
 public:
  PostgresStore(PGconn* conn, std::string uri)
      : conn_(conn), uri_(std::move(uri)), what_(DescribeUri(uri_)) {}
  ~PostgresStore() override { PQfinish(conn_); }

  Status Init() {
    std::lock_guard lock(mu_);
    Status tx = Tx(false, [&]() -> Status {
      RETURN_IF_ERROR(Exec("SELECT pg_advisory_xact_lock($1)", {kSchemaLockKey}).status());
      RETURN_IF_ERROR(ExecScript(kMetaTable));
      RETURN_IF_ERROR(ExecScript(kSchema));
      ASSIGN_OR_RETURN(auto r, Exec("SELECT value FROM gantry_registry_meta WHERE key = "
                                    "'schema_version'",
                                    {}));
      if (PQntuples(r.get()) == 0) {
        return Exec(
                   "INSERT INTO gantry_registry_meta (key, value) VALUES "
                   "('schema_version', $1)",
                   {std::to_string(kSchemaVersion)})
            .status();
      }
      int64_t have = ParseInt(PQgetvalue(r.get(), 0, 0));
      if (have > kSchemaVersion) {
        return FailedPrecondition(what_ + " has registry schema version " + std::to_string(have) +
                                  ", newer than this gantry supports (" +
                                  std::to_string(kSchemaVersion) + "); upgrade gantry");
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return Status::Ok();
  }

  Status EnsureModel(std::string_view name, std::string_view description, int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      return Exec(
                 "INSERT INTO models (name, description, created, updated, next_version) "
                 "VALUES ($1, $2, $3, $4, COALESCE((SELECT CAST(value AS BIGINT) FROM settings "
                 "WHERE key = $5), 1)) ON CONFLICT (name) DO NOTHING",
                 {std::string(name), std::string(description), now, now, NextVersionKey(name)})
          .status();
    });
  }

  Result<RegisteredModel> GetModel(std::string_view name) override {
    std::lock_guard lock(mu_);
    RegisteredModel m;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(m, GetModelLocked(name));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return m;
  }

  Result<std::vector<RegisteredModel>> ListModels() override {
    std::lock_guard lock(mu_);
    std::vector<RegisteredModel> out;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT name FROM models ORDER BY name", {}));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        ASSIGN_OR_RETURN(auto m, GetModelLocked(PQgetvalue(r.get(), i, 0)));
        out.push_back(std::move(m));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<int64_t> InsertVersion(const ModelVersion& v, int64_t now) override {
    std::lock_guard lock(mu_);
    int64_t n = 0;
    Status tx = Tx(false, [&]() -> Status {
      ASSIGN_OR_RETURN(n, InsertVersionLocked(v, now));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return n;
  }

  Result<ModelVersion> GetVersion(std::string_view name, int64_t version) override {
    std::lock_guard lock(mu_);
    ModelVersion v;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(v, GetVersionLocked(name, version));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return v;
  }

  Result<std::vector<ModelVersion>> ListVersions(std::string_view name) override {
    std::lock_guard lock(mu_);
    std::vector<ModelVersion> out;
    Status tx = Tx(true, [&]() -> Status {
      RETURN_IF_ERROR(GetModelLocked(name).status());
      ASSIGN_OR_RETURN(auto ids,
                       Ints("SELECT version FROM versions WHERE model = $1 ORDER BY version",
                            {std::string(name)}));
      for (int64_t id : ids) {
        ASSIGN_OR_RETURN(auto v, GetVersionLocked(name, id));
        out.push_back(std::move(v));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                  std::optional<int64_t> expected, int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      RETURN_IF_ERROR(LockModel(name));
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(Exec("INSERT INTO aliases (model, alias, version) VALUES ($1, $2, $3) "
                           "ON CONFLICT (model, alias) DO UPDATE SET version = excluded.version",
                           {std::string(name), std::string(alias), version})
                          .status());
      return Exec("UPDATE models SET updated = $1 WHERE name = $2", {now, std::string(name)})
          .status();
    });
  }

  Status DeleteAlias(std::string_view name, std::string_view alias, std::optional<int64_t> expected,
                     int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      RETURN_IF_ERROR(LockModel(name));
      ASSIGN_OR_RETURN(auto cur, Ints("SELECT version FROM aliases WHERE model = $1 AND alias = $2",
                                      {std::string(name), std::string(alias)}));
      if (cur.empty()) {
        return NotFound("model '" + std::string(name) + "' has no alias '" + std::string(alias) +
                        "'");
      }
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(Exec("DELETE FROM aliases WHERE model = $1 AND alias = $2",
                           {std::string(name), std::string(alias)})
                          .status());
      return Exec("UPDATE models SET updated = $1 WHERE name = $2", {now, std::string(name)})
          .status();
    });
  }

  Result<int64_t> ResolveAlias(std::string_view name, std::string_view alias) override {
    std::lock_guard lock(mu_);
    std::vector<int64_t> cur;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(cur, Ints("SELECT version FROM aliases WHERE model = $1 AND alias = $2",
                                 {std::string(name), std::string(alias)}));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    if (cur.empty()) {
      return NotFound("model '" + std::string(name) + "' has no alias '" + std::string(alias) +
                      "'; see `gantry registry show " + std::string(name) + "`");
    }
    return cur[0];
  }

  Status SetTag(std::string_view name, int64_t version, std::string_view key,
                std::string_view value, bool erase, int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      if (version == 0) {
        RETURN_IF_ERROR(GetModelLocked(name).status());
      } else {
        RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      }
      if (erase) {
        RETURN_IF_ERROR(Exec("DELETE FROM tags WHERE model = $1 AND version = $2 AND key = $3",
                             {std::string(name), version, std::string(key)})
                            .status());
      } else {
        RETURN_IF_ERROR(
            Exec("INSERT INTO tags (model, version, key, value) VALUES ($1, $2, $3, $4) "
                 "ON CONFLICT (model, version, key) DO UPDATE SET value = excluded.value",
                 {std::string(name), version, std::string(key), std::string(value)})
                .status());
      }
      return Exec("UPDATE models SET updated = $1 WHERE name = $2", {now, std::string(name)})
          .status();
    });
  }

  Status SetDescription(std::string_view name, int64_t version, std::string_view text,
                        int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      if (version == 0) {
        RETURN_IF_ERROR(GetModelLocked(name).status());
        return Exec("UPDATE models SET description = $1, updated = $2 WHERE name = $3",
                    {std::string(text), now, std::string(name)})
            .status();
      }
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      return Exec("UPDATE versions SET description = $1 WHERE model = $2 AND version = $3",
                  {std::string(text), std::string(name), version})
          .status();
    });
  }

  Status AddSignature(std::string_view name, int64_t version, std::string_view keyid,
                      std::string_view bundle, int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      return Exec(
                 "INSERT INTO signatures (model, version, keyid, bundle, created) "
                 "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (model, version, keyid) DO UPDATE "
                 "SET bundle = excluded.bundle, created = excluded.created",
                 {std::string(name), version, std::string(keyid), std::string(bundle), now})
          .status();
    });
  }

  Result<std::map<std::string, std::string>> Signatures(std::string_view name,
                                                        int64_t version) override {
    std::lock_guard lock(mu_);
    std::map<std::string, std::string> out;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT keyid, bundle FROM signatures WHERE model = $1 AND "
                                    "version = $2 ORDER BY keyid",
                                    {std::string(name), version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) out[Text(r, i, 0)] = Text(r, i, 1);
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status AddTrustedKey(const TrustedKey& key, int64_t now) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      return Exec(
                 "INSERT INTO trusted_keys (keyid, algorithm, public_pem, comment, created) "
                 "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (keyid) DO UPDATE "
                 "SET comment = excluded.comment",
                 {key.keyid, key.algorithm, key.public_pem, key.comment, now})
          .status();
    });
  }

  Status RemoveTrustedKey(std::string_view keyid) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r,
                       Exec("DELETE FROM trusted_keys WHERE keyid = $1", {std::string(keyid)}));
      if (ParseInt(PQcmdTuples(r.get())) == 0) {
        return NotFound("no trusted key with id " + std::string(keyid));
      }
      return Status::Ok();
    });
  }

  Result<std::vector<TrustedKey>> TrustedKeys() override {
    std::lock_guard lock(mu_);
    std::vector<TrustedKey> out;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT keyid, algorithm, public_pem, comment FROM "
                                    "trusted_keys ORDER BY keyid",
                                    {}));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        out.push_back({Text(r, i, 0), Text(r, i, 1), Text(r, i, 2), Text(r, i, 3)});
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<std::string> GetSetting(std::string_view key) override {
    std::lock_guard lock(mu_);
    std::string out;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r,
                       Exec("SELECT value FROM settings WHERE key = $1", {std::string(key)}));
      if (PQntuples(r.get()) > 0) out = Text(r, 0, 0);
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status SetSetting(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mu_);
    return Tx(false, [&]() -> Status {
      return Exec(
                 "INSERT INTO settings (key, value) VALUES ($1, $2) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 {std::string(key), std::string(value)})
          .status();
    });
  }

  Result<std::vector<ModelVersion>> Search(const SearchQuery& q) override {
    std::lock_guard lock(mu_);
    std::string sql = "SELECT v.model, v.version FROM versions v WHERE 1 = 1";
    std::vector<Arg> args;
    auto next = [&](Arg a) {
      args.push_back(std::move(a));
      return "$" + std::to_string(args.size());
    };
    auto like = [](const std::string& s) {
      std::string out = "%";
      for (char c : s) {
        if (c == '%' || c == '_' || c == '\\') out += '\\';
        out += c;
      }
      return out + "%";
    };
    if (!q.name_like.empty())
      sql += " AND v.model LIKE " + next(like(q.name_like)) + " ESCAPE '\\'";
    if (!q.source_like.empty()) {
      sql += " AND v.source LIKE " + next(like(q.source_like)) + " ESCAPE '\\'";
    }
    if (!q.run_id.empty()) sql += " AND v.run_id = " + next(q.run_id);
    if (!q.code_commit.empty()) sql += " AND v.code_commit = " + next(q.code_commit);
    if (!q.parent.empty()) sql += " AND v.parent = " + next(q.parent);
    if (!q.dataset_digest.empty()) {
      sql +=
          " AND EXISTS (SELECT 1 FROM version_datasets d WHERE d.model = v.model AND "
          "d.version = v.version AND d.digest = " +
          next(q.dataset_digest) + ")";
    }
    if (!q.alias.empty()) {
      sql +=
          " AND EXISTS (SELECT 1 FROM aliases a WHERE a.model = v.model AND "
          "a.version = v.version AND a.alias = " +
          next(q.alias) + ")";
    }
    if (!q.tag_key.empty()) {
      // A version matches its own tags or its model's tags (version 0).
      sql +=
          " AND EXISTS (SELECT 1 FROM tags t WHERE t.model = v.model AND "
          "(t.version = v.version OR t.version = 0) AND t.key = " +
          next(q.tag_key);
      if (!q.tag_value.empty()) sql += " AND t.value = " + next(q.tag_value);
      sql += ")";
    }
    sql += " ORDER BY v.model, v.version DESC LIMIT " +
           next(static_cast<int64_t>(q.limit > 0 && q.limit <= 1000 ? q.limit : 100));
    std::vector<ModelVersion> out;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(auto r, Exec(sql.c_str(), args));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        ASSIGN_OR_RETURN(auto mv,
                         GetVersionLocked(Text(r, i, 0), ParseInt(PQgetvalue(r.get(), i, 1))));
        out.push_back(std::move(mv));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<ModelVersion> DeleteVersion(std::string_view name, int64_t version, int64_t now) override {
    if (version < 1) return InvalidArgument("version must be >= 1");
    std::lock_guard lock(mu_);
    ModelVersion v;
    Status tx = Tx(false, [&]() -> Status {
      // The model's row lock orders this against alias moves and registers.
      RETURN_IF_ERROR(LockModel(name));
      ASSIGN_OR_RETURN(v, GetVersionLocked(name, version));
      for (const char* table : kVersionTables) {
        std::string sql =
            std::string("DELETE FROM ") + table + " WHERE model = $1 AND version = $2";
        RETURN_IF_ERROR(Exec(sql.c_str(), {std::string(name), version}).status());
      }
      return Exec("UPDATE models SET updated = $1 WHERE name = $2", {now, std::string(name)})
          .status();
    });
    if (!tx.ok()) return tx;
    return v;
  }

  Result<std::vector<ModelVersion>> DeleteModel(std::string_view name) override {
    std::lock_guard lock(mu_);
    std::vector<ModelVersion> out;
    Status tx = Tx(false, [&]() -> Status {
      ASSIGN_OR_RETURN(auto next, Ints("SELECT next_version FROM models WHERE name = $1 FOR UPDATE",
                                       {std::string(name)}));
      if (next.empty()) {
        return NotFound("no registered model named '" + std::string(name) +
                        "'; see `gantry registry list`");
      }
      ASSIGN_OR_RETURN(auto ids,
                       Ints("SELECT version FROM versions WHERE model = $1 ORDER BY version",
                            {std::string(name)}));
      for (int64_t id : ids) {
        ASSIGN_OR_RETURN(auto v, GetVersionLocked(name, id));
        out.push_back(std::move(v));
      }
      for (const char* table : kVersionTables) {
        std::string sql = std::string("DELETE FROM ") + table + " WHERE model = $1";
        RETURN_IF_ERROR(Exec(sql.c_str(), {std::string(name)}).status());
      }
      RETURN_IF_ERROR(Exec("DELETE FROM models WHERE name = $1", {std::string(name)}).status());
      return Exec(
                 "INSERT INTO settings (key, value) VALUES ($1, $2) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 {NextVersionKey(name), std::to_string(next[0])})
          .status();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<bool> DigestReferenced(std::string_view sha256) override {
    std::lock_guard lock(mu_);
    std::vector<int64_t> n;
    Status tx = Tx(true, [&]() -> Status {
      ASSIGN_OR_RETURN(n, Ints("SELECT (SELECT COUNT(*) FROM version_files WHERE sha256 = $1) + "
                               "(SELECT COUNT(*) FROM versions WHERE manifest_sha256 = $1)",
                               {std::string(sha256)}));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return !n.empty() && n[0] > 0;
  }

 private:
  static std::string Text(const PgResult& r, int row, int col) {
    return std::string(PQgetvalue(r.get(), row, col),
                       static_cast<size_t>(PQgetlength(r.get(), row, col)));
  }

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

  Result<PgResult> Exec(const char* sql, const std::vector<Arg>& args) {
    std::vector<std::string> text;
    text.reserve(args.size());
    for (const auto& a : args) {
      if (auto* n = std::get_if<int64_t>(&a)) {
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
    PgResult r(PQexecParams(conn_, sql, static_cast<int>(values.size()), nullptr, values.data(),
                            lengths.data(), formats.data(), 0));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ErrorFrom(r.get(), "querying");
    return r;
  }

  Status ExecScript(const char* sql) {
    PgResult r(PQexec(conn_, sql));
    ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return ErrorFrom(r.get(), "creating the registry schema");
    }
    return Status::Ok();
  }

  Result<std::vector<int64_t>> Ints(const char* sql, const std::vector<Arg>& args) {
    ASSIGN_OR_RETURN(auto r, Exec(sql, args));
    std::vector<int64_t> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      out.push_back(PQgetisnull(r.get(), i, 0) ? 0 : ParseInt(PQgetvalue(r.get(), i, 0)));
    }
    return out;
  }

  // Runs `body` in one transaction; commits when it returns OK, else rolls
  // back and returns its error.
  Status Tx(bool read_only, const std::function<Status()>& body) {
    RETURN_IF_ERROR(EnsureConnected());
    RETURN_IF_ERROR(Exec(read_only ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                                   : "BEGIN ISOLATION LEVEL READ COMMITTED",
                         {})
                        .status());
    Status s = body();
    if (!s.ok()) {
      PgResult(PQexec(conn_, "ROLLBACK"));
      return s;
    }
    if (auto c = Exec("COMMIT", {}); !c.ok()) {
      PgResult(PQexec(conn_, "ROLLBACK"));
      return c.status();
    }
    return Status::Ok();
  }

  // Takes the model's row lock for the rest of the transaction; NotFound when
  // the model does not exist.
  Status LockModel(std::string_view name) {
    ASSIGN_OR_RETURN(auto r, Exec("SELECT next_version FROM models WHERE name = $1 FOR UPDATE",
                                  {std::string(name)}));
    if (PQntuples(r.get()) == 0) {
      return NotFound("no registered model named '" + std::string(name) +
                      "'; see `gantry registry list`");
    }
    return Status::Ok();
  }

  Status CheckExpected(std::string_view name, std::string_view alias,
                       std::optional<int64_t> expected) {
    if (!expected) return Status::Ok();
    ASSIGN_OR_RETURN(auto cur, Ints("SELECT version FROM aliases WHERE model = $1 AND alias = $2",
                                    {std::string(name), std::string(alias)}));
    int64_t now_at = cur.empty() ? 0 : cur[0];
    if (now_at != *expected) {
      return FailedPrecondition(
          "alias '" + std::string(alias) + "' of model '" + std::string(name) + "' points at " +
          (now_at == 0 ? std::string("nothing") : "version " + std::to_string(now_at)) +
          ", not the expected " +
          (*expected == 0 ? std::string("nothing") : "version " + std::to_string(*expected)) +
          " (someone moved it concurrently); re-read and retry");
    }
    return Status::Ok();
  }

  Result<RegisteredModel> GetModelLocked(std::string_view name) {
    RegisteredModel m;
    std::string n(name);
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT name, description, created, updated FROM models "
                                    "WHERE name = $1",
                                    {n}));
      if (PQntuples(r.get()) == 0) {
        return NotFound("no registered model named '" + n + "'; see `gantry registry list`");
      }
      m.name = Text(r, 0, 0);
      m.description = Text(r, 0, 1);
      m.created_unix = ParseInt(PQgetvalue(r.get(), 0, 2));
      m.updated_unix = ParseInt(PQgetvalue(r.get(), 0, 3));
    }
    ASSIGN_OR_RETURN(auto latest, Ints("SELECT MAX(version) FROM versions WHERE model = $1", {n}));
    m.latest_version = latest.empty() ? 0 : latest[0];
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT key, value FROM tags WHERE model = $1 AND version = 0 "
                                    "ORDER BY key",
                                    {n}));
      for (int i = 0; i < PQntuples(r.get()); ++i) m.tags[Text(r, i, 0)] = Text(r, i, 1);
    }
    {
      ASSIGN_OR_RETURN(
          auto r, Exec("SELECT alias, version FROM aliases WHERE model = $1 ORDER BY alias", {n}));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        m.aliases[Text(r, i, 0)] = ParseInt(PQgetvalue(r.get(), i, 1));
      }
    }
    return m;
  }

  Result<int64_t> InsertVersionLocked(const ModelVersion& v, int64_t now) {
    // The row lock serializes concurrent registers of one model: the second
    // waits here and then reads the number the first one committed.
    ASSIGN_OR_RETURN(auto next,
                     Ints("SELECT next_version FROM models WHERE name = $1 FOR UPDATE", {v.model}));
    if (next.empty()) return NotFound("no registered model named '" + v.model + "'");
    int64_t n = next[0];
    RETURN_IF_ERROR(Exec("UPDATE models SET next_version = $1, updated = $2 WHERE name = $3",
                         {n + 1, now, v.model})
                        .status());
    const auto& l = v.lineage;
    RETURN_IF_ERROR(
        Exec("INSERT INTO versions (model, version, description, created, manifest_sha256, "
             "subject_sha256, total_bytes, source, run_id, code_commit, parent, metrics) "
             "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
             {v.model, n, v.description, now, v.manifest_sha256, v.subject_sha256,
              static_cast<int64_t>(v.total_bytes), l.source, l.run_id, l.code_commit, l.parent,
              l.metrics.dump()})
            .status());
    for (const auto& f : v.files) {
      RETURN_IF_ERROR(Exec("INSERT INTO version_files (model, version, path, sha256, size) "
                           "VALUES ($1, $2, $3, $4, $5)",
                           {v.model, n, f.path, f.sha256, static_cast<int64_t>(f.size)})
                          .status());
    }
    for (const auto& d : l.dataset_digests) {
      RETURN_IF_ERROR(Exec("INSERT INTO version_datasets (model, version, digest) "
                           "VALUES ($1, $2, $3) ON CONFLICT (model, version, digest) DO NOTHING",
                           {v.model, n, d})
                          .status());
    }
    for (const auto& [k, val] : v.tags) {
      RETURN_IF_ERROR(Exec("INSERT INTO tags (model, version, key, value) VALUES ($1, $2, $3, $4)",
                           {v.model, n, k, val})
                          .status());
    }
    return n;
  }

  Result<ModelVersion> GetVersionLocked(std::string_view name, int64_t version) {
    ModelVersion v;
    Arg m = std::string(name);
    {
      ASSIGN_OR_RETURN(
          auto r,
          Exec("SELECT model, version, description, created, manifest_sha256, subject_sha256, "
               "total_bytes, source, run_id, code_commit, parent, metrics FROM versions "
               "WHERE model = $1 AND version = $2",
               {m, version}));
      if (PQntuples(r.get()) == 0) {
        return NotFound("model '" + std::string(name) + "' has no version " +
                        std::to_string(version) + "; see `gantry registry versions " +
                        std::string(name) + "`");
      }
      v.model = Text(r, 0, 0);
      v.version = ParseInt(PQgetvalue(r.get(), 0, 1));
      v.description = Text(r, 0, 2);
      v.created_unix = ParseInt(PQgetvalue(r.get(), 0, 3));
      v.manifest_sha256 = Text(r, 0, 4);
      v.subject_sha256 = Text(r, 0, 5);
      v.total_bytes = static_cast<uint64_t>(ParseInt(PQgetvalue(r.get(), 0, 6)));
      v.lineage.source = Text(r, 0, 7);
      v.lineage.run_id = Text(r, 0, 8);
      v.lineage.code_commit = Text(r, 0, 9);
      v.lineage.parent = Text(r, 0, 10);
      Json metrics = Json::parse(Text(r, 0, 11), nullptr, false);
      v.lineage.metrics = metrics.is_discarded() ? Json::object() : metrics;
    }
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT path, sha256, size FROM version_files WHERE model = "
                                    "$1 AND version = $2 ORDER BY path",
                                    {m, version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        v.files.push_back({Text(r, i, 0), Text(r, i, 1),
                           static_cast<uint64_t>(ParseInt(PQgetvalue(r.get(), i, 2)))});
      }
    }
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT digest FROM version_datasets WHERE model = $1 AND "
                                    "version = $2 ORDER BY digest",
                                    {m, version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) {
        v.lineage.dataset_digests.push_back(Text(r, i, 0));
      }
    }
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT key, value FROM tags WHERE model = $1 AND version = "
                                    "$2 ORDER BY key",
                                    {m, version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) v.tags[Text(r, i, 0)] = Text(r, i, 1);
    }
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT alias FROM aliases WHERE model = $1 AND version = $2 "
                                    "ORDER BY alias",
                                    {m, version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) v.aliases.push_back(Text(r, i, 0));
    }
    {
      ASSIGN_OR_RETURN(auto r, Exec("SELECT keyid FROM signatures WHERE model = $1 AND version = "
                                    "$2 ORDER BY keyid",
                                    {m, version}));
      for (int i = 0; i < PQntuples(r.get()); ++i) v.signer_keyids.push_back(Text(r, i, 0));
    }
    return v;
  }

  std::mutex mu_;
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
  auto store = std::make_unique<PostgresStore>(conn, uri);
  if (Status s = store->Init(); !s.ok()) {
    return s.WithContext("initialising the registry schema in " + what);
  }
  return std::unique_ptr<MetadataStore>(std::move(store));
}

}  // namespace gantry::registry
