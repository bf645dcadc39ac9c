// Asynchronous pipelined Redis client; see redis.h.
#include "redis.h"

#include <hiredis/hiredis.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <deque>
#include <optional>

#include "gantry/core/log.h"

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kMinBackoff{50};
constexpr std::chrono::milliseconds kMaxBackoff{1000};

}  // namespace

// One command waiting for its reply. `timer` is null for fire-and-forget commands.
struct Waiter {
  std::optional<Result<RedisReply>> result;
  std::unique_ptr<asio::steady_timer> timer;
  bool abandoned = false;  // the caller gave up (deadline); drop the reply
};

struct RedisConnection::Impl : std::enable_shared_from_this<RedisConnection::Impl> {
  enum State { kConnecting, kUp, kBackoff, kClosed };

  Impl(asio::io_context& io_, RedisOptions opt_)
      : io(io_), opt(std::move(opt_)), socket(io_), retry_timer(io_), connect_timer(io_) {
    if (opt.timeout_s <= 0) opt.timeout_s = 0.02;
  }

  asio::io_context& io;
  RedisOptions opt;
  tcp::socket socket;
  asio::steady_timer retry_timer;
  asio::steady_timer connect_timer;
  std::atomic<int> state{kConnecting};
  uint64_t generation = 0;  // bumped per connection attempt; stale handlers compare it
  std::string out;          // encoded commands not yet handed to the socket
  bool write_in_flight = false;
  std::deque<std::shared_ptr<Waiter>> pending;  // queued or sent, reply order
  std::unique_ptr<RespReader> reader;
  std::array<char, 16384> rbuf{};
  SteadyClock::time_point last_read{};
  std::chrono::milliseconds backoff = kMinBackoff;
  std::atomic<uint64_t> errors{0};
  std::function<void(bool)> state_cb;

  std::chrono::nanoseconds timeout() const {
    return std::chrono::nanoseconds(static_cast<int64_t>(opt.timeout_s * 1e9));
  }

  void Connect() {
    state = kConnecting;
    const uint64_t gen = ++generation;
    boost::system::error_code ec;
    socket.close(ec);
    auto self = shared_from_this();
    // Connecting may hang (SYN to a filtered port); bound it.
    connect_timer.expires_after(
        std::max<std::chrono::nanoseconds>(timeout() * 10, std::chrono::milliseconds(500)));
    connect_timer.async_wait([self, gen](boost::system::error_code e) {
      if (!e && self->generation == gen && self->state == kConnecting) {
        boost::system::error_code ignored;
        self->socket.close(ignored);
      }
    });
    auto addr = asio::ip::make_address(opt.host == "localhost" ? "127.0.0.1" : opt.host, ec);
    if (ec) {
      // A host name: resolve it (rare; configs normally name an address).
      auto resolver = std::make_shared<tcp::resolver>(io);
      resolver->async_resolve(
          opt.host, std::to_string(opt.port),
          [self, gen, resolver](boost::system::error_code e, tcp::resolver::results_type results) {
            if (self->generation != gen || self->state == kClosed) return;
            if (e) return self->ConnectFailed(gen, e);
            asio::async_connect(self->socket, results,
                                [self, gen](boost::system::error_code e2, const tcp::endpoint&) {
                                  self->OnConnect(gen, e2);
                                });
          });
      return;
    }
    socket.async_connect(tcp::endpoint(addr, static_cast<unsigned short>(opt.port)),
                         [self, gen](boost::system::error_code e) { self->OnConnect(gen, e); });
  }

  void OnConnect(uint64_t gen, boost::system::error_code ec) {
    if (generation != gen || state == kClosed) return;
    connect_timer.cancel();
    if (ec) return ConnectFailed(gen, ec);
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    reader = std::make_unique<RespReader>();
    state = kUp;
    backoff = kMinBackoff;
    last_read = SteadyClock::now();
    if (!opt.password.empty()) Authenticate();
    StartRead(gen);
    if (!out.empty() && !write_in_flight) StartWrite(gen);
    if (state_cb) state_cb(true);
  }

