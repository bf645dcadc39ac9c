// Checkpoint tiering end to end, against a local file:// store and against
// Azurite (started here on a free loopback port):
// - spot eviction: a mock IMDS announces a Preempt (NotBefore = now + 10 min,
//   so that a loaded machine does not fail it);
//   the OnEviction callback saves an emergency checkpoint of a state of
//   GANTRY_EVICTION_TEST_MIB MiB (default 64) with persist, and the step must
//   be committed on the store before NotBefore. The measured bandwidth and how
//   much state fits in 30 s at that bandwidth are printed ("eviction: ...")
//   and recorded as test properties;
// - resume: save with persist, wipe the local tier (a new VM), a new manager
//   loads byte-identical tensors from the store;
// - direct mode: no local root, the store is the root.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <random>
#include <thread>

#include "ckpt_test_util.h"
#include "gantry/ckpt/manager.h"
#include "gantry/core/scheduled_events.h"
#include "gantry/storage/object_store.h"
#include "testing/azurite_fixture.h"

namespace gantry::ckpt {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing::TempDir;

// A mock IMDS that serves the current scheduledevents document to any
// number of requests (one per connection) on 127.0.0.1.
class MockImds {
 public:
  MockImds() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("mock IMDS setup failed");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~MockImds() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void SetDocument(std::string doc) {
    std::lock_guard<std::mutex> lock(mu_);
    doc_ = std::move(doc);
  }
  int posts() const { return posts_.load(); }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) <= 0) break;
        ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::string body;
      int status = 200;
      if (req.rfind("POST ", 0) == 0) {
        ++posts_;
      } else if (req.find("\r\nMetadata: true") == std::string::npos) {
        status = 400;
      } else {
        std::lock_guard<std::mutex> lock(mu_);
        body = doc_;
      }
      std::string resp =
          "HTTP/1.1 " + std::to_string(status) +
          " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
          "\r\nConnection: close\r\n\r\n" + body;
      (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> posts_{0};
  std::thread thread_;
  std::mutex mu_;
  std::string doc_ = R"({"DocumentIncarnation":0,"Events":[]})";
};

std::string Rfc1123(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

// A training state of about `mib` MiB in 8 tensors of pseudo-random bytes.
class BigState {
 public:
  BigState(size_t mib, uint32_t seed) {
    const size_t per = (mib << 20) / 8 / 4;
    std::mt19937 rng(seed);
    for (int i = 0; i < 8; ++i) {
      auto& v = tensors_.emplace_back(per);
      for (float& f : v) f = static_cast<float>(rng()) / 1e6f;
    }
  }
  std::vector<TensorView> Views() const {
    std::vector<TensorView> out;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.push_back({"layer" + std::to_string(i) + ".weight",
                     DType::kF32,
                     {static_cast<int64_t>(tensors_[i].size())},
                     tensors_[i].data(),
                     tensors_[i].size() * 4});
    }
    return out;
  }
  uint64_t bytes() const { return tensors_.size() * tensors_[0].size() * 4; }
  // Byte comparison of every tensor.
  void ExpectIdentical(const LoadedCheckpoint& loaded) const {
    auto views = Views();
    ASSERT_EQ(loaded.tensors.size(), views.size());
    for (size_t i = 0; i < views.size(); ++i) {
      EXPECT_EQ(loaded.tensors[i].name, views[i].name);
      ASSERT_EQ(loaded.tensors[i].data.size(), views[i].bytes);
      EXPECT_EQ(std::memcmp(loaded.tensors[i].data.data(), views[i].data, views[i].bytes), 0)
          << views[i].name;
    }
  }

 private:
  std::vector<std::vector<float>> tensors_;
};

size_t EvictionStateMiB() {
  const char* env = std::getenv("GANTRY_EVICTION_TEST_MIB");
  return env != nullptr && std::atoi(env) > 0 ? static_cast<size_t>(std::atoi(env)) : 64;
}

// One Azurite for the whole binary, stopped at the end.
storage::testing::AzuriteFixture& SharedAzurite() {
  static auto* az = new storage::testing::AzuriteFixture();
  return *az;
}
class AzuriteEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { SharedAzurite().Stop(); }
};
[[maybe_unused]] auto* const kEnv = ::testing::AddGlobalTestEnvironment(new AzuriteEnvironment);

// The backend under test: "file" (a local directory behind file://) or
// "azurite".
class TierIntegration : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    static std::atomic<int> n{0};
    container_ = "ckpt" + std::to_string(::getpid()) + "n" + std::to_string(++n);
    if (GetParam() == "azurite") {
      Status s = SharedAzurite().Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      url_ = SharedAzurite().connection_string();
      store_options_.container = container_;
      // Creates the container with one small write first: parallel Put Blocks
      // into a missing container can race in the Blob client's lazy create
      // (reported to the storage owner); this suite tests tiering, not that.
      auto store = storage::OpenObjectStore(url_, store_options_);
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      const std::string hello = "tiering test container\n";
      Status put = (*store)->Put("README", std::as_bytes(std::span(hello)));
      ASSERT_TRUE(put.ok()) << put.ToString();
    } else {
      url_ = "file://" + store_dir_.path() + "/" + container_;
    }
  }
  Options Opts(const std::string& root) {
    Options o;
    o.root = root;
    o.run = "run1";
    o.persist = url_;
    o.store = store_options_;
    return o;
  }
  std::unique_ptr<CheckpointManager> OpenOrDie(Options o) {
    auto m = CheckpointManager::Open(std::move(o));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(m).value() : nullptr;
  }

  TempDir local_;
  TempDir store_dir_;
  std::string container_;
  std::string url_;
  storage::StoreOptions store_options_;
};

