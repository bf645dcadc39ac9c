// libFuzzer target for Slurm hostlist expressions (hostlist.cc): the argument
// slurmctld passes the power saving programs, and `slurm.nodes`. Besides
// "must not crash", it checks:
//  - an accepted expression gives at most 65536 hosts, each non-empty and made
//    of [A-Za-z0-9._-] (names go to argv and to ARM requests);
//  - a rejected one says so with InvalidArgument naming a position;
//  - CompressHostlist of the hosts expands back to the same set of names.
// Run: build/fuzz/bin/fuzz_autoscale_hostlist -max_total_time=60
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/autoscale/slurm_power.h"

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

bool ValidName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> Set(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view expr(reinterpret_cast<const char*>(data), size);
  auto hosts = gantry::autoscale::ExpandHostlist(expr);
  if (!hosts.ok()) {
    Check(hosts.status().code() == gantry::StatusCode::kInvalidArgument);
    Check(hosts.status().message().find(" at position ") != std::string::npos);
    return 0;
  }
  Check(hosts->size() <= 65536);
  for (const std::string& h : *hosts) Check(ValidName(h));
  const std::string compressed = gantry::autoscale::CompressHostlist(*hosts);
  auto back = gantry::autoscale::ExpandHostlist(compressed);
  Check(back.ok());
  Check(Set(*back) == Set(*hosts));
  // Compressed output is already canonical: compressing it again changes nothing.
  Check(gantry::autoscale::CompressHostlist(*back) == compressed);
  return 0;
}
