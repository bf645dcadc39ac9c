#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "gantry/assess/inputs.h"
#include "gantry/assess/resource.h"
#include "gantry/core/json.h"

namespace gantry::assess {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kRg =
    "/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ps-rule-test-rg";

std::string Fixture(const std::string& name) {
  return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/arm/" + name;
}

SourceDoc Load(const std::string& name) {
  Result<SourceDoc> r = ReadSourceFile(Fixture(name));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : SourceDoc();
}

// The 1-based line of the first line of `text` containing `needle`, minus `back`.
int LineOf(const SourceDoc&, const std::string& file, const std::string& needle, int back) {
  Result<std::string> text = ReadFile(Fixture(file));
  EXPECT_TRUE(text.ok());
  size_t at = text->find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return static_cast<int>(std::count(text->begin(), text->begin() + at, '\n')) + 1 - back;
}

std::vector<Resource> Expand(const SourceDoc& doc, const ArmOptions& o = ArmOptions{}) {
  Result<std::vector<Resource>> r = ExpandArmTemplate(doc, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<Resource>();
}

const Resource* Find(const std::vector<Resource>& rs, std::string_view name) {
  for (const Resource& r : rs) {
    if (r.name == name) return &r;
  }
  ADD_FAILURE() << "no resource named " << name;
  return nullptr;
}

ArmOptions WithParameterFile(const std::string& file) {
  ArmOptions o;
  SourceDoc p = Load(file);
  o.parameters = p.value["parameters"];
  o.parameters_file = file;
  return o;
}

TEST(ArmTemplateTest, QuickstartWorkspaceWithParameterFile) {
  SourceDoc doc = Load("ml_workspace.json");
  std::vector<Resource> rs = Expand(doc, WithParameterFile("ml_workspace.parameters.json"));
  std::vector<std::string> names;
  for (const Resource& r : rs) names.push_back(r.type + " " + r.name);
  // The scale set's condition is false (3 clusters <= 5): left out.
  const std::string st = rs.empty() ? "" : rs[0].name;
  ASSERT_EQ(rs.size(), 9u) << ::testing::PrintToString(names);
  EXPECT_EQ(rs[0].type, "Microsoft.Storage/storageAccounts");
  EXPECT_THAT(st, ::testing::MatchesRegex("st[a-z2-7]{13}"));
  EXPECT_EQ(rs[0].id, kRg + "/providers/Microsoft.Storage/storageAccounts/" + st);
  EXPECT_EQ(rs[0].location, "westeurope");  // "West Europe" from the parameter file
  EXPECT_EQ(rs[0].body["tags"], Json::parse(R"({"env":"dev","workload":"ml"})"));
  EXPECT_EQ(rs[0].address, "resources[0]");
  EXPECT_EQ(rs[0].origin, Origin::kArm);
  EXPECT_EQ(rs[0].where.pointer, "/resources/0");
  EXPECT_EQ(rs[0].where.line,
            LineOf(doc, "ml_workspace.json", "\"Microsoft.Storage/storageAccounts\",", 1));
  EXPECT_EQ(rs[0].where.file, Fixture("ml_workspace.json"));

  const Resource* kv = Find(rs, rs[1].name);
  ASSERT_NE(kv, nullptr);
  EXPECT_TRUE(kv->body["properties"]["enablePurgeProtection"].is_null());
  EXPECT_EQ(kv->body["properties"]["tenantId"], "ffffffff-ffff-ffff-ffff-ffffffffffff");

  const Resource* ws = Find(rs, "mlw-prod");
  ASSERT_NE(ws, nullptr);
  EXPECT_TRUE(ws->IsType("microsoft.machinelearningservices/WORKSPACES"));
  EXPECT_EQ(ws->body["sku"]["name"], "Basic");
  EXPECT_EQ(*ws->Get("properties.storageAccount"), rs[0].id);
  EXPECT_EQ(*ws->Get("properties.publicNetworkAccess"), "Disabled");
  EXPECT_FALSE(ws->body.contains("dependsOn"));
  EXPECT_FALSE(ws->body.contains("resources"));
  EXPECT_THAT(ws->unknown, ElementsAre("/properties/discoveryUrl"));
  EXPECT_TRUE(ws->IsUnknown("properties.discoveryUrl"));

  for (int i = 0; i < 3; ++i) {
    const Resource* c = Find(rs, "mlw-prod/gpu-cluster-" + std::to_string(i));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->type, "Microsoft.MachineLearningServices/workspaces/computes");
    EXPECT_EQ(c->id, kRg +
                         "/providers/Microsoft.MachineLearningServices/workspaces/mlw-prod/"
                         "computes/gpu-cluster-" +
                         std::to_string(i));
    EXPECT_EQ(c->address, "resources[4].resources[0][" + std::to_string(i) + "]");
    EXPECT_EQ(*c->Get("properties.properties.vmPriority"), i == 0 ? "Dedicated" : "LowPriority");
    EXPECT_EQ(*c->Get("properties.properties.scaleSettings.maxNodeCount"), i + 2);
    EXPECT_EQ(c->where.pointer, "/resources/4/resources/0");
    EXPECT_EQ(c->where.line, LineOf(doc, "ml_workspace.json", "\"type\": \"computes\"", 1));
  }
  const Resource* diag = Find(rs, "ws-diag");
  ASSERT_NE(diag, nullptr);
  EXPECT_EQ(diag->type, "Microsoft.Insights/diagnosticSettings");
  EXPECT_EQ(diag->scope, ws->id);
  EXPECT_EQ(diag->id, ws->id + "/providers/Microsoft.Insights/diagnosticSettings/ws-diag");
}

TEST(ArmTemplateTest, KeyVaultReferenceIsUnknownNotAFailure) {
  SourceDoc doc = Load("ml_workspace.json");
  ArmOptions o = WithParameterFile("ml_workspace.parameters.json");
  o.parameters["clusterCount"]["value"] = 6;  // the scale set's condition becomes true
  std::vector<Resource> rs = Expand(doc, o);
  const Resource* vmss = Find(rs, "vmss-train");
  ASSERT_NE(vmss, nullptr);
  EXPECT_THAT(vmss->unknown,
              ElementsAre("/properties/virtualMachineProfile/osProfile/adminPassword"));
  EXPECT_EQ(rs.size(), 13u);  // 6 clusters and the scale set
}

TEST(ArmTemplateTest, MissingRequiredParameterNamesFileAndPointer) {
  SourceDoc doc = Load("ml_workspace.json");
  Result<std::vector<Resource>> r = ExpandArmTemplate(doc, ArmOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(),
              HasSubstr("ml_workspace.json: /parameters/workspaceName: parameter 'workspaceName' "
                        "has no value"));
}

TEST(ArmTemplateTest, BicepSymbolicNames) {
  SourceDoc doc = Load("bicep_symbolic.json");
  std::vector<Resource> rs = Expand(doc);
  std::vector<std::string> addresses;
  for (const Resource& r : rs) addresses.push_back(r.address);
  // `logs` is existing: not deployed, not returned.
  EXPECT_THAT(addresses, ElementsAre("ws", "clusters[0]", "clusters[1]", "diag", "lock"));
  const Resource& ws = rs[0];
  EXPECT_EQ(ws.location, "eastus");
  EXPECT_THAT(ws.unknown, ElementsAre("/tags/deployedAt"));  // utcNow()
  EXPECT_EQ(rs[1].name, "mlw-bicep/train-00");
  EXPECT_EQ(rs[2].name, "mlw-bicep/train-01");
  EXPECT_EQ(*rs[2].Get("properties.properties.scaleSettings.minNodeCount"), 1);
  EXPECT_EQ(rs[2].Get("properties.properties.subnet"), nullptr);  // nullable parameter absent
  EXPECT_EQ(rs[1].where.pointer, "/resources/clusters");
  EXPECT_EQ(rs[1].where.line, LineOf(doc, "bicep_symbolic.json", "\"clusters\": {", 0));
  EXPECT_EQ(rs[3].type, "Microsoft.Insights/diagnosticSettings");
  EXPECT_EQ(rs[3].scope, ws.id);
  EXPECT_EQ(rs[4].scope, ws.id);  // scope by symbolic name
  EXPECT_EQ(rs[4].id, ws.id + "/providers/Microsoft.Authorization/locks/no-delete");
}

TEST(ArmTemplateTest, NestedDeployments) {
  SourceDoc doc = Load("nested_deployment.json");
  std::vector<Resource> rs = Expand(doc);
  std::vector<std::string> names;
  for (const Resource& r : rs) names.push_back(r.name);
  EXPECT_THAT(names, ElementsAre("computeInstance", "mlw-outer/ci-inner", "outerScope",
                                 "mlw-outer/ci-dev", "linked", "legacy-diag"));
  // Inner scope: its own parameters, fed from properties.parameters; the
  // deployment's resource group.
  const Resource& inner = rs[1];
  EXPECT_EQ(inner.id,
            "/subscriptions/ffffffff-ffff-ffff-ffff-ffffffffffff/resourceGroups/ml-rg/providers/"
            "Microsoft.MachineLearningServices/workspaces/mlw-outer/computes/ci-inner");
  EXPECT_EQ(*inner.Get("properties.properties.idleTimeBeforeShutdown"), "PT30M");
  EXPECT_TRUE(
      inner.IsUnknown("properties.properties.personalComputeInstanceSettings.assignedUser."
                      "objectId"));
  EXPECT_EQ(inner.address, "resources[0].properties.template.resources[0]");
  EXPECT_EQ(inner.where.pointer, "/resources/0/properties/template/resources/0");
  EXPECT_EQ(inner.where.line,
            LineOf(doc, "nested_deployment.json",
                   "\"Microsoft.MachineLearningServices/workspaces/computes\"", 1));
  EXPECT_FALSE(rs[0].body["properties"].contains("template"));
  // Outer scope: the parent's parameters and variables.
  EXPECT_EQ(rs[3].type, "Microsoft.MachineLearningServices/workspaces/computes");
  // A linked template cannot be followed: recorded as unknown, not passed.
  EXPECT_THAT(rs[4].unknown, ElementsAre("/properties/template"));
  // Legacy extension form.
  EXPECT_EQ(rs[5].type, "Microsoft.Insights/diagnosticSettings");
  EXPECT_EQ(rs[5].scope, kRg + "/providers/Microsoft.MachineLearningServices/workspaces/mlw-outer");
}

// --- inline templates for features and errors ---

Result<std::vector<Resource>> ExpandText(const std::string& text, ArmOptions o = ArmOptions{}) {
  Result<SourceDoc> doc = ParseSource(text, "main.json");
  if (!doc.ok()) return doc.status();
  return ExpandArmTemplate(*doc, o);
}

std::string Template(const std::string& params, const std::string& vars,
                     const std::string& resources) {
  return R"({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
  "contentVersion": "1.0.0.0", "parameters": {)" +
         params + R"(}, "variables": {)" + vars + R"(}, "resources": [)" + resources + "]}";
}

TEST(ArmTemplateTest, PropertyAndVariableCopies) {
  auto r = ExpandText(Template(
      R"("disks": {"type": "int", "defaultValue": 3})",
      R"("copy": [{"name": "subnets", "count": 2, "input": {"name": "[concat('sn', copyIndex('subnets'))]"}}],
         "doubled": "[length(variables('subnets'))]")",
      R"({"type": "Microsoft.Compute/virtualMachines", "apiVersion": "2023-09-01", "name": "vm",
          "location": "East US 2",
          "properties": {"subnets": "[variables('subnets')]", "n": "[variables('doubled')]",
            "storageProfile": {"copy": [{"name": "dataDisks", "count": "[parameters('disks')]",
              "input": {"lun": "[copyIndex('dataDisks')]", "diskSizeGB": 1024}}]}}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const Resource& vm = (*r)[0];
  EXPECT_EQ(vm.location, "eastus2");
  EXPECT_EQ(vm.body["properties"]["subnets"], Json::parse(R"([{"name":"sn0"},{"name":"sn1"}])"));
  EXPECT_EQ(vm.body["properties"]["n"], 2);
  const Json& disks = vm.body["properties"]["storageProfile"]["dataDisks"];
  ASSERT_EQ(disks.size(), 3u);
  EXPECT_EQ(disks[2]["lun"], 2);
}

TEST(ArmTemplateTest, ChildNamesAndTypesComposeWithTheParent) {
  auto r = ExpandText(Template("", "",
                               R"({"type": "Microsoft.Network/virtualNetworks", "name": "vnet",
      "apiVersion": "2023-04-01", "resources": [
        {"type": "subnets", "name": "a", "apiVersion": "2023-04-01"},
        {"type": "Microsoft.Network/virtualNetworks/subnets", "name": "vnet/b", "apiVersion": "2023-04-01"}]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[1].type, "Microsoft.Network/virtualNetworks/subnets");
  EXPECT_EQ((*r)[1].name, "vnet/a");
  EXPECT_EQ((*r)[2].name, "vnet/b");
  EXPECT_EQ((*r)[1].address, "resources[0].resources[0]");
  EXPECT_EQ((*r)[1].body["name"], "vnet/a");
}

TEST(ArmTemplateTest, FalseConditionLeavesResourceAndChildrenOut) {
  auto r = ExpandText(Template(R"("on": {"type": "bool", "defaultValue": false})", "",
                               R"({"type": "A.B/c", "name": "x", "condition": "[parameters('on')]",
      "resources": [{"type": "d", "name": "y"}]}, {"type": "A.B/c", "name": "z",
      "condition": "[not(parameters('on'))]"})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "z");
}

struct TemplateError {
  std::string text;
  const char* message;
  StatusCode code = StatusCode::kInvalidArgument;
};

TEST(ArmTemplateTest, ErrorsNameFilePointerAndFix) {
  const std::string res_sku = R"({"type": "A.B/c", "name": "x", "sku": {"name": "[fooBar()]"}})";
  const TemplateError cases[] = {
      {Template("", "", "{\"type\": \"A.B/c\", \"name\": \"x\"}," + res_sku),
       "main.json: /resources/1/sku/name: unknown function 'fooBar'"},
      {Template(R"("location": {"type": "string", "defaultValue": "x"})", "",
                R"({"type": "A.B/c", "name": "[parameters('locaton')]"})"),
       "main.json: /resources/0/name: parameter 'locaton' is not declared (did you mean "
       "'location'?)"},
      {Template("", R"("storageName": "x")",
                R"({"type": "A.B/c", "name": "[variables('storagename2')]"})"),
       "variable 'storagename2' is not declared (did you mean 'storageName'?)"},
      {Template("", R"("a": "[variables('b')]", "b": "[concat(variables('a'))]")", ""),
       "variable 'a' refers to itself through a -> b -> a"},
      {Template(R"("p": {"type": "string", "defaultValue": "[parameters('p')]"})", "", ""),
       "parameter 'p' refers to itself"},
      {Template(
           R"("sku": {"type": "string", "defaultValue": "Gold", "allowedValues": ["Basic", "Standard"]})",
           "", ""),
       "main.json: /parameters/sku: parameter 'sku': value \"Gold\" is not one of the "
       "allowedValues"},
      {Template(R"("n": {"type": "int", "defaultValue": "three"})", "", ""),
       "parameter 'n' is declared as int but its value is string"},
      {Template(R"("n": {"type": "int", "defaultValue": 11, "maxValue": 10})", "", ""),
       "11 is above maxValue 10"},
      {Template("", "", R"({"type": "A.B/c", "name": "x", "copy": {"name": "l", "count": 801}})"),
       "main.json: /resources/0/copy/count: copy count 801 is outside 0..800"},
      {Template(
           "", "",
           R"({"type": "A.B/c", "name": "x", "copy": {"name": "l", "count": "[reference('a').n]"}})"),
       "a copy count must be known before deployment"},
      {Template("", "", R"({"type": "A.B/c", "name": "[copyIndex()]"})"),
       "copyIndex() is used outside a copy loop"},
      {Template("", "", R"({"type": "A.B/c", "name": "[utcNow()]"})"),
       "only be used in a parameter's defaultValue"},
      {Template("", "", R"({"type": "A.B/c/d", "name": "x"})"),
       "main.json: /resources/0/name: name 'x' has 1 segment(s) but type 'A.B/c/d' needs 2"},
      {Template("", "", R"({"type": "A.B/c", "name": "x", "condition": "[1]"})"),
       "\"condition\" must be a bool, got int"},
      {Template("", "", R"({"name": "x"})"),
       "main.json: /resources/0: the resource has no \"type\""},
      {Template("", "", R"("just a string")"), "a resource must be an object"},
      {R"({"resources": 5})", "\"resources\" must be an array"},
      {R"([1])", "a template is a JSON object"},
      {Template("", "", R"({"type": "A.B/c", "name": "x", "properties": {"v": "[concat('a']"}})"),
       "main.json: /resources/0/properties/v: expression '[concat('a']', column 12: a function "
       "call is not closed"},
  };
  for (const TemplateError& c : cases) {
    auto r = ExpandText(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), c.code) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.text;
  }
}

TEST(ArmTemplateTest, ParameterFileErrorsNameTheParameterFile) {
  const std::string t = Template(
      R"("workspaceName": {"type": "string"}, "n": {"type": "int", "defaultValue": 1})", "", "");
  ArmOptions o;
  o.parameters_file = "main.parameters.json";
  o.parameters = Json::parse(R"({"workspaceNam": {"value": "x"}})");
  auto r = ExpandText(t, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("main.parameters.json: parameter 'workspaceNam' has a value but main.json "
                        "does not declare it (did you mean 'workspaceName'?)"));
  o.parameters = Json::parse(R"({"workspaceName": {"value": "x"}, "n": {"value": "1"}})");
  r = ExpandText(t, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(
      r.status().message(),
      HasSubstr("main.parameters.json: parameter 'n' is declared as int but its value is string"));
  o.parameters = Json::parse(R"({"workspaceName": "x"})");
  r = ExpandText(t, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("must be given as {\"value\": ...}"));
  // A whole parameter file is accepted too.
  o.parameters =
      Json::parse(R"({"$schema": "x", "parameters": {"workspaceName": {"value": "x"}}})");
  EXPECT_TRUE(ExpandText(t, o).ok());
}

TEST(ArmTemplateTest, HostileTemplatesEndInErrors) {
  // A chain of variables each doubling the previous one: the work budget.
  std::string vars = R"("v0": "[createArray(1, 2, 3, 4, 5, 6, 7, 8)]")";
  for (int i = 1; i < 40; ++i) {
    vars +=
        fmt::format(R"(, "v{}": "[concat(variables('v{}'), variables('v{}'))]")", i, i - 1, i - 1);
  }
  auto r = ExpandText(Template("", vars, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("main.json: /variables/v"));

  // Variables nesting a value deeper one level at a time.
  vars = R"("d0": "[createArray()]")";
  for (int i = 1; i < 400; ++i) {
    vars += fmt::format(R"(, "d{}": "[createArray(createArray(variables('d{}')))]")", i, i - 1);
  }
  r = ExpandText(Template("", vars, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("deeper than the limit of 256"));

  // A long chain of references between variables, each needing the next.
  std::string chain;
  for (int i = 0; i < 1999; ++i) {
    chain += fmt::format(R"("c{}": "[variables('c{}')]", )", i, i + 1);
  }
  chain += R"("c1999": "x")";
  r = ExpandText(Template("", chain, ""));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("nest deeper than the limit"));

  // Copy loops over the resource limit.
  ArmOptions o;
  o.max_resources = 1000;
  r = ExpandText(
      Template(
          "", "",
          R"({"type": "A.B/c", "name": "[string(copyIndex())]", "copy": {"name": "a", "count": 800}},
                             {"type": "A.B/c", "name": "[string(copyIndex())]", "copy": {"name": "b", "count": 800}})"),
      o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("more than 1000 resources"));

  // Nested deployments nested as deep as the JSON limit allows.
  std::string nested = R"({"type": "A.B/c", "name": "leaf"})";
  for (int i = 0; i < 80; ++i) {
    nested =
        R"({"type": "Microsoft.Resources/deployments", "name": "d", "properties": {"template": {"resources": [)" +
        nested + "]}}}";
  }
  r = ExpandText(Template("", "", nested));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("limit of 256"));
}

// A generated 5,000-resource template (workspaces, computes in copy loops,
// scale sets) expands well under a second.
TEST(ArmTemplateTest, ExpandsFiveThousandResources) {
  std::string res;
  int count = 0;
  for (int w = 0; w < 50; ++w) {
    if (w) res += ",";
    res += fmt::format(
        R"({{"type": "Microsoft.MachineLearningServices/workspaces", "apiVersion": "2024-10-01",
      "name": "[format('{{0}}-{{1}}', parameters('prefix'), {0})]", "location": "[parameters('location')]",
      "identity": {{"type": "SystemAssigned"}}, "tags": "[variables('tags')]",
      "properties": {{"publicNetworkAccess": "Disabled", "storageAccount": "[resourceId('Microsoft.Storage/storageAccounts', concat('st', uniqueString(resourceGroup().id, string({0}))))]"}}}},
      {{"type": "Microsoft.MachineLearningServices/workspaces/computes", "apiVersion": "2024-10-01",
      "name": "[format('{{0}}-{{1}}/gpu-{{2:D3}}', parameters('prefix'), {0}, copyIndex())]",
      "location": "[parameters('location')]", "copy": {{"name": "c", "count": 49}},
      "properties": {{"computeType": "AmlCompute", "disableLocalAuth": true,
        "properties": {{"vmSize": "[parameters('vmSize')]", "vmPriority": "[if(equals(mod(copyIndex(), 2), 0), 'Dedicated', 'LowPriority')]",
          "subnet": {{"id": "[resourceId('Microsoft.Network/virtualNetworks/subnets', 'vnet', 'ml')]"}},
          "scaleSettings": {{"minNodeCount": 0, "maxNodeCount": "[add(copyIndex(), 1)]", "nodeIdleTimeBeforeScaleDown": "PT5M"}}}}}},
      "dependsOn": ["[resourceId('Microsoft.MachineLearningServices/workspaces', format('{{0}}-{{1}}', parameters('prefix'), {0}))]"]}},
      {{"type": "Microsoft.Compute/virtualMachineScaleSets", "apiVersion": "2023-09-01",
      "name": "[concat('vmss-', {0})]", "location": "[parameters('location')]", "zones": ["1", "2", "3"],
      "sku": {{"name": "[parameters('vmSize')]", "capacity": 4}},
      "properties": {{"virtualMachineProfile": {{"priority": "Spot", "evictionPolicy": "Delete",
        "osProfile": {{"linuxConfiguration": {{"disablePasswordAuthentication": true}}}},
        "networkProfile": {{"networkInterfaceConfigurations": [{{"name": "nic", "properties": {{"enableAcceleratedNetworking": true}}}}]}}}}}}}})",
        w);
    count += 1 + 49 + 1;
  }
  const std::string text = Template(
      R"("prefix": {"type": "string", "defaultValue": "mlw"}, "location": {"type": "string", "defaultValue": "[resourceGroup().location]"},
         "vmSize": {"type": "string", "defaultValue": "Standard_ND96isr_H100_v5"})",
      R"("tags": {"env": "prod", "costCenter": "[concat('cc-', '42')]"})", res);
  ASSERT_EQ(count, 2550);
  // Twice the workspaces to reach 5,100 resources.
  std::string doubled = text;
  {
    size_t open = doubled.find("\"resources\": [") + 14;
    doubled.insert(open, res + ",");
  }
  Result<SourceDoc> doc = ParseSource(doubled, "big.json");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<Resource>> r = ExpandArmTemplate(*doc, ArmOptions{});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 5100u);
  EXPECT_EQ((*r)[1].name, "mlw-0/gpu-000");
  std::printf("expanded %zu resources in %.3f s\n", r->size(), s);
  // Timing is measured by bench/assess.sh, not asserted here (a shared CI machine).
}

}  // namespace
}  // namespace gantry::assess
