// registry::MetadataStore over a SqlConnection (see sql_store.h): the SQL of
// both stores and what they do with it.
//
// Concurrency: every call is one transaction. Reads see one snapshot (a
// version and its files, tags and aliases agree). Writers that depend on what
// they read (version allocation, alias compare-and-set, deletes) first read
// the model's row with LockRows(): on PostgreSQL that is SELECT ... FOR UPDATE,
// and under READ COMMITTED every later statement sees what was committed
// before the lock was granted; on SQLite the write transaction (BEGIN
// IMMEDIATE) already excludes other writers. Either way two registers of one
// model get distinct numbers and of two alias moves expecting the same target
// exactly one wins, across processes (and, for PostgreSQL, machines).
#include "sql_store.h"

#include <charconv>
#include <functional>
#include <mutex>

#include "store_schema.h"

namespace gantry::registry::store {

int64_t SqlRows::Int(size_t row, size_t col) const {
  const std::string& t = rows[row][col];
  int64_t v = 0;
  std::from_chars(t.data(), t.data() + t.size(), v);
  return v;
}

std::string NumberPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  bool quoted = false;
  int n = 0;
  for (char c : sql) {
    if (c == '\'') quoted = !quoted;  // '' inside a literal toggles twice
    if (c == '?' && !quoted) {
      out += "$" + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

std::string NoModel(std::string_view name) {
  return "no registered model named '" + std::string(name) + "'; see `gantry registry list`";
}

std::string Like(const std::string& s) {
  std::string out = "%";
  for (char c : s) {
    if (c == '%' || c == '_' || c == '\\') out += '\\';
    out += c;
  }
  return out + "%";
}

class SqlStore final : public MetadataStore {
 public:
  explicit SqlStore(std::unique_ptr<SqlConnection> conn) : db_(std::move(conn)) {}

  Status EnsureModel(std::string_view name, std::string_view description, int64_t now) override {
    return Tx(TxKind::kWrite, [&] {
      return Exec(
          "INSERT INTO models (name, description, created, updated, next_version) "
          "VALUES (?, ?, ?, ?, COALESCE((SELECT CAST(value AS BIGINT) FROM settings "
          "WHERE key = ?), 1)) ON CONFLICT (name) DO NOTHING",
          {std::string(name), std::string(description), now, now, NextVersionKey(name)});
    });
  }

  Result<RegisteredModel> GetModel(std::string_view name) override {
    RegisteredModel m;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(m, GetModelLocked(name));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return m;
  }

  Result<std::vector<RegisteredModel>> ListModels() override {
    std::vector<RegisteredModel> out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows names, db_->Run("SELECT name FROM models ORDER BY name", {}));
      for (const auto& row : names.rows) {
        ASSIGN_OR_RETURN(RegisteredModel m, GetModelLocked(row[0]));
        out.push_back(std::move(m));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<int64_t> InsertVersion(const ModelVersion& v, int64_t now) override {
    int64_t n = 0;
    Status tx = Tx(TxKind::kWrite, [&]() -> Status {
      ASSIGN_OR_RETURN(n, InsertVersionLocked(v, now));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return n;
  }

  Result<ModelVersion> GetVersion(std::string_view name, int64_t version) override {
    ModelVersion v;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(v, GetVersionLocked(name, version));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return v;
  }

  Result<std::vector<ModelVersion>> ListVersions(std::string_view name) override {
    std::vector<ModelVersion> out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      RETURN_IF_ERROR(GetModelLocked(name).status());
      ASSIGN_OR_RETURN(auto ids,
                       Ints("SELECT version FROM versions WHERE model = ? ORDER BY version",
                            {std::string(name)}));
      for (int64_t id : ids) {
        ASSIGN_OR_RETURN(ModelVersion v, GetVersionLocked(name, id));
        out.push_back(std::move(v));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                  std::optional<int64_t> expected, int64_t now) override {
    return Tx(TxKind::kWrite, [&]() -> Status {
      RETURN_IF_ERROR(LockModel(name).status());
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(
          Exec("INSERT INTO aliases (model, alias, version) VALUES (?, ?, ?) "
               "ON CONFLICT (model, alias) DO UPDATE SET version = excluded.version",
               {std::string(name), std::string(alias), version}));
      return Touch(name, now);
    });
  }

  Status DeleteAlias(std::string_view name, std::string_view alias, std::optional<int64_t> expected,
                     int64_t now) override {
    return Tx(TxKind::kWrite, [&]() -> Status {
      RETURN_IF_ERROR(LockModel(name).status());
      ASSIGN_OR_RETURN(auto cur, AliasTarget(name, alias));
      if (cur.empty()) {
        return NotFound("model '" + std::string(name) + "' has no alias '" + std::string(alias) +
                        "'");
      }
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(Exec("DELETE FROM aliases WHERE model = ? AND alias = ?",
                           {std::string(name), std::string(alias)}));
      return Touch(name, now);
    });
  }

  Result<int64_t> ResolveAlias(std::string_view name, std::string_view alias) override {
    std::vector<int64_t> cur;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(cur, AliasTarget(name, alias));
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
    return Tx(TxKind::kWrite, [&]() -> Status {
      RETURN_IF_ERROR(Exists(name, version));
      if (erase) {
        RETURN_IF_ERROR(Exec("DELETE FROM tags WHERE model = ? AND version = ? AND key = ?",
                             {std::string(name), version, std::string(key)}));
      } else {
        RETURN_IF_ERROR(
            Exec("INSERT INTO tags (model, version, key, value) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT (model, version, key) DO UPDATE SET value = excluded.value",
                 {std::string(name), version, std::string(key), std::string(value)}));
      }
      return Touch(name, now);
    });
  }

  Status SetDescription(std::string_view name, int64_t version, std::string_view text,
                        int64_t now) override {
    return Tx(TxKind::kWrite, [&]() -> Status {
      RETURN_IF_ERROR(Exists(name, version));
      if (version == 0) {
        return Exec("UPDATE models SET description = ?, updated = ? WHERE name = ?",
                    {std::string(text), now, std::string(name)});
      }
      return Exec("UPDATE versions SET description = ? WHERE model = ? AND version = ?",
                  {std::string(text), std::string(name), version});
    });
  }

  Status AddSignature(std::string_view name, int64_t version, std::string_view keyid,
                      std::string_view bundle, int64_t now) override {
    return Tx(TxKind::kWrite, [&]() -> Status {
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      return Exec(
          "INSERT INTO signatures (model, version, keyid, bundle, created) VALUES (?, ?, ?, ?, ?) "
          "ON CONFLICT (model, version, keyid) DO UPDATE SET bundle = excluded.bundle, "
          "created = excluded.created",
          {std::string(name), version, std::string(keyid), std::string(bundle), now});
    });
  }

  Result<std::map<std::string, std::string>> Signatures(std::string_view name,
                                                        int64_t version) override {
    std::map<std::string, std::string> out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows r, db_->Run("SELECT keyid, bundle FROM signatures WHERE model = ? "
                                           "AND version = ? ORDER BY keyid",
                                           {std::string(name), version}));
      for (auto& row : r.rows) out[row[0]] = std::move(row[1]);
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status AddTrustedKey(const TrustedKey& key, int64_t now) override {
    return Tx(TxKind::kWrite, [&] {
      return Exec(
          "INSERT INTO trusted_keys (keyid, algorithm, public_pem, comment, created) "
          "VALUES (?, ?, ?, ?, ?) ON CONFLICT (keyid) DO UPDATE SET comment = excluded.comment",
          {key.keyid, key.algorithm, key.public_pem, key.comment, now});
    });
  }

  Status RemoveTrustedKey(std::string_view keyid) override {
    return Tx(TxKind::kWrite, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows r,
                       db_->Run("DELETE FROM trusted_keys WHERE keyid = ?", {std::string(keyid)}));
      if (r.changed == 0) return NotFound("no trusted key with id " + std::string(keyid));
      return Status::Ok();
    });
  }

  Result<std::vector<TrustedKey>> TrustedKeys() override {
    std::vector<TrustedKey> out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows r, db_->Run("SELECT keyid, algorithm, public_pem, comment FROM "
                                           "trusted_keys ORDER BY keyid",
                                           {}));
      for (auto& row : r.rows) {
        out.push_back({std::move(row[0]), std::move(row[1]), std::move(row[2]), std::move(row[3])});
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<std::string> GetSetting(std::string_view key) override {
    std::string out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows r,
                       db_->Run("SELECT value FROM settings WHERE key = ?", {std::string(key)}));
      if (!r.empty()) out = r.Text(0, 0);
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Status SetSetting(std::string_view key, std::string_view value) override {
    return Tx(TxKind::kWrite, [&] { return PutSetting(std::string(key), std::string(value)); });
  }

  Result<std::vector<ModelVersion>> Search(const SearchQuery& q) override {
    std::string sql = "SELECT v.model, v.version FROM versions v WHERE 1 = 1";
    std::vector<SqlArg> args;
    auto where = [&](const char* clause, SqlArg arg) {
      sql += clause;
      args.push_back(std::move(arg));
    };
    if (!q.name_like.empty()) where(" AND v.model LIKE ? ESCAPE '\\'", Like(q.name_like));
    if (!q.source_like.empty()) where(" AND v.source LIKE ? ESCAPE '\\'", Like(q.source_like));
    if (!q.run_id.empty()) where(" AND v.run_id = ?", q.run_id);
    if (!q.code_commit.empty()) where(" AND v.code_commit = ?", q.code_commit);
    if (!q.parent.empty()) where(" AND v.parent = ?", q.parent);
    if (!q.dataset_digest.empty()) {
      where(
          " AND EXISTS (SELECT 1 FROM version_datasets d WHERE d.model = v.model AND "
          "d.version = v.version AND d.digest = ?)",
          q.dataset_digest);
    }
    if (!q.alias.empty()) {
      where(
          " AND EXISTS (SELECT 1 FROM aliases a WHERE a.model = v.model AND "
          "a.version = v.version AND a.alias = ?)",
          q.alias);
    }
    if (!q.tag_key.empty()) {
      // A version matches its own tags or its model's tags (version 0).
      where(
          " AND EXISTS (SELECT 1 FROM tags t WHERE t.model = v.model AND "
          "(t.version = v.version OR t.version = 0) AND t.key = ?",
          q.tag_key);
      if (!q.tag_value.empty()) where(" AND t.value = ?", q.tag_value);
      sql += ")";
    }
    where(" ORDER BY v.model, v.version DESC LIMIT ?",
          static_cast<int64_t>(q.limit > 0 && q.limit <= 1000 ? q.limit : 100));
    std::vector<ModelVersion> out;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(SqlRows r, db_->Run(sql, args));
      for (size_t i = 0; i < r.size(); ++i) {
        ASSIGN_OR_RETURN(ModelVersion mv, GetVersionLocked(r.Text(i, 0), r.Int(i, 1)));
        out.push_back(std::move(mv));
      }
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<ModelVersion> DeleteVersion(std::string_view name, int64_t version, int64_t now) override {
    if (version < 1) return InvalidArgument("version must be >= 1");
    ModelVersion v;
    Status tx = Tx(TxKind::kWrite, [&]() -> Status {
      // The model's row lock orders this against alias moves and registers.
      RETURN_IF_ERROR(LockModel(name).status());
      ASSIGN_OR_RETURN(v, GetVersionLocked(name, version));
      for (const char* table : kVersionTables) {
        RETURN_IF_ERROR(
            Exec(std::string("DELETE FROM ") + table + " WHERE model = ? AND version = ?",
                 {std::string(name), version}));
      }
      return Touch(name, now);
    });
    if (!tx.ok()) return tx;
    return v;
  }

  Result<std::vector<ModelVersion>> DeleteModel(std::string_view name) override {
    std::vector<ModelVersion> out;
    Status tx = Tx(TxKind::kWrite, [&]() -> Status {
      ASSIGN_OR_RETURN(int64_t next, LockModel(name));
      ASSIGN_OR_RETURN(auto ids,
                       Ints("SELECT version FROM versions WHERE model = ? ORDER BY version",
                            {std::string(name)}));
      for (int64_t id : ids) {
        ASSIGN_OR_RETURN(ModelVersion v, GetVersionLocked(name, id));
        out.push_back(std::move(v));
      }
      for (const char* table : kVersionTables) {
        RETURN_IF_ERROR(
            Exec(std::string("DELETE FROM ") + table + " WHERE model = ?", {std::string(name)}));
      }
      RETURN_IF_ERROR(Exec("DELETE FROM models WHERE name = ?", {std::string(name)}));
      return PutSetting(NextVersionKey(name), std::to_string(next));
    });
    if (!tx.ok()) return tx;
    return out;
  }

  Result<bool> DigestReferenced(std::string_view sha256) override {
    std::vector<int64_t> n;
    Status tx = Tx(TxKind::kRead, [&]() -> Status {
      ASSIGN_OR_RETURN(n, Ints("SELECT (SELECT COUNT(*) FROM version_files WHERE sha256 = ?) + "
                               "(SELECT COUNT(*) FROM versions WHERE manifest_sha256 = ?)",
                               {std::string(sha256), std::string(sha256)}));
      return Status::Ok();
    });
    if (!tx.ok()) return tx;
    return !n.empty() && n[0] > 0;
  }

 private:
  // Runs `body` in one transaction of `kind` (calls are serialized here);
  // commits when it returns OK, else rolls back and returns its error.
  Status Tx(TxKind kind, const std::function<Status()>& body) {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(db_->Begin(kind));
    Status s = body();
    if (!s.ok()) {
      db_->Rollback();
      return s;
    }
    if (Status c = db_->Commit(); !c.ok()) {
      db_->Rollback();
      return c;
    }
    return Status::Ok();
  }

  Status Exec(const std::string& sql, const std::vector<SqlArg>& args) {
    return db_->Run(sql, args).status();
  }

  Result<std::vector<int64_t>> Ints(const std::string& sql, const std::vector<SqlArg>& args) {
    ASSIGN_OR_RETURN(SqlRows r, db_->Run(sql, args));
    std::vector<int64_t> out;
    out.reserve(r.size());
    for (size_t i = 0; i < r.size(); ++i) out.push_back(r.Int(i, 0));
    return out;
  }

  Status Touch(std::string_view name, int64_t now) {
    return Exec("UPDATE models SET updated = ? WHERE name = ?", {now, std::string(name)});
  }

  Status PutSetting(const std::string& key, const std::string& value) {
    return Exec(
        "INSERT INTO settings (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        {key, value});
  }

  // Reads (and in a write transaction locks) the model's row; its next
  // version number. NotFound when the model does not exist.
  Result<int64_t> LockModel(std::string_view name) {
    ASSIGN_OR_RETURN(auto next, Ints("SELECT next_version FROM models WHERE name = ?" +
                                         std::string(db_->LockRows()),
                                     {std::string(name)}));
    if (next.empty()) return NotFound(NoModel(name));
    return next[0];
  }

  // The model (version 0) or the version must exist.
  Status Exists(std::string_view name, int64_t version) {
    if (version == 0) return GetModelLocked(name).status();
    return GetVersionLocked(name, version).status();
  }

  Result<std::vector<int64_t>> AliasTarget(std::string_view name, std::string_view alias) {
    return Ints("SELECT version FROM aliases WHERE model = ? AND alias = ?",
                {std::string(name), std::string(alias)});
  }

  Status CheckExpected(std::string_view name, std::string_view alias,
                       std::optional<int64_t> expected) {
    if (!expected) return Status::Ok();
    ASSIGN_OR_RETURN(auto cur, AliasTarget(name, alias));
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
    SqlArg n = std::string(name);
    ASSIGN_OR_RETURN(
        SqlRows r,
        db_->Run("SELECT name, description, created, updated FROM models WHERE name = ?", {n}));
    if (r.empty()) return NotFound(NoModel(name));
    RegisteredModel m;
    m.name = r.Text(0, 0);
    m.description = r.Text(0, 1);
    m.created_unix = r.Int(0, 2);
    m.updated_unix = r.Int(0, 3);
    ASSIGN_OR_RETURN(auto latest, Ints("SELECT MAX(version) FROM versions WHERE model = ?", {n}));
    m.latest_version = latest.empty() ? 0 : latest[0];
    ASSIGN_OR_RETURN(
        SqlRows tags,
        db_->Run("SELECT key, value FROM tags WHERE model = ? AND version = 0 ORDER BY key", {n}));
    for (auto& row : tags.rows) m.tags[row[0]] = std::move(row[1]);
    ASSIGN_OR_RETURN(
        SqlRows aliases,
        db_->Run("SELECT alias, version FROM aliases WHERE model = ? ORDER BY alias", {n}));
    for (size_t i = 0; i < aliases.size(); ++i) m.aliases[aliases.Text(i, 0)] = aliases.Int(i, 1);
    return m;
  }

  Result<int64_t> InsertVersionLocked(const ModelVersion& v, int64_t now) {
    // The row lock serializes concurrent registers of one model: the second
    // waits here and then reads the number the first one committed.
    ASSIGN_OR_RETURN(int64_t n, LockModel(v.model));
    RETURN_IF_ERROR(Exec("UPDATE models SET next_version = ?, updated = ? WHERE name = ?",
                         {n + 1, now, v.model}));
    const Lineage& l = v.lineage;
    RETURN_IF_ERROR(
        Exec("INSERT INTO versions (model, version, description, created, manifest_sha256, "
             "subject_sha256, total_bytes, source, run_id, code_commit, parent, metrics) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             {v.model, n, v.description, now, v.manifest_sha256, v.subject_sha256,
              static_cast<int64_t>(v.total_bytes), l.source, l.run_id, l.code_commit, l.parent,
              l.metrics.dump()}));
    for (const FileEntry& f : v.files) {
      RETURN_IF_ERROR(Exec(
          "INSERT INTO version_files (model, version, path, sha256, size) VALUES (?, ?, ?, ?, ?)",
          {v.model, n, f.path, f.sha256, static_cast<int64_t>(f.size)}));
    }
    for (const std::string& d : l.dataset_digests) {
      RETURN_IF_ERROR(
          Exec("INSERT INTO version_datasets (model, version, digest) VALUES (?, ?, ?) "
               "ON CONFLICT (model, version, digest) DO NOTHING",
               {v.model, n, d}));
    }
    for (const auto& [k, val] : v.tags) {
      RETURN_IF_ERROR(Exec("INSERT INTO tags (model, version, key, value) VALUES (?, ?, ?, ?)",
                           {v.model, n, k, val}));
    }
    return n;
  }

  Result<ModelVersion> GetVersionLocked(std::string_view name, int64_t version) {
    const std::vector<SqlArg> key = {std::string(name), version};
    ASSIGN_OR_RETURN(
        SqlRows r,
        db_->Run("SELECT model, version, description, created, manifest_sha256, subject_sha256, "
                 "total_bytes, source, run_id, code_commit, parent, metrics FROM versions "
                 "WHERE model = ? AND version = ?",
                 key));
    if (r.empty()) {
      return NotFound("model '" + std::string(name) + "' has no version " +
                      std::to_string(version) + "; see `gantry registry versions " +
                      std::string(name) + "`");
    }
    ModelVersion v;
    v.model = r.Text(0, 0);
    v.version = r.Int(0, 1);
    v.description = r.Text(0, 2);
    v.created_unix = r.Int(0, 3);
    v.manifest_sha256 = r.Text(0, 4);
    v.subject_sha256 = r.Text(0, 5);
    v.total_bytes = static_cast<uint64_t>(r.Int(0, 6));
    v.lineage.source = r.Text(0, 7);
    v.lineage.run_id = r.Text(0, 8);
    v.lineage.code_commit = r.Text(0, 9);
    v.lineage.parent = r.Text(0, 10);
    Json metrics = Json::parse(r.Text(0, 11), nullptr, false);
    v.lineage.metrics = metrics.is_discarded() ? Json::object() : metrics;
    ASSIGN_OR_RETURN(SqlRows files, db_->Run("SELECT path, sha256, size FROM version_files WHERE "
                                             "model = ? AND version = ? ORDER BY path",
                                             key));
    for (size_t i = 0; i < files.size(); ++i) {
      v.files.push_back(
          {files.Text(i, 0), files.Text(i, 1), static_cast<uint64_t>(files.Int(i, 2))});
    }
    // The version's lists, in the order ToJson prints them.
    auto column = [&](const char* sql, std::vector<std::string>* out) -> Status {
      ASSIGN_OR_RETURN(SqlRows rows, db_->Run(sql, key));
      for (auto& row : rows.rows) out->push_back(std::move(row[0]));
      return Status::Ok();
    };
    RETURN_IF_ERROR(column(
        "SELECT digest FROM version_datasets WHERE model = ? AND version = ? ORDER BY digest",
        &v.lineage.dataset_digests));
    ASSIGN_OR_RETURN(SqlRows tags, db_->Run("SELECT key, value FROM tags WHERE model = ? AND "
                                            "version = ? ORDER BY key",
                                            key));
    for (auto& row : tags.rows) v.tags[row[0]] = std::move(row[1]);
    RETURN_IF_ERROR(column(
        "SELECT alias FROM aliases WHERE model = ? AND version = ? ORDER BY alias", &v.aliases));
    RETURN_IF_ERROR(
        column("SELECT keyid FROM signatures WHERE model = ? AND version = ? ORDER BY keyid",
               &v.signer_keyids));
    return v;
  }

  std::mutex mu_;  // one call at a time on db_
  std::unique_ptr<SqlConnection> db_;
};

}  // namespace

std::unique_ptr<MetadataStore> NewSqlStore(std::unique_ptr<SqlConnection> conn) {
  return std::make_unique<SqlStore>(std::move(conn));
}

}  // namespace gantry::registry::store
