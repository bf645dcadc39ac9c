// SQLite persistence of quota usage (internal to the limiter).
//
// Table gateway_quota_usage(subject, period, calls, tokens), primary key (subject, period).
// The database file may be shared with other modules of the process (the API key store),
// so the connection uses WAL and a busy timeout and only touches its own table.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/gateway/limits.h"

struct sqlite3;

namespace gantry::gateway {

class QuotaStore {
 public:
  // Opens (creating if needed) `path`; creates the table.
  static Result<std::unique_ptr<QuotaStore>> Open(const std::string& path);
  ~QuotaStore();

  // Rows whose subject starts with `subject_prefix` ("" = all).
  Result<std::vector<UsageRow>> Query(std::string_view subject_prefix) const;
  // Upserts rows (values replace the stored ones) in one transaction.
  Status Save(const std::vector<UsageRow>& rows);

 private:
  QuotaStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  mutable std::mutex mu_;
  sqlite3* db_;
  std::string path_;
};

}  // namespace gantry::gateway
