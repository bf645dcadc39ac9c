// Pooled keep-alive connections from one worker to its backends, and one
// exchange over them: connect or reuse, send the request, read the response
// head. Not a public interface.
//
// Thread contract: an UpstreamPool belongs to one Worker and is used only on
// that worker's io_context thread (no locks). Nothing here is shared between
// workers; the Balancer (pool.h), which is, only sees the Outcome of an
// exchange (OutcomeOf below), reported by the caller.
//
// The rules for a pooled connection, in the order they apply:
//   - reuse is LIFO: the connection that went idle last is taken first, so
//     under load the top of the stack was idle for microseconds and the rest
//     ages out at the backend (Take);
//   - a pooled connection must be silent. Readable means the backend closed
//     it or sent bytes nobody asked for; either way it cannot carry a request.
//     Checking costs a recv(MSG_PEEK) syscall, so it is done only when the
//     connection was idle long enough to have been closed (NeedsPeek);
//   - a request sent on a reused connection that then fails before any
//     response byte is sent once more on a fresh connection, but only when it
//     may be repeated (MayResend; nginx's rule: a request that may not be
//     repeated is not sent twice).
#pragma once

// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "buffer.h"
#include "deadline.h"
#include "gantry/core/http_parser.h"
#include "gantry/core/status.h"
#include "gantry/gateway/config.h"
#include "pool.h"

namespace gantry::gateway::internal {

// How long a pooled connection may have been idle before it is peeked for a
// close. Backends close idle connections after seconds (uvicorn 5 s, nginx
// 75 s), so a request that may be sent again (MayResend) takes a connection
// idle for less than kPeekAfter without the syscall. Any other request peeks
// a connection idle for one tick of the coarse clock (1-4 ms) or more: a
// backend that crashed a moment ago leaves closed connections in the pool,
// and a POST written into one could not be retried.
inline constexpr auto kPeekAfter = std::chrono::milliseconds(200);
inline constexpr auto kPeekAfterOnce = std::chrono::milliseconds(1);

// GET, HEAD, OPTIONS, PUT and DELETE: the methods RFC 9110 makes idempotent.
inline bool IdempotentMethod(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "PUT" ||
         method == "DELETE";
}

// Whether a pooled connection idle for `idle` must be peeked before it
// carries a request that is `idempotent` (or not).
inline bool NeedsPeek(Clk::duration idle, bool idempotent) {
  return idle >= (idempotent ? Clk::duration(kPeekAfter) : Clk::duration(kPeekAfterOnce));
}

// Whether a request whose exchange failed with an I/O error may be sent once
// more on a fresh connection: only when the connection was a reused one that
// the backend had closed meanwhile (no response byte arrived, no timeout)
// and the request may be repeated.
inline bool MayResend(bool reused, bool got_bytes, bool timed_out, bool idempotent) {
  return reused && !got_bytes && !timed_out && idempotent;
}

// A final response status as outlier detection sees it: 4xx is the client's
// fault, 502/503/504 are gateway errors, other 5xx are the backend's errors.
inline Outcome OutcomeOfStatus(int status) {
  return status < 500                       ? Outcome::kOk
         : (status >= 502 && status <= 504) ? Outcome::kGatewayError
                                            : Outcome::k5xx;
}

// How an exchange failed before a usable response head.
enum class UpstreamError {
  kNone,
  kBadAddress,      // the backend's host is not a numeric address
  kConnect,         // connect refused or failed
  kConnectTimeout,  // connect took longer than connect_timeout
  kReset,           // the connection failed after the request was (being) sent
  kTimeout,         // no complete response head within `timeout`
  kMalformedHead,   // the head is over 64 KiB or has a bare LF
  kBadHead,         // the head does not parse (UpstreamExchange::parse says why)
};

// A connection in an UpstreamPool.
struct PooledConn {
  boost::asio::ip::tcp::socket sock;
  Clk::time_point since;  // when it went idle
};

class UpstreamPool;

// One request's exchange with one backend, up to its final (non-1xx) response
// head. The caller fills the inputs, co_awaits UpstreamPool::Send, reads the
// body from `sock` (whatever of it arrived with the head is in *in), then
// hands the connection back with UpstreamPool::Release.
struct UpstreamExchange {
  explicit UpstreamExchange(const boost::asio::any_io_executor& ex) : sock(ex) {}

