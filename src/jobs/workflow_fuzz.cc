// libFuzzer target for workflow files (with their sweep and requires blocks)
// and for trial metric lines: every input must end in a Status, never a
// crash, a hang or undefined behaviour. A workflow that parses must also give
// a plan of trials for each sweep (or a Status).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gantry/jobs/sweep.h"
#include "gantry/jobs/workflow.h"

using namespace gantry;
using namespace gantry::jobs;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseMetricLine(text);
  Result<Workflow> wf = ParseWorkflow(text, "/fuzz/workflow.yaml");
  if (!wf.ok()) return 0;
  for (const auto& [name, step] : wf->steps) {
    if (!step.sweep) continue;
    SweepSpec spec = *step.sweep;
    spec.max_total_trials = std::min(spec.max_total_trials, 50);  // keeps each run short
    (void)PlanTrials(spec);
  }
  (void)Dependents(*wf, wf->order.empty() ? "" : wf->order.front());
  return 0;
}
