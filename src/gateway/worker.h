// The gateway's request path: one Worker per event loop, a Conn per client
// connection, and one Request context per request that the parts of the path
// hand each other. Not a public interface.
//
// A request goes through, in order (one file each):
//   session.cc     Accept; Session reads the head (idle/header timeouts,
//                  keep-alive) and the body, writes local answers (WriteLocal)
//   gate.cc        Gate: built-in endpoints, route match, credentials
//                  (Authenticate) on the head alone, before any body is read
//   admission.cc   Serve: what is called (model, stream), RBAC, target,
//                  limits and quotas, then backend choice and retries
//   proxy.cc       Proxy: one attempt against one backend (upstream.h does the
//                  exchange up to the response head), streaming the body back,
//                  usage sniffing
//   access_log.cc  Finish: per-route metrics and the audit record
// server.cc holds the Gateway's lifecycle (create, start, reload, stop).
//
// Thread contract. Each Worker runs its own io_context on its own thread, and
// everything a Worker owns (its connections and their Requests, its
// UpstreamPool, its metric-series and key caches, its LimiterLoop) is touched
// only on that thread: no locks, not even inside Asio (the io_context is
// created BOOST_ASIO_CONCURRENCY_HINT_UNSAFE: its scheduler and reactor lock
// nothing). Other threads reach a Worker only through two atomic flags
// (Drain, Stop) that the loop itself polls (Control). What workers share is
// internal::Shared (internal.h): the published Runtime and key table (behind
// Shared::mu, re-read when Shared::generation changes), and objects that are
// internally synchronised: the Limiter, Balancer, AuditLog, AnomalyDetector,
// KeyStore and the metrics Registry (whose series are atomics).
//
// Coroutine code here passes references to the caller's state, never
// temporaries or class objects by value, into co_await expressions: GCC 12
// destroys some of those twice.
#pragma once

// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <array>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "buffer.h"
#include "deadline.h"
#include "gantry/core/http_parser.h"
#include "gantry/core/metrics.h"
#include "gantry/gateway/limits.h"
#include "internal.h"
#include "pool.h"
#include "sniff.h"
#include "upstream.h"

namespace gantry::gateway::internal {

inline constexpr size_t kReadChunk = 16 << 10;

// Per-request number formatting without fmt's parse and buffer steps.
inline void AppendInt(int64_t v, std::string* out) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof(b), v);
  // (pointer, length): the iterator-range overload goes through _M_replace.
  out->append(b, static_cast<size_t>(r.ptr - b));
}

// "name: value\r\n" with one capacity check: the string is grown once and
// written in place (std::string has no uninitialised resize before C++23).
inline void AppendHeader(std::string_view name, std::string_view value, std::string* out) {
  const size_t at = out->size();
  out->resize(at + name.size() + value.size() + 4);
  char* p = out->data() + at;
  std::memcpy(p, name.data(), name.size());
  p += name.size();
  *p++ = ':';
  *p++ = ' ';
  std::memcpy(p, value.data(), value.size());
  p += value.size();
  *p++ = '\r';
  *p = '\n';
}

// The header names the proxy treats specially, case-insensitively
// (ClassifyHeader, proxy.cc). kHopByHop is http::IsHopByHop's fixed list.
enum class HeaderName : uint8_t {
  kOther,
  kHopByHop,
  kHost,
  kContentLength,
  kExpect,
  kRequestId,
  kForwardedFor,
  kForwardedProto,
  kForwardedHost,
  kAuthorization,
  kApiKey,
};
HeaderName ClassifyHeader(std::string_view name);
// http::IsHopByHop(name, connection) for a name ClassifyHeader gave `kind`,
// without its list walk: the fixed list is the kind, and a Connection value of
// just "keep-alive" names no other header.
bool IsHopByHop(std::string_view name, HeaderName kind, std::string_view connection);

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

  // Back to the state of a new request, keeping the strings' capacity.
  void Reset() {
    for (std::string* f : {&request_id, &model, &reason, &key_id, &role, &backend}) f->clear();
    // Most requests leave these as they were: skip the assignment then.
    if (route != "-") route.assign("-");
    if (decision != "allow") decision.assign("allow");
    status = 0;
    prompt_tokens = completion_tokens = 0;
    bytes_in = bytes_out = 0;
    upstream_s = -1;
  }
};

