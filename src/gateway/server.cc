// The gateway's request path: listeners, one session coroutine per client
// connection, authentication, access control, limits, the proxy to backends
// with pooled keep-alive connections, streaming, usage accounting and audit.
#include "gantry/gateway/server.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <ctime>
#include <set>
#include <thread>
#include <unordered_map>

#include "buffer.h"
#include "gantry/core/json.h"
#include "gantry/core/log.h"
#include "gantry/gateway/sniff.h"
#include "gantry/security/api_key.h"
#include "gantry/security/crypto.h"
#include "internal.h"

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using Clk = std::chrono::steady_clock;
using boost::system::error_code;
using internal::Buffer;
using internal::Identity;
using internal::LocalResponse;
using internal::Runtime;
using internal::Shared;

constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kMaxSniffedResponse = 4 << 20;  // usage is read from bodies up to this size
constexpr size_t kMaxModelLabels = 256;         // bound on distinct `model` label values
// How long a pooled connection may have been idle before it is peeked for a
// close (see the pool in Proxy()): requests that may be repeated, and the rest.
constexpr auto kPeekAfter = std::chrono::milliseconds(200);
constexpr auto kPeekAfterOnce = std::chrono::milliseconds(1);

auto Nothrow(error_code& ec) { return asio::redirect_error(use_awaitable, ec); }

// The same clock as steady_clock (CLOCK_MONOTONIC) at tick resolution, read
// without the TSC: deadlines and pool ages do not need nanoseconds, and they
// are taken several times per request.
Clk::time_point CoarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clk::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

double Seconds(Clk::duration d) { return std::chrono::duration<double>(d).count(); }

bool ValidRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

void AppendHeader(std::string_view name, std::string_view value, std::string* out) {
  out->append(name);
  out->append(": ");
  out->append(value);
  out->append("\r\n");
}

// Per-request number formatting without fmt's parse and buffer steps.
void AppendInt(int64_t v, std::string* out) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  out->append(b, r.ptr);
}

// `ms` (>= 0) with three decimals, as "{:.3f}" (rounded to the microsecond).
void AppendMillis(double ms, std::string* out) {
  const int64_t us = std::llround(std::max(0.0, ms) * 1000);
  AppendInt(us / 1000, out);
  const int frac = static_cast<int>(us % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100),
                          static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out->append(digits, 4);
}

bool StartsWithI(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && http::IEquals(s.substr(0, prefix.size()), prefix);
}

// What one request did, for metrics and the audit record.
struct RequestLog {
  std::string request_id;
  std::string route = "-";
  std::string model;
  std::string decision = "allow";
  std::string reason;
  std::string key_id;
  std::string role;
  std::string backend;
  std::string client;
  int status = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  double upstream_s = -1;

  // Back to the state of a new request, keeping the strings' capacity (one
  // RequestLog serves all the requests of a connection).
  void Reset() {
    for (std::string* f : {&request_id, &model, &reason, &key_id, &role, &backend}) f->clear();
    route.assign("-");
    decision.assign("allow");
    status = 0;
    prompt_tokens = completion_tokens = 0;
    bytes_in = bytes_out = 0;
    upstream_s = -1;
  }
};

// What Worker::Gate decides from a request head: the route, the caller, or
// the answer when it is already known.
struct GateResult {
  const RouteConfig* route = nullptr;
  bool admin = false;
  Identity who{"anonymous", "", {}};
  LocalResponse response;

  void Reset() {
    route = nullptr;
    admin = false;
    who.kind.assign("anonymous");
    who.key_id.clear();
    who.roles.clear();
    response = LocalResponse{};
  }
};

class Worker;

// One try of a request against one backend: what to send, and how it ended.
struct Attempt {
  const BackendConfig* backend = nullptr;
  const std::string* body = nullptr;  // the client's body, or a fallback tier's rewrite
  std::string_view target;            // request target sent upstream
  std::chrono::milliseconds timeout{0};  // first byte and between bytes
  std::string_view degraded;          // X-Gantry-Degraded value; empty when not degraded
  // A 5xx answer is not forwarded (the caller will retry elsewhere); *failure
  // then describes it.
  bool hold_5xx = false;
  Outcome outcome = Outcome::kOk;     // out: for outlier detection and retries
};

// One client connection.
struct Conn {
  Conn(Worker& worker, tcp::socket s) : w(worker), sock(std::move(s)), timer(sock.get_executor()) {}
  Worker& w;
  tcp::socket sock;
  asio::steady_timer timer;
  Clk::time_point deadline = Clk::time_point::max();
  Clk::time_point armed = Clk::time_point::max();
  bool timed_out = false;
  bool closed = false;
  bool idle = true;
  tcp::socket* upstream = nullptr;  // the upstream socket in use, cancelled on timeout too
  Buffer in;
  Buffer up_in{kReadChunk};
  std::string client_addr;
  // Per-request scratch, reused across the requests of a keep-alive
  // connection so that their capacity is allocated once, not per request.
  std::string head_text, body, up_head, up_resp_text, resp_head, sniffed, decoded, scanned_out,
      frame;
  http::RequestHead req_head;       // views into head_text
  http::ResponseHead up_resp_head;  // views into up_resp_text
  RequestLog log;
  GateResult gate;
  Clk::time_point request_start{};  // when the current request's head was complete

  // Set when the listener terminates TLS; reads and writes go through it.
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls;

  // Plain functions, not coroutines: they hand back the operation's own
  // awaitable, so an I/O costs no extra coroutine frame.
  awaitable<size_t> ReadSome(asio::mutable_buffer b, error_code& ec) {
    if (tls) return tls->async_read_some(b, asio::redirect_error(use_awaitable, ec));
    return sock.async_read_some(b, asio::redirect_error(use_awaitable, ec));
  }
  template <typename Buffers>
  awaitable<size_t> Write(const Buffers& b, error_code& ec) {
    if (tls) return asio::async_write(*tls, b, asio::redirect_error(use_awaitable, ec));
    return asio::async_write(sock, b, asio::redirect_error(use_awaitable, ec));
  }

  void SetDeadline(Clk::duration d) {
    deadline = CoarseNow() + d;
    timed_out = false;
    // The watchdog sleeps until `armed`; wake it when the new deadline is sooner.
    if (deadline < armed) timer.cancel();
  }
  void ClearDeadline() { deadline = Clk::time_point::max(); }
};

class Worker {
 public:
  // io_ runs on one thread and only that thread touches its sockets (other
  // threads post to it), so Asio's per-socket reactor lock is dropped; the
  // scheduler and timer locks stay for those posts.
  Worker(Shared& shared, int index, asio::ssl::context* tls)
      : shared_(shared),
        index_(index),
        tls_(tls),
        io_(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO),
        acceptor_(io_) {}
  ~Worker() {
    // Pooled upstream sockets belong to io_; close them while it lives.
    pools_.clear();
  }

  asio::io_context& io() { return io_; }
  Shared& shared() { return shared_; }

  Status Listen(const tcp::endpoint& ep) {
    error_code ec;
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {
      int one = 1;
      if (setsockopt(acceptor_.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        return IoError("setsockopt(SO_REUSEPORT)", errno);
      }
    }
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable(fmt::format("cannot listen on {}:{}: {} (is another process using it?)",
                                     ep.address().to_string(), ep.port(), ec.message()));
    }
    return Status::Ok();
  }
  uint16_t BoundPort() const {
    error_code ec;
    return acceptor_.local_endpoint(ec).port();
  }

  void Start() {
    limiter_ = shared_.limiter->Attach(io_);
    Refresh();
    asio::co_spawn(io_, Accept(), asio::detached);
    thread_ = std::thread([this] {
      io_.run();
    });
  }

