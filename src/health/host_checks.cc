// The host checks of `gantry health`: CPU, memory, swap, filesystems, NVMe,
// network, accelerated networking, InfiniBand, services, container
// prerequisites, and the measuring probes (memory, disk and collective
// bandwidth, GEMM throughput).
//
// Every check reads below Context::root_dir, so tests run them on fake trees.
// The probes measure the real machine (they allocate, write and compute; a
// fake /proc cannot stand in for that).
//
// Fault codes (CheckResult::fault_code): the reference's NHC codes where one
// fits, nothing otherwise:
//   NHC2023  nvme: fewer NVMe namespaces than the profile expects
//   NHC2003  infiniband: an active port below the expected rate
//   NHCNA    any check that could not run (outcome error)
//   ""       every other failure (a missing mount, a stopped service, ...)
//
// Semantics worth knowing (the header of profile.h lists the parameters):
//   - cpu: each count given must match exactly (NHC check_hw_cpuinfo).
//   - swap: without `max` it only reports.
//   - filesystems: a path passes "mounted" when it exists and lies on a mounted
//     filesystem; a path that /etc/fstab names as a mount point must be one.
//   - nvme: `count` is a minimum (fewer fails with NHC2023; more is fine).
//   - infiniband: `ports` globs "dev:port" or "dev"; with `count`, at least
//     that many matching ports must be ACTIVE, otherwise all of them; every
//     active matching port must reach `rate_gbps`.
//   - bandwidth probes and gemm: below the minimum fails, within 5% above it
//     warns (as AzNHC's bandwidth checks do). memory_bandwidth.size is per
//     array (STREAM's convention); GPUs present but no CUDA/NCCL in this
//     build skips gemm/collective rather than judging a GPU threshold on the CPU.
//
// CPU topology and /proc/meminfo come from gantry/health/detect.h (the doctor
// reads the same facts through it); systemctl runs through RunSubprocess
// (gantry/core/subprocess.h).
#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "gantry/bench/collectives.h"
#include "gantry/bench/gemm.h"
#include "gantry/comm/launch.h"
#include "gantry/core/config.h"
#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/health/check.h"
#include "gantry/health/detect.h"
#include "gantry/health/nvml.h"

