#include "gantry/security/key_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "gantry/security/api_key.h"
#include "testing/temp_dir.h"

namespace gantry::security {
namespace {

using gantry::testing::TempDir;

constexpr int64_t kNow = 1'800'000'000;

TEST(KeyStoreTest, CreateAuthenticateAndList) {
  auto store = KeyStore::Open(":memory:");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto created = (*store)->Create("ci-bot", "user", 0, kNow);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const auto& [info, key] = *created;
  EXPECT_EQ(info.name, "ci-bot");
  EXPECT_EQ(info.role, "user");
  EXPECT_EQ(info.created_unix, kNow);
  EXPECT_EQ(key.substr(3, 16), info.id);
  EXPECT_EQ(key.find(info.hash_hex), std::string::npos);

  auto got = (*store)->Get(info.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->hash_hex, info.hash_hex);
  EXPECT_EQ(got->salt_hex, info.salt_hex);
  EXPECT_EQ((*store)->Get("0000000000000000").status().code(), StatusCode::kNotFound);

  auto snap = (*store)->Snapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ((*snap)->size(), 1u);
  const ApiKeyInfo* who = nullptr;
  EXPECT_EQ(Authenticate(**snap, key, kNow, &who), KeyCheck::kOk);
  ASSERT_NE(who, nullptr);
  EXPECT_EQ(who->name, "ci-bot");

  // Wrong secret, unknown id, malformed.
  std::string wrong = key;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(Authenticate(**snap, wrong, kNow, &who), KeyCheck::kBadSecret);
  EXPECT_EQ(who, nullptr);
  std::string unknown = key;
  unknown[3] = unknown[3] == 'a' ? 'b' : 'a';
  EXPECT_EQ(Authenticate(**snap, unknown, kNow, &who), KeyCheck::kUnknown);
  EXPECT_EQ(Authenticate(**snap, "Bearer " + key, kNow, &who), KeyCheck::kMalformed);
  EXPECT_EQ(Authenticate(**snap, "", kNow, nullptr), KeyCheck::kMalformed);

  auto second = (*store)->Create("other", "admin", 0, kNow + 1);
  ASSERT_TRUE(second.ok());
  auto list = (*store)->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, info.id);
  EXPECT_EQ((*list)[1].name, "other");

  EXPECT_EQ(KeyCheckName(KeyCheck::kUnknown), "unknown_key");
  EXPECT_EQ(KeyCheckName(KeyCheck::kBadSecret), "bad_secret");
}

TEST(KeyStoreTest, CreateRejectsEmptyNameOrRole) {
  auto store = KeyStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Create("", "user", 0, kNow).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Create("x", "", 0, kNow).status().code(), StatusCode::kInvalidArgument);
}

TEST(KeyStoreTest, ExpiryAndRevocation) {
  auto store = KeyStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto k = (*store)->Create("temp", "user", kNow + 100, kNow);
  ASSERT_TRUE(k.ok());
  auto snap = *(*store)->Snapshot();
  const ApiKeyInfo* who = nullptr;
  EXPECT_EQ(Authenticate(*snap, k->second, kNow + 99, &who), KeyCheck::kOk);
  EXPECT_EQ(Authenticate(*snap, k->second, kNow + 100, &who), KeyCheck::kExpired);
  ASSERT_NE(who, nullptr);  // set for logging
  EXPECT_EQ(who->id, k->first.id);

  ASSERT_TRUE((*store)->Revoke(k->first.id, kNow + 10).ok());
  // Revoking again keeps the first time.
  ASSERT_TRUE((*store)->Revoke(k->first.id, kNow + 50).ok());
  EXPECT_EQ((*store)->Get(k->first.id)->revoked_unix, kNow + 10);
  snap = *(*store)->Snapshot();
  EXPECT_EQ(Authenticate(*snap, k->second, kNow + 20, &who), KeyCheck::kRevoked);
  EXPECT_NE(who, nullptr);
  // A wrong secret for a revoked key says bad_secret, not revoked.
  std::string wrong = k->second;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  EXPECT_EQ(Authenticate(*snap, wrong, kNow + 20, &who), KeyCheck::kBadSecret);

  EXPECT_EQ((*store)->Revoke("ffffffffffffffff", kNow).code(), StatusCode::kNotFound);
}

