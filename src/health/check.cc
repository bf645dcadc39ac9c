// Outcomes, results, the check registry and building checks from a profile.
#include "gantry/health/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string Suggest(const std::string& id, const std::map<std::string, CheckFactory>& known) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& [name, factory] : known) {
    size_t d = EditDistance(id, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  // More than a third of the name changed is a different word, not a typo.
  if (best.empty() || best_d > std::max<size_t>(2, id.size() / 3)) return "";
  return best;
}

std::string KnownList(const std::map<std::string, CheckFactory>& known) {
  std::string out;
  for (const auto& [name, factory] : known) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// Where `checks.<id>` is written: the last layer (the overlay) that names it,
// since that is the file the user edits; the merged text otherwise.
std::string LocateCheck(const Profile& profile, const std::string& id) {
  const std::string key = "checks." + id;
  const auto& layers = profile.layers();
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    if ((*it)->Has(key)) return (*it)->Locate(key);
  }
  return profile.config().Locate(key);
}

}  // namespace

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kWarn:
      return "warn";
    case Outcome::kFail:
      return "fail";
    case Outcome::kSkip:
      return "skip";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

Json CheckResult::ToJson() const {
  Json j;
  j["name"] = name;
  j["outcome"] = std::string(OutcomeName(outcome));
  j["message"] = message;
  j["measured"] = measured;
  j["threshold"] = threshold;
  j["fault_code"] = fault_code;
  j["seconds"] = seconds;
  return j;
}

Result<CheckResult> CheckResult::FromJson(const Json& j) {
  if (!j.is_object()) return InvalidArgument("check result: expected a JSON object");
  CheckResult r;
  auto str = [&](const char* key, std::string* out, bool required) -> Status {
    auto it = j.find(key);
    if (it == j.end()) {
      return required ? InvalidArgument(fmt::format("check result: missing key '{}'", key))
                      : Status();
    }
    if (!it->is_string()) {
      return InvalidArgument(fmt::format("check result: key '{}' must be a string", key));
    }
    *out = it->get<std::string>();
    return Status();
  };
  RETURN_IF_ERROR(str("name", &r.name, true));
  std::string outcome;
  RETURN_IF_ERROR(str("outcome", &outcome, true));
  bool found = false;
  for (Outcome o :
       {Outcome::kPass, Outcome::kWarn, Outcome::kFail, Outcome::kSkip, Outcome::kError}) {
    if (OutcomeName(o) == outcome) {
      r.outcome = o;
      found = true;
    }
  }
  if (!found) {
    return InvalidArgument(fmt::format(
        "check result: unknown outcome '{}' (expected pass, warn, fail, skip or error)", outcome));
  }
  RETURN_IF_ERROR(str("message", &r.message, false));
  RETURN_IF_ERROR(str("measured", &r.measured, false));
  RETURN_IF_ERROR(str("threshold", &r.threshold, false));
  RETURN_IF_ERROR(str("fault_code", &r.fault_code, false));
  if (auto it = j.find("seconds"); it != j.end()) {
    if (!it->is_number()) return InvalidArgument("check result: key 'seconds' must be a number");
    r.seconds = it->get<double>();
  }
  return r;
}

void Registry::Add(std::string id, CheckFactory factory) {
  if (factories_.count(id) != 0) {
    duplicates_.push_back(std::move(id));
    return;
  }
  factories_.emplace(std::move(id), std::move(factory));
}

const Registry& DefaultRegistry() {
  static const Registry* registry = [] {
    auto* r = new Registry;
    RegisterHostChecks(r);
    RegisterGpuChecks(r);
    return r;
  }();
  return *registry;
}

Result<std::vector<std::unique_ptr<Check>>> BuildChecks(const Profile& profile,
                                                        const Registry* registry) {
  const Registry& reg = registry != nullptr ? *registry : DefaultRegistry();
  if (!reg.duplicates().empty()) {
    std::string ids;
    for (const auto& d : reg.duplicates()) ids += (ids.empty() ? "" : ", ") + d;
    return Internal(fmt::format("check ids registered twice: {} (a bug in Gantry)", ids));
  }
  std::vector<std::unique_ptr<Check>> checks;
  for (const std::string& id : profile.check_ids()) {
    auto it = reg.factories().find(id);
    if (it == reg.factories().end()) {
      std::string hint = Suggest(id, reg.factories());
      return InvalidArgument(
          fmt::format("{}: unknown check '{}'{} (known checks: {})", LocateCheck(profile, id), id,
                      hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint),
                      KnownList(reg.factories())));
    }
    const std::string key = "checks." + id;
    Result<std::unique_ptr<Check>> check = it->second(profile.config(), key);
    if (!check.ok()) {
      // The merged text's line numbers are not the user's: if building from
      // the layer that wrote this check gives the same kind of error, report
      // that one, which names the real file and line.
      const auto& layers = profile.layers();
      for (auto l = layers.rbegin(); l != layers.rend(); ++l) {
        if (!(*l)->Has(key) || (*l)->IsScalar(key)) continue;
        Result<std::unique_ptr<Check>> again = it->second(**l, key);
        if (!again.ok() && again.status().code() == check.status().code()) {
          return again.status();
        }
        break;
      }
      return check.status();
    }
    if (*check == nullptr) return Internal(fmt::format("check '{}': factory returned null", id));
    if ((*check)->name() != id) {
      return Internal(
          fmt::format("check '{}': factory built a check named '{}'", id, (*check)->name()));
    }
    checks.push_back(std::move(*check));
  }
  return checks;
}

Outcome Overall(const std::vector<CheckResult>& results) {
  // Severity for the verdict: pass = skip < warn < error < fail.
  auto rank = [](Outcome o) {
    switch (o) {
      case Outcome::kPass:
      case Outcome::kSkip:
        return 0;
      case Outcome::kWarn:
        return 1;
      case Outcome::kError:
        return 2;
      case Outcome::kFail:
        return 3;
    }
    return 2;
  };
  Outcome worst = Outcome::kPass;
  for (const CheckResult& r : results) {
    if (rank(r.outcome) > rank(worst)) worst = r.outcome;
  }
  return worst;
}

}  // namespace gantry::health