  // Puts AUTH ahead of everything queued while connecting, so that it is the
  // connection's first command. Its reply is not awaited: with a wrong password
  // every later command fails with NOAUTH, which the limiter counts as Redis
  // errors (fail-open or fail-closed) and the log names.
  void Authenticate() {
    const char* argv[] = {"AUTH", opt.password.data()};
    size_t lens[] = {4, opt.password.size()};
    char* cmd = nullptr;
    int n = redisFormatCommandArgv(&cmd, 2, argv, lens);
    if (n < 0 || cmd == nullptr) return;
    out.insert(0, cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
    pending.push_front(std::make_shared<Waiter>());
  }

  void ConnectFailed(uint64_t /*gen*/, boost::system::error_code ec) {
    ++errors;
    log::debug("redis {}:{}: connect failed: {}", opt.host, opt.port, ec.message());
    FailAll("connect to redis " + opt.host + ":" + std::to_string(opt.port) +
            " failed: " + ec.message());
    ScheduleReconnect();
  }

  void ScheduleReconnect() {
    state = kBackoff;
    boost::system::error_code ignored;
    socket.close(ignored);
    retry_timer.expires_after(backoff);
    backoff = std::min(backoff * 2, kMaxBackoff);
    auto self = shared_from_this();
    retry_timer.async_wait([self](boost::system::error_code e) {
      if (!e && self->state == kBackoff) self->Connect();
    });
  }

  // Drops the connection (I/O error, protocol error or stall) and reconnects later.
  void Disconnect(const std::string& why) {
    if (state != kUp) return;
    ++generation;  // invalidates the read/write handlers of this connection
    log::debug("redis {}:{}: connection lost: {}", opt.host, opt.port, why);
    FailAll("redis " + opt.host + ":" + std::to_string(opt.port) + ": " + why);
    ScheduleReconnect();
    if (state_cb) state_cb(false);
  }

  void FailAll(const std::string& why) {
    out.clear();
    write_in_flight = false;
    auto waiters = std::move(pending);
    pending.clear();
    for (auto& w : waiters) {
      if (!w->timer || w->result) continue;
      w->result.emplace(Unavailable(why));
      w->timer->cancel();
    }
  }

  // Returns false when the command cannot be queued (down, waiting to reconnect).
  bool Enqueue(const std::vector<std::string>& args, std::shared_ptr<Waiter> w) {
    const int s = state;
    if (s != kUp && s != kConnecting) return false;
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    char* cmd = nullptr;
    int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
    if (n < 0 || cmd == nullptr) return false;
    out.append(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
    pending.push_back(std::move(w));
    if (s == kUp && !write_in_flight) StartWrite(generation);
    return true;
  }

  void StartWrite(uint64_t gen) {
    auto buf = std::make_shared<std::string>();
    buf->swap(out);
    write_in_flight = true;
    auto self = shared_from_this();
    asio::async_write(socket, asio::buffer(*buf),
                      [self, gen, buf](boost::system::error_code ec, size_t) {
                        if (self->generation != gen || self->state != kUp) return;
                        self->write_in_flight = false;
                        if (ec) return self->Disconnect("write failed: " + ec.message());
                        if (!self->out.empty()) self->StartWrite(gen);
                      });
  }

  void StartRead(uint64_t gen) {
    auto self = shared_from_this();
    socket.async_read_some(asio::buffer(rbuf), [self, gen](boost::system::error_code ec, size_t n) {
      if (self->generation != gen || self->state != kUp) return;
      if (ec) return self->Disconnect("read failed: " + ec.message());
      self->last_read = SteadyClock::now();
      if (Status fed = self->reader->Feed(std::string_view(self->rbuf.data(), n)); !fed.ok()) {
        return self->Disconnect(fed.message());
      }
      for (;;) {
        Result<std::optional<RedisReply>> reply = self->reader->Next();
        if (!reply.ok()) return self->Disconnect(reply.status().message());
        if (!reply->has_value()) break;
        if (self->pending.empty()) return self->Disconnect("reply without a command");
        auto w = std::move(self->pending.front());
        self->pending.pop_front();
        if (w->timer && !w->abandoned && !w->result) {
          w->result.emplace(std::move(**reply));
          w->timer->cancel();
        }
      }
      self->StartRead(gen);
    });
  }

  // A command missed its deadline. If nothing at all arrived from the server for a whole
  // timeout while replies are owed, treat the connection as stalled.
  void OnDeadline() {
    ++errors;
    if (state == kUp && !pending.empty() && SteadyClock::now() - last_read >= timeout()) {
      Disconnect("no reply within " + std::to_string(opt.timeout_s) + " s");
    }
  }

  void Close() {
    state = kClosed;
    ++generation;
    retry_timer.cancel();
    connect_timer.cancel();
    boost::system::error_code ignored;
    socket.close(ignored);
    FailAll("redis connection closed");
  }
};

RedisConnection::RedisConnection(asio::io_context& io, RedisOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {
  impl_->Connect();
}

RedisConnection::~RedisConnection() { impl_->Close(); }

void RedisConnection::Close() { impl_->Close(); }

bool RedisConnection::connected() const { return impl_->state == Impl::kUp; }

bool RedisConnection::accepting() const {
  const int s = impl_->state;
  return s == Impl::kUp || s == Impl::kConnecting;
}

uint64_t RedisConnection::errors() const { return impl_->errors; }

void RedisConnection::set_state_callback(std::function<void(bool)> cb) {
  impl_->state_cb = std::move(cb);
}

bool RedisConnection::Send(const std::vector<std::string>& args) {
  if (impl_->state != Impl::kUp) return false;
  return impl_->Enqueue(args, std::make_shared<Waiter>());
}

asio::awaitable<Result<RedisReply>> RedisConnection::Command(std::vector<std::string> args) {
  auto impl = impl_;  // keeps the state alive across the suspension
  auto w = std::make_shared<Waiter>();
  w->timer = std::make_unique<asio::steady_timer>(impl->io);
  w->timer->expires_after(impl->timeout());
  if (!impl->Enqueue(args, w)) {
    ++impl->errors;
    co_return Unavailable("redis " + impl->opt.host + ":" + std::to_string(impl->opt.port) +
                          " is unreachable (reconnecting in the background)");
  }
  boost::system::error_code ec;
  co_await w->timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  if (w->result) {
    if (!w->result->ok()) ++impl->errors;
    co_return std::move(*w->result);
  }
  w->abandoned = true;
  impl->OnDeadline();
  co_return DeadlineExceeded("redis " + impl->opt.host + ":" + std::to_string(impl->opt.port) +
                             " did not answer " + args[0] + " within " +
                             std::to_string(impl->opt.timeout_s) + " s");
}

}  // namespace gantry::gateway
