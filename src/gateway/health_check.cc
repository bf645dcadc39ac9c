// Active health checks: one coroutine per (pool, backend) on an io_context of
// the checker's own thread, so a slow or stalled backend never delays the
// request path or another probe.
#include "health_check.h"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <optional>
#include <thread>

namespace gantry::gateway::internal {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr size_t kMaxStatusLine = 8 << 10;  // a status line longer than this is not HTTP

auto Nothrow(error_code& ec) { return asio::redirect_error(use_awaitable, ec); }

struct Loop {
  explicit Loop(asio::io_context& io) : timer(io) {}
  HealthTarget target;
  bool stopped = false;  // touched on the checker's thread only
  asio::steady_timer timer;
};

// One probe's socket and deadline timer; shared with the timer's handler,
// which may run after the probe's frame is gone.
struct Probe {
  explicit Probe(asio::io_context& io) : sock(io), timer(io) {}
  tcp::socket sock;
  asio::steady_timer timer;
  bool timed_out = false;
};

std::string LoopKey(const HealthTarget& t) {
  const HealthCheckConfig& c = t.cfg;
  return fmt::format("{}\n{}\n{}\n{}:{}\n{}\n{}\n{}\n{}\n{}\n{}", t.pool, t.backend,
                     static_cast<const void*>(t.state), t.host, t.port, t.host_header, c.path,
                     c.interval.count(), c.timeout.count(), c.healthy_threshold,
                     c.unhealthy_threshold);
}

// Parses "HTTP/1.x NNN ..." at the start of `s`; nullopt when it is not.
std::optional<int> StatusCode(const std::string& s) {
  if (s.size() < 12 || s.compare(0, 7, "HTTP/1.") != 0 || s[8] != ' ') return std::nullopt;
  int code = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    code = code * 10 + (s[i] - '0');
  }
  return code;
}

// Returns "" when the backend answered 2xx, else what went wrong.
awaitable<std::string> RunProbe(asio::io_context& io, const HealthTarget& t) {
  std::string host = t.host == "localhost" ? std::string("127.0.0.1") : t.host;
  error_code ec;
  asio::ip::address addr = asio::ip::make_address(host, ec);
  if (ec) {
    co_return fmt::format("address: '{}' is not a numeric IP address or localhost", t.host);
  }
  auto p = std::make_shared<Probe>(io);
  p->timer.expires_after(t.cfg.timeout);
  p->timer.async_wait([p](const error_code& e) {
    if (e) return;  // cancelled: the probe finished first
    p->timed_out = true;
    error_code ignored;
    p->sock.close(ignored);
  });
  std::string timeout_msg = fmt::format("timed out after {} ms", t.cfg.timeout.count());

  tcp::endpoint ep(addr, t.port);
  co_await p->sock.async_connect(ep, Nothrow(ec));
  if (ec) {
    p->timer.cancel();
    if (p->timed_out) co_return timeout_msg;
    co_return "connect: " + ec.message();
  }
  std::string host_header =
      t.host_header.empty() ? fmt::format("{}:{}", t.host, t.port) : t.host_header;
  std::string req = fmt::format(
      "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: gantry-health-check\r\nAccept: */*\r\n"
      "Connection: close\r\n\r\n",
      t.cfg.path, host_header);
  asio::const_buffer wb = asio::buffer(req);
  co_await asio::async_write(p->sock, wb, Nothrow(ec));
  if (ec) {
    p->timer.cancel();
    if (p->timed_out) co_return timeout_msg;
    co_return "write: " + ec.message();
  }
  std::string resp;
  char chunk[1024];
  while (resp.find("\r\n") == std::string::npos && resp.size() < kMaxStatusLine) {
    asio::mutable_buffer rb = asio::buffer(chunk);
    size_t n = co_await p->sock.async_read_some(rb, Nothrow(ec));
    resp.append(chunk, n);
    if (ec) break;
  }
  p->timer.cancel();
  error_code ignored;
  p->sock.close(ignored);
  if (p->timed_out) co_return timeout_msg;
  std::optional<int> code = StatusCode(resp);
  if (!code) {
    if (resp.empty() && ec) co_return "read: " + ec.message();
    co_return "answer is not an HTTP/1.x status line";
  }
  if (*code >= 200 && *code < 300) co_return std::string();
  co_return fmt::format("status {}", *code);
}

}  // namespace

struct HealthChecker::Impl {
  explicit Impl(HealthResultFn fn) : on_result(std::move(fn)), work(asio::make_work_guard(io)) {}

  awaitable<void> Run(std::shared_ptr<Loop> loop) {
    error_code ec;
    while (!loop->stopped) {
      std::string err = co_await RunProbe(io, loop->target);
      if (loop->stopped) break;
      on_result(loop->target, err.empty(), err);
      loop->timer.expires_after(loop->target.cfg.interval);
      co_await loop->timer.async_wait(Nothrow(ec));
    }
  }

  // On the checker's thread.
  void Apply(std::vector<HealthTarget> targets) {
    std::map<std::string, std::shared_ptr<Loop>> next;
    for (HealthTarget& t : targets) {
      std::string key = LoopKey(t);
      if (next.count(key) != 0) continue;
      auto it = loops.find(key);
      if (it != loops.end()) {
        next.emplace(key, std::move(it->second));
        loops.erase(it);
        continue;
      }
      auto loop = std::make_shared<Loop>(io);
      loop->target = std::move(t);
      next.emplace(key, loop);
      asio::co_spawn(io, Run(loop), asio::detached);
    }
    for (auto& [key, loop] : loops) {
      loop->stopped = true;
      loop->timer.cancel();
    }
    loops = std::move(next);
  }

  HealthResultFn on_result;
  asio::io_context io;  // declared before `loops`, whose timers must die first
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::map<std::string, std::shared_ptr<Loop>> loops;  // checker thread only
  std::thread thread;
};

HealthChecker::HealthChecker(HealthResultFn on_result)
    : impl_(std::make_unique<Impl>(std::move(on_result))) {
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

HealthChecker::~HealthChecker() {
  impl_->work.reset();
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  // The loops' timers go first, then the io_context destroys the suspended
  // coroutine frames without running them.
  impl_->loops.clear();
}

void HealthChecker::Update(std::vector<HealthTarget> targets) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, t = std::move(targets)]() mutable { impl->Apply(std::move(t)); });
}

}  // namespace gantry::gateway::internal
