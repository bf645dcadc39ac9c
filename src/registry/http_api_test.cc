// Handler-level tests of the registry HTTP API (no sockets): reads, writes,
// the reader/writer/admin matrix, 401/403 shapes, bad JSON, size limits.
#include "gantry/registry/http_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gantry/security/crypto.h"
#include "response_body.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

constexpr char kSecret[] = "0123456789abcdef0123456789abcdef-test-secret";

class HttpApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/gantry-registry-http-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    root_ = t;
    fs::create_directories(root_ / "m");
    std::ofstream(root_ / "m/w.bin") << "weights";
    auto meta = OpenSqliteMetadataStore((root_ / "r.sqlite").string());
    ASSERT_TRUE(meta.ok());
    auto store = storage::OpenObjectStore("file://" + (root_ / "a").string());
    ASSERT_TRUE(store.ok());
    reg_ = std::make_unique<Registry>(*std::move(meta), *std::move(store));
    RegisterRequest req;
    req.name = "bert";
    req.path = (root_ / "m").string();
    req.lineage.run_id = "run-1";
    ASSERT_TRUE(reg_->Register(req).ok());
    ASSERT_TRUE(reg_->SetAlias("bert", "champion", 1).ok());

    auto ks = security::KeyStore::Open(":memory:");
    ASSERT_TRUE(ks.ok());
    for (const char* role : {"reader", "writer", "admin", "bogus"}) {
      auto k = (*ks)->Create(std::string("k-") + role, role, 0, 1);
      ASSERT_TRUE(k.ok());
      keys_[role] = k->second;
      key_ids_[role] = k->first.id;
    }
    auto snap = (*ks)->Snapshot();
    ASSERT_TRUE(snap.ok());
    security::JwtOptions jo;
    jo.keys.push_back({.alg = "HS256", .kid = "", .secret = kSecret, .public_pem = ""});
    auto jwt = security::JwtVerifier::Create(jo);
    ASSERT_TRUE(jwt.ok()) << jwt.status().ToString();
    jwt_ = *std::move(jwt);
    opts_.keys = *snap;
    opts_.jwt = jwt_.get();
    security::AuditOptions ao;
    ao.path = (root_ / "audit.log").string();
    auto log = security::AuditLog::Open(ao);
    ASSERT_TRUE(log.ok());
    audit_ = *std::move(log);
    opts_.audit = audit_.get();
  }
  void TearDown() override {
    if (audit_) (void)audit_->Close();
    fs::remove_all(root_);
  }

  http::ServerResponse Call(const std::string& method, const std::string& target,
                            const std::string& body = "", const std::string& cred = "",
                            bool x_api_key = false) {
    http::ServerRequest req;
    req.method = method;
    req.target = target;
    size_t q = target.find('?');
    req.path = target.substr(0, q);
    req.query = q == std::string::npos ? "" : target.substr(q + 1);
    req.body = body;
    if (!cred.empty()) {
      if (x_api_key) {
        req.headers.push_back({"X-API-Key", cred});
      } else {
        req.headers.push_back({"Authorization", "Bearer " + cred});
      }
    }
    http::ServerResponse resp;
    HandleHttpRequest(*reg_, opts_, req, &resp);
    LoadBodyFile(&resp);
    return resp;
  }
  static Json J(const http::ServerResponse& r) { return Json::parse(r.body, nullptr, false); }

  fs::path root_;
  std::unique_ptr<Registry> reg_;
  std::map<std::string, std::string> keys_, key_ids_;
  std::unique_ptr<security::JwtVerifier> jwt_;
  std::unique_ptr<security::AuditLog> audit_;
  HttpApiOptions opts_;
};

TEST_F(HttpApiTest, MlflowShapedReads) {
  std::string k = keys_["reader"];
  auto r = Call("GET", "/api/2.0/mlflow/registered-models/get?name=bert", "", k);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(J(r)["registered_model"]["aliases"][0]["alias"], "champion");
  r = Call("GET", "/api/2.0/mlflow/model-versions/get?name=bert&version=1", "", k, true);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(J(r)["model_version"]["run_id"], "run-1");
  r = Call("GET", "/api/2.0/mlflow/registered-models/alias?name=bert&alias=champion", "", k);
  EXPECT_EQ(J(r)["model_version"]["version"], "1");
  r = Call("GET", "/api/2.0/mlflow/model-versions/get?name=bert&version=9", "", k);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(J(r)["error_code"], "RESOURCE_DOES_NOT_EXIST");
  r = Call("GET", "/api/2.0/mlflow/registered-models/search?max_results=0", "", k);
  EXPECT_EQ(r.status, 400);
  r = Call("GET", "/api/2.0/mlflow/model-versions/search?name=bert", "", k);
  ASSERT_EQ(J(r)["model_versions"].size(), 1u);
  std::string sha = J(r)["model_versions"][0]["files"][0]["sha256"];
  r = Call("GET", "/api/2.0/gantry/blobs/sha256/" + sha, "", k);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "weights");
  r = Call("GET", "/api/2.0/gantry/blobs/sha256/" + std::string(64, '0'), "", k);
  EXPECT_EQ(r.status, 404);
}

