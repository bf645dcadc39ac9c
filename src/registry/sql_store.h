// The metadata store written once over SQL (sql_store.cc), and what a database
// driver supplies to it: SQLite (sqlite_store.cc) and PostgreSQL
// (postgres_store.cc) differ only in how a statement is run, how a transaction
// begins, and whether rows a writer reads must be locked explicitly.
// Internal to src/registry.
//
// Every statement is written with '?' placeholders (a driver for $n, such as
// PostgreSQL's, rewrites them with NumberPlaceholders) and plain SQL both
// databases accept (BIGINT, INSERT ... ON CONFLICT, no database functions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gantry/registry/registry.h"

namespace gantry::registry::store {

using SqlArg = std::variant<int64_t, std::string>;

// What a statement returned: every cell as text (NULL as ""), and how many
// rows it inserted, updated or deleted.
struct SqlRows {
  std::vector<std::vector<std::string>> rows;
  int64_t changed = 0;

  size_t size() const { return rows.size(); }
  bool empty() const { return rows.empty(); }
  const std::string& Text(size_t row, size_t col) const { return rows[row][col]; }
  // The cell as an integer (0 for NULL or text that is not one).
  int64_t Int(size_t row, size_t col) const;
};

enum class TxKind {
  kRead,   // one consistent snapshot, no writes
  kWrite,  // may write; rows read under LockRows() stay locked until the end
};

// One connection to one database. Not thread-safe: the store serializes calls.
// Errors name the database (never a password) and say what to do.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // Runs one statement with `args` bound to its '?' placeholders in order.
  virtual Result<SqlRows> Run(std::string_view sql, const std::vector<SqlArg>& args) = 0;
  virtual Status Begin(TxKind kind) = 0;
  virtual Status Commit() = 0;
  // Best effort; after a failed statement or commit.
  virtual void Rollback() = 0;
  // Appended to a writer's SELECT of a models row to lock it for the rest of
  // the transaction (" FOR UPDATE"), or "" where a write transaction already
  // excludes other writers (SQLite's BEGIN IMMEDIATE).
  virtual std::string_view LockRows() const = 0;
};

// A thread-safe MetadataStore over `conn` (one call at a time on it).
std::unique_ptr<MetadataStore> NewSqlStore(std::unique_ptr<SqlConnection> conn);

// "a = ? AND b = ?" -> "a = $1 AND b = $2"; a '?' inside a quoted literal
// stays.
std::string NumberPlaceholders(std::string_view sql);

}  // namespace gantry::registry::store
