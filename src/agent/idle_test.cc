#include "gantry/agent/idle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <utmpx.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>

#include "testing/fake_root.h"

namespace gantry::agent {
namespace {

using alerting::Sink;

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeProbe : public ActivityProbe {
 public:
  explicit FakeProbe(Activity* a) : a_(a) {}
  Activity Probe() override { return *a_; }

 private:
  Activity* a_;
};

// Records every alert the Notifier delivers.
class RecordingSink : public Sink {
 public:
  explicit RecordingSink(std::vector<Alert>* out, std::mutex* mu) : out_(out), mu_(mu) {}
  const std::string& name() const override { return name_; }
  Status Send(const std::vector<Alert>& alerts, int64_t) override {
    std::lock_guard<std::mutex> lock(*mu_);
    out_->insert(out_->end(), alerts.begin(), alerts.end());
    return Status::Ok();
  }

 private:
  std::vector<Alert>* out_;
  std::mutex* mu_;
  std::string name_ = "recording";
};

std::vector<Signal> Load(double cpu, std::vector<double> gpus = {}) {
  std::vector<Signal> s = {{"cpu_utilization", {}, cpu}};
  for (size_t i = 0; i < gpus.size(); ++i) {
    s.push_back({"gpu_utilization", {{"gpu", std::to_string(i)}}, gpus[i]});
  }
  return s;
}

int CountLines(const std::string& path) {
  std::ifstream f(path);
  int n = 0;
  std::string line;
  while (std::getline(f, line)) ++n;
  return n;
}

// A detector with a fake probe, a fake clock and a recording notifier.
class IdleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<Sink>> sinks;
    sinks.push_back(std::make_unique<RecordingSink>(&alerts_, &mu_));
    notifier_ = std::make_unique<Notifier>(std::move(sinks), 64, clock_);
    fired_ = dir_.path() + "/fired";
    config_.enabled = true;
    config_.cpu_threshold = 10;
    config_.gpu_threshold = 5;
    config_.idle_for = minutes(15);
    config_.warn_before = minutes(5);
    config_.action = {"sh", "-c", "echo ran >> '" + fired_ + "'"};
    config_.cancel_file = dir_.path() + "/idle.cancel";
  }

