// Test support: Prometheus's own checker on what Gantry renders, so exposition
// text and rule files are proven valid by the anchor tool, not by our reading
// of its format.
#pragma once

#include <string>
#include <string_view>

#include "testing/gantry_cli.h"

namespace gantry::testing {

// The promtool binary (package prometheus, scripts/install-deps.sh), or "".
std::string PromtoolPath();

// `promtool check metrics` with `text` on stdin. rc 0 when promtool accepts it;
// a test failure naming the package when promtool is missing.
CliRun PromtoolCheckMetrics(std::string_view text);

}  // namespace gantry::testing