// What Gate decides from the head: the route (null for the admin API) and
// the caller.
struct GateResult {
  const RouteConfig* route = nullptr;
  bool admin = false;
  Identity who{"anonymous", "", {}};

  void Reset() {
    route = nullptr;
    admin = false;
    who.kind = "anonymous";
    who.key_id.clear();
    who.roles.clear();
  }
};

// What is being called and how it was admitted: filled by Serve's phases
// (admission.cc), read by Proxy and after the response.
struct Call {
  std::string model;  // "" when the request names none
  double estimated_tokens = 0;
  bool openai_stream = false;          // an OpenAI request with "stream": true
  bool strip_usage = false;            // include_usage was injected: hide the usage chunk
  bool sniff_usage = false;            // read usage from the response (OpenAI)
  bool want_outputs = false;           // keep a KServe infer response for anomaly detection
  std::optional<KserveTarget> kserve;  // a KServe route's parsed path
  std::string role;                    // the role that allowed it ("" without auth)
  Target target;                       // pool or rollout
  bool repeatable = false;             // may be sent to another backend after a failure
  bool limited = false;                // went through the limiter: Settle after the response
  Admission adm;

  void Reset() {
    model.clear();
    estimated_tokens = 0;
    openai_stream = strip_usage = sniff_usage = want_outputs = false;
    kserve.reset();
    role.clear();
    target = Target{};
    repeatable = limited = false;
    adm = Admission{};
  }
};

struct Conn;

// One request, from its complete head to Finish(). Lives in its Conn and is
// reset for every request of a keep-alive connection, so that its strings'
// capacity is allocated once per connection.
struct Request {
  explicit Request(Conn& c) : conn(c) {}
  Conn& conn;
  // The configuration this request runs under, pinned by the session for the
  // whole request (a reload may publish another meanwhile).
  const Runtime* rt = nullptr;
  // A newer configuration than rt, when the backend chosen for this request
  // is one that rt does not know (added, removed or renumbered by a reload or
  // the admin API after the request began: Worker::PickConfig). Keeps the
  // chosen backend's BackendConfig alive until the request is done.
  std::shared_ptr<const Runtime> pick_rt;
  bool has_head = false;    // false for answers to heads that did not parse
  http::RequestHead head;   // views into Conn::head_text
  std::string body;         // whole, de-chunked
  Clk::time_point start{};  // when the head was complete
  bool close = false;       // the client or a drain closes the connection after it
  RequestLog log;
  GateResult gate;
  Call call;
  // A response made by the gateway: a refusal (gate, admission), or the
  // failure to report when no backend's response reached the client.
  LocalResponse answer;
  bool headers_sent = false;  // a backend's response head went to the client

  // At the start of a request. Call is reset after Finish() instead, so that
  // no admission (and the limiter plan it holds) outlives its request.
  void Reset() {
    has_head = false;
    close = false;
    pick_rt.reset();
    log.Reset();
    gate.Reset();
    answer = LocalResponse{};
    headers_sent = false;
  }
};

// One try of a request against one backend: what to send, and how it ended.
struct Attempt {
  const BackendConfig* backend = nullptr;
  const std::string* body = nullptr;     // the client's body, or a fallback tier's rewrite
  std::string_view target;               // request target sent upstream
  std::chrono::milliseconds timeout{0};  // first byte and between bytes
  std::string_view degraded;             // X-Gantry-Degraded value; empty when not degraded
  // A 5xx answer is not forwarded (the caller will retry elsewhere);
  // Request::answer then describes it.
  bool hold_5xx = false;
  Outcome outcome = Outcome::kOk;  // out: for outlier detection and retries
};

class Worker;