  void Make() {
    auto d = IdleDetector::Create(config_, std::make_unique<FakeProbe>(&activity_), notifier_.get(),
                                  clock_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    det_ = std::move(d).value();
  }

  // Advances the fake clock by `d` and runs one Update with `signals`.
  IdleStatus Tick(std::chrono::nanoseconds d, const std::vector<Signal>& signals = Load(1, {0})) {
    clock_.Advance(d);
    return det_->Update(clock_.Now(), signals);
  }

  std::vector<Alert> Alerts() {
    EXPECT_TRUE(notifier_->Flush(std::chrono::seconds(10)));
    std::lock_guard<std::mutex> lock(mu_);
    return alerts_;
  }
  std::vector<std::string> AlertEvents() {
    std::vector<std::string> ev;
    for (const Alert& a : Alerts()) {
      ev.push_back(a.labels.at("alertname") + (a.firing ? " firing" : " resolved"));
    }
    return ev;
  }

  testing::FakeRoot dir_;
  FakeClock clock_;
  std::mutex mu_;
  std::vector<Alert> alerts_;
  std::unique_ptr<Notifier> notifier_;
  Activity activity_;
  IdleConfig config_;
  std::string fired_;
  std::unique_ptr<IdleDetector> det_;
};

TEST_F(IdleTest, IdleForTheConfiguredTimeWarnsThenRunsTheActionExactlyOnce) {
  Make();
  EXPECT_EQ(Tick(seconds(0)).state, IdleState::kIdleSince);
  EXPECT_EQ(Tick(minutes(9)).state, IdleState::kIdleSince);
  EXPECT_TRUE(AlertEvents().empty());
  IdleStatus s = Tick(minutes(1));  // 10 min idle: 5 min before the action
  EXPECT_EQ(s.state, IdleState::kWarning);
  EXPECT_EQ(s.action_at_ms - s.idle_since_ms, 15 * 60 * 1000);
  EXPECT_THAT(AlertEvents(), ElementsAre("GantryIdleShutdownPending firing"));
  EXPECT_THAT(Alerts()[0].annotations.at("summary"), HasSubstr("gantry agent idle cancel"));
  EXPECT_EQ(Alerts()[0].labels.at("severity"), "warning");
  EXPECT_EQ(Tick(seconds(299)).state, IdleState::kWarning);
  EXPECT_FALSE(std::filesystem::exists(fired_));

  s = Tick(seconds(1));  // 15 min idle
  EXPECT_EQ(s.state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
  EXPECT_EQ(CountLines(fired_), 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Tick(minutes(10)).state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
  EXPECT_EQ(CountLines(fired_), 1);
  EXPECT_EQ(det_->status().actions_run, 1);
  EXPECT_EQ(det_->status().last_action_result, "exited with status 0");
  EXPECT_THAT(AlertEvents(),
              ElementsAre("GantryIdleShutdownPending firing", "GantryIdleShutdownPending resolved",
                          "GantryIdleActionTaken firing"));
  // Warning and its resolution are one alert to Alertmanager (same labels).
  EXPECT_EQ(Alerts()[0].labels, Alerts()[1].labels);

  // Used again, then idle again: a new period runs the action a second time.
  EXPECT_EQ(Tick(seconds(15), Load(80)).state, IdleState::kActive);
  EXPECT_THAT(AlertEvents().back(), "GantryIdleActionTaken resolved");
  Tick(seconds(15));
  EXPECT_EQ(Tick(minutes(10)).state, IdleState::kWarning);
  EXPECT_EQ(Tick(minutes(5)).state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
  EXPECT_EQ(CountLines(fired_), 2);
}

TEST_F(IdleTest, ActivityDuringTheWarningCancelsAndRestartsTheTimer) {
  Make();
  Tick(seconds(0));
  EXPECT_EQ(Tick(minutes(10)).state, IdleState::kWarning);
  activity_.ssh_connections = 1;
  IdleStatus s = Tick(minutes(1));
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre("1 ssh connection(s)"));
  EXPECT_THAT(AlertEvents(), ElementsAre("GantryIdleShutdownPending firing",
                                         "GantryIdleShutdownPending resolved"));
  EXPECT_THAT(Alerts()[1].annotations.at("summary"), HasSubstr("ssh"));
  activity_.ssh_connections = 0;
  EXPECT_EQ(Tick(minutes(1)).state, IdleState::kIdleSince);
  // The timer restarted: 9 more minutes is not yet the warning, 10 is.
  EXPECT_EQ(Tick(minutes(9)).state, IdleState::kIdleSince);
  EXPECT_EQ(Tick(minutes(1)).state, IdleState::kWarning);
  EXPECT_EQ(Tick(minutes(5)).state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
  EXPECT_EQ(CountLines(fired_), 1);
}

TEST_F(IdleTest, CancelCallAndCancelFileCancelTheWarning) {
  Make();
  Tick(seconds(0));
  EXPECT_EQ(Tick(minutes(10)).state, IdleState::kWarning);
  det_->Cancel();
  IdleStatus s = Tick(seconds(15));
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre(HasSubstr("gantry agent idle cancel")));
  EXPECT_EQ(Tick(seconds(15)).state, IdleState::kIdleSince);  // consumed
  EXPECT_EQ(Tick(minutes(10)).state, IdleState::kWarning);
  std::ofstream(config_.cancel_file) << "";
  s = Tick(seconds(15));
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre(HasSubstr(config_.cancel_file)));
  EXPECT_FALSE(std::filesystem::exists(config_.cancel_file));  // consumed
  EXPECT_EQ(Tick(seconds(15)).state, IdleState::kIdleSince);
  EXPECT_FALSE(std::filesystem::exists(fired_));
}

TEST_F(IdleTest, CpuGpuAndMissingSignalsKeepTheNodeActive) {
  Make();
  IdleStatus s = Tick(seconds(0), Load(10));  // at the threshold counts as busy
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre("cpu 10.0% >= 10%"));
  s = Tick(seconds(15), Load(1, {0, 99}));
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre("gpu 1 99.0% >= 5%"));
  s = Tick(seconds(15), {});  // first tick: no rates yet
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre(HasSubstr("no cpu_utilization")));
  // CPU used by ignored processes does not count.
  activity_.ignored_cpu_percent = 30;
  EXPECT_EQ(Tick(seconds(15), Load(35)).state, IdleState::kIdleSince);
  EXPECT_EQ(Tick(seconds(15), Load(45)).state, IdleState::kActive);
}

