// The engine: rules over resources, suppressions (file and tags), expiry,
// pillar scores. Renderings are in report.cc, the suppression file in
// suppress.cc.
#include "gantry/assess/assess.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <tuple>

#include "gantry/advise/catalog.h"
#include "gantry/core/text.h"

namespace gantry::assess {
namespace {

// ARM names and rule ids are case-insensitive, so globs are too. The literal
// comparison first: addresses such as "resources[2]" hold brackets, which
// fnmatch would read as a character class.
bool GlobMatch(const std::string& pattern, const std::string& text) {
  return EqualsIgnoreCase(pattern, text) ||
         ::fnmatch(pattern.c_str(), text.c_str(), FNM_CASEFOLD) == 0;
}

bool CoversResource(const Suppression& s, const Resource& r) {
  return GlobMatch(s.resource, r.name) || GlobMatch(s.resource, r.address);
}

int SeverityWeight(Severity s) {
  switch (s) {
    case Severity::kCritical:
      return 8;
    case Severity::kHigh:
      return 4;
    case Severity::kMedium:
      return 2;
    case Severity::kLow:
      return 1;
  }
  return 1;
}

std::string TodayUtc() { return FormatUtc(std::chrono::system_clock::now(), "%Y-%m-%d"); }

// What a tag asks for: ids (or globs) and the justification after the colon.
struct TagRequest {
  std::vector<std::string> rules;
  std::string justification;
};

TagRequest ParseTag(std::string_view value) {
  TagRequest t;
  size_t colon = value.find(':');
  std::string_view ids = value.substr(0, colon);
  if (colon != std::string_view::npos) {
    t.justification = std::string(TrimSpace(value.substr(colon + 1)));
  }
  size_t start = 0;
  while (start <= ids.size()) {
    size_t comma = ids.find(',', start);
    std::string_view one =
        TrimSpace(ids.substr(start, comma == std::string_view::npos ? ids.npos : comma - start));
    if (!one.empty()) t.rules.emplace_back(one);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return t;
}

// "file.yaml:12" -> {"file.yaml", 12}; anything else -> {origin, 0}.
std::pair<std::string, int> SplitOrigin(const std::string& origin) {
  size_t colon = origin.rfind(':');
  if (colon != std::string::npos && colon + 1 < origin.size()) {
    int line = 0;
    if (ParseNumber(std::string_view(origin).substr(colon + 1), &line) && line > 0) {
      return {origin.substr(0, colon), line};
    }
  }
  return {origin, 0};
}

Rule MakeExpiredRule() {
  Rule r;
  r.id = "GANTRY-SUP-001";
  r.title = "Renew or remove expired suppressions";
  r.pillar = Pillar::kOperationalExcellence;
  r.severity = Severity::kMedium;
  r.types = {"Gantry/suppression"};
  r.condition = "every suppression in the suppression file has an expiry date on or after today";
  r.rationale =
      "A suppression is a decision to accept a risk for a while; once its date has passed the "
      "decision must be reviewed. The suppressed findings are reported again until it is renewed "
      "(with a new justification) or removed.";
  r.fix_arm =
      "In the suppression file, set a new `expires: YYYY-MM-DD` with a reviewed justification, "
      "or delete the entry and fix the finding.";
  r.help_uri = "https://github.com/gantry-ai/gantry/blob/main/docs/assess.md#suppressions";
  r.check = [](const Resource&, const RuleContext&) { return Verdict::NotApplicable(); };
  return r;
}

Rule MakeUnjustifiedRule() {
  Rule r;
  r.id = "GANTRY-SUP-002";
  r.title = "Give every suppression tag a justification";
  r.pillar = Pillar::kOperationalExcellence;
  r.severity = Severity::kLow;
  r.types = {"*"};
  r.condition = fmt::format(
      "a '{}' tag reads 'RULE-ID[,RULE-ID...]: justification' with at least one id and a "
      "non-empty justification",
      kSuppressTag);
  r.rationale =
      "An accepted risk without a reason cannot be reviewed. A tag without a justification "
      "suppresses nothing: the findings it names stay failures.";
  r.fix_arm =
      fmt::format("\"tags\": {{ \"{}\": \"GANTRY-ML-004: research workspace, no customer data\" }}",
                  kSuppressTag);
  r.fix_terraform = fmt::format(
      "tags = {{\n  \"{}\" = \"GANTRY-ML-004: research workspace, no customer data\"\n}}",
      kSuppressTag);
  r.help_uri = "https://github.com/gantry-ai/gantry/blob/main/docs/assess.md#suppressions";
  r.check = [](const Resource&, const RuleContext&) { return Verdict::NotApplicable(); };
  return r;
}

}  // namespace

bool IsValidDate(std::string_view s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  const int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
  const int m = (s[5] - '0') * 10 + (s[6] - '0');
  const int d = (s[8] - '0') * 10 + (s[9] - '0');
  if (m < 1 || m > 12 || d < 1 || y < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  const int max = m == 2 && leap ? 29 : kDays[m - 1];
  return d <= max;
}

const Rule& ExpiredSuppressionRule() {
  static const Rule* rule = new Rule(MakeExpiredRule());
  return *rule;
}

const Rule& UnjustifiedSuppressionRule() {
  static const Rule* rule = new Rule(MakeUnjustifiedRule());
  return *rule;
}

bool Assessment::Failed(Severity at_least) const {
  for (const Finding& f : findings) {
    if (f.verdict.outcome == Outcome::kFail && !f.suppressed && f.rule->severity >= at_least) {
      return true;
    }
  }
  return false;
}

double Assessment::MonthlyUsdAtStake() const {
  double sum = 0;
  for (const Finding& f : findings) {
    if (f.verdict.outcome == Outcome::kFail && !f.suppressed && f.verdict.monthly_usd) {
      sum += *f.verdict.monthly_usd;
    }
  }
  return sum;
}

Result<Assessment> Assess(std::vector<Resource> resources, const std::vector<Rule>& rules,
                          const AssessOptions& options) {
  const std::string today = options.today.empty() ? TodayUtc() : options.today;
  if (!IsValidDate(today)) {
    return InvalidArgument(fmt::format(
        "today: '{}' is not a date; give it as YYYY-MM-DD (e.g. 2027-03-31)", options.today));
  }
  Assessment a;

  // Split the file's suppressions: the lapsed ones apply to nothing and are
  // reported on the suppression file, where they have to be fixed.
  std::vector<const Suppression*> active;
  for (const Suppression& s : options.suppressions) {
    if (!s.expires.empty() && s.expires < today) {
      a.expired.push_back(s);
    } else {
      active.push_back(&s);
    }
  }

  std::optional<advise::Catalog> builtin;
  const advise::Catalog* catalog = options.catalog;
  if (catalog == nullptr) {
    Result<advise::Catalog> c = advise::Catalog::Default();
    // Without prices the cost rules still judge; they state no amount.
    if (c.ok()) {
      builtin = std::move(*c);
      catalog = &*builtin;
    }
  }

  a.resources = std::move(resources);
  const size_t n_inputs = a.resources.size();

  // The inputs, as far as the resources tell (the CLI replaces this with the
  // full list, files without resources included).
  for (const Resource& r : a.resources) {
    const std::string& f = r.where.file;
    if (!f.empty() && std::find(a.files.begin(), a.files.end(), f) == a.files.end()) {
      a.files.push_back(f);
    }
  }

  {
    const std::vector<Resource>& rs = a.resources;
    RuleContext ctx(rs, catalog, options.default_region);

    for (size_t i = 0; i < n_inputs; ++i) {
      const Resource& res = rs[i];
      // The resource's own tag: "ID[,ID]: justification".
      std::optional<TagRequest> tag;
      if (const std::string* v = res.Tag(kSuppressTag)) {
        tag = ParseTag(*v);
        if (tag->rules.empty() || tag->justification.empty()) {
          Finding f;
          f.rule = &UnjustifiedSuppressionRule();
          f.resource = i;
          f.verdict = Verdict::Fail(
              tag->rules.empty()
                  ? fmt::format("tag '{}' names no rule id ('{}'); write 'RULE-ID: justification'",
                                kSuppressTag, *v)
                  : fmt::format("tag '{}' has no justification ('{}'); write 'RULE-ID: "
                                "justification': until then it suppresses nothing",
                                kSuppressTag, *v),
              fmt::format("tags.{}", kSuppressTag));
          a.findings.push_back(std::move(f));
          tag.reset();
        }
      }
      for (const Rule& rule : rules) {
        if (!rule.AppliesTo(res) || !rule.check) continue;
        Verdict v = rule.check(res, ctx);
        if (v.outcome == Outcome::kNotApplicable) continue;
        Finding f;
        f.rule = &rule;
        f.resource = i;
        f.verdict = std::move(v);
        if (f.verdict.outcome == Outcome::kFail) {
          if (tag) {
            for (const std::string& id : tag->rules) {
              if (GlobMatch(id, rule.id)) {
                f.suppressed = Suppression{
                    id, res.address.empty() ? res.name : res.address, tag->justification, "",
                    fmt::format("tag on {}", res.address.empty() ? res.name : res.address)};
                break;
              }
            }
          }
          if (!f.suppressed) {
            for (const Suppression* s : active) {
              if (GlobMatch(s->rule, rule.id) && CoversResource(*s, res)) {
                f.suppressed = *s;
                break;
              }
            }
          }
        }
        a.findings.push_back(std::move(f));
      }
    }
  }
  // Pseudo-resources for the expired entries, added after the rules ran so
  // that no rule sees them.
  for (const Suppression& s : a.expired) {
    Resource r;
    r.type = "Gantry/suppression";
    r.name = fmt::format("suppression of {} on {}", s.rule, s.resource);
    r.address = r.name;
    auto [file, line] = SplitOrigin(s.origin);
    r.where.file = file;
    r.where.line = line;
    r.origin = Origin::kLive;
    a.resources.push_back(std::move(r));
  }
  const std::vector<Resource>& rs = a.resources;
  for (size_t k = 0; k < a.expired.size(); ++k) {
    const Suppression& s = a.expired[k];
    Finding f;
    f.rule = &ExpiredSuppressionRule();
    f.resource = n_inputs + k;
    f.verdict = Verdict::Fail(
        fmt::format("suppression of {} on '{}' expired on {} (today is {}); the findings it "
                    "covered are reported again: renew it with a reviewed justification or "
                    "remove it",
                    s.rule, s.resource, s.expires, today),
        "expires");
    a.findings.push_back(std::move(f));
  }

  // By file, line, then rule id (and address, so equal lines stay stable).
  std::stable_sort(a.findings.begin(), a.findings.end(), [&](const Finding& x, const Finding& y) {
    const Resource& rx = rs[x.resource];
    const Resource& ry = rs[y.resource];
    return std::tie(rx.where.file, rx.where.line, x.rule->id, rx.address) <
           std::tie(ry.where.file, ry.where.line, y.rule->id, ry.address);
  });

  static constexpr Pillar kPillars[] = {Pillar::kReliability, Pillar::kSecurity,
                                        Pillar::kCostOptimization, Pillar::kOperationalExcellence,
                                        Pillar::kPerformanceEfficiency};
  for (Pillar p : kPillars) {
    PillarScore score;
    score.pillar = p;
    double weighted_pass = 0, weighted_all = 0;
    for (const Finding& f : a.findings) {
      if (f.rule->pillar != p) continue;
      const int w = SeverityWeight(f.rule->severity);
      switch (f.verdict.outcome) {
        case Outcome::kPass:
          ++score.passed;
          weighted_pass += w;
          weighted_all += w;
          break;
        case Outcome::kFail:
          if (f.suppressed) {
            ++score.suppressed;
            weighted_pass += w;
          } else {
            ++score.failed;
          }
          weighted_all += w;
          break;
        case Outcome::kUnknown:
          ++score.unknown;
          break;
        case Outcome::kNotApplicable:
          break;
      }
    }
    score.score = weighted_all > 0 ? 100.0 * weighted_pass / weighted_all : 100.0;
    a.scores.push_back(score);
  }
  return a;
}

}  // namespace gantry::assess
