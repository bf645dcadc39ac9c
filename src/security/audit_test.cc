#include "gantry/security/audit.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "gantry/security/crypto.h"

namespace gantry::security {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class AuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path().string() + "/gantry-audit-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto kp = GenerateEd25519();
    ASSERT_TRUE(kp.ok());
    keys_ = *kp;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  AuditOptions Options(const std::string& name, bool sign = true) const {
    AuditOptions o;
    o.path = Path(name);
    if (sign) o.signing_key_pem = keys_.private_pem;
    o.checkpoint_every = 10;
    o.checkpoint_interval_s = 0;  // deterministic: checkpoints by count and at Close only
    o.fsync_checkpoints = false;
    return o;
  }

  // Writes `n` records and closes the log.
  void WriteLog(const AuditOptions& o, int n, int first = 0) {
    auto log = AuditLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    for (int i = first; i < first + n; ++i) {
      (*log)->Append(R"({"time":)" + std::to_string(1000 + i) + R"(,"request_id":"r)" +
                     std::to_string(i) + R"(","status":200})");
    }
    ASSERT_TRUE((*log)->Close().ok());
  }

  static std::vector<std::string> ReadLines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) out.push_back(line);
    return out;
  }
  static void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
    std::ofstream out(path, std::ios::trunc);
    for (const auto& l : lines) out << l << "\n";
  }
  // Copies the log and its sidecar to `name` with the log's lines replaced.
  std::string Tampered(const std::string& from, const std::string& name,
                       const std::vector<std::string>& lines) const {
    std::string to = Path(name);
    WriteLines(to, lines);
    fs::copy_file(Path(from) + ".checkpoints", to + ".checkpoints",
                  fs::copy_options::overwrite_existing);
    return to;
  }

  AuditVerifyReport Verify(const std::string& path, bool with_key = true) const {
    auto r = VerifyAuditLog(path, with_key ? keys_.public_pem : "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : AuditVerifyReport{};
  }

  static bool IsCheckpoint(const std::string& line) {
    return line.rfind(R"({"type":"checkpoint")", 0) == 0;
  }

  std::string dir_;
  Ed25519KeyPair keys_;
};

TEST_F(AuditTest, TenThousandRecordsFromFourThreadsVerify) {
  AuditOptions o = Options("big.jsonl");
  o.checkpoint_every = 1000;
  o.fsync_checkpoints = true;
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2500; ++i) {
        (*log)->Append(R"({"thread":)" + std::to_string(t) + R"(,"i":)" + std::to_string(i) +
                       R"(,"path":"/v1/chat/completions","status":200})");
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE((*log)->Flush().ok());
  EXPECT_EQ((*log)->written(), 10000u);
  EXPECT_EQ((*log)->dropped(), 0u);
  std::string head = (*log)->head_hex();
  ASSERT_TRUE((*log)->Close().ok());

  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 10000u);
  EXPECT_EQ(r.checkpoints, 10u);  // exactly every 1000, the final one coincides with Close
  EXPECT_EQ(r.first_bad_line, 0u);

  // Every record is a JSON object with the caller's fields plus seq/prev/hash,
  // and the last hash is the head.
  auto lines = ReadLines(o.path);
  std::vector<int> per_thread(4, 0);
  std::string last_hash;
  for (const auto& l : lines) {
    Json j = Json::parse(l);
    if (j.contains("seq")) {
      ++per_thread[j["thread"].get<int>()];
      last_hash = j["hash"];
    }
  }
  EXPECT_EQ(per_thread, (std::vector<int>{2500, 2500, 2500, 2500}));
  EXPECT_EQ(last_hash, head);
  EXPECT_EQ(ReadLines(o.path + ".checkpoints").size(), 10u);
}

TEST_F(AuditTest, RecordFormatIsByteExact) {
  AuditOptions o = Options("fmt.jsonl");
  WriteLog(o, 2);
  auto lines = ReadLines(o.path);
  ASSERT_EQ(lines.size(), 3u);  // 2 records + final checkpoint
  const std::string zeros(64, '0');
  std::string expect_prefix =
      R"({"seq":1,"prev":")" + zeros + R"(","time":1000,"request_id":"r0","status":200)";
  ASSERT_EQ(lines[0].substr(0, expect_prefix.size()), expect_prefix);
  std::string hash = Sha256Hex(expect_prefix);
  EXPECT_EQ(lines[0], expect_prefix + R"(,"hash":")" + hash + R"("})");
  EXPECT_EQ(lines[1].substr(0, 17 + 64), R"({"seq":2,"prev":")" + hash);
  ASSERT_TRUE(IsCheckpoint(lines[2]));
  Json cp = Json::parse(lines[2]);
  EXPECT_EQ(cp["count"], 2);
  EXPECT_EQ(cp["head"], Json::parse(lines[1])["hash"]);
  EXPECT_EQ(cp["sig"].get<std::string>().size(), 86u);  // 64 bytes base64url
  auto v = Ed25519Verifier::FromPublicPem(keys_.public_pem);
  EXPECT_EQ(cp["key_id"], v->KeyId());
}

