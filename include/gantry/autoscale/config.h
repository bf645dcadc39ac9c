// autoscale.yaml: the targets `gantry autoscale run` keeps sized.
//
//   listen: 127.0.0.1:9310            # /status, /metrics, /healthz, POST /wake/<target>
//   state_dir: /var/lib/gantry/autoscale
//   targets:
//     - name: llm
//       min: 0                        # 0 allowed: scale to zero
//       max: 8
//       interval: 15s                 # evaluation period (HPA: 15 s; KEDA polls 30 s at zero)
//       mode: hpa                     # hpa (HPA + KEDA rules, default) | rules (Azure profiles)
//       metrics:
//         - name: queue
//           gateway: {url: http://127.0.0.1:8080, pool: llm, signal: in_flight_and_pending}
//           type: average_value       # average_value (default) | value | utilization
//           target: 4                 # per instance
//           activation: 0             # active when the value is above this
//         - name: busy
//           prometheus: {url: http://127.0.0.1:9090, query: 'avg(DCGM_FI_DEV_GPU_UTIL)'}
//           type: utilization
//           target: 70
//         - name: gpu
//           agent: {url: http://10.0.0.4:9100, signal: gpu_utilization}
//         - name: depth
//           command: [/usr/local/bin/queue-depth, --json]
//       behavior:                     # HPA `behavior` (defaults as the HPA's)
//         scale_up: {stabilization: 0s, tolerance: 0.1, select: max,
//                    policies: [{type: pods, value: 4, period: 15s}, {type: percent, value: 100,
//                    period: 15s}]}
//         scale_down: {stabilization: 300s, policies: [{type: percent, value: 100, period: 15s}]}
//       cooldown: 300s                # KEDA cooldownPeriod (last active -> 0)
//       initial_cooldown: 0s
//       fallback: {failure_threshold: 3, replicas: 2}
//       schedules:
//         - {name: office, days: [mon, tue, wed, thu, fri], from: "08:00", to: "20:00", utc_offset:
//         "+01:00", min: 2}
//       floor_metric: job_nodes       # never below this metric's value (nodes a running job holds)
//       profiles: [...]               # mode: rules (see docs/autoscale.md)
//       scale_in:
//         drain: {gateway: http://127.0.0.1:8080, timeout: 120s}  # drain the victim's backend
//         first victim_check: [/usr/local/bin/safe-to-remove, "{instance}"]  # exit 0: may go
//       actuator:                     # exactly one of:
//         vmss: {subscription: ..., resource_group: ..., name: ...,
//                credential: {managed_identity: true}}
//         kubernetes: {kind: Deployment, namespace: default, name: llm, kubeconfig: ~/.kube/config}
//         gateway: {url: http://127.0.0.1:8080, pool: llm, start: [python3, server.py, --port,
//         "{port}"]} command: {read: [...], scale: [..., "{desired}"]}
//   slurm:                            # gantry autoscale slurm-resume|slurm-suspend
//     nodes: {pattern: "gpu-[0-15]", vmss: {...}}   # node name <-> VMSS instance (computer name)
//
// Durations use core's units ("15s", "5m"). Every error names the file, line
// and key, e.g. "autoscale.yaml:7:12: key 'targets[0].max': 0 is below min 1".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/autoscale/actuator.h"
#include "gantry/autoscale/decide.h"
#include "gantry/core/status.h"

namespace gantry {
class Config;
}

namespace gantry::autoscale {

// Where one metric comes from. Exactly one kind.
struct MetricSourceConfig {
  enum class Kind { kPrometheus, kGateway, kAgent, kCommand };
  std::string name;
  Kind kind = Kind::kPrometheus;
  std::string url;  // prometheus, gateway, agent
  // prometheus: an instant query whose result has exactly one element (KEDA's rule);
  // an empty result is 0 when ignore_null_values (KEDA's default), else missing.
  std::string query;
  bool ignore_null_values = true;
  // gateway: pool and signal: in_flight | pending | held | in_flight_and_pending |
  // request_rate | shed_rate (per second, from the counters of two scrapes).
  // agent: signal: gpu_utilization | cpu_utilization | gpu_memory_used_ratio.
  std::string pool;
  std::string signal;
  std::vector<std::string> command;  // prints a number (first token of stdout)
  std::chrono::milliseconds timeout{5000};
};

struct ScaleInConfig {
  std::string drain_gateway;  // "" or the gateway's URL: drain a victim's backend first
  std::string drain_admin_key_env = "GANTRY_ADMIN_KEY";
  std::chrono::milliseconds drain_timeout{120'000};
  std::vector<std::string> victim_check;  // "{instance}" / "{name}" replaced; exit 0: may go
};

struct ActuatorConfig {
  enum class Kind { kVmss, kKubernetes, kGateway, kCommand };
  Kind kind = Kind::kCommand;
  VmssConfig vmss;
  KubernetesConfig kubernetes;
  GatewayActuatorConfig gateway;
  CommandActuatorConfig command;
};

struct TargetConfig {
  std::string name;
  std::chrono::milliseconds interval{15'000};
  DecisionSpec decision;  // min/max/mode/hpa/profiles/schedules/floor_metric
  std::vector<MetricSourceConfig> metrics;
  ScaleInConfig scale_in;
  ActuatorConfig actuator;
};

// Slurm power saving: node names (a hostlist pattern) mapped to the VMSS
// instances whose computer names they are, or commands.
struct SlurmPowerConfig {
  std::string nodes;  // hostlist expression of the nodes this maps ("gpu-[0-15]")
  bool use_vmss = false;
  VmssConfig vmss;
  std::vector<std::string> resume_command;  // "{nodes}" (hostlist) / "{node}" (each) replaced
  std::vector<std::string> suspend_command;
  std::chrono::milliseconds resume_timeout{600'000};  // keep below Slurm's ResumeTimeout
  std::string log_file;  // Slurm does not log program output; we append here
};

struct AutoscaleConfig {
  std::string path;    // the file, for messages
  std::string listen;  // "" or host:port
  std::string state_dir;
  std::vector<TargetConfig> targets;
  std::optional<SlurmPowerConfig> slurm;
};

Result<AutoscaleConfig> ParseAutoscaleConfig(const Config& config);
Result<AutoscaleConfig> LoadAutoscaleConfig(const std::string& path);

}  // namespace gantry::autoscale
