// Metric sources of `gantry autoscale`: each Read() gives one number or an
// error; the controller turns an error into a missing sample (the decision
// rules then hold, never scale in).
//
//   prometheus  GET <url>/api/v1/query?query=... (an instant vector or scalar
//               with exactly one element; more is an error naming the count)
//   gateway     the gateway's /metrics (Prometheus text): per-pool gauges
//               gantry_gateway_pool_{in_flight,pending,held} and rates of
//               gantry_gateway_requests_total / gantry_gateway_shed_total
//   agent       the agent's /metrics: DCGM_FI_DEV_GPU_UTIL (average over
//               GPUs), node_cpu_seconds_total (busy share between scrapes, %),
//               DCGM_FI_DEV_FB_USED/(USED+FREE)
//   command     a program's stdout (first token), exit 0 required
//
// Rates need two scrapes: the first Read() of a rate is missing ("first
// scrape") rather than a made-up zero.
#pragma once

#include <memory>
#include <string>

#include "gantry/autoscale/config.h"
#include "gantry/core/clock.h"
#include "gantry/core/status.h"

namespace gantry::autoscale {

class MetricSource {
 public:
  virtual ~MetricSource() = default;
  // The value now. Errors name the source and what failed ("prometheus
  // http://127.0.0.1:9090: query 'x' returned 3 series; make it return one").
  virtual Result<double> Read() = 0;
};

Result<std::unique_ptr<MetricSource>> NewMetricSource(const MetricSourceConfig& config,
                                                      const Clock& clock);

}  // namespace gantry::autoscale
