// Internal: the engine's test and binning names (stats.h) as optionals, for
// readers that report their own located errors (schema, profile files).
#pragma once

#include <optional>
#include <string_view>

#include "gantry/drift/stats.h"

namespace gantry::drift::internal {

inline std::optional<StatTest> TestFromName(std::string_view s) {
  Result<StatTest> t = ParseStatTest(s);
  return t.ok() ? std::optional<StatTest>(*t) : std::nullopt;
}

inline std::optional<Binning> BinningFromName(std::string_view s) {
  Result<Binning> b = ParseBinning(s);
  return b.ok() ? std::optional<Binning>(*b) : std::nullopt;
}

}  // namespace gantry::drift::internal
