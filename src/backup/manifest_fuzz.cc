// libFuzzer target for the backup formats read back from a repository (which
// may be damaged or written by someone else): manifests (backups/*.json) and
// the repository config (config.json), plus the path rule restore relies on.
// Every input parses or fails with the documented code; what parses
// round-trips through ToJson; nothing crashes.
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/backup/backup.h"
#include "gantry/backup/repository.h"
#include "gantry/core/json.h"

namespace {

using gantry::StatusCode;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);

  gantry::Status path = gantry::backup::CheckSafePath(text);
  if (!path.ok()) Check(path.code() == StatusCode::kInvalidArgument);

  auto json = gantry::ParseJson(text, "fuzz.json");
  if (!json.ok()) return 0;

  auto manifest = gantry::backup::Manifest::FromJson(*json, "backups/fuzz.json");
  if (manifest.ok()) {
    for (const gantry::backup::Entry& e : manifest->entries) {
      Check(gantry::backup::CheckSafePath(e.path).ok());
    }
    auto again = gantry::backup::Manifest::FromJson(manifest->ToJson(), "round trip");
    Check(again.ok());
    Check(again->entries.size() == manifest->entries.size());
  } else {
    // DataLoss for damage; InvalidArgument for a format version this gantry does not read.
    Check(manifest.status().code() == StatusCode::kDataLoss ||
          manifest.status().code() == StatusCode::kInvalidArgument);
  }

  auto config = gantry::backup::RepoConfig::FromJson(*json, "config.json");
  if (config.ok()) {
    auto again = gantry::backup::RepoConfig::FromJson(config->ToJson(), "round trip");
    Check(again.ok());
  } else {
    Check(config.status().code() == StatusCode::kInvalidArgument);
  }
  return 0;
}
