// libFuzzer target for the readers of untrusted bytes in anomaly.cc: the
// KServe response reader (backend bytes) and the `anomaly:` config parser.
// Besides "must not crash, throw or recurse deeply", it checks invariants the
// detector relies on:
//  - every TensorStats has count > 0, finite min <= mean <= max, and there
//    are at most 64 of them;
//  - the answer does not depend on the bytes after a complete document
//    (those make it an error, never a different success);
//  - a config that parses satisfies 1 <= violations <= of, window >= 1s,
//    min_requests >= 1, max_models >= 1, at least one signal, and a history
//    long enough for min_history and min_samples.
// The first byte picks the reader. Run: build/fuzz/bin/fuzz_gateway_anomaly -max_total_time=60
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "anomaly.h"
#include "gantry/core/config.h"
#include "gantry/gateway/anomaly_config.h"

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

void FuzzKserve(std::string_view in) {
  auto r = gantry::gateway::KserveOutputStats(in);
  if (!r.ok()) {
    Check(r.status().code() == gantry::StatusCode::kInvalidArgument);
    Check(!r.status().message().empty());
    return;
  }
  Check(r->size() <= 64);
  for (const gantry::gateway::TensorStats& t : *r) {
    Check(t.count > 0);
    Check(std::isfinite(t.mean) && std::isfinite(t.min) && std::isfinite(t.max));
    Check(t.min <= t.mean && t.mean <= t.max);
  }
  // Stray bytes after the document are an error, not another answer.
  std::string more(in);
  more += " x";
  Check(!gantry::gateway::KserveOutputStats(more).ok());
}

void FuzzConfig(std::string_view in) {
  auto config = gantry::Config::LoadString(in, "<fuzz>");
  if (!config.ok()) return;
  auto c = gantry::gateway::ParseAnomalyConfig(*config, "anomaly");
  if (!c.ok()) {
    Check(c.status().code() == gantry::StatusCode::kInvalidArgument ||
          c.status().code() == gantry::StatusCode::kNotFound);
    return;
  }
  if (!c->enabled && !config->Has("anomaly")) return;
  Check(c->window >= std::chrono::seconds(1));
  Check(c->violations >= 1 && c->violations <= c->of);
  Check(c->resolve_after >= 1);
  Check(c->min_requests >= 1);
  Check(c->max_models >= 1);
  Check(!c->signals.empty());
  Check(c->history >= c->threshold.min_history);
  Check(c->history.count() / c->window.count() >= static_cast<int64_t>(c->threshold.min_samples));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    FuzzConfig(in);
  } else {
    FuzzKserve(in);
  }
  return 0;
}
