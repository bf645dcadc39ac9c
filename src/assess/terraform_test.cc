#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "gantry/assess/inputs.h"
#include "gantry/core/json.h"

namespace gantry::assess {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Testdata(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/terraform/" + name;
}

// A SourceDoc without line numbers (those come from ParseSource; the reader
// only asks LineOf, which answers 1 then).
SourceDoc DocOf(const Json& value, std::string path = "plan.json") {
  SourceDoc d;
  d.path = std::move(path);
  d.value = value;
  return d;
}

SourceDoc Fixture(const std::string& name) {
  Result<std::string> text = ReadFile(Testdata(name));
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  Result<Json> j = ParseJson(text.ok() ? *text : "{}", name);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  return DocOf(j.ok() ? *j : Json::object(), name);
}

std::vector<Resource> Read(const SourceDoc& doc) {
  Result<std::vector<Resource>> r = ReadTerraformPlan(doc);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<Resource>{};
}

const Resource* ByAddress(const std::vector<Resource>& rs, std::string_view address) {
  for (const Resource& r : rs) {
    if (r.address == address) return &r;
  }
  ADD_FAILURE() << "no resource " << address;
  return nullptr;
}

std::string Str(const Resource& r, std::string_view path) {
  const Json* v = r.Get(path);
  if (v == nullptr) return "<absent>";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

// The value at a JSON pointer of the body (Resource::Get does not index arrays).
std::string Ptr(const Resource& r, const std::string& pointer) {
  const Json::json_pointer jp(pointer);
  if (!r.body.contains(jp)) return "<absent>";
  const Json& v = r.body.at(jp);
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// A plan of one resource with `values` (and optional after_unknown / configuration).
Json OnePlan(const std::string& type, Json values, Json after_unknown = nullptr,
             Json expressions = nullptr, std::string version_constraint = "") {
  Json plan = {{"format_version", "1.2"}, {"terraform_version", "1.9.0"}};
  plan["planned_values"]["root_module"]["resources"] =
      Json::array({{{"address", type + ".x"},
                    {"mode", "managed"},
                    {"type", type},
                    {"name", "x"},
                    {"values", std::move(values)}}});
  if (!after_unknown.is_null()) {
    plan["resource_changes"] = Json::array(
        {{{"address", type + ".x"},
          {"change", {{"actions", {"create"}}, {"after_unknown", std::move(after_unknown)}}}}});
  }
  if (!expressions.is_null() || !version_constraint.empty()) {
    Json& cfg = plan["configuration"];
    if (!version_constraint.empty()) {
      cfg["provider_config"]["azurerm"] = {{"name", "azurerm"},
                                           {"version_constraint", version_constraint}};
    }
    cfg["root_module"]["resources"] =
        Json::array({{{"address", type + ".x"},
                      {"mode", "managed"},
                      {"type", type},
                      {"name", "x"},
                      {"expressions", expressions.is_null() ? Json::object() : expressions}}});
  }
  return plan;
}

Resource ReadOne(const Json& plan) {
  std::vector<Resource> rs = Read(DocOf(plan));
  EXPECT_EQ(rs.size(), 1u);
  return rs.empty() ? Resource{} : rs.front();
}

Status ReadError(const Json& plan) {
  Result<std::vector<Resource>> r = ReadTerraformPlan(DocOf(plan));
  EXPECT_FALSE(r.ok());
  return r.status();
}

// ----------------------------------------------------- modules, references --

TEST(TerraformPlan, ReadsRootAndChildModulesSkippingDataSources) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  std::vector<std::string> addresses;
  for (const Resource& r : rs) addresses.push_back(r.address);
  EXPECT_THAT(addresses,
              ElementsAre("azurerm_resource_group.rg", "azurerm_user_assigned_identity.ws",
                          "azurerm_monitor_diagnostic_setting.root",
                          "module.ml.azurerm_machine_learning_workspace.ws",
                          "module.ml.azurerm_machine_learning_compute_cluster.gpu[0]",
                          "module.ml.azurerm_machine_learning_compute_cluster.gpu[1]",
                          "module.ml.azurerm_machine_learning_compute_instance.dev",
                          "module.ml.azurerm_monitor_diagnostic_setting.ws"));
  for (const Resource& r : rs) {
    EXPECT_EQ(r.origin, Origin::kTerraform);
    EXPECT_EQ(r.where.file, "ml_modules.json");
  }
}

TEST(TerraformPlan, WorkspaceInModuleMappedOntoArm) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  const Resource* ws = ByAddress(rs, "module.ml.azurerm_machine_learning_workspace.ws");
  ASSERT_NE(ws, nullptr);
  EXPECT_TRUE(ws->IsType("Microsoft.MachineLearningServices/workspaces"));
  EXPECT_EQ(ws->name, "mlw-prod");
  // "East US" as written; azurerm and ARM normalise it.
  EXPECT_EQ(ws->location, "eastus");
  EXPECT_EQ(Str(*ws, "location"), "eastus");
  EXPECT_EQ(ws->where.pointer, "/planned_values/root_module/child_modules/0/resources/0");
  // The id is known only after apply: the address stands in, the body has none.
  EXPECT_EQ(ws->id, "module.ml.azurerm_machine_learning_workspace.ws");
  EXPECT_EQ(ws->Get("id"), nullptr);
  EXPECT_EQ(Str(*ws, "properties.publicNetworkAccess"), "Disabled");
  EXPECT_EQ(Str(*ws, "properties.hbiWorkspace"), "true");
  EXPECT_EQ(Str(*ws, "properties.v1LegacyMode"), "false");
  EXPECT_EQ(Str(*ws, "properties.managedNetwork.isolationMode"), "AllowOnlyApprovedOutbound");
  EXPECT_EQ(Str(*ws, "identity.type"), "SystemAssigned,UserAssigned");
  // identity_ids and primary_user_assigned_identity come through var.uai_id from
  // the root module's azurerm_user_assigned_identity.ws, whose id is its address.
  const Json* uai = ws->Get("identity.userAssignedIdentities");
  ASSERT_NE(uai, nullptr);
  EXPECT_TRUE(uai->contains("azurerm_user_assigned_identity.ws")) << uai->dump();
  EXPECT_EQ(Str(*ws, "properties.primaryUserAssignedIdentity"),
            "azurerm_user_assigned_identity.ws");
  // key_vault_id comes from a module input the caller does not set: unknown.
  EXPECT_TRUE(ws->IsUnknown("properties.keyVault"));
  EXPECT_EQ(ws->Get("properties.keyVault"), nullptr);
  // application_insights_id is unknown in the plan but not configured: absent, not unknown.
  EXPECT_FALSE(ws->IsUnknown("properties.applicationInsights"));
  EXPECT_EQ(ws->Get("properties.encryption"), nullptr);
  ASSERT_NE(ws->Tag("Data-Classification"), nullptr);
  EXPECT_EQ(*ws->Tag("Data-Classification"), "confidential");
}

TEST(TerraformPlan, ComputeClusterNamedAfterReferencedWorkspace) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  const Resource* a = ByAddress(rs, "module.ml.azurerm_machine_learning_compute_cluster.gpu[0]");
  const Resource* b = ByAddress(rs, "module.ml.azurerm_machine_learning_compute_cluster.gpu[1]");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(a->IsType("Microsoft.MachineLearningServices/workspaces/computes"));
  EXPECT_EQ(a->name, "mlw-prod/gpu-a");
  EXPECT_EQ(b->name, "mlw-prod/gpu-b");
  EXPECT_EQ(Str(*a, "properties.computeType"), "AmlCompute");
  EXPECT_EQ(Str(*a, "properties.disableLocalAuth"), "false");
  EXPECT_EQ(Str(*b, "properties.disableLocalAuth"), "true");
  EXPECT_EQ(Str(*a, "properties.properties.vmSize"), "Standard_ND96isr_H100_v5");
  EXPECT_EQ(Str(*b, "properties.properties.vmPriority"), "LowPriority");
  EXPECT_EQ(Str(*a, "properties.properties.scaleSettings.minNodeCount"), "2");
  EXPECT_EQ(Str(*a, "properties.properties.scaleSettings.maxNodeCount"), "8");
  EXPECT_EQ(Str(*a, "properties.properties.scaleSettings.nodeIdleTimeBeforeScaleDown"), "PT30M");
  EXPECT_EQ(Str(*a, "properties.properties.enableNodePublicIp"), "true");
  EXPECT_EQ(Str(*b, "properties.properties.enableNodePublicIp"), "false");
  EXPECT_EQ(Str(*a, "properties.properties.remoteLoginPortPublicAccess"), "Disabled");
  // subnet_resource_id = var.subnet_id, which the module's caller leaves unset.
  EXPECT_TRUE(a->IsUnknown("properties.properties.subnet.id"));
  EXPECT_FALSE(a->IsUnknown("properties.disableLocalAuth"));
}

