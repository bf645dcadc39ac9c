#include "gantry/registry/registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gantry/ckpt/manager.h"
#include "gantry/security/crypto.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

void WriteText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char t[] = "/tmp/gantry-registry-test-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    root_ = t;
    auto meta = OpenSqliteMetadataStore((root_ / "registry.sqlite").string());
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    auto store = storage::OpenObjectStore("file://" + (root_ / "artifacts").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    reg_ = std::make_unique<Registry>(*std::move(meta), *std::move(store));
    model_ = root_ / "model";
    WriteText(model_ / "config.json", "{\"layers\": 2}");
    WriteText(model_ / "weights/model.safetensors", std::string(3000, 'w'));
    WriteText(model_ / "tokenizer.txt", "hello");
  }
  void TearDown() override { fs::remove_all(root_); }

  ModelVersion MustRegister(const std::string& name, const fs::path& path) {
    RegisterRequest req;
    req.name = name;
    req.path = path.string();
    auto v = reg_->Register(req);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : ModelVersion{};
  }

  security::DsseSigner NewSigner(security::KeyAlgorithm alg, std::string* public_pem) {
    auto kp = security::GenerateSigningKey(alg);
    *public_pem = kp->public_pem;
    return *security::DsseSigner::FromPrivatePem(kp->private_pem);
  }

  fs::path root_, model_;
  std::unique_ptr<Registry> reg_;
};

TEST(Manifest, StatementFormatMatchesModelSigningV1) {
  Manifest m;
  m.name = "bert";
  // sha256("hello") and sha256("") (well-known values).
  m.files = {{"a.txt", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", 5},
             {"b/c.bin", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", 0}};
  std::string text = StatementJson(m);
  // Subject digest: SHA-256 over the raw 32-byte digests in sorted name order.
  std::string raw =
      *security::HexDecode(m.files[0].sha256) + *security::HexDecode(m.files[1].sha256);
  std::string subject = security::Sha256Hex(raw);
  EXPECT_EQ(SubjectDigest(m.files), subject);
  // Canonical form: keys sorted, compact, exactly these field names.
  std::string expected =
      R"({"_type":"https://in-toto.io/Statement/v1","predicate":{"resources":[)"
      R"({"algorithm":"sha256","digest":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","name":"a.txt"},)"
      R"({"algorithm":"sha256","digest":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","name":"b/c.bin"}],)"
      R"("serialization":{"allow_symlinks":false,"hash_type":"sha256","ignore_paths":[],"method":"files"}},)"
      R"("predicateType":"https://model_signing/signature/v1.0",)"
      R"("subject":[{"digest":{"sha256":")" +
      subject + R"("},"name":"bert"}]})";
  EXPECT_EQ(text, expected);
  auto back = ParseStatement(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, "bert");
  ASSERT_EQ(back->files.size(), 2u);
  EXPECT_EQ(back->files[1].path, "b/c.bin");
}

TEST(Manifest, MalformedAndHostileStatementsAreRefused) {
  EXPECT_EQ(ParseStatement("not json").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseStatement(std::string(kMaxManifestBytes + 1, ' ')).status().code(),
            StatusCode::kInvalidArgument);
  Manifest m;
  m.name = "x";
  m.files = {{"../etc/passwd", std::string(64, 'a'), 1}};
  auto r = ParseStatement(StatementJson(m));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("path traversal"), std::string::npos) << r.status().message();
  m.files = {{"ok", std::string(64, 'a'), 1}};
  std::string text = StatementJson(m);
  // Subject digest that does not match the resources.
  std::string wrong = text;
  wrong.replace(wrong.find(SubjectDigest(m.files)), 64, std::string(64, 'b'));
  EXPECT_EQ(ParseStatement(wrong).status().code(), StatusCode::kDataLoss);
  // Wrong predicate type.
  std::string legacy = text;
  legacy.replace(legacy.find("signature/v1.0"), 14, "Digests/v0.1");
  EXPECT_FALSE(ParseStatement(legacy).ok());
}