// One client connection.
struct Conn {
  Conn(Worker& worker, boost::asio::ip::tcp::socket s)
      : w(worker), sock(std::move(s)), deadline(sock), req(*this) {}
  Worker& w;
  boost::asio::ip::tcp::socket sock;
  Deadline deadline;
  bool idle = true;                   // waiting for a request (Drain closes it)
  std::shared_ptr<const Runtime> rt;  // the configuration of the current request
  Buffer in;
  Buffer up_in{kReadChunk};
  std::string client_addr;
  // Per-request scratch, reused across the requests of a keep-alive
  // connection so that their capacity is allocated once, not per request.
  std::string head_text, up_head, up_resp_text, resp_head, sniffed, decoded, scanned_out, frame;
  http::ResponseHead up_resp_head;  // views into up_resp_text
  Request req;

  // Set when the listener terminates TLS; reads and writes go through it.
  std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls;

  // Plain functions, not coroutines: they hand back the operation's own
  // awaitable, so an I/O costs no extra coroutine frame.
  boost::asio::awaitable<size_t> ReadSome(boost::asio::mutable_buffer b,
                                          boost::system::error_code& ec) {
    if (tls) return tls->async_read_some(b, Nothrow(ec));
    return sock.async_read_some(b, Nothrow(ec));
  }
  template <typename Buffers>
  boost::asio::awaitable<size_t> Write(const Buffers& b, boost::system::error_code& ec) {
    if (tls) return boost::asio::async_write(*tls, b, Nothrow(ec));
    return boost::asio::async_write(sock, b, Nothrow(ec));
  }
};

class Worker {
 public:
  // io_ is used by one thread only: by the constructing thread until Start()
  // (listening, spawning the first coroutines), then by the worker's thread
  // until Join(). Nothing posts to it from elsewhere, so Asio does no locking
  // at all (per operation its scheduler took and released a mutex several
  // times).
  Worker(Shared& shared, int index, boost::asio::ssl::context* tls)
      : shared_(shared),
        index_(index),
        tls_(tls),
        io_(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE),
        acceptor_(io_) {}
  ~Worker() {
    // Pooled upstream sockets belong to io_; close them while it lives.
    upstream_.Clear();
  }

  // --- lifecycle (server.cc); any thread ---
  Status Listen(const boost::asio::ip::tcp::endpoint& ep);
  uint16_t BoundPort() const;
  // Attaches the limiter and starts the thread that runs the loop.
  void Start();
  // Stops accepting and closes idle keep-alive connections; busy ones close
  // after their current response (Shared::draining). Asynchronous: the loop
  // acts on it within kControlPeriod.
  void Drain() { drain_requested_.store(true, std::memory_order_release); }
  // Stops the loop (within kControlPeriod); Join() waits for it.
  void Stop() { stop_requested_.store(true, std::memory_order_release); }
  void Join();
  bool Idle() const { return open_conns_.load() == 0; }

 private:
  // How often the loop looks at drain_requested_ and stop_requested_.
  static constexpr std::chrono::milliseconds kControlPeriod{10};
  // The loop's side of Drain() and Stop() (server.cc).
  boost::asio::awaitable<void> Control();

  // --- session.cc ---
  boost::asio::awaitable<void> Accept();
  boost::asio::awaitable<void> Watchdog(std::shared_ptr<Conn> c);
  boost::asio::awaitable<void> Session(std::shared_ptr<Conn> c);
  // How reading a request body ended.
  enum class BodyRead { kDone, kMore, kRefused, kGone };
  // The body when it needs no read: none, or all of it in Conn::in already.
  BodyRead TakeBody(Request& r);
  // The body otherwise (kMore from TakeBody): reads it, answering 100
  // Continue when asked. kRefused: r.answer says why; kGone: the client went away.
  boost::asio::awaitable<BodyRead> ReadBody(Request& r);
  // Writes `resp` (a local answer) to r's client; with `close`, asks it to
  // close. True when the connection may carry another request.
  boost::asio::awaitable<bool> WriteLocal(Request& r, const LocalResponse& resp, bool close);
  // Re-reads the published runtime and key table when they changed.
  void Refresh();
  void NextRequestId(std::string* out);

  // --- gate.cc ---
  // What can be decided from the head alone, before a body is read:
  // built-in endpoints, the route, the caller. False with r.answer set when
  // the answer is already known.
  bool Gate(Request& r);
  // Fills r.gate.who (reusing its strings) or returns PermissionDenied with
  // *reason set.
  Status Authenticate(Request& r, std::string* reason);

