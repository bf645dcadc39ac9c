// Store-independent behaviour tests of gantry backup, instantiated for the
// local file:// store (backup_test.cc) and for Azure Blob on Azurite
// (azurite_integration_test.cc). A Backend type provides
//   static std::unique_ptr<storage::ObjectStore> Open(const testing::TempDir& tmp,
//                                                     const std::string& name);
// returning a fresh, empty store for each `name`.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "backup_test_util.h"
#include "gantry/backup/backup.h"

namespace gantry::backup::testing {

template <typename Backend>
class BackupSuite : public ::testing::Test {
 protected:
  std::unique_ptr<storage::ObjectStore> NewStore(const std::string& name) {
    return Backend::Open(tmp_, name);
  }
  static std::unique_ptr<Repository> MustOpen(storage::ObjectStore& store,
                                              std::optional<std::string> key = std::nullopt) {
    auto r = Repository::OpenOrInit(store, std::move(key), "test key");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(*r) : nullptr;
  }
  static Manifest MustCreate(Repository& repo, const std::vector<fs::path>& sources,
                             const Clock* clock = nullptr, std::string name = {}) {
    CreateOptions o;
    for (const auto& s : sources) o.sources.push_back(s.string());
    o.clock = clock;
    o.name = std::move(name);
    auto m = CreateBackup(repo, o);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : Manifest{};
  }
  TempDir tmp_;
};

TYPED_TEST_SUITE_P(BackupSuite);

TYPED_TEST_P(BackupSuite, RoundTripTree) {
  fs::path src = this->tmp_ / "src";
  MakeTree(src, 12u << 20);
  auto store = this->NewStore("roundtrip");
  auto repo = this->MustOpen(*store);
  ASSERT_TRUE(repo);
  Manifest m = this->MustCreate(*repo, {src});
  EXPECT_EQ(m.name, "src");
  EXPECT_EQ(m.stats.files, 7u);
  EXPECT_EQ(m.stats.symlinks, 2u);
  EXPECT_GT(m.stats.new_chunks, 10u);

  auto list = ListBackups(*repo);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].manifest.id, m.id);
  EXPECT_TRUE((*list)[0].error.empty()) << (*list)[0].error;

  auto found = FindBackup(*repo, "latest");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->id, m.id);
  auto by_prefix = FindBackup(*repo, m.id.substr(0, 6));
  ASSERT_TRUE(by_prefix.ok()) << by_prefix.status().ToString();
  EXPECT_EQ(FindBackup(*repo, "ffffffffff").status().code(), StatusCode::kNotFound);

  RestoreOptions ro;
  ro.target = (this->tmp_ / "out").string();
  auto r = Restore(*repo, *found, ro);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 7u);
  EXPECT_EQ(DescribeTree(src), DescribeTree(this->tmp_ / "out/src"));

  VerifyOptions vo;
  vo.read_data = true;
  auto v = Verify(*repo, {}, vo);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 1u);
  EXPECT_TRUE((*v)[0].ok()) << (*v)[0].problems[0];
  EXPECT_EQ((*v)[0].chunks_read, (*v)[0].chunks);

  // Restoring again over the first restore replaces files in place.
  auto again = Restore(*repo, *found, ro);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(DescribeTree(src), DescribeTree(this->tmp_ / "out/src"));
}

TYPED_TEST_P(BackupSuite, DedupAndSmallEdits) {
  fs::path src = this->tmp_ / "data";
  std::string big = RandomBytes(20u << 20, 11);
  WriteFile(src / "big.bin", big);
  WriteFile(src / "small.txt", "small");
  auto store = this->NewStore("dedup");
  auto repo = this->MustOpen(*store);
  ASSERT_TRUE(repo);
  Manifest first = this->MustCreate(*repo, {src});
  EXPECT_GE(first.stats.new_chunks, 10u);

  Manifest second = this->MustCreate(*repo, {src});
  EXPECT_EQ(second.stats.new_chunks, 0u) << "unchanged data must not be uploaded again";
  EXPECT_EQ(second.stats.uploaded_bytes, 0u);

  // Edit 100 bytes in the middle of the 20 MiB file.
  for (size_t i = 0; i < 100; ++i) big[(10u << 20) + i] ^= 0x33;
  WriteFile(src / "big.bin", big);
  Manifest third = this->MustCreate(*repo, {src});
  EXPECT_GE(third.stats.new_chunks, 1u);
  EXPECT_LE(third.stats.new_chunks, 3u) << "an edit in the middle re-uploaded too much";
  EXPECT_LT(third.stats.uploaded_bytes, 9u << 20);

  RestoreOptions ro;
  ro.target = (this->tmp_ / "out").string();
  ASSERT_TRUE(Restore(*repo, third, ro).ok());
  EXPECT_EQ(ReadAll(this->tmp_ / "out/data/big.bin"), big);
}

