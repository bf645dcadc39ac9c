#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gantry/assess/inputs.h"

namespace gantry::assess {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Testdata(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/live/" + name;
}

std::vector<Resource> ReadFixture(const std::string& name) {
  Result<SourceDoc> doc = ReadSourceFile(Testdata(name));
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  if (!doc.ok()) return {};
  Result<std::vector<Resource>> rs = ReadLiveResources(*doc);
  EXPECT_TRUE(rs.ok()) << rs.status().ToString();
  return rs.ok() ? *rs : std::vector<Resource>{};
}

Status ReadError(std::string_view text) {
  Result<SourceDoc> doc = ParseSource(text, "live.json");
  EXPECT_TRUE(doc.ok()) << doc.status().ToString();
  if (!doc.ok()) return doc.status();
  Result<std::vector<Resource>> rs = ReadLiveResources(*doc);
  EXPECT_FALSE(rs.ok());
  return rs.status();
}

std::string Str(const Resource& r, std::string_view path) {
  const Json* v = r.Get(path);
  if (v == nullptr) return "<absent>";
  return v->is_string() ? v->get<std::string>() : v->dump();
}

TEST(LiveResources, OneArmObject) {
  std::vector<Resource> rs = ReadFixture("arm_workspace.json");
  ASSERT_EQ(rs.size(), 1u);
  const Resource& ws = rs[0];
  EXPECT_TRUE(ws.IsType("Microsoft.MachineLearningServices/workspaces"));
  EXPECT_EQ(ws.name, "mlw-prod");
  EXPECT_EQ(ws.location, "eastus");
  EXPECT_EQ(ws.origin, Origin::kLive);
  EXPECT_EQ(ws.address, ws.id);
  EXPECT_EQ(ws.where.line, 1);
  EXPECT_EQ(ws.where.pointer, "");
  EXPECT_EQ(Str(ws, "properties.publicNetworkAccess"), "Enabled");
  EXPECT_TRUE(ws.unknown.empty());
}

TEST(LiveResources, ListPageWithChildAndExtensionResources) {
  std::vector<Resource> rs = ReadFixture("arm_list.json");
  ASSERT_EQ(rs.size(), 2u);
  // The REST API names a compute "gpu"; the id gives the full name.
  EXPECT_EQ(rs[0].name, "mlw-prod/gpu");
  EXPECT_EQ(rs[0].where.line, 3);
  EXPECT_EQ(rs[0].where.pointer, "/value/0");
  EXPECT_EQ(Str(rs[0], "properties.properties.scaleSettings.minNodeCount"), "1");
  EXPECT_EQ(rs[1].name, "to-law");
  EXPECT_EQ(rs[1].scope,
            "/subscriptions/0000/resourceGroups/rg-ml/providers/"
            "Microsoft.MachineLearningServices/workspaces/mlw-prod");
  EXPECT_EQ(rs[1].where.line, 15);
}

TEST(LiveResources, ArrayOfResources) {
  std::vector<Resource> rs = ReadFixture("array.json");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].where.pointer, "/0");
  EXPECT_EQ(rs[0].where.line, 2);
  EXPECT_EQ(rs[1].where.line, 11);
  EXPECT_EQ(rs[0].location, "westeurope");
  EXPECT_EQ(Str(rs[1], "properties.enableAcceleratedNetworking"), "false");
  // An autoscale setting applies to its target.
  EXPECT_EQ(rs[2].scope,
            "/subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/"
            "virtualMachineScaleSets/ss1");
}

