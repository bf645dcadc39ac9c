// Rules over Machine Learning workspace computes: security (GANTRY-COMPUTE-*)
// and the cost rules of clusters and compute instances (GANTRY-COST-001..005).
#include <fmt/format.h>

#include <cmath>

#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess::rule {
namespace {

constexpr std::string_view kAmlCompute = "AmlCompute";
constexpr std::string_view kComputeInstance = "ComputeInstance";

// The computes Azure Policy's ML built-ins cover. Attached Kubernetes and AKS
// computes (and Databricks, HDInsight, attached VMs ...) take their network and
// authentication from the attached service, so the rules leave them out.
bool IsManagedCompute(const Resource& c) {
  std::string t = ComputeType(c);
  return EqualsIgnoreCase(t, kAmlCompute) || EqualsIgnoreCase(t, kComputeInstance);
}

// NotApplicable unless the compute is of `want` (or of either managed kind when
// `want` is empty); Unknown when the compute type itself is.
std::optional<Verdict> OnlyFor(const Resource& c, std::string_view want = "") {
  Prop t = Read(c, "properties.computeType");
  if (t.unknown) return UnknownProp(t);
  if (want.empty() ? !IsManagedCompute(c) : !StringIs(t.value, want)) {
    return Verdict::NotApplicable();
  }
  return std::nullopt;
}

std::string VmSizeOf(const Resource& c) {
  std::optional<std::string> s = AsString(c.Get("properties.properties.vmSize"));
  return s ? *s : "";
}

bool IsLowPriority(const Resource& c) {
  return StringIs(c.Get("properties.properties.vmPriority"), "LowPriority");
}

std::string ManagedIsolation(const Resource& ws) {
  std::optional<std::string> m = AsString(ws.Get("properties.managedNetwork.isolationMode"));
  if (m && (EqualsIgnoreCase(*m, "AllowInternetOutbound") ||
            EqualsIgnoreCase(*m, "AllowOnlyApprovedOutbound"))) {
    return *m;
  }
  return "";
}

// A value in the workload tag that means batch inference (separators ignored).
bool BatchInferenceTag(const Resource& c) {
  std::string v;
  for (char ch : TagLower(c, "workload")) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')) v += ch;
  }
  return v == "batchinference" || v == "batchscoring" || v == "inference" || v == "scoring";
}

// The batch deployment that runs on `c`, if the input has one.
const Resource* BatchDeploymentOn(const Resource& c, const RuleContext& ctx) {
  std::string ws = FirstSegment(c.name), name = LastSegment(c.name);
  for (const Resource* d : ctx.OfType(kBatchDeployment)) {
    std::optional<std::string> ref = AsString(d->Get("properties.compute"));
    if (!ref || !EqualsIgnoreCase(LastSegment(*ref), name)) continue;
    // An id names its workspace; "azureml:name" or a bare name means the deployment's own.
    std::string lower = AsciiLower(*ref);
    size_t at = lower.find("/workspaces/");
    std::string ref_ws = at == std::string::npos
                             ? FirstSegment(d->name)
                             : FirstSegment(std::string_view(*ref).substr(at + 12));
    if (EqualsIgnoreCase(ref_ws, ws)) return d;
  }
  return nullptr;
}

// --- security ------------------------------------------------------------------

Verdict LocalAuth(const Resource& c, const RuleContext&) {
  if (auto v = OnlyFor(c)) return *v;
  return RequireBool(c, "properties.disableLocalAuth", true, false,
                     "set it to true so that only Microsoft Entra ID identities can use the "
                     "compute (it is fixed at creation: recreate the compute)");
}

