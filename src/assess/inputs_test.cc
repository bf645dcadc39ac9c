#include "gantry/assess/inputs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gantry::assess {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Dir() { return std::string(GANTRY_SOURCE_DIR) + "/src/assess/testdata/inputs/"; }

InputKind KindOf(std::string_view text) {
  Result<SourceDoc> d = ParseSource(text, "k.json");
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? DetectKind(*d) : InputKind::kLive;
}

std::vector<std::string> Names(const LoadedInputs& in) {
  std::vector<std::string> out;
  for (const Resource& r : in.resources) out.push_back(r.name);
  return out;
}

std::string Relative(const std::string& path) {
  return path.substr(path.find("testdata/inputs/") + 16);
}

std::vector<std::string> Relative(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) out.push_back(Relative(p));
  return out;
}

TEST(DetectKind, EachInput) {
  EXPECT_EQ(
      KindOf(
          R"({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#", "resources": []})"),
      InputKind::kArmTemplate);
  EXPECT_EQ(
      KindOf(
          R"({"$schema": "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#"})"),
      InputKind::kArmTemplate);
  EXPECT_EQ(KindOf(R"({"contentVersion": "1.0.0.0", "resources": []})"), InputKind::kArmTemplate);
  EXPECT_EQ(
      KindOf(
          R"({"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#", "parameters": {}})"),
      InputKind::kArmParameters);
  EXPECT_EQ(KindOf(R"({"terraform_version": "1.9.0", "planned_values": {}})"),
            InputKind::kTerraformPlan);
  EXPECT_EQ(KindOf(R"({"type": "Microsoft.Compute/virtualMachines", "name": "v"})"),
            InputKind::kLive);
  EXPECT_EQ(KindOf("[]"), InputKind::kLive);
  // A resource that happens to have a "resources" member but no template markers.
  EXPECT_EQ(KindOf(R"({"id": "/x", "type": "Microsoft.Web/sites", "resources": []})"),
            InputKind::kLive);
}

TEST(LoadInputs, DirectoryRecursiveSortedSkippingNonInputs) {
  Result<LoadedInputs> in = LoadInputs({Dir() + "repo"}, LoadOptions{});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  // The template takes main.parameters.json beside it; the plan and the live
  // compute follow in path order; .terraform/ is never searched.
  EXPECT_THAT(Names(*in), ElementsAre("mlw-from-params", "w/c", "kv1"));
  EXPECT_THAT(Relative(in->files),
              ElementsAre("repo/bicepconfig.json", "repo/infra/main.json",
                          "repo/infra/main.parameters.json", "repo/infra/orphan.parameters.json",
                          "repo/infra/prod.parameters.json", "repo/live/compute.json",
                          "repo/tf/plan.json"));
  EXPECT_THAT(Relative(in->skipped),
              ElementsAre("repo/bicepconfig.json", "repo/infra/orphan.parameters.json",
                          "repo/infra/prod.parameters.json"));
  EXPECT_EQ(in->resources[0].origin, Origin::kArm);
  EXPECT_EQ(in->resources[1].origin, Origin::kLive);
  EXPECT_EQ(in->resources[2].origin, Origin::kTerraform);
  EXPECT_EQ(Relative(in->resources[2].where.file), "repo/tf/plan.json");
}

TEST(LoadInputs, ParameterFileBesideTheTemplate) {
  Result<LoadedInputs> in = LoadInputs({Dir() + "repo/infra/main.json"}, LoadOptions{});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_THAT(Names(*in), ElementsAre("mlw-from-params"));
  EXPECT_THAT(Relative(in->files),
              ElementsAre("repo/infra/main.json", "repo/infra/main.parameters.json"));
}

TEST(LoadInputs, ExplicitParameterFileWins) {
  LoadOptions opts;
  opts.parameter_files = {Dir() + "repo/infra/prod.parameters.json"};
  Result<LoadedInputs> in = LoadInputs({Dir() + "repo/infra/main.json"}, opts);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_THAT(Names(*in), ElementsAre("mlw-prod"));
  const Json* pna = in->resources[0].Get("properties.publicNetworkAccess");
  ASSERT_NE(pna, nullptr);
  EXPECT_EQ(*pna, "Disabled");
  // The same file given as an input path next to the single template.
  Result<LoadedInputs> as_path = LoadInputs(
      {Dir() + "repo/infra/main.json", Dir() + "repo/infra/prod.parameters.json"}, LoadOptions{});
  ASSERT_TRUE(as_path.ok()) << as_path.status().ToString();
  EXPECT_THAT(Names(*as_path), ElementsAre("mlw-prod"));
}

TEST(LoadInputs, ErrorsNameTheFile) {
  Result<LoadedInputs> missing = LoadInputs({Dir() + "nope.json"}, LoadOptions{});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.json"));

  // Given by name, a file must be an input.
  Result<LoadedInputs> bad = LoadInputs({Dir() + "bad_live.json"}, LoadOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad_live.json: /: not a resource"));

  LoadOptions not_params;
  not_params.parameter_files = {Dir() + "repo/tf/plan.json"};
  Result<LoadedInputs> np = LoadInputs({Dir() + "repo/infra/main.json"}, not_params);
  ASSERT_FALSE(np.ok());
  EXPECT_THAT(np.status().message(), HasSubstr("plan.json: not an ARM parameter file"));

  LoadOptions no_template;
  no_template.parameter_files = {Dir() + "repo/infra/prod.parameters.json"};
  Result<LoadedInputs> nt = LoadInputs({Dir() + "repo/tf/plan.json"}, no_template);
  ASSERT_FALSE(nt.ok());
  EXPECT_THAT(nt.status().message(), HasSubstr("no ARM template is among the inputs"));

  Result<LoadedInputs> orphan = LoadInputs(
      {Dir() + "repo/tf/plan.json", Dir() + "repo/infra/orphan.parameters.json"}, LoadOptions{});
  ASSERT_FALSE(orphan.ok());
  EXPECT_THAT(orphan.status().message(),
              HasSubstr("orphan.parameters.json: a parameter file, but no template"));
}

}  // namespace
}  // namespace gantry::assess
