// RegistryService: refuses to start without credentials, serves the API with
// API keys and JWTs on its handler pool, announces itself with the readiness
// line scripts wait for, and runs and stops under the ServiceRunner.
#include "gantry/registry/service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "gantry/core/http_server.h"
#include "gantry/core/service.h"
#include "gantry/registry/remote_client.h"
#include "gantry/security/jwt.h"
#include "gantry/security/oidc.h"
#include "testing/test_keys.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef-service-test";

class RegistryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/gantry-registry-service-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    root_ = t;
    std::ofstream(root_ / "jwt.secret") << kSecret << "\n";
    auto ks = security::KeyStore::Open((root_ / "keys.sqlite").string());
    ASSERT_TRUE(ks.ok());
    auto k = (*ks)->Create("svc", "reader", 0, 1);
    ASSERT_TRUE(k.ok());
    key_ = k->second;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::unique_ptr<Registry> Open() {
    auto reg = OpenRegistry(
        {.db = (root_ / "r.sqlite").string(), .artifacts = "file://" + (root_ / "art").string()});
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    return reg.ok() ? *std::move(reg) : nullptr;
  }
  RegistryServiceOptions Options() {
    return {.listen = "127.0.0.1:0",
            .keys_db = (root_ / "keys.sqlite").string(),
            .jwt_secret_file = (root_ / "jwt.secret").string()};
  }

  fs::path root_;
  std::string key_;
};

TEST_F(RegistryServiceTest, RefusesToStartWithoutCredentialsOrWithBadOptions) {
  RegistryServiceOptions none{.listen = "127.0.0.1:0"};
  Status s = ValidateServiceOptions(none);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("no credentials configured"), std::string::npos) << s.message();
  EXPECT_EQ(RegistryService::Create(Open(), none).status().code(), StatusCode::kInvalidArgument);
  RegistryServiceOptions zero = Options();
  zero.max_blob_bytes = 0;
  EXPECT_EQ(ValidateServiceOptions(zero).code(), StatusCode::kInvalidArgument);
  RegistryServiceOptions missing = Options();
  missing.jwt_secret_file = (root_ / "nope.secret").string();
  EXPECT_EQ(RegistryService::Create(Open(), missing).status().code(), StatusCode::kNotFound);
  RegistryServiceOptions pool = Options();
  pool.handler_threads = -1;
  auto bad_pool = RegistryService::Create(Open(), pool);
  ASSERT_TRUE(bad_pool.ok());
  EXPECT_EQ((*bad_pool)->Start().code(), StatusCode::kInvalidArgument);
}

TEST_F(RegistryServiceTest, ServesWithKeysAndJwtsAndSaysSo) {
  auto svc = RegistryService::Create(Open(), Options());
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  ASSERT_TRUE((*svc)->Start().ok());
  uint16_t port = (*svc)->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*svc)->ReadyMessage(),
            "serving the registry (MLflow-shaped /api/2.0/mlflow/..., blobs under "
            "/api/2.0/gantry/; API keys + JWT, deny by default) on port " +
                std::to_string(port));
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  RemoteClient by_key({.server = base, .credential = key_});
  auto models = by_key.ListModels();
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  EXPECT_TRUE(models->empty());
  auto token = security::SignJwt("HS256", kSecret, "",
                                 Json{{"sub", "ci"}, {"role", "reader"}, {"exp", 4102444800}});
  ASSERT_TRUE(token.ok());
  RemoteClient by_jwt({.server = base, .credential = *token});
  EXPECT_TRUE(by_jwt.ListModels().ok());
  RemoteClient nobody({.server = base, .credential = ""});
  EXPECT_EQ(nobody.ListModels().status().code(), StatusCode::kPermissionDenied);
  (*svc)->Stop(std::chrono::milliseconds(100));
  EXPECT_FALSE(by_key.ListModels().ok());  // stopped
}

