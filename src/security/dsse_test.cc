#include "gantry/security/dsse.h"

#include <gtest/gtest.h>

namespace gantry::security {
namespace {

TEST(Dsse, PaeMatchesTheSpecExample) {
  // secure-systems-lab/dsse protocol.md worked example.
  EXPECT_EQ(DssePae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  EXPECT_EQ(DssePae("", ""), "DSSEv1 0  0 ");
}

TEST(Dsse, Base64RoundTripAndPadding) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("\xfb\xff"), "+/8=");
  EXPECT_EQ(*Base64Decode("+/8="), "\xfb\xff");
  EXPECT_EQ(*Base64Decode("-_8"), "\xfb\xff");  // base64url accepted
  EXPECT_FALSE(Base64Decode("Zm9v!").ok());
}

class DsseAlg : public ::testing::TestWithParam<KeyAlgorithm> {};

TEST_P(DsseAlg, SignVerifyAndRejectTampering) {
  auto kp = GenerateSigningKey(GetParam());
  ASSERT_TRUE(kp.ok()) << kp.status().ToString();
  auto signer = DsseSigner::FromPrivatePem(kp->private_pem);
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  auto verifier = DsseVerifier::FromPublicPem(kp->public_pem);
  ASSERT_TRUE(verifier.ok());
  EXPECT_EQ(signer->KeyId(), verifier->KeyId());
  EXPECT_EQ(signer->algorithm(), GetParam());

  auto env = SignDsse("application/vnd.in-toto+json", "{\"a\":1}", *signer);
  ASSERT_TRUE(env.ok());
  std::vector<DsseVerifier> trusted;
  trusted.push_back(std::move(*verifier));

  // Round trip through JSON.
  Json j = DsseEnvelopeToJson(*env);
  auto back = DsseEnvelopeFromJson(Json::parse(j.dump()));
  ASSERT_TRUE(back.ok());
  auto who = VerifyDsse(*back, trusted);
  ASSERT_TRUE(who.ok()) << who.status().ToString();
  EXPECT_EQ(*who, signer->KeyId());

  // Payload changed.
  auto bad = *back;
  bad.payload = "{\"a\":2}";
  EXPECT_EQ(VerifyDsse(bad, trusted).status().code(), StatusCode::kPermissionDenied);
  // Payload type changed (PAE binds it).
  bad = *back;
  bad.payload_type = "text/plain";
  EXPECT_EQ(VerifyDsse(bad, trusted).status().code(), StatusCode::kPermissionDenied);

  // Wrong key.
  auto other = GenerateSigningKey(GetParam());
  std::vector<DsseVerifier> wrong;
  wrong.push_back(*DsseVerifier::FromPublicPem(other->public_pem));
  auto w = VerifyDsse(*back, wrong);
  EXPECT_EQ(w.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(w.status().message().find("none of which is a trusted key"), std::string::npos)
      << w.status().message();
  // Empty keyid: every trusted key is tried, still refused.
  bad = *back;
  bad.signatures[0].keyid = "";
  EXPECT_FALSE(VerifyDsse(bad, wrong).ok());
  EXPECT_TRUE(VerifyDsse(bad, trusted).ok());
  // No trusted keys, no signatures.
  EXPECT_FALSE(VerifyDsse(*back, {}).ok());
  bad.signatures.clear();
  EXPECT_FALSE(VerifyDsse(bad, trusted).ok());
}

INSTANTIATE_TEST_SUITE_P(Algs, DsseAlg,
                         ::testing::Values(KeyAlgorithm::kEd25519, KeyAlgorithm::kEcdsaP256));

TEST(Dsse, EnvelopeFieldNames) {
  auto kp = GenerateSigningKey(KeyAlgorithm::kEd25519);
  auto signer = DsseSigner::FromPrivatePem(kp->private_pem);
  auto env = SignDsse("application/vnd.in-toto+json", "hello", *signer);
  Json j = DsseEnvelopeToJson(*env);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"payload", "payloadType", "signatures"}));
  EXPECT_EQ(j["payload"], "aGVsbG8=");
  EXPECT_EQ(j["signatures"][0]["keyid"], signer->KeyId());
  EXPECT_EQ(*Base64Decode(j["signatures"][0]["sig"].get<std::string>()), env->signatures[0].sig);
  EXPECT_EQ(env->signatures[0].sig.size(), 64u);  // raw Ed25519
}

TEST(Dsse, RejectsUnsupportedKeys) {
  EXPECT_FALSE(DsseSigner::FromPrivatePem("not a key").ok());
  EXPECT_FALSE(
      DsseVerifier::FromPublicPem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
          .ok());
  EXPECT_FALSE(ParseKeyAlgorithm("rsa").ok());
  EXPECT_EQ(*ParseKeyAlgorithm("p256"), KeyAlgorithm::kEcdsaP256);
}

}  // namespace
}  // namespace gantry::security