TEST(TerraformPlan, ComputeInstanceUnknownAndDefaults) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  const Resource* ci = ByAddress(rs, "module.ml.azurerm_machine_learning_compute_instance.dev");
  ASSERT_NE(ci, nullptr);
  EXPECT_EQ(ci->name, "mlw-prod/ci-dev");
  EXPECT_EQ(Str(*ci, "properties.computeType"), "ComputeInstance");
  // No location of its own: the workspace's.
  EXPECT_EQ(ci->location, "eastus");
  // local_auth_enabled = var.local_auth: known after apply.
  EXPECT_TRUE(ci->IsUnknown("properties.disableLocalAuth"));
  EXPECT_EQ(ci->Get("properties.disableLocalAuth"), nullptr);
  // node_public_ip_enabled is computed but not configured: the provider default.
  EXPECT_EQ(Str(*ci, "properties.properties.enableNodePublicIp"), "true");
  EXPECT_EQ(Str(*ci, "properties.properties.sshSettings.sshPublicAccess"), "Enabled");
  EXPECT_EQ(Str(*ci, "properties.properties.vmSize"), "Standard_DS3_v2");
  EXPECT_EQ(ci->Get("properties.properties.idleTimeBeforeShutdown"), nullptr);
}

TEST(TerraformPlan, DiagnosticSettingsScopedToWorkspaceThroughReferenceAndModuleOutput) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  const Resource* ws = ByAddress(rs, "module.ml.azurerm_machine_learning_workspace.ws");
  const Resource* inner = ByAddress(rs, "module.ml.azurerm_monitor_diagnostic_setting.ws");
  const Resource* outer = ByAddress(rs, "azurerm_monitor_diagnostic_setting.root");
  ASSERT_NE(ws, nullptr);
  ASSERT_NE(inner, nullptr);
  ASSERT_NE(outer, nullptr);
  EXPECT_TRUE(inner->IsType("Microsoft.Insights/diagnosticSettings"));
  EXPECT_EQ(inner->scope, ws->id);
  // module.ml.workspace_id -> the module's output -> azurerm_machine_learning_workspace.ws
  EXPECT_EQ(outer->scope, ws->id);
  const Json* logs = inner->Get("properties.logs");
  ASSERT_NE(logs, nullptr);
  ASSERT_EQ(logs->size(), 2u);
  EXPECT_EQ((*logs)[0]["categoryGroup"], "allLogs");
  EXPECT_EQ((*logs)[0]["enabled"], true);
  EXPECT_EQ((*logs)[1]["category"], "AmlComputeClusterEvent");
  EXPECT_EQ(Str(*inner, "properties.metrics"), R"([{"category":"AllMetrics","enabled":true}])");
  // azurerm 3's log {enabled = false}.
  EXPECT_EQ(Str(*outer, "properties.logs"),
            R"([{"category":"AmlComputeJobEvent","enabled":false}])");
}

