// `gantry tune`: read GPU clock state, plan NVML calls, apply them.
#include "gantry/health/tune.h"

#include <fmt/format.h>

#include "gantry/core/table.h"

namespace gantry::health {

Json GpuTuneState::ToJson() const {
  Json j;
  j["gpu"] = index;
  j["name"] = name;
  j["pci_bus_id"] = pci_bus_id;
  j["persistence"] = persistence_known ? Json(persistence) : Json(nullptr);
  if (clocks_known) {
    j["clocks_mhz"] = {{"app_graphics", clocks.app_graphics},
                       {"app_memory", clocks.app_memory},
                       {"max_graphics", clocks.max_graphics},
                       {"max_memory", clocks.max_memory},
                       {"default_app_graphics", clocks.default_app_graphics},
                       {"default_app_memory", clocks.default_app_memory}};
  } else {
    j["clocks_mhz"] = nullptr;
  }
  j["at_max"] = AtMax();
  // NVML has no query for locked clocks; say so rather than guess.
  j["locked_clocks"] = "unknown";
  if (!problem.empty()) j["problem"] = problem;
  return j;
}

Result<std::vector<GpuTuneState>> ReadTuneState(Nvml& nvml) {
  ASSIGN_OR_RETURN(int count, nvml.DeviceCount());
  std::vector<GpuTuneState> out;
  for (int i = 0; i < count; ++i) {
    GpuTuneState s;
    s.index = i;
    std::vector<std::string> problems;
    if (Result<std::string> n = nvml.Name(i); n.ok()) {
      s.name = *n;
    } else {
      problems.push_back(n.status().message());
    }
    if (Result<std::string> b = nvml.PciBusId(i); b.ok()) s.pci_bus_id = *b;
    if (Result<bool> p = nvml.PersistenceMode(i); p.ok()) {
      s.persistence_known = true;
      s.persistence = *p;
    } else {
      problems.push_back(p.status().message());
    }
    if (Result<GpuClocks> c = nvml.Clocks(i); c.ok()) {
      s.clocks_known = true;
      s.clocks = *c;
    } else {
      problems.push_back(c.status().message());
    }
    s.problem = fmt::format("{}", fmt::join(problems, "; "));
    out.push_back(std::move(s));
  }
  return out;
}

std::string RenderTuneTable(const std::vector<GpuTuneState>& gpus) {
  Table t({"gpu", "name", "persistence", "app clocks (gfx/mem)", "max (gfx/mem)",
           "default (gfx/mem)", "state"});
  t.SetAlign(0, Table::Align::kRight);
  for (const GpuTuneState& g : gpus) {
    std::string pm = g.persistence_known ? (g.persistence ? "on" : "off") : "?";
    std::string app = "?", max = "?", def = "?", state = "unknown";
    if (g.clocks_known) {
      app = fmt::format("{}/{} MHz", g.clocks.app_graphics, g.clocks.app_memory);
      max = fmt::format("{}/{} MHz", g.clocks.max_graphics, g.clocks.max_memory);
      def = fmt::format("{}/{} MHz", g.clocks.default_app_graphics, g.clocks.default_app_memory);
      state = g.AtMax() ? "at max" : "below max";
    }
    if (!g.problem.empty()) state += " (" + g.problem + ")";
    t.AddRow({std::to_string(g.index), g.name, pm, app, max, def, state});
  }
  return t.Render() +
         "locked clocks: NVML cannot report them (use --lock / --reset to set or clear)\n";
}

std::string TuneCall::ToString() const {
  switch (kind) {
    case Kind::kSetPersistenceMode:
      return fmt::format("nvmlDeviceSetPersistenceMode(GPU {}, {})", gpu,
                         a != 0 ? "enabled" : "disabled");
    case Kind::kSetApplicationsClocks:
      return fmt::format("nvmlDeviceSetApplicationsClocks(GPU {}, mem {} MHz, graphics {} MHz)",
                         gpu, a, b);
    case Kind::kResetApplicationsClocks:
      return fmt::format("nvmlDeviceResetApplicationsClocks(GPU {})", gpu);
    case Kind::kSetGpuLockedClocks:
      return fmt::format("nvmlDeviceSetGpuLockedClocks(GPU {}, min {} MHz, max {} MHz)", gpu, a, b);
    case Kind::kResetGpuLockedClocks:
      return fmt::format("nvmlDeviceResetGpuLockedClocks(GPU {})", gpu);
  }
  return "?";
}

Json TuneCall::ToJson() const {
  Json j;
  switch (kind) {
    case Kind::kSetPersistenceMode:
      j["call"] = "nvmlDeviceSetPersistenceMode";
      j["gpu"] = gpu;
      j["enabled"] = a != 0;
      break;
    case Kind::kSetApplicationsClocks:
      j["call"] = "nvmlDeviceSetApplicationsClocks";
      j["gpu"] = gpu;
      j["memory_mhz"] = a;
      j["graphics_mhz"] = b;
      break;
    case Kind::kResetApplicationsClocks:
      j["call"] = "nvmlDeviceResetApplicationsClocks";
      j["gpu"] = gpu;
      break;
    case Kind::kSetGpuLockedClocks:
      j["call"] = "nvmlDeviceSetGpuLockedClocks";
      j["gpu"] = gpu;
      j["min_mhz"] = a;
      j["max_mhz"] = b;
      break;
    case Kind::kResetGpuLockedClocks:
      j["call"] = "nvmlDeviceResetGpuLockedClocks";
      j["gpu"] = gpu;
      break;
  }
  return j;
}

TunePlan PlanTune(const std::vector<GpuTuneState>& gpus, const TuneOptions& options) {
  TunePlan plan;
  using Kind = TuneCall::Kind;
  for (const GpuTuneState& g : gpus) {
    if (options.mode == TuneMode::kReset) {
      if (g.clocks_known && (g.clocks.app_graphics != g.clocks.default_app_graphics ||
                             g.clocks.app_memory != g.clocks.default_app_memory)) {
        plan.calls.push_back({Kind::kResetApplicationsClocks, g.index});
      } else if (g.clocks_known) {
        plan.notes.push_back(
            fmt::format("GPU {}: application clocks already at defaults", g.index));
      }
      plan.calls.push_back({Kind::kResetGpuLockedClocks, g.index});
      continue;
    }
    if (g.persistence_known && !g.persistence) {
      plan.calls.push_back({Kind::kSetPersistenceMode, g.index, 1});
    }
    if (!g.clocks_known) {
      plan.notes.push_back(fmt::format("GPU {}: clocks not readable, left alone{}", g.index,
                                       g.problem.empty() ? "" : " (" + g.problem + ")"));
      continue;
    }
    if (options.lock) {
      plan.calls.push_back(
          {Kind::kSetGpuLockedClocks, g.index, g.clocks.max_graphics, g.clocks.max_graphics});
    } else if (g.AtMax()) {
      plan.notes.push_back(fmt::format("GPU {}: application clocks already at maximum ({}/{} MHz)",
                                       g.index, g.clocks.app_graphics, g.clocks.app_memory));
    } else {
      plan.calls.push_back(
          {Kind::kSetApplicationsClocks, g.index, g.clocks.max_memory, g.clocks.max_graphics});
    }
  }
  return plan;
}

Status RequireRoot(unsigned euid, std::string_view what) {
  if (euid == 0) return Status::Ok();
  return PermissionDenied(fmt::format(
      "{} needs root (NVML refuses clock and persistence changes from other users): run it with "
      "sudo, or add --dry-run to see the calls it would make",
      what));
}

Status ApplyTune(Nvml& nvml, const TunePlan& plan) {
  Status first;
  std::vector<std::string> more;
  for (const TuneCall& c : plan.calls) {
    Status s;
    switch (c.kind) {
      case TuneCall::Kind::kSetPersistenceMode:
        s = nvml.SetPersistenceMode(c.gpu, c.a != 0);
        break;
      case TuneCall::Kind::kSetApplicationsClocks:
        s = nvml.SetApplicationsClocks(c.gpu, c.a, c.b);
        break;
      case TuneCall::Kind::kResetApplicationsClocks:
        s = nvml.ResetApplicationsClocks(c.gpu);
        break;
      case TuneCall::Kind::kSetGpuLockedClocks:
        s = nvml.SetGpuLockedClocks(c.gpu, c.a, c.b);
        break;
      case TuneCall::Kind::kResetGpuLockedClocks:
        s = nvml.ResetGpuLockedClocks(c.gpu);
        break;
    }
    if (s.ok()) continue;
    if (first.ok()) {
      first = s;
    } else {
      more.push_back(s.message());
    }
  }
  if (first.ok() || more.empty()) return first;
  return Status(first.code(), first.message() + "; " + fmt::format("{}", fmt::join(more, "; ")));
}

}  // namespace gantry::health
