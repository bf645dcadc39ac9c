// Health profiles: which checks run on a node and their thresholds, per VM
// size, in YAML. Gantry ships profiles for ND H100 v5, ND H200 v5, ND A100 v4
// (40 and 80 GB), NC A100 v4, NC H100 v5, NC T4 v3 and a generic CPU profile
// (data/health/*.yaml, compiled in); users extend one with their own YAML.
//
// Format:
//
//   name: nd96isr_h100_v5            # required, unique
//   description: ND H100 v5 (8x H100 80GB, 8x400G NDR)
//   vm_sizes: [Standard_ND96isr_H100_v5]   # IMDS vmSize values this profile is for
//   extends: generic                 # optional: start from another profile's checks
//   checks:                          # ordered; each key is a check id (check.h)
//     cpu: {sockets: 2, cores: 96, threads: 96}
//     gpu_ecc: {dram_max: 20000000, sram_correctable_max: 10000}
//     gpu_nvlink: false              # false turns off a check inherited via extends
//
// Merging (extends, and Extend() with a user's file), with Config::Merge: a
// check present in the overlay replaces the base's parameters key by key
// (maps merge, scalars and lists replace, a parameter with no value goes back
// to the check's default); `false` removes it; `true` or no value enables it
// with the parameters it has (defaults when new); new checks append in the
// overlay's order. name, description and vm_sizes (a whole list) replace the
// base's.
//
// Check parameters (all optional unless marked; sizes "1900G", durations
// "2h", percentages "5%"):
//   cpu:          sockets, cores, threads (exact; cores/threads are totals)
//   memory:       min, max (sizes), tolerance (percent, default 3%)
//   swap:         max (size; 0 = no swap allowed)
//   filesystems:  list of {path (required), rw (bool, default true), min_free (size or percent)}
//   nvme:         count (NVMe namespaces /dev/nvme*n1), scratch (a mount point that must exist)
//   network:      up (list of interface names that must be up)
//   accelerated_networking: required (bool): an SR-IOV VF with the mlx4/mlx5 driver
//   infiniband:   rate_gbps (per port), count (ports), ports (glob, default "*")
//   services:     list of service names that must be running (systemd, else a process)
//   containers:   nvidia_toolkit (bool), enroot (bool), pyxis (bool)
//   memory_bandwidth: min_gbs, size (default 64M), seconds (default 0.3)
//   disk_bandwidth:   path (default the scratch mount, else /tmp), size (default 256M),
//                     min_write_gbs, min_read_gbs
//   collective:   min_busbw_gbs, size (default 16M), ranks (0 = auto)
//   gemm:         min_tflops or min_share_of_peak, type (default bf16 on GPU, fp32 on CPU)
//   gpu_count:    count (required)
//   gpu_persistence: required (bool, default true)
//   gpu_driver:   version (exact, optional); always checks all GPUs agree
//   gpu_ecc:      dram_max (aggregate DRAM errors), sram_correctable_max; any SRAM uncorrectable
//   fails gpu_row_remap: pending and failed remaps fail (retired pages pending on pre-Ampere)
//   gpu_xid:      window (default 2h), codes (default the reference's list), logs (extra files)
//   gpu_clocks:   fail_on (list of reason names: hw_slowdown, sw_thermal, hw_thermal,
//                 power_brake; default none: logged as warn only)
//   gpu_nvlink:   min_active (per GPU; default all links reported)
//   gpu_pcie:     min_gen, min_width (default: the GPU's maximum)
//   gpu_thermal:  max_temp_c (default 85), power within the enforced limit
//   gpu_bandwidth: min_h2d_gbs, min_d2h_gbs (CUDA builds; skip otherwise)
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/status.h"

namespace gantry::health {

class Profile {
 public:
  // A shipped profile by name ("generic", "nd96isr_h100_v5", ...).
  static Result<Profile> Builtin(std::string_view name);
  static std::vector<std::string> BuiltinNames();
  // A user's file; `extends:` may name a built-in profile.
  static Result<Profile> LoadFile(const std::string& path);
  static Result<Profile> LoadString(std::string_view yaml, std::string_view origin);
  // The built-in profile whose vm_sizes lists `vm_size` (case-insensitive);
  // otherwise "generic" with *known = false (the caller warns: never a silent pass).
  static Result<Profile> ForVmSize(std::string_view vm_size, bool* known);

  // This profile with `overlay`'s checks merged over it (see the header comment).
  Result<Profile> Extend(const Profile& overlay) const;

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::vector<std::string>& vm_sizes() const { return vm_sizes_; }
  // Enabled check ids in order.
  const std::vector<std::string>& check_ids() const { return check_ids_; }
  // The merged profile; parameters of check `id` are at "checks.<id>". Every
  // value names the file and line it was written at (the built-in or the
  // user's file), so errors about it point at the line to edit.
  const Config& config() const { return *config_; }
  // The merged profile as YAML text (for `gantry health --show-profile`);
  // it loads back as the same profile.
  const std::string& yaml() const { return yaml_; }
  // The files this profile was merged from, base first, each loaded on its
  // own ("data/health/generic.yaml", the user's file).
  const std::vector<std::shared_ptr<const Config>>& layers() const { return layers_; }

 private:
  friend struct ProfileBuilder;  // profile.cc: loading and merging
  std::string name_, description_, yaml_;
  std::vector<std::string> vm_sizes_;
  std::vector<std::string> check_ids_;
  std::shared_ptr<Config> config_;
  std::vector<std::shared_ptr<const Config>> layers_;
};

}  // namespace gantry::health
