// End to end over a real socket: a registry served on 127.0.0.1:0 with API
// keys, used through RemoteClient (the client `gantry registry --server`
// uses): register from a directory, alias compare-and-set, download with
// verification, an unauthenticated write refused, the audit log verified;
// streamed transfers of large files, --from-ckpt through the server, and
// tampered downloads leaving nothing under the final name; a slow upload that
// delays no other client.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "gantry/ckpt/manager.h"
#include "gantry/core/http_client.h"
#include "gantry/registry/http_api.h"
#include "gantry/registry/remote_client.h"
#include "gantry/security/crypto.h"
#include "response_body.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RegistryHttpIntegration, RemoteRegisterAliasDownloadAndAudit) {
  char t[] = "/tmp/gantry-registry-remote-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  fs::path root = t;
  fs::create_directories(root / "model/sub");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 13);
  { std::ofstream(root / "model/weights.bin", std::ios::binary) << big; }
  std::ofstream(root / "model/config.json") << R"({"layers": 2})";
  std::ofstream(root / "model/sub/tok.txt") << "hello";

  auto meta = OpenSqliteMetadataStore((root / "r.sqlite").string());
  ASSERT_TRUE(meta.ok());
  auto store = storage::OpenObjectStore("file://" + (root / "art").string());
  ASSERT_TRUE(store.ok());
  Registry reg(*std::move(meta), *std::move(store));
  auto ks = security::KeyStore::Open((root / "keys.sqlite").string());
  ASSERT_TRUE(ks.ok());
  auto writer = (*ks)->Create("ci", "writer", 0, 1);
  auto reader = (*ks)->Create("viewer", "reader", 0, 1);
  ASSERT_TRUE(writer.ok() && reader.ok());
  security::AuditOptions ao;
  ao.path = (root / "audit.log").string();
  auto audit = security::AuditLog::Open(ao);
  ASSERT_TRUE(audit.ok());

  HttpApiOptions api;
  api.key_store = ks->get();
  api.keys = *(*ks)->Snapshot();
  api.audit = audit->get();
  http::Server server;
  AddHttpRoutes(reg, api, server);
  http::ServerOptions so;
  so.max_body_bytes = 8 << 20;
  so.handler_threads = 4;  // as `gantry registry serve` runs it
  ASSERT_TRUE(server.Start(so).ok());
  std::string base = "http://127.0.0.1:" + std::to_string(server.port());

  RemoteClient w({.server = base, .credential = writer->second});
  RemoteClient r({.server = base, .credential = reader->second});
  RemoteClient anon({.server = base, .credential = ""});

  RegisterRequest req;
  req.name = "llama";
  req.path = (root / "model").string();
  req.lineage.run_id = "run-7";
  req.tags["team"] = "ml";
  auto v1 = w.Register(req);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->version, 1);
  EXPECT_EQ(v1->files.size(), 3u);
  std::ofstream(root / "model/config.json") << R"({"layers": 3})";
  auto v2 = w.Register(req);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->version, 2);
  // The server-side registry verifies what arrived over the wire.
  ASSERT_TRUE(reg.Verify("llama/2").ok());

  // A reader may not register; nobody unauthenticated may write.
  auto denied = r.Register(req);
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  auto anon_set = anon.Call("POST", "registered-models/alias",
                            Json{{"name", "llama"}, {"alias", "prod"}, {"version", "1"}});
  ASSERT_FALSE(anon_set.ok());
  EXPECT_NE(anon_set.status().message().find("HTTP 401"), std::string::npos);
  EXPECT_FALSE(reg.meta().ResolveAlias("llama", "prod").ok());

  // Alias compare-and-set: create, conflict, move.
  Json set = {{"name", "llama"}, {"alias", "prod"}, {"version", "1"}, {"expected_version", "0"}};
  ASSERT_TRUE(w.Call("POST", "registered-models/alias", set).ok());
  set["version"] = "2";
  auto conflict = w.Call("POST", "registered-models/alias", set);  // expects "unset": conflict
  ASSERT_FALSE(conflict.ok());
  EXPECT_NE(conflict.status().message().find("HTTP 409"), std::string::npos)
      << conflict.status().ToString();
  set["expected_version"] = "1";
  ASSERT_TRUE(w.Call("POST", "registered-models/alias", set).ok());
  EXPECT_EQ(*reg.meta().ResolveAlias("llama", "prod"), 2);

  // Download through the alias with a reader key: every byte verified.
  auto rep = r.Download("llama@prod", (root / "out").string(), {});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->version, 2);
  EXPECT_EQ(rep->files, 3u);
  EXPECT_EQ(Slurp(root / "out/weights.bin"), big);
  EXPECT_EQ(Slurp(root / "out/config.json"), R"({"layers": 3})");
  EXPECT_EQ(Slurp(root / "out/sub/tok.txt"), "hello");
  // An existing destination is refused without overwrite.
  EXPECT_EQ(r.Download("llama/1", (root / "out").string(), {}).status().code(),
            StatusCode::kAlreadyExists);

  // Tampering in the store is caught by the client and nothing is written.
  auto got = reg.Resolve("llama/1");
  ASSERT_TRUE(got.ok());
  std::string tok_sha;
  for (const auto& f : got->files)
    if (f.path == "sub/tok.txt") tok_sha = f.sha256;
  std::string blob_key = BlobKey(tok_sha);
  ASSERT_TRUE(
      reg.artifacts()
          .Put(blob_key, std::span<const std::byte>(reinterpret_cast<const std::byte*>("HELLO"), 5))
          .ok());
  auto bad = r.Download("llama/1", (root / "out1").string(), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  EXPECT_FALSE(fs::exists(root / "out1"));

  // A revoked key stops working on the next request (snapshot refresh).
  ASSERT_TRUE((*ks)->Revoke(writer->first.id, 2).ok());
  EXPECT_FALSE(w.Call("GET", "registered-models/search").ok());

  server.Stop();
  ASSERT_TRUE((*audit)->Close().ok());
  auto vr = security::VerifyAuditLog(ao.path, "");
  ASSERT_TRUE(vr.ok());
  EXPECT_TRUE(vr->ok) << vr->reason;
  std::string log = Slurp(ao.path);
  EXPECT_NE(log.find("\"action\":\"register\""), std::string::npos);
  EXPECT_NE(log.find("\"action\":\"alias_set\""), std::string::npos);
  EXPECT_NE(log.find("api_key:" + writer->first.id), std::string::npos);
  EXPECT_EQ(log.find(writer->second), std::string::npos);  // never the key itself
  fs::remove_all(root);
}