TEST_F(IdleTest, SessionsKernelsJobsAndBusyProcessesBlockIdleness) {
  Make();
  struct Case {
    std::function<void(Activity*)> set;
    std::string reason;
  };
  std::vector<Case> cases = {
      {[](Activity* a) { a->user_sessions = 2; }, "2 interactive session(s)"},
      {[](Activity* a) { a->ssh_connections = 1; }, "1 ssh connection(s)"},
      {[](Activity* a) { a->jupyter = 1; }, "1 Jupyter kernel(s)/terminal(s)"},
      {[](Activity* a) { a->slurm_jobs = 3; }, "3 running Slurm job(s)"},
      {[](Activity* a) { a->busy_processes = {"rsync"}; }, "busy process rsync running"},
  };
  for (const Case& c : cases) {
    activity_ = {};
    c.set(&activity_);
    for (int i = 0; i < 8; ++i) {
      IdleStatus s = Tick(minutes(5));
      ASSERT_EQ(s.state, IdleState::kActive) << c.reason;
      EXPECT_THAT(s.busy_reasons, ElementsAre(c.reason));
    }
  }
  activity_ = {};
  EXPECT_EQ(Tick(minutes(5)).state, IdleState::kIdleSince);
  EXPECT_FALSE(std::filesystem::exists(fired_));
  EXPECT_TRUE(AlertEvents().empty());
}

TEST_F(IdleTest, NoActionMeansLogAndNotifyOnly) {
  config_.action.clear();
  Make();
  Tick(seconds(0));
  EXPECT_EQ(Tick(minutes(10)).state, IdleState::kWarning);
  EXPECT_EQ(Tick(minutes(5)).state, IdleState::kActionTaken);
  EXPECT_EQ(det_->status().actions_run, 0);
  EXPECT_THAT(AlertEvents(),
              ElementsAre("GantryIdleShutdownPending firing", "GantryIdleShutdownPending resolved",
                          "GantryIdleActionTaken firing"));
  EXPECT_THAT(Alerts()[2].annotations.at("summary"), HasSubstr("no action configured"));
}

TEST_F(IdleTest, FailingActionIsReportedAsCritical) {
  config_.action = {"sh", "-c", "echo disk on fire; exit 4"};
  Make();
  Tick(seconds(0));
  Tick(minutes(10));
  EXPECT_EQ(Tick(minutes(5)).state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
  EXPECT_EQ(det_->status().last_action_result, "exited with status 4");
  std::vector<Alert> a = Alerts();
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.back().labels.at("alertname"), "GantryIdleActionFailed");
  EXPECT_EQ(a.back().labels.at("severity"), "critical");
  EXPECT_THAT(a.back().annotations.at("summary"), HasSubstr("exited with status 4"));
  // In use again: every idle alert resolves.
  EXPECT_EQ(Tick(seconds(15), Load(90)).state, IdleState::kActive);
  EXPECT_THAT(AlertEvents(),
              ElementsAre("GantryIdleShutdownPending firing", "GantryIdleShutdownPending resolved",
                          "GantryIdleActionTaken firing", "GantryIdleActionFailed firing",
                          "GantryIdleActionTaken resolved", "GantryIdleActionFailed resolved"));
}

