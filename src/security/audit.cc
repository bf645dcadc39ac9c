#include "gantry/security/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "gantry/security/crypto.h"
#include "json_check.h"

namespace gantry::security {

namespace {

using Json = nlohmann::json;

constexpr std::string_view kZeroHash =
    "0000000000000000000000000000000000000000000000000000000000000000";
constexpr std::string_view kRecordPrefix = "{\"seq\":";
constexpr std::string_view kPrevKey = ",\"prev\":\"";
constexpr std::string_view kHashKey = ",\"hash\":\"";
constexpr size_t kHashSuffixLen = 9 + 64 + 2;  // ,"hash":" + hex + "}
// Writer buffers above this are released after use (a normal batch is well
// under 1 MiB: batch_records of a few hundred bytes).
constexpr size_t kKeepBufferBytes = 8 << 20;
// The queue stores each record behind a uint32 length whose top bit says the
// record came through AppendWellFormed; records are bounded below it.
constexpr uint32_t kWellFormedBit = 0x80000000u;
constexpr size_t kMaxRecordBytes = kWellFormedBit - 1;

bool IsLowerHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The signed checkpoint message. Domain-separated so that a checkpoint
// signature can never be replayed as some other Ed25519-signed message.
std::string CheckpointMessage(uint64_t count, std::string_view head, int64_t time_ms) {
  std::string m = "gantry-audit-checkpoint-v1\n";
  m += std::to_string(count);
  m += '\n';
  m.append(head);
  m += '\n';
  m += std::to_string(time_ms);
  m += '\n';
  return m;
}

// A record line split into its parts (views into the line, which has no '\n').
struct RecordLine {
  uint64_t seq = 0;
  std::string_view prev, hash, hashed;
};

bool ParseRecordLine(std::string_view line, RecordLine* out, std::string* why) {
  if (line.substr(0, kRecordPrefix.size()) != kRecordPrefix) {
    *why = "does not start with {\"seq\":";
    return false;
  }
  size_t i = kRecordPrefix.size();
  size_t digits_start = i;
  uint64_t seq = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - digits_start < 19) {
    seq = seq * 10 + static_cast<uint64_t>(line[i] - '0');
    ++i;
  }
  if (i == digits_start || (line[digits_start] == '0')) {
    *why = "seq is not a positive integer";
    return false;
  }
  if (line.substr(i, kPrevKey.size()) != kPrevKey) {
    *why = "no \"prev\" after \"seq\"";
    return false;
  }
  i += kPrevKey.size();
  std::string_view prev = line.substr(i, std::min<size_t>(64, line.size() - i));
  if (!IsLowerHex64(prev) || i + 64 >= line.size() || line[i + 64] != '"') {
    *why = "\"prev\" is not 64 lowercase hex characters";
    return false;
  }
  i += 65;
  if (line.size() < i + kHashSuffixLen) {
    *why = "no \"hash\" at the end of the line";
    return false;
  }
  size_t suffix = line.size() - kHashSuffixLen;
  if (suffix != i && line[i] != ',') {
    *why = "unexpected text after \"prev\"";
    return false;
  }
  std::string_view tail = line.substr(suffix);
  std::string_view hash = tail.substr(kHashKey.size(), 64);
  if (tail.substr(0, kHashKey.size()) != kHashKey || !IsLowerHex64(hash) ||
      tail.substr(kHashKey.size() + 64) != "\"}") {
    *why = "the line does not end with ,\"hash\":\"<64 hex>\"}";
    return false;
  }
  out->seq = seq;
  out->prev = prev;
  out->hash = hash;
  out->hashed = line.substr(0, suffix);
  return true;
}

struct CheckpointLine {
  uint64_t count = 0;
  std::string head;
  int64_t time_ms = 0;
  std::string key_id, sig;
};

bool ParseCheckpointLine(std::string_view line, CheckpointLine* out, std::string* why) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *why = "not valid JSON";
    return false;
  }
  if (auto t = j.find("type"); t == j.end() || *t != "checkpoint") {
    *why = "no \"type\":\"checkpoint\"";
    return false;
  }
  auto get_str = [&](const char* k, std::string* v) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    *v = it->get<std::string>();
    return true;
  };
  auto c = j.find("count");
  auto t = j.find("time_ms");
  if (c == j.end() || !c->is_number_unsigned() || t == j.end() || !t->is_number_integer() ||
      !get_str("head", &out->head) || !get_str("key_id", &out->key_id) ||
      !get_str("sig", &out->sig) || !IsLowerHex64(out->head)) {
    *why = "checkpoint lacks count/head/time_ms/key_id/sig";
    return false;
  }
  out->count = c->get<uint64_t>();
  out->time_ms = t->get<int64_t>();
  return true;
}

