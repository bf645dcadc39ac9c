// Logging for every module, on spdlog. Logs go to stderr so that stdout stays
// clean for tables and `--json` output.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "gantry/core/status.h"

namespace gantry::log {

// Sets the global level from "trace", "debug", "info", "warn", "error", "off".
// Unknown names are an InvalidArgument that lists the valid ones.
Status SetLevel(std::string_view level);

// Installs the stderr sink with Gantry's pattern ("[gantry] [warn] message" ,
// plus the rank when set). Idempotent.
void Init();
// Prefixes later messages with "[rank N]" (forked ranks call it); a negative
// rank removes the prefix. Calls Init() if needed, as does SetLevel().
void SetRank(int rank);

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;

}  // namespace gantry::log