TEST_F(RegistryServiceTest, RunsUnderTheServiceRunnerUntilStopped) {
  ServiceRunner runner({});
  RegistryServiceOptions o = Options();
  o.jwt_secret_file.clear();
  auto svc = RegistryService::Create(Open(), o);
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  EXPECT_EQ((*svc)->name(), "registry");
  std::thread stopper([&] {
    // Once it answers, ask the runner to stop as SIGTERM would.
    for (int i = 0; i < 200; ++i) {
      if ((*svc)->port() != 0) {
        RemoteClient c(
            {.server = "http://127.0.0.1:" + std::to_string((*svc)->port()), .credential = key_});
        if (c.ListModels().ok()) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    runner.RequestStop();
  });
  Status s = runner.Run(**svc);
  stopper.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE((*svc)->ReadyMessage().find("(MLflow-shaped /api/2.0/mlflow/..., blobs under "
                                        "/api/2.0/gantry/; API keys, deny by default) on port"),
            std::string::npos);
}

TEST_F(RegistryServiceTest, AcceptsTokensFromAnOpenIdConnectIssuer) {
  // A local issuer: discovery document and JWKS for one P-256 key.
  auto [priv, pub] = gantry::testing::GenerateKeyPair("EC");
  auto jwk = security::PublicKeyToJwk(pub, "k1");
  ASSERT_TRUE(jwk.ok()) << jwk.status().ToString();
  http::Server idp;
  std::string issuer;
  idp.Handle("/", [&](const http::ServerRequest& req, http::ServerResponse* resp) {
    resp->content_type = "application/json";
    resp->body = req.path == "/keys"
                     ? Json{{"keys", {*jwk}}}.dump()
                     : Json{{"issuer", issuer}, {"jwks_uri", issuer + "/keys"}}.dump();
  });
  ASSERT_TRUE(idp.Start({.listen = "127.0.0.1:0"}).ok());
  issuer = "http://127.0.0.1:" + std::to_string(idp.port());

  RegistryServiceOptions o{.listen = "127.0.0.1:0"};
  o.jwt_oidc_issuer = issuer;
  o.jwt_audience = "api://gantry-registry";
  o.jwt_role_map = {"reader=Gantry.Read"};
  auto svc = RegistryService::Create(Open(), o);
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  ASSERT_TRUE((*svc)->Start().ok());
  std::string base = "http://127.0.0.1:" + std::to_string((*svc)->port());
  auto sign = [&](const std::string& aud, const std::string& scp) {
    auto t = security::SignJwt(
        "ES256", priv, "k1",
        Json{{"iss", issuer}, {"aud", aud}, {"sub", "ci"}, {"scp", scp}, {"exp", 4102444800}});
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : std::string();
  };
  RemoteClient good({.server = base, .credential = sign(o.jwt_audience, "Gantry.Read")});
  auto models = good.ListModels();
  EXPECT_TRUE(models.ok()) << models.status().ToString();
  RemoteClient wrong_aud({.server = base, .credential = sign("api://other", "Gantry.Read")});
  EXPECT_EQ(wrong_aud.ListModels().status().code(), StatusCode::kPermissionDenied);
  RemoteClient no_role({.server = base, .credential = sign(o.jwt_audience, "openid")});
  EXPECT_EQ(no_role.ListModels().status().code(), StatusCode::kPermissionDenied);
  (*svc)->Stop(std::chrono::milliseconds(100));
  idp.Stop();

  RegistryServiceOptions both = o;
  both.jwt_secret_file = (root_ / "jwt.secret").string();
  EXPECT_EQ(ValidateServiceOptions(both).code(), StatusCode::kInvalidArgument);
  RegistryServiceOptions no_aud = o;
  no_aud.jwt_audience.clear();
  EXPECT_NE(ValidateServiceOptions(no_aud).message().find("--jwt-audience"), std::string::npos);
  RegistryServiceOptions bad_map = o;
  bad_map.jwt_role_map = {"reader"};
  EXPECT_NE(ValidateServiceOptions(bad_map).message().find("ROLE=VALUE"), std::string::npos);
}

}  // namespace
}  // namespace gantry::registry
