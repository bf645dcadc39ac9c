// End to end over a real socket: a registry served on 127.0.0.1:0 with API
// keys, used through RemoteRegistry (the client `gantry registry --server`
// uses): register from a directory, alias compare-and-set, download with
// verification, an unauthenticated write refused, the audit log verified.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gantry/core/http_client.h"
#include "gantry/registry/http_api.h"

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
  ASSERT_TRUE(server.Start(so).ok());
  std::string base = "http://127.0.0.1:" + std::to_string(server.port());

  RemoteRegistry w({.server = base, .credential = writer->second});
  RemoteRegistry r({.server = base, .credential = reader->second});
  RemoteRegistry anon({.server = base, .credential = ""});

  RegisterRequest req;
  req.name = "llama";
  req.path = (root / "model").string();
  req.lineage.run_id = "run-7";
  req.tags["team"] = "ml";
  auto v1 = w.Register(req);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ((*v1)["version"], "1");
  EXPECT_EQ((*v1)["files"].size(), 3u);
  std::ofstream(root / "model/config.json") << R"({"layers": 3})";
  auto v2 = w.Register(req);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ((*v2)["version"], "2");
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
  auto rep = r.Download("llama@prod", (root / "out").string(), false);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->version, 2);
  EXPECT_EQ(rep->files, 3u);
  EXPECT_EQ(Slurp(root / "out/weights.bin"), big);
  EXPECT_EQ(Slurp(root / "out/config.json"), R"({"layers": 3})");
  EXPECT_EQ(Slurp(root / "out/sub/tok.txt"), "hello");
  // An existing destination is refused without overwrite.
  EXPECT_FALSE(r.Download("llama/1", (root / "out").string(), false).ok());

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
  auto bad = r.Download("llama/1", (root / "out1").string(), false);
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

}  // namespace
}  // namespace gantry::registry