// A served registry with reader/writer/admin API keys and an audit log.
// `tamper` (when set) may rewrite any response, playing a compromised server.
struct Served {
  fs::path root;
  std::unique_ptr<Registry> reg;
  std::unique_ptr<security::KeyStore> ks;
  std::unique_ptr<security::AuditLog> audit;
  std::string audit_path;
  std::map<std::string, std::string> keys;  // role -> secret
  HttpApiOptions api;
  http::Server server;
  std::string base;
  std::function<void(const http::ServerRequest&, http::ServerResponse*)> tamper;

  explicit Served(size_t max_body = 8 << 20, uint64_t max_blob = 256 << 20) {
    char t[] = "/tmp/gantry-registry-remote2-XXXXXX";
    EXPECT_NE(::mkdtemp(t), nullptr);
    root = t;
    auto meta = OpenSqliteMetadataStore((root / "r.sqlite").string());
    auto store = storage::OpenObjectStore("file://" + (root / "art").string());
    EXPECT_TRUE(meta.ok() && store.ok());
    reg = std::make_unique<Registry>(*std::move(meta), *std::move(store));
    auto k = security::KeyStore::Open((root / "keys.sqlite").string());
    EXPECT_TRUE(k.ok());
    ks = *std::move(k);
    for (const char* role : {"reader", "writer", "admin"}) {
      auto c = ks->Create(std::string("k-") + role, role, 0, 1);
      EXPECT_TRUE(c.ok());
      keys[role] = c->second;
    }
    security::AuditOptions ao;
    audit_path = ao.path = (root / "audit.log").string();
    auto a = security::AuditLog::Open(ao);
    EXPECT_TRUE(a.ok());
    audit = *std::move(a);
    api.key_store = ks.get();
    api.keys = *ks->Snapshot();
    api.audit = audit.get();
    api.max_blob_bytes = max_blob;
    api.spool_dir = (root / "spool").string();
    AddHttpRoutes(*reg, api, server);
    // A second route tree that can lie: /evil/api/... is served like /api/...
    // and then passed through `tamper`.
    server.Handle("/evil/", [this](const http::ServerRequest& req, http::ServerResponse* resp) {
      http::ServerRequest r = req;
      r.path = req.path.substr(5);  // "/evil/api/2.0/..." -> "/api/2.0/..."
      HandleHttpRequest(*reg, api, r, resp);
      if (tamper) {
        LoadBodyFile(resp);
        tamper(r, resp);
      }
    });
    http::ServerOptions so;
    so.max_body_bytes = max_body;
    so.handler_threads = 4;  // as `gantry registry serve` runs it
    EXPECT_TRUE(server.Start(so).ok());
    base = "http://127.0.0.1:" + std::to_string(server.port());
  }
  ~Served() {
    server.Stop();
    if (audit) (void)audit->Close();
    fs::remove_all(root);
  }
  // A client with `role`'s key trusting `trusted` for downloads.
  RemoteClient Client(const std::string& role, bool evil = false,
                      std::vector<security::DsseVerifier> trusted = {}) {
    // The client appends /api/2.0/...; with "/evil" that reaches the tampering route.
    return RemoteClient({.server = evil ? base + "/evil" : base,
                         .credential = keys[role],
                         .trusted = std::move(trusted)});
  }
};

std::string MakeModel(const fs::path& dir, const std::string& salt) {
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "weights.bin", std::ios::binary) << std::string(100000, 'w') << salt;
  std::ofstream(dir / "config.json") << R"({"layers": 2})";
  std::ofstream(dir / "sub/tok.txt") << "hello";
  return dir.string();
}

struct KeyPair {
  security::DsseSigner signer;
  std::vector<security::DsseVerifier> trusted;
};
// A client's trust anchors: the key pair's public key.
std::vector<security::DsseVerifier> Trust(const KeyPair& k) {
  std::vector<security::DsseVerifier> out;
  auto v = security::DsseVerifier::FromPublicPem(k.signer.PublicKeyPem());
  EXPECT_TRUE(v.ok());
  out.push_back(*std::move(v));
  return out;
}