Verdict InVnet(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c)) return *v;
  Prop subnet = Read(c, "properties.properties.subnet.id");
  if (subnet.unknown) return UnknownProp(subnet);
  if (HasValue(subnet.value)) return Verdict::Pass();
  // A managed-network workspace places its computes in the managed VNet and
  // refuses a custom subnet: the compute is in a VNet without naming one.
  const Resource* ws = ParentWorkspace(ctx, c);
  if (ws == nullptr) {
    return Verdict::Unknown(
        fmt::format("{} is absent and the workspace '{}' is not in the input; include it to tell "
                    "whether it has a managed network, or set a subnet",
                    subnet.path, FirstSegment(c.name)),
        subnet.path);
  }
  if (ws->IsUnknown("properties.managedNetwork.isolationMode")) {
    return UnknownProp(Read(*ws, "properties.managedNetwork.isolationMode"));
  }
  if (!ManagedIsolation(*ws).empty()) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is absent and workspace '{}' has no managed network; set it "
                                   "to a subnet of your VNet, or give the workspace "
                                   "managedNetwork.isolationMode 'AllowOnlyApprovedOutbound'",
                                   subnet.path, ws->name),
                       subnet.path);
}

Verdict NoPublicSsh(const Resource& c, const RuleContext&) {
  if (auto v = OnlyFor(c)) return *v;
  if (StringIs(c.Get("properties.computeType"), kComputeInstance)) {
    return RequireString(c, "properties.properties.sshSettings.sshPublicAccess", "Disabled", true,
                         "set it to 'Disabled' and reach the instance through the VNet or Bastion");
  }
  Prop port = Read(c, "properties.properties.remoteLoginPortPublicAccess");
  Prop subnet = Read(c, "properties.properties.subnet.id");
  if (port.unknown) return UnknownProp(port);
  if (StringIs(port.value, "Disabled")) return Verdict::Pass();
  if (StringIs(port.value, "Enabled")) {
    return Verdict::Fail(
        fmt::format("{} is 'Enabled': port 22 is open on every node; set it to 'Disabled'",
                    port.path),
        port.path);
  }
  // NotSpecified (the default) closes the port only when the cluster is in a VNet.
  if (subnet.unknown) return UnknownProp(subnet);
  if (HasValue(subnet.value)) return Verdict::Pass();
  return Verdict::Fail(fmt::format("{} is {} (NotSpecified) and the cluster has no "
                                   "properties.properties.subnet.id, so port 22 is open on every "
                                   "node; set it to 'Disabled'",
                                   port.path, Show(port)),
                       port.path);
}

Verdict NoNodePublicIp(const Resource& c, const RuleContext&) {
  if (auto v = OnlyFor(c)) return *v;
  return RequireBool(c, "properties.properties.enableNodePublicIp", false, true,
                     "set it to false (the compute then needs a subnet or a managed network)");
}

Verdict LatestOsImage(const Resource& c, const RuleContext&) {
  if (auto v = OnlyFor(c, kComputeInstance)) return *v;
  Prop latest = Read(c, "properties.properties.osImageMetadata.isLatestOsImageVersion");
  if (latest.unknown) return UnknownProp(latest);
  if (latest.absent()) {
    // Read-only: a template creates the instance from the current image.
    if (c.origin != Origin::kLive) return Verdict::NotApplicable();
    return Verdict::Unknown(fmt::format("{} is absent from the live document", latest.path),
                            latest.path);
  }
  if (AsBool(latest.value) == false) {
    return Verdict::Fail(fmt::format("{} is false: the instance runs an old OS image; recreate it "
                                     "to get the latest image and its security updates",
                                     latest.path),
                         latest.path);
  }
  return Verdict::Pass();
}

Verdict DedicatedBatchInference(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c, kAmlCompute)) return *v;
  const Resource* dep = BatchDeploymentOn(c, ctx);
  bool tagged = BatchInferenceTag(c);
  if ((!tagged && dep == nullptr) || TagIsTrue(c, "interruptible")) return Verdict::NotApplicable();
  Prop prio = Read(c, "properties.properties.vmPriority");
  if (prio.unknown) return UnknownProp(prio);
  if (!StringIs(prio.value, "LowPriority")) return Verdict::Pass();  // default Dedicated
  std::string why = dep ? fmt::format("batch deployment '{}' runs on it", dep->name)
                        : fmt::format("tags.workload is '{}'", *c.Tag("workload"));
  return Verdict::Fail(fmt::format("{} is 'LowPriority' but {}; set it to 'Dedicated' so that "
                                   "scoring jobs are not preempted (or tag the cluster "
                                   "interruptible=true if they may be)",
                                   prio.path, why),
                       prio.path);
}

