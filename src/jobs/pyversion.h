// Python package versions and requirement specifiers (PEP 440, PEP 508 names
// and PEP 503 name normalization), for the `python:` and `packages:`
// prerequisites. Private to the jobs module.
//
//   ASSIGN_OR_RETURN(Requirement r, ParseRequirement("torch>=2.1,<3"));
//   ASSIGN_OR_RETURN(PyVersion v, ParsePyVersion("2.1.0rc1"));
//   r.specifiers.Contains(v);  // false: 2.1.0rc1 comes before 2.1
//
// Versions are parsed in PEP 440's permissive form ("v1.0", "1.0-RC1",
// "1.0.post", "1.0-1", "1.0+ubuntu.1") and compared by PEP 440's order:
// epoch, release (trailing zeros ignored: 1.0 == 1.0.0), then
// dev < pre (a < b < rc) < final < post, then local labels (a version
// without one sorts first; numeric parts sort after alphanumeric ones).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::jobs {

struct PyVersion {
  uint64_t epoch = 0;
  std::vector<uint64_t> release;  // at least one part
  // Pre-release: 'a', 'b' or 'r' (rc; "c", "pre", "preview" normalize to rc)
  // with its number; 0 when absent.
  char pre_kind = 0;
  uint64_t pre_number = 0;
  std::optional<uint64_t> post;
  std::optional<uint64_t> dev;
  // Local label parts, lower case, separators normalized ("ubuntu.1").
  std::vector<std::string> local;

  bool is_prerelease() const { return pre_kind != 0 || dev.has_value(); }
  bool is_postrelease() const { return post.has_value(); }
  // The normalized form: "1!2.0rc1.post2.dev3+abc.5".
  std::string ToString() const;
  // Epoch and release only ("2.0" for 2.0rc1+x).
  PyVersion Base() const;
  // Without the local label.
  PyVersion Public() const;
};

// InvalidArgument quoting `text` when it is not a PEP 440 version.
Result<PyVersion> ParsePyVersion(std::string_view text);
// <0, 0, >0 as a sorts before, equal to, after b.
int ComparePyVersions(const PyVersion& a, const PyVersion& b);

enum class SpecOp {
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kCompatible,
  kArbitrary
};

// One clause such as ">=2.1", "==6.*", "~=1.4.2", "===foo".
struct Specifier {
  SpecOp op = SpecOp::kGreaterEqual;
  std::string text;       // the version as written (for === and messages)
  PyVersion version;      // unset for ===
  bool wildcard = false;  // ==X.* or !=X.*

  // Whether `v` satisfies this clause. Pre-releases are not excluded: an
  // installed version is what it is (as `pip check` judges installed
  // packages), so only the ordering rules of PEP 440 apply, including that
  // "<3" does not admit 3.0rc1 and ">1.0" does not admit 1.0.post1.
  bool Contains(const PyVersion& v) const;
  std::string ToString() const;  // ">=2.1"
};

// Comma-separated clauses, all of which must hold; empty: any version.
struct SpecifierSet {
  std::vector<Specifier> clauses;

  bool empty() const { return clauses.empty(); }
  bool Contains(const PyVersion& v) const;
  // With `===`, the raw version text is compared instead (case-insensitive).
  bool ContainsText(std::string_view version_text) const;
  std::string ToString() const;  // ">=2.1,<3"
};

// "" is the empty set. InvalidArgument naming the clause for an unknown
// operator, a malformed version, a wildcard other than after == or != (and
// not after a pre/post/dev/local part), ~= with one release part, or a local
// label on anything but == / !=.
Result<SpecifierSet> ParseSpecifierSet(std::string_view text);

// A name with optional extras and specifiers: "torch>=2.1,<3",
// "pyyaml == 6.*", "requests[socks] (>=2)", "numpy". Environment markers
// (";") and URLs ("@") are refused.
struct Requirement {
  std::string name;  // as written
  std::vector<std::string> extras;
  SpecifierSet specifiers;
};
Result<Requirement> ParseRequirement(std::string_view text);

// PEP 503: lower case, each run of '-', '_' and '.' becomes one '-'
// ("PyYAML" -> "pyyaml", "zope.interface" -> "zope-interface").
std::string NormalizePackageName(std::string_view name);
// True for a PEP 508 name: letters, digits, '.', '_', '-', starting and
// ending with a letter or digit.
bool IsValidPackageName(std::string_view name);

// ---- The interpreter probe: one run of the Python interpreter that reports
// the requested modules and, when asked, every installed distribution.

struct PythonProbeRequest {
  std::string interpreter;  // a path, or a name searched in $PATH
  std::optional<std::vector<std::string>>
      path;                          // set: run isolated (-I -S) with these first on sys.path
  std::string workdir;               // the probe's working directory ("" = ours)
  std::vector<std::string> modules;  // import names
  bool distributions = false;
  std::chrono::milliseconds timeout{120'000};
};

struct ModuleProbe {
  std::string name;
  bool found = false;
  std::string version;         // "" when neither metadata nor __version__ gives one
  std::string version_source;  // "distribution PyYAML", "__version__"
  std::string file;            // the module's __file__ ("" for built-ins and namespaces)
  std::string error;           // why the import failed ("ModuleNotFoundError: No module named 'x'")
};

struct InstalledDistribution {
  std::string name;  // as its metadata writes it
  std::string version;
  std::string location;  // the directory it was found in
};

struct PythonProbe {
  std::string executable;            // sys.executable
  std::string python_version;        // "3.11.2"
  std::vector<ModuleProbe> modules;  // in request order
  // In sys.path order, one per normalized name: a distribution shadowed by
  // an earlier one of the same name is left out (Python would not load it).
  std::vector<InstalledDistribution> distributions;
};

// Runs the interpreter once. Unavailable naming the interpreter when it
// cannot be started, times out, or prints no report (its stderr's last line
// says why: an interpreter older than 3.8 has no importlib.metadata).
Result<PythonProbe> RunPythonProbe(const PythonProbeRequest& request);
// The report line the probe prints, for tests: DataLoss when malformed.
Result<PythonProbe> ParsePythonProbeOutput(std::string_view stdout_text);

// The allowlist check: one line per installed distribution that is not in
// `allowlist` (by PEP 503 name) or whose version does not satisfy its entry,
// in `installed`'s order: "foo 1.0: not in the allowlist",
// "torch 1.13.1: does not satisfy torch>=2.1,<3".
std::vector<std::string> AllowlistViolations(const std::vector<Requirement>& allowlist,
                                             const std::vector<InstalledDistribution>& installed);

}  // namespace gantry::jobs