KeyPair NewKey(security::KeyAlgorithm alg) {
  auto kp = security::GenerateSigningKey(alg);
  EXPECT_TRUE(kp.ok());
  auto s = security::DsseSigner::FromPrivatePem(kp->private_pem);
  auto v = security::DsseVerifier::FromPublicPem(kp->public_pem);
  EXPECT_TRUE(s.ok() && v.ok());
  KeyPair out{*std::move(s), {}};
  out.trusted.push_back(*std::move(v));
  return out;
}

TEST(RegistryHttpIntegration, RemoteDownloadVerifiesSignaturesAgainstClientKeys) {
  Served srv;
  RemoteClient w = srv.Client("writer"), r = srv.Client("reader"), a = srv.Client("admin");
  RegisterRequest req;
  req.name = "llama";
  req.path = MakeModel(srv.root / "m1", "1");
  ASSERT_TRUE(w.Register(req).ok());
  req.path = MakeModel(srv.root / "m2", "2");
  ASSERT_TRUE(w.Register(req).ok());
  KeyPair release = NewKey(security::KeyAlgorithm::kEd25519);
  KeyPair other = NewKey(security::KeyAlgorithm::kEcdsaP256);

  // A reader may not sign; a writer signs on the client, the server stores it.
  EXPECT_EQ(r.Sign("llama/1", release.signer).status().code(), StatusCode::kPermissionDenied);
  auto kid = w.Sign("llama/1", release.signer);
  ASSERT_TRUE(kid.ok()) << kid.status().ToString();
  EXPECT_EQ(*kid, release.signer.KeyId());
  EXPECT_EQ(srv.reg->meta().Signatures("llama", 1)->count(*kid), 1u);
  // The server-side registry accepts the client's signature once it trusts the key.
  ASSERT_TRUE(srv.reg->TrustKey(release.signer.PublicKeyPem(), "release").ok());
  EXPECT_TRUE(srv.reg->Verify("llama/1", true).ok());

  // Readers trusting the release key, another key, or none (r).
  RemoteClient r_release = srv.Client("reader", false, Trust(release));
  RemoteClient r_other = srv.Client("reader", false, Trust(other));
  ExportOptions required;
  required.require_signature = true;
  const ExportOptions plain;
  auto rep = r_release.Download("llama/1", (srv.root / "out1").string(), required);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->signed_by_trusted);
  EXPECT_EQ(rep->verified_keyids, std::vector<std::string>{*kid});
  EXPECT_EQ(rep->files, 3u);
  // The written model.sig verifies offline against the same key.
  auto bundle = Slurp(srv.root / "out1" / "model.sig");
  auto who = VerifyDirectory((srv.root / "out1").string(), bundle, release.trusted);
  EXPECT_TRUE(who.ok()) << who.status().ToString();

  // Wrong key: refused with or without --require-signature.
  auto wrong = r_other.Download("llama/1", (srv.root / "out2").string(), required);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find("trusted"), std::string::npos)
      << wrong.status().message();
  EXPECT_EQ(r_other.Download("llama/1", (srv.root / "out2").string(), plain).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(srv.root / "out2"));

  // Unsigned version under a required signature: refused, naming why.
  auto unsigned_v = r_release.Download("llama/2", (srv.root / "out3").string(), required);
  ASSERT_FALSE(unsigned_v.ok());
  EXPECT_EQ(unsigned_v.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(unsigned_v.status().message().find("not signed"), std::string::npos)
      << unsigned_v.status().message();
  // Required but no local key: refused (the server's keys are not trusted).
  auto nk = r.Download("llama/1", (srv.root / "out3").string(), required);
  EXPECT_EQ(nk.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(nk.status().message().find("--pubkey"), std::string::npos) << nk.status().message();
  // The server's policy makes the client stricter.
  EXPECT_TRUE(r_release.Download("llama/2", (srv.root / "out4").string(), plain).ok());
  ASSERT_TRUE(a.CallGantry("POST", "policy", Json{{"require_signatures", true}}).ok());
  auto pol = r.CallGantry("GET", "policy");
  ASSERT_TRUE(pol.ok());
  EXPECT_EQ((*pol)["require_signatures"], true);
  auto by_policy = r_release.Download("llama/2", (srv.root / "out5").string(), plain);
  ASSERT_FALSE(by_policy.ok());
  EXPECT_NE(by_policy.status().message().find("registry requires signatures"), std::string::npos)
      << by_policy.status().message();

  // verify --server: checks everything, writes nothing.
  auto ver = r_release.Verify("llama/1", false);
  ASSERT_TRUE(ver.ok()) << ver.status().ToString();
  EXPECT_TRUE(ver->signed_by_trusted);

  // A bundle over another manifest is refused by the server.
  auto v2 = srv.reg->Resolve("llama/2");
  ASSERT_TRUE(v2.ok());
  auto text2 = srv.reg->artifacts().Get(ManifestKey(v2->manifest_sha256));
  ASSERT_TRUE(text2.ok());
  auto env = security::SignDsse(kInTotoPayloadType, *text2, release.signer);
  ASSERT_TRUE(env.ok());
  auto misplaced = w.CallGantry("POST", "signatures",
                                Json{{"name", "llama"},
                                     {"version", "1"},
                                     {"bundle", BundleJson(*env, release.signer.KeyId()).dump()}});
  ASSERT_FALSE(misplaced.ok());
  EXPECT_EQ(misplaced.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misplaced.status().message().find("not the stored manifest"), std::string::npos)
      << misplaced.status().message();

  // A tampered blob is caught even though the signature is fine.
  auto v1 = srv.reg->Resolve("llama/1");
  ASSERT_TRUE(v1.ok());
  std::string tok_sha;
  for (const auto& f : v1->files)
    if (f.path == "sub/tok.txt") tok_sha = f.sha256;
  ASSERT_TRUE(srv.reg->artifacts()
                  .Put(BlobKey(tok_sha),
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>("HELLO"), 5))
                  .ok());
  auto bad = r_release.Download("llama/1", (srv.root / "out6").string(), plain);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("file sub/tok.txt of llama/1 was modified"),
            std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(fs::exists(srv.root / "out6"));
}

