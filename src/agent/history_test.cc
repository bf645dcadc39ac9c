#include "gantry/agent/history.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace gantry::agent {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

std::unique_ptr<History> OpenMem(HistoryOptions o = {}) {
  auto h = History::Open(":memory:", o);
  EXPECT_TRUE(h.ok()) << h.status().ToString();
  return std::move(h).value();
}

TEST(AgentHistory, RejectsZeroResolutionAndRetention) {
  HistoryOptions o;
  o.resolution = seconds(0);
  auto h = History::Open(":memory:", o);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("resolution"), std::string::npos);
  o = {};
  o.retention = seconds(0);
  h = History::Open(":memory:", o);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("retention"), std::string::npos);
}

TEST(AgentHistory, UnopenablePathIsInternalNamingThePath) {
  auto h = History::Open("/nonexistent-dir-gantry/sub/history.db");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kInternal);
  EXPECT_NE(h.status().message().find("/nonexistent-dir-gantry/sub/history.db"), std::string::npos);
}

TEST(AgentHistory, AppendAndQueryByNameAndLabels) {
  auto h = OpenMem();
  ASSERT_TRUE(h->Append(1'005'000, {{"cpu_utilization", {}, 10},
                                    {"gpu_utilization", {{"gpu", "0"}}, 50},
                                    {"gpu_utilization", {{"gpu", "1"}}, 60}})
                  .ok());
  ASSERT_TRUE(h->Append(1'020'000, {{"cpu_utilization", {}, 20},
                                    {"gpu_utilization", {{"gpu", "0"}}, 55},
                                    {"gpu_utilization", {{"gpu", "1"}}, 65}})
                  .ok());
  auto all = h->Query("gpu_utilization", {}, 0, 2'000'000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].labels, (metrics::Labels{{"gpu", "0"}}));
  ASSERT_EQ((*all)[0].points.size(), 2u);
  EXPECT_EQ((*all)[0].points[0].time_ms, 1'005'000);  // a multiple of 15 s: the bucket start
  EXPECT_DOUBLE_EQ((*all)[0].points[1].value, 55);

  auto one = h->Query("gpu_utilization", {{"gpu", "1"}}, 0, 2'000'000);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_DOUBLE_EQ((*one)[0].points.back().value, 65);

  auto none = h->Query("gpu_utilization", {{"gpu", "7"}}, 0, 2'000'000);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  auto range = h->Query("cpu_utilization", {}, 1'010'000, 1'030'000);
  ASSERT_TRUE(range.ok());
  ASSERT_EQ(range->size(), 1u);
  ASSERT_EQ((*range)[0].points.size(), 1u);
  EXPECT_DOUBLE_EQ((*range)[0].points[0].value, 20);

  auto names = h->Names();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"cpu_utilization", "gpu_utilization"}));
}

