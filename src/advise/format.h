// Number formats shared by the advice, its explanations and its tables.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace gantry::advise::internal {

inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// "12.3" (GiB, one decimal, no unit).
inline std::string GibNumber(double bytes) { return fmt::format("{:.1f}", bytes / kGiB); }

// "45 min", "12.5 h", "2.8 d" (days from 48 h on).
inline std::string FormatHours(double h) {
  if (h >= 48) return fmt::format("{:.1f} d", h / 24);
  if (h >= 1) return fmt::format("{:.1f} h", h);
  return fmt::format("{:.0f} min", std::max(1.0, h * 60));
}

}  // namespace gantry::advise::internal