  // Stops accepting and closes idle keep-alive connections; busy ones close
  // after their current response (Shared::draining).
  void Drain() {
    asio::post(io_, [this] {
      error_code ec;
      acceptor_.close(ec);
      for (Conn* c : conns_) {
        if (c->idle) c->sock.cancel(ec);
      }
    });
  }
  void Stop() { io_.stop(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
    limiter_.reset();
  }
  bool Idle() const { return open_conns_.load() == 0; }

  awaitable<void> Session(std::shared_ptr<Conn> c);

 private:
  awaitable<void> Accept();
  awaitable<void> Watchdog(std::shared_ptr<Conn> c);

  // Re-reads the published runtime and key table when they changed.
  void Refresh() {
    uint64_t g = shared_.generation.load(std::memory_order_acquire);
    if (g == generation_) return;
    std::lock_guard<std::mutex> lock(shared_.mu);
    rt_ = shared_.runtime;
    if (keys_ != shared_.keys) key_cache_.clear();  // its pointers are into the old table
    keys_ = shared_.keys;
    generation_ = shared_.generation.load(std::memory_order_acquire);
  }

  // Serves one request whose head and body are read. Returns false when the
  // connection must close afterwards.
  // Coroutine parameters are references to the caller's locals (which outlive
  // the call): GCC 12 mishandles temporaries and by-value class arguments in
  // co_await expressions, so none are passed.
  // What can be decided from the head alone, before a body is read:
  // built-in endpoints, the route, the caller. False with g->response set
  // when the answer is already known.
  bool Gate(const http::RequestHead& req, const Runtime& rt, RequestLog& log, GateResult* g);
  awaitable<bool> Serve(Conn& c, const http::RequestHead& req, std::string& body, RequestLog& log,
                        GateResult& gate, const Runtime& rt);
  awaitable<bool> WriteLocal(Conn& c, const http::RequestHead* req, const LocalResponse& r,
                             RequestLog& log, bool close);
  awaitable<bool> Proxy(Conn& c, const http::RequestHead& req, Attempt& a, const Runtime& rt,
                        bool openai_stream, bool strip_usage, bool sniff_usage,
                        const Admission* adm, RequestLog& log, internal::LocalResponse* failure,
                        bool* headers_sent);
  // Waits `d` on this worker's loop (retry backoff, pending requests).
  awaitable<void> Sleep(std::chrono::milliseconds d) {
    asio::steady_timer timer(io_, d);
    error_code ec;
    co_await timer.async_wait(Nothrow(ec));
  }
  // Fills *who (reusing its strings) or returns PermissionDenied with *reason set.
  Status Authenticate(const http::RequestHead& req, const Runtime& rt, std::string* reason,
                      Identity* who);
  void Finish(const http::RequestHead* req, RequestLog& log, Clk::time_point start);

  metrics::Counter* CounterFor(std::string_view name, std::string_view help,
                               const metrics::Labels& labels);
  metrics::Histogram* HistogramFor(std::string_view name, std::string_view help,
                                   const metrics::Labels& labels);
  void NextRequestId(std::string* out) {
    // "<instance>-<worker>-<hex sequence>", built without a format parse.
    char buf[64];
    char* p = buf;
    std::memcpy(p, shared_.instance.data(), shared_.instance.size());
    p += shared_.instance.size();
    *p++ = '-';
    p = std::to_chars(p, buf + sizeof(buf), index_).ptr;
    *p++ = '-';
    p = std::to_chars(p, buf + sizeof(buf), ++request_seq_, 16).ptr;
    out->assign(buf, static_cast<size_t>(p - buf));
  }

  Shared& shared_;
  int index_;
  asio::ssl::context* tls_;  // null: plain HTTP
  // Declared before io_ so that they outlive it: destroying io_ destroys
  // suspended sessions, whose cleanup touches them.
  std::set<Conn*> conns_;
  std::atomic<int64_t> open_conns_{0};
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::unique_ptr<LimiterLoop> limiter_;
  std::shared_ptr<const Runtime> rt_;
  std::shared_ptr<const security::KeyTable> keys_;
  uint64_t generation_ = 0;
  uint64_t request_seq_ = 0;
  struct Pooled {
    tcp::socket sock;
    Clk::time_point since;  // when it went idle
  };
  std::unordered_map<std::string, std::vector<Pooled>> pools_;  // by backend host:port
  // Per-route request metrics, looked up by the route name once per request
  // instead of building label vectors.
  struct RouteStats {
    metrics::Histogram* duration = nullptr;
    std::array<metrics::Counter*, 600> by_status{};
  };
  std::unordered_map<std::string, RouteStats> route_stats_;
  std::unordered_map<std::string, metrics::Histogram*> upstream_seconds_;
  std::unordered_map<std::string, metrics::Counter*> counters_;
  // Keys this worker verified (salted SHA-256) since the key table last
  // changed: later requests compare the secret in constant time instead of
  // hashing again. Cleared with the table; bounded.
  struct CachedKey {
    std::string secret;
    const security::ApiKeyInfo* info;
  };
  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, CachedKey, SvHash, std::equal_to<>> key_cache_;
  static constexpr size_t kKeyCacheMax = 4096;
  // gantry_gateway_tokens_total by model: {prompt, completion}.
  std::unordered_map<std::string, std::pair<metrics::Counter*, metrics::Counter*>> token_counters_;
  std::unordered_map<std::string, metrics::Histogram*> histograms_;
  std::string audit_rec_;  // Finish() builds the audit record here

  friend struct Gateway::Impl;
};

std::string LabelKey(std::string_view name, const metrics::Labels& labels) {
  std::string k(name);
  for (const auto& [n, v] : labels) {
    k += '\x1f';
    k += v;
  }
  return k;
}

// Looks `key` up in a per-worker cache, registering the series with `make`
// the first time (nullptr when the registry refuses it; metrics never fail a
// request).
template <typename T, typename Make>
T* CachedSeries(std::unordered_map<std::string, T*>& cache, std::string key, Make make) {
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Result<T*> r = make();
  T* p = r.ok() ? *r : nullptr;
  cache.emplace(std::move(key), p);
  return p;
}

metrics::Counter* Worker::CounterFor(std::string_view name, std::string_view help,
                                     const metrics::Labels& labels) {
  return CachedSeries(counters_, LabelKey(name, labels),
                      [&] { return shared_.registry.GetCounter(name, help, labels); });
}

metrics::Histogram* Worker::HistogramFor(std::string_view name, std::string_view help,
                                         const metrics::Labels& labels) {
  return CachedSeries(histograms_, LabelKey(name, labels), [&] {
    return shared_.registry.GetHistogram(name, help, labels, metrics::DefaultLatencyBuckets());
  });
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
          "{\"error\":{\"code\":\"too_many_connections\",\"message\":\"connection limit reached\"}}";
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

awaitable<void> Worker::Watchdog(std::shared_ptr<Conn> c) {
  error_code ec;
  while (!c->closed) {
    if (c->deadline <= CoarseNow()) {
      c->timed_out = true;
      c->deadline = Clk::time_point::max();
      c->sock.cancel(ec);
      if (c->upstream != nullptr) c->upstream->cancel(ec);
    }
    c->armed = c->deadline;
    c->timer.expires_at(c->deadline);
    co_await c->timer.async_wait(Nothrow(ec));
  }
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
  Worker* w;
  Conn* c;
  std::set<Conn*>* conns;
  Shared* shared;
  std::atomic<int64_t>* open;
  ~SessionCleanup() {
    error_code ec;
    c->closed = true;
    c->timer.cancel();
    c->sock.shutdown(tcp::socket::shutdown_both, ec);
    c->sock.close(ec);
    conns->erase(c);
    shared->m.active_connections->Dec();
    shared->connections.fetch_sub(1);
    open->fetch_sub(1);
  }
};

awaitable<void> Worker::Session(std::shared_ptr<Conn> c) {
  conns_.insert(c.get());
  open_conns_.fetch_add(1);
  shared_.m.active_connections->Inc();
  SessionCleanup cleanup{this, c.get(), &conns_, &shared_, &open_conns_};
  error_code ec;
  auto ep = c->sock.remote_endpoint(ec);
  if (!ec) c->client_addr = ep.address().to_string();
  asio::co_spawn(io_, Watchdog(c), asio::detached);

  bool first = true;
  if (c->tls) {
    // The handshake counts against the header timeout, like the head itself.
    c->SetDeadline(rt_->config.limits.header_timeout);
    co_await c->tls->async_handshake(asio::ssl::stream_base::server, Nothrow(ec));
    if (ec) {
      shared_.m.tls_handshake_errors->Inc();
      first = false;
      c->closed = true;
    }
  }
  for (; !c->closed;) {
    Refresh();
    // Pinned for the whole request: a reload may free the old runtime while
    // this coroutine is suspended.
    std::shared_ptr<const Runtime> rt = rt_;
    const ServerLimits& limits = rt->config.limits;
    if (shared_.draining.load() && !first) break;
    // Waiting for the next request: the idle timeout until its first byte, the
    // header timeout for the whole head from then on (slowloris).
    c->idle = c->in.empty();
    c->SetDeadline(c->in.empty() && !first ? limits.idle_timeout : limits.header_timeout);
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
        c->SetDeadline(limits.header_timeout);
      }
    }
    c->idle = false;
    Clk::time_point start = Clk::now();
    c->request_start = start;
    RequestLog& log = c->log;
    log.Reset();
    log.client = c->client_addr;
    if (eof) {
      // A timeout with part of a head is a slow client: tell it. A timeout or
      // close between requests is the normal end of keep-alive.
      if (c->timed_out && !c->in.empty()) {
        NextRequestId(&log.request_id);
        log.decision = "deny";
        log.reason = "header_timeout";
        c->SetDeadline(std::chrono::seconds(2));
        LocalResponse r = internal::ErrorResponse(408, "request_timeout",
                                                  "the request head did not arrive in time");
        co_await WriteLocal(*c, nullptr, r, log, true);
        Finish(nullptr, log, start);
      }
      break;
    }
    if (scan != http::HeadScan::kComplete) {
      NextRequestId(&log.request_id);
      log.decision = "deny";
      LocalResponse r = scan == http::HeadScan::kTooLarge
                            ? internal::ErrorResponse(431, "header_too_large",
                                                      fmt::format("request head over {} bytes",
                                                                  limits.max_header_bytes))
                            : internal::ErrorResponse(400, "bad_request",
                                                      "bare LF in request head (CRLF required)");
      log.reason = scan == http::HeadScan::kTooLarge ? "header_too_large" : "bad_request";
      c->SetDeadline(std::chrono::seconds(2));
      co_await WriteLocal(*c, nullptr, r, log, true);
      Finish(nullptr, log, start);
      break;
    }
    // The head's views point into c->in; copy it so that body reads (which
    // may move the buffer) cannot invalidate them.
    std::string& head_text = c->head_text;
    head_text.assign(c->in.view().substr(0, head_end));
    c->in.Consume(head_end);
    Status parsed = http::ParseRequestHead(head_text, &c->req_head);
    if (!parsed.ok()) {
      NextRequestId(&log.request_id);
      log.decision = "deny";
      log.reason = "bad_request";
      c->SetDeadline(std::chrono::seconds(2));
      bool version = parsed.message().find("version") != std::string::npos;
      LocalResponse r =
          internal::ErrorResponse(version ? 505 : 400, "bad_request", parsed.message());
      co_await WriteLocal(*c, nullptr, r, log, true);
      Finish(nullptr, log, start);
      break;
    }
    http::RequestHead& req = c->req_head;
    const http::HeaderView* rid = req.Find("x-request-id");
    if (rid && ValidRequestId(rid->value)) {
      log.request_id.assign(rid->value);
    } else {
      NextRequestId(&log.request_id);
    }
    log.bytes_in = head_end;

    // Route and credentials are checked on the head, so that nobody without a
    // key can make the gateway read (and hold) a body.
    GateResult& gate = c->gate;
    gate.Reset();
    if (!Gate(req, *rt, log, &gate)) {
      bool unread_body = req.framing != http::BodyFraming::kNone;
      bool close = !req.keep_alive || unread_body || shared_.draining.load();
      c->SetDeadline(limits.send_timeout);
      bool keep = co_await WriteLocal(*c, &req, gate.response, log, close);
      Finish(&req, log, start);
      if (!keep) break;
      first = false;
      continue;
    }

    // Body: always read whole (bounded), so that the upstream sees one
    // unambiguous Content-Length whatever framing the client used.
    std::string& body = c->body;
    body.clear();
    bool body_ok = true;
    LocalResponse body_error;
    if (req.framing == http::BodyFraming::kContentLength) {
      if (req.content_length > limits.max_body_bytes) {
        body_ok = false;
        body_error = internal::ErrorResponse(
            413, "body_too_large",
            fmt::format("request body of {} bytes is over the {} byte limit", req.content_length,
                        limits.max_body_bytes));
      } else {
        if (req.expect_continue && req.minor_version == 1 && c->in.size() < req.content_length) {
          static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
          asio::const_buffer cb(k100.data(), k100.size());
          co_await c->Write(cb, ec);
        }
        c->SetDeadline(limits.body_timeout);
        if (!co_await ReadAtLeast(*c, c->in, req.content_length)) {
          body_ok = false;
          body_error = internal::ErrorResponse(408, "request_timeout",
                                               "the request body did not arrive in time");
          if (!c->timed_out) break;  // the client went away
        } else {
          body.assign(c->in.view().substr(0, req.content_length));
          c->in.Consume(req.content_length);
        }
      }
    } else if (req.framing == http::BodyFraming::kChunked) {
      if (req.expect_continue && req.minor_version == 1) {
        static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
        asio::const_buffer cb(k100.data(), k100.size());
        co_await c->Write(cb, ec);
      }
      c->SetDeadline(limits.body_timeout);
      http::ChunkedDecoder dec(limits.max_body_bytes);
      for (;;) {
        size_t used = 0;
        Status s = dec.Feed(c->in.view(), &body, &used);
        c->in.Consume(used);
        log.bytes_in += used;
        if (!s.ok()) {
          body_ok = false;
          body_error = s.code() == StatusCode::kResourceExhausted
                           ? internal::ErrorResponse(413, "body_too_large", s.message())
                           : internal::ErrorResponse(400, "bad_request", s.message());
          break;
        }
        if (dec.done()) break;
        size_t avail = 0;
        char* p = c->in.Prepare(kReadChunk, &avail);
        asio::mutable_buffer mb(p, avail);
      size_t n = co_await c->ReadSome(mb, ec);
        if (ec) {
          body_ok = false;
          body_error = internal::ErrorResponse(408, "request_timeout",
                                               "the request body did not arrive in time");
          break;
        }
        c->in.Commit(n);
      }
      if (!body_ok && !c->timed_out && ec) break;
    }
    if (!body_ok) {
      log.decision = "deny";
      log.reason = body_error.status == 413 ? "body_too_large"
                   : body_error.status == 408 ? "body_timeout"
                                              : "bad_request";
      c->SetDeadline(std::chrono::seconds(2));
      co_await WriteLocal(*c, &req, body_error, log, true);
      Finish(&req, log, start);
      break;
    }
    log.bytes_in += body.size();
    bool keep = false;
    try {
      keep = co_await Serve(*c, req, body, log, gate, *rt);
    } catch (const std::exception& e) {
      // A bug or bad_alloc: drop this connection, keep the process serving.
      log::error("gateway: {} {}: {}", req.method, req.path, e.what());
      log.decision = "error";
      log.reason = "internal";
      keep = false;
    }
    Finish(&req, log, start);
    if (!keep || !req.keep_alive || shared_.draining.load()) break;
    // A large body must not pin its buffer for the life of a keep-alive connection.
    c->in.ShrinkIfLarge(256 << 10);
    first = false;
  }
  c->closed = true;
}

