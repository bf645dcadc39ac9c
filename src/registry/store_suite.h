// The metadata-store conformance suite: one set of tests that every
// MetadataStore implementation must pass (SQLite in sqlite_store_test.cc,
// PostgreSQL in postgres_store_integration_test.cc).
//
// A test binary includes this header and instantiates the suite with a
// StoreBackend whose new_database() returns a `--db` value (a SQLite path or
// a postgresql:// URI) for a fresh, empty database; stores are opened with
// OpenMetadataStore, so the URL dispatch is exercised too. Each store object
// is one connection, so tests that open several stores per database model
// several processes or machines sharing the registry.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <set>
#include <thread>

#include "gantry/registry/registry.h"

namespace gantry::registry::testing {

struct StoreBackend {
  std::string name;
  // Given a per-test scratch directory, returns the --db value of a new,
  // empty database.
  std::function<Result<std::string>(const std::string& scratch_dir)> new_database;
};

inline std::ostream& operator<<(std::ostream& os, const StoreBackend& b) { return os << b.name; }

class StoreSuite : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    char t[] = "/tmp/gantry-store-suite-XXXXXX";
    ASSERT_NE(::mkdtemp(t), nullptr);
    root_ = t;
    auto db = GetParam().new_database(root_.string());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = *db;
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }

  // A new connection to the test's database.
  std::unique_ptr<MetadataStore> Open() {
    auto s = OpenMetadataStore(db_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static ModelVersion Version(const std::string& model, const std::string& salt) {
    ModelVersion v;
    v.model = model;
    v.description = "v " + salt;
    v.manifest_sha256 = std::string(64, 'a');
    v.subject_sha256 = std::string(64, 'b');
    v.total_bytes = 7;
    v.files = {{"a.bin", std::string(64, 'c'), 3}, {"dir/b.bin", std::string(64, 'd'), 4}};
    v.lineage.source = "ckpt:/ckpt/" + salt;
    v.lineage.run_id = "run-" + salt;
    v.lineage.code_commit = "commit-" + salt;
    v.lineage.dataset_digests = {"sha256:d1", "sha256:d-" + salt};
    v.lineage.metrics = {{"loss", 0.25}};
    v.tags = {{"salt", salt}};
    return v;
  }

  int64_t MustInsert(MetadataStore& s, const std::string& model, const std::string& salt) {
    EXPECT_TRUE(s.EnsureModel(model, "", 1).ok());
    auto n = s.InsertVersion(Version(model, salt), 100);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : 0;
  }

  std::filesystem::path root_;
  std::string db_;
  std::unique_ptr<MetadataStore> store_;
};

TEST_P(StoreSuite, ModelsAndVersionsRoundTrip) {
  EXPECT_EQ(store_->GetModel("m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ListVersions("m").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->EnsureModel("m", "first", 10).ok());
  ASSERT_TRUE(store_->EnsureModel("m", "ignored", 11).ok());  // description kept
  auto m = store_->GetModel("m");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->description, "first");
  EXPECT_EQ(m->created_unix, 10);
  EXPECT_EQ(m->latest_version, 0);

  ModelVersion in = Version("m", "x");
  in.total_bytes = uint64_t{1} << 40;  // needs 64-bit columns
  auto n1 = store_->InsertVersion(in, 1700000000);
  ASSERT_TRUE(n1.ok()) << n1.status().ToString();
  EXPECT_EQ(*n1, 1);
  EXPECT_EQ(*store_->InsertVersion(Version("m", "y"), 1700000001), 2);
  ModelVersion orphan = Version("nope", "z");
  EXPECT_EQ(store_->InsertVersion(orphan, 1).status().code(), StatusCode::kNotFound);

  auto v = store_->GetVersion("m", 1);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->model, "m");
  EXPECT_EQ(v->version, 1);
  EXPECT_EQ(v->description, "v x");
  EXPECT_EQ(v->created_unix, 1700000000);
  EXPECT_EQ(v->manifest_sha256, in.manifest_sha256);
  EXPECT_EQ(v->subject_sha256, in.subject_sha256);
  EXPECT_EQ(v->total_bytes, uint64_t{1} << 40);
  ASSERT_EQ(v->files.size(), 2u);
  EXPECT_EQ(v->files[1].path, "dir/b.bin");
  EXPECT_EQ(v->files[1].size, 4u);
  EXPECT_EQ(v->lineage.source, "ckpt:/ckpt/x");
  EXPECT_EQ(v->lineage.run_id, "run-x");
  EXPECT_EQ(v->lineage.code_commit, "commit-x");
  EXPECT_EQ(v->lineage.dataset_digests, (std::vector<std::string>{"sha256:d-x", "sha256:d1"}));
  EXPECT_EQ(v->lineage.metrics["loss"], 0.25);
  EXPECT_EQ(v->tags.at("salt"), "x");
  EXPECT_EQ(store_->GetVersion("m", 3).status().code(), StatusCode::kNotFound);

  auto all = store_->ListVersions("m");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].version, 2);
  EXPECT_EQ(store_->GetModel("m")->latest_version, 2);
  ASSERT_TRUE(store_->EnsureModel("a-first", "", 1).ok());
  auto models = store_->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 2u);
  EXPECT_EQ((*models)[0].name, "a-first");
}

