// The controller's loop around the decisions: what it reads, what it sends
// to the actuator, which victims it picks and when it holds. Metric sources
// and the actuator are test doubles here (the real ones have their own
// integration tests); the clock is fake.
#include "gantry/autoscale/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>

#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

using std::chrono::seconds;

// A metric whose next values the test queues; the last one repeats.
struct Values {
  std::deque<Result<double>> next;
  Result<double> last = 0.0;
};

class QueuedSource : public MetricSource {
 public:
  explicit QueuedSource(Values* v) : v_(v) {}
  Result<double> Read() override {
    if (!v_->next.empty()) {
      v_->last = v_->next.front();
      v_->next.pop_front();
    }
    return v_->last;
  }

 private:
  Values* v_;
};

// An actuator that keeps a count and a list of instances, and records calls.
struct Fleet {
  Capacity cap;
  std::vector<std::string> calls;
  Status fail_read = Status::Ok();
  bool choose = true;
  int next_id = 0;

  void Add(int n, bool ready = true) {
    for (int i = 0; i < n; ++i) {
      Instance inst{
          .id = std::to_string(next_id), .name = "vm" + std::to_string(next_id), .ready = ready};
      inst.created = std::chrono::system_clock::time_point(seconds(1000 + next_id));
      ++next_id;
      cap.instances.push_back(inst);
    }
    cap.target = static_cast<int64_t>(cap.instances.size());
    cap.ready = std::count_if(cap.instances.begin(), cap.instances.end(),
                              [](const Instance& i) { return i.ready; });
  }
};

class FleetActuator : public Actuator {
 public:
  explicit FleetActuator(Fleet* f) : f_(f) {}
  std::string_view kind() const override { return "test"; }
  bool CanChooseVictims() const override { return f_->choose; }
  Result<Capacity> Read() override {
    if (!f_->fail_read.ok()) return f_->fail_read;
    return f_->cap;
  }
  Status ScaleOut(int64_t desired) override {
    f_->calls.push_back("out " + std::to_string(desired));
    f_->Add(static_cast<int>(desired - f_->cap.target));
    return Status::Ok();
  }
  Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) override {
    std::string call = "in " + std::to_string(desired);
    for (const std::string& v : victims) {
      call += " " + v;
      std::erase_if(f_->cap.instances, [&](const Instance& i) { return i.id == v; });
    }
    f_->calls.push_back(call);
    if (victims.empty()) f_->cap.instances.resize(static_cast<size_t>(desired));
    f_->cap.target = static_cast<int64_t>(f_->cap.instances.size());
    f_->cap.ready = f_->cap.target;
    return Status::Ok();
  }

 private:
  Fleet* f_;
};

// A clock whose wall time can jump while monotonic time does not.
class JumpClock : public Clock {
 public:
  std::chrono::nanoseconds Now() const override { return fake.Now(); }
  std::chrono::system_clock::time_point WallNow() const override { return fake.WallNow() + jump; }
  void SleepFor(std::chrono::nanoseconds d) const override { fake.SleepFor(d); }
  FakeClock fake;
  std::chrono::nanoseconds jump{0};
};

class ControllerTest : public ::testing::Test {
 protected:
  // One target "t": queue per instance target 4, min 0, max 10, immediate
  // scale-down (no stabilization) so each test shows one rule at a time.
  TargetConfig Target() {
    TargetConfig t;
    t.name = "t";
    t.interval = seconds(15);
    t.decision.target = "t";
    t.decision.min = 0;
    t.decision.max = 10;
    t.decision.hpa.metrics = {{.name = "queue", .target = 4}};
    t.decision.hpa.down.stabilization = seconds(0);
    t.decision.hpa.cooldown = seconds(0);
    t.metrics = {
        {.name = "queue", .kind = MetricSourceConfig::Kind::kCommand, .command = {"/bin/true"}}};
    return t;
  }

