// libFuzzer target for config.h: any input either loads or fails with an
// InvalidArgument; no exception escapes and every lookup on a loaded config is safe.
#include <cstdint>
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
  return 0;
}
