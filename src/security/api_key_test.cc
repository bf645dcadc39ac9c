#include "gantry/security/api_key.h"

#include <gtest/gtest.h>

#include <set>

namespace gantry::security {
namespace {

TEST(ApiKeyTest, GeneratedKeysHaveTheDocumentedFormat) {
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    NewApiKey k = GenerateApiKey();
    ASSERT_EQ(k.key.size(), kApiKeyLen);
    EXPECT_EQ(k.key.substr(0, 3), "gk_");
    EXPECT_EQ(k.key.substr(3, 16), k.id);
    EXPECT_EQ(k.key[19], '_');
    EXPECT_EQ(k.salt_hex.size(), 32u);
    EXPECT_EQ(k.hash_hex.size(), 64u);
    auto p = ParseApiKey(k.key);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->id, k.id);
    EXPECT_EQ(p->secret.size(), kApiKeySecretLen);
    EXPECT_TRUE(VerifyApiKeySecret(k.salt_hex, k.hash_hex, p->secret));
    EXPECT_EQ(HashApiKeySecret(k.salt_hex, p->secret), k.hash_hex);
    ids.insert(k.id);
  }
  EXPECT_EQ(ids.size(), 50u);
}

TEST(ApiKeyTest, ParseViewsPointIntoTheInput) {
  NewApiKey k = GenerateApiKey();
  auto p = ParseApiKey(k.key);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->id.data(), k.key.data() + 3);
  EXPECT_EQ(p->secret.data(), k.key.data() + 20);
}

TEST(ApiKeyTest, ParseRejects) {
  NewApiKey k = GenerateApiKey();
  std::string good = k.key;
  auto bad = [&](std::string s) { return !ParseApiKey(s).ok(); };
  EXPECT_TRUE(bad(""));
  EXPECT_TRUE(bad(good.substr(0, good.size() - 1)));  // short
  EXPECT_TRUE(bad(good + "A"));                       // long
  std::string s = good;
  s[0] = 'G';
  EXPECT_TRUE(bad(s));  // prefix
  s = good;
  s[2] = '-';
  EXPECT_TRUE(bad(s));
  s = good;
  s[5] = 'A';  // uppercase hex in the id
  EXPECT_TRUE(bad(s));
  s = good;
  s[5] = 'g';
  EXPECT_TRUE(bad(s));
  s = good;
  s[19] = '-';
  EXPECT_TRUE(bad(s));  // separator
  s = good;
  s[30] = '+';
  EXPECT_TRUE(bad(s));  // not base64url
  s = good;
  s[62] = '=';
  EXPECT_TRUE(bad(s));
  s = good;
  s[40] = '\0';
  EXPECT_TRUE(bad(s));
  // The error message never contains the secret.
  s = good;
  s[30] = '+';
  EXPECT_EQ(ParseApiKey(s).status().message().find(s.substr(20)), std::string::npos);
}

TEST(ApiKeyTest, VerifyRejectsWrongSecretOrSalt) {
  NewApiKey k = GenerateApiKey();
  auto p = ParseApiKey(k.key);
  ASSERT_TRUE(p.ok());
  std::string secret(p->secret);
  std::string wrong = secret;
  wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(VerifyApiKeySecret(k.salt_hex, k.hash_hex, wrong));
  EXPECT_FALSE(VerifyApiKeySecret(GenerateApiKey().salt_hex, k.hash_hex, secret));
  EXPECT_FALSE(VerifyApiKeySecret(k.salt_hex, k.hash_hex.substr(1), secret));
  EXPECT_FALSE(VerifyApiKeySecret(k.salt_hex, "", secret));
}

TEST(ApiKeyTest, HashIsSha256OfSaltBytesThenSecret) {
  // SHA-256("abc") where salt bytes are "ab" (hex 6162) and the secret is "c".
  EXPECT_EQ(HashApiKeySecret("6162", "c"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace gantry::security
