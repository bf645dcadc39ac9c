// The suppression file (.gantry-assess.yaml), read through core::Config so
// that every error names the file, line and key.
#include <fmt/format.h>
#include <fnmatch.h>

#include <cctype>

#include "gantry/assess/assess.h"
#include "gantry/core/config.h"
#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

const std::vector<std::string> kTopKeys = {"suppressions"};
const std::vector<std::string> kEntryKeys = {"rule", "resource", "justification", "expires"};

bool HasGlob(std::string_view s) { return s.find_first_of("*?[") != std::string_view::npos; }

Result<std::string> Required(const Config& item, const std::string& key) {
  if (!item.Has(key)) {
    return InvalidArgument(
        fmt::format("{}: missing '{}' (every suppression needs rule, resource, "
                    "justification and expires)",
                    item.Locate(""), key));
  }
  if (!item.IsScalar(key)) {
    return InvalidArgument(fmt::format("{}: expected a string", item.Locate(key)));
  }
  ASSIGN_OR_RETURN(std::string v, item.GetString(key, ""));
  if (TrimSpace(v).empty()) {
    return InvalidArgument(fmt::format("{}: must not be empty", item.Locate(key)));
  }
  return std::string(TrimSpace(v));
}

Result<Suppression> ParseEntry(const Config& item) {
  if (!item.IsMap("")) {
    return InvalidArgument(
        fmt::format("{}: a suppression is a map with rule, resource, justification and expires",
                    item.Locate("")));
  }
  RETURN_IF_ERROR(item.CheckKnownKeys("", kEntryKeys));
  Suppression s;
  ASSIGN_OR_RETURN(s.rule, Required(item, "rule"));
  ASSIGN_OR_RETURN(s.resource, Required(item, "resource"));
  ASSIGN_OR_RETURN(s.justification, Required(item, "justification"));
  ASSIGN_OR_RETURN(s.expires, Required(item, "expires"));
  if (!IsValidDate(s.expires)) {
    return InvalidArgument(
        fmt::format("{}: '{}' is not a date; write YYYY-MM-DD (a real calendar day, e.g. "
                    "2027-03-31)",
                    item.Locate("expires"), s.expires));
  }
  const ConfigPosition pos = item.Position("");
  s.origin = pos.line > 0 ? fmt::format("{}:{}", pos.origin, pos.line) : pos.origin;
  return s;
}

}  // namespace

Result<std::vector<Suppression>> ParseSuppressions(std::string_view yaml, std::string_view origin) {
  // An empty file (or one with only comments) suppresses nothing.
  ASSIGN_OR_RETURN(Config doc, Config::LoadDocument(yaml, origin));
  std::vector<Suppression> out;
  if (!doc.Has("")) return out;
  if (!doc.IsMap("")) {
    return InvalidArgument(
        fmt::format("{}: expected a map with the key 'suppressions' (a list of rule, resource, "
                    "justification, expires)",
                    doc.Locate("")));
  }
  RETURN_IF_ERROR(doc.CheckKnownKeys("", kTopKeys));
  if (doc.Has("suppressions") && !doc.IsList("suppressions")) {
    return InvalidArgument(
        fmt::format("{}: expected a list of suppressions", doc.Locate("suppressions")));
  }
  ASSIGN_OR_RETURN(std::vector<Config> items, doc.Items("suppressions"));
  for (const Config& item : items) {
    ASSIGN_OR_RETURN(Suppression s, ParseEntry(item));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<Suppression>> LoadSuppressions(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseSuppressions(text, path);
}

Status CheckSuppressionRules(const std::vector<Suppression>& suppressions,
                             const std::vector<Rule>& rules) {
  std::vector<std::string> ids;
  ids.reserve(rules.size() + 2);
  for (const Rule& r : rules) ids.push_back(r.id);
  ids.push_back(ExpiredSuppressionRule().id);
  ids.push_back(UnjustifiedSuppressionRule().id);
  for (const Suppression& s : suppressions) {
    bool any = false;
    for (const std::string& id : ids) {
      if (EqualsIgnoreCase(s.rule, id) ||
          ::fnmatch(s.rule.c_str(), id.c_str(), FNM_CASEFOLD) == 0) {
        any = true;
        break;
      }
    }
    if (any) continue;
    if (HasGlob(s.rule)) {
      return InvalidArgument(fmt::format(
          "{}: rule '{}' matches no rule (gantry assess rules lists them)", s.origin, s.rule));
    }
    return InvalidArgument(
        fmt::format("{}: unknown rule '{}'{}", s.origin, s.rule, UnknownRuleHint(s.rule, ids)));
  }
  return Status::Ok();
}

}  // namespace gantry::assess
