// `gantry health`: node health checks before workloads, in seconds.
//
// A check is a small object with a stable id, built from its profile
// parameters, that looks at one thing and returns one CheckResult. The runner
// runs checks in parallel where safe, each with its own timeout, under one
// global watchdog; checks that touch filesystems, devices or drivers run in a
// forked child with a deadline, so a hung statvfs() on a dead NFS mount or a
// stuck driver call can never hang the run (the child is killed and the check
// reports an error).
//
//   ASSIGN_OR_RETURN(Profile p, Profile::ForVmSize(vm_size, &known));
//   ASSIGN_OR_RETURN(auto checks, BuildChecks(p));          // config errors here
//   Context ctx; ctx.profile = &p; ctx.clock = &SystemClock();
//   ASSIGN_OR_RETURN(HealthReport r, RunHealth(checks, ctx, RunOptions{}));
//   std::cout << r.RenderTable();
//   return r.overall == Outcome::kFail ? 1 : 0;
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/imds.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::health {

class Nvml;
class Profile;

// pass < skip < warn < error < fail for the overall verdict: any fail fails
// the node; an error (the check could not run: a setup problem, NHC's
// "NHCNA") makes the run an error, which `gantry health` treats like a
// failure for the exit code but never as a hardware fault for Slurm.
enum class Outcome { kPass, kWarn, kFail, kSkip, kError };
std::string_view OutcomeName(Outcome o);  // "pass", "warn", "fail", "skip", "error"

struct CheckResult {
  std::string name;         // the check's id: "gpu_ecc", "cpu", "memory_bandwidth", ...
  Outcome outcome = Outcome::kPass;
  std::string message;      // for people; says what was found and, on warn/fail, what to do
  std::string measured;     // "8", "1.83 TiB", "21.4 GB/s"; "" when not applicable
  std::string threshold;    // "== 8", ">= 380 Gb/s", "<= 10000"; "" when none
  std::string fault_code;   // NHC/Azure fault code ("NHC2009") on fail; "NHCNA" on error
  double seconds = 0;       // filled by the runner

  Json ToJson() const;
  // For the child-process protocol and tests; InvalidArgument on bad JSON.
  static Result<CheckResult> FromJson(const Json& j);
};

// What a check may look at. Everything a test needs to fake is here.
struct Context {
  std::string root_dir = "/";  // stands for "/" when reading /proc, /sys, /dev, /etc, /var/log, /run
  const Profile* profile = nullptr;
  Nvml* nvml = nullptr;        // nullptr when NVML is not loaded (no NVIDIA driver)
  const Clock* clock = nullptr;
  std::optional<ImdsInfo> vm;  // from Azure IMDS when it answered
  std::string scratch_dir;     // where the disk bandwidth probe writes ("" = the profile's)
  // Test hook: replaces `systemctl is-active` etc. ("" = the real commands).
  std::string bin_dir;
};

class Check {
 public:
  virtual ~Check() = default;
  // The stable id ("gpu_ecc"); also the key of its parameters in a profile
  // (`checks.gpu_ecc`).
  virtual std::string name() const = 0;
  // False for probes that must not overlap others (bandwidth measurements):
  // the runner runs them one at a time after the parallel ones.
  virtual bool parallel_safe() const { return true; }
  // True for checks that touch filesystems, block devices or drivers: the
  // runner forks and runs them in a child with the check's deadline.
  virtual bool isolate() const { return false; }
  virtual std::chrono::milliseconds timeout() const { return std::chrono::seconds(10); }
  // Never throws; problems with the node are outcomes, not errors.
  virtual CheckResult Run(const Context& ctx) const = 0;
};

// Builds one check from its parameters at `key` in `config` ("checks.cpu").
// Errors name the file, line and key ("profile.yaml:7:5: key
// 'checks.cpu.sockets': expected an integer").
using CheckFactory =
    std::function<Result<std::unique_ptr<Check>>(const Config& config, const std::string& key)>;

class Registry {
 public:
  // Registering an id twice is a bug: the second registration is kept out
  // and listed in duplicates(), which BuildChecks reports as Internal.
  void Add(std::string id, CheckFactory factory);
  const std::map<std::string, CheckFactory>& factories() const { return factories_; }
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  std::map<std::string, CheckFactory> factories_;
  std::vector<std::string> duplicates_;
};

// src/health/host_checks.cc: cpu, memory, swap, filesystems, nvme, network,
// accelerated_networking, infiniband, services, containers,
// memory_bandwidth, disk_bandwidth, collective, gemm.
void RegisterHostChecks(Registry* r);
// src/health/gpu_checks.cc: gpu_count, gpu_persistence, gpu_driver, gpu_ecc,
// gpu_row_remap, gpu_xid, gpu_clocks, gpu_nvlink, gpu_pcie, gpu_thermal,
// gpu_bandwidth.
void RegisterGpuChecks(Registry* r);
// Both of the above.
const Registry& DefaultRegistry();

// One check per enabled entry under `checks:` in the profile, in the
// profile's order. Unknown check ids are refused with a suggestion.
Result<std::vector<std::unique_ptr<Check>>> BuildChecks(const Profile& profile,
                                                        const Registry* registry = nullptr);

struct RunOptions {
  std::chrono::milliseconds watchdog = std::chrono::seconds(60);  // the whole run
  int parallelism = 4;              // parallel_safe checks at once
  std::vector<std::string> only;    // run only these ids (empty: all)
  std::vector<std::string> skip;    // never run these ids (reported as skip)
};

struct HealthReport {
  std::string profile;       // profile name
  std::string vm_size;       // "" off Azure
  std::string hostname;
  std::chrono::system_clock::time_point timestamp;
  double elapsed_s = 0;
  std::vector<CheckResult> results;  // in the profile's order
  Outcome overall = Outcome::kPass;

  // Stable keys: report ("gantry.health"), version, profile, vm_size, hostname,
  // timestamp, elapsed_s, overall, results[].
  Json ToJson() const;
  // check, status, measured, threshold, message; then "verdict: ...".
  std::string RenderTable() const;
  // NHC-compatible lines, one per result, then the completion line:
  //   SUCCESS:  nhc:  Health check passed:  <name>: <message>
  //   WARNING:  nhc:  Nearing a failure threshold:  <name>: <message>
  //   ERROR:  nhc:  Health check failed:  <name>: <message> FaultCode: NHC2009
  //   Health checks completed with exit code: N.
  std::string RenderNhcLog() const;
  // JUnit XML: one <testsuite name="gantry.health"> with a <testcase> per
  // result; fail -> <failure>, error -> <error>, skip -> <skipped>.
  std::string RenderJUnit() const;
  // The first fail (or error) result, for a Slurm drain reason; nullptr if none.
  const CheckResult* FirstProblem() const;
};

// Outcome of the run: the worst result (skip counts as pass).
Outcome Overall(const std::vector<CheckResult>& results);

// Runs `checks`. Errors only for bad options; a check that hangs, crashes or
// exceeds its timeout becomes an error result ("timed out after 10 s: the
// probe was killed"), and checks not started before the watchdog fires become
// error results that say so.
Result<HealthReport> RunHealth(const std::vector<std::unique_ptr<Check>>& checks,
                               const Context& ctx, const RunOptions& options);

}  // namespace gantry::health
