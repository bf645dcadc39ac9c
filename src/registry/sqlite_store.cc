// SQLite (WAL) implementation of registry::MetadataStore.
//
// Portability notes for the PostgreSQL driver: every statement below uses
// only ANSI types (TEXT, INTEGER -> BIGINT), '?' placeholders (-> $n),
// INSERT ... ON CONFLICT (...) DO UPDATE / DO NOTHING (PostgreSQL >= 9.5) and
// no SQLite functions. Transactions are BEGIN IMMEDIATE here (a write lock up
// front, so the version counter and alias compare-and-set never race); on
// PostgreSQL use SELECT ... FOR UPDATE on the models row instead.
#include <sqlite3.h>

#include <cerrno>
#include <mutex>
#include <variant>

#include "gantry/registry/registry.h"
#include "store_schema.h"

namespace gantry::registry {
namespace {

using store::kSchema;
using store::kVersionTables;
using store::NextVersionKey;

using Arg = std::variant<int64_t, std::string>;

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  bool prepared() const { return rc_ == SQLITE_OK; }
  void Bind(const std::vector<Arg>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      int idx = static_cast<int>(i + 1);
      if (auto* n = std::get_if<int64_t>(&args[i])) {
        sqlite3_bind_int64(s_, idx, *n);
      } else {
        const auto& t = std::get<std::string>(args[i]);
        sqlite3_bind_text(s_, idx, t.data(), static_cast<int>(t.size()), SQLITE_TRANSIENT);
      }
    }
  }
  int Step() { return sqlite3_step(s_); }
  int64_t Int(int c) { return sqlite3_column_int64(s_, c); }
  std::string Text(int c) {
    auto* p = sqlite3_column_text(s_, c);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(s_, c)))
             : std::string();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

class SqliteStore final : public MetadataStore {
 public:
  SqliteStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteStore() override { sqlite3_close(db_); }

  Status Init() {
    sqlite3_busy_timeout(db_, 10000);
    RETURN_IF_ERROR(ExecRaw("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(ExecRaw("PRAGMA synchronous=FULL"));
    return ExecRaw(kSchema);
  }

  Status EnsureModel(std::string_view name, std::string_view description, int64_t now) override {
    std::lock_guard lock(mu_);
    return Exec(
        "INSERT INTO models (name, description, created, updated, next_version) "
        "VALUES (?, ?, ?, ?, COALESCE((SELECT CAST(value AS INTEGER) FROM settings "
        "WHERE key = ?), 1)) ON CONFLICT (name) DO NOTHING",
        {std::string(name), std::string(description), now, now, NextVersionKey(name)});
  }

  Result<RegisteredModel> GetModel(std::string_view name) override {
    std::lock_guard lock(mu_);
    return GetModelLocked(name);
  }

  Result<std::vector<RegisteredModel>> ListModels() override {
    std::lock_guard lock(mu_);
    std::vector<std::string> names;
    {
      Stmt s(db_, "SELECT name FROM models ORDER BY name");
      if (!s.prepared()) return Err("listing models");
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) names.push_back(s.Text(0));
      if (rc != SQLITE_DONE) return Err("listing models");
    }
    std::vector<RegisteredModel> out;
    for (const auto& n : names) {
      ASSIGN_OR_RETURN(auto m, GetModelLocked(n));
      out.push_back(std::move(m));
    }
    return out;
  }

  Result<int64_t> InsertVersion(const ModelVersion& v, int64_t now) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    auto r = InsertVersionLocked(v, now);
    if (!r.ok()) {
      (void)ExecRaw("ROLLBACK");
      return r;
    }
    if (Status s = ExecRaw("COMMIT"); !s.ok()) {
      (void)ExecRaw("ROLLBACK");
      return s;
    }
    return r;
  }

  Result<ModelVersion> GetVersion(std::string_view name, int64_t version) override {
    std::lock_guard lock(mu_);
    return GetVersionLocked(name, version);
  }

