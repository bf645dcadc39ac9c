// JSON for machine output (`--json`, reports) on nlohmann::json, plus file
// helpers that never leave a half-written file behind.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "gantry/core/status.h"

namespace gantry {

using Json = nlohmann::ordered_json;  // keeps keys in insertion order for stable output

// Parses text; errors name `origin` (a file name or "stdin") and the byte offset.
Result<Json> ParseJson(std::string_view text, std::string_view origin);
Result<Json> ReadJsonFile(const std::string& path);

// Writes `text` to `path` atomically: a temporary file in the same directory,
// fsync, rename, fsync of the directory. An existing file is replaced.
Status WriteFileAtomic(const std::string& path, std::string_view text);
// Reads a whole file; NotFound / IoError name the path.
Result<std::string> ReadFile(const std::string& path);

}  // namespace gantry
