// `gantry health`: flag parsing and printing only; the work is in
// gantry::health (profiles, checks, the runner, Slurm).
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/assess/assess.h"
#include "gantry/assess/node.h"
#include "gantry/core/clock.h"
#include "gantry/core/imds.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/core/units.h"
#include "gantry/health/check.h"
#include "gantry/health/nvml.h"
#include "gantry/health/profile.h"
#include "gantry/health/slurm.h"

namespace gantry::cli {
namespace {

struct HealthFlags {
  CommonFlags common;
  std::string profile;
  std::string extend;
  bool list_profiles = false;
  bool show_profile = false;
  std::vector<std::string> only, skip;
  std::string timeout = "60s";
  int parallel = 4;
  std::string scratch;
  std::string nhc_log;
  std::string junit;
  bool slurm = false;
  std::string node;
  std::string scontrol = "scontrol";
  bool dry_run = false;
  bool skip_assess = false;
};

// --nhc-log and --junit: a regular file is replaced atomically (a reader never
// sees half a report); a symlink, a FIFO or a device (/dev/stdout) is written
// through (appended: it may be our own stdout), since replacing it would
// replace the link or the device node.
Status WriteOutput(const std::string& path, const std::string& text) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return WriteFileAtomic(path, text);
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return IoError(path, errno);
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return IoError(path, err);
    }
    off += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return IoError(path, errno);
  return Status();
}

int ListProfiles(bool json) {
  Json out = Json::array();
  Table t({"profile", "vm sizes", "description"});
  for (const std::string& name : health::Profile::BuiltinNames()) {
    Result<health::Profile> p = health::Profile::Builtin(name);
    if (!p.ok()) return Fail("health", p.status());
    std::string sizes;
    for (const auto& s : p->vm_sizes()) sizes += (sizes.empty() ? "" : ", ") + s;
    t.AddRow({name, sizes.empty() ? "-" : sizes, p->description()});
    out.push_back({{"name", name}, {"vm_sizes", p->vm_sizes()}, {"description", p->description()}});
  }
  std::cout << (json ? out.dump(2) + "\n" : t.Render());
  return kExitOk;
}

