#include "gantry/core/http_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "gantry/core/http_server.h"
#include "testing/http_test_server.h"
#include "testing/temp_dir.h"

namespace gantry::http {
namespace {

using ::gantry::testing::ClosedLoopbackPort;
using ::gantry::testing::ScriptedHttpServer;
using ::testing::HasSubstr;

Request GetOf(const std::string& url,
              std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
  Request r;
  r.url = url;
  r.deadline = deadline;
  return r;
}

TEST(ParseUrlTest, SplitsHostPortAndTarget) {
  auto u = ParseUrl("http://169.254.169.254/metadata/instance?api-version=2021-02-01");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "169.254.169.254");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/metadata/instance?api-version=2021-02-01");

  u = ParseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/");

  u = ParseUrl("HTTP://[::1]:9000?x=1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->target, "/?x=1");

  u = ParseUrl("http://localhost:1234/a");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "localhost");
}

TEST(ParseUrlTest, RejectsWhatItCannotServe) {
  for (const char* bad : {"https://169.254.169.254/", "ftp://1.2.3.4/", "169.254.169.254/metadata",
                          "http://", "http://:80/", "http://1.2.3.4:0/", "http://1.2.3.4:65536/",
                          "http://1.2.3.4:abc/", "http://1.2.3.4:/", "http://example.com/",
                          "http://1.2.3.4/#frag", "http://user@1.2.3.4/", "http://[::1/"}) {
    auto u = ParseUrl(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(u.status().message(), HasSubstr(bad));
  }
  EXPECT_THAT(ParseUrl("https://1.2.3.4/").status().message(), HasSubstr("https is not supported"));
}

TEST(PercentEncodeTest, UnreservedPassEverythingElseIsEncoded) {
  EXPECT_EQ(PercentEncode("llama-ft_2.v1~x"), "llama-ft_2.v1~x");
  EXPECT_EQ(PercentEncode("a/b?c=d&e f"), "a%2Fb%3Fc%3Dd%26e%20f");
  EXPECT_EQ(PercentEncode(std::string("\x00\xff", 2)), "%00%FF");
  EXPECT_EQ(PercentEncode(""), "");
}

TEST(HttpGetTest, ContentLengthBodyAndCustomHeaders) {
  ScriptedHttpServer server({.pieces = {"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                        "Content-Length: 11\r\n\r\n",
                                        "hello", " world"}});
  Request req = GetOf(server.Url("/metadata/instance?api-version=2021-02-01"));
  req.headers = {{"Metadata", "true"}};
  auto resp = Get(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->reason, "OK");
  EXPECT_EQ(resp->body, "hello world");
  ASSERT_NE(resp->FindHeader("content-type"), nullptr);
  EXPECT_EQ(*resp->FindHeader("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(resp->FindHeader("X-Missing"), nullptr);

  std::string sent = server.request();
  EXPECT_THAT(sent, HasSubstr("GET /metadata/instance?api-version=2021-02-01 HTTP/1.1\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nMetadata: true\r\n"));
  EXPECT_THAT(sent, HasSubstr("\r\nConnection: close\r\n"));
}

TEST(HttpGetTest, ChunkedBodySplitAcrossWrites) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhel",
                  "lo\r\n6;ext=1\r\n worl", "d\r\n0\r\n", "X-Trailer: 1\r\n\r\n"}});
  auto resp = Get(GetOf(server.Url("/")));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->body, "hello world");
}

TEST(HttpGetTest, BodyUntilCloseWithoutLength) {
  ScriptedHttpServer server({.pieces = {"HTTP/1.0 404 Not Found\r\n\r\n", "no such ", "path"}});
  auto resp = Get(GetOf(server.Url("/nope")));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 404);
  EXPECT_EQ(resp->reason, "Not Found");
  EXPECT_EQ(resp->body, "no such path");
}

TEST(HttpGetTest, InterimResponseIsSkipped) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}});
  auto resp = Get(GetOf(server.Url("/")));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->body, "ok");
}

struct MalformedCase {
  const char* name;
  std::string reply;
  const char* message;
};