TEST_P(TierIntegration, PreemptLeadsToAnEmergencyCheckpointCommittedBeforeNotBefore) {
  const size_t mib = EvictionStateMiB();
  BigState state(mib, 42);
  MockImds imds;
  auto m = OpenOrDie(Opts(local_.path()));
  ASSERT_NE(m, nullptr);

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  std::chrono::system_clock::time_point committed_at, not_before;
  double seconds = 0;
  ScheduledEventsOptions watch;
  watch.endpoint = imds.endpoint();
  ASSERT_TRUE(m->OnEviction(
                   [&](const ScheduledEvent& e) {
                     // The emergency checkpoint: save, then wait until the
                     // marker is on the store.
                     const auto t0 = std::chrono::steady_clock::now();
                     Status s = m->Save(1000, state.Views(), Json{{"reason", e.event_type}});
                     if (s.ok()) s = m->WaitForUploads();
                     const auto t1 = std::chrono::steady_clock::now();
                     std::lock_guard<std::mutex> lock(mu);
                     committed_at = std::chrono::system_clock::now();
                     not_before = e.not_before.value_or(committed_at);
                     seconds = std::chrono::duration<double>(t1 - t0).count();
                     result = s;
                     done = true;
                     cv.notify_all();
                   },
                   watch, /*acknowledge=*/true)
                  .ok());
  // A Freeze does not trigger the handler; the Preempt does. Azure gives a
  // Spot VM 30 s; how much state fits in that at this machine's bandwidth is
  // measured and printed below. NotBefore here is far later, so that a loaded
  // machine is not a failure: the check is that the handler is called with
  // the announced deadline and commits to the store before it.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::minutes(10);
  imds.SetDocument(R"({"DocumentIncarnation":2,"Events":[)"
                   R"({"EventId":"f1","EventType":"Freeze","ResourceType":"VirtualMachine",)"
                   R"("Resources":["vm0"],"EventStatus":"Scheduled","NotBefore":")" +
                   Rfc1123(deadline) +
                   R"(","Description":"","EventSource":"Platform","DurationInSeconds":5},)"
                   R"({"EventId":"p1","EventType":"Preempt","ResourceType":"VirtualMachine",)"
                   R"("Resources":["vm0"],"EventStatus":"Scheduled","NotBefore":")" +
                   Rfc1123(deadline) +
                   R"(","Description":"Spot eviction","EventSource":"Platform",)"
                   R"("DurationInSeconds":-1}]})");
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(240), [&] { return done; }))
        << "the eviction handler did not finish within 240 s";
  }
  // The handler saw the NotBefore that was announced (RFC 1123: whole seconds).
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(not_before.time_since_epoch()),
            std::chrono::duration_cast<std::chrono::seconds>(deadline.time_since_epoch()));
  ASSERT_TRUE(result.ok()) << result.ToString();
  m->StopEvictionWatcher();
  // Committed on the store (marker present), before NotBefore.
  auto persisted = m->PersistedSteps();
  ASSERT_TRUE(persisted.ok()) << persisted.status().ToString();
  EXPECT_THAT(*persisted, Contains(1000));
  EXPECT_LT(committed_at, not_before) << "the emergency checkpoint missed the eviction deadline";
  EXPECT_EQ(imds.posts(), 1);  // acknowledged (StartRequests) once, the Preempt only

  const double mib_s = static_cast<double>(state.bytes()) / (1 << 20) / seconds;
  const double fits_gib = mib_s * 30 / 1024;
  char line[256];
  std::snprintf(line, sizeof line,
                "eviction (%s): %zu MiB committed in %.2f s (%.1f MiB/s): ~%.1f GiB fits in 30 s",
                GetParam().c_str(), mib, seconds, mib_s, fits_gib);
  std::printf("%s\n", line);
  RecordProperty("eviction_mib", static_cast<int>(mib));
  RecordProperty("eviction_seconds", std::to_string(seconds));
  RecordProperty("eviction_mib_per_s", std::to_string(mib_s));
  RecordProperty("eviction_gib_in_30s", std::to_string(fits_gib));

  // And the emergency checkpoint is what a new VM resumes from.
  m.reset();
  ASSERT_TRUE(storage::LocalFileSystem().RemoveAll(local_.path() + "/run1").ok());
  auto fresh = OpenOrDie(Opts(local_.path()));
  auto loaded = fresh->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 1000);
  EXPECT_EQ(loaded->metadata["reason"], "Preempt");
  state.ExpectIdentical(*loaded);
}

