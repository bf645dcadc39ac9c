#include "gantry/health/slurm.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gantry::health {
namespace {

namespace fs = std::filesystem;

// ---- DecideSlurmAction: every combination ----

struct DecideCase {
  Outcome overall;
  bool drained;
  const char* reason;
  SlurmAction want;
};

TEST(DecideSlurmAction, EveryCombination) {
  const Outcome outcomes[] = {Outcome::kPass, Outcome::kWarn, Outcome::kSkip, Outcome::kError,
                              Outcome::kFail};
  // reason kinds: none, ours, ours with leading spaces, an admin's, a look-alike
  // ("gantry" without the colon, "Gantry:" in another case) that is not ours.
  const char* reasons[] = {"",
                           "gantry: filesystems: /scratch not mounted",
                           "  gantry: x",
                           "admin maintenance",
                           "gantry maintenance",
                           "Gantry: x",
                           "NHC: check"};
  auto ours = [](std::string_view r) {
    while (!r.empty() && r.front() == ' ') r.remove_prefix(1);
    return r.substr(0, 7) == "gantry:";
  };
  int n = 0;
  for (Outcome o : outcomes) {
    for (bool drained : {false, true}) {
      for (const char* reason : reasons) {
        SlurmAction want;
        if (o == Outcome::kFail) {
          want = (drained && !ours(reason)) ? SlurmAction::kKeepDrained : SlurmAction::kDrain;
        } else if (o == Outcome::kError) {
          want = drained ? SlurmAction::kKeepDrained : SlurmAction::kNone;
        } else {
          want = !drained       ? SlurmAction::kNone
                 : ours(reason) ? SlurmAction::kResume
                                : SlurmAction::kKeepDrained;
        }
        EXPECT_EQ(DecideSlurmAction(o, drained, reason), want)
            << "outcome " << static_cast<int>(o) << " drained=" << drained << " reason='" << reason
            << "'";
        ++n;
      }
    }
  }
  EXPECT_EQ(n, 5 * 2 * 7);
}

TEST(DecideSlurmAction, TheRulesSpelledOut) {
  // fail drains a node in service.
  EXPECT_EQ(DecideSlurmAction(Outcome::kFail, false, ""), SlurmAction::kDrain);
  // fail on a node gantry drained: drain again (refresh the reason).
  EXPECT_EQ(DecideSlurmAction(Outcome::kFail, true, "gantry: cpu: 1 socket"), SlurmAction::kDrain);
  // fail never overwrites an admin's reason.
  EXPECT_EQ(DecideSlurmAction(Outcome::kFail, true, "admin maintenance"),
            SlurmAction::kKeepDrained);
  // A clean pass resumes only gantry's drain.
  EXPECT_EQ(DecideSlurmAction(Outcome::kPass, true, "gantry: cpu: 1 socket"), SlurmAction::kResume);
  EXPECT_EQ(DecideSlurmAction(Outcome::kWarn, true, "gantry: cpu: 1 socket"), SlurmAction::kResume);
  EXPECT_EQ(DecideSlurmAction(Outcome::kPass, true, "admin maintenance"),
            SlurmAction::kKeepDrained);
  EXPECT_EQ(DecideSlurmAction(Outcome::kPass, true, ""), SlurmAction::kKeepDrained);
  EXPECT_EQ(DecideSlurmAction(Outcome::kPass, false, ""), SlurmAction::kNone);
  // Not drained but with a stale gantry reason (e.g. DOWN): not ours to touch.
  EXPECT_EQ(DecideSlurmAction(Outcome::kPass, false, "gantry: x"), SlurmAction::kNone);
  // An error is a setup problem, not a hardware fault.
  EXPECT_EQ(DecideSlurmAction(Outcome::kError, false, ""), SlurmAction::kNone);
  EXPECT_EQ(DecideSlurmAction(Outcome::kError, true, "gantry: x"), SlurmAction::kKeepDrained);
}

TEST(SlurmActionName, Names) {
  EXPECT_EQ(SlurmActionName(SlurmAction::kNone), "none");
  EXPECT_EQ(SlurmActionName(SlurmAction::kDrain), "drain");
  EXPECT_EQ(SlurmActionName(SlurmAction::kResume), "resume");
  EXPECT_EQ(SlurmActionName(SlurmAction::kKeepDrained), "keep-drained");
}

// ---- Parsing `scontrol show node -o` ----

// Realistic lines, shaped like Slurm 22.05's one-line output.
const char kHead[] =
    "NodeName=node01 Arch=x86_64 CoresPerSocket=48  CPUAlloc=0 CPUEfctv=96 CPUTot=96 "
    "CPULoad=0.12 AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=10.0.0.4 "
    "NodeHostName=node01 Version=22.05.8 OS=Linux 5.15.0-1050-azure #57-Ubuntu SMP Mon Oct 2 "
    "2023  RealMemory=1900000 AllocMem=0 FreeMem=1850000 Sockets=2 Boards=1 ";
const char kTail[] =
    " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  "
    "BootTime=2026-11-29T23:37:29 SlurmdStartTime=2026-11-30T04:49:06 "
    "LastBusyTime=2026-11-30T04:49:06 CfgTRES=cpu=96,mem=1900000M,billing=96 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s";

std::string Line(const std::string& state, const std::string& reason_field = "") {
  std::string s = std::string(kHead) + "State=" + state + kTail;
  if (!reason_field.empty()) s += " Reason=" + reason_field;
  return s + "\n";
}

TEST(ParseScontrolShowNode, Idle) {
  auto st = ParseScontrolShowNode(Line("IDLE"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->name, "node01");
  EXPECT_EQ(st->state, "IDLE");
  EXPECT_FALSE(st->drained);
  EXPECT_EQ(st->reason, "");
}

TEST(ParseScontrolShowNode, IdleDrainWithGantryReason) {
  auto st = ParseScontrolShowNode(Line(
      "IDLE+DRAIN", "gantry: filesystems: /scratch is not mounted [root@2026-11-30T04:49:12]"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->state, "IDLE+DRAIN");
  EXPECT_TRUE(st->drained);
  EXPECT_EQ(st->reason, "gantry: filesystems: /scratch is not mounted");
}

TEST(ParseScontrolShowNode, DrainedAndDownDrainAndMixedDraining) {
  struct {
    const char* state;
    bool drained;
  } cases[] = {{"DRAINED", true},
               {"DRAINING", true},
               {"DOWN+DRAIN", true},
               {"DOWN+DRAIN+NOT_RESPONDING", true},
               {"MIXED+DRAIN", true},
               {"ALLOCATED+DRAIN", true},
               {"IDLE+DRAIN+RESERVED", true},
               {"idle+drain", true},
               {"MIXED", false},
               {"DOWN", false},
               {"DOWN+NOT_RESPONDING", false},
               {"IDLE+COMPLETING", false},
               {"IDLE+CLOUD+POWERED_DOWN", false}};
  for (const auto& c : cases) {
    auto st = ParseScontrolShowNode(Line(c.state, "admin maintenance [root@2026-11-29T10:00:00]"));
    ASSERT_TRUE(st.ok()) << c.state << ": " << st.status().ToString();
    EXPECT_EQ(st->state, c.state);
    EXPECT_EQ(st->drained, c.drained) << c.state;
    EXPECT_EQ(st->reason, "admin maintenance") << c.state;
  }
}

TEST(ParseScontrolShowNode, MixedDrainingWithGantryReasonAndEqualsSignsInIt) {
  auto st = ParseScontrolShowNode(Line(
      "MIXED+DRAIN",
      "gantry: gpu_ecc: DRAM errors=25000000 State=bad > 20000000 [slurm@2026-11-30T01:02:03]"));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  // "State=" inside the reason must not be taken for the node's state.
  EXPECT_EQ(st->state, "MIXED+DRAIN");
  EXPECT_TRUE(st->drained);
  EXPECT_EQ(st->reason, "gantry: gpu_ecc: DRAM errors=25000000 State=bad > 20000000");
}

TEST(ParseScontrolShowNode, NextStateIsNotState) {
  std::string line =
      "NodeName=n1 NextState=RESUME Arch=x86_64 State=IDLE+DRAIN+REBOOT_REQUESTED "
      "Reason=Reboot ASAP [root@2026-11-30T04:00:00]";
  auto st = ParseScontrolShowNode(line);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->state, "IDLE+DRAIN+REBOOT_REQUESTED");
  EXPECT_EQ(st->reason, "Reboot ASAP");
}

TEST(ParseScontrolShowNode, FieldsAfterTheReasonAreNotPartOfIt) {
  auto st = ParseScontrolShowNode(Line("IDLE+DRAIN",
                                       "admin maintenance [root@2026-11-30T04:00:00] "
                                       "Comment=rack 4 Extra=x"));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->reason, "admin maintenance");
}

TEST(ParseScontrolShowNode, ReasonWithoutSuffix) {
  auto st = ParseScontrolShowNode(Line("DOWN+NOT_RESPONDING", "Not responding"));
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->drained);
  EXPECT_EQ(st->reason, "Not responding");
}

