// SQLite implementation of History (see gantry/agent/history.h).
//
// Schema:
//   series(id INTEGER PRIMARY KEY, key TEXT UNIQUE, name TEXT, labels TEXT)  labels: JSON object
//   points(series_id, bucket, value) PRIMARY KEY (series_id, bucket), WITHOUT ROWID
// `bucket` is the bucket's start in Unix ms (time_ms rounded down to the
// resolution), so a file written with one resolution stays readable with
// another. One transaction per Append; statements are prepared once.
#include "gantry/agent/history.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "gantry/core/json.h"

namespace gantry::agent {
namespace {

struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

// Compact() runs from Append at most this often (in the appended time base).
constexpr int64_t kCompactEveryMs = 60'000;

std::string LabelsJson(const metrics::Labels& labels) {
  Json j = Json::object();
  for (const auto& [k, v] : labels) j[k] = v;
  return j.dump();
}

metrics::Labels LabelsFromJson(std::string_view text) {
  metrics::Labels out;
  auto j = ParseJson(text, "history labels");
  if (!j.ok() || !j->is_object()) return out;
  for (const auto& [k, v] : j->items()) {
    if (v.is_string()) out.emplace_back(k, v.get<std::string>());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Includes(const metrics::Labels& labels, const metrics::Labels& match) {
  for (const auto& m : match) {
    bool found = false;
    for (const auto& l : labels) {
      if (l.first == m.first) {
        found = l.second == m.second;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

std::string ColumnText(sqlite3_stmt* s, int col) {
  const unsigned char* t = sqlite3_column_text(s, col);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, col))
           : std::string();
}

class SqliteHistory final : public History {
 public:
  SqliteHistory(std::string path, HistoryOptions options)
      : path_(std::move(path)), options_(options) {}

  ~SqliteHistory() override {
    // Statements must be finalized before the connection closes.
    upsert_point_.reset();
    insert_series_.reset();
    select_series_id_.reset();
    if (db_) sqlite3_close_v2(db_);
  }

  Status Init() {
    int rc =
        sqlite3_open_v2(path_.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      return Internal("cannot open agent history " + path_ + ": " + msg +
                      "; check that the directory exists and is writable");
    }
    sqlite3_busy_timeout(db_, 5000);
    // WAL: the dashboard and report readers do not block the collector's writes.
    RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
    RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS series ("
             " id INTEGER PRIMARY KEY,"
             " key TEXT NOT NULL UNIQUE,"
             " name TEXT NOT NULL,"
             " labels TEXT NOT NULL)"));
    RETURN_IF_ERROR(Exec("CREATE INDEX IF NOT EXISTS series_by_name ON series(name)"));
    RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS points ("
             " series_id INTEGER NOT NULL,"
             " bucket INTEGER NOT NULL,"
             " value REAL NOT NULL,"
             " PRIMARY KEY (series_id, bucket)) WITHOUT ROWID"));
    RETURN_IF_ERROR(Exec("CREATE INDEX IF NOT EXISTS points_by_bucket ON points(bucket)"));
    ASSIGN_OR_RETURN(
        upsert_point_,
        Prepare("INSERT INTO points(series_id, bucket, value) VALUES(?1, ?2, ?3) "
                "ON CONFLICT(series_id, bucket) DO UPDATE SET value = excluded.value"));
    ASSIGN_OR_RETURN(insert_series_,
                     Prepare("INSERT OR IGNORE INTO series(key, name, labels) VALUES(?1, ?2, ?3)"));
    ASSIGN_OR_RETURN(select_series_id_, Prepare("SELECT id FROM series WHERE key = ?1"));
    return Status::Ok();
  }

  Status Append(int64_t time_ms, const std::vector<Signal>& signals) override {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t res_ms = ResolutionMs();
    // Floor division so negative times (never expected) still bucket consistently.
    int64_t bucket = time_ms / res_ms * res_ms;
    if (time_ms < 0 && bucket != time_ms) bucket -= res_ms;

    RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status st = AppendLocked(bucket, signals);
    if (!st.ok()) {
      (void)Exec("ROLLBACK");
      // Ids cached during a rolled-back transaction may not exist.
      ids_.clear();
      return st;
    }
    RETURN_IF_ERROR(Exec("COMMIT"));

    if (last_compact_ms_ == std::numeric_limits<int64_t>::min() ||
        time_ms - last_compact_ms_ >= kCompactEveryMs) {
      last_compact_ms_ = time_ms;
      RETURN_IF_ERROR(CompactLocked(time_ms));
    }
    return Status::Ok();
  }

  Result<std::vector<SeriesPoints>> Query(std::string_view name, const metrics::Labels& match,
                                          int64_t from_ms, int64_t to_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<SeriesPoints> out;
    std::vector<int64_t> ids;
    {
      ASSIGN_OR_RETURN(StmtPtr s,
                       Prepare("SELECT id, labels FROM series WHERE name = ?1 ORDER BY key"));
      sqlite3_bind_text(s.get(), 1, name.data(), static_cast<int>(name.size()), SQLITE_TRANSIENT);
      int rc;
      while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
        metrics::Labels labels = LabelsFromJson(ColumnText(s.get(), 1));
        if (!Includes(labels, match)) continue;
        ids.push_back(sqlite3_column_int64(s.get(), 0));
        out.push_back(SeriesPoints{std::string(name), std::move(labels), {}});
      }
      if (rc != SQLITE_DONE) return Error("listing series '" + std::string(name) + "'");
    }
    if (ids.empty()) return out;
    ASSIGN_OR_RETURN(StmtPtr s, Prepare("SELECT bucket, value FROM points WHERE series_id = ?1 "
                                        "AND bucket >= ?2 AND bucket <= ?3 ORDER BY bucket"));
    for (size_t i = 0; i < ids.size(); ++i) {
      sqlite3_reset(s.get());
      sqlite3_bind_int64(s.get(), 1, ids[i]);
      sqlite3_bind_int64(s.get(), 2, from_ms);
      sqlite3_bind_int64(s.get(), 3, to_ms);
      int rc;
      while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
        out[i].points.push_back(
            Point{sqlite3_column_int64(s.get(), 0), sqlite3_column_double(s.get(), 1)});
      }
      if (rc != SQLITE_DONE) return Error("reading points of '" + std::string(name) + "'");
    }
    // A series with no points in the range is still reported: callers can tell
    // "known but silent" from "never seen" by the empty point list.
    return out;
  }

  Result<std::vector<std::string>> Names() override {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(StmtPtr s, Prepare("SELECT DISTINCT name FROM series ORDER BY name"));
    std::vector<std::string> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(ColumnText(s.get(), 0));
    if (rc != SQLITE_DONE) return Error("listing signal names");
    return out;
  }

  Status Compact(int64_t now_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    return CompactLocked(now_ms);
  }

  const HistoryOptions& options() const override { return options_; }

 private:
  int64_t ResolutionMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(options_.resolution).count();
  }

