// The registry API's route table (http_routes.h): every route's method, path
// and the RBAC action it needs, written out here independently of the table;
// unknown paths and methods; path parameters with odd characters.
#include "http_routes.h"

#include <gtest/gtest.h>

#include <set>

namespace gantry::registry::routes {
namespace {

struct Expected {
  std::string method, path;
  std::string_view action;
};

// The API as docs/registry.md describes it.
const std::vector<Expected>& Api() {
  static const std::vector<Expected> api = {
      {"GET", "/api/2.0/mlflow/registered-models/get", kRead},
      {"GET", "/api/2.0/mlflow/registered-models/search", kRead},
      {"GET", "/api/2.0/mlflow/model-versions/get", kRead},
      {"GET", "/api/2.0/mlflow/model-versions/search", kRead},
      {"GET", "/api/2.0/mlflow/registered-models/alias", kRead},
      {"GET", "/api/2.0/gantry/blobs/sha256/{digest}", kRead},
      {"GET", "/api/2.0/gantry/manifests/sha256/{digest}", kRead},
      {"GET", "/api/2.0/gantry/signatures", kRead},
      {"GET", "/api/2.0/gantry/policy", kRead},
      {"GET", "/api/2.0/gantry/trusted-keys", kRead},
      {"POST", "/api/2.0/mlflow/registered-models/create", kWrite},
      {"POST", "/api/2.0/mlflow/registered-models/update", kWrite},
      {"POST", "/api/2.0/mlflow/registered-models/set-tag", kWrite},
      {"POST", "/api/2.0/mlflow/model-versions/update", kWrite},
      {"POST", "/api/2.0/mlflow/model-versions/set-tag", kWrite},
      {"POST", "/api/2.0/mlflow/model-versions/create", kWrite},
      {"POST", "/api/2.0/mlflow/registered-models/alias", kWrite},
      {"DELETE", "/api/2.0/mlflow/registered-models/alias", kWrite},
      {"PUT", "/api/2.0/gantry/blobs/sha256/{digest}", kWrite},
      {"POST", "/api/2.0/gantry/signatures", kWrite},
      {"DELETE", "/api/2.0/mlflow/model-versions/delete", kAdmin},
      {"DELETE", "/api/2.0/mlflow/registered-models/delete", kAdmin},
      {"POST", "/api/2.0/gantry/policy", kAdmin},
      {"POST", "/api/2.0/gantry/trusted-keys", kAdmin},
      {"DELETE", "/api/2.0/gantry/trusted-keys", kAdmin},
  };
  return api;
}

const std::string kDigest(64, 'a');

std::string Concrete(const std::string& pattern) {
  size_t brace = pattern.find('{');
  return brace == std::string::npos ? pattern : pattern.substr(0, brace) + kDigest;
}

TEST(RegistryRoutes, EveryRouteHasItsActionAndNothingElseIsRouted) {
  ASSERT_EQ(Routes().size(), Api().size());
  std::set<std::pair<std::string, std::string>> seen;
  for (const Expected& e : Api()) {
    RouteMatch m = MatchRoute(e.method, Concrete(e.path));
    ASSERT_NE(m.route, nullptr) << e.method << " " << e.path;
    EXPECT_EQ(m.route->method, e.method);
    EXPECT_EQ(m.route->pattern, e.path);
    EXPECT_EQ(m.route->action, e.action) << e.method << " " << e.path;
    EXPECT_NE(m.route->handler, nullptr);
    EXPECT_EQ(m.param, e.path.find('{') == std::string::npos ? "" : kDigest);
    seen.insert({e.method, e.path});
  }
  EXPECT_EQ(seen.size(), Api().size());  // no route twice
  // Only the blob upload is streamed; signature bundles may be larger than
  // other JSON bodies.
  for (const Route& r : Routes()) {
    EXPECT_EQ(r.streamed, r.method == "PUT") << r.pattern;
    if (!r.streamed) EXPECT_GT(r.max_body, 0u) << r.pattern;
  }
  EXPECT_GT(MatchRoute("POST", "/api/2.0/gantry/signatures").route->max_body,
            MatchRoute("POST", "/api/2.0/gantry/policy").route->max_body);
}

TEST(RegistryRoutes, RolesNest) {
  EXPECT_EQ(RoleFor(kRead), "reader");
  EXPECT_EQ(RoleFor(kWrite), "writer");
  EXPECT_EQ(RoleFor(kAdmin), "admin");
}

TEST(RegistryRoutes, UnknownPathsAndMethods) {
  for (const std::string& path :
       std::vector<std::string>{"/api/2.0/mlflow/registered-models/gett", "/api/2.0/mlflow/",
                                "/api/2.0/mlflow/registered-models/get/", "/api/2.0/gantry",
                                "/api/2.0/gantry/blobs/sha256", "/api/2.0/gantry/blobs/sha256/",
                                "/api/2.0/gantry/blobs/sha512/" + kDigest, "/API/2.0/gantry/policy",
                                "/api/2.0/mlflow/registered-models/get?name=x", ""}) {
    RouteMatch m = MatchRoute("GET", path);
    EXPECT_EQ(m.route, nullptr) << path;
    EXPECT_EQ(m.allowed, "") << path;  // 404, not 405
  }
  // A known path with another method: no route, and the methods it has.
  RouteMatch post = MatchRoute("POST", "/api/2.0/mlflow/model-versions/delete");
  EXPECT_EQ(post.route, nullptr);
  EXPECT_EQ(post.allowed, "DELETE");
  RouteMatch blob = MatchRoute("DELETE", "/api/2.0/gantry/blobs/sha256/" + kDigest);
  EXPECT_EQ(blob.route, nullptr);
  EXPECT_EQ(blob.allowed, "GET, PUT");
  RouteMatch keys = MatchRoute("PUT", "/api/2.0/gantry/trusted-keys");
  EXPECT_EQ(keys.route, nullptr);
  EXPECT_EQ(keys.allowed, "GET, POST, DELETE");
  EXPECT_EQ(MatchRoute("HEAD", "/api/2.0/gantry/policy").allowed, "GET, POST");
  EXPECT_EQ(MatchRoute("get", "/api/2.0/gantry/policy").route, nullptr);  // methods are exact
}

TEST(RegistryRoutes, PathParametersAreOneSegmentTakenAsIs) {
  // Whatever one segment holds reaches the handler (which checks the digest);
  // a '/' (also one decoded from %2F) never does.
  for (const std::string param :
       {std::string(".."), std::string("."), std::string("a b"), std::string("%2e%2e"),
        std::string("\xc3\xa9t\xc3\xa9"), std::string("x\0y", 3), std::string("ABC?d=1"),
        std::string(200, 'f')}) {
    RouteMatch m = MatchRoute("GET", "/api/2.0/gantry/manifests/sha256/" + param);
    ASSERT_NE(m.route, nullptr) << param;
    EXPECT_EQ(m.param, param);
  }
  for (const char* path : {"/api/2.0/gantry/blobs/sha256/a/b", "/api/2.0/gantry/blobs/sha256//",
                           "/api/2.0/gantry/blobs/sha256/../../policy"}) {
    EXPECT_EQ(MatchRoute("PUT", path).route, nullptr) << path;
  }
  // The parameter never spills into another route's path.
  EXPECT_EQ(MatchRoute("GET", "/api/2.0/gantry/signatures/" + kDigest).route, nullptr);
}

}  // namespace
}  // namespace gantry::registry::routes
