#include "gantry/monitor/shipper.h"

#include <fmt/format.h>
#include <unistd.h>

#include <condition_variable>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/monitor/spool.h"

namespace gantry::monitor {
namespace {

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  time_t secs = static_cast<time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     static_cast<int>(ms % 1000));
}

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

Status Bad(const Config& c, std::string_view key, std::string_view what) {
  return InvalidArgument(fmt::format("{}: {}", c.Locate(key), what));
}

}  // namespace

Result<std::optional<LogsShipperOptions>> ParseAzureMonitorLogs(const Config& config,
                                                                std::string_view key,
                                                                std::string_view base_dir) {
  if (!config.Has(key)) return std::optional<LogsShipperOptions>();
  ASSIGN_OR_RETURN(Config top, config.Sub(key));
  // `metrics` is ParseAzureMonitorMetrics's (custom_metrics.h): one file may hold both.
  RETURN_IF_ERROR(top.CheckKnownKeys("", {"logs", "metrics"}));
  if (!top.Has("logs")) return std::optional<LogsShipperOptions>();
  ASSIGN_OR_RETURN(Config c, top.Sub("logs"));
  RETURN_IF_ERROR(c.CheckKnownKeys(
      "", {"endpoint", "rule_id", "stream", "spool_dir", "max_spool_bytes", "gzip",
           "max_batch_bytes", "flush_interval", "retry_interval", "timeout", "credential"}));
  LogsShipperOptions o;
  auto required = [&](std::string_view k, std::string* out, std::string_view what) -> Status {
    ASSIGN_OR_RETURN(*out, c.GetString(k, ""));
    if (out->empty()) return Bad(c, k, fmt::format("is required ({})", what));
    return Status::Ok();
  };
  RETURN_IF_ERROR(required("endpoint", &o.logs.endpoint,
                           "the data collection endpoint's logs ingestion URL, https://..."));
  if (!o.logs.endpoint.starts_with("https://") && !o.logs.endpoint.starts_with("http://")) {
    return Bad(c, "endpoint", fmt::format("'{}' is not an https:// URL", o.logs.endpoint));
  }
  RETURN_IF_ERROR(required("rule_id", &o.logs.rule_id, "the DCR's immutable id, dcr-..."));
  RETURN_IF_ERROR(
      required("stream", &o.logs.stream, "the DCR's input stream, e.g. Custom-GantryAudit_CL"));
  RETURN_IF_ERROR(required("spool_dir", &o.spool_dir,
                           "a local directory for records not yet sent, one per process"));
  if (!base_dir.empty() && !std::filesystem::path(o.spool_dir).is_absolute()) {
    o.spool_dir = (std::filesystem::path(base_dir) / o.spool_dir).string();
  }
  ASSIGN_OR_RETURN(o.max_spool_bytes, c.GetSize("max_spool_bytes", o.max_spool_bytes));
  if (o.max_spool_bytes < (1u << 20)) {
    return Bad(c, "max_spool_bytes", "must be at least 1M");
  }
  ASSIGN_OR_RETURN(o.logs.gzip, c.GetBool("gzip", true));
  ASSIGN_OR_RETURN(uint64_t mb, c.GetSize("max_batch_bytes", kMaxCallBytes));
  if (mb < 1024 || mb > kMaxCallBytes) {
    return Bad(c, "max_batch_bytes",
               fmt::format("{} is out of range 1024..{} (the API refuses calls over 1 MB)", mb,
                           kMaxCallBytes));
  }
  o.logs.max_batch_bytes = static_cast<size_t>(mb);
  auto duration = [&](std::string_view k, std::chrono::milliseconds* out) -> Status {
    ASSIGN_OR_RETURN(std::chrono::nanoseconds d, c.GetDuration(k, *out));
    if (d.count() <= 0) return Bad(c, k, "must be positive");
    *out = std::chrono::duration_cast<std::chrono::milliseconds>(d);
    return Status::Ok();
  };
  RETURN_IF_ERROR(duration("flush_interval", &o.flush_interval));
  RETURN_IF_ERROR(duration("retry_interval", &o.retry_interval));
  RETURN_IF_ERROR(duration("timeout", &o.logs.timeout));
  ASSIGN_OR_RETURN(o.credential, security::ParseAzureCredential(c, "credential"));
  return std::optional<LogsShipperOptions>(std::move(o));
}

struct LogsShipper::Impl {
  LogsShipperOptions opt;
  const Clock* clock = nullptr;
  std::unique_ptr<Spool> spool;
  std::unique_ptr<LogsIngestionClient> client;

