// `gantry doctor [--json] [--out report.json] [--skip-bench] [--ranks N]`:
// flag parsing and printing only; the work is gantry::doctor::RunDoctor.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/advise/advise.h"
#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/imds.h"
#include "gantry/core/json.h"
#include "gantry/doctor/doctor.h"
#include "gantry/health/profile.h"

namespace gantry::cli {
namespace {

struct DoctorFlags {
  CommonFlags common;
  std::string out;
  bool skip_bench = false;
  bool skip_gemm = false;
  bool skip_health = false;
  bool skip_assess = false;
  std::string health_profile;
  int ranks = 0;
  std::string workload;
  std::string catalog;
};

int RunDoctorCommand(const DoctorFlags& flags) {
  if (!ApplyCommonFlags(flags.common)) return kExitUsage;
  doctor::DoctorOptions options;
  options.run_bench = !flags.skip_bench;
  options.run_gemm = !flags.skip_gemm;
  options.run_health = !flags.skip_health;
  options.run_assess = !flags.skip_assess;
  options.health_profile = flags.health_profile;
  if (!flags.health_profile.empty()) {
    // A profile that cannot load is a usage error, not a verdict on the node.
    const std::vector<std::string> names = health::Profile::BuiltinNames();
    const bool builtin = std::find(names.begin(), names.end(), flags.health_profile) != names.end();
    Result<health::Profile> p = builtin ? health::Profile::Builtin(flags.health_profile)
                                        : health::Profile::LoadFile(flags.health_profile);
    if (!p.ok()) return Fail("doctor", p.status().WithContext("--health-profile"));
  }
  options.ranks = flags.ranks;
  std::optional<advise::Catalog> catalog;
  if (!flags.catalog.empty()) {
    Result<advise::Catalog> c = advise::Catalog::LoadFile(flags.catalog);
    if (!c.ok()) return Fail("doctor", c.status().WithContext("--catalog"));
    catalog = std::move(*c);
    options.catalog = &*catalog;
  }
  if (!flags.workload.empty()) {
    Result<Config> cfg = Config::LoadFile(flags.workload);
    Result<advise::Workload> w =
        cfg.ok() ? advise::ParseWorkload(*cfg) : Result<advise::Workload>(cfg.status());
    if (!w.ok()) return Fail("doctor", w.status().WithContext("--workload"));
    options.workload = *w;
  }
  if (!flags.common.json && ::isatty(STDERR_FILENO)) {
    std::cerr << "gantry doctor: checking this node"
              << (options.run_bench ? " (memcpy and all_reduce benchmarks take a few seconds)" : "")
              << "...\n";
  }
  AzureImds imds;
  Result<doctor::DoctorReport> report = doctor::RunDoctor(options, imds, SystemClock());
  if (!report.ok()) return Fail("doctor", report.status());
  const std::string json = report->ToJson().dump(2) + "\n";
  if (flags.common.json) {
    std::cout << json;
  } else {
    std::cout << report->RenderText();
  }
  std::cout.flush();
  if (!flags.out.empty()) {
    Status s = WriteFileAtomic(flags.out, json);
    if (!s.ok()) return Fail("doctor", s.WithContext("--out " + flags.out));
  }
  return report->overall == doctor::Verdict::kFail ? kExitCheckFailed : kExitOk;
}

}  // namespace

void RegisterDoctor(CLI::App& app, Action* action) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "One verdict on this node: CPU, memory, NUMA, GPUs, /dev/shm, Azure VM size (IMDS), memcpy "
      "bandwidth, GEMM TFLOPS against the peak, a short all_reduce sweep and the node's catalog "
      "entry (with --workload: does it "
      "suit it). Exit 0 when ok or warn, 1 when a check fails.");
  AddCommonFlags(cmd, &flags->common);
  cmd->add_option("--out", flags->out, "Also write the JSON report to this file (atomically)");
  cmd->add_flag("--skip-bench", flags->skip_bench,
                "Skip the all_reduce sweep (its check reads 'skip')");
  cmd->add_option(
         "--ranks", flags->ranks,
         "Local ranks for the all_reduce sweep (default: one per GPU on NCCL, else one per "
         "physical core, 2 to 8)")
      ->check(CLI::Range(2, 1024));
  cmd->add_flag("--skip-gemm", flags->skip_gemm,
                "Skip the matrix-multiply measurement (its check reads 'skip')");
  cmd->add_flag(
      "--skip-health", flags->skip_health,
      "Skip the node health checks (its check reads 'skip'; `gantry health` runs them all)");
  cmd->add_flag("--skip-assess", flags->skip_assess,
                "Skip the node assessment (its check reads 'skip'; `gantry assess run --node` "
                "shows it in full)");
  cmd->add_option("--health-profile", flags->health_profile,
                  "Health profile: a built-in name or a YAML file (default: the one for the VM "
                  "size, else generic)");
  cmd->add_option("--workload", flags->workload,
                  "Workload YAML (as for gantry advise): the advice check says whether this node "
                  "suits it");
  cmd->add_option("--catalog", flags->catalog,
                  "VM catalog YAML for the advice check (default: the built-in one)");
  cmd->callback([flags, action] { *action = [flags] { return RunDoctorCommand(*flags); }; });
}

}  // namespace gantry::cli
