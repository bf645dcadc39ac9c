// Checkpoint interval planning: Young's first-order and Daly's higher-order
// optimum interval, from the measured save time and the mean time between
// failures (or preemptions). Pure arithmetic, thread-safe; used by
// `gantry ckpt plan` and by `gantry advise` (spot overhead), which is why it
// lives in core and not in src/ckpt.
#pragma once

#include <cstdint>

#include "gantry/core/status.h"

namespace gantry {

struct IntervalPlan {
  double young_s = 0;  // sqrt(2 * C * M)
  double daly_s = 0;   // Daly 2006; equals M when C >= 2M
  // Expected fraction of wall time lost to checkpoints plus rework at the
  // Daly interval (first-order: C/tau + tau/(2M)).
  double overhead_fraction = 0;
  // Write bandwidth needed to save `state_bytes` within `budget_fraction` of
  // the Daly interval (0 when state_bytes is 0).
  double needed_bytes_per_s = 0;
};

// save_s (C) and mtbf_s (M) must be positive; budget_fraction in (0, 1].
// InvalidArgument names the bad value.
Result<IntervalPlan> PlanInterval(double save_s, double mtbf_s, uint64_t state_bytes = 0,
                                  double budget_fraction = 0.1);

}  // namespace gantry