TEST(ParseScontrolShowNode, MultiLineFormat) {
  std::string text =
      "NodeName=vm Arch=x86_64 CoresPerSocket=2 \n"
      "   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.00\n"
      "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
      "   Partitions=test \n"
      "   Reason=gantry: cpu: expected 2 sockets, found 1 [root@2026-11-30T04:49:12]\n"
      "\n";
  auto st = ParseScontrolShowNode(text);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->name, "vm");
  EXPECT_EQ(st->state, "IDLE+DRAIN");
  EXPECT_EQ(st->reason, "gantry: cpu: expected 2 sockets, found 1");
}

TEST(ParseScontrolShowNode, OnlyTheFirstNodeOfSeveral) {
  std::string text =
      "NodeName=a State=IDLE Reason=x [root@2026-11-30T04:49:12]\n"
      "NodeName=b State=DOWN+DRAIN Reason=y [root@2026-11-30T04:49:12]\n";
  auto st = ParseScontrolShowNode(text);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->name, "a");
  EXPECT_EQ(st->state, "IDLE");
  EXPECT_EQ(st->reason, "x");
}

TEST(ParseScontrolShowNode, Garbage) {
  EXPECT_EQ(ParseScontrolShowNode("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseScontrolShowNode("Node nosuch not found").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseScontrolShowNode("NodeName=x Arch=x86_64").status().code(),
            StatusCode::kInvalidArgument);
}

// ---- The drain reason ----

HealthReport Report(Outcome overall, std::vector<CheckResult> results) {
  HealthReport r;
  r.profile = "generic";
  r.hostname = "node01";
  r.results = std::move(results);
  r.overall = overall;
  return r;
}

CheckResult Result_(const std::string& name, Outcome o, const std::string& msg) {
  CheckResult c;
  c.name = name;
  c.outcome = o;
  c.message = msg;
  return c;
}

TEST(SlurmDrainReason, FirstFailNotAnEarlierError) {
  auto r = Report(Outcome::kFail, {Result_("cpu", Outcome::kPass, "ok"),
                                   Result_("services", Outcome::kError, "systemctl missing"),
                                   Result_("filesystems", Outcome::kFail, "/scratch: not mounted"),
                                   Result_("swap", Outcome::kFail, "swap on")});
  EXPECT_EQ(SlurmDrainReason(r), "gantry: filesystems: /scratch: not mounted");
}

TEST(SlurmDrainReason, QuotesNewlinesAndLength) {
  auto r = Report(Outcome::kFail,
                  {Result_("gpu_xid", Outcome::kFail,
                           "XID 79 \"GPU has fallen off the bus\"\non 'GPU 3'\t\t(see dmesg)")});
  EXPECT_EQ(SlurmDrainReason(r),
            "gantry: gpu_xid: XID 79 GPU has fallen off the bus on GPU 3 (see dmesg)");
  auto long_r = Report(Outcome::kFail, {Result_("memory", Outcome::kFail, std::string(500, 'x'))});
  std::string reason = SlurmDrainReason(long_r);
  EXPECT_EQ(reason.size(), 160u);
  EXPECT_EQ(reason.substr(0, 16), "gantry: memory: ");
  EXPECT_EQ(reason.substr(reason.size() - 3), "...");
  // Never cut inside a UTF-8 sequence.
  std::string utf8;
  for (int i = 0; i < 100; ++i) utf8 += "\xc2\xb5";  // "µ"
  auto u = Report(Outcome::kFail, {Result_("memory", Outcome::kFail, utf8)});
  std::string ur = SlurmDrainReason(u, 40);
  EXPECT_LE(ur.size(), 40u);
  std::string body = ur.substr(16, ur.size() - 16 - 3);
  EXPECT_EQ(body.size() % 2, 0u) << ur;
  EXPECT_EQ(SlurmDrainReason(Report(Outcome::kFail, {Result_("nvme", Outcome::kFail, "")})),
            "gantry: nvme: failed");
  EXPECT_EQ(SlurmDrainReason(Report(Outcome::kFail, {})), "gantry: health check failed");
}

// ---- ApplySlurmVerdict against a fake scontrol ----

// A temp dir with a fake `scontrol` that appends its argv (one argument per
// line, then "--") to argv.log and answers `show node` from state.txt.
class FakeScontrol : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gantry_slurm_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    script_ = dir_ + "/scontrol";
    std::ofstream(script_)
        << "#!/bin/sh\n"
           "d=$(dirname \"$0\")\n"
           "for a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$d/argv.log\"; done\n"
           "echo -- >> \"$d/argv.log\"\n"
           "if [ \"$1\" = show ]; then\n"
           "  if [ \"$4\" != \"$(cat \"$d/name.txt\")\" ]; then\n"
           "    echo \"Node $4 not found\" >&2; exit 1; fi\n"
           "  if [ -f \"$d/down\" ]; then echo 'slurm_load_node error: Unable "
           "to contact slurm controller (connect failure)' >&2; exit 1; fi\n"
           "  cat \"$d/state.txt\"; exit 0\n"
           "fi\n"
           "if [ -f \"$d/update_fails\" ]; then\n"
           "  echo 'slurm_update error: Access/permission denied' >&2; exit 1; fi\n"
           "exit 0\n";
    ::chmod(script_.c_str(), 0755);
    SetNode("node01", "IDLE", "");
  }
  void TearDown() override { fs::remove_all(dir_); }

  void SetNode(const std::string& name, const std::string& state, const std::string& reason) {
    std::ofstream(dir_ + "/name.txt") << name << "\n";
    std::string line = "NodeName=" + name + " Arch=x86_64 CPUTot=2 State=" + state +
                       " ThreadsPerCore=1 Partitions=test";
    if (!reason.empty()) line += " Reason=" + reason + " [root@2026-11-30T04:49:12]";
    std::ofstream(dir_ + "/state.txt") << line << "\n";
  }
  void Touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << ""; }

  // The recorded calls, each a list of arguments.
  std::vector<std::vector<std::string>> Calls() {
    std::vector<std::vector<std::string>> calls(1);
    std::ifstream in(dir_ + "/argv.log");
    std::string line;
    while (std::getline(in, line)) {
      if (line == "--") {
        calls.emplace_back();
      } else {
        calls.back().push_back(line);
      }
    }
    calls.pop_back();
    return calls;
  }

  SlurmOptions Options(bool dry_run = false) {
    SlurmOptions o;
    o.node = "node01";
    o.scontrol = script_;
    o.dry_run = dry_run;
    return o;
  }

  std::string dir_, script_;
};

