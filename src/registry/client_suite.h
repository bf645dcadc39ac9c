// The registry-client conformance suite: one set of tests that every Client
// implementation must pass, so that `gantry registry VERB` behaves the same
// with and without --server: the same typed values (compared with the
// registry's own records through ToJson) and the same Status codes for the
// same situations. client_integration_test.cc instantiates it for
// LocalClient and for RemoteClient against a real server on 127.0.0.1.
//
// The fixture registry trusts one signing key; a backend's client trusts the
// same key (a RemoteClient's own trust anchors), so signature outcomes agree.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gantry/registry/client.h"
#include "gantry/registry/registry.h"
#include "gantry/security/crypto.h"
#include "gantry/security/dsse.h"

namespace gantry::registry::testing {

struct ClientBackend {
  std::string name;
  // A client of `reg` allowed to do everything, trusting `trusted` where the
  // implementation has trust anchors of its own. It may hold a server: it
  // stays up as long as the returned client.
  std::function<std::shared_ptr<Client>(Registry& reg, std::vector<security::DsseVerifier> trusted)>
      open;
};

inline std::ostream& operator<<(std::ostream& os, const ClientBackend& b) { return os << b.name; }

class ClientSuite : public ::testing::TestWithParam<ClientBackend> {
 protected:
  void SetUp() override {
    char t[] = "/tmp/gantry-client-suite-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    root_ = t;
    auto meta = OpenSqliteMetadataStore((root_ / "r.sqlite").string());
    auto store = storage::OpenObjectStore("file://" + (root_ / "art").string());
    ASSERT_TRUE(meta.ok() && store.ok());
    reg_ = std::make_unique<Registry>(*std::move(meta), *std::move(store));
    key_ = NewSigner(security::KeyAlgorithm::kEd25519);
    ASSERT_TRUE(reg_->TrustKey(key_->PublicKeyPem(), "fixture").ok());
    client_ = GetParam().open(*reg_, Trust(*key_));
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    client_.reset();
    reg_.reset();
    std::filesystem::remove_all(root_);
  }

  static std::unique_ptr<security::DsseSigner> NewSigner(security::KeyAlgorithm alg) {
    auto kp = security::GenerateSigningKey(alg);
    EXPECT_TRUE(kp.ok());
    auto s = security::DsseSigner::FromPrivatePem(kp->private_pem);
    EXPECT_TRUE(s.ok());
    return std::make_unique<security::DsseSigner>(*std::move(s));
  }
  static std::vector<security::DsseVerifier> Trust(const security::DsseSigner& k) {
    std::vector<security::DsseVerifier> out;
    auto v = security::DsseVerifier::FromPublicPem(k.PublicKeyPem());
    EXPECT_TRUE(v.ok());
    out.push_back(*std::move(v));
    return out;
  }

  // A model directory whose weights differ by `salt` (config and tokenizer shared).
  std::string Model(const std::string& dir, const std::string& salt) {
    std::filesystem::path d = root_ / dir;
    std::filesystem::create_directories(d / "sub");
    std::ofstream(d / "weights.bin", std::ios::binary) << std::string(5000, 'w') << salt;
    std::ofstream(d / "config.json") << R"({"layers": 2})";
    std::ofstream(d / "sub/tok.txt") << "hello";
    return d.string();
  }

  ModelVersion MustRegister(const std::string& name, const std::string& dir,
                            const std::string& run_id = "",
                            std::map<std::string, std::string> tags = {}) {
    RegisterRequest req;
    req.name = name;
    req.path = dir;
    req.lineage.run_id = run_id;
    req.tags = std::move(tags);
    auto v = client_->Register(req);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : ModelVersion();
  }

  static std::vector<int64_t> Numbers(const std::vector<ModelVersion>& vs) {
    std::vector<int64_t> out;
    for (const auto& v : vs) out.push_back(v.version);
    return out;
  }