awaitable<bool> Worker::WriteLocal(Conn& c, const http::RequestHead* req, const LocalResponse& r,
                                   RequestLog& log, bool close) {
  bool head_only = req != nullptr && req->method == "HEAD";
  std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
                                 r.status, http::ReasonPhrase(r.status), r.content_type,
                                 r.body.size());
  for (const auto& [k, v] : r.headers) AppendHeader(k, v, &head);
  if (!log.request_id.empty()) head += "x-request-id: " + log.request_id + "\r\n";
  if (close) {
    head += "Connection: close\r\n";
  } else if (req != nullptr && req->minor_version == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  std::array<asio::const_buffer, 2> bufs{asio::buffer(head),
                                         asio::buffer(r.body.data(), head_only ? 0 : r.body.size())};
  error_code ec;
  co_await c.Write(bufs, ec);
  log.status = r.status;
  log.bytes_out += head.size() + (head_only ? 0 : r.body.size());
  co_return !ec && !close;
}

Status Worker::Authenticate(const http::RequestHead& req, const Runtime& rt, std::string* reason,
                            Identity* who) {
  std::string_view token;
  if (const http::HeaderView* h = req.Find("authorization")) {
    if (!StartsWithI(h->value, "Bearer ")) {
      *reason = "unsupported_scheme";
      return PermissionDenied("Authorization must be 'Bearer <key or token>'");
    }
    token = h->value.substr(7);
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  } else if (const http::HeaderView* k = req.Find("x-api-key")) {
    token = k->value;
  }
  if (token.empty()) {
    *reason = "no_credentials";
    return PermissionDenied("no credentials: send 'Authorization: Bearer <key>' or 'x-api-key'");
  }
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (token.starts_with("gk_")) {
    if (!rt.config.api_keys) {
      *reason = "api_keys_disabled";
      return PermissionDenied("API keys are disabled on this gateway");
    }
    const security::ApiKeyInfo* info = nullptr;
    security::KeyCheck check = security::KeyCheck::kMalformed;
    Result<security::PresentedKey> parsed = security::ParseApiKey(token);
    auto cached = parsed.ok() ? key_cache_.find(parsed->id) : key_cache_.end();
    if (cached != key_cache_.end() &&
        security::ConstantTimeEquals(parsed->secret, cached->second.secret)) {
      info = cached->second.info;
      check = info->revoked_unix != 0 && now >= info->revoked_unix   ? security::KeyCheck::kRevoked
              : info->expires_unix != 0 && now >= info->expires_unix ? security::KeyCheck::kExpired
                                                                     : security::KeyCheck::kOk;
    } else {
      check = security::Authenticate(*keys_, token, now, &info);
      if (check == security::KeyCheck::kOk && parsed.ok()) {
        if (key_cache_.size() >= kKeyCacheMax) key_cache_.clear();
        key_cache_[std::string(parsed->id)] = CachedKey{std::string(parsed->secret), info};
      }
    }
    if (check != security::KeyCheck::kOk) {
      *reason = std::string(security::KeyCheckName(check));
      return PermissionDenied(fmt::format("API key rejected: {}", *reason));
    }
    who->kind.assign("api_key");
    who->key_id.assign(info->id);
    who->roles.resize(1);
    who->roles[0].assign(info->role);
    return Status::Ok();
  }
  if (!rt.jwt) {
    *reason = "malformed";
    return PermissionDenied("credential is not an API key and JWT is not configured");
  }
  Result<security::JwtClaims> claims = rt.jwt->Verify(token, now);
  if (!claims.ok()) {
    *reason = "jwt_" + claims.status().message();
    return PermissionDenied(fmt::format("token rejected: {}", claims.status().message()));
  }
  who->kind.assign("jwt");
  who->key_id.assign(claims->subject);
  who->roles = std::move(claims->roles);
  return Status::Ok();
}

const RouteConfig* MatchRoute(const GatewayConfig& cfg, std::string_view path) {
  for (const RouteConfig& r : cfg.routes) {
    if (!r.path.empty() ? path == r.path : path.starts_with(r.prefix)) return &r;
  }
  return nullptr;
}

bool Worker::Gate(const http::RequestHead& req, const Runtime& rt, RequestLog& log,
                  GateResult* g) {
  std::string_view path = req.path;
  if (path == "/healthz" || path == "/readyz" || path == "/metrics") {
    log.route = std::string(path);
    LocalResponse& r = g->response;
    if (path == "/metrics") {
      r.content_type = metrics::Registry::kContentType;
      r.body = shared_.registry.Render();
    } else if (path == "/readyz" && shared_.draining.load()) {
      r = internal::ErrorResponse(503, "draining", "the gateway is shutting down");
    } else {
      r.body = path == "/healthz" ? "{\"status\":\"ok\"}" : "{\"status\":\"ready\"}";
    }
    return false;
  }
  g->admin = path.starts_with("/admin/") || path == "/admin";
  if (!g->admin) {
    g->route = MatchRoute(rt.config, path);
    if (g->route == nullptr) {
      log.decision = "deny";
      log.reason = "no_route";
      g->response = internal::ErrorResponse(404, "not_found", fmt::format("no route for {}", path));
      return false;
    }
    log.route = g->route->name;
  } else {
    log.route = "admin";
  }
  if (g->admin || g->route->auth_required) {
    std::string reason;
    Status id = Authenticate(req, rt, &reason, &g->who);
    if (!id.ok()) {
      log.decision = "deny";
      log.reason = reason;
      g->response = internal::ErrorResponse(401, "unauthorized", id.message());
      g->response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gantry\"");
      return false;
    }
    log.key_id = g->who.key_id;
    log.role = g->who.roles.empty() ? "" : g->who.roles.front();
  }
  return true;
}

