// Checkpoint tiering (Options::persist) and direct-to-store mode
// (Options::root_store) against the local file:// object store, plus a
// recording/faulting wrapper around it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "ckpt_test_util.h"
#include "format.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/clock.h"
#include "gantry/storage/object_store.h"

namespace gantry::ckpt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::State;
using testing::TempDir;

// Forwards to a real store; records the order of writes, can fail PutFile
// and Put, and can hold uploads until released.
class RecordingStore : public storage::ObjectStore {
 public:
  explicit RecordingStore(std::unique_ptr<storage::ObjectStore> inner) : inner_(std::move(inner)) {}

  std::string url() const override { return inner_->url(); }
  Status Put(std::string_view key, std::span<const std::byte> data,
             const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Before("put " + std::string(key) + (o.if_none_match ? " if-none-match" : "")));
    return inner_->Put(key, data, o);
  }
  Status PutFile(std::string_view key, const std::string& path,
                 const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Before("putfile " + std::string(key)));
    return inner_->PutFile(key, path, o);
  }
  Status PutStream(std::string_view key, const storage::ReadFn& read,
                   const storage::PutOptions& o) override {
    RETURN_IF_ERROR(Before("putstream " + std::string(key)));
    return inner_->PutStream(key, read, o);
  }
  Result<std::string> Get(std::string_view key) override { return inner_->Get(key); }
  Status GetRange(std::string_view key, uint64_t offset, std::span<std::byte> out) override {
    ranged_reads_++;
    return inner_->GetRange(key, offset, out);
  }
  Status GetFile(std::string_view key, const std::string& path) override {
    Log("getfile " + std::string(key));
    return inner_->GetFile(key, path);
  }
  Result<storage::ObjectInfo> Stat(std::string_view key) override { return inner_->Stat(key); }
  Result<storage::ListPage> List(std::string_view prefix, std::string_view next,
                                 int max_results) override {
    // Small pages, so that paging is exercised.
    return inner_->List(prefix, next, max_results == 0 ? 2 : max_results);
  }
  Status Delete(std::string_view key) override {
    Log("delete " + std::string(key));
    return inner_->Delete(key);
  }

  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void FailWrites(bool fail) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_ = fail;
  }
  void Hold(bool hold) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      hold_ = hold;
    }
    cv_.notify_all();
  }
  int ranged_reads() const { return ranged_reads_.load(); }

 private:
  void Log(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(what));
  }
  Status Before(std::string what) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !hold_; });
    log_.push_back(what);
    if (fail_) return Unavailable("injected: " + what + " failed after 6 attempts");
    return Status::Ok();
  }

  std::unique_ptr<storage::ObjectStore> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> log_;
  bool fail_ = false;
  bool hold_ = false;
  std::atomic<int> ranged_reads_{0};
};

class TierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto inner = storage::OpenObjectStore("file://" + store_dir_.path() + "/bucket");
    ASSERT_TRUE(inner.ok()) << inner.status().ToString();
    store_ = std::make_unique<RecordingStore>(std::move(*inner));
  }
  Options Opts() {
    Options o;
    o.root = "file://" + dir_.path();
    o.run = "run";
    o.clock = &clock_;
    o.chunk_bytes = 256;
    o.persist_store = store_.get();
    return o;
  }
  std::unique_ptr<CheckpointManager> OpenOrDie(Options o) {
    auto m = CheckpointManager::Open(std::move(o));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }
  std::vector<int64_t> LocalSteps(CheckpointManager& m) {
    std::vector<int64_t> out;
    auto list = m.List();
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok()) {
      for (const auto& i : *list) out.push_back(i.step);
    }
    return out;
  }
  std::vector<int64_t> StoreSteps(CheckpointManager& m) {
    auto s = m.PersistedSteps();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::vector<int64_t>{};
  }
  static void FlipByte(const std::string& file, off_t offset) {
    int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << file;
    unsigned char c;
    ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
    c ^= 0x41;
    ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
    ::close(fd);
  }

  TempDir dir_;
  TempDir store_dir_;
  FakeClock clock_;
  std::unique_ptr<RecordingStore> store_;
};

