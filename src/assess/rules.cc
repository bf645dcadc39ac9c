#include "gantry/assess/rules.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>

#include "gantry/core/text.h"
#include "rule_util.h"

namespace gantry::assess {

// ------------------------------------------------------------------ names --

std::string_view PillarName(Pillar p) {
  switch (p) {
    case Pillar::kReliability:
      return "Reliability";
    case Pillar::kSecurity:
      return "Security";
    case Pillar::kCostOptimization:
      return "Cost Optimization";
    case Pillar::kOperationalExcellence:
      return "Operational Excellence";
    case Pillar::kPerformanceEfficiency:
      return "Performance Efficiency";
  }
  return "Security";
}

Result<Pillar> ParsePillar(std::string_view s) {
  struct Name {
    std::string_view full, short_name;
    Pillar p;
  };
  static constexpr std::array<Name, 5> kNames = {{
      {"Reliability", "reliability", Pillar::kReliability},
      {"Security", "security", Pillar::kSecurity},
      {"Cost Optimization", "cost", Pillar::kCostOptimization},
      {"Operational Excellence", "operations", Pillar::kOperationalExcellence},
      {"Performance Efficiency", "performance", Pillar::kPerformanceEfficiency},
  }};
  std::string_view t = TrimSpace(s);
  std::vector<std::string> all;
  for (const Name& n : kNames) {
    if (EqualsIgnoreCase(t, n.full) || EqualsIgnoreCase(t, n.short_name)) return n.p;
    all.emplace_back(n.short_name);
  }
  std::string msg = fmt::format("unknown pillar '{}'; use one of {}", s, Join(all, ", "));
  if (auto near = ClosestMatch(AsciiLower(t), all, 3))
    msg += fmt::format(" (did you mean '{}'?)", *near);
  return InvalidArgument(msg);
}

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kLow:
      return "low";
    case Severity::kMedium:
      return "medium";
    case Severity::kHigh:
      return "high";
    case Severity::kCritical:
      return "critical";
  }
  return "medium";
}

Result<Severity> ParseSeverity(std::string_view s) {
  static constexpr std::array<Severity, 4> kAll = {Severity::kLow, Severity::kMedium,
                                                   Severity::kHigh, Severity::kCritical};
  std::string_view t = TrimSpace(s);
  std::vector<std::string> names;
  for (Severity v : kAll) {
    if (EqualsIgnoreCase(t, SeverityName(v))) return v;
    names.emplace_back(SeverityName(v));
  }
  std::string msg = fmt::format("unknown severity '{}'; use one of {}", s, Join(names, ", "));
  if (auto near = ClosestMatch(AsciiLower(t), names, 3))
    msg += fmt::format(" (did you mean '{}'?)", *near);
  return InvalidArgument(msg);
}

double SecuritySeverityScore(Severity s) {
  switch (s) {
    case Severity::kLow:
      return 3.0;
    case Severity::kMedium:
      return 5.0;
    case Severity::kHigh:
      return 7.0;
    case Severity::kCritical:
      return 9.0;
  }
  return 5.0;
}

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "fail";
    case Outcome::kUnknown:
      return "unknown";
    case Outcome::kNotApplicable:
      return "not_applicable";
  }
  return "unknown";
}

// ---------------------------------------------------------------- context --

namespace {

// Lookups key resources by "<type>|<name>" in lower case. Ids and "type/name"
// references are turned into the same key, so that a template's
// resourceId(...) (stub subscription) and a live id (real subscription) both
// find the resource; the exact id is tried first.
std::string Key(std::string_view type, std::string_view name) {
  std::string k = AsciiLower(type);
  k += '|';
  k += AsciiLower(name);
  return k;
}

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t slash = s.find('/', start);
    std::string_view seg = s.substr(start, slash == s.npos ? s.npos : slash - start);
    if (!seg.empty()) out.push_back(seg);
    if (slash == s.npos) break;
    start = slash + 1;
  }
  return out;
}

