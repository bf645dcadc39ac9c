// libFuzzer target for the `scontrol show node` reader (slurm.h), whose input
// is another program's output, and for the drain reason gantry writes back.
// Every input either parses or fails with InvalidArgument; a parsed node has
// a name and a state, and `drained` agrees with SlurmStateIsDrained. The
// reason gantry sets (SlurmDrainReason of a report whose failed check carries
// the input as its message) reads back unchanged from the line scontrol would
// print with it, so that the next run sees its own drain (DecideSlurmAction)
// and does not rewrite it.
#include <cstdint>
#include <string>
#include <string_view>

#include "gantry/health/check.h"
#include "gantry/health/slurm.h"

namespace {

namespace h = gantry::health;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gantry::Result<h::SlurmNodeState> st = h::ParseScontrolShowNode(text);
  if (st.ok()) {
    Check(!st->state.empty());
    Check(st->drained == h::SlurmStateIsDrained(st->state));
    Check(st->reason != "(null)");
    for (h::Outcome o :
         {h::Outcome::kPass, h::Outcome::kWarn, h::Outcome::kFail, h::Outcome::kError}) {
      h::SlurmAction a = h::DecideSlurmAction(o, st->drained, st->reason);
      // Only a drained node is resumed or kept drained.
      if (!st->drained) Check(a == h::SlurmAction::kNone || a == h::SlurmAction::kDrain);
    }
  } else {
    Check(st.status().code() == gantry::StatusCode::kInvalidArgument);
  }

  h::HealthReport report;
  h::CheckResult fail;
  size_t split = text.find('\n');
  fail.name = std::string(text.substr(0, split == std::string_view::npos ? 0 : split));
  fail.outcome = h::Outcome::kFail;
  fail.message = std::string(split == std::string_view::npos ? text : text.substr(split + 1));
  report.results.push_back(fail);
  size_t max_len = 20 + size % 200;
  std::string reason = h::SlurmDrainReason(report, max_len);
  Check(reason.size() <= max_len);
  Check(reason.find_first_of("\"'`\n\t\r") == std::string::npos);
  gantry::Result<h::SlurmNodeState> back = h::ParseScontrolShowNode(
      "NodeName=gpu-001 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=" + reason +
      " [root@2026-01-02T03:04:05]\n");
  Check(back.ok() && back->drained && back->name == "gpu-001");
  Check(back->reason == reason);
  // A clean run of the next health check resumes the node gantry drained.
  Check(h::DecideSlurmAction(h::Outcome::kPass, true, back->reason) == h::SlurmAction::kResume);
  return 0;
}