TEST(RegistryHttpIntegration, CompromisedServerAnswersAreRefused) {
  Served srv;
  RemoteClient w = srv.Client("writer");
  RegisterRequest req;
  req.name = "bert";
  req.path = MakeModel(srv.root / "m1", "1");
  ASSERT_TRUE(w.Register(req).ok());
  req.path = MakeModel(srv.root / "m2", "2");
  ASSERT_TRUE(w.Register(req).ok());
  KeyPair release = NewKey(security::KeyAlgorithm::kEd25519);
  ASSERT_TRUE(w.Sign("bert/1", release.signer).ok());
  RemoteClient evil = srv.Client("reader", /*evil=*/true, Trust(release));
  ExportOptions o;
  o.require_signature = true;
  ASSERT_TRUE(evil.Verify("bert/1", true).ok());  // no tampering yet

  auto rewrite = [&](const std::string& endpoint, std::function<void(Json&)> edit) {
    srv.tamper = [endpoint, edit](const http::ServerRequest& hreq, http::ServerResponse* resp) {
      if (hreq.path.ends_with(endpoint)) {
        Json j = Json::parse(resp->body);
        edit(j);
        resp->body = j.dump();
      }
    };
  };
  // Version 2 served with version 1's (valid) signature: payload differs.
  auto sig1 = srv.reg->meta().Signatures("bert", 1);
  ASSERT_TRUE(sig1.ok());
  rewrite("signatures", [&](Json& j) {
    j["signatures"] =
        Json::array({{{"keyid", sig1->begin()->first}, {"bundle", sig1->begin()->second}}});
  });
  auto swapped = evil.Verify("bert/2", true);
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(swapped.status().message().find("weights.bin"), std::string::npos)
      << swapped.status().message();
  // An extra file listed that the manifest does not have.
  rewrite("model-versions/get", [](Json& j) {
    j["model_version"]["files"].push_back(
        {{"path", "evil.py"}, {"sha256", std::string(64, 'e')}, {"size", 1}});
  });
  auto extra = evil.Download("bert/1", (srv.root / "o1").string(), o);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(extra.status().message().find("evil.py"), std::string::npos)
      << extra.status().message();
  // A file left out of the list.
  rewrite("model-versions/get", [](Json& j) { j["model_version"]["files"].erase(0); });
  auto missing = evil.Download("bert/1", (srv.root / "o1").string(), o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos)
      << missing.status().message();
  // The signature dropped: unsigned under a required signature.
  rewrite("signatures", [](Json& j) { j["signatures"] = Json::array(); });
  auto dropped = evil.Download("bert/1", (srv.root / "o1").string(), o);
  EXPECT_EQ(dropped.status().code(), StatusCode::kPermissionDenied);
  // A different blob body served for a file.
  srv.tamper = [](const http::ServerRequest& hreq, http::ServerResponse* resp) {
    if (hreq.path.find("/blobs/") != std::string::npos && resp->body == "hello") {
      resp->body = "jello";
    }
  };
  auto swapped_blob = evil.Download("bert/1", (srv.root / "o1").string(), o);
  EXPECT_EQ(swapped_blob.status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(fs::exists(srv.root / "o1"));
}

TEST(RegistryHttpIntegration, RemoteDeleteSearchTrustAndPolicy) {
  Served srv;
  RemoteClient w = srv.Client("writer"), r = srv.Client("reader"), a = srv.Client("admin");
  RegisterRequest req;
  req.name = "gpt";
  req.path = MakeModel(srv.root / "m1", "1");
  req.lineage.run_id = "run-a";
  ASSERT_TRUE(w.Register(req).ok());  // gpt/1
  req.lineage.run_id = "run-b";
  req.tags["stage"] = "qa";
  ASSERT_TRUE(w.Register(req).ok());  // gpt/2, same bytes as 1
  req.path = MakeModel(srv.root / "m3", "3");
  ASSERT_TRUE(w.Register(req).ok());  // gpt/3
  ASSERT_TRUE(w.Call("POST", "registered-models/alias",
                     Json{{"name", "gpt"}, {"alias", "prod"}, {"version", "3"}})
                  .ok());

  // Search with lineage filters.
  auto s = r.Call("GET", "model-versions/search?run_id=run-b&tag=stage%3Dqa");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<std::string> got;
  for (const auto& v : (*s)["model_versions"]) got.push_back(v["version"].get<std::string>());
  EXPECT_EQ(got, (std::vector<std::string>{"3", "2"}));

  // Trusted keys: readers list, admins change.
  KeyPair k = NewKey(security::KeyAlgorithm::kEd25519);
  auto add_w = w.CallGantry("POST", "trusted-keys", Json{{"public_pem", k.signer.PublicKeyPem()}});
  EXPECT_EQ(add_w.status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(
      a.CallGantry("POST", "trusted-keys", Json{{"public_pem", k.signer.PublicKeyPem()}}).ok());
  auto keys = r.CallGantry("GET", "trusted-keys");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ((*keys)["trusted_keys"].size(), 1u);
  EXPECT_EQ((*keys)["trusted_keys"][0]["keyid"], k.signer.KeyId());

  // Delete is admin-only.
  auto del_w = w.Call("DELETE", "model-versions/delete?name=gpt&version=3");
  EXPECT_EQ(del_w.status().code(), StatusCode::kPermissionDenied);
  auto v3 = srv.reg->Resolve("gpt/3");
  ASSERT_TRUE(v3.ok());
  auto d3 = a.Call("DELETE", "model-versions/delete", Json{{"name", "gpt"}, {"version", "3"}});
  ASSERT_TRUE(d3.ok()) << d3.status().ToString();
  EXPECT_EQ((*d3)["deleted"]["aliases_removed"], Json::array({"prod"}));
  EXPECT_EQ((*d3)["deleted"]["blobs_removed"], 1);  // weights.bin of v3; the rest is shared
  EXPECT_EQ(srv.reg->Resolve("gpt@prod").status().code(), StatusCode::kNotFound);
  for (const auto& f : v3->files) {
    bool shared = f.path != "weights.bin";
    EXPECT_EQ(srv.reg->artifacts().Stat(BlobKey(f.sha256)).ok(), shared) << f.path;
  }
  EXPECT_EQ(a.Call("DELETE", "model-versions/delete?name=gpt&version=3").status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(r.Verify("gpt/2", false).ok());
  auto v4 = w.Register(req);
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->version, 4);  // 3 is never reused
  auto dm = a.Call("DELETE", "registered-models/delete", Json{{"name", "gpt"}});
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  EXPECT_EQ((*dm)["deleted"]["versions"], Json::array({"1", "2", "4"}));
  EXPECT_EQ(r.Call("GET", "registered-models/get?name=gpt").status().code(), StatusCode::kNotFound);

  srv.server.Stop();
  ASSERT_TRUE(srv.audit->Close().ok());
  auto vr = security::VerifyAuditLog(srv.audit_path, "");
  ASSERT_TRUE(vr.ok());
  EXPECT_TRUE(vr->ok) << vr->reason;
  std::string log = Slurp(srv.audit_path);
  EXPECT_NE(log.find("\"action\":\"delete_version\""), std::string::npos);
  EXPECT_NE(log.find("\"action\":\"delete_model\""), std::string::npos);
  EXPECT_NE(log.find("\"action\":\"trust_key\""), std::string::npos);
}

// Blob uploads stream to a spool file: a file far larger than the server's
// buffered-body limit is accepted, the size bound is a clear 413 sent before
// the body is read, credentials are checked first, and no spool file stays.
TEST(RegistryHttpIntegration, BlobUploadsAreStreamedAndBounded) {
  Served srv(/*max_body=*/64 << 10, /*max_blob=*/4 << 20);
  RemoteClient w = srv.Client("writer"), r = srv.Client("reader");
  fs::create_directories(srv.root / "m");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 2654435761u) >> 11);
  { std::ofstream(srv.root / "m/weights.bin", std::ios::binary) << big; }
  RegisterRequest req;
  req.name = "big";
  req.path = (srv.root / "m").string();
  auto v = w.Register(req);  // 3 MiB through a 64 KiB buffered-body limit
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(srv.reg->Verify("big/1").ok());
  auto rep = r.Download("big/1", (srv.root / "out").string(), {});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(Slurp(srv.root / "out/weights.bin"), big);

  // Over max_blob_bytes: 413 naming the limit, nothing stored.
  std::string huge(5 << 20, 'h');
  { std::ofstream(srv.root / "m/weights.bin", std::ios::binary) << huge; }
  auto too_big = w.Register(req);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted) << too_big.status().ToString();
  EXPECT_NE(too_big.status().message().find("HTTP 413"), std::string::npos);
  EXPECT_NE(too_big.status().message().find("--max-upload-mb"), std::string::npos)
      << too_big.status().message();
  std::string huge_sha = security::Sha256Hex(huge);
  EXPECT_FALSE(srv.reg->artifacts().Stat(BlobKey(huge_sha)).ok());

  // No credential or the wrong role: refused from the head.
  auto put = [&](const std::string& cred, const std::string& sha, const std::string& body) {
    http::Request q;
    q.method = "PUT";
    q.url = srv.base + "/api/2.0/gantry/blobs/sha256/" + sha;
    q.deadline = std::chrono::seconds(30);
    q.body = body;
    if (!cred.empty()) q.headers.push_back({"Authorization", "Bearer " + cred});
    return http::Send(q);
  };
  std::string small = "small blob";
  auto anon = put("", security::Sha256Hex(small), small);
  ASSERT_TRUE(anon.ok());
  EXPECT_EQ(anon->status, 401);
  auto reader = put(srv.keys["reader"], security::Sha256Hex(small), small);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->status, 403);
  EXPECT_NE(reader->body.find("writer"), std::string::npos) << reader->body;
  // A body that does not hash to the digest in the path is not stored.
  auto wrong = put(srv.keys["writer"], std::string(64, 'a'), small);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 400);
  EXPECT_NE(wrong->body.find(security::Sha256Hex(small)), std::string::npos) << wrong->body;
  EXPECT_FALSE(srv.reg->artifacts().Stat(BlobKey(std::string(64, 'a'))).ok());
  auto ok = put(srv.keys["writer"], security::Sha256Hex(small), small);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->status, 201);
  auto again = put(srv.keys["writer"], security::Sha256Hex(small), small);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, 200);  // idempotent
  EXPECT_EQ(*srv.reg->artifacts().Get(BlobKey(security::Sha256Hex(small))), small);
  // Spool files are removed when each request ends.
  size_t left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(srv.root / "spool")) ++left;
  EXPECT_EQ(left, 0u);
}

