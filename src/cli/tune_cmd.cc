// `gantry tune [--apply|--reset] [--lock] [--dry-run] [--json]`: flag parsing
// and printing only; the work is in gantry::health (tune.h).
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/health/nvml.h"
#include "gantry/health/tune.h"

namespace gantry::cli {
namespace {

struct TuneFlags {
  CommonFlags common;
  bool apply = false;
  bool reset = false;
  bool lock = false;
  bool dry_run = false;
  std::string library;
};

int RunTune(const TuneFlags& f) {
  if (!ApplyCommonFlags(f.common)) return kExitUsage;
  if (f.apply && f.reset) {
    std::cerr << "gantry tune: --apply and --reset exclude each other; pick one\n";
    return kExitUsage;
  }
  if (f.lock && !f.apply) {
    std::cerr << "gantry tune: --lock only goes with --apply (--reset clears locked clocks too)\n";
    return kExitUsage;
  }
  if (f.dry_run && !f.apply && !f.reset) {
    std::cerr << "gantry tune: --dry-run needs --apply or --reset\n";
    return kExitUsage;
  }
  bool changes = f.apply || f.reset;
  const char* verb = f.apply ? "gantry tune --apply" : "gantry tune --reset";
  // Refuse early, before touching the driver: a clear message beats NVML's
  // "Insufficient Permissions" halfway through the GPUs.
  if (changes && !f.dry_run) {
    Status root = health::RequireRoot(static_cast<unsigned>(geteuid()), verb);
    if (!root.ok()) {
      std::cerr << root.message() << "\n";  // it names the command already
      return ExitCode(root);
    }
  }
  Result<std::unique_ptr<health::Nvml>> nvml = health::Nvml::Load(f.library);
  if (!nvml.ok()) {
    // A verdict on the node (nothing to tune here), not a usage error.
    std::cerr << "gantry tune: no NVIDIA GPU (NVML not loaded: " << nvml.status().message()
              << ")\n";
    return kExitCheckFailed;
  }
  Result<std::vector<health::GpuTuneState>> gpus = health::ReadTuneState(**nvml);
  if (!gpus.ok()) return Fail("tune", gpus.status());
  if (gpus->empty()) {
    std::cerr << "gantry tune: no NVIDIA GPU (NVML sees 0 devices)\n";
    return kExitCheckFailed;
  }

  if (!changes) {
    if (f.common.json) {
      Json j;
      j["report"] = "gantry.tune";
      j["library"] = (*nvml)->library();
      j["gpus"] = Json::array();
      for (const health::GpuTuneState& g : *gpus) j["gpus"].push_back(g.ToJson());
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << health::RenderTuneTable(*gpus);
    }
    return kExitOk;
  }

  health::TuneOptions options;
  options.mode = f.apply ? health::TuneMode::kApply : health::TuneMode::kReset;
  options.lock = f.lock;
  health::TunePlan plan = health::PlanTune(*gpus, options);
  Status applied;
  if (!f.dry_run) applied = health::ApplyTune(**nvml, plan);

  if (f.common.json) {
    Json j;
    j["report"] = "gantry.tune";
    j["mode"] = f.apply ? (f.lock ? "apply_lock" : "apply") : "reset";
    j["dry_run"] = f.dry_run;
    j["calls"] = Json::array();
    for (const health::TuneCall& c : plan.calls) j["calls"].push_back(c.ToJson());
    j["notes"] = plan.notes;
    j["ok"] = applied.ok();
    if (!applied.ok()) j["error"] = applied.message();
    std::cout << j.dump(2) << "\n";
  } else {
    for (const std::string& n : plan.notes) std::cout << n << "\n";
    if (plan.calls.empty()) {
      std::cout << "nothing to change\n";
    } else {
      std::cout << (f.dry_run ? "would call:\n" : "called:\n");
      for (const health::TuneCall& c : plan.calls) std::cout << "  " << c.ToString() << "\n";
    }
    if (f.reset && !f.dry_run) {
      std::cout << "persistence mode left as it is (turn it off with nvidia-smi -pm 0 if wanted)\n";
    }
  }
  if (!applied.ok()) return Fail("tune", applied);
  return kExitOk;
}

}  // namespace

void RegisterTune(CLI::App& app, Action* action) {
  auto flags = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "GPU clocks and persistence: show current vs maximum application clocks per GPU; --apply "
      "sets them to the maximum (as Azure's max_gpu_app_clocks.sh) and enables persistence mode.\n"
      "Exit codes: 0 ok (also when nothing needed changing), 1 no NVIDIA GPU/NVML or an NVML call "
      "failed, 2 usage error or not root for --apply/--reset.");
  AddCommonFlags(cmd, &flags->common);
  cmd->add_flag("--apply", flags->apply,
                "Enable persistence mode and set application clocks to the maximum (root); GPUs "
                "already there are left alone");
  cmd->add_flag("--lock", flags->lock,
                "With --apply: lock the graphics clock at its maximum (nvidia-smi -lgc) instead of "
                "setting application clocks");
  cmd->add_flag("--reset", flags->reset,
                "Restore default application clocks and unlock clocks (root); persistence mode is "
                "left as it is");
  cmd->add_flag(
      "--dry-run", flags->dry_run,
      "With --apply/--reset: print the NVML calls instead of making them (no root needed)");
  cmd->add_option("--nvml", flags->library,
                  "NVML library to load (default $GANTRY_NVML_LIBRARY, else libnvidia-ml.so.1)");
  cmd->callback([flags, action] { *action = [flags] { return RunTune(*flags); }; });
}

}  // namespace gantry::cli