TEST_F(AuditTest, DetectsAnEditedByte) {
  AuditOptions o = Options("edit.jsonl");
  WriteLog(o, 50);
  auto lines = ReadLines(o.path);
  ASSERT_TRUE(Verify(o.path).ok);
  // Line 17 is record 16 (a checkpoint follows every 10 records).
  ASSERT_FALSE(IsCheckpoint(lines[16]));
  auto edited = lines;
  size_t pos = edited[16].find("\"status\":200");
  ASSERT_NE(pos, std::string::npos);
  edited[16][pos + 9] = '5';  // 200 -> 500
  AuditVerifyReport r = Verify(Tampered("edit.jsonl", "edit2.jsonl", edited));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 17u);
  EXPECT_EQ(r.first_bad_seq, 16u);
  EXPECT_NE(r.reason.find("hash"), std::string::npos) << r.reason;
}

TEST_F(AuditTest, DetectsSwappedLines) {
  AuditOptions o = Options("swap.jsonl");
  WriteLog(o, 50);
  auto lines = ReadLines(o.path);
  std::swap(lines[24], lines[25]);  // records 23 and 24 (lines 25, 26)
  AuditVerifyReport r = Verify(Tampered("swap.jsonl", "swap2.jsonl", lines));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 25u);
  EXPECT_EQ(r.first_bad_seq, 23u);
}

TEST_F(AuditTest, DetectsADeletedLine) {
  AuditOptions o = Options("del.jsonl");
  WriteLog(o, 50);
  auto lines = ReadLines(o.path);
  lines.erase(lines.begin() + 30);  // line 31 = record 29
  AuditVerifyReport r = Verify(Tampered("del.jsonl", "del2.jsonl", lines));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 31u);
  EXPECT_EQ(r.first_bad_seq, 29u);
}

TEST_F(AuditTest, DetectsATruncatedTail) {
  AuditOptions o = Options("trunc.jsonl");
  WriteLog(o, 50);
  auto lines = ReadLines(o.path);
  ASSERT_EQ(lines.size(), 55u);  // 50 records + 5 checkpoints
  // Cut the last 7 lines: the chain itself stays valid, only the sidecar knows.
  lines.resize(48);
  AuditVerifyReport r = Verify(Tampered("trunc.jsonl", "trunc2.jsonl", lines));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 49u);
  EXPECT_EQ(r.first_bad_seq, 45u);  // the log ends at record 44
  EXPECT_NE(r.reason.find("truncated"), std::string::npos) << r.reason;

  // Without the sidecar the truncation cannot be proven, and verify says so.
  fs::remove(Path("trunc2.jsonl") + ".checkpoints");
  r = Verify(Path("trunc2.jsonl"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("sidecar"), std::string::npos) << r.reason;
}

TEST_F(AuditTest, DetectsAForgedCheckpoint) {
  AuditOptions o = Options("forge.jsonl");
  WriteLog(o, 50);
  auto lines = ReadLines(o.path);
  ASSERT_TRUE(IsCheckpoint(lines[21]));  // line 22: checkpoint after record 20
  // ordered_json keeps the member order, as a careful forger would.
  auto cp = nlohmann::ordered_json::parse(lines[21]);
  std::string sig = *Base64UrlDecode(cp["sig"].get<std::string>());
  sig[5] ^= 0x40;
  cp["sig"] = Base64UrlEncode(sig);
  auto forged = lines;
  forged[21] = cp.dump();
  AuditVerifyReport r = Verify(Tampered("forge.jsonl", "forge2.jsonl", forged));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 22u);
  EXPECT_EQ(r.first_bad_seq, 21u);
  EXPECT_NE(r.reason.find("signature"), std::string::npos) << r.reason;

  // A checkpoint signed by another key is rejected too.
  auto other = GenerateEd25519();
  ASSERT_TRUE(other.ok());
  auto bad_key = VerifyAuditLog(o.path, other->public_pem);
  ASSERT_TRUE(bad_key.ok());
  EXPECT_FALSE(bad_key->ok);
  EXPECT_EQ(bad_key->first_bad_line, 0u);  // the sidecar is checked first
  EXPECT_NE(bad_key->reason.find("signature"), std::string::npos);

  // A checkpoint whose count does not match is caught even without a key.
  cp = nlohmann::ordered_json::parse(lines[21]);
  cp["count"] = 19;
  forged = lines;
  forged[21] = cp.dump();
  r = Verify(Tampered("forge.jsonl", "forge3.jsonl", forged), /*with_key=*/false);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 22u);
}