TEST(LiveResources, AzMlComputeShowCluster) {
  std::vector<Resource> rs = ReadFixture("ml_compute_cluster.json");
  ASSERT_EQ(rs.size(), 1u);
  const Resource& c = rs[0];
  EXPECT_TRUE(c.IsType("Microsoft.MachineLearningServices/workspaces/computes"));
  EXPECT_EQ(c.name, "mlw-prod/gpu-cluster");
  EXPECT_EQ(c.address, c.id);
  EXPECT_EQ(Str(c, "properties.computeType"), "AmlCompute");
  EXPECT_EQ(Str(c, "properties.properties.vmSize"), "STANDARD_ND96ISR_H100_V5");
  EXPECT_EQ(Str(c, "properties.properties.vmPriority"), "LowPriority");
  EXPECT_EQ(Str(c, "properties.properties.scaleSettings.minNodeCount"), "2");
  EXPECT_EQ(Str(c, "properties.properties.scaleSettings.maxNodeCount"), "8");
  // Seconds in the CLI, an ISO 8601 duration in ARM.
  EXPECT_EQ(Str(c, "properties.properties.scaleSettings.nodeIdleTimeBeforeScaleDown"), "PT1800S");
  EXPECT_EQ(Str(c, "properties.properties.enableNodePublicIp"), "true");
  EXPECT_EQ(Str(c, "properties.properties.remoteLoginPortPublicAccess"), "Disabled");
  EXPECT_EQ(Str(c, "properties.properties.subnet.id"),
            "/subscriptions/0000/resourceGroups/rg-net/providers/Microsoft.Network/"
            "virtualNetworks/vnet/subnets/ml");
  EXPECT_EQ(Str(c, "identity.type"), "UserAssigned");
  const Json* uai = c.Get("identity.userAssignedIdentities");
  ASSERT_NE(uai, nullptr);
  EXPECT_EQ(uai->size(), 1u);
  // The CLI does not print it: unknown, not absent.
  EXPECT_TRUE(c.IsUnknown("properties.disableLocalAuth"));
}

TEST(LiveResources, AzMlComputeShowInstance) {
  std::vector<Resource> rs = ReadFixture("ml_compute_instance.json");
  ASSERT_EQ(rs.size(), 1u);
  const Resource& ci = rs[0];
  EXPECT_EQ(ci.name, "mlw-prod/ci-alice");
  EXPECT_EQ(Str(ci, "properties.computeType"), "ComputeInstance");
  EXPECT_EQ(Str(ci, "properties.properties.idleTimeBeforeShutdown"), "PT30M");
  EXPECT_EQ(Str(ci, "properties.properties.sshSettings.sshPublicAccess"), "Enabled");
  EXPECT_EQ(Str(ci, "properties.properties.enableNodePublicIp"), "false");
  EXPECT_EQ(ci.Get("properties.properties.subnet"), nullptr);
  EXPECT_EQ(Str(ci, "properties.properties.osImageMetadata.isLatestOsImageVersion"), "false");
  EXPECT_EQ(Str(ci, "properties.properties.schedules.computeStartStop"),
            R"([{"action":"Stop","status":"Enabled","triggerType":"Cron",)"
            R"("cron":{"expression":"0 19 * * 1-5","timeZone":"UTC"}}])");
}

TEST(LiveResources, AzMlWorkspaceShow) {
  std::vector<Resource> rs = ReadFixture("ml_workspace.json");
  ASSERT_EQ(rs.size(), 1u);
  const Resource& ws = rs[0];
  EXPECT_TRUE(ws.IsType("Microsoft.MachineLearningServices/workspaces"));
  EXPECT_EQ(ws.name, "mlw-prod");
  EXPECT_EQ(Str(ws, "properties.publicNetworkAccess"), "Disabled");
  EXPECT_EQ(Str(ws, "properties.hbiWorkspace"), "true");
  EXPECT_EQ(Str(ws, "properties.managedNetwork.isolationMode"), "AllowOnlyApprovedOutbound");
  EXPECT_EQ(Str(ws, "properties.managedNetwork.outboundRules.storage-pe.type"), "PrivateEndpoint");
  EXPECT_EQ(Str(ws, "properties.managedNetwork.outboundRules.pypi.type"), "FQDN");
  EXPECT_EQ(Str(ws, "properties.encryption.status"), "Enabled");
  EXPECT_EQ(Str(ws, "properties.encryption.keyVaultProperties.keyIdentifier"),
            "https://kv.vault.azure.net/keys/cmk/1");
  EXPECT_EQ(Str(ws, "identity.type"), "SystemAssigned");
  EXPECT_EQ(ws.Get("properties.primaryUserAssignedIdentity"), nullptr);
  EXPECT_TRUE(ws.IsUnknown("properties.v1LegacyMode"));
  ASSERT_NE(ws.Tag("data"), nullptr);
}

