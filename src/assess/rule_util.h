// Private helpers the built-in rules share: reading a property in the three
// states a rule cares about (absent, unknown before deployment, present),
// the small predicates most rules are made of, references between resources,
// ISO 8601 durations and the prices cost rules quote.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/advise/catalog.h"
#include "gantry/assess/rules.h"

namespace gantry::assess::rule {

// ARM types the rules name more than once.
inline constexpr std::string_view kWorkspace = "Microsoft.MachineLearningServices/workspaces";
inline constexpr std::string_view kCompute =
    "Microsoft.MachineLearningServices/workspaces/computes";
inline constexpr std::string_view kOnlineDeployment =
    "Microsoft.MachineLearningServices/workspaces/onlineEndpoints/deployments";
inline constexpr std::string_view kBatchDeployment =
    "Microsoft.MachineLearningServices/workspaces/batchEndpoints/deployments";
inline constexpr std::string_view kVm = "Microsoft.Compute/virtualMachines";
inline constexpr std::string_view kVmss = "Microsoft.Compute/virtualMachineScaleSets";
inline constexpr std::string_view kNic = "Microsoft.Network/networkInterfaces";
inline constexpr std::string_view kPrivateEndpoint = "Microsoft.Network/privateEndpoints";
inline constexpr std::string_view kStorage = "Microsoft.Storage/storageAccounts";
inline constexpr std::string_view kKeyVault = "Microsoft.KeyVault/vaults";
inline constexpr std::string_view kRegistry = "Microsoft.ContainerRegistry/registries";
inline constexpr std::string_view kDiagnostics = "Microsoft.Insights/diagnosticSettings";
inline constexpr std::string_view kAutoscale = "Microsoft.Insights/autoscalesettings";

inline constexpr double kHoursPerMonth = 730;

// One property of a resource as a rule sees it.
struct Prop {
  std::string path;             // dotted, as given
  const Json* value = nullptr;  // nullptr when absent, null or unknown
  bool unknown = false;         // listed in Resource::unknown (value is then nullptr)

  bool absent() const { return value == nullptr && !unknown; }
};
Prop Read(const Resource& r, std::string_view path);

// Loose readers: ARM templates carry booleans and numbers as strings often
// enough ("true", "2") that a rule reading them strictly would misjudge.
std::optional<bool> AsBool(const Json* v);
std::optional<double> AsNumber(const Json* v);
// The string value, or nullopt for non-strings.
std::optional<std::string> AsString(const Json* v);
// True when `v` is a string equal to `want` ignoring case.
bool StringIs(const Json* v, std::string_view want);
// True when `v` is a non-empty string, array or object (or any number/bool).
bool HasValue(const Json* v);
// How a value reads in a message: 'Enabled', true, 3, [2 items], absent.
std::string Show(const Prop& p);

// Verdict for a property whose value is not known before deployment.
Verdict UnknownProp(const Prop& p);

// --- predicates over one property -----------------------------------------
// Each returns Unknown when the property is unknown, otherwise Pass or a
// Fail whose message names the property, its value and `fix` ("set it to ...").

// Passes when the property equals `want` (case-insensitive). `absent_passes`
// says what an absent property means (its service default).
Verdict RequireString(const Resource& r, std::string_view path, std::string_view want,
                      bool absent_passes, std::string_view fix);
// Passes when the property is `want`. An absent one passes iff `absent_means` == want.
Verdict RequireBool(const Resource& r, std::string_view path, bool want,
                    std::optional<bool> absent_means, std::string_view fix);
// Passes when the property has a non-empty value.
Verdict RequirePresent(const Resource& r, std::string_view path, std::string_view fix);

// --- resources and references ----------------------------------------------

// The last segment of an id or a name ("…/computes/gpu" -> "gpu"; "azureml:gpu" -> "gpu").
std::string LastSegment(std::string_view ref);
// The first segment of a resource name ("ws1/gpu" -> "ws1").
std::string FirstSegment(std::string_view name);
// True when `ref` (an id, "type/name", or a bare name) names `target`.
bool RefersTo(const Resource& target, std::string_view ref);
// The resource `ref` (an id or "type/name") names, if it is in the input and of
// `arm_type`; falls back to a resource of that type with the same last name segment.
const Resource* Resolve(const RuleContext& ctx, std::string_view ref, std::string_view arm_type);
// The workspace a compute/deployment belongs to (first name segment), or nullptr.
const Resource* ParentWorkspace(const RuleContext& ctx, const Resource& child);

// properties.computeType of a workspace compute, "" when absent.
std::string ComputeType(const Resource& compute);
// A tag's value lower-cased, "" when absent.
std::string TagLower(const Resource& r, std::string_view name);
// True for tag values "true", "yes", "1" (any case).
bool TagIsTrue(const Resource& r, std::string_view name);

// --- durations and money ------------------------------------------------------

// ISO 8601 duration ("PT30M", "P1DT2H", "PT120S", "P1W") in seconds; nullopt for
// anything else (years and months have no fixed length and are refused).
std::optional<double> ParseIsoDuration(std::string_view s);
// "$1,234.56".
std::string Usd(double amount);

// The price of `size` in the resource's region (or the context's default).
struct PriceQuote {
  std::string size;    // as the resource names it
  std::string region;  // lower case
  const advise::VmSize* vm = nullptr;
  advise::Price price;
  // Why no amount can be given, "" when `vm` is known: "no catalog",
  // "Standard_X is not in the catalog".
  std::string missing;
};
PriceQuote Quote(const RuleContext& ctx, const Resource& r, std::string_view size);
// "no amount: <why>" for a price that is unknown, for cost_basis.
std::string NoAmount(const PriceQuote& q, std::string_view which_price);

// --- the rule tables -----------------------------------------------------------
// One per area file; BuiltinRules() joins them and sorts by id.
std::vector<Rule> MlRules();       // rules_ml.cc: workspaces, online deployments
std::vector<Rule> ComputeRules();  // rules_compute.cc: workspace computes (and their cost rules)
std::vector<Rule> VmRules();       // rules_vm.cc: VMs and scale sets (and their cost rules)
std::vector<Rule> DataRules();     // rules_data.cc: storage accounts, Key Vault, registries
std::vector<Rule> NodeRules();     // rules_node.cc: the Gantry/node resource

}  // namespace gantry::assess::rule