// --- cost ------------------------------------------------------------------------

Verdict WithAmount(Verdict v, std::optional<double> usd, std::string basis) {
  v.monthly_usd = usd;
  v.cost_basis = std::move(basis);
  return v;
}

// Hourly rate of one node: the low-priority (spot) rate for LowPriority computes.
struct NodeRate {
  std::optional<double> rate;
  std::string label;  // "payg" or "spot"
  PriceQuote q;
};
NodeRate RateOf(const Resource& c, const RuleContext& ctx) {
  NodeRate r;
  r.q = Quote(ctx, c, VmSizeOf(c));
  bool low = IsLowPriority(c);
  r.label = low ? "spot" : "payg";
  r.rate = low ? r.q.price.spot : r.q.price.payg;
  return r;
}

Verdict IdleShutdown(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c, kComputeInstance)) return *v;
  Prop idle = Read(c, "properties.properties.idleTimeBeforeShutdown");
  if (idle.unknown) return UnknownProp(idle);
  if (HasValue(idle.value)) {
    std::optional<std::string> s = AsString(idle.value);
    std::optional<double> secs = s ? ParseIsoDuration(*s) : std::nullopt;
    if (!secs) {
      return Verdict::Fail(fmt::format("{} is {}, not an ISO 8601 duration; set e.g. 'PT60M'",
                                       idle.path, Show(idle)),
                           idle.path);
    }
    if (*secs < 15 * 60 || *secs > 3 * 86400) {
      return Verdict::Fail(fmt::format("{} is {}, outside the allowed 15 minutes to 3 days; set "
                                       "e.g. 'PT60M'",
                                       idle.path, Show(idle)),
                           idle.path);
    }
    return Verdict::Pass();
  }
  NodeRate r = RateOf(c, ctx);
  std::string msg = fmt::format(
      "{} is absent: an idle instance runs until someone stops it; set "
      "it to e.g. 'PT60M'",
      idle.path);
  if (!r.rate)
    return WithAmount(Verdict::Fail(msg, idle.path), std::nullopt, NoAmount(r.q, r.label));
  double usd = *r.rate * kHoursPerMonth;
  return WithAmount(
      Verdict::Fail(fmt::format("{}: up to {}/month if left running idle", msg, Usd(usd)),
                    idle.path),
      usd, fmt::format("1 x {} at {}/h x {} h", r.q.vm->name, Usd(*r.rate), kHoursPerMonth));
}

Verdict StopSchedule(const Resource& c, const RuleContext&) {
  if (auto v = OnlyFor(c, kComputeInstance)) return *v;
  Prop sched = Read(c, "properties.properties.schedules.computeStartStop");
  if (sched.unknown) return UnknownProp(sched);
  if (sched.value && sched.value->is_array()) {
    for (const Json& s : *sched.value) {
      if (!s.is_object()) continue;
      bool stop = s.contains("action") && StringIs(&s["action"], "Stop");
      bool off = s.contains("status") && StringIs(&s["status"], "Disabled");
      if (stop && !off) return Verdict::Pass();
    }
  }
  return WithAmount(
      Verdict::Fail(fmt::format("{} has no enabled schedule with action 'Stop'; add one (e.g. cron "
                                "'0 20 * * *') so that the instance stops after working hours",
                                sched.path),
                    sched.path),
      std::nullopt,
      "no amount: the cost of an instance left running is stated once, under GANTRY-COST-001");
}

Verdict MinNodesZero(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c, kAmlCompute)) return *v;
  Prop min = Read(c, "properties.properties.scaleSettings.minNodeCount");
  if (min.unknown) return UnknownProp(min);
  if (min.absent()) return Verdict::Pass();  // default 0
  std::optional<double> n = AsNumber(min.value);
  if (n && *n == 0) return Verdict::Pass();
  std::string msg = fmt::format(
      "{} is {}; set it to 0 so that the cluster releases its nodes "
      "when no job runs",
      min.path, Show(min));
  NodeRate r = RateOf(c, ctx);
  if (!n || *n < 0) return Verdict::Fail(msg, min.path);
  if (!r.rate)
    return WithAmount(Verdict::Fail(msg, min.path), std::nullopt, NoAmount(r.q, r.label));
  double usd = *n * *r.rate * kHoursPerMonth;
  return WithAmount(
      Verdict::Fail(fmt::format("{}: up to {}/month while idle", msg, Usd(usd)), min.path), usd,
      fmt::format("{:g} idle node{} x {} at {}/h ({}) x {} h", *n, *n == 1 ? "" : "s", r.q.vm->name,
                  Usd(*r.rate), r.label, kHoursPerMonth));
}