// Record lines start with {"seq":; anything else must be a checkpoint (which
// is parsed as JSON, so key order and spacing do not matter there).
bool IsRecordLine(std::string_view line) {
  return line.substr(0, kRecordPrefix.size()) == kRecordPrefix;
}

// Checks the top-level member names of a JSON object without building a DOM:
// the chain's own names (seq, prev, hash) must not be shadowed by the caller.
class ReservedKeyChecker : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    return !(depth_ == 1 && (k == "seq" || k == "prev" || k == "hash"));
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  int depth_ = 0;
};

// Returns the members of a valid JSON object text (outer braces and edge
// whitespace removed, raw CR/LF turned into spaces), or nullopt when the text
// is not one JSON object or uses a reserved top-level name.
// The members of a record object, trimmed, for the chained line: a view into
// `text` when it can be used as is, else a cleaned copy in *scratch. nullopt
// when `text` is not one JSON object.
std::optional<std::string_view> ObjectBody(std::string_view text, std::string* scratch) {
  size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos || text[b] != '{') return std::nullopt;
  // The hand-written checker is several times faster than nlohmann's lexer on
  // the writer thread; names written with escapes (rare) take the full parser
  // so that e.g. "s\u0065q" cannot shadow "seq".
  switch (internal::CheckAuditObject(text)) {
    case internal::ObjectCheck::kInvalid:
      return std::nullopt;
    case internal::ObjectCheck::kValid:
      break;
    case internal::ObjectCheck::kSlowPath: {
      ReservedKeyChecker checker;
      bool ok = false;
      try {
        ok = Json::sax_parse(text, &checker, nlohmann::detail::input_format_t::json,
                             /*strict=*/true);
      } catch (...) {
        ok = false;
      }
      if (!ok) return std::nullopt;
      break;
    }
  }
  size_t e = text.find_last_not_of(" \t\r\n");  // the closing '}'
  std::string_view body = text.substr(b + 1, e - b - 1);
  // In valid JSON raw CR/LF can only be whitespace between tokens; they must
  // not split the record across lines.
  // (Two memchr scans: find_first_of would call memchr once per character.)
  if (std::memchr(body.data(), '\n', body.size()) != nullptr ||
      std::memchr(body.data(), '\r', body.size()) != nullptr) {
    scratch->assign(body);
    for (char& c : *scratch) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    body = *scratch;
  }
  size_t bb = body.find_first_not_of(" \t");
  if (bb == std::string_view::npos) return std::string_view();
  size_t be = body.find_last_not_of(" \t");
  return body.substr(bb, be - bb + 1);
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("writing audit log " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What Open() learns from an existing log's tail.
struct TailState {
  uint64_t seq = 0;
  std::string head = std::string(kZeroHash);
  bool covered = true;  // the last record is covered by a checkpoint after it
};

Result<TailState> ReadTail(int fd, const std::string& path) {
  struct stat st;
  if (fstat(fd, &st) != 0) return IoError("stat " + path, errno);
  TailState out;
  const off_t size = st.st_size;
  if (size == 0) return out;
  const std::string advice =
      "; run `gantry audit verify " + path + "` and move the file aside to start a new log";
  for (off_t window = 64 * 1024;; window *= 4) {
    off_t start = size > window ? size - window : 0;
    std::string buf(static_cast<size_t>(size - start), '\0');
    size_t got = 0;
    while (got < buf.size()) {
      ssize_t n = pread(fd, buf.data() + got, buf.size() - got, start + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("reading audit log " + path, n < 0 ? errno : EIO);
      got += static_cast<size_t>(n);
    }
    if (buf.back() != '\n') {
      return DataLoss("audit log " + path + " ends with an incomplete line (torn write?)" + advice);
    }
    std::optional<CheckpointLine> last_checkpoint;
    size_t end = buf.size() - 1;  // index of the '\n' ending the current line
    for (;;) {
      size_t nl = end == 0 ? std::string::npos : buf.rfind('\n', end - 1);
      size_t line_start = nl == std::string::npos ? 0 : nl + 1;
      if (nl == std::string::npos && start > 0) break;  // partial line: widen the window
      std::string_view line(buf.data() + line_start, end - line_start);
      std::string why;
      if (!IsRecordLine(line)) {
        CheckpointLine cp;
        if (!ParseCheckpointLine(line, &cp, &why)) {
          return DataLoss("audit log " + path + ": last checkpoint is malformed: " + why + advice);
        }
        if (!last_checkpoint) last_checkpoint = cp;
      } else {
        RecordLine rec;
        if (!ParseRecordLine(line, &rec, &why)) {
          return DataLoss("audit log " + path + ": last record is malformed: " + why + advice);
        }
        if (Sha256Hex(rec.hashed) != rec.hash) {
          return DataLoss("audit log " + path + ": last record (seq " + std::to_string(rec.seq) +
                          ") does not match its hash" + advice);
        }
        if (last_checkpoint &&
            (last_checkpoint->count != rec.seq || last_checkpoint->head != rec.hash)) {
          return DataLoss("audit log " + path +
                          ": the last checkpoint does not match the last "
                          "record (seq " +
                          std::to_string(rec.seq) + ")" + advice);
        }
        out.seq = rec.seq;
        out.head = std::string(rec.hash);
        out.covered = last_checkpoint.has_value();
        return out;
      }
      if (line_start == 0) {
        return DataLoss("audit log " + path + " has checkpoints but no records" + advice);
      }
      end = line_start - 1;
    }
    if (start == 0) return DataLoss("audit log " + path + ": cannot find the last record" + advice);
  }
}

}  // namespace

struct AuditLog::Impl {
  AuditOptions opt;
  std::optional<Ed25519Signer> signer;
  std::string key_id;
  int fd = -1;
  int side_fd = -1;
  std::string side_path;

  // Writer-thread state.
  uint64_t seq = 0;
  std::string head;
  uint64_t since_checkpoint = 0;
  std::chrono::steady_clock::time_point last_checkpoint;
  std::vector<std::string> pending_sidecar;

  // Shared state, under mu.
  std::mutex mu;
  std::condition_variable wake;     // writer waits here
  std::condition_variable flushed;  // Flush() waits here
  // Waiting records, each a native-endian uint32 length and the bytes: one
  // buffer that the writer swaps out whole, so an Append is a copy into
  // reused memory (no allocation, no free on another thread's arena).
  std::string queue;
  size_t queue_records = 0;
  uint64_t pending_drops = 0;
  uint64_t flush_requested = 0, flush_done = 0;
  bool stop = false;    // no more appends; writer drains and exits
  bool closed = false;  // Close() has finished
  Status error;         // first write error, sticky

  std::atomic<uint64_t> written{0}, dropped{0};
  mutable std::mutex head_mu;
  std::string head_pub;

  std::thread thread;

  ~Impl() {
    if (fd >= 0) ::close(fd);
    if (side_fd >= 0) ::close(side_fd);
  }

  // Append and AppendWellFormed: queue `record` for the writer, or count it
  // dropped when the queue is full or the log is closed.
  void Enqueue(std::string_view record, bool well_formed);

  void AddRecord(std::string& buf, std::string_view body) {
    size_t start = buf.size();
    buf.append(kRecordPrefix);
    buf += std::to_string(seq + 1);
    buf.append(kPrevKey);
    buf += head;
    buf += '"';
    if (!body.empty()) {
      buf += ',';
      buf.append(body);
    }
    const std::array<uint8_t, 32> digest = Sha256(std::string_view(buf).substr(start));
    buf.append(kHashKey);
    const size_t hex_at = buf.size();
    static constexpr char kDigits[] = "0123456789abcdef";
    for (uint8_t b : digest) {
      buf += kDigits[b >> 4];
      buf += kDigits[b & 15];
    }
    head.assign(buf, hex_at, 64);
    buf += "\"}\n";
    ++seq;
    ++since_checkpoint;
    if (opt.checkpoint_every > 0 && since_checkpoint >= opt.checkpoint_every) {
      AddCheckpoint(buf);
    }
  }

  void AddCheckpoint(std::string& buf) {
    int64_t t = WallMs();
    std::string sig;
    if (signer) {
      auto s = signer->Sign(CheckpointMessage(seq, head, t));
      if (s.ok()) sig = Base64UrlEncode(*s);
    }
    std::string line = "{\"type\":\"checkpoint\",\"count\":" + std::to_string(seq) +
                       ",\"head\":\"" + head + "\",\"time_ms\":" + std::to_string(t) +
                       ",\"key_id\":\"" + key_id + "\",\"sig\":\"" + sig + "\"}\n";
    buf += line;
    pending_sidecar.push_back(std::move(line));
    since_checkpoint = 0;
    last_checkpoint = std::chrono::steady_clock::now();
  }

  // Writes one batch (records + checkpoint lines) with one write(); then makes
  // the log durable before the sidecar so the sidecar never claims records
  // the log lost in a crash.
  Status WriteBatch(const std::string& buf) {
    if (!buf.empty()) {
      RETURN_IF_ERROR(WriteAll(fd, buf, opt.path));
      if (opt.on_written) opt.on_written(buf);
    }
    if (pending_sidecar.empty()) return Status::Ok();
    if (opt.fsync_checkpoints && fdatasync(fd) != 0) return IoError("fsync " + opt.path, errno);
    std::string side;
    for (const auto& l : pending_sidecar) side += l;
    pending_sidecar.clear();
    RETURN_IF_ERROR(WriteAll(side_fd, side, side_path));
    if (opt.fsync_checkpoints && fdatasync(side_fd) != 0) {
      return IoError("fsync " + side_path, errno);
    }
    return Status::Ok();
  }

  void Run() {
    std::string batch;  // swapped with `queue`; both keep their capacity
    std::string buf, scratch;
    const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(opt.checkpoint_interval_s));
    const auto linger = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(opt.batch_delay_s));
    for (;;) {
      uint64_t drops, flush_req;
      bool stopping;
      {
        std::unique_lock<std::mutex> lock(mu);
        auto urgent = [&] { return pending_drops > 0 || flush_requested > flush_done || stop; };
        auto ready = [&] { return queue_records > 0 || urgent(); };
        if (since_checkpoint > 0 && opt.checkpoint_interval_s > 0) {
          wake.wait_until(lock, last_checkpoint + interval, ready);
        } else {
          wake.wait(lock, ready);
        }
        // Group commit: let a busy gateway fill the batch for a moment, so the
        // writer wakes (and writes) once per batch_delay_s instead of once per
        // request; Append wakes it early when the batch is full.
        if (linger.count() > 0 && queue_records > 0 && queue_records < opt.batch_records &&
            !urgent()) {
          wake.wait_until(lock, std::chrono::steady_clock::now() + linger,
                          [&] { return queue_records >= opt.batch_records || urgent(); });
        }
        batch.swap(queue);
        queue.clear();
        queue_records = 0;
        drops = pending_drops;
        pending_drops = 0;
        flush_req = flush_requested;
        stopping = stop;
      }
      bool failed;
      {
        std::lock_guard<std::mutex> lock(mu);
        failed = !error.ok();
      }
      if (failed) {
        // After a write error the file may end in a torn line; writing more
        // would only bury it. Count everything as lost instead.
        dropped += CountRecords(batch);
      } else {
        buf.clear();
        uint64_t before = seq;
        for (size_t at = 0; at < batch.size();) {
          uint32_t len;
          std::memcpy(&len, batch.data() + at, sizeof(len));
          const bool well_formed = (len & kWellFormedBit) != 0;
          len &= ~kWellFormedBit;
          std::string_view rec(batch.data() + at + sizeof(len), len);
          at += sizeof(len) + len;
          // A record the caller vouches for (AppendWellFormed) is "{members}"
          // as it stands; everything else is checked and trimmed.
          std::optional<std::string_view> body =
              well_formed ? std::optional<std::string_view>(rec.substr(1, rec.size() - 2))
                          : ObjectBody(rec, &scratch);
          if (body) {
            AddRecord(buf, *body);
          } else {
            std::string raw =
                Json(std::string(rec)).dump(-1, ' ', false, Json::error_handler_t::replace);
            AddRecord(buf, "\"type\":\"invalid_record\",\"time_ms\":" + std::to_string(WallMs()) +
                               ",\"raw\":" + raw);
          }
        }
        if (drops > 0) {
          AddRecord(buf, "\"type\":\"gap\",\"time_ms\":" + std::to_string(WallMs()) +
                             ",\"dropped\":" + std::to_string(drops));
        }
        bool due = since_checkpoint > 0 &&
                   (stopping || flush_req > flush_done_seen ||
                    (opt.checkpoint_interval_s > 0 &&
                     std::chrono::steady_clock::now() >= last_checkpoint + interval));
        if (due) AddCheckpoint(buf);
        Status s = WriteBatch(buf);
        if (s.ok()) {
          written += seq - before;
          std::lock_guard<std::mutex> lock(head_mu);
          head_pub = head;
        } else {
          std::lock_guard<std::mutex> lock(mu);
          if (error.ok()) error = s;
        }
      }
      batch.clear();
      // After a burst the swapped buffers would keep their peak size for the
      // life of the process; let go of anything far above a normal batch.
      if (batch.capacity() > kKeepBufferBytes) std::string().swap(batch);
      if (buf.capacity() > kKeepBufferBytes) std::string().swap(buf);
      flush_done_seen = flush_req;
      {
        std::lock_guard<std::mutex> lock(mu);
        flush_done = flush_req;
      }
      flushed.notify_all();
      if (stopping) return;
    }
  }

  static uint64_t CountRecords(std::string_view q) {
    uint64_t n = 0;
    for (size_t at = 0; at < q.size(); ++n) {
      uint32_t len;
      std::memcpy(&len, q.data() + at, sizeof(len));
      at += sizeof(len) + (len & ~kWellFormedBit);
    }
    return n;
  }
  uint64_t flush_done_seen = 0;  // writer's copy of flush_done
};

