// The rules of `gantry assess`: one rule per Well-Architected practice for AI
// workloads on Azure (Machine Learning workspaces, computes and online
// deployments; the VMs, scale sets, storage, Key Vault and registries around
// them; this node). A rule is data (id, pillar, severity, the fix as ARM and
// Terraform snippets, the equivalent PSRule/Checkov/Azure Policy ids) plus one
// small predicate over a Resource and the other resources of the input.
//
//   for (const Rule& r : BuiltinRules()) if (r.AppliesTo(res)) Verdict v = r.check(res, ctx);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/assess/resource.h"

namespace gantry::advise {
class Catalog;
}

namespace gantry::assess {

enum class Pillar {
  kReliability,
  kSecurity,
  kCostOptimization,
  kOperationalExcellence,
  kPerformanceEfficiency
};
// "Reliability", "Security", "Cost Optimization", "Operational Excellence", "Performance
// Efficiency".
std::string_view PillarName(Pillar p);
// Accepts the names above and the short ones (reliability, security, cost, operations,
// performance).
Result<Pillar> ParsePillar(std::string_view s);

enum class Severity { kLow, kMedium, kHigh, kCritical };
std::string_view SeverityName(Severity s);  // "low", "medium", "high", "critical"
Result<Severity> ParseSeverity(std::string_view s);
// SARIF `security-severity` (Checkov's scale): critical 9.0, high 7.0, medium 5.0, low 3.0.
double SecuritySeverityScore(Severity s);

enum class Outcome {
  kPass,
  kFail,
  kUnknown,        // the value the rule needs is not known before deployment
  kNotApplicable,  // the resource is not one the rule is about (e.g. not a ComputeInstance)
};
std::string_view OutcomeName(Outcome o);  // "pass", "fail", "unknown", "not_applicable"

// What a rule says about one resource.
struct Verdict {
  Outcome outcome = Outcome::kPass;
  // One sentence naming the property and its value: "properties.publicNetworkAccess
  // is 'Enabled'; set it to 'Disabled'".
  std::string message;
  // The dotted property path at fault ("" when the whole resource is).
  std::string property;
  // Cost rules: what is at stake per month in USD (from advise's catalog), and how
  // it was computed ("2 idle nodes x $98.32/h x 730 h").
  std::optional<double> monthly_usd;
  std::string cost_basis;

  static Verdict Pass() { return {}; }
  static Verdict NotApplicable() { return {Outcome::kNotApplicable, "", "", std::nullopt, ""}; }
  static Verdict Fail(std::string message, std::string property = "") {
    return {Outcome::kFail, std::move(message), std::move(property), std::nullopt, ""};
  }
  static Verdict Unknown(std::string message, std::string property = "") {
    return {Outcome::kUnknown, std::move(message), std::move(property), std::nullopt, ""};
  }
};

// Everything a predicate may look at besides its resource.
class RuleContext {
 public:
  RuleContext(const std::vector<Resource>& resources, const advise::Catalog* catalog,
              std::string default_region);

  const std::vector<Resource>& resources() const { return resources_; }
  // nullptr when prices are not available (cost rules then state no amount).
  const advise::Catalog* catalog() const { return catalog_; }
  // Region for prices when a resource has no location ("eastus").
  const std::string& default_region() const { return default_region_; }

  // The resource with this id or full "type/name" (case-insensitive), or nullptr.
  const Resource* Find(std::string_view id_or_type_and_name) const;
  // Resources of `arm_type` whose name is `parent.name` + "/" + one more segment.
  std::vector<const Resource*> ChildrenOf(const Resource& parent, std::string_view arm_type) const;
  // Extension resources of `arm_type` whose scope is `target` (by id or name).
  // The older nested form (type "<parent type>/providers/diagnosticSettings",
  // name "<parent name>/Microsoft.Insights/<name>") counts as scoped to the parent.
  std::vector<const Resource*> ScopedTo(const Resource& target, std::string_view arm_type) const;
  // Every resource of `arm_type` (case-insensitive), in input order.
  std::vector<const Resource*> OfType(std::string_view arm_type) const;

 private:
  struct Index;  // lookups by id, type/name, parent and scope, built once per context

  const std::vector<Resource>& resources_;
  const advise::Catalog* catalog_;
  std::string default_region_;
  std::shared_ptr<const Index> index_;
};

struct Rule {
  std::string id;     // GANTRY-<AREA>-<NNN>, e.g. "GANTRY-ML-001"; never reused
  std::string title;  // imperative, one line: "Disable public network access to workspaces"
  Pillar pillar = Pillar::kSecurity;
  Severity severity = Severity::kMedium;
  // ARM types (case-insensitive) the rule applies to.
  std::vector<std::string> types;
  // The exact condition that passes, in words a user can check against the JSON.
  std::string condition;
  // Why, and which guidance it comes from (quoted source: WAF, MCSB, azure-docs).
  std::string rationale;
  std::string fix_arm;        // the property and value as an ARM/Bicep JSON snippet
  std::string fix_terraform;  // the same as azurerm HCL; "" when azurerm has no attribute
  // Equivalent anchors' ids: "PSRule Azure.ML.PublicAccess", "Checkov CKV_AZURE_144",
  // "Policy 438c38d2-3772-465a-a9cc-7a6666a275ce".
  std::vector<std::string> references;
  std::string help_uri;  // a page that documents the practice

  std::function<Verdict(const Resource&, const RuleContext&)> check;

  bool AppliesTo(const Resource& r) const;
};

// Every built-in rule, in id order. Ids are unique.
const std::vector<Rule>& BuiltinRules();
// The built-in rule with this id (case-insensitive), or nullptr.
const Rule* FindRule(std::string_view id);
// The end of an "unknown rule" message: " (did you mean 'GANTRY-ML-001'?)" for
// the id in `ids` closest to `id` (case-insensitive), else
// " (gantry assess rules lists them)".
std::string UnknownRuleHint(std::string_view id, const std::vector<std::string>& ids);

}  // namespace gantry::assess