TEST_F(TierTest, UploadsEveryFileAndTheMarkerLast) {
  auto m = OpenOrDie(Opts());
  State s1(1), s2(2);
  ASSERT_TRUE(m->Save(1, s1.Views()).ok());
  ASSERT_TRUE(m->SaveAsync(2, s2.Views()).ok());
  ASSERT_TRUE(m->Wait().ok());
  ASSERT_TRUE(m->WaitForUploads().ok());
  EXPECT_THAT(StoreSteps(*m), ElementsAre(1, 2));
  UploadStatus st = m->Uploads();
  EXPECT_TRUE(st.enabled);
  EXPECT_EQ(st.store, store_->url());
  EXPECT_TRUE(st.pending.empty());
  EXPECT_EQ(st.last_uploaded, 2);
  EXPECT_GT(st.bytes_uploaded, 2 * 4096u);
  EXPECT_EQ(st.last_error, "");
  // Per step: the shard, the manifest, then the conditional marker.
  std::vector<std::string> writes;
  for (const auto& w : store_->log()) {
    if (w.starts_with("put")) writes.push_back(w);
  }
  EXPECT_THAT(writes, ElementsAre("putfile run/step-0000000001/shard-00000-of-00001.safetensors",
                                  "put run/step-0000000001/manifest.json",
                                  "put run/step-0000000001/COMMITTED if-none-match",
                                  "putfile run/step-0000000002/shard-00000-of-00001.safetensors",
                                  "put run/step-0000000002/manifest.json",
                                  "put run/step-0000000002/COMMITTED if-none-match"));
  // The store holds byte-identical copies.
  auto local = storage::ReadSmallFile(storage::LocalFileSystem(),
                                      m->StepDir(2) + "/shard-00000-of-00001.safetensors");
  auto remote = store_->Get("run/step-0000000002/shard-00000-of-00001.safetensors");
  ASSERT_TRUE(local.ok() && remote.ok());
  EXPECT_EQ(*local, *remote);
}

TEST_F(TierTest, RetentionPerTier) {
  Options o = Opts();
  o.retention.keep_last = 1;
  o.persist_retention.keep_last = 3;
  auto m = OpenOrDie(o);
  for (int64_t step = 1; step <= 5; ++step) {
    State s(step);
    ASSERT_TRUE(m->Save(step, s.Views()).ok());
    ASSERT_TRUE(m->WaitForUploads().ok());
  }
  EXPECT_THAT(LocalSteps(*m), ElementsAre(5));
  EXPECT_THAT(StoreSteps(*m), ElementsAre(3, 4, 5));
  // A deleted step loses its marker first.
  auto log = store_->log();
  auto marker = std::find(log.begin(), log.end(), "delete run/step-0000000001/COMMITTED");
  auto shard = std::find(log.begin(), log.end(),
                         "delete run/step-0000000001/shard-00000-of-00001.safetensors");
  ASSERT_NE(marker, log.end());
  ASSERT_NE(shard, log.end());
  EXPECT_LT(marker - log.begin(), shard - log.begin());
  EXPECT_FALSE(store_->Stat("run/step-0000000001/manifest.json").ok());
}

TEST_F(TierTest, LocalRetentionKeepsStepsWaitingForUpload) {
  Options o = Opts();
  o.retention.keep_last = 1;
  auto m = OpenOrDie(o);
  store_->Hold(true);
  State s1(1), s2(2), s3(3);
  ASSERT_TRUE(m->Save(1, s1.Views()).ok());
  ASSERT_TRUE(m->Save(2, s2.Views()).ok());
  ASSERT_TRUE(m->Save(3, s3.Views()).ok());
  EXPECT_THAT(m->Uploads().pending, ElementsAre(1, 2, 3));
  EXPECT_THAT(LocalSteps(*m), ElementsAre(1, 2, 3));  // none uploaded yet: none pruned
  store_->Hold(false);
  ASSERT_TRUE(m->WaitForUploads().ok());
  EXPECT_THAT(StoreSteps(*m), ElementsAre(1, 2, 3));
  State s4(4);
  ASSERT_TRUE(m->Save(4, s4.Views()).ok());
  EXPECT_THAT(LocalSteps(*m), ElementsAre(4));
  ASSERT_TRUE(m->WaitForUploads().ok());
}

