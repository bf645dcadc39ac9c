// Rules over this machine (GANTRY-NODE-*): the Gantry/node resource whose
// property paths include/gantry/assess/node.h fixes. A fact the node could not
// read is absent or listed as unknown; either way the verdict is Unknown, never
// a pass.
#include <fmt/format.h>

#include "gantry/assess/node.h"
#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess::rule {
namespace {

Verdict NotRead(const Prop& p) {
  return Verdict::Unknown(fmt::format("{} could not be read on this node", p.path), p.path);
}

// A boolean fact that must be `want`.
Verdict NodeBool(const Resource& n, std::string_view path, bool want, std::string_view fix) {
  Prop p = Read(n, path);
  if (p.absent() || p.unknown) return NotRead(p);
  std::optional<bool> b = AsBool(p.value);
  if (!b) return Verdict::Unknown(fmt::format("{} is {}, not a boolean", p.path, Show(p)), p.path);
  if (*b == want) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {}; {}", p.path, *b, fix), p.path);
}

Verdict HealthVerdict(const Resource& n, const RuleContext&) {
  Prop v = Read(n, "properties.health.verdict");
  if (v.absent() || v.unknown) return NotRead(v);
  // A warning (a measurement near its threshold, or no profile for this VM
  // size) is for `gantry health` to report; the node can still take work.
  if (StringIs(v.value, "pass") || StringIs(v.value, "warn")) return Verdict::Pass();
  std::vector<std::string> failed;
  if (const Json* f = n.Get("properties.health.failed"); f && f->is_array()) {
    for (const Json& x : *f) {
      if (x.is_string()) failed.push_back(x.get<std::string>());
    }
  }
  std::string which = failed.empty() ? "" : fmt::format(" (failing: {})", Join(failed, ", "));
  return Verdict::Fail(fmt::format("{} is {}{}; run `gantry health` and fix what it reports before "
                                   "scheduling work here",
                                   v.path, Show(v), which),
                       v.path);
}

Verdict NodeAcceleratedNetworking(const Resource& n, const RuleContext&) {
  return NodeBool(n, "properties.network.acceleratedNetworking", true,
                  "no Mellanox VF is bonded to the synthetic NIC: enable accelerated networking on "
                  "the VM's network interface (the VM must be deallocated to change it)");
}

Verdict NodePublicIp(const Resource& n, const RuleContext&) {
  Prop ips = Read(n, "properties.network.publicIpAddresses");
  if (ips.absent() || ips.unknown) return NotRead(ips);
  if (!ips.value->is_array())
    return Verdict::Unknown(fmt::format("{} is not a list", ips.path), ips.path);
  if (ips.value->empty()) return Verdict::Pass();
  std::vector<std::string> list;
  for (const Json& ip : *ips.value)
    list.push_back(ip.is_string() ? ip.get<std::string>() : ip.dump());
  return Verdict::Fail(
      fmt::format("{} is [{}]; remove the public IP from the NIC and reach the node "
                  "through a VNet, Bastion or a load balancer",
                  ips.path, Join(list, ", ")),
      ips.path);
}

Verdict SecurityUpdates(const Resource& n, const RuleContext&) {
  Prop p = Read(n, "properties.os.pendingSecurityUpdates");
  if (p.absent() || p.unknown) return NotRead(p);
  std::optional<double> count = AsNumber(p.value);
  if (!count)
    return Verdict::Unknown(fmt::format("{} is {}, not a number", p.path, Show(p)), p.path);
  if (*count == 0) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {:g}; install them (e.g. `sudo apt-get upgrade`, holding "
                                   "the GPU driver packages if you pin them) and reboot if asked",
                                   p.path, *count),
                       p.path);
}

Verdict RebootRequired(const Resource& n, const RuleContext&) {
  return NodeBool(n, "properties.os.rebootRequired", false,
                  "updates installed here take effect only after a reboot; drain the node and "
                  "reboot it");
}

