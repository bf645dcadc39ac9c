#include "gantry/autoscale/slurm_power.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <sstream>
#include <string>
#include <vector>

#include "gantry/core/clock.h"
#include "slurm_power_internal.h"
#include "testing/temp_dir.h"

namespace gantry::autoscale {
namespace {

using internal::RunPowerActionWith;
using Names = std::vector<std::string>;
using testing::TempDir;

// A scale set in memory. ScaleOut adds instances that ARM would name itself
// ("vm-<id>"); ScaleIn removes the victims. Errors can be queued per call, and
// a queued error may still let the operation land (a timeout after ARM took it).
class FakeVmss : public Actuator {
 public:
  struct Fault {
    Status status;
    bool lands = false;
  };

  void Add(const std::string& name, const std::string& state = "Running") {
    Instance in;
    in.id = std::to_string(next_id_++);
    in.name = name;
    in.state = state;
    in.ready = state == "Running";
    cap_.instances.push_back(in);
    cap_.target = static_cast<int64_t>(cap_.instances.size());
  }

  std::string_view kind() const override { return "vmss"; }
  bool CanChooseVictims() const override { return true; }

  Result<Capacity> Read() override {
    ++reads;
    if (!read_faults.empty()) {
      Status s = read_faults.front();
      read_faults.pop_front();
      return s;
    }
    return cap_;
  }
  Status ScaleOut(int64_t desired) override {
    scale_outs.push_back(desired);
    EXPECT_GT(desired, cap_.target) << "ScaleOut must raise the count";
    auto fault = Pop(&out_faults);
    if (fault.status.ok() || fault.lands) {
      while (cap_.target < desired) Add("vm-" + std::to_string(next_id_));
    }
    return fault.status;
  }
  Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) override {
    scale_ins.push_back({desired, victims});
    auto fault = Pop(&in_faults);
    if (fault.status.ok() || fault.lands) {
      EXPECT_EQ(desired, cap_.target - static_cast<int64_t>(victims.size()));
      for (const std::string& id : victims) {
        auto it = std::find_if(cap_.instances.begin(), cap_.instances.end(),
                               [&](const Instance& in) { return in.id == id; });
        EXPECT_NE(it, cap_.instances.end()) << "no instance " << id;
        if (it != cap_.instances.end()) cap_.instances.erase(it);
      }
      cap_.target = static_cast<int64_t>(cap_.instances.size());
    }
    return fault.status;
  }

  Names names() const {
    Names out;
    for (const Instance& in : cap_.instances) out.push_back(in.name);
    return out;
  }
  int64_t target() const { return cap_.target; }

  int reads = 0;
  std::vector<int64_t> scale_outs;
  std::vector<std::pair<int64_t, std::vector<std::string>>> scale_ins;
  std::deque<Status> read_faults;
  std::deque<Fault> out_faults, in_faults;

 private:
  static Fault Pop(std::deque<Fault>* q) {
    if (q->empty()) return {};
    Fault f = q->front();
    q->pop_front();
    return f;
  }
  Capacity cap_;
  int next_id_ = 0;
};

class SlurmPowerVmssTest : public ::testing::Test {
 protected:
  SlurmPowerVmssTest() {
    config_.nodes = "gpu-[1-4]";
    config_.use_vmss = true;
    config_.resume_timeout = std::chrono::seconds(60);
    config_.log_file = dir_.Path("power.log");
  }
  Result<PowerResult> Run(PowerAction a, std::string_view hostlist) {
    return RunPowerActionWith(config_, a, hostlist, clock_, &vmss_);
  }

  TempDir dir_{"gantry-slurm-power"};
  FakeClock clock_;
  SlurmPowerConfig config_;
  FakeVmss vmss_;
};

TEST_F(SlurmPowerVmssTest, ResumeScalesOutByTheNodesWithoutAnInstance) {
  vmss_.Add("gpu-1");
  auto r = Run(PowerAction::kResume, "gpu-[1-3]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-2", "gpu-3"}));
  EXPECT_EQ(r->skipped, Names({"gpu-1"}));
  EXPECT_EQ(vmss_.scale_outs, std::vector<int64_t>({3}));
  EXPECT_TRUE(vmss_.scale_ins.empty());
}

TEST_F(SlurmPowerVmssTest, ResumeOfRunningNodesChangesNothing) {
  vmss_.Add("gpu-1");
  vmss_.Add("gpu-2", "Creating");  // coming up: asked for already
  auto r = Run(PowerAction::kResume, "gpu-[1-2]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->acted.empty());
  EXPECT_EQ(r->skipped, Names({"gpu-1", "gpu-2"}));
  EXPECT_TRUE(vmss_.scale_outs.empty());
}

TEST_F(SlurmPowerVmssTest, AnInstanceBeingDeletedDoesNotCountAsRunning) {
  vmss_.Add("gpu-1", "Deleting");
  auto r = Run(PowerAction::kResume, "gpu-1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-1"}));
  EXPECT_EQ(vmss_.scale_outs, std::vector<int64_t>({2}));
}