TEST_P(StoreSuite, AliasesAreCompareAndSet) {
  MustInsert(*store_, "m", "1");
  MustInsert(*store_, "m", "2");
  EXPECT_EQ(store_->ResolveAlias("m", "prod").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->SetAlias("m", "prod", 1, /*expected=*/0, 5).ok());
  EXPECT_EQ(*store_->ResolveAlias("m", "prod"), 1);
  Status stale = store_->SetAlias("m", "prod", 2, 0, 6);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("points at version 1"), std::string::npos) << stale.message();
  ASSERT_TRUE(store_->SetAlias("m", "prod", 2, 1, 7).ok());
  ASSERT_TRUE(store_->SetAlias("m", "prod", 1, std::nullopt, 8).ok());  // unconditional
  EXPECT_EQ(store_->SetAlias("m", "prod", 9, std::nullopt, 9).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->SetAlias("x", "prod", 1, std::nullopt, 9).code(), StatusCode::kNotFound);
  EXPECT_EQ(*store_->ResolveAlias("m", "prod"), 1);
  EXPECT_EQ(store_->GetModel("m")->aliases.at("prod"), 1);
  EXPECT_EQ(store_->GetVersion("m", 1)->aliases, std::vector<std::string>{"prod"});
  EXPECT_EQ(store_->GetModel("m")->updated_unix, 8);

  EXPECT_EQ(store_->DeleteAlias("m", "prod", 2, 10).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->DeleteAlias("m", "nope", std::nullopt, 10).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->DeleteAlias("m", "prod", 1, 10).ok());
  EXPECT_EQ(store_->ResolveAlias("m", "prod").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreSuite, TagsDescriptionsSignaturesKeysAndSettings) {
  MustInsert(*store_, "m", "1");
  ASSERT_TRUE(store_->SetTag("m", 0, "team", "nlp", false, 20).ok());
  ASSERT_TRUE(store_->SetTag("m", 1, "stage", "qa", false, 20).ok());
  ASSERT_TRUE(store_->SetTag("m", 1, "stage", "done", false, 21).ok());
  ASSERT_TRUE(store_->SetTag("m", 1, "salt", "", true, 21).ok());
  EXPECT_EQ(store_->SetTag("m", 5, "k", "v", false, 21).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->SetTag("zz", 0, "k", "v", false, 21).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetModel("m")->tags, (std::map<std::string, std::string>{{"team", "nlp"}}));
  EXPECT_EQ(store_->GetVersion("m", 1)->tags,
            (std::map<std::string, std::string>{{"stage", "done"}}));

  ASSERT_TRUE(store_->SetDescription("m", 0, "model text", 22).ok());
  ASSERT_TRUE(store_->SetDescription("m", 1, "version text", 22).ok());
  EXPECT_EQ(store_->SetDescription("m", 2, "x", 22).code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetModel("m")->description, "model text");
  EXPECT_EQ(store_->GetVersion("m", 1)->description, "version text");

  std::string bundle = "{\"quote\": \"it's\", \"nul-free\": \"\\u00e9\"}";
  ASSERT_TRUE(store_->AddSignature("m", 1, "key-b", bundle, 30).ok());
  ASSERT_TRUE(store_->AddSignature("m", 1, "key-a", "old", 30).ok());
  ASSERT_TRUE(store_->AddSignature("m", 1, "key-a", "new", 31).ok());
  EXPECT_EQ(store_->AddSignature("m", 2, "key-a", "x", 31).code(), StatusCode::kNotFound);
  auto sigs = store_->Signatures("m", 1);
  ASSERT_TRUE(sigs.ok());
  EXPECT_EQ(*sigs, (std::map<std::string, std::string>{{"key-a", "new"}, {"key-b", bundle}}));
  EXPECT_EQ(store_->GetVersion("m", 1)->signer_keyids,
            (std::vector<std::string>{"key-a", "key-b"}));

  ASSERT_TRUE(store_->AddTrustedKey({"k1", "ed25519", "PEM1", "ci"}, 40).ok());
  ASSERT_TRUE(store_->AddTrustedKey({"k1", "ed25519", "PEM1", "release"}, 41).ok());
  ASSERT_TRUE(store_->AddTrustedKey({"k0", "ecdsa-p256", "PEM0", ""}, 41).ok());
  auto keys = store_->TrustedKeys();
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].keyid, "k0");
  EXPECT_EQ((*keys)[1].comment, "release");
  ASSERT_TRUE(store_->RemoveTrustedKey("k0").ok());
  EXPECT_EQ(store_->RemoveTrustedKey("k0").code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->TrustedKeys()->size(), 1u);

  EXPECT_EQ(*store_->GetSetting("require_signatures"), "");
  ASSERT_TRUE(store_->SetSetting("require_signatures", "true").ok());
  ASSERT_TRUE(store_->SetSetting("require_signatures", "false").ok());
  EXPECT_EQ(*store_->GetSetting("require_signatures"), "false");
}