TEST(Manifest, NameValidation) {
  EXPECT_TRUE(ValidateModelName("bert-base_v1.2").ok());
  EXPECT_FALSE(ValidateModelName("../x").ok());
  EXPECT_FALSE(ValidateModelName("a/b").ok());
  EXPECT_FALSE(ValidateModelName("a..b").ok());
  EXPECT_FALSE(ValidateModelName("").ok());
  EXPECT_FALSE(ValidateModelName(std::string(129, 'a')).ok());
  EXPECT_TRUE(ValidateAlias("production").ok());
  EXPECT_FALSE(ValidateAlias("latest").ok());
  EXPECT_FALSE(ValidateAlias("v3").ok());
  EXPECT_FALSE(ValidateAlias("a b").ok());
  EXPECT_FALSE(ValidateFilePath("a//b").ok());
  EXPECT_FALSE(ValidateFilePath("/abs").ok());
  EXPECT_FALSE(ValidateFilePath("a\\b").ok());
  EXPECT_FALSE(ValidateFilePath("a/./b").ok());
}

TEST_F(RegistryTest, RegisterDirectoryIsContentAddressedAndVersioned) {
  auto v1 = MustRegister("bert", model_);
  EXPECT_EQ(v1.version, 1);
  ASSERT_EQ(v1.files.size(), 3u);
  EXPECT_EQ(v1.files[0].path, "config.json");
  EXPECT_EQ(v1.files[2].path, "weights/model.safetensors");
  EXPECT_EQ(v1.total_bytes, 3000u + 5u + 13u);
  std::string hello = security::Sha256Hex("hello");
  EXPECT_TRUE(fs::exists(root_ / "artifacts" / "blobs/sha256" / hello.substr(0, 2) / hello));
  EXPECT_TRUE(fs::exists(root_ / "artifacts" / ManifestKey(v1.manifest_sha256)));
  auto v2 = MustRegister("bert", model_);
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(v2.manifest_sha256, v1.manifest_sha256);  // same content, same manifest
  auto latest = reg_->Resolve("bert");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version, 2);
  EXPECT_EQ(reg_->Resolve("models:/bert/1")->version, 1);
  EXPECT_EQ(reg_->Resolve("bert/7").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reg_->Resolve("bert/x").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, RegisterSingleSafetensorsFile) {
  auto v = MustRegister("single", model_ / "weights/model.safetensors");
  ASSERT_EQ(v.files.size(), 1u);
  EXPECT_EQ(v.files[0].path, "model.safetensors");
}

TEST_F(RegistryTest, BadInputLeavesNothingRegistered) {
  RegisterRequest req;
  req.name = "../evil";
  req.path = model_.string();
  EXPECT_EQ(reg_->Register(req).status().code(), StatusCode::kInvalidArgument);

  WriteText(root_ / "secret.txt", "secret");
  fs::create_symlink(root_ / "secret.txt", model_ / "leak");
  req.name = "leaky";
  auto r = reg_->Register(req);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("outside the model directory"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(reg_->meta().GetModel("leaky").status().code(), StatusCode::kNotFound);
  fs::remove(model_ / "leak");

  // A symlink to a file inside the directory is followed.
  fs::create_symlink(model_ / "tokenizer.txt", model_ / "tok-link");
  auto ok = reg_->Register(req);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->files.size(), 4u);

  req.path = (root_ / "missing").string();
  EXPECT_EQ(reg_->Register(req).status().code(), StatusCode::kNotFound);
}

