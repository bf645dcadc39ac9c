#include "gantry/core/http_parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace gantry::http {
namespace {

Result<RequestHead> Parse(const std::string& head) { return ParseRequestHead(head); }

TEST(ScanHead, FindsEndAcrossCalls) {
  std::string buf = "GET / HTTP/1.1\r\nHost: a\r\n";
  size_t scanned = 0, end = 0;
  EXPECT_EQ(ScanHead(buf, &scanned, 1024, &end), HeadScan::kIncomplete);
  buf += "\r\nBODY";
  EXPECT_EQ(ScanHead(buf, &scanned, 1024, &end), HeadScan::kComplete);
  EXPECT_EQ(end, buf.size() - 4);
}

TEST(ScanHead, ByteByByteGivesSameEnd) {
  std::string full = "\r\nPOST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
  std::string buf;
  size_t scanned = 0, end = 0;
  HeadScan s = HeadScan::kIncomplete;
  for (char c : full) {
    buf.push_back(c);
    s = ScanHead(buf, &scanned, 1024, &end);
    if (s != HeadScan::kIncomplete) break;
  }
  ASSERT_EQ(s, HeadScan::kComplete);
  EXPECT_EQ(end, full.size() - 3);
}

TEST(ScanHead, RejectsBareLfEarly) {
  size_t scanned = 0, end = 0;
  EXPECT_EQ(ScanHead("GET / HTTP/1.1\nHost: a\n", &scanned, 1024, &end), HeadScan::kBareLf);
}

TEST(ScanHead, TooLarge) {
  std::string buf = "GET / HTTP/1.1\r\nX: " + std::string(2000, 'a');
  size_t scanned = 0, end = 0;
  EXPECT_EQ(ScanHead(buf, &scanned, 1024, &end), HeadScan::kTooLarge);
}

TEST(ScanHead, CrlfFloodIsNotQuadraticAndEnds) {
  std::string buf(8000, '\0');
  for (size_t i = 0; i < buf.size(); i += 2) {
    buf[i] = '\r';
    buf[i + 1] = '\n';
  }
  size_t scanned = 0, end = 0;
  // Many empty lines end the "head"; parsing it then fails cleanly.
  ASSERT_EQ(ScanHead(buf, &scanned, 16384, &end), HeadScan::kComplete);
  EXPECT_FALSE(Parse(buf.substr(0, end)).ok());
}

TEST(ParseRequestHead, Basic) {
  const std::string head =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: gw\r\nContent-Length: 12\r\n"
      "X-Api-Key:  gk_abc \r\n\r\n";
  auto r = Parse(head);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->path, "/v1/chat/completions");
  EXPECT_EQ(r->query, "x=1");
  EXPECT_EQ(r->framing, BodyFraming::kContentLength);
  EXPECT_EQ(r->content_length, 12u);
  EXPECT_TRUE(r->keep_alive);
  ASSERT_NE(r->Find("x-api-key"), nullptr);
  EXPECT_EQ(r->Find("x-api-key")->value, "gk_abc");
}

TEST(ParseRequestHead, KeepAliveRules) {
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")->keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n")->keep_alive);
  EXPECT_TRUE(Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")->keep_alive);
}

TEST(ParseRequestHead, CanonicalPathsPass) {
  for (const char* p : {"/", "/v1/chat/completions", "/a/b/", "/a%20b", "/a..b/.c/c.", "/x?a=../b"}) {
    const std::string head = std::string("GET ") + p + " HTTP/1.1\r\nHost: a\r\n\r\n";
    EXPECT_TRUE(Parse(head).ok()) << p;
  }
}

TEST(ParseRequestHead, Chunked) {
  auto r = Parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->framing, BodyFraming::kChunked);
}

// Every one of these is a known request-smuggling or parser-confusion vector:
// each must be refused, never interpreted.
TEST(ParseRequestHead, RejectsAmbiguousMessages) {
  const char* bad[] = {
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\n\tX: b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET / HTTP/1.1\r\n\r\n",
      "GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET / HTTP/2.0\r\nHost: a\r\n\r\n",
      "GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
      "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
      "G\x7f T / HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /#frag HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n",
      "GET /public/../private HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a/./b HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a/.. HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET //admin HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /v2/models/big-1//infer HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%2Fb HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a/%2e%2E/b HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%5cb HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%00 HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a% HTTP/1.1\r\nHost: a\r\n\r\n",
  };
  for (const char* b : bad) {
    EXPECT_FALSE(Parse(b).ok()) << b;
  }
}