TEST_F(HttpApiTest, UnauthenticatedIs401WithChallenge) {
  for (const std::string& cred : {std::string(), std::string("gk_nonsense"),
                                  keys_["reader"].substr(0, 62) + "x", std::string("a.b.c")}) {
    auto r = Call("GET", "/api/2.0/mlflow/registered-models/search", "", cred);
    EXPECT_EQ(r.status, 401) << cred;
    EXPECT_EQ(J(r)["error_code"], "UNAUTHENTICATED");
    bool challenge = false;
    for (const auto& [h, v] : r.headers) challenge |= h == "WWW-Authenticate";
    EXPECT_TRUE(challenge);
    // The presented secret is never echoed.
    if (cred.size() > 20) {
      EXPECT_EQ(r.body.find(cred.substr(20)), std::string::npos);
    }
  }
  auto r = Call("POST", "/api/2.0/mlflow/registered-models/create", R"({"name":"x"})");
  EXPECT_EQ(r.status, 401);
  EXPECT_FALSE(reg_->meta().GetModel("x").ok());
}

TEST_F(HttpApiTest, RoleMatrix) {
  struct Ep {
    std::string method, target, body, needs;
  };
  std::vector<Ep> eps = {
      {"GET", "/api/2.0/mlflow/registered-models/search", "", "reader"},
      {"GET", "/api/2.0/mlflow/model-versions/get?name=bert&version=1", "", "reader"},
      {"POST", "/api/2.0/mlflow/registered-models/create", R"({"name":"m-ROLE"})", "writer"},
      {"POST", "/api/2.0/mlflow/model-versions/set-tag",
       R"({"name":"bert","version":"1","key":"k","value":"v"})", "writer"},
      {"POST", "/api/2.0/mlflow/model-versions/update",
       R"({"name":"bert","version":"1","description":"d"})", "writer"},
      {"POST", "/api/2.0/mlflow/registered-models/alias",
       R"({"name":"bert","alias":"staging","version":"1"})", "writer"},
      {"DELETE", "/api/2.0/mlflow/registered-models/alias?name=bert&alias=staging", "", "writer"},
      {"POST", "/api/2.0/gantry/policy", R"({"require_signatures":false})", "admin"},
  };
  std::map<std::string, int> rank = {{"reader", 1}, {"writer", 2}, {"admin", 3}, {"bogus", 0}};
  for (const char* role : {"reader", "writer", "admin", "bogus"}) {
    for (auto e : eps) {
      if (auto p = e.body.find("ROLE"); p != std::string::npos) e.body.replace(p, 4, role);
      // The alias delete needs an alias to exist when it is allowed.
      if (e.method == "DELETE" && rank[role] >= 2) {
        ASSERT_TRUE(reg_->SetAlias("bert", "staging", 1).ok());
      }
      auto r = Call(e.method, e.target, e.body, keys_[role]);
      if (rank[role] >= rank[e.needs]) {
        EXPECT_EQ(r.status, 200) << role << " " << e.method << " " << e.target << ": " << r.body;
      } else {
        EXPECT_EQ(r.status, 403) << role << " " << e.method << " " << e.target;
        EXPECT_EQ(J(r)["error_code"], "PERMISSION_DENIED");
        EXPECT_EQ(J(r)["required_role"], e.needs);
      }
    }
  }
}

TEST_F(HttpApiTest, JwtRoleClaimAndAuditActor) {
  Json claims = {{"sub", "alice"}, {"role", "writer"}, {"exp", 4102444800}};
  auto tok = security::SignJwt("HS256", kSecret, "", claims);
  ASSERT_TRUE(tok.ok());
  auto r = Call("POST", "/api/2.0/mlflow/registered-models/alias",
                R"({"name":"bert","alias":"prod","version":"1"})", *tok);
  ASSERT_EQ(r.status, 200) << r.body;
  claims["role"] = "reader";
  auto rtok = security::SignJwt("HS256", kSecret, "", claims);
  r = Call("POST", "/api/2.0/mlflow/registered-models/alias",
           R"({"name":"bert","alias":"prod","version":"1"})", *rtok);
  EXPECT_EQ(r.status, 403);
  auto bad = security::SignJwt("HS256", std::string(kSecret) + "x", "", claims);
  r = Call("GET", "/api/2.0/mlflow/registered-models/search", "", *bad);
  EXPECT_EQ(r.status, 401);
  ASSERT_TRUE(audit_->Flush().ok());
  std::ifstream in(root_ / "audit.log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"actor\":\"jwt:alice\""), std::string::npos) << all;
  EXPECT_NE(all.find("alias_set"), std::string::npos);
}