TEST(TerraformPlan, OtherTypesKeptWithTheirAttributes) {
  std::vector<Resource> rs = Read(Fixture("ml_modules.json"));
  const Resource* rg = ByAddress(rs, "azurerm_resource_group.rg");
  ASSERT_NE(rg, nullptr);
  EXPECT_EQ(rg->type, "terraform:azurerm_resource_group");
  EXPECT_EQ(rg->name, "rg-ml");
  EXPECT_EQ(Str(*rg, "properties.location"), "eastus");
  EXPECT_THAT(rg->unknown, ElementsAre("/properties/id"));
}

TEST(TerraformPlan, VmNicPublicIpAndScaleSetV3) {
  std::vector<Resource> rs = Read(Fixture("compute_v3.json"));
  ASSERT_EQ(rs.size(), 9u);
  const Resource* nic = ByAddress(rs, "azurerm_network_interface.vm");
  const Resource* vm = ByAddress(rs, "azurerm_linux_virtual_machine.train");
  const Resource* pip = ByAddress(rs, "azurerm_public_ip.vm");
  const Resource* vmss = ByAddress(rs, "azurerm_linux_virtual_machine_scale_set.workers");
  ASSERT_TRUE(nic && vm && pip && vmss);
  // azurerm 3's attribute name.
  EXPECT_EQ(Str(*nic, "properties.enableAcceleratedNetworking"), "true");
  EXPECT_EQ(Str(*nic, "properties.ipConfigurations"),
            R"([{"name":"ipconfig1","properties":{"privateIPAllocationMethod":"Dynamic",)"
            R"("publicIPAddress":{"id":"azurerm_public_ip.vm"},"primary":true}}])");
  // subnet_id refers to a data source: not a resource of the plan, so unknown.
  EXPECT_TRUE(nic->IsUnknown("properties.ipConfigurations.0.properties.subnet.id"));
  EXPECT_EQ(pip->id, "azurerm_public_ip.vm");
  // azurerm 3 (the constraint caps the major below 4): Basic is the default SKU.
  EXPECT_EQ(Str(*pip, "sku.name"), "Basic");
  EXPECT_EQ(Str(*pip, "zones"), R"(["1"])");

  EXPECT_TRUE(vm->IsType("Microsoft.Compute/virtualMachines"));
  EXPECT_EQ(Str(*vm, "properties.hardwareProfile.vmSize"), "Standard_NC24ads_A100_v4");
  EXPECT_EQ(Str(*vm, "properties.networkProfile.networkInterfaces"),
            R"([{"id":"azurerm_network_interface.vm"}])");
  EXPECT_EQ(Str(*vm, "zones"), R"(["2"])");
  EXPECT_EQ(Str(*vm, "properties.priority"), "Spot");
  EXPECT_EQ(Str(*vm, "properties.evictionPolicy"), "Deallocate");
  EXPECT_EQ(Str(*vm, "properties.billingProfile.maxPrice"), "-1");
  EXPECT_EQ(Str(*vm, "properties.osProfile.linuxConfiguration.disablePasswordAuthentication"),
            "true");
  EXPECT_EQ(Str(*vm, "properties.storageProfile.osDisk.managedDisk.storageAccountType"),
            "Premium_LRS");

  EXPECT_TRUE(vmss->IsType("Microsoft.Compute/virtualMachineScaleSets"));
  EXPECT_EQ(vmss->id,
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
            "virtualMachineScaleSets/vmss-workers");
  EXPECT_EQ(Str(*vmss, "id"), vmss->id);
  EXPECT_EQ(Str(*vmss, "sku"), R"({"name":"Standard_ND96asr_v4","tier":"Standard","capacity":4})");
  EXPECT_EQ(Str(*vmss, "zones"), R"(["1","2","3"])");
  EXPECT_EQ(Str(*vmss, "properties.zoneBalance"), "false");
  EXPECT_EQ(Str(*vmss, "properties.automaticRepairsPolicy.enabled"), "true");
  EXPECT_EQ(Str(*vmss, "properties.virtualMachineProfile.priority"), "Regular");
  EXPECT_EQ(Str(*vmss,
                "properties.virtualMachineProfile.osProfile.linuxConfiguration."
                "disablePasswordAuthentication"),
            "false");
  const std::string nicc =
      "/properties/virtualMachineProfile/networkProfile/networkInterfaceConfigurations/0/";
  EXPECT_EQ(Ptr(*vmss, nicc + "name"), "nic");
  EXPECT_EQ(Ptr(*vmss, nicc + "properties/primary"), "true");
  EXPECT_EQ(Ptr(*vmss, nicc + "properties/enableAcceleratedNetworking"), "false");
  EXPECT_EQ(Ptr(*vmss, nicc + "properties/ipConfigurations/0/properties/subnet/id"),
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/"
            "subnets/a");
  EXPECT_EQ(Ptr(*vmss, nicc + "properties/ipConfigurations/0/properties/"
                              "publicIPAddressConfiguration/name"),
            "pub");
}

