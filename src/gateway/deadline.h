// The clock and the per-connection deadline of the gateway's request path.
// Not a public interface.
//
// Thread contract: a Deadline belongs to one client connection and is used
// only on the thread of the worker that owns that connection.
#pragma once

// clang-format off
#include <utility>  // before asio: awaitable.hpp in Boost 1.74 uses std::exchange
// clang-format on

#include <time.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

namespace gantry::gateway::internal {

using Clk = std::chrono::steady_clock;

// The same clock as steady_clock (CLOCK_MONOTONIC) at tick resolution (1-4
// ms), read without the TSC: deadlines and pool ages do not need nanoseconds,
// and they are taken several times per request.
inline Clk::time_point CoarseNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clk::time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
}

inline double Seconds(Clk::duration d) { return std::chrono::duration<double>(d).count(); }

// An error_code sink for co_await: I/O errors are values on the request path.
inline auto Nothrow(boost::system::error_code& ec) {
  return boost::asio::redirect_error(boost::asio::use_awaitable, ec);
}

// One deadline at a time for a client connection's current phase (idle, head,
// body, upstream connect, upstream answer, send). Run() is the connection's
// watchdog: when the deadline passes it sets timed_out() and cancels the
// client socket and the upstream socket named by Watch(), so the operation
// waiting on them ends with operation_aborted. Setting a deadline costs no
// timer operation unless it is sooner than the one the watchdog sleeps to.
class Deadline {
 public:
  explicit Deadline(boost::asio::ip::tcp::socket& client)
      : client_(client), timer_(client.get_executor()) {}

  // From now, `d` for the current phase; clears timed_out().
  void Set(Clk::duration d) {
    at_ = CoarseNow() + d;
    timed_out_ = false;
    // The watchdog sleeps until `armed_`; wake it when the new deadline is sooner.
    if (at_ < armed_) timer_.cancel();
  }
  void Clear() { at_ = Clk::time_point::max(); }
  // True once the current deadline passed (until the next Set()).
  bool timed_out() const { return timed_out_; }

  // The upstream socket in use, cancelled on timeout too; nullptr for none.
  // The socket must outlive the Watch() (reset it before the socket goes).
  void Watch(boost::asio::ip::tcp::socket* upstream) { upstream_ = upstream; }

  // The watchdog loop; returns after Close(). Spawn it once per connection,
  // with the connection kept alive for its duration.
  boost::asio::awaitable<void> Run() {
    boost::system::error_code ec;
    while (!closed_) {
      if (at_ <= CoarseNow()) {
        timed_out_ = true;
        at_ = Clk::time_point::max();
        client_.cancel(ec);
        if (upstream_ != nullptr) upstream_->cancel(ec);
      }
      armed_ = at_;
      timer_.expires_at(at_);
      co_await timer_.async_wait(Nothrow(ec));
    }
  }
  // Ends Run() (at its next wakeup, which this triggers).
  void Close() {
    closed_ = true;
    timer_.cancel();
  }
  bool closed() const { return closed_; }

 private:
  boost::asio::ip::tcp::socket& client_;
  boost::asio::steady_timer timer_;
  Clk::time_point at_ = Clk::time_point::max();
  Clk::time_point armed_ = Clk::time_point::max();
  boost::asio::ip::tcp::socket* upstream_ = nullptr;
  bool timed_out_ = false;
  bool closed_ = false;
};

}  // namespace gantry::gateway::internal