  static std::string Slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::filesystem::path root_;
  std::unique_ptr<Registry> reg_;
  std::unique_ptr<security::DsseSigner> key_;
  std::shared_ptr<Client> client_;
};

TEST_P(ClientSuite, RegisterAndReadsReturnTheRegistrysRecords) {
  RegisterRequest req;
  req.name = "llama";
  req.path = Model("m1", "1");
  req.description = "first";
  req.lineage.run_id = "run-1";
  req.lineage.code_commit = "abc123";
  req.lineage.dataset_digests = {"sha256:d1"};
  req.lineage.metrics = {{"loss", 0.5}};
  req.tags = {{"team", "ml"}};
  auto v1 = client_->Register(req);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->model, "llama");
  EXPECT_EQ(v1->version, 1);
  EXPECT_EQ(v1->description, "first");
  EXPECT_EQ(v1->files.size(), 3u);
  EXPECT_EQ(v1->total_bytes, 5001u + 13u + 5u);
  EXPECT_EQ(v1->lineage.source, req.path);
  EXPECT_EQ(v1->lineage.run_id, "run-1");
  EXPECT_EQ(v1->lineage.metrics["loss"], 0.5);
  EXPECT_EQ(v1->tags.at("team"), "ml");
  // The value returned is the registry's own record, field for field.
  EXPECT_EQ(ToJson(*v1), ToJson(*reg_->Resolve("llama/1")));
  EXPECT_EQ(MustRegister("llama", Model("m2", "2")).version, 2);

  auto latest = client_->Resolve("llama");
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->version, 2);
  auto first = client_->Resolve("models:/llama/1");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(ToJson(*first), ToJson(*v1));
  ASSERT_TRUE(client_->SetAlias("llama", "prod", 1, std::nullopt).ok());
  auto prod = client_->Resolve("llama@prod");
  ASSERT_TRUE(prod.ok()) << prod.status().ToString();
  EXPECT_EQ(prod->version, 1);
  EXPECT_EQ(prod->aliases, std::vector<std::string>{"prod"});
  EXPECT_EQ(ToJson(*prod), ToJson(*reg_->Resolve("llama/1")));

  auto m = client_->GetModel("llama");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->latest_version, 2);
  EXPECT_EQ(m->aliases, (std::map<std::string, int64_t>{{"prod", 1}}));
  EXPECT_EQ(ToJson(*m), ToJson(*reg_->meta().GetModel("llama")));
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ(ToJson((*models)[0]), ToJson(*m));
  auto versions = client_->ListVersions("llama");
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(Numbers(*versions), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ToJson((*versions)[1]), ToJson(*reg_->Resolve("llama/2")));
}

TEST_P(ClientSuite, TheSameSituationsGiveTheSameCodes) {
  MustRegister("llama", Model("m1", "1"));
  auto code = [](const auto& r) {
    if constexpr (std::is_same_v<std::decay_t<decltype(r)>, Status>) {
      return r.code();
    } else {
      return r.status().code();
    }
  };
  using enum StatusCode;
  EXPECT_EQ(code(client_->Resolve("nope/1")), kNotFound);
  EXPECT_EQ(code(client_->Resolve("nope")), kNotFound);
  EXPECT_EQ(code(client_->Resolve("llama/9")), kNotFound);
  EXPECT_EQ(code(client_->Resolve("llama@nope")), kNotFound);
  EXPECT_EQ(code(client_->Resolve("llama/x")), kInvalidArgument);
  EXPECT_EQ(code(client_->Resolve("bad name!/1")), kInvalidArgument);
  EXPECT_EQ(code(client_->Resolve("llama@latest")), kInvalidArgument);  // reserved alias
  EXPECT_EQ(code(client_->GetModel("nope")), kNotFound);
  EXPECT_EQ(code(client_->ListVersions("nope")), kNotFound);
  EXPECT_EQ(code(client_->ListVersions("")), kInvalidArgument);
  EXPECT_EQ(code(client_->SetAlias("llama", "prod", 9, std::nullopt)), kNotFound);
  EXPECT_EQ(code(client_->SetAlias("nope", "prod", 1, std::nullopt)), kNotFound);
  EXPECT_EQ(code(client_->SetAlias("llama", "bad alias!", 1, std::nullopt)), kInvalidArgument);
  EXPECT_EQ(code(client_->DeleteAlias("llama", "nope", std::nullopt)), kNotFound);
  EXPECT_EQ(code(client_->DeleteVersion("llama", 9)), kNotFound);
  EXPECT_EQ(code(client_->DeleteVersion("llama", 0)), kInvalidArgument);
  EXPECT_EQ(code(client_->DeleteModel("nope")), kNotFound);
  EXPECT_EQ(code(client_->UntrustKey("no-such-key")), kNotFound);
  EXPECT_EQ(code(client_->TrustKey("not a PEM", "")), code(reg_->TrustKey("not a PEM", "")));
  EXPECT_EQ(code(client_->Download("llama/1", "", {})), kInvalidArgument);
  RegisterRequest bad;
  bad.name = "bad name!";
  bad.path = (root_ / "m1").string();
  EXPECT_EQ(code(client_->Register(bad)), kInvalidArgument);
  bad.name = "llama";
  bad.path = (root_ / "missing").string();
  EXPECT_EQ(code(client_->Register(bad)), code(reg_->Register(bad)));
  EXPECT_FALSE(client_->Register(bad).ok());
}

