// Actuators: what `gantry autoscale` changes once it has decided. Each one
// reads the capacity it controls and sets it to an absolute count, so that a
// controller restarted mid-scale reads where things stand and never scales
// twice (docs/autoscale.md, "Restarts").
//
//   vmss        Azure VM scale set over ARM REST: GET the scale set
//               (sku.capacity, ETag) and its instances (instance view,
//               protectionPolicy); scale out with PATCH {"sku":{"capacity":N}}
//               and If-Match; scale in by POST .../delete {"instanceIds":[...]}
//               of the chosen instances; 202 + Azure-AsyncOperation/Location
//               polled until Succeeded; 429/503 with Retry-After honoured.
//               Tokens from the Azure credential chain or one chosen link
//               (security/azure_credential.h).
//   kubernetes  the `scale` subresource of a Deployment or StatefulSet
//               (GET/PATCH .../scale, resourceVersion checked) with an
//               in-cluster service-account token or a kubeconfig.
//   gateway     backends of a gateway pool: processes (or containers) started
//               by a command on free ports, added to the pool through the admin
//               API once healthy; removed by draining, waiting for in-flight
//               requests, removing, then stopping the process.
//   command     `read` prints the current count; `scale` is run with the
//               desired count (and victims) as arguments.
//
// Thread-safety: one controller thread calls an actuator at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/clock.h"
#include "gantry/core/status.h"
#include "gantry/security/azure_credential.h"

namespace gantry::autoscale {

struct Instance {
  std::string id;    // VMSS instanceId, pod name, backend name
  std::string name;  // computer name / host name / "host:port", for drain and Slurm maps
  bool protected_from_scale_in = false;
  bool ready = false;  // provisioned and running (VMSS Succeeded + running; backend healthy)
  std::string state;   // free text: "Creating", "Running", "Deleting", ...
  std::chrono::system_clock::time_point created{};  // when known (NewestVM-style choice)
};

struct Capacity {
  int64_t target = 0;  // what the actuator was last told (sku.capacity, spec.replicas)
  int64_t ready = 0;   // instances up and ready
  bool busy = false;   // an operation is still in progress (a VMSS update, pods rolling)
  std::vector<Instance> instances;  // empty when the actuator cannot list them
};

class Actuator {
 public:
  virtual ~Actuator() = default;
  virtual std::string_view kind() const = 0;  // "vmss", "kubernetes", "gateway", "command"
  // Where the capacity stands now. Unavailable / DeadlineExceeded /
  // ResourceExhausted (throttled, with the retry time in the message) are
  // transient: the controller holds and tries again next interval.
  virtual Result<Capacity> Read() = 0;
  // Sets the count to `desired` (> current target).
  virtual Status ScaleOut(int64_t desired) = 0;
  // Removes exactly `victims` (ids from Read()); the new count is the old one
  // minus their number. An actuator that cannot choose (kubernetes) is called
  // with victims empty and `desired` instead; CanChooseVictims says which.
  virtual Status ScaleIn(int64_t desired, const std::vector<std::string>& victims) = 0;
  virtual bool CanChooseVictims() const = 0;
};

// --- Factories --------------------------------------------------------------

struct VmssConfig {
  std::string subscription, resource_group, name;
  std::string endpoint = "https://management.azure.com";  // http://127.0.0.1:port in tests
  std::string api_version = "2024-07-01";
  bool force_deletion = false;
  std::chrono::milliseconds timeout{30'000};             // one HTTP exchange
  std::chrono::milliseconds operation_timeout{900'000};  // an async operation, polled
  // The identity (the chain by default); `resource` is ignored: tokens are
  // always for the ARM endpoint above (sovereign clouds have their own).
  security::AzureCredentialOptions credential;
};

struct KubernetesConfig {
  std::string kind = "Deployment";  // or StatefulSet
  std::string namespace_ = "default";
  std::string name;
  // Exactly one of: a kubeconfig file (current context, or `context`), or in
  // cluster (KUBERNETES_SERVICE_HOST/PORT and the service-account token and CA
  // under /var/run/secrets/kubernetes.io/serviceaccount; `service_account_dir`
  // overrides it for tests).
  std::string kubeconfig;
  std::string context;
  bool in_cluster = false;
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  std::chrono::milliseconds timeout{10'000};
};

struct GatewayActuatorConfig {
  std::string url;  // the gateway's base URL
  std::string admin_key_env = "GANTRY_ADMIN_KEY";
  std::string pool;
  // argv of one backend; "{port}" and "{name}" are replaced. Started in its own
  // process group, stdout/stderr appended to <state_dir>/<name>.log.
  std::vector<std::string> start;
  int port_min = 20000, port_max = 20999;
  std::string backend_prefix;                        // default "<target>-"
  std::chrono::milliseconds ready_timeout{120'000};  // start -> passes the pool's health check
  std::chrono::milliseconds drain_timeout{120'000};
  std::chrono::milliseconds stop_grace{10'000};
  std::string state_dir;  // pids and logs of started backends
};

struct CommandActuatorConfig {
  std::vector<std::string> read;   // prints the current count (first integer on stdout)
  std::vector<std::string> scale;  // "{desired}" and "{victims}" (comma list) replaced
  std::chrono::milliseconds timeout{60'000};
};

Result<std::unique_ptr<Actuator>> NewVmssActuator(const VmssConfig& config, const Clock& clock);
Result<std::unique_ptr<Actuator>> NewKubernetesActuator(const KubernetesConfig& config);
Result<std::unique_ptr<Actuator>> NewGatewayActuator(const GatewayActuatorConfig& config,
                                                     const Clock& clock);
Result<std::unique_ptr<Actuator>> NewCommandActuator(const CommandActuatorConfig& config);

}  // namespace gantry::autoscale