TEST_P(TierIntegration, ResumeAfterTheLocalTierIsWipedGivesIdenticalTensors) {
  BigState s10(24, 10), s20(24, 20);
  {
    Options o = Opts(local_.path());
    o.retention.keep_last = 1;
    o.persist_retention.keep_last = 2;
    auto m = OpenOrDie(o);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(m->Save(10, s10.Views()).ok());
    ASSERT_TRUE(m->SaveAsync(20, s20.Views()).ok());
    ASSERT_TRUE(m->Wait().ok());
    ASSERT_TRUE(m->WaitForUploads().ok());
    auto persisted = m->PersistedSteps();
    ASSERT_TRUE(persisted.ok());
    EXPECT_THAT(*persisted, ElementsAre(10, 20));
  }
  // A new VM: the local NVMe is empty.
  ASSERT_TRUE(storage::LocalFileSystem().RemoveAll(local_.path()).ok());
  auto m = OpenOrDie(Opts(local_.path()));
  ASSERT_NE(m, nullptr);
  auto loaded = m->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 20);
  s20.ExpectIdentical(*loaded);
  auto older = m->Load(10);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  s10.ExpectIdentical(*older);
  // The downloaded steps are committed locally with the normal protocol.
  auto list = m->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE(m->Verify(20, VerifyMode::kFull).ok());
}

TEST_P(TierIntegration, DirectModeWithoutLocalDisk) {
  std::string root = url_;
  storage::StoreOptions so = store_options_;
  if (GetParam() == "file") {
    // A file:// root is a local directory, not direct mode; use the store object.
    auto store = storage::OpenObjectStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Options o;
    o.root = "unused";
    o.root_store = store->get();
    o.run = "run1";
    BigState s(16, 7);
    auto m = OpenOrDie(o);
    ASSERT_TRUE(m->Save(5, s.Views()).ok());
    auto loaded = m->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    s.ExpectIdentical(*loaded);
    return;
  }
  Options o;
  o.root = root;
  o.store = so;
  o.run = "run1";
  BigState s(16, 7);
  auto m = OpenOrDie(o);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->Save(5, s.Views()).ok());
  ASSERT_TRUE(m->SaveAsync(6, s.Views()).ok());
  ASSERT_TRUE(m->Wait().ok());
  auto loaded = m->Load(5);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  s.ExpectIdentical(*loaded);
  auto v = m->Verify(6, VerifyMode::kFull);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  // A second manager (another machine) sees the same run.
  auto other = OpenOrDie(o);
  auto latest = other->Latest();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  EXPECT_EQ(latest->step, 6);
}

// Azurite dies while training goes on: the local commits continue, the
// failed upload is reported (never a committed step on the store without all
// its bytes), and after Azurite is back the next step is uploaded.
TEST(TierAzuriteFaults, StoreDownMidRunIsReportedAndRecovers) {
  storage::testing::AzuriteFixture azurite;
  Status started = azurite.Start();
  ASSERT_TRUE(started.ok()) << started.ToString();
  TempDir local;
  Options o;
  o.root = local.path();
  o.run = "run1";
  o.persist = azurite.connection_string();
  o.store.container = "faults";
  o.store.block_bytes = 1 << 20;
  o.store.retry.max_attempts = 2;
  o.store.retry.initial_backoff = std::chrono::milliseconds(10);
  o.store.retry.max_backoff = std::chrono::milliseconds(50);
  o.store.retry.request_timeout = std::chrono::milliseconds(3000);
  auto opened = CheckpointManager::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& m = *opened;
  BigState s1(8, 1), s2(8, 2), s3(8, 3);
  ASSERT_TRUE(m->Save(1, s1.Views()).ok());
  ASSERT_TRUE(m->WaitForUploads().ok());

  azurite.Stop();  // graceful: Azurite keeps its data (a SIGKILL loses its recent metadata)
  ASSERT_TRUE(m->Save(2, s2.Views()).ok());  // the local tier does not depend on the store
  Status down = m->WaitForUploads();
  ASSERT_FALSE(down.ok());
  EXPECT_THAT(down.message(), ::testing::HasSubstr("uploading step 2"));
  EXPECT_FALSE(m->Uploads().last_error.empty());

  Status restarted = azurite.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  ASSERT_TRUE(m->Save(3, s3.Views()).ok());
  ASSERT_TRUE(m->WaitForUploads().ok());
  EXPECT_EQ(m->Uploads().last_error, "");
  auto persisted = m->PersistedSteps();
  ASSERT_TRUE(persisted.ok()) << persisted.status().ToString();
  EXPECT_THAT(*persisted, ElementsAre(1, 3));  // step 2 never looks committed on the store
  // A new VM resumes from step 3.
  m.reset();
  ASSERT_TRUE(storage::LocalFileSystem().RemoveAll(local.path() + "/run1").ok());
  auto again = CheckpointManager::Open(o);
  ASSERT_TRUE(again.ok());
  auto loaded = (*again)->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->step, 3);
  s3.ExpectIdentical(*loaded);
}

INSTANTIATE_TEST_SUITE_P(Stores, TierIntegration, ::testing::Values("file", "azurite"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace gantry::ckpt
