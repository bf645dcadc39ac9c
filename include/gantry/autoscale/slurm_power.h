// Slurm power saving programs: what slurm.conf's ResumeProgram,
// SuspendProgram and ResumeFailProgram run (../shared/reference/jobs-autoscale.md,
// B8). Slurm calls them as SlurmUser on the slurmctld host with one argument,
// a hostlist expression ("gpu-[1-3,7]"), does not log their output, may call
// them twice after a slurmctld crash, and marks a node DOWN when it has not
// registered within ResumeTimeout.
//
//   ResumeProgram=/usr/local/sbin/gantry-slurm-resume     # exec gantry autoscale slurm-resume "$1"
//   SuspendProgram=/usr/local/sbin/gantry-slurm-suspend   # exec gantry autoscale slurm-suspend
//   "$1" ResumeFailProgram=/usr/local/sbin/gantry-slurm-resume-fail
//
// (Slurm passes the hostlist as the only argument; the verbs read
// $GANTRY_AUTOSCALE_CONFIG, else /etc/gantry/autoscale.yaml.)
//
// With `slurm.vmss`, a node name is the computer name of a VMSS instance:
// resume scales the set out by the nodes that have no running instance (ARM
// names new instances itself, so the computer-name prefix must match
// `nodes`); suspend deletes the instances of the named nodes (targeted delete);
// resume-fail deletes them too, so the next resume starts clean. With
// commands, each is run with the hostlist (or once per node). Both are
// idempotent: a node already up (resume) or already gone (suspend) is skipped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gantry/autoscale/config.h"
#include "gantry/core/status.h"

namespace gantry::autoscale {

// Expands a Slurm hostlist expression: "gpu-[1-3,7],cpu01" ->
// {gpu-1, gpu-2, gpu-3, gpu-7, cpu01}; zero padding kept ("n[01-03]").
// InvalidArgument naming the expression and the position on a bad one.
Result<std::vector<std::string>> ExpandHostlist(std::string_view expr);
// The inverse, compressed ("gpu-[1-3,7],cpu01").
std::string CompressHostlist(const std::vector<std::string>& hosts);

enum class PowerAction { kResume, kSuspend, kResumeFail };

struct PowerResult {
  std::vector<std::string> acted;    // nodes started / stopped
  std::vector<std::string> skipped;  // already in the wanted state
};

// Runs one program invocation for `hostlist`. FailedPrecondition naming the
// node when it is not in `slurm.nodes`. Appends what it did to
// slurm.log_file (Slurm keeps no output).
Result<PowerResult> RunPowerAction(const SlurmPowerConfig& config, PowerAction action,
                                   std::string_view hostlist, const Clock& clock);

}  // namespace gantry::autoscale
