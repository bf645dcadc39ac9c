// Prerequisites of a workflow step, checked just before the step starts:
// if one fails the step fails without running, and the report says which.
//
//   requires:
//     health: {profile: auto, checks: [filesystems, gpu_count]}  # gantry health
//     python: ["torch>=2.1", numpy]            # importable, with versions
//     executables: [nvidia-smi, python3]
//     disk: [{path: /mnt/data, free: 100G}]
//     gpu_memory_free: 40G                     # on every GPU given to the step
//     datasets: [{path: data/train.bin, min_size: 1G, sha256: "ab12..."}]
//     signature: {dir: src, bundle: src/model.sig, trusted_keys: [keys/ci.pub]}
//     packages: ["torch>=2.1,<3", numpy, "pyyaml==6.*"]   # allowlist
//     registries: [mcr.microsoft.com, myacr.azurecr.io]   # for `image:`
//     python_interpreter: /usr/bin/python3
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"

namespace gantry::jobs {

struct HealthPrereq {
  std::string profile = "auto";     // a health profile name or file; auto: by VM size
  std::vector<std::string> checks;  // only these check ids (empty: the profile's)
};
struct DiskPrereq {
  std::string path;
  uint64_t min_free_bytes = 0;
};
struct DatasetPrereq {
  std::string path;  // a file or a directory (sizes summed; digest over the file only)
  uint64_t min_bytes = 0;
  std::string sha256;  // hex; empty: not checked
};
struct SignaturePrereq {
  std::string dir;     // the code directory
  std::string bundle;  // default <dir>/model.sig
  std::vector<std::string> trusted_keys;  // public key PEM files
};

struct Prerequisites {
  std::optional<HealthPrereq> health;
  std::vector<std::string> python;       // module requirement specifiers
  std::vector<std::string> executables;
  std::vector<DiskPrereq> disk;
  uint64_t gpu_memory_free_bytes = 0;
  std::vector<DatasetPrereq> datasets;
  std::optional<SignaturePrereq> signature;
  std::optional<std::vector<std::string>> packages;  // allowlist; nullopt: no check
  std::vector<std::string> registries;               // approved image registries
  std::string python_interpreter = "/usr/bin/python3";

  bool empty() const;
};

// `view` is a `requires` sub-tree; relative paths are kept as written (they
// are resolved against the step's workdir when checked). InvalidArgument
// naming file:line and key for unknown keys, bad sizes, a malformed
// requirement specifier.
Result<Prerequisites> ParsePrerequisites(const Config& view);
// The workflow's prerequisites with a step's own added (lists concatenated,
// the step's health/signature/packages/interpreter replacing the workflow's).
Prerequisites MergePrerequisites(const Prerequisites& workflow, const Prerequisites& step);

struct PrereqContext {
  std::string workdir;       // relative paths are resolved against it
  std::string image;         // the step's `image:` ("" if none)
  std::vector<int> gpus;     // GPU indices given to the step
  std::string nvml_library;  // for gpu_memory_free; "" = the default libnvidia-ml.so.1
};

struct PrereqResult {
  std::string check;    // "python torch>=2.1", "signature src", ...
  bool ok = false;
  std::string message;  // what was found, or what is wrong and what to do
};

// Checks one step's prerequisites. Health verdicts are cached for the
// checker's lifetime per (profile, checks), since a node's health does not
// change between two steps of one run the way a Python environment can.
class PrereqChecker {
 public:
  PrereqChecker();
  ~PrereqChecker();
  std::vector<PrereqResult> Check(const Prerequisites& p, const PrereqContext& ctx);

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

// "python torch>=2.1: 1.13.1 does not satisfy >=2.1" for the failed ones,
// joined with "; ".
std::string FailureSummary(const std::vector<PrereqResult>& results);
Json ToJson(const std::vector<PrereqResult>& results);

}  // namespace gantry::jobs