TEST(AgentHistory, SameBucketKeepsTheLastValue) {
  HistoryOptions o;
  o.resolution = seconds(60);
  auto h = OpenMem(o);
  ASSERT_TRUE(h->Append(120'000, {{"load1", {}, 1}}).ok());
  ASSERT_TRUE(h->Append(150'000, {{"load1", {}, 2}}).ok());
  ASSERT_TRUE(h->Append(179'999, {{"load1", {}, 3}}).ok());
  ASSERT_TRUE(h->Append(180'000, {{"load1", {}, 4}}).ok());
  auto q = h->Query("load1", {}, 0, 1'000'000);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  ASSERT_EQ((*q)[0].points.size(), 2u);
  EXPECT_EQ((*q)[0].points[0].time_ms, 120'000);
  EXPECT_DOUBLE_EQ((*q)[0].points[0].value, 3);
  EXPECT_EQ((*q)[0].points[1].time_ms, 180'000);
  EXPECT_DOUBLE_EQ((*q)[0].points[1].value, 4);
}

TEST(AgentHistory, NonFiniteValuesAreNotStored) {
  auto h = OpenMem();
  ASSERT_TRUE(h->Append(0, {{"load1", {}, std::nan("")}, {"load1", {{"x", "y"}}, 1}}).ok());
  auto q = h->Query("load1", {}, -1, 1);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].labels, (metrics::Labels{{"x", "y"}}));
}

TEST(AgentHistory, CompactDropsOldRowsAndEmptySeries) {
  HistoryOptions o;
  o.resolution = seconds(10);
  o.retention = hours(1);
  auto h = OpenMem(o);
  const int64_t hour = 3'600'000;
  ASSERT_TRUE(h->Append(0, {{"old_only", {}, 1}, {"kept", {}, 1}}).ok());
  ASSERT_TRUE(h->Append(hour / 2, {{"kept", {}, 2}}).ok());
  ASSERT_TRUE(h->Compact(hour + 10'000).ok());
  auto names = h->Names();
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"kept"}));
  auto q = h->Query("kept", {}, 0, 10 * hour);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  ASSERT_EQ((*q)[0].points.size(), 1u);
  EXPECT_DOUBLE_EQ((*q)[0].points[0].value, 2);
  // The series can come back after its row was deleted (cached ids dropped).
  ASSERT_TRUE(h->Append(hour + 20'000, {{"old_only", {}, 5}}).ok());
  auto back = h->Query("old_only", {}, 0, 10 * hour);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_DOUBLE_EQ((*back)[0].points[0].value, 5);
}

TEST(AgentHistory, AppendCompactsOnItsOwn) {
  HistoryOptions o;
  o.resolution = seconds(1);
  o.retention = seconds(120);
  auto h = OpenMem(o);
  for (int64_t t = 0; t <= 600'000; t += 1000) {
    ASSERT_TRUE(h->Append(t, {{"load1", {}, static_cast<double>(t)}}).ok());
  }
  auto q = h->Query("load1", {}, 0, 600'000);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  // Retention is 120 s and compaction runs at most once a minute: between 121
  // and 181 points stay.
  EXPECT_GE((*q)[0].points.size(), 121u);
  EXPECT_LE((*q)[0].points.size(), 181u);
  EXPECT_GE((*q)[0].points.front().time_ms, 600'000 - 180'000);
}

TEST(AgentHistory, FileIsWalAndPersistsAcrossOpens) {
  std::string dir = ::testing::TempDir() + "/gantry_history_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::string path = dir + "/history.db";
  {
    auto h = History::Open(path);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(
        (*h)->Append(1'000, {{"network_receive_bytes_per_second", {{"device", "eth0"}}, 7}}).ok());
  }
  {
    auto h = History::Open(path);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(
        (*h)->Append(20'000, {{"network_receive_bytes_per_second", {{"device", "eth0"}}, 8}}).ok());
    auto q = (*h)->Query("network_receive_bytes_per_second", {{"device", "eth0"}}, 0, 100'000);
    ASSERT_TRUE(q.ok());
    ASSERT_EQ(q->size(), 1u);
    ASSERT_EQ((*q)[0].points.size(), 2u);
    EXPECT_DOUBLE_EQ((*q)[0].points[0].value, 7);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), "wal");
  sqlite3_finalize(s);
  sqlite3_close(db);
  std::filesystem::remove_all(dir);
}

TEST(AgentHistory, ConcurrentAppendAndQuery) {
  auto h = OpenMem();
  std::thread writer([&] {
    for (int i = 0; i < 300; ++i) {
      ASSERT_TRUE(h->Append(i * 15'000, {{"load1", {}, static_cast<double>(i)}}).ok());
    }
  });
  for (int i = 0; i < 100; ++i) {
    auto q = h->Query("load1", {}, 0, 300 * 15'000);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
  }
  writer.join();
  auto q = h->Query("load1", {}, 0, 300 * 15'000);
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ((*q)[0].points.size(), 300u);
}

}  // namespace
}  // namespace gantry::agent
