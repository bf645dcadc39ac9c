// Renderings of an Assessment: the terminal table, JSON, SARIF 2.1.0, JUnit
// XML and Markdown. Every rendering lists findings in the engine's order (by
// file, line, rule id), so outputs are stable from run to run.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>

#include "gantry/assess/assess.h"
#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

constexpr int kJsonVersion = 1;
constexpr size_t kWidth = 100;
// GitHub refuses PR comments above 65,536 characters; a few hundred failures
// already say what there is to say.
constexpr size_t kMarkdownMaxFailures = 100;
constexpr std::string_view kInformationUri =
    "https://github.com/gantry-ai/gantry/blob/main/docs/assess.md";

bool IsFailure(const Finding& f) { return f.verdict.outcome == Outcome::kFail; }
bool IsOpenFailure(const Finding& f) { return IsFailure(f) && !f.suppressed; }

std::string Where(const Resource& r) {
  if (r.where.file.empty()) return r.origin == Origin::kNode ? "this node" : "";
  if (r.where.line <= 0) return r.where.file;
  return fmt::format("{}:{}", r.where.file, r.where.line);
}

std::string Label(const Resource& r) { return r.address.empty() ? r.name : r.address; }

// Thousands separators keep "$12,345/month" readable.
std::string Money(double usd) { return "$" + GroupThousands(static_cast<int64_t>(usd + 0.5)); }

// Words of `text` in lines of at most `width` columns, each after `indent`.
std::string Wrap(std::string_view text, size_t indent, size_t width) {
  std::string out, line;
  const std::string pad(indent, ' ');
  size_t start = 0;
  auto flush = [&] {
    out += pad + line + "\n";
    line.clear();
  };
  while (start < text.size()) {
    size_t space = text.find(' ', start);
    std::string_view word =
        text.substr(start, space == std::string_view::npos ? text.npos : space - start);
    start = space == std::string_view::npos ? text.size() : space + 1;
    if (word.empty()) continue;
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) flush();
    if (!line.empty()) line += ' ';
    line += word;
  }
  if (!line.empty()) flush();
  return out;
}

struct Counts {
  int passed = 0, failed = 0, unknown = 0, suppressed = 0;
  std::array<int, 4> by_severity{};  // open failures, indexed by Severity
};

Counts Count(const Assessment& a) {
  Counts c;
  for (const Finding& f : a.findings) {
    switch (f.verdict.outcome) {
      case Outcome::kPass:
        ++c.passed;
        break;
      case Outcome::kFail:
        if (f.suppressed) {
          ++c.suppressed;
        } else {
          ++c.failed;
          ++c.by_severity[static_cast<int>(f.rule->severity)];
        }
        break;
      case Outcome::kUnknown:
        ++c.unknown;
        break;
      case Outcome::kNotApplicable:
        break;
    }
  }
  return c;
}

std::string SeverityBreakdown(const Counts& c) {
  std::vector<std::string> parts;
  for (Severity s : {Severity::kCritical, Severity::kHigh, Severity::kMedium, Severity::kLow}) {
    const int n = c.by_severity[static_cast<int>(s)];
    if (n > 0) parts.push_back(fmt::format("{} {}", n, SeverityName(s)));
  }
  return Join(parts, ", ");
}

std::string SummaryLine(const Assessment& a, const Counts& c) {
  std::string s = Plural(c.failed, "failure", "failures");
  if (c.failed > 0) s += " (" + SeverityBreakdown(c) + ")";
  s += fmt::format(", {} passed, {} suppressed, {} unknown", c.passed, c.suppressed, c.unknown);
  const double usd = a.MonthlyUsdAtStake();
  if (usd > 0) s += fmt::format("; {}/month at stake", Money(usd));
  if (!a.expired.empty()) {
    s += "; " +
         Plural(static_cast<int>(a.expired.size()), "expired suppression", "expired suppressions");
  }
  return s;
}

// Failures of one pillar (or severity), most severe first, then in file order.
std::vector<const Finding*> OpenFailures(const Assessment& a) {
  std::vector<const Finding*> out;
  for (const Finding& f : a.findings) {
    if (IsOpenFailure(f)) out.push_back(&f);
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding* x, const Finding* y) {
    return x->rule->severity > y->rule->severity;
  });
  return out;
}

