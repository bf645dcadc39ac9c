// Small text helpers more than one module's reports need.
#pragma once

#include <bit>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "gantry/core/status.h"

namespace gantry {

// Escapes `s` for XML 1.0 or HTML text and attribute values: & < > " ' as
// entities; control characters other than tab and newline (not allowed in
// XML) become '?'; in attributes (`attribute` true) tab and newline become
// character references, which parsers would otherwise turn into spaces.
std::string EscapeMarkup(std::string_view s, bool attribute = true);

// `s` without leading and trailing whitespace (isspace: space, \t, \n, \v,
// \f, \r).
std::string_view TrimSpace(std::string_view s);

// `parts` with `separator` between them: Join({"a", "b"}, ", ") is "a, b".
std::string Join(const std::vector<std::string>& parts, std::string_view separator);

// ASCII lower case of `s` (other bytes, UTF-8 included, are kept).
std::string AsciiLower(std::string_view s);
// ASCII upper case of `s` (other bytes, UTF-8 included, are kept).
std::string AsciiUpper(std::string_view s);
// "1 failure", "3 failures".
std::string Plural(int64_t n, std::string_view one, std::string_view many);
// Decimal digits of `n` in groups of three: 143547 -> "143,547", -1234 -> "-1,234".
std::string GroupThousands(int64_t n);
// True when `a` and `b` are equal ignoring ASCII case.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// Parses all of `s` (leading and trailing whitespace ignored) as a decimal
// number of type T: an optional sign, digits and, for floating-point T, a
// fraction and an exponent ("-2.5e3"). No hexadecimal, no thousands
// separators; floating-point values must be finite ("inf" and "nan" fail).
// Returns false and leaves *out unspecified when `s` is not such a number or
// does not fit in T.
template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  s = TrimSpace(s);
  // from_chars takes '-' but not '+'; "+-1" stays an error.
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  if constexpr (std::is_floating_point_v<T>) return std::isfinite(*out);
  return true;
}

// Optimal string alignment distance: Levenshtein (insertions, deletions,
// substitutions) plus transpositions of adjacent characters, so the common
// typo "rnaks" is one edit from "ranks". For did-you-mean suggestions.
size_t EditDistance(std::string_view a, std::string_view b);
// The first of `candidates` with the smallest EditDistance to `word`, when
// that distance is at most `max_distance`; nullopt otherwise (or when
// `candidates` is empty).
std::optional<std::string> ClosestMatch(std::string_view word,
                                        const std::vector<std::string>& candidates,
                                        size_t max_distance);

// Standard base64 (RFC 4648 section 4, '+' '/', with '=' padding).
std::string Base64Encode(std::string_view bytes);
// Decodes standard or URL-safe base64 ('-' '_'), padding optional. Strict:
// InvalidArgument for another character, an impossible length or non-zero
// trailing bits (so that every byte string has exactly one encoding).
Result<std::string> Base64Decode(std::string_view text);

// How many of the 8 bytes at `p` (0-8), from the first, are plain characters
// inside a JSON string: printable ASCII other than '"' and '\\' (no control
// byte, no UTF-8 lead or continuation byte). JSON scanners skip such runs a
// word at a time and handle the byte after them one by one.
inline size_t JsonPlainPrefix8(const char* p) {
  constexpr uint64_t k01 = 0x0101010101010101ULL, k80 = 0x8080808080808080ULL;
  uint64_t v;
  std::memcpy(&v, p, 8);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  // Each term flags (in bit 7 of a byte) the bytes of one kind; a borrow can
  // only flag bytes above a truly flagged one, so the lowest flag is exact.
  auto zero = [](uint64_t x) { return (x - k01) & ~x & k80; };
  const uint64_t bad = (v & k80)                        // >= 0x80
                       | ((v - 0x20 * k01) & ~v & k80)  // < 0x20
                       | zero(v ^ (0x22 * k01))         // '"'
                       | zero(v ^ (0x5C * k01));        // '\\'
  return bad == 0 ? 8 : static_cast<size_t>(std::countr_zero(bad)) / 8;
}

// strftime(`format`) of `t` in UTC, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string FormatUtc(std::chrono::system_clock::time_point t, const char* format);

// Parses an RFC 1123 (HTTP) date in GMT ("Mon, 19 Sep 2016 18:29:47 GMT"; the
// weekday is optional and not checked against the date; "UTC", "+0000" and
// "Z" are accepted for GMT). InvalidArgument quoting the text otherwise, also
// for dates before 1970 or past what system_clock can hold (2262).
Result<std::chrono::system_clock::time_point> ParseRfc1123Date(std::string_view text);

}  // namespace gantry
