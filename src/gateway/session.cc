// Client connections: accept, the per-connection read loop (keep-alive, the
// idle/header/body timeouts, head and body reading), and local answers.
// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "gantry/core/log.h"
#include "worker.h"

namespace gantry::gateway::internal {

namespace asio = boost::asio;
using asio::awaitable;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

bool ValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Reads until `buf` holds at least `want` bytes. False on EOF, error or timeout.
awaitable<bool> ReadAtLeast(Conn& c, Buffer& buf, size_t want) {
  while (buf.size() < want) {
    size_t avail = 0;
    char* p = buf.Prepare(kReadChunk, &avail);
    error_code ec;
    asio::mutable_buffer mb(p, avail);
    size_t n = co_await c.ReadSome(mb, ec);
    if (ec) co_return false;
    buf.Commit(n);
  }
  co_return true;
}

// Runs when a session ends, however it ends (an exception included), so that
// the connection slot and the watchdog are always released.
struct SessionCleanup {
  Conn* c;
  std::set<Conn*>* conns;
  Shared* shared;
  std::atomic<int64_t>* open;
  ~SessionCleanup() {
    error_code ec;
    c->deadline.Close();
    c->sock.shutdown(tcp::socket::shutdown_both, ec);
    c->sock.close(ec);
    conns->erase(c);
    shared->m.active_connections->Dec();
    shared->connections.fetch_sub(1);
    open->fetch_sub(1);
  }
};

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

void Worker::Refresh() {
  uint64_t g = shared_.generation.load(std::memory_order_acquire);
  if (g == generation_) return;
  std::shared_ptr<const Runtime> old = rt_;
  {
    std::lock_guard<std::mutex> lock(shared_.mu);
    rt_ = shared_.runtime;
    if (keys_ != shared_.keys) key_cache_.clear();  // its pointers are into the old table
    keys_ = shared_.keys;
    generation_ = shared_.generation.load(std::memory_order_acquire);
  }
  if (old && old != rt_) {
    // Backends gone from the configuration keep no idle connections here.
    const std::vector<BackendConfig>& now = rt_->config.backends;
    upstream_.CloseIdleUnless([&](std::string_view address) {
      for (const BackendConfig& b : now) {
        if (b.host_header == address) return true;
      }
      return false;
    });
  }
}

void Worker::NextRequestId(std::string* out) {
  // "<instance>-<worker>-<hex sequence>", built without a format parse.
  // The instance is 8 hex digits; the bounds keep the buffer provably large
  // enough for the rest (2 dashes, 11 + 16 digits).
  char buf[64];
  char* p = buf;
  const size_t n = std::min<size_t>(shared_.instance.size(), 32);
  std::memcpy(p, shared_.instance.data(), n);
  p += n;
  *p++ = '-';
  p = std::to_chars(p, buf + 48, index_).ptr;  // at most 11 digits
  *p++ = '-';
  p = std::to_chars(p, buf + sizeof(buf), ++request_seq_, 16).ptr;
  out->assign(buf, static_cast<size_t>(p - buf));
}

awaitable<void> Worker::Accept() {
  for (;;) {
    error_code ec;
    tcp::socket s = co_await acceptor_.async_accept(Nothrow(ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) co_return;
      // EMFILE and friends: back off briefly instead of spinning.
      asio::steady_timer t(io_, std::chrono::milliseconds(10));
      co_await t.async_wait(Nothrow(ec));
      continue;
    }
    Refresh();
    int64_t n = shared_.connections.fetch_add(1) + 1;
    shared_.m.connections_total->Inc();
    if (static_cast<uint64_t>(n) > rt_->config.limits.max_connections) {
      shared_.connections.fetch_sub(1);
      shared_.m.connections_rejected->Inc();
      // A short 503 rather than a silent close, so clients can tell overload
      // from a crash.
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Content-Length: 81\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
          "{\"error\":{\"code\":\"too_many_connections\",\"message\":\"connection limit "
          "reached\"}}";
      s.non_blocking(true, ec);
      (void)!::send(s.native_handle(), kBusy.data(), kBusy.size(), MSG_NOSIGNAL);
      s.close(ec);
      continue;
    }
    s.set_option(tcp::no_delay(true), ec);
    auto c = std::make_shared<Conn>(*this, std::move(s));
    if (tls_ != nullptr) c->tls = std::make_unique<asio::ssl::stream<tcp::socket&>>(c->sock, *tls_);
    asio::co_spawn(io_, Session(c), asio::detached);
  }
}

awaitable<void> Worker::Watchdog(std::shared_ptr<Conn> c) { co_await c->deadline.Run(); }

Worker::BodyRead Worker::TakeBody(Request& r) {
  Conn& c = r.conn;
  const http::RequestHead& req = r.head;
  const ServerLimits& limits = r.rt->config.limits;
  r.body.clear();
  if (req.framing == http::BodyFraming::kChunked) return BodyRead::kMore;
  if (req.framing != http::BodyFraming::kContentLength) return BodyRead::kDone;
  if (req.content_length > limits.max_body_bytes) {
    r.answer = ErrorResponse(413, "body_too_large",
                             fmt::format("request body of {} bytes is over the {} byte limit",
                                         req.content_length, limits.max_body_bytes));
    return BodyRead::kRefused;
  }
  if (c.in.size() < req.content_length) return BodyRead::kMore;
  // All of it came with the head (the common case): no read, no coroutine.
  c.deadline.Set(limits.body_timeout);
  r.body.assign(c.in.view().substr(0, req.content_length));
  c.in.Consume(req.content_length);
  return BodyRead::kDone;
}

awaitable<Worker::BodyRead> Worker::ReadBody(Request& r) {
  Conn& c = r.conn;
  const http::RequestHead& req = r.head;
  const ServerLimits& limits = r.rt->config.limits;
  std::string& body = r.body;
  error_code ec;
  if (req.framing == http::BodyFraming::kContentLength) {
    if (req.expect_continue && req.minor_version == 1 && c.in.size() < req.content_length) {
      asio::const_buffer cb(k100Continue.data(), k100Continue.size());
      co_await c.Write(cb, ec);
    }
    c.deadline.Set(limits.body_timeout);
    if (!co_await ReadAtLeast(c, c.in, req.content_length)) {
      r.answer = ErrorResponse(408, "request_timeout", "the request body did not arrive in time");
      co_return c.deadline.timed_out() ? BodyRead::kRefused : BodyRead::kGone;
    }
    body.assign(c.in.view().substr(0, req.content_length));
    c.in.Consume(req.content_length);
    co_return BodyRead::kDone;
  }
  // Chunked.
  if (req.expect_continue && req.minor_version == 1) {
    asio::const_buffer cb(k100Continue.data(), k100Continue.size());
    co_await c.Write(cb, ec);
  }
  c.deadline.Set(limits.body_timeout);
  http::ChunkedDecoder dec(limits.max_body_bytes);
  for (;;) {
    size_t used = 0;
    Status s = dec.Feed(c.in.view(), &body, &used);
    c.in.Consume(used);
    r.log.bytes_in += used;
    if (!s.ok()) {
      r.answer = s.code() == StatusCode::kResourceExhausted
                     ? ErrorResponse(413, "body_too_large", s.message())
                     : ErrorResponse(400, "bad_request", s.message());
      // The 100 Continue write's error, if any, is still in ec.
      co_return !c.deadline.timed_out() && ec ? BodyRead::kGone : BodyRead::kRefused;
    }
    if (dec.done()) co_return BodyRead::kDone;
    size_t avail = 0;
    char* p = c.in.Prepare(kReadChunk, &avail);
    asio::mutable_buffer mb(p, avail);
    size_t n = co_await c.ReadSome(mb, ec);
    if (ec) {
      r.answer = ErrorResponse(408, "request_timeout", "the request body did not arrive in time");
      co_return c.deadline.timed_out() ? BodyRead::kRefused : BodyRead::kGone;
    }
    c.in.Commit(n);
  }
}

awaitable<void> Worker::Session(std::shared_ptr<Conn> c) {
  conns_.insert(c.get());
  open_conns_.fetch_add(1);
  shared_.m.active_connections->Inc();
  SessionCleanup cleanup{c.get(), &conns_, &shared_, &open_conns_};
  error_code ec;
  auto ep = c->sock.remote_endpoint(ec);
  if (!ec) c->client_addr = ep.address().to_string();
  asio::co_spawn(io_, Watchdog(c), asio::detached);
  Request& r = c->req;

  bool first = true;
  bool done = false;
  if (c->tls) {
    // The handshake counts against the header timeout, like the head itself.
    c->deadline.Set(rt_->config.limits.header_timeout);
    co_await c->tls->async_handshake(asio::ssl::stream_base::server, Nothrow(ec));
    if (ec) {
      shared_.m.tls_handshake_errors->Inc();
      first = false;
      done = true;
    }
  }
  while (!done) {
    Refresh();
    // Pinned for the whole request: a reload may free the old runtime while
    // this coroutine is suspended. Copied only when it changed (no reference
    // count traffic per request).
    if (c->rt != rt_) c->rt = rt_;
    const Runtime* rt = c->rt.get();
    const ServerLimits& limits = rt->config.limits;
    if (shared_.draining.load() && !first) break;
    // Waiting for the next request: the idle timeout until its first byte, the
    // header timeout for the whole head from then on (slowloris).
    c->idle = c->in.empty();
    c->deadline.Set(c->in.empty() && !first ? limits.idle_timeout : limits.header_timeout);
    bool header_clock = !c->in.empty() || first;
    size_t scanned = 0, head_end = 0;
    http::HeadScan scan = http::HeadScan::kIncomplete;
    bool eof = false;
    for (;;) {
      scan = http::ScanHead(c->in.view(), &scanned, limits.max_header_bytes, &head_end);
      if (scan != http::HeadScan::kIncomplete) break;
      size_t avail = 0;
      char* p = c->in.Prepare(kReadChunk, &avail);
      asio::mutable_buffer mb(p, avail);
      size_t n = co_await c->ReadSome(mb, ec);
      if (ec) {
        eof = true;
        break;
      }
      c->in.Commit(n);
      if (!header_clock) {
        header_clock = true;
        c->idle = false;
        c->deadline.Set(limits.header_timeout);
      }
    }
    c->idle = false;
    r.Reset();
    r.rt = rt;
    r.start = Clk::now();
    RequestLog& log = r.log;
    log.client = c->client_addr;
    if (eof) {
      // A timeout with part of a head is a slow client: tell it. A timeout or
      // close between requests is the normal end of keep-alive.
      if (c->deadline.timed_out() && !c->in.empty()) {
        NextRequestId(&log.request_id);
        log.decision = "deny";
        log.reason = "header_timeout";
        c->deadline.Set(std::chrono::seconds(2));
        r.answer = ErrorResponse(408, "request_timeout", "the request head did not arrive in time");
        co_await WriteLocal(r, r.answer, true);
        Finish(r);
      }
      break;
    }
    if (scan != http::HeadScan::kComplete) {
      NextRequestId(&log.request_id);
      log.decision = "deny";
      r.answer =
          scan == http::HeadScan::kTooLarge
              ? ErrorResponse(431, "header_too_large",
                              fmt::format("request head over {} bytes", limits.max_header_bytes))
              : ErrorResponse(400, "bad_request", "bare LF in request head (CRLF required)");
      log.reason = scan == http::HeadScan::kTooLarge ? "header_too_large" : "bad_request";
      c->deadline.Set(std::chrono::seconds(2));
      co_await WriteLocal(r, r.answer, true);
      Finish(r);
      break;
    }
    // The head's views point into c->in; copy it so that body reads (which
    // may move the buffer) cannot invalidate them.
    c->head_text.assign(c->in.view().substr(0, head_end));
    c->in.Consume(head_end);
    Status parsed = http::ParseRequestHead(c->head_text, &r.head);
    if (!parsed.ok()) {
      NextRequestId(&log.request_id);
      log.decision = "deny";
      log.reason = "bad_request";
      c->deadline.Set(std::chrono::seconds(2));
      bool version = parsed.message().find("version") != std::string::npos;
      r.answer = ErrorResponse(version ? 505 : 400, "bad_request", parsed.message());
      co_await WriteLocal(r, r.answer, true);
      Finish(r);
      break;
    }
    r.has_head = true;
    const http::RequestHead& req = r.head;
    const http::HeaderView* rid = req.Find("x-request-id");
    if (rid && ValidRequestId(rid->value)) {
      log.request_id.assign(rid->value);
    } else {
      NextRequestId(&log.request_id);
    }
    log.bytes_in = head_end;

    // Route and credentials are checked on the head, so that nobody without a
    // key can make the gateway read (and hold) a body.
    if (!Gate(r)) {
      bool unread_body = req.framing != http::BodyFraming::kNone;
      bool close = !req.keep_alive || unread_body || shared_.draining.load();
      c->deadline.Set(limits.send_timeout);
      bool keep = co_await WriteLocal(r, r.answer, close);
      Finish(r);
      if (!keep) break;
      first = false;
      continue;
    }

    // Body: always read whole (bounded), so that the upstream sees one
    // unambiguous Content-Length whatever framing the client used.
    BodyRead body = TakeBody(r);
    if (body == BodyRead::kMore) body = co_await ReadBody(r);
    if (body == BodyRead::kGone) break;  // the client went away
    if (body == BodyRead::kRefused) {
      log.decision = "deny";
      log.reason = r.answer.status == 413   ? "body_too_large"
                   : r.answer.status == 408 ? "body_timeout"
                                            : "bad_request";
      c->deadline.Set(std::chrono::seconds(2));
      co_await WriteLocal(r, r.answer, true);
      Finish(r);
      break;
    }
    log.bytes_in += r.body.size();
    bool keep = false;
    try {
      keep = co_await Serve(r);
    } catch (const std::exception& e) {
      // A bug or bad_alloc: drop this connection, keep the process serving.
      log::error("gateway: {} {}: {}", req.method, req.path, e.what());
      log.decision = "error";
      log.reason = "internal";
      keep = false;
    }
    Finish(r);
    r.call.Reset();
    if (!keep || !req.keep_alive || shared_.draining.load()) break;
    // A large body must not pin its buffer for the life of a keep-alive connection.
    c->in.ShrinkIfLarge(256 << 10);
    first = false;
  }
  c->deadline.Close();
}

namespace {

// `s` with every byte that is not part of a well-formed UTF-8 sequence
// replaced by U+FFFD, so that a message echoing request bytes (a path, a
// model name) stays valid JSON (found by fuzz_gateway_admin).
std::string Utf8OrReplacement(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80                 ? 1
                 : c >= 0xC2 && c <= 0xDF ? 2
                 : c >= 0xE0 && c <= 0xEF ? 3
                 : c >= 0xF0 && c <= 0xF4 ? 4
                                          : 0;
    bool ok = len != 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xC0) == 0x80;
      // The second byte's range excludes overlong forms, surrogates and > U+10FFFF.
      if (ok && k == 1) {
        if (c == 0xE0) ok = b >= 0xA0;
        if (c == 0xED) ok = b <= 0x9F;
        if (c == 0xF0) ok = b >= 0x90;
        if (c == 0xF4) ok = b <= 0x8F;
      }
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

LocalResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  LocalResponse r;
  r.status = status;
  std::string type = status == 401   ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 429 ? "rate_limit_error"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  r.body = "{\"error\":{\"code\":\"";
  AppendJsonEscaped(code, &r.body);
  r.body += "\",\"message\":\"";
  bool ascii = std::all_of(message.begin(), message.end(),
                           [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  std::string replaced = ascii ? std::string() : Utf8OrReplacement(message);
  AppendJsonEscaped(ascii ? message : std::string_view(replaced), &r.body);
  r.body += "\",\"type\":\"" + type + "\"}}";
  return r;
}

awaitable<bool> Worker::WriteLocal(Request& r, const LocalResponse& resp, bool close) {
  const http::RequestHead* req = r.has_head ? &r.head : nullptr;
  bool head_only = req != nullptr && req->method == "HEAD";
  std::string head =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", resp.status,
                  http::ReasonPhrase(resp.status), resp.content_type, resp.body.size());
  for (const auto& [k, v] : resp.headers) AppendHeader(k, v, &head);
  if (!r.log.request_id.empty()) head += "x-request-id: " + r.log.request_id + "\r\n";
  if (close) {
    head += "Connection: close\r\n";
  } else if (req != nullptr && req->minor_version == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  std::array<asio::const_buffer, 2> bufs{
      asio::buffer(head), asio::buffer(resp.body.data(), head_only ? 0 : resp.body.size())};
  error_code ec;
  co_await r.conn.Write(bufs, ec);
  r.log.status = resp.status;
  r.log.bytes_out += head.size() + (head_only ? 0 : resp.body.size());
  co_return !ec && !close;
}

awaitable<void> Worker::Sleep(std::chrono::milliseconds d) {
  asio::steady_timer timer(io_, d);
  error_code ec;
  co_await timer.async_wait(Nothrow(ec));
}

}  // namespace gantry::gateway::internal