TEST_F(HttpApiTest, BadJsonNamesTheFieldAndOversizedIs413) {
  std::string w = keys_["writer"];
  auto r = Call("POST", "/api/2.0/mlflow/registered-models/alias", "{not json", w);
  EXPECT_EQ(r.status, 400);
  r = Call("POST", "/api/2.0/mlflow/registered-models/alias", R"({"name":"bert","alias":"a"})", w);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(J(r)["message"].get<std::string>().find("'version'"), std::string::npos) << r.body;
  r = Call("POST", "/api/2.0/mlflow/registered-models/alias",
           R"({"name":"bert","alias":"a","version":"x1"})", w);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(J(r)["message"].get<std::string>().find("'version'"), std::string::npos);
  r = Call("POST", "/api/2.0/mlflow/model-versions/set-tag",
           R"({"name":"bert","version":"1","key":5,"value":"v"})", w);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(J(r)["message"].get<std::string>().find("'key'"), std::string::npos);
  r = Call("POST", "/api/2.0/mlflow/model-versions/create",
           R"({"name":"bert","files":[{"path":"../x","sha256":"00","size":1}]})", w);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(J(r)["message"].get<std::string>().find("files[0]"), std::string::npos) << r.body;
  std::string big =
      R"({"name":"bert","description":")" + std::string(kMaxJsonBodyBytes, 'x') + "\"}";
  r = Call("POST", "/api/2.0/mlflow/registered-models/update", big, w);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(J(r)["error_code"], "REQUEST_TOO_LARGE");
}

TEST_F(HttpApiTest, UploadThenCreateVersionAndAliasCas) {
  std::string w = keys_["writer"];
  std::string data = "new weights";
  std::string sha = security::Sha256Hex(data);
  // Digest mismatch: nothing stored.
  auto r = Call("PUT", "/api/2.0/gantry/blobs/sha256/" + sha, "other bytes", w);
  EXPECT_EQ(r.status, 400);
  Json create = {{"name", "bert"},
                 {"description", "v2"},
                 {"files", {{{"path", "w.bin"}, {"sha256", sha}, {"size", data.size()}}}},
                 {"tags", {{"stage", "test"}}},
                 {"run_id", "run-2"}};
  r = Call("POST", "/api/2.0/mlflow/model-versions/create", create.dump(), w);
  EXPECT_EQ(r.status, 412) << r.body;
  EXPECT_NE(r.body.find("w.bin"), std::string::npos);
  EXPECT_EQ((*reg_->meta().GetModel("bert")).latest_version, 1);  // nothing visible
  r = Call("PUT", "/api/2.0/gantry/blobs/sha256/" + sha, data, w);
  EXPECT_EQ(r.status, 201) << r.body;
  r = Call("PUT", "/api/2.0/gantry/blobs/sha256/" + sha, data, w);
  EXPECT_EQ(r.status, 200);
  r = Call("POST", "/api/2.0/mlflow/model-versions/create", create.dump(), w);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(J(r)["model_version"]["version"], "2");
  // The stored version verifies like a locally registered one.
  auto rep = reg_->Verify("bert/2");
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->bytes, data.size());

  r = Call("POST", "/api/2.0/mlflow/registered-models/alias",
           R"({"name":"bert","alias":"champion","version":"2","expected_version":"2"})", w);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(*reg_->meta().ResolveAlias("bert", "champion"), 1);
  r = Call("POST", "/api/2.0/mlflow/registered-models/alias",
           R"({"name":"bert","alias":"champion","version":"2","expected_version":"1"})", w);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(*reg_->meta().ResolveAlias("bert", "champion"), 2);
  r = Call("POST", "/api/2.0/mlflow/registered-models/create", R"({"name":"bert"})", w);
  EXPECT_EQ(r.status, 409);

  ASSERT_TRUE(audit_->Close().ok());
  auto v = security::VerifyAuditLog((root_ / "audit.log").string(), "");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok) << v->reason;
  EXPECT_GE(v->records, 3u);
  std::ifstream in(root_ / "audit.log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"actor\":\"api_key:" + key_ids_["writer"] + "\""), std::string::npos);
  EXPECT_EQ(all.find(w.substr(20)), std::string::npos);  // no secret in the log
}