awaitable<bool> Worker::Serve(Conn& c, const http::RequestHead& req, std::string& body,
                              RequestLog& log, GateResult& gate, const Runtime& rt_ref) {
  const Runtime* rt = &rt_ref;
  const GatewayConfig& cfg = rt->config;
  bool close = !req.keep_alive || shared_.draining.load();
  std::string_view path = req.path;
  const RouteConfig* route = gate.route;
  const Identity& who = gate.who;

  if (gate.admin) {
    LocalResponse r;
    try {
      r = internal::HandleAdmin(shared_, *rt, who, req, body);
    } catch (const std::exception& e) {
      // The admin API validates its input; an exception here is a bug, and
      // must not take the connection (and its slot) with it.
      log::error("gateway: admin API {} {}: {}", req.method, path, e.what());
      r = internal::ErrorResponse(500, "internal", "internal error in the admin API");
    }
    if (r.status >= 400) {
      log.decision = "deny";
      log.reason = r.status == 403 ? "forbidden" : "admin_error";
    }
    co_return co_await WriteLocal(c, &req, r, log, close);
  }

  // What is being called: the model for OpenAI and KServe routes.
  std::string model;
  double estimated_tokens = 0;
  bool openai_stream = false, strip_usage = false, sniff_usage = false;
  if (route->protocol == Protocol::kOpenAi && req.method == "POST") {
    Result<OpenAiRequest> o = SniffOpenAiRequest(body);
    if (!o.ok()) {
      log.decision = "deny";
      log.reason = "bad_request";
      LocalResponse r = internal::ErrorResponse(400, "invalid_request", o.status().message());
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
    if (o->model.empty()) {
      // Without a model there is nothing to authorize against; backends that
      // would pick a default model must not be reachable that way.
      log.decision = "deny";
      log.reason = "bad_request";
      LocalResponse r = internal::ErrorResponse(400, "invalid_request",
                                                "`model` is required (a non-empty string)");
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
    model = o->model;
    estimated_tokens = o->estimated_prompt_tokens;
    openai_stream = o->stream;
    sniff_usage = true;
    if (o->stream && !o->include_usage) {
      // Ask the backend for the usage chunk and hide it from the client, who
      // did not ask for it.
      Result<std::string> injected = InjectIncludeUsage(body);
      if (injected.ok()) {
        body = std::move(*injected);
        strip_usage = true;
      }
    }
  } else if (route->protocol == Protocol::kOpenAi) {
    // Only listing models names none; GET /v1/models/{id} names one; other
    // methods have no model to authorize and are not part of the protocol.
    std::string_view rest = path;
    size_t models_at = rest.rfind("/models");
    if (req.method == "GET" && models_at != std::string_view::npos &&
        models_at + 7 == rest.size()) {
      // model stays empty: any valid credential may list
    } else if (req.method == "GET" && models_at != std::string_view::npos &&
               rest.substr(models_at + 7).starts_with("/") &&
               rest.substr(models_at + 8).find('/') == std::string_view::npos &&
               models_at + 8 < rest.size()) {
      model = std::string(rest.substr(models_at + 8));
    } else {
      log.decision = "deny";
      log.reason = "bad_request";
      LocalResponse r = internal::ErrorResponse(
          405, "method_not_allowed",
          fmt::format("{} {} is not an OpenAI-compatible call the gateway can authorize "
                      "(POST with a JSON body naming `model`, or GET .../models[/id])",
                      req.method, path));
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
  } else if (route->protocol == Protocol::kKserve) {
    Result<KserveTarget> t = ParseKservePath(path);
    if (t.ok()) {
      model = t->model;
    } else if (!(path == "/v2" || path == "/v2/" || path == "/v2/health/live" ||
                 path == "/v2/health/ready" || path == "/v2/repository/index")) {
      // Everything else must name its model in the one form the gateway
      // parses; anything it cannot read cannot be authorized.
      log.decision = "deny";
      log.reason = "no_route";
      LocalResponse r = internal::ErrorResponse(
          404, "not_found",
          fmt::format("{} is not a KServe v2 path (/v2/models/{{name}}[/versions/{{v}}]/infer, "
                      "/v2/health/ready, ...)",
                      path));
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
  }
  log.model = model;

  // Access control: deny by default.
  std::string_view action = route->protocol == Protocol::kHttp ? "route:invoke" : "model:invoke";
  std::string_view resource = route->protocol == Protocol::kHttp ? std::string_view(route->name)
                                                                 : std::string_view(model);
  std::string role;
  if (route->auth_required) {
    bool allowed = false;
    // Requests that name no model (KServe health, GET /v1/models) need only
    // an authenticated caller with some permission on this kind of route.
    for (const std::string& r : who.roles) {
      if (route->protocol != Protocol::kHttp && model.empty()
              ? rt->policy.Allowed(r, action, "*") || rt->policy.HasRole(r)
              : rt->policy.Allowed(r, action, resource)) {
        allowed = true;
        role = r;
        break;
      }
    }
    if (!allowed) {
      log.decision = "deny";
      log.reason = "forbidden";
      LocalResponse r = internal::ErrorResponse(
          403, "forbidden",
          fmt::format("role '{}' may not {} '{}'", who.roles.empty() ? "" : who.roles.front(),
                      action, resource));
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
    log.role = role;
  }

  // Target: the first model rule that matches, else the route's.
  Target target = route->target;
  if (!model.empty()) {
    for (const ModelRoute& m : route->models) {
      if (security::GlobMatch(m.match, model)) {
        target = m.target;
        break;
      }
    }
  }

  // Limits and quotas.
  Admission adm;
  // Admit also records per-key usage for /admin/usage, so it runs for every
  // identified caller even without rules.
  bool limited =
      !cfg.limiter.rate_limits.empty() || !cfg.limiter.quotas.empty() || !who.key_id.empty();
  if (limited) {
    Subject subject{who.key_id, role, model};
    if (std::optional<Admission> now = limiter_->TryAdmitNow(subject, estimated_tokens)) {
      adm = std::move(*now);
    } else {
      adm = co_await limiter_->Admit(subject, estimated_tokens);
    }
    if (!adm.allowed) {
      log.decision = "deny";
      log.reason = adm.reason;
      LocalResponse r = internal::ErrorResponse(
          adm.status, adm.status == 429 ? "rate_limited" : adm.status == 403 ? "quota_exceeded"
                                                                              : "limiter_unavailable",
          fmt::format("{} ({})", adm.reason, adm.rule));
      r.headers.emplace_back("Retry-After",
                             fmt::format("{}", static_cast<int64_t>(std::ceil(adm.retry_after_s))));
      if (adm.has_rate_headers) {
        r.headers.emplace_back("RateLimit-Limit", fmt::format("{}", static_cast<int64_t>(adm.limit)));
        r.headers.emplace_back("RateLimit-Remaining",
                               fmt::format("{}", static_cast<int64_t>(adm.remaining)));
        r.headers.emplace_back("RateLimit-Reset",
                               fmt::format("{}", static_cast<int64_t>(std::ceil(adm.reset_s))));
      }
      CounterFor("gantry_gateway_rejections_total", "Requests refused by limits and quotas",
                 {{"reason", adm.reason}})
          ->Inc();
      co_return co_await WriteLocal(c, &req, r, log, close);
    }
  }

  // Choose a backend, send, and retry elsewhere while that is safe.
  Balancer& bal = *shared_.balancer;
  std::string_view sticky_value;
  if (target.kind == Target::Kind::kRollout) {
    const RolloutConfig& ro = cfg.rollouts[target.index];
    if (ro.sticky == RolloutConfig::Sticky::kHeader) {
      if (const http::HeaderView* h = req.Find(ro.sticky_header)) sticky_value = h->value;
    }
  }
  // Methods that may be repeated, per RFC 9110; a route can declare more.
  bool repeatable = route->idempotent || req.method == "GET" || req.method == "HEAD" ||
                    req.method == "OPTIONS" || req.method == "PUT" || req.method == "DELETE";
  std::chrono::milliseconds timeout =
      route->timeout.count() > 0 ? route->timeout : cfg.limits.upstream_timeout;
  std::optional<KserveTarget> kserve;
  if (route->protocol == Protocol::kKserve) {
    Result<KserveTarget> kt = ParseKservePath(path);
    if (kt.ok()) kserve = std::move(*kt);
  }
  bool want_outputs = kserve && kserve->verb == "infer" && rt->config.anomaly.enabled;
  LocalResponse failure;
  bool headers_sent = false;
  bool keep = false;
  std::vector<size_t> tried;
  std::string rewritten, rewritten_target;
  std::optional<Balancer::InFlight> pending, retry_guard;
  Clk::time_point pending_until{};
  uint32_t retries = 0;
  Pick pick;
  for (;;) {
    PickContext ctx{who.key_id, sticky_value, tried.empty() ? nullptr : &tried};
    pick = bal.Choose(target, ctx);
    // A reload between this request's start and now may have renumbered
    // pools or backends: the indexes must name the same things in both.
    if (pick.pool >= cfg.pools.size() || cfg.pools[pick.pool].name != pick.pool_name ||
        (pick.backend != kNoBackend && (pick.backend >= cfg.backends.size() ||
                                        cfg.backends[pick.backend].name != pick.backend_name))) {
      log.reason = "config_changed";
      failure = internal::ErrorResponse(
          503, "service_unavailable",
          "the gateway's configuration changed while this request was routed; retry it");
      failure.headers.emplace_back("Retry-After", "1");
      break;
    }
    const PoolConfig& pool = cfg.pools[pick.pool];
    if (pick.backend == kNoBackend) {
      // Every backend saturated: wait for a slot when the pool allows it.
      if (pool.max_pending > 0 && tried.empty()) {
        if (!pending) {
          pending = bal.TryBeginPending(pick.pool);
          pending_until = CoarseNow() + pool.pending_timeout;
        }
        if (pending && CoarseNow() < pending_until) {
          co_await Sleep(std::chrono::milliseconds(5));
          continue;
        }
      }
      if (!tried.empty() && failure.status != 0) break;  // report the last backend's failure
      log.decision = "error";
      log.reason = fmt::format("shed:{}", pick.shed_reason);
      failure = internal::ErrorResponse(
          503, "service_unavailable",
          fmt::format("no backend of pool '{}' can take the request now ({}); retry later",
                      pool.name, pick.shed_reason));
      failure.headers.emplace_back("Retry-After", fmt::format("{}", pick.retry_after_s));
      break;
    }
    pending.reset();
    const BackendConfig& backend = cfg.backends[pick.backend];
    log.backend = backend.name;
    Attempt a;
    a.backend = &backend;
    a.body = &body;
    a.target = req.target;
    a.timeout = timeout;
    if (pick.degraded) {
      a.degraded = pick.reason;
      if (openai_stream && !route->degraded.allow_stream) {
        log.decision = "deny";
        log.reason = "degraded_no_stream";
        failure = internal::ErrorResponse(
            503, "service_unavailable",
            fmt::format("streaming is off while '{}' is degraded ({}); retry later or send "
                        "\"stream\": false",
                        pool.name, pick.reason));
        failure.headers.emplace_back("Retry-After", fmt::format("{}", pool.shed_retry_after_s));
        failure.headers.emplace_back("X-Gantry-Degraded", std::string(pick.reason));
        break;
      }
      if (route->protocol == Protocol::kOpenAi && req.method == "POST" &&
          (!pick.model_rewrite.empty() || route->degraded.max_tokens > 0)) {
        Result<std::string> rw =
            RewriteForFallback(body, pick.model_rewrite, route->degraded.max_tokens);
        if (rw.ok()) {
          rewritten = std::move(*rw);
          a.body = &rewritten;
        }
      } else if (kserve && !pick.model_rewrite.empty()) {
        rewritten_target = RewriteKserveModel(req.target, pick.model_rewrite);
        a.target = rewritten_target;
      }
    }
    bool last = retries >= pool.retry.attempts;
    a.hold_5xx = !last && repeatable;
    Balancer::InFlight in_flight = bal.Begin(pick);
    failure = LocalResponse{};
    failure.status = 0;
    keep = co_await Proxy(c, req, a, *rt, openai_stream, strip_usage, sniff_usage || want_outputs,
                          limited ? &adm : nullptr, log, &failure, &headers_sent);
    in_flight.Release();
    bal.Report(pick, a.outcome);
    if (headers_sent || failure.status == 0 || last) break;
    // Nothing reached the client yet: retry where that is safe.
    bool safe = a.outcome == Outcome::kConnectFailure || repeatable;
    if (!safe) break;
    std::optional<Balancer::InFlight> budget = bal.TryBeginRetry(pick);
    if (!budget) break;
    retry_guard = std::move(budget);
    tried.push_back(pick.backend);
    ++retries;
    std::chrono::milliseconds wait = bal.Backoff(pick.pool, retries);
    if (wait.count() > 0) co_await Sleep(wait);
  }
  retry_guard.reset();
  if (rt->config.anomaly.enabled && !model.empty() && shared_.anomaly) {
    OutputRecord rec;
    rec.model = model;
    if (pick.rollout != kNoBackend && pick.backend != kNoBackend) {
      rec.version = cfg.pools[pick.pool].name;
    } else if (kserve) {
      rec.version = kserve->version;
    }
    rec.latency_s = Seconds(Clk::now() - c.request_start);
    int status = headers_sent ? log.status : failure.status;
    rec.error = status >= 500 || status == 0 || log.reason == "upstream_reset" ||
                log.reason == "upstream_timeout";
    rec.response_bytes = log.bytes_out;
    rec.completion_tokens = log.prompt_tokens + log.completion_tokens > 0 ? log.completion_tokens : -1;
    std::vector<TensorStats> outputs;
    if (want_outputs && headers_sent && log.status < 300 && !c.sniffed.empty()) {
      Result<std::vector<TensorStats>> s = KserveOutputStats(c.sniffed);
      if (s.ok()) {
        outputs = std::move(*s);
        rec.outputs = &outputs;
      }
    }
    shared_.anomaly->Record(rec);
  }
  if (limited) {
    double actual = adm.estimated_tokens;
    if (log.prompt_tokens + log.completion_tokens > 0) {
      actual = static_cast<double>(log.prompt_tokens + log.completion_tokens);
    } else if (log.status >= 400 || log.status == 0) {
      actual = 0;  // nothing was generated: refund the estimate
    }
    limiter_->Settle(adm, actual);
  }
  if (!headers_sent && failure.status != 0) {
    if (log.decision == "allow") log.decision = "error";
    co_return co_await WriteLocal(c, &req, failure, log, true);
  }
  co_return keep && !close;
}

// Builds the request head sent upstream.
void UpstreamHead(const http::RequestHead& req, std::string_view target,
                  const BackendConfig& backend, const GatewayConfig& cfg, const RequestLog& log,
                  const std::string& client_addr, size_t body_size, std::string* out) {
  std::string& h = *out;
  h.clear();
  h += req.method;
  h += ' ';
  h += target;
  h += " HTTP/1.1\r\nHost: ";
  h += backend.host_header;
  h += "\r\n";
  std::string_view connection;
  if (const http::HeaderView* cv = req.Find("connection")) connection = cv->value;
  std::string_view forwarded_for, original_host;
  for (const http::HeaderView& hv : req.headers) {
    if (http::IsHopByHop(hv.name, connection)) continue;
    if (http::IEquals(hv.name, "host")) {
      original_host = hv.value;
      continue;
    }
    if (http::IEquals(hv.name, "content-length") || http::IEquals(hv.name, "expect") ||
        http::IEquals(hv.name, "x-request-id") || http::IEquals(hv.name, "x-forwarded-proto") ||
        http::IEquals(hv.name, "x-forwarded-host")) {
      continue;
    }
    if (http::IEquals(hv.name, "x-forwarded-for")) {
      forwarded_for = hv.value;
      continue;
    }
    if (!cfg.forward_credentials &&
        (http::IEquals(hv.name, "authorization") || http::IEquals(hv.name, "x-api-key"))) {
      continue;
    }
    AppendHeader(hv.name, hv.value, &h);
  }
  AppendHeader("x-request-id", log.request_id, &h);
  h += "X-Forwarded-For: ";
  if (!forwarded_for.empty()) {
    h += forwarded_for;
    h += ", ";
  }
  h += client_addr;
  h += "\r\nX-Forwarded-Proto: ";
  h += cfg.tls.cert_path.empty() ? "http" : "https";
  if (!original_host.empty()) {
    h += "\r\nX-Forwarded-Host: ";
    h += original_host;
  }
  if (body_size > 0 || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
    h += "\r\nContent-Length: ";
    h += std::to_string(body_size);
  }
  h += "\r\n\r\n";
}

awaitable<bool> Worker::Proxy(Conn& c, const http::RequestHead& req, Attempt& a,
                              const Runtime& rt, bool openai_stream, bool strip_usage,
                              bool sniff_usage, const Admission* adm, RequestLog& log,
                              LocalResponse* failure, bool* headers_sent) {
  const GatewayConfig& cfg = rt.config;
  const ServerLimits& limits = cfg.limits;
  const BackendConfig& backend = *a.backend;
  const std::string& body = *a.body;
  std::string& head = c.up_head;
  UpstreamHead(req, a.target, backend, cfg, log, c.client_addr, body.size(), &head);
  std::vector<Pooled>& pool = pools_[backend.host_header];
  error_code ec;
  Clk::time_point up_start = Clk::now();

  tcp::socket up(io_);
  std::string& resp_head_text = c.up_resp_text;
  // Parsed in place (its header vector keeps its memory across requests).
  http::ResponseHead& rh_parsed = c.up_resp_head;
  Status resp = Status::Ok();
  bool have_resp = false;
  // Two attempts: a pooled connection the backend has closed meanwhile fails
  // before any response byte; that is retried once on a fresh connection.
  // nginx's rule: a request that may not be repeated is not sent twice.
  bool idempotent = req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS" ||
                    req.method == "PUT" || req.method == "DELETE";
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = false;
    // A pooled connection must be silent: readable means the backend closed
    // it or sent bytes nobody asked for; either way it cannot carry a request.
    // Backends close idle connections after seconds (uvicorn 5 s, nginx 75 s),
    // so for a request that may be sent again (below) one idle for less than
    // kPeekAfter is taken without the extra syscall. Any other request peeks
    // a connection idle for longer than a tick of the coarse clock (1-4 ms):
    // a backend that crashed a
    // moment ago leaves closed connections in the pool, and a POST written
    // into one could not be retried. Under load the pool is LIFO and its top
    // was idle for microseconds, so the busy path keeps skipping the syscall.
    while (attempt == 0 && !pool.empty()) {
      Pooled cand = std::move(pool.back());
      pool.pop_back();
      if (CoarseNow() - cand.since < (idempotent ? kPeekAfter : kPeekAfterOnce)) {
        up = std::move(cand.sock);
        reused = true;
        break;
      }
      char probe;
      ssize_t n = ::recv(cand.sock.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        up = std::move(cand.sock);
        reused = true;
        break;
      }
      cand.sock.close(ec);
    }
    if (!reused) {
      up = tcp::socket(io_);
      asio::ip::address addr =
          backend.host == "localhost" ? asio::ip::make_address("127.0.0.1", ec)
                                      : asio::ip::make_address(backend.host, ec);
      if (ec) {
        a.outcome = Outcome::kConnectFailure;
        *failure = internal::ErrorResponse(502, "bad_gateway",
                                           fmt::format("backend '{}' has an invalid address '{}'",
                                                       backend.name, backend.host));
        co_return false;
      }
      c.upstream = &up;
      c.SetDeadline(limits.upstream_connect_timeout);
      co_await up.async_connect(tcp::endpoint(addr, backend.port), Nothrow(ec));
      c.upstream = nullptr;
      if (ec) {
        bool timeout = c.timed_out;
        CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
                   {{"backend", backend.name}, {"kind", timeout ? "connect_timeout" : "connect"}})
            ->Inc();
        *failure = internal::ErrorResponse(
            timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
            fmt::format("cannot connect to backend '{}' ({}): {}", backend.name,
                        backend.host_header, timeout ? "timed out" : ec.message()));
        log.reason = timeout ? "upstream_connect_timeout" : "upstream_connect_failed";
        a.outcome = Outcome::kConnectFailure;
        co_return false;
      }
      up.set_option(tcp::no_delay(true), ec);
    }
    c.upstream = &up;
    c.SetDeadline(a.timeout);
    std::array<asio::const_buffer, 2> out{asio::buffer(head), asio::buffer(body)};
    co_await asio::async_write(up, out, Nothrow(ec));
    c.up_in.Clear();
    bool got_bytes = false;
    bool malformed = false;
    // Interim (1xx) responses are not forwarded: read heads until the final one.
    while (!ec) {
      size_t scanned = 0, head_end = 0;
      http::HeadScan scan = http::HeadScan::kIncomplete;
      while (!ec) {
        scan = http::ScanHead(c.up_in.view(), &scanned, 64 << 10, &head_end);
        if (scan != http::HeadScan::kIncomplete) break;
        size_t avail = 0;
        char* p = c.up_in.Prepare(kReadChunk, &avail);
        asio::mutable_buffer mb(p, avail);
        size_t n = co_await up.async_read_some(mb, Nothrow(ec));
        if (!ec) {
          c.up_in.Commit(n);
          got_bytes = true;
        }
      }
      if (ec) break;
      if (scan != http::HeadScan::kComplete) {
        malformed = true;
        break;
      }
      resp_head_text.assign(c.up_in.view().substr(0, head_end));
      c.up_in.Consume(head_end);
      resp = http::ParseResponseHead(resp_head_text, req.method, &rh_parsed);
      have_resp = true;
      if (!resp.ok() || rh_parsed.status >= 200) break;
    }
    c.upstream = nullptr;
    if (ec) {
      if (reused && !got_bytes && !c.timed_out && idempotent) continue;  // stale pooled connection
      bool timeout = c.timed_out;
      CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
                 {{"backend", backend.name}, {"kind", timeout ? "timeout" : "reset"}})
          ->Inc();
      log.reason = timeout ? "upstream_timeout" : "upstream_reset";
      a.outcome = timeout ? Outcome::kTimeout : Outcome::kReset;
      *failure = internal::ErrorResponse(
          timeout ? 504 : 502, timeout ? "upstream_timeout" : "bad_gateway",
          fmt::format("backend '{}' {}", backend.name,
                      timeout ? "did not answer in time" : "closed the connection"));
      co_return false;
    }
    if (malformed) {
      log.reason = "upstream_bad_response";
      a.outcome = Outcome::kReset;
      *failure = internal::ErrorResponse(502, "bad_gateway",
                                         fmt::format("backend '{}' sent a malformed response head",
                                                     backend.name));
      co_return false;
    }
    break;
  }
  if (!have_resp || !resp.ok()) {
    log.reason = "upstream_bad_response";
    a.outcome = Outcome::kReset;
    *failure = internal::ErrorResponse(
        502, "bad_gateway",
        fmt::format("backend '{}': {}", backend.name, have_resp ? resp.message() : "no response"));
    co_return false;
  }
  log.upstream_s = Seconds(Clk::now() - up_start);
  const http::ResponseHead& rh = rh_parsed;
  a.outcome = rh.status < 500 ? Outcome::kOk
              : (rh.status >= 502 && rh.status <= 504) ? Outcome::kGatewayError
                                                        : Outcome::k5xx;
  if (a.hold_5xx && rh.status >= 500) {
    // The caller retries on another backend; this answer is dropped, and so
    // is the connection (its body is not read).
    up.close(ec);
    log.reason = fmt::format("upstream_status_{}", rh.status);
    *failure = internal::ErrorResponse(
        rh.status, "upstream_error",
        fmt::format("backend '{}' answered {} and no other attempt was possible", backend.name,
                    rh.status));
    co_return false;
  }

  // Response head to the client.
  bool client11 = req.minor_version == 1;
  bool rewrite = openai_stream;  // SSE bytes may change (usage chunk removed)
  bool chunked_out = false;
  std::string& out = c.resp_head;
  out.clear();
  out += "HTTP/1.1 ";
  AppendInt(rh.status, &out);
  out += ' ';
  out += rh.reason.empty() ? http::ReasonPhrase(rh.status) : std::string_view(rh.reason);
  out += "\r\n";
  std::string_view connection;
  if (const http::HeaderView* cv = rh.Find("connection")) connection = cv->value;
  for (const http::HeaderView& hv : rh.headers) {
    if (http::IsHopByHop(hv.name, connection) || http::IEquals(hv.name, "content-length") ||
        http::IEquals(hv.name, "x-request-id")) {
      continue;
    }
    AppendHeader(hv.name, hv.value, &out);
  }
  AppendHeader("x-request-id", log.request_id, &out);
  if (!a.degraded.empty()) AppendHeader("X-Gantry-Degraded", a.degraded, &out);
  if (adm != nullptr && adm->has_rate_headers) {
    out += "RateLimit-Limit: ";
    AppendInt(static_cast<int64_t>(adm->limit), &out);
    out += "\r\nRateLimit-Remaining: ";
    AppendInt(static_cast<int64_t>(adm->remaining), &out);
    out += "\r\nRateLimit-Reset: ";
    AppendInt(static_cast<int64_t>(std::ceil(adm->reset_s)), &out);
    out += "\r\n";
  }
  bool client_close = !req.keep_alive || shared_.draining.load();
  if (rh.framing == http::BodyFraming::kContentLength && !rewrite) {
    out += "Content-Length: ";
    AppendInt(static_cast<int64_t>(rh.content_length), &out);
    out += "\r\n";
  } else if (rh.framing == http::BodyFraming::kNone) {
    // HEAD and 304 answers describe a body that is not sent: keep the
    // backend's (validated) length. Other bodiless answers say 0.
    const http::HeaderView* cl = rh.Find("content-length");
    if (cl != nullptr && (req.method == "HEAD" || rh.status == 304)) {
      fmt::format_to(std::back_inserter(out), "Content-Length: {}\r\n", cl->value);
    } else if (rh.status >= 200 && rh.status != 204 && rh.status != 304 && req.method != "HEAD") {
      out += "Content-Length: 0\r\n";
    }
  } else if (client11) {
    out += "Transfer-Encoding: chunked\r\n";
    chunked_out = true;
  } else {
    client_close = true;  // HTTP/1.0 client: the body ends when we close
  }
  if (client_close) {
    out += "Connection: close\r\n";
  } else if (req.minor_version == 0) {
    out += "Connection: keep-alive\r\n";
  }
  out += "\r\n";
  log.status = rh.status;

  // Body.
  bool sniff = sniff_usage && rh.status < 300;
  std::optional<SseUsageScanner> sse;
  if (openai_stream && sniff) sse.emplace(strip_usage);
  std::string& sniffed = c.sniffed;
  sniffed.clear();
  http::ChunkedDecoder dec(UINT64_MAX);
  uint64_t remaining = rh.framing == http::BodyFraming::kContentLength ? rh.content_length : 0;
  bool up_done = rh.framing == http::BodyFraming::kNone;
  bool up_ok = true;
  std::string& decoded = c.decoded;
  std::string& scanned_out = c.scanned_out;
  std::string& frame = c.frame;
  *headers_sent = true;
  bool client_ok = true;
  // The head goes out with the first body bytes when they are already here
  // (one packet, one wakeup of the client); alone and at once otherwise, so
  // that a stream's head is not held back waiting for its first event.
  bool head_pending = true;
  if (up_done || c.up_in.empty()) {
    c.SetDeadline(limits.send_timeout);
    asio::const_buffer head_buf(out.data(), out.size());
    co_await c.Write(head_buf, ec);
    log.bytes_out += out.size();
    client_ok = !ec;
    head_pending = false;
  }

  while (client_ok && !up_done) {
    if (c.up_in.empty()) {
      size_t avail = 0;
      char* p = c.up_in.Prepare(kReadChunk, &avail);
      c.upstream = &up;
      c.SetDeadline(a.timeout);
      asio::mutable_buffer mb(p, avail);
      size_t n = co_await up.async_read_some(mb, Nothrow(ec));
      c.upstream = nullptr;
      if (ec) {
        if (rh.framing == http::BodyFraming::kUntilClose && ec == asio::error::eof) {
          up_done = true;
        } else {
          up_ok = false;
          log.reason = c.timed_out ? "upstream_timeout" : "upstream_reset";
          a.outcome = c.timed_out ? Outcome::kTimeout : Outcome::kReset;
          break;
        }
      } else {
        c.up_in.Commit(n);
      }
    }
    // Payload bytes available now, per upstream framing.
    decoded.clear();
    std::string_view payload;
    if (rh.framing == http::BodyFraming::kContentLength) {
      size_t take = static_cast<size_t>(std::min<uint64_t>(remaining, c.up_in.size()));
      payload = c.up_in.view().substr(0, take);
      remaining -= take;
      if (remaining == 0) up_done = true;
    } else if (rh.framing == http::BodyFraming::kChunked) {
      size_t used = 0;
      Status s = dec.Feed(c.up_in.view(), &decoded, &used);
      c.up_in.Consume(used);
      if (!s.ok()) {
        up_ok = false;
        log.reason = "upstream_bad_chunking";
        a.outcome = Outcome::kReset;
        break;
      }
      if (dec.done()) up_done = true;
      payload = decoded;
    } else {
      payload = c.up_in.view();
    }
    if (sniff && !sse && sniffed.size() + payload.size() <= kMaxSniffedResponse) {
      sniffed.append(payload);
    }
    std::string_view send = payload;
    if (sse) {
      scanned_out.clear();
      sse->Feed(payload, &scanned_out);
      if (up_done) sse->Finish(&scanned_out);
      send = scanned_out;
    }
    frame.clear();
    if (chunked_out) {
      http::AppendChunk(send, &frame);
      if (up_done) frame += http::kLastChunk;
    }
    std::string_view wire = chunked_out ? std::string_view(frame) : send;
    if (!wire.empty() || head_pending) {
      c.SetDeadline(limits.send_timeout);
      std::array<asio::const_buffer, 2> bufs{
          asio::const_buffer(out.data(), head_pending ? out.size() : 0),
          asio::const_buffer(wire.data(), wire.size())};
      co_await c.Write(bufs, ec);
      log.bytes_out += wire.size() + (head_pending ? out.size() : 0);
      head_pending = false;
      if (ec) client_ok = false;
    }
    if (rh.framing == http::BodyFraming::kContentLength) {
      c.up_in.Consume(payload.size());
    } else if (rh.framing == http::BodyFraming::kUntilClose) {
      c.up_in.Consume(payload.size());
    }
  }
  if (sse) {
    const Usage& u = sse->usage();
    if (u.present) {
      log.prompt_tokens = u.prompt_tokens;
      log.completion_tokens = u.completion_tokens;
    }
  } else if (sniff && !sniffed.empty()) {
    Usage u = SniffUsage(sniffed);
    if (u.present) {
      log.prompt_tokens = u.prompt_tokens;
      log.completion_tokens = u.completion_tokens;
    }
  }
  if (log.prompt_tokens + log.completion_tokens > 0 && !log.model.empty()) {
    auto tc = token_counters_.find(log.model);
    if (tc == token_counters_.end()) {
      // Model names come from clients: bound the label values.
      std::string model_label = token_counters_.size() >= kMaxModelLabels ? "other" : log.model;
      tc = token_counters_.find(model_label);
      if (tc == token_counters_.end()) {
        tc = token_counters_
               .emplace(model_label,
                        std::make_pair(
                            CounterFor("gantry_gateway_tokens_total",
                                       "LLM tokens reported by backends",
                                       {{"model", model_label}, {"kind", "prompt"}}),
                            CounterFor("gantry_gateway_tokens_total",
                                       "LLM tokens reported by backends",
                                       {{"model", model_label}, {"kind", "completion"}})))
                 .first;
      }
    }
    if (tc->second.first) tc->second.first->Inc(static_cast<double>(log.prompt_tokens));
    if (tc->second.second) tc->second.second->Inc(static_cast<double>(log.completion_tokens));
  }
  if (!up_ok) {
    CounterFor("gantry_gateway_upstream_errors_total", "Failed exchanges with backends",
               {{"backend", backend.name}, {"kind", "body"}})
        ->Inc();
  }
  // Reuse the upstream connection only after a complete, well-framed response
  // with nothing extra behind it.
  if (up_ok && up_done && client_ok && rh.keep_alive && c.up_in.empty() &&
      pool.size() < backend.max_idle) {
    pool.push_back(Pooled{std::move(up), CoarseNow()});
  } else {
    up.close(ec);
  }
  auto hist = upstream_seconds_.find(backend.name);
  if (hist == upstream_seconds_.end()) {
    hist = upstream_seconds_
               .emplace(backend.name,
                        HistogramFor("gantry_gateway_upstream_duration_seconds",
                                     "Time from sending a request upstream to its response head",
                                     {{"backend", backend.name}}))
               .first;
  }
  if (hist->second != nullptr) hist->second->Observe(log.upstream_s);
  // A response cut short cannot be completed: close the client connection so
  // it sees the truncation.
  co_return up_ok && client_ok && !client_close;
}

void Worker::Finish(const http::RequestHead* req, RequestLog& log, Clk::time_point start) {
  double seconds = Seconds(Clk::now() - start);
  auto it = route_stats_.find(log.route);
  if (it == route_stats_.end()) {
    it = route_stats_.emplace(log.route, RouteStats{}).first;
    it->second.duration =
        HistogramFor("gantry_gateway_request_duration_seconds",
                     "Time from the end of the request head to the end of the response",
                     {{"route", log.route}});
  }
  RouteStats& rs = it->second;
  size_t code = log.status >= 0 && log.status < 600 ? static_cast<size_t>(log.status) : 0;
  if (rs.by_status[code] == nullptr) {
    rs.by_status[code] = CounterFor("gantry_gateway_requests_total", "Requests by route and status",
                                    {{"route", log.route}, {"status", std::to_string(code)}});
  }
  if (rs.by_status[code] != nullptr) rs.by_status[code]->Inc();
  if (rs.duration != nullptr) rs.duration->Observe(seconds);
  if (!shared_.audit) return;
  // Built in a per-worker buffer that keeps its capacity; Append copies it.
  std::string& rec = audit_rec_;
  rec.clear();
  auto field = [&rec](std::string_view name, std::string_view value) {
    rec += ",\"";
    rec += name;
    rec += "\":\"";
    internal::AppendJsonEscaped(value, &rec);
    rec += '"';
  };
  auto now = std::chrono::system_clock::now();
  int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  rec += "{\"time_ms\":";
  AppendInt(ms, &rec);
  field("request_id", log.request_id);
  field("key_id", log.key_id);
  field("role", log.role);
  field("method", req ? req->method : std::string_view());
  field("path", req ? req->path : std::string_view());
  field("route", log.route);
  field("model", log.model);
  field("backend", log.backend);
  field("decision", log.decision);
  field("reason", log.reason);
  field("client", log.client);
  rec += ",\"status\":";
  AppendInt(log.status, &rec);
  rec += ",\"latency_ms\":";
  AppendMillis(seconds * 1e3, &rec);
  rec += ",\"upstream_ms\":";
  AppendMillis(log.upstream_s < 0 ? 0.0 : log.upstream_s * 1e3, &rec);
  rec += ",\"prompt_tokens\":";
  AppendInt(log.prompt_tokens, &rec);
  rec += ",\"completion_tokens\":";
  AppendInt(log.completion_tokens, &rec);
  rec += ",\"bytes_in\":";
  AppendInt(static_cast<int64_t>(log.bytes_in), &rec);
  rec += ",\"bytes_out\":";
  AppendInt(static_cast<int64_t>(log.bytes_out), &rec);
  rec += '}';
  shared_.audit->Append(rec);
}

}  // namespace

namespace internal {

void AppendJsonEscaped(std::string_view s, std::string* out) {
  // Runs of characters that need no escape are appended whole.
  size_t run = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(u, 6);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
}

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
  AppendJsonEscaped(message, &r.body);
  r.body += "\",\"type\":\"" + type + "\"}}";
  return r;
}

}  // namespace internal

