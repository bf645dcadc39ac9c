// `gantry health --slurm`: drain a node whose health check failed and return
// it to service after a later clean pass, the way LBNL NHC does when it runs
// as Slurm's HealthCheckProgram.
//
// Rules (NHC's node-mark-offline/online semantics; mej/nhc #134):
//   - a failed run drains the node with Reason="gantry: <check>: <message>";
//   - a clean run (pass or warn) resumes the node only when it is drained AND
//     its reason starts with "gantry:": a drain set by anybody else (an admin,
//     Slurm itself, another tool) is never undone, and never overwritten;
//   - a run whose worst outcome is an error (a check could not run: a setup
//     problem, not a hardware fault) changes nothing.
//
//   ASSIGN_OR_RETURN(SlurmOutcome o, ApplySlurmVerdict(report, SlurmOptions{}));
//   std::cerr << o.message << "\n";
//
// scontrol runs through RunSubprocess (gantry/core/subprocess.h): no shell
// (arguments are argv), stdin from /dev/null, stdout and stderr captured,
// killed after 10 s. It talks to the cluster named by the usual environment
// ($SLURM_CONF).
#pragma once

#include <string>
#include <string_view>

#include "gantry/core/status.h"
#include "gantry/health/check.h"

namespace gantry::health {

struct SlurmOptions {
  // The Slurm node name; "" = $SLURMD_NODENAME (set by slurmd for its
  // HealthCheckProgram), else the short hostname (up to the first '.').
  std::string node;
  // The scontrol program: a path, or a name searched in $PATH.
  std::string scontrol = "scontrol";
  // Read the node's state and decide, but run no update and print nothing.
  bool dry_run = false;
};

// kNone: the node is not drained and stays so (nothing run).
// kDrain: `scontrol update NodeName=<n> State=DRAIN Reason="gantry: ..."`; also
//   used to refresh the reason of a node already drained by gantry when the
//   first failure changed (ApplySlurmVerdict skips the update when the reason
//   is already the same).
// kResume: `scontrol update NodeName=<n> State=RESUME`.
// kKeepDrained: the node is drained and stays so, reason untouched (nothing
//   run): an admin's drain, or a gantry drain after a run that only errored.
enum class SlurmAction { kNone, kDrain, kResume, kKeepDrained };
std::string_view SlurmActionName(SlurmAction a);  // "none", "drain", "resume", "keep-drained"

struct SlurmOutcome {
  SlurmAction action = SlurmAction::kNone;
  std::string node;
  // kDrain: the reason set (or that would be set in a dry run); kResume: the
  // gantry reason cleared; kKeepDrained/kNone: the node's current reason
  // ("" when it has none).
  std::string reason;
  // One line for people: "drained node vm: gantry: filesystems: ..."; in a
  // dry run it starts with "dry run: would ...".
  std::string message;
};

// The prefix of every reason gantry sets, and the only reasons it clears.
inline constexpr std::string_view kSlurmReasonPrefix = "gantry:";

// The pure decision. `current_reason` is the node's Reason without Slurm's
// " [user@time]" suffix ("" for none).
//   overall fail:       not drained -> kDrain; drained with a "gantry:" reason
//                       -> kDrain (refresh the reason); drained otherwise ->
//                       kKeepDrained (an admin's reason is never overwritten).
//   overall pass/warn/skip: drained with a "gantry:" reason -> kResume;
//                       drained otherwise -> kKeepDrained; else kNone.
//   overall error:      drained -> kKeepDrained; else kNone.
SlurmAction DecideSlurmAction(Outcome overall, bool node_drained, std::string_view current_reason);

// Reads the node's state and reason with `scontrol show node -o <node>`,
// decides, and runs the update (unless dry_run). Errors: Unavailable when
// scontrol cannot be started, times out or fails (with its stderr); NotFound
// when Slurm does not know the node; InvalidArgument for an unusable node
// name.
Result<SlurmOutcome> ApplySlurmVerdict(const HealthReport& report, const SlurmOptions& options);

// ---- Building blocks, exposed for tests ----

// One node from `scontrol show node -o <node>` (one line of Key=Value
// fields; Reason= runs to the end of the line and carries a " [user@time]"
// suffix, which is stripped).
struct SlurmNodeState {
  std::string name;      // NodeName=
  std::string state;     // State=, e.g. "IDLE+DRAIN", "MIXED+DRAIN", "DOWN+DRAIN+NOT_RESPONDING"
  bool drained = false;  // a DRAIN, DRAINED or DRAINING flag in State
  std::string reason;    // Reason= without the suffix; "" when absent
};
// InvalidArgument when there is no NodeName= or State= field.
Result<SlurmNodeState> ParseScontrolShowNode(std::string_view text);

// True when a '+'-separated token of `state` is DRAIN, DRAINED or DRAINING
// (case-insensitive).
bool SlurmStateIsDrained(std::string_view state);

// "gantry: <check>: <message>" for the first failed result: newlines and
// tabs become spaces, quotes are removed, runs of spaces collapse, and the
// whole is cut to at most `max_len` bytes (on a UTF-8 boundary, ending in
// "...").
std::string SlurmDrainReason(const HealthReport& report, size_t max_len = 160);

}  // namespace gantry::health
