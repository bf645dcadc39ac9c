#include "gantry/core/units.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

namespace gantry {
namespace {

using u128 = unsigned __int128;

// A decimal number split off the front of a string: "1.5G" -> whole 1, frac "5",
// suffix "G". All arithmetic is done in 128 bits so that "digits * unit" cannot
// overflow before the range check.
struct Decimal {
  u128 whole = 0;
  std::string_view frac;
  std::string_view suffix;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Returns nullopt when `s` does not start with a digit (or ".digit"). Spaces
// between the number and the suffix are allowed, so "256 MiB" (as FormatSize
// prints it) parses back.
std::optional<Decimal> SplitDecimal(std::string_view s) {
  Decimal d;
  size_t i = 0;
  // Saturate far above any accepted value; later range checks reject it.
  constexpr u128 kSaturate = u128(1) << 80;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    if (d.whole < kSaturate) d.whole = d.whole * 10 + (s[i] - '0');
  }
  size_t int_digits = i;
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    d.frac = s.substr(start, i - start);
  }
  if (int_digits == 0 && d.frac.empty()) return std::nullopt;
  d.suffix = Trim(s.substr(i));
  return d;
}

// whole * unit + frac * unit, rounded to the nearest integer; nullopt above `limit`.
std::optional<uint64_t> Scale(const Decimal& d, uint64_t unit, uint64_t limit) {
  if (d.whole > limit) return std::nullopt;  // also keeps the product below 2^128
  u128 total = d.whole * unit;
  // 18 fractional digits are far below one unit of resolution; ignore the rest.
  std::string_view frac = d.frac.substr(0, 18);
  if (!frac.empty()) {
    u128 num = 0, den = 1;
    for (char c : frac) {
      num = num * 10 + (c - '0');
      den *= 10;
    }
    total += (num * unit + den / 2) / den;
  }
  if (total > limit) return std::nullopt;
  return static_cast<uint64_t>(total);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? a[i] - 'A' + 'a' : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// Byte multiplier for a size suffix ("", "b", "k", "kb", "kib", ...), or 0.
uint64_t SizeUnit(std::string_view suffix) {
  if (suffix.empty() || EqualsIgnoreCase(suffix, "b")) return 1;
  static constexpr std::string_view kPrefixes = "kmgtpe";
  char p = suffix[0] >= 'A' && suffix[0] <= 'Z' ? suffix[0] - 'A' + 'a' : suffix[0];
  size_t idx = kPrefixes.find(p);
  if (idx == std::string_view::npos) return 0;
  std::string_view rest = suffix.substr(1);
  if (!rest.empty() && !EqualsIgnoreCase(rest, "b") && !EqualsIgnoreCase(rest, "ib")) return 0;
  return uint64_t{1} << (10 * (idx + 1));
}

// 3 significant digits, trailing zeros dropped: 1.5, 12.3, 256, 1024.
std::string ThreeDigits(double v) {
  int decimals = v >= 100 ? 0 : v >= 10 ? 1 : 2;
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

Result<uint64_t> ParseSize(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return InvalidArgument(fmt::format("invalid size '{}': {}", text, why));
  };
  std::string_view s = Trim(text);
  if (s.empty()) return fail("empty; expected a byte count such as 64M or 1048576");
  if (s.front() == '-') return fail("sizes cannot be negative");
  if (s.front() == '+') s.remove_prefix(1);
  std::optional<Decimal> d = SplitDecimal(s);
  if (!d) return fail("expected a number with an optional suffix B, K, M, G, T (e.g. 64M)");
  uint64_t unit = SizeUnit(d->suffix);
  if (unit == 0) {
    return fail(
        fmt::format("unknown suffix '{}'; use B, K, M, G or T (KB and KiB also work)", d->suffix));
  }
  if (unit == 1 && !d->frac.empty()) return fail("a byte count must be a whole number");
  constexpr uint64_t kMax = uint64_t{1} << 63;
  std::optional<uint64_t> bytes = Scale(*d, unit, kMax);
  if (!bytes) return fail("larger than 2^63 bytes");
  return *bytes;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits = {"B",   "KiB", "MiB", "GiB",
                                                        "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  size_t u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u + 1 < kUnits.size()) {
    v /= 1024;
    ++u;
  }
  return ThreeDigits(v) + " " + kUnits[u];
}

Result<std::chrono::nanoseconds> ParseDuration(std::string_view text) {
  auto fail = [&](std::string_view why) {
    return InvalidArgument(fmt::format("invalid duration '{}': {}", text, why));
  };
  std::string_view s = Trim(text);
  if (s.empty()) return fail("empty; expected a duration such as 30s, 250ms or 2h");
  if (s.front() == '-') return fail("durations cannot be negative");
  if (s.front() == '+') s.remove_prefix(1);
  std::optional<Decimal> d = SplitDecimal(s);
  if (!d) return fail("expected a number with a unit ns, us, ms, s, m, h or d (e.g. 30s)");
  struct UnitDef {
    std::string_view name;
    uint64_t ns;
  };
  static constexpr std::array<UnitDef, 8> kUnits = {{{"", 1'000'000'000},
                                                     {"ns", 1},
                                                     {"us", 1'000},
                                                     {"ms", 1'000'000},
                                                     {"s", 1'000'000'000},
                                                     {"m", 60'000'000'000},
                                                     {"h", 3'600'000'000'000},
                                                     {"d", 86'400'000'000'000}}};
  uint64_t unit = 0;
  for (const UnitDef& u : kUnits) {
    if (EqualsIgnoreCase(d->suffix, u.name)) unit = u.ns;
  }
  if (unit == 0) {
    return fail(fmt::format("unknown unit '{}'; use ns, us, ms, s, m, h or d", d->suffix));
  }
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
  std::optional<uint64_t> ns = Scale(*d, unit, kMax);
  if (!ns) return fail("too long; the limit is about 292 years");
  return std::chrono::nanoseconds(static_cast<int64_t>(*ns));
}

std::string FormatDuration(std::chrono::nanoseconds d) {
  int64_t ns = d.count();
  if (ns < 0) {
    // -INT64_MIN overflows; one nanosecond of error is invisible at that scale.
    if (ns == std::numeric_limits<int64_t>::min()) ++ns;
    return std::string("-").append(FormatDuration(std::chrono::nanoseconds(-ns)));
  }
  if (ns < 1'000) return fmt::format("{} ns", ns);
  if (ns < 1'000'000) return ThreeDigits(ns / 1e3) + " us";
  if (ns < 1'000'000'000) return ThreeDigits(ns / 1e6) + " ms";
  if (ns < 60'000'000'000) return ThreeDigits(ns / 1e9) + " s";
  // A minute or more: whole components, zero components left out ("2m30s", "1h", "3d4h").
  // Round to the nearest second without adding first: ns may be near INT64_MAX.
  int64_t secs = ns / 1'000'000'000 + (ns % 1'000'000'000 >= 500'000'000 ? 1 : 0);
  std::string out;
  static constexpr std::array<std::pair<int64_t, char>, 4> kParts = {
      {{86'400, 'd'}, {3'600, 'h'}, {60, 'm'}, {1, 's'}}};
  for (auto [size, name] : kParts) {
    if (secs >= size) {
      out += fmt::format("{}{}", secs / size, name);
      secs %= size;
    }
  }
  return out;
}

Result<int64_t> ParseInt(std::string_view what, std::string_view text) {
  std::string_view s = text;
  if (s.size() > 1 && s.front() == '+' && IsDigit(s[1])) s.remove_prefix(1);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || end != s.data() + s.size() || ec == std::errc::invalid_argument) {
    return InvalidArgument(fmt::format("{}: '{}' is not an integer", what, text));
  }
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgument(
        fmt::format("{}: '{}' is out of range for a 64-bit signed integer", what, text));
  }
  return value;
}

}  // namespace gantry
