// The assessment: every rule on every resource it applies to, suppressions
// applied, a score per pillar, and the renderings a user or a CI system reads
// (table, JSON, SARIF 2.1.0, JUnit XML, Markdown).
//
//   ASSIGN_OR_RETURN(LoadedInputs in, LoadInputs({"infra/"}, {}));
//   ASSIGN_OR_RETURN(std::vector<Suppression> sup, LoadSuppressions(".gantry-assess.yaml"));
//   AssessOptions opt;  opt.suppressions = sup;
//   ASSIGN_OR_RETURN(Assessment a, Assess(in.resources, BuiltinRules(), opt));
//   std::cout << RenderTable(a);
//   return a.Failed(Severity::kHigh) ? 1 : 0;
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/assess/resource.h"
#include "gantry/assess/rules.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::assess {

// A finding the user decided to accept, from a suppression file or a tag.
//
// File (YAML):
//   suppressions:
//     - rule: GANTRY-ML-004          # a rule id, or a glob ("GANTRY-COST-*")
//       resource: "ws-research*"     # glob on the resource's name or address
//       justification: "research workspace, no customer data"   # required
//       expires: 2027-03-31          # required, YYYY-MM-DD; after it the suppression
//                                    # no longer applies and is itself a finding
// Tag on the resource: "gantry-assess-suppress": "GANTRY-ML-004,GANTRY-ML-007: why"
// (no expiry: tags are reviewed with the resource).
struct Suppression {
  std::string rule;      // id or glob
  std::string resource;  // glob; "*" = every resource
  std::string justification;
  std::string expires;  // YYYY-MM-DD; "" for tags
  std::string origin;   // "file:line" or "tag on <address>"
};

inline constexpr std::string_view kSuppressTag = "gantry-assess-suppress";

// Errors (InvalidArgument) name "file:line": a missing field, an empty
// justification, a malformed date, an unknown key (with did-you-mean).
Result<std::vector<Suppression>> LoadSuppressions(const std::string& path);
Result<std::vector<Suppression>> ParseSuppressions(std::string_view yaml, std::string_view origin);

// A suppression whose `rule` is an id (no glob characters) that none of
// `rules` has (nor GANTRY-SUP-*) would silently suppress nothing: this is
// InvalidArgument naming its origin ("file:line") with a did-you-mean. A glob
// that matches no rule is refused the same way.
Status CheckSuppressionRules(const std::vector<Suppression>& suppressions,
                             const std::vector<Rule>& rules);

// True for a real calendar date written YYYY-MM-DD ("2027-02-29" is not).
bool IsValidDate(std::string_view s);

struct Finding {
  const Rule* rule = nullptr;  // points into the rule list given to Assess
  size_t resource = 0;         // index into Assessment::resources
  Verdict verdict;
  // Set when a suppression matched a failing verdict: the finding is reported
  // (SARIF suppressions, JUnit skipped) but does not fail the run.
  std::optional<Suppression> suppressed;
};

struct PillarScore {
  Pillar pillar;
  int passed = 0, failed = 0, unknown = 0, suppressed = 0;
  // 100 * weighted passes / weighted evaluations (weights by severity:
  // critical 8, high 4, medium 2, low 1; suppressed count as passed, unknown
  // are left out); 100 when nothing was evaluated.
  double score = 100;
};

struct AssessOptions {
  std::vector<Suppression> suppressions;
  std::string today;  // YYYY-MM-DD for expiry checks; "" = the current UTC date
  const advise::Catalog* catalog = nullptr;  // nullptr: advise's built-in catalog
  std::string default_region = "eastus";
};

struct Assessment {
  std::vector<Resource> resources;
  // Every verdict but not-applicable ones: passes too (JUnit lists them).
  std::vector<Finding> findings;
  // Suppressions past their expiry date; each also shows as a finding of
  // rule GANTRY-SUP-001 (ExpiredSuppressionRule()).
  std::vector<Suppression> expired;
  std::vector<PillarScore> scores;  // one per pillar, in Pillar order
  std::vector<std::string> files;   // the inputs read

  // True when an unsuppressed failure at or above `at_least` remains.
  bool Failed(Severity at_least) const;
  // Sum of Verdict::monthly_usd over unsuppressed failures.
  double MonthlyUsdAtStake() const;
};

// The rule a lapsed suppression is reported under (GANTRY-SUP-001, medium,
// Operational Excellence). A suppression is valid through its expiry date and
// lapses the day after. Each expired entry is one finding on a pseudo-resource
// of type "Gantry/suppression" whose location is the entry in the file.
const Rule& ExpiredSuppressionRule();
// The rule a suppression tag without ids or without a justification is
// reported under (GANTRY-SUP-002, low, Operational Excellence), on the tagged
// resource; such a tag suppresses nothing.
const Rule& UnjustifiedSuppressionRule();

// Runs `rules` over `resources`. InvalidArgument for a malformed `today`.
Result<Assessment> Assess(std::vector<Resource> resources, const std::vector<Rule>& rules,
                          const AssessOptions& options);

// Renderings. `tool_version` is Gantry's version.
std::string RenderTable(const Assessment& a);
Json ToJson(const Assessment& a);
// SARIF 2.1.0 as GitHub code scanning reads it: one run, driver "gantry-assess"
// with every rule that produced a result (help text, helpUri,
// properties.security-severity, tags), one result per failure (level from the
// severity, the file and line of the resource), suppressions as SARIF
// suppressions (kind "inSource" for tags, "external" for the file).
Json ToSarif(const Assessment& a, std::string_view tool_version);
// JUnit XML: one testsuite per input file, one testcase per verdict
// ("[HIGH][GANTRY-ML-001] title", classname "file.address"), failures with the
// message and fix, suppressed ones as skipped.
std::string ToJUnit(const Assessment& a);
// Markdown for a pull-request comment: pillar scores, then failures by severity.
std::string ToMarkdown(const Assessment& a);

}  // namespace gantry::assess