// gpu.count, or the verdict to return when it cannot be used.
std::optional<Verdict> GpuCount(const Resource& n, double* count) {
  Prop c = Read(n, "properties.gpu.count");
  if (c.absent() || c.unknown) return NotRead(c);
  std::optional<double> v = AsNumber(c.value);
  if (!v) return Verdict::Unknown(fmt::format("{} is {}, not a number", c.path, Show(c)), c.path);
  *count = *v;
  return std::nullopt;
}

Verdict PersistenceMode(const Resource& n, const RuleContext&) {
  double gpus = 0;
  if (auto v = GpuCount(n, &gpus)) return *v;
  if (gpus == 0) return Verdict::NotApplicable();
  return NodeBool(n, "properties.gpu.persistenceMode", true,
                  "turn persistence mode on (`sudo nvidia-smi -pm 1`, or enable "
                  "nvidia-persistenced) so that each job does not pay the driver's start-up");
}

Verdict GpuDriver(const Resource& n, const RuleContext& ctx) {
  double gpus = 0;
  if (auto v = GpuCount(n, &gpus)) return *v;
  if (gpus == 0) {
    // No GPU visible: wrong only if this VM size has GPUs.
    std::optional<std::string> size = AsString(n.Get("properties.vm.size"));
    const advise::VmSize* vm = size && ctx.catalog() ? ctx.catalog()->FindSize(*size) : nullptr;
    if (vm == nullptr || vm->gpus <= 0) return Verdict::NotApplicable();
    return Verdict::Fail(fmt::format("properties.gpu.count is 0 but {} has {:g} GPU{}; install the "
                                     "NVIDIA driver (and check `lspci` for the devices)",
                                     vm->name, vm->gpus, vm->gpus == 1 ? "" : "s"),
                         "properties.gpu.count");
  }
  Prop d = Read(n, "properties.gpu.driverVersion");
  if (d.unknown) return NotRead(d);
  if (HasValue(d.value)) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} GPU{} but {} is {}; install the NVIDIA driver", gpus,
                                   gpus == 1 ? "" : "s", d.path, d.absent() ? "absent" : Show(d)),
                       d.path);
}

Verdict AgentIdleShutdown(const Resource& n, const RuleContext& ctx) {
  Prop configured = Read(n, "properties.agent.configured");
  Prop idle = Read(n, "properties.agent.idleShutdown");
  if (configured.absent() || configured.unknown) return NotRead(configured);
  std::string msg;
  if (AsBool(configured.value) != true) {
    msg = fmt::format(
        "{} is {}: no agent configuration loads (/etc/gantry/agent.yaml); write one "
        "that enables idle shutdown",
        configured.path, Show(configured));
  } else {
    if (idle.absent() || idle.unknown) return NotRead(idle);
    if (AsBool(idle.value) == true) return Verdict::Pass();
    msg = fmt::format("{} is {}; enable idle shutdown in the agent configuration", idle.path,
                      Show(idle));
  }
  std::optional<std::string> size = AsString(n.Get("properties.vm.size"));
  PriceQuote q = Quote(ctx, n, size ? *size : "");
  bool spot = StringIs(n.Get("properties.vm.priority"), "Spot");
  std::optional<double> rate = spot ? q.price.spot : q.price.payg;
  Verdict v = Verdict::Fail(
      msg, configured.value && AsBool(configured.value) == true ? idle.path : configured.path);
  if (!rate) {
    v.cost_basis = NoAmount(q, spot ? "spot" : "payg");
    return v;
  }
  double usd = *rate * kHoursPerMonth;
  v.message += fmt::format(": up to {}/month if the node idles", Usd(usd));
  v.monthly_usd = usd;
  v.cost_basis = fmt::format("1 x {} at {}/h ({}) x {} h", q.vm->name, Usd(*rate),
                             spot ? "spot" : "payg", kHoursPerMonth);
  return v;
}

Verdict CheckpointsConfigured(const Resource& n, const RuleContext&) {
  return NodeBool(
      n, "properties.ckpt.configured", true,
      "no checkpoint configuration loads (/etc/gantry/ckpt.yaml); configure checkpoints "
      "so that a lost node costs minutes of training, not the run");
}