// Longest idle time before a cluster scales down. A node left idle is billed
// in full; 30 minutes keeps nodes warm between the jobs of an interactive
// session (allocation and image pull take minutes) while bounding the waste of
// each idle period to half a node-hour per node.
constexpr double kMaxIdleSeconds = 30 * 60;

Verdict IdleScaleDown(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c, kAmlCompute)) return *v;
  Prop idle = Read(c, "properties.properties.scaleSettings.nodeIdleTimeBeforeScaleDown");
  Prop min = Read(c, "properties.properties.scaleSettings.minNodeCount");
  Prop max = Read(c, "properties.properties.scaleSettings.maxNodeCount");
  if (idle.unknown) return UnknownProp(idle);
  if (!min.unknown && !max.unknown) {
    std::optional<double> lo = min.absent() ? 0.0 : AsNumber(min.value);
    std::optional<double> hi = AsNumber(max.value);
    if (lo && hi && *lo >= *hi) return Verdict::NotApplicable();  // never scales down
  }
  if (idle.absent()) return Verdict::Pass();  // the service default is 120 s
  std::optional<std::string> s = AsString(idle.value);
  std::optional<double> secs = s ? ParseIsoDuration(*s) : std::nullopt;
  if (!secs) {
    return Verdict::Fail(
        fmt::format("{} is {}, not an ISO 8601 duration; set it to 'PT30M' or less", idle.path,
                    Show(idle)),
        idle.path);
  }
  if (*secs <= kMaxIdleSeconds) return Verdict::Pass();
  std::string msg = fmt::format("{} is {}; set it to 'PT30M' or less", idle.path, Show(idle));
  NodeRate r = RateOf(c, ctx);
  std::optional<double> nodes = max.unknown ? std::nullopt : AsNumber(max.value);
  double extra_h = (*secs - kMaxIdleSeconds) / 3600;
  if (!r.rate || !nodes) {
    return WithAmount(Verdict::Fail(msg, idle.path), std::nullopt,
                      !r.rate ? NoAmount(r.q, r.label) : "no amount: maxNodeCount is not known");
  }
  // How often the cluster drains is not in the template: the amount is per idle period.
  double per_period = *nodes * *r.rate * extra_h;
  return WithAmount(
      Verdict::Fail(fmt::format("{}: each idle period costs up to {} more", msg, Usd(per_period)),
                    idle.path),
      std::nullopt,
      fmt::format("no monthly amount (the number of idle periods is not known): per period {:g} "
                  "node{} x {} at {}/h x {:g} h beyond 30 min = {}",
                  *nodes, *nodes == 1 ? "" : "s", r.q.vm->name, Usd(*r.rate), extra_h,
                  Usd(per_period)));
}