// "/subscriptions/s/resourceGroups/g/providers/NS/t1/n1/t2/n2" -> "ns/t1/t2|n1/n2";
// "NS/t1/t2/n1/n2" (type then name) -> the same. "" when `ref` is neither.
std::string KeyOfReference(std::string_view ref) {
  if (ref.empty()) return "";
  if (ref.front() == '/') {
    std::string lower = AsciiLower(ref);
    size_t p = lower.rfind("/providers/");
    if (p == std::string::npos) return "";
    std::vector<std::string_view> segs = Split(ref.substr(p + 11));
    if (segs.size() < 3 || segs.size() % 2 == 0) return "";
    std::string type(segs[0]), name;
    for (size_t i = 1; i + 1 < segs.size(); i += 2) {
      type += '/';
      type += segs[i];
      if (!name.empty()) name += '/';
      name += segs[i + 1];
    }
    return Key(type, name);
  }
  std::vector<std::string_view> segs = Split(ref);
  // A bare name has no namespace; "type/name" starts with one ("Microsoft.X").
  if (segs.size() < 3 || segs.size() % 2 == 0 || segs[0].find('.') == std::string_view::npos) {
    return "";
  }
  size_t t = (segs.size() - 1) / 2;
  std::string type(segs[0]), name;
  for (size_t i = 1; i <= t; ++i) {
    type += '/';
    type += segs[i];
  }
  for (size_t i = t + 1; i < segs.size(); ++i) {
    if (!name.empty()) name += '/';
    name += segs[i];
  }
  return Key(type, name);
}

// The nested extension form ARM still accepts: type
// "Microsoft.MachineLearningServices/workspaces/providers/diagnosticSettings",
// name "ws1/Microsoft.Insights/diag". Sets the extension's own type and the
// key of the resource it extends; false for any other resource.
bool NestedExtension(const Resource& r, std::string* ext_type, std::string* scope_key) {
  std::vector<std::string_view> tsegs = Split(r.type);
  std::vector<std::string_view> nsegs = Split(r.name);
  size_t at = 0;
  while (at < tsegs.size() && !EqualsIgnoreCase(tsegs[at], "providers")) ++at;
  if (at < 2 || at + 1 >= tsegs.size()) return false;
  size_t parent_names = at - 1;  // one name per type segment after the namespace
  if (nsegs.size() < parent_names + 2) return false;
  std::string parent_type(tsegs[0]), parent_name;
  for (size_t i = 1; i < at; ++i) {
    parent_type += '/';
    parent_type += tsegs[i];
  }
  for (size_t i = 0; i < parent_names; ++i) {
    if (!parent_name.empty()) parent_name += '/';
    parent_name += nsegs[i];
  }
  *ext_type = std::string(nsegs[parent_names]);
  for (size_t i = at + 1; i < tsegs.size(); ++i) {
    *ext_type += '/';
    *ext_type += tsegs[i];
  }
  *scope_key = Key(parent_type, parent_name);
  return true;
}

}  // namespace

struct RuleContext::Index {
  std::unordered_map<std::string, size_t> by_id;                     // lower-case id
  std::unordered_map<std::string, size_t> by_key;                    // Key(type, name)
  std::unordered_map<std::string, std::vector<size_t>> by_type;      // lower-case type
  std::unordered_map<std::string, std::vector<size_t>> children;     // type '\n' parent key
  std::unordered_map<std::string, std::vector<size_t>> scoped;       // type '\n' scope key
  std::unordered_map<std::string, std::vector<size_t>> scoped_bare;  // type '\n' bare name
};

