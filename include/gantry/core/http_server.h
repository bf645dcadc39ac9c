// A small HTTP/1.1 server for the agent's /metrics, API and dashboard (and
// later the registry): one event-loop thread (poll), keep-alive, bodies with
// Content-Length only (chunked requests get 411), header/body size limits and
// idle/read timeouts, so a slow or malformed client gets a 4xx/408 and never
// stalls another. Handlers run on the loop thread and must be quick (a scrape,
// a JSON page); anything slow belongs on the caller's own thread.
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

struct ServerRequest {
  std::string method;  // "GET", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded path without the query
  std::string query;   // raw, without '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string peer;  // "127.0.0.1:53122"

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
};

using Handler = std::function<void(const ServerRequest&, ServerResponse*)>;

struct ServerOptions {
  // "HOST:PORT", ":PORT" (all interfaces), "[::1]:PORT"; port 0 picks a free one.
  std::string listen = "127.0.0.1:0";
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 1 << 20;
  int max_connections = 256;
  std::chrono::milliseconds read_timeout{10000};  // a request must arrive whole within this
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive connections without a request
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

  // Binds and starts the loop thread. InvalidArgument for a bad `listen`,
  // Unavailable naming the address when it cannot bind.
  Status Start(const ServerOptions& options);
  // Closes the listener and every connection, joins the thread. Idempotent.
  void Stop();

  uint16_t port() const;  // the bound port (after Start)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::http