TEST(HttpGetTest, MalformedResponsesAreDataLoss) {
  const std::vector<MalformedCase> cases = {
      {"garbage status line", "SSH-2.0-OpenSSH_9.2\r\n\r\n", "malformed status line"},
      {"two-digit code", "HTTP/1.1 20 OK\r\n\r\n", "malformed status line"},
      {"header without colon", "HTTP/1.1 200 OK\r\nContent-Length 3\r\n\r\nabc",
       "malformed header"},
      {"folded header", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "malformed header"},
      {"bad content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "bad Content-Length"},
      {"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
       "conflicting Content-Length"},
      {"truncated body", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
       "after 5 of 100 body bytes"},
      {"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
       "bad chunk size"},
      {"chunk without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
       "not followed by CRLF"},
      {"truncated chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
       "inside the chunked body"},
      {"unknown coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
       "unsupported Transfer-Encoding"},
      {"closed in headers", "HTTP/1.1 200 OK\r\nContent-", "inside the response headers"},
      {"closed silently", "", "without a response"},
  };
  for (const auto& c : cases) {
    ScriptedHttpServer server({.pieces = {c.reply}});
    auto resp = Get(GetOf(server.Url("/")));
    ASSERT_FALSE(resp.ok()) << c.name;
    EXPECT_EQ(resp.status().code(), StatusCode::kDataLoss)
        << c.name << ": " << resp.status().ToString();
    EXPECT_THAT(resp.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(resp.status().message(), HasSubstr(server.Url("/"))) << c.name;
  }
}

TEST(HttpGetTest, BodyLimitIsEnforced) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"}});
  Request req = GetOf(server.Url("/"));
  req.max_body_bytes = 4;
  auto resp = Get(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kResourceExhausted);
}

TEST(HttpGetTest, SlowServerHitsTheDeadline) {
  ScriptedHttpServer server({.pieces = {}, .hold_open = true});
  auto resp = Get(GetOf(server.Url("/slow"), std::chrono::milliseconds(200)));
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded) << resp.status().ToString();
  EXPECT_THAT(resp.status().message(), HasSubstr("within 200 ms"));
  EXPECT_THAT(resp.status().message(), HasSubstr("waiting for the response"));
}

TEST(HttpGetTest, StalledBodyHitsTheDeadline) {
  // Headers promise 100 bytes, 5 arrive, then the server goes quiet.
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabcde"}, .hold_open = true});
  auto resp = Get(GetOf(server.Url("/"), std::chrono::milliseconds(300)));
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kDeadlineExceeded) << resp.status().ToString();
}

TEST(HttpGetTest, RefusedConnectionIsUnavailable) {
  std::string url = "http://127.0.0.1:" + std::to_string(ClosedLoopbackPort()) + "/metadata";
  auto resp = Get(GetOf(url));
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kUnavailable) << resp.status().ToString();
  EXPECT_THAT(resp.status().message(), HasSubstr(url));
  EXPECT_THAT(resp.status().message(), HasSubstr("refused"));
}

TEST(HttpGetTest, BadRequestsAreInvalidArgument) {
  Request req = GetOf("http://127.0.0.1:1/");
  req.headers = {{"X-Evil", "a\r\nInjected: 1"}};
  EXPECT_EQ(Get(req).status().code(), StatusCode::kInvalidArgument);
  req.headers = {{"Bad Name", "v"}};
  EXPECT_EQ(Get(req).status().code(), StatusCode::kInvalidArgument);
  req.headers.clear();
  req.deadline = std::chrono::milliseconds(0);
  EXPECT_EQ(Get(req).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Get(GetOf("https://127.0.0.1/")).status().code(), StatusCode::kInvalidArgument);
}

// ---- streamed bodies ----

// A temporary directory removed at scope exit (also when a test fails).
using gantry::testing::TempDir;

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

TEST(HttpStreamTest, FileBodyArrivesIntactWithItsLength) {
  TempDir dir;
  const std::string data = Pattern((5 << 20) + 12345);  // not a multiple of the piece size
  { std::ofstream(dir / "body.bin", std::ios::binary) << data; }

  std::mutex mu;
  std::string got, length_header;
  Server server;
  server.Handle("/upload", [&](const ServerRequest& req, ServerResponse* resp) {
    std::lock_guard<std::mutex> lock(mu);
    got = req.body;
    if (const std::string* h = req.Header("content-length")) length_header = *h;
    resp->status = 201;
    resp->body = "stored";
  });
  ASSERT_TRUE(server.Start({.max_body_bytes = 8 << 20}).ok());

  Request req = GetOf("http://127.0.0.1:" + std::to_string(server.port()) + "/upload",
                      std::chrono::seconds(60));
  req.method = "PUT";
  req.body_file = (dir / "body.bin").string();
  auto resp = Send(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 201);
  EXPECT_EQ(resp->body, "stored");
  server.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(length_header, std::to_string(data.size()));
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data) << "the uploaded bytes differ from the file";
}

