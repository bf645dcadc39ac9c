// Rules over virtual machines and scale sets (GANTRY-VM-*) and their cost
// rules (GANTRY-COST-006, -007).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess::rule {
namespace {

// Regions with availability zones, and regions known to have none. A region
// in neither list makes the zone rule unknown rather than guessed.
constexpr std::string_view kZonalRegions[] = {
    "australiaeast",    "brazilsouth",    "canadacentral", "centralindia",  "centralus",
    "eastasia",         "eastus",         "eastus2",       "francecentral", "germanywestcentral",
    "israelcentral",    "italynorth",     "japaneast",     "koreacentral",  "mexicocentral",
    "newzealandnorth",  "northeurope",    "norwayeast",    "polandcentral", "qatarcentral",
    "southafricanorth", "southcentralus", "southeastasia", "spaincentral",  "swedencentral",
    "switzerlandnorth", "uaenorth",       "uksouth",       "westeurope",    "westus2",
    "westus3"};
constexpr std::string_view kNonZonalRegions[] = {
    "westus",         "northcentralus",     "westcentralus",    "canadaeast",
    "ukwest",         "australiasoutheast", "australiacentral", "southindia",
    "westindia",      "koreasouth",         "brazilsoutheast",  "francesouth",
    "germanynorth",   "norwaywest",         "switzerlandwest",  "uaecentral",
    "southafricawest"};

bool IsVmss(const Resource& r) { return r.IsType(kVmss); }

// Where the VM profile sits: the VM's properties, or the scale set's
// properties.virtualMachineProfile.
std::string ProfilePath(const Resource& r, std::string_view rest) {
  return fmt::format("{}{}", IsVmss(r) ? "properties.virtualMachineProfile." : "properties.", rest);
}

std::string SizeOf(const Resource& r) {
  std::optional<std::string> s =
      AsString(r.Get(IsVmss(r) ? "sku.name" : "properties.hardwareProfile.vmSize"));
  return s ? *s : "";
}

bool IsSpot(const Resource& r) {
  const Json* p = r.Get(ProfilePath(r, "priority"));
  return StringIs(p, "Spot") || StringIs(p, "Low");
}

Verdict WithAmount(Verdict v, std::optional<double> usd, std::string basis) {
  v.monthly_usd = usd;
  v.cost_basis = std::move(basis);
  return v;
}

// --- reliability and performance -------------------------------------------------

Verdict VmssZones(const Resource& s, const RuleContext& ctx) {
  Prop zones = Read(s, "zones");
  if (zones.unknown) return UnknownProp(zones);
  std::string region = AsciiLower(s.location.empty() ? ctx.default_region() : s.location);
  region.erase(std::remove(region.begin(), region.end(), ' '), region.end());
  bool zonal = std::find(std::begin(kZonalRegions), std::end(kZonalRegions), region) !=
               std::end(kZonalRegions);
  bool flat = std::find(std::begin(kNonZonalRegions), std::end(kNonZonalRegions), region) !=
              std::end(kNonZonalRegions);
  if (flat) return Verdict::NotApplicable();
  size_t n = zones.value && zones.value->is_array() ? zones.value->size() : 0;
  if (n >= 2) return Verdict::Pass();
  if (!zonal) {
    return Verdict::Unknown(fmt::format("zones is {} and Gantry does not know whether region '{}' "
                                        "has availability zones",
                                        Show(zones), region),
                            "zones");
  }
  return Verdict::Fail(fmt::format("zones is {} in '{}', which has availability zones; set it to "
                                   "[\"1\", \"2\", \"3\"] (where the size is offered in them)",
                                   Show(zones), region),
                       "zones");
}

bool PremiumDisk(const Json* type) {
  for (std::string_view t : {"Premium_LRS", "Premium_ZRS", "PremiumV2_LRS", "UltraSSD_LRS"}) {
    if (StringIs(type, t)) return true;
  }
  return false;
}

Verdict VmStandalone(const Resource& vm, const RuleContext&) {
  for (std::string_view p :
       {"zones", "properties.availabilitySet.id", "properties.virtualMachineScaleSet.id"}) {
    if (vm.IsUnknown(p)) return UnknownProp(Read(vm, p));
    if (HasValue(vm.Get(p))) return Verdict::Pass();
  }
  // A single VM with only premium disks has its own SLA (PSRule accepts it too).
  bool premium =
      PremiumDisk(vm.Get("properties.storageProfile.osDisk.managedDisk.storageAccountType"));
  if (const Json* data = vm.Get("properties.storageProfile.dataDisks");
      premium && data && data->is_array()) {
    for (const Json& d : *data) {
      const Json* t = nullptr;
      if (d.is_object() && d.contains("managedDisk") && d["managedDisk"].is_object() &&
          d["managedDisk"].contains("storageAccountType")) {
        t = &d["managedDisk"]["storageAccountType"];
      }
      if (!PremiumDisk(t)) premium = false;
    }
  }
  if (premium) return Verdict::Pass();
  return Verdict::Fail(
      "zones, properties.availabilitySet.id and properties.virtualMachineScaleSet.id are absent "
      "and not all disks are premium; set zones to [\"1\"] (or place the VM in an availability set "
      "or a flexible scale set)",
      "zones");
}

Verdict AcceleratedNetworking(const Resource& r, const RuleContext& ctx) {
  std::string configs_path = ProfilePath(r, "networkProfile.networkInterfaceConfigurations");
  Prop configs = Read(r, configs_path);
  if (configs.unknown) return UnknownProp(configs);
  // Scale sets (and VMs with networkApiVersion) define their NICs inline.
  if (configs.value && configs.value->is_array() && !configs.value->empty()) {
    for (size_t i = 0; i < configs.value->size(); ++i) {
      std::string path =
          fmt::format("{}.{}.properties.enableAcceleratedNetworking", configs_path, i);
      const Json& c = (*configs.value)[i];
      const Json* on = nullptr;
      if (c.is_object() && c.contains("properties") && c["properties"].is_object() &&
          c["properties"].contains("enableAcceleratedNetworking")) {
        on = &c["properties"]["enableAcceleratedNetworking"];
      }
      if (r.IsUnknown(path))
        return Verdict::Unknown(path + " is not known before deployment", path);
      if (AsBool(on) != true) {
        std::string name = c.is_object() && c.contains("name") && c["name"].is_string()
                               ? c["name"].get<std::string>()
                               : std::to_string(i);
        return Verdict::Fail(
            fmt::format("network interface configuration '{}' has "
                        "properties.enableAcceleratedNetworking {}; set it to true",
                        name, on ? on->dump() : "absent (default false)"),
            path);
      }
    }
    return Verdict::Pass();
  }
  if (IsVmss(r)) {
    return Verdict::Unknown(
        fmt::format("{} is absent; cannot tell the scale set's NICs", configs_path), configs_path);
  }
  Prop nics = Read(r, "properties.networkProfile.networkInterfaces");
  if (nics.unknown) return UnknownProp(nics);
  if (!nics.value || !nics.value->is_array() || nics.value->empty()) {
    return Verdict::Unknown(
        "properties.networkProfile.networkInterfaces is absent; cannot tell the "
        "VM's NICs",
        nics.path);
  }
  for (const Json& n : *nics.value) {
    std::optional<std::string> id =
        n.is_object() && n.contains("id") ? AsString(&n["id"]) : std::nullopt;
    const Resource* nic = id ? Resolve(ctx, *id, kNic) : nullptr;
    if (nic == nullptr) {
      return Verdict::Unknown(
          fmt::format("the network interface '{}' is not in the input; include it to check its "
                      "properties.enableAcceleratedNetworking",
                      id ? *id : "(no id)"),
          nics.path);
    }
    Prop on = Read(*nic, "properties.enableAcceleratedNetworking");
    if (on.unknown) return UnknownProp(on);
    if (AsBool(on.value) != true) {
      return Verdict::Fail(
          fmt::format("network interface '{}' has "
                      "properties.enableAcceleratedNetworking {}; set it to true",
                      nic->name, on.absent() ? "absent (default false)" : Show(on)),
          nics.path);
    }
  }
  return Verdict::Pass();
}

bool LooksWindows(const Resource& r) {
  for (std::string_view p :
       {"storageProfile.imageReference.publisher", "storageProfile.imageReference.offer"}) {
    std::optional<std::string> v = AsString(r.Get(ProfilePath(r, p)));
    if (v && AsciiLower(*v).find("windows") != std::string::npos) return true;
  }
  return StringIs(r.Get(ProfilePath(r, "storageProfile.osDisk.osType")), "Windows");
}

Verdict PasswordAuthOff(const Resource& r, const RuleContext&) {
  std::string os_path = ProfilePath(r, "osProfile");
  Prop os = Read(r, os_path);
  if (os.unknown) return UnknownProp(os);
  if (os.absent()) return Verdict::NotApplicable();  // a specialized disk: no OS provisioning
  if (r.Get(os_path + ".windowsConfiguration") != nullptr || LooksWindows(r)) {
    return Verdict::NotApplicable();
  }
  std::string path = os_path + ".linuxConfiguration.disablePasswordAuthentication";
  if (!r.Get(os_path + ".linuxConfiguration") && !r.IsUnknown(os_path + ".linuxConfiguration")) {
    if (HasValue(r.Get(os_path + ".adminPassword")) || r.IsUnknown(os_path + ".adminPassword")) {
      return Verdict::Fail(
          fmt::format("{}.adminPassword is set and {} is absent (default false): "
                      "the VM accepts passwords; set it to true and give an SSH key",
                      os_path, path),
          path);
    }
    return Verdict::Unknown(fmt::format("{}.linuxConfiguration is absent; cannot tell the OS or "
                                        "how it authenticates",
                                        os_path),
                            path);
  }
  return RequireBool(
      r, path, true, false,
      "set it to true and give an SSH public key in linuxConfiguration.ssh.publicKeys");
}

Verdict SpotEviction(const Resource& r, const RuleContext& ctx) {
  Prop prio = Read(r, ProfilePath(r, "priority"));
  if (prio.unknown) return UnknownProp(prio);
  if (!IsSpot(r)) return Verdict::NotApplicable();
  Prop policy = Read(r, ProfilePath(r, "evictionPolicy"));
  if (policy.unknown) return UnknownProp(policy);
  // A deallocated spot instance keeps its disks and its quota; in a scale set it
  // also keeps its slot, so the set cannot replace it when capacity returns.
  if (IsVmss(r) && !StringIs(policy.value, "Delete")) {
    return Verdict::Fail(
        fmt::format("{} is {}{} on a spot scale set: evicted instances stay "
                    "deallocated, billing their disks and holding quota; set it to "
                    "'Delete' so the scale set can replace them",
                    policy.path, Show(policy), policy.absent() ? " (default Deallocate)" : ""),
        policy.path);
  }
  if (!policy.absent() && !StringIs(policy.value, "Delete") &&
      !StringIs(policy.value, "Deallocate")) {
    return Verdict::Fail(
        fmt::format("{} is {}; set it to 'Deallocate' or 'Delete'", policy.path, Show(policy)),
        policy.path);
  }
  Prop max = Read(r, ProfilePath(r, "billingProfile.maxPrice"));
  if (max.unknown) return UnknownProp(max);
  if (max.absent()) return Verdict::Pass();  // default -1: up to the pay-as-you-go price
  std::optional<double> cap = AsNumber(max.value);
  if (cap && *cap == -1) return Verdict::Pass();
  if (!cap || *cap <= 0) {
    return Verdict::Fail(fmt::format("{} is {}; set it to -1 (evict for capacity only, pay at most "
                                     "the pay-as-you-go price)",
                                     max.path, Show(max)),
                         max.path);
  }
  PriceQuote q = Quote(ctx, r, SizeOf(r));
  if (!q.price.spot) {
    return Verdict::Unknown(fmt::format("{} is {} and the spot price of '{}' in {} is not in the "
                                        "catalog; -1 avoids price evictions",
                                        max.path, Show(max), q.size, q.region),
                            max.path);
  }
  if (*cap < *q.price.spot) {
    return Verdict::Fail(
        fmt::format("{} is {} $/h, below the current spot price {}/h of {}: the VM "
                    "is evicted or never allocated; set it to -1",
                    max.path, Show(max), Usd(*q.price.spot), q.vm->name),
        max.path);
  }
  return Verdict::Pass();
}

// --- cost ---------------------------------------------------------------------------

// Instances of a VM (1) or a scale set (sku.capacity), nullopt when unknown.
std::optional<double> InstanceCount(const Resource& r) {
  if (!IsVmss(r)) return 1.0;
  if (r.IsUnknown("sku.capacity")) return std::nullopt;
  return AsNumber(r.Get("sku.capacity"));
}

Verdict SpotForInterruptible(const Resource& r, const RuleContext& ctx) {
  if (!TagIsTrue(r, "interruptible")) return Verdict::NotApplicable();
  Prop prio = Read(r, ProfilePath(r, "priority"));
  if (prio.unknown) return UnknownProp(prio);
  if (IsSpot(r)) return Verdict::Pass();
  std::string msg = fmt::format(
      "{} is {} on a resource tagged interruptible=true; set it to 'Spot' "
      "with evictionPolicy '{}' and billingProfile.maxPrice -1",
      prio.path, prio.absent() ? "absent (Regular)" : Show(prio),
      IsVmss(r) ? "Delete" : "Deallocate");
  PriceQuote q = Quote(ctx, r, SizeOf(r));
  std::optional<double> n = InstanceCount(r);
  if (!q.price.payg || !q.price.spot) {
    return WithAmount(Verdict::Fail(msg, prio.path), std::nullopt,
                      NoAmount(q, !q.price.payg ? "payg" : "spot"));
  }
  if (!n) {
    return WithAmount(Verdict::Fail(msg, prio.path), std::nullopt,
                      "no amount: sku.capacity is not known");
  }
  double usd = (*q.price.payg - *q.price.spot) * *n * kHoursPerMonth;
  return WithAmount(
      Verdict::Fail(fmt::format("{}: saves up to {}/month", msg, Usd(usd)), prio.path), usd,
      fmt::format("({}/h payg - {}/h spot) x {:g} instance{} x {} h of {}", Usd(*q.price.payg),
                  Usd(*q.price.spot), *n, *n == 1 ? "" : "s", kHoursPerMonth, q.vm->name));
}

// Fewest steady instances worth a reservation: a 1-year reservation pays off for
// any VM that runs all month, so one is enough.
constexpr double kMinSteadyInstances = 1;

Verdict ReservedForSteady(const Resource& s, const RuleContext& ctx) {
  Prop prio = Read(s, ProfilePath(s, "priority"));
  if (prio.unknown) return UnknownProp(prio);
  if (IsSpot(s)) return Verdict::NotApplicable();  // reservations do not apply to spot
  std::vector<const Resource*> settings;
  for (const Resource* a : ctx.OfType(kAutoscale)) {
    std::optional<std::string> target = AsString(a->Get("properties.targetResourceUri"));
    if (a->IsUnknown("properties.targetResourceUri") || (target && RefersTo(s, *target))) {
      settings.push_back(a);
    }
  }
  std::optional<double> steady;
  std::string how;
  bool any_enabled = false;
  for (const Resource* a : settings) {
    if (a->IsUnknown("properties.enabled") || a->IsUnknown("properties.profiles") ||
        a->IsUnknown("properties.targetResourceUri")) {
      return Verdict::Unknown(
          fmt::format("autoscale setting '{}' is not known before deployment", a->name), "");
    }
    if (AsBool(a->Get("properties.enabled")) == false) continue;
    any_enabled = true;
    const Json* profiles = a->Get("properties.profiles");
    if (profiles == nullptr || !profiles->is_array() || profiles->empty()) continue;
    for (const Json& p : *profiles) {
      const Json* cap = p.is_object() && p.contains("capacity") ? &p["capacity"] : nullptr;
      std::optional<double> lo, hi;
      if (cap && cap->is_object()) {
        lo = AsNumber(cap->contains("minimum") ? &(*cap)["minimum"] : nullptr);
        hi = AsNumber(cap->contains("maximum") ? &(*cap)["maximum"] : nullptr);
      }
      if (!lo || !hi) {
        return Verdict::Unknown(fmt::format("autoscale setting '{}' has a profile without numeric "
                                            "capacity.minimum and .maximum",
                                            a->name),
                                "");
      }
      if (*lo != *hi) return Verdict::Pass();  // the scale set follows load
      steady = steady ? std::min(*steady, *lo) : *lo;
    }
    how = fmt::format("autoscale setting '{}' has capacity minimum == maximum", a->name);
  }
  if (!any_enabled) {
    if (settings.empty() && s.origin == Origin::kLive) {
      return Verdict::Unknown(
          "autoscale settings are separate resources; add `az monitor autoscale "
          "list` output to the input to tell whether this scale set is steady",
          "");
    }
    if (s.IsUnknown("sku.capacity")) return UnknownProp(Read(s, "sku.capacity"));
    steady = AsNumber(s.Get("sku.capacity"));
    if (!steady) {
      return Verdict::Unknown("sku.capacity is absent; cannot tell how many instances run",
                              "sku.capacity");
    }
    how = fmt::format("sku.capacity is {:g} and {}", *steady,
                      settings.empty() ? "no autoscale setting targets it"
                                       : "its autoscale settings are disabled");
  }
  if (!steady || *steady < kMinSteadyInstances) return Verdict::Pass();
  std::string msg = fmt::format(
      "the scale set runs a steady {:g} instance{} ({}); buy a 1-year "
      "reservation for them (a purchase, not a template property) or "
      "add autoscale if the load varies",
      *steady, *steady == 1 ? "" : "s", how);
  // With autoscale pinned, the fix is on the autoscale setting, not a property here.
  std::string property = any_enabled ? "" : "sku.capacity";
  PriceQuote q = Quote(ctx, s, SizeOf(s));
  if (!q.price.payg || !q.price.reserved_1y) {
    return WithAmount(Verdict::Fail(msg, property), std::nullopt,
                      NoAmount(q, !q.price.payg ? "payg" : "reserved_1y"));
  }
  double usd = (*q.price.payg - *q.price.reserved_1y) * *steady * kHoursPerMonth;
  return WithAmount(Verdict::Fail(fmt::format("{}: saves {}/month", msg, Usd(usd)), property), usd,
                    fmt::format("({}/h payg - {}/h reserved 1y) x {:g} instance{} x {} h of {}",
                                Usd(*q.price.payg), Usd(*q.price.reserved_1y), *steady,
                                *steady == 1 ? "" : "s", kHoursPerMonth, q.vm->name));
}

}  // namespace