AuditLog::AuditLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AuditLog::~AuditLog() { (void)Close(); }

Result<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options) {
  if (options.path.empty()) return InvalidArgument("audit log path is empty; set audit.path");
  if (options.checkpoint_interval_s < 0) {
    return InvalidArgument("audit checkpoint_interval is negative");
  }
  auto impl = std::make_unique<Impl>();
  if (!options.signing_key_pem.empty()) {
    auto signer = Ed25519Signer::FromPrivatePem(options.signing_key_pem);
    if (!signer.ok()) return signer.status().WithContext("audit signing key");
    impl->key_id = signer->KeyId();
    impl->signer.emplace(std::move(signer).value());
  }
  if (!(options.batch_delay_s >= 0) || options.batch_delay_s > 60) {
    return InvalidArgument("audit batch_delay_s must be between 0 and 60 seconds");
  }
  if (options.max_queue == 0) options.max_queue = 1;
  if (options.batch_records == 0) options.batch_records = 1;
  impl->opt = std::move(options);
  const std::string& path = impl->opt.path;
  impl->side_path = path + ".checkpoints";
  impl->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (impl->fd < 0) return IoError("opening audit log " + path, errno);
  // Two writers on one chain would interleave sequence numbers.
  if (flock(impl->fd, LOCK_EX | LOCK_NB) != 0) {
    return FailedPrecondition("audit log " + path +
                              " is already open for writing by another process or instance");
  }
  ASSIGN_OR_RETURN(TailState tail, ReadTail(impl->fd, path));
  impl->side_fd = ::open(impl->side_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (impl->side_fd < 0)
    return IoError("opening audit checkpoint sidecar " + impl->side_path, errno);
  impl->seq = tail.seq;
  impl->head = tail.head;
  impl->head_pub = tail.head;
  // A resumed tail that no checkpoint covers (a crash) gets one soon.
  impl->since_checkpoint = tail.covered ? 0 : 1;
  impl->last_checkpoint = std::chrono::steady_clock::now();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Run(); });
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(impl)));
}