TEST(HttpStreamTest, EarlyRefusalIsReadWhileTheBodyIsStillBeingSent) {
  TempDir dir;
  { std::ofstream(dir / "big.bin", std::ios::binary) << std::string(8 << 20, 'x'); }
  Server server;
  server.HandleStreaming(
      "/upload",
      [](const ServerRequest&, uint64_t length, ServerResponse* reject) {
        reject->status = 413;
        reject->body = "too big: " + std::to_string(length);
        return std::shared_ptr<BodySink>();
      },
      [](const ServerRequest&, ServerResponse* resp) { resp->body = "unexpected"; });
  ASSERT_TRUE(server.Start({}).ok());
  Request req = GetOf("http://127.0.0.1:" + std::to_string(server.port()) + "/upload",
                      std::chrono::seconds(60));
  req.method = "PUT";
  req.body_file = (dir / "big.bin").string();
  auto resp = Send(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 413);
  EXPECT_EQ(resp->body, "too big: " + std::to_string(8 << 20));
  server.Stop();
}

TEST(HttpStreamTest, MissingOrBadBodyFileIsAnErrorNamingIt) {
  TempDir dir;
  Request req = GetOf("http://127.0.0.1:" + std::to_string(ClosedLoopbackPort()) + "/upload");
  req.method = "PUT";
  req.body_file = (dir / "no-such-file.bin").string();
  auto resp = Send(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kNotFound) << resp.status().ToString();
  EXPECT_THAT(resp.status().message(), HasSubstr(req.body_file));

  req.body_file = (dir / "").string();  // a directory
  resp = Send(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument) << resp.status().ToString();
  EXPECT_THAT(resp.status().message(), HasSubstr("not a regular file"));

  { std::ofstream(dir / "f") << "x"; }
  req.body_file = (dir / "f").string();
  req.body = "also a string";
  resp = Send(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument) << resp.status().ToString();
}

TEST(HttpStreamTest, SinkReceivesContentLengthBodyInOrder) {
  // Larger than max_body_bytes: the limit does not apply to a sink.
  const std::string data = Pattern(300 << 10);
  std::vector<std::string> pieces = {
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(data.size()) + "\r\n\r\n"};
  for (size_t at = 0; at < data.size(); at += 50000) pieces.push_back(data.substr(at, 50000));
  ScriptedHttpServer server({.pieces = pieces});
  std::string got;
  int calls = 0;
  Request req = GetOf(server.Url("/blob"));
  req.max_body_bytes = 1024;
  req.body_sink = [&](std::string_view piece) {
    ++calls;
    got.append(piece);
    return Status::Ok();
  };
  auto resp = Get(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 200);
  EXPECT_EQ(resp->body, "");
  EXPECT_GT(calls, 1);
  EXPECT_TRUE(got == data) << "sink got " << got.size() << " bytes";
}

TEST(HttpStreamTest, SinkReceivesChunkedBodyInOrder) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhel",
                  "lo\r\n6;ext=1\r\n worl", "d\r\n3\r\n!!!\r\n0\r\n", "X-Trailer: 1\r\n\r\n"}});
  std::string got;
  Request req = GetOf(server.Url("/"));
  req.body_sink = [&](std::string_view piece) {
    got.append(piece);
    return Status::Ok();
  };
  auto resp = Get(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->body, "");
  EXPECT_EQ(got, "hello world!!!");
}

TEST(HttpStreamTest, ErrorBodiesAreKeptNotSunk) {
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n", "not found"}});
  bool called = false;
  Request req = GetOf(server.Url("/"));
  req.body_sink = [&](std::string_view) {
    called = true;
    return Status::Ok();
  };
  auto resp = Get(req);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 404);
  EXPECT_EQ(resp->body, "not found");
  EXPECT_FALSE(called);
}

TEST(HttpStreamTest, SinkErrorStopsTheExchange) {
  // The server promises 100 bytes, sends 5 and then holds the connection: only
  // the sink's error can end this before the (long) deadline.
  ScriptedHttpServer server(
      {.pieces = {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabcde"}, .hold_open = true});
  int calls = 0;
  Request req = GetOf(server.Url("/blob"), std::chrono::seconds(60));
  req.body_sink = [&](std::string_view) {
    ++calls;
    return FailedPrecondition("the disk is full");
  };
  auto resp = Get(req);
  ASSERT_FALSE(resp.ok());
  EXPECT_EQ(resp.status().code(), StatusCode::kFailedPrecondition) << resp.status().ToString();
  EXPECT_THAT(resp.status().message(), HasSubstr("the disk is full"));
  EXPECT_THAT(resp.status().message(), HasSubstr(server.Url("/blob")));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace gantry::http
