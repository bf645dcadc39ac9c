// The seam of slurm_power.cc for its tests: RunPowerAction with the VMSS
// actuator given instead of made by NewVmssActuator.
#pragma once

#include <string_view>

#include "gantry/autoscale/actuator.h"
#include "gantry/autoscale/slurm_power.h"

namespace gantry::autoscale::internal {

// As RunPowerAction; with `config.use_vmss`, `vmss` (not null) is the scale
// set instead of NewVmssActuator(config.vmss).
Result<PowerResult> RunPowerActionWith(const SlurmPowerConfig& config, PowerAction action,
                                       std::string_view hostlist, const Clock& clock,
                                       Actuator* vmss);

}  // namespace gantry::autoscale::internal