namespace gantry::health {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Small helpers

// <root><path>, without a doubled slash when root is "/".

// The leading number of "400 Gb/sec (4X NDR)" or "4: ACTIVE".
bool LeadingNumber(std::string_view s, double* out) {
  s = TrimSpace(s);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end != s.data();
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    f(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

std::optional<std::string> ReadTrimmed(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  return std::string(TrimSpace(*text));
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

CheckResult Make(std::string name, Outcome outcome, std::string message, std::string measured = "",
                 std::string threshold = "", std::string fault = "") {
  CheckResult r;
  r.name = std::move(name);
  r.outcome = outcome;
  r.message = std::move(message);
  r.measured = std::move(measured);
  r.threshold = std::move(threshold);
  r.fault_code = outcome == Outcome::kError && fault.empty() ? "NHCNA" : std::move(fault);
  return r;
}

std::string Gbs(double v) { return fmt::format("{:.2f} GB/s", v); }

// CPUs this process may run on (its affinity mask), at least 1.
int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// ---------------------------------------------------------------------------
// Parameters

// `checks.<id>` absent, null or `true` means "all defaults" (false is
// returned: there is nothing to read); otherwise it must be a map whose keys
// are all in `known` (true is returned).
Result<bool> ExpectParamMap(const Config& c, const std::string& key,
                            const std::vector<std::string>& known) {
  if (!c.Has(key)) return false;
  if (c.IsScalar(key)) {
    Result<bool> on = c.GetBool(key, true);
    if (on.ok() && *on) return false;
    return InvalidArgument(fmt::format("{}: expected a map of parameters ({}) or true",
                                       c.Locate(key), Join(known, ", ")));
  }
  RETURN_IF_ERROR(c.CheckKnownKeys(key, known));
  return true;
}

std::string Sub(const std::string& key, std::string_view name) {
  return key + "." + std::string(name);
}

Result<std::optional<int64_t>> OptionalInt(const Config& c, const std::string& key, int64_t min) {
  if (!c.Has(key)) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, c.GetInt(key, 0));
  if (v < min) {
    return InvalidArgument(fmt::format("{}: must be at least {}, got {}", c.Locate(key), min, v));
  }
  return std::optional<int64_t>(v);
}

Result<double> NonNegativeDouble(const Config& c, const std::string& key, double fallback) {
  ASSIGN_OR_RETURN(double v, c.GetDouble(key, fallback));
  if (v < 0) {
    return InvalidArgument(fmt::format("{}: must not be negative, got {}", c.Locate(key), v));
  }
  return v;
}

// "3%" -> 0.03. Percentages need the sign so 0.03 is never read as 3%.
Result<std::optional<double>> ParsePercentText(std::string_view text) {
  text = TrimSpace(text);
  if (text.empty() || text.back() != '%') return std::optional<double>();
  double v = 0;
  if (!ParseNumber(text.substr(0, text.size() - 1), &v) || v < 0 || v > 100) {
    return InvalidArgument("");
  }
  return std::optional<double>(v / 100);
}

Result<double> GetPercent(const Config& c, const std::string& key, double fallback) {
  if (!c.Has(key)) return fallback;
  ASSIGN_OR_RETURN(std::string text, c.GetString(key, ""));
  Result<std::optional<double>> p = ParsePercentText(text);
  if (!p.ok() || !p->has_value()) {
    return InvalidArgument(
        fmt::format("{}: expected a percentage between 0% and 100% such as '3%', got '{}'",
                    c.Locate(key), text));
  }
  return **p;
}

// A size ("100G") or a share of the filesystem ("10%").
struct Amount {
  bool percent = false;
  double fraction = 0;
  uint64_t bytes = 0;
  std::string ToString() const {
    return percent ? fmt::format("{:g}%", fraction * 100) : FormatSize(bytes);
  }
};

Result<std::optional<Amount>> GetAmount(const Config& c, const std::string& key) {
  if (!c.Has(key)) return std::optional<Amount>();
  ASSIGN_OR_RETURN(std::string text, c.GetString(key, ""));
  Amount a;
  Result<std::optional<double>> p = ParsePercentText(text);
  if (p.ok() && p->has_value()) {
    a.percent = true;
    a.fraction = **p;
    return std::optional<Amount>(a);
  }
  Result<uint64_t> size = ParseSize(text);
  if (!p.ok() || !size.ok()) {
    return InvalidArgument(
        fmt::format("{}: expected a size such as 100G or a percentage such as 10%, got '{}'",
                    c.Locate(key), text));
  }
  a.bytes = *size;
  return std::optional<Amount>(a);
}

// ---------------------------------------------------------------------------
// /proc and /sys readers

// Free memory for the probes' buffers (the real machine, not root_dir).
uint64_t MemAvailableBytes() {
  Result<MemoryInfo> memory = DetectMemory("/");
  return memory.ok() ? memory->available_bytes : 0;
}

struct Mount {
  std::string device;
  std::string point;
  std::string type;
  bool read_only = false;
};

// /proc/mounts escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string NormalizePath(std::string_view path) {
  std::string p = fs::path(std::string(path)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p.empty() ? "/" : p;
}

Result<std::vector<Mount>> ReadMounts(const std::string& root) {
  std::string path = RootPath(root, "/proc/mounts");
  if (!Exists(path)) path = RootPath(root, "/proc/self/mounts");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<Mount> mounts;
  ForEachLine(text, [&](std::string_view line) {
    std::vector<std::string_view> fields;
    size_t pos = 0;
    while (pos < line.size()) {
      size_t start = line.find_first_not_of(" \t", pos);
      if (start == std::string_view::npos) break;
      size_t end = line.find_first_of(" \t", start);
      if (end == std::string_view::npos) end = line.size();
      fields.push_back(line.substr(start, end - start));
      pos = end;
    }
    if (fields.size() < 4) return;
    Mount m;
    m.device = UnescapeMountField(fields[0]);
    m.point = NormalizePath(UnescapeMountField(fields[1]));
    m.type = std::string(fields[2]);
    std::string_view opts = fields[3];
    while (!opts.empty()) {
      size_t comma = opts.find(',');
      if (opts.substr(0, comma) == "ro") m.read_only = true;
      if (comma == std::string_view::npos) break;
      opts.remove_prefix(comma + 1);
    }
    mounts.push_back(std::move(m));
  });
  return mounts;
}

// The mount `path` lies on: the longest mount point that is `path` or one of
// its parents; the later entry wins for the same point (it is mounted over the
// earlier one). nullptr when nothing matches.
const Mount* MountFor(const std::vector<Mount>& mounts, const std::string& path) {
  const std::string p = NormalizePath(path);
  const Mount* best = nullptr;
  for (const Mount& m : mounts) {
    const bool covers = m.point == "/" || p == m.point ||
                        (p.size() > m.point.size() && p.compare(0, m.point.size(), m.point) == 0 &&
                         p[m.point.size()] == '/');
    if (covers && (best == nullptr || m.point.size() >= best->point.size())) best = &m;
  }
  return best;
}

const Mount* MountAt(const std::vector<Mount>& mounts, const std::string& point) {
  const std::string p = NormalizePath(point);
  const Mount* found = nullptr;
  for (const Mount& m : mounts) {
    if (m.point == p) found = &m;
  }
  return found;
}

// Mount points /etc/fstab names (swap and "none" left out).
std::set<std::string> ReadFstabMountPoints(const std::string& root) {
  std::set<std::string> points;
  Result<std::string> text = ReadFile(RootPath(root, "/etc/fstab"));
  if (!text.ok()) return points;
  ForEachLine(*text, [&](std::string_view line) {
    line = TrimSpace(line);
    if (line.empty() || line.front() == '#') return;
    size_t a = line.find_first_of(" \t");
    if (a == std::string_view::npos) return;
    std::string_view rest = TrimSpace(line.substr(a));
    std::string_view point = rest.substr(0, rest.find_first_of(" \t"));
    if (point.empty() || point.front() != '/') return;
    points.insert(NormalizePath(UnescapeMountField(point)));
  });
  return points;
}

// ---------------------------------------------------------------------------
// cpu

class CpuCheck : public Check {
 public:
  std::optional<int64_t> sockets, cores, threads;
  std::string name() const override { return "cpu"; }
  CheckResult Run(const Context& ctx) const override {
    Result<CpuInfo> cpu = DetectCpu(ctx.root_dir);
    if (!cpu.ok()) {
      return Make(name(), Outcome::kError,
                  "cannot read the CPU topology: " + cpu.status().message());
    }
    const std::string measured =
        fmt::format("{} socket{}, {} cores, {} threads", cpu->sockets, cpu->sockets == 1 ? "" : "s",
                    cpu->cores, cpu->threads);
    std::vector<std::string> want, wrong;
    auto compare = [&](const char* what, const std::optional<int64_t>& expected, int actual) {
      if (!expected) return;
      want.push_back(fmt::format("{} {}", *expected, what));
      if (*expected != actual)
        wrong.push_back(fmt::format("{} {} (expected {})", actual, what, *expected));
    };
    compare("sockets", sockets, cpu->sockets);
    compare("cores", cores, cpu->cores);
    compare("threads", threads, cpu->threads);
    const std::string threshold = want.empty() ? "" : "== " + Join(want, ", ");
    if (!wrong.empty()) {
      return Make(name(), Outcome::kFail,
                  "found " + Join(wrong, ", ") +
                      ": CPUs are offline or the VM is not the size the profile is for; check "
                      "/sys/devices/system/cpu/online and the profile",
                  measured, threshold);
    }
    return Make(name(), Outcome::kPass, measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeCpu(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"sockets", "cores", "threads"}));
  auto check = std::make_unique<CpuCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->sockets, OptionalInt(c, Sub(key, "sockets"), 1));
  ASSIGN_OR_RETURN(check->cores, OptionalInt(c, Sub(key, "cores"), 1));
  ASSIGN_OR_RETURN(check->threads, OptionalInt(c, Sub(key, "threads"), 1));
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// memory

class MemoryCheck : public Check {
 public:
  std::optional<uint64_t> min, max;
  double tolerance = 0.03;
  std::string name() const override { return "memory"; }
  CheckResult Run(const Context& ctx) const override {
    Result<MemoryInfo> memory = DetectMemory(ctx.root_dir);
    if (!memory.ok()) return Make(name(), Outcome::kError, memory.status().message());
    const uint64_t total = memory->total_bytes;
    const double lo = min ? static_cast<double>(*min) * (1 - tolerance) : 0;
    const double hi =
        max ? static_cast<double>(*max) * (1 + tolerance) : std::numeric_limits<double>::infinity();
    std::string threshold;
    const std::string tol = fmt::format("{:g}%", tolerance * 100);
    if (min && max) {
      threshold = fmt::format("{} .. {} ±{}", FormatSize(*min), FormatSize(*max), tol);
    } else if (min) {
      threshold = fmt::format(">= {} -{}", FormatSize(*min), tol);
    } else if (max) {
      threshold = fmt::format("<= {} +{}", FormatSize(*max), tol);
    }
    const std::string measured = FormatSize(total);
    const double t = static_cast<double>(total);
    if (t < lo) {
      return Make(
          name(), Outcome::kFail,
          fmt::format("MemTotal {} is below {} ({} minus {}): memory is missing (a failed "
                      "DIMM, or a kernel memory reservation); report the node",
                      measured, FormatSize(static_cast<uint64_t>(lo)), FormatSize(*min), tol),
          measured, threshold);
    }
    if (t > hi) {
      return Make(
          name(), Outcome::kFail,
          fmt::format("MemTotal {} is above {} ({} plus {}): the VM is not the size the "
                      "profile is for; use the matching profile",
                      measured, FormatSize(static_cast<uint64_t>(hi)), FormatSize(*max), tol),
          measured, threshold);
    }
    return Make(name(), Outcome::kPass, "MemTotal " + measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeMemory(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"min", "max", "tolerance"}));
  auto check = std::make_unique<MemoryCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  if (c.Has(Sub(key, "min"))) {
    ASSIGN_OR_RETURN(check->min, c.GetSize(Sub(key, "min"), 0));
  }
  if (c.Has(Sub(key, "max"))) {
    ASSIGN_OR_RETURN(check->max, c.GetSize(Sub(key, "max"), 0));
  }
  ASSIGN_OR_RETURN(check->tolerance, GetPercent(c, Sub(key, "tolerance"), 0.03));
  if (check->min && check->max && *check->min > *check->max) {
    return InvalidArgument(fmt::format("{}: min {} is larger than max {}; swap them",
                                       c.Locate(Sub(key, "min")), FormatSize(*check->min),
                                       FormatSize(*check->max)));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// swap

class SwapCheck : public Check {
 public:
  std::optional<uint64_t> max;  // none: report only
  std::string name() const override { return "swap"; }
  CheckResult Run(const Context& ctx) const override {
    Result<MemoryInfo> memory = DetectMemory(ctx.root_dir);
    if (!memory.ok()) return Make(name(), Outcome::kError, memory.status().message());
    if (!memory->swap_total_bytes) {
      return Make(name(), Outcome::kError,
                  RootPath(ctx.root_dir, "/proc/meminfo") + " has no valid SwapTotal line");
    }
    const uint64_t swap = *memory->swap_total_bytes;
    const std::string measured = FormatSize(swap);
    const std::string threshold = max ? "<= " + FormatSize(*max) : "";
    if (max && swap > *max) {
      return Make(name(), Outcome::kFail,
                  fmt::format("SwapTotal {} is above {}: swapping stalls training steps; run "
                              "'swapoff -a' and remove swap from /etc/fstab (and the waagent "
                              "ResourceDisk.EnableSwap setting)",
                              measured, FormatSize(*max)),
                  measured, threshold);
    }
    return Make(name(), Outcome::kPass, "SwapTotal " + measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeSwap(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"max"}));
  auto check = std::make_unique<SwapCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  if (c.Has(Sub(key, "max"))) {
    ASSIGN_OR_RETURN(check->max, c.GetSize(Sub(key, "max"), 0));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// filesystems

class FilesystemsCheck : public Check {
 public:
  struct Entry {
    std::string path;
    bool rw = true;
    std::optional<Amount> min_free;
  };
  std::vector<Entry> entries;
  std::string name() const override { return "filesystems"; }
  // statvfs() on a dead NFS server blocks forever.
  bool isolate() const override { return true; }
  CheckResult Run(const Context& ctx) const override {
    if (entries.empty()) return Make(name(), Outcome::kSkip, "no filesystems listed");
    auto mounts = ReadMounts(ctx.root_dir);
    if (!mounts.ok()) {
      return Make(name(), Outcome::kError,
                  "cannot read the mount table: " + mounts.status().message());
    }
    const std::set<std::string> fstab = ReadFstabMountPoints(ctx.root_dir);
    std::vector<std::string> problems, found, wanted;
    for (const Entry& e : entries) {
      std::string want = e.path;
      if (e.rw) want += " rw";
      if (e.min_free) want += ", >= " + e.min_free->ToString() + " free";
      wanted.push_back(want);
      const std::string norm = NormalizePath(e.path);
      const std::string real = RootPath(ctx.root_dir, e.path);
      const Mount* m = MountFor(*mounts, e.path);
      const bool exact = m != nullptr && m->point == norm;
      // Every path lies on "/": a path that should be a mount point of its own
      // (it is in /etc/fstab) but is not would otherwise pass on the root
      // filesystem.
      std::string missing;
      if (m == nullptr) {
        missing = fmt::format("{} lies on no mounted filesystem", e.path);
      } else if (!exact && fstab.count(norm) != 0) {
        missing = fmt::format(
            "{} is in /etc/fstab but not mounted: run 'mount {}' and check "
            "its mount unit in 'journalctl -b'",
            e.path, e.path);
      } else if (!Exists(real)) {
        missing = fmt::format("{} does not exist: create it or mount its filesystem", e.path);
      }
      if (!missing.empty()) {
        problems.push_back(missing);
        found.push_back(e.path + ": not mounted");
        continue;
      }
      std::string seen = fmt::format("{}: {} {}", e.path, m->type, m->read_only ? "ro" : "rw");
      if (!exact) seen += " (on " + m->point + ")";
      if (e.rw && m->read_only) {
        problems.push_back(fmt::format(
            "{} is mounted read-only ({} on {}); the filesystem may have hit errors: check dmesg, "
            "then remount it read-write",
            e.path, m->device, m->point));
      }
      struct statvfs st {};
      if (::statvfs(real.c_str(), &st) != 0) {
        problems.push_back(fmt::format("statvfs({}) failed: {}", e.path, std::strerror(errno)));
        found.push_back(seen);
        continue;
      }
      const uint64_t total = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
      const uint64_t avail = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
      const double share = total > 0 ? static_cast<double>(avail) / static_cast<double>(total) : 0;
      seen += fmt::format(", {} free ({:.0f}%)", FormatSize(avail), share * 100);
      found.push_back(seen);
      if (e.min_free) {
        const bool low =
            e.min_free->percent ? share < e.min_free->fraction : avail < e.min_free->bytes;
        if (low) {
          problems.push_back(
              fmt::format("{} has {} free ({:.1f}%), below {}: delete old "
                          "checkpoints, logs or caches there",
                          e.path, FormatSize(avail), share * 100, e.min_free->ToString()));
        }
      }
    }
    const std::string measured = Join(found, "; ");
    const std::string threshold = Join(wanted, "; ");
    if (!problems.empty()) {
      return Make(name(), Outcome::kFail, Join(problems, "; "), measured, threshold);
    }
    return Make(name(), Outcome::kPass, measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeFilesystems(const Config& c, const std::string& key) {
  auto check = std::make_unique<FilesystemsCheck>();
  if (!c.Has(key)) return std::unique_ptr<Check>(std::move(check));
  Result<size_t> n = c.ListSize(key);
  if (!n.ok()) {
    return InvalidArgument(fmt::format(
        "{}: expected a list of {{path, rw, min_free}} entries, e.g. [{{path: /, min_free: 5%}}]",
        c.Locate(key)));
  }
  for (size_t i = 0; i < *n; ++i) {
    const std::string item = Sub(key, std::to_string(i));
    FilesystemsCheck::Entry e;
    if (c.IsScalar(item)) {  // a bare path: rw, any free space
      ASSIGN_OR_RETURN(e.path, c.GetString(item, ""));
    } else {
      RETURN_IF_ERROR(c.CheckKnownKeys(item, {"path", "rw", "min_free"}));
      if (!c.Has(Sub(item, "path"))) {
        return InvalidArgument(fmt::format("{}: each entry needs a 'path'", c.Locate(item)));
      }
      ASSIGN_OR_RETURN(e.path, c.GetString(Sub(item, "path"), ""));
      ASSIGN_OR_RETURN(e.rw, c.GetBool(Sub(item, "rw"), true));
      ASSIGN_OR_RETURN(e.min_free, GetAmount(c, Sub(item, "min_free")));
    }
    if (e.path.empty() || e.path.front() != '/') {
      return InvalidArgument(
          fmt::format("{}: path must be absolute, got '{}'", c.Locate(item), e.path));
    }
    check->entries.push_back(std::move(e));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// nvme

bool IsNamespaceOne(const std::string& name) {  // nvme<N>n1
  static const std::regex re("nvme[0-9]+n1");
  return std::regex_match(name, re);
}

struct NvmeCount {
  int count = 0;
  std::string source;
};

NvmeCount CountNvme(const std::string& root) {
  NvmeCount n;
  for (const std::string& name : ListDir(RootPath(root, "/dev"))) {
    if (IsNamespaceOne(name)) ++n.count;
  }
  n.source = "/dev/nvme*n1";
  if (n.count == 0) {
    // Containers often see a trimmed /dev; the controllers are still in sysfs.
    static const std::regex ctrl("nvme[0-9]+");
    int sys = 0;
    for (const std::string& name : ListDir(RootPath(root, "/sys/class/nvme"))) {
      if (std::regex_match(name, ctrl)) ++sys;
    }
    if (sys > 0) {
      n.count = sys;
      n.source = "/sys/class/nvme";
    }
  }
  return n;
}

class NvmeCheck : public Check {
 public:
  std::optional<int64_t> count;
  std::string scratch;
  std::string name() const override { return "nvme"; }
  bool isolate() const override { return true; }
  CheckResult Run(const Context& ctx) const override {
    const NvmeCount n = CountNvme(ctx.root_dir);
    std::string measured = fmt::format("{} NVMe", n.count);
    std::vector<std::string> thresholds;
    if (count) thresholds.push_back(fmt::format(">= {} NVMe", *count));
    if (!scratch.empty()) thresholds.push_back(scratch + " mounted");
    const std::string threshold = Join(thresholds, ", ");
    if (count && n.count < *count) {
      return Make(name(), Outcome::kFail,
                  fmt::format("found {} NVMe namespaces ({}), expected {}: a local NVMe disk is "
                              "missing; report the node for repair",
                              n.count, n.source, *count),
                  measured, threshold, "NHC2023");
    }
    std::string message = fmt::format("{} NVMe namespaces ({})", n.count, n.source);
    if (!scratch.empty()) {
      auto mounts = ReadMounts(ctx.root_dir);
      if (!mounts.ok()) {
        return Make(name(), Outcome::kError,
                    "cannot read the mount table: " + mounts.status().message(), measured,
                    threshold);
      }
      const Mount* m = MountAt(*mounts, scratch);
      if (m == nullptr) {
        return Make(name(), Outcome::kFail,
                    fmt::format("{}; the scratch {} is not mounted: assemble and mount the NVMe "
                                "disks there (e.g. a RAID 0 array formatted at boot)",
                                message, scratch),
                    measured + ", " + scratch + " not mounted", threshold);
      }
      measured += fmt::format(", {} on {}", scratch, m->device);
      message += fmt::format("; scratch {} is {} on {}", scratch, m->type, m->device);
    }
    return Make(name(), Outcome::kPass, message, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeNvme(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"count", "scratch"}));
  auto check = std::make_unique<NvmeCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->count, OptionalInt(c, Sub(key, "count"), 0));
  ASSIGN_OR_RETURN(check->scratch, c.GetString(Sub(key, "scratch"), ""));
  if (!check->scratch.empty() && check->scratch.front() != '/') {
    return InvalidArgument(fmt::format("{}: must be an absolute path, got '{}'",
                                       c.Locate(Sub(key, "scratch")), check->scratch));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// network

constexpr int kArphrdEther = 1;
constexpr int kArphrdLoopback = 772;

struct Interface {
  std::string name;
  std::string operstate;  // "up", "down", "unknown", ... ("" when unreadable)
  bool admin_up = false;  // IFF_UP in flags
  int type = -1;          // ARPHRD_*
  bool up() const { return operstate == "up" || (operstate == "unknown" && admin_up); }
};

Interface ReadInterface(const std::string& root, const std::string& name) {
  const std::string dir = RootPath(root, "/sys/class/net/" + name);
  Interface i;
  i.name = name;
  i.operstate = ReadTrimmed(dir + "/operstate").value_or("");
  if (auto flags = ReadTrimmed(dir + "/flags")) {
    unsigned long v = std::strtoul(flags->c_str(), nullptr, 0);
    i.admin_up = (v & 0x1) != 0;
  }
  if (auto type = ReadTrimmed(dir + "/type")) ParseNumber(*type, &i.type);
  return i;
}

class NetworkCheck : public Check {
 public:
  std::vector<std::string> up;
  std::string name() const override { return "network"; }
  CheckResult Run(const Context& ctx) const override {
    const std::string net = RootPath(ctx.root_dir, "/sys/class/net");
    if (up.empty()) {
      std::vector<std::string> ups;
      for (const std::string& n : ListDir(net)) {
        Interface i = ReadInterface(ctx.root_dir, n);
        if (n == "lo" || i.type == kArphrdLoopback) continue;
        if (i.up()) ups.push_back(n);
      }
      const std::string threshold = ">= 1 non-loopback interface up";
      if (ups.empty()) {
        return Make(name(), Outcome::kFail,
                    "no network interface other than loopback is up: check the VM's NIC and "
                    "'ip link'",
                    "0 up", threshold);
      }
      return Make(name(), Outcome::kPass, "up: " + Join(ups, ", "),
                  fmt::format("{} up", ups.size()), threshold);
    }
    std::vector<std::string> problems, states;
    for (const std::string& n : up) {
      if (!Exists(net + "/" + n)) {
        problems.push_back(n + " does not exist");
        states.push_back(n + " missing");
        continue;
      }
      Interface i = ReadInterface(ctx.root_dir, n);
      const std::string state = i.operstate.empty() ? "unreadable" : i.operstate;
      states.push_back(n + " " + state);
      if (!i.up()) problems.push_back(fmt::format("{} is {}", n, state));
    }
    const std::string threshold = "up: " + Join(up, ", ");
    const std::string measured = Join(states, ", ");
    if (!problems.empty()) {
      return Make(name(), Outcome::kFail,
                  Join(problems, "; ") +
                      ": bring it up ('ip link set <if> up'), check its cable/driver in dmesg",
                  measured, threshold);
    }
    return Make(name(), Outcome::kPass, measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeNetwork(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"up"}));
  auto check = std::make_unique<NetworkCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->up, c.GetStringList(Sub(key, "up")));
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// accelerated_networking

class AcceleratedNetworkingCheck : public Check {
 public:
  bool required = true;
  std::string name() const override { return "accelerated_networking"; }
  CheckResult Run(const Context& ctx) const override {
    const std::string net = RootPath(ctx.root_dir, "/sys/class/net");
    std::vector<std::string> vfs;
    for (const std::string& n : ListDir(net)) {
      std::error_code ec;
      const fs::path target = fs::read_symlink(net + "/" + n + "/device/driver", ec);
      if (ec) continue;
      const std::string driver = target.filename().string();
      if (driver != "mlx4_core" && driver != "mlx5_core") continue;
      // InfiniBand interfaces (ib0..) use mlx5_core too; the VF is Ethernet.
      const Interface i = ReadInterface(ctx.root_dir, n);
      if (i.type != -1 && i.type != kArphrdEther) continue;
      vfs.push_back(fmt::format("{} ({})", n, driver));
    }
    const std::string threshold = required ? "an mlx4/mlx5 VF" : "";
    if (vfs.empty()) {
      if (required) {
        return Make(name(), Outcome::kFail,
                    "no Ethernet interface uses the mlx4_core/mlx5_core driver (the SR-IOV "
                    "virtual function): turn on Accelerated Networking on the VM's NIC "
                    "(az network nic update --accelerated-networking true) and check that the "
                    "mlx5 driver is loaded",
                    "none", threshold);
      }
      return Make(name(), Outcome::kPass,
                  "no accelerated networking VF found (not required by this profile)", "none",
                  threshold);
    }
    return Make(name(), Outcome::kPass, "SR-IOV VF: " + Join(vfs, ", "), Join(vfs, ", "),
                threshold);
  }
};

Result<std::unique_ptr<Check>> MakeAcceleratedNetworking(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"required"}));
  auto check = std::make_unique<AcceleratedNetworkingCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->required, c.GetBool(Sub(key, "required"), true));
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// infiniband

class InfinibandCheck : public Check {
 public:
  std::optional<double> rate_gbps;
  std::optional<int64_t> count;
  std::string ports = "*";
  std::string name() const override { return "infiniband"; }
  CheckResult Run(const Context& ctx) const override {
    const std::string ib = RootPath(ctx.root_dir, "/sys/class/infiniband");
    struct Port {
      std::string id;  // "mlx5_ib0:1"
      bool active = false;
      std::string state;
      double rate = 0;
    };
    std::vector<Port> matched;
    for (const std::string& dev : ListDir(ib)) {
      for (const std::string& port : ListDir(ib + "/" + dev + "/ports")) {
        const std::string id = dev + ":" + port;
        // The glob matches "dev:port" ("mlx5_ib*:1") or the device alone ("mlx5_ib*").
        if (::fnmatch(ports.c_str(), id.c_str(), 0) != 0 &&
            ::fnmatch(ports.c_str(), dev.c_str(), 0) != 0) {
          continue;
        }
        const std::string dir = ib + "/" + dev + "/ports/" + port;
        Port p;
        p.id = id;
        p.state = ReadTrimmed(dir + "/state").value_or("unreadable");
        p.active = p.state.find("ACTIVE") != std::string::npos;
        if (auto rate = ReadTrimmed(dir + "/rate")) LeadingNumber(*rate, &p.rate);
        matched.push_back(std::move(p));
      }
    }
    std::vector<std::string> thresholds;
    if (count) thresholds.push_back(fmt::format(">= {} active", *count));
    if (rate_gbps) thresholds.push_back(fmt::format(">= {:g} Gb/s", *rate_gbps));
    const std::string threshold = Join(thresholds, ", ");
    if (matched.empty()) {
      if (!count && !rate_gbps) {
        return Make(name(), Outcome::kSkip,
                    fmt::format("no InfiniBand ports matching '{}'", ports));
      }
      return Make(name(), Outcome::kFail,
                  fmt::format("no InfiniBand ports matching '{}' in /sys/class/infiniband: the "
                              "HCAs are missing or their driver (mlx5_ib) is not loaded; check "
                              "'ibstat' and dmesg, then report the node",
                              ports),
                  "0 ports", threshold);
    }
    std::vector<std::string> down, slow;
    int active = 0;
    double min_rate = std::numeric_limits<double>::infinity();
    for (const Port& p : matched) {
      if (!p.active) {
        down.push_back(fmt::format("{} {}", p.id, p.state));
        continue;
      }
      ++active;
      min_rate = std::min(min_rate, p.rate);
      if (rate_gbps && p.rate < *rate_gbps)
        slow.push_back(fmt::format("{} at {:g} Gb/s", p.id, p.rate));
    }
    std::string measured = fmt::format("{} of {} active", active, matched.size());
    if (active > 0) measured += fmt::format(", min {:g} Gb/s", min_rate);
    const bool too_few = count ? active < *count : !down.empty();
    if (too_few) {
      return Make(name(), Outcome::kFail,
                  fmt::format("{} of {} ports active (down: {}): check the cable/switch port "
                              "('ibstat'), then report the node",
                              active, matched.size(), Join(down, ", ")),
                  measured, threshold);
    }
    if (!slow.empty()) {
      return Make(name(), Outcome::kFail,
                  fmt::format("ports below {:g} Gb/s: {}: the link trained at a lower speed; "
                              "report the node",
                              *rate_gbps, Join(slow, ", ")),
                  measured, threshold, "NHC2003");
    }
    std::string message = measured;
    if (!down.empty()) message += " (down: " + Join(down, ", ") + ")";
    return Make(name(), Outcome::kPass, message, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeInfiniband(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"rate_gbps", "count", "ports"}));
  auto check = std::make_unique<InfinibandCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  if (c.Has(Sub(key, "rate_gbps"))) {
    ASSIGN_OR_RETURN(check->rate_gbps, NonNegativeDouble(c, Sub(key, "rate_gbps"), 0));
  }
  ASSIGN_OR_RETURN(check->count, OptionalInt(c, Sub(key, "count"), 0));
  ASSIGN_OR_RETURN(check->ports, c.GetString(Sub(key, "ports"), "*"));
  if (check->ports.empty()) {
    return InvalidArgument(
        fmt::format("{}: must not be empty (use '*' for all ports)", c.Locate(Sub(key, "ports"))));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// services

class ServicesCheck : public Check {
 public:
  std::vector<std::string> services;
  std::string name() const override { return "services"; }
  CheckResult Run(const Context& ctx) const override {
    if (services.empty()) return Make(name(), Outcome::kSkip, "no services listed");
    std::string systemctl;
    if (Exists(RootPath(ctx.root_dir, "/run/systemd/system"))) {
      systemctl = FindExecutable(ctx.bin_dir.empty() ? "systemctl" : ctx.bin_dir + "/systemctl");
    }
    // Without systemd, a process of that name counts (comm holds 15 characters).
    std::set<std::string> comms;
    if (systemctl.empty()) {
      for (const std::string& pid : ListDir(RootPath(ctx.root_dir, "/proc"))) {
        if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
        if (auto comm = ReadTrimmed(RootPath(ctx.root_dir, "/proc/" + pid + "/comm"))) {
          comms.insert(*comm);
        }
      }
    }
    std::vector<std::string> states, problems, errors;
    int running = 0;
    for (const std::string& s : services) {
      if (!systemctl.empty()) {
        Result<SubprocessResult> out =
            RunSubprocess({systemctl, "is-active", s}, std::chrono::seconds(5));
        if (!out.ok()) {
          errors.push_back(fmt::format("{}: {}", s, out.status().message()));
          continue;
        }
        // The state is on stdout; stderr says why systemctl itself failed.
        const std::string& said = out->out.empty() ? out->err : out->out;
        std::string state(TrimSpace(said.substr(0, said.find('\n'))));
        if (state.empty()) state = fmt::format("exit {}", out->exit_code);
        states.push_back(s + " " + state);
        if (out->exit_code == 0) {
          ++running;
        } else {
          problems.push_back(
              fmt::format("{} is {} (start it: systemctl start {}; see "
                          "journalctl -u {})",
                          s, state, s, s));
        }
      } else {
        std::string proc = s;
        if (proc.size() > 8 && proc.compare(proc.size() - 8, 8, ".service") == 0) {
          proc.resize(proc.size() - 8);
        }
        if (proc.size() > 15) proc.resize(15);
        if (comms.count(proc) != 0) {
          ++running;
          states.push_back(s + " running");
        } else {
          states.push_back(s + " not running");
          problems.push_back(fmt::format("no process named '{}' is running: start {}", proc, s));
        }
      }
    }
    const std::string how = systemctl.empty() ? "process" : "systemd";
    const std::string measured =
        fmt::format("{} of {} running ({})", running, services.size(), how);
    const std::string threshold = "running: " + Join(services, ", ");
    if (!problems.empty()) {
      std::string message = Join(problems, "; ");
      if (!errors.empty()) message += "; could not ask about " + Join(errors, "; ");
      return Make(name(), Outcome::kFail, message, measured, threshold);
    }
    if (!errors.empty()) {
      return Make(name(), Outcome::kError, "systemctl failed: " + Join(errors, "; "), measured,
                  threshold);
    }
    return Make(name(), Outcome::kPass, Join(states, ", "), measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeServices(const Config& c, const std::string& key) {
  auto check = std::make_unique<ServicesCheck>();
  if (!c.Has(key)) return std::unique_ptr<Check>(std::move(check));
  if (c.IsScalar(key)) {
    Result<bool> on = c.GetBool(key, true);
    if (on.ok() && *on) return std::unique_ptr<Check>(std::move(check));
  }
  Result<std::vector<std::string>> names = c.GetStringList(key);
  if (!names.ok()) {
    return InvalidArgument(
        fmt::format("{}: expected a list of service names, e.g. [sshd, munge]", c.Locate(key)));
  }
  for (const std::string& n : *names) {
    // The name becomes a command argument; keep it to unit-name characters.
    const bool ok = !n.empty() && n.front() != '-' && std::all_of(n.begin(), n.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("-_.@:", ch) != nullptr;
    });
    if (!ok) {
      return InvalidArgument(fmt::format("{}: '{}' is not a service name", c.Locate(key), n));
    }
  }
  check->services = std::move(*names);
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// containers

const char* const kBinDirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                "/usr/bin",        "/sbin",          "/bin"};

std::string FindBinary(const std::string& root, const std::string& name) {
  for (const char* dir : kBinDirs) {
    const std::string p = RootPath(root, std::string(dir) + "/" + name);
    if (::access(p.c_str(), X_OK) == 0) return std::string(dir) + "/" + name;
  }
  return "";
}

// True when a line of `text` outside a comment mentions pyxis.
bool MentionsPyxis(std::string_view text) {
  bool found = false;
  ForEachLine(text, [&](std::string_view line) {
    line = TrimSpace(line);
    if (!line.empty() && line.front() != '#' && line.find("pyxis") != std::string_view::npos) {
      found = true;
    }
  });
  return found;
}

std::string FindPyxis(const std::string& root) {
  // Debian/Ubuntu: /usr/lib/x86_64-linux-gnu/slurm; RHEL: /usr/lib64/slurm; source:
  // /usr/local/lib/slurm.
  std::vector<std::string> dirs;
  for (const std::string& base : {std::string("/usr"), std::string("/usr/local")}) {
    for (const std::string& lib : ListDir(RootPath(root, base))) {
      if (lib.rfind("lib", 0) != 0) continue;
      const std::string libdir = base + "/" + lib;
      dirs.push_back(libdir + "/slurm");
      for (const std::string& sub : ListDir(RootPath(root, libdir))) {
        dirs.push_back(libdir + "/" + sub + "/slurm");
      }
    }
  }
  for (const std::string& d : dirs) {
    const std::string p = d + "/spank_pyxis.so";
    if (Exists(RootPath(root, p))) return p;
  }
  for (const std::string& conf :
       {std::string("/etc/slurm/plugstack.conf"), std::string("/etc/slurm-llnl/plugstack.conf")}) {
    if (auto text = ReadFile(RootPath(root, conf)); text.ok() && MentionsPyxis(*text)) return conf;
    const std::string dir = conf + ".d";
    for (const std::string& f : ListDir(RootPath(root, dir))) {
      if (auto text = ReadFile(RootPath(root, dir + "/" + f)); text.ok() && MentionsPyxis(*text)) {
        return dir + "/" + f;
      }
    }
  }
  return "";
}

class ContainersCheck : public Check {
 public:
  bool nvidia_toolkit = true, enroot = false, pyxis = false;
  std::string name() const override { return "containers"; }
  CheckResult Run(const Context& ctx) const override {
    const std::string& root = ctx.root_dir;
    std::string toolkit = FindBinary(root, "nvidia-ctk");
    if (toolkit.empty()) toolkit = FindBinary(root, "nvidia-container-cli");
    if (toolkit.empty()) {
      const std::string list = "/var/lib/dpkg/info/nvidia-container-toolkit.list";
      if (Exists(RootPath(root, list))) toolkit = list;
    }
    const std::string enroot_bin = FindBinary(root, "enroot");
    const std::string pyxis_at = FindPyxis(root);

    std::vector<std::string> found, missing, wanted;
    auto consider = [&](const char* what, bool want, const std::string& where, const char* fix) {
      if (want) wanted.push_back(what);
      if (!where.empty()) {
        found.push_back(fmt::format("{} ({})", what, where));
      } else if (want) {
        missing.push_back(fmt::format("{} is missing: {}", what, fix));
      }
    };
    consider("nvidia-container-toolkit", nvidia_toolkit, toolkit,
             "install the nvidia-container-toolkit package and run 'nvidia-ctk runtime configure'");
    consider("enroot", enroot, enroot_bin, "install enroot (github.com/NVIDIA/enroot releases)");
    consider("pyxis", pyxis, pyxis_at,
             "install pyxis and add 'required spank_pyxis.so' to /etc/slurm/plugstack.conf");
    const std::string measured = found.empty() ? "none" : Join(found, ", ");
    const std::string threshold = Join(wanted, ", ");
    if (!missing.empty()) {
      return Make(name(), Outcome::kFail, Join(missing, "; "), measured, threshold);
    }
    if (wanted.empty())
      return Make(name(), Outcome::kSkip, "nothing required", measured, threshold);
    return Make(name(), Outcome::kPass, measured, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeContainers(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params,
                   ExpectParamMap(c, key, {"nvidia_toolkit", "enroot", "pyxis"}));
  auto check = std::make_unique<ContainersCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->nvidia_toolkit, c.GetBool(Sub(key, "nvidia_toolkit"), true));
  ASSIGN_OR_RETURN(check->enroot, c.GetBool(Sub(key, "enroot"), false));
  ASSIGN_OR_RETURN(check->pyxis, c.GetBool(Sub(key, "pyxis"), false));
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// Bandwidth probes: shared verdict. Below the minimum fails; within 5% above
// it warns (AzNHC's bandwidth checks do the same), so a node drifting toward
// the line is seen before it drains.

CheckResult Verdict(const std::string& name, double value, double min, const std::string& unit_fmt,
                    const std::string& what, const std::string& fix, std::string detail) {
  const std::string measured = fmt::format(fmt::runtime(unit_fmt), value);
  const std::string threshold = min > 0 ? ">= " + fmt::format(fmt::runtime(unit_fmt), min) : "";
  if (value < min) {
    return Make(
        name, Outcome::kFail,
        fmt::format("{} {} is below {}: {}; {}", what, measured, threshold.substr(3), fix, detail),
        measured, threshold);
  }
  if (min > 0 && value < min * 1.05) {
    return Make(name, Outcome::kWarn,
                fmt::format("{} {} is within 5% of the minimum {}; {}", what, measured,
                            threshold.substr(3), detail),
                measured, threshold);
  }
  return Make(name, Outcome::kPass, fmt::format("{} {}; {}", what, measured, detail), measured,
              threshold);
}

// ---------------------------------------------------------------------------
// memory_bandwidth

struct TriadResult {
  double best_seconds = 0;
  int rounds = 0;
  int threads = 0;
  uint64_t elements = 0;  // per array
  bool correct = true;
};

// STREAM's triad a[i] = b[i] + s*c[i] on every usable CPU, each thread on its
// own slice (first touched by that thread, so pages land on its NUMA node);
// rounds repeat until `seconds` have passed and the best round counts.
TriadResult RunTriad(uint64_t elements, double seconds, int threads) {
  TriadResult r;
  r.threads = threads;
  r.elements = elements;
  std::unique_ptr<double[]> a(new double[elements]), b(new double[elements]),
      c(new double[elements]);
  constexpr double kScalar = 3.0;
  std::barrier sync(threads + 1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const uint64_t lo = elements * t / threads, hi = elements * (t + 1) / threads;
      for (uint64_t i = lo; i < hi; ++i) {
        a[i] = 0;
        b[i] = static_cast<double>(i % 7) + 1;
        c[i] = 2.0;
      }
      sync.arrive_and_wait();  // initialised
      while (true) {
        sync.arrive_and_wait();  // round starts
        if (stop.load(std::memory_order_relaxed)) break;
        double* __restrict pa = a.get();
        const double* __restrict pb = b.get();
        const double* __restrict pc = c.get();
        for (uint64_t i = lo; i < hi; ++i) pa[i] = pb[i] + kScalar * pc[i];
        sync.arrive_and_wait();  // round ends
      }
    });
  }
  sync.arrive_and_wait();
  const auto start = std::chrono::steady_clock::now();
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    const auto t0 = std::chrono::steady_clock::now();
    sync.arrive_and_wait();
    sync.arrive_and_wait();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    ++r.rounds;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.rounds >= 3 && elapsed >= seconds) break;
  }
  stop.store(true, std::memory_order_relaxed);
  sync.arrive_and_wait();
  for (auto& w : workers) w.join();
  r.best_seconds = best;
  // Small integers times 3.0 plus another: exact in double, so compare exactly.
  for (uint64_t i = 0; i < elements; ++i) {
    if (a[i] != (static_cast<double>(i % 7) + 1) + kScalar * 2.0) {
      r.correct = false;
      break;
    }
  }
  return r;
}

class MemoryBandwidthCheck : public Check {
 public:
  double min_gbs = 0;
  uint64_t size = 64ull << 20;  // bytes per array
  double seconds = 0.3;
  std::string name() const override { return "memory_bandwidth"; }
  bool parallel_safe() const override { return false; }
  std::chrono::milliseconds timeout() const override {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000) + 20000);
  }
  CheckResult Run(const Context&) const override {
    uint64_t bytes = size;
    std::string note;
    // Three arrays must fit in a quarter of what is free right now.
    const uint64_t avail = MemAvailableBytes();
    if (avail > 0 && 3 * bytes > avail / 4) {
      bytes = std::max<uint64_t>(avail / 12, 1 << 20);
      note = fmt::format(", lowered from {} to fit in free memory", FormatSize(size));
    }
    const uint64_t elements = std::max<uint64_t>(bytes / sizeof(double), 1024);
    const int threads = UsableCpus();
    TriadResult r;
    try {
      r = RunTriad(elements, seconds, threads);
    } catch (const std::bad_alloc&) {
      return Make(name(), Outcome::kError,
                  fmt::format("cannot allocate 3 x {}; lower memory_bandwidth.size",
                              FormatSize(elements * sizeof(double))));
    }
    if (!r.correct) {
      return Make(name(), Outcome::kFail,
                  "the triad computed wrong values: memory or CPU corruption; report the node");
    }
    // STREAM convention: the triad moves three arrays per round (reads b and
    // c, writes a), write-allocate traffic not counted; decimal GB/s.
    const double gbs = 3.0 * static_cast<double>(elements * sizeof(double)) / r.best_seconds / 1e9;
    const std::string detail =
        fmt::format("STREAM triad, best of {} rounds, {} threads, 3 x {}{}", r.rounds, r.threads,
                    FormatSize(elements * sizeof(double)), note);
    return Verdict(name(), gbs, min_gbs, "{:.2f} GB/s", "memory bandwidth",
                   "check for memory errors (mcelog, dmesg), a degraded NUMA configuration or "
                   "other processes using memory bandwidth",
                   detail);
  }
};

Result<std::unique_ptr<Check>> MakeMemoryBandwidth(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"min_gbs", "size", "seconds"}));
  auto check = std::make_unique<MemoryBandwidthCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->min_gbs, NonNegativeDouble(c, Sub(key, "min_gbs"), 0));
  ASSIGN_OR_RETURN(check->size, c.GetSize(Sub(key, "size"), 64ull << 20));
  if (check->size < 8192) {
    return InvalidArgument(fmt::format("{}: must be at least 8K, got {}",
                                       c.Locate(Sub(key, "size")), FormatSize(check->size)));
  }
  if (c.Has(Sub(key, "seconds"))) {
    // Either a bare number of seconds or a duration ("300ms").
    Result<std::chrono::nanoseconds> d = c.GetDuration(Sub(key, "seconds"), {});
    if (!d.ok()) return d.status();
    check->seconds = std::chrono::duration<double>(*d).count();
  }
  if (check->seconds <= 0 || check->seconds > 60) {
    return InvalidArgument(fmt::format("{}: must be more than 0 and at most 60 seconds",
                                       c.Locate(Sub(key, "seconds"))));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// disk_bandwidth

struct DiskResult {
  double write_gbs = 0, read_gbs = 0;
  bool direct = true;
  uint64_t bytes = 0;
};

// Writes `bytes` to a new file in `dir` and reads it back. The file is
// unlinked as soon as it exists, so a probe killed by its deadline leaves
// nothing behind.
Result<DiskResult> MeasureDisk(const std::string& dir, uint64_t bytes) {
  constexpr size_t kAlign = 4096;
  constexpr size_t kChunk = 4 << 20;
  bytes = std::max<uint64_t>(kAlign, bytes / kAlign * kAlign);
  const std::string path = fmt::format("{}/.gantry-health-disk-{}-{}", dir, ::getpid(),
                                       std::chrono::steady_clock::now().time_since_epoch().count());
  DiskResult r;
  r.bytes = bytes;
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  int fd = ::open(path.c_str(), flags | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {  // tmpfs and some overlays refuse O_DIRECT
    r.direct = false;
    fd = ::open(path.c_str(), flags, 0600);
  }
  if (fd < 0) return IoError("creating " + path, errno);
  ::unlink(path.c_str());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  void* raw = nullptr;
  const size_t chunk = static_cast<size_t>(std::min<uint64_t>(kChunk, bytes));
  if (::posix_memalign(&raw, kAlign, chunk) != 0) return ResourceExhausted("allocating the buffer");
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(raw), &std::free);
  // Not zeros: some devices and filesystems compress or skip them.
  for (size_t i = 0; i < chunk; ++i) buf.get()[i] = static_cast<char>((i * 131 + 7) & 0xff);

  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, bytes - off));
    const ssize_t w = ::pwrite(fd, buf.get(), n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return IoError("writing " + path, w < 0 ? errno : EIO);
    off += static_cast<uint64_t>(w);
  }
  if (::fsync(fd) != 0) return IoError("fsync " + path, errno);
  const double write_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Without O_DIRECT, read from the device, not from the page cache this file
  // just filled (only this file's pages are dropped).
  if (!r.direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  t0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, bytes - off));
    const ssize_t got = ::pread(fd, buf.get(), n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return IoError("reading back " + path, got < 0 ? errno : EIO);
    off += static_cast<uint64_t>(got);
  }
  const double read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t probe = std::min<size_t>(chunk, 4096);
  for (size_t i = 0; i < probe; ++i) {
    if (buf.get()[i] != static_cast<char>((i * 131 + 7) & 0xff)) {
      return DataLoss("the data read back from " + path + " differs from what was written");
    }
  }
  r.write_gbs = static_cast<double>(bytes) / std::max(write_s, 1e-9) / 1e9;
  r.read_gbs = static_cast<double>(bytes) / std::max(read_s, 1e-9) / 1e9;
  return r;
}

class DiskBandwidthCheck : public Check {
 public:
  std::string path;          // "" = scratch_dir, nvme scratch, /tmp
  std::string nvme_scratch;  // checks.nvme.scratch of the same profile
  uint64_t size = 256ull << 20;
  double min_write_gbs = 0, min_read_gbs = 0;
  std::string name() const override { return "disk_bandwidth"; }
  bool isolate() const override { return true; }
  bool parallel_safe() const override { return false; }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(60); }

  std::string Target(const Context& ctx) const {
    if (!path.empty()) return path;
    if (!ctx.scratch_dir.empty()) return ctx.scratch_dir;
    if (!nvme_scratch.empty()) {
      auto mounts = ReadMounts(ctx.root_dir);
      if (mounts.ok() && MountAt(*mounts, nvme_scratch) != nullptr) return nvme_scratch;
    }
    return "/tmp";
  }

  CheckResult Run(const Context& ctx) const override {
    const std::string target = Target(ctx);
    const std::string real = RootPath(ctx.root_dir, target);
    uint64_t bytes = size;
    std::string note;
    struct statvfs st {};
    if (::statvfs(real.c_str(), &st) != 0) {
      return Make(name(), Outcome::kError,
                  fmt::format("cannot use {}: {}; set disk_bandwidth.path to a writable directory",
                              target, std::strerror(errno)));
    }
    const uint64_t avail = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    if (bytes > avail / 2) {
      if (avail / 2 < (16ull << 20)) {
        return Make(name(), Outcome::kError,
                    fmt::format("{} has only {} free; the probe needs {}", target,
                                FormatSize(avail), FormatSize(size)));
      }
      bytes = avail / 2;
      note = fmt::format(", lowered from {} to half the free space", FormatSize(size));
    }
    Result<DiskResult> r = MeasureDisk(real, bytes);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kDataLoss) {
        return Make(name(), Outcome::kFail, r.status().message() + ": report the disk");
      }
      return Make(name(), Outcome::kError, r.status().message());
    }
    const std::string measured =
        fmt::format("write {}, read {}", Gbs(r->write_gbs), Gbs(r->read_gbs));
    std::vector<std::string> thresholds;
    if (min_write_gbs > 0) thresholds.push_back("write >= " + Gbs(min_write_gbs));
    if (min_read_gbs > 0) thresholds.push_back("read >= " + Gbs(min_read_gbs));
    const std::string threshold = Join(thresholds, ", ");
    const std::string detail =
        fmt::format("{} {} in {}{}{}", FormatSize(r->bytes), r->direct ? "O_DIRECT" : "buffered",
                    target, r->direct ? "" : " (O_DIRECT not supported there)", note);
    std::vector<std::string> slow, near;
    auto judge = [&](const char* what, double v, double min) {
      if (v < min)
        slow.push_back(fmt::format("{} {} < {}", what, Gbs(v), Gbs(min)));
      else if (min > 0 && v < min * 1.05)
        near.push_back(fmt::format("{} {}", what, Gbs(v)));
    };
    judge("write", r->write_gbs, min_write_gbs);
    judge("read", r->read_gbs, min_read_gbs);
    if (!slow.empty()) {
      return Make(name(), Outcome::kFail,
                  fmt::format("{}: the scratch disk is slow (a missing NVMe in the array, a "
                              "throttled disk or another job doing I/O); {}",
                              Join(slow, ", "), detail),
                  measured, threshold);
    }
    if (!near.empty()) {
      return Make(name(), Outcome::kWarn,
                  fmt::format("within 5% of the minimum: {}; {}", Join(near, ", "), detail),
                  measured, threshold);
    }
    return Make(name(), Outcome::kPass, measured + "; " + detail, measured, threshold);
  }
};

Result<std::unique_ptr<Check>> MakeDiskBandwidth(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params,
                   ExpectParamMap(c, key, {"path", "size", "min_write_gbs", "min_read_gbs"}));
  auto check = std::make_unique<DiskBandwidthCheck>();
  // The nvme check's scratch is the natural place to measure, when it is mounted.
  if (c.Has("checks.nvme.scratch")) {
    Result<std::string> scratch = c.GetString("checks.nvme.scratch", "");
    if (scratch.ok()) check->nvme_scratch = *scratch;
  }
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->path, c.GetString(Sub(key, "path"), ""));
  if (!check->path.empty() && check->path.front() != '/') {
    return InvalidArgument(fmt::format("{}: must be an absolute path, got '{}'",
                                       c.Locate(Sub(key, "path")), check->path));
  }
  ASSIGN_OR_RETURN(check->size, c.GetSize(Sub(key, "size"), 256ull << 20));
  if (check->size < 4096) {
    return InvalidArgument(fmt::format("{}: must be at least 4K, got {}",
                                       c.Locate(Sub(key, "size")), FormatSize(check->size)));
  }
  ASSIGN_OR_RETURN(check->min_write_gbs, NonNegativeDouble(c, Sub(key, "min_write_gbs"), 0));
  ASSIGN_OR_RETURN(check->min_read_gbs, NonNegativeDouble(c, Sub(key, "min_read_gbs"), 0));
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// collective

bool GpusReported(const Context& ctx) {
  if (ctx.nvml == nullptr) return false;
  Result<int> n = ctx.nvml->DeviceCount();
  return n.ok() && *n > 0;
}

uint64_t ShmFreeBytes() {
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

class CollectiveCheck : public Check {
 public:
  double min_busbw_gbs = 0;
  uint64_t size = 16ull << 20;
  int64_t ranks = 0;
  std::string name() const override { return "collective"; }
  bool parallel_safe() const override { return false; }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(60); }
  CheckResult Run(const Context& ctx) const override {
    comm::LaunchOptions launch;
    launch.pin = true;
    launch.timeout_s = 30;  // a rank that stops answering fails the check, not the run
    uint64_t bytes = size;
    std::string note;
    // NCCL on GPUs; shared memory between CPU ranks on a CPU node. A GPU
    // profile's busbw threshold means nothing for CPU ranks, so a GPU node
    // without NCCL in this build skips.
    const bool gpus = GpusReported(ctx);
    if (gpus && !comm::BackendCompiled(comm::Backend::kNccl)) {
      return Make(name(), Outcome::kSkip,
                  "the node has GPUs but this build has no NCCL: rebuild with "
                  "-DGANTRY_WITH_CUDA=ON to measure the GPU collective bandwidth");
    }
    if (gpus) {
      launch.backend = comm::Backend::kNccl;
      launch.ranks = static_cast<int>(ranks);  // 0: one per GPU
    } else {
      launch.backend = comm::Backend::kShm;
      // Two ranks at least: one rank moves no bytes (busbw factor 0).
      launch.ranks = ranks > 0 ? static_cast<int>(ranks) : std::clamp(UsableCpus(), 2, 8);
      // Every rank's send and receive buffers live in /dev/shm, plus a control segment.
      const uint64_t free = ShmFreeBytes();
      auto needed = [&](uint64_t b) {
        return static_cast<uint64_t>(launch.ranks) * 2 * b + (16ull << 20);
      };
      while (free > 0 && bytes > (1ull << 20) && needed(bytes) > free) bytes /= 2;
      if (bytes != size) note = fmt::format(", lowered from {} to fit /dev/shm", FormatSize(size));
    }
    bench::BenchOptions options;
    options.min_bytes = options.max_bytes = bytes;
    options.iters = 10;
    options.warmup_iters = 2;
    options.check_iters = 1;
    options.program = "gantry health";
    Result<bench::Report> report =
        bench::RunBenchmarkLocal(launch, bench::Collective::kAllReduce, options);
    if (!report.ok()) {
      return Make(name(), Outcome::kError, "all_reduce did not run: " + report.status().message());
    }
    if (report->rows.empty()) return Make(name(), Outcome::kError, "all_reduce measured nothing");
    if (report->wrong_results()) {
      return Make(name(), Outcome::kFail,
                  fmt::format("all_reduce produced wrong results ({} checks with wrong "
                              "elements): memory or interconnect corruption; report the node",
                              report->out_of_bounds));
    }
    const bench::Row& largest = *std::max_element(
        report->rows.begin(), report->rows.end(),
        [](const bench::Row& a, const bench::Row& b) { return a.size_bytes < b.size_bytes; });
    const double busbw = std::max(largest.out_of_place.busbw_gbs, largest.in_place.busbw_gbs);
    const std::string detail =
        fmt::format("all_reduce {} on {} ranks ({}){}", FormatSize(largest.size_bytes),
                    report->nranks, report->backend, note);
    return Verdict(name(), busbw, min_busbw_gbs, "{:.2f} GB/s", "busbw",
                   "check for other jobs on the node, GPU/NIC topology (NVLink, PCIe) and "
                   "NCCL settings",
                   detail);
  }
};

Result<std::unique_ptr<Check>> MakeCollective(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params, ExpectParamMap(c, key, {"min_busbw_gbs", "size", "ranks"}));
  auto check = std::make_unique<CollectiveCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->min_busbw_gbs, NonNegativeDouble(c, Sub(key, "min_busbw_gbs"), 0));
  ASSIGN_OR_RETURN(check->size, c.GetSize(Sub(key, "size"), 16ull << 20));
  if (check->size < 4) {
    return InvalidArgument(
        fmt::format("{}: must be at least 4 bytes (one float)", c.Locate(Sub(key, "size"))));
  }
  ASSIGN_OR_RETURN(check->ranks, c.GetInt(Sub(key, "ranks"), 0));
  if (check->ranks < 0 || check->ranks == 1 || check->ranks > 1024) {
    return InvalidArgument(fmt::format("{}: must be 0 (automatic) or 2..1024, got {}",
                                       c.Locate(Sub(key, "ranks")), check->ranks));
  }
  return std::unique_ptr<Check>(std::move(check));
}