TEST_F(RegistryTest, AliasesMoveAtomicallyWithCompareAndSet) {
  MustRegister("m", model_);
  MustRegister("m", model_);
  ASSERT_TRUE(reg_->SetAlias("m", "production", 1, /*expected=*/0).ok());
  EXPECT_EQ(reg_->Resolve("m@production")->version, 1);
  // Stale expectation.
  Status s = reg_->SetAlias("m", "production", 2, /*expected=*/0);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("points at version 1"), std::string::npos) << s.message();
  ASSERT_TRUE(reg_->SetAlias("m", "production", 2, 1).ok());
  EXPECT_EQ(reg_->Resolve("models:/m@production")->version, 2);
  // Rollback.
  ASSERT_TRUE(reg_->SetAlias("m", "production", 1).ok());
  EXPECT_EQ(reg_->Resolve("m@production")->version, 1);
  EXPECT_EQ(reg_->SetAlias("m", "production", 9).code(), StatusCode::kNotFound);
  EXPECT_EQ(reg_->SetAlias("m", "latest", 1).code(), StatusCode::kInvalidArgument);
  auto model = reg_->meta().GetModel("m");
  EXPECT_EQ(model->aliases.at("production"), 1);
  EXPECT_EQ(reg_->DeleteAlias("m", "production", 2).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg_->DeleteAlias("m", "production").ok());
  EXPECT_EQ(reg_->Resolve("m@production").status().code(), StatusCode::kNotFound);
}

TEST_F(RegistryTest, ConcurrentAliasMovesHaveOneWinner) {
  MustRegister("m", model_);
  MustRegister("m", model_);
  MustRegister("m", model_);
  ASSERT_TRUE(reg_->SetAlias("m", "champion", 1).ok());
  // Two independent connections (as two processes would have).
  auto meta2 = OpenSqliteMetadataStore((root_ / "registry.sqlite").string());
  ASSERT_TRUE(meta2.ok());
  std::atomic<int> wins{0}, conflicts{0};
  std::thread a([&] {
    Status s = reg_->meta().SetAlias("m", "champion", 2, 1, 0);
    (s.ok() ? wins : conflicts)++;
  });
  std::thread b([&] {
    Status s = (*meta2)->SetAlias("m", "champion", 3, 1, 0);
    (s.ok() ? wins : conflicts)++;
  });
  a.join();
  b.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(conflicts.load(), 1);
  int64_t now = *reg_->meta().ResolveAlias("m", "champion");
  EXPECT_TRUE(now == 2 || now == 3);
}

TEST_F(RegistryTest, ExportVerifiesEveryByte) {
  auto v = MustRegister("m", model_);
  fs::path out = root_ / "out";
  auto rep = reg_->Export("m/1", out.string());
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(ReadText(out / "tokenizer.txt"), "hello");
  EXPECT_EQ(ReadText(out / "weights/model.safetensors"), std::string(3000, 'w'));
  EXPECT_EQ(reg_->Export("m/1", out.string()).status().code(), StatusCode::kAlreadyExists);

  // Corrupt a blob in the artifact store.
  std::string hello = security::Sha256Hex("hello");
  fs::path blob = root_ / "artifacts" / BlobKey(hello);
  WriteText(blob, "HELLO");
  fs::path out2 = root_ / "out2";
  auto bad = reg_->Export("m", out2.string());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("tokenizer.txt"), std::string::npos)
      << bad.status().message();
  EXPECT_FALSE(fs::exists(out2));
  EXPECT_EQ(reg_->Verify("m").status().code(), StatusCode::kDataLoss);
  // Nothing temporary left behind.
  for (const auto& e : fs::directory_iterator(root_)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(RegistryTest, TamperedManifestObjectIsRefused) {
  auto v = MustRegister("m", model_);
  fs::path mf = root_ / "artifacts" / ManifestKey(v.manifest_sha256);
  std::string text = ReadText(mf);
  text.replace(text.find("config.json"), 11, "configXjson");
  WriteText(mf, text);
  auto r = reg_->Verify("m/1");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("does not match its recorded digest"), std::string::npos);
}