// ---------------------------------------------------------------------------

struct Gateway::Impl {
  Shared shared;
  std::unique_ptr<asio::ssl::context> tls;
  std::vector<std::unique_ptr<Worker>> workers;
  uint16_t port = 0;
  std::string host;
  bool started = false;
  std::mutex stop_mu;
  bool stopped = false;
  std::thread stopper;
};

namespace {

Result<std::shared_ptr<const Runtime>> BuildRuntime(GatewayConfig config) {
  auto rt = std::make_shared<Runtime>();
  Result<security::Policy> policy = security::Policy::Create(config.roles);
  if (!policy.ok()) return policy.status();
  rt->policy = std::move(*policy);
  if (config.jwt) {
    ASSIGN_OR_RETURN(rt->jwt, security::JwtVerifier::Create(*config.jwt));
  }
  rt->config = std::move(config);
  return std::shared_ptr<const Runtime>(std::move(rt));
}

Status InitMetrics(Shared& s) {
  auto& r = s.registry;
  internal::Metrics& m = s.m;
  ASSIGN_OR_RETURN(m.active_connections,
                   r.GetGauge("gantry_gateway_active_connections", "Open client connections"));
  ASSIGN_OR_RETURN(m.connections_total, r.GetCounter("gantry_gateway_connections_total",
                                                     "Client connections accepted"));
  ASSIGN_OR_RETURN(m.connections_rejected,
                   r.GetCounter("gantry_gateway_connections_rejected_total",
                                "Client connections refused at limits.max_connections"));
  ASSIGN_OR_RETURN(m.redis_up, r.GetGauge("gantry_gateway_redis_up",
                                          "1 when the shared limit store (Redis) answers"));
  ASSIGN_OR_RETURN(m.redis_configured, r.GetGauge("gantry_gateway_redis_configured",
                                                  "1 when limits are shared through Redis"));
  ASSIGN_OR_RETURN(m.redis_errors, r.GetCounter("gantry_gateway_redis_errors_total",
                                                "Redis commands that failed or timed out"));
  ASSIGN_OR_RETURN(m.audit_records, r.GetCounter("gantry_gateway_audit_records_total",
                                                 "Records appended to the audit log"));
  ASSIGN_OR_RETURN(m.audit_dropped, r.GetCounter("gantry_gateway_audit_dropped_total",
                                                 "Audit records dropped because the queue was full"));
  ASSIGN_OR_RETURN(m.reloads_ok, r.GetCounter("gantry_gateway_config_reloads_total",
                                              "Configuration reloads", {{"result", "ok"}}));
  ASSIGN_OR_RETURN(m.reloads_failed, r.GetCounter("gantry_gateway_config_reloads_total",
                                                  "Configuration reloads", {{"result", "error"}}));
  ASSIGN_OR_RETURN(m.keys_loaded, r.GetGauge("gantry_gateway_api_keys", "API keys loaded"));
  ASSIGN_OR_RETURN(m.tls_handshake_errors,
                   r.GetCounter("gantry_gateway_tls_handshake_errors_total",
                                "Client connections that failed the TLS handshake"));
  return Status::Ok();
}

}  // namespace

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() {
  Stop(0);
  Wait();
}