std::vector<Rule> VmRules() {
  const std::vector<std::string> both = {std::string(kVm), std::string(kVmss)};
  return {
      {
          .id = "GANTRY-VM-001",
          .title = "Spread scale sets across at least two availability zones",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = {std::string(kVmss)},
          .condition = "zones has at least 2 entries when the scale set's region (location, or the "
                       "default region) has availability zones. Regions known to have none are not "
                       "applicable; regions Gantry does not know are unknown.",
          .rationale = "WAF reliability (use availability zones) and PSRule "
                       "Azure.VMSS.AvailabilityZone: a zone outage then takes only part of the "
                       "scale set.",
          .fix_arm = R"({"zones": ["1", "2", "3"]})",
          .fix_terraform = R"(zones = ["1", "2", "3"])",
          .references = {"PSRule Azure.VMSS.AvailabilityZone"},
          .help_uri = "https://learn.microsoft.com/azure/virtual-machine-scale-sets/"
                      "virtual-machine-scale-sets-use-availability-zones",
          .check = VmssZones,
      },
      {
          .id = "GANTRY-VM-002",
          .title = "Place virtual machines in a zone or an availability set",
          .pillar = Pillar::kReliability,
          .severity = Severity::kLow,
          .types = {std::string(kVm)},
          .condition = "zones is non-empty, or properties.availabilitySet.id or "
                       "properties.virtualMachineScaleSet.id is set, or the OS disk and every data "
                       "disk are Premium_LRS, Premium_ZRS, PremiumV2_LRS or UltraSSD_LRS.",
          .rationale =
              "WAF reliability and PSRule Azure.VM.Standalone: a VM with none of these has "
              "no availability SLA.",
          .fix_arm = R"({"zones": ["1"]})",
          .fix_terraform = R"(zone = "1")",
          .references = {"PSRule Azure.VM.Standalone"},
          .help_uri = "https://learn.microsoft.com/azure/virtual-machines/availability",
          .check = VmStandalone,
      },
      {
          .id = "GANTRY-VM-003",
          .title = "Turn on accelerated networking for VMs and scale sets",
          .pillar = Pillar::kPerformanceEfficiency,
          .severity = Severity::kMedium,
          .types = both,
          .condition =
              "Scale set: every "
              "properties.virtualMachineProfile.networkProfile.networkInterfaceConfigurations[]"
              ".properties.enableAcceleratedNetworking is true. VM: every network "
              "interface in properties.networkProfile.networkInterfaces[].id (found in the "
              "input) has properties.enableAcceleratedNetworking true, or the inline "
              "networkInterfaceConfigurations do. A NIC not in the input is unknown.",
          .rationale =
              "azure-docs accelerated networking and PSRule Azure.VM.AcceleratedNetworking: "
              "SR-IOV bypasses the host's virtual switch, cutting latency and CPU for the "
              "data loading and checkpoint traffic of training nodes.",
          .fix_arm =
              R"({"type": "Microsoft.Network/networkInterfaces", "properties": {"enableAcceleratedNetworking": true}})",
          .fix_terraform = "accelerated_networking_enabled = true  # azurerm_network_interface "
                           "(3.x: enable_accelerated_networking)",
          .references = {"PSRule Azure.VM.AcceleratedNetworking"},
          .help_uri =
              "https://learn.microsoft.com/azure/virtual-network/accelerated-networking-overview",
          .check = AcceleratedNetworking,
      },
      {
          .id = "GANTRY-VM-004",
          .title = "Turn off password authentication on Linux VMs and scale sets",
          .pillar = Pillar::kSecurity,
          .severity = Severity::kHigh,
          .types = both,
          .condition = "Linux (osProfile without windowsConfiguration, image not Windows): "
                       "osProfile.linuxConfiguration.disablePasswordAuthentication is true (under "
                       "properties.virtualMachineProfile for scale sets). An adminPassword without "
                       "linuxConfiguration fails; no osProfile is not applicable.",
          .rationale = "MCSB IM-6 / PSRule Azure.VM.PublicKey and Azure.VMSS.PublicKey: SSH keys "
                       "cannot be guessed; passwords on internet-facing nodes are brute-forced.",
          .fix_arm =
              R"({"properties": {"osProfile": {"linuxConfiguration": {"disablePasswordAuthentication": true, "ssh": {"publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys", "keyData": "<ssh-rsa ...>"}]}}}}})",
          .fix_terraform = "disable_password_authentication = true",
          .references = {"PSRule Azure.VM.PublicKey", "PSRule Azure.VMSS.PublicKey",
                         "Checkov CKV_AZURE_49"},
          .help_uri =
              "https://learn.microsoft.com/azure/virtual-machines/linux/create-ssh-keys-detailed",
          .check = PasswordAuthOff,
      },
      {
          .id = "GANTRY-VM-005",
          .title = "Give spot VMs a sane eviction policy and price cap",
          .pillar = Pillar::kReliability,
          .severity = Severity::kMedium,
          .types = both,
          .condition = "Applies when priority is 'Spot' or 'Low'. Scale set: evictionPolicy is "
                       "'Delete'. VM: evictionPolicy is absent (Deallocate), 'Deallocate' or "
                       "'Delete'. billingProfile.maxPrice is absent or -1, or a positive price not "
                       "below the catalog's spot price (unknown when that price is not known).",
          .rationale =
              "azure-docs spot VMs and spot scale sets: with Deallocate a scale set's "
              "evicted instances stay, holding quota and billing disks, and the set cannot "
              "scale out to replace them, so Delete is the scale-set choice; a single VM "
              "keeps its disks with Deallocate and can restart. maxPrice -1 means eviction "
              "for capacity only, at most the pay-as-you-go price.",
          .fix_arm =
              R"({"properties": {"virtualMachineProfile": {"priority": "Spot", "evictionPolicy": "Delete", "billingProfile": {"maxPrice": -1}}}})",
          .fix_terraform = R"(priority        = "Spot"
eviction_policy = "Delete"
max_bid_price   = -1)",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/virtual-machine-scale-sets/use-spot",
          .check = SpotEviction,
      },
      {
          .id = "GANTRY-COST-006",
          .title = "Run interruptible batch work on spot VMs",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kMedium,
          .types = both,
          .condition = "Applies to VMs and scale sets tagged interruptible = true (or yes, 1). "
                       "priority is 'Spot' (or 'Low').",
          .rationale = "WAF AI workload cost guidance: batch work that checkpoints can use "
                       "evictable capacity. At stake: (payg - spot) x instances (1 for a VM, "
                       "sku.capacity for a scale set) x 730 h, from the catalog.",
          .fix_arm =
              R"({"properties": {"priority": "Spot", "evictionPolicy": "Deallocate", "billingProfile": {"maxPrice": -1}}})",
          .fix_terraform = R"(priority        = "Spot"
eviction_policy = "Deallocate"
max_bid_price   = -1)",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/virtual-machines/spot-vms",
          .check = SpotForInterruptible,
      },
      {
          .id = "GANTRY-COST-007",
          .title = "Reserve the capacity of steady scale sets",
          .pillar = Pillar::kCostOptimization,
          .severity = Severity::kMedium,
          .types = {std::string(kVmss)},
          .condition = "Applies to regular-priority scale sets. Fails when no enabled "
                       "Microsoft.Insights/autoscalesettings targets the scale set "
                       "(properties.targetResourceUri) and sku.capacity >= 1, or when every "
                       "profile of its enabled autoscale settings has capacity.minimum == "
                       "capacity.maximum (steady count: the smallest minimum). Live input without "
                       "autoscale settings is unknown.",
          .rationale =
              "WAF cost optimization (commit to reservations for steady use) and azure-docs "
              "reserved VM instances. At stake: (payg - reserved_1y) x steady instances x "
              "730 h from the catalog; no amount when the catalog has no reserved_1y "
              "price for the size and region.",
          .fix_arm =
              R"({"type": "Microsoft.Insights/autoscalesettings", "properties": {"enabled": true, "targetResourceUri": "<scale set id>", "profiles": [{"name": "load", "capacity": {"minimum": "0", "maximum": "<n>", "default": "<n>"}, "rules": []}]}})",
          .fix_terraform = "",
          .references = {},
          .help_uri = "https://learn.microsoft.com/azure/cost-management-billing/reservations/"
                      "save-compute-costs-reservations",
          .check = ReservedForSteady,
      },
  };
}

}  // namespace gantry::assess::rule