// Deterministic bytes that differ at every offset class (not a repeated block).
std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

// Entries directly under `dir` whose names start with `prefix`.
std::vector<std::string> Named(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.starts_with(prefix)) out.push_back(n);
  }
  return out;
}

TEST(RegistryHttpIntegration, LargeFileRoundTripIsStreamedAndByteIdentical) {
  // The server buffers at most 64 KiB of any body; the file is 24 MiB + odd bytes.
  Served srv(/*max_body=*/64 << 10, /*max_blob=*/64 << 20);
  RemoteClient w = srv.Client("writer"), r = srv.Client("reader");
  fs::create_directories(srv.root / "m/shards");
  const std::string big = Pattern((24 << 20) + 4097, 7);
  { std::ofstream(srv.root / "m/shards/model-00001.safetensors", std::ios::binary) << big; }
  std::ofstream(srv.root / "m/config.json") << R"({"hidden": 4096})";
  RegisterRequest req;
  req.name = "big-llm";
  req.path = (srv.root / "m").string();
  auto v = w.Register(req);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->total_bytes, big.size() + 16);
  ASSERT_TRUE(srv.reg->Verify("big-llm/1").ok());
  auto stored = srv.reg->artifacts().Get(BlobKey(security::Sha256Hex(big)));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(*stored == big) << "the server stored different bytes";

  auto rep = r.Download("big-llm/1", (srv.root / "out").string(), {});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->files, 2u);
  EXPECT_EQ(rep->bytes, big.size() + 16);
  std::string got = Slurp(srv.root / "out/shards/model-00001.safetensors");
  EXPECT_EQ(got.size(), big.size());
  EXPECT_TRUE(got == big) << "the downloaded file differs";
  EXPECT_EQ(Slurp(srv.root / "out/config.json"), R"({"hidden": 4096})");
  // Only the model's files: no temporary pieces inside, no temporary sibling.
  EXPECT_TRUE(Named(srv.root / "out", ".part-").empty());
  EXPECT_TRUE(Named(srv.root, ".out.tmp-").empty());
  // verify --server (no destination) streams and hashes without writing.
  auto checked = r.Verify("big-llm/1", false);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_EQ(checked->bytes, big.size() + 16);
}

