// RunHealth: isolation, timeouts, the watchdog, parallelism, only/skip.
// Uses test-only checks; no timing assertions (timeouts are short so the
// tests are quick, but only outcomes and orderings are checked).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "gantry/health/check.h"
#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using namespace std::chrono_literals;

class FnCheck : public Check {
 public:
  FnCheck(std::string name, std::function<CheckResult(const Context&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  FnCheck& Isolated() {
    isolate_ = true;
    return *this;
  }
  FnCheck& Serial() {
    parallel_ = false;
    return *this;
  }
  FnCheck& Timeout(std::chrono::milliseconds t) {
    timeout_ = t;
    return *this;
  }
  std::string name() const override { return name_; }
  bool parallel_safe() const override { return parallel_; }
  bool isolate() const override { return isolate_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  CheckResult Run(const Context& ctx) const override {
    CheckResult r = fn_(ctx);
    r.name = name_;
    return r;
  }

 private:
  std::string name_;
  std::function<CheckResult(const Context&)> fn_;
  bool parallel_ = true;
  bool isolate_ = false;
  std::chrono::milliseconds timeout_ = 10s;
};

CheckResult Pass(std::string message = "ok") {
  CheckResult r;
  r.outcome = Outcome::kPass;
  r.message = std::move(message);
  return r;
}

[[noreturn]] CheckResult HangForever(const Context&) {
  while (true) ::pause();
}

struct Checks {
  std::vector<std::unique_ptr<Check>> list;
  FnCheck& Add(std::string name, std::function<CheckResult(const Context&)> fn) {
    auto c = std::make_unique<FnCheck>(std::move(name), std::move(fn));
    FnCheck& ref = *c;
    list.push_back(std::move(c));
    return ref;
  }
};

const CheckResult& Find(const HealthReport& r, const std::string& name) {
  for (const auto& x : r.results) {
    if (x.name == name) return x;
  }
  static CheckResult none;
  ADD_FAILURE() << "no result " << name;
  return none;
}

Context TestContext(const FakeClock& clock) {
  Context ctx;
  ctx.clock = &clock;
  return ctx;
}

TEST(RunnerTest, HungIsolatedProbeIsKilledAtItsTimeoutAndTheRunFinishes) {
  // The hung-probe test that proves the watchdog: the child sleeps forever,
  // as a statvfs() on a dead NFS mount would.
  FakeClock clock;
  Checks c;
  c.Add("hung", HangForever).Isolated().Timeout(200ms);
  c.Add("after", [](const Context&) { return Pass(); });
  RunOptions opt;
  opt.watchdog = 60s;
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const CheckResult& hung = Find(*r, "hung");
  EXPECT_EQ(hung.outcome, Outcome::kError);
  EXPECT_EQ(hung.message,
            "timed out after 0.2 s: the probe was killed (a hung filesystem or driver call?)");
  EXPECT_EQ(hung.fault_code, "NHCNA");
  EXPECT_EQ(Find(*r, "after").outcome, Outcome::kPass);
  EXPECT_EQ(r->overall, Outcome::kError);
}

TEST(RunnerTest, GlobalWatchdogKillsTheRunningProbeAndMarksTheRestNotRun) {
  FakeClock clock;
  Checks c;
  c.Add("hung", HangForever).Isolated().Timeout(60s);
  c.Add("second", [](const Context&) { return Pass(); });
  c.Add("bandwidth", [](const Context&) { return Pass(); }).Serial();
  RunOptions opt;
  opt.watchdog = 300ms;
  opt.parallelism = 1;  // "second" waits behind "hung" and never starts
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->results.size(), 3u);
  EXPECT_EQ(r->results[0].outcome, Outcome::kError);
  EXPECT_THAT(r->results[0].message,
              StartsWith("timed out: the 0.3 s watchdog fired while it ran; the probe was killed"));
  EXPECT_EQ(r->results[1].outcome, Outcome::kError);
  EXPECT_EQ(r->results[1].message, "not run: the 0.3 s watchdog fired");
  EXPECT_EQ(r->results[1].fault_code, "NHCNA");
  EXPECT_EQ(r->results[2].message, "not run: the 0.3 s watchdog fired");
}

TEST(RunnerTest, CrashingIsolatedProbeIsAnErrorNamingTheSignal) {
  FakeClock clock;
  Checks c;
  c.Add("segv", [](const Context&) -> CheckResult {
     ::signal(SIGSEGV, SIG_DFL);
     ::raise(SIGSEGV);
     return Pass();
   }).Isolated();
  c.Add("exits", [](const Context&) -> CheckResult { ::_exit(3); }).Isolated();
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), RunOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results[0].outcome, Outcome::kError);
  EXPECT_THAT(r->results[0].message, StartsWith("the probe crashed: killed by signal 11"));
  EXPECT_EQ(r->results[1].outcome, Outcome::kError);
  EXPECT_EQ(r->results[1].message, "the probe exited with code 3 without a result");
}