  // --- admission.cc ---
  // Serves a request whose head passed Gate and whose body is read. False
  // when the connection must close afterwards.
  boost::asio::awaitable<bool> Serve(Request& r);
  // Serve's phases. Those returning bool return false with r.answer (and the
  // log's decision and reason) set when the request is refused there.
  LocalResponse Admin(Request& r);
  bool IdentifyCall(Request& r);  // model, stream and usage flags (OpenAI, KServe)
  bool Authorize(Request& r);     // RBAC, deny by default
  void SelectTarget(Request& r);  // the first model rule that matches, else the route's
  bool Admitted(Request& r);      // the limiter's decision in r.call.adm
  // The configuration whose pool and backend indexes `pick` uses: the
  // request's own, or else the newest published one (pinned in r.pick_rt);
  // null when neither (a reload or admin change is being published: the
  // balancer and the published runtime differ for a moment).
  const GatewayConfig* PickConfig(Request& r, const Pick& pick);
  // Fills `a` for `pick` (whose indexes are into `cfg`): the backend, and for a
  // degraded (fallback) pick its rewritten body or target, which live in the
  // caller's strings.
  bool PrepareAttempt(Request& r, const GatewayConfig& cfg, const Pick& pick, Attempt& a,
                      std::string& rewritten, std::string& rewritten_target);
  void RecordOutput(Request& r, const GatewayConfig& cfg, const Pick& pick);  // anomaly detection
  void Settle(Request& r);  // actual tokens to the limiter
  // Waits `d` on this worker's loop (retry backoff, pending requests).
  boost::asio::awaitable<void> Sleep(std::chrono::milliseconds d);

  // --- proxy.cc ---
  // One attempt of r against a.backend. Once the response head is sent,
  // r.headers_sent is true and the result says whether the client connection
  // may carry another request. Before that (the attempt failed: connect,
  // reset, timeout, bad head, or a held 5xx) r.answer describes the failure
  // and a.outcome says how it ended.
  boost::asio::awaitable<bool> Proxy(Request& r, Attempt& a);
  // The request head sent upstream, into Conn::up_head.
  void BuildUpstreamHead(Request& r, const Attempt& a, size_t body_size);
  // How the response body goes to the client.
  struct ClientFraming {
    bool chunked = false;  // re-chunked (the backend's length is not kept)
    bool close = false;    // the connection closes after it
  };
  // The response head sent to the client for the backend's head `rh`, into
  // Conn::resp_head.
  ClientFraming BuildResponseHead(Request& r, const Attempt& a, const http::ResponseHead& rh);
  // r.answer, r.log.reason, a.outcome and the error counter for an exchange
  // that ended before a usable response head.
  void UpstreamFailed(Request& r, Attempt& a, const UpstreamExchange& x);
  void CountTokens(const RequestLog& log);

  // --- access_log.cc ---
  // Per-route metrics and the audit record of a finished request.
  void Finish(Request& r);
  metrics::Counter* CounterFor(std::string_view name, std::string_view help,
                               const metrics::Labels& labels);
  metrics::Histogram* HistogramFor(std::string_view name, std::string_view help,
                                   const metrics::Labels& labels);

  Shared& shared_;
  int index_;
  boost::asio::ssl::context* tls_;  // null: plain HTTP
  // Declared before io_ so that they outlive it: destroying io_ destroys
  // suspended sessions, whose cleanup touches them.
  std::set<Conn*> conns_;
  std::atomic<int64_t> open_conns_{0};
  std::atomic<bool> drain_requested_{false};
  std::atomic<bool> stop_requested_{false};
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
  std::unique_ptr<LimiterLoop> limiter_;
  std::shared_ptr<const Runtime> rt_;
  std::shared_ptr<const security::KeyTable> keys_;
  uint64_t generation_ = 0;
  uint64_t request_seq_ = 0;
  UpstreamPool upstream_;
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
  Buffer audit_rec_{4 << 10};  // Finish() builds the audit record here
};

}  // namespace gantry::gateway::internal