TEST(RegistryHttpIntegration, TamperedDownloadLeavesNothingUnderTheFinalName) {
  Served srv(/*max_body=*/64 << 10, /*max_blob=*/64 << 20);
  RemoteClient w = srv.Client("writer");
  fs::create_directories(srv.root / "m");
  const std::string big = Pattern(6 << 20, 11);
  { std::ofstream(srv.root / "m/weights.bin", std::ios::binary) << big; }
  std::ofstream(srv.root / "m/config.json") << "{}";
  RegisterRequest req;
  req.name = "llm";
  req.path = (srv.root / "m").string();
  ASSERT_TRUE(w.Register(req).ok());
  RemoteClient evil = srv.Client("reader", /*evil=*/true);
  ASSERT_TRUE(evil.Verify("llm/1", false).ok());  // no tampering yet

  // An existing destination that an overwrite would replace: it must survive
  // a failed download untouched.
  fs::create_directories(srv.root / "prod");
  std::ofstream(srv.root / "prod/weights.bin") << "the old, good model";
  ExportOptions overwrite;
  overwrite.overwrite = true;
  auto expect_nothing_written = [&](const std::string& what) {
    EXPECT_FALSE(fs::exists(srv.root / "fresh")) << what;
    EXPECT_EQ(Slurp(srv.root / "prod/weights.bin"), "the old, good model") << what;
    EXPECT_EQ(fs::directory_iterator(srv.root / "prod")->path().filename(), "weights.bin") << what;
    EXPECT_TRUE(Named(srv.root, ".fresh.tmp-").empty()) << what;
    EXPECT_TRUE(Named(srv.root, ".prod.tmp-").empty()) << what;
  };

  // The last byte of the large file flipped: detected only after (almost)
  // all of it was streamed to disk.
  srv.tamper = [](const http::ServerRequest& hreq, http::ServerResponse* resp) {
    if (hreq.path.find("/blobs/") != std::string::npos && resp->body.size() > (1 << 20)) {
      resp->body.back() = static_cast<char>(resp->body.back() ^ 1);
    }
  };
  for (const char* dest : {"fresh", "prod"}) {
    auto bad = evil.Download("llm/1", (srv.root / dest).string(), overwrite);
    ASSERT_FALSE(bad.ok()) << dest;
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find("weights.bin of llm/1 was modified"), std::string::npos)
        << bad.status().message();
    expect_nothing_written(dest);
  }
  // More bytes than the manifest lists: refused as they arrive.
  srv.tamper = [](const http::ServerRequest& hreq, http::ServerResponse* resp) {
    if (hreq.path.find("/blobs/") != std::string::npos && resp->body.size() > (1 << 20)) {
      resp->body += std::string(3 << 20, 'x');
    }
  };
  auto longer = evil.Download("llm/1", (srv.root / "fresh").string(), overwrite);
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().code(), StatusCode::kDataLoss) << longer.status().ToString();
  EXPECT_NE(longer.status().message().find("more than the " + std::to_string(big.size())),
            std::string::npos)
      << longer.status().message();
  expect_nothing_written("longer");
  // Fewer bytes (a truncated blob with a consistent length).
  srv.tamper = [](const http::ServerRequest& hreq, http::ServerResponse* resp) {
    if (hreq.path.find("/blobs/") != std::string::npos && resp->body.size() > (1 << 20)) {
      resp->body.resize(resp->body.size() / 2);
    }
  };
  auto shorter = evil.Download("llm/1", (srv.root / "prod").string(), overwrite);
  ASSERT_FALSE(shorter.ok());
  EXPECT_EQ(shorter.status().code(), StatusCode::kDataLoss) << shorter.status().ToString();
  expect_nothing_written("shorter");

  // Without tampering the overwrite goes through.
  srv.tamper = nullptr;
  auto good = evil.Download("llm/1", (srv.root / "prod").string(), overwrite);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(Slurp(srv.root / "prod/weights.bin") == big);
}

