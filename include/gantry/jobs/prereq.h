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
//     python_path: [venv/lib/python3.11/site-packages]  # optional, see below
//
// What each check does (one PrereqResult per item, in the order above;
// PrereqResult::check names it: "health auto", "python torch>=2.1",
// "executable nvidia-smi", "disk /mnt/data", "gpu_memory_free GPU 3",
// "dataset data/train.bin", "signature src", "packages", "registry IMAGE"):
//   health       runs `gantry health`'s checks in-process for the profile
//                (auto: by the VM size from Azure IMDS, generic off Azure; or a
//                built-in name, or a profile file); `checks` runs only those
//                ids. Fails on a fail or error verdict, naming the first
//                failing check. Also written `health: auto` or `health: true`.
//   python       each module imported by the interpreter (all in one run);
//                its version (the distribution's metadata, else __version__)
//                must satisfy the PEP 440 specifiers. Names are import names
//                ("yaml>=6", not "pyyaml").
//   executables  found in $PATH (or a path, relative to the workdir).
//   disk         free bytes (statvfs f_bavail, what an unprivileged writer
//                gets) at the path, or at its nearest existing parent.
//   gpu_memory_free  on each GPU in PrereqContext::gpus, through NVML (which
//                is loaded only for this check and for health GPU checks); a
//                step without GPUs passes it (one result says so).
//   datasets     the path exists; its size (a directory's files summed)
//                reaches min_size; the file's SHA-256 equals sha256.
//   signature    registry::VerifyDirectory of `dir` against the bundle with
//                the trusted public keys (DSSE, model_signing format).
//   packages     every distribution the interpreter sees
//                (importlib.metadata) is named in the allowlist (PEP 503
//                names) and satisfies its specifiers; anything else fails.
//   registries   a step's `image:` comes from one of these registries
//                ("host[:port]", or "host/path" for a repository prefix);
//                docker.io is the registry of names without one ("ubuntu").
//   python_path  the directories that make up the Python environment, in
//                place of the interpreter's site-packages: the interpreter
//                then runs isolated (-I -S), so neither $PYTHONPATH nor the
//                user's or the system's site-packages count. Absent: the
//                interpreter's own environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/config.h"
#include "gantry/core/imds.h"
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
  std::string dir;                        // the code directory
  std::string bundle;                     // default <dir>/model.sig
  std::vector<std::string> trusted_keys;  // public key PEM files
};

struct Prerequisites {
  std::optional<HealthPrereq> health;
  std::vector<std::string> python;  // module requirement specifiers
  std::vector<std::string> executables;
  std::vector<DiskPrereq> disk;
  uint64_t gpu_memory_free_bytes = 0;
  std::vector<DatasetPrereq> datasets;
  std::optional<SignaturePrereq> signature;
  std::optional<std::vector<std::string>> packages;  // allowlist; nullopt: no check
  std::vector<std::string> registries;               // approved image registries
  std::string python_interpreter = "/usr/bin/python3";
  // True when `python_interpreter` was written (so that a step's explicit
  // choice replaces the workflow's, even if it is the default).
  bool python_interpreter_given = false;
  std::optional<std::vector<std::string>> python_path;  // nullopt: the interpreter's own

  // True when nothing is to be checked.
  bool empty() const;
};

// `view` is a `requires` sub-tree; relative paths are kept as written (they
// are resolved against the step's workdir when checked). InvalidArgument
// naming file:line and key for unknown keys, bad sizes, a malformed
// requirement specifier.
Result<Prerequisites> ParsePrerequisites(const Config& view);
// The workflow's prerequisites with a step's own added (lists concatenated,
// the step's health/signature/packages/interpreter/python_path replacing the
// workflow's when the step has them; gpu_memory_free the larger of the two,
// since both must hold).
Prerequisites MergePrerequisites(const Prerequisites& workflow, const Prerequisites& step);

struct PrereqContext {
  std::string workdir;       // relative paths are resolved against it
  std::string image;         // the step's `image:` ("" if none)
  std::vector<int> gpus;     // GPU indices given to the step
  std::string nvml_library;  // for gpu_memory_free; "" = the default libnvidia-ml.so.1
};

struct PrereqResult {
  std::string check;  // "python torch>=2.1", "signature src", ...
  bool ok = false;
  std::string message;  // what was found, or what is wrong and what to do
  // Every item behind the message when there are many (packages: each
  // distribution outside the allowlist, where the message names the first few).
  std::vector<std::string> details;
};

struct PrereqOptions {
  // For `health: {profile: auto}`; nullptr: Azure IMDS (GANTRY_IMDS_ENDPOINT).
  // Must outlive the checker.
  const Imds* imds = nullptr;
  // The one interpreter run of `python` (importing torch takes seconds) and
  // the one of `packages`; a run past it fails those checks.
  std::chrono::milliseconds python_timeout{120'000};
  // The watchdog of a health run (health::RunOptions::watchdog).
  std::chrono::milliseconds health_watchdog{60'000};
};

// Checks one step's prerequisites. Health verdicts are cached for the
// checker's lifetime per (profile, checks), since a node's health does not
// change between two steps of one run the way a Python environment can; so
// are the VM size from IMDS, the NVML handle, and dataset digests (keyed by
// the file's device, inode, size and modification time, so a file that a
// previous step rewrote is hashed again). Check never fails as a call: a
// prerequisite that cannot be checked (no interpreter, unreadable key) is a
// failed result that says why. Thread-safe: steps running in parallel may
// call Check at once (health runs are serialized).
class PrereqChecker {
 public:
  PrereqChecker();
  explicit PrereqChecker(PrereqOptions options);
  ~PrereqChecker();
  std::vector<PrereqResult> Check(const Prerequisites& p, const PrereqContext& ctx);

 private:
  PrereqResult CheckHealth(const HealthPrereq& h, const PrereqContext& ctx);

  struct Cache;
  PrereqOptions options_;
  std::unique_ptr<Cache> cache_;
};

// "python torch>=2.1: 1.13.1 does not satisfy >=2.1" for the failed ones,
// joined with "; "; "" when none failed.
std::string FailureSummary(const std::vector<PrereqResult>& results);
// [{"check", "ok", "message", "details" (only when non-empty)}, ...]
Json ToJson(const std::vector<PrereqResult>& results);

}  // namespace gantry::jobs