std::string Fingerprint(std::string_view rule, std::string_view address) {
  // FNV-1a 64: stable across runs, machines and Gantry versions.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (unsigned char ch : s) {
      h ^= ch;
      h *= 1099511628211ull;
    }
  };
  mix(rule);
  mix("\x1f");
  mix(address);
  return fmt::format("{:016x}", h);
}

// RFC 3986: everything but unreserved characters and '/' percent-encoded.
std::string UriEncode(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

struct ArtifactUri {
  std::string uri;
  bool relative = true;
};

// SARIF wants the file relative to the checkout (%SRCROOT% = the working
// directory), which is what GitHub code scanning matches against the repo.
ArtifactUri ArtifactOf(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(file);
  if (p.is_absolute()) {
    const fs::path cwd = fs::current_path(ec);
    if (!ec) {
      fs::path rel = p.lexically_normal().lexically_relative(cwd);
      if (!rel.empty() && *rel.begin() != "..") return {UriEncode(rel.generic_string()), true};
    }
    return {"file://" + UriEncode(p.lexically_normal().generic_string()), false};
  }
  std::string rel = p.lexically_normal().generic_string();
  if (rel.rfind("./", 0) == 0) rel = rel.substr(2);
  return {UriEncode(rel), true};
}

std::string SarifLevel(Severity s) {
  switch (s) {
    case Severity::kCritical:
    case Severity::kHigh:
      return "error";
    case Severity::kMedium:
      return "warning";
    case Severity::kLow:
      return "note";
  }
  return "warning";
}

std::string HelpText(const Rule& r) {
  std::string t = r.rationale;
  if (!r.condition.empty()) t += "\n\nPasses when: " + r.condition;
  if (!r.fix_arm.empty()) t += "\n\nFix (ARM/Bicep):\n" + r.fix_arm;
  if (!r.fix_terraform.empty()) t += "\n\nFix (Terraform):\n" + r.fix_terraform;
  if (!r.references.empty()) t += "\n\nEquivalent: " + Join(r.references, ", ");
  return t;
}

std::string HelpMarkdown(const Rule& r) {
  std::string t = fmt::format("**{}** ({}, {})\n\n{}", r.title, PillarName(r.pillar),
                              SeverityName(r.severity), r.rationale);
  if (!r.condition.empty()) t += "\n\n**Passes when:** " + r.condition;
  if (!r.fix_arm.empty()) t += "\n\n**Fix (ARM/Bicep):**\n\n```json\n" + r.fix_arm + "\n```";
  if (!r.fix_terraform.empty()) {
    t += "\n\n**Fix (Terraform):**\n\n```hcl\n" + r.fix_terraform + "\n```";
  }
  if (!r.references.empty()) t += "\n\n**Equivalent:** " + Join(r.references, ", ");
  return t;
}

Json SuppressionJson(const Suppression& s) {
  return {{"rule", s.rule},
          {"resource", s.resource},
          {"justification", s.justification},
          {"expires", s.expires.empty() ? Json(nullptr) : Json(s.expires)},
          {"origin", s.origin},
          {"kind", s.expires.empty() ? "tag" : "file"}};
}

std::string MdCell(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else if (c == '`') {
      out += '\'';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderTable(const Assessment& a) {
  const Counts c = Count(a);
  size_t inputs = 0;
  for (const Resource& r : a.resources) inputs += r.type != "Gantry/suppression";
  std::string out =
      fmt::format("gantry assess: {} in {}, {} evaluated\n\n",
                  Plural(static_cast<int>(inputs), "resource", "resources"),
                  Plural(static_cast<int>(a.files.size()), "file", "files"),
                  Plural(c.passed + c.failed + c.suppressed + c.unknown, "check", "checks"));
  out += fmt::format("{:<24} {:>6} {:>7} {:>7} {:>8} {:>11}\n", "pillar", "score", "passed",
                     "failed", "unknown", "suppressed");
  out += std::string(68, '-') + "\n";
  for (const PillarScore& s : a.scores) {
    out += fmt::format("{:<24} {:>5.0f}% {:>7} {:>7} {:>8} {:>11}\n", PillarName(s.pillar), s.score,
                       s.passed, s.failed, s.unknown, s.suppressed);
  }
  for (const PillarScore& s : a.scores) {
    std::vector<const Finding*> fails;
    for (const Finding* f : OpenFailures(a)) {
      if (f->rule->pillar == s.pillar) fails.push_back(f);
    }
    if (fails.empty()) continue;
    out += fmt::format("\n{}: {}\n", PillarName(s.pillar),
                       Plural(static_cast<int>(fails.size()), "failure", "failures"));
    for (const Finding* f : fails) {
      const Resource& r = a.resources[f->resource];
      std::string head = fmt::format("  {:<9} {}  {}", AsciiUpper(SeverityName(f->rule->severity)),
                                     f->rule->id, Label(r));
      if (head.size() > kWidth) {
        // Long addresses (live resource ids) on a line of their own.
        head = fmt::format("  {:<9} {}\n            {}",
                           AsciiUpper(SeverityName(f->rule->severity)), f->rule->id, Label(r));
      }
      out += head + "\n";
      std::string where = Where(r);
      // Template addresses ("resources[4].resources[0][2]") say where, not what:
      // name the resource too.
      if (!r.name.empty() && r.name != Label(r)) {
        const size_t slash = r.type.rfind('/');
        where += fmt::format(
            " ({} '{}')", slash == std::string::npos ? r.type : r.type.substr(slash + 1), r.name);
      }
      if (!where.empty()) out += Wrap("at " + where, 12, kWidth);
      out += Wrap(f->verdict.message.empty() ? f->rule->title : f->verdict.message, 12, kWidth);
      if (f->verdict.monthly_usd) {
        std::string cost = fmt::format("at stake: {}/month", Money(*f->verdict.monthly_usd));
        if (!f->verdict.cost_basis.empty()) cost += " (" + f->verdict.cost_basis + ")";
        out += Wrap(cost, 12, kWidth);
      }
    }
  }
  if (!a.expired.empty()) {
    out += "\nExpired suppressions (they apply to nothing until renewed):\n";
    for (const Suppression& s : a.expired) {
      out += fmt::format("  {}  {} on '{}' expired {}\n", s.origin, s.rule, s.resource, s.expires);
    }
  }
  out += "\n" + Wrap(SummaryLine(a, c), 0, kWidth);
  return out;
}

Json ToJson(const Assessment& a) {
  const Counts c = Count(a);
  Json j;
  j["report"] = "gantry.assess";
  j["version"] = kJsonVersion;
  Json summary;
  size_t inputs = 0;
  for (const Resource& r : a.resources) inputs += r.type != "Gantry/suppression";
  summary["resources"] = inputs;
  summary["files"] = a.files;
  summary["checks"] = c.passed + c.failed + c.suppressed + c.unknown;
  summary["passed"] = c.passed;
  summary["failed"] = c.failed;
  summary["unknown"] = c.unknown;
  summary["suppressed"] = c.suppressed;
  Json by = Json::object();
  for (Severity s : {Severity::kCritical, Severity::kHigh, Severity::kMedium, Severity::kLow}) {
    by[std::string(SeverityName(s))] = c.by_severity[static_cast<int>(s)];
  }
  summary["failed_by_severity"] = by;
  summary["monthly_usd_at_stake"] = a.MonthlyUsdAtStake();
  summary["expired_suppressions"] = a.expired.size();
  j["summary"] = summary;

  Json scores = Json::array();
  for (const PillarScore& s : a.scores) {
    scores.push_back({{"pillar", PillarName(s.pillar)},
                      {"score", s.score},
                      {"passed", s.passed},
                      {"failed", s.failed},
                      {"unknown", s.unknown},
                      {"suppressed", s.suppressed}});
  }
  j["scores"] = scores;

  Json findings = Json::array();
  for (const Finding& f : a.findings) {
    const Resource& r = a.resources[f.resource];
    Json fj;
    fj["rule"] = f.rule->id;
    fj["title"] = f.rule->title;
    fj["pillar"] = PillarName(f.rule->pillar);
    fj["severity"] = SeverityName(f.rule->severity);
    fj["outcome"] = OutcomeName(f.verdict.outcome);
    fj["message"] = f.verdict.message;
    fj["property"] = f.verdict.property;
    fj["resource"] = {{"type", r.type},
                      {"name", r.name},
                      {"address", r.address},
                      {"id", r.id},
                      {"origin", OriginName(r.origin)},
                      {"file", r.where.file},
                      {"line", r.where.line}};
    fj["monthly_usd"] = f.verdict.monthly_usd ? Json(*f.verdict.monthly_usd) : Json(nullptr);
    fj["cost_basis"] = f.verdict.cost_basis;
    fj["suppressed"] = f.suppressed ? SuppressionJson(*f.suppressed) : Json(nullptr);
    findings.push_back(std::move(fj));
  }
  j["findings"] = findings;
  Json expired = Json::array();
  for (const Suppression& s : a.expired) expired.push_back(SuppressionJson(s));
  j["expired_suppressions"] = expired;
  return j;
}

Json ToSarif(const Assessment& a, std::string_view tool_version) {
  // Rules in id order, each once; results point at them by index.
  std::map<std::string, const Rule*> used;
  for (const Finding& f : a.findings) {
    if (IsFailure(f)) used.emplace(f.rule->id, f.rule);
  }
  Json rules = Json::array();
  std::map<std::string, int> index;
  for (const auto& [id, rule] : used) {
    index[id] = static_cast<int>(rules.size());
    Json tags = Json::array({std::string(PillarName(rule->pillar))});
    // GitHub shows security-severity only for rules tagged "security".
    if (rule->pillar == Pillar::kSecurity) tags.push_back("security");
    tags.push_back("well-architected");
    Json rj;
    rj["id"] = rule->id;
    // SARIF's `name` is an identifier-like PascalCase word in most tools;
    // the id itself is the stable one.
    rj["name"] = rule->id;
    rj["shortDescription"] = {{"text", rule->title}};
    rj["fullDescription"] = {{"text", rule->condition.empty() ? rule->title : rule->condition}};
    rj["help"] = {{"text", HelpText(*rule)}, {"markdown", HelpMarkdown(*rule)}};
    if (!rule->help_uri.empty()) rj["helpUri"] = rule->help_uri;
    rj["defaultConfiguration"] = {{"level", SarifLevel(rule->severity)}};
    rj["properties"] = {
        {"security-severity", fmt::format("{:.1f}", SecuritySeverityScore(rule->severity))},
        {"tags", tags},
        {"precision", "very-high"},
        {"problem.severity",
         SarifLevel(rule->severity) == "note" ? "recommendation" : SarifLevel(rule->severity)}};
    rules.push_back(std::move(rj));
  }

  Json results = Json::array();
  for (const Finding& f : a.findings) {
    if (!IsFailure(f)) continue;
    const Resource& r = a.resources[f.resource];
    Json res;
    res["ruleId"] = f.rule->id;
    res["ruleIndex"] = index[f.rule->id];
    res["level"] = SarifLevel(f.rule->severity);
    res["message"] = {{"text", f.verdict.message.empty() ? f.rule->title : f.verdict.message}};
    Json loc;
    if (!r.where.file.empty()) {
      const ArtifactUri art = ArtifactOf(r.where.file);
      Json artifact = {{"uri", art.uri}};
      if (art.relative) artifact["uriBaseId"] = "%SRCROOT%";
      loc["physicalLocation"] = {{"artifactLocation", artifact},
                                 {"region", {{"startLine", std::max(r.where.line, 1)}}}};
    }
    loc["logicalLocations"] = Json::array({{{"name", Label(r)},
                                            {"fullyQualifiedName", r.id.empty() ? Label(r) : r.id},
                                            {"kind", "resource"}}});
    res["locations"] = Json::array({loc});
    res["partialFingerprints"] = {{"gantryAssess/v1", Fingerprint(f.rule->id, Label(r))}};
    Json props = {{"pillar", PillarName(f.rule->pillar)},
                  {"severity", SeverityName(f.rule->severity)},
                  {"resourceType", r.type}};
    if (!f.verdict.property.empty()) props["property"] = f.verdict.property;
    if (f.verdict.monthly_usd) {
      props["monthly_usd"] = *f.verdict.monthly_usd;
      props["cost_basis"] = f.verdict.cost_basis;
    }
    res["properties"] = props;
    if (f.suppressed) {
      res["suppressions"] =
          Json::array({{{"kind", f.suppressed->expires.empty() ? "inSource" : "external"},
                        {"status", "accepted"},
                        {"justification", f.suppressed->justification}}});
    }
    results.push_back(std::move(res));
  }

  std::error_code ec;
  std::string cwd = std::filesystem::current_path(ec).generic_string();
  if (ec || cwd.empty()) cwd = "/";
  if (cwd.back() != '/') cwd += '/';

  Json driver = {{"name", "gantry-assess"},
                 {"version", std::string(tool_version)},
                 {"semanticVersion", std::string(tool_version)},
                 {"informationUri", std::string(kInformationUri)},
                 {"rules", rules}};
  Json run = {{"tool", {{"driver", driver}}},
              {"originalUriBaseIds", {{"%SRCROOT%", {{"uri", "file://" + UriEncode(cwd)}}}}},
              {"results", results},
              {"columnKind", "utf16CodeUnits"}};
  return {{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
          {"version", "2.1.0"},
          {"runs", Json::array({run})}};
}

std::string ToJUnit(const Assessment& a) {
  // One testsuite per input file, in the order they were read; resources
  // without a file (the node) go into a suite of their own.
  std::vector<std::string> suites = a.files;
  std::map<std::string, std::vector<const Finding*>> by_file;
  for (const Finding& f : a.findings) {
    const Resource& r = a.resources[f.resource];
    const std::string key = r.where.file.empty() ? "node" : r.where.file;
    if (std::find(suites.begin(), suites.end(), key) == suites.end()) suites.push_back(key);
    by_file[key].push_back(&f);
  }
  const Counts total = Count(a);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuites name=\"gantry-assess\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
      "skipped=\"{}\">\n",
      total.passed + total.failed + total.suppressed + total.unknown, total.failed,
      total.suppressed + total.unknown);
  for (const std::string& file : suites) {
    const std::vector<const Finding*>& fs = by_file[file];
    int failures = 0, skipped = 0;
    for (const Finding* f : fs) {
      if (IsOpenFailure(*f)) ++failures;
      if (f->suppressed || f->verdict.outcome == Outcome::kUnknown) ++skipped;
    }
    out += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
        EscapeMarkup(file), fs.size(), failures, skipped);
    for (const Finding* f : fs) {
      const Resource& r = a.resources[f->resource];
      const std::string name = fmt::format(
          "[{}][{}] {}", AsciiUpper(SeverityName(f->rule->severity)), f->rule->id, f->rule->title);
      const std::string classname = fmt::format("{}.{}", file, Label(r));
      out += fmt::format("    <testcase name=\"{}\" classname=\"{}\"", EscapeMarkup(name),
                         EscapeMarkup(classname));
      if (!r.where.file.empty()) {
        out += fmt::format(" file=\"{}\"", EscapeMarkup(r.where.file));
        if (r.where.line > 0) out += fmt::format(" line=\"{}\"", r.where.line);
      }
      if (f->verdict.outcome == Outcome::kPass) {
        out += "/>\n";
        continue;
      }
      out += ">\n";
      if (f->suppressed) {
        out += fmt::format("      <skipped message=\"{}\"/>\n",
                           EscapeMarkup("suppressed (" + f->suppressed->origin +
                                        "): " + f->suppressed->justification));
      } else if (f->verdict.outcome == Outcome::kUnknown) {
        out += fmt::format("      <skipped message=\"{}\"/>\n",
                           EscapeMarkup("unknown: " + f->verdict.message));
      } else {
        std::string body =
            fmt::format("{}\nresource: {} ({})\n", f->verdict.message, Label(r), r.type);
        if (!Where(r).empty()) body += "at: " + Where(r) + "\n";
        if (f->verdict.monthly_usd) {
          body += fmt::format("at stake: {}/month {}\n", Money(*f->verdict.monthly_usd),
                              f->verdict.cost_basis);
        }
        if (!f->rule->fix_arm.empty()) body += "fix (ARM/Bicep):\n" + f->rule->fix_arm + "\n";
        if (!f->rule->fix_terraform.empty()) {
          body += "fix (Terraform):\n" + f->rule->fix_terraform + "\n";
        }
        if (!f->rule->help_uri.empty()) body += "guide: " + f->rule->help_uri + "\n";
        out += fmt::format(
            "      <failure message=\"{}\" type=\"{}\">{}</failure>\n",
            EscapeMarkup(f->verdict.message.empty() ? f->rule->title : f->verdict.message),
            SeverityName(f->rule->severity), EscapeMarkup(body, false));
      }
      out += "    </testcase>\n";
    }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

std::string ToMarkdown(const Assessment& a) {
  const Counts c = Count(a);
  std::string out = "## Gantry assess\n\n";
  out += "| Pillar | Score | Passed | Failed | Unknown | Suppressed |\n";
  out += "|---|---:|---:|---:|---:|---:|\n";
  for (const PillarScore& s : a.scores) {
    out += fmt::format("| {} | {:.0f}% | {} | {} | {} | {} |\n", PillarName(s.pillar), s.score,
                       s.passed, s.failed, s.unknown, s.suppressed);
  }
  out += "\n**" + SummaryLine(a, c) + "**\n";
  const std::vector<const Finding*> fails = OpenFailures(a);
  if (fails.empty()) {
    out += "\nNo failures.\n";
  }
  size_t shown = 0;
  std::set<std::string> rules_shown;
  std::vector<const Rule*> rules_in_order;
  for (Severity sev : {Severity::kCritical, Severity::kHigh, Severity::kMedium, Severity::kLow}) {
    std::vector<const Finding*> group;
    for (const Finding* f : fails) {
      if (f->rule->severity == sev) group.push_back(f);
    }
    if (group.empty() || shown >= kMarkdownMaxFailures) continue;
    std::string name(SeverityName(sev));
    name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
    out += fmt::format("\n### {} ({})\n\n", name, group.size());
    out += "| Rule | Resource | Where | Finding |\n|---|---|---|---|\n";
    for (const Finding* f : group) {
      if (shown >= kMarkdownMaxFailures) break;
      ++shown;
      const Resource& r = a.resources[f->resource];
      std::string msg = f->verdict.message.empty() ? f->rule->title : f->verdict.message;
      if (f->verdict.monthly_usd) {
        msg += fmt::format(" (at stake: {}/month)", Money(*f->verdict.monthly_usd));
      }
      out += fmt::format("| `{}` | `{}` | {} | {} |\n", f->rule->id, MdCell(Label(r)),
                         MdCell(Where(r)), MdCell(msg));
      if (rules_shown.insert(f->rule->id).second) rules_in_order.push_back(f->rule);
    }
  }
  if (shown < fails.size()) {
    out += fmt::format("\n_{} more failures are not listed here; see the JSON or SARIF output._\n",
                       fails.size() - shown);
  }
  if (!rules_in_order.empty()) {
    out += "\n<details><summary>How to fix</summary>\n";
    for (const Rule* r : rules_in_order) {
      out += fmt::format("\n#### {}: {}\n\n{}\n", r->id, r->title, r->rationale);
      if (!r->fix_arm.empty()) out += "\nARM/Bicep:\n\n```json\n" + r->fix_arm + "\n```\n";
      if (!r->fix_terraform.empty()) {
        out += "\nTerraform:\n\n```hcl\n" + r->fix_terraform + "\n```\n";
      }
      if (!r->help_uri.empty()) out += "\n" + r->help_uri + "\n";
    }
    out += "\n</details>\n";
  }
  if (!a.expired.empty()) {
    out += "\n### Expired suppressions\n\n";
    for (const Suppression& s : a.expired) {
      out += fmt::format("- `{}` on `{}` expired {} ({})\n", MdCell(s.rule), MdCell(s.resource),
                         s.expires, MdCell(s.origin));
    }
  }
  return out;
}

}  // namespace gantry::assess