HealthReport Failing() {
  return Report(Outcome::kFail,
                {Result_("cpu", Outcome::kPass, "2 cores"),
                 Result_("filesystems", Outcome::kFail, "/nonexistent: \"not mounted\"")});
}
HealthReport Passing() { return Report(Outcome::kPass, {Result_("cpu", Outcome::kPass, "ok")}); }

using Args = std::vector<std::string>;

TEST_F(FakeScontrol, FailDrainsANodeInService) {
  auto o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kDrain);
  EXPECT_EQ(o->node, "node01");
  EXPECT_EQ(o->reason, "gantry: filesystems: /nonexistent: not mounted");
  EXPECT_NE(o->message.find("drained node node01"), std::string::npos) << o->message;
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0], (Args{"show", "node", "-o", "node01"}));
  EXPECT_EQ(calls[1], (Args{"update", "NodeName=node01", "State=DRAIN",
                            "Reason=gantry: filesystems: /nonexistent: not mounted"}));
}

TEST_F(FakeScontrol, PassResumesGantrysDrain) {
  SetNode("node01", "IDLE+DRAIN", "gantry: filesystems: /nonexistent: not mounted");
  auto o = ApplySlurmVerdict(Passing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kResume);
  EXPECT_EQ(o->reason, "gantry: filesystems: /nonexistent: not mounted");
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], (Args{"update", "NodeName=node01", "State=RESUME"}));
}