TEST_P(StoreSuite, SearchByNameTagAliasAndLineage) {
  MustInsert(*store_, "llm", "a");  // llm/1
  MustInsert(*store_, "llm", "b");  // llm/2
  MustInsert(*store_, "other_x", "a");
  ModelVersion child = Version("llm", "c");
  child.lineage.parent = "llm/1";
  ASSERT_TRUE(store_->InsertVersion(child, 1).ok());  // llm/3
  ASSERT_TRUE(store_->SetAlias("llm", "staging", 2, std::nullopt, 1).ok());
  ASSERT_TRUE(store_->SetTag("other_x", 0, "team", "vision", false, 1).ok());

  auto ids = [&](const SearchQuery& q) {
    std::vector<std::string> out;
    auto r = store_->Search(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) {
      for (const auto& v : *r) out.push_back(v.model + "/" + std::to_string(v.version));
    }
    return out;
  };
  SearchQuery q;
  EXPECT_EQ(ids(q), (std::vector<std::string>{"llm/3", "llm/2", "llm/1", "other_x/1"}));
  q.limit = 2;
  EXPECT_EQ(ids(q).size(), 2u);
  q = {};
  q.run_id = "run-a";
  EXPECT_EQ(ids(q), (std::vector<std::string>{"llm/1", "other_x/1"}));
  q = {};
  q.dataset_digest = "sha256:d-b";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.alias = "staging";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.parent = "llm/1";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/3"});
  q = {};
  q.code_commit = "commit-c";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/3"});
  q = {};
  q.source_like = "ckpt/b";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.tag_key = "team";  // model tags match every version of the model
  EXPECT_EQ(ids(q), std::vector<std::string>{"other_x/1"});
  q.tag_value = "nlp";
  EXPECT_TRUE(ids(q).empty());
  q = {};
  q.tag_key = "salt";
  q.tag_value = "b";
  EXPECT_EQ(ids(q), std::vector<std::string>{"llm/2"});
  q = {};
  q.name_like = "r_";  // '_' is literal, not a wildcard
  EXPECT_EQ(ids(q), std::vector<std::string>{"other_x/1"});
  q.name_like = "%";
  EXPECT_TRUE(ids(q).empty());
}

