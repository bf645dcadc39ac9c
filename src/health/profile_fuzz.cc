// libFuzzer target for health profiles: a user's YAML loaded on its own
// (with `extends` resolved against the built-in profiles) and merged over a
// built-in profile, as `gantry health --profile F` and `--extend F` do. Every
// input must end in a Status, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gantry/health/profile.h"

using namespace gantry;
using namespace gantry::health;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const Profile* base = [] {
    Result<Profile> p = Profile::Builtin("nd96isr_h100_v5");
    return p.ok() ? new Profile(std::move(*p)) : nullptr;
  }();
  if (base == nullptr) __builtin_trap();  // the shipped profiles must load
  Result<Profile> p = Profile::LoadString(text, "fuzz.yaml");
  if (!p.ok()) return 0;
  // The merged text must load again: it is what the checks read.
  Result<Profile> again = Profile::LoadString(p->yaml(), "merged.yaml");
  if (!again.ok() || again->check_ids() != p->check_ids()) __builtin_trap();
  Result<Profile> merged = base->Extend(*p);
  if (merged.ok()) {
    for (const std::string& id : merged->check_ids()) (void)merged->config().Has("checks." + id);
  }
  return 0;
}
