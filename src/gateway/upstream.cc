// Upstream connections of one worker: the idle pool and one exchange.
#include "upstream.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>

namespace gantry::gateway::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {
constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kMaxResponseHead = 64 << 10;
}  // namespace

Outcome OutcomeOf(const UpstreamExchange& x) {
  switch (x.error) {
    case UpstreamError::kNone:
      return OutcomeOfStatus(x.response->status);
    case UpstreamError::kBadAddress:
    case UpstreamError::kConnect:
    case UpstreamError::kConnectTimeout:
      return Outcome::kConnectFailure;
    case UpstreamError::kTimeout:
      return Outcome::kTimeout;
    case UpstreamError::kReset:
    case UpstreamError::kMalformedHead:
    case UpstreamError::kBadHead:
      return Outcome::kReset;
  }
  return Outcome::kReset;
}

UpstreamPool::Stack& UpstreamPool::For(std::string_view address) {
  auto it = pools_.find(address);
  if (it == pools_.end()) it = pools_.emplace(std::string(address), Stack{}).first;
  return it->second;
}

std::optional<tcp::socket> UpstreamPool::Pop(Stack& s, bool idempotent, Clk::time_point now) {
  while (!s.empty()) {
    PooledConn cand = std::move(s.back());
    s.pop_back();
    if (!NeedsPeek(now - cand.since, idempotent)) return std::move(cand.sock);
    char probe;
    ssize_t n = ::recv(cand.sock.native_handle(), &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::move(cand.sock);
    error_code ec;
    cand.sock.close(ec);
  }
  return std::nullopt;
}

bool UpstreamPool::Push(Stack& s, tcp::socket&& sock, Clk::time_point now, size_t max_idle) {
  if (s.size() >= max_idle) {
    error_code ec;
    sock.close(ec);
    return false;
  }
  s.push_back(PooledConn{std::move(sock), now});
  return true;
}

std::optional<tcp::socket> UpstreamPool::Take(std::string_view address, bool idempotent,
                                              Clk::time_point now) {
  auto it = pools_.find(address);
  if (it == pools_.end()) return std::nullopt;
  return Pop(it->second, idempotent, now);
}

bool UpstreamPool::Put(std::string_view address, tcp::socket sock, Clk::time_point now,
                       size_t max_idle) {
  return Push(For(address), std::move(sock), now, max_idle);
}

size_t UpstreamPool::idle(std::string_view address) const {
  auto it = pools_.find(address);
  return it == pools_.end() ? 0 : it->second.size();
}

bool UpstreamPool::Release(UpstreamExchange& x, bool reusable, Clk::time_point now) {
  if (reusable && x.idle_ != nullptr) {
    return Push(*x.idle_, std::move(x.sock), now, x.backend->max_idle);
  }
  error_code ec;
  x.sock.close(ec);
  return false;
}

asio::awaitable<void> UpstreamPool::Send(UpstreamExchange& x, Deadline& dl) {
  const BackendConfig& backend = *x.backend;
  Stack& idle = For(backend.host_header);
  x.idle_ = &idle;
  x.error = UpstreamError::kNone;
  x.reused = false;
  Buffer& in = *x.in;
  Status resp = Status::Ok();
  bool have_resp = false;
  error_code& ec = x.ec;
  ec.clear();
  // Two attempts: a pooled connection the backend has closed meanwhile fails
  // before any response byte; MayResend decides whether that is sent again.
  for (int attempt = 0; attempt < 2; ++attempt) {
    bool reused = false;
    if (attempt == 0) {
      if (std::optional<tcp::socket> s = Pop(idle, x.idempotent, CoarseNow())) {
        x.sock = std::move(*s);
        reused = true;
      }
    }
    if (!reused) {
      x.sock = tcp::socket(x.sock.get_executor());
      asio::ip::address addr = backend.host == "localhost"
                                   ? asio::ip::make_address("127.0.0.1", ec)
                                   : asio::ip::make_address(backend.host, ec);
      if (ec) {
        x.error = UpstreamError::kBadAddress;
        co_return;
      }
      dl.Watch(&x.sock);
      dl.Set(x.connect_timeout);
      co_await x.sock.async_connect(tcp::endpoint(addr, backend.port), Nothrow(ec));
      dl.Watch(nullptr);
      if (ec) {
        x.error = dl.timed_out() ? UpstreamError::kConnectTimeout : UpstreamError::kConnect;
        co_return;
      }
      x.sock.set_option(tcp::no_delay(true), ec);
    }
    x.reused = reused;
    dl.Watch(&x.sock);
    dl.Set(x.timeout);
    std::array<asio::const_buffer, 2> out{asio::buffer(x.head), asio::buffer(x.body)};
    co_await asio::async_write(x.sock, out, Nothrow(ec));
    in.Clear();
    bool got_bytes = false;
    bool malformed = false;
    // Interim (1xx) responses are not forwarded: read heads until the final one.
    while (!ec) {
      size_t scanned = 0, head_end = 0;
      http::HeadScan scan = http::HeadScan::kIncomplete;
      while (!ec) {
        scan = http::ScanHead(in.view(), &scanned, kMaxResponseHead, &head_end);
        if (scan != http::HeadScan::kIncomplete) break;
        size_t avail = 0;
        char* p = in.Prepare(kReadChunk, &avail);
        asio::mutable_buffer mb(p, avail);
        size_t n = co_await x.sock.async_read_some(mb, Nothrow(ec));
        if (!ec) {
          in.Commit(n);
          got_bytes = true;
        }
      }
      if (ec) break;
      if (scan != http::HeadScan::kComplete) {
        malformed = true;
        break;
      }
      x.head_text->assign(in.view().substr(0, head_end));
      in.Consume(head_end);
      resp = http::ParseResponseHead(*x.head_text, x.method, x.response);
      have_resp = true;
      if (!resp.ok() || x.response->status >= 200) break;
    }
    dl.Watch(nullptr);
    if (ec) {
      if (MayResend(reused, got_bytes, dl.timed_out(), x.idempotent)) continue;
      x.error = dl.timed_out() ? UpstreamError::kTimeout : UpstreamError::kReset;
      co_return;
    }
    if (malformed) {
      x.error = UpstreamError::kMalformedHead;
      co_return;
    }
    break;
  }
  if (!have_resp || !resp.ok()) {
    x.error = UpstreamError::kBadHead;
    x.parse = have_resp ? resp : Unavailable("no response");
  }
}

}  // namespace gantry::gateway::internal