TEST(TerraformPlan, AutoscaleStorageKeyVaultRegistryV3) {
  std::vector<Resource> rs = Read(Fixture("compute_v3.json"));
  const Resource* as = ByAddress(rs, "azurerm_monitor_autoscale_setting.workers");
  const Resource* sa = ByAddress(rs, "azurerm_storage_account.data");
  const Resource* kv = ByAddress(rs, "azurerm_key_vault.kv");
  const Resource* acr = ByAddress(rs, "azurerm_container_registry.acr");
  const Resource* key = ByAddress(rs, "azurerm_key_vault_key.cmk");
  ASSERT_TRUE(as && sa && kv && acr && key);
  // A reference to a resource whose id is known: the real id.
  EXPECT_EQ(as->scope, ByAddress(rs, "azurerm_linux_virtual_machine_scale_set.workers")->id);
  EXPECT_EQ(Str(*as, "properties.targetResourceUri"), as->scope);
  EXPECT_EQ(Ptr(*as, "/properties/profiles/0/capacity"),
            R"({"minimum":"2","maximum":"10","default":"2"})");
  EXPECT_EQ(Ptr(*as, "/properties/profiles/0/rules/0/scaleAction/value"), "1");
  EXPECT_EQ(Ptr(*as, "/properties/profiles/0/rules/0/metricTrigger/threshold"), "75");
  EXPECT_EQ(Ptr(*as, "/properties/enabled"), "true");

  EXPECT_EQ(Str(*sa, "sku.name"), "Standard_LRS");
  EXPECT_EQ(Str(*sa, "kind"), "StorageV2");
  EXPECT_EQ(Str(*sa, "properties.minimumTlsVersion"), "TLS1_2");
  EXPECT_EQ(Str(*sa, "properties.allowBlobPublicAccess"), "true");
  EXPECT_EQ(Str(*sa, "properties.supportsHttpsTrafficOnly"), "true");
  EXPECT_EQ(Str(*sa, "properties.publicNetworkAccess"), "Enabled");

  EXPECT_EQ(Str(*kv, "properties.enablePurgeProtection"), "false");
  EXPECT_EQ(Str(*kv, "properties.enableSoftDelete"), "true");
  EXPECT_EQ(Str(*kv, "properties.softDeleteRetentionInDays"), "90");
  EXPECT_EQ(Str(*kv, "properties.enableRbacAuthorization"), "false");
  EXPECT_EQ(
      Str(*kv, "properties.networkAcls"),
      R"({"defaultAction":"Deny","bypass":"AzureServices","ipRules":[{"value":"1.2.3.4/32"}]})");

  EXPECT_EQ(Str(*acr, "properties.adminUserEnabled"), "true");
  EXPECT_EQ(Str(*acr, "properties.anonymousPullEnabled"), "false");
  EXPECT_EQ(Str(*acr, "properties.publicNetworkAccess"), "Enabled");
  EXPECT_EQ(Str(*acr, "sku.name"), "Premium");

  EXPECT_EQ(key->type, "terraform:azurerm_key_vault_key");
  EXPECT_THAT(key->unknown,
              ElementsAre("/properties/id", "/properties/key_vault_id", "/properties/version"));
}

// ------------------------------------------------ provider-default semantics --

TEST(TerraformDefaults, WorkspaceAbsentAttributes) {
  Resource ws = ReadOne(OnePlan("azurerm_machine_learning_workspace", {{"name", "w"}}));
  // public_network_access_enabled defaults to true in azurerm: Enabled.
  EXPECT_EQ(Str(ws, "properties.publicNetworkAccess"), "Enabled");
  EXPECT_EQ(Str(ws, "properties.hbiWorkspace"), "false");
  EXPECT_EQ(Str(ws, "properties.v1LegacyMode"), "false");
  EXPECT_EQ(Str(ws, "sku.name"), "Basic");
  EXPECT_EQ(ws.Get("properties.managedNetwork"), nullptr);
  EXPECT_EQ(ws.Get("identity"), nullptr);
  Resource on = ReadOne(OnePlan("azurerm_machine_learning_workspace",
                                {{"name", "w"}, {"public_network_access_enabled", true}}));
  EXPECT_EQ(Str(on, "properties.publicNetworkAccess"), "Enabled");
  Resource enc = ReadOne(
      OnePlan("azurerm_machine_learning_workspace",
              {{"name", "w"},
               {"encryption", {{{"key_vault_id", "/kv"}, {"key_id", "https://kv/keys/k/1"}}}}}));
  EXPECT_EQ(Str(enc, "properties.encryption.status"), "Enabled");
  EXPECT_EQ(Str(enc, "properties.encryption.keyVaultProperties.keyVaultArmId"), "/kv");
  EXPECT_EQ(Str(enc, "properties.encryption.keyVaultProperties.keyIdentifier"),
            "https://kv/keys/k/1");
}