TEST_F(AuditTest, DetectsARechainedRewriteThroughTheSidecar) {
  // An attacker who edits record 5 and recomputes every later hash (and the
  // unsigned in-log checkpoints) still disagrees with the sidecar.
  AuditOptions o = Options("rechain.jsonl", /*sign=*/false);
  WriteLog(o, 30);
  auto lines = ReadLines(o.path);
  std::string prev(64, '0');
  uint64_t count = 0;
  for (auto& l : lines) {
    if (IsCheckpoint(l)) {
      Json cp = Json::parse(l);
      cp["head"] = prev;
      l = R"({"type":"checkpoint","count":)" + std::to_string(count) + R"(,"head":")" + prev +
          R"(","time_ms":)" + std::to_string(cp["time_ms"].get<int64_t>()) +
          R"(,"key_id":"","sig":""})";
      continue;
    }
    ++count;
    size_t body_start = l.find(",", l.find("\"prev\":")) + 1;
    std::string body = l.substr(body_start, l.size() - 75 - body_start);
    if (count == 5) body = R"("time":1004,"request_id":"forged","status":200)";
    std::string hashed =
        R"({"seq":)" + std::to_string(count) + R"(,"prev":")" + prev + "\"," + body;
    prev = Sha256Hex(hashed);
    l = hashed + R"(,"hash":")" + prev + R"("})";
  }
  std::string path = Tampered("rechain.jsonl", "rechain2.jsonl", lines);
  AuditVerifyReport r = Verify(path, /*with_key=*/false);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 10u);  // record 10, the first one the sidecar vouches for
  EXPECT_EQ(r.first_bad_seq, 10u);
  // Sanity: without the sidecar the rewrite is internally consistent.
  fs::remove(path + ".checkpoints");
  WriteLines(path + ".checkpoints", {});
  EXPECT_TRUE(Verify(path, false).ok);
}

TEST_F(AuditTest, ResumeContinuesTheChain) {
  AuditOptions o = Options("resume.jsonl");
  WriteLog(o, 15);
  std::string head1 = ReadLines(o.path + ".checkpoints").size() > 0
                          ? Json::parse(ReadLines(o.path + ".checkpoints").back())["head"]
                          : "";
  {
    auto log = AuditLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_EQ((*log)->head_hex(), head1);
    (*log)->Append(R"({"after":"restart"})");
    ASSERT_TRUE((*log)->Close().ok());
  }
  WriteLog(o, 4, 100);
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 20u);
  auto lines = ReadLines(o.path);
  for (const auto& l : lines) {
    if (l.find("\"after\":\"restart\"") != std::string::npos) {
      Json j = Json::parse(l);
      EXPECT_EQ(j["seq"], 16);
      EXPECT_EQ(j["prev"], head1);
    }
  }
}

TEST_F(AuditTest, ResumeAfterACrashWithoutCheckpoint) {
  AuditOptions o = Options("crash.jsonl");
  WriteLog(o, 5);
  // Drop the final checkpoint (as if the process died before writing it).
  auto lines = ReadLines(o.path);
  ASSERT_TRUE(IsCheckpoint(lines.back()));
  lines.pop_back();
  WriteLines(o.path, lines);
  fs::remove(o.path + ".checkpoints");
  WriteLog(o, 3, 10);
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 8u);
}