TEST_P(ClientSuite, AliasesAreCompareAndSet) {
  MustRegister("m", Model("m1", "1"));
  MustRegister("m", Model("m2", "2"));
  ASSERT_TRUE(client_->SetAlias("m", "prod", 1, 0).ok());
  Status stale = client_->SetAlias("m", "prod", 2, 0);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("points at version 1"), std::string::npos) << stale.message();
  ASSERT_TRUE(client_->SetAlias("m", "prod", 2, 1).ok());
  EXPECT_EQ(client_->Resolve("m@prod")->version, 2);
  EXPECT_EQ(client_->DeleteAlias("m", "prod", 1).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(client_->DeleteAlias("m", "prod", 2).ok());
  EXPECT_EQ(client_->Resolve("m@prod").status().code(), StatusCode::kNotFound);
}

TEST_P(ClientSuite, SearchByLineageTagsAndAliases) {
  MustRegister("gpt", Model("m1", "1"), "run-a");
  MustRegister("gpt", Model("m2", "2"), "run-b", {{"stage", "qa"}});
  MustRegister("bert", Model("m3", "3"), "run-b");
  ASSERT_TRUE(client_->SetAlias("bert", "prod", 1, std::nullopt).ok());
  auto search = [&](SearchQuery q) {
    auto r = client_->Search(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    for (const auto& v : r.value_or({})) out.push_back(v.model + "/" + std::to_string(v.version));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(search({.run_id = "run-b"}), (V{"bert/1", "gpt/2"}));
  EXPECT_EQ(search({.tag_key = "stage"}), (V{"gpt/2"}));
  EXPECT_EQ(search({.tag_key = "stage", .tag_value = "qa"}), (V{"gpt/2"}));
  EXPECT_EQ(search({.tag_key = "stage", .tag_value = "prod"}), V{});
  EXPECT_EQ(search({.alias = "prod"}), (V{"bert/1"}));
  EXPECT_EQ(search({.name_like = "gp"}), (V{"gpt/2", "gpt/1"}));
  EXPECT_EQ(search({.name_like = "gp", .limit = 1}), (V{"gpt/2"}));
  EXPECT_EQ(search({.limit = 0}).size(), 3u);  // outside 1..1000: the default
  // The results are the registry's records.
  auto all = client_->Search({});
  ASSERT_TRUE(all.ok());
  for (const auto& v : *all) {
    EXPECT_EQ(ToJson(v), ToJson(*reg_->Resolve(v.model + "/" + std::to_string(v.version))));
  }
}

TEST_P(ClientSuite, SignVerifyDownloadAndThePolicy) {
  MustRegister("m", Model("m1", "1"));
  MustRegister("m", Model("m2", "2"));
  auto plain = client_->Verify("m/1", false);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->signed_by_trusted);
  EXPECT_EQ(plain->files, 3u);
  EXPECT_EQ(plain->bytes, 5001u + 13u + 5u);
  EXPECT_EQ(client_->Verify("m/1", true).status().code(), StatusCode::kPermissionDenied);

  auto kid = client_->Sign("m/1", *key_);
  ASSERT_TRUE(kid.ok()) << kid.status().ToString();
  EXPECT_EQ(*kid, key_->KeyId());
  auto signed_rep = client_->Verify("m/1", true);
  ASSERT_TRUE(signed_rep.ok()) << signed_rep.status().ToString();
  EXPECT_TRUE(signed_rep->signed_by_trusted);
  EXPECT_EQ(signed_rep->verified_keyids, std::vector<std::string>{*kid});
  EXPECT_EQ(client_->Resolve("m/1")->signer_keyids, std::vector<std::string>{*kid});

  ExportOptions required;
  required.require_signature = true;
  const std::string out = (root_ / "out").string();
  auto rep = client_->Download("m/1", out, required);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->model, "m");
  EXPECT_EQ(rep->version, 1);
  EXPECT_TRUE(rep->signed_by_trusted);
  EXPECT_EQ(Slurp(root_ / "out/sub/tok.txt"), "hello");
  EXPECT_EQ(Slurp(root_ / "out/weights.bin"), std::string(5000, 'w') + "1");
  auto who = VerifyDirectory(out, Slurp(root_ / "out" / std::string(kSignatureFile)), Trust(*key_));
  EXPECT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(client_->Download("m/1", out, {}).status().code(), StatusCode::kAlreadyExists);
  ExportOptions replace;
  replace.write_signature = false;
  replace.overwrite = true;
  ASSERT_TRUE(client_->Download("m/1", out, replace).ok());
  EXPECT_FALSE(std::filesystem::exists(root_ / "out" / std::string(kSignatureFile)));

  // Unsigned under a required signature, then under the policy: refused,
  // nothing written.
  EXPECT_EQ(client_->Download("m/2", (root_ / "o2").string(), required).status().code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(client_->SetSignaturesRequired(true).ok());
  EXPECT_TRUE(*client_->SignaturesRequired());
  EXPECT_EQ(client_->Download("m/2", (root_ / "o2").string(), {}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(client_->Verify("m/2", false).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(client_->Verify("m/1", false).ok());
  ASSERT_TRUE(client_->SetSignaturesRequired(false).ok());
  EXPECT_FALSE(*client_->SignaturesRequired());
  EXPECT_FALSE(std::filesystem::exists(root_ / "o2"));

  // A signature by a key nobody trusts is refused even without a policy.
  auto stranger = NewSigner(security::KeyAlgorithm::kEcdsaP256);
  ASSERT_TRUE(client_->Sign("m/2", *stranger).ok());
  EXPECT_EQ(client_->Verify("m/2", false).status().code(), StatusCode::kPermissionDenied);
}

TEST_P(ClientSuite, CorruptStoredBytesAreDataLossAndNothingIsWritten) {
  ModelVersion v = MustRegister("m", Model("m1", "1"));
  std::string tok;
  for (const auto& f : v.files)
    if (f.path == "sub/tok.txt") tok = f.sha256;
  ASSERT_TRUE(reg_->artifacts()
                  .Put(BlobKey(tok),
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>("HELLO"), 5))
                  .ok());
  EXPECT_EQ(client_->Verify("m/1", false).status().code(), StatusCode::kDataLoss);
  auto d = client_->Download("m/1", (root_ / "out").string(), {});
  EXPECT_EQ(d.status().code(), StatusCode::kDataLoss) << d.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(root_ / "out"));
}

TEST_P(ClientSuite, DeletesReportWhatWasRemoved) {
  MustRegister("m", Model("m1", "1"));
  MustRegister("m", Model("m1", "1"));  // the same bytes: the same blobs and manifest
  MustRegister("m", Model("m3", "3"));
  ASSERT_TRUE(client_->SetAlias("m", "prod", 3, std::nullopt).ok());
  auto d3 = client_->DeleteVersion("m", 3);
  ASSERT_TRUE(d3.ok()) << d3.status().ToString();
  EXPECT_EQ(d3->model, "m");
  EXPECT_EQ(d3->versions, std::vector<int64_t>{3});
  EXPECT_EQ(d3->aliases_removed, std::vector<std::string>{"prod"});
  EXPECT_EQ(d3->blobs_removed, 1u);  // its weights; config and tokenizer are shared
  EXPECT_EQ(d3->manifests_removed, 1u);
  EXPECT_TRUE(d3->gc_errors.empty());
  EXPECT_EQ(client_->Resolve("m/3").status().code(), StatusCode::kNotFound);
  auto dm = client_->DeleteModel("m");
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  EXPECT_EQ(dm->versions, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(dm->blobs_removed, 3u);
  EXPECT_EQ(dm->manifests_removed, 1u);
  EXPECT_EQ(client_->GetModel("m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MustRegister("m", Model("m1", "1")).version, 4);  // numbers are never reused
}

TEST_P(ClientSuite, TrustedKeysRoundTrip) {
  auto keys = client_->TrustedKeys();
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].keyid, key_->KeyId());
  EXPECT_EQ((*keys)[0].comment, "fixture");
  EXPECT_FALSE((*keys)[0].public_pem.empty());
  auto second = NewSigner(security::KeyAlgorithm::kEcdsaP256);
  auto added = client_->TrustKey(second->PublicKeyPem(), "second");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->keyid, second->KeyId());
  EXPECT_EQ(added->comment, "second");
  keys = client_->TrustedKeys();
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  for (const auto& k : *keys) {
    if (k.keyid != added->keyid) continue;
    EXPECT_EQ(k.algorithm, added->algorithm);
    EXPECT_EQ(k.public_pem, added->public_pem);
  }
  ASSERT_TRUE(client_->UntrustKey(added->keyid).ok());
  EXPECT_EQ(client_->UntrustKey(added->keyid).code(), StatusCode::kNotFound);
  EXPECT_EQ(client_->TrustedKeys()->size(), 1u);
}

}  // namespace gantry::registry::testing
