#include "gantry/monitor/spool.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string_view>

#include "gantry/core/json.h"
#include "gantry/core/log.h"

namespace gantry::monitor {
namespace {

namespace fs = std::filesystem;

struct Segment {
  uint64_t id = 0;
  uint64_t bytes = 0;    // complete lines only
  uint64_t records = 0;  // lines
};

std::string SegmentName(uint64_t id) { return fmt::format("seg-{:016d}.jsonl", id); }

bool ParseSegmentName(const std::string& name, uint64_t* id) {
  if (!name.starts_with("seg-") || !name.ends_with(".jsonl") || name.size() != 4 + 16 + 6) {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 4; i < 20; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  *id = v;
  return true;
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("writing " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("opening spool directory " + dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return IoError("fsync of spool directory " + dir, err);
  return Status::Ok();
}

// Reads [from, to) of `path` in pieces, calling `line` for each complete
// line (without '\n') with the offset just past it; `line` returns false to
// stop. Returns the number of bytes consumed (up to the last line handed on).
Result<uint64_t> ScanLines(const std::string& path, uint64_t from, uint64_t to,
                           const std::function<bool(std::string_view, uint64_t)>& line) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("opening spool segment " + path, errno);
  std::string carry;
  char buf[65536];
  uint64_t at = from;
  uint64_t consumed = from;
  bool stop = false;
  while (at < to && !stop) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof buf, to - at));
    ssize_t n = ::pread(fd, buf, want, static_cast<off_t>(at));
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return IoError("reading spool segment " + path, err);
    }
    if (n == 0) break;
    std::string_view piece(buf, static_cast<size_t>(n));
    size_t start = 0;
    while (start < piece.size()) {
      size_t nl = piece.find('\n', start);
      if (nl == std::string_view::npos) {
        carry.append(piece.substr(start));
        break;
      }
      uint64_t end_off = at + nl + 1;
      bool more;
      if (carry.empty()) {
        more = line(piece.substr(start, nl - start), end_off);
      } else {
        carry.append(piece.substr(start, nl - start));
        more = line(carry, end_off);
        carry.clear();
      }
      consumed = end_off;
      start = nl + 1;
      if (!more) {
        stop = true;
        break;
      }
    }
    at += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return consumed;
}

}  // namespace

struct Spool::Impl {
  SpoolOptions opt;
  mutable std::mutex mu;
  std::deque<Segment> segments;  // oldest first; never empty; the last is open for appends
  int fd = -1;                   // the last segment
  SpoolPosition cursor;
  uint64_t pending = 0;  // records after the cursor
  uint64_t dropped = 0;
  // The last Peek, so that Ack knows how many records it consumes without
  // reading them again.
  SpoolPosition peek_from, peek_end;
  uint64_t peek_records = 0;

  std::string PathOf(uint64_t id) const { return opt.dir + "/" + SegmentName(id); }
  std::string CursorPath() const { return opt.dir + "/cursor"; }

  Segment* Find(uint64_t id) {
    for (Segment& s : segments) {
      if (s.id == id) return &s;
    }
    return nullptr;
  }

  Result<uint64_t> CountLines(uint64_t id, uint64_t from, uint64_t to) {
    uint64_t n = 0;
    RETURN_IF_ERROR(ScanLines(PathOf(id), from, to, [&](std::string_view, uint64_t) {
                      ++n;
                      return true;
                    }).status());
    return n;
  }