Verdict LowPriorityTraining(const Resource& c, const RuleContext& ctx) {
  if (auto v = OnlyFor(c, kAmlCompute)) return *v;
  if (!TagIsTrue(c, "interruptible") || BatchInferenceTag(c)) return Verdict::NotApplicable();
  Prop prio = Read(c, "properties.properties.vmPriority");
  if (prio.unknown) return UnknownProp(prio);
  if (StringIs(prio.value, "LowPriority")) return Verdict::Pass();
  std::string msg = fmt::format(
      "{} is {} (Dedicated) on a cluster tagged interruptible=true; set "
      "it to 'LowPriority' and checkpoint so that preempted jobs resume",
      prio.path, prio.absent() ? "absent" : Show(prio));
  PriceQuote q = Quote(ctx, c, VmSizeOf(c));
  Prop max = Read(c, "properties.properties.scaleSettings.maxNodeCount");
  std::optional<double> nodes = max.unknown ? std::nullopt : AsNumber(max.value);
  if (!q.price.payg || !q.price.spot) {
    return WithAmount(Verdict::Fail(msg, prio.path), std::nullopt,
                      NoAmount(q, !q.price.payg ? "payg" : "spot"));
  }
  if (!nodes) {
    return WithAmount(Verdict::Fail(msg, prio.path), std::nullopt,
                      "no amount: maxNodeCount is not known");
  }
  double usd = (*q.price.payg - *q.price.spot) * *nodes * kHoursPerMonth;
  return WithAmount(
      Verdict::Fail(fmt::format("{}: saves up to {}/month at full scale", msg, Usd(usd)),
                    prio.path),
      usd,
      fmt::format("({}/h payg - {}/h low priority) x {:g} max nodes x {} h of {}",
                  Usd(*q.price.payg), Usd(*q.price.spot), *nodes, kHoursPerMonth, q.vm->name));
}

}  // namespace