TEST_F(FakeScontrol, WarnResumesGantrysDrainingNode) {
  SetNode("node01", "MIXED+DRAIN", "gantry: swap: 2 GiB of swap");
  auto o =
      ApplySlurmVerdict(Report(Outcome::kWarn, {Result_("x", Outcome::kWarn, "w")}), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kResume);
  EXPECT_EQ(Calls().size(), 2u);
}

TEST_F(FakeScontrol, PassNeverResumesAnAdminsDrain) {
  SetNode("node01", "IDLE+DRAIN", "admin maintenance");
  auto o = ApplySlurmVerdict(Passing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kKeepDrained);
  EXPECT_EQ(o->reason, "admin maintenance");
  EXPECT_NE(o->message.find("admin maintenance"), std::string::npos) << o->message;
  EXPECT_EQ(Calls().size(), 1u);  // only the show
}

TEST_F(FakeScontrol, FailNeverOverwritesAnAdminsReason) {
  SetNode("node01", "DOWN+DRAIN", "admin maintenance");
  auto o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kKeepDrained);
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(FakeScontrol, FailRefreshesAChangedGantryReasonButNotAnUnchangedOne) {
  SetNode("node01", "IDLE+DRAIN", "gantry: cpu: 1 socket");
  auto o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kDrain);
  ASSERT_EQ(Calls().size(), 2u);
  EXPECT_EQ(Calls()[1][3], "Reason=gantry: filesystems: /nonexistent: not mounted");

  fs::remove(dir_ + "/argv.log");
  SetNode("node01", "IDLE+DRAIN", "gantry: filesystems: /nonexistent: not mounted");
  o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kDrain);
  EXPECT_NE(o->message.find("already drained"), std::string::npos) << o->message;
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(FakeScontrol, ErrorOnlyChangesNothing) {
  auto err = Report(Outcome::kError, {Result_("services", Outcome::kError, "no systemctl")});
  auto o = ApplySlurmVerdict(err, Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kNone);
  SetNode("node01", "IDLE+DRAIN", "gantry: cpu: 1 socket");
  o = ApplySlurmVerdict(err, Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kKeepDrained);
  EXPECT_EQ(Calls().size(), 2u);  // two shows, no update
}

