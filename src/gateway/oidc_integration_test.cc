// The gateway with OpenID Connect JWTs from a local issuer on loopback that
// rotates its signing keys while clients keep sending requests: every request
// with a valid token must pass (no 401), invalid ones must be refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/http_client.h"
#include "gantry/core/http_server.h"
#include "gantry/gateway/config.h"
#include "gantry/gateway/server.h"
#include "gantry/security/jwt.h"
#include "gantry/security/oidc.h"
#include "testing/test_keys.h"

namespace gantry::gateway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kTenant = "11111111-2222-3333-4444-555555555555";
constexpr const char* kAudience = "api://gantry-gateway";

struct Key {
  std::string kid, priv, pub;
};

Key MakeKey(const std::string& kid) {
  gantry::testing::PemKeyPair p = gantry::testing::GenerateKeyPair("RSA");
  return Key{kid, std::move(p.priv), std::move(p.pub)};
}

// Discovery document + JWKS; the published keys can be replaced at any time.
class Issuer {
 public:
  Issuer() {
    server_.Handle("/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      std::lock_guard<std::mutex> l(mu_);
      resp->content_type = "application/json";
      if (req.path == "/keys") {
        ++jwks_fetches_;
        resp->body = jwks_.dump();
      } else if (req.path ==
                 "/" + std::string(kTenant) + "/v2.0/.well-known/openid-configuration") {
        resp->body = json{{"issuer", issuer_}, {"jwks_uri", base_ + "/keys"}}.dump();
      } else {
        resp->status = 404;
      }
    });
    EXPECT_TRUE(server_.Start({.listen = "127.0.0.1:0", .handler_threads = 4}).ok());
    base_ = "http://127.0.0.1:" + std::to_string(server_.port());
    issuer_ = base_ + "/" + kTenant + "/v2.0";
  }
  ~Issuer() { server_.Stop(); }
  const std::string& issuer() const { return issuer_; }
  void Publish(const std::vector<const Key*>& keys) {
    json arr = json::array();
    for (const Key* k : keys) {
      auto jwk = security::PublicKeyToJwk(k->pub, k->kid);
      EXPECT_TRUE(jwk.ok()) << jwk.status().ToString();
      arr.push_back(*jwk);
    }
    std::lock_guard<std::mutex> l(mu_);
    jwks_ = {{"keys", arr}};
  }
  int jwks_fetches() {
    std::lock_guard<std::mutex> l(mu_);
    return jwks_fetches_;
  }

 private:
  http::Server server_;
  std::string base_, issuer_;
  std::mutex mu_;
  json jwks_ = {{"keys", json::array()}};
  int jwks_fetches_ = 0;
};

std::string Token(const Key& k, const std::string& issuer, json extra = json::object()) {
  int64_t now = std::time(nullptr);
  json c = {{"iss", issuer},   {"aud", kAudience},           {"tid", kTenant},
            {"sub", "svc-1"},  {"exp", now + 3600},          {"nbf", now - 60},
            {"iat", now - 60}, {"scp", "user_impersonation"}};
  c.update(extra);
  auto t = security::SignJwt("RS256", k.priv, k.kid, c);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

class OidcGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gantry-gw-oidc-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    backend_.Handle("/", [](const http::ServerRequest&, http::ServerResponse* resp) {
      resp->body = "{\"ok\":true}";
    });
    ASSERT_TRUE(backend_.Start({.listen = "127.0.0.1:0", .handler_threads = 4}).ok());
  }
  void TearDown() override {
    if (gw_) gw_->Stop(1000);
    gw_.reset();
    backend_.Stop();
    fs::remove_all(dir_);
  }

  void Start() {
    std::string yaml =
        "listen: 127.0.0.1:0\nworkers: 2\n"
        "backends:\n  - {name: b, url: http://127.0.0.1:" +
        std::to_string(backend_.port()) +
        "}\n"
        "routes:\n  - {prefix: /, backend: b}\n"
        "state: state.db\n"
        "roles:\n  user:\n    - {action: route:invoke}\n"
        "auth:\n"
        "  api_keys: false\n"
        "  jwt:\n"
        "    audience: " +
        std::string(kAudience) +
        "\n"
        "    role_map: {user: [user_impersonation]}\n"
        "    oidc:\n"
        "      issuer: " +
        issuer_.issuer() +
        "\n"
        "      tenants: [" +
        kTenant +
        "]\n"
        // Keys rotate twice within the test: let each unknown kid refetch at
        // once (production keeps the 5m default).
        "      unknown_kid_refresh: 0s\n"
        "      timeout: 5s\n";
    std::string path = (dir_ / "gateway.yaml").string();
    std::ofstream(path) << yaml;
    auto cfg = LoadGatewayConfig(path);
    ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
    auto gw = Gateway::Create(std::move(*cfg));
    ASSERT_TRUE(gw.ok()) << gw.status().ToString();
    gw_ = std::move(*gw);
    ASSERT_TRUE(gw_->Start().ok());
  }

  int Call(const std::string& token) {
    http::Request r;
    r.url = gw_->url() + "/v1/models";
    r.headers.push_back({"Authorization", "Bearer " + token});
    r.deadline = std::chrono::seconds(20);
    auto resp = http::Send(r);
    return resp.ok() ? resp->status : -1;
  }

  fs::path dir_;
  Issuer issuer_;
  http::Server backend_;
  std::unique_ptr<Gateway> gw_;
};

