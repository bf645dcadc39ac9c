#include "gantry/core/http_parser.h"

#include <gtest/gtest.h>

#include <cctype>
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
  for (const char* p :
       {"/", "/v1/chat/completions", "/a/b/", "/a%20b", "/a..b/.c/c.", "/x?a=../b"}) {
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
// each must be refused, never interpreted, and refused for its own reason (a
// vector refused for an unrelated one, say a stray space, tests nothing). The
// reason is what the server sends in the 400 body.
TEST(ParseRequestHead, RejectsAmbiguousMessages) {
  const std::string kTeAndCl = "Transfer-Encoding together with Content-Length";
  const std::string kTwoCl = "conflicting Content-Length headers (a repeated one is refused)";
  const std::string kBadCl = "bad Content-Length";
  const std::string kBadTe = "unsupported Transfer-Encoding (only 'chunked' is accepted)";
  const std::string kLine = "malformed request line";
  const std::string kFold = "malformed header line: obsolete line folding";
  const std::string kDot = "dot segment in request path";
  const std::string kEmpty = "empty segment ('//') in request path";
  const std::string kEncoded = "encoded '.', '/', '\\' or NUL in request path";
  const std::string kPercent = "invalid percent-encoding in request path";
  const struct {
    std::string head, reason;
  } bad[] = {
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
       kTeAndCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
       kTeAndCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", kTwoCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", kTwoCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", kBadCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", kBadCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", kBadCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", kBadCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", kBadCl},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", kBadTe},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", kBadTe},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", kBadTe},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n",
       "repeated Transfer-Encoding"},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
       "Transfer-Encoding in an HTTP/1.0 request"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n",
       "malformed header line: invalid name"},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", kFold},
      {"GET / HTTP/1.1\r\nHost: a\r\n\tX: b\r\n\r\n", kFold},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
       "malformed header line: control character in the value"},
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "repeated Host header"},
      {"GET / HTTP/1.1\r\n\r\n", "missing Host header"},
      {"GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n",
       "request target must be an origin-form path such as /v1/models"},
      {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", kLine},
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
       "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)"},
      {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", kLine},
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", kLine},
      // A DEL inside the method (the space after it would make this a
      // malformed line instead: see the next one).
      {"G\x7fT / HTTP/1.1\r\nHost: a\r\n\r\n", "invalid method"},
      {"G\x7f T / HTTP/1.1\r\nHost: a\r\n\r\n", kLine},
      {"GET /#frag HTTP/1.1\r\nHost: a\r\n\r\n", "fragment in request target"},
      {"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", "malformed header line: no ':'"},
      {"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", "unsupported Expect value"},
      {"GET /public/../private HTTP/1.1\r\nHost: a\r\n\r\n", kDot},
      {"GET /a/./b HTTP/1.1\r\nHost: a\r\n\r\n", kDot},
      {"GET /a/.. HTTP/1.1\r\nHost: a\r\n\r\n", kDot},
      {"GET //admin HTTP/1.1\r\nHost: a\r\n\r\n", kEmpty},
      {"GET /v2/models/big-1//infer HTTP/1.1\r\nHost: a\r\n\r\n", kEmpty},
      {"GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n", "backslash in request path"},
      {"GET /a%2Fb HTTP/1.1\r\nHost: a\r\n\r\n", kEncoded},
      {"GET /a/%2e%2E/b HTTP/1.1\r\nHost: a\r\n\r\n", kEncoded},
      {"GET /a%5cb HTTP/1.1\r\nHost: a\r\n\r\n", kEncoded},
      {"GET /a%00 HTTP/1.1\r\nHost: a\r\n\r\n", kEncoded},
      {"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", kPercent},
      {"GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", kPercent},
  };
  for (const auto& b : bad) {
    auto r = Parse(b.head);
    ASSERT_FALSE(r.ok()) << b.head;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << b.head;
    EXPECT_EQ(r.status().message(), b.reason) << b.head;
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
  const char* bad[] = {"g\r\n",  "5\r\nhelloXX",          "5\nhello\r\n",
                       "-1\r\n", "10000000000000000\r\n", "5\r\nhello\r\r"};
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

// The header-line rules written the plain way (one check after another), as the
// specification the parser's faster scan must match exactly: same headers, same
// first error.
struct RefHeaders {
  std::string error;  // "" when the block parses
  std::vector<std::pair<std::string, std::string>> headers;
};

RefHeaders ReferenceHeaderLines(std::string_view block) {
  auto token = [](unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
  };
  RefHeaders r;
  while (!block.empty()) {
    size_t eol = block.find("\r\n");
    if (eol == std::string_view::npos) return {"malformed header line: no CRLF", {}};
    std::string_view line = block.substr(0, eol);
    block.remove_prefix(eol + 2);
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      return {"malformed header line: obsolete line folding", {}};
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return {"malformed header line: no ':'", {}};
    std::string_view name = line.substr(0, colon);
    bool ok = !name.empty();
    for (char c : name) ok = ok && token(static_cast<unsigned char>(c));
    if (!ok) return {"malformed header line: invalid name", {}};
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    for (char ch : value) {
      auto c = static_cast<unsigned char>(ch);
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        return {"malformed header line: control character in the value", {}};
      }
    }
    r.headers.emplace_back(name, value);
  }
  return r;
}