// --profile: a built-in name, else a file.
Result<health::Profile> ProfileFromFlag(const std::string& value) {
  for (const std::string& name : health::Profile::BuiltinNames()) {
    if (name == value) return health::Profile::Builtin(name);
  }
  if (::access(value.c_str(), F_OK) == 0) return health::Profile::LoadFile(value);
  std::string names;
  for (const auto& n : health::Profile::BuiltinNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument(fmt::format(
      "--profile {}: neither a built-in profile ({}) nor an existing file", value, names));
}

// The node assessment (`gantry assess run --node`) with this run's verdict as
// its health fact, so the health checks do not run twice.
Result<assess::Assessment> AssessNode(const health::HealthReport& report,
                                      const std::optional<ImdsInfo>& vm) {
  assess::NodeOptions no;
  no.run_health = false;
  std::unique_ptr<Imds> imds;
  if (vm) {
    imds = std::make_unique<FakeImds>(*vm);
  } else {
    imds = std::make_unique<AzureImds>();
  }
  ASSIGN_OR_RETURN(assess::Resource node, assess::GatherNode(no, *imds));
  const char* verdict =
      report.overall == health::Outcome::kPass || report.overall == health::Outcome::kSkip ? "pass"
      : report.overall == health::Outcome::kWarn                                           ? "warn"
                                                                                           : "fail";
  node.body["properties"]["health"]["verdict"] = verdict;
  Json failed = Json::array();
  for (const health::CheckResult& r : report.results) {
    if (r.outcome == health::Outcome::kFail || r.outcome == health::Outcome::kError) {
      failed.push_back(r.name);
    }
  }
  node.body["properties"]["health"]["failed"] = failed;
  std::erase(node.unknown, std::string("/properties/health/verdict"));
  std::vector<assess::Resource> rs;
  rs.push_back(std::move(node));
  return assess::Assess(std::move(rs), assess::BuiltinRules(), {});
}

std::string RenderAssessment(const Result<assess::Assessment>& a) {
  std::string out = "\nnode assessment (gantry assess run --node for the fixes):\n";
  if (!a.ok()) return out + "  not assessed: " + a.status().message() + "\n";
  int passed = 0, unknown = 0, failed = 0;
  for (const assess::Finding& f : a->findings) {
    if (f.verdict.outcome == assess::Outcome::kPass) ++passed;
    if (f.verdict.outcome == assess::Outcome::kUnknown) ++unknown;
    if (f.verdict.outcome != assess::Outcome::kFail || f.suppressed) continue;
    ++failed;
    out += fmt::format("  {:<9} {}  {}\n", assess::SeverityName(f.rule->severity), f.rule->id,
                       f.verdict.message.empty() ? f.rule->title : f.verdict.message);
  }
  out += fmt::format("  {} failed, {} passed, {} unknown\n", failed, passed, unknown);
  return out;
}

int RunHealthCommand(const HealthFlags& flags) {
  if (!ApplyCommonFlags(flags.common)) return kExitUsage;
  if (flags.list_profiles) return ListProfiles(flags.common.json);
  if (!flags.slurm && (!flags.node.empty() || flags.dry_run)) {
    std::cerr << "gantry health: --node and --dry-run go with --slurm\n";
    return kExitUsage;
  }
  Result<std::chrono::nanoseconds> watchdog = ParseDuration(flags.timeout);
  if (!watchdog.ok()) return Fail("health", watchdog.status().WithContext("--timeout"));
  if (*watchdog < std::chrono::milliseconds(1)) {
    std::cerr << "gantry health: --timeout " << flags.timeout << ": must be at least 1ms\n";
    return kExitUsage;
  }

  // IMDS answers in milliseconds on Azure and within its 2 s deadline
  // elsewhere; with --profile it only names the VM in the report, so it is
  // asked later, alongside the checks.
  std::future<Result<ImdsInfo>> imds_future;
  std::optional<health::CheckResult> profile_warning;
  std::optional<health::Profile> profile;
  std::optional<ImdsInfo> vm;
  if (!flags.profile.empty()) {
    Result<health::Profile> p = ProfileFromFlag(flags.profile);
    if (!p.ok()) return Fail("health", p.status());
    profile = std::move(*p);
  } else {
    Result<ImdsInfo> info = AzureImds().Fetch();
    bool known = false;
    Result<health::Profile> p =
        health::Profile::ForVmSize(info.ok() ? info->vm_size : std::string(), &known);
    if (!p.ok()) return Fail("health", p.status());
    profile = std::move(*p);
    health::CheckResult w;
    w.name = "profile";
    w.outcome = health::Outcome::kWarn;
    if (info.ok()) {
      vm = *info;
      if (!known) {
        std::cerr << "gantry health: VM size " << info->vm_size
                  << " has no profile; using generic\n";
        w.measured = info->vm_size;
        w.message = fmt::format(
            "VM size {} has no profile; used generic (pass --profile NAME or a file to choose)",
            info->vm_size);
        profile_warning = w;
      }
    } else {
      std::cerr << "gantry health: no VM size from IMDS (not an Azure VM?); using generic\n";
      w.message = fmt::format(
          "no VM size from Azure IMDS ({}); used generic (pass --profile NAME to choose)",
          info.status().message());
      profile_warning = w;
    }
  }
  if (!flags.extend.empty()) {
    Result<health::Profile> overlay = health::Profile::LoadFile(flags.extend);
    if (!overlay.ok()) return Fail("health", overlay.status().WithContext("--extend"));
    Result<health::Profile> merged = profile->Extend(*overlay);
    if (!merged.ok()) return Fail("health", merged.status().WithContext("--extend"));
    profile = std::move(*merged);
  }
  if (flags.show_profile) {
    std::cout << profile->yaml();
    return kExitOk;
  }
  Result<std::vector<std::unique_ptr<health::Check>>> checks = health::BuildChecks(*profile);
  if (!checks.ok()) return Fail("health", checks.status());

  // No NVIDIA driver is not an error here: the GPU checks report it.
  if (!flags.profile.empty()) {
    imds_future = std::async(std::launch::async, [] { return AzureImds().Fetch(); });
  }
  Result<std::unique_ptr<health::Nvml>> nvml = health::Nvml::Load();
  health::Context ctx;
  ctx.profile = &*profile;
  ctx.nvml = nvml.ok() ? nvml->get() : nullptr;
  ctx.clock = &SystemClock();
  ctx.vm = vm;
  ctx.scratch_dir = flags.scratch;

  health::RunOptions options;
  options.watchdog = std::chrono::duration_cast<std::chrono::milliseconds>(*watchdog);
  options.parallelism = flags.parallel;
  options.only = flags.only;
  options.skip = flags.skip;
  if (!flags.common.json && ::isatty(STDERR_FILENO)) {
    std::cerr << "gantry health: running " << checks->size() << " checks of profile "
              << profile->name() << " (watchdog " << flags.timeout << ")...\n";
  }
  Result<health::HealthReport> report = health::RunHealth(*checks, ctx, options);
  if (!report.ok()) return Fail("health", report.status());
  if (imds_future.valid()) {
    // Bounded by the IMDS client's own deadline.
    Result<ImdsInfo> info = imds_future.get();
    if (info.ok()) report->vm_size = info->vm_size;
  }
  if (profile_warning) {
    report->results.insert(report->results.begin(), *profile_warning);
    report->overall = health::Overall(report->results);
  }

  // The node assessment is information next to the health verdict: it never
  // changes the exit code (a pending security update must not drain a node).
  std::optional<Result<assess::Assessment>> assessment;
  // Not under --slurm: slurmd runs the program every few minutes, and the
  // assessment's apt simulation takes seconds.
  if (!flags.skip_assess && !flags.slurm) assessment = AssessNode(*report, vm);
  if (flags.common.json) {
    Json j = report->ToJson();
    if (assessment) {
      j["assessment"] = assessment->ok() ? assess::ToJson(**assessment)
                                         : Json{{"error", assessment->status().message()}};
    }
    std::cout << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    std::cout << report->RenderTable();
    if (assessment) std::cout << RenderAssessment(*assessment);
  }
  std::cout.flush();
  int rc = (report->overall == health::Outcome::kFail || report->overall == health::Outcome::kError)
               ? kExitCheckFailed
               : kExitOk;
  if (!flags.nhc_log.empty()) {
    Status s = WriteOutput(flags.nhc_log, report->RenderNhcLog());
    if (!s.ok()) return Fail("health", s.WithContext("--nhc-log " + flags.nhc_log));
  }
  if (!flags.junit.empty()) {
    Status s = WriteOutput(flags.junit, report->RenderJUnit());
    if (!s.ok()) return Fail("health", s.WithContext("--junit " + flags.junit));
  }
  if (flags.slurm) {
    health::SlurmOptions so;
    so.node = flags.node;
    so.scontrol = flags.scontrol;
    so.dry_run = flags.dry_run;
    Result<health::SlurmOutcome> outcome = health::ApplySlurmVerdict(*report, so);
    if (!outcome.ok()) {
      std::cerr << "gantry health: --slurm: " << outcome.status().message() << "\n";
      return std::max(rc, ExitCode(outcome.status()));
    }
    (flags.common.json ? std::cerr : std::cout) << "slurm: " << outcome->message << "\n";
  }
  return rc;
}

}  // namespace

