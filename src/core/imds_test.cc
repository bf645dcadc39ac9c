#include "gantry/core/imds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include "testing/http_test_server.h"

namespace gantry {
namespace {

using ::gantry::testing::ClosedLoopbackPort;
using ::gantry::testing::ScriptedHttpServer;
using ::testing::HasSubstr;

// An instance document shaped like Azure's (api-version 2021-02-01) for a Spot
// ND H100 v5 VM; values are made up.
constexpr std::string_view kInstanceDocument = R"json({
  "compute": {
    "azEnvironment": "AzurePublicCloud",
    "evictionPolicy": "Deallocate",
    "isHostCompatibilityLayerVm": "false",
    "licenseType": "",
    "location": "eastus",
    "name": "gpu-node-07",
    "offer": "ubuntu-hpc",
    "osProfile": {"adminUsername": "azureuser", "computerName": "gpu-node-07",
                  "disablePasswordAuthentication": "true"},
    "osType": "Linux",
    "placementGroupId": "",
    "plan": {"name": "", "product": "", "publisher": ""},
    "platformFaultDomain": "0",
    "platformUpdateDomain": "0",
    "priority": "Spot",
    "provider": "Microsoft.Compute",
    "publicKeys": [],
    "publisher": "microsoft-dsvm",
    "resourceGroupName": "rg-train",
    "resourceId": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-train/providers/Microsoft.Compute/virtualMachines/gpu-node-07",
    "securityProfile": {"secureBootEnabled": "false", "virtualTpmEnabled": "false"},
    "sku": "2204",
    "storageProfile": {"dataDisks": [], "osDisk": {"caching": "ReadWrite", "diskSizeGB": "256"}},
    "subscriptionId": "00000000-0000-0000-0000-000000000000",
    "tags": "",
    "tagsList": [],
    "userData": "",
    "version": "22.04.2024010101",
    "vmId": "13f5c5a0-6a5e-4d3c-9a7e-2f0d6c1b8e11",
    "vmScaleSetName": "",
    "vmSize": "Standard_ND96isr_H100_v5",
    "zone": "2"
  },
  "network": {
    "interface": [{"ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.7", "publicIpAddress": ""}],
                            "subnet": [{"address": "10.0.0.0", "prefix": "24"}]},
                   "ipv6": {"ipAddress": []},
                   "macAddress": "000D3A000000"}]
  }
})json";

std::string Ok200(std::string_view body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

std::string BaseUrl(const ScriptedHttpServer& server) {
  return "http://127.0.0.1:" + std::to_string(server.port());
}

TEST(ImdsTest, FetchesAndParsesTheInstanceDocument) {
  ScriptedHttpServer server({.pieces = {Ok200(kInstanceDocument)}});
  AzureImds imds(BaseUrl(server) + "/");
  EXPECT_EQ(imds.url(), BaseUrl(server) + "/metadata/instance?api-version=2021-02-01");
  auto info = imds.Fetch();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->vm_size, "Standard_ND96isr_H100_v5");
  EXPECT_EQ(info->location, "eastus");
  EXPECT_EQ(info->vm_id, "13f5c5a0-6a5e-4d3c-9a7e-2f0d6c1b8e11");
  EXPECT_EQ(info->name, "gpu-node-07");
  EXPECT_EQ(info->zone, "2");
  EXPECT_EQ(info->priority, "Spot");
  EXPECT_EQ(info->eviction_policy, "Deallocate");
  EXPECT_EQ(info->publisher, "microsoft-dsvm");
  EXPECT_EQ(info->offer, "ubuntu-hpc");
  EXPECT_EQ(info->sku, "2204");
  EXPECT_TRUE(info->spot());

  std::string request = server.request();
  EXPECT_THAT(request, HasSubstr("GET /metadata/instance?api-version=2021-02-01 HTTP/1.1\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nMetadata: true\r\n"));
}

TEST(ImdsTest, EndpointComesFromTheEnvironment) {
  ScriptedHttpServer server({.pieces = {Ok200(kInstanceDocument)}});
  ::setenv("GANTRY_IMDS_ENDPOINT", BaseUrl(server).c_str(), 1);
  AzureImds from_env;
  ::unsetenv("GANTRY_IMDS_ENDPOINT");
  EXPECT_EQ(from_env.url(), BaseUrl(server) + std::string(AzureImds::kInstancePath));
  auto info = from_env.Fetch();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->vm_size, "Standard_ND96isr_H100_v5");

  AzureImds standard;
  EXPECT_EQ(standard.url(), "http://169.254.169.254/metadata/instance?api-version=2021-02-01");
}

TEST(ImdsTest, OptionalKeysMayBeMissing) {
  auto info =
      ParseImdsDocument(R"({"compute": {"vmSize": "Standard_D8s_v5", "zone": null}})", "doc");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->vm_size, "Standard_D8s_v5");
  EXPECT_EQ(info->location, "");
  EXPECT_EQ(info->zone, "");
  EXPECT_FALSE(info->spot());
}

