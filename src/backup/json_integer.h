// Integer fields of the backup formats' JSON (manifests, repository config),
// shared by manifest.cc and repository.cc. Private to src/backup.
#pragma once

#include <string>

#include "gantry/core/json.h"

namespace gantry::backup::internal {

// nlohmann's get<integer>() converts a JSON float with a plain cast, which is
// undefined behaviour when the value is out of range (fuzz_backup_manifest:
// "max_bytes": 1e26). Integer fields must be JSON integers; anything else is
// the type_error the parsers already report as a mistyped field.
template <typename T>
T Integer(const Json& v) {
  if (!v.is_number_integer()) {
    throw Json::type_error::create(
        302, "type must be an integer, but is " + std::string(v.type_name()), &v);
  }
  return v.get<T>();
}

}  // namespace gantry::backup::internal
