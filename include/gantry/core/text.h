// Small text helpers more than one module's reports need.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace gantry {

// Escapes `s` for XML 1.0 or HTML text and attribute values: & < > " ' as
// entities; control characters other than tab and newline (not allowed in
// XML) become '?'; in attributes (`attribute` true) tab and newline become
// character references, which parsers would otherwise turn into spaces.
std::string EscapeMarkup(std::string_view s, bool attribute = true);

// `s` without leading and trailing whitespace (isspace: space, \t, \n, \v,
// \f, \r).
std::string_view TrimSpace(std::string_view s);

// strftime(`format`) of `t` in UTC, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string FormatUtc(std::chrono::system_clock::time_point t, const char* format);

}  // namespace gantry