uint16_t Gateway::port() const { return impl_->port; }

std::string Gateway::url() const {
  std::string scheme = impl_->tls ? "https" : "http";
  std::string host = impl_->host.find(':') != std::string::npos ? "[" + impl_->host + "]"
                                                                : impl_->host;
  return fmt::format("{}://{}:{}", scheme, host, impl_->port);
}

}  // namespace gantry::gateway

namespace gantry::gateway {

Result<std::unique_ptr<Gateway>> Gateway::Create(GatewayConfig config) {
  auto impl = std::make_unique<Impl>();
  Shared& sh = impl->shared;
  RETURN_IF_ERROR(InitMetrics(sh));
  sh.instance = security::HexEncode(security::RandomBytes(4));
  Result<std::unique_ptr<security::KeyStore>> ks = security::KeyStore::Open(config.state_path);
  if (!ks.ok()) return ks.status().WithContext(fmt::format("state file '{}'", config.state_path));
  sh.key_store = std::move(*ks);
  ASSIGN_OR_RETURN(std::shared_ptr<const security::KeyTable> keys, sh.key_store->Snapshot());
  sh.m.keys_loaded->Set(static_cast<double>(keys->size()));
  config.limiter.state_path = config.state_path;
  ASSIGN_OR_RETURN(sh.limiter, Limiter::Create(config.limiter, nullptr));
  if (!config.audit.path.empty()) {
    security::AuditOptions ao;
    ao.path = config.audit.path;
    ao.checkpoint_every = config.audit.checkpoint_every;
    ao.checkpoint_interval_s = config.audit.checkpoint_interval_s;
    if (!config.audit.signing_key_path.empty()) {
      Result<std::string> pem = ReadFile(config.audit.signing_key_path);
      if (!pem.ok()) {
        return pem.status().WithContext(
            fmt::format("audit.signing_key '{}' (make one with: gantry audit keygen --out PREFIX)",
                        config.audit.signing_key_path));
      }
      ao.signing_key_pem = std::move(*pem);
    }
    Result<std::unique_ptr<security::AuditLog>> audit = security::AuditLog::Open(ao);
    if (!audit.ok()) return audit.status().WithContext(fmt::format("audit log '{}'", ao.path));
    sh.audit = std::move(*audit);
  }
  {
    Result<std::unique_ptr<AnomalyDetector>> det =
        AnomalyDetector::Create(config.anomaly, &sh.registry);
    if (!det.ok()) return det.status().WithContext(fmt::format("{}: anomaly", config.source));
    sh.anomaly = std::move(*det);
  }
  sh.balancer = std::make_unique<Balancer>();
  sh.balancer->AttachMetrics(&sh.registry);
  ASSIGN_OR_RETURN(std::shared_ptr<const Runtime> rt, BuildRuntime(std::move(config)));
  sh.balancer->Configure(rt->config);
  sh.Publish(std::move(rt), std::move(keys));
  // Gauges and counters that mirror state owned elsewhere are refreshed at
  // scrape time rather than on the request path.
  Shared* shp = &sh;
  auto last_redis_errors = std::make_shared<uint64_t>(0);
  auto last_audit = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);
  sh.registry.AddCollectHook([shp, last_redis_errors, last_audit] {
    shp->m.redis_configured->Set(shp->limiter->redis_configured() ? 1 : 0);
    shp->m.redis_up->Set(shp->limiter->redis_up() ? 1 : 0);
    uint64_t e = shp->limiter->redis_errors();
    if (e > *last_redis_errors) shp->m.redis_errors->Inc(static_cast<double>(e - *last_redis_errors));
    *last_redis_errors = e;
    if (shp->audit) {
      uint64_t w = shp->audit->written(), d = shp->audit->dropped();
      if (w > last_audit->first) shp->m.audit_records->Inc(static_cast<double>(w - last_audit->first));
      if (d > last_audit->second) shp->m.audit_dropped->Inc(static_cast<double>(d - last_audit->second));
      *last_audit = {w, d};
    }
  });
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

Status Gateway::Start() {
  Impl& im = *impl_;
  const GatewayConfig& cfg = im.shared.runtime->config;
  boost::system::error_code ec;
  if (!cfg.tls.cert_path.empty()) {
    im.tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    // TLS 1.2 and 1.3 only; OpenSSL's default cipher list otherwise.
    im.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                            asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                            asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                        ec);
    im.tls->use_certificate_chain_file(cfg.tls.cert_path, ec);
    if (ec) {
      return InvalidArgument(fmt::format("{}: tls.cert '{}': {}", cfg.source, cfg.tls.cert_path,
                                         ec.message()));
    }
    im.tls->use_private_key_file(cfg.tls.key_path, asio::ssl::context::pem, ec);
    if (ec) {
      return InvalidArgument(fmt::format("{}: tls.key '{}': {} (PEM private key matching the cert)",
                                         cfg.source, cfg.tls.key_path, ec.message()));
    }
  }
  asio::ip::address addr = asio::ip::make_address(
      cfg.listen_host == "localhost" ? "127.0.0.1" : cfg.listen_host, ec);
  if (ec) {
    return InvalidArgument(fmt::format("{}: listen address '{}' is not a numeric IP address",
                                       cfg.source, cfg.listen_host));
  }
  uint16_t port = cfg.listen_port;
  for (int i = 0; i < cfg.workers; ++i) {
    auto w = std::make_unique<Worker>(im.shared, i, im.tls.get());
    // With port 0 the first listener picks the port and the others join it
    // through SO_REUSEPORT.
    RETURN_IF_ERROR(w->Listen(tcp::endpoint(addr, port)));
    if (port == 0) port = w->BoundPort();
    im.workers.push_back(std::move(w));
  }
  im.port = port;
  im.host = addr.to_string();
  if (im.shared.anomaly) im.shared.anomaly->Start();
  for (auto& w : im.workers) w->Start();
  im.started = true;
  return Status::Ok();
}

