// `gantry assess run|rules|explain`: flag parsing and printing only; the work
// is in gantry::assess (include/gantry/assess/).
//
// Exit codes: run 0 no unsuppressed finding at or above --fail-on, 1 one
// remains, 2 usage or an input that cannot be read (a malformed template is
// the user's to fix, so it is 2 like a missing file, not 1); rules 0;
// explain 0, 2 for an unknown id.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "gantry/advise/catalog.h"
#include "gantry/assess/assess.h"
#include "gantry/assess/inputs.h"
#include "gantry/assess/node.h"
#include "gantry/config.h"
#include "gantry/core/imds.h"
#include "gantry/core/json.h"
#include "gantry/core/table.h"
#include "gantry/core/text.h"

namespace gantry::cli {
namespace {

constexpr std::string_view kDefaultSuppressions = ".gantry-assess.yaml";

struct AssessFlags {
  CommonFlags common;
  std::vector<std::string> paths;
  std::vector<std::string> parameters;
  bool node = false;
  std::string node_root = "/";
  bool skip_health = false;
  std::string agent_config;
  std::string format = "table";
  std::string output;
  std::string fail_on = "high";
  std::string suppressions;
  bool no_suppressions = false;
  std::string region = "eastus";
  std::string catalog;
  std::string today;
  std::string id;  // explain
};

// Inputs are the user's files: whatever is wrong with one (absent, malformed,
// an expression that does not evaluate) is theirs to fix, so exit 2.
int InputError(std::string_view command, const Status& s) {
  std::cerr << "gantry " << command << ": " << s.message() << "\n";
  return kExitUsage;
}

std::string Dump(const Json& j) {
  // Names and messages come from user files: invalid UTF-8 must not throw.
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json RuleJson(const assess::Rule& r) {
  return {{"id", r.id},
          {"title", r.title},
          {"pillar", assess::PillarName(r.pillar)},
          {"severity", assess::SeverityName(r.severity)},
          {"types", r.types},
          {"condition", r.condition},
          {"rationale", r.rationale},
          {"fix_arm", r.fix_arm},
          {"fix_terraform", r.fix_terraform},
          {"references", r.references},
          {"help_uri", r.help_uri}};
}

std::vector<const assess::Rule*> RuleList() {
  std::vector<const assess::Rule*> out;
  for (const assess::Rule& r : assess::BuiltinRules()) out.push_back(&r);
  out.push_back(&assess::ExpiredSuppressionRule());
  out.push_back(&assess::UnjustifiedSuppressionRule());
  return out;
}

int RunRules(const AssessFlags& f) {
  if (f.common.json) {
    Json arr = Json::array();
    for (const assess::Rule* r : RuleList()) arr.push_back(RuleJson(*r));
    std::cout << Dump(arr);
    return kExitOk;
  }
  Table t({"id", "pillar", "severity", "title"});
  for (const assess::Rule* r : RuleList()) {
    t.AddRow({r->id, std::string(assess::PillarName(r->pillar)),
              std::string(assess::SeverityName(r->severity)), r->title});
  }
  std::cout << t.Render();
  std::cout << fmt::format("{} rules; gantry assess explain ID shows one with its fix.\n",
                           RuleList().size());
  return kExitOk;
}

int RunExplain(const AssessFlags& f) {
  const assess::Rule* rule = nullptr;
  std::vector<std::string> ids;
  for (const assess::Rule* r : RuleList()) {
    ids.push_back(r->id);
    if (EqualsIgnoreCase(r->id, f.id)) rule = r;
  }
  if (rule == nullptr) {
    return Fail("assess explain",
                NotFound(fmt::format("no rule '{}'{}", f.id, assess::UnknownRuleHint(f.id, ids))));
  }
  if (f.common.json) {
    std::cout << Dump(RuleJson(*rule));
    return kExitOk;
  }
  std::string out = fmt::format("{}  {}\n{}, {}; applies to {}\n\n", rule->id, rule->title,
                                assess::PillarName(rule->pillar),
                                assess::SeverityName(rule->severity), Join(rule->types, ", "));
  if (!rule->condition.empty()) out += "Passes when: " + rule->condition + "\n\n";
  if (!rule->rationale.empty()) out += "Why: " + rule->rationale + "\n\n";
  if (!rule->fix_arm.empty()) out += "Fix (ARM/Bicep):\n" + rule->fix_arm + "\n\n";
  if (!rule->fix_terraform.empty()) out += "Fix (Terraform):\n" + rule->fix_terraform + "\n\n";
  if (!rule->references.empty()) out += "Equivalent: " + Join(rule->references, ", ") + "\n";
  if (!rule->help_uri.empty()) out += "Guide: " + rule->help_uri + "\n";
  std::cout << out;
  return kExitOk;
}

int RunAssess(const AssessFlags& f) {
  const std::string cmd = "assess run";
  std::string format = f.common.json ? "json" : AsciiLower(f.format);
  const std::vector<std::string> formats = {"table", "json", "sarif", "junit", "markdown"};
  if (std::find(formats.begin(), formats.end(), format) == formats.end()) {
    return Fail(cmd, InvalidArgument(fmt::format(
                         "--format {}: use table, json, sarif, junit or markdown", f.format)));
  }
  Result<assess::Severity> fail_on = assess::ParseSeverity(f.fail_on);
  if (!fail_on.ok()) return Fail(cmd, fail_on.status().WithContext("--fail-on"));
  if (f.paths.empty() && !f.node) {
    return Fail(cmd, InvalidArgument("give a template, plan or resource file or directory, or "
                                     "--node for this machine (gantry assess run --help)"));
  }
  if (!f.today.empty() && !assess::IsValidDate(f.today)) {
    return Fail(cmd, InvalidArgument(fmt::format(
                         "--today {}: not a date; write YYYY-MM-DD (e.g. 2027-03-31)", f.today)));
  }

  assess::AssessOptions options;
  options.today = f.today;
  options.default_region = AsciiLower(f.region);
  std::optional<advise::Catalog> catalog;
  if (!f.catalog.empty()) {
    Result<advise::Catalog> c = advise::Catalog::LoadFile(f.catalog);
    if (!c.ok()) return InputError(cmd, c.status().WithContext("--catalog"));
    catalog = std::move(*c);
    options.catalog = &*catalog;
  }

  std::string sup_path = f.suppressions;
  if (sup_path.empty() && !f.no_suppressions && ::access(kDefaultSuppressions.data(), F_OK) == 0) {
    sup_path = std::string(kDefaultSuppressions);
  }
  if (!sup_path.empty()) {
    Result<std::vector<assess::Suppression>> s = assess::LoadSuppressions(sup_path);
    if (!s.ok()) return InputError(cmd, s.status());
    Status known = assess::CheckSuppressionRules(*s, assess::BuiltinRules());
    if (!known.ok()) return InputError(cmd, known);
    options.suppressions = std::move(*s);
  }

  assess::LoadedInputs inputs;
  if (!f.paths.empty()) {
    assess::LoadOptions lo;
    lo.parameter_files = f.parameters;
    lo.arm.location = options.default_region;
    Result<assess::LoadedInputs> loaded = assess::LoadInputs(f.paths, lo);
    if (!loaded.ok()) return InputError(cmd, loaded.status());
    inputs = std::move(*loaded);
  } else if (!f.parameters.empty()) {
    return Fail(cmd, InvalidArgument("--parameters needs a template to apply to"));
  }
  if (f.node) {
    assess::NodeOptions no;
    no.root_dir = f.node_root;
    no.run_health = !f.skip_health;
    no.agent_config = f.agent_config;
    if (!f.common.json && format == "table" && ::isatty(STDERR_FILENO)) {
      std::cerr << "gantry assess: reading this node's facts"
                << (no.run_health ? " and running the health checks" : "") << "...\n";
    }
    AzureImds imds;
    Result<assess::Resource> node = assess::GatherNode(no, imds);
    if (!node.ok()) return Fail(cmd, node.status());
    inputs.resources.push_back(std::move(*node));
  }

  Result<assess::Assessment> a =
      assess::Assess(std::move(inputs.resources), assess::BuiltinRules(), options);
  if (!a.ok()) return Fail(cmd, a.status());
  if (!inputs.files.empty()) {
    // Every file read, also those without resources (JUnit lists a suite for each).
    std::vector<std::string> files = inputs.files;
    for (const std::string& x : a->files) {
      if (std::find(files.begin(), files.end(), x) == files.end()) files.push_back(x);
    }
    a->files = std::move(files);
  }

  std::string text;
  if (format == "table") {
    text = assess::RenderTable(*a);
  } else if (format == "json") {
    text = Dump(assess::ToJson(*a));
  } else if (format == "sarif") {
    text = Dump(assess::ToSarif(*a, GANTRY_VERSION));
  } else if (format == "junit") {
    text = assess::ToJUnit(*a);
  } else {
    text = assess::ToMarkdown(*a);
  }
  if (f.output.empty()) {
    std::cout << text;
  } else {
    Status s = WriteFileAtomic(f.output, text);
    if (!s.ok()) return Fail(cmd, s.WithContext("--output " + f.output));
    // The CI log still shows what was found.
    if (format != "table") std::cout << assess::RenderTable(*a);
  }
  std::cout.flush();
  return a->Failed(*fail_on) ? kExitCheckFailed : kExitOk;
}

}  // namespace

void RegisterAssess(CLI::App& app, Action* action) {
  auto flags = std::make_shared<AssessFlags>();
  CLI::App* assess = app.add_subcommand(
      "assess",
      "Well-Architected assessment of an AI workload's Azure resources (ARM/Bicep templates, "
      "Terraform plans, live resource JSON) and of this node, with the fix and the monthly cost "
      "at stake (gantry assess --help)");
  assess->require_subcommand(1);
  auto set = [&](CLI::App* c, int (*fn)(const AssessFlags&)) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };

  CLI::App* run = assess->add_subcommand(
      "run",
      "Assess templates, plans, live resources and/or this node (exit 0 clean, 1 a finding at "
      "or above --fail-on remains, 2 usage or unreadable input)");
  run->add_option("paths", flags->paths,
                  "ARM/Bicep JSON templates, Terraform plans (terraform show -json), live resource "
                  "JSON, or directories of them (searched for *.json)");
  run->add_option("--parameters", flags->parameters,
                  "ARM parameter file (repeatable; default: <name>.parameters.json beside "
                  "<name>.json)");
  run->add_flag("--node", flags->node,
                "Also assess this machine: health, accelerated networking, public IP, security "
                "updates, reboot, GPU driver and persistence, idle shutdown, ckpt/backup config");
  run->add_option("--node-root", flags->node_root,
                  "With --node: the directory that stands for / when reading /sys, /etc and /var")
      ->capture_default_str();
  run->add_flag("--skip-health", flags->skip_health,
                "With --node: do not run the health checks (their fact is then unknown)");
  run->add_option("--agent-config", flags->agent_config,
                  "With --node: the gantry agent config (default /etc/gantry/agent.yaml)");
  run->add_option("--format", flags->format, "table, json, sarif, junit or markdown")
      ->capture_default_str();
  run->add_option("--output", flags->output,
                  "Write the --format output to this file (atomically); stdout then gets the "
                  "table");
  run->add_option("--fail-on", flags->fail_on,
                  "Exit 1 when an unsuppressed finding of this severity or above remains: low, "
                  "medium, high or critical")
      ->capture_default_str();
  run->add_option("--suppressions", flags->suppressions,
                  "Suppression file (default: .gantry-assess.yaml in the working directory when "
                  "it exists)");
  run->add_flag("--no-suppressions", flags->no_suppressions,
                "Ignore .gantry-assess.yaml (tags on resources still apply)");
  run->add_option("--region", flags->region,
                  "Region for prices and for templates without a location")
      ->capture_default_str();
  run->add_option("--catalog", flags->catalog,
                  "VM catalog YAML for prices (default: advise's built-in one)");
  run->add_option("--today", flags->today,
                  "The date suppressions expire against, YYYY-MM-DD (default: today, UTC)");
  set(run, RunAssess);

  CLI::App* rules = assess->add_subcommand("rules", "List the rules (exit 0)");
  set(rules, RunRules);

  CLI::App* explain = assess->add_subcommand(
      "explain", "Show one rule with its condition and fix (exit 2 if unknown)");
  explain->add_option("id", flags->id, "Rule id, e.g. GANTRY-ML-001")->required();
  set(explain, RunExplain);
}

}  // namespace gantry::cli
