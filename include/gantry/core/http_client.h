// A minimal blocking HTTP/1.1 client for local metadata services such as Azure
// IMDS (http://169.254.169.254) and admin APIs: GET (and Send for others), plain TCP (no TLS),
// numeric hosts only, one request per connection, one hard deadline for the whole exchange. Bodies
// are strings by default; large ones can be streamed instead (a request body read from a file, a
// response body handed to a sink), so memory stays bounded by one piece (64 KiB), not by the body.
//
//   http::Request req{.url = "http://169.254.169.254/metadata/instance?api-version=2021-02-01",
//                     .headers = {{"Metadata", "true"}},
//                     .deadline = std::chrono::seconds(2)};
//   ASSIGN_OR_RETURN(http::Response resp, http::Get(req));
//   if (resp.status != 200) ...
//
//   // Streaming: upload a file, save a download without holding either whole.
//   http::Request put{.method = "PUT", .url = ..., .deadline = ..., .body_file = "/data/w.bin"};
//   http::Request get{.url = ..., .deadline = ...,
//                     .body_sink = [&](std::string_view piece) { return out.Write(piece); }};
//
// Thread-safety: Get() keeps no state between calls; any number of threads may
// call it at once. It does not log (so it is safe on a thread that runs while
// another one forks).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::http {

// A parsed "http://host[:port][/path][?query]" URL.
struct Url {
  std::string host;  // an IPv4 address, an IPv6 address (without brackets) or "localhost"
  uint16_t port = 80;
  std::string target;  // path and query, at least "/"
};

// Errors: InvalidArgument naming the URL for another scheme (https is not
// supported), a missing or non-numeric host (names are not resolved, so that
// the deadline covers everything), a bad port or a fragment.
Result<Url> ParseUrl(std::string_view url);

using Header = std::pair<std::string, std::string>;

// RFC 3986 percent-encoding for a path segment or a query value: the unreserved
// characters (letters, digits, - _ . ~) pass, every other byte is %XX, so a name
// can add neither a path segment nor a query parameter.
std::string PercentEncode(std::string_view s);

struct Request {
  std::string method = "GET";  // Send() only; Get() always sends GET
  std::string url;
  // Extra request headers, sent in order after Host, User-Agent, Accept and
  // Connection. Names and values must not contain CR or LF.
  std::vector<Header> headers;
  // Covers connect, send and the whole response; must be positive. It is one
  // hard deadline also for streamed bodies: a caller sending or receiving a
  // large file passes one proportional to its size.
  std::chrono::milliseconds deadline{2000};
  // Bodies larger than this are refused (ResourceExhausted). Does not apply
  // to a body handed to body_sink.
  uint64_t max_body_bytes = 16ull << 20;
  // Request body for Send() (sent with Content-Length).
  std::string body;
  // Send() only: when non-empty, the request body is this file instead of
  // `body` (which must then be empty), sent with Content-Length = its size
  // when opened, read and written in 64 KiB pieces. A file that shrinks while
  // it is sent is DataLoss naming it; bytes it gains are not sent.
  std::string body_file;
  // When set, the body of a 2xx final response is handed to the sink piece by
  // piece, in order, as it arrives (chunked coding removed) instead of being
  // stored: Response::body stays empty and max_body_bytes does not apply.
  // Bodies of other statuses are stored in Response::body as usual (bounded
  // by max_body_bytes) so the caller can read the error. A non-OK Status from
  // the sink aborts the exchange (the connection is closed) and is returned,
  // with the URL as context. Called on the calling thread.
  std::function<Status(std::string_view)> body_sink;
};

struct Response {
  int status = 0;               // e.g. 200
  std::string reason;           // e.g. "OK"
  std::vector<Header> headers;  // as received, in order
  std::string body;             // decoded (chunked transfer coding removed)

  // The value of the first header named `name` (case-insensitive), or nullptr.
  const std::string* FindHeader(std::string_view name) const;
};

// Sends one GET and reads the full response. Any HTTP status is a successful
// exchange; the caller decides what a 404 means.
// Errors (all messages name the URL):
//   InvalidArgument   bad URL, bad header, non-positive deadline, both body and
//                     body_file set
//   NotFound/IoError  body_file cannot be opened or read (naming the file)
//   Unavailable       connection refused, network or host unreachable, reset
//   DeadlineExceeded  `deadline` passed before the response was complete
//   DataLoss          malformed status line, header, Content-Length or chunk,
//                     or the connection closed before the body was complete,
//                     or body_file shrank while it was sent
//   ResourceExhausted headers over 64 KiB or body over max_body_bytes
//   IoError           another socket error
//   (any code)        the error body_sink returned
// A server may answer before the whole request body is sent (e.g. 413 or 401
// from the head): the client then stops sending and reads that answer.
Result<Response> Get(const Request& request);

// Like Get() with request.method and request.body or request.body_file (e.g.
// POST with a JSON body, PUT of a file, DELETE). Same errors.
Result<Response> Send(const Request& request);

}  // namespace gantry::http