// The uploader's catch-up retention takes the run lock; a save running at
// the same time must never see it as a second writer.
TEST_F(TierTest, SavesNeverCollideWithTheUploader) {
  Options o = Opts();
  o.retention.keep_last = 1;
  o.persist_retention.keep_last = 2;
  auto m = OpenOrDie(o);
  for (int64_t step = 1; step <= 40; ++step) {
    State s(step);
    Status st = step % 2 ? m->Save(step, s.Views()) : m->SaveAsync(step, s.Views());
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
  }
  ASSERT_TRUE(m->Wait().ok());
  ASSERT_TRUE(m->WaitForUploads().ok());
  EXPECT_THAT(StoreSteps(*m), ElementsAre(39, 40));
  EXPECT_THAT(LocalSteps(*m), ElementsAre(40));
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok());
  State(40).ExpectEquals(*loaded);
}

TEST_F(TierTest, UploadErrorsSurfaceOnceAndInStatus) {
  auto m = OpenOrDie(Opts());
  store_->FailWrites(true);
  State s1(1), s2(2);
  ASSERT_TRUE(m->Save(1, s1.Views()).ok());  // the local commit succeeds
  Status st = m->WaitForUploads();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("uploading step 1"));
  EXPECT_THAT(m->Uploads().last_error, HasSubstr("injected"));
  EXPECT_EQ(m->Uploads().failed, 1);
  EXPECT_TRUE(m->WaitForUploads().ok());  // reported once
  EXPECT_THAT(LocalSteps(*m), ElementsAre(1));
  EXPECT_TRUE(StoreSteps(*m).empty());  // nothing half-committed on the store

  // Saves go on (an emergency checkpoint must not be refused for an older
  // upload); the error comes back from the next Wait.
  ASSERT_TRUE(m->Save(2, s2.Views()).ok());
  while (!m->Uploads().pending.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  store_->FailWrites(false);
  ASSERT_TRUE(m->Save(3, s2.Views()).ok());
  Status late = m->Wait();
  EXPECT_EQ(late.code(), StatusCode::kUnavailable);
  EXPECT_THAT(late.message(), HasSubstr("uploading step 2"));
  EXPECT_EQ(m->Uploads().failed, 2);
  ASSERT_TRUE(m->WaitForUploads().ok());
  EXPECT_EQ(m->Uploads().last_error, "");
  EXPECT_THAT(StoreSteps(*m), ElementsAre(3));
}

TEST_F(TierTest, ResumeFromTheStoreAfterTheLocalTierIsWiped) {
  State s7(7, 5000), s9(9, 5000);
  {
    auto m = OpenOrDie(Opts());
    ASSERT_TRUE(m->Save(7, s7.Views(), Json{{"lr", 0.1}}).ok());
    ASSERT_TRUE(m->Save(9, s9.Views(), Json{{"lr", 0.2}}).ok());
    // The destructor finishes the uploads.
  }
  ASSERT_TRUE(storage::LocalFileSystem().RemoveAll(dir_.path()).ok());  // a new VM
  auto m = OpenOrDie(Opts());
  EXPECT_TRUE(LocalSteps(*m).empty());
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->step, 9);
  EXPECT_THAT(LocalSteps(*m), ElementsAre(9));  // downloaded and committed locally
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 9);
  EXPECT_EQ(loaded->metadata["lr"], 0.2);
  s9.ExpectEquals(*loaded);
  auto older = m->Load(7);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  s7.ExpectEquals(*older);
  EXPECT_TRUE(m->Verify(7, VerifyMode::kFull).ok());
  auto entries = storage::LocalFileSystem().ListDir(dir_.path() + "/run");
  for (const auto& e : *entries) EXPECT_FALSE(e.name.starts_with(".tmp-")) << e.name;
  // Downloaded steps are not uploaded again.
  ASSERT_TRUE(m->WaitForUploads().ok());
  int shard_uploads = 0;
  for (const auto& w : store_->log()) shard_uploads += w.starts_with("putfile");
  EXPECT_EQ(shard_uploads, 2);
  EXPECT_EQ(m->Load(8).status().code(), StatusCode::kNotFound);
}