TEST_F(RegistryTest, SigningPolicyAndTrustedKeys) {
  MustRegister("m", model_);
  ASSERT_TRUE(reg_->SetSignaturesRequired(true).ok());
  // Unsigned under the policy.
  auto r = reg_->Export("m/1", (root_ / "o1").string());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("not signed"), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(root_ / "o1"));

  std::string pub;
  auto signer = NewSigner(security::KeyAlgorithm::kEcdsaP256, &pub);
  auto keyid = reg_->Sign("m/1", signer);
  ASSERT_TRUE(keyid.ok()) << keyid.status().ToString();
  // Signed, but by a key the registry does not trust.
  r = reg_->Export("m/1", (root_ / "o1").string());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("trusted"), std::string::npos) << r.status().message();

  ASSERT_TRUE(reg_->TrustKey(pub, "release key").ok());
  r = reg_->Export("m/1", (root_ / "o1").string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signed_by_trusted);
  EXPECT_EQ(r->verified_keyids, std::vector<std::string>{*keyid});
  // The exported directory carries model.sig and verifies offline.
  std::string bundle = ReadText(root_ / "o1" / "model.sig");
  auto trusted = reg_->TrustedVerifiers();
  auto who = VerifyDirectory((root_ / "o1").string(), bundle, *trusted);
  EXPECT_TRUE(who.ok()) << who.status().ToString();
  auto vr = reg_->Verify("m/1", true);
  ASSERT_TRUE(vr.ok()) << vr.status().ToString();

  // A bundle whose payload is not this version's manifest (a signature moved
  // from another version) is refused.
  WriteText(model_ / "extra.bin", "more");
  MustRegister("m", model_);
  auto sigs = reg_->meta().Signatures("m", 1);
  ASSERT_TRUE(reg_->meta().AddSignature("m", 2, *keyid, sigs->at(*keyid), 0).ok());
  auto moved = reg_->Verify("m/2");
  EXPECT_EQ(moved.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(moved.status().message().find("extra.bin"), std::string::npos)
      << moved.status().message();
}

TEST_F(RegistryTest, VerifyDirectoryReasons) {
  std::string pub;
  auto signer = NewSigner(security::KeyAlgorithm::kEd25519, &pub);
  auto bundle = SignDirectory(model_.string(), signer);
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  std::vector<security::DsseVerifier> trusted;
  trusted.push_back(*security::DsseVerifier::FromPublicPem(pub));
  ASSERT_TRUE(VerifyDirectory(model_.string(), *bundle, trusted).ok());
  // model.sig beside the files is ignored.
  WriteText(model_ / "model.sig", *bundle);
  ASSERT_TRUE(VerifyDirectory(model_.string(), *bundle, trusted).ok());

  auto expect = [&](StatusCode code, const std::string& needle) {
    auto r = VerifyDirectory(model_.string(), *bundle, trusted);
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  WriteText(model_ / "tokenizer.txt", "hellO");
  expect(StatusCode::kDataLoss, "file tokenizer.txt was modified");
  WriteText(model_ / "tokenizer.txt", "hello");
  WriteText(model_ / "new.bin", "x");
  expect(StatusCode::kDataLoss, "extra file new.bin");
  fs::remove(model_ / "new.bin");
  fs::remove(model_ / "config.json");
  expect(StatusCode::kDataLoss, "missing file config.json");
  WriteText(model_ / "config.json", "{\"layers\": 2}");

  std::string other_pub;
  NewSigner(security::KeyAlgorithm::kEd25519, &other_pub);
  std::vector<security::DsseVerifier> wrong;
  wrong.push_back(*security::DsseVerifier::FromPublicPem(other_pub));
  auto r = VerifyDirectory(model_.string(), *bundle, wrong);
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);

  // Bundle shape (sigstore bundle v0.3 with a DSSE envelope).
  Json b = Json::parse(*bundle);
  EXPECT_EQ(b["mediaType"], kBundleMediaType);
  EXPECT_EQ(b["dsseEnvelope"]["payloadType"], "application/vnd.in-toto+json");
  EXPECT_TRUE(b["verificationMaterial"]["publicKey"].contains("hint"));
  auto env = ParseBundle(*bundle);
  auto st = ParseStatement(env->payload);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->name, "model");
}