TEST_F(IdleTest, CoarseTicksStillGiveTheWholeWarningWindow) {
  Make();
  Tick(seconds(0));
  // The first tick after the warning point comes late (14 min): the action
  // still waits warn_before from the warning.
  EXPECT_EQ(Tick(minutes(14)).state, IdleState::kWarning);
  EXPECT_EQ(Tick(minutes(4)).state, IdleState::kWarning);
  EXPECT_EQ(Tick(minutes(1)).state, IdleState::kActionTaken);
  ASSERT_TRUE(det_->WaitForAction(std::chrono::seconds(30)));
}

TEST(IdleConfigValidation, FifteenMinuteFloorIsEnforcedAndNamed) {
  IdleConfig c;
  c.idle_for = minutes(5);
  c.warn_before = minutes(1);
  Status s = ValidateIdleConfig(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("15-minute floor"));
  EXPECT_THAT(s.message(), HasSubstr("allow_below_floor"));
  Activity a;
  auto d = IdleDetector::Create(c, std::make_unique<FakeProbe>(&a), nullptr);
  EXPECT_FALSE(d.ok());
  c.allow_below_floor = true;
  EXPECT_TRUE(ValidateIdleConfig(c).ok());
  c.idle_for = minutes(15);
  c.allow_below_floor = false;
  EXPECT_TRUE(ValidateIdleConfig(c).ok());
}

Result<IdleConfig> ParseText(const std::string& yaml) {
  auto cfg = Config::LoadString(yaml, "agent.yaml");
  if (!cfg.ok()) return cfg.status();
  return ParseIdleConfig(*cfg);
}

TEST(ParseIdleConfig, FullExample) {
  auto c = ParseText(
      "idle:\n"
      "  cpu_threshold: 3.5\n"
      "  gpu_threshold: 2\n"
      "  idle_for: 45m\n"
      "  warn_before: 10m\n"
      "  action: [shutdown, -h, now]\n"
      "  action_timeout: 2m\n"
      "  ignore_processes: [node_exporter]\n"
      "  busy_processes: [rsync, azcopy]\n"
      "  check_ssh: false\n"
      "  ssh_port: 2222\n"
      "  check_jupyter: false\n"
      "  check_slurm: false\n"
      "  cancel_file: /tmp/x.cancel\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->cpu_threshold, 3.5);
  EXPECT_EQ(c->gpu_threshold, 2);
  EXPECT_EQ(c->idle_for, minutes(45));
  EXPECT_EQ(c->warn_before, minutes(10));
  EXPECT_THAT(c->action, ElementsAre("shutdown", "-h", "now"));
  EXPECT_EQ(c->action_timeout, minutes(2));
  EXPECT_THAT(c->ignore_processes, ElementsAre("node_exporter"));
  EXPECT_THAT(c->busy_processes, ElementsAre("rsync", "azcopy"));
  EXPECT_FALSE(c->check_ssh);
  EXPECT_EQ(c->ssh_port, 2222);
  EXPECT_FALSE(c->check_jupyter);
  EXPECT_FALSE(c->check_slurm);
  EXPECT_EQ(c->cancel_file, "/tmp/x.cancel");

  c = ParseText("listen: ':9500'\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled);
  c = ParseText("idle:\n");  // bare section: on, with defaults
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->idle_for, minutes(30));
  c = ParseText("idle:\n  enabled: false\n");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->enabled);
  c = ParseText("idle:\n  enabled: true\n");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->idle_for, minutes(30));
  EXPECT_TRUE(c->action.empty());
}

void ExpectError(const std::string& yaml, const std::vector<std::string>& parts) {
  auto c = ParseText(yaml);
  ASSERT_FALSE(c.ok()) << yaml;
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  for (const auto& p : parts) EXPECT_THAT(c.status().message(), HasSubstr(p)) << yaml;
  std::cout << "  error: " << c.status().message() << "\n";
}