// Reads of signatures, policy and trusted keys are reader-level; deleting
// is admin-only and takes MLflow's JSON body or query parameters.
TEST_F(HttpApiTest, SignatureReadsAndAdminOnlyDeletes) {
  RegisterRequest req;
  req.name = "bert";
  req.path = (root_ / "m").string();
  ASSERT_TRUE(reg_->Register(req).ok());  // bert/2, same bytes as bert/1
  auto kp = security::GenerateSigningKey(security::KeyAlgorithm::kEd25519);
  ASSERT_TRUE(kp.ok());
  auto signer = security::DsseSigner::FromPrivatePem(kp->private_pem);
  ASSERT_TRUE(signer.ok());
  ASSERT_TRUE(reg_->Sign("bert/1", *signer).ok());

  std::string rk = keys_["reader"];
  auto r = Call("GET", "/api/2.0/gantry/signatures?name=bert&version=1", "", rk);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(J(r)["signatures"].size(), 1u);
  EXPECT_EQ(J(r)["signatures"][0]["keyid"], signer->KeyId());
  EXPECT_TRUE(ParseBundle(J(r)["signatures"][0]["bundle"].get<std::string>()).ok());
  r = Call("GET", "/api/2.0/gantry/signatures?name=bert&version=champion", "", rk);
  EXPECT_EQ(r.status, 400) << r.body;
  r = Call("GET", "/api/2.0/gantry/policy", "", rk);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(J(r)["require_signatures"], false);
  r = Call("GET", "/api/2.0/gantry/trusted-keys", "", rk);
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(J(r)["trusted_keys"].empty());

  for (const char* role : {"reader", "writer", "bogus"}) {
    r = Call("DELETE", "/api/2.0/mlflow/model-versions/delete?name=bert&version=2", "",
             keys_[role]);
    EXPECT_EQ(r.status, 403) << role;
    EXPECT_EQ(J(r)["required_role"], "admin");
  }
  std::string ak = keys_["admin"];
  r = Call("DELETE", "/api/2.0/mlflow/model-versions/delete", R"({"name":"bert"})", ak);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(J(r)["message"].get<std::string>().find("version"), std::string::npos);
  r = Call("DELETE", "/api/2.0/mlflow/model-versions/delete", R"({"name":"bert","version":"0"})",
           ak);
  EXPECT_EQ(r.status, 400) << r.body;
  r = Call("POST", "/api/2.0/mlflow/model-versions/delete", R"({"name":"bert","version":"2"})", ak);
  EXPECT_EQ(r.status, 405) << r.body;
  r = Call("DELETE", "/api/2.0/mlflow/model-versions/delete", R"({"name":"bert","version":"2"})",
           ak);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(J(r)["deleted"]["versions"], Json::array({"2"}));
  EXPECT_EQ(J(r)["deleted"]["blobs_removed"], 0);  // bert/1 has the same bytes
  EXPECT_TRUE(reg_->Verify("bert/1").ok());
  r = Call("DELETE", "/api/2.0/mlflow/registered-models/delete?name=bert", "", ak);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(J(r)["deleted"]["aliases_removed"], Json::array({"champion"}));
  EXPECT_EQ(J(r)["deleted"]["blobs_removed"], 1);
  r = Call("DELETE", "/api/2.0/mlflow/registered-models/delete?name=bert", "", ak);
  EXPECT_EQ(r.status, 404);
  ASSERT_TRUE(audit_->Close().ok());
  std::ifstream in(root_ / "audit.log");
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("\"action\":\"delete_model\""), std::string::npos);
  EXPECT_NE(log.find("api_key:" + key_ids_["admin"]), std::string::npos);
  audit_.reset();
}

// The route table decides 404 and 405, after authentication (an anonymous
// client learns nothing about which paths exist).
TEST_F(HttpApiTest, UnknownEndpointsAre404AndOtherMethods405) {
  std::string k = keys_["reader"];
  auto r = Call("GET", "/api/2.0/mlflow/registered-models/nope", "", k);
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(J(r)["error_code"], "RESOURCE_DOES_NOT_EXIST");
  r = Call("GET", "/api/2.0/mlflow/registered-models/nope", "");
  EXPECT_EQ(r.status, 401);
  r = Call("PUT", "/api/2.0/gantry/trusted-keys", "", k);
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_EQ(J(r)["error_code"], "METHOD_NOT_ALLOWED");
  bool allow = false;
  for (const auto& [h, v] : r.headers) allow |= h == "Allow" && v == "GET, POST, DELETE";
  EXPECT_TRUE(allow);
  r = Call("GET", "/api/2.0/gantry/blobs/sha256/not-a-digest", "", k);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(J(r)["message"].get<std::string>().find("64 lowercase hex"), std::string::npos);
  r = Call("GET", "/api/2.0/gantry/blobs/sha256/a/b", "", k);
  EXPECT_EQ(r.status, 404) << r.body;
  r = Call("GET", "/elsewhere", "", k);
  EXPECT_EQ(r.status, 404) << r.body;
}

}  // namespace
}  // namespace gantry::registry
