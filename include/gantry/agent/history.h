// Local history of the agent's Signals: SQLite (WAL) at a fixed resolution
// with a retention period. Feeds dynamic thresholds, the dashboard, idle
// detection and `gantry report utilization`.
//
// Storage: one row per (series, time bucket). Appending two values in the same
// bucket (resolution) keeps the last. Rows older than `retention` are deleted
// by Compact(), which Append calls at most once a minute.
//
// Thread-safety: all methods may be called from several threads (one
// connection guarded by a mutex; readers are short).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/agent/snapshot.h"
#include "gantry/core/status.h"

namespace gantry::agent {

struct HistoryOptions {
  std::chrono::seconds resolution{15};
  std::chrono::seconds retention{std::chrono::hours(24 * 30)};
};

struct Point {
  int64_t time_ms = 0;
  double value = 0;
};

struct SeriesPoints {
  std::string name;
  metrics::Labels labels;
  std::vector<Point> points;  // ascending by time
};

class History {
 public:
  // `path` ":memory:" keeps everything in memory (tests). Creates the file
  // and its schema; InvalidArgument for a zero resolution or retention,
  // Internal naming the path when SQLite cannot open it.
  static Result<std::unique_ptr<History>> Open(const std::string& path,
                                               const HistoryOptions& options = {});
  virtual ~History() = default;

  virtual Status Append(int64_t time_ms, const std::vector<Signal>& signals) = 0;

  // Every series called `name` whose labels include all of `match`, with its
  // points in [from_ms, to_ms].
  virtual Result<std::vector<SeriesPoints>> Query(std::string_view name,
                                                  const metrics::Labels& match, int64_t from_ms,
                                                  int64_t to_ms) = 0;

  // The distinct signal names stored (sorted).
  virtual Result<std::vector<std::string>> Names() = 0;

  // Deletes rows older than now_ms - retention.
  virtual Status Compact(int64_t now_ms) = 0;

  virtual const HistoryOptions& options() const = 0;
};

}  // namespace gantry::agent
