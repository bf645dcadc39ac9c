// A small HTTP/1.1 server for the agent's /metrics, API and dashboard and the
// registry's API: one event-loop thread (poll), keep-alive, bodies with
// Content-Length only (chunked requests get 411), header/body size limits and
// idle/read timeouts, so a slow or malformed client gets a 4xx/408 and never
// stalls another. Bodies are buffered whole (max_body_bytes) unless the route
// was added with HandleStreaming, whose opener may take them as they arrive
// (large uploads).
//
// Threads: by default handlers run on the loop thread and must be quick (a
// scrape, a JSON page). With ServerOptions::handler_threads > 0 they run on a
// pool of that many threads instead, so a handler may block (SQL, copying a
// blob) without delaying other connections; handlers must then be safe to run
// concurrently. Either way the requests of one connection are handled one at
// a time, in order. Openers and BodySink::Write always run on the loop thread
// and must stay quick (check credentials, append to a local file).
//
//   http::Server server;
//   server.Handle("/metrics", [&](const http::ServerRequest& req, http::ServerResponse* resp) {
//     resp->content_type = "text/plain; version=0.0.4";
//     resp->body = Render();
//   });
//   RETURN_IF_ERROR(server.Start({.listen = "127.0.0.1:9500"}));
//   ... server.port() ...; server.Stop();
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::http {

// Receives a request body as it arrives (Server::HandleStreaming), so a large
// upload never sits in memory whole. Called on the loop thread, in order. The
// handler that then gets it (ServerRequest::body_sink) may run on a pool
// thread; the sink is released on that thread.
class BodySink {
 public:
  virtual ~BodySink() = default;
  // The next bytes of the body. A sink that fails remembers the failure and
  // ignores later calls; the route's handler reports it (the server keeps
  // reading the declared body so the connection stays usable).
  virtual void Write(std::string_view data) = 0;
};

struct ServerRequest {
  std::string method;  // "GET", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded path without the query
  std::string query;   // raw, without '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // empty when the body was streamed into body_sink
  std::string peer;  // "127.0.0.1:53122"
  // Set when a streaming route's opener took the body (see HandleStreaming):
  // the sink has received every byte when the handler runs. Released right
  // after the handler returns.
  std::shared_ptr<BodySink> body_sink;

  // First header called `name` (case-insensitive), or nullptr.
  const std::string* Header(std::string_view name) const;
  // Value of a query parameter (percent-decoded), or "" when absent.
  std::string QueryParam(std::string_view name) const;
};

struct ServerResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
  // When set, the body is this regular file's contents instead of `body`
  // (Content-Length from its size, sent with sendfile, never read into
  // memory). A file that cannot be opened turns the answer into a 500 naming
  // it; one that shrinks while being sent ends the connection early.
  std::string body_file;
  // The server removes body_file once it has opened it (or failed to): for
  // a temporary file made just for this answer.
  bool body_file_temporary = false;
};

using Handler = std::function<void(const ServerRequest&, ServerResponse*)>;

// Called once a request head for a streaming route has arrived, before any
// of its (non-empty, Content-Length framed) body is read. `head` has
// everything but the body; `content_length` is the declared size. Return a
// sink to receive the body (max_body_bytes does not apply: the opener sets
// its own bound), or nullptr to buffer it as usual (max_body_bytes applies).
// To refuse without reading the body (401, 413, ...), set reject->status
// (0 on entry) and the rest of *reject: it is sent and the connection closed.
using BodyOpener = std::function<std::shared_ptr<BodySink>(
    const ServerRequest& head, uint64_t content_length, ServerResponse* reject)>;

struct ServerOptions {
  // "HOST:PORT", ":PORT" (all interfaces), "[::1]:PORT"; port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  int max_connections = 256;
  std::chrono::milliseconds read_timeout{10000};  // a request must arrive whole within this
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive connections without a request
  // 0: handlers run on the loop thread. N (1..1024): on N pool threads; a
  // connection whose handler runs is not read from and no timeout applies to
  // it until the handler returns.
  int handler_threads = 0;
};

class Server {
 public:
  Server();
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes: the handler of the longest registered prefix that matches the
  // path ("/" catches everything). Unmatched paths get 404 with a JSON error.
  // Register before Start.
  void Handle(std::string prefix, Handler handler);
  // Like Handle, with bodies offered to `opener` first (large uploads).
  // While a streamed body arrives, read_timeout counts from the last bytes
  // received instead of the start of the request, so a long upload that
  // keeps moving is not cut off.
  void HandleStreaming(std::string prefix, BodyOpener opener, Handler handler);

  // Binds and starts the loop thread. InvalidArgument for a bad `listen`,
  // Unavailable naming the address when it cannot bind.
  Status Start(const ServerOptions& options);
  // Closes the listener and every connection, joins the thread. Handlers
  // still running on the pool are waited for (their responses dropped, a
  // temporary body_file removed); queued requests are not started. Idempotent.
  void Stop();

  uint16_t port() const;  // the bound port (after Start)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http