  std::unique_ptr<Controller> Make(TargetConfig t, bool dry_run = false) {
    AutoscaleConfig cfg;
    cfg.path = "autoscale.yaml";
    cfg.targets.push_back(std::move(t));
    ControllerOptions o;
    o.clock = &clock_;
    o.dry_run = dry_run;
    o.metric_factory = [this](const MetricSourceConfig&) -> Result<std::unique_ptr<MetricSource>> {
      return std::unique_ptr<MetricSource>(new QueuedSource(&queue_));
    };
    o.actuator_factory = [this](const TargetConfig&) -> Result<std::unique_ptr<Actuator>> {
      return std::unique_ptr<Actuator>(new FleetActuator(&fleet_));
    };
    auto c = Controller::Create(std::move(cfg), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  Decision Eval(Controller& c) {
    auto d = c.Evaluate("t");
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    clock_.fake.Advance(seconds(15));
    return d.ok() ? *d : Decision{};
  }

  JumpClock clock_;
  Values queue_;
  Fleet fleet_;
};

TEST_F(ControllerTest, ScalesOutAndReportsWhy) {
  fleet_.Add(1);
  auto c = Make(Target());
  queue_.last = 20.0;  // 20 waiting / 4 per instance = 5
  Decision d = Eval(*c);
  EXPECT_EQ(d.current, 1);
  EXPECT_EQ(d.desired, 5);
  EXPECT_EQ(ReasonName(d.reason), "scale_out");
  EXPECT_EQ(fleet_.calls, (std::vector<std::string>{"out 5"}));

  Json st = c->StatusJson();
  const Json& t = st["targets"][0];
  EXPECT_EQ(t["name"], "t");
  EXPECT_EQ(t["last_decision"]["reason"], "scale_out");
  EXPECT_EQ(t["last_action"]["to"], 5);
  EXPECT_EQ(t["metrics"]["queue"], 20.0);
  std::string m = c->MetricsText();
  EXPECT_NE(m.find("gantry_autoscale_desired{target=\"t\"} 5"), std::string::npos) << m;
  EXPECT_NE(m.find("gantry_autoscale_decisions_total{reason=\"scale_out\",target=\"t\"} 1"),
            std::string::npos)
      << m;
  EXPECT_NE(
      m.find("gantry_autoscale_actions_total{direction=\"out\",result=\"ok\",target=\"t\"} 1"),
      std::string::npos)
      << m;

  // The next evaluation reads 5 from the actuator: nothing more to do.
  Eval(*c);
  EXPECT_EQ(fleet_.calls.size(), 1u);
}

TEST_F(ControllerTest, DryRunDecidesWithoutActing) {
  fleet_.Add(1);
  auto c = Make(Target(), /*dry_run=*/true);
  queue_.last = 20.0;
  Decision d = Eval(*c);
  EXPECT_EQ(d.desired, 5);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_EQ(c->StatusJson()["targets"][0]["last_decision"]["dry_run"], true);
}

TEST_F(ControllerTest, HoldsWhenTheActuatorCannotBeRead) {
  fleet_.Add(3);
  auto c = Make(Target());
  queue_.last = 0.0;
  fleet_.fail_read = Unavailable("ARM answered 503");
  Eval(*c);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_EQ(c->StatusJson()["targets"][0]["last_decision"]["reason"], "actuator_error");
  EXPECT_NE(c->MetricsText().find("reason=\"actuator_error\""), std::string::npos);

  // Busy (an update in progress): hold too.
  fleet_.fail_read = Status::Ok();
  fleet_.cap.busy = true;
  Eval(*c);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_EQ(c->StatusJson()["targets"][0]["last_decision"]["reason"], "actuator_busy");
}

TEST_F(ControllerTest, MissingMetricsNeverScaleIn) {
  fleet_.Add(4);
  auto c = Make(Target());
  queue_.last = Unavailable("gateway down");
  Decision d = Eval(*c);
  EXPECT_EQ(d.desired, 4);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_NE(c->MetricsText().find(
                "gantry_autoscale_metric_errors_total{metric=\"queue\",target=\"t\"} 1"),
            std::string::npos);
}

TEST_F(ControllerTest, VictimsAreUnprotectedNotReadyFirstThenNewest) {
  fleet_.Add(3);                   // ids 0, 1, 2 (2 newest)
  fleet_.Add(1, /*ready=*/false);  // id 3, still starting
  fleet_.cap.instances[2].protected_from_scale_in = true;
  auto c = Make(Target());
  queue_.last = 4.0;  // one instance's worth: 4 -> 1, three go
  Decision d = Eval(*c);
  EXPECT_EQ(d.desired, 1);
  // 3 (not ready) first, then the newest unprotected (1), then 0; 2 is protected,
  // so only three of the four may go: exactly the three asked for.
  ASSERT_EQ(fleet_.calls.size(), 1u);
  EXPECT_EQ(fleet_.calls[0], "in 1 3 1 0");
}

TEST_F(ControllerTest, FewerVictimsWhenFewerAreSafe) {
  fleet_.Add(3);
  for (Instance& i : fleet_.cap.instances) i.protected_from_scale_in = true;
  fleet_.cap.instances[0].protected_from_scale_in = false;
  TargetConfig t = Target();
  auto c = Make(t);
  queue_.last = 0.0;  // wants 0; only instance 0 may go
  Eval(*c);
  ASSERT_EQ(fleet_.calls.size(), 1u);
  EXPECT_EQ(fleet_.calls[0], "in 2 0");
  Json action = c->StatusJson()["targets"][0]["last_action"];
  EXPECT_EQ(action["to"], 2);
  EXPECT_NE(action["notes"].dump().find("victims_short"), std::string::npos) << action.dump();

  // Nothing safe at all: no call, the reason is in the status.
  fleet_.calls.clear();
  fleet_.cap.instances[0].protected_from_scale_in = true;
  Eval(*c);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_NE(c->StatusJson()["targets"][0]["last_action"]["error"].dump().find(
                "no instance is safe to remove"),
            std::string::npos);
}

TEST_F(ControllerTest, VictimCheckKeepsBusyInstances) {
  fleet_.Add(2);
  TargetConfig t = Target();
  testing::TempDir tmp;
  // Instance "1" (the newest, the first choice) is mid-job: the check says no.
  std::string check = tmp.path() + "/check.sh";
  std::ofstream(check) << "#!/bin/sh\n[ \"$1\" != 1 ]\n";
  std::filesystem::permissions(check, std::filesystem::perms::owner_all);
  t.scale_in.victim_check = {check, "{instance}"};
  auto c = Make(t);
  queue_.last = 4.0;  // 2 -> 1
  Eval(*c);
  ASSERT_EQ(fleet_.calls.size(), 1u);
  EXPECT_EQ(fleet_.calls[0], "in 1 0");
}

TEST_F(ControllerTest, ActuatorsThatCannotChooseGetTheCount) {
  fleet_.Add(4);
  fleet_.choose = false;
  auto c = Make(Target());
  queue_.last = 8.0;
  Eval(*c);
  EXPECT_EQ(fleet_.calls, (std::vector<std::string>{"in 2"}));
}

TEST_F(ControllerTest, ARestartedControllerContinuesFromTheActuatorsCount) {
  fleet_.Add(1);
  queue_.last = 20.0;
  {
    auto c = Make(Target());
    Eval(*c);
  }
  ASSERT_EQ(fleet_.calls, (std::vector<std::string>{"out 5"}));
  // A new process: it reads 5 and does not add 4 more.
  auto again = Make(Target());
  Eval(*again);
  EXPECT_EQ(fleet_.calls.size(), 1u);
}

TEST_F(ControllerTest, WakeActivatesFromZero) {
  auto c = Make(Target());
  queue_.last = 0.0;
  Eval(*c);
  EXPECT_TRUE(fleet_.calls.empty());
  ASSERT_TRUE(c->Wake("t").ok());
  c->RunDue();  // woken: evaluated now, not at the next interval
  EXPECT_EQ(fleet_.calls, (std::vector<std::string>{"out 1"}));
  EXPECT_EQ(c->StatusJson()["targets"][0]["last_decision"]["reason"], "activate");
  Status s = c->Wake("nope");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("targets: t"), std::string::npos);
}

TEST_F(ControllerTest, AClockJumpHoldsOneEvaluation) {
  fleet_.Add(4);
  auto c = Make(Target());
  queue_.last = 16.0;
  Eval(*c);
  clock_.jump = std::chrono::hours(6);  // the VM was suspended, or someone set the date
  queue_.last = 0.0;
  Eval(*c);
  EXPECT_TRUE(fleet_.calls.empty());
  EXPECT_EQ(c->StatusJson()["targets"][0]["last_decision"]["reason"], "clock_jump");
  Eval(*c);  // the clocks agree again: decisions resume
  EXPECT_EQ(fleet_.calls.size(), 1u);
}

TEST_F(ControllerTest, RunDueHonoursEachInterval) {
  fleet_.Add(1);
  auto c = Make(Target());
  queue_.last = 4.0;
  std::chrono::milliseconds wait = c->RunDue();
  EXPECT_EQ(wait, std::chrono::seconds(15));
  clock_.fake.Advance(seconds(5));
  EXPECT_EQ(c->RunDue(), std::chrono::seconds(10));
}

}  // namespace
}  // namespace gantry::autoscale