void RegisterHealth(CLI::App& app, Action* action) {
  auto flags = std::make_shared<HealthFlags>();
  CLI::App* cmd = app.add_subcommand(
      "health",
      "Node health checks in seconds (CPU, memory, filesystems, NVMe, network, InfiniBand, "
      "services, GPUs through NVML, bandwidth probes) against the profile for this VM size. "
      "Exit 0 healthy (pass or warn), 1 a check failed or could not run, 2 usage or config "
      "error.");
  AddCommonFlags(cmd, &flags->common);
  cmd->add_option("--profile", flags->profile,
                  "A built-in profile name (see --list-profiles) or a profile YAML file "
                  "(default: the profile for the Azure VM size, else generic)");
  cmd->add_option("--extend", flags->extend,
                  "A YAML file merged over the profile (add, change or turn off checks)");
  cmd->add_flag("--list-profiles", flags->list_profiles, "List the built-in profiles and exit");
  cmd->add_flag("--show-profile", flags->show_profile,
                "Print the merged profile YAML and exit without running checks");
  cmd->add_option("--only", flags->only, "Run only these check ids (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--skip", flags->skip, "Skip these check ids (comma-separated)")->delimiter(',');
  cmd->add_option("--timeout", flags->timeout,
                  "Global watchdog for the whole run; checks not finished by then are errors")
      ->capture_default_str();
  cmd->add_option("--parallel", flags->parallel, "Checks run at once (parallel-safe ones)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--scratch", flags->scratch,
                  "Directory the disk bandwidth probe writes to (default: the profile's)");
  cmd->add_option("--nhc-log", flags->nhc_log,
                  "Also write NHC-compatible log lines (with fault codes) to this file");
  cmd->add_option("--junit", flags->junit, "Also write JUnit XML to this file");
  cmd->add_flag("--slurm", flags->slurm,
                "Act as Slurm's HealthCheckProgram: drain this node on failure with reason "
                "'gantry: <first failure>', resume it on a clean pass only if gantry drained it");
  cmd->add_option("--node", flags->node,
                  "Slurm node name (default: $SLURMD_NODENAME, else the short hostname)");
  cmd->add_flag("--skip-assess", flags->skip_assess,
                "Leave out the node assessment section (gantry assess run --node; always left out "
                "with --slurm); it never changes the exit code");
  cmd->add_option("--scontrol", flags->scontrol, "The scontrol program")->capture_default_str();
  cmd->add_flag("--dry-run", flags->dry_run,
                "With --slurm: decide and print what would be done, change nothing");
  cmd->callback([flags, action] { *action = [flags] { return RunHealthCommand(*flags); }; });
}

}  // namespace gantry::cli