TEST_F(AuditTest, OpenRefusesABrokenTail) {
  AuditOptions o = Options("broken.jsonl");
  WriteLog(o, 12);
  auto lines = ReadLines(o.path);
  // Edit the last record (line 13; line 14 is the final checkpoint).
  auto edited = lines;
  edited[12].replace(edited[12].find("r11"), 3, "r99");
  WriteLines(o.path, edited);
  auto log = AuditLog::Open(o);
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(log.status().message().find("broken.jsonl"), std::string::npos);
  EXPECT_NE(log.status().message().find("gantry audit verify"), std::string::npos);

  // A torn last line.
  WriteLines(o.path, lines);
  {
    std::ofstream out(o.path, std::ios::app);
    out << R"({"seq":13,"prev":")";
  }
  log = AuditLog::Open(o);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("incomplete"), std::string::npos);
  AuditVerifyReport r = Verify(o.path);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 15u);
}

TEST_F(AuditTest, InvalidRecordsAreKeptAsMarkers) {
  AuditOptions o = Options("invalid.jsonl");
  {
    auto log = AuditLog::Open(o);
    ASSERT_TRUE(log.ok());
    (*log)->Append("not json");
    (*log)->Append("[1,2]");
    (*log)->Append(R"({"seq":5,"x":1})");         // reserved name
    (*log)->Append("{\"a\":\n1,\r\n\"b\":2}\n");  // valid, with raw newlines
    (*log)->Append("{}");
    (*log)->Append("  {\"nested\":{\"seq\":1,\"hash\":\"x\"}}  ");
    (*log)->Append(std::string("{\"bad\":\"\xff\"}"));  // invalid UTF-8
    (*log)->Append(std::string("{}\0{\"x\":1}", 10));   // NUL: not one JSON text
    (*log)->Append("{\"s\\u0065q\":1}");                // "seq" spelled with an escape
    (*log)->Append("{\"k\\u0031\":1}");                 // an escaped name that is fine
    ASSERT_TRUE((*log)->Close().ok());
  }
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 10u);
  auto lines = ReadLines(o.path);
  ASSERT_EQ(lines.size(), 11u);
  std::vector<Json> j;
  for (const auto& l : lines) j.push_back(Json::parse(l));
  EXPECT_EQ(j[0]["type"], "invalid_record");
  EXPECT_EQ(j[0]["raw"], "not json");
  EXPECT_EQ(j[1]["type"], "invalid_record");
  EXPECT_EQ(j[2]["type"], "invalid_record");
  EXPECT_EQ(j[2]["seq"], 3);
  EXPECT_EQ(j[3]["a"], 1);
  EXPECT_EQ(j[3]["b"], 2);
  EXPECT_EQ(j[4].size(), 3u);  // seq, prev, hash
  EXPECT_EQ(j[5]["nested"]["seq"], 1);
  EXPECT_EQ(j[6]["type"], "invalid_record");
  EXPECT_EQ(j[7]["type"], "invalid_record");
  EXPECT_EQ(j[7]["raw"].get<std::string>().size(), 10u);
  EXPECT_EQ(j[8]["type"], "invalid_record");
  EXPECT_EQ(j[8]["seq"], 9);
  EXPECT_EQ(j[9]["k1"], 1);
}

TEST_F(AuditTest, DropsAreCountedAndRecordedAsGaps) {
  AuditOptions o = Options("gap.jsonl");
  o.max_queue = 2;
  o.checkpoint_every = 0;
  const int kAppended = 20000;
  uint64_t dropped = 0;
  {
    auto log = AuditLog::Open(o);
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < kAppended; ++i) (*log)->Append(R"({"i":)" + std::to_string(i) + "}");
    ASSERT_TRUE((*log)->Close().ok());
    dropped = (*log)->dropped();
    // After Close nothing is written, only counted.
    (*log)->Append("{}");
    EXPECT_EQ((*log)->dropped(), dropped + 1);
  }
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  uint64_t kept = 0, gap_total = 0;
  for (const auto& l : ReadLines(o.path)) {
    Json j = Json::parse(l);
    if (j.contains("i")) ++kept;
    if (j.value("type", "") == "gap") gap_total += j["dropped"].get<uint64_t>();
  }
  // Whatever the timing, every record is either in the log or in a gap record.
  EXPECT_EQ(kept + dropped, static_cast<uint64_t>(kAppended));
  EXPECT_EQ(gap_total, dropped);
}