// ---------------------------------------------------------------------------
// gemm

class GemmCheck : public Check {
 public:
  double min_tflops = 0;
  std::optional<double> min_share_of_peak;
  std::optional<bench::GemmType> type;  // GPU only; the CPU measures fp32
  std::string name() const override { return "gemm"; }
  bool parallel_safe() const override { return false; }
  // A sick GPU can hang a CUDA call; on the CPU, isolation also keeps
  // OpenBLAS's thread pool out of the calling process.
  bool isolate() const override { return true; }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(60); }
  CheckResult Run(const Context& ctx) const override {
    bench::GemmOptions g;
    const bool gpus = GpusReported(ctx);
    if (gpus && bench::CudaGemmAvailable()) {
      g.device = bench::GemmDevice::kCuda;
      g.type = type.value_or(bench::GemmType::kBf16);
    } else if (gpus) {
      // A GPU profile's TFLOPS threshold means nothing for the CPU.
      return Make(name(), Outcome::kSkip,
                  "the node has GPUs but this build has no CUDA GEMM: rebuild with "
                  "-DGANTRY_WITH_CUDA=ON to measure it");
    } else {
      g.device = bench::GemmDevice::kCpu;
      g.type = bench::GemmType::kFp32;
      g.m = g.n = g.k = 1024;
    }
    g.warmup = 1;
    g.min_seconds = 0.3;
    Result<bench::GemmResult> r = bench::MeasureGemm(g);
    if (!r.ok()) {
      const StatusCode code = r.status().code();
      if (code == StatusCode::kUnavailable || code == StatusCode::kUnimplemented) {
        return Make(name(), Outcome::kSkip, "GEMM not measured: " + r.status().message());
      }
      return Make(name(), Outcome::kError, "GEMM failed: " + r.status().message());
    }
    const std::string detail =
        fmt::format("{} {} {}x{}x{} on {} ({})", bench::GemmTypeName(r->type),
                    bench::GemmDeviceName(r->device), r->m, r->n, r->k, r->device_name, r->backend);
    if (!r->verified) {
      return Make(name(), Outcome::kFail,
                  fmt::format("GEMM results are wrong (max relative error {:g}, tolerance {:g}): "
                              "the device computes incorrectly; report the node; {}",
                              r->max_rel_error, r->tolerance, detail),
                  fmt::format("{:.2f} TFLOPS", r->tflops));
    }
    CheckResult result = Verdict(name(), r->tflops, min_tflops, "{:.2f} TFLOPS", "GEMM",
                                 "check clocks (gantry tune), thermal throttling and other "
                                 "processes on the device",
                                 detail);
    if (r->mfu) result.measured += fmt::format(" ({:.0f}% of peak)", *r->mfu * 100);
    if (min_share_of_peak && result.outcome != Outcome::kFail) {
      const std::string share_threshold =
          fmt::format(">= {:.0f}% of peak", *min_share_of_peak * 100);
      result.threshold =
          result.threshold.empty() ? share_threshold : result.threshold + ", " + share_threshold;
      if (!r->mfu) {
        result.outcome = Outcome::kWarn;
        result.message += "; the device's peak is unknown (" + r->peak_source +
                          "), so the share of peak was not checked";
      } else if (*r->mfu < *min_share_of_peak) {
        result.outcome = Outcome::kFail;
        result.message = fmt::format(
            "GEMM reached {:.0f}% of the {:.1f} TFLOPS peak, below {:.0f}%: check clocks (gantry "
            "tune), thermal throttling and other processes; {}",
            *r->mfu * 100, r->peak_tflops.value_or(0), *min_share_of_peak * 100, detail);
      }
    }
    return result;
  }
};