TEST(TerraformDefaults, ComputeClusterAbsentAttributes) {
  Resource c = ReadOne(
      OnePlan("azurerm_machine_learning_compute_cluster",
              {{"name", "c"},
               {"machine_learning_workspace_id",
                "/subscriptions/s/resourceGroups/r/providers/Microsoft.MachineLearningServices/"
                "workspaces/existing-ws"},
               {"scale_settings", {{{"max_node_count", 2}}}}}));
  // A known workspace id names the parent.
  EXPECT_EQ(c.name, "existing-ws/c");
  // local_auth_enabled and node_public_ip_enabled default to true,
  // ssh_public_access_enabled to false.
  EXPECT_EQ(Str(c, "properties.disableLocalAuth"), "false");
  EXPECT_EQ(Str(c, "properties.properties.enableNodePublicIp"), "true");
  EXPECT_EQ(Str(c, "properties.properties.remoteLoginPortPublicAccess"), "Disabled");
  EXPECT_EQ(Str(c, "properties.properties.scaleSettings.minNodeCount"), "0");
  EXPECT_EQ(c.Get("properties.properties.subnet"), nullptr);
  EXPECT_TRUE(c.unknown.empty());
  Resource open = ReadOne(OnePlan("azurerm_machine_learning_compute_cluster",
                                  {{"name", "c"}, {"ssh_public_access_enabled", true}}));
  EXPECT_EQ(Str(open, "properties.properties.remoteLoginPortPublicAccess"), "Enabled");
  // Neither an id nor a reference: the parent's name is unknown.
  EXPECT_EQ(open.name, "(unknown workspace)/c");
  EXPECT_TRUE(open.IsUnknown("name"));
}

TEST(TerraformDefaults, ComputeInstanceWithoutSshBlockHasThePortClosed) {
  Resource ci = ReadOne(OnePlan("azurerm_machine_learning_compute_instance", {{"name", "i"}}));
  EXPECT_EQ(Str(ci, "properties.properties.sshSettings.sshPublicAccess"), "Disabled");
  EXPECT_EQ(Str(ci, "properties.disableLocalAuth"), "false");
  EXPECT_EQ(Str(ci, "properties.properties.enableNodePublicIp"), "true");
}

TEST(TerraformDefaults, StorageDependsOnProviderGeneration) {
  // azurerm 2.x: TLS1_0 and allow_blob_public_access (default false).
  Resource v2 = ReadOne(
      OnePlan("azurerm_storage_account", {{"name", "s"}}, nullptr, Json::object(), "~> 2.99"));
  EXPECT_EQ(Str(v2, "properties.minimumTlsVersion"), "TLS1_0");
  EXPECT_EQ(Str(v2, "properties.allowBlobPublicAccess"), "false");
  // No constraint, but a 2.x attribute name.
  Resource hint = ReadOne(
      OnePlan("azurerm_storage_account", {{"name", "s"}, {"allow_blob_public_access", true}}));
  EXPECT_EQ(Str(hint, "properties.minimumTlsVersion"), "TLS1_0");
  EXPECT_EQ(Str(hint, "properties.allowBlobPublicAccess"), "true");
  // Nothing says: today's provider.
  Resource v4 = ReadOne(OnePlan("azurerm_storage_account", {{"name", "s"}}));
  EXPECT_EQ(Str(v4, "properties.minimumTlsVersion"), "TLS1_2");
  EXPECT_EQ(Str(v4, "properties.allowBlobPublicAccess"), "true");
  EXPECT_EQ(Str(v4, "properties.supportsHttpsTrafficOnly"), "true");
  // Explicit values win over defaults, under both names.
  Resource set =
      ReadOne(OnePlan("azurerm_storage_account", {{"name", "s"},
                                                  {"min_tls_version", "TLS1_1"},
                                                  {"allow_nested_items_to_be_public", false},
                                                  {"https_traffic_only_enabled", false},
                                                  {"public_network_access_enabled", false}}));
  EXPECT_EQ(Str(set, "properties.minimumTlsVersion"), "TLS1_1");
  EXPECT_EQ(Str(set, "properties.allowBlobPublicAccess"), "false");
  EXPECT_EQ(Str(set, "properties.supportsHttpsTrafficOnly"), "false");
  EXPECT_EQ(Str(set, "properties.publicNetworkAccess"), "Disabled");
  Resource pip4 =
      ReadOne(OnePlan("azurerm_public_ip", {{"name", "p"}}, nullptr, Json::object(), ">= 4.1.0"));
  EXPECT_EQ(Str(pip4, "sku.name"), "Standard");
}

