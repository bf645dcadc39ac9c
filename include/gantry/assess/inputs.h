// Readers that turn `gantry assess` inputs into Resources (resource.h).
//
//   ARM templates (and the JSON `bicep build` emits)   ExpandArmTemplate
//   Terraform plans (`terraform show -json plan.out`)   ReadTerraformPlan
//   live resources (`az resource show`, ARM REST, `az ml compute show`)   ReadLiveResources
//
// LoadInputs looks at each path (a file or a directory of *.json files),
// recognises what it is and calls the matching reader.
#pragma once

#include <string>
#include <vector>

#include "gantry/assess/resource.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::assess {

// The deployment context a template is expanded in. The defaults are PSRule's
// stub values, so ids and names come out the same as in PSRule's expansion.
struct ArmOptions {
  std::string subscription_id = "ffffffff-ffff-ffff-ffff-ffffffffffff";
  std::string resource_group = "ps-rule-test-rg";
  std::string location = "eastus";
  std::string deployment_name = "ps-rule-test-deployment";
  std::string tenant_id = "ffffffff-ffff-ffff-ffff-ffffffffffff";
  // Parameter values: the "parameters" object of a parameter file
  // ({"name": {"value": ...}} or {"name": {"reference": {...}}}, the latter a
  // Key Vault secret: unknown). Null/empty: defaults only.
  Json parameters = Json::object();
  std::string parameters_file;  // named in messages about `parameters`
  // Bounds on hostile templates (ARM's own: copy count <= 800).
  int max_copy_count = 800;
  int max_expression_depth = 64;  // nested function calls / variable references
  size_t max_resources = 100000;  // after copy loops and nested deployments
};

// Expands a deploymentTemplate: parameters (defaults, the parameter file,
// allowedValues), variables (also `copy` variables), resources as an array or
// a symbolic-name object (languageVersion 2.0), nested `resources` (child type
// and name composed with the parent's), `copy` loops on resources and on
// properties, `condition`, and inline nested deployments
// (Microsoft.Resources/deployments with properties.template, inner or outer
// expression scope). A required parameter without a value, a reference to an
// undeclared parameter or variable, an unknown function or a wrong argument is
// InvalidArgument naming the file and the JSON path of the expression
// ("main.json: /resources/2/properties/sku: unknown function 'fooBar'").
Result<std::vector<Resource>> ExpandArmTemplate(const SourceDoc& tmpl, const ArmOptions& options);

// Reads `terraform show -json` output: planned_values.root_module and its
// child_modules (recursively) for the azurerm resources Gantry has rules for,
// mapped onto ARM shape; resources the plan deletes are left out; values in
// resource_changes[].change.after_unknown become Resource::unknown. Other
// resource types are kept with their attributes under "properties" so that a
// rule can still see them (type "terraform:<tf type>").
Result<std::vector<Resource>> ReadTerraformPlan(const SourceDoc& plan);

// Reads live resources: one resource object, an array of them, a
// {"value": [...]} list page of the ARM REST API, or `az ml compute show`
// output (its SDK v2 shape is mapped onto ARM shape).
Result<std::vector<Resource>> ReadLiveResources(const SourceDoc& doc);

enum class InputKind { kArmTemplate, kArmParameters, kTerraformPlan, kLive };
// What a parsed JSON file is: `$schema` ending in deploymentTemplate.json# (or
// a "resources" member with "$schema" absent and "contentVersion"), a
// deploymentParameters schema, a top-level "terraform_version", else live.
InputKind DetectKind(const SourceDoc& doc);

struct LoadOptions {
  ArmOptions arm;
  // Parameter files for templates: with one template, each given parameter file
  // applies to it; otherwise "<name>.parameters.json" beside "<name>.json" is
  // used when it exists.
  std::vector<std::string> parameter_files;
};

struct LoadedInputs {
  std::vector<Resource> resources;
  std::vector<std::string> files;  // every file read, in order
  // Files found in directories that are not inputs (bicepconfig.json,
  // package.json, ...), and parameter files no template there uses.
  std::vector<std::string> skipped;
};

// Reads every path (files, or directories searched recursively for *.json,
// sorted), recognises each file and expands it. Errors name the file.
Result<LoadedInputs> LoadInputs(const std::vector<std::string>& paths, const LoadOptions& options);

}  // namespace gantry::assess