void AuditLog::Append(std::string_view record) { impl_->Enqueue(record, /*well_formed=*/false); }

void AuditLog::AppendWellFormed(std::string_view record) {
#ifndef NDEBUG
  // The promise, checked where it is cheap to find the caller: the record is
  // a plain object the writer may chain without looking.
  bool ascii = true;
  for (char c : record) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  assert(ascii && record.size() >= 2 && record.front() == '{' && record.back() == '}' &&
         internal::CheckAuditObject(record) == internal::ObjectCheck::kValid &&
         record.find_first_of("\r\n") == std::string_view::npos &&
         "AppendWellFormed: the record breaks its contract; use Append");
#endif
  impl_->Enqueue(record, /*well_formed=*/true);
}

void AuditLog::Impl::Enqueue(std::string_view record, bool well_formed) {
  Impl& m = *this;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stop || m.queue_records >= m.opt.max_queue || record.size() > kMaxRecordBytes) {
      m.dropped.fetch_add(1, std::memory_order_relaxed);
      if (m.stop) return;
      // The first drop ends a linger early, so the gap record is not late.
      wake = ++m.pending_drops == 1;
    } else {
      const auto len = static_cast<uint32_t>(record.size()) | (well_formed ? kWellFormedBit : 0);
      m.queue.append(reinterpret_cast<const char*>(&len), sizeof(len));
      m.queue.append(record);
      ++m.queue_records;
      // The writer sleeps without a deadline only while the queue is empty, and
      // lingers (see Run) until the batch is full.
      wake = m.queue_records == 1 || m.queue_records == m.opt.batch_records;
    }
  }
  if (wake) m.wake.notify_one();
}

