// A minimal blocking HTTP/1.1 client for local metadata services such as Azure
// IMDS (http://169.254.169.254) and admin APIs: GET (and Send for others), plain TCP (no TLS), numeric hosts
// only, one request per connection, one hard deadline for the whole exchange.
//
//   http::Request req{.url = "http://169.254.169.254/metadata/instance?api-version=2021-02-01",
//                     .headers = {{"Metadata", "true"}},
//                     .deadline = std::chrono::seconds(2)};
//   ASSIGN_OR_RETURN(http::Response resp, http::Get(req));
//   if (resp.status != 200) ...
//
// Thread-safety: Get() keeps no state between calls; any number of threads may
// call it at once. It does not log (so it is safe on a thread that runs while
// another one forks).
#pragma once

#include <chrono>
#include <cstdint>
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

struct Request {
  std::string method = "GET";  // Send() only; Get() always sends GET
  std::string url;
  // Extra request headers, sent in order after Host, User-Agent, Accept and
  // Connection. Names and values must not contain CR or LF.
  std::vector<Header> headers;
  // Covers connect, send and the whole response; must be positive.
  std::chrono::milliseconds deadline{2000};
  // Bodies larger than this are refused (ResourceExhausted).
  uint64_t max_body_bytes = 16ull << 20;
  // Request body for Send() (sent with Content-Length).
  std::string body;
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
//   InvalidArgument   bad URL, bad header, non-positive deadline
//   Unavailable       connection refused, network or host unreachable, reset
//   DeadlineExceeded  `deadline` passed before the response was complete
//   DataLoss          malformed status line, header, Content-Length or chunk,
//                     or the connection closed before the body was complete
//   ResourceExhausted headers over 64 KiB or body over max_body_bytes
//   IoError           another socket error
Result<Response> Get(const Request& request);

// Like Get() with request.method and request.body (e.g. POST with a JSON body,
// DELETE), for small admin APIs. Same errors.
Result<Response> Send(const Request& request);

}  // namespace gantry::http