TEST(ImdsTest, BadDocumentsAreDataLoss) {
  struct Case {
    const char* text;
    const char* message;
  };
  for (const Case& c :
       {Case{"{\"compute\": {\"vmSize\": ", "doc"}, Case{"[1, 2]", "no \"compute\" object"},
        Case{R"({"network": {}})", "no \"compute\" object"},
        Case{R"({"compute": {"location": "eastus"}})", "compute.vmSize is missing"},
        Case{R"({"compute": {"vmSize": ""}})", "compute.vmSize is missing"},
        Case{R"({"compute": {"vmSize": 42}})", "compute.vmSize is a number"},
        Case{R"({"compute": {"vmSize": "x", "zone": ["1"]}})", "compute.zone is a"}}) {
    auto info = ParseImdsDocument(c.text, "doc");
    ASSERT_FALSE(info.ok()) << c.text;
    EXPECT_EQ(info.status().code(), StatusCode::kDataLoss) << c.text;
    EXPECT_THAT(info.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(ImdsTest, BadJsonFromTheServerIsDataLossNamingTheUrl) {
  ScriptedHttpServer server({.pieces = {Ok200("<html>captive portal</html>")}});
  AzureImds imds(BaseUrl(server));
  auto info = imds.Fetch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(info.status().message(), HasSubstr(imds.url()));
}

TEST(ImdsTest, HttpErrorStatusIsUnavailable) {
  std::string body = R"({"error": "Bad request. Required metadata header not specified"})";
  ScriptedHttpServer server({.pieces = {"HTTP/1.1 400 Bad Request\r\nContent-Length: " +
                                        std::to_string(body.size()) + "\r\n\r\n" + body}});
  auto info = AzureImds(BaseUrl(server)).Fetch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(info.status().message(), HasSubstr("HTTP 400 Bad Request"));
  EXPECT_THAT(info.status().message(), HasSubstr("metadata header"));
}

TEST(ImdsTest, UnreachableEndpointFailsWithAHint) {
  std::string base = "http://127.0.0.1:" + std::to_string(ClosedLoopbackPort());
  auto info = AzureImds(base).Fetch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(info.status().message(), HasSubstr(base));
  EXPECT_THAT(info.status().message(), HasSubstr("only on Azure VMs"));
  EXPECT_THAT(info.status().message(), HasSubstr("GANTRY_IMDS_ENDPOINT"));
}

TEST(ImdsTest, SilentEndpointHitsTheDeadline) {
  ScriptedHttpServer server({.pieces = {}, .hold_open = true});
  auto info = AzureImds(BaseUrl(server), std::chrono::milliseconds(150)).Fetch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(info.status().message(), HasSubstr("within 150 ms"));
}

TEST(ImdsTest, BadEndpointIsInvalidArgument) {
  auto info = AzureImds("https://169.254.169.254").Fetch();
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("GANTRY_IMDS_ENDPOINT"));
}

TEST(ImdsTest, ToJsonHasStableKeys) {
  auto info = ParseImdsDocument(kInstanceDocument, "doc");
  ASSERT_TRUE(info.ok());
  Json j = info->ToJson();
  EXPECT_EQ(j["vm_size"], "Standard_ND96isr_H100_v5");
  EXPECT_EQ(j["eviction_policy"], "Deallocate");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_THAT(keys,
              ::testing::ElementsAre("vm_size", "location", "vm_id", "name", "zone", "priority",
                                     "eviction_policy", "publisher", "offer", "sku"));
}

TEST(ImdsTest, ReadsTheNetworkDocument) {
  auto info = ParseImdsDocument(kInstanceDocument, "doc");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->network_known);
  EXPECT_TRUE(info->public_ips.empty());  // "publicIpAddress": "" is no address
  EXPECT_THAT(info->private_ips, ::testing::ElementsAre("10.0.0.7"));

  auto with_ip = ParseImdsDocument(R"({"compute": {"vmSize": "Standard_D2s_v5"},
      "network": {"interface": [
        {"ipv4": {"ipAddress": [{"privateIpAddress": "10.0.0.4", "publicIpAddress": "20.1.2.3"}]}},
        {"ipv4": {"ipAddress": [{"privateIpAddress": "10.0.1.4"}]},
         "ipv6": {"ipAddress": [{"privateIpAddress": "fd00::4", "publicIpAddress": "2603::1"}]}}]}})",
                                   "doc");
  ASSERT_TRUE(with_ip.ok());
  EXPECT_TRUE(with_ip->network_known);
  EXPECT_THAT(with_ip->public_ips, ::testing::ElementsAre("20.1.2.3", "2603::1"));
  EXPECT_THAT(with_ip->private_ips, ::testing::ElementsAre("10.0.0.4", "10.0.1.4", "fd00::4"));
}

TEST(ImdsTest, MalformedOrMissingNetworkIsUnknownNotAnError) {
  for (std::string_view doc : {
           R"({"compute": {"vmSize": "Standard_D2s_v5"}})",
           R"({"compute": {"vmSize": "Standard_D2s_v5"}, "network": []})",
           R"({"compute": {"vmSize": "Standard_D2s_v5"}, "network": {"interface": {}}})",
           R"({"compute": {"vmSize": "Standard_D2s_v5"}, "network": {"interface": [
               {"ipv4": {"ipAddress": [{"publicIpAddress": 7}]}}]}})",
           R"({"compute": {"vmSize": "Standard_D2s_v5"}, "network": {"interface": [
               {"ipv4": {"ipAddress": [{"publicIpAddress": "20.1.2.3"}, "x"]}}]}})",
       }) {
    auto info = ParseImdsDocument(doc, "doc");
    ASSERT_TRUE(info.ok()) << doc << ": " << info.status().ToString();
    EXPECT_FALSE(info->network_known) << doc;
    EXPECT_TRUE(info->public_ips.empty()) << doc;
  }
}

}  // namespace
}  // namespace gantry