Status AuditLog::Flush() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.stop) return m.error;
  uint64_t ticket = ++m.flush_requested;
  m.wake.notify_one();
  m.flushed.wait(lock, [&] { return m.flush_done >= ticket; });
  return m.error;
}

Status AuditLog::Close() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.closed) return m.error;
    m.stop = true;
  }
  m.wake.notify_one();
  if (m.thread.joinable()) m.thread.join();
  std::lock_guard<std::mutex> lock(m.mu);
  m.closed = true;
  if (m.fd >= 0) {
    ::close(m.fd);  // also releases the flock
    m.fd = -1;
  }
  if (m.side_fd >= 0) {
    ::close(m.side_fd);
    m.side_fd = -1;
  }
  return m.error;
}

uint64_t AuditLog::written() const { return impl_->written.load(); }
uint64_t AuditLog::dropped() const { return impl_->dropped.load(); }
std::string AuditLog::head_hex() const {
  std::lock_guard<std::mutex> lock(impl_->head_mu);
  return impl_->head_pub;
}

Result<AuditVerifyReport> VerifyAuditLog(const std::string& path, std::string_view public_pem) {
  std::optional<Ed25519Verifier> verifier;
  if (!public_pem.empty()) {
    auto v = Ed25519Verifier::FromPublicPem(public_pem);
    if (!v.ok()) return v.status().WithContext("audit verification key");
    verifier.emplace(std::move(v).value());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("opening audit log " + path, errno ? errno : ENOENT);

  AuditVerifyReport r;
  uint64_t last_seq = 0;
  std::string head(kZeroHash);
  uint64_t lineno = 0;
  auto fail = [&](uint64_t line, std::string reason) {
    r.ok = false;
    r.first_bad_line = line;
    r.first_bad_seq = last_seq + 1;
    r.reason = std::move(reason);
    return r;
  };
  auto check_sig = [&](const CheckpointLine& cp, std::string* why) {
    if (!verifier) return true;
    if (cp.sig.empty()) {
      *why = "checkpoint is unsigned but a verification key was given";
      return false;
    }
    auto sig = Base64UrlDecode(cp.sig);
    if (!sig.ok() || !verifier->Verify(CheckpointMessage(cp.count, cp.head, cp.time_ms), *sig)) {
      *why = "checkpoint signature is invalid (key_id " + cp.key_id + ", verifying key " +
             verifier->KeyId() + ")";
      return false;
    }
    return true;
  };

  // The sidecar first: it says which (count, head) pairs the log must contain.
  const std::string side_path = path + ".checkpoints";
  std::map<uint64_t, std::string> side;  // count -> head
  bool have_side = false;
  {
    std::ifstream sin(side_path, std::ios::binary);
    if (sin) {
      have_side = true;
      std::string line;
      uint64_t n = 0;
      while (std::getline(sin, line)) {
        ++n;
        if (sin.eof()) break;  // a torn last sidecar line (crash mid-append) proves nothing
        CheckpointLine cp;
        std::string why;
        if (!ParseCheckpointLine(line, &cp, &why) || !check_sig(cp, &why)) {
          return fail(0, "sidecar " + side_path + " line " + std::to_string(n) + ": " + why);
        }
        auto [it, inserted] = side.emplace(cp.count, cp.head);
        if (!inserted && it->second != cp.head) {
          return fail(0, "sidecar " + side_path + " line " + std::to_string(n) +
                             ": two checkpoints for count " + std::to_string(cp.count) +
                             " name different heads");
        }
      }
    }
  }

  std::string line;
  while (std::getline(in, line)) {
    ++lineno;
    if (in.eof()) return fail(lineno, "the last line is incomplete (no newline; torn write?)");
    std::string why;
    if (!IsRecordLine(line)) {
      CheckpointLine cp;
      if (!ParseCheckpointLine(line, &cp, &why)) {
        return fail(lineno, "neither a record nor a checkpoint: " + why);
      }
      if (cp.count != last_seq || cp.head != head) {
        return fail(lineno, "checkpoint claims " + std::to_string(cp.count) +
                                " records with head " + cp.head.substr(0, 16) +
                                "..., but the log has " + std::to_string(last_seq) + " with head " +
                                head.substr(0, 16) + "...");
      }
      if (!check_sig(cp, &why)) return fail(lineno, why);
      ++r.checkpoints;
      continue;
    }
    RecordLine rec;
    if (!ParseRecordLine(line, &rec, &why)) return fail(lineno, "malformed record: " + why);
    if (rec.seq != last_seq + 1) {
      return fail(lineno, "expected seq " + std::to_string(last_seq + 1) + " but found " +
                              std::to_string(rec.seq) + " (records deleted or reordered)");
    }
    if (rec.prev != head) {
      return fail(lineno,
                  "prev does not match the hash of the previous record (records deleted, "
                  "reordered or rewritten)");
    }
    if (Sha256Hex(rec.hashed) != rec.hash) {
      return fail(lineno, "record does not match its hash (edited)");
    }
    last_seq = rec.seq;
    head.assign(rec.hash);
    ++r.records;
    if (auto it = side.find(last_seq); it != side.end() && it->second != head) {
      last_seq -= 1;  // report the seq of this record
      return fail(lineno, "sidecar checkpoint for count " + std::to_string(it->first) +
                              " names a different head: the log was rewritten up to here");
    }
  }
  if (in.bad()) return IoError("reading audit log " + path, errno ? errno : EIO);
  if (!side.empty() && side.rbegin()->first > last_seq) {
    return fail(lineno + 1, "log truncated: the sidecar has a checkpoint for " +
                                std::to_string(side.rbegin()->first) +
                                " records but the log ends at seq " + std::to_string(last_seq));
  }
  if (!have_side && r.checkpoints > 0) {
    return fail(
        0, "sidecar " + side_path + " is missing, so truncation of the tail cannot be ruled out");
  }
  r.ok = true;
  return r;
}

}  // namespace gantry::security