TEST(ParseIdleConfig, ErrorsNameTheKey) {
  ExpectError("idle:\n  idle_for: 5m\n",
              {"agent.yaml:2", "idle.idle_for", "15-minute floor", "idle.allow_below_floor"});
  ExpectError("idle:\n  idle_for: 20m\n  warn_before: 20m\n", {"idle.warn_before", "shorter"});
  ExpectError("idle:\n  action: shutdown -h now\n", {"idle.action", "list"});
  ExpectError("idle:\n  idel_for: 20m\n", {"idel_for", "idle_for"});
  ExpectError("idle:\n  cpu_threshold: 150\n", {"idle.cpu_threshold", "150"});
  ExpectError("idle:\n  ssh_port: 0\n", {"idle.ssh_port"});
  ExpectError("idle:\n  idle_for: soon\n", {"idle.idle_for", "duration"});
  auto ok = ParseText("idle:\n  idle_for: 1m\n  warn_before: 10s\n  allow_below_floor: true\n");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->idle_for, minutes(1));
}

// ---------------------------------------------------------------- real probe

std::string StatLine(int pid, const std::string& comm, int ppid, uint64_t utime, uint64_t stime) {
  return std::to_string(pid) + " (" + comm + ") S " + std::to_string(ppid) +
         " 1 1 0 -1 4194304 100 0 0 0 " + std::to_string(utime) + " " + std::to_string(stime) +
         " 0 0 20 0 1 0 100 1000 10\n";
}

void AddProc(const testing::FakeRoot& root, int pid, const std::string& comm, int ppid,
             const std::vector<std::string>& args, uint64_t utime = 0, uint64_t stime = 0) {
  std::string dir = "/proc/" + std::to_string(pid);
  root.Write(dir + "/stat", StatLine(pid, comm, ppid, utime, stime));
  std::string cmdline;
  for (const auto& a : args) cmdline += a + std::string(1, '\0');
  root.Write(dir + "/cmdline", cmdline);
  root.Write(dir + "/comm", comm + "\n");
}

void WriteUtmp(const std::string& path, const std::vector<std::pair<short, pid_t>>& entries) {
  std::ofstream f(path, std::ios::binary);
  for (const auto& [type, pid] : entries) {
    utmpx u;
    std::memset(&u, 0, sizeof u);
    u.ut_type = type;
    u.ut_pid = pid;
    std::strncpy(u.ut_line, "pts/0", sizeof u.ut_line);
    std::strncpy(u.ut_user, "alice", sizeof u.ut_user);
    f.write(reinterpret_cast<const char*>(&u), sizeof u);
  }
}

const char kTcpHeader[] =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n";

class SystemProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.busy_processes = {"rsync", "train.py"};
    config_.ignore_processes = {"node_exporter"};
    // Jupyter: a kernel, a server with a terminal (bash) and a non-shell helper.
    AddProc(root_, 100, "python3", 200,
            {"/usr/bin/python3", "-m", "ipykernel_launcher", "-f",
             "/home/a/.local/share/jupyter/runtime/kernel-4f1c.json"});
    AddProc(root_, 200, "jupyter-lab", 1,
            {"/usr/bin/python3", "/usr/local/bin/jupyter-lab", "--no-browser"});
    AddProc(root_, 201, "bash", 200, {"/bin/bash", "-l"});
    AddProc(root_, 202, "node", 200, {"node", "/opt/lsp/server.js"});
    AddProc(root_, 300, "rsync", 1, {"rsync", "-a", "/data", "/mnt"});
    AddProc(root_, 301, "python3", 1, {"python3", "/opt/train.py", "--epochs", "3"});
    AddProc(root_, 400, "node_exporter", 1, {"/usr/bin/node_exporter"}, 100, 50);
    AddProc(root_, 500, "slurmstepd", 1, {"slurmstepd: [42.batch]"});
    AddProc(root_, 600, "sshd", 1, {"sshd: alice@pts/0"});
    root_.Write("/proc/stat",
                "cpu  1000 0 500 8500 0 0 0 0 0 0\ncpu0 1000 0 500 8500 0 0 0 0 0 0\n");
    root_.Write(
        "/proc/net/tcp",
        std::string(kTcpHeader) +
            "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n"
            "   1: 0400000A:0016 0100000A:D2F0 01 00000000:00000000 00:00000000 00000000 0 0 2\n"
            "   2: 0400000A:0050 0100000A:D2F1 01 00000000:00000000 00:00000000 00000000 0 0 3\n"
            "   3: 0400000A:C350 0100000A:0016 01 00000000:00000000 00:00000000 00000000 0 0 4\n");
    root_.Write(
        "/proc/net/tcp6",
        std::string(kTcpHeader) +
            "   0: 00000000000000000000000001000000:0016 00000000000000000000000001000000:B3A2 01 "
            "00000000:00000000 00:00000000 00000000 0 0 5\n");
    root_.Mkdir("/run");
    WriteUtmp(root_.path() + "/run/utmp",
              {{BOOT_TIME, 0}, {LOGIN_PROCESS, 700}, {USER_PROCESS, 600}, {USER_PROCESS, 99999}});
  }

  SystemProbeOptions Options(std::string squeue = "") {
    SystemProbeOptions o;
    o.root = root_.path();
    o.squeue = std::move(squeue);
    o.hostname = "node-7";
    o.squeue_every = seconds(0);
    return o;
  }

  testing::FakeRoot root_;
  IdleConfig config_;
};

TEST_F(SystemProbeTest, ReadsSessionsKernelsJobsAndProcessesFromTheRoot) {
  auto probe = MakeSystemActivityProbe(config_, Options());
  Activity a = probe->Probe();
  EXPECT_EQ(a.user_sessions, 1);    // pid 600 alive; 99999 is a stale record
  EXPECT_EQ(a.ssh_connections, 2);  // one IPv4 and one IPv6 established to :22
  EXPECT_EQ(a.jupyter, 2);          // the kernel and the terminal
  EXPECT_EQ(a.slurm_jobs, 1);       // no squeue: slurmstepd processes
  EXPECT_THAT(a.busy_processes, ElementsAre("rsync", "train.py"));
  EXPECT_EQ(a.ignored_cpu_percent, 0);  // no previous probe yet
}

TEST_F(SystemProbeTest, IgnoredProcessesCpuIsAShareOfAllTicks) {
  auto probe = MakeSystemActivityProbe(config_, Options());
  probe->Probe();
  // 1000 more ticks in total, 250 of them node_exporter's.
  root_.Write("/proc/stat", "cpu  1500 0 500 9000 0 0 0 0 0 0\n");
  root_.Write("/proc/400/stat", StatLine(400, "node_exporter", 1, 300, 100));
  Activity a = probe->Probe();
  EXPECT_DOUBLE_EQ(a.ignored_cpu_percent, 25.0);
}

TEST_F(SystemProbeTest, SqueueCountsRunningJobsOnThisNode) {
  std::string args_file = root_.path() + "/squeue.args";
  std::string squeue = root_.Write(
      "/bin/squeue", "#!/bin/sh\necho \"$@\" > '" + args_file + "'\nprintf '123\\n456\\n'\n", true);
  auto probe = MakeSystemActivityProbe(config_, Options(squeue));
  Activity a = probe->Probe();
  EXPECT_EQ(a.slurm_jobs, 2);
  std::string args;
  std::getline(std::ifstream(args_file), args);
  EXPECT_EQ(args, "-h -w node-7 -t R -o %i");
  // A failing squeue falls back to slurmstepd processes.
  root_.Write(
      "/bin/squeue",
      "#!/bin/sh\necho \"$@\" > '" + args_file + "'\necho 'slurm_load_jobs error' >&2\nexit 1\n",
      true);
  EXPECT_EQ(probe->Probe().slurm_jobs, 1);
  // ... and squeue is not asked again for a while.
  std::filesystem::remove(args_file);
  EXPECT_EQ(probe->Probe().slurm_jobs, 1);
  EXPECT_FALSE(std::filesystem::exists(args_file));
}