TEST_F(FakeScontrol, PassOnAHealthyNodeDoesNothing) {
  auto o = ApplySlurmVerdict(Passing(), Options());
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kNone);
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(FakeScontrol, DryRunDecidesButRunsNoUpdate) {
  auto o = ApplySlurmVerdict(Failing(), Options(/*dry_run=*/true));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kDrain);
  EXPECT_EQ(o->reason, "gantry: filesystems: /nonexistent: not mounted");
  EXPECT_EQ(o->message.rfind("dry run: would drain", 0), 0u) << o->message;
  SetNode("node01", "IDLE+DRAIN", "gantry: x");
  o = ApplySlurmVerdict(Passing(), Options(/*dry_run=*/true));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->action, SlurmAction::kResume);
  auto calls = Calls();
  ASSERT_EQ(calls.size(), 2u);
  for (const auto& c : calls) EXPECT_EQ(c[0], "show");
}

TEST_F(FakeScontrol, UnknownNodeIsNotFound) {
  auto o = ApplySlurmVerdict(Failing(), [&] {
    auto opt = Options();
    opt.node = "nosuch";
    return opt;
  }());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kNotFound);
  EXPECT_NE(o.status().message().find("nosuch"), std::string::npos);
  EXPECT_EQ(Calls().size(), 1u);
}

TEST_F(FakeScontrol, ControllerDownIsUnavailableWithStderr) {
  Touch("down");
  auto o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(o.status().message().find("Unable to contact slurm controller"), std::string::npos)
      << o.status().message();
}

TEST_F(FakeScontrol, FailedUpdateIsUnavailableWithStderr) {
  Touch("update_fails");
  auto o = ApplySlurmVerdict(Failing(), Options());
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(o.status().message().find("Access/permission denied"), std::string::npos)
      << o.status().message();
}

TEST_F(FakeScontrol, MissingScontrolIsUnavailable) {
  auto opt = Options();
  opt.scontrol = dir_ + "/no-scontrol-here";
  auto o = ApplySlurmVerdict(Failing(), opt);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(o.status().message().find("no-scontrol-here"), std::string::npos);
}

TEST_F(FakeScontrol, NodeNameFromSlurmdNodenameThenHostname) {
  auto opt = Options();
  opt.node = "";
  ::setenv("SLURMD_NODENAME", "node01", 1);
  auto o = ApplySlurmVerdict(Passing(), opt);
  ::unsetenv("SLURMD_NODENAME");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node, "node01");

  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  std::string short_host(host);
  short_host = short_host.substr(0, short_host.find('.'));
  SetNode(short_host, "IDLE", "");
  o = ApplySlurmVerdict(Passing(), opt);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node, short_host);
  EXPECT_EQ(Calls().back(), (Args{"show", "node", "-o", short_host}));
}

TEST_F(FakeScontrol, BadNodeNamesAreRefusedBeforeRunningAnything) {
  for (const char* bad : {"two nodes", "-o", "a=b", "q\"x"}) {
    auto opt = Options();
    opt.node = bad;
    auto o = ApplySlurmVerdict(Failing(), opt);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(Calls().empty());
}

TEST_F(FakeScontrol, ScontrolFoundOnPath) {
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  ::setenv("PATH", (dir_ + ":" + saved).c_str(), 1);
  auto opt = Options();
  opt.scontrol = "scontrol";
  auto o = ApplySlurmVerdict(Failing(), opt);
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(Calls().size(), 2u);
}

}  // namespace
}  // namespace gantry::health