TEST(TerraformDefaults, KeyVaultRegistryNicVmAbsentAttributes) {
  Resource kv = ReadOne(OnePlan("azurerm_key_vault", {{"name", "k"}}));
  EXPECT_EQ(Str(kv, "properties.enablePurgeProtection"), "false");
  EXPECT_EQ(Str(kv, "properties.enableRbacAuthorization"), "false");
  EXPECT_EQ(kv.Get("properties.networkAcls"), nullptr);
  Resource kv4 = ReadOne(OnePlan(
      "azurerm_key_vault",
      {{"name", "k"}, {"rbac_authorization_enabled", true}, {"purge_protection_enabled", true}}));
  EXPECT_EQ(Str(kv4, "properties.enableRbacAuthorization"), "true");
  EXPECT_EQ(Str(kv4, "properties.enablePurgeProtection"), "true");
  Resource acr = ReadOne(OnePlan("azurerm_container_registry", {{"name", "a"}, {"sku", "Basic"}}));
  EXPECT_EQ(Str(acr, "properties.adminUserEnabled"), "false");
  EXPECT_EQ(Str(acr, "properties.publicNetworkAccess"), "Enabled");
  Resource nic = ReadOne(OnePlan("azurerm_network_interface", {{"name", "n"}}));
  EXPECT_EQ(Str(nic, "properties.enableAcceleratedNetworking"), "false");
  Resource nic4 = ReadOne(OnePlan("azurerm_network_interface",
                                  {{"name", "n"}, {"accelerated_networking_enabled", true}}));
  EXPECT_EQ(Str(nic4, "properties.enableAcceleratedNetworking"), "true");
  Resource vm = ReadOne(
      OnePlan("azurerm_linux_virtual_machine", {{"name", "v"}, {"size", "Standard_D2s_v5"}}));
  EXPECT_EQ(Str(vm, "properties.priority"), "Regular");
  EXPECT_EQ(vm.Get("properties.billingProfile"), nullptr);
  EXPECT_EQ(vm.Get("zones"), nullptr);
  EXPECT_EQ(Str(vm, "properties.osProfile.linuxConfiguration.disablePasswordAuthentication"),
            "true");
  Resource win = ReadOne(OnePlan("azurerm_windows_virtual_machine", {{"name", "w"}}));
  EXPECT_EQ(win.Get("properties.osProfile.linuxConfiguration"), nullptr);
  Resource legacy = ReadOne(
      OnePlan("azurerm_virtual_machine",
              {{"name", "l"},
               {"vm_size", "Standard_NC6s_v3"},
               {"zones", {"1"}},
               {"os_profile_linux_config", {{{"disable_password_authentication", false}}}}}));
  EXPECT_EQ(Str(legacy, "properties.hardwareProfile.vmSize"), "Standard_NC6s_v3");
  EXPECT_EQ(Str(legacy, "properties.osProfile.linuxConfiguration.disablePasswordAuthentication"),
            "false");
  Resource flex = ReadOne(OnePlan("azurerm_orchestrated_virtual_machine_scale_set",
                                  {{"name", "f"},
                                   {"sku_name", "Standard_ND96asr_v4"},
                                   {"instances", 2},
                                   {"priority", "Spot"}}));
  EXPECT_EQ(Str(flex, "properties.orchestrationMode"), "Flexible");
  EXPECT_EQ(Str(flex, "sku.capacity"), "2");
  EXPECT_EQ(Str(flex, "properties.virtualMachineProfile.billingProfile.maxPrice"), "-1");
}

TEST(TerraformPlan, UnknownAttributeThatIsConfiguredStaysUnknown) {
  Json plan = OnePlan("azurerm_machine_learning_workspace", {{"name", "w"}},
                      {{"public_network_access_enabled", true}},
                      {{"public_network_access_enabled", {{"references", {"var.public"}}}}});
  Resource ws = ReadOne(plan);
  EXPECT_TRUE(ws.IsUnknown("properties.publicNetworkAccess"));
  EXPECT_EQ(ws.Get("properties.publicNetworkAccess"), nullptr);
  // Without a configuration section the plan's word is all there is.
  plan.erase("configuration");
  Resource bare = ReadOne(plan);
  EXPECT_TRUE(bare.IsUnknown("properties.publicNetworkAccess"));
  // A whole block known after apply.
  Resource blk = ReadOne(OnePlan("azurerm_machine_learning_compute_cluster", {{"name", "c"}},
                                 {{"scale_settings", true}},
                                 {{"scale_settings", Json::array({Json::object()})}}));
  EXPECT_TRUE(blk.IsUnknown("properties.properties.scaleSettings.minNodeCount"));
}

TEST(TerraformPlan, DeletedAndDataResourcesAreLeftOut) {
  Json plan = OnePlan("azurerm_storage_account", {{"name", "gone"}}, Json::object());
  plan["resource_changes"][0]["change"]["actions"] = {"delete"};
  plan["planned_values"]["root_module"]["resources"].push_back(
      {{"address", "data.azurerm_subnet.s"},
       {"mode", "data"},
       {"type", "azurerm_subnet"},
       {"name", "s"},
       {"values", {{"id", "/x"}}}});
  EXPECT_TRUE(Read(DocOf(plan)).empty());
  // Replacement (delete then create) keeps the resource.
  plan["resource_changes"][0]["change"]["actions"] = {"delete", "create"};
  EXPECT_EQ(Read(DocOf(plan)).size(), 1u);
}

TEST(TerraformPlan, StateJsonValuesAreRead) {
  Json state = {{"format_version", "1.0"}, {"terraform_version", "1.9.0"}};
  state["values"]["root_module"]["resources"] = Json::array(
      {{{"address", "azurerm_key_vault.k"},
        {"mode", "managed"},
        {"type", "azurerm_key_vault"},
        {"name", "k"},
        {"values",
         {{"id", "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/kv1"},
          {"name", "kv1"},
          {"purge_protection_enabled", true}}}}});
  Resource kv = ReadOne(state);
  EXPECT_EQ(kv.id, "/subscriptions/s/resourceGroups/r/providers/Microsoft.KeyVault/vaults/kv1");
  EXPECT_EQ(Str(kv, "properties.enablePurgeProtection"), "true");
}

TEST(TerraformPlan, EmptyPlan) {
  EXPECT_TRUE(Read(DocOf({{"terraform_version", "1.9.0"},
                          {"planned_values", {{"root_module", Json::object()}}}}))
                  .empty());
}