TEST_F(SystemProbeTest, SqueueAnswerIsReusedWithinSqueueEvery) {
  std::string args_file = root_.path() + "/squeue.args";
  std::string squeue = root_.Write(
      "/bin/squeue", "#!/bin/sh\necho \"$@\" > '" + args_file + "'\nprintf '7\\n8\\n9\\n'\n", true);
  SystemProbeOptions o = Options(squeue);
  o.squeue_every = seconds(3600);
  auto probe = MakeSystemActivityProbe(config_, o);
  EXPECT_EQ(probe->Probe().slurm_jobs, 3);
  std::filesystem::remove(args_file);
  EXPECT_EQ(probe->Probe().slurm_jobs, 3);
  EXPECT_FALSE(std::filesystem::exists(args_file));
}

TEST_F(SystemProbeTest, DisabledChecksSeeNothing) {
  config_.check_ssh = false;
  config_.check_jupyter = false;
  config_.check_slurm = false;
  config_.busy_processes.clear();
  auto probe = MakeSystemActivityProbe(config_, Options());
  Activity a = probe->Probe();
  EXPECT_EQ(a.user_sessions, 0);
  EXPECT_EQ(a.ssh_connections, 0);
  EXPECT_EQ(a.jupyter, 0);
  EXPECT_EQ(a.slurm_jobs, 0);
  EXPECT_TRUE(a.busy_processes.empty());
}

TEST(SystemProbe, EmptyRootIsIdleAndDrivesTheDetector) {
  testing::FakeRoot root;
  IdleConfig c;
  c.idle_for = minutes(1);
  c.warn_before = seconds(10);
  c.allow_below_floor = true;
  c.cancel_file = root.path() + "/cancel";
  SystemProbeOptions o;
  o.root = root.path();
  o.squeue = "";
  FakeClock clock;
  auto d = IdleDetector::Create(c, MakeSystemActivityProbe(c, o), nullptr, clock);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->Update(clock.Now(), Load(0)).state, IdleState::kIdleSince);
  clock.Advance(seconds(50));
  EXPECT_EQ((*d)->Update(clock.Now(), Load(0)).state, IdleState::kWarning);
  // A kernel appears during the warning: cancelled.
  AddProc(root, 100, "python3", 1, {"python3", "-m", "ipykernel_launcher"});
  clock.Advance(seconds(5));
  IdleStatus s = (*d)->Update(clock.Now(), Load(0));
  EXPECT_EQ(s.state, IdleState::kActive);
  EXPECT_THAT(s.busy_reasons, ElementsAre("1 Jupyter kernel(s)/terminal(s)"));
}

TEST(IdleStatusJson, Fields) {
  IdleStatus st;
  Json j = IdleStatusJson(st);
  EXPECT_EQ(j["state"], "active");
  EXPECT_TRUE(j["idle_since"].is_null());
  EXPECT_TRUE(j["action_at"].is_null());
  st.state = IdleState::kWarning;
  st.idle_since_ms = 1'800'000'000'000;
  st.action_at_ms = 1'800'000'900'000;
  st.busy_reasons = {"x"};
  j = IdleStatusJson(st);
  EXPECT_EQ(j["state"], "warning");
  EXPECT_EQ(j["idle_since"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(j["action_at"], "2027-01-15T08:15:00.000Z");
  EXPECT_EQ(j["busy_reasons"], Json::array({"x"}));
  EXPECT_EQ(j["actions_run"], 0);
}

TEST(IdleStateName, Names) {
  EXPECT_EQ(IdleStateName(IdleState::kActive), "active");
  EXPECT_EQ(IdleStateName(IdleState::kIdleSince), "idle_since");
  EXPECT_EQ(IdleStateName(IdleState::kWarning), "warning");
  EXPECT_EQ(IdleStateName(IdleState::kActionTaken), "action_taken");
}

}  // namespace
}  // namespace gantry::agent