  Status OpenActive() {
    if (fd >= 0) ::close(fd);
    const std::string path = PathOf(segments.back().id);
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) return IoError("opening spool segment " + path, errno);
    return Status::Ok();
  }

  Status NewSegment() {
    segments.push_back({.id = segments.back().id + 1});
    RETURN_IF_ERROR(OpenActive());
    return opt.fsync ? FsyncDir(opt.dir) : Status::Ok();
  }

  Status WriteCursor() {
    const std::string tmp = CursorPath() + ".tmp";
    int f = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (f < 0) return IoError("creating " + tmp, errno);
    std::string text =
        fmt::format("{{\"segment\":{},\"offset\":{}}}\n", cursor.segment, cursor.offset);
    Status s = WriteAll(f, text, tmp);
    if (s.ok() && opt.fsync && ::fdatasync(f) != 0) s = IoError("fsync " + tmp, errno);
    ::close(f);
    RETURN_IF_ERROR(s);
    if (::rename(tmp.c_str(), CursorPath().c_str()) != 0) {
      return IoError("renaming " + tmp + " to " + CursorPath(), errno);
    }
    return opt.fsync ? FsyncDir(opt.dir) : Status::Ok();
  }

  // Past the end of a segment that is no longer appended to: move on and
  // delete what lies wholly behind the cursor.
  void Normalize() {
    while (segments.size() > 1) {
      const Segment& front = segments.front();
      if (cursor.segment > front.id ||
          (cursor.segment == front.id && cursor.offset >= front.bytes)) {
        if (cursor.segment == front.id) cursor = {segments[1].id, 0};
        ::unlink(PathOf(front.id).c_str());
        segments.pop_front();
      } else {
        break;
      }
    }
  }

  uint64_t Bytes() const {
    uint64_t n = 0;
    for (const Segment& s : segments) n += s.bytes;
    return n;
  }

  // Deletes oldest segments while over the bound, counting the records lost.
  Status EnforceBound() {
    if (segments.back().bytes >= opt.segment_bytes) RETURN_IF_ERROR(NewSegment());
    bool moved = false;
    while (Bytes() > opt.max_bytes && segments.size() > 1) {
      Segment front = segments.front();
      uint64_t lost = 0;
      if (cursor.segment == front.id) {
        ASSIGN_OR_RETURN(uint64_t before, CountLines(front.id, 0, cursor.offset));
        lost = front.records - before;
        cursor = {segments[1].id, 0};
        moved = true;
      }
      ::unlink(PathOf(front.id).c_str());
      segments.pop_front();
      pending -= std::min(pending, lost);
      dropped += lost;
      if (lost > 0) {
        log::warn(
            "spool {}: over its bound of {} bytes (the endpoint is down or throttling); dropped "
            "the oldest {} records not yet sent ({} dropped so far)",
            opt.dir, opt.max_bytes, lost, dropped);
      }
    }
    return moved ? WriteCursor() : Status::Ok();
  }
};

Result<std::unique_ptr<Spool>> Spool::Open(SpoolOptions options) {
  if (options.dir.empty()) return InvalidArgument("spool: no directory given");
  if (options.segment_bytes < 1 || options.max_bytes < 2 * options.segment_bytes) {
    return InvalidArgument(
        fmt::format("spool {}: max_bytes ({}) must be at least twice segment_bytes ({})",
                    options.dir, options.max_bytes, options.segment_bytes));
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return IoError("creating spool directory " + options.dir, ec.value());
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  std::vector<uint64_t> ids;
  for (const fs::directory_entry& e : fs::directory_iterator(options.dir, ec)) {
    uint64_t id;
    if (ParseSegmentName(e.path().filename().string(), &id)) ids.push_back(id);
  }
  if (ec) return IoError("listing spool directory " + options.dir, ec.value());
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) {
    const std::string path = impl->PathOf(id);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return IoError("stat of spool segment " + path, errno);
    Segment seg{.id = id};
    ASSIGN_OR_RETURN(uint64_t complete, ScanLines(path, 0, static_cast<uint64_t>(st.st_size),
                                                  [&](std::string_view, uint64_t) {
                                                    ++seg.records;
                                                    return true;
                                                  }));
    seg.bytes = complete;
    if (complete < static_cast<uint64_t>(st.st_size)) {
      // A crash mid-append: the torn line was never acknowledged to anyone.
      log::warn("spool segment {}: cutting off a torn last line ({} bytes)", path,
                static_cast<uint64_t>(st.st_size) - complete);
      if (::truncate(path.c_str(), static_cast<off_t>(complete)) != 0) {
        return IoError("truncating spool segment " + path, errno);
      }
    }
    impl->segments.push_back(seg);
  }
  if (impl->segments.empty()) impl->segments.push_back({.id = 1});
  RETURN_IF_ERROR(impl->OpenActive());

  Result<std::string> text = ReadFile(impl->CursorPath());
  if (text.ok()) {
    uint64_t segment = 0, offset = 0;
    if (std::sscanf(text->c_str(), "{\"segment\":%" SCNu64 ",\"offset\":%" SCNu64 "}", &segment,
                    &offset) != 2) {
      return DataLoss(
          fmt::format("spool cursor {} is not {{\"segment\":N,\"offset\":B}}; delete it to resend "
                      "everything spooled",
                      impl->CursorPath()));
    }
    impl->cursor = {segment, offset};
  } else {
    impl->cursor = {impl->segments.front().id, 0};
  }
  // Clamp to what exists: segments behind the cursor were deleted after it
  // was written; a cursor past a torn tail points at the tail.
  if (impl->cursor.segment < impl->segments.front().id) {
    impl->cursor = {impl->segments.front().id, 0};
  }
  if (Segment* cs = impl->Find(impl->cursor.segment)) {
    impl->cursor.offset = std::min(impl->cursor.offset, cs->bytes);
  } else {
    impl->cursor = {impl->segments.back().id, impl->segments.back().bytes};
  }
  impl->Normalize();
  uint64_t pending = 0;
  for (const Segment& s : impl->segments) {
    if (s.id > impl->cursor.segment) pending += s.records;
    if (s.id == impl->cursor.segment) {
      ASSIGN_OR_RETURN(uint64_t before, impl->CountLines(s.id, 0, impl->cursor.offset));
      pending += s.records - before;
    }
  }
  impl->pending = pending;
  return std::unique_ptr<Spool>(new Spool(std::move(impl)));
}