TEST(RegistryHttpIntegration, RegisterFromCheckpointThroughTheServer) {
  Served srv(/*max_body=*/64 << 10, /*max_blob=*/64 << 20);
  RemoteClient w = srv.Client("writer"), r = srv.Client("reader");
  ckpt::Options o;
  o.root = (srv.root / "ckpt").string();
  o.run = "run-17";
  o.direct_io = false;
  auto mgr = ckpt::CheckpointManager::Open(o);
  ASSERT_TRUE(mgr.ok()) << mgr.status().ToString();
  std::vector<float> wts(1 << 20);  // 4 MiB of weights
  for (size_t i = 0; i < wts.size(); ++i) wts[i] = static_cast<float>(i % 977) * 0.5f;
  ckpt::TensorView t{"w",
                     ckpt::DType::kF32,
                     {static_cast<int64_t>(wts.size())},
                     wts.data(),
                     wts.size() * sizeof(float)};
  Json meta = {{"metrics", {{"eval_loss", 1.82}}}};
  ASSERT_TRUE((*mgr)->Save(100, std::span<const ckpt::TensorView>(&t, 1), meta).ok());
  wts[0] = 42.0f;
  ASSERT_TRUE((*mgr)->Save(200, std::span<const ckpt::TensorView>(&t, 1), meta).ok());
  mgr->reset();

  RegisterRequest req;
  req.name = "llama-ft";
  req.lineage.code_commit = "abc123";
  CheckpointSource src{o.root, "run-17", std::nullopt};
  auto v = w.RegisterCheckpoint(req, src);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->version, 1);
  // Lineage as the local --from-ckpt fills it in, recorded by the server.
  auto got = srv.reg->Resolve("llama-ft/1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->tags.at("ckpt.step"), "200");
  EXPECT_EQ(got->lineage.run_id, "run-17");
  EXPECT_EQ(got->lineage.code_commit, "abc123");
  EXPECT_EQ(got->lineage.metrics["eval_loss"], 1.82);
  ASSERT_TRUE(got->lineage.source.starts_with("ckpt:")) << got->lineage.source;
  EXPECT_NE(got->lineage.source.find("step-0000000200"), std::string::npos);
  ASSERT_TRUE(srv.reg->Verify("llama-ft/1").ok());

  // Every file of the step comes back byte-identical.
  fs::path step = got->lineage.source.substr(5);
  auto rep = r.Download("llama-ft/1", (srv.root / "out").string(), {});
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  size_t compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(step)) {
    if (!e.is_regular_file()) continue;
    fs::path rel = fs::relative(e.path(), step);
    EXPECT_TRUE(Slurp(e.path()) == Slurp(srv.root / "out" / rel)) << rel;
    ++compared;
  }
  EXPECT_EQ(compared, rep->files);
  EXPECT_GE(rep->bytes, wts.size() * sizeof(float));

  // A chosen step; a step that does not exist is NotFound and registers nothing.
  src.step = 100;
  auto v100 = w.RegisterCheckpoint(req, src);
  ASSERT_TRUE(v100.ok()) << v100.status().ToString();
  EXPECT_EQ(srv.reg->Resolve("llama-ft/2")->tags.at("ckpt.step"), "100");
  src.step = 150;
  auto missing = w.RegisterCheckpoint(req, src);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
  EXPECT_FALSE(srv.reg->Resolve("llama-ft/3").ok());
}