Verdict BackupConfigured(const Resource& n, const RuleContext&) {
  return NodeBool(n, "properties.backup.configured", true,
                  "no backup configuration loads (/etc/gantry/backup.yaml); configure backups of "
                  "checkpoints and results to durable storage");
}

Verdict StorageAccountKeys(const Resource& n, const RuleContext&) {
  Prop p = Read(n, "properties.storage.accountKeys");
  if (p.absent() || p.unknown) return NotRead(p);
  if (!p.value->is_array())
    return Verdict::Unknown(fmt::format("{} is not a list", p.path), p.path);
  if (p.value->empty()) return Verdict::Pass();
  std::vector<std::string> where;
  for (const Json& w : *p.value) where.push_back(w.is_string() ? w.get<std::string>() : w.dump());
  return Verdict::Fail(
      fmt::format("{} is [{}]: storage account keys (local auth: SharedKey). Give the node a "
                  "managed identity with the 'Storage Blob Data Contributor' role (or 'Storage "
                  "Blob Data Reader' where it only reads) on the account, remove the keys (Gantry "
                  "then uses Entra ID tokens), and disable shared key access on the account "
                  "(allowSharedKeyAccess: false)",
                  p.path, Join(where, ", ")),
      p.path);
}

}  // namespace

std::vector<Rule> NodeRules() {
  const std::vector<std::string> node = {std::string(kNodeType)};
  return {
      {
          .id = "GANTRY-NODE-001",
          .title = "Pass Gantry's health checks before taking work",
          .pillar = Pillar::kReliability,
          .severity = Severity::kHigh,
          .types = node,
          .condition = "properties.health.verdict is 'pass' or 'warn' ('fail' fails).",
          .rationale = "WAF AI workload reliability: a node with a failing GPU, NVLink or "
                       "InfiniBand link slows or breaks every job of a distributed run; it should "
                       "be drained until fixed.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://github.com/Azure/azurehpc-health-checks",
          .check = HealthVerdict,
      },
      {
          .id = "GANTRY-NODE-002",
          .title = "Run the node with accelerated networking",
          .pillar = Pillar::kPerformanceEfficiency,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.network.acceleratedNetworking is true (a Mellanox VF bonded "
                       "to the hv_netvsc interface).",
          .rationale = "azure-docs accelerated networking and PSRule "
                       "Azure.VM.AcceleratedNetworking: the live counterpart of GANTRY-VM-003.",
          .fix_arm =
              R"({"type": "Microsoft.Network/networkInterfaces", "properties": {"enableAcceleratedNetworking": true}})",
          .fix_terraform = "accelerated_networking_enabled = true",
          .references = {"PSRule Azure.VM.AcceleratedNetworking"},
          .help_uri =
              "https://learn.microsoft.com/azure/virtual-network/accelerated-networking-overview",
          .check = NodeAcceleratedNetworking,
      },
      {
          .id = "GANTRY-NODE-003",
          .title = "Give the node no public IP address",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = node,
          .condition = "properties.network.publicIpAddresses (from IMDS) is an empty list.",
          .rationale =
              "MCSB NS-2 and PSRule Azure.VM.PublicIPAttached: a public IP exposes SSH and "
              "every listening service of a training node to the internet.",
          .fix_arm =
              R"({"type": "Microsoft.Network/networkInterfaces", "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": {"subnet": {"id": "<subnet id>"}}}]}})",
          .fix_terraform = "",
          .references = {"PSRule Azure.VM.PublicIPAttached"},
          .help_uri = "https://learn.microsoft.com/azure/virtual-network/ip-services/"
                      "remove-public-ip-address-vm",
          .check = NodePublicIp,
      },
      {
          .id = "GANTRY-NODE-004",
          .title = "Install pending security updates",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = node,
          .condition = "properties.os.pendingSecurityUpdates is 0.",
          .rationale = "MCSB PV-6 (remediate vulnerabilities quickly): packages with a pending "
                       "security update are known-vulnerable.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/update-manager/overview",
          .check = SecurityUpdates,
      },
      {
          .id = "GANTRY-NODE-005",
          .title = "Reboot the node when updates require it",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.os.rebootRequired is false (/var/run/reboot-required absent).",
          .rationale = "MCSB PV-6: a kernel or library update protects nothing until the node "
                       "reboots into it.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/update-manager/overview",
          .check = RebootRequired,
      },
      {
          .id = "GANTRY-NODE-006",
          .title = "Turn on GPU persistence mode",
          .pillar = Pillar::kPerformanceEfficiency,
          .severity = Severity::kLow,
          .types = node,
          .condition = "Applies when properties.gpu.count > 0. properties.gpu.persistenceMode is "
                       "true (every GPU).",
          .rationale = "NVIDIA driver persistence documentation: without it the driver tears the "
                       "GPUs down when the last client exits and each job start pays the "
                       "initialization again.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://docs.nvidia.com/deploy/driver-persistence/index.html",
          .check = PersistenceMode,
      },
      {
          .id = "GANTRY-NODE-007",
          .title = "Have the GPU driver installed",
          .pillar = Pillar::kReliability,
          .severity = Severity::kHigh,
          .types = node,
          .condition = "When properties.gpu.count > 0, properties.gpu.driverVersion is non-empty. "
                       "When it is 0 and properties.vm.size is a GPU size in the catalog, fails "
                       "(the GPUs are not visible).",
          .rationale = "azure-docs N-series driver setup: GPU VMs need the NVIDIA driver, which "
                       "Azure Marketplace images other than the HPC/AI ones do not ship.",
          .fix_arm =
              R"({"type": "Microsoft.Compute/virtualMachines/extensions", "properties": {"publisher": "Microsoft.HpcCompute", "type": "NvidiaGpuDriverLinux", "typeHandlerVersion": "<current version, see help_uri>", "autoUpgradeMinorVersion": true}})",
          .fix_terraform = "",
          .references = {},
          .help_uri =
              "https://learn.microsoft.com/azure/virtual-machines/linux/n-series-driver-setup",
          .check = GpuDriver,
      },
      {
          .id = "GANTRY-NODE-008",
          .title = "Configure idle shutdown in the Gantry agent",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.agent.configured is true and properties.agent.idleShutdown is "
                       "true.",
          .rationale = "WAF AI workload cost guidance: GPU VMs bill by the hour whether or not a "
                       "job runs. At stake: the VM's rate (spot rate for spot VMs) x 730 h from "
                       "the catalog, the most an idle node can cost in a month.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/virtual-machines/auto-shutdown-vm",
          .check = AgentIdleShutdown,
      },
      {
          .id = "GANTRY-NODE-009",
          .title = "Configure checkpoints on training nodes",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.ckpt.configured is true (a checkpoint configuration loads).",
          .rationale = "WAF AI workload reliability (training resilience): long runs on many GPUs "
                       "meet node failures and evictions; checkpoints bound the work lost.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/"
                      "reference-checkpoint-performance-for-large-models",
          .check = CheckpointsConfigured,
      },
      {
          .id = "GANTRY-NODE-010",
          .title = "Configure backups of checkpoints and results",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.backup.configured is true (a backup configuration loads).",
          .rationale = "WAF reliability (backup and recovery): local NVMe is lost with the VM; "
                       "checkpoints and results need a copy in durable storage.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/backup/backup-overview",
          .check = BackupConfigured,
      },
      {
          .id = "GANTRY-NODE-011",
          .title = "Reach storage with Entra ID, not account keys",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = node,
          .condition = "properties.storage.accountKeys is empty (no storage account key in the "
                       "environment, /etc/environment or the Gantry configs).",
          .rationale = "WAF security and azure-docs (prevent Shared Key authorization): an "
                       "account key grants full access to every container, cannot be scoped or "
                       "attributed, and outlives the node; a managed identity with a Storage "
                       "Blob Data role is scoped, audited and has nothing to leak.",
          .fix_arm = "",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/storage/common/"
                      "shared-key-authorization-prevent",
          .check = StorageAccountKeys,
      },
  };
}

}  // namespace gantry::assess::rule