Spool::Spool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Spool::~Spool() {
  if (impl_->fd >= 0) ::close(impl_->fd);
}

Status Spool::Append(std::span<const std::string> records) {
  for (const std::string& r : records) {
    if (r.find('\n') != std::string::npos) {
      return InvalidArgument("spool " + impl_->opt.dir + ": a record contains a newline");
    }
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  // Fill the open segment up to segment_bytes, then the next: the bound
  // drops whole segments, so one large append must not become one segment
  // (it would be dropped whole).
  size_t i = 0;
  std::string buf;
  while (i < records.size()) {
    buf.clear();
    const uint64_t used = m.segments.back().bytes;
    const uint64_t room = used < m.opt.segment_bytes ? m.opt.segment_bytes - used : 0;
    size_t n = 0;
    while (i < records.size() && (n == 0 || buf.size() + records[i].size() + 1 <= room)) {
      buf += records[i];
      buf += '\n';
      ++i;
      ++n;
    }
    const std::string path = m.PathOf(m.segments.back().id);
    Status s = WriteAll(m.fd, buf, path);
    if (!s.ok()) {
      // A partial line would tear the segment: cut back to what we know.
      (void)!::ftruncate(m.fd, static_cast<off_t>(m.segments.back().bytes));
      return s;
    }
    if (m.opt.fsync && ::fdatasync(m.fd) != 0) return IoError("fsync " + path, errno);
    m.segments.back().bytes += buf.size();
    m.segments.back().records += n;
    m.pending += n;
    RETURN_IF_ERROR(m.EnforceBound());
  }
  return Status::Ok();
}

Result<SpoolBatch> Spool::Peek(size_t max_array_bytes, size_t max_records) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  SpoolBatch batch;
  batch.end = m.cursor;
  size_t array_bytes = 2;
  bool full = false;
  for (const Segment& seg : m.segments) {
    if (full) break;
    if (seg.id < m.cursor.segment) continue;
    uint64_t from = seg.id == m.cursor.segment ? m.cursor.offset : 0;
    if (from >= seg.bytes) {
      continue;
    }
    RETURN_IF_ERROR(
        ScanLines(m.PathOf(seg.id), from, seg.bytes, [&](std::string_view line, uint64_t end) {
          size_t add = line.size() + (batch.records.empty() ? 0 : 1);
          if (!batch.records.empty() &&
              (array_bytes + add > max_array_bytes || batch.records.size() >= max_records)) {
            full = true;
            return false;
          }
          array_bytes += add;
          batch.records.emplace_back(line);
          batch.end = {seg.id, end};
          batch.ends.push_back(batch.end);
          return true;
        }).status());
  }
  m.peek_from = m.cursor;
  m.peek_end = batch.end;
  m.peek_records = batch.records.size();
  return batch;
}

Status Spool::Ack(SpoolPosition end) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Impl& m = *impl_;
  if (end <= m.cursor) return Status::Ok();
  uint64_t consumed = 0;
  if (m.peek_from == m.cursor && m.peek_end == end) {
    consumed = m.peek_records;
  } else {
    for (const Segment& s : m.segments) {
      if (s.id < m.cursor.segment || s.id > end.segment) continue;
      uint64_t from = s.id == m.cursor.segment ? m.cursor.offset : 0;
      uint64_t to = s.id == end.segment ? end.offset : s.bytes;
      ASSIGN_OR_RETURN(uint64_t n, m.CountLines(s.id, from, to));
      consumed += n;
    }
  }
  m.cursor = end;
  m.pending -= std::min(m.pending, consumed);
  m.Normalize();
  return m.WriteCursor();
}

uint64_t Spool::pending_records() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->pending;
}

uint64_t Spool::pending_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  uint64_t n = 0;
  for (const Segment& s : impl_->segments) {
    if (s.id > impl_->cursor.segment) n += s.bytes;
    if (s.id == impl_->cursor.segment) n += s.bytes - std::min(s.bytes, impl_->cursor.offset);
  }
  return n;
}

uint64_t Spool::dropped() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->dropped;
}

SpoolPosition Spool::cursor() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->cursor;
}

}  // namespace gantry::monitor
