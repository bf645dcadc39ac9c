#include "gantry/core/service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/notify_socket.h"

namespace gantry {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NotifySocket;

// Records every call the runner makes, in order.
class FakeService final : public Service {
 public:
  std::string_view name() const override { return "fake"; }
  Status Start() override {
    Record("start");
    return start_status;
  }
  std::string ReadyMessage() const override { return "fake service ready on port 1234"; }
  Status Reload(std::string_view why) override {
    Record("reload:" + std::string(why));
    return reload_status;
  }
  void Tick() override {
    std::lock_guard<std::mutex> lock(mu);
    ++ticks;
  }
  void Stop(std::chrono::milliseconds grace) override {
    Record("stop:" + std::to_string(grace.count()));
  }

  void Record(std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    calls.push_back(std::move(what));
  }
  std::vector<std::string> Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls;
  }
  int Ticks() {
    std::lock_guard<std::mutex> lock(mu);
    return ticks;
  }

  Status start_status;
  Status reload_status;
  std::mutex mu;
  std::vector<std::string> calls;
  int ticks = 0;
};

// Waits (bounded) until `pred` holds; the bound only stops a broken runner from
// hanging the suite.
template <typename Pred>
bool WaitFor(Pred pred) {
  auto until = std::chrono::steady_clock::now() + 20s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class ServiceRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gantry_service_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    ::unsetenv("NOTIFY_SOCKET");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(ServiceRunnerTest, SignalsReloadThenDrainAndStop) {
  ServiceRunner runner({.tick = 10ms, .grace = 1234ms});
  FakeService svc;
  // Started after the runner, so it inherits the blocked mask: the signals it
  // sends reach only the runner.
  std::thread sender([&] {
    ASSERT_TRUE(WaitFor([&] { return !svc.Calls().empty(); }));
    ::kill(::getpid(), SIGHUP);
    ASSERT_TRUE(WaitFor([&] { return runner.reloads() == 1; }));
    ::kill(::getpid(), SIGTERM);
  });
  ::testing::internal::CaptureStdout();
  Status s = runner.Run(svc);
  std::string out = ::testing::internal::GetCapturedStdout();
  sender.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  // The readiness line comes first (logs may follow when logging goes to stdout).
  EXPECT_THAT(out, ::testing::StartsWith("fake service ready on port 1234\n"));
  EXPECT_THAT(svc.Calls(), ElementsAre("start", "reload:SIGHUP", "stop:1234"));
}

TEST_F(ServiceRunnerTest, StartErrorIsReturnedAndNothingIsStopped) {
  ServiceRunner runner({});
  FakeService svc;
  svc.start_status = Unavailable("port 80 is taken");
  Status s = runner.Run(svc);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(svc.Calls(), ElementsAre("start"));
}

TEST_F(ServiceRunnerTest, AStopSignalSentBeforeRunIsNotLost) {
  ServiceRunner runner({});
  ::kill(::getpid(), SIGINT);  // blocked: stays pending until Run() reads it
  FakeService svc;
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(runner.Run(svc).ok());
  ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(svc.Calls(), ElementsAre("start", "stop:10000"));
}

TEST_F(ServiceRunnerTest, AWatchedFileChangeReloadsAndARefusedReloadKeepsServing) {
  std::filesystem::path cfg = dir_ / "svc.yaml";
  std::ofstream(cfg) << "a: 1\n";
  ServiceRunner runner({.watch = {cfg.string()}, .tick = 10ms});
  FakeService svc;
  svc.reload_status = InvalidArgument("svc.yaml:1:1: bad");
  std::thread editor([&] {
    ASSERT_TRUE(WaitFor([&] { return svc.Ticks() >= 2; }));
    std::ofstream(cfg) << "a: 22\n";  // size and mtime change
    ASSERT_TRUE(WaitFor([&] { return runner.reloads() == 1; }));
    // Replaced by a rename, as editors and config managers do.
    std::filesystem::path tmp = dir_ / "svc.yaml.new";
    std::ofstream(tmp) << "a: 333\n";
    std::filesystem::rename(tmp, cfg);
    ASSERT_TRUE(WaitFor([&] { return runner.reloads() == 2; }));
    // Ticks go on after a refused reload: the service still runs.
    int ticks = svc.Ticks();
    ASSERT_TRUE(WaitFor([&] { return svc.Ticks() > ticks + 2; }));
    runner.RequestStop();
  });
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(runner.Run(svc).ok());
  ::testing::internal::GetCapturedStdout();
  editor.join();
  std::string changed = "reload:" + cfg.string() + " changed";
  EXPECT_THAT(svc.Calls(), ElementsAre("start", changed, changed, "stop:10000"));
}

TEST_F(ServiceRunnerTest, UnchangedFilesDoNotReload) {
  std::filesystem::path cfg = dir_ / "same.yaml";
  std::ofstream(cfg) << "a: 1\n";
  ServiceRunner runner({.watch = {cfg.string(), (dir_ / "missing.yaml").string()}, .tick = 5ms});
  FakeService svc;
  std::thread stopper([&] {
    ASSERT_TRUE(WaitFor([&] { return svc.Ticks() >= 20; }));
    runner.RequestStop();
  });
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(runner.Run(svc).ok());
  ::testing::internal::GetCapturedStdout();
  stopper.join();
  EXPECT_EQ(runner.reloads(), 0);
  EXPECT_THAT(svc.Calls(), ElementsAre("start", "stop:10000"));
}

TEST_F(ServiceRunnerTest, ReloadRequestAndDefaultReloadIsUnimplemented) {
  struct NoReload final : Service {
    std::string_view name() const override { return "noreload"; }
    Status Start() override { return Status::Ok(); }
    std::string ReadyMessage() const override { return "ready"; }
    void Stop(std::chrono::milliseconds) override { stopped = true; }
    bool stopped = false;
  } svc;
  EXPECT_EQ(svc.Reload("SIGHUP").code(), StatusCode::kUnimplemented);
  EXPECT_THAT(svc.Reload("SIGHUP").message(), HasSubstr("restart"));
  ServiceRunner runner({.tick = 5ms});
  runner.RequestReload();  // before Run: taken once it runs
  std::thread stopper([&] {
    ASSERT_TRUE(WaitFor([&] { return runner.reloads() == 1; }));
    runner.RequestStop();
  });
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(runner.Run(svc).ok());
  ::testing::internal::GetCapturedStdout();
  stopper.join();
  EXPECT_TRUE(svc.stopped);
}

// The sd_notify protocol: a datagram per state change on NOTIFY_SOCKET.
TEST_F(ServiceRunnerTest, TellsSystemdReadyReloadingStopping) {
  NotifySocket systemd((dir_ / "notify.sock").string());
  ::setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
  ServiceRunner runner({.tick = 5ms});
  FakeService svc;
  std::thread sender([&] {
    ASSERT_TRUE(WaitFor([&] { return !svc.Calls().empty(); }));
    runner.RequestReload();
    ASSERT_TRUE(WaitFor([&] { return runner.reloads() == 1; }));
    runner.RequestStop();
  });
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(runner.Run(svc).ok());
  ::testing::internal::GetCapturedStdout();
  sender.join();
  std::vector<std::string> got = systemd.Drain();
  EXPECT_THAT(got, ElementsAre("READY=1", ::testing::StartsWith("RELOADING=1\nMONOTONIC_USEC="),
                               "READY=1", "STOPPING=1"));
}

}  // namespace
}  // namespace gantry
