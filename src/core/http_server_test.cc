#include "gantry/core/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "gantry/core/http_client.h"
#include "raw_http_client.h"

namespace gantry::http {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::RawClient;
using ::testing::StartsWith;

Result<Response> Fetch(const std::string& url, int seconds) {
  Request r;
  r.url = url;
  r.deadline = std::chrono::seconds(seconds);
  return Get(r);
}

std::string BodyOf(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

// Every ServerTest runs twice: handlers on the loop thread and on a pool.
class ServerTest : public ::testing::TestWithParam<int> {
 protected:
  void StartServer(ServerOptions options = {}) {
    options.handler_threads = GetParam();
    server_.Handle("/", [](const ServerRequest& req, ServerResponse* resp) {
      resp->body = "root:" + req.path;
    });
    server_.Handle("/api", [](const ServerRequest& req, ServerResponse* resp) {
      resp->content_type = "application/json";
      resp->body =
          "api:" + req.method + ":" + req.path + ":" + req.QueryParam("q") + ":" + req.body;
      const std::string* h = req.Header("x-test");
      if (h != nullptr) resp->headers.emplace_back("X-Echo", *h);
    });
    server_.Handle("/api/v1", [](const ServerRequest& req, ServerResponse* resp) {
      resp->body = "v1:" + req.path + ":" + req.peer.substr(0, 10);
    });
    server_.Handle("/throw",
                   [](const ServerRequest&, ServerResponse*) { throw std::runtime_error("boom"); });
    server_.Handle("/big", [](const ServerRequest&, ServerResponse* resp) {
      resp->body.assign(8 << 20, 'x');
      resp->body.back() = 'y';
    });
    ASSERT_TRUE(server_.Start(options).ok());
    ASSERT_NE(server_.port(), 0);
  }
  std::string Url(const std::string& target) {
    return "http://127.0.0.1:" + std::to_string(server_.port()) + target;
  }
  Server server_;
};

INSTANTIATE_TEST_SUITE_P(Threads, ServerTest, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return p.param == 0 ? std::string("inline") : std::string("pool");
                         });

TEST_P(ServerTest, RoutesByLongestPrefixOnSegmentBoundaries) {
  StartServer();
  auto get = [&](const std::string& target) {
    auto r = Fetch(Url(target), 5);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->body : std::string("<error>");
  };
  EXPECT_EQ(get("/"), "root:/");
  EXPECT_EQ(get("/index.html"), "root:/index.html");
  EXPECT_THAT(get("/api"), StartsWith("api:GET:/api:"));
  EXPECT_THAT(get("/api/x"), StartsWith("api:GET:/api/x:"));
  EXPECT_EQ(get("/apix"), "root:/apix");
  EXPECT_THAT(get("/api/v1/models"), StartsWith("v1:/api/v1/models:127.0.0.1"));
  EXPECT_EQ(get("/a%20b"), "root:/a b");
}

TEST(ServerNoRootTest, UnmatchedPathIs404Json) {
  Server server;
  server.Handle("/metrics", [](const ServerRequest&, ServerResponse* resp) { resp->body = "m"; });
  ASSERT_TRUE(server.Start({}).ok());
  auto r = Fetch("http://127.0.0.1:" + std::to_string(server.port()) + "/nope", 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(*r->FindHeader("content-type"), "application/json");
  EXPECT_THAT(r->body, HasSubstr("\"error\""));
  EXPECT_THAT(r->body, HasSubstr("/nope"));
}

TEST_P(ServerTest, QueryHeadersBodyAndExtraResponseHeaders) {
  StartServer();
  Request req;
  req.method = "POST";
  req.url = Url("/api/items?x=1&q=hello+w%6Frld");
  req.headers = {{"X-Test", "abc"}};
  req.deadline = std::chrono::seconds(5);
  req.body = "payload";
  auto r = Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "api:POST:/api/items:hello world:payload");
  ASSERT_NE(r->FindHeader("x-echo"), nullptr);
  EXPECT_EQ(*r->FindHeader("x-echo"), "abc");
  EXPECT_EQ(*r->FindHeader("content-type"), "application/json");
}

TEST(ServerRequestTest, QueryParamDecodesAndDefaultsToEmpty) {
  ServerRequest r;
  r.query = "a=1&b=x%2Fy&c&d=&e=a+b";
  EXPECT_EQ(r.QueryParam("a"), "1");
  EXPECT_EQ(r.QueryParam("b"), "x/y");
  EXPECT_EQ(r.QueryParam("c"), "");
  EXPECT_EQ(r.QueryParam("d"), "");
  EXPECT_EQ(r.QueryParam("e"), "a b");
  EXPECT_EQ(r.QueryParam("zzz"), "");
  r.headers = {{"Accept", "text/plain"}};
  ASSERT_NE(r.Header("accept"), nullptr);
  EXPECT_EQ(r.Header("X"), nullptr);
}

TEST_P(ServerTest, KeepAliveServesSeveralAndPipelinedRequestsOnOneConnection) {
  StartServer();
  RawClient c(server_.port());
  ASSERT_TRUE(c.connected());
  c.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string r1 = c.ReadResponse();
  EXPECT_THAT(r1, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(BodyOf(r1), "root:/a");
  EXPECT_THAT(r1, ::testing::Not(HasSubstr("Connection: close")));
  // Two pipelined requests in one write, the second with a body.
  c.Send(
      "GET /b HTTP/1.1\r\nHost: x\r\n\r\nPOST /api HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: 3\r\n\r\nxyz");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "root:/b");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "api:POST:/api::xyz");
  c.Send("GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string r3 = c.ReadResponse();
  EXPECT_EQ(BodyOf(r3), "root:/c");
  EXPECT_THAT(r3, HasSubstr("Connection: close\r\n"));
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_P(ServerTest, Http10KeepAliveOnlyWhenAsked) {
  StartServer();
  RawClient c(server_.port());
  c.Send("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  std::string r = c.ReadResponse();
  EXPECT_THAT(r, HasSubstr("Connection: keep-alive\r\n"));
  c.Send("GET /y HTTP/1.0\r\n\r\n");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "root:/y");
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_P(ServerTest, RequestSplitAcrossWritesIsAssembled) {
  StartServer();
  RawClient c(server_.port());
  c.Send("POST /api HT");
  ::usleep(20'000);
  c.Send("TP/1.1\r\nHost: x\r\nContent-Le");
  ::usleep(20'000);
  c.Send("ngth: 5\r\n\r\nab");
  ::usleep(20'000);
  c.Send("cde");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "api:POST:/api::abcde");
}

TEST_P(ServerTest, HeadHasLengthButNoBody) {
  StartServer();
  RawClient c(server_.port());
  c.Send("HEAD /abc HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string all = c.ReadAll();
  EXPECT_THAT(all, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(all, HasSubstr("Content-Length: 9\r\n"));  // "root:/abc"
  EXPECT_EQ(BodyOf(all), "");
}

TEST_P(ServerTest, MalformedRequestsGet4xxAndClose) {
  StartServer({.max_header_bytes = 1024, .max_body_bytes = 100});
  struct Case {
    std::string request;
    std::string status;
  } cases[] = {
      {"POST /api HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "411"},
      {"GET /a HTTP/1.1\r\nHost x\r\n\r\n", "400"},
      {"GET /a HTTP/1.1\nHost: x\n\n", "400"},
      {"GET /../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
      {"GET /a HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n", "431"},
      {"POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", "413"},
      {"POST /api HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", "400"},
      {"GET /a HTTP/2.0\r\nHost: x\r\n\r\n", "505"},
  };
  for (const auto& tc : cases) {
    RawClient c(server_.port());
    c.Send(tc.request);
    std::string r = c.ReadResponse();
    EXPECT_THAT(r, StartsWith("HTTP/1.1 " + tc.status + " ")) << tc.request.substr(0, 60);
    EXPECT_THAT(r, HasSubstr("Connection: close")) << tc.request.substr(0, 60);
    EXPECT_TRUE(c.ClosedByServer()) << tc.request.substr(0, 60);
  }
  // The server still works afterwards.
  auto ok = Fetch(Url("/fine"), 5);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->body, "root:/fine");
}

TEST_P(ServerTest, SlowClientGets408AndDoesNotStallOthers) {
  StartServer({.read_timeout = std::chrono::milliseconds(300)});
  RawClient slow(server_.port());
  slow.Send("GET /slow HTTP/1.1\r\nHost: x\r\n");  // head never ends
  // Another client is served while the slow one hangs.
  auto r = Fetch(Url("/other"), 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "root:/other");
  std::string resp = slow.ReadResponse();
  EXPECT_THAT(resp, StartsWith("HTTP/1.1 408 "));
  EXPECT_TRUE(slow.ClosedByServer());
}

TEST_P(ServerTest, IdleKeepAliveConnectionIsClosedQuietly) {
  StartServer({.idle_timeout = std::chrono::milliseconds(200)});
  RawClient c(server_.port());
  c.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "root:/a");
  EXPECT_TRUE(c.ClosedByServer());
  EXPECT_EQ(c.ReadResponse(), "");  // no 408 for an idle connection
}

TEST_P(ServerTest, ExpectContinueGets100ThenTheResponse) {
  StartServer();
  RawClient c(server_.port());
  c.Send("POST /api HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_THAT(c.ReadResponse(), StartsWith("HTTP/1.1 100 Continue\r\n"));
  c.Send("hi");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "api:POST:/api::hi");
}

TEST_P(ServerTest, HandlerExceptionIs500AndLargeBodiesArriveWhole) {
  StartServer();
  auto r = Fetch(Url("/throw"), 5);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_THAT(r->body, HasSubstr("boom"));
  auto big = Fetch(Url("/big"), 20);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ(big->body.size(), 8u << 20);
  EXPECT_EQ(big->body.back(), 'y');
}

// A sink that records how the body arrived.
struct CountingSink : BodySink {
  std::string data;
  int writes = 0;
  size_t max_write = 0;
  void Write(std::string_view d) override {
    data.append(d);
    ++writes;
    max_write = std::max(max_write, d.size());
  }
};

TEST(ServerStreamingTest, StreamedBodiesBypassTheBufferLimitAndKeepTheConnection) {
  Server server;
  std::shared_ptr<CountingSink> last;
  std::atomic<int> opened{0};
  server.HandleStreaming(
      "/upload",
      [&](const ServerRequest& head, uint64_t length, ServerResponse* reject) {
        ++opened;
        EXPECT_EQ(head.body, "");
        if (head.Header("x-buffer") != nullptr) return std::shared_ptr<BodySink>();
        if (head.Header("x-reject") != nullptr) {
          reject->status = 403;
          reject->body = "no uploads for you";
          return std::shared_ptr<BodySink>();
        }
        if (length > (64u << 20)) {
          reject->status = 413;
          reject->content_type = "application/json";
          reject->body = "{\"error\":\"too big: " + std::to_string(length) + "\"}";
          return std::shared_ptr<BodySink>();
        }
        last = std::make_shared<CountingSink>();
        return std::shared_ptr<BodySink>(last);
      },
      [&](const ServerRequest& req, ServerResponse* resp) {
        auto* sink = dynamic_cast<CountingSink*>(req.body_sink.get());
        resp->body = (sink ? "streamed:" + std::to_string(sink->data.size())
                           : "buffered:" + std::to_string(req.body.size())) +
                     ":" + req.path;
      });
  server.Handle(
      "/", [](const ServerRequest& req, ServerResponse* resp) { resp->body = "root:" + req.body; });
  ASSERT_TRUE(server.Start({.max_body_bytes = 1024}).ok());
  RawClient c(server.port());
  // 3 MiB against a 1 KiB buffer limit, sent in pieces, then a pipelined
  // request on the same connection.
  std::string body(3 << 20, 'z');
  c.Send("PUT /upload/a HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n");
  for (size_t off = 0; off < body.size(); off += 256 << 10) c.Send(body.substr(off, 256 << 10));
  c.Send("POST /other HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "streamed:" + std::to_string(body.size()) + ":/upload/a");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "root:ok");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->data, body);
  EXPECT_GT(last->writes, 1);  // it arrived in pieces, not as one buffer
  EXPECT_LE(last->max_write, size_t{(1 << 20) + (64 << 10)});  // never buffered whole
  // GET without a body never reaches the opener.
  int before = opened;
  c.Send("GET /upload/a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "buffered:0:/upload/a");
  EXPECT_EQ(opened.load(), before);
  // The opener may decline: then max_body_bytes applies as usual.
  c.Send("PUT /upload/b HTTP/1.1\r\nHost: x\r\nX-Buffer: 1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(BodyOf(c.ReadResponse()), "buffered:5:/upload/b");
  c.Send("PUT /upload/b HTTP/1.1\r\nHost: x\r\nX-Buffer: 1\r\nContent-Length: 2048\r\n\r\n");
  EXPECT_THAT(c.ReadResponse(), StartsWith("HTTP/1.1 413"));
  EXPECT_TRUE(c.ClosedByServer());

  // The opener's refusal is sent before any body is read, then the
  // connection closes.
  RawClient d(server.port());
  d.Send(
      "PUT /upload/c HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n"
      "Expect: 100-continue\r\n\r\n");
  std::string refused = d.ReadResponse();
  EXPECT_THAT(refused, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(refused, HasSubstr("too big: 999999999999"));
  EXPECT_THAT(refused, Not(HasSubstr("100 Continue")));
  EXPECT_TRUE(d.ClosedByServer());

  // A client that sends the whole body without waiting still gets the
  // refusal (the server reads and drops the body instead of resetting).
  RawClient e(server.port());
  std::string body2(2 << 20, 'q');
  e.Send("PUT /upload/d HTTP/1.1\r\nHost: x\r\nX-Reject: 1\r\nContent-Length: " +
         std::to_string(body2.size()) + "\r\n\r\n" + body2);
  EXPECT_EQ(BodyOf(e.ReadResponse()), "no uploads for you");
  EXPECT_TRUE(e.ClosedByServer());
  server.Stop();
}

TEST(ServerStreamingTest, StreamedUploadOnlyNeedsToKeepMoving) {
  Server server;
  server.HandleStreaming(
      "/upload",
      [](const ServerRequest&, uint64_t, ServerResponse*) {
        return std::shared_ptr<BodySink>(std::make_shared<CountingSink>());
      },
      [](const ServerRequest& req, ServerResponse* resp) {
        resp->body = std::to_string(static_cast<CountingSink*>(req.body_sink.get())->data.size());
      });
  // The whole upload takes longer than read_timeout, but bytes keep coming.
  ASSERT_TRUE(server.Start({.read_timeout = std::chrono::milliseconds(1000)}).ok());
  RawClient c(server.port());
  c.Send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n");
  for (int i = 0; i < 16; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c.Send("x");
  }
  EXPECT_EQ(BodyOf(c.ReadResponse()), "16");
  // A stalled upload still times out.
  c.Send("PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nxx");
  EXPECT_THAT(c.ReadResponse(), StartsWith("HTTP/1.1 408"));
  server.Stop();
}

TEST(ServerFileBodyTest, FileBodiesAreSentWholeAndTemporaryOnesRemoved) {
  char dir_tmpl[] = "/tmp/gantry-filebody-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  std::string dir = dir_tmpl;
  std::string data(5 * (1 << 20) + 123, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131) % 251);
  auto write = [&](const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
    std::fclose(f);
  };
  write(dir + "/kept");
  write(dir + "/temp");
  Server server;
  server.Handle("/kept", [&](const ServerRequest&, ServerResponse* resp) {
    resp->body_file = dir + "/kept";
  });
  server.Handle("/temp", [&](const ServerRequest&, ServerResponse* resp) {
    resp->body_file = dir + "/temp";
    resp->body_file_temporary = true;
  });
  server.Handle("/missing", [&](const ServerRequest&, ServerResponse* resp) {
    resp->body_file = dir + "/nope";
  });
  ASSERT_TRUE(server.Start({}).ok());
  std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  Request r;
  r.url = base + "/kept";
  r.deadline = std::chrono::seconds(20);
  r.max_body_bytes = 64 << 20;
  Result<Response> got = Get(r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 200);
  EXPECT_TRUE(got->body == data) << "body differs (size " << got->body.size() << ")";
  r.url = base + "/temp";
  got = Get(r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->body == data);
  EXPECT_NE(::access((dir + "/temp").c_str(), F_OK), 0) << "temporary body file left behind";
  EXPECT_EQ(::access((dir + "/kept").c_str(), F_OK), 0);
  r.url = base + "/missing";
  got = Get(r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->status, 500);
  EXPECT_THAT(got->body, HasSubstr(dir + "/nope"));
  // HEAD: the file's length, no body; a keep-alive connection stays usable.
  RawClient c(server.port());
  c.Send(
      "HEAD /kept HTTP/1.1\r\nHost: x\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\n"
      "Connection: close\r\n\r\n");
  std::string all = c.ReadAll();
  EXPECT_THAT(all, HasSubstr("Content-Length: " + std::to_string(data.size()) + "\r\n"));
  EXPECT_THAT(all, HasSubstr("HTTP/1.1 500"));
  server.Stop();
  ::unlink((dir + "/kept").c_str());
  ::rmdir(dir.c_str());
}

TEST_P(ServerTest, ConnectionsBeyondTheLimitGet503) {
  StartServer({.max_connections = 1});
  RawClient first(server_.port());
  first.Send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(BodyOf(first.ReadResponse()), "root:/a");  // `first` is now held open
  RawClient second(server_.port());
  second.Send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(second.ReadResponse(), StartsWith("HTTP/1.1 503 "));
}

TEST(ServerStartTest, BadListenAddressesAndBusyPorts) {
  for (const char* bad : {"nonsense", "127.0.0.1", "127.0.0.1:x", "127.0.0.1:70000", "::1:80",
                          "[::1", "[]:80", "999.1.1.1:80"}) {
    Server s;
    Status st = s.Start({.listen = bad});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad << " " << st.ToString();
    EXPECT_THAT(st.message(), HasSubstr(bad));
  }
  Server a;
  ASSERT_TRUE(a.Start({.listen = "127.0.0.1:0"}).ok());
  Server b;
  std::string addr = "127.0.0.1:" + std::to_string(a.port());
  Status st = b.Start({.listen = addr});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(addr));
}

TEST(ServerStartTest, AllInterfacesAndStopIsIdempotent) {
  Server s;
  s.Handle("/", [](const ServerRequest&, ServerResponse* r) { r->body = "ok"; });
  ASSERT_TRUE(s.Start({.listen = ":0"}).ok());
  RawClient held(s.port());  // an open connection does not block Stop
  auto r = Fetch("http://127.0.0.1:" + std::to_string(s.port()) + "/", 5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "ok");
  s.Stop();
  s.Stop();
  EXPECT_TRUE(held.ClosedByServer());
}

}  // namespace
}  // namespace gantry::http
