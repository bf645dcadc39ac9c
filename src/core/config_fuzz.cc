// libFuzzer target for config.h: any input either loads or fails with an
// InvalidArgument; no exception escapes and every lookup, view, overlay and
// ToYaml on a loaded config is safe.
#include <cstdint>
#include <map>
#include <string>

#include "gantry/core/config.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Calls every getter on every key reachable through Keys(), within a small budget.
void Walk(const gantry::Config& config, const std::string& prefix, int depth, int* budget) {
  using namespace std::chrono_literals;
  if (depth > 8 || --*budget < 0) return;
  gantry::Result<std::vector<std::string>> keys = config.Keys(prefix);
  if (!keys.ok()) return;
  for (const std::string& name : *keys) {
    std::string key = prefix.empty() ? name : prefix + "." + name;
    (void)config.Has(key);
    (void)config.GetString(key, "");
    (void)config.GetInt(key, 0);
    (void)config.GetDouble(key, 0);
    (void)config.GetBool(key, false);
    (void)config.GetSize(key, 0);
    (void)config.GetDuration(key, 0s);
    (void)config.GetStringList(key);
    (void)config.CheckKnownKeys(key, {"ranks", "max_bytes", "timeout"});
    (void)config.Locate(key);
    gantry::Result<gantry::Config> sub = config.Sub(key);
    if (sub.ok()) (void)sub->GetInt("", 0);
    gantry::Result<std::vector<gantry::Config>> items = config.Items(key);
    if (items.ok() && !items->empty()) (void)items->front().Keys("");
    Walk(config, key, depth + 1, budget);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gantry::Result<gantry::Config> config = gantry::Config::LoadString(text, "fuzz.yaml");
  if (!config.ok()) {
    Check(config.status().code() == gantry::StatusCode::kInvalidArgument);
    return 0;
  }
  (void)config->CheckKnownKeys("", {"bench", "doctor"});
  int budget = 200;
  Walk(*config, "", 0, &budget);

  // Overlays: the config over itself, and a flag-like override of each top-level key.
  gantry::Config merged = config->Merge(*config);
  budget = 100;
  Walk(merged, "", 0, &budget);
  std::map<std::string, std::string> overrides;
  if (auto keys = config->Keys(""); keys.ok()) {
    for (const std::string& k : *keys) overrides[k + ".x"] = k;
  }
  gantry::Result<gantry::Config> over = config->WithOverrides(overrides, "--set");
  Check(over.ok() || over.status().code() == gantry::StatusCode::kInvalidArgument);
  // What ToYaml writes is YAML that loads (or is refused with a Status).
  gantry::Result<gantry::Config> again = gantry::Config::LoadString(config->ToYaml(), "again");
  Check(again.ok() || again.status().code() == gantry::StatusCode::kInvalidArgument);
  return 0;
}
