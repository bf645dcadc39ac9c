// Parsing and printing of sizes and durations, shared by every module so that
// "64M" or "30s" means the same thing on every flag and in every config file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

// Parses a byte size. Suffixes are binary, as in nccl-tests: K = 1024, M = 1024^2,
// G = 1024^3, T = 1024^4 (P and E also work); case-insensitive, optional trailing
// "B" or "iB" ("64M", "64MB", "64MiB", "1g", "8"), optionally after a space so
// FormatSize output parses back. No suffix means bytes. Fractions are allowed with
// a suffix ("1.5G") and round to the nearest byte. Rejects empty strings, negative
// values, junk after the number and values above 2^63 with a message that quotes
// the input.
Result<uint64_t> ParseSize(std::string_view text);

// Formats a byte count with a binary suffix and 3 significant digits (trailing
// zeros dropped): 1536 -> "1.5 KiB", 8 -> "8 B", 268435456 -> "256 MiB".
std::string FormatSize(uint64_t bytes);

// Parses a duration: a number with unit ns, us, ms, s, m, h or d ("30s", "1.5m",
// "250ms", "2h"; case-insensitive). A bare number is seconds. Rejects negatives,
// junk and values that do not fit in int64 nanoseconds (about 292 years).
Result<std::chrono::nanoseconds> ParseDuration(std::string_view text);

// Formats a duration in its largest sensible unit with 3 significant digits:
// "1.25 s", "830 us", "12 ns"; a minute or more as whole components with zeros
// left out: "2m30s", "1h", "3d4h".
std::string FormatDuration(std::chrono::nanoseconds d);

// Parses a non-negative or signed integer from a flag or config value, naming
// `what` in the error: ParseInt("-n", "abc") -> "-n: 'abc' is not an integer".
Result<int64_t> ParseInt(std::string_view what, std::string_view text);

}  // namespace gantry
