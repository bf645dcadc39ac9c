// The azurerm -> ARM mapping of the Terraform reader: for each resource type a
// rule looks at, which attribute becomes which ARM property, and the value the
// provider sends when the attribute is absent (so that a rule written against
// ARM sees what Azure will be asked for). Defaults are azurerm's; where they
// changed between major versions the plan's provider version decides
// (Plan::provider_major, else hints in the attribute names, else the current
// major, 4). docs/assess.md lists the choices.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "gantry/core/text.h"
#include "tf_plan.h"

namespace gantry::assess::tf {
namespace {

constexpr const char* kWorkspace = "Microsoft.MachineLearningServices/workspaces";
constexpr const char* kCompute = "Microsoft.MachineLearningServices/workspaces/computes";
constexpr const char* kVm = "Microsoft.Compute/virtualMachines";
constexpr const char* kVmss = "Microsoft.Compute/virtualMachineScaleSets";
constexpr const char* kNic = "Microsoft.Network/networkInterfaces";
constexpr const char* kPip = "Microsoft.Network/publicIPAddresses";
constexpr const char* kStorage = "Microsoft.Storage/storageAccounts";
constexpr const char* kKeyVault = "Microsoft.KeyVault/vaults";
constexpr const char* kRegistry = "Microsoft.ContainerRegistry/registries";
constexpr const char* kDiagnostics = "Microsoft.Insights/diagnosticSettings";
constexpr const char* kAutoscale = "Microsoft.Insights/autoscalesettings";

std::string At(std::string_view prefix, size_t i, std::string_view rest = "") {
  return fmt::format("{}.{}{}{}", prefix, i, rest.empty() ? "" : ".", rest);
}

void Begin(Mapper& m, const char* type, std::string name) {
  Resource& r = m.out();
  r.type = type;
  r.name = std::move(name);
  r.body = Json::object();
  r.body["type"] = r.type;
  r.body["name"] = r.name;
}

// The provider generation: the constraint in the configuration, else what the
// attribute names of this resource betray, else today's major.
int Major(const Mapper& m, std::initializer_list<std::pair<const char*, int>> hints) {
  if (m.plan().provider_major() != 0) return m.plan().provider_major();
  for (const auto& [attr, major] : hints) {
    if (m.planned().values->contains(attr)) return major;
  }
  return 4;
}

// Priority, eviction and the bid price, for VMs (`base` "/properties") and
// scale sets ("/properties/virtualMachineProfile").
void MapPriority(Mapper& m, const std::string& base) {
  m.CopyString("priority", base + "/priority", "Regular");
  m.CopyString("eviction_policy", base + "/evictionPolicy");
  std::optional<std::string> prio = m.String("priority");
  // max_bid_price defaults to -1 (pay up to the on-demand price); ARM sends it for Spot only.
  if (prio && *prio == "Spot") m.CopyNumber("max_bid_price", base + "/billingProfile/maxPrice", -1);
}

void MapOsDisk(Mapper& m, std::string_view tf, const std::string& base) {
  if (m.Blocks(tf) == 0) return;
  std::string d(tf);
  m.CopyString(d + ".0.caching", base + "/storageProfile/osDisk/caching");
  m.CopyString(d + ".0.storage_account_type",
               base + "/storageProfile/osDisk/managedDisk/storageAccountType");
  m.CopyNumber(d + ".0.disk_size_gb", base + "/storageProfile/osDisk/diskSizeGB");
}

void MapImage(Mapper& m, const std::string& base) {
  if (m.Blocks("source_image_reference") == 0) return;
  for (const char* k : {"publisher", "offer", "sku", "version"}) {
    m.CopyString(std::string("source_image_reference.0.") + k,
                 base + "/storageProfile/imageReference/" + k);
  }
}

// The name of the workspace a compute belongs to: the last segment of a known
// machine_learning_workspace_id, else the name of the workspace the
// configuration refers to (its id is known only after apply).
std::string WorkspaceOf(Mapper& m, const Planned** ws) {
  *ws = nullptr;
  std::vector<const Planned*> refs =
      m.plan().Referenced(m.planned(), "machine_learning_workspace_id", false);
  if (!refs.empty()) *ws = refs.front();
  std::optional<std::string> id = m.String("machine_learning_workspace_id");
  if (id) {
    std::string lower = AsciiLower(*id);
    size_t at = lower.rfind("/workspaces/");
    if (at != std::string::npos) {
      std::string name = id->substr(at + 12);
      return name.substr(0, name.find('/'));
    }
  }
  return *ws != nullptr ? (*ws)->name : std::string();
}

void BeginCompute(Mapper& m, const char* compute_type) {
  const Planned* ws = nullptr;
  std::string ws_name = WorkspaceOf(m, &ws);
  if (ws_name.empty()) {
    // Neither the id nor a reference says which workspace: the name cannot be
    // composed, and a rule that needs the parent will say so.
    ws_name = "(unknown workspace)";
    m.MarkUnknown("/name");
  }
  Begin(m, kCompute, ws_name + "/" + m.planned().name);
  m.Set("/properties/computeType", compute_type);
  // Computes without a location of their own (azurerm 4 dropped it from
  // compute instances) are created in the workspace's region.
  if (m.planned().location.empty() && ws != nullptr && !ws->location.empty()) {
    m.out().location = ws->location;
  }
  std::string loc = m.planned().location.empty() ? m.out().location : m.planned().location;
  if (!loc.empty()) m.Set("/properties/computeLocation", loc);
  m.CopyString("description", "/properties/description");
  // local_auth_enabled defaults to true; ARM states the opposite flag.
  m.CopyBool("local_auth_enabled", "/properties/disableLocalAuth", true, /*invert=*/true);
  m.CopyTags();
  m.CopyIdentity();
}

void MapWorkspace(Mapper& m) {
  Begin(m, kWorkspace, m.planned().name);
  m.CopyTags();
  m.CopyIdentity();
  m.CopyString("sku_name", "/sku/name", "Basic");
  m.CopyString("sku_name", "/sku/tier", "Basic");
  m.CopyString("kind", "/kind");
  const std::string p = "/properties";
  m.CopyString("friendly_name", p + "/friendlyName");
  m.CopyString("description", p + "/description");
  // Absent means Enabled: the provider's default is true (CKV_AZURE_144 fails
  // it for that reason; docs/assess.md on CKV2_AZURE_49).
  m.CopyBoolEnum("public_network_access_enabled", p + "/publicNetworkAccess", true);
  // azurerm 3.x only (PR #16288 renamed it from public_network_access_enabled).
  m.CopyBool("public_access_behind_virtual_network_enabled",
             p + "/allowPublicAccessWhenBehindVnet");
  m.CopyBool("high_business_impact", p + "/hbiWorkspace", false);
  m.CopyBool("v1_legacy_mode_enabled", p + "/v1LegacyMode", false);
  m.CopyString("image_build_compute_name", p + "/imageBuildCompute");
  m.CopyId("primary_user_assigned_identity", p + "/primaryUserAssignedIdentity");
  m.CopyId("key_vault_id", p + "/keyVault");
  m.CopyId("storage_account_id", p + "/storageAccount");
  m.CopyId("application_insights_id", p + "/applicationInsights");
  m.CopyId("container_registry_id", p + "/containerRegistry");
  if (m.Unknown("encryption")) {
    m.MarkUnknown(p + "/encryption");
  } else if (m.Blocks("encryption") > 0) {
    m.Set(p + "/encryption/status", "Enabled");
    m.CopyId("encryption.0.key_vault_id", p + "/encryption/keyVaultProperties/keyVaultArmId");
    m.CopyId("encryption.0.key_id", p + "/encryption/keyVaultProperties/keyIdentifier");
    m.CopyId("encryption.0.user_assigned_identity_id",
             p + "/encryption/identity/userAssignedIdentity");
  }
  if (m.Unknown("managed_network")) {
    m.MarkUnknown(p + "/managedNetwork");
  } else if (m.Blocks("managed_network") > 0) {
    m.CopyString("managed_network.0.isolation_mode", p + "/managedNetwork/isolationMode");
  }
  if (m.Blocks("serverless_compute") > 0) {
    m.CopyId("serverless_compute.0.subnet_id",
             p + "/serverlessComputeSettings/serverlessComputeCustomSubnet");
    // public_ip_enabled defaults to false in azurerm.
    m.CopyBool("serverless_compute.0.public_ip_enabled",
               p + "/serverlessComputeSettings/serverlessComputeNoPublicIP", false, true);
  }
}

void MapComputeCluster(Mapper& m) {
  BeginCompute(m, "AmlCompute");
  const std::string p = "/properties/properties";
  m.CopyString("vm_size", p + "/vmSize");
  m.CopyString("vm_priority", p + "/vmPriority");
  if (m.Unknown("scale_settings")) {
    m.MarkUnknown(p + "/scaleSettings");
  } else if (m.Blocks("scale_settings") > 0) {
    m.CopyNumber("scale_settings.0.min_node_count", p + "/scaleSettings/minNodeCount", 0);
    m.CopyNumber("scale_settings.0.max_node_count", p + "/scaleSettings/maxNodeCount");
    m.CopyString("scale_settings.0.scale_down_nodes_after_idle_duration",
                 p + "/scaleSettings/nodeIdleTimeBeforeScaleDown");
  }
  m.CopyBool("node_public_ip_enabled", p + "/enableNodePublicIp", true);
  // azurerm sends Enabled or Disabled, never NotSpecified.
  m.CopyBoolEnum("ssh_public_access_enabled", p + "/remoteLoginPortPublicAccess", false);
  m.CopyId("subnet_resource_id", p + "/subnet/id");
  if (m.Blocks("ssh") > 0)
    m.CopyString("ssh.0.admin_username", p + "/userAccountCredentials/adminUserName");
}

void MapComputeInstance(Mapper& m) {
  BeginCompute(m, "ComputeInstance");
  const std::string p = "/properties/properties";
  m.CopyString("virtual_machine_size", p + "/vmSize");
  m.CopyString("authorization_type", p + "/computeInstanceAuthorizationType");
  m.CopyBool("node_public_ip_enabled", p + "/enableNodePublicIp", true);
  m.CopyId("subnet_resource_id", p + "/subnet/id");
  // The provider opens the public SSH port exactly when an ssh block is given.
  if (m.Unknown("ssh")) {
    m.MarkUnknown(p + "/sshSettings");
  } else if (m.Blocks("ssh") > 0) {
    m.Set(p + "/sshSettings/sshPublicAccess", "Enabled");
    m.CopyString("ssh.0.public_key", p + "/sshSettings/adminPublicKey");
    m.CopyString("ssh.0.username", p + "/sshSettings/adminUserName");
  } else {
    m.Set(p + "/sshSettings/sshPublicAccess", "Disabled");
  }
  if (m.Blocks("assign_to_user") > 0) {
    m.CopyString("assign_to_user.0.object_id",
                 p + "/personalComputeInstanceSettings/assignedUser/objectId");
    m.CopyString("assign_to_user.0.tenant_id",
                 p + "/personalComputeInstanceSettings/assignedUser/tenantId");
  }
  // azurerm has no idle-shutdown or schedule attribute (azurerm #20973), so
  // properties.properties.idleTimeBeforeShutdown is absent, as it will be in Azure.
}

void MapInferenceCluster(Mapper& m) {
  BeginCompute(m, "AKS");
  m.CopyId("kubernetes_cluster_id", "/properties/resourceId");
  const std::string p = "/properties/properties";
  m.CopyString("cluster_purpose", p + "/clusterPurpose", "FastProd");
  if (m.Blocks("ssl") > 0) {
    m.Set(p + "/sslConfiguration/status", "Enabled");
    m.CopyString("ssl.0.cname", p + "/sslConfiguration/cname");
    m.CopyString("ssl.0.leaf_domain_label", p + "/sslConfiguration/leafDomainLabel");
  } else if (!m.Unknown("ssl")) {
    m.Set(p + "/sslConfiguration/status", "Disabled");
  }
}

void MapVirtualMachine(Mapper& m, bool linux) {
  Begin(m, kVm, m.planned().name);
  m.CopyTags();
  m.CopyIdentity();
  const std::string p = "/properties";
  m.CopyString("size", p + "/hardwareProfile/vmSize");
  if (m.Unknown("zone")) {
    m.MarkUnknown("/zones");
  } else if (std::optional<std::string> z = m.String("zone"); z && !z->empty()) {
    m.Set("/zones", Json::array({*z}));
  }
  MapPriority(m, p);
  m.CopyString("computer_name", p + "/osProfile/computerName");
  m.CopyString("admin_username", p + "/osProfile/adminUsername");
  if (linux) {
    m.CopyBool("disable_password_authentication",
               p + "/osProfile/linuxConfiguration/disablePasswordAuthentication", true);
    m.CopyBool("provision_vm_agent", p + "/osProfile/linuxConfiguration/provisionVMAgent", true);
  } else {
    m.CopyBool("provision_vm_agent", p + "/osProfile/windowsConfiguration/provisionVMAgent", true);
    m.CopyBool(m.Either("", {"automatic_updates_enabled", "enable_automatic_updates"}),
               p + "/osProfile/windowsConfiguration/enableAutomaticUpdates", true);
  }
  m.CopyIdList("network_interface_ids", p + "/networkProfile/networkInterfaces");
  m.CopyId("availability_set_id", p + "/availabilitySet/id");
  m.CopyId("virtual_machine_scale_set_id", p + "/virtualMachineScaleSet/id");
  m.CopyId("proximity_placement_group_id", p + "/proximityPlacementGroup/id");
  MapOsDisk(m, "os_disk", p);
  MapImage(m, p);
}

// The legacy azurerm_virtual_machine (superseded by the linux/windows ones).
void MapLegacyVirtualMachine(Mapper& m) {
  Begin(m, kVm, m.planned().name);
  m.CopyTags();
  m.CopyIdentity();
  const std::string p = "/properties";
  m.CopyString("vm_size", p + "/hardwareProfile/vmSize");
  m.CopyStringList("zones", "/zones");
  m.CopyIdList("network_interface_ids", p + "/networkProfile/networkInterfaces");
  m.CopyId("availability_set_id", p + "/availabilitySet/id");
  if (m.Blocks("os_profile_linux_config") > 0) {
    m.CopyBool("os_profile_linux_config.0.disable_password_authentication",
               p + "/osProfile/linuxConfiguration/disablePasswordAuthentication", true);
  } else if (m.Blocks("os_profile_windows_config") > 0) {
    m.CopyBool("os_profile_windows_config.0.provision_vm_agent",
               p + "/osProfile/windowsConfiguration/provisionVMAgent", false);
  }
  if (m.Blocks("storage_os_disk") > 0) {
    m.CopyString("storage_os_disk.0.caching", p + "/storageProfile/osDisk/caching");
    m.CopyString("storage_os_disk.0.managed_disk_type",
                 p + "/storageProfile/osDisk/managedDisk/storageAccountType");
  }
  size_t n = m.Blocks("storage_data_disk");
  for (size_t i = 0; i < n; ++i) {
    std::string d = fmt::format("{}/storageProfile/dataDisks/{}", p, i);
    m.CopyNumber(At("storage_data_disk", i, "lun"), d + "/lun");
    m.CopyString(At("storage_data_disk", i, "caching"), d + "/caching");
    m.CopyString(At("storage_data_disk", i, "managed_disk_type"),
                 d + "/managedDisk/storageAccountType");
  }
}

void MapScaleSetNics(Mapper& m, const std::string& vmp) {
  if (m.Unknown("network_interface")) {
    m.MarkUnknown(vmp + "/networkProfile/networkInterfaceConfigurations");
    return;
  }
  size_t n = m.Blocks("network_interface");
  for (size_t i = 0; i < n; ++i) {
    std::string tf = At("network_interface", i);
    std::string arm = fmt::format("{}/networkProfile/networkInterfaceConfigurations/{}", vmp, i);
    m.CopyString(tf + ".name", arm + "/name");
    m.CopyBool(tf + ".primary", arm + "/properties/primary", false);
    m.CopyBool(
        m.Either(tf + ".", {"accelerated_networking_enabled", "enable_accelerated_networking"}),
        arm + "/properties/enableAcceleratedNetworking", false);
    m.CopyId(tf + ".network_security_group_id", arm + "/properties/networkSecurityGroup/id");
    size_t nip = m.Blocks(tf + ".ip_configuration");
    for (size_t j = 0; j < nip; ++j) {
      std::string tip = At(tf + ".ip_configuration", j);
      std::string aip = fmt::format("{}/properties/ipConfigurations/{}", arm, j);
      m.CopyString(tip + ".name", aip + "/name");
      m.CopyBool(tip + ".primary", aip + "/properties/primary", false);
      m.CopyId(tip + ".subnet_id", aip + "/properties/subnet/id");
      if (m.Unknown(tip + ".public_ip_address")) {
        m.MarkUnknown(aip + "/properties/publicIPAddressConfiguration");
      } else if (m.Blocks(tip + ".public_ip_address") > 0) {
        std::string pip = aip + "/properties/publicIPAddressConfiguration";
        // The configuration's name is required in ARM; azurerm requires it too.
        m.CopyString(tip + ".public_ip_address.0.name", pip + "/name", "public-ip");
        m.CopyNumber(tip + ".public_ip_address.0.idle_timeout_in_minutes",
                     pip + "/properties/idleTimeoutInMinutes");
        m.CopyString(tip + ".public_ip_address.0.domain_name_label",
                     pip + "/properties/dnsSettings/domainNameLabel");
      }
    }
  }
}

void MapScaleSetCommon(Mapper& m) {
  m.CopyTags();
  m.CopyIdentity();
  m.CopyStringList("zones", "/zones");
  m.CopyBool("zone_balance", "/properties/zoneBalance", false);
  if (m.Blocks("automatic_instance_repair") > 0) {
    m.CopyBool("automatic_instance_repair.0.enabled", "/properties/automaticRepairsPolicy/enabled");
    m.CopyString("automatic_instance_repair.0.grace_period",
                 "/properties/automaticRepairsPolicy/gracePeriod", "PT30M");
  }
  const std::string vmp = "/properties/virtualMachineProfile";
  MapPriority(m, vmp);
  MapScaleSetNics(m, vmp);
  MapOsDisk(m, "os_disk", vmp);
  MapImage(m, vmp);
  size_t n = m.Blocks("data_disk");
  for (size_t i = 0; i < n; ++i) {
    std::string d = fmt::format("{}/storageProfile/dataDisks/{}", vmp, i);
    m.CopyNumber(At("data_disk", i, "lun"), d + "/lun");
    m.CopyString(At("data_disk", i, "caching"), d + "/caching");
    m.CopyString(At("data_disk", i, "storage_account_type"), d + "/managedDisk/storageAccountType");
    m.CopyNumber(At("data_disk", i, "disk_size_gb"), d + "/diskSizeGB");
  }
}

void MapScaleSet(Mapper& m, bool linux) {
  Begin(m, kVmss, m.planned().name);
  m.CopyString("sku", "/sku/name");
  m.Set("/sku/tier", "Standard");
  m.CopyNumber("instances", "/sku/capacity", 0);
  m.Set("/properties/orchestrationMode", "Uniform");
  m.CopyString("upgrade_mode", "/properties/upgradePolicy/mode", "Manual");
  MapScaleSetCommon(m);
  const std::string os = "/properties/virtualMachineProfile/osProfile";
  m.CopyString("computer_name_prefix", os + "/computerNamePrefix");
  m.CopyString("admin_username", os + "/adminUsername");
  if (linux) {
    m.CopyBool("disable_password_authentication",
               os + "/linuxConfiguration/disablePasswordAuthentication", true);
  } else {
    m.CopyBool(m.Either("", {"automatic_updates_enabled", "enable_automatic_updates"}),
               os + "/windowsConfiguration/enableAutomaticUpdates", true);
  }
}

void MapOrchestratedScaleSet(Mapper& m) {
  Begin(m, kVmss, m.planned().name);
  m.CopyString("sku_name", "/sku/name");
  m.CopyNumber("instances", "/sku/capacity", 0);
  m.Set("/properties/orchestrationMode", "Flexible");
  m.CopyNumber("platform_fault_domain_count", "/properties/platformFaultDomainCount");
  MapScaleSetCommon(m);
  const std::string os = "/properties/virtualMachineProfile/osProfile";
  if (m.Blocks("os_profile") > 0) {
    if (m.Blocks("os_profile.0.linux_configuration") > 0) {
      m.CopyBool("os_profile.0.linux_configuration.0.disable_password_authentication",
                 os + "/linuxConfiguration/disablePasswordAuthentication", true);
      m.CopyString("os_profile.0.linux_configuration.0.admin_username", os + "/adminUsername");
    } else if (m.Blocks("os_profile.0.windows_configuration") > 0) {
      m.CopyString("os_profile.0.windows_configuration.0.admin_username", os + "/adminUsername");
    }
  }
}

void MapNic(Mapper& m) {
  Begin(m, kNic, m.planned().name);
  m.CopyTags();
  const std::string p = "/properties";
  m.CopyBool(m.Either("", {"accelerated_networking_enabled", "enable_accelerated_networking"}),
             p + "/enableAcceleratedNetworking", false);
  m.CopyBool(m.Either("", {"ip_forwarding_enabled", "enable_ip_forwarding"}),
             p + "/enableIPForwarding", false);
  if (m.Unknown("ip_configuration")) return m.MarkUnknown(p + "/ipConfigurations");
  size_t n = m.Blocks("ip_configuration");
  for (size_t i = 0; i < n; ++i) {
    std::string tf = At("ip_configuration", i);
    std::string arm = fmt::format("{}/ipConfigurations/{}", p, i);
    m.CopyString(tf + ".name", arm + "/name");
    m.CopyId(tf + ".subnet_id", arm + "/properties/subnet/id");
    m.CopyString(tf + ".private_ip_address_allocation",
                 arm + "/properties/privateIPAllocationMethod");
    m.CopyString(tf + ".private_ip_address", arm + "/properties/privateIPAddress");
    m.CopyId(tf + ".public_ip_address_id", arm + "/properties/publicIPAddress/id");
    m.CopyBool(tf + ".primary", arm + "/properties/primary", i == 0);
  }
}

void MapPublicIp(Mapper& m) {
  Begin(m, kPip, m.planned().name);
  m.CopyTags();
  m.CopyStringList("zones", "/zones");
  // azurerm 4.0 changed the default SKU from Basic to Standard.
  int major = Major(m, {});
  m.CopyString("sku", "/sku/name", major >= 4 ? "Standard" : "Basic");
  m.CopyString("sku_tier", "/sku/tier", "Regional");
  m.CopyString("allocation_method", "/properties/publicIPAllocationMethod");
  m.CopyString("ip_version", "/properties/publicIPAddressVersion", "IPv4");
  m.CopyNumber("idle_timeout_in_minutes", "/properties/idleTimeoutInMinutes", 4);
  m.CopyString("domain_name_label", "/properties/dnsSettings/domainNameLabel");
}

void MapStorage(Mapper& m) {
  Begin(m, kStorage, m.planned().name);
  m.CopyTags();
  m.CopyIdentity();
  m.CopyString("account_kind", "/kind", "StorageV2");
  if (m.Unknown("account_tier") || m.Unknown("account_replication_type")) {
    m.MarkUnknown("/sku/name");
  } else {
    std::optional<std::string> tier = m.String("account_tier");
    std::optional<std::string> repl = m.String("account_replication_type");
    if (tier && repl) m.Set("/sku/name", *tier + "_" + *repl);
  }
  const std::string p = "/properties";
  // Provider generations: 2.x had allow_blob_public_access (default false) and
  // TLS1_0; 3.0 renamed it allow_nested_items_to_be_public (default true) and
  // made TLS1_2 the default; 4.0 renamed enable_https_traffic_only.
  int major = Major(m, {{"allow_blob_public_access", 2},
                        {"https_traffic_only_enabled", 4},
                        {"enable_https_traffic_only", 3}});
  if (m.Value("allow_nested_items_to_be_public") != nullptr ||
      m.Unknown("allow_nested_items_to_be_public") || major >= 3) {
    m.CopyBool("allow_nested_items_to_be_public", p + "/allowBlobPublicAccess", true);
  } else {
    m.CopyBool("allow_blob_public_access", p + "/allowBlobPublicAccess", false);
  }
  m.CopyString("min_tls_version", p + "/minimumTlsVersion", major >= 3 ? "TLS1_2" : "TLS1_0");
  m.CopyBool(m.Either("", {"https_traffic_only_enabled", "enable_https_traffic_only"}),
             p + "/supportsHttpsTrafficOnly", true);
  m.CopyBoolEnum("public_network_access_enabled", p + "/publicNetworkAccess", true);
  m.CopyBool("shared_access_key_enabled", p + "/allowSharedKeyAccess", true);
  m.CopyBool("is_hns_enabled", p + "/isHnsEnabled", false);
  m.CopyString("access_tier", p + "/accessTier");
  if (m.Blocks("network_rules") > 0) {
    const std::string acl = p + "/networkAcls";
    m.CopyString("network_rules.0.default_action", acl + "/defaultAction");
    if (const Json* b = m.Value("network_rules.0.bypass"); b != nullptr && b->is_array()) {
      std::vector<std::string> parts;
      for (const Json& e : *b) {
        if (e.is_string()) parts.push_back(e.get<std::string>());
      }
      m.Set(acl + "/bypass", Join(parts, ", "));
    }
    if (const Json* ips = m.Value("network_rules.0.ip_rules"); ips != nullptr && ips->is_array()) {
      Json rules = Json::array();
      for (const Json& e : *ips) rules.push_back(Json{{"value", e}, {"action", "Allow"}});
      m.Set(acl + "/ipRules", std::move(rules));
    }
    m.CopyIdList("network_rules.0.virtual_network_subnet_ids", acl + "/virtualNetworkRules");
  }
}

void MapKeyVault(Mapper& m) {
  Begin(m, kKeyVault, m.planned().name);
  m.CopyTags();
  const std::string p = "/properties";
  m.CopyString("tenant_id", p + "/tenantId");
  m.Set(p + "/sku/family", "A");
  m.CopyString("sku_name", p + "/sku/name");
  // Soft delete cannot be turned off since azurerm 3.0 (soft_delete_enabled is 2.x only).
  m.CopyBool("soft_delete_enabled", p + "/enableSoftDelete", true);
  m.CopyNumber("soft_delete_retention_days", p + "/softDeleteRetentionInDays", 90);
  m.CopyBool("purge_protection_enabled", p + "/enablePurgeProtection", false);
  m.CopyBool(m.Either("", {"rbac_authorization_enabled", "enable_rbac_authorization"}),
             p + "/enableRbacAuthorization", false);
  m.CopyBoolEnum("public_network_access_enabled", p + "/publicNetworkAccess", true);
  m.CopyBool("enabled_for_deployment", p + "/enabledForDeployment", false);
  m.CopyBool("enabled_for_disk_encryption", p + "/enabledForDiskEncryption", false);
  m.CopyBool("enabled_for_template_deployment", p + "/enabledForTemplateDeployment", false);
  if (m.Blocks("network_acls") > 0) {
    const std::string acl = p + "/networkAcls";
    m.CopyString("network_acls.0.default_action", acl + "/defaultAction");
    m.CopyString("network_acls.0.bypass", acl + "/bypass");
    if (const Json* ips = m.Value("network_acls.0.ip_rules"); ips != nullptr && ips->is_array()) {
      Json rules = Json::array();
      for (const Json& e : *ips) rules.push_back(Json{{"value", e}});
      m.Set(acl + "/ipRules", std::move(rules));
    }
    m.CopyIdList("network_acls.0.virtual_network_subnet_ids", acl + "/virtualNetworkRules");
  }
}

void MapRegistry(Mapper& m) {
  Begin(m, kRegistry, m.planned().name);
  m.CopyTags();
  m.CopyIdentity();
  m.CopyString("sku", "/sku/name");
  const std::string p = "/properties";
  m.CopyBool("admin_enabled", p + "/adminUserEnabled", false);
  m.CopyBoolEnum("public_network_access_enabled", p + "/publicNetworkAccess", true);
  m.CopyBool("anonymous_pull_enabled", p + "/anonymousPullEnabled", false);
  m.CopyBool("data_endpoint_enabled", p + "/dataEndpointEnabled", false);
  m.CopyBoolEnum("zone_redundancy_enabled", p + "/zoneRedundancy", false);
  if (m.Blocks("network_rule_set") > 0) {
    m.CopyString("network_rule_set.0.default_action", p + "/networkRuleSet/defaultAction", "Allow");
  }
  size_t n = m.Blocks("georeplications");
  for (size_t i = 0; i < n; ++i) {
    // Replicas are child resources in ARM; the rules only ask where they are.
    m.CopyString(At("georeplications", i, "location"),
                 fmt::format("{}/replications/{}/location", p, i));
  }
}

// The resource an extension resource applies to: Resource::scope and the
// template's "scope" property.
void MapScope(Mapper& m, std::string_view tf) {
  bool unknown = false;
  std::vector<std::string> ids = m.Ids(tf, false, &unknown);
  if (unknown) {
    m.MarkUnknown("/scope");
  } else if (!ids.empty()) {
    m.out().scope = ids.front();
    m.Set("/scope", ids.front());
  }
}

void MapDiagnosticSetting(Mapper& m) {
  Begin(m, kDiagnostics, m.planned().name);
  MapScope(m, "target_resource_id");
  const std::string p = "/properties";
  m.CopyId("log_analytics_workspace_id", p + "/workspaceId");
  m.CopyId("storage_account_id", p + "/storageAccountId");
  m.CopyId("eventhub_authorization_rule_id", p + "/eventHubAuthorizationRuleId");
  m.CopyString("eventhub_name", p + "/eventHubName");
  m.CopyString("log_analytics_destination_type", p + "/logAnalyticsDestinationType");
  size_t out = 0;
  // azurerm 4: enabled_log {category | category_group}; azurerm 3: log {..., enabled}.
  for (const char* block : {"enabled_log", "log"}) {
    bool legacy = std::string_view(block) == "log";
    if (m.Unknown(block)) {
      m.MarkUnknown(p + "/logs");
      continue;
    }
    size_t n = m.Blocks(block);
    for (size_t i = 0; i < n; ++i, ++out) {
      std::string tf = At(block, i);
      std::string arm = fmt::format("{}/logs/{}", p, out);
      m.CopyString(tf + ".category", arm + "/category");
      m.CopyString(tf + ".category_group", arm + "/categoryGroup");
      if (legacy) {
        m.CopyBool(tf + ".enabled", arm + "/enabled", true);
      } else {
        m.Set(arm + "/enabled", true);
      }
      if (m.Blocks(tf + ".retention_policy") > 0) {
        m.CopyBool(tf + ".retention_policy.0.enabled", arm + "/retentionPolicy/enabled", false);
        m.CopyNumber(tf + ".retention_policy.0.days", arm + "/retentionPolicy/days", 0);
      }
    }
  }
  out = 0;
  for (const char* block : {"enabled_metric", "metric"}) {
    bool legacy = std::string_view(block) == "metric";
    size_t n = m.Blocks(block);
    for (size_t i = 0; i < n; ++i, ++out) {
      std::string tf = At(block, i);
      std::string arm = fmt::format("{}/metrics/{}", p, out);
      m.CopyString(tf + ".category", arm + "/category");
      if (legacy) {
        m.CopyBool(tf + ".enabled", arm + "/enabled", true);
      } else {
        m.Set(arm + "/enabled", true);
      }
    }
  }
}

void MapAutoscale(Mapper& m) {
  Begin(m, kAutoscale, m.planned().name);
  m.CopyTags();
  MapScope(m, "target_resource_id");
  const std::string p = "/properties";
  m.Set(p + "/name", m.planned().name);
  m.CopyBool("enabled", p + "/enabled", true);
  if (!m.out().scope.empty()) m.Set(p + "/targetResourceUri", m.out().scope);
  size_t n = m.Blocks("profile");
  for (size_t i = 0; i < n; ++i) {
    std::string tf = At("profile", i);
    std::string arm = fmt::format("{}/profiles/{}", p, i);
    m.CopyString(tf + ".name", arm + "/name");
    // ARM writes capacities as strings.
    for (const char* k : {"minimum", "maximum", "default"}) {
      m.CopyNumber(tf + ".capacity.0." + k, arm + "/capacity/" + k, std::nullopt, true);
    }
    size_t nr = m.Blocks(tf + ".rule");
    m.Set(arm + "/rules", Json::array());
    for (size_t j = 0; j < nr; ++j) {
      std::string tr = At(tf + ".rule", j);
      std::string ar = fmt::format("{}/rules/{}", arm, j);
      std::string mt = tr + ".metric_trigger.0.";
      m.CopyString(mt + "metric_name", ar + "/metricTrigger/metricName");
      m.CopyId(mt + "metric_resource_id", ar + "/metricTrigger/metricResourceUri");
      m.CopyString(mt + "time_grain", ar + "/metricTrigger/timeGrain");
      m.CopyString(mt + "statistic", ar + "/metricTrigger/statistic");
      m.CopyString(mt + "time_window", ar + "/metricTrigger/timeWindow");
      m.CopyString(mt + "time_aggregation", ar + "/metricTrigger/timeAggregation");
      m.CopyString(mt + "operator", ar + "/metricTrigger/operator");
      m.CopyNumber(mt + "threshold", ar + "/metricTrigger/threshold");
      std::string sa = tr + ".scale_action.0.";
      m.CopyString(sa + "direction", ar + "/scaleAction/direction");
      m.CopyString(sa + "type", ar + "/scaleAction/type");
      m.CopyNumber(sa + "value", ar + "/scaleAction/value", std::nullopt, true);
      m.CopyString(sa + "cooldown", ar + "/scaleAction/cooldown");
    }
    if (m.Blocks(tf + ".recurrence") > 0) {
      std::string rc = tf + ".recurrence.0.";
      m.Set(arm + "/recurrence/frequency", "Week");
      m.CopyString(rc + "timezone", arm + "/recurrence/schedule/timeZone");
      m.CopyStringList(rc + "days", arm + "/recurrence/schedule/days");
      m.CopyRaw(rc + "hours", arm + "/recurrence/schedule/hours");
      m.CopyRaw(rc + "minutes", arm + "/recurrence/schedule/minutes");
    }
    if (m.Blocks(tf + ".fixed_date") > 0) {
      m.CopyString(tf + ".fixed_date.0.timezone", arm + "/fixedDate/timeZone");
      m.CopyString(tf + ".fixed_date.0.start", arm + "/fixedDate/start");
      m.CopyString(tf + ".fixed_date.0.end", arm + "/fixedDate/end");
    }
  }
}

}  // namespace

bool MapAzurerm(Mapper& m) {
  const std::string& t = m.planned().type;
  if (t == "azurerm_machine_learning_workspace") {
    MapWorkspace(m);
  } else if (t == "azurerm_machine_learning_compute_cluster") {
    MapComputeCluster(m);
  } else if (t == "azurerm_machine_learning_compute_instance") {
    MapComputeInstance(m);
  } else if (t == "azurerm_machine_learning_inference_cluster") {
    MapInferenceCluster(m);
  } else if (t == "azurerm_linux_virtual_machine") {
    MapVirtualMachine(m, true);
  } else if (t == "azurerm_windows_virtual_machine") {
    MapVirtualMachine(m, false);
  } else if (t == "azurerm_virtual_machine") {
    MapLegacyVirtualMachine(m);
  } else if (t == "azurerm_linux_virtual_machine_scale_set") {
    MapScaleSet(m, true);
  } else if (t == "azurerm_windows_virtual_machine_scale_set") {
    MapScaleSet(m, false);
  } else if (t == "azurerm_orchestrated_virtual_machine_scale_set") {
    MapOrchestratedScaleSet(m);
  } else if (t == "azurerm_network_interface") {
    MapNic(m);
  } else if (t == "azurerm_public_ip") {
    MapPublicIp(m);
  } else if (t == "azurerm_storage_account") {
    MapStorage(m);
  } else if (t == "azurerm_key_vault") {
    MapKeyVault(m);
  } else if (t == "azurerm_container_registry") {
    MapRegistry(m);
  } else if (t == "azurerm_monitor_diagnostic_setting") {
    MapDiagnosticSetting(m);
  } else if (t == "azurerm_monitor_autoscale_setting") {
    MapAutoscale(m);
  } else {
    return false;
  }
  std::sort(m.out().unknown.begin(), m.out().unknown.end());
  return true;
}

}  // namespace gantry::assess::tf