  Status Error(std::string_view what) const {
    return Internal(std::string(what) + " in agent history " + path_ + ": " + sqlite3_errmsg(db_));
  }

  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Internal(std::string("SQL \"") + sql + "\" failed on agent history " + path_ + ": " +
                      msg);
    }
    return Status::Ok();
  }

  Result<StmtPtr> Prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &s, nullptr) != SQLITE_OK) return Error("prepare");
    return StmtPtr(s);
  }

  Result<int64_t> SeriesId(const Signal& sig) {
    std::string key = SeriesKey(sig.name, sig.labels);
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    sqlite3_stmt* ins = insert_series_.get();
    sqlite3_reset(ins);
    std::string labels = LabelsJson(sig.labels);
    sqlite3_bind_text(ins, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(ins, 2, sig.name.data(), static_cast<int>(sig.name.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(ins, 3, labels.data(), static_cast<int>(labels.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(ins) != SQLITE_DONE) return Error("adding series " + key);
    sqlite3_stmt* sel = select_series_id_.get();
    sqlite3_reset(sel);
    sqlite3_bind_text(sel, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(sel) != SQLITE_ROW) return Error("looking up series " + key);
    int64_t id = sqlite3_column_int64(sel, 0);
    sqlite3_reset(sel);
    ids_.emplace(std::move(key), id);
    return id;
  }

  Status AppendLocked(int64_t bucket, const std::vector<Signal>& signals) {
    sqlite3_stmt* up = upsert_point_.get();
    for (const Signal& sig : signals) {
      // SQLite stores NaN as NULL; a missing value is better than a fake one.
      if (!std::isfinite(sig.value)) continue;
      ASSIGN_OR_RETURN(int64_t id, SeriesId(sig));
      sqlite3_reset(up);
      sqlite3_bind_int64(up, 1, id);
      sqlite3_bind_int64(up, 2, bucket);
      sqlite3_bind_double(up, 3, sig.value);
      if (sqlite3_step(up) != SQLITE_DONE)
        return Error("storing " + SeriesKey(sig.name, sig.labels));
    }
    return Status::Ok();
  }

  Status CompactLocked(int64_t now_ms) {
    const int64_t keep_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.retention).count();
    const int64_t cutoff = now_ms - keep_ms;
    ASSIGN_OR_RETURN(StmtPtr del, Prepare("DELETE FROM points WHERE bucket < ?1"));
    sqlite3_bind_int64(del.get(), 1, cutoff);
    if (sqlite3_step(del.get()) != SQLITE_DONE) return Error("deleting old points");
    if (sqlite3_changes(db_) > 0) {
      // Series left without points are gone too (a NIC or GPU that disappeared).
      RETURN_IF_ERROR(
          Exec("DELETE FROM series WHERE NOT EXISTS "
               "(SELECT 1 FROM points WHERE points.series_id = series.id)"));
      if (sqlite3_changes(db_) > 0) ids_.clear();
    }
    return Status::Ok();
  }

  std::mutex mu_;
  std::string path_;
  HistoryOptions options_;
  sqlite3* db_ = nullptr;
  StmtPtr upsert_point_;
  StmtPtr insert_series_;
  StmtPtr select_series_id_;
  std::unordered_map<std::string, int64_t> ids_;  // series key -> id
  int64_t last_compact_ms_ = std::numeric_limits<int64_t>::min();
};

}  // namespace

Result<std::unique_ptr<History>> History::Open(const std::string& path,
                                               const HistoryOptions& options) {
  if (options.resolution.count() <= 0) {
    return InvalidArgument("agent history resolution must be positive, got " +
                           std::to_string(options.resolution.count()) + "s");
  }
  if (options.retention.count() <= 0) {
    return InvalidArgument("agent history retention must be positive, got " +
                           std::to_string(options.retention.count()) + "s");
  }
  if (path.empty()) {
    return InvalidArgument("agent history path is empty; pass a file or \":memory:\"");
  }
  auto h = std::make_unique<SqliteHistory>(path, options);
  RETURN_IF_ERROR(h->Init());
  return std::unique_ptr<History>(std::move(h));
}

}  // namespace gantry::agent
