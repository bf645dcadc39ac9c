#include "gantry/core/checkpoint_interval.h"

#include <cmath>
#include <string>

namespace gantry {

Result<IntervalPlan> PlanInterval(double save_s, double mtbf_s, uint64_t state_bytes,
                                  double budget_fraction) {
  if (!(save_s > 0)) {
    return InvalidArgument("save time " + std::to_string(save_s) + " s must be positive");
  }
  if (!(mtbf_s > 0)) {
    return InvalidArgument("MTBF " + std::to_string(mtbf_s) + " s must be positive");
  }
  if (!(budget_fraction > 0 && budget_fraction <= 1)) {
    return InvalidArgument("bandwidth budget " + std::to_string(budget_fraction) +
                           " must be in (0, 1]");
  }
  IntervalPlan p;
  p.young_s = std::sqrt(2 * save_s * mtbf_s);
  if (save_s < 2 * mtbf_s) {
    double r = save_s / (2 * mtbf_s);
    p.daly_s = p.young_s * (1 + std::sqrt(r) / 3 + r / 9) - save_s;
  } else {
    p.daly_s = mtbf_s;
  }
  p.overhead_fraction = save_s / p.daly_s + p.daly_s / (2 * mtbf_s);
  if (state_bytes > 0) {
    p.needed_bytes_per_s = static_cast<double>(state_bytes) / (budget_fraction * p.daly_s);
  }
  return p;
}

}  // namespace gantry