  mutable std::mutex mu;
  std::condition_variable writer_cv, sender_cv, done_cv;
  std::vector<std::string> queue;
  size_t queue_bytes = 0;
  bool writing = false;  // the writer holds a swapped-out batch
  bool sending = false;  // the sender has a batch between Peek and Ack
  bool stop = false;
  uint64_t flush_waiters = 0;
  Stats stats;

  std::thread writer, sender;

  void WriterLoop() {
    std::vector<std::string> batch;
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      writer_cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty() && stop) return;
      batch.swap(queue);
      queue_bytes = 0;
      writing = true;
      lock.unlock();
      Status s = spool->Append(batch);
      if (!s.ok()) {
        log::error("azure monitor: {} records lost: {}", batch.size(), s.message());
      }
      lock.lock();
      if (!s.ok()) stats.spool_errors += batch.size();
      batch.clear();
      writing = false;
      sender_cv.notify_all();
      done_cv.notify_all();
    }
  }

  // Waits `d` unless stopped; false when stopped.
  bool Wait(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    return !sender_cv.wait_for(lock, d, [&] { return stop; });
  }

  void SenderLoop() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu);
        sender_cv.wait(lock, [&] { return stop || spool->pending_records() > 0; });
        if (stop) return;
        // Let records gather into a fuller call unless someone waits on
        // them or a call's worth is already there.
        if (flush_waiters == 0 && spool->pending_bytes() < opt.logs.max_batch_bytes) {
          sender_cv.wait_for(lock, opt.flush_interval, [&] { return stop || flush_waiters > 0; });
          if (stop) return;
        }
        sending = true;
      }
      bool retry_later = SendOne();
      {
        std::lock_guard<std::mutex> lock(mu);
        sending = false;
        done_cv.notify_all();
      }
      if (retry_later && !Wait(opt.retry_interval)) return;
    }
  }

  // One batch from the cursor. True when it failed and should wait.
  bool SendOne() {
    Result<SpoolBatch> batch = spool->Peek(opt.logs.max_batch_bytes);
    if (!batch.ok()) {
      log::error("azure monitor: reading the spool: {}", batch.status().message());
      return true;
    }
    if (batch->records.empty()) return false;
    UploadOutcome out = client->Upload(batch->records);
    uint64_t rejected = 0;
    SpoolPosition ack{};
    bool have_ack = false;
    if (out.delivered > 0) {
      ack = batch->ends[out.delivered - 1];
      have_ack = true;
    }
    const bool malformed = !out.status.ok() && out.status.code() == StatusCode::kInvalidArgument;
    if (malformed) {
      // Retrying would refuse the same bytes forever and stall everything
      // behind them: skip the rest of this batch.
      rejected = batch->records.size() - out.delivered;
      ack = batch->end;
      have_ack = true;
      log::error("azure monitor: {} records refused and skipped: {}", rejected,
                 out.status.message());
    } else if (!out.status.ok()) {
      log::warn("azure monitor: upload failed, retrying in {} ms ({} records wait): {}",
                opt.retry_interval.count(), spool->pending_records(), out.status.message());
    }
    if (have_ack) {
      Status s = spool->Ack(ack);
      if (!s.ok()) log::error("azure monitor: writing the spool cursor: {}", s.message());
    }
    std::lock_guard<std::mutex> lock(mu);
    stats.sent += out.delivered;
    stats.rejected += rejected;
    if (!out.status.ok() && !malformed) ++stats.failed_calls;
    return !out.status.ok() && !malformed;
  }
};

Result<std::unique_ptr<LogsShipper>> LogsShipper::Start(LogsShipperOptions options,
                                                        const Clock& clock) {
  auto impl = std::make_unique<Impl>();
  impl->clock = &clock;
  SpoolOptions so;
  so.dir = options.spool_dir;
  so.max_bytes = options.max_spool_bytes;
  so.segment_bytes = std::max<uint64_t>(options.max_spool_bytes / 16, 64 << 10);
  so.fsync = options.fsync;
  if (so.max_bytes < 2 * so.segment_bytes) so.segment_bytes = so.max_bytes / 2;
  ASSIGN_OR_RETURN(impl->spool, Spool::Open(so));
  options.credential.resource = kLogsIngestionResource;
  ASSIGN_OR_RETURN(std::unique_ptr<security::TokenSource> tokens,
                   security::NewAzureTokenSource(options.credential, clock));
  Impl* raw = impl.get();
  options.logs.wait = [raw](std::chrono::milliseconds d) { return raw->Wait(d); };
  ASSIGN_OR_RETURN(impl->client,
                   LogsIngestionClient::Create(options.logs, std::move(tokens), clock));
  impl->opt = std::move(options);
  impl->stats.pending = impl->spool->pending_records();
  if (impl->stats.pending > 0) {
    log::info("azure monitor: resuming {} records spooled in {}", impl->stats.pending,
              impl->opt.spool_dir);
  }
  impl->writer = std::thread([raw] { raw->WriterLoop(); });
  impl->sender = std::thread([raw] { raw->SenderLoop(); });
  return std::unique_ptr<LogsShipper>(new LogsShipper(std::move(impl)));
}