// An artifact store whose PutFile of one key waits at a gate until the test
// opens it: a handler stuck in a slow store (a large upload to a remote
// object store) for as long as the test likes.
class GatedStore final : public storage::ObjectStore {
 public:
  GatedStore(std::unique_ptr<storage::ObjectStore> inner, std::string key)
      : inner_(std::move(inner)), key_(std::move(key)) {}
  // Waits up to 10 s for a PutFile of the key to arrive at the gate.
  bool WaitUntilHeld() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return held_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

  std::string url() const override { return inner_->url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    return inner_->Put(key, data, o);
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    if (key == key_) {
      std::unique_lock lock(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
    }
    return inner_->PutFile(key, path, o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    return inner_->PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override { return inner_->Get(key); }
  Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) override {
    return inner_->GetRange(key, offset, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    return inner_->GetFile(key, path);
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override { return inner_->Stat(key); }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    return inner_->List(prefix, next, max_results);
  }
  Status Delete(std::string_view key) override { return inner_->Delete(key); }

 private:
  std::unique_ptr<storage::ObjectStore> inner_;
  std::string key_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool open_ = false;
};

// Sends `bytes` on a connected socket.
void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// One client uploads a blob slowly (half the body, a pause, the rest) into a
// store that then holds the upload's handler; meanwhile another client's 20
// requests are all answered. Handlers run on the server's pool, so neither
// the slow body nor the stuck store delays anyone else.
TEST(RegistryHttpIntegration, SlowUploadDoesNotDelayOtherClients) {
  char t[] = "/tmp/gantry-registry-slow-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  fs::path root = t;
  MakeModel(root / "m", "1");
  const std::string payload = Pattern(1 << 20, 3);
  const std::string sha = security::Sha256Hex(payload);
  auto meta = OpenSqliteMetadataStore((root / "r.sqlite").string());
  auto file_store = storage::OpenObjectStore("file://" + (root / "art").string());
  ASSERT_TRUE(meta.ok() && file_store.ok());
  auto gated = std::make_unique<GatedStore>(*std::move(file_store), BlobKey(sha));
  GatedStore* gate = gated.get();
  Registry reg(*std::move(meta), std::move(gated));
  RegisterRequest req;
  req.name = "bert";
  req.path = (root / "m").string();
  ASSERT_TRUE(reg.Register(req).ok());
  auto ks = security::KeyStore::Open((root / "keys.sqlite").string());
  ASSERT_TRUE(ks.ok());
  auto writer = (*ks)->Create("w", "writer", 0, 1);
  auto reader = (*ks)->Create("r", "reader", 0, 1);
  ASSERT_TRUE(writer.ok() && reader.ok());
  HttpApiOptions api;
  api.key_store = ks->get();
  api.keys = *(*ks)->Snapshot();
  api.spool_dir = (root / "spool").string();
  http::Server server;
  AddHttpRoutes(reg, api, server);
  http::ServerOptions so;
  so.max_body_bytes = 64 << 10;
  so.handler_threads = 4;
  ASSERT_TRUE(server.Start(so).ok());

  std::mutex mu;
  std::condition_variable cv;
  bool half_sent = false, send_rest = false;
  std::atomic<bool> upload_answered{false};
  std::string upload_status;
  std::thread uploader([&] {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(server.port());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return;
    }
    SendAll(fd, "PUT /api/2.0/gantry/blobs/sha256/" + sha +
                    " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + writer->second +
                    "\r\nContent-Length: " + std::to_string(payload.size()) + "\r\n\r\n");
    SendAll(fd, std::string_view(payload).substr(0, payload.size() / 2));
    {
      std::unique_lock lock(mu);
      half_sent = true;
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(20), [&] { return send_rest; });
    }
    SendAll(fd, std::string_view(payload).substr(payload.size() / 2));
    std::string answer;
    char buf[4096];
    ssize_t n;
    while (answer.find("\r\n") == std::string::npos && (n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
      answer.append(buf, static_cast<size_t>(n));
    }
    upload_status = answer.substr(0, answer.find("\r\n"));
    upload_answered = true;
    ::close(fd);
  });

  RemoteClient r({.server = "http://127.0.0.1:" + std::to_string(server.port()),
                  .credential = reader->second,
                  .deadline = std::chrono::seconds(10)});
  int answered = 0;
  auto ten_reads = [&] {
    for (int i = 0; i < 10; ++i) {
      auto v = r.Resolve("bert/1");
      EXPECT_TRUE(v.ok()) << v.status().ToString();
      answered += v.ok() ? 1 : 0;
    }
  };
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return half_sent; }));
  }
  ten_reads();  // while the upload's body is half there
  {
    std::lock_guard lock(mu);
    send_rest = true;
    cv.notify_all();
  }
  ASSERT_TRUE(gate->WaitUntilHeld());
  ten_reads();  // while its handler is stuck in the store
  EXPECT_EQ(answered, 20);
  EXPECT_FALSE(upload_answered.load());
  gate->Open();
  uploader.join();
  EXPECT_EQ(upload_status, "HTTP/1.1 201 Created");
  auto stored = reg.artifacts().Get(BlobKey(sha));
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_TRUE(*stored == payload);
  server.Stop();
  fs::remove_all(root);
}

}  // namespace
}  // namespace gantry::registry