TEST_F(SlurmPowerVmssTest, SuspendDeletesTheInstancesOfTheNodesThatExist) {
  vmss_.Add("gpu-1");  // id 0
  vmss_.Add("gpu-2");  // id 1
  vmss_.Add("gpu-3");  // id 2
  auto r = Run(PowerAction::kSuspend, "gpu-[3,1,4]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-3", "gpu-1"}));
  EXPECT_EQ(r->skipped, Names({"gpu-4"}));
  ASSERT_EQ(vmss_.scale_ins.size(), 1u);
  EXPECT_EQ(vmss_.scale_ins[0].first, 1);
  EXPECT_EQ(vmss_.scale_ins[0].second, Names({"2", "0"}));
  EXPECT_EQ(vmss_.names(), Names({"gpu-2"}));
}

TEST_F(SlurmPowerVmssTest, SuspendOfGoneNodesIsSkipped) {
  vmss_.Add("gpu-1");
  vmss_.Add("gpu-2", "Deleting");
  auto r = Run(PowerAction::kSuspend, "gpu-[2-3]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->acted.empty());
  EXPECT_EQ(r->skipped, Names({"gpu-2", "gpu-3"}));
  EXPECT_TRUE(vmss_.scale_ins.empty());
}

TEST_F(SlurmPowerVmssTest, ResumeFailDeletesLikeSuspend) {
  vmss_.Add("gpu-1");
  vmss_.Add("gpu-2");
  auto r = Run(PowerAction::kResumeFail, "gpu-2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-2"}));
  ASSERT_EQ(vmss_.scale_ins.size(), 1u);
  EXPECT_EQ(vmss_.scale_ins[0].second, Names({"1"}));
  EXPECT_EQ(vmss_.names(), Names({"gpu-1"}));
}