  Result<std::vector<ModelVersion>> ListVersions(std::string_view name) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(GetModelLocked(name).status());
    ASSIGN_OR_RETURN(auto ids, Ints("SELECT version FROM versions WHERE model = ? ORDER BY version",
                                    {std::string(name)}));
    std::vector<ModelVersion> out;
    for (int64_t id : ids) {
      ASSIGN_OR_RETURN(auto v, GetVersionLocked(name, id));
      out.push_back(std::move(v));
    }
    return out;
  }

  Status SetAlias(std::string_view name, std::string_view alias, int64_t version,
                  std::optional<int64_t> expected, int64_t now) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    Status s = [&]() -> Status {
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(
          Exec("INSERT INTO aliases (model, alias, version) VALUES (?, ?, ?) "
               "ON CONFLICT (model, alias) DO UPDATE SET version = excluded.version",
               {std::string(name), std::string(alias), version}));
      return Exec("UPDATE models SET updated = ? WHERE name = ?", {now, std::string(name)});
    }();
    return Finish(std::move(s));
  }

  Status DeleteAlias(std::string_view name, std::string_view alias, std::optional<int64_t> expected,
                     int64_t now) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    Status s = [&]() -> Status {
      ASSIGN_OR_RETURN(auto cur, Ints("SELECT version FROM aliases WHERE model = ? AND alias = ?",
                                      {std::string(name), std::string(alias)}));
      if (cur.empty()) {
        return NotFound("model '" + std::string(name) + "' has no alias '" + std::string(alias) +
                        "'");
      }
      RETURN_IF_ERROR(CheckExpected(name, alias, expected));
      RETURN_IF_ERROR(Exec("DELETE FROM aliases WHERE model = ? AND alias = ?",
                           {std::string(name), std::string(alias)}));
      return Exec("UPDATE models SET updated = ? WHERE name = ?", {now, std::string(name)});
    }();
    return Finish(std::move(s));
  }

  Result<int64_t> ResolveAlias(std::string_view name, std::string_view alias) override {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(auto cur, Ints("SELECT version FROM aliases WHERE model = ? AND alias = ?",
                                    {std::string(name), std::string(alias)}));
    if (cur.empty()) {
      return NotFound("model '" + std::string(name) + "' has no alias '" + std::string(alias) +
                      "'; see `gantry registry show " + std::string(name) + "`");
    }
    return cur[0];
  }

  Status SetTag(std::string_view name, int64_t version, std::string_view key,
                std::string_view value, bool erase, int64_t now) override {
    std::lock_guard lock(mu_);
    if (version == 0) {
      RETURN_IF_ERROR(GetModelLocked(name).status());
    } else {
      RETURN_IF_ERROR(GetVersionLocked(name, version).status());
    }
    if (erase) {
      RETURN_IF_ERROR(Exec("DELETE FROM tags WHERE model = ? AND version = ? AND key = ?",
                           {std::string(name), version, std::string(key)}));
    } else {
      RETURN_IF_ERROR(
          Exec("INSERT INTO tags (model, version, key, value) VALUES (?, ?, ?, ?) "
               "ON CONFLICT (model, version, key) DO UPDATE SET value = excluded.value",
               {std::string(name), version, std::string(key), std::string(value)}));
    }
    return Exec("UPDATE models SET updated = ? WHERE name = ?", {now, std::string(name)});
  }

  Status SetDescription(std::string_view name, int64_t version, std::string_view text,
                        int64_t now) override {
    std::lock_guard lock(mu_);
    if (version == 0) {
      RETURN_IF_ERROR(GetModelLocked(name).status());
      return Exec("UPDATE models SET description = ?, updated = ? WHERE name = ?",
                  {std::string(text), now, std::string(name)});
    }
    RETURN_IF_ERROR(GetVersionLocked(name, version).status());
    return Exec("UPDATE versions SET description = ? WHERE model = ? AND version = ?",
                {std::string(text), std::string(name), version});
  }

  Status AddSignature(std::string_view name, int64_t version, std::string_view keyid,
                      std::string_view bundle, int64_t now) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(GetVersionLocked(name, version).status());
    return Exec(
        "INSERT INTO signatures (model, version, keyid, bundle, created) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (model, version, keyid) DO UPDATE SET bundle = excluded.bundle, "
        "created = excluded.created",
        {std::string(name), version, std::string(keyid), std::string(bundle), now});
  }

  Result<std::map<std::string, std::string>> Signatures(std::string_view name,
                                                        int64_t version) override {
    std::lock_guard lock(mu_);
    Stmt s(db_,
           "SELECT keyid, bundle FROM signatures WHERE model = ? AND version = ? ORDER BY keyid");
    if (!s.prepared()) return Err("reading signatures");
    s.Bind({std::string(name), version});
    std::map<std::string, std::string> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out[s.Text(0)] = s.Text(1);
    if (rc != SQLITE_DONE) return Err("reading signatures");
    return out;
  }

  Status AddTrustedKey(const TrustedKey& key, int64_t now) override {
    std::lock_guard lock(mu_);
    return Exec(
        "INSERT INTO trusted_keys (keyid, algorithm, public_pem, comment, created) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (keyid) DO UPDATE SET comment = excluded.comment",
        {key.keyid, key.algorithm, key.public_pem, key.comment, now});
  }

  Status RemoveTrustedKey(std::string_view keyid) override {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(
        auto n, Ints("SELECT COUNT(*) FROM trusted_keys WHERE keyid = ?", {std::string(keyid)}));
    if (n.empty() || n[0] == 0) return NotFound("no trusted key with id " + std::string(keyid));
    return Exec("DELETE FROM trusted_keys WHERE keyid = ?", {std::string(keyid)});
  }

  Result<std::vector<TrustedKey>> TrustedKeys() override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT keyid, algorithm, public_pem, comment FROM trusted_keys ORDER BY keyid");
    if (!s.prepared()) return Err("reading trusted keys");
    std::vector<TrustedKey> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW)
      out.push_back({s.Text(0), s.Text(1), s.Text(2), s.Text(3)});
    if (rc != SQLITE_DONE) return Err("reading trusted keys");
    return out;
  }

  Result<std::string> GetSetting(std::string_view key) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT value FROM settings WHERE key = ?");
    if (!s.prepared()) return Err("reading settings");
    s.Bind({std::string(key)});
    int rc = s.Step();
    if (rc == SQLITE_ROW) return s.Text(0);
    if (rc != SQLITE_DONE) return Err("reading settings");
    return std::string();
  }

  Status SetSetting(std::string_view key, std::string_view value) override {
    std::lock_guard lock(mu_);
    return Exec(
        "INSERT INTO settings (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        {std::string(key), std::string(value)});
  }

  Result<std::vector<ModelVersion>> Search(const SearchQuery& q) override {
    std::lock_guard lock(mu_);
    std::string sql = "SELECT v.model, v.version FROM versions v WHERE 1 = 1";
    std::vector<Arg> args;
    auto like = [](const std::string& s) {
      std::string out = "%";
      for (char c : s) {
        if (c == '%' || c == '_' || c == '\\') out += '\\';
        out += c;
      }
      return out + "%";
    };
    if (!q.name_like.empty()) {
      sql += " AND v.model LIKE ? ESCAPE '\\'";
      args.push_back(like(q.name_like));
    }
    if (!q.source_like.empty()) {
      sql += " AND v.source LIKE ? ESCAPE '\\'";
      args.push_back(like(q.source_like));
    }
    if (!q.run_id.empty()) {
      sql += " AND v.run_id = ?";
      args.push_back(q.run_id);
    }
    if (!q.code_commit.empty()) {
      sql += " AND v.code_commit = ?";
      args.push_back(q.code_commit);
    }
    if (!q.parent.empty()) {
      sql += " AND v.parent = ?";
      args.push_back(q.parent);
    }
    if (!q.dataset_digest.empty()) {
      sql +=
          " AND EXISTS (SELECT 1 FROM version_datasets d WHERE d.model = v.model AND "
          "d.version = v.version AND d.digest = ?)";
      args.push_back(q.dataset_digest);
    }
    if (!q.alias.empty()) {
      sql +=
          " AND EXISTS (SELECT 1 FROM aliases a WHERE a.model = v.model AND "
          "a.version = v.version AND a.alias = ?)";
      args.push_back(q.alias);
    }
    if (!q.tag_key.empty()) {
      // A version matches its own tags or its model's tags (version 0).
      sql +=
          " AND EXISTS (SELECT 1 FROM tags t WHERE t.model = v.model AND "
          "(t.version = v.version OR t.version = 0) AND t.key = ?";
      args.push_back(q.tag_key);
      if (!q.tag_value.empty()) {
        sql += " AND t.value = ?";
        args.push_back(q.tag_value);
      }
      sql += ")";
    }
    sql += " ORDER BY v.model, v.version DESC LIMIT ?";
    args.push_back(static_cast<int64_t>(q.limit > 0 && q.limit <= 1000 ? q.limit : 100));
    std::vector<std::pair<std::string, int64_t>> keys;
    {
      Stmt s(db_, sql.c_str());
      if (!s.prepared()) return Err("searching");
      s.Bind(args);
      int rc;
      while ((rc = s.Step()) == SQLITE_ROW) keys.emplace_back(s.Text(0), s.Int(1));
      if (rc != SQLITE_DONE) return Err("searching");
    }
    std::vector<ModelVersion> out;
    for (const auto& [m, v] : keys) {
      ASSIGN_OR_RETURN(auto mv, GetVersionLocked(m, v));
      out.push_back(std::move(mv));
    }
    return out;
  }

  Result<ModelVersion> DeleteVersion(std::string_view name, int64_t version, int64_t now) override {
    if (version < 1) return InvalidArgument("version must be >= 1");
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    ModelVersion v;
    Status s = [&]() -> Status {
      ASSIGN_OR_RETURN(v, GetVersionLocked(name, version));
      for (const char* table : kVersionTables) {
        std::string sql = std::string("DELETE FROM ") + table + " WHERE model = ? AND version = ?";
        RETURN_IF_ERROR(Exec(sql.c_str(), {std::string(name), version}));
      }
      return Exec("UPDATE models SET updated = ? WHERE name = ?", {now, std::string(name)});
    }();
    RETURN_IF_ERROR(Finish(std::move(s)));
    return v;
  }

  Result<std::vector<ModelVersion>> DeleteModel(std::string_view name) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(ExecRaw("BEGIN IMMEDIATE"));
    std::vector<ModelVersion> out;
    Status s = [&]() -> Status {
      ASSIGN_OR_RETURN(auto next,
                       Ints("SELECT next_version FROM models WHERE name = ?", {std::string(name)}));
      if (next.empty()) {
        return NotFound("no registered model named '" + std::string(name) +
                        "'; see `gantry registry list`");
      }
      ASSIGN_OR_RETURN(auto ids, Ints("SELECT version FROM versions WHERE model = ? ORDER BY "
                                      "version",
                                      {std::string(name)}));
      for (int64_t id : ids) {
        ASSIGN_OR_RETURN(auto v, GetVersionLocked(name, id));
        out.push_back(std::move(v));
      }
      for (const char* table : kVersionTables) {
        std::string sql = std::string("DELETE FROM ") + table + " WHERE model = ?";
        RETURN_IF_ERROR(Exec(sql.c_str(), {std::string(name)}));
      }
      RETURN_IF_ERROR(Exec("DELETE FROM models WHERE name = ?", {std::string(name)}));
      return Exec(
          "INSERT INTO settings (key, value) VALUES (?, ?) "
          "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
          {NextVersionKey(name), std::to_string(next[0])});
    }();
    RETURN_IF_ERROR(Finish(std::move(s)));
    return out;
  }

  Result<bool> DigestReferenced(std::string_view sha256) override {
    std::lock_guard lock(mu_);
    ASSIGN_OR_RETURN(auto n, Ints("SELECT (SELECT COUNT(*) FROM version_files WHERE sha256 = ?) + "
                                  "(SELECT COUNT(*) FROM versions WHERE manifest_sha256 = ?)",
                                  {std::string(sha256), std::string(sha256)}));
    return !n.empty() && n[0] > 0;
  }

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
  Status Exec(const char* sql, const std::vector<Arg>& args) {
    Stmt s(db_, sql);
    if (!s.prepared()) return Err("preparing a statement");
    s.Bind(args);
    int rc = s.Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      if (rc == SQLITE_BUSY) return Unavailable("registry database " + path_ + " is busy");
      return Err("writing");
    }
    return Status::Ok();
  }
  Result<std::vector<int64_t>> Ints(const char* sql, const std::vector<Arg>& args) {
    Stmt s(db_, sql);
    if (!s.prepared()) return Err("preparing a query");
    s.Bind(args);
    std::vector<int64_t> out;
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) out.push_back(s.Int(0));
    if (rc != SQLITE_DONE) return Err("querying");
    return out;
  }
  Status Finish(Status s) {
    if (!s.ok()) {
      (void)ExecRaw("ROLLBACK");
      return s;
    }
    if (Status c = ExecRaw("COMMIT"); !c.ok()) {
      (void)ExecRaw("ROLLBACK");
      return c;
    }
    return Status::Ok();
  }
  Status CheckExpected(std::string_view name, std::string_view alias,
                       std::optional<int64_t> expected) {
    if (!expected) return Status::Ok();
    ASSIGN_OR_RETURN(auto cur, Ints("SELECT version FROM aliases WHERE model = ? AND alias = ?",
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
    {
      Stmt s(db_, "SELECT name, description, created, updated FROM models WHERE name = ?");
      if (!s.prepared()) return Err("reading a model");
      s.Bind({std::string(name)});
      int rc = s.Step();
      if (rc == SQLITE_DONE) {
        return NotFound("no registered model named '" + std::string(name) +
                        "'; see `gantry registry list`");
      }
      if (rc != SQLITE_ROW) return Err("reading a model");
      m.name = s.Text(0);
      m.description = s.Text(1);
      m.created_unix = s.Int(2);
      m.updated_unix = s.Int(3);
    }
    ASSIGN_OR_RETURN(auto latest, Ints("SELECT MAX(version) FROM versions WHERE model = ?",
                                       {std::string(name)}));
    m.latest_version = latest.empty() ? 0 : latest[0];
    {
      Stmt s(db_, "SELECT key, value FROM tags WHERE model = ? AND version = 0 ORDER BY key");
      s.Bind({std::string(name)});
      while (s.Step() == SQLITE_ROW) m.tags[s.Text(0)] = s.Text(1);
    }
    {
      Stmt s(db_, "SELECT alias, version FROM aliases WHERE model = ? ORDER BY alias");
      s.Bind({std::string(name)});
      while (s.Step() == SQLITE_ROW) m.aliases[s.Text(0)] = s.Int(1);
    }
    return m;
  }

  Result<int64_t> InsertVersionLocked(const ModelVersion& v, int64_t now) {
    ASSIGN_OR_RETURN(auto next, Ints("SELECT next_version FROM models WHERE name = ?", {v.model}));
    if (next.empty()) return NotFound("no registered model named '" + v.model + "'");
    int64_t n = next[0];
    RETURN_IF_ERROR(Exec("UPDATE models SET next_version = ?, updated = ? WHERE name = ?",
                         {n + 1, now, v.model}));
    const auto& l = v.lineage;
    RETURN_IF_ERROR(
        Exec("INSERT INTO versions (model, version, description, created, manifest_sha256, "
             "subject_sha256, total_bytes, source, run_id, code_commit, parent, metrics) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             {v.model, n, v.description, now, v.manifest_sha256, v.subject_sha256,
              static_cast<int64_t>(v.total_bytes), l.source, l.run_id, l.code_commit, l.parent,
              l.metrics.dump()}));
    for (const auto& f : v.files) {
      RETURN_IF_ERROR(Exec(
          "INSERT INTO version_files (model, version, path, sha256, size) VALUES (?, ?, ?, ?, ?)",
          {v.model, n, f.path, f.sha256, static_cast<int64_t>(f.size)}));
    }
    for (const auto& d : l.dataset_digests) {
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
    ModelVersion v;
    {
      Stmt s(db_,
             "SELECT model, version, description, created, manifest_sha256, subject_sha256, "
             "total_bytes, source, run_id, code_commit, parent, metrics FROM versions "
             "WHERE model = ? AND version = ?");
      if (!s.prepared()) return Err("reading a version");
      s.Bind({std::string(name), version});
      int rc = s.Step();
      if (rc == SQLITE_DONE) {
        return NotFound("model '" + std::string(name) + "' has no version " +
                        std::to_string(version) + "; see `gantry registry versions " +
                        std::string(name) + "`");
      }
      if (rc != SQLITE_ROW) return Err("reading a version");
      v.model = s.Text(0);
      v.version = s.Int(1);
      v.description = s.Text(2);
      v.created_unix = s.Int(3);
      v.manifest_sha256 = s.Text(4);
      v.subject_sha256 = s.Text(5);
      v.total_bytes = static_cast<uint64_t>(s.Int(6));
      v.lineage.source = s.Text(7);
      v.lineage.run_id = s.Text(8);
      v.lineage.code_commit = s.Text(9);
      v.lineage.parent = s.Text(10);
      Json metrics = Json::parse(s.Text(11), nullptr, false);
      v.lineage.metrics = metrics.is_discarded() ? Json::object() : metrics;
    }
    Arg m = std::string(name);
    {
      Stmt s(db_,
             "SELECT path, sha256, size FROM version_files WHERE model = ? AND version = ? "
             "ORDER BY path");
      s.Bind({m, version});
      while (s.Step() == SQLITE_ROW) {
        v.files.push_back({s.Text(0), s.Text(1), static_cast<uint64_t>(s.Int(2))});
      }
    }
    {
      Stmt s(db_,
             "SELECT digest FROM version_datasets WHERE model = ? AND version = ? ORDER BY digest");
      s.Bind({m, version});
      while (s.Step() == SQLITE_ROW) v.lineage.dataset_digests.push_back(s.Text(0));
    }
    {
      Stmt s(db_, "SELECT key, value FROM tags WHERE model = ? AND version = ? ORDER BY key");
      s.Bind({m, version});
      while (s.Step() == SQLITE_ROW) v.tags[s.Text(0)] = s.Text(1);
    }
    {
      Stmt s(db_, "SELECT alias FROM aliases WHERE model = ? AND version = ? ORDER BY alias");
      s.Bind({m, version});
      while (s.Step() == SQLITE_ROW) v.aliases.push_back(s.Text(0));
    }
    {
      Stmt s(db_, "SELECT keyid FROM signatures WHERE model = ? AND version = ? ORDER BY keyid");
      s.Bind({m, version});
      while (s.Step() == SQLITE_ROW) v.signer_keyids.push_back(s.Text(0));
    }
    return v;
  }

  std::mutex mu_;
  sqlite3* db_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<MetadataStore>> OpenSqliteMetadataStore(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return IoError("opening registry database " + path + " (" + msg + ")", EIO);
  }
  auto store = std::make_unique<SqliteStore>(db, path);
  if (Status s = store->Init(); !s.ok()) {
    return s.WithContext("initialising registry database " + path +
                         " (is it a Gantry registry database?)");
  }
  return std::unique_ptr<MetadataStore>(std::move(store));
}

}  // namespace gantry::registry