TEST_F(RegistryTest, SearchByTagAliasAndLineage) {
  RegisterRequest req;
  req.name = "llm";
  req.path = model_.string();
  req.lineage.run_id = "run-42";
  req.lineage.code_commit = "abc123";
  req.lineage.dataset_digests = {"sha256:d1", "sha256:d2"};
  req.lineage.metrics = {{"loss", 1.5}};
  req.tags = {{"team", "nlp"}};
  ASSERT_TRUE(reg_->Register(req).ok());
  req.lineage.run_id = "run-43";
  req.lineage.parent = "llm/1";
  req.tags = {{"team", "vision"}};
  ASSERT_TRUE(reg_->Register(req).ok());
  MustRegister("other", model_);
  ASSERT_TRUE(reg_->SetAlias("llm", "staging", 2).ok());

  auto ids = [&](SearchQuery q) {
    std::vector<std::string> out;
    auto r = reg_->meta().Search(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& v : *r) out.push_back(v.model + "/" + std::to_string(v.version));
    return out;
  };
  SearchQuery q;
  q.run_id = "run-42";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/1"});
  q = {};
  q.dataset_digest = "sha256:d2";
  EXPECT_EQ(ids(q), (std::vector<std::string>{"llm/2", "llm/1"}));
  q = {};
  q.tag_key = "team";
  q.tag_value = "vision";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.alias = "staging";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.parent = "llm/1";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.name_like = "oth";
  EXPECT_EQ(ids(q), std::vector<std::string>{"other/1"});
  q = {};
  q.name_like = "%";  // LIKE wildcards are literal
  EXPECT_TRUE(ids(q).empty());
  auto v1 = reg_->Resolve("llm/1");
  EXPECT_EQ(v1->lineage.metrics["loss"], 1.5);
  EXPECT_EQ(v1->lineage.code_commit, "abc123");
}

TEST_F(RegistryTest, RegisterFromCheckpoint) {
  ckpt::Options o;
  o.root = (root_ / "ckpt").string();
  o.run = "run1";
  o.direct_io = false;
  auto mgr = ckpt::CheckpointManager::Open(o);
  ASSERT_TRUE(mgr.ok()) << mgr.status().ToString();
  std::vector<float> w(256, 0.5f);
  ckpt::TensorView t{"w", ckpt::DType::kF32, {256}, w.data(), w.size() * sizeof(float)};
  Json meta = {{"metrics", {{"loss", 0.25}}}};
  ASSERT_TRUE((*mgr)->Save(10, std::span<const ckpt::TensorView>(&t, 1), meta).ok());
  w[0] = 1.0f;
  ASSERT_TRUE((*mgr)->Save(20, std::span<const ckpt::TensorView>(&t, 1), meta).ok());
  mgr->reset();

  RegisterRequest req;
  req.name = "from-ckpt";
  CheckpointSource src{(root_ / "ckpt").string(), "run1", std::nullopt};
  auto v = reg_->RegisterCheckpoint(req, src);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->tags.at("ckpt.step"), "20");
  EXPECT_EQ(v->lineage.run_id, "run1");
  EXPECT_EQ(v->lineage.metrics["loss"], 0.25);
  EXPECT_NE(v->lineage.source.find("step-0000000020"), std::string::npos);
  bool has_manifest = false;
  for (const auto& f : v->files) has_manifest |= f.path == "manifest.json";
  EXPECT_TRUE(has_manifest);

  src.step = 10;
  auto v10 = reg_->RegisterCheckpoint(req, src);
  ASSERT_TRUE(v10.ok()) << v10.status().ToString();
  EXPECT_EQ(v10->tags.at("ckpt.step"), "10");
  src.step = 11;
  EXPECT_EQ(reg_->RegisterCheckpoint(req, src).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::registry

namespace gantry::registry {
namespace {

TEST_F(RegistryTest, ChangesAreAppendedToTheAuditChain) {
  std::string path = (root_ / "audit.jsonl").string();
  {
    security::AuditOptions ao;
    ao.path = path;
    auto log = security::AuditLog::Open(ao);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    reg_->SetAudit(log->get(), "alice");
    MustRegister("m", model_);
    ASSERT_TRUE(reg_->SetAlias("m", "production", 1).ok());
    std::string pub;
    auto signer = NewSigner(security::KeyAlgorithm::kEd25519, &pub);
    ASSERT_TRUE(reg_->Sign("m/1", signer).ok());
    ASSERT_TRUE(reg_->DeleteAlias("m", "production").ok());
    // A refused change is not logged.
    EXPECT_FALSE(reg_->SetAlias("m", "production", 5).ok());
    reg_->SetAudit(nullptr, "");
    ASSERT_TRUE((*log)->Close().ok());
  }
  auto rep = security::VerifyAuditLog(path, "");
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok) << rep->reason;
  EXPECT_EQ(rep->records, 4u);
  std::string text = ReadText(path);
  for (const char* action : {"\"register\"", "\"alias_set\"", "\"sign\"", "\"alias_rm\""}) {
    EXPECT_NE(text.find(action), std::string::npos) << action;
  }
  EXPECT_NE(text.find("\"actor\":\"alice\""), std::string::npos);
}

}  // namespace
}  // namespace gantry::registry

