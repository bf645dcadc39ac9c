// Small text helpers more than one module's reports need.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

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

// Standard base64 (RFC 4648 section 4, '+' '/', with '=' padding).
std::string Base64Encode(std::string_view bytes);
// Decodes standard or URL-safe base64 ('-' '_'), padding optional. Strict:
// InvalidArgument for another character, an impossible length or non-zero
// trailing bits (so that every byte string has exactly one encoding).
Result<std::string> Base64Decode(std::string_view text);

// strftime(`format`) of `t` in UTC, e.g. "%Y-%m-%dT%H:%M:%SZ".
std::string FormatUtc(std::chrono::system_clock::time_point t, const char* format);

// Parses an RFC 1123 (HTTP) date in GMT ("Mon, 19 Sep 2016 18:29:47 GMT"; the
// weekday is optional and not checked against the date; "UTC", "+0000" and
// "Z" are accepted for GMT). InvalidArgument quoting the text otherwise, also
// for dates before 1970 or past what system_clock can hold (2262).
Result<std::chrono::system_clock::time_point> ParseRfc1123Date(std::string_view text);

}  // namespace gantry