TEST_F(SlurmPowerVmssTest, ATransientReadFailureIsRetried) {
  vmss_.read_faults = {Unavailable("ARM: 503"), ResourceExhausted("throttled, retry in 2s")};
  auto r = Run(PowerAction::kResume, "gpu-1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(vmss_.reads, 3);
  EXPECT_EQ(vmss_.scale_outs, std::vector<int64_t>({1}));
}

TEST_F(SlurmPowerVmssTest, APermanentFailureIsNotRetried) {
  vmss_.read_faults = {PermissionDenied("ARM: 403 AuthorizationFailed")};
  auto r = Run(PowerAction::kResume, "gpu-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("reading the scale set: ARM: 403"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(vmss_.reads, 1);
}

TEST_F(SlurmPowerVmssTest, RetriesStopAtTheResumeTimeout) {
  config_.resume_timeout = std::chrono::seconds(20);
  for (int i = 0; i < 100; ++i) vmss_.read_faults.push_back(Unavailable("ARM: 503"));
  const auto start = clock_.Now();
  auto r = Run(PowerAction::kSuspend, "gpu-1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(clock_.Now() - start, std::chrono::seconds(20));
  EXPECT_EQ(vmss_.reads, 6);  // at 0, 1, 3, 7, 15 and 20 s
}

TEST_F(SlurmPowerVmssTest, AScaleOutThatTimedOutButLandedIsNotRepeated) {
  vmss_.Add("gpu-1");
  vmss_.out_faults = {{DeadlineExceeded("operation still running after 30s"), /*lands=*/true}};
  auto r = Run(PowerAction::kResume, "gpu-[1-3]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-2", "gpu-3"}));
  EXPECT_EQ(vmss_.scale_outs, std::vector<int64_t>({3}));
  EXPECT_EQ(vmss_.target(), 3);
}

TEST_F(SlurmPowerVmssTest, AScaleOutThatFailedIsTriedAgainWithTheSameCount) {
  vmss_.out_faults = {{Unavailable("ARM: 503")}};
  auto r = Run(PowerAction::kResume, "gpu-[1-2]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(vmss_.scale_outs, std::vector<int64_t>({2, 2}));
  EXPECT_EQ(vmss_.target(), 2);
}

TEST_F(SlurmPowerVmssTest, AScaleInRetriedDeletesOnlyWhatIsLeft) {
  vmss_.Add("gpu-1");
  vmss_.Add("gpu-2");
  vmss_.in_faults = {{DeadlineExceeded("timed out"), /*lands=*/true}};
  auto r = Run(PowerAction::kSuspend, "gpu-[1-2]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"gpu-1", "gpu-2"}));
  EXPECT_TRUE(r->skipped.empty());
  EXPECT_EQ(vmss_.scale_ins.size(), 1u);  // the retry found them gone
  EXPECT_TRUE(vmss_.names().empty());
}

TEST_F(SlurmPowerVmssTest, ANodeOutsideSlurmNodesIsRefusedBeforeAnything) {
  auto r = Run(PowerAction::kResume, "gpu-[3-6]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("node gpu-[5-6] is not in slurm.nodes \"gpu-[1-4]\""),
            std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(vmss_.reads, 0);
}

TEST_F(SlurmPowerVmssTest, BadHostlistsAreInvalidArguments) {
  auto bad = Run(PowerAction::kResume, "gpu-[1-");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("slurm-resume: hostlist \"gpu-[1-\""), std::string::npos)
      << bad.status().ToString();
  auto empty = Run(PowerAction::kSuspend, "");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  config_.nodes = "gpu-[";
  auto conf = Run(PowerAction::kSuspend, "gpu-1");
  ASSERT_FALSE(conf.ok());
  EXPECT_NE(conf.status().message().find("slurm.nodes: hostlist \"gpu-[\""), std::string::npos)
      << conf.status().ToString();
  EXPECT_EQ(vmss_.reads, 0);
}

TEST_F(SlurmPowerVmssTest, TheLogFileSaysWhatHappenedWithTimestamps) {
  vmss_.Add("gpu-1");
  ASSERT_TRUE(Run(PowerAction::kResume, "gpu-[1-2]").ok());
  auto bad = Run(PowerAction::kSuspend, "gpu-9");
  ASSERT_FALSE(bad.ok());
  const std::string log = dir_.Read("power.log");
  // FakeClock's wall clock starts at 1800000000 s.
  EXPECT_NE(log.find("2027-01-15T08:00:00Z slurm-resume["), std::string::npos) << log;
  EXPECT_NE(log.find("] gpu-[1-2]: already running: gpu-1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("] gpu-[1-2]: scale out 1 -> 2 for gpu-2\n"), std::string::npos) << log;
  EXPECT_NE(log.find("] gpu-[1-2]: done: 1 acted (gpu-2), 1 skipped (gpu-1)\n"), std::string::npos)
      << log;
  EXPECT_NE(log.find("slurm-suspend["), std::string::npos) << log;
  EXPECT_NE(log.find("] gpu-9: error: failed_precondition: node gpu-9 is not in slurm.nodes"),
            std::string::npos)
      << log;
  // Every line starts with a timestamp.
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.rfind("2027-01-15T08:0", 0), 0u) << line;
  }
}

// --- commands mode: real programs (/bin/sh scripts) -------------------------

class SlurmPowerCommandsTest : public ::testing::Test {
 protected:
  SlurmPowerCommandsTest() {
    config_.nodes = "cloud-[1-3]";
    config_.resume_timeout = std::chrono::seconds(30);
    config_.log_file = dir_.Path("power.log");
  }
  // argv that appends "<word> <args...>" as one line to calls.txt.
  std::vector<std::string> Record(const std::string& word, std::vector<std::string> args) {
    std::vector<std::string> argv = {
        "/bin/sh", "-c", "echo " + word + " \"$@\" >> '" + dir_.Path("calls.txt") + "'", "sh"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  Names Calls() {
    Names out;
    std::istringstream in(dir_.Read("calls.txt"));
    for (std::string line; std::getline(in, line);) out.push_back(line);
    std::sort(out.begin(), out.end());
    return out;
  }
  Result<PowerResult> Run(PowerAction a, std::string_view hostlist) {
    return RunPowerAction(config_, a, hostlist, SystemClock());
  }

  TempDir dir_{"gantry-slurm-power"};
  SlurmPowerConfig config_;
};

TEST_F(SlurmPowerCommandsTest, NodeRunsOncePerNode) {
  config_.resume_command = Record("start", {"{node}", "of", "{nodes}"});
  auto r = Run(PowerAction::kResume, "cloud-[1-3]");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"cloud-1", "cloud-2", "cloud-3"}));
  EXPECT_EQ(Calls(), Names({"start cloud-1 of cloud-[1-3]", "start cloud-2 of cloud-[1-3]",
                            "start cloud-3 of cloud-[1-3]"}));
}

