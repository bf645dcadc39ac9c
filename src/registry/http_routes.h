// The registry HTTP API's route table: each route once, with the method, the
// path, the RBAC action it needs and its handler. Access control (which role
// a request needs) and dispatch (which handler runs) both read it, so they
// cannot disagree. Internal to src/registry: the table and handlers are in
// http_routes.cc, access control and dispatch in http_api.cc; the unit test
// checks the table.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/http_server.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/registry.h"

namespace gantry::registry::routes {

inline constexpr std::string_view kRead = "registry:read";
inline constexpr std::string_view kWrite = "registry:write";
inline constexpr std::string_view kAdmin = "registry:admin";

// What a handler gets: the registry acting for the caller (its changes are
// audited as the caller's), the request and the route's parameter. The
// handler answers in `resp`, or returns an error that the dispatcher answers.
struct Call {
  Registry& reg;
  const HttpApiOptions& o;
  const Caller& who;
  int64_t now;
  const http::ServerRequest& req;
  std::string param;
  http::ServerResponse* resp;
};
using RouteHandler = Status (*)(Call& call);

struct Route {
  std::string_view method;  // "GET", "POST", "PUT" or "DELETE"
  // A path, or a path ending in "{name}": one non-empty segment (no '/')
  // taken as the route's parameter (e.g. a digest).
  std::string_view pattern;
  std::string_view action;  // kRead, kWrite or kAdmin
  // The body is streamed to a spool file (Server::HandleStreaming) instead
  // of buffered; bounded by HttpApiOptions::max_blob_bytes.
  bool streamed = false;
  // Largest buffered body accepted (413 above); ignored when streamed.
  size_t max_body = 0;
  RouteHandler handler = nullptr;
};

// Every route of the API, in no particular order.
const std::vector<Route>& Routes();

struct RouteMatch {
  const Route* route = nullptr;  // null: no route for this method and path
  std::string param;             // the {name} segment of the route's pattern
  // When `route` is null but the path has routes: their methods ("GET, POST"),
  // for a 405 answer's Allow header.
  std::string allowed;
};

// The route for `method` and a percent-decoded `path` (no query).
RouteMatch MatchRoute(std::string_view method, std::string_view path);

// The role an action needs: "reader", "writer" or "admin".
std::string_view RoleFor(std::string_view action);

// A JSON answer.
void Reply(http::ServerResponse* resp, int status, const Json& body);
// {"error_code": code, "message": message}.
void ReplyError(http::ServerResponse* resp, int status, std::string_view code,
                std::string_view message);
// An error as MLflow answers it: core's HTTP status for the code
// (http::HttpStatusFor) and its MLflow error_code (wire::ErrorCodeFor).
void ReplyStatus(http::ServerResponse* resp, const Status& s);

}  // namespace gantry::registry::routes
