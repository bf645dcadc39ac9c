// Private to src/jobs: the run's Prometheus text file.
#pragma once

#include <string>

#include "gantry/core/status.h"
#include "gantry/jobs/state.h"
#include "gantry/jobs/workflow.h"

namespace gantry::jobs {

// The run as Prometheus text (exposition format 0.0.4), for node_exporter's
// textfile collector (--collector.textfile.directory) or any scraper:
//   gantry_jobs_run_info{workflow,run_id,state} 1
//   gantry_jobs_step_state{workflow,step,state} 1   (the step's current state)
//   gantry_jobs_step_attempts{workflow,step}, gantry_jobs_step_retries{workflow,step}
//   gantry_jobs_step_exit_code{workflow,step}      (-1 until it ends)
//   gantry_jobs_step_duration_seconds{workflow,step}
//   gantry_jobs_sweep_trials{workflow,step,state}  (trials per state)
//   gantry_jobs_sweep_best_value{workflow,step,metric}
std::string RenderMetrics(const Workflow& wf, const RunRecord& rec);

// Writes RenderMetrics atomically (temporary file and rename, as the textfile
// collector requires). IoError naming the file.
Status WriteMetricsTextfile(const std::string& path, const Workflow& wf, const RunRecord& rec);

}  // namespace gantry::jobs