TYPED_TEST_P(BackupSuite, EncryptionKeysCiphertextAndTampering) {
  fs::path src = this->tmp_ / "enc";
  const std::string secret = "top secret model weights " + std::string(4000, 'x');
  WriteFile(src / "weights.txt", secret);
  WriteFile(src / "rand.bin", RandomBytes(2u << 20, 5));
  auto store = this->NewStore("encrypted");
  auto repo = this->MustOpen(*store, std::string("correct horse battery staple"));
  ASSERT_TRUE(repo);
  ASSERT_TRUE(repo->encrypted());
  Manifest m = this->MustCreate(*repo, {src});

  // The config records encryption and a key check value, never the key.
  auto cfg = store->Get("config.json");
  ASSERT_TRUE(cfg.ok());
  EXPECT_NE(cfg->find("aes-256-gcm"), std::string::npos);
  EXPECT_EQ(cfg->find("correct horse"), std::string::npos);

  // Wrong key, missing key: clear errors before any data is read.
  auto wrong = Repository::Open(*store, std::string("wrong key"), "key file /k");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(wrong.status().message().find("wrong encryption key"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("key file /k"), std::string::npos);
  auto none = Repository::Open(*store, std::nullopt);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("--encrypt-key-file"), std::string::npos);

  // Neither chunks nor the manifest contain the plaintext; chunk names are
  // keyed (not the plain SHA-256 anybody could compute).
  auto chunks = ListPrefix(*store, kChunkPrefix);
  ASSERT_TRUE(chunks.ok());
  ASSERT_FALSE(chunks->empty());
  for (const auto& o : *chunks) {
    auto data = store->Get(o.key);
    ASSERT_TRUE(data.ok());
    EXPECT_EQ(data->find("top secret"), std::string::npos) << o.key;
  }
  auto manifest_obj = store->Get(m.key);
  ASSERT_TRUE(manifest_obj.ok());
  EXPECT_EQ(manifest_obj->find("weights.txt"), std::string::npos);
  std::string weights_id;
  for (const Entry& e : m.entries) {
    if (e.path == "enc/weights.txt") weights_id = e.chunks.at(0).id;
  }
  ASSERT_FALSE(weights_id.empty());
  auto plain_repo_store = this->NewStore("plain-for-ids");
  auto plain_repo = this->MustOpen(*plain_repo_store);
  EXPECT_NE(plain_repo->IdOf(secret), weights_id);

  // A restore with the right key round-trips.
  RestoreOptions ro;
  ro.target = (this->tmp_ / "out").string();
  ASSERT_TRUE(Restore(*repo, m, ro).ok());
  EXPECT_EQ(ReadAll(this->tmp_ / "out/enc/weights.txt"), secret);

  // Flip one ciphertext byte: the GCM tag catches it in verify and restore.
  std::string key = Repository::ChunkKey(weights_id);
  std::string obj = *store->Get(key);
  obj[obj.size() / 2] ^= 1;
  ASSERT_TRUE(store->Delete(key).ok());
  ASSERT_TRUE(store->Put(key, std::as_bytes(std::span(obj.data(), obj.size()))).ok());
  VerifyOptions vo;
  vo.read_data = true;
  auto v = Verify(*repo, {}, vo);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  ASSERT_FALSE((*v)[0].ok());
  EXPECT_NE((*v)[0].problems[0].find("AES-GCM tag mismatch"), std::string::npos)
      << (*v)[0].problems[0];
  EXPECT_NE((*v)[0].problems[0].find("enc/weights.txt"), std::string::npos);
  ro.target = (this->tmp_ / "out2").string();
  auto r = Restore(*repo, m, ro);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(weights_id), std::string::npos) << r.status().message();
  EXPECT_FALSE(fs::exists(this->tmp_ / "out2/enc/weights.txt"));
}