  // --- in ---
  const BackendConfig* backend = nullptr;
  std::string_view method;  // the request's method (a HEAD answer has no body)
  bool idempotent = false;  // may be sent twice (MayResend)
  std::string_view head;    // request head as sent upstream
  std::string_view body;
  std::chrono::milliseconds connect_timeout{0};
  std::chrono::milliseconds timeout{0};  // to the first byte and between bytes
  // Scratch of the client connection, reused across its requests: read
  // buffer, the response head's text and its parse (views into the text).
  Buffer* in = nullptr;
  std::string* head_text = nullptr;
  http::ResponseHead* response = nullptr;

  // --- out ---
  boost::asio::ip::tcp::socket sock;  // carries the response when error == kNone
  UpstreamError error = UpstreamError::kNone;
  boost::system::error_code ec;  // the I/O error behind kConnect .. kTimeout
  Status parse;                  // why the head did not parse (kBadHead)
  bool reused = false;           // the answer came on a pooled connection

 private:
  friend class UpstreamPool;
  std::vector<PooledConn>* idle_ = nullptr;  // the pool of `backend`
};

// The exchange's result for outlier detection (Balancer::Report): connect
// failures (nothing was sent), resets and bad heads, timeouts, else the
// status of the response head.
Outcome OutcomeOf(const UpstreamExchange& x);

class UpstreamPool {
 public:
  UpstreamPool() = default;
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Sends x's request to x.backend and reads the final response head into
  // *x.response. Uses a pooled connection (Take) when one may carry it, else
  // connects (x.connect_timeout); resends once on a fresh connection when
  // MayResend allows. `dl` is the client connection's deadline: it bounds
  // every step (connect_timeout, then timeout) and cancels x.sock when it
  // passes. Never throws for I/O errors: x.error says how it ended.
  boost::asio::awaitable<void> Send(UpstreamExchange& x, Deadline& dl);

  // After the response: pools x.sock (idle from `now`) when `reusable` and
  // fewer than x.backend->max_idle connections to it are idle, else closes
  // it. Returns whether it was pooled.
  bool Release(UpstreamExchange& x, bool reusable, Clk::time_point now);

  // The most recently pooled connection to `address` (a backend's
  // host_header, "host:port") that may carry a request now, or nullopt when
  // a new one must be opened. Connections found closed or readable on the
  // way (NeedsPeek) are closed and dropped.
  std::optional<boost::asio::ip::tcp::socket> Take(std::string_view address, bool idempotent,
                                                   Clk::time_point now);
  // Pools `sock` as idle since `now` unless `max_idle` connections to
  // `address` are pooled already (then closes it). Returns whether pooled.
  bool Put(std::string_view address, boost::asio::ip::tcp::socket sock, Clk::time_point now,
           size_t max_idle);
  // Idle connections pooled for `address`.
  size_t idle(std::string_view address) const;
  // Closes every pooled connection (before the io_context they belong to goes).
  void Clear() { pools_.clear(); }
  // Closes the idle connections to every address for which `keep` is false
  // (backends that a reload or the admin API removed), so they do not hold
  // sockets for good. The per-address stacks stay: an exchange may hold one
  // across its suspensions.
  template <typename Keep>
  void CloseIdleUnless(const Keep& keep) {
    for (auto& [address, stack] : pools_) {
      if (!stack.empty() && !keep(std::string_view(address))) stack.clear();
    }
  }

 private:
  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Stack = std::vector<PooledConn>;
  Stack& For(std::string_view address);
  static std::optional<boost::asio::ip::tcp::socket> Pop(Stack& s, bool idempotent,
                                                         Clk::time_point now);
  static bool Push(Stack& s, boost::asio::ip::tcp::socket&& sock, Clk::time_point now,
                   size_t max_idle);

  // By backend host_header; node-based, so a Stack& stays valid while
  // others are added (an exchange holds one across its suspensions).
  std::unordered_map<std::string, Stack, SvHash, std::equal_to<>> pools_;
};

}  // namespace gantry::gateway::internal
