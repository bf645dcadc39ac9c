// The registry with its artifacts in Azure Blob (Azurite): register, sign,
// alias, export with verification, and a blob tampered on the server.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gantry/registry/registry.h"
#include "gantry/security/crypto.h"
#include "testing/azurite_fixture.h"

namespace gantry::registry {
namespace {

namespace fs = std::filesystem;

TEST(RegistryAzurite, RegisterSignExportAndDetectTampering) {
  storage::testing::AzuriteFixture azurite;
  Status started = azurite.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();

  char t[] = "/tmp/gantry-registry-az-XXXXXX";
  ASSERT_NE(::mkdtemp(t), nullptr);
  fs::path root = t;
  fs::create_directories(root / "model/sub");
  std::ofstream(root / "model/config.json") << "{\"a\": 1}";
  std::ofstream(root / "model/sub/weights.safetensors") << std::string(20000, 'x');

  storage::StoreOptions o;
  o.container = "models";
  o.prefix = "registry";
  auto store = storage::OpenObjectStore(azurite.connection_string(), o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto meta = OpenSqliteMetadataStore((root / "r.sqlite").string());
  ASSERT_TRUE(meta.ok());
  Registry reg(*std::move(meta), *std::move(store));

  RegisterRequest req;
  req.name = "bert";
  req.path = (root / "model").string();
  auto v = reg.Register(req);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_TRUE(reg.artifacts().Stat(ManifestKey(v->manifest_sha256)).ok());

  auto kp = security::GenerateSigningKey(security::KeyAlgorithm::kEcdsaP256);
  auto signer = security::DsseSigner::FromPrivatePem(kp->private_pem);
  ASSERT_TRUE(reg.Sign("bert/1", *signer).ok());
  ASSERT_TRUE(reg.TrustKey(kp->public_pem, "ci").ok());
  ASSERT_TRUE(reg.SetSignaturesRequired(true).ok());
  ASSERT_TRUE(reg.SetAlias("bert", "production", 1).ok());

  auto rep = reg.Export("bert@production", (root / "out").string());
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->signed_by_trusted);
  EXPECT_EQ(fs::file_size(root / "out/sub/weights.safetensors"), 20000u);

  // Replace a blob on the server with different bytes.
  std::string digest = v->files[1].sha256;
  std::string evil(20000, 'y');
  ASSERT_TRUE(
      reg.artifacts()
          .Put(BlobKey(digest), std::span<const std::byte>(
                                    reinterpret_cast<const std::byte*>(evil.data()), evil.size()))
          .ok());
  auto bad = reg.Export("bert@production", (root / "out2").string());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  EXPECT_FALSE(fs::exists(root / "out2"));
  EXPECT_EQ(reg.Verify("bert/1").status().code(), StatusCode::kDataLoss);
  fs::remove_all(root);
}

}  // namespace
}  // namespace gantry::registry