TYPED_TEST_P(BackupSuite, InterruptedBackupLeavesNothingAndResumes) {
  fs::path src = this->tmp_ / "int";
  WriteFile(src / "big.bin", RandomBytes(10u << 20, 21));
  WriteFile(src / "f.txt", "f");
  auto base = this->NewStore("interrupted");
  auto repo0 = this->MustOpen(*base);  // creates config.json
  ASSERT_TRUE(repo0);
  FlakyStore flaky(*base);
  auto repo = this->MustOpen(flaky);
  flaky.fail_after_puts = 5;  // the create's lock, then four chunks
  CreateOptions o;
  o.sources = {src.string()};
  o.parallelism = 1;
  auto failed = CreateBackup(*repo, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("injected failure"), std::string::npos);
  EXPECT_NE(failed.status().message().find("re-run to resume"), std::string::npos);
  auto list = ListBackups(*repo);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty()) << "an interrupted backup must not be visible";
  const int64_t uploaded_before = flaky.chunk_puts.load();
  EXPECT_EQ(uploaded_before, 4);

  flaky.fail_after_puts = -1;
  flaky.chunk_puts = 0;
  auto resumed = CreateBackup(*repo, o);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->stats.new_chunks, resumed->stats.chunks - uploaded_before);
  EXPECT_EQ(flaky.chunk_puts.load(), static_cast<int64_t>(resumed->stats.new_chunks));
  RestoreOptions ro;
  ro.target = (this->tmp_ / "out").string();
  ASSERT_TRUE(Restore(*repo, *resumed, ro).ok());
  EXPECT_EQ(ReadAll(this->tmp_ / "out/int/big.bin"), ReadAll(src / "big.bin"));
}