TEST(LiveResources, EmptyArrayAndEmptyPage) {
  Result<SourceDoc> a = ParseSource("[]", "a.json");
  ASSERT_TRUE(a.ok());
  Result<std::vector<Resource>> ra = ReadLiveResources(*a);
  ASSERT_TRUE(ra.ok());
  EXPECT_TRUE(ra->empty());
  Result<SourceDoc> p = ParseSource(R"({"value": []})", "p.json");
  ASSERT_TRUE(p.ok());
  Result<std::vector<Resource>> rp = ReadLiveResources(*p);
  ASSERT_TRUE(rp.ok());
  EXPECT_TRUE(rp->empty());
}

TEST(LiveResourcesErrors, NotResources) {
  EXPECT_THAT(ReadError(R"({"foo": 1})").message(),
              HasSubstr("live.json: /: not a resource: expected an ARM resource object"));
  EXPECT_THAT(ReadError("42").message(), HasSubstr("live.json: /: expected a resource object"));
  EXPECT_THAT(
      ReadError(R"([{"id": "/x", "type": "Microsoft.Compute/virtualMachines"}, 3])").message(),
      HasSubstr("live.json: /1: expected a resource object, found 3"));
  EXPECT_THAT(ReadError(R"({"value": {"a": 1}})").message(),
              HasSubstr("live.json: /value: an ARM list page's \"value\" must be an array"));
  EXPECT_THAT(ReadError(R"({"type": "widget", "name": "w"})").message(),
              HasSubstr("unknown resource type 'widget'"));
  EXPECT_THAT(ReadError(R"({"type": "Microsoft.Compute/virtualMachines"})").message(),
              HasSubstr("needs \"id\" or \"name\""));
}

TEST(LiveResourcesErrors, WrongTypes) {
  EXPECT_THAT(ReadError(R"({"type": ["x"], "name": "w"})").message(),
              HasSubstr("live.json: /type: 'type' must be a string"));
  EXPECT_THAT(ReadError(R"({"type": "Microsoft.Compute/virtualMachines", "name": "v",
                            "location": 5})")
                  .message(),
              HasSubstr("/location: 'location' must be a string, found 5"));
  EXPECT_THAT(ReadError(R"({"type": "amlcompute", "name": "c", "min_instances": "two"})").message(),
              HasSubstr("live.json: /min_instances: 'min_instances' must be an integer"));
  EXPECT_THAT(
      ReadError(R"({"type": "amlcompute", "name": "c", "network_settings": "vnet"})").message(),
      HasSubstr("/network_settings: 'network_settings' must be an object"));
  EXPECT_THAT(ReadError(R"({"name": "w", "hbi_workspace": "yes"})").message(),
              HasSubstr("/hbi_workspace: 'hbi_workspace' must be a boolean"));
}

TEST(LiveResources, ComputeWithoutIdHasUnknownParent) {
  Result<SourceDoc> d = ParseSource(R"({"type": "computeinstance", "name": "ci"})", "c.json");
  ASSERT_TRUE(d.ok());
  Result<std::vector<Resource>> rs = ReadLiveResources(*d);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  EXPECT_EQ((*rs)[0].name, "(unknown workspace)/ci");
  EXPECT_TRUE((*rs)[0].IsUnknown("name"));
}

TEST(LiveResources, HugeArray) {
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) {
    if (i) text += ",";
    text += R"({"id":"/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/)"
            R"(networkInterfaces/n)" +
            std::to_string(i) + R"(","type":"Microsoft.Network/networkInterfaces"})";
  }
  text += "]";
  Result<SourceDoc> d = ParseSource(text, "big.json");
  ASSERT_TRUE(d.ok());
  Result<std::vector<Resource>> rs = ReadLiveResources(*d);
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->size(), 20000u);
  EXPECT_EQ(rs->back().name, "n19999");
}

}  // namespace
}  // namespace gantry::assess