TEST(HeaderLinesDifferential, MatchesThePlainRulesOnRandomBlocks) {
  // Bytes that matter to the rules, and some that do not.
  const std::string alphabet =
      std::string("aZ9-_:;  \t\r\n\"(),/@\x7f\x1f\x01\x80\xff~!") + std::string(1, '\0') + "xyzXYZ";
  std::mt19937 rng(20261201);
  int parsed = 0, refused = 0;
  for (int iter = 0; iter < 60000; ++iter) {
    std::string block;
    const int lines = std::uniform_int_distribution<int>(0, 5)(rng);
    for (int l = 0; l < lines; ++l) {
      const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
      if (kind == 0) {  // random bytes, often no CRLF
        const int len = std::uniform_int_distribution<int>(0, 24)(rng);
        for (int k = 0; k < len; ++k) block += alphabet[rng() % alphabet.size()];
      } else {  // name: value with random noise in either part
        const int nlen = std::uniform_int_distribution<int>(0, 10)(rng);
        for (int k = 0; k < nlen; ++k) block += "abXY-_9"[rng() % 7];
        if (rng() % 8 == 0) block += alphabet[rng() % alphabet.size()];
        block += ':';
        const int vlen = std::uniform_int_distribution<int>(0, 30)(rng);
        for (int k = 0; k < vlen; ++k) {
          block += rng() % 6 == 0 ? alphabet[rng() % alphabet.size()] : "val ue/1.0"[rng() % 10];
        }
      }
      block += "\r\n";
    }
    if (rng() % 4 != 0) block += "\r\n";
    const std::string head = "GET / HTTP/1.1\r\nHost: h\r\n" + block;
    RefHeaders want = ReferenceHeaderLines(std::string_view(head).substr(16));
    RequestHead got;
    Status s = ParseRequestHead(head, &got);
    if (!want.error.empty()) {
      ++refused;
      ASSERT_FALSE(s.ok()) << iter;
      ASSERT_EQ(s.message(), want.error) << iter;
      continue;
    }
    if (!s.ok()) {  // a later rule (framing, a second Host): not the header lines'
      ASSERT_FALSE(s.message().starts_with("malformed header line")) << iter << s.message();
      continue;
    }
    ++parsed;
    ASSERT_EQ(got.headers.size(), want.headers.size()) << iter;
    for (size_t h = 0; h < want.headers.size(); ++h) {
      ASSERT_EQ(got.headers[h].name, want.headers[h].first) << iter;
      ASSERT_EQ(got.headers[h].value, want.headers[h].second) << iter;
    }
  }
  // Both outcomes were exercised many times.
  EXPECT_GT(parsed, 5000);
  EXPECT_GT(refused, 5000);
}

// Every byte at every position of values of 1 to 20 bytes (the word-at-a-time
// check and its tail): refused exactly when it is a control byte other than
// tab, or DEL.
TEST(HeaderLinesDifferential, EveryByteAtEveryPositionOfAValue) {
  for (int len = 1; len <= 20; ++len) {
    for (int pos = 0; pos < len; ++pos) {
      for (int b = 0; b < 256; ++b) {
        if (b == '\r' || b == '\n') continue;  // they end the line, not the value
        std::string value(len, 'v');
        value[pos] = static_cast<char>(b);
        const bool edge_ws = (b == ' ' || b == '\t') && (pos == 0 || pos == len - 1);
        const std::string head = "GET / HTTP/1.1\r\nHost: h\r\nX-V: " + value + "\r\n\r\n";
        RequestHead got;
        Status s = ParseRequestHead(head, &got);
        const bool bad = (b < 0x20 && b != '\t') || b == 0x7f;
        ASSERT_EQ(s.ok(), !bad) << "len " << len << " pos " << pos << " byte " << b;
        if (s.ok() && !edge_ws) ASSERT_EQ(got.headers.back().value, value);
      }
    }
  }
}

}  // namespace
}  // namespace gantry::http
