#include "testing/promtool.h"

#include <gtest/gtest.h>

#include "gantry/core/subprocess.h"

namespace gantry::testing {

std::string PromtoolPath() {
  std::string p = FindExecutable("promtool");  // $PATH, then where Debian puts it
  return p.empty() ? FindExecutable("/usr/bin/promtool") : p;
}

CliRun PromtoolCheckMetrics(std::string_view text) {
  std::string promtool = PromtoolPath();
  if (promtool.empty()) {
    ADD_FAILURE() << "promtool not found: run scripts/install-deps.sh (Debian package prometheus)";
    return CliRun{};
  }
  return RunWithInput({promtool, "check", "metrics"}, text);
}

}  // namespace gantry::testing