RuleContext::RuleContext(const std::vector<Resource>& resources, const advise::Catalog* catalog,
                         std::string default_region)
    : resources_(resources), catalog_(catalog), default_region_(std::move(default_region)) {
  auto index = std::make_shared<Index>();
  for (size_t i = 0; i < resources.size(); ++i) {
    const Resource& r = resources[i];
    std::string type = AsciiLower(r.type);
    if (!r.id.empty()) index->by_id.emplace(AsciiLower(r.id), i);
    index->by_key.emplace(Key(r.type, r.name), i);
    index->by_type[type].push_back(i);
    size_t slash = r.name.rfind('/');
    if (slash != std::string::npos) {
      index->children[type + '\n' + AsciiLower(r.name.substr(0, slash))].push_back(i);
    }
    std::string ext_type, scope_key;
    if (NestedExtension(r, &ext_type, &scope_key)) {
      std::string ext = AsciiLower(ext_type);
      index->by_type[ext].push_back(i);
      index->scoped[ext + '\n' + scope_key].push_back(i);
    } else if (!r.scope.empty()) {
      std::string k = KeyOfReference(r.scope);
      if (!k.empty()) {
        index->scoped[type + '\n' + k].push_back(i);
      } else {
        index->scoped_bare[type + '\n' + AsciiLower(r.scope)].push_back(i);
      }
    }
  }
  index_ = std::move(index);
}

const Resource* RuleContext::Find(std::string_view id_or_type_and_name) const {
  if (id_or_type_and_name.empty()) return nullptr;
  auto it = index_->by_id.find(AsciiLower(id_or_type_and_name));
  if (it != index_->by_id.end()) return &resources_[it->second];
  std::string k = KeyOfReference(id_or_type_and_name);
  if (k.empty()) return nullptr;
  auto kt = index_->by_key.find(k);
  return kt == index_->by_key.end() ? nullptr : &resources_[kt->second];
}

std::vector<const Resource*> RuleContext::ChildrenOf(const Resource& parent,
                                                     std::string_view arm_type) const {
  std::vector<const Resource*> out;
  auto it = index_->children.find(AsciiLower(arm_type) + '\n' + AsciiLower(parent.name));
  if (it == index_->children.end()) return out;
  for (size_t i : it->second) out.push_back(&resources_[i]);
  return out;
}

std::vector<const Resource*> RuleContext::ScopedTo(const Resource& target,
                                                   std::string_view arm_type) const {
  std::vector<const Resource*> out;
  std::string type = AsciiLower(arm_type);
  auto it = index_->scoped.find(type + '\n' + Key(target.type, target.name));
  if (it != index_->scoped.end()) {
    for (size_t i : it->second) out.push_back(&resources_[i]);
  }
  // A scope written as a bare name ("ws1") can only be matched by name.
  auto bt = index_->scoped_bare.find(type + '\n' + AsciiLower(target.name));
  if (bt != index_->scoped_bare.end()) {
    for (size_t i : bt->second) out.push_back(&resources_[i]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<const Resource*> RuleContext::OfType(std::string_view arm_type) const {
  std::vector<const Resource*> out;
  auto it = index_->by_type.find(AsciiLower(arm_type));
  if (it == index_->by_type.end()) return out;
  for (size_t i : it->second) out.push_back(&resources_[i]);
  return out;
}

// ------------------------------------------------------------------ rules --

bool Rule::AppliesTo(const Resource& r) const {
  for (const std::string& t : types) {
    if (r.IsType(t)) return true;
  }
  return false;
}

const std::vector<Rule>& BuiltinRules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> all;
    for (auto table :
         {rule::MlRules, rule::ComputeRules, rule::VmRules, rule::DataRules, rule::NodeRules}) {
      std::vector<Rule> part = table();
      for (Rule& r : part) all.push_back(std::move(r));
    }
    std::sort(all.begin(), all.end(), [](const Rule& a, const Rule& b) { return a.id < b.id; });
    return all;
  }();
  return rules;
}

std::string UnknownRuleHint(std::string_view id, const std::vector<std::string>& ids) {
  std::optional<std::string> near = ClosestMatch(AsciiUpper(id), ids, 3);
  return near ? fmt::format(" (did you mean '{}'?)", *near)
              : std::string(" (gantry assess rules lists them)");
}

const Rule* FindRule(std::string_view id) {
  for (const Rule& r : BuiltinRules()) {
    if (EqualsIgnoreCase(r.id, id)) return &r;
  }
  return nullptr;
}

}  // namespace gantry::assess
