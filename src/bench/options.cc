#include <strings.h>

#include <string>

#include "gantry/bench/collectives.h"

namespace gantry::bench {
namespace {

Status NonNegative(const char* flag, int value) {
  if (value >= 0) return Status::Ok();
  return InvalidArgument(std::string(flag) + " " + std::to_string(value) + ": must be >= 0");
}

bool EndsWithJson(const std::string& path) {
  constexpr std::string_view kSuffix = ".json";
  return path.size() > kSuffix.size() &&
         strcasecmp(path.c_str() + path.size() - kSuffix.size(), kSuffix.data()) == 0;
}

}  // namespace

Status ValidateOptions(const BenchOptions& o, Collective collective, int nranks) {
  if (o.min_bytes == 0) return InvalidArgument("-b 0: sizes start at 1 byte; pass -b >= 1");
  if (o.max_bytes == 0) return InvalidArgument("-e 0: sizes start at 1 byte; pass -e >= 1");
  if (o.min_bytes > o.max_bytes) {
    return InvalidArgument("-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                           std::to_string(o.max_bytes) + "; pass -b <= -e");
  }
  if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes) {
    return InvalidArgument(
        "-i 0: the sweep from -b to -e would never advance; pass -i > 0 or -f > 1");
  }
  if (o.iters < 1) {
    return InvalidArgument("-n " + std::to_string(o.iters) + ": need at least 1 timed iteration");
  }
  RETURN_IF_ERROR(NonNegative("-w", o.warmup_iters));
  RETURN_IF_ERROR(NonNegative("-c", o.check_iters));
  RETURN_IF_ERROR(NonNegative("-N", o.run_cycles));
  if (o.average < 0 || o.average > 3) {
    return InvalidArgument("-a " + std::to_string(o.average) +
                           ": pass 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)");
  }
  if (o.blocking < 0 || o.blocking > 3) {
    return InvalidArgument("-z " + std::to_string(o.blocking) + ": pass 0, 1, 2 or 3");
  }
  if (o.root < -1) {
    return InvalidArgument("-r " + std::to_string(o.root) + ": pass a rank, or -1 for every rank");
  }
  if (nranks > 0 && TakesRoot(collective) && o.root >= nranks) {
    return InvalidArgument("-r " + std::to_string(o.root) + ": there are only " +
                           std::to_string(nranks) + " ranks; pass -r 0.." +
                           std::to_string(nranks - 1) + " or -r -1 for every root");
  }
  if (o.types.empty()) return InvalidArgument("-d: no data type given");
  if (o.ops.empty()) return InvalidArgument("-o: no reduction op given");
  if (!o.json_path.empty() && !EndsWithJson(o.json_path)) {
    return InvalidArgument("-J " + o.json_path +
                           ": the output format follows the suffix (as in nccl-tests); name a "
                           "file ending in .json");
  }
  return Status::Ok();
}

}  // namespace gantry::bench
