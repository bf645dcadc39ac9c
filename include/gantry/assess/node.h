// `gantry assess --node`: the checks only this machine can answer, as one
// Resource of type "Gantry/node" whose properties are the facts gathered here,
// so that the node rules (GANTRY-NODE-*) run through the same engine and
// renderings as the template rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gantry/assess/resource.h"
#include "gantry/core/imds.h"
#include "gantry/core/status.h"

namespace gantry::assess {

inline constexpr std::string_view kNodeType = "Gantry/node";

// The node Resource: type kNodeType, name = hostname, origin kNode, location
// from IMDS ("" off Azure), and these properties (a fact that could not be read
// is absent from `properties` and its pointer is listed in Resource::unknown):
//
//   properties.health.verdict              "pass" | "warn" | "fail" (gantry health)
//   properties.health.failed               ["nvlink", ...] names of failing checks
//   properties.vm.size / .priority / .evictionPolicy / .zone    from IMDS
//   properties.network.acceleratedNetworking   bool: a Mellanox (mlx4/mlx5) VF is
//                                              bonded to a hv_netvsc interface
//   properties.network.publicIpAddresses   ["20.1.2.3"] from IMDS network document ([] = none)
//   properties.os.pendingSecurityUpdates   int: upgradable packages from a *-security origin
//   properties.os.rebootRequired           bool: /var/run/reboot-required exists
//   properties.gpu.count                   int (0: no NVIDIA GPU)
//   properties.gpu.driverVersion           "550.54.15"
//   properties.gpu.persistenceMode         bool: every GPU has persistence mode on
//   properties.agent.configured            bool: the agent config file exists and loads
//   properties.agent.idleShutdown          bool: it enables idle shutdown
//   properties.ckpt.configured             bool: a checkpoint config exists and loads
//   properties.backup.configured           bool: a backup config exists and loads
//   properties.storage.accountKeys         ["$AZURE_STORAGE_KEY", ...] where a storage
//                                          account key (local auth) is configured ([] = none)
//
// Also recorded (additive): properties.os.securityUpdates (the first 50 package
// names), properties.gpu.driverLoaded (false when NVIDIA PCI devices are present
// but NVML cannot be loaded), properties.agent.error / ckpt.error / backup.error
// (why a config that exists did not load), properties.agent.idleFor (seconds).
//
// How each fact is read (docs/assess.md, "Node checks"):
//   acceleratedNetworking  /sys/class/net/<vf>/device/driver is mlx4_core or
//       mlx5_core, the interface is Ethernet, and /sys/class/net/<vf>/master is an
//       interface whose device/driver is hv_netvsc (Azure's SR-IOV pairing). Unknown
//       when no hv_netvsc interface exists (not a Hyper-V/Azure VM).
//   pendingSecurityUpdates  `<root>/usr/bin/apt-get -s dist-upgrade` (a simulation:
//       no root needed, nothing changes); "Inst" lines whose origin list mentions
//       "-security". Unknown without apt-get or when it fails. Uses the package
//       lists as they are (run `apt-get update` first for a fresh answer).
//   gpu.*  NVIDIA PCI functions (vendor 0x10de, class 0x03xxxx) under
//       /sys/bus/pci/devices; NVML is loaded only when there is one.
//   idleShutdown  the agent config loads, its idle section is enabled and has an
//       action (without one the agent only notifies).
//   ckpt.configured  the ckpt config loads as a YAML map, or the agent config
//       lists dashboard.checkpoint_roots.

struct NodeOptions {
  std::string root_dir = "/";  // stands for "/" when reading /proc, /sys, /etc, /var
  // Gantry configuration files whose presence and content the node rules check;
  // "" = the default paths (/etc/gantry/agent.yaml, /etc/gantry/ckpt.yaml,
  // /etc/gantry/backup.yaml).
  std::string agent_config;
  std::string ckpt_config;
  std::string backup_config;
  bool run_health = true;  // include `gantry health`'s verdict (no bandwidth probes)
  // The NVML library to load when NVIDIA GPUs are present ("" =
  // $GANTRY_NVML_LIBRARY, else libnvidia-ml.so.1); tests pass the fake NVML.
  std::string nvml_library;
  // How long `apt-get -s dist-upgrade` may take before the fact is unknown.
  int apt_timeout_s = 60;
  // "NAME=value" entries searched for storage account keys; nullopt: this
  // process's environment (tests pass their own).
  std::optional<std::vector<std::string>> environment;
};

// Where a storage account key (SharedKey: local auth, which a managed identity
// with a Storage Blob Data role replaces) is configured on this node, for
// messages; never the value. Looks at, in this order:
//   the environment     AZURE_STORAGE_KEY (any value), AZURE_STORAGE_CONNECTION_STRING
//                       with AccountKey= -> "$AZURE_STORAGE_KEY"
//   <root>/etc/environment   the same variables -> "/etc/environment: AZURE_STORAGE_KEY"
//   the agent, ckpt and backup configs (the paths of NodeOptions)   a value with
//                       AccountKey= (a connection string) or a key named account_key /
//                       accountKey / storage_key -> "/etc/gantry/backup.yaml:3 repo"
// A connection string with UseDevelopmentStorage=true (Azurite's public key) is not one.
std::vector<std::string> FindStorageAccountKeys(const NodeOptions& options);

// Gathers the facts: health verdict, accelerated networking (a Mellanox VF
// under hv_netvsc), public IP (IMDS network document), pending security
// updates and /var/run/reboot-required, GPU driver version and persistence
// mode, agent idle shutdown, checkpoint and backup configuration. A fact that
// cannot be read is recorded as unknown (Resource::unknown), never as a pass.
Result<Resource> GatherNode(const NodeOptions& options, const Imds& imds);

}  // namespace gantry::assess