LogsShipper::LogsShipper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LogsShipper::~LogsShipper() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->writer_cv.notify_all();
  impl_->sender_cv.notify_all();
  impl_->writer.join();  // drains the queue into the spool first
  impl_->sender.join();
}

void LogsShipper::Append(std::string record) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  ++m.stats.appended;
  if (record.empty() || record.find('\n') != std::string::npos) {
    ++m.stats.rejected;
    log::warn("azure monitor: a record that is empty or holds a newline was not spooled");
    return;
  }
  if (record.size() + 2 > m.opt.logs.max_batch_bytes) {
    ++m.stats.rejected;
    log::warn("azure monitor: a {}-byte record is over the {}-byte bound of one call; not spooled",
              record.size(), m.opt.logs.max_batch_bytes);
    return;
  }
  if (m.stop || m.queue_bytes + record.size() > m.opt.max_queue_bytes) {
    if (m.stats.queue_dropped++ % 1000 == 0) {
      log::warn("azure monitor: the spool writer is behind; dropped a record ({} so far)",
                m.stats.queue_dropped);
    }
    return;
  }
  m.queue_bytes += record.size();
  m.queue.push_back(std::move(record));
  m.writer_cv.notify_one();
}

bool LogsShipper::Flush(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  ++m.flush_waiters;
  m.sender_cv.notify_all();
  bool done = m.done_cv.wait_for(lock, timeout, [&] {
    return m.queue.empty() && !m.writing && !m.sending && m.spool->pending_records() == 0;
  });
  --m.flush_waiters;
  return done;
}

LogsShipper::Stats LogsShipper::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Stats s = impl_->stats;
  s.spool_dropped = impl_->spool->dropped();
  s.pending = impl_->spool->pending_records();
  return s;
}

const std::string& LogsShipper::url() const { return impl_->client->url(); }

std::string AuditRow(std::string_view line, std::string_view source, std::string_view computer,
                     std::string_view audit_log, std::chrono::system_clock::time_point now) {
  Result<Json> j = ParseJson(line, "audit line");
  if (!j.ok() || !j->is_object()) return "";
  std::string kind, prev, hash;
  uint64_t seq = 0;
  if (j->contains("seq") && j->contains("hash")) {
    kind = "record";
    seq = (*j)["seq"].get<uint64_t>();
    hash = (*j)["hash"].get<std::string>();
    prev = j->value("prev", "");
  } else if (j->value("type", "") == "checkpoint") {
    kind = "checkpoint";
    seq = (*j)["count"].get<uint64_t>();
    hash = (*j)["head"].get<std::string>();
  } else {
    return "";
  }
  nlohmann::ordered_json row;
  row["TimeGenerated"] = Rfc3339(now);
  row["Computer"] = computer;
  row["Source"] = source;
  row["AuditLog"] = audit_log;
  row["Kind"] = kind;
  row["Seq"] = seq;
  row["Prev"] = prev;
  row["Hash"] = hash;
  row["RecordId"] = fmt::format("{}|{}|{}|{}", computer, audit_log, kind, seq);
  row["Line"] = line;
  return row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::function<void(std::string_view)> AuditForwarder(std::shared_ptr<LogsShipper> shipper,
                                                     std::string source, std::string audit_log,
                                                     const Clock& clock) {
  std::string computer = Hostname();
  const Clock* c = &clock;
  return
      [shipper = std::move(shipper), source = std::move(source), audit_log = std::move(audit_log),
       computer = std::move(computer), c](std::string_view lines) {
        size_t start = 0;
        while (start < lines.size()) {
          size_t nl = lines.find('\n', start);
          if (nl == std::string_view::npos) nl = lines.size();
          std::string_view line = lines.substr(start, nl - start);
          start = nl + 1;
          if (line.empty()) continue;
          std::string row = AuditRow(line, source, computer, audit_log, c->WallNow());
          if (!row.empty()) shipper->Append(std::move(row));
        }
      };
}

}  // namespace gantry::monitor
