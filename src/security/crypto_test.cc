#include "gantry/security/crypto.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <set>

namespace gantry::security {
namespace {

TEST(Sha256Test, KnownAnswers) {
  // FIPS 180-2 appendix B / NIST examples.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  auto raw = Sha256("abc");
  EXPECT_EQ(raw[0], 0xba);
  EXPECT_EQ(raw[31], 0xad);
}

TEST(HexTest, RoundTripAndRejects) {
  std::string bytes("\x00\x01\x7f\x80\xfe\xff", 6);
  EXPECT_EQ(HexEncode(bytes), "00017f80feff");
  EXPECT_EQ(*HexDecode("00017f80feff"), bytes);
  EXPECT_EQ(*HexDecode("00017F80FEFF"), bytes);
  EXPECT_EQ(*HexDecode(""), "");
  EXPECT_FALSE(HexDecode("abc").ok());
  EXPECT_FALSE(HexDecode("zz").ok());
  EXPECT_FALSE(HexDecode("0g").ok());
  EXPECT_EQ(HexDecode("0g").status().code(), StatusCode::kInvalidArgument);
}

TEST(Base64UrlTest, Rfc4648Vectors) {
  const std::pair<const char*, const char*> cases[] = {
      {"", ""},           {"f", "Zg"},          {"fo", "Zm8"},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg"}, {"fooba", "Zm9vYmE"}, {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : cases) {
    EXPECT_EQ(Base64UrlEncode(plain), enc);
    auto dec = Base64UrlDecode(enc);
    ASSERT_TRUE(dec.ok()) << enc;
    EXPECT_EQ(*dec, plain);
  }
  // The URL-safe alphabet: 0xfb 0xff -> "-_8" (standard base64 would be "+/8=").
  EXPECT_EQ(Base64UrlEncode(std::string("\xfb\xff", 2)), "-_8");
  EXPECT_EQ(*Base64UrlDecode("-_8"), std::string("\xfb\xff", 2));
}

TEST(Base64UrlTest, Rejects) {
  EXPECT_FALSE(Base64UrlDecode("Zg==").ok());  // padding is not accepted
  EXPECT_FALSE(Base64UrlDecode("Z").ok());     // impossible length
  EXPECT_FALSE(Base64UrlDecode("Zh").ok());    // non-zero trailing bits
  EXPECT_FALSE(Base64UrlDecode("+/8").ok());   // standard alphabet
  EXPECT_FALSE(Base64UrlDecode("Zm 9").ok());
}

TEST(Base64UrlTest, RandomRoundTrip) {
  for (size_t n = 0; n < 70; ++n) {
    std::string b = RandomBytes(n);
    std::string e = Base64UrlEncode(b);
    EXPECT_EQ(e.find('='), std::string::npos);
    auto d = Base64UrlDecode(e);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, b);
  }
}

TEST(ConstantTimeEqualsTest, Basics) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
}

TEST(RandomBytesTest, SizeAndDistinct) {
  EXPECT_EQ(RandomBytes(0).size(), 0u);
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) seen.insert(RandomBytes(16));
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Ed25519Test, SignVerifyAndKeyId) {
  auto kp = GenerateEd25519();
  ASSERT_TRUE(kp.ok()) << kp.status().ToString();
  EXPECT_NE(kp->private_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  EXPECT_NE(kp->public_pem.find("BEGIN PUBLIC KEY"), std::string::npos);
  auto signer = Ed25519Signer::FromPrivatePem(kp->private_pem);
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  auto verifier = Ed25519Verifier::FromPublicPem(kp->public_pem);
  ASSERT_TRUE(verifier.ok()) << verifier.status().ToString();
  EXPECT_EQ(signer->PublicKeyPem(), kp->public_pem);
  EXPECT_EQ(signer->KeyId().size(), 16u);
  EXPECT_EQ(signer->KeyId(), verifier->KeyId());

  auto sig = signer->Sign("hello");
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), 64u);
  EXPECT_TRUE(verifier->Verify("hello", *sig));
  EXPECT_FALSE(verifier->Verify("hellp", *sig));
  std::string bad = *sig;
  bad[10] ^= 1;
  EXPECT_FALSE(verifier->Verify("hello", bad));
  EXPECT_FALSE(verifier->Verify("hello", sig->substr(0, 63)));

  // Another key does not verify, and has another id.
  auto other = GenerateEd25519();
  ASSERT_TRUE(other.ok());
  auto other_v = Ed25519Verifier::FromPublicPem(other->public_pem);
  ASSERT_TRUE(other_v.ok());
  EXPECT_FALSE(other_v->Verify("hello", *sig));
  EXPECT_NE(other_v->KeyId(), verifier->KeyId());

  // Moving keeps the key usable.
  Ed25519Signer moved = std::move(signer).value();
  auto sig2 = moved.Sign("hello");
  ASSERT_TRUE(sig2.ok());
  EXPECT_TRUE(verifier->Verify("hello", *sig2));
}

std::string PemOf(EVP_PKEY* key, bool priv) {
  BIO* bio = BIO_new(BIO_s_mem());
  if (priv) {
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  } else {
    PEM_write_bio_PUBKEY(bio, key);
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

TEST(Ed25519Test, Rfc8032TestVector1) {
  auto sk = HexDecode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60");
  ASSERT_TRUE(sk.ok());
  EVP_PKEY* key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(sk->data()), sk->size());
  ASSERT_NE(key, nullptr);
  std::string priv = PemOf(key, true);
  EVP_PKEY_free(key);
  auto signer = Ed25519Signer::FromPrivatePem(priv);
  ASSERT_TRUE(signer.ok());
  auto sig = signer->Sign("");
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(HexEncode(*sig),
            "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bac"
            "c61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
  auto pk = HexDecode("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a");
  EXPECT_EQ(signer->KeyId(), Sha256Hex(*pk).substr(0, 16));
}

TEST(Ed25519Test, RejectsWrongKeys) {
  EXPECT_FALSE(Ed25519Signer::FromPrivatePem("not a pem").ok());
  EXPECT_FALSE(Ed25519Verifier::FromPublicPem("").ok());
  EVP_PKEY* ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(ec, nullptr);
  auto s = Ed25519Signer::FromPrivatePem(PemOf(ec, true));
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("not an Ed25519"), std::string::npos);
  EXPECT_FALSE(Ed25519Verifier::FromPublicPem(PemOf(ec, false)).ok());
  EVP_PKEY_free(ec);
  // A public key where a private key is expected.
  auto kp = GenerateEd25519();
  ASSERT_TRUE(kp.ok());
  EXPECT_FALSE(Ed25519Signer::FromPrivatePem(kp->public_pem).ok());
}

}  // namespace
}  // namespace gantry::security