TEST(RunnerTest, IsolatedProbeRunsInAChildAndItsResultComesBack) {
  FakeClock clock;
  Checks c;
  c.Add("child", [](const Context& ctx) {
     CheckResult r;
     r.outcome = Outcome::kFail;
     r.message = "from " + ctx.root_dir;
     r.measured = std::to_string(::getpid());
     r.threshold = "== 8";
     r.fault_code = "NHC2009";
     return r;
   }).Isolated();
  Context ctx = TestContext(clock);
  ctx.root_dir = "/fake/root";
  Result<HealthReport> r = RunHealth(c.list, ctx, RunOptions{});
  ASSERT_TRUE(r.ok());
  const CheckResult& got = r->results[0];
  EXPECT_EQ(got.outcome, Outcome::kFail);
  EXPECT_EQ(got.message, "from /fake/root");
  EXPECT_NE(got.measured, std::to_string(::getpid()));  // ran in another process
  EXPECT_EQ(got.threshold, "== 8");
  EXPECT_EQ(got.fault_code, "NHC2009");
  EXPECT_EQ(r->overall, Outcome::kFail);
}

TEST(RunnerTest, ParallelSafeChecksOverlap) {
  // Three checks that each wait until all three are inside Run: this can
  // only pass when the runner runs them at the same time.
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  int inside = 0;
  auto barrier = [&](const Context&) {
    std::unique_lock<std::mutex> lock(mu);
    ++inside;
    cv.notify_all();
    bool all = cv.wait_for(lock, 20s, [&] { return inside >= 3; });
    CheckResult never;
    never.outcome = Outcome::kFail;
    never.message = "never overlapped";
    return all ? Pass() : never;
  };
  Checks c;
  c.Add("a", barrier);
  c.Add("b", barrier);
  c.Add("c", barrier);
  RunOptions opt;
  opt.parallelism = 3;
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(r.ok());
  for (const auto& x : r->results) EXPECT_EQ(x.outcome, Outcome::kPass) << x.name << x.message;
}

TEST(RunnerTest, ParallelismIsAnUpperBoundAndSerialChecksRunAloneAfterwards) {
  FakeClock clock;
  std::atomic<int> active{0}, max_active{0}, seq{0};
  std::atomic<int> last_parallel_end{-1}, serial_start{-1}, serial_active_at_start{-1};
  auto work = [&](const Context&) {
    int now = ++active;
    int prev = max_active.load();
    while (now > prev && !max_active.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(5ms);
    --active;
    int s = seq++;
    int p = last_parallel_end.load();
    while (s > p && !last_parallel_end.compare_exchange_weak(p, s)) {
    }
    return Pass();
  };
  Checks c;
  for (int i = 0; i < 6; ++i) c.Add("p" + std::to_string(i), work);
  c.Add("serial", [&](const Context&) {
     serial_active_at_start = active.load();
     serial_start = seq++;
     return Pass();
   }).Serial();
  RunOptions opt;
  opt.parallelism = 2;
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(r.ok());
  EXPECT_LE(max_active.load(), 2);
  EXPECT_GE(max_active.load(), 1);
  EXPECT_EQ(serial_active_at_start.load(), 0);
  EXPECT_GT(serial_start.load(), last_parallel_end.load());
  // Results stay in the checks' order, whatever order they finished in.
  std::vector<std::string> names;
  for (const auto& x : r->results) names.push_back(x.name);
  EXPECT_THAT(names, ElementsAre("p0", "p1", "p2", "p3", "p4", "p5", "serial"));
}

TEST(RunnerTest, ThreadCheckOverrunningItsTimeoutIsAbandoned) {
  FakeClock clock;
  // The check object and its latch outlive the abandoned thread: they are
  // leaked on purpose, because the thread may still be inside FnCheck::Run
  // (after `finished` is set) when the process exits and runs the
  // destructors of function-local statics.
  static std::mutex& mu = *new std::mutex;
  static std::condition_variable& cv = *new std::condition_variable;
  static bool release = false;
  static bool finished = false;
  static Checks& c = *new Checks;
  c.list.clear();
  release = false;  // --gtest_repeat: the previous thread has finished (waited for below)
  finished = false;
  c.Add("stuck", [](const Context&) {
     std::unique_lock<std::mutex> lock(mu);
     cv.wait(lock, [] { return release; });
     finished = true;
     cv.notify_all();
     return Pass();
   }).Timeout(100ms);
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), RunOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->results[0].outcome, Outcome::kError);
  EXPECT_THAT(r->results[0].message, StartsWith("timed out after 0.1 s: the check did not return"));
  std::unique_lock<std::mutex> lock(mu);
  release = true;
  cv.notify_all();
  cv.wait(lock, [] { return finished; });
}

