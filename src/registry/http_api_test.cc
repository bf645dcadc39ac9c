#include "gantry/registry/http_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gantry/core/http_client.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

TEST(RegistryHttpApi, MlflowShapedReadsAndDeniedWrites) {
  char t[] = "/tmp/gantry-registry-http-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  fs::path root = t;
  fs::create_directories(root / "m");
  std::ofstream(root / "m/w.bin") << "weights";
  auto meta = OpenSqliteMetadataStore((root / "r.sqlite").string());
  auto store = storage::OpenObjectStore("file://" + (root / "a").string());
  Registry reg(*std::move(meta), *std::move(store));
  RegisterRequest req;
  req.name = "bert";
  req.path = (root / "m").string();
  req.lineage.run_id = "run-1";
  ASSERT_TRUE(reg.Register(req).ok());
  ASSERT_TRUE(reg.SetAlias("bert", "champion", 1).ok());

  http::Server server;
  AddHttpRoutes(reg, server);
  ASSERT_TRUE(server.Start({.listen = "127.0.0.1:0"}).ok());
  std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/api/2.0/mlflow/";
  auto get = [&](const std::string& ep) {
    http::Request r;
    r.url = base + ep;
    auto resp = http::Get(r);
    EXPECT_TRUE(resp.ok()) << resp.status().ToString();
    return std::make_pair(resp->status, Json::parse(resp->body));
  };
  auto [s1, m] = get("registered-models/get?name=bert");
  EXPECT_EQ(s1, 200);
  EXPECT_EQ(m["registered_model"]["name"], "bert");
  EXPECT_EQ(m["registered_model"]["aliases"][0]["alias"], "champion");
  EXPECT_EQ(m["registered_model"]["aliases"][0]["version"], "1");
  auto [s2, v] = get("model-versions/get?name=bert&version=1");
  EXPECT_EQ(s2, 200);
  EXPECT_EQ(v["model_version"]["version"], "1");
  EXPECT_EQ(v["model_version"]["run_id"], "run-1");
  EXPECT_EQ(v["model_version"]["status"], "READY");
  auto [s3, a] = get("registered-models/alias?name=bert&alias=champion");
  EXPECT_EQ(s3, 200);
  EXPECT_EQ(a["model_version"]["version"], "1");
  auto [s4, e] = get("model-versions/get?name=bert&version=9");
  EXPECT_EQ(s4, 404);
  EXPECT_EQ(e["error_code"], "RESOURCE_DOES_NOT_EXIST");
  auto [s5, l] = get("registered-models/search?max_results=10");
  EXPECT_EQ(s5, 200);
  EXPECT_EQ(l["registered_models"].size(), 1u);
  auto [s6, sv] = get("model-versions/search?name=bert&run_id=run-1");
  EXPECT_EQ(sv["model_versions"].size(), 1u);
  auto [s7, bad] = get("registered-models/search?max_results=0");
  EXPECT_EQ(s7, 400);

  http::Request post;
  post.method = "POST";
  post.url = base + "registered-models/alias";
  post.body = R"({"name":"bert","alias":"champion","version":"1"})";
  auto pr = http::Send(post);
  ASSERT_TRUE(pr.ok());
  EXPECT_EQ(pr->status, 403);
  server.Stop();
  fs::remove_all(root);
}

}  // namespace
}  // namespace gantry::registry