Result<std::unique_ptr<Check>> MakeGemm(const Config& c, const std::string& key) {
  ASSIGN_OR_RETURN(const bool params,
                   ExpectParamMap(c, key, {"min_tflops", "min_share_of_peak", "type"}));
  auto check = std::make_unique<GemmCheck>();
  if (!params) return std::unique_ptr<Check>(std::move(check));
  ASSIGN_OR_RETURN(check->min_tflops, NonNegativeDouble(c, Sub(key, "min_tflops"), 0));
  const std::string share_key = Sub(key, "min_share_of_peak");
  if (c.Has(share_key)) {
    ASSIGN_OR_RETURN(std::string text, c.GetString(share_key, ""));
    Result<std::optional<double>> pct = ParsePercentText(text);
    double v = 0;
    if (pct.ok() && pct->has_value()) {
      v = **pct;
    } else if (!ParseNumber(text, &v) || v < 0 || v > 1) {
      return InvalidArgument(fmt::format(
          "{}: expected a fraction between 0 and 1 or a percentage such as '60%', got '{}'",
          c.Locate(share_key), text));
    }
    check->min_share_of_peak = v;
  }
  if (c.Has(Sub(key, "type"))) {
    ASSIGN_OR_RETURN(std::string text, c.GetString(Sub(key, "type"), ""));
    Result<bench::GemmType> t = bench::ParseGemmType(text);
    if (!t.ok()) {
      return InvalidArgument(
          fmt::format("{}: {}", c.Locate(Sub(key, "type")), t.status().message()));
    }
    check->type = *t;
  }
  return std::unique_ptr<Check>(std::move(check));
}

}  // namespace

void RegisterHostChecks(Registry* r) {
  r->Add("cpu", MakeCpu);
  r->Add("memory", MakeMemory);
  r->Add("swap", MakeSwap);
  r->Add("filesystems", MakeFilesystems);
  r->Add("nvme", MakeNvme);
  r->Add("network", MakeNetwork);
  r->Add("accelerated_networking", MakeAcceleratedNetworking);
  r->Add("infiniband", MakeInfiniband);
  r->Add("services", MakeServices);
  r->Add("containers", MakeContainers);
  r->Add("memory_bandwidth", MakeMemoryBandwidth);
  r->Add("disk_bandwidth", MakeDiskBandwidth);
  r->Add("collective", MakeCollective);
  r->Add("gemm", MakeGemm);
}

}  // namespace gantry::health