TEST_F(TierTest, DamagedLocalCopyIsReplacedFromTheStore) {
  auto m = OpenOrDie(Opts());
  State s(3, 3000);
  ASSERT_TRUE(m->Save(3, s.Views()).ok());
  ASSERT_TRUE(m->WaitForUploads().ok());
  FlipByte(m->StepDir(3) + "/shard-00000-of-00001.safetensors", 4096 + 100);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  s.ExpectEquals(*loaded);
  EXPECT_TRUE(m->Verify(3, VerifyMode::kFull).ok());  // the local copy is good again
}

TEST_F(TierTest, NewerStepOnTheStoreWins) {
  State s1(1), s2(2);
  TempDir other;
  {
    auto m = OpenOrDie(Opts());
    ASSERT_TRUE(m->Save(1, s1.Views()).ok());
  }
  {
    Options o = Opts();
    o.root = other.path();  // another VM continued the run
    auto m = OpenOrDie(o);
    ASSERT_TRUE(m->Save(2, s2.Views()).ok());
  }
  auto m = OpenOrDie(Opts());
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 2);
  s2.ExpectEquals(*loaded);
}

TEST_F(TierTest, DamagedStoreCopyFallsBackAndLeavesNoLocalStep) {
  {
    auto m = OpenOrDie(Opts());
    State s1(1), s2(2);
    ASSERT_TRUE(m->Save(1, s1.Views()).ok());
    ASSERT_TRUE(m->Save(2, s2.Views()).ok());
  }
  ASSERT_TRUE(storage::LocalFileSystem().RemoveAll(dir_.path()).ok());
  // Damage step 2's shard on the store (same size, other bytes).
  FlipByte(store_dir_.path() + "/bucket/run/step-0000000002/shard-00000-of-00001.safetensors",
           4096 + 8);
  auto m = OpenOrDie(Opts());
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->step, 1);
  ASSERT_EQ(latest->skipped.size(), 1u);
  EXPECT_THAT(latest->skipped[0], HasSubstr("checksum mismatch"));
  State s1(1);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  s1.ExpectEquals(*loaded);
}

TEST_F(TierTest, UnreachableStoreStillLoadsLocally) {
  auto m = OpenOrDie(Opts());
  State s(1);
  ASSERT_TRUE(m->Save(1, s.Views()).ok());
  ASSERT_TRUE(m->WaitForUploads().ok());
  m.reset();
  Options o = Opts();
  o.persist_store = nullptr;
  o.persist = "az://acct/ckpts";  // no credentials in the test environment
  // Without a key or SAS the store would use Entra ID (the VM's identity); keys only here.
  o.store.auth = storage::BlobAuth::kKeyOrSas;
  ::unsetenv("AZURE_STORAGE_CONNECTION_STRING");
  ::unsetenv("AZURE_STORAGE_KEY");
  ::unsetenv("AZURE_STORAGE_SAS_TOKEN");
  auto bad = CheckpointManager::Open(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("AZURE_STORAGE"));
}

