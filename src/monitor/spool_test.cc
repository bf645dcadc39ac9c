// The spool's at-least-once contract: what was acknowledged is not read
// again after a restart, what was not (a crash between the send and the
// cursor write) is read again, and the bound drops the oldest records, counted.
#include "gantry/monitor/spool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/temp_dir.h"

namespace gantry::monitor {
namespace {

std::vector<std::string> Records(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back("{\"id\":" + std::to_string(i) + "}");
  return out;
}

std::unique_ptr<Spool> OpenOrDie(const SpoolOptions& o) {
  Result<std::unique_ptr<Spool>> s = Spool::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

class SpoolTest : public ::testing::Test {
 protected:
  SpoolOptions Options() {
    SpoolOptions o;
    o.dir = dir_.Path("spool");
    o.max_bytes = 1 << 20;
    o.segment_bytes = 4096;
    return o;
  }
  ::gantry::testing::TempDir dir_{"gantry-spool-test"};
};

TEST_F(SpoolTest, PeekReturnsRecordsInOrderUnderTheBoundAndAckConsumesThem) {
  auto spool = OpenOrDie(Options());
  ASSERT_NE(spool, nullptr);
  ASSERT_TRUE(spool->Append(Records(0, 10)).ok());
  EXPECT_EQ(spool->pending_records(), 10u);

  // {"id":0} is 8 bytes: "[" + 3 records + 2 commas + "]" = 28 bytes.
  Result<SpoolBatch> b = spool->Peek(28);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->records, Records(0, 3));
  ASSERT_EQ(b->ends.size(), 3u);
  EXPECT_EQ(b->ends.back(), b->end);
  // Peek does not consume.
  EXPECT_EQ(spool->Peek(28)->records, Records(0, 3));
  ASSERT_TRUE(spool->Ack(b->end).ok());
  EXPECT_EQ(spool->pending_records(), 7u);
  EXPECT_EQ(spool->Peek(1 << 20)->records, Records(3, 10));

  // A record longer than the bound still comes alone rather than never.
  EXPECT_EQ(spool->Peek(1)->records, Records(3, 4));
}

TEST_F(SpoolTest, RestartResumesFromTheCursor) {
  {
    auto spool = OpenOrDie(Options());
    ASSERT_TRUE(spool->Append(Records(0, 100)).ok());
    Result<SpoolBatch> b = spool->Peek(1 << 20, 40);
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(spool->Ack(b->end).ok());
  }
  auto spool = OpenOrDie(Options());
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->pending_records(), 60u);
  Result<SpoolBatch> b = spool->Peek(1 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->records, Records(40, 100)) << "the acknowledged 40 are not read again";
  // Appends after a restart go after what was there.
  ASSERT_TRUE(spool->Append(Records(100, 105)).ok());
  ASSERT_TRUE(spool->Ack(b->end).ok());
  EXPECT_EQ(spool->Peek(1 << 20)->records, Records(100, 105));
}

TEST_F(SpoolTest, ACrashBetweenSendAndCursorWriteResendsOnlyThatBatch) {
  std::vector<std::string> sent;
  {
    auto spool = OpenOrDie(Options());
    ASSERT_TRUE(spool->Append(Records(0, 30)).ok());
    for (int i = 0; i < 2; ++i) {  // two batches sent and acknowledged
      Result<SpoolBatch> b = spool->Peek(1 << 20, 10);
      sent.insert(sent.end(), b->records.begin(), b->records.end());
      ASSERT_TRUE(spool->Ack(b->end).ok());
    }
    // The third is sent, and the process dies before Ack.
    Result<SpoolBatch> b = spool->Peek(1 << 20, 10);
    sent.insert(sent.end(), b->records.begin(), b->records.end());
  }
  auto spool = OpenOrDie(Options());
  Result<SpoolBatch> again = spool->Peek(1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->records, Records(20, 30)) << "only the in-flight batch comes again";
  sent.insert(sent.end(), again->records.begin(), again->records.end());
  ASSERT_TRUE(spool->Ack(again->end).ok());
  EXPECT_EQ(spool->pending_records(), 0u);
  // Every record was sent; the 10 of the lost acknowledgement twice, no other.
  EXPECT_EQ(sent.size(), 40u);
}

TEST_F(SpoolTest, BatchesCrossSegmentsAndSpentSegmentsAreDeleted) {
  SpoolOptions o = Options();
  o.segment_bytes = 100;  // about 10 records a segment
  auto spool = OpenOrDie(o);
  ASSERT_TRUE(spool->Append(Records(0, 10)).ok());
  ASSERT_TRUE(spool->Append(Records(10, 20)).ok());
  ASSERT_TRUE(spool->Append(Records(20, 30)).ok());
  Result<SpoolBatch> b = spool->Peek(1 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->records, Records(0, 30));
  ASSERT_TRUE(spool->Ack(b->end).ok());
  size_t segments = 0;
  for (const auto& e : std::filesystem::directory_iterator(o.dir)) {
    if (e.path().filename().string().starts_with("seg-")) ++segments;
  }
  EXPECT_EQ(segments, 1u) << "only the segment being appended to is left";
  EXPECT_EQ(spool->pending_bytes(), 0u);
}

TEST_F(SpoolTest, AFullSpoolDropsTheOldestAndCountsThem) {
  SpoolOptions o = Options();
  o.segment_bytes = 1000;
  o.max_bytes = 3000;
  o.fsync = false;
  auto spool = OpenOrDie(o);
  // 1000 records of 10-11 bytes: about 11 KB into a 3 KB spool; nothing sent.
  for (int i = 0; i < 1000; i += 10) ASSERT_TRUE(spool->Append(Records(i, i + 10)).ok());
  EXPECT_GT(spool->dropped(), 0u);
  EXPECT_EQ(spool->dropped() + spool->pending_records(), 1000u) << "every record is accounted for";
  EXPECT_LE(spool->pending_bytes(), o.max_bytes + o.segment_bytes);
  // What is left is the newest, in order, ending with the last appended.
  Result<SpoolBatch> b = spool->Peek(1 << 20);
  ASSERT_TRUE(b.ok());
  ASSERT_FALSE(b->records.empty());
  EXPECT_EQ(b->records.back(), "{\"id\":999}");
  EXPECT_EQ(b->records.size(), spool->pending_records());
  EXPECT_EQ(b->records.front(), "{\"id\":" + std::to_string(spool->dropped()) + "}")
      << "the oldest went first";
  // Reopened, the loss is not counted again and the rest is still there.
  uint64_t pending = spool->pending_records();
  spool.reset();
  spool = OpenOrDie(o);
  EXPECT_EQ(spool->pending_records(), pending);
  EXPECT_EQ(spool->dropped(), 0u);
}

TEST_F(SpoolTest, OneLargeAppendIsCutIntoSegmentsSoTheBoundKeepsTheNewest) {
  SpoolOptions o = Options();
  o.segment_bytes = 1000;
  o.max_bytes = 3000;
  o.fsync = false;
  auto spool = OpenOrDie(o);
  ASSERT_TRUE(spool->Append(Records(0, 1000)).ok());  // ~11 KB at once
  EXPECT_GT(spool->pending_records(), 0u) << "not the whole append dropped as one segment";
  EXPECT_EQ(spool->dropped() + spool->pending_records(), 1000u);
  Result<SpoolBatch> b = spool->Peek(1 << 20);
  ASSERT_TRUE(b.ok());
  ASSERT_FALSE(b->records.empty());
  EXPECT_EQ(b->records.back(), "{\"id\":999}");
}

TEST_F(SpoolTest, AnAckOfRecordsTheBoundAlreadyDroppedChangesNothing) {
  SpoolOptions o = Options();
  o.segment_bytes = 100;
  o.max_bytes = 200;
  o.fsync = false;
  auto spool = OpenOrDie(o);
  ASSERT_TRUE(spool->Append(Records(0, 5)).ok());
  Result<SpoolBatch> inflight = spool->Peek(1 << 20);
  ASSERT_TRUE(inflight.ok());
  for (int i = 5; i < 100; i += 5) ASSERT_TRUE(spool->Append(Records(i, i + 5)).ok());
  SpoolPosition before = spool->cursor();
  uint64_t pending = spool->pending_records();
  ASSERT_TRUE(spool->Ack(inflight->end).ok());
  EXPECT_EQ(spool->cursor(), before);
  EXPECT_EQ(spool->pending_records(), pending);
}

TEST_F(SpoolTest, ATornLastLineIsCutOffAtOpen) {
  SpoolOptions o = Options();
  {
    auto spool = OpenOrDie(o);
    ASSERT_TRUE(spool->Append(Records(0, 3)).ok());
  }
  std::string seg;
  for (const auto& e : std::filesystem::directory_iterator(o.dir)) {
    if (e.path().filename().string().starts_with("seg-")) seg = e.path().string();
  }
  ASSERT_FALSE(seg.empty());
  std::ofstream(seg, std::ios::app) << "{\"id\":3";  // a crash mid-append
  auto spool = OpenOrDie(o);
  ASSERT_NE(spool, nullptr);
  EXPECT_EQ(spool->pending_records(), 3u);
  ASSERT_TRUE(spool->Append(Records(4, 5)).ok());
  EXPECT_EQ(spool->Peek(1 << 20)->records,
            (std::vector<std::string>{"{\"id\":0}", "{\"id\":1}", "{\"id\":2}", "{\"id\":4}"}));
}

TEST_F(SpoolTest, RefusesRecordsWithNewlinesAndBadBoundsAndBadCursors) {
  SpoolOptions o = Options();
  auto spool = OpenOrDie(o);
  std::vector<std::string> bad = {"{\"a\":1}", "{\"a\":\n2}"};
  Status s = spool->Append(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spool->pending_records(), 0u) << "nothing of a refused append is written";
  spool.reset();

  SpoolOptions tight = o;
  tight.max_bytes = tight.segment_bytes;
  Result<std::unique_ptr<Spool>> t = Spool::Open(tight);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("segment_bytes"), std::string::npos);

  std::ofstream(o.dir + "/cursor") << "garbage";
  Result<std::unique_ptr<Spool>> c = Spool::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find(o.dir + "/cursor"), std::string::npos);
}

}  // namespace
}  // namespace gantry::monitor