TEST_F(AuditTest, FlushMakesEverythingVerifiableWhileOpen) {
  AuditOptions o = Options("flush.jsonl");
  o.checkpoint_every = 1000;
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 7; ++i) (*log)->Append(R"({"i":)" + std::to_string(i) + "}");
  ASSERT_TRUE((*log)->Flush().ok());
  auto lines = ReadLines(o.path);
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_TRUE(IsCheckpoint(lines.back()));
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 7u);
  // A second Flush with nothing new adds no checkpoint.
  ASSERT_TRUE((*log)->Flush().ok());
  EXPECT_EQ(ReadLines(o.path).size(), 8u);
  ASSERT_TRUE((*log)->Close().ok());
  EXPECT_EQ(ReadLines(o.path).size(), 8u);
  EXPECT_TRUE((*log)->Close().ok());  // idempotent
  EXPECT_TRUE((*log)->Flush().ok());
}

// Group commit: the writer lingers for batch_delay_s after the first waiting
// record, unless batch_records are waiting (written at once) or a Flush asks.
// on_written shows each write() as the writer makes it; the first one is held
// until released, so that records appended meanwhile are waiting when the
// writer turns to the queue again.
TEST_F(AuditTest, GroupCommitWritesFullBatchesAtOnceAndFlushSkipsTheDelay) {
  AuditOptions o = Options("group.jsonl");
  o.checkpoint_every = 0;
  o.checkpoint_interval_s = 0;
  o.batch_delay_s = 60;  // longer than the test: only a full batch or a Flush writes
  o.batch_records = 5;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> writes;
  bool released = false;
  o.on_written = [&](std::string_view lines) {
    std::unique_lock<std::mutex> lock(mu);
    writes.emplace_back(lines);
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
  };
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 5; ++i) (*log)->Append(R"({"i":)" + std::to_string(i) + "}");
  {
    // A full batch is written without waiting for the delay (the test would
    // otherwise wait for 60 s and fail here).
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return !writes.empty(); }));
  }
  // Two records, fewer than a batch, arrive while the writer is busy.
  (*log)->Append(R"({"i":5})");
  (*log)->Append(R"({"i":6})");
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  // The Flush skips the delay: it returns with the two records written in
  // one write together with its checkpoint (that the writer lingers at all is
  // PartialBatchIsWrittenNoEarlierThanTheDelay).
  ASSERT_TRUE((*log)->Flush().ok());
  std::vector<std::vector<std::string>> split;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const std::string& w : writes) {
      std::vector<std::string> lines;
      std::istringstream in(w);
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      split.push_back(std::move(lines));
    }
  }
  ASSERT_EQ(split.size(), 2u);
  ASSERT_EQ(split[0].size(), 5u);  // the full batch, in one write
  for (const std::string& l : split[0]) EXPECT_FALSE(IsCheckpoint(l)) << l;
  ASSERT_EQ(split[1].size(), 3u);
  EXPECT_NE(split[1][0].find(R"("i":5)"), std::string::npos) << split[1][0];
  EXPECT_NE(split[1][1].find(R"("i":6)"), std::string::npos) << split[1][1];
  EXPECT_TRUE(IsCheckpoint(split[1][2]));
  auto all = ReadLines(o.path);
  ASSERT_EQ(all.size(), 8u);  // 7 records and the flush's checkpoint
  AuditVerifyReport r = Verify(o.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 7u);
  ASSERT_TRUE((*log)->Close().ok());
}

// A partial batch is written batch_delay_s after the writer saw its first
// record, so never earlier than that after the Append (a slow machine only
// makes the write later: this lower bound holds however loaded it is).
TEST_F(AuditTest, PartialBatchIsWrittenNoEarlierThanTheDelay) {
  AuditOptions o = Options("linger.jsonl");
  o.checkpoint_every = 0;
  o.checkpoint_interval_s = 0;
  o.batch_delay_s = 0.3;
  o.batch_records = 1000;
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::chrono::steady_clock::time_point> written_at;
  o.on_written = [&](std::string_view) {
    std::lock_guard<std::mutex> lock(mu);
    if (!written_at) written_at = std::chrono::steady_clock::now();
    cv.notify_all();
  };
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  const auto appended = std::chrono::steady_clock::now();
  (*log)->Append(R"({"i":0})");
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return written_at.has_value(); }))
        << "the record was never written";
    EXPECT_GE(*written_at - appended, std::chrono::milliseconds(300))
        << "a partial batch was written before batch_delay_s";
  }
  ASSERT_TRUE((*log)->Close().ok());
  EXPECT_EQ(ReadLines(o.path).size(), 2u);  // the record and Close's checkpoint
}