TEST(ParseResponseHead, Framing) {
  auto r = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "GET");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->framing, BodyFraming::kContentLength);
  EXPECT_TRUE(r->keep_alive);
  r = ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD");
  EXPECT_EQ(r->framing, BodyFraming::kNone);
  r = ParseResponseHead("HTTP/1.1 204 No Content\r\n\r\n", "GET");
  EXPECT_EQ(r->framing, BodyFraming::kNone);
  r = ParseResponseHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET");
  EXPECT_EQ(r->framing, BodyFraming::kChunked);
  r = ParseResponseHead("HTTP/1.0 200 OK\r\n\r\n", "GET");
  EXPECT_EQ(r->framing, BodyFraming::kUntilClose);
  EXPECT_FALSE(r->keep_alive);
  r = ParseResponseHead("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "GET");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 2000 OK\r\n\r\n", "GET").ok());
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: "
                                 "chunked\r\n\r\n",
                                 "GET")
                   .ok());
  EXPECT_EQ(ParseResponseHead("garbage\r\n\r\n", "GET").status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(ParseResponseHead("HTTP/1.1 200 O\rK\r\n\r\n", "GET").ok());
}

TEST(ChunkedDecoder, DecodesAndStopsAtEnd) {
  std::string wire = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  ChunkedDecoder d;
  std::string out;
  size_t used = 0;
  ASSERT_TRUE(d.Feed(wire, &out, &used).ok());
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, "hello world");
  EXPECT_EQ(wire.substr(used), "NEXT");
}

TEST(ChunkedDecoder, AnySplitGivesSameResult) {
  std::string wire = "a\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n";
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    ChunkedDecoder d;
    std::string out;
    size_t pos = 0;
    while (pos < wire.size() && !d.done()) {
      size_t n = 1 + rng() % 5;
      std::string_view piece = std::string_view(wire).substr(pos, n);
      size_t used = 0;
      ASSERT_TRUE(d.Feed(piece, &out, &used).ok());
      pos += used;
    }
    EXPECT_TRUE(d.done());
    EXPECT_EQ(out, "0123456789x");
  }
}

TEST(ChunkedDecoder, RejectsBadFraming) {
  const char* bad[] = {"g\r\n", "5\r\nhelloXX", "5\nhello\r\n", "-1\r\n",
                       "10000000000000000\r\n", "5\r\nhello\r\r"};
  for (const char* b : bad) {
    ChunkedDecoder d;
    std::string out;
    size_t used = 0;
    EXPECT_FALSE(d.Feed(b, &out, &used).ok()) << b;
  }
  ChunkedDecoder small(4);
  std::string out;
  size_t used = 0;
  EXPECT_EQ(small.Feed("5\r\nhello\r\n", &out, &used).code(), StatusCode::kResourceExhausted);
  ChunkedDecoder longline;
  EXPECT_FALSE(longline.Feed("5;" + std::string(5000, 'a'), &out, &used).ok());
}

TEST(AppendChunk, RoundTrips) {
  std::string wire;
  AppendChunk(std::string(300, 'z'), &wire);
  AppendChunk("", &wire);
  wire += kLastChunk;
  ChunkedDecoder d;
  std::string out;
  size_t used = 0;
  ASSERT_TRUE(d.Feed(wire, &out, &used).ok());
  EXPECT_TRUE(d.done());
  EXPECT_EQ(out, std::string(300, 'z'));
}

TEST(IsHopByHop, StandardAndListed) {
  EXPECT_TRUE(IsHopByHop("Transfer-Encoding", ""));
  EXPECT_TRUE(IsHopByHop("keep-alive", ""));
  EXPECT_TRUE(IsHopByHop("X-Secret", "close, x-secret"));
  EXPECT_FALSE(IsHopByHop("Content-Type", "close"));
}

}  // namespace
}  // namespace gantry::http
