// http::Server with ServerOptions::handler_threads: handlers run concurrently
// on the pool, a blocked handler delays no other connection, responses go to
// the connection (and in the order) they belong to, streamed bodies and file
// bodies work from the pool, and Stop while handlers run is clean. The
// single-connection behaviour (keep-alive, limits, timeouts) is covered by
// http_server_test.cc, which runs every ServerTest inline and on a pool.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/http_client.h"
#include "gantry/core/http_server.h"
#include "raw_http_client.h"

namespace gantry::http {
namespace {

using testing::RawClient;
using namespace std::chrono_literals;

// A gate a handler waits at until the test opens it (or 10 s pass, so a bug
// fails the test instead of hanging it).
class Gate {
 public:
  // Returns false when it timed out.
  bool Wait() {
    std::unique_lock lock(mu_);
    ++waiting_;
    cv_.notify_all();
    return cv_.wait_for(lock, 10s, [&] { return open_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits (up to 10 s) until `n` handlers are at the gate.
  bool WaitForWaiters(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ >= n; });
  }
  int waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

Result<Response> Fetch(uint16_t port, const std::string& target) {
  Request r;
  r.url = "http://127.0.0.1:" + std::to_string(port) + target;
  r.deadline = 20s;
  return Get(r);
}

std::string BodyOf(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

TEST(ServerPoolTest, HandlersRunConcurrently) {
  // Each handler waits until all four are inside: only possible when four
  // run at once (inline, the first would wait alone and time out).
  constexpr int kN = 4;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  Server server;
  server.Handle("/", [&](const ServerRequest&, ServerResponse* resp) {
    std::unique_lock lock(mu);
    ++inside;
    cv.notify_all();
    bool together = cv.wait_for(lock, 10s, [&] { return inside >= kN; });
    resp->body = together ? "together" : "alone";
  });
  ASSERT_TRUE(server.Start({.handler_threads = kN}).ok());
  std::vector<std::string> got(kN);
  std::vector<std::thread> clients;
  for (int i = 0; i < kN; ++i) {
    clients.emplace_back([&, i] {
      auto r = Fetch(server.port(), "/x");
      got[i] = r.ok() ? r->body : r.status().ToString();
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(got[i], "together") << i;
  server.Stop();
}

TEST(ServerPoolTest, BlockedHandlerDoesNotDelayOtherClients) {
  Gate gate;
  std::atomic<bool> slow_done{false};
  Server server;
  server.Handle("/slow", [&](const ServerRequest&, ServerResponse* resp) {
    resp->body = gate.Wait() ? "released" : "timed out";
    slow_done = true;
  });
  server.Handle("/fast", [](const ServerRequest& req, ServerResponse* resp) {
    resp->body = "fast:" + req.QueryParam("i");
  });
  ASSERT_TRUE(server.Start({.handler_threads = 2}).ok());
  std::string slow_body;
  std::thread slow([&] {
    auto r = Fetch(server.port(), "/slow");
    slow_body = r.ok() ? r->body : r.status().ToString();
  });
  ASSERT_TRUE(gate.WaitForWaiters(1));
  // While the slow handler is held, 20 requests from another client (one
  // keep-alive connection) all complete.
  RawClient c(server.port());
  ASSERT_TRUE(c.connected());
  for (int i = 0; i < 20; ++i) {
    c.Send("GET /fast?i=" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(BodyOf(c.ReadResponse()), "fast:" + std::to_string(i));
  }
  EXPECT_FALSE(slow_done.load());  // all 20 were answered while it was blocked
  gate.Open();
  slow.join();
  EXPECT_EQ(slow_body, "released");
  server.Stop();
}

TEST(ServerPoolTest, ResponsesAreNotCrossed) {
  Server server;
  server.Handle("/", [](const ServerRequest& req, ServerResponse* resp) {
    // Uneven handler times reorder completions across connections.
    std::string id = req.QueryParam("id");
    std::this_thread::sleep_for(std::chrono::microseconds((id.size() * 37) % 500));
    resp->body = "id=" + id;
  });
  ASSERT_TRUE(server.Start({.handler_threads = 4}).ok());
  constexpr int kClients = 8, kRequests = 40;
  std::atomic<int> wrong{0}, right{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      RawClient raw(server.port());
      for (int i = 0; i < kRequests; i += 4) {
        // Four pipelined requests at a time: answered in order.
        std::string batch;
        for (int k = i; k < i + 4; ++k) {
          batch += "GET /?id=" + std::to_string(c) + "-" + std::to_string(k) +
                   " HTTP/1.1\r\nHost: x\r\n\r\n";
        }
        raw.Send(batch);
        for (int k = i; k < i + 4; ++k) {
          std::string want = "id=" + std::to_string(c) + "-" + std::to_string(k);
          (BodyOf(raw.ReadResponse()) == want ? right : wrong)++;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(right.load(), kClients * kRequests);
  server.Stop();
}

// A sink that counts bytes and records its release.
class CountingSink final : public BodySink {
 public:
  explicit CountingSink(std::atomic<int>* released) : released_(released) {}
  ~CountingSink() override { (*released_)++; }
  void Write(std::string_view data) override { bytes += data.size(); }
  uint64_t bytes = 0;

 private:
  std::atomic<int>* released_;
};

TEST(ServerPoolTest, StreamedBodiesAndFileBodiesFromThePool) {
  std::atomic<int> released{0};
  char dir[] = "/tmp/gantry-pool-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/answer.bin";
  Server server;
  server.HandleStreaming(
      "/upload",
      [&](const ServerRequest&, uint64_t, ServerResponse*) -> std::shared_ptr<BodySink> {
        return std::make_shared<CountingSink>(&released);
      },
      [&](const ServerRequest& req, ServerResponse* resp) {
        auto* sink = dynamic_cast<CountingSink*>(req.body_sink.get());
        resp->body = sink ? "got " + std::to_string(sink->bytes) : "no sink";
      });
  server.Handle("/file", [&](const ServerRequest&, ServerResponse* resp) {
    std::ofstream(file, std::ios::binary) << std::string(3 << 20, 'f');
    resp->body_file = file;
    resp->body_file_temporary = true;
  });
  ASSERT_TRUE(server.Start({.max_body_bytes = 1024, .handler_threads = 2}).ok());
  Request up;
  up.method = "PUT";
  up.url = "http://127.0.0.1:" + std::to_string(server.port()) + "/upload";
  up.body.assign(5 << 20, 'u');  // far over max_body_bytes: streamed
  up.deadline = 20s;
  auto r = Send(up);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "got " + std::to_string(5 << 20));
  // The sink was released (on the worker) before the answer was sent.
  EXPECT_EQ(released.load(), 1);
  auto f = Fetch(server.port(), "/file");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->body.size(), 3u << 20);
  EXPECT_FALSE(std::filesystem::exists(file));
  server.Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerPoolTest, StopWhileHandlersRunIsClean) {
  char dir[] = "/tmp/gantry-pool-stop-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/never-sent.bin";
  Gate gate;
  std::atomic<bool> handler_returned{false};
  std::atomic<int> started{0};
  Server server;
  server.Handle("/", [&](const ServerRequest&, ServerResponse* resp) {
    started++;
    gate.Wait();
    std::ofstream(file) << "temporary";
    resp->body_file = file;
    resp->body_file_temporary = true;
    handler_returned = true;
  });
  // One worker: the second request is queued behind the held first.
  ASSERT_TRUE(server.Start({.handler_threads = 1}).ok());
  RawClient a(server.port()), b(server.port());
  a.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(gate.WaitForWaiters(1));
  b.Send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  std::thread opener([&] {
    std::this_thread::sleep_for(200ms);
    gate.Open();
  });
  server.Stop();                         // waits for the running handler
  EXPECT_TRUE(handler_returned.load());  // Stop returned only after it
  opener.join();
  EXPECT_EQ(started.load(), 1);  // the queued request never started
  // Both connections were closed without an answer, and the answer's
  // temporary file was removed with it.
  EXPECT_EQ(a.ReadResponse(), "");
  EXPECT_TRUE(a.ClosedByServer());
  EXPECT_EQ(b.ReadResponse(), "");
  EXPECT_FALSE(std::filesystem::exists(file));
  // The server starts again afterwards.
  ASSERT_TRUE(server.Start({.handler_threads = 1}).ok());
  gate.Open();
  auto again = Fetch(server.port(), "/again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->body, "temporary");
  server.Stop();
  std::filesystem::remove_all(dir);
}

TEST(ServerPoolTest, HandlerThreadsOutOfRangeAreRefused) {
  Server server;
  server.Handle("/", [](const ServerRequest&, ServerResponse*) {});
  Status s = server.Start({.handler_threads = -1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("handler_threads -1"), std::string::npos) << s.message();
  EXPECT_EQ(server.Start({.handler_threads = 5000}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(server.Start({.handler_threads = 1}).ok());
  server.Stop();
}

}  // namespace
}  // namespace gantry::http