TEST_F(TierTest, PersistAndDirectModeOptionsAreChecked) {
  Options o = Opts();
  o.root_store = store_.get();
  EXPECT_EQ(CheckpointManager::Open(o).status().code(), StatusCode::kInvalidArgument);
  Options plain;
  plain.root = dir_.path();
  auto m = OpenOrDie(plain);
  EXPECT_FALSE(m->Uploads().enabled);
  EXPECT_TRUE(m->WaitForUploads().ok());
  EXPECT_EQ(m->PersistedSteps().status().code(), StatusCode::kFailedPrecondition);
}

// ---------------------------------------------------------------- direct mode

class DirectTest : public TierTest {
 protected:
  Options Direct() {
    Options o;
    o.root = "unused";
    o.root_store = store_.get();
    o.run = "run";
    o.clock = &clock_;
    o.chunk_bytes = 4096;
    return o;
  }
};

TEST_F(DirectTest, SaveListLoadVerifyWithoutLocalDisk) {
  auto m = OpenOrDie(Direct());
  State s1(1, 200000), s2(2, 200000);
  ASSERT_TRUE(m->Save(1, s1.Views(), Json{{"epoch", 1}}).ok());
  ASSERT_TRUE(m->SaveAsync(2, s2.Views()).ok());
  ASSERT_TRUE(m->Wait().ok());
  EXPECT_THAT(LocalSteps(*m), ElementsAre(1, 2));
  EXPECT_THAT(StoreSteps(*m), ElementsAre(1, 2));
  EXPECT_EQ(m->StepDir(2), store_->url() + "/run/step-0000000002");
  auto writes = store_->log();
  EXPECT_EQ(writes.back(), "put run/step-0000000002/COMMITTED if-none-match");
  auto latest = m->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->step, 2);
  const int reads_before = store_->ranged_reads();
  auto loaded = m->Load(1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  s1.ExpectEquals(*loaded);
  EXPECT_EQ(loaded->metadata["epoch"], 1);
  EXPECT_GT(store_->ranged_reads(), reads_before);  // ranged reads into the buffers
  std::vector<std::string> names = {"model.b"};
  auto one = m->Load(2, names);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->tensors.size(), 1u);
  EXPECT_EQ(one->tensors[0].name, "model.b");
  auto v = m->Verify(2, VerifyMode::kFull);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_GT(v->chunks_checked, 10u);
  EXPECT_EQ(m->Save(2, s2.Views()).code(), StatusCode::kAlreadyExists);
  // Nothing was written to the local disk.
  EXPECT_FALSE(storage::LocalFileSystem().Stat("unused").ok());
}

TEST_F(DirectTest, CorruptionOnTheStoreIsNamedAndFallsBack) {
  auto m = OpenOrDie(Direct());
  State s1(1, 20000), s2(2, 20000);
  ASSERT_TRUE(m->Save(1, s1.Views()).ok());
  ASSERT_TRUE(m->Save(2, s2.Views()).ok());
  FlipByte(store_dir_.path() + "/bucket/run/step-0000000002/shard-00000-of-00001.safetensors",
           4096 + 5000);
  auto bad = m->Load(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("run/step-0000000002/shard-00000-of-00001"));
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 1);
  s1.ExpectEquals(*loaded);
}

TEST_F(DirectTest, RetentionAndPrune) {
  Options o = Direct();
  o.retention.keep_last = 2;
  auto m = OpenOrDie(o);
  for (int64_t step = 1; step <= 4; ++step) {
    State s(step);
    ASSERT_TRUE(m->Save(step, s.Views()).ok());
  }
  EXPECT_THAT(StoreSteps(*m), ElementsAre(3, 4));
  auto leftovers = store_->List("run/step-0000000001/", "", 0);
  ASSERT_TRUE(leftovers.ok());
  EXPECT_TRUE(leftovers->objects.empty());
}

TEST_F(DirectTest, ReadOnlyNeedsAnExistingRun) {
  Options o = Direct();
  o.read_only = true;
  EXPECT_EQ(CheckpointManager::Open(o).status().code(), StatusCode::kNotFound);
  o.world_size = 2;
  o.read_only = false;
  EXPECT_EQ(CheckpointManager::Open(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::ckpt
