// Strict HTTP/1.1 message parsing for servers and proxies (RFC 9112).
//
// A proxy that parses more leniently than the server behind it can be used to
// smuggle a second request past its checks, so everything ambiguous is an
// error here: bare LF, obs-fold, whitespace before the colon, Transfer-Encoding
// other than exactly "chunked", Transfer-Encoding together with Content-Length,
// repeated Content-Length, non-digit lengths, control bytes in values.
//
//   size_t end = 0;
//   HeadScan scan = ScanHead(buf, &scanned, max_head, &end);   // as bytes arrive
//   if (scan == HeadScan::kComplete) {
//     ASSIGN_OR_RETURN(RequestHead head, ParseRequestHead(std::string_view(buf).substr(0, end)));
//   }
//
// Heads hold string_views into the caller's buffer; keep the buffer alive and
// unchanged while using them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::http {

struct HeaderView {
  std::string_view name;   // as sent (compare with IEquals)
  std::string_view value;  // leading/trailing spaces and tabs removed
};

// Case-insensitive ASCII comparison, for header names and tokens. Inline:
// a proxy calls it for every header of every request and response.
inline bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

enum class BodyFraming {
  kNone,           // no body (requests without length; 1xx/204/304; HEAD responses)
  kContentLength,  // exactly content_length bytes
  kChunked,        // chunked transfer coding
  kUntilClose,     // responses only: the body ends when the server closes
};

struct RequestHead {
  std::string_view method;
  std::string_view target;  // as sent: origin-form "/path?query"
  std::string_view path;    // target before '?'
  std::string_view query;   // after '?', without it; empty when none
  int minor_version = 1;    // HTTP/1.<minor>
  std::vector<HeaderView> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool keep_alive = true;       // HTTP/1.1 default unless "Connection: close"; 1.0 needs keep-alive
  bool expect_continue = false;  // "Expect: 100-continue"

  // The first header named `name`, or nullptr.
  const HeaderView* Find(std::string_view name) const;
};

struct ResponseHead {
  int status = 0;
  std::string_view reason;
  int minor_version = 1;
  std::vector<HeaderView> headers;
  BodyFraming framing = BodyFraming::kNone;
  uint64_t content_length = 0;
  bool keep_alive = true;  // false when the server asked to close or the body ends at close

  const HeaderView* Find(std::string_view name) const;
};

// Result of looking for the end of a head in bytes received so far.
enum class HeadScan {
  kIncomplete,  // need more bytes
  kComplete,    // *head_end = bytes of the head including the final CRLFCRLF
  kTooLarge,    // no end within max_head bytes (431 for requests)
  kBareLf,      // a LF without CR before it (400): rejected early, so a client
                // cannot hold the connection open with a head that never ends
};

// Scans `buf` for the blank line that ends a head. `*scanned` carries the
// progress between calls (start with 0) so each byte is looked at once.
// Leading empty lines (CRLF) before a request line are allowed, as RFC 9112
// says a server should; they are part of the head.
HeadScan ScanHead(std::string_view buf, size_t* scanned, size_t max_head, size_t* head_end);

// OK when `path` (a request path, starting with '/') means the same to every
// server: no empty segment ("//"), no "." or ".." segment, no backslash, no
// invalid or encoded '.', '/', '\' or NUL (%2e, %2f, %5c, %00). A trailing
// slash is allowed. ParseRequestHead applies it to every request.
Status CheckCanonicalPath(std::string_view path);

// Parses a complete request head (as delimited by ScanHead). Errors are
// InvalidArgument with a short reason suitable for a 400 body, e.g.
// "Transfer-Encoding together with Content-Length". A Transfer-Encoding in an
// HTTP/1.0 request, an unsupported version (505 is the caller's choice: the
// message says "unsupported HTTP version") and absolute-form targets are
// errors too.
Result<RequestHead> ParseRequestHead(std::string_view head);
// The same into *out, reusing its header vector's memory (a proxy parses one
// head per request on a long-lived connection). *out is reset first, so on an
// error it holds nothing of an earlier head (only what was parsed before the
// error).
Status ParseRequestHead(std::string_view head, RequestHead* out);

// Parses a response head. `request_method` decides whether a body follows
// (HEAD responses never have one). Errors are DataLoss (the upstream is
// broken, 502 for a proxy).
Result<ResponseHead> ParseResponseHead(std::string_view head, std::string_view request_method);
// The same into *out, reusing its header vector's memory.
Status ParseResponseHead(std::string_view head, std::string_view request_method, ResponseHead* out);

// Incremental decoder of the chunked transfer coding. Feed() consumes input
// and appends decoded payload; it stops at the end of the message (after the
// trailers) and reports how many input bytes it used so the rest can be the
// next message.
class ChunkedDecoder {
 public:
  // `max_body` bounds the decoded size (ResourceExhausted beyond it).
  explicit ChunkedDecoder(uint64_t max_body = UINT64_MAX) : max_body_(max_body) {}

  // Decodes from `in`, appending payload to *out; *used = bytes of `in`
  // consumed. Errors: InvalidArgument for bad framing (bad hex, missing CRLF,
  // over-long size or extension lines), ResourceExhausted over max_body.
  Status Feed(std::string_view in, std::string* out, size_t* used);
  bool done() const { return state_ == State::kDone; }
  uint64_t decoded() const { return decoded_; }

 private:
  enum class State { kSize, kData, kDataCrlf, kTrailer, kDone };
  State state_ = State::kSize;
  std::string line_;  // partial size or trailer line
  uint64_t remaining_ = 0;
  uint64_t decoded_ = 0;
  uint64_t max_body_;
  size_t trailer_bytes_ = 0;
};

// Appends one chunk ("<hex>\r\n<data>\r\n") of the chunked coding to *out;
// empty data appends nothing (the last chunk is "0\r\n\r\n", see kLastChunk).
void AppendChunk(std::string_view data, std::string* out);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// True for the connection-level headers a proxy must not forward (RFC 9110
// 7.6.1): Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding, Upgrade, Proxy-Authorization... plus those named in the
// message's own Connection header (`connection_value`).
bool IsHopByHop(std::string_view name, std::string_view connection_value);

// The standard reason phrase of a status code ("Not Found"); "Unknown" otherwise.
std::string_view ReasonPhrase(int status);

}  // namespace gantry::http