Status Gateway::Reload(GatewayConfig config) {
  Impl& im = *impl_;
  std::shared_ptr<const Runtime> cur;
  {
    std::lock_guard<std::mutex> lock(im.shared.mu);
    cur = im.shared.runtime;
  }
  const GatewayConfig& old = cur->config;
  std::vector<std::string> fixed;
  if (config.listen_host != old.listen_host ||
      (config.listen_port != old.listen_port && config.listen_port != 0)) {
    fixed.push_back("listen");
  }
  if (config.workers != old.workers) fixed.push_back("workers");
  if (config.tls.cert_path != old.tls.cert_path || config.tls.key_path != old.tls.key_path) {
    fixed.push_back("tls");
  }
  if (config.state_path != old.state_path) fixed.push_back("state");
  bool redis_changed =
      config.limiter.redis.has_value() != old.limiter.redis.has_value() ||
      (config.limiter.redis && (config.limiter.redis->host != old.limiter.redis->host ||
                                config.limiter.redis->port != old.limiter.redis->port ||
                                config.limiter.redis->prefix != old.limiter.redis->prefix ||
                                config.limiter.redis->fail_closed != old.limiter.redis->fail_closed ||
                                config.limiter.redis->timeout_s != old.limiter.redis->timeout_s ||
                                config.limiter.redis->password != old.limiter.redis->password));
  if (redis_changed) fixed.push_back("redis");
  if (config.audit.path != old.audit.path ||
      config.audit.signing_key_path != old.audit.signing_key_path) {
    fixed.push_back("audit");
  }
  if (!fixed.empty()) {
    im.shared.m.reloads_failed->Inc();
    return FailedPrecondition(fmt::format(
        "{}: changing {} needs a restart; the running configuration is unchanged", config.source,
        fmt::join(fixed, ", ")));
  }
  config.limiter.state_path = config.state_path;
  config.listen_port = old.listen_port;
  Status s = im.shared.limiter->Reconfigure(config.limiter);
  if (!s.ok()) {
    im.shared.m.reloads_failed->Inc();
    return s.WithContext(config.source);
  }
  if (im.shared.anomaly) {
    Status as = im.shared.anomaly->Reconfigure(config.anomaly);
    if (!as.ok()) {
      im.shared.m.reloads_failed->Inc();
      return as.WithContext(fmt::format("{}: anomaly", config.source));
    }
  }
  Result<std::shared_ptr<const Runtime>> rt = BuildRuntime(std::move(config));
  if (!rt.ok()) {
    im.shared.m.reloads_failed->Inc();
    return rt.status();
  }
  im.shared.balancer->Configure((*rt)->config);
  im.shared.Publish(std::move(*rt), nullptr);
  im.shared.m.reloads_ok->Inc();
  return Status::Ok();
}