TEST_F(OidcGatewayTest, KeyRotationUnderLoadNeverRefusesAValidToken) {
  const Key a = MakeKey("key-a"), b = MakeKey("key-b"), c = MakeKey("key-c");
  const Key rogue = MakeKey("key-b");  // claims kid key-b, never published
  issuer_.Publish({&a});
  Start();

  // The tokens clients use now; replaced between phases.
  std::mutex mu;
  std::vector<std::string> valid = {Token(a, issuer_.issuer())};
  const std::vector<std::string> invalid = {
      Token(rogue, issuer_.issuer()),                                   // bad_signature
      Token(a, issuer_.issuer(), {{"exp", std::time(nullptr) - 600}}),  // expired
      Token(a, issuer_.issuer(), {{"aud", "api://someone-else"}}),      // audience_mismatch
      Token(a, issuer_.issuer(),
            {{"tid", "99999999-8888-7777-6666-555555555555"}}),  // tenant_not_allowed
      Token(a, issuer_.issuer(), {{"scp", "openid"}}),           // no_role
      Token(a, "https://sts.windows.net/another/"),              // issuer_mismatch
  };

  std::atomic<bool> stop{false};
  std::atomic<int> valid_ok{0}, valid_failed{0}, invalid_refused{0}, invalid_passed{0};
  std::vector<std::string> failures;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        std::string token;
        {
          std::lock_guard<std::mutex> l(mu);
          token = valid[static_cast<size_t>(i + t) % valid.size()];
        }
        int s = Call(token);
        if (s == 200) {
          ++valid_ok;
        } else {
          ++valid_failed;
          std::lock_guard<std::mutex> l(mu);
          failures.push_back(std::to_string(s));
        }
        if (t == 0 && i % 4 == 0) {
          int bad = Call(invalid[static_cast<size_t>(i / 4) % invalid.size()]);
          (bad == 401 ? invalid_refused : invalid_passed)++;
        }
      }
    });
  }
  auto wait_for_requests = [&](int more) {
    int target = valid_ok.load() + valid_failed.load() + more;
    while (valid_ok.load() + valid_failed.load() < target) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_for_requests(200);
  // Rotation 1: b is published next to a; new tokens are signed with b while
  // tokens signed with a stay in use.
  issuer_.Publish({&a, &b});
  {
    std::lock_guard<std::mutex> l(mu);
    valid = {Token(a, issuer_.issuer()), Token(b, issuer_.issuer())};
  }
  wait_for_requests(300);
  // Rotation 2: a is retired (clients stop using it first), c arrives.
  {
    std::lock_guard<std::mutex> l(mu);
    valid = {Token(b, issuer_.issuer())};
  }
  wait_for_requests(50);
  issuer_.Publish({&b, &c});
  {
    std::lock_guard<std::mutex> l(mu);
    valid = {Token(b, issuer_.issuer()), Token(c, issuer_.issuer())};
  }
  wait_for_requests(300);
  stop = true;
  for (auto& th : clients) th.join();

  EXPECT_EQ(valid_failed.load(), 0) << "statuses: " << ::testing::PrintToString(failures);
  EXPECT_GE(valid_ok.load(), 850);
  EXPECT_EQ(invalid_passed.load(), 0);
  EXPECT_GT(invalid_refused.load(), 0);
  // The keys were fetched at start and once per rotation, not per request.
  EXPECT_GE(issuer_.jwks_fetches(), 3);
  EXPECT_LT(issuer_.jwks_fetches(), 100);
  // Withdrawn: a's tokens are refused now, c's pass.
  EXPECT_EQ(Call(Token(a, issuer_.issuer())), 401);
  EXPECT_EQ(Call(Token(c, issuer_.issuer())), 200);
  EXPECT_EQ(Call("not-a-token"), 401);
}

}  // namespace
}  // namespace gantry::gateway