TEST(KeyStoreTest, RotateWithGraceAndWithout) {
  auto store = KeyStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto old = (*store)->Create("svc", "user", 0, kNow);
  ASSERT_TRUE(old.ok());
  auto rotated = (*store)->Rotate(old->first.id, 3600, kNow + 10);
  ASSERT_TRUE(rotated.ok()) << rotated.status().ToString();
  EXPECT_NE(rotated->first.id, old->first.id);
  EXPECT_EQ(rotated->first.name, "svc");
  EXPECT_EQ(rotated->first.role, "user");
  EXPECT_EQ(rotated->first.expires_unix, 0);
  auto snap = *(*store)->Snapshot();
  EXPECT_EQ(Authenticate(*snap, old->second, kNow + 20, nullptr), KeyCheck::kOk);  // grace
  EXPECT_EQ(Authenticate(*snap, old->second, kNow + 10 + 3600, nullptr), KeyCheck::kExpired);
  EXPECT_EQ(Authenticate(*snap, rotated->second, kNow + 10 + 3600, nullptr), KeyCheck::kOk);

  // Grace 0 revokes at once; a revoked key cannot be rotated again.
  auto again = (*store)->Rotate(rotated->first.id, 0, kNow + 30);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*store)->Get(rotated->first.id)->revoked_unix, kNow + 30);
  EXPECT_EQ((*store)->Rotate(rotated->first.id, 0, kNow + 40).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ((*store)->Rotate("0123456789abcdef", 0, kNow).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*store)->Rotate(again->first.id, -1, kNow).status().code(),
            StatusCode::kInvalidArgument);
  // A failed rotation leaves no half-made key behind.
  EXPECT_EQ((*store)->List()->size(), 3u);
}

TEST(KeyStoreTest, RotateKeepsLifetimeAndEarlierExpiry) {
  auto store = KeyStore::Open(":memory:");
  ASSERT_TRUE(store.ok());
  auto old = (*store)->Create("svc", "user", kNow + 1000, kNow);
  ASSERT_TRUE(old.ok());
  auto r = (*store)->Rotate(old->first.id, 5000, kNow + 500);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first.expires_unix, kNow + 500 + 1000);
  // The old key keeps its earlier expiry rather than gaining time.
  EXPECT_EQ((*store)->Get(old->first.id)->expires_unix, kNow + 1000);
}

TEST(KeyStoreTest, ChangedSinceSnapshotAcrossConnections) {
  TempDir dir;
  std::string db = dir.path() + "/gateway.db";
  auto a = KeyStore::Open(db);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = KeyStore::Open(db);
  ASSERT_TRUE(b.ok()) << b.status().ToString();

  EXPECT_TRUE(*(*a)->ChangedSinceSnapshot());  // no snapshot yet
  auto snap = (*a)->Snapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ((*snap)->size(), 0u);
  EXPECT_FALSE(*(*a)->ChangedSinceSnapshot());

  // Another connection (as `gantry gateway keys create --state DB` would) writes.
  auto k = (*b)->Create("offline", "admin", 0, kNow);
  ASSERT_TRUE(k.ok());
  EXPECT_TRUE(*(*a)->ChangedSinceSnapshot());
  snap = (*a)->Snapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ((*snap)->size(), 1u);
  EXPECT_EQ(Authenticate(**snap, k->second, kNow, nullptr), KeyCheck::kOk);
  EXPECT_FALSE(*(*a)->ChangedSinceSnapshot());

  // Local writes count too.
  ASSERT_TRUE((*a)->Revoke(k->first.id, kNow + 1).ok());
  EXPECT_TRUE(*(*a)->ChangedSinceSnapshot());
  snap = (*a)->Snapshot();
  EXPECT_FALSE(*(*a)->ChangedSinceSnapshot());
  EXPECT_EQ(Authenticate(**snap, k->second, kNow + 2, nullptr), KeyCheck::kRevoked);

  // A failed write (unknown id) is not a change.
  EXPECT_FALSE((*b)->Revoke("0000000000000000", kNow).ok());
  EXPECT_FALSE(*(*a)->ChangedSinceSnapshot());

  // Data survives reopening.
  a->reset();
  auto c = KeyStore::Open(db);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->List()->size(), 1u);
}

TEST(KeyStoreTest, ConcurrentCreatesAndSnapshots) {
  TempDir dir;
  auto store = KeyStore::Open(dir.path() + "/keys.db");
  ASSERT_TRUE(store.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        EXPECT_TRUE((*store)->Create("k" + std::to_string(t), "user", 0, kNow).ok());
        EXPECT_TRUE((*store)->Snapshot().ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ((*(*store)->Snapshot())->size(), 40u);
}

TEST(KeyStoreTest, OpenFailsWithAClearError) {
  auto s = KeyStore::Open("/nonexistent-dir-gantry/x/keys.db");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent-dir-gantry/x/keys.db"), std::string::npos);
}

}  // namespace
}  // namespace gantry::security