Status Gateway::RefreshKeys() {
  Shared& sh = impl_->shared;
  ASSIGN_OR_RETURN(bool changed, sh.key_store->ChangedSinceSnapshot());
  if (!changed) return Status::Ok();
  ASSIGN_OR_RETURN(std::shared_ptr<const security::KeyTable> keys, sh.key_store->Snapshot());
  sh.m.keys_loaded->Set(static_cast<double>(keys->size()));
  sh.Publish(nullptr, std::move(keys));
  return Status::Ok();
}

void Gateway::Stop(int grace_ms) {
  Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.stop_mu);
  if (im.stopped) return;
  im.stopped = true;
  if (!im.started) return;
  im.shared.draining.store(true);
  for (auto& w : im.workers) w->Drain();
  im.stopper = std::thread([&im, grace_ms] {
    auto until = Clk::now() + std::chrono::milliseconds(grace_ms);
    while (Clk::now() < until) {
      bool idle = true;
      for (auto& w : im.workers) idle = idle && w->Idle();
      if (idle) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& w : im.workers) w->Stop();
  });
}

void Gateway::Wait() {
  Impl& im = *impl_;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(im.stop_mu);
      if (im.stopped) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (im.stopper.joinable()) im.stopper.join();
  for (auto& w : im.workers) w->Join();
  im.workers.clear();
  if (im.shared.audit) {
    Status s = im.shared.audit->Close();
    if (!s.ok()) log::error("audit log: {}", s.ToString());
  }
  Status f = im.shared.limiter->Flush();
  if (!f.ok()) log::error("quota usage: {}", f.ToString());
}

}  // namespace gantry::gateway
