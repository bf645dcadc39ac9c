// Integration tests of the async Redis client against a real redis-server (started
// by the test on a free port): basics, pipelining, deadlines, outage and recovery.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "redis.h"
#include "redis_test_server.h"

namespace gantry::gateway {
namespace {

namespace asio = boost::asio;

using testing::TestRedisServer;

Result<RedisReply> Cmd(asio::io_context& io, RedisConnection& c, std::vector<std::string> args) {
  std::optional<Result<RedisReply>> out;
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { out.emplace(co_await c.Command(args)); },
      asio::detached);
  // The connection always has a read pending, so run() would not return.
  io.restart();
  while (!out) io.run_one();
  return std::move(*out);
}

// Runs the loop until `pred` holds or `limit` passes.
bool RunUntil(asio::io_context& io, const std::function<bool()>& pred,
              std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(10));
  }
  return true;
}

RedisOptions Opts(int port, double timeout_s = 0.5) {
  RedisOptions o;
  o.port = port;
  o.timeout_s = timeout_s;
  return o;
}

TEST(RedisIntegrationTest, Basics) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  asio::io_context io;
  RedisConnection c(io, Opts(server.port()));
  auto r = Cmd(io, c, {"SET", "k", std::string("v\0x\r\n", 5)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->type, RedisReply::Type::kStatus);
  EXPECT_EQ(r->str, "OK");
  EXPECT_TRUE(c.connected());
  r = Cmd(io, c, {"GET", "k"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RedisReply::Type::kString);
  EXPECT_EQ(r->str, std::string("v\0x\r\n", 5));  // binary safe
  r = Cmd(io, c, {"GET", "missing"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RedisReply::Type::kNil);
  r = Cmd(io, c, {"INCRBY", "n", "41"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->type, RedisReply::Type::kInteger);
  EXPECT_EQ(r->integer, 41);
  r = Cmd(io, c, {"RPUSH", "l", "a", "b"});
  r = Cmd(io, c, {"LRANGE", "l", "0", "-1"});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->type, RedisReply::Type::kArray);
  ASSERT_EQ(r->elements.size(), 2u);
  EXPECT_EQ(r->elements[1].str, "b");
  r = Cmd(io, c, {"NOSUCHCOMMAND"});
  ASSERT_TRUE(r.ok());  // an error reply is a reply
  EXPECT_TRUE(r->is_error());
  EXPECT_EQ(r->str.rfind("ERR", 0), 0u) << r->str;
  EXPECT_EQ(c.errors(), 0u);
}

TEST(RedisIntegrationTest, AuthenticatesWithPasswordAndReconnects) {
  TestRedisServer server("s3cret-pass");
  ASSERT_TRUE(server.Start());
  asio::io_context io;
  {
    RedisConnection anonymous(io, Opts(server.port()));
    auto r = Cmd(io, anonymous, {"PING"});
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->is_error()) << r->str;  // NOAUTH
  }
  RedisOptions o = Opts(server.port());
  o.password = "s3cret-pass";
  RedisConnection c(io, o);
  auto r = Cmd(io, c, {"SET", "k", "v"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->is_error()) << r->str;
  // After a restart the connection comes back and authenticates again.
  server.Kill();
  ASSERT_TRUE(server.Start());
  ASSERT_TRUE(RunUntil(io, [&] {
    auto p = Cmd(io, c, {"PING"});
    return p.ok() && !p->is_error();
  }));
  // A wrong password: commands are answered with errors, never hang.
  RedisOptions bad = Opts(server.port());
  bad.password = "wrong";
  RedisConnection w(io, bad);
  auto e = Cmd(io, w, {"PING"});
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->is_error());
}

TEST(RedisIntegrationTest, PipelinedRepliesMatchFifo) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  asio::io_context io;
  RedisConnection c(io, Opts(server.port()));
  constexpr int kN = 2000;
  std::vector<int64_t> got(kN, -1);
  // (Arguments are built outside the coroutine lambdas: GCC 12 miscompiles braced
  // lists of string literals inside them.)
  const std::vector<std::string> incr = {"INCR", "ctr"}, incr2 = {"INCR", "ctr2"};
  int done = 0;
  // All commands are queued before the first byte is written, so they go out in batches.
  for (int i = 0; i < kN; ++i) {
    asio::co_spawn(
        io,
        [&c, &got, &done, i, args = incr]() -> asio::awaitable<void> {
          auto r = co_await c.Command(args);
          if (r.ok() && r->type == RedisReply::Type::kInteger) got[i] = r->integer;
          ++done;
        },
        asio::detached);
  }
  while (done < kN) io.run_one();
  EXPECT_EQ(done, kN);
  for (int i = 0; i < kN; ++i) ASSERT_EQ(got[i], i + 1) << "reply " << i;
  // Throughput of the pipeline (printed, not asserted).
  const auto t0 = std::chrono::steady_clock::now();
  done = 0;
  for (int i = 0; i < 20000; ++i) {
    asio::co_spawn(
        io,
        [&c, &done, args = incr2]() -> asio::awaitable<void> {
          auto r = co_await c.Command(args);
          done += r.ok();
        },
        asio::detached);
  }
  while (done < 20000) io.run_one();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(done, 20000);
  std::printf("pipelined INCR: %.0f commands/s on one connection\n", 20000 / s);
  // Sequential round trip.
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(Cmd(io, c, {"PING"}).ok());
  std::printf(
      "sequential PING round trip: %.1f us\n",
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count() /
          500);
}

TEST(RedisIntegrationTest, DeadlineAndStallRecovery) {
  TestRedisServer server;
  ASSERT_TRUE(server.Start());
  asio::io_context io;
  RedisConnection c(io, Opts(server.port(), 0.05));
  ASSERT_TRUE(Cmd(io, c, {"PING"}).ok());
  server.Kill(SIGSTOP);  // alive but silent
  auto r = Cmd(io, c, {"PING"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_GE(c.errors(), 1u);
  // The stalled connection was dropped: calls now fail fast without waiting.
  EXPECT_FALSE(c.connected());
  r = Cmd(io, c, {"PING"});
  ASSERT_FALSE(r.ok());
  server.Kill(SIGCONT);
  EXPECT_TRUE(RunUntil(io, [&] { return c.connected(); }));
  r = Cmd(io, c, {"PING"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->str, "PONG");
}

TEST(RedisIntegrationTest, DownFailsFastThenReconnects) {
  TestRedisServer server;  // not started yet
  asio::io_context io;
  RedisConnection c(io, Opts(server.port(), 0.2));
  // Let the first connection attempt fail.
  RunUntil(io, [&] { return c.errors() > 0; });
  EXPECT_FALSE(c.connected());
  auto r = Cmd(io, c, {"PING"});
  ASSERT_FALSE(r.ok());
  // Unavailable, not DeadlineExceeded: it failed at once instead of waiting for a reply.
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
  ASSERT_TRUE(server.Start());
  EXPECT_TRUE(RunUntil(io, [&] { return c.connected(); }));
  EXPECT_TRUE(Cmd(io, c, {"PING"}).ok());
  // The server goes away: pending and later commands fail, then it comes back.
  server.Kill(SIGKILL);
  r = Cmd(io, c, {"PING"});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(RunUntil(io, [&] { return !c.connected(); }));
  ASSERT_TRUE(server.Start());
  EXPECT_TRUE(RunUntil(io, [&] { return c.connected(); }));
  r = Cmd(io, c, {"PING"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

}  // namespace
}  // namespace gantry::gateway