TEST(TerraformPlan, WhereIsTheLineOfTheResourceObject) {
  Result<SourceDoc> doc = ReadSourceFile(Testdata("ml_modules.json"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  std::vector<Resource> rs = Read(*doc);
  const Resource* ws = ByAddress(rs, "module.ml.azurerm_machine_learning_workspace.ws");
  ASSERT_NE(ws, nullptr);
  // The '{' of the planned_values object, one line above its "address".
  Result<std::string> text = ReadFile(Testdata("ml_modules.json"));
  ASSERT_TRUE(text.ok());
  size_t at = text->find(R"("address": "module.ml.azurerm_machine_learning_workspace.ws")");
  ASSERT_NE(at, std::string::npos);
  int line = 1 + static_cast<int>(std::count(text->begin(), text->begin() + at, '\n'));
  EXPECT_EQ(ws->where.line, line - 1);
  EXPECT_EQ(ws->where.file, Testdata("ml_modules.json"));
}

// ---------------------------------------------------------------- bad input --

TEST(TerraformPlanErrors, NotAPlan) {
  Status s = ReadError(Json::array());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("plan.json"));
  s = ReadError({{"terraform_version", "1.9.0"}});
  EXPECT_THAT(s.message(), HasSubstr("no planned_values"));
  EXPECT_THAT(s.message(), HasSubstr("terraform show -json"));
}

TEST(TerraformPlanErrors, WrongTypesNameThePointer) {
  Json plan = {{"terraform_version", "1.9.0"}};
  plan["planned_values"]["root_module"]["resources"] = {{"type", "x"}};
  EXPECT_THAT(ReadError(plan).message(),
              HasSubstr("plan.json: /planned_values/root_module/resources: expected an array"));

  plan["planned_values"]["root_module"]["resources"] = Json::array({{{"name", "a"}}});
  EXPECT_THAT(ReadError(plan).message(),
              HasSubstr("/planned_values/root_module/resources/0/type: a planned resource needs"));

  plan["planned_values"]["root_module"]["resources"] =
      Json::array({{{"type", "azurerm_key_vault"}, {"name", 7}}});
  EXPECT_THAT(ReadError(plan).message(), HasSubstr("/resources/0/name: expected a string"));

  plan["planned_values"]["root_module"]["resources"] =
      Json::array({{{"type", "azurerm_key_vault"}, {"name", "k"}, {"values", "oops"}}});
  EXPECT_THAT(ReadError(plan).message(), HasSubstr("/resources/0/values: expected an object"));

  Json bad_attr = OnePlan("azurerm_machine_learning_compute_cluster",
                          {{"name", "c"}, {"local_auth_enabled", "yes"}});
  Status s = ReadError(bad_attr);
  EXPECT_THAT(s.message(),
              HasSubstr("plan.json: /planned_values/root_module/resources/0/values/"
                        "local_auth_enabled: 'local_auth_enabled' of "
                        "azurerm_machine_learning_compute_cluster.x must be a boolean, found a "
                        "string \"yes\""));
  Json bad_block = OnePlan("azurerm_linux_virtual_machine_scale_set",
                           {{"name", "v"}, {"network_interface", {{"name", "n"}}}});
  EXPECT_THAT(ReadError(bad_block).message(), HasSubstr("must be a list of blocks"));
  Json bad_nested =
      OnePlan("azurerm_network_interface",
              {{"name", "n"}, {"ip_configuration", {{{"public_ip_address_id", 42}}}}});
  EXPECT_THAT(ReadError(bad_nested).message(),
              HasSubstr("/values/ip_configuration/0/public_ip_address_id"));

  Json changes = OnePlan("azurerm_key_vault", {{"name", "k"}});
  changes["resource_changes"] = {{"address", "x"}};
  EXPECT_THAT(ReadError(changes).message(), HasSubstr("/resource_changes: expected an array"));
  changes["resource_changes"] = Json::array({{{"change", Json::object()}}});
  EXPECT_THAT(ReadError(changes).message(), HasSubstr("/resource_changes/0/address"));
  changes["resource_changes"] =
      Json::array({{{"address", "azurerm_key_vault.x"}, {"change", {{"actions", "delete"}}}}});
  EXPECT_THAT(ReadError(changes).message(), HasSubstr("/resource_changes/0/change/actions"));
}

TEST(TerraformPlanErrors, ModulesAndDuplicates) {
  Json plan = {{"terraform_version", "1.9.0"}};
  plan["planned_values"]["root_module"]["child_modules"] = Json::array({Json::object()});
  EXPECT_THAT(ReadError(plan).message(),
              HasSubstr("/planned_values/root_module/child_modules/0/address: a child module"));
  plan["planned_values"]["root_module"]["child_modules"] = Json::object();
  EXPECT_THAT(ReadError(plan).message(), HasSubstr("child_modules: expected an array"));

  Json dup = OnePlan("azurerm_key_vault", {{"name", "k"}});
  dup["planned_values"]["root_module"]["resources"].push_back(
      dup["planned_values"]["root_module"]["resources"][0]);
  EXPECT_THAT(ReadError(dup).message(), HasSubstr("'azurerm_key_vault.x' appears twice"));

  // Nesting beyond any real configuration (built directly: the text parser
  // would stop it earlier).
  Json deep = {{"address", "module.m"}};
  for (int i = 0; i < 100; ++i) {
    Json outer = {{"address", "module.m"}, {"child_modules", Json::array({std::move(deep)})}};
    deep = std::move(outer);
  }
  Json nested = {{"terraform_version", "1.9.0"}};
  nested["planned_values"]["root_module"]["child_modules"] = Json::array({std::move(deep)});
  EXPECT_THAT(ReadError(nested).message(), HasSubstr("modules nested deeper than 64"));
}

TEST(TerraformPlanErrors, TooManyResources) {
  Json plan = {{"terraform_version", "1.9.0"}};
  Json& rs = plan["planned_values"]["root_module"]["resources"];
  rs = Json::array();
  for (int i = 0; i <= 100000; ++i) {
    rs.push_back({{"address", "azurerm_x.n[" + std::to_string(i) + "]"},
                  {"type", "azurerm_x"},
                  {"name", "n"}});
  }
  EXPECT_THAT(ReadError(plan).message(),
              HasSubstr("/resources/100000: more than 100000 resources in one plan"));
}

// ------------------------------------------------------------- performance --

// 5,000 resources: 1,000 workspaces each with a cluster that refers to it, a
// NIC, a VM that refers to the NIC and a storage account.
Json GeneratedPlan(int groups) {
  Json plan = {{"format_version", "1.2"}, {"terraform_version", "1.9.0"}};
  Json resources = Json::array();
  Json changes = Json::array();
  Json config = Json::array();
  auto add = [&](const std::string& type, const std::string& label, Json values, Json unknown,
                 Json expressions) {
    std::string address = type + "." + label;
    resources.push_back({{"address", address},
                         {"mode", "managed"},
                         {"type", type},
                         {"name", label},
                         {"values", std::move(values)}});
    changes.push_back(
        {{"address", address},
         {"change", {{"actions", {"create"}}, {"after_unknown", std::move(unknown)}}}});
    config.push_back({{"address", address},
                      {"mode", "managed"},
                      {"type", type},
                      {"name", label},
                      {"expressions", std::move(expressions)}});
  };
  for (int i = 0; i < groups; ++i) {
    std::string n = std::to_string(i);
    add("azurerm_machine_learning_workspace", "ws" + n,
        {{"name", "ws" + n},
         {"location", "eastus"},
         {"public_network_access_enabled", false},
         {"identity", {{{"type", "SystemAssigned"}}}},
         {"tags", {{"env", "prod"}}}},
        {{"id", true}, {"key_vault_id", true}},
        {{"key_vault_id", {{"references", {"azurerm_key_vault.kv.id"}}}}});
    add("azurerm_machine_learning_compute_cluster", "c" + n,
        {{"name", "c" + n},
         {"location", "eastus"},
         {"vm_size", "Standard_NC24ads_A100_v4"},
         {"vm_priority", "Dedicated"},
         {"scale_settings",
          {{{"min_node_count", 0},
            {"max_node_count", 4},
            {"scale_down_nodes_after_idle_duration", "PT5M"}}}}},
        {{"id", true}, {"machine_learning_workspace_id", true}},
        {{"machine_learning_workspace_id",
          {{"references",
            {"azurerm_machine_learning_workspace.ws" + n + ".id",
             "azurerm_machine_learning_workspace.ws" + n}}}}});
    add("azurerm_network_interface", "nic" + n,
        {{"name", "nic" + n},
         {"location", "eastus"},
         {"accelerated_networking_enabled", true},
         {"ip_configuration", {{{"name", "ip"}, {"private_ip_address_allocation", "Dynamic"}}}}},
        {{"id", true}}, Json::object());
    add("azurerm_linux_virtual_machine", "vm" + n,
        {{"name", "vm" + n},
         {"location", "eastus"},
         {"size", "Standard_ND96isr_H100_v5"},
         {"zone", "1"},
         {"os_disk", {{{"caching", "ReadWrite"}, {"storage_account_type", "Premium_LRS"}}}}},
        {{"id", true}, {"network_interface_ids", true}},
        {{"network_interface_ids",
          {{"references",
            {"azurerm_network_interface.nic" + n + ".id", "azurerm_network_interface.nic" + n}}}}});
    add("azurerm_storage_account", "sa" + n,
        {{"name", "sa" + n},
         {"location", "eastus"},
         {"account_tier", "Standard"},
         {"account_replication_type", "GRS"},
         {"min_tls_version", "TLS1_2"}},
        {{"id", true}}, Json::object());
  }
  plan["planned_values"]["root_module"]["resources"] = std::move(resources);
  plan["resource_changes"] = std::move(changes);
  plan["configuration"]["root_module"]["resources"] = std::move(config);
  return plan;
}

TEST(TerraformPlanLarge, ReadsFiveThousandResources) {
  SourceDoc doc = DocOf(GeneratedPlan(1000));
  // CPU time: the build machine is shared, wall time says more about the neighbours.
  std::clock_t cpu0 = std::clock();
  auto start = std::chrono::steady_clock::now();
  Result<std::vector<Resource>> read = ReadTerraformPlan(doc);
  double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  double ms = 1000.0 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const std::vector<Resource>& rs = *read;
  ASSERT_EQ(rs.size(), 5000u);
  EXPECT_EQ(rs[1].name, "ws0/c0");
  EXPECT_EQ(Str(rs[3], "properties.networkProfile.networkInterfaces"),
            R"([{"id":"azurerm_network_interface.nic0"}])");
  RecordProperty("read_cpu_ms", std::to_string(ms));
  std::printf("ReadTerraformPlan: 5000 resources in %.1f ms CPU (%.1f ms wall)\n", ms, wall_ms);
  // Timing is measured by bench/assess.sh, not asserted here (a shared CI machine).
}

}  // namespace
}  // namespace gantry::assess