TEST(RunnerTest, OnlyAndSkip) {
  FakeClock clock;
  int ran_b = 0;
  Checks c;
  c.Add("a", [](const Context&) { return Pass(); });
  c.Add("b", [&](const Context&) {
    ++ran_b;
    return Pass();
  });
  c.Add("c", [](const Context&) { return Pass(); });
  RunOptions opt;
  opt.only = {"a", "b"};
  opt.skip = {"b"};
  Result<HealthReport> r = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->results.size(), 2u);
  EXPECT_EQ(r->results[0].name, "a");
  EXPECT_EQ(r->results[0].outcome, Outcome::kPass);
  EXPECT_EQ(r->results[1].name, "b");
  EXPECT_EQ(r->results[1].outcome, Outcome::kSkip);
  EXPECT_EQ(r->results[1].message, "skipped (--skip)");
  EXPECT_EQ(ran_b, 0);
  EXPECT_EQ(r->overall, Outcome::kPass);

  opt.only = {"nope"};
  opt.skip = {};
  Result<HealthReport> bad = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--only nope"));
  EXPECT_THAT(bad.status().message(), HasSubstr("a, b, c"));
}

TEST(RunnerTest, FillsReportFields) {
  FakeClock clock;
  Result<Profile> p = Profile::LoadString("name: tiny\nchecks:\n  a: {}\n", "tiny.yaml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Checks c;
  c.Add("a", [](const Context&) { return Pass(); });
  Context ctx = TestContext(clock);
  ctx.profile = &*p;
  ctx.vm = ImdsInfo{};
  ctx.vm->vm_size = "Standard_ND96isr_H100_v5";
  Result<HealthReport> r = RunHealth(c.list, ctx, RunOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->profile, "tiny");
  EXPECT_EQ(r->vm_size, "Standard_ND96isr_H100_v5");
  EXPECT_FALSE(r->hostname.empty());
  EXPECT_EQ(r->timestamp, clock.WallNow());
  EXPECT_EQ(r->elapsed_s, 0);  // the fake clock did not move
  EXPECT_GE(r->results[0].seconds, 0);
}

TEST(RunnerTest, BadOptions) {
  FakeClock clock;
  Checks c;
  RunOptions opt;
  opt.parallelism = 0;
  EXPECT_EQ(RunHealth(c.list, TestContext(clock), opt).status().code(),
            StatusCode::kInvalidArgument);
  opt.parallelism = 1;
  opt.watchdog = 0ms;
  EXPECT_EQ(RunHealth(c.list, TestContext(clock), opt).status().code(),
            StatusCode::kInvalidArgument);
  opt.watchdog = 1s;
  Result<HealthReport> empty = RunHealth(c.list, TestContext(clock), opt);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->results.empty());
  EXPECT_EQ(empty->overall, Outcome::kPass);
}

}  // namespace
}  // namespace gantry::health
