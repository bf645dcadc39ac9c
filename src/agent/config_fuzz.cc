// libFuzzer target for the agent's configuration parsers (agent.yaml is user
// input): the alert-rules document, a selector, and the notify:/idle: sections
// of a Config. Every input either parses or fails with InvalidArgument; no
// exception escapes, nothing crashes. Parsing never sends, runs or reads anything.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/agent/idle.h"
#include "gantry/alerting/notify.h"
#include "gantry/agent/rules.h"
#include "gantry/core/config.h"

namespace {

using gantry::StatusCode;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void CheckInvalidArgument(const gantry::Status& s) {
  Check(s.ok() || s.code() == StatusCode::kInvalidArgument);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  auto rules = gantry::agent::ParseRules(text, "rules.yaml");
  CheckInvalidArgument(rules.status());
  if (rules.ok()) {
    for (const gantry::agent::Rule& r : *rules) Check(!r.name.empty());
  }
  CheckInvalidArgument(gantry::agent::ParseRulesAt(text, "agent.yaml", "alerts.rules").status());

  std::string name;
  std::vector<gantry::agent::LabelMatcher> matchers;
  CheckInvalidArgument(gantry::agent::ParseSelector(text, &name, &matchers));

  auto config = gantry::Config::LoadString(text, "agent.yaml");
  if (config.ok()) {
    CheckInvalidArgument(gantry::alerting::ParseNotifyConfig(*config, "notify").status());
    CheckInvalidArgument(gantry::agent::ParseIdleConfig(*config, "idle").status());
  }
  return 0;
}