TEST_F(SlurmPowerCommandsTest, NodesRunsOnceWithTheHostlist) {
  config_.suspend_command = Record("stop", {"--nodes={nodes}"});
  auto r = Run(PowerAction::kSuspend, "cloud-1,cloud-2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->acted, Names({"cloud-1", "cloud-2"}));
  EXPECT_EQ(Calls(), Names({"stop --nodes=cloud-[1-2]"}));
}

TEST_F(SlurmPowerCommandsTest, WithoutAPlaceholderTheHostlistIsAppended) {
  config_.resume_command = Record("start", {});
  ASSERT_TRUE(Run(PowerAction::kResume, "cloud-[2-3]").ok());
  EXPECT_EQ(Calls(), Names({"start cloud-[2-3]"}));
}

TEST_F(SlurmPowerCommandsTest, ResumeFailRunsTheSuspendCommand) {
  config_.resume_command = Record("start", {"{node}"});
  config_.suspend_command = Record("stop", {"{node}"});
  ASSERT_TRUE(Run(PowerAction::kResumeFail, "cloud-2").ok());
  EXPECT_EQ(Calls(), Names({"stop cloud-2"}));
}

TEST_F(SlurmPowerCommandsTest, NoShellIsInvolved) {
  // An argument with shell syntax arrives as it is.
  config_.nodes = "n1";
  config_.resume_command = Record("start", {"{node};$(id)|`x`"});
  ASSERT_TRUE(Run(PowerAction::kResume, "n1").ok());
  EXPECT_EQ(Calls(), Names({"start n1;$(id)|`x`"}));
}

TEST_F(SlurmPowerCommandsTest, AFailingNodeIsNamedAndTheOthersStillRun) {
  config_.resume_command = {
      "/bin/sh", "-c",
      "if [ \"$1\" = cloud-2 ]; then echo no capacity >&2; exit 3; fi; echo start $1 >> '" +
          dir_.Path("calls.txt") + "'",
      "sh", "{node}"};
  auto r = Run(PowerAction::kResume, "cloud-[1-3]");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("slurm-resume: the command failed for cloud-2 (1 of 3 "
                                      "nodes); first: cloud-2: "),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("exited with 3: no capacity"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(Calls(), Names({"start cloud-1", "start cloud-3"}));
  const std::string log = dir_.Read("power.log");
  EXPECT_NE(log.find("cloud-[1-3]: stderr: no capacity\n"), std::string::npos) << log;
  EXPECT_NE(log.find("cloud-[1-3]: failed: exit code 3\n"), std::string::npos) << log;
}

TEST_F(SlurmPowerCommandsTest, OutputGoesToTheLog) {
  config_.suspend_command = {"/bin/sh", "-c", "echo stopping \"$1\"; echo warn \"$1\" >&2", "sh",
                             "{node}"};
  ASSERT_TRUE(Run(PowerAction::kSuspend, "cloud-1").ok());
  const std::string log = dir_.Read("power.log");
  EXPECT_NE(log.find("Z slurm-suspend["), std::string::npos) << log;
  EXPECT_NE(log.find("] cloud-1: called\n"), std::string::npos) << log;
  EXPECT_NE(log.find("] cloud-1: run: /bin/sh -c"), std::string::npos) << log;
  EXPECT_NE(log.find("] cloud-1: stdout: stopping cloud-1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("] cloud-1: stderr: warn cloud-1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("] cloud-1: done: 1 acted (cloud-1), 0 skipped\n"), std::string::npos) << log;
}

TEST_F(SlurmPowerCommandsTest, AMissingCommandOrProgramIsAnError) {
  auto none = Run(PowerAction::kResume, "cloud-1");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(none.status().message().find("slurm.resume_command is not set"), std::string::npos)
      << none.status().ToString();
  config_.suspend_command = {dir_.Path("no-such-program"), "{node}"};
  auto missing = Run(PowerAction::kSuspend, "cloud-1");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no-such-program"), std::string::npos)
      << missing.status().ToString();
}

TEST_F(SlurmPowerCommandsTest, ACommandPastTheTimeoutIsKilled) {
  config_.resume_timeout = std::chrono::milliseconds(300);
  config_.resume_command = {"/bin/sh", "-c", "sleep 30", "sh", "{nodes}"};
  auto r = Run(PowerAction::kResume, "cloud-1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("did not finish"), std::string::npos)
      << r.status().ToString();
}

TEST_F(SlurmPowerCommandsTest, AnUnwritableLogDoesNotStopTheAction) {
  config_.log_file = dir_.Path("no-such-dir/power.log");
  config_.resume_command = Record("start", {"{node}"});
  ASSERT_TRUE(Run(PowerAction::kResume, "cloud-1").ok());
  EXPECT_EQ(Calls(), Names({"start cloud-1"}));
}

}  // namespace
}  // namespace gantry::autoscale
