// Outcomes, results, the check registry and building checks from a profile.
#include "gantry/health/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "gantry/core/text.h"
#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

std::vector<std::string> Names(const std::map<std::string, CheckFactory>& known) {
  std::vector<std::string> names;
  for (const auto& [name, factory] : known) names.push_back(name);
  return names;
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
    return Internal(fmt::format("check ids registered twice: {} (a bug in Gantry)",
                                Join(reg.duplicates(), ", ")));
  }
  std::vector<std::unique_ptr<Check>> checks;
  for (const std::string& id : profile.check_ids()) {
    const std::string key = "checks." + id;
    auto it = reg.factories().find(id);
    if (it == reg.factories().end()) {
      const std::vector<std::string> known = Names(reg.factories());
      // More than a third of the name changed is a different word, not a typo.
      std::optional<std::string> hint = ClosestMatch(id, known, std::max<size_t>(2, id.size() / 3));
      return InvalidArgument(fmt::format(
          "{}: unknown check '{}'{} (known checks: {})", profile.config().Locate(key), id,
          hint ? fmt::format("; did you mean '{}'?", *hint) : "", Join(known, ", ")));
    }
    // The merged config's values keep the file and line they were written
    // at, so the factory's messages name the user's file where it set them.
    Result<std::unique_ptr<Check>> check = it->second(profile.config(), key);
    if (!check.ok()) return check.status();
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