std::vector<Rule> ComputeRules() {
  const std::vector<std::string> compute = {std::string(kCompute)};
  return {
      {
          .id = "GANTRY-COMPUTE-001",
          .title = "Disable local authentication on Machine Learning computes",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = compute,
          .condition = "Applies to computeType AmlCompute and ComputeInstance. "
                       "properties.disableLocalAuth is true; absent (local auth on) fails.",
          .rationale = "Azure ML security baseline IM-1 (centralized identity) and Defender for "
                       "Cloud's AML recommendation that compute local authentication be disabled "
                       "(Medium). Azure Policy e96a9a5f covers only AmlCompute and "
                       "ComputeInstance; PSRule checks every compute, including attached "
                       "Kubernetes and AKS computes whose authentication the cluster owns, which "
                       "Gantry leaves out as Policy does.",
          .fix_arm = R"({"properties": {"computeType": "AmlCompute", "disableLocalAuth": true}})",
          .fix_terraform = "local_auth_enabled = false",
          .references = {"PSRule Azure.ML.DisableLocalAuth", "Checkov CKV_AZURE_142",
                         "Policy e96a9a5f", "Policy a6f9a2d0"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-integrate-azure-policy",
          .check = LocalAuth,
      },
      {
          .id = "GANTRY-COMPUTE-002",
          .title = "Run Machine Learning computes in a virtual network",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = compute,
          .condition = "Applies to AmlCompute and ComputeInstance. "
                       "properties.properties.subnet.id is non-empty, or the compute's workspace "
                       "has properties.managedNetwork.isolationMode 'AllowInternetOutbound' or "
                       "'AllowOnlyApprovedOutbound'. Unknown when the subnet is absent and the "
                       "workspace is not in the input.",
          .rationale = "Azure ML security baseline NS-1 (network segmentation) and Defender for "
                       "Cloud's AML recommendation that computes be in a virtual network "
                       "(Medium). azure-docs: computes of a managed-network workspace run in the "
                       "managed VNet and cannot take a custom subnet, so PSRule's ComputeVnet "
                       "(and Policy 7804b5c7) wrongly fail them; Gantry passes them.",
          .fix_arm = R"({"properties": {"properties": {"subnet": {"id": "<subnet id>"}}}})",
          .fix_terraform = "subnet_resource_id = azurerm_subnet.training.id",
          .references = {"PSRule Azure.ML.ComputeVnet", "Policy 7804b5c7"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet",
          .check = InVnet,
      },
      {
          .id = "GANTRY-COMPUTE-003",
          .title = "Close the public SSH port of Machine Learning computes",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = compute,
          .condition = "AmlCompute: properties.properties.remoteLoginPortPublicAccess is "
                       "'Disabled', or it is 'NotSpecified'/absent and "
                       "properties.properties.subnet.id is set. ComputeInstance: "
                       "properties.properties.sshSettings.sshPublicAccess is 'Disabled' or absent "
                       "(default Disabled).",
          .rationale = "Azure ML security baseline NS-2 and the AmlCompute API: NotSpecified (the "
                       "default) closes port 22 only when the cluster is in a VNet and leaves it "
                       "open on every node otherwise. SSH should be reached through the VNet, "
                       "never the internet.",
          .fix_arm =
              R"({"properties": {"properties": {"remoteLoginPortPublicAccess": "Disabled"}}})",
          .fix_terraform = "ssh_public_access_enabled = false",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/"
                      "how-to-create-attach-compute-cluster",
          .check = NoPublicSsh,
      },
      {
          .id = "GANTRY-COMPUTE-004",
          .title = "Give Machine Learning compute nodes no public IP address",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = compute,
          .condition = "Applies to AmlCompute and ComputeInstance. "
                       "properties.properties.enableNodePublicIp is false; absent (default true) "
                       "fails.",
          .rationale = "Azure ML security baseline NS-2 and the secure training environment docs: "
                       "no-public-IP computes have no inbound path from the internet and reach "
                       "the service through private endpoints or the managed network.",
          .fix_arm = R"({"properties": {"properties": {"enableNodePublicIp": false}}})",
          .fix_terraform = "node_public_ip_enabled = false",
          .references = {},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-secure-training-vnet",
          .check = NoNodePublicIp,
      },
      {
          .id = "GANTRY-COMPUTE-005",
          .title = "Recreate compute instances that run an old OS image",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kMedium,
          .types = compute,
          .condition = "Applies to ComputeInstance. "
                       "properties.properties.osImageMetadata.isLatestOsImageVersion is not false. "
                       "The property is read-only: absent in a template is not applicable, absent "
                       "in a live document is unknown.",
          .rationale = "Defender for Cloud's AML recommendation that compute instances be "
                       "recreated to get the latest updates (Medium), and Azure Policy f110a506: "
                       "compute instances are not patched in place.",
          .fix_arm =
              R"({"properties": {"computeType": "ComputeInstance"}}  // delete and recreate the instance)",
          .fix_terraform = "",
          .references = {"Policy f110a506"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/concept-vulnerability-management",
          .check = LatestOsImage,
      },
      {
          .id = "GANTRY-COMPUTE-006",
          .title = "Use dedicated VMs for batch inference clusters",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = compute,
          .condition = "Applies to AmlCompute that a batch endpoint deployment in the input runs "
                       "on (properties.compute names it) or that is tagged workload = "
                       "batch-inference, batch-scoring, inference or scoring; not applicable when "
                       "tagged interruptible=true. properties.properties.vmPriority is 'Dedicated' "
                       "or absent (default Dedicated).",
          .rationale = "WAF AI workload guidance on compute for inference: scoring runs have a "
                       "deadline, and low-priority nodes can be preempted at any time, so batch "
                       "inference belongs on dedicated nodes while interruptible training uses "
                       "low priority (GANTRY-COST-005).",
          .fix_arm = R"({"properties": {"properties": {"vmPriority": "Dedicated"}}})",
          .fix_terraform = R"(vm_priority = "Dedicated")",
          .references = {},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-use-low-priority-batch",
          .check = DedicatedBatchInference,
      },
      {
          .id = "GANTRY-COST-001",
          .title = "Shut down idle compute instances",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kHigh,
          .types = compute,
          .condition = "Applies to ComputeInstance. properties.properties.idleTimeBeforeShutdown "
                       "is an ISO 8601 duration from 15 minutes to 3 days.",
          .rationale = "Azure ML cost guidance and PSRule Azure.ML.ComputeIdleShutdown / Policy "
                       "679ddf89: an instance left on bills every hour. At stake: the instance's "
                       "pay-as-you-go rate x 730 h, the most an idle instance can cost in a month.",
          .fix_arm =
              R"({"apiVersion": "2023-10-01", "properties": {"properties": {"idleTimeBeforeShutdown": "PT60M"}}})",
          .fix_terraform = "",
          .references = {"PSRule Azure.ML.ComputeIdleShutdown", "Policy 679ddf89"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-create-compute-instance",
          .check = IdleShutdown,
      },
      {
          .id = "GANTRY-COST-002",
          .title = "Give compute instances a stop schedule",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kLow,
          .types = compute,
          .condition = "Applies to ComputeInstance. "
                       "properties.properties.schedules.computeStartStop[] has an entry with "
                       "action 'Stop' whose status is not 'Disabled'.",
          .rationale = "Azure ML compute instance docs (schedules) and cost guidance: a stop "
                       "schedule catches instances idle shutdown misses (a notebook kernel kept "
                       "busy). No amount: the cost of an instance left running is stated once, "
                       "under GANTRY-COST-001.",
          .fix_arm =
              R"({"properties": {"properties": {"schedules": {"computeStartStop": [{"action": "Stop", "status": "Enabled", "triggerType": "Cron", "cron": {"expression": "0 20 * * *", "timeZone": "UTC"}}]}}}})",
          .fix_terraform = "",
          .references = {},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-create-compute-instance",
          .check = StopSchedule,
      },
      {
          .id = "GANTRY-COST-003",
          .title = "Let compute clusters scale to zero nodes",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kHigh,
          .types = compute,
          .condition = "Applies to AmlCompute. "
                       "properties.properties.scaleSettings.minNodeCount is 0 or absent "
                       "(default 0).",
          .rationale = "Checkov CKV_AZURE_150 (cost, and nodes pick up new images when they are "
                       "recreated) and Azure ML cost guidance: nodes kept by minNodeCount bill "
                       "while no job runs. At stake: minNodeCount x the node rate (low-priority "
                       "rate for LowPriority clusters) x 730 h.",
          .fix_arm = R"({"properties": {"properties": {"scaleSettings": {"minNodeCount": 0}}}})",
          .fix_terraform = R"(scale_settings {
  min_node_count = 0
})",
          .references = {"Checkov CKV_AZURE_150"},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-manage-optimize-cost",
          .check = MinNodesZero,
      },
      {
          .id = "GANTRY-COST-004",
          .title = "Scale compute cluster nodes down within 30 minutes of idling",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kMedium,
          .types = compute,
          .condition = "Applies to AmlCompute whose minNodeCount is below maxNodeCount. "
                       "properties.properties.scaleSettings.nodeIdleTimeBeforeScaleDown is absent "
                       "(service default 120 s) or an ISO 8601 duration of at most PT30M.",
          .rationale = "Azure ML cost guidance: idle nodes bill until they scale down. 30 minutes "
                       "keeps nodes warm between the jobs of an interactive session (allocating a "
                       "node and pulling the image take minutes) while bounding each idle period "
                       "to half a node-hour per node. The amount is per idle period (max nodes x "
                       "rate x the time beyond 30 min), since how often a cluster drains is not "
                       "in the template.",
          .fix_arm =
              R"({"properties": {"properties": {"scaleSettings": {"nodeIdleTimeBeforeScaleDown": "PT30M"}}}})",
          .fix_terraform = R"(scale_settings {
  scale_down_nodes_after_idle_duration = "PT30M"
})",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/machine-learning/"
                      "how-to-create-attach-compute-cluster",
          .check = IdleScaleDown,
      },
      {
          .id = "GANTRY-COST-005",
          .title = "Use low-priority VMs for interruptible training clusters",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kMedium,
          .types = compute,
          .condition = "Applies to AmlCompute tagged interruptible = true (or yes, 1) and not "
                       "tagged for batch inference. properties.properties.vmPriority is "
                       "'LowPriority'.",
          .rationale = "WAF AI workload cost guidance and the Azure ML low-priority docs: training "
                       "that checkpoints can run on preemptible capacity at a fraction of the "
                       "price. The owner says the work is interruptible with the tag; Gantry "
                       "does not guess from names. At stake: (payg - low-priority rate) x "
                       "maxNodeCount x 730 h, Gantry's catalog spot rate standing for the "
                       "low-priority rate.",
          .fix_arm = R"({"properties": {"properties": {"vmPriority": "LowPriority"}}})",
          .fix_terraform = R"(vm_priority = "LowPriority")",
          .references = {},
          .help_uri =
              "https://learn.microsoft.com/azure/machine-learning/how-to-use-low-priority-batch",
          .check = LowPriorityTraining,
      },
  };
}

}  // namespace gantry::assess::rule