TYPED_TEST_P(BackupSuite, PruneRetentionAndGarbageCollection) {
  auto store = this->NewStore("prune");
  auto repo = this->MustOpen(*store);
  ASSERT_TRUE(repo);
  fs::path src = this->tmp_ / "ds";
  WriteFile(src / "shared.bin", RandomBytes(300000, 100));
  FakeClock clock;  // 2027-01-15T08:00:00Z
  std::vector<Manifest> made;
  // Day 0, day 1 morning, day 1 evening, day 2: each with one unique file.
  const int hours[] = {0, 24, 34, 48};
  int64_t prev = 0;
  for (int i = 0; i < 4; ++i) {
    clock.Advance(std::chrono::hours(hours[i] - prev));
    prev = hours[i];
    WriteFile(src / "unique.bin", RandomBytes(200000, 200 + i));
    made.push_back(this->MustCreate(*repo, {src}, &clock));
  }
  auto unique_id = [](const Manifest& m) {
    for (const Entry& e : m.entries) {
      if (e.path == "ds/unique.bin") return e.chunks.at(0).id;
    }
    return std::string();
  };

  FakeClock later(std::chrono::seconds(1000),
                  std::chrono::system_clock::time_point(std::chrono::seconds(1'900'000'000)));
  PruneOptions po;
  po.policy.keep_daily = 2;
  po.clock = &later;
  po.dry_run = true;
  auto dry = Prune(*repo, po);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  EXPECT_EQ(dry->chunks_deleted, 2u);
  EXPECT_EQ(ListBackups(*repo)->size(), 4u) << "dry run deleted something";

  po.dry_run = false;
  auto pr = Prune(*repo, po);
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  ASSERT_EQ(pr->decisions.size(), 4u);
  // Kept: the newest of day 2 and of day 1 (the evening one).
  EXPECT_FALSE(pr->decisions[0].keep);
  EXPECT_FALSE(pr->decisions[1].keep);
  EXPECT_TRUE(pr->decisions[2].keep);
  EXPECT_TRUE(pr->decisions[3].keep);
  EXPECT_EQ(pr->chunks_deleted, 2u);
  auto left = ListBackups(*repo);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[0].manifest.id, made[2].id);
  EXPECT_EQ((*left)[1].manifest.id, made[3].id);
  // Unreferenced chunks are gone, referenced ones stay.
  EXPECT_EQ(store->Stat(Repository::ChunkKey(unique_id(made[0]))).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store->Stat(Repository::ChunkKey(unique_id(made[1]))).status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(store->Stat(Repository::ChunkKey(unique_id(made[2]))).ok());
  VerifyOptions vo;
  vo.read_data = true;
  auto v = Verify(*repo, {}, vo);
  ASSERT_TRUE(v.ok());
  for (const auto& r : *v) EXPECT_TRUE(r.ok()) << r.problems.at(0);

  // Chunks within the grace period survive even when unreferenced.
  PruneOptions recent;
  recent.policy.keep_last = 1;              // forgets made[2]
  recent.gc_grace = std::chrono::hours(1);  // system clock: every chunk is recent
  auto pr2 = Prune(*repo, recent);
  ASSERT_TRUE(pr2.ok()) << pr2.status().ToString();
  EXPECT_EQ(pr2->chunks_deleted, 0u);
  EXPECT_EQ(pr2->chunks_kept_recent, 1u);
  EXPECT_TRUE(store->Stat(Repository::ChunkKey(unique_id(made[2]))).ok());

  PruneOptions nothing;
  EXPECT_EQ(Prune(*repo, nothing).status().code(), StatusCode::kInvalidArgument);
}

TYPED_TEST_P(BackupSuite, CorruptManifestAndMissingChunk) {
  auto store = this->NewStore("corrupt");
  auto repo = this->MustOpen(*store);
  ASSERT_TRUE(repo);
  fs::path src = this->tmp_ / "c";
  WriteFile(src / "x.bin", RandomBytes(100000, 9));
  Manifest m = this->MustCreate(*repo, {src});
  // A missing chunk: verify names it and the file; restore fails with DataLoss.
  std::string chunk = Repository::ChunkKey(m.entries.back().chunks.at(0).id);
  ASSERT_TRUE(store->Delete(chunk).ok());
  auto v = Verify(*repo, {}, {});
  ASSERT_TRUE(v.ok());
  ASSERT_FALSE((*v)[0].ok());
  EXPECT_NE((*v)[0].problems[0].find(chunk), std::string::npos) << (*v)[0].problems[0];
  EXPECT_NE((*v)[0].problems[0].find("c/x.bin"), std::string::npos);
  RestoreOptions ro;
  ro.target = (this->tmp_ / "out").string();
  auto r = Restore(*repo, m, ro);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);

  // A corrupt manifest: listed with its error, verify reports it, prune refuses.
  std::string junk = "{\"format\": \"gantry-backup-manifest\", \"version\": 1, \"id\": 5}";
  std::string key = "backups/20300101T000000Z-0123456789abcdef.json";
  ASSERT_TRUE(store->Put(key, std::as_bytes(std::span(junk.data(), junk.size()))).ok());
  auto list = ListBackups(*repo);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_NE((*list)[1].error.find(key), std::string::npos) << (*list)[1].error;
  EXPECT_NE((*list)[1].error.find("corrupt"), std::string::npos);
  auto found = FindBackup(*repo, "latest");
  EXPECT_EQ(found.status().code(), StatusCode::kDataLoss);
  PruneOptions po;
  po.policy.keep_last = 5;
  auto pr = Prune(*repo, po);
  EXPECT_EQ(pr.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pr.status().message().find(key), std::string::npos);

  std::string not_json = "this is not json";
  std::string key2 = "backups/20300102T000000Z-1123456789abcdef.json";
  ASSERT_TRUE(store->Put(key2, std::as_bytes(std::span(not_json.data(), not_json.size()))).ok());
  auto bad = LoadManifest(*repo, key2);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(key2), std::string::npos);
}

REGISTER_TYPED_TEST_SUITE_P(BackupSuite, RoundTripTree, DedupAndSmallEdits,
                            EncryptionKeysCiphertextAndTampering,
                            InterruptedBackupLeavesNothingAndResumes,
                            PruneRetentionAndGarbageCollection, CorruptManifestAndMissingChunk);

}  // namespace gantry::backup::testing