namespace gantry::registry {
namespace {

// Delegates to a real store but fails the Nth upload (an interrupted register).
class FailingStore final : public storage::ObjectStore {
 public:
  FailingStore(std::unique_ptr<storage::ObjectStore> inner, int fail_at)
      : inner_(std::move(inner)), fail_at_(fail_at) {}
  std::string url() const override { return inner_->url(); }
  Status Put(std::string_view k, std::span<const std::byte> d,
             const storage::PutOptions& o) override {
    if (++puts_ == fail_at_) return Unavailable("injected failure on " + std::string(k));
    return inner_->Put(k, d, o);
  }
  Status PutFile(std::string_view k, const std::string& p, const storage::PutOptions& o) override {
    if (++puts_ == fail_at_) return Unavailable("injected failure on " + std::string(k));
    return inner_->PutFile(k, p, o);
  }
  Status PutStream(std::string_view k, const storage::ReadFn& r,
                   const storage::PutOptions& o) override {
    return inner_->PutStream(k, r, o);
  }
  Result<std::string> Get(std::string_view k) override { return inner_->Get(k); }
  Status GetRange(std::string_view k, uint64_t off, std::span<std::byte> out) override {
    return inner_->GetRange(k, off, out);
  }
  Status GetFile(std::string_view k, const std::string& p) override {
    return inner_->GetFile(k, p);
  }
  Result<storage::ObjectInfo> Stat(std::string_view k) override { return inner_->Stat(k); }
  Result<storage::ListPage> List(std::string_view p, std::string_view n, int m) override {
    return inner_->List(p, n, m);
  }
  Status Delete(std::string_view k) override { return inner_->Delete(k); }

 private:
  std::unique_ptr<storage::ObjectStore> inner_;
  int fail_at_;
  int puts_ = 0;
};

TEST_F(RegistryTest, InterruptedUploadRegistersNothingAndRetryWorks) {
  // 3 files + 1 manifest: fail the blob upload (2) and the manifest upload (4).
  for (int fail_at : {2, 4}) {
    auto meta =
        OpenSqliteMetadataStore((root_ / ("r" + std::to_string(fail_at) + ".sqlite")).string());
    auto inner =
        storage::OpenObjectStore("file://" + (root_ / ("a" + std::to_string(fail_at))).string());
    Registry reg(*std::move(meta), std::make_unique<FailingStore>(*std::move(inner), fail_at));
    RegisterRequest req;
    req.name = "m";
    req.path = model_.string();
    auto r = reg.Register(req);
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    EXPECT_EQ(reg.meta().GetModel("m").status().code(), StatusCode::kNotFound);
    auto again = reg.Register(req);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->version, 1);
    EXPECT_TRUE(reg.Verify("m/1").ok());
  }
}

}  // namespace
}  // namespace gantry::registry