TEST_F(AuditTest, BatchDelayOutOfRangeIsRefused) {
  for (double bad : {-0.001, 61.0, std::nan("")}) {
    AuditOptions o = Options("delay.jsonl");
    o.batch_delay_s = bad;
    auto log = AuditLog::Open(o);
    ASSERT_FALSE(log.ok()) << bad;
    EXPECT_EQ(log.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(log.status().message().find("batch_delay_s"), std::string::npos);
  }
}

TEST_F(AuditTest, IntervalCheckpointAppearsWithoutFlush) {
  AuditOptions o = Options("interval.jsonl");
  o.checkpoint_every = 0;
  o.checkpoint_interval_s = 0.05;
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  (*log)->Append(R"({"i":1})");
  bool seen = false;
  for (int i = 0; i < 400 && !seen; ++i) {  // up to 20 s on a loaded machine
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    seen = ReadLines(o.path + ".checkpoints").size() == 1;
  }
  EXPECT_TRUE(seen);
}

TEST_F(AuditTest, UnsignedLogs) {
  AuditOptions o = Options("unsigned.jsonl", /*sign=*/false);
  WriteLog(o, 12);
  EXPECT_TRUE(Verify(o.path, /*with_key=*/false).ok);
  AuditVerifyReport r = Verify(o.path, /*with_key=*/true);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find("unsigned"), std::string::npos) << r.reason;
}

TEST_F(AuditTest, OpenAndVerifyErrors) {
  AuditOptions o = Options("errors.jsonl");
  o.signing_key_pem = keys_.public_pem;
  EXPECT_EQ(AuditLog::Open(o).status().code(), StatusCode::kInvalidArgument);
  o = Options("errors.jsonl");
  auto first = AuditLog::Open(o);
  ASSERT_TRUE(first.ok());
  auto second = AuditLog::Open(o);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  o.path = Path("no-such-dir/x.jsonl");
  EXPECT_EQ(AuditLog::Open(o).status().code(), StatusCode::kIoError);

  EXPECT_EQ(VerifyAuditLog(Path("missing.jsonl"), "").status().code(), StatusCode::kIoError);
  EXPECT_EQ(VerifyAuditLog(Path("errors.jsonl"), "not a key").status().code(),
            StatusCode::kInvalidArgument);
  // An empty log verifies (nothing to check).
  AuditVerifyReport r = Verify(Path("errors.jsonl"));
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 0u);
  // Garbage lines are named.
  WriteLines(Path("garbage.jsonl"), {"hello"});
  r = Verify(Path("garbage.jsonl"));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first_bad_line, 1u);
  EXPECT_NE(r.reason.find("neither"), std::string::npos) << r.reason;
  // A reordered checkpoint (valid JSON, keys sorted) still verifies.
  WriteLog(Options("sorted.jsonl"), 3);
  auto lines = ReadLines(Path("sorted.jsonl"));
  lines.back() = Json::parse(lines.back()).dump();
  WriteLines(Path("sorted.jsonl"), lines);
  EXPECT_TRUE(Verify(Path("sorted.jsonl")).ok);
}

// A record the caller vouches for is chained exactly as Append would chain it:
// the same lines, the same hashes, interleaved with checked records.
TEST_F(AuditTest, AppendWellFormedChainsTheSameLinesAsAppend) {
  AuditOptions checked = Options("checked.jsonl");
  AuditOptions trusted = Options("trusted.jsonl");
  auto a = AuditLog::Open(checked);
  auto b = AuditLog::Open(trusted);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 25; ++i) {
    std::string rec = R"({"time_ms":)" + std::to_string(1000 + i) + R"(,"path":"/v1/x\"y\\z",)" +
                      R"("n":[1,2,{"k":null}],"status":200})";
    (*a)->Append(rec);
    if (i % 3 == 0) {
      (*b)->Append(rec);  // checked and trusted records share one chain
    } else {
      (*b)->AppendWellFormed(rec);
    }
  }
  ASSERT_TRUE((*a)->Close().ok());
  ASSERT_TRUE((*b)->Close().ok());
  std::vector<std::string> want, got;
  for (const std::string& l : ReadLines(checked.path)) {
    if (l.starts_with("{\"seq\":")) want.push_back(l);
  }
  for (const std::string& l : ReadLines(trusted.path)) {
    if (l.starts_with("{\"seq\":")) got.push_back(l);
  }
  ASSERT_EQ(want.size(), 25u);
  EXPECT_EQ(got, want);
  AuditVerifyReport r = Verify(trusted.path);
  EXPECT_TRUE(r.ok) << r.reason;
  EXPECT_EQ(r.records, 25u);
}

}  // namespace
}  // namespace gantry::security