TEST_P(StoreSuite, ReopeningKeepsDataAndSchema) {
  MustInsert(*store_, "m", "1");
  ASSERT_TRUE(store_->SetAlias("m", "prod", 1, 0, 1).ok());
  store_.reset();
  auto again = Open();  // schema already there: created "if not exists"
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*again->ResolveAlias("m", "prod"), 1);
  EXPECT_EQ(MustInsert(*again, "m", "2"), 2);
}

// Eight connections (as eight processes or machines would have) race to move
// one alias from the version they all read; compare-and-set lets exactly one
// win each round and the alias ends where the winner put it.
TEST_P(StoreSuite, ConcurrentAliasMovesHaveExactlyOneWinnerPerRound) {
  constexpr int kThreads = 8;
  constexpr int kVersions = 9;
  constexpr int kRounds = 6;
  for (int i = 0; i < kVersions; ++i) MustInsert(*store_, "m", std::to_string(i));
  ASSERT_TRUE(store_->SetAlias("m", "champion", 1, 0, 1).ok());
  std::vector<std::unique_ptr<MetadataStore>> conns;
  for (int i = 0; i < kThreads; ++i) {
    conns.push_back(Open());
    ASSERT_NE(conns.back(), nullptr);
  }
  for (int round = 0; round < kRounds; ++round) {
    int64_t cur = *store_->ResolveAlias("m", "champion");
    std::atomic<int> wins{0}, conflicts{0}, other{0};
    std::atomic<int64_t> winner{0};
    std::latch go(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      // Distinct targets, none equal to the current one.
      int64_t target = 1 + (cur + t) % kVersions;
      threads.emplace_back([&, t, target] {
        go.arrive_and_wait();
        Status s = conns[t]->SetAlias("m", "champion", target, cur, 100 + round);
        if (s.ok()) {
          wins++;
          winner = target;
        } else if (s.code() == StatusCode::kFailedPrecondition) {
          conflicts++;
        } else {
          ADD_FAILURE() << s.ToString();
          other++;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(conflicts.load(), kThreads - 1) << "round " << round;
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(*store_->ResolveAlias("m", "champion"), winner.load()) << "round " << round;
    EXPECT_NE(winner.load(), cur);
  }
}

// Concurrent registers of the same model from separate connections get
// distinct, gap-free version numbers.
TEST_P(StoreSuite, ConcurrentRegistersGetDistinctVersions) {
  constexpr int kThreads = 8;
  constexpr int kEach = 5;
  ASSERT_TRUE(store_->EnsureModel("m", "", 1).ok());
  std::vector<std::unique_ptr<MetadataStore>> conns;
  for (int i = 0; i < kThreads; ++i) {
    conns.push_back(Open());
    ASSERT_NE(conns.back(), nullptr);
  }
  std::mutex mu;
  std::vector<int64_t> got;
  std::latch go(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) {
        // EnsureModel races too (first use from many machines).
        Status e = conns[t]->EnsureModel("m", "", 2);
        EXPECT_TRUE(e.ok()) << e.ToString();
        auto n = conns[t]->InsertVersion(Version("m", std::to_string(t * 100 + i)), 2);
        EXPECT_TRUE(n.ok()) << n.status().ToString();
        if (n.ok()) {
          std::lock_guard lock(mu);
          got.push_back(*n);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::sort(got.begin(), got.end());
  std::vector<int64_t> want;
  for (int i = 1; i <= kThreads * kEach; ++i) want.push_back(i);
  EXPECT_EQ(got, want);
  auto all = store_->ListVersions("m");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), size_t{kThreads * kEach});
  for (const auto& v : *all) EXPECT_EQ(v.files.size(), 2u) << v.version;
}

TEST_P(StoreSuite, DeleteVersionRemovesItsRowsAndAliasesAndNeverReusesTheNumber) {
  MustInsert(*store_, "m", "1");
  MustInsert(*store_, "m", "2");
  MustInsert(*store_, "m", "3");
  ASSERT_TRUE(store_->SetAlias("m", "prod", 3, 0, 5).ok());
  ASSERT_TRUE(store_->SetAlias("m", "canary", 3, 0, 5).ok());
  ASSERT_TRUE(store_->SetAlias("m", "old", 1, 0, 5).ok());
  ASSERT_TRUE(store_->SetTag("m", 0, "team", "nlp", false, 5).ok());
  ASSERT_TRUE(store_->AddSignature("m", 3, "k", "bundle", 5).ok());
  EXPECT_EQ(store_->DeleteVersion("m", 9, 6).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->DeleteVersion("zz", 1, 6).status().code(), StatusCode::kNotFound);

  auto gone = store_->DeleteVersion("m", 3, 7);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_EQ(gone->version, 3);
  EXPECT_EQ(gone->aliases, (std::vector<std::string>{"canary", "prod"}));
  EXPECT_EQ(gone->files.size(), 2u);
  EXPECT_EQ(store_->GetVersion("m", 3).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ResolveAlias("m", "prod").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*store_->ResolveAlias("m", "old"), 1);  // other versions' aliases stay
  EXPECT_TRUE(store_->Signatures("m", 3)->empty());
  auto m = store_->GetModel("m");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->latest_version, 2);
  EXPECT_EQ(m->tags.at("team"), "nlp");  // model tags are not version rows
  EXPECT_EQ(m->updated_unix, 7);
  EXPECT_EQ(store_->ListVersions("m")->size(), 2u);
  // The next register gets 4, not 3 again.
  EXPECT_EQ(MustInsert(*store_, "m", "4"), 4);
  // The files of versions 1, 2 and 4 are the same content: still referenced.
  EXPECT_TRUE(*store_->DigestReferenced(std::string(64, 'c')));
  EXPECT_TRUE(*store_->DigestReferenced(std::string(64, 'a')));  // manifest digest
  EXPECT_FALSE(*store_->DigestReferenced(std::string(64, 'e')));
  // Search no longer finds the deleted version.
  SearchQuery q;
  q.run_id = "run-3";
  EXPECT_TRUE(store_->Search(q)->empty());
}

TEST_P(StoreSuite, DeleteModelRemovesEverythingAndRecreatingContinuesNumbering) {
  MustInsert(*store_, "m", "1");
  MustInsert(*store_, "m", "2");
  MustInsert(*store_, "keep", "k");
  ASSERT_TRUE(store_->SetAlias("m", "prod", 2, 0, 5).ok());
  ASSERT_TRUE(store_->SetTag("m", 0, "team", "nlp", false, 5).ok());
  ASSERT_TRUE(store_->SetTag("m", 1, "stage", "qa", false, 5).ok());
  EXPECT_EQ(store_->DeleteModel("nope").status().code(), StatusCode::kNotFound);
  auto gone = store_->DeleteModel("m");
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  ASSERT_EQ(gone->size(), 2u);
  EXPECT_EQ((*gone)[1].aliases, std::vector<std::string>{"prod"});
  EXPECT_EQ(store_->GetModel("m").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetVersion("m", 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->ResolveAlias("m", "prod").status().code(), StatusCode::kNotFound);
  auto models = store_->ListModels();
  ASSERT_TRUE(models.ok());
  ASSERT_EQ(models->size(), 1u);
  EXPECT_EQ((*models)[0].name, "keep");
  // "keep" still uses the same file digests.
  EXPECT_TRUE(*store_->DigestReferenced(std::string(64, 'd')));
  // Re-created: no stale tags or aliases, numbering continues after 2.
  EXPECT_EQ(MustInsert(*store_, "m", "3"), 3);
  auto again = store_->GetModel("m");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->tags.empty());
  EXPECT_TRUE(again->aliases.empty());
  EXPECT_TRUE(store_->GetVersion("m", 3)->tags.count("stage") == 0);
  ASSERT_TRUE(store_->DeleteModel("keep").ok());
  EXPECT_FALSE(*store_->DigestReferenced(std::string(64, 'e')));
}

// The store under a Registry: register, alias, export with verification.
TEST_P(StoreSuite, RegistryEndToEnd) {
  namespace fs = std::filesystem;
  auto artifacts = storage::OpenObjectStore("file://" + (root_ / "artifacts").string());
  ASSERT_TRUE(artifacts.ok()) << artifacts.status().ToString();
  Registry reg(std::move(store_), *std::move(artifacts));
  fs::path model = root_ / "model";
  fs::create_directories(model / "weights");
  std::ofstream(model / "config.json") << "{\"layers\": 2}";
  std::ofstream(model / "weights" / "model.safetensors") << std::string(2000, 'w');
  RegisterRequest req;
  req.name = "m";
  req.path = model.string();
  req.lineage.run_id = "run-1";
  auto v1 = reg.Register(req);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto v2 = reg.Register(req);
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->version, 2);
  EXPECT_EQ(v1->manifest_sha256, v2->manifest_sha256);
  ASSERT_TRUE(reg.SetAlias("m", "production", 1, 0).ok());
  EXPECT_EQ(reg.SetAlias("m", "production", 2, 0).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reg.SetAlias("m", "production", 2, 1).ok());
  auto resolved = reg.Resolve("models:/m@production");
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  EXPECT_EQ(resolved->version, 2);
  auto rep = reg.Export("m@production", (root_ / "out").string());
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->files, 2u);
  EXPECT_TRUE(fs::exists(root_ / "out" / "weights" / "model.safetensors"));
  EXPECT_TRUE(reg.Verify("m/1").ok());

  // Delete: v2 shares every byte with v1, so nothing is collected; deleting
  // v1 then removes the blobs and the manifest. Numbers are not reused.
  auto& art = reg.artifacts();
  std::string weights_key;
  for (const auto& f : v1->files)
    if (f.path == "weights/model.safetensors") weights_key = BlobKey(f.sha256);
  auto d2 = reg.DeleteVersion("m", 2);
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  EXPECT_EQ(d2->aliases_removed, std::vector<std::string>{"production"});
  EXPECT_EQ(d2->blobs_removed, 0u);
  EXPECT_EQ(d2->manifests_removed, 0u);
  EXPECT_TRUE(art.Stat(weights_key).ok());
  EXPECT_TRUE(reg.Verify("m/1").ok());
  EXPECT_EQ(reg.Resolve("m@production").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reg.DeleteVersion("m", 2).status().code(), StatusCode::kNotFound);
  auto d1 = reg.DeleteVersion("m", 1);
  ASSERT_TRUE(d1.ok()) << d1.status().ToString();
  EXPECT_EQ(d1->blobs_removed, 2u);
  EXPECT_EQ(d1->manifests_removed, 1u);
  EXPECT_TRUE(d1->gc_errors.empty());
  EXPECT_EQ(art.Stat(weights_key).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(art.Stat(ManifestKey(v1->manifest_sha256)).status().code(), StatusCode::kNotFound);
  auto v3 = reg.Register(req);
  ASSERT_TRUE(v3.ok()) << v3.status().ToString();
  EXPECT_EQ(v3->version, 3);
  EXPECT_TRUE(reg.Verify("m/3").ok());  // blobs uploaded again
  auto dm = reg.DeleteModel("m");
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  EXPECT_EQ(dm->versions, std::vector<int64_t>{3});
  EXPECT_EQ(dm->blobs_removed, 2u);
  EXPECT_EQ(reg.Register(req)->version, 4);
}

}  // namespace gantry::registry::testing
