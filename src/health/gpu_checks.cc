// GPU checks through NVML (and the kernel log for Xids), with AzNHC's
// semantics (reference: shared/reference/health.md §1, §3):
//   gpu_count        NVML's device count == count; fault NHC2009.
//   gpu_persistence  persistence mode on every GPU (when required).
//   gpu_driver       NVML's driver version == version (when given); the
//                    user-space library agrees with the loaded kernel module
//                    (/proc/driver/nvidia/version); every GPU is the same
//                    model. NVML's driver version is system-wide, so "all
//                    GPUs agree" is checked as "one driver, one GPU model".
//   gpu_ecc          any SRAM uncorrectable error, SRAM correctable errors
//                    above sram_correctable_max, or a DRAM counter above
//                    dram_max fails; fault NHC2019.
//   gpu_row_remap    a pending or failed row remap fails (pages pending
//                    retirement on pre-Ampere GPUs); fault NHC2007.
//   gpu_xid          Xids from the list within the window in the kernel log
//                    (syslog files, rotated and .gz ones, and journalctl -k).
//   gpu_clocks       clock event reasons other than idle / application
//                    setting / SW power cap are logged as a warning, and
//                    fail only when listed in fail_on (AzNHC never fails).
//   gpu_nvlink       every reported link active (or min_active per GPU); NHC2016.
//   gpu_pcie         link width below min_width (default: max) fails; a
//                    generation below the maximum only warns, because idle
//                    GPUs lower the PCIe speed to save power.
//   gpu_thermal      temperature <= max_temp_c and power <= enforced limit.
//   gpu_bandwidth    pinned cudaMemcpy H2D/D2H GB/s (CUDA builds; skip otherwise);
//                    fault NHC2020, warn below 1.05x the threshold as AzNHC.
// A GPU that does not support a query (NVML_ERROR_NOT_SUPPORTED) is noted,
// not failed; any other NVML error makes the check an error (NHCNA), except
// "GPU is lost", which is a missing GPU (NHC2009).
#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "gantry/config.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/health/check.h"
#include "gantry/health/nvml.h"

#if GANTRY_HAVE_CUDA
// The C API only (no C++ overloads): gpu_bandwidth dlopens the CUDA runtime on
// first use and binds these functions by name (CudartApi).
#include <cuda_runtime_api.h>

#include "gantry/core/plugin.h"
#endif

namespace gantry::health {
namespace {

using std::chrono::system_clock;

constexpr char kFaultMissingGpu[] = "NHC2009";
constexpr char kFaultEcc[] = "NHC2019";
constexpr char kFaultRowRemap[] = "NHC2007";
constexpr char kFaultNvLink[] = "NHC2016";
constexpr char kFaultBandwidth[] = "NHC2020";
constexpr char kFaultSetup[] = "NHCNA";

// The parameters of one check at `key` ("checks.gpu_ecc"). `gpu_ecc: true`
// or an empty entry means "all defaults".
class Params {
 public:
  Params(const Config& c, std::string key)
      : c_(c), key_(std::move(key)), scalar_(c.IsScalar(key_)) {}
  std::string K(std::string_view name) const { return key_ + "." + std::string(name); }
  bool Has(std::string_view name) const { return !scalar_ && c_.Has(K(name)); }
  Status Known(const std::vector<std::string>& names) const {
    return scalar_ ? Status::Ok() : c_.CheckKnownKeys(key_, names);
  }
  Result<int64_t> Int(std::string_view name, int64_t fallback) const {
    if (scalar_) return fallback;
    ASSIGN_OR_RETURN(int64_t v, c_.GetInt(K(name), fallback));
    if (v < 0) {
      return InvalidArgument(
          fmt::format("{}: must not be negative, got {}", c_.Locate(K(name)), v));
    }
    return v;
  }
  Result<bool> Bool(std::string_view name, bool fallback) const {
    return scalar_ ? Result<bool>(fallback) : c_.GetBool(K(name), fallback);
  }
  Result<std::string> String(std::string_view name, std::string fallback) const {
    return scalar_ ? Result<std::string>(fallback) : c_.GetString(K(name), fallback);
  }
  Result<std::vector<std::string>> List(std::string_view name) const {
    return scalar_ ? Result<std::vector<std::string>>(std::vector<std::string>{})
                   : c_.GetStringList(K(name));
  }
  Result<std::chrono::nanoseconds> Duration(std::string_view name,
                                            std::chrono::nanoseconds fallback) const {
    return scalar_ ? Result<std::chrono::nanoseconds>(fallback) : c_.GetDuration(K(name), fallback);
  }
  Result<double> Double(std::string_view name, double fallback) const {
    return scalar_ ? Result<double>(fallback) : c_.GetDouble(K(name), fallback);
  }
  std::string Locate(std::string_view name) const { return c_.Locate(K(name)); }

 private:
  const Config& c_;
  std::string key_;
  bool scalar_;
};

// Collects per-GPU findings and turns them into one result.
class Findings {
 public:
  explicit Findings(Nvml* nvml) : nvml_(nvml) {}

  void Fail(std::string msg, const char* code = "") {
    if (fail_code_.empty()) fail_code_ = code;
    fails_.push_back(std::move(msg));
  }
  void Warn(std::string msg) { warns_.push_back(std::move(msg)); }
  void Note(std::string msg) { notes_.push_back(std::move(msg)); }
  // An NVML error for `gpu`: "not supported" is a note, a lost GPU a
  // failure, anything else an error.
  void Error(const Status& s) {
    if (s.code() == StatusCode::kUnimplemented) {
      Note(s.message());
    } else if (s.message().find("GPU is lost") != std::string::npos ||
               s.message().find("requires restart") != std::string::npos) {
      Fail(s.message() + " (the GPU fell off the bus: reset or replace it)", kFaultMissingGpu);
    } else {
      errors_.push_back(s.message());
    }
  }
  bool any_fail() const { return !fails_.empty(); }

  // "GPU 3 (00000001:00:00.0)" for messages.
  std::string Gpu(int i) const {
    if (nvml_ == nullptr) return fmt::format("GPU {}", i);
    Result<std::string> bus = nvml_->PciBusId(i);
    return bus.ok() ? fmt::format("GPU {} ({})", i, *bus) : fmt::format("GPU {}", i);
  }

  CheckResult Finish(CheckResult r, std::string pass_message) const {
    if (!fails_.empty()) {
      r.outcome = Outcome::kFail;
      r.message = Join(fails_, "; ");
      r.fault_code = fail_code_;
    } else if (!errors_.empty()) {
      r.outcome = Outcome::kError;
      r.message = Join(errors_, "; ");
      r.fault_code = kFaultSetup;
    } else if (!warns_.empty()) {
      r.outcome = Outcome::kWarn;
      r.message = Join(warns_, "; ");
    } else {
      r.outcome = Outcome::kPass;
      r.message = std::move(pass_message);
    }
    if (!notes_.empty() && r.outcome != Outcome::kFail && r.outcome != Outcome::kError) {
      r.message +=
          (r.message.empty() ? "" : " (") + Join(notes_, "; ") + (r.message.empty() ? "" : ")");
    }
    return r;
  }

 private:
  Nvml* nvml_;
  std::vector<std::string> fails_, warns_, errors_, notes_;
  std::string fail_code_;
};

CheckResult Named(std::string name) {
  CheckResult r;
  r.name = std::move(name);
  return r;
}

CheckResult SkipNoNvml(std::string name) {
  CheckResult r = Named(std::move(name));
  r.outcome = Outcome::kSkip;
  r.message = "NVML is not loaded (no NVIDIA driver): nothing to check";
  return r;
}

CheckResult ErrorResult(std::string name, const Status& s) {
  CheckResult r = Named(std::move(name));
  r.outcome = Outcome::kError;
  r.message = s.message();
  r.fault_code = kFaultSetup;
  return r;
}

// Base for checks that talk to the driver: a hung NVML call must not hang
// the run, so the runner isolates them in a child with a deadline.
class NvmlCheck : public Check {
 public:
  explicit NvmlCheck(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool isolate() const override { return true; }

  CheckResult Run(const Context& ctx) const override {
    if (ctx.nvml == nullptr) return SkipNoNvml(name_);
    Result<int> n = ctx.nvml->DeviceCount();
    if (!n.ok()) return ErrorResult(name_, n.status());
    Findings f(ctx.nvml);
    CheckResult r = Named(name_);
    return RunGpus(ctx, *ctx.nvml, *n, f, r);
  }

 protected:
  virtual CheckResult RunGpus(const Context& ctx, Nvml& nvml, int count, Findings& f,
                              CheckResult r) const = 0;

 private:
  std::string name_;
};

// ---------------------------------------------------------------- gpu_count

class GpuCountCheck : public Check {
 public:
  explicit GpuCountCheck(int64_t count) : count_(count) {}
  std::string name() const override { return "gpu_count"; }
  bool isolate() const override { return true; }
  CheckResult Run(const Context& ctx) const override {
    CheckResult r = Named(name());
    r.threshold = fmt::format("== {}", count_);
    if (ctx.nvml == nullptr) {
      r.measured = "0";
      if (count_ == 0) {
        r.message = "no NVIDIA driver and no GPUs expected";
        return r;
      }
      r.outcome = Outcome::kFail;
      r.fault_code = kFaultMissingGpu;
      r.message = fmt::format(
          "expected {} GPUs, NVML is not loaded (no NVIDIA driver?): install or load the driver, "
          "then check nvidia-smi",
          count_);
      return r;
    }
    Result<int> n = ctx.nvml->DeviceCount();
    if (!n.ok()) return ErrorResult(name(), n.status());
    r.measured = std::to_string(*n);
    if (*n == count_) {
      r.message = fmt::format("{} GPUs", *n);
      return r;
    }
    r.outcome = Outcome::kFail;
    r.fault_code = kFaultMissingGpu;
    std::vector<std::string> seen;
    for (int i = 0; i < *n; ++i) {
      Result<std::string> bus = ctx.nvml->PciBusId(i);
      seen.push_back(bus.ok() ? *bus : fmt::format("GPU {}", i));
    }
    r.message = fmt::format("expected {} GPUs, NVML sees {}{}{}", count_, *n,
                            seen.empty() ? "" : ": ", Join(seen, ", "));
    if (*n < count_)
      r.message += " (a GPU fell off the bus or is not attached: reboot or redeploy the VM)";
    return r;
  }

 private:
  int64_t count_;
};

// ---------------------------------------------------------- gpu_persistence

class GpuPersistenceCheck : public NvmlCheck {
 public:
  explicit GpuPersistenceCheck(bool required) : NvmlCheck("gpu_persistence"), required_(required) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    std::vector<std::string> off;
    for (int i = 0; i < count; ++i) {
      Result<bool> on = nvml.PersistenceMode(i);
      if (!on.ok()) {
        f.Error(on.status());
      } else if (!*on) {
        off.push_back(std::to_string(i));
      }
    }
    r.measured = fmt::format("{}/{} on", count - static_cast<int>(off.size()), count);
    r.threshold = required_ ? "all on" : "";
    if (!off.empty()) {
      std::string msg = fmt::format(
          "persistence mode is off on GPU {}: enable it with `gantry tune --apply` or the "
          "nvidia-persistenced service",
          Join(off, ", "));
      if (required_) {
        f.Fail(msg);
      } else {
        f.Note(msg);
      }
    }
    return f.Finish(std::move(r), fmt::format("persistence mode on for all {} GPUs", count));
  }

 private:
  bool required_;
};

// --------------------------------------------------------------- gpu_driver

// The version in /proc/driver/nvidia/version ("... Kernel Module  550.54.15  ...").
std::string KernelModuleVersion(const std::string& root_dir) {
  std::string path = root_dir + "/proc/driver/nvidia/version";
  FILE* fp = std::fopen(path.c_str(), "r");
  if (fp == nullptr) return "";
  char line[512] = {};
  std::string first = std::fgets(line, sizeof(line), fp) != nullptr ? line : "";
  std::fclose(fp);
  size_t module = first.find("Module");
  if (module == std::string::npos) return "";
  static const std::regex kVersion(R"((\d+\.\d+(\.\d+)?))");
  std::smatch m;
  std::string rest = first.substr(module);
  if (!std::regex_search(rest, m, kVersion)) return "";
  return m[1].str();
}

class GpuDriverCheck : public NvmlCheck {
 public:
  explicit GpuDriverCheck(std::string version)
      : NvmlCheck("gpu_driver"), version_(std::move(version)) {}

 protected:
  CheckResult RunGpus(const Context& ctx, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    Result<std::string> v = nvml.DriverVersion();
    if (!v.ok()) return ErrorResult(name(), v.status());
    r.measured = *v;
    r.threshold = version_.empty() ? "" : "== " + version_;
    if (!version_.empty() && *v != version_) {
      f.Fail(
          fmt::format("NVIDIA driver {} is installed, the profile expects {}: install {} or "
                      "update the profile",
                      *v, version_, version_));
    }
    std::string kernel = KernelModuleVersion(ctx.root_dir);
    if (!kernel.empty() && kernel != *v) {
      f.Fail(
          fmt::format("NVML library is {} but the loaded kernel module is {}: a driver upgrade "
                      "is half done; reboot (or reload the nvidia modules)",
                      *v, kernel));
    }
    std::map<std::string, std::vector<std::string>> models;
    for (int i = 0; i < count; ++i) {
      Result<std::string> name = nvml.Name(i);
      if (!name.ok()) {
        f.Error(name.status());
        continue;
      }
      models[*name].push_back(std::to_string(i));
    }
    if (models.size() > 1) {
      std::vector<std::string> parts;
      for (const auto& [model, gpus] : models) {
        parts.push_back(fmt::format("{} (GPU {})", model, Join(gpus, ", ")));
      }
      f.Fail("GPUs of different models under one driver: " + Join(parts, "; "));
    }
    std::string model = models.size() == 1 ? models.begin()->first : "";
    return f.Finish(std::move(r), fmt::format("driver {} on {} GPUs{}{}", *v, count,
                                              model.empty() ? "" : ", all ", model));
  }

 private:
  std::string version_;
};

// ------------------------------------------------------------------ gpu_ecc

class GpuEccCheck : public NvmlCheck {
 public:
  GpuEccCheck(uint64_t dram_max, uint64_t sram_correctable_max)
      : NvmlCheck("gpu_ecc"), dram_max_(dram_max), sram_max_(sram_correctable_max) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    uint64_t worst_dram = 0, worst_sram_c = 0, worst_sram_u = 0;
    for (int i = 0; i < count; ++i) {
      Result<EccCounts> e = nvml.Ecc(i);
      if (!e.ok()) {
        if (e.status().code() == StatusCode::kUnimplemented) {
          f.Warn(fmt::format("ECC is not enabled or not supported on GPU {} ({})", i,
                             e.status().message()));
        } else {
          f.Error(e.status());
        }
        continue;
      }
      uint64_t dram = std::max(e->dram_corrected, e->dram_uncorrected);
      worst_dram = std::max(worst_dram, dram);
      worst_sram_c = std::max(worst_sram_c, e->sram_corrected);
      worst_sram_u = std::max(worst_sram_u, e->sram_uncorrected);
      if (e->sram_uncorrected > 0) {
        f.Fail(
            fmt::format("{}: {} uncorrectable SRAM ECC errors (any is a failure): reset the GPU; "
                        "if they persist, have it replaced",
                        f.Gpu(i), e->sram_uncorrected),
            kFaultEcc);
      }
      if (e->sram_corrected > sram_max_) {
        f.Fail(fmt::format("{}: {} correctable SRAM ECC errors, more than {}", f.Gpu(i),
                           e->sram_corrected, sram_max_),
               kFaultEcc);
      }
      if (e->dram_corrected > dram_max_ || e->dram_uncorrected > dram_max_) {
        f.Fail(fmt::format("{}: DRAM ECC errors corrected {}, uncorrected {}, more than {}",
                           f.Gpu(i), e->dram_corrected, e->dram_uncorrected, dram_max_),
               kFaultEcc);
      }
    }
    r.measured = fmt::format("dram {}, sram corrected {}, sram uncorrected {}", worst_dram,
                             worst_sram_c, worst_sram_u);
    r.threshold = fmt::format("dram <= {}, sram corrected <= {}, sram uncorrected == 0", dram_max_,
                              sram_max_);
    return f.Finish(std::move(r), fmt::format("ECC counters within limits on {} GPUs", count));
  }

 private:
  uint64_t dram_max_, sram_max_;
};

// ------------------------------------------------------------ gpu_row_remap

class GpuRowRemapCheck : public NvmlCheck {
 public:
  GpuRowRemapCheck() : NvmlCheck("gpu_row_remap") {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    int checked = 0, pending_gpus = 0, failed_gpus = 0;
    for (int i = 0; i < count; ++i) {
      Result<RemappedRows> rows = nvml.RemappedRowsOf(i);
      if (rows.ok()) {
        ++checked;
        pending_gpus += rows->pending ? 1 : 0;
        failed_gpus += rows->failure ? 1 : 0;
        if (rows->failure) {
          f.Fail(fmt::format("{}: a row remap failed (no spare rows left): the GPU needs "
                             "replacement",
                             f.Gpu(i)),
                 kFaultRowRemap);
        } else if (rows->pending) {
          f.Fail(fmt::format("{}: a row remap is pending: reset the GPU or reboot to apply it",
                             f.Gpu(i)),
                 kFaultRowRemap);
        }
        continue;
      }
      if (rows.status().code() != StatusCode::kUnimplemented) {
        f.Error(rows.status());
        continue;
      }
      // Pre-Ampere GPUs retire pages instead of remapping rows.
      Result<bool> pending = nvml.RetiredPagesPending(i);
      if (pending.ok()) {
        ++checked;
        if (*pending) {
          ++pending_gpus;
          f.Fail(fmt::format("{}: pages are pending retirement: reset the GPU or reboot", f.Gpu(i)),
                 kFaultRowRemap);
        }
      } else if (pending.status().code() == StatusCode::kUnimplemented) {
        f.Note(fmt::format("GPU {} reports neither row remapping nor page retirement", i));
      } else {
        f.Error(pending.status());
      }
    }
    r.measured = fmt::format("{} pending, {} failed ({} GPUs)", pending_gpus, failed_gpus, checked);
    r.threshold = "no pending or failed remap";
    return f.Finish(std::move(r),
                    fmt::format("no pending or failed row remaps on {} GPUs", checked));
  }
};

// ------------------------------------------------------------------ gpu_xid

// Seconds since the epoch of a log line's timestamp, or nullopt. Accepts
// classic syslog ("Nov 30 04:00:00 host ...", local time, no year: the year
// that puts it at or before `now`) and ISO 8601 / RFC 3339
// ("2026-11-30T04:00:00.123456+00:00", "+0000" or "Z").
std::optional<int64_t> ParseLogTime(std::string_view line, int64_t now) {
  static const std::regex kIso(
      R"(^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:?\d{2})?)");
  static const std::regex kClassic(R"(^([A-Z][a-z]{2}) +(\d{1,2}) (\d{2}):(\d{2}):(\d{2}))");
  std::string head(line.substr(0, 40));
  std::smatch m;
  if (std::regex_search(head, m, kIso)) {
    std::tm tm{};
    tm.tm_year = std::stoi(m[1]) - 1900;
    tm.tm_mon = std::stoi(m[2]) - 1;
    tm.tm_mday = std::stoi(m[3]);
    tm.tm_hour = std::stoi(m[4]);
    tm.tm_min = std::stoi(m[5]);
    tm.tm_sec = std::stoi(m[6]);
    int64_t t = timegm(&tm);
    std::string zone = m[8].str();
    if (!zone.empty() && zone != "Z") {
      int sign = zone[0] == '-' ? -1 : 1;
      std::string digits;
      for (char c : zone) {
        if (std::isdigit(static_cast<unsigned char>(c))) digits += c;
      }
      int offset = std::stoi(digits.substr(0, 2)) * 3600 + std::stoi(digits.substr(2, 2)) * 60;
      t -= sign * offset;
    } else if (zone.empty()) {
      // No zone: local time, as the kernel log writer used it.
      tm = std::tm{};
      tm.tm_year = std::stoi(m[1]) - 1900;
      tm.tm_mon = std::stoi(m[2]) - 1;
      tm.tm_mday = std::stoi(m[3]);
      tm.tm_hour = std::stoi(m[4]);
      tm.tm_min = std::stoi(m[5]);
      tm.tm_sec = std::stoi(m[6]);
      tm.tm_isdst = -1;
      t = std::mktime(&tm);
    }
    return t;
  }
  if (std::regex_search(head, m, kClassic)) {
    static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int mon = -1;
    for (int i = 0; i < 12; ++i) {
      if (m[1].str() == kMonths[i]) mon = i;
    }
    if (mon < 0) return std::nullopt;
    time_t now_t = static_cast<time_t>(now);
    std::tm local{};
    localtime_r(&now_t, &local);
    for (int year_back = 0; year_back < 2; ++year_back) {
      std::tm tm{};
      tm.tm_year = local.tm_year - year_back;
      tm.tm_mon = mon;
      tm.tm_mday = std::stoi(m[2]);
      tm.tm_hour = std::stoi(m[3]);
      tm.tm_min = std::stoi(m[4]);
      tm.tm_sec = std::stoi(m[5]);
      tm.tm_isdst = -1;
      int64_t t = std::mktime(&tm);
      // A date "in the future" by more than a day belongs to last year
      // (December lines read in January).
      if (t <= now + 86400) return t;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

struct XidEvent {
  int code = 0;
  std::string pci;
  int64_t time = 0;
};

// Appends the Xid events of `text` (one log line per line).
void ScanXids(std::string_view text, int64_t now, std::vector<XidEvent>* out) {
  static const std::regex kXid(R"(NVRM: Xid \((PCI:[0-9A-Fa-f:.]+)\): (\d+))");
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t at = line.find("NVRM: Xid");
    if (at == std::string_view::npos) continue;
    std::optional<int64_t> t = ParseLogTime(line, now);
    if (!t) continue;  // cannot place it in the window
    std::string tail(line.substr(at));
    std::smatch m;
    if (!std::regex_search(tail, m, kXid)) continue;
    XidEvent e;
    e.pci = m[1].str();
    e.code = std::stoi(m[2].str());
    e.time = *t;
    out->push_back(std::move(e));
  }
}

// A whole file, gzip-compressed or not (zlib reads plain files as-is).
std::optional<std::string> ReadMaybeGz(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(gz, buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  gzclose(gz);
  return out;
}

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// Kernel log files under <root>/var/log: kern.log, syslog, messages and their
// rotations (name.1, name.2.gz, name-20261129[.gz]).
std::vector<std::string> KernelLogFiles(const std::string& root_dir) {
  std::string dir = root_dir + "/var/log";
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    for (const char* base : {"kern.log", "syslog", "messages"}) {
      std::string b = base;
      if (name == b || (name.size() > b.size() && name.compare(0, b.size(), b) == 0 &&
                        (name[b.size()] == '.' || name[b.size()] == '-'))) {
        files.push_back(dir + "/" + name);
        break;
      }
    }
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  return files;
}

// AzNHC's list (customTests/check_gpu_xid): Xids that mean a GPU needs attention.
const std::vector<int>& DefaultXids() {
  static const std::vector<int> kCodes = {48, 56, 57, 58, 62, 63, 64, 65,  68,
                                          69, 73, 74, 79, 80, 81, 92, 119, 120};
  return kCodes;
}

class GpuXidCheck : public Check {
 public:
  GpuXidCheck(std::chrono::nanoseconds window, std::vector<int> codes,
              std::vector<std::string> logs)
      : window_(window), codes_(std::move(codes)), logs_(std::move(logs)) {}
  std::string name() const override { return "gpu_xid"; }
  // Reads log files (possibly on a hung filesystem) and runs journalctl.
  bool isolate() const override { return true; }

  CheckResult Run(const Context& ctx) const override {
    CheckResult r = Named(name());
    const Clock& clock = ctx.clock != nullptr ? *ctx.clock : SystemClock();
    int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(clock.WallNow().time_since_epoch())
            .count();
    int64_t since = now - std::chrono::duration_cast<std::chrono::seconds>(window_).count();
    std::string root = ctx.root_dir == "/" ? "" : ctx.root_dir;

    std::vector<XidEvent> events;
    std::vector<std::string> sources;
    std::vector<std::string> files = KernelLogFiles(root);
    for (const std::string& extra : logs_) files.push_back(root + extra);
    for (const std::string& file : files) {
      std::optional<std::string> text = ReadMaybeGz(file);
      if (!text) continue;
      sources.push_back(file);
      ScanXids(*text, now, &events);
    }
    std::string journalctl;
    if (!ctx.bin_dir.empty()) {
      if (IsExecutable(ctx.bin_dir + "/journalctl")) journalctl = ctx.bin_dir + "/journalctl";
    } else if (root.empty()) {
      for (const char* p : {"/usr/bin/journalctl", "/bin/journalctl"}) {
        if (IsExecutable(p)) {
          journalctl = p;
          break;
        }
      }
    }
    if (!journalctl.empty()) {
      std::string cmd =
          fmt::format("'{}' -k --no-pager -o short-iso --since @{} 2>/dev/null", journalctl, since);
      if (FILE* p = popen(cmd.c_str(), "r")) {
        std::string out;
        char buf[1 << 14];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
        if (pclose(p) == 0 || !out.empty()) {
          sources.push_back("journalctl -k");
          ScanXids(out, now, &events);
        }
      }
    }
    r.threshold =
        fmt::format("none of {} listed Xids in {}", codes_.size(), FormatDuration(window_));
    if (sources.empty()) {
      r.outcome = Outcome::kSkip;
      r.message = fmt::format(
          "no kernel log found ({}/var/log/{{kern.log,syslog,messages}}, "
          "journalctl): cannot look for Xid errors",
          root);
      return r;
    }
    // The same message reaches syslog and the journal: count it once.
    std::set<std::tuple<int64_t, std::string, int>> seen;
    std::map<std::pair<int, std::string>, std::pair<int, int64_t>> bad;  // -> count, last
    std::set<int> ignored;
    for (const XidEvent& e : events) {
      if (e.time < since) continue;
      if (!seen.insert({e.time, e.pci, e.code}).second) continue;
      if (std::find(codes_.begin(), codes_.end(), e.code) == codes_.end()) {
        ignored.insert(e.code);
        continue;
      }
      auto& slot = bad[{e.code, e.pci}];
      slot.first++;
      slot.second = std::max(slot.second, e.time);
    }
    r.measured = fmt::format("{} Xid events", [&] {
      int n = 0;
      for (const auto& [k, v] : bad) n += v.first;
      return n;
    }());
    std::string ignored_note;
    if (!ignored.empty()) {
      std::vector<std::string> s;
      for (int c : ignored) s.push_back(std::to_string(c));
      ignored_note = fmt::format(" (ignored Xid {}: not in the list)", Join(s, ", "));
    }
    if (bad.empty()) {
      r.message = fmt::format("no listed Xid in the last {} ({} log sources read){}",
                              FormatDuration(window_), sources.size(), ignored_note);
      return r;
    }
    std::vector<std::string> parts;
    for (const auto& [key, v] : bad) {
      time_t last = static_cast<time_t>(v.second);
      std::tm tm{};
      gmtime_r(&last, &tm);
      char when[32];
      std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
      parts.push_back(
          fmt::format("Xid {} on {} ({}x, last {})", key.first, key.second, v.first, when));
    }
    r.outcome = Outcome::kFail;
    r.message = fmt::format(
        "{} in the last {}: check the GPU (nvidia-smi -q), reset it or have "
        "the node serviced{}",
        Join(parts, ", "), FormatDuration(window_), ignored_note);
    return r;
  }

 private:
  std::chrono::nanoseconds window_;
  std::vector<int> codes_;
  std::vector<std::string> logs_;
};

// --------------------------------------------------------------- gpu_clocks

struct ReasonName {
  uint64_t bit;
  const char* name;
};
constexpr ReasonName kBadReasons[] = {{kClockEventHwSlowdown, "hw_slowdown"},
                                      {kClockEventSwThermal, "sw_thermal"},
                                      {kClockEventHwThermal, "hw_thermal"},
                                      {kClockEventPowerBrake, "power_brake"}};
constexpr uint64_t kBenignReasons = kClockEventIdle | kClockEventAppSetting | kClockEventSwPowerCap;

class GpuClocksCheck : public NvmlCheck {
 public:
  explicit GpuClocksCheck(uint64_t fail_mask) : NvmlCheck("gpu_clocks"), fail_mask_(fail_mask) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    int slowed = 0;
    for (int i = 0; i < count; ++i) {
      Result<uint64_t> reasons = nvml.ClocksEventReasons(i);
      if (!reasons.ok()) {
        f.Error(reasons.status());
        continue;
      }
      uint64_t active = *reasons & ~kBenignReasons;
      if (active == 0) continue;
      ++slowed;
      std::vector<std::string> names;
      bool fail = false;
      uint64_t known = 0;
      for (const ReasonName& rn : kBadReasons) {
        if (active & rn.bit) {
          names.push_back(rn.name);
          known |= rn.bit;
          if (fail_mask_ & rn.bit) fail = true;
        }
      }
      if (active & ~known) names.push_back(fmt::format("other (0x{:x})", active & ~known));
      std::string msg = fmt::format("GPU {} clocks held back by {}", i, Join(names, ", "));
      if (fail) {
        f.Fail(msg + ": check cooling and power delivery");
      } else {
        f.Warn(msg + " (logged only; list it in fail_on to fail)");
      }
    }
    r.measured = fmt::format("{} of {} GPUs slowed", slowed, count);
    r.threshold = fail_mask_ == 0 ? "log only" : "fail on " + FailOnNames();
    return f.Finish(std::move(r), fmt::format("no clock slowdown on {} GPUs", count));
  }

 private:
  std::string FailOnNames() const {
    std::vector<std::string> s;
    for (const ReasonName& rn : kBadReasons) {
      if (fail_mask_ & rn.bit) s.push_back(rn.name);
    }
    return Join(s, ", ");
  }
  uint64_t fail_mask_;
};

// --------------------------------------------------------------- gpu_nvlink

class GpuNvLinkCheck : public NvmlCheck {
 public:
  explicit GpuNvLinkCheck(std::optional<int64_t> min_active)
      : NvmlCheck("gpu_nvlink"), min_active_(min_active) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    int least = -1, gpus_with_links = 0;
    for (int i = 0; i < count; ++i) {
      Result<std::vector<bool>> links = nvml.NvLinkStates(i);
      if (!links.ok()) {
        f.Error(links.status());
        continue;
      }
      int active = static_cast<int>(std::count(links->begin(), links->end(), true));
      int total = static_cast<int>(links->size());
      if (total > 0) ++gpus_with_links;
      least = least < 0 ? active : std::min(least, active);
      std::vector<std::string> down;
      for (int l = 0; l < total; ++l) {
        if (!(*links)[l]) down.push_back(std::to_string(l));
      }
      if (min_active_) {
        if (active < *min_active_) {
          f.Fail(fmt::format("{}: {} of {} NVLinks active, expected at least {}{}", f.Gpu(i),
                             active, total, *min_active_,
                             down.empty() ? "" : " (down: " + Join(down, ", ") + ")"),
                 kFaultNvLink);
        }
      } else if (!down.empty()) {
        f.Fail(fmt::format("{}: NVLink {} down ({} of {} active): reset the GPUs or have the "
                           "node serviced",
                           f.Gpu(i), Join(down, ", "), active, total),
               kFaultNvLink);
      }
    }
    r.measured = least < 0 ? "" : fmt::format("min {} active per GPU", least);
    r.threshold = min_active_ ? fmt::format(">= {} per GPU", *min_active_) : "all reported links";
    if (gpus_with_links == 0 && !f.any_fail()) {
      f.Note("no GPU reports NVLink");
    }
    return f.Finish(std::move(r), fmt::format("NVLinks active on {} GPUs", gpus_with_links));
  }

 private:
  std::optional<int64_t> min_active_;
};

// ----------------------------------------------------------------- gpu_pcie

class GpuPcieCheck : public NvmlCheck {
 public:
  GpuPcieCheck(std::optional<int64_t> min_gen, std::optional<int64_t> min_width)
      : NvmlCheck("gpu_pcie"), min_gen_(min_gen), min_width_(min_width) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    std::string worst;
    unsigned worst_score = ~0u;
    for (int i = 0; i < count; ++i) {
      Result<PcieLink> p = nvml.Pcie(i);
      if (!p.ok()) {
        f.Error(p.status());
        continue;
      }
      unsigned want_width = min_width_ ? static_cast<unsigned>(*min_width_) : p->max_width;
      unsigned want_gen = min_gen_ ? static_cast<unsigned>(*min_gen_) : p->max_gen;
      unsigned score = p->gen * 100 + p->width;
      if (score < worst_score) {
        worst_score = score;
        worst = fmt::format("Gen{} x{}", p->gen, p->width);
      }
      if (p->width < want_width) {
        f.Fail(fmt::format("{}: PCIe link x{}, expected x{} (max x{}): reseat or service the GPU",
                           f.Gpu(i), p->width, want_width, p->max_width));
      } else if (p->gen < want_gen) {
        f.Warn(
            fmt::format("GPU {}: PCIe Gen{} below Gen{} (idle GPUs lower the link speed to "
                        "save power; recheck under load)",
                        i, p->gen, want_gen));
      }
    }
    r.measured = worst;
    r.threshold = fmt::format("{}, {}", min_gen_ ? fmt::format("Gen >= {}", *min_gen_) : "max Gen",
                              min_width_ ? fmt::format("width >= x{}", *min_width_) : "max width");
    return f.Finish(std::move(r), fmt::format("PCIe links at full width on {} GPUs", count));
  }

 private:
  std::optional<int64_t> min_gen_, min_width_;
};

// -------------------------------------------------------------- gpu_thermal

class GpuThermalCheck : public NvmlCheck {
 public:
  explicit GpuThermalCheck(int64_t max_temp_c) : NvmlCheck("gpu_thermal"), max_temp_(max_temp_c) {}

 protected:
  CheckResult RunGpus(const Context&, Nvml& nvml, int count, Findings& f,
                      CheckResult r) const override {
    unsigned hottest = 0;
    for (int i = 0; i < count; ++i) {
      Result<unsigned> t = nvml.TemperatureC(i);
      if (!t.ok()) {
        f.Error(t.status());
      } else {
        hottest = std::max(hottest, *t);
        if (*t > max_temp_) {
          f.Fail(fmt::format("{}: {} C, above {} C: check cooling", f.Gpu(i), *t, max_temp_));
        }
      }
      Result<unsigned> power = nvml.PowerUsageMw(i);
      Result<unsigned> limit = nvml.PowerLimitMw(i);
      if (!power.ok()) {
        f.Error(power.status());
      } else if (!limit.ok()) {
        f.Error(limit.status());
      } else if (*power > *limit) {
        f.Fail(fmt::format("{}: drawing {:.0f} W, above its enforced limit {:.0f} W", f.Gpu(i),
                           *power / 1000.0, *limit / 1000.0));
      }
    }
    r.measured = fmt::format("{} C", hottest);
    r.threshold = fmt::format("<= {} C, power <= limit", max_temp_);
    return f.Finish(std::move(r), fmt::format("hottest GPU {} C; power within limits on {} GPUs",
                                              hottest, count));
  }

 private:
  int64_t max_temp_;
};

// ------------------------------------------------------------ gpu_bandwidth

#if GANTRY_HAVE_CUDA
#define GANTRY_GPU_BW_CUDART(X) \
  X(cudaGetDeviceCount)         \
  X(cudaSetDevice)              \
  X(cudaMallocHost)             \
  X(cudaMalloc)                 \
  X(cudaFree)                   \
  X(cudaFreeHost)               \
  X(cudaEventCreate)            \
  X(cudaEventDestroy)           \
  X(cudaEventRecord)            \
  X(cudaEventSynchronize)       \
  X(cudaEventElapsedTime)       \
  X(cudaMemcpy)                 \
  X(cudaMemcpyAsync)            \
  X(cudaGetErrorString)
#define GANTRY_GPU_BW_STR_(x) #x
#define GANTRY_GPU_BW_STR(x) GANTRY_GPU_BW_STR_(x)

// The CUDA runtime functions gpu_bandwidth calls, from libcudart loaded on
// first use, so that only a run of this check maps the CUDA runtime.
struct CudartApi {
#define GANTRY_MEMBER(f) decltype(&::f) f = nullptr;
  GANTRY_GPU_BW_CUDART(GANTRY_MEMBER)
#undef GANTRY_MEMBER
};

Result<const CudartApi*> LoadCudart() {
  static const plugin::LibrarySpec spec{
      {"libcudart.so." GANTRY_GPU_BW_STR(GANTRY_CUDA_MAJOR),
       GANTRY_CUDA_LIBDIR "/libcudart.so." GANTRY_GPU_BW_STR(GANTRY_CUDA_MAJOR)},
      "the gpu_bandwidth check",
      "CUDA runtime",
      "install the CUDA runtime (libcudart" GANTRY_GPU_BW_STR(GANTRY_CUDA_MAJOR) ")"};
  static const Result<const CudartApi*> loaded = []() -> Result<const CudartApi*> {
    ASSIGN_OR_RETURN(void* lib, plugin::OpenLibrary(spec));
    auto api = std::make_unique<CudartApi>();
#define GANTRY_BIND(f) RETURN_IF_ERROR(plugin::Bind(lib, spec, GANTRY_GPU_BW_STR(f), &api->f));
    GANTRY_GPU_BW_CUDART(GANTRY_BIND)
#undef GANTRY_BIND
    return static_cast<const CudartApi*>(api.release());
  }();
  return loaded;
}
#endif

class GpuBandwidthCheck : public Check {
 public:
  GpuBandwidthCheck(double min_h2d, double min_d2h) : min_h2d_(min_h2d), min_d2h_(min_d2h) {}
  std::string name() const override { return "gpu_bandwidth"; }
  bool isolate() const override { return true; }
  bool parallel_safe() const override { return false; }
  std::chrono::milliseconds timeout() const override { return std::chrono::seconds(60); }

  CheckResult Run(const Context& ctx) const override {
    CheckResult r = Named(name());
    r.threshold = fmt::format("h2d >= {:.1f} GB/s, d2h >= {:.1f} GB/s", min_h2d_, min_d2h_);
#if GANTRY_HAVE_CUDA
    (void)ctx;
    return Measure(std::move(r));
#else
    (void)ctx;
    r.outcome = Outcome::kSkip;
    r.message = "needs a CUDA build (this gantry was built without CUDA)";
    return r;
#endif
  }

 private:
#if GANTRY_HAVE_CUDA
  CheckResult Measure(CheckResult r) const {
    Result<const CudartApi*> loaded = LoadCudart();
    if (!loaded.ok()) {
      r.outcome = Outcome::kError;
      r.fault_code = kFaultSetup;
      r.message = loaded.status().message();
      return r;
    }
    const CudartApi& cuda = **loaded;
    int n = 0;
    if (cuda.cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      r.outcome = Outcome::kSkip;
      r.message = "no CUDA device";
      return r;
    }
    constexpr size_t kBytes = size_t{64} << 20;
    constexpr int kIters = 8;
    std::vector<std::string> fails, warns;
    double worst_h2d = 1e300, worst_d2h = 1e300;
    for (int i = 0; i < n; ++i) {
      void* host = nullptr;
      void* dev = nullptr;
      cudaEvent_t start = nullptr, stop = nullptr;
      auto cleanup = [&] {
        if (start) cuda.cudaEventDestroy(start);
        if (stop) cuda.cudaEventDestroy(stop);
        if (dev) cuda.cudaFree(dev);
        if (host) cuda.cudaFreeHost(host);
      };
      cudaError_t err = cuda.cudaSetDevice(i);
      if (err == cudaSuccess) err = cuda.cudaMallocHost(&host, kBytes);
      if (err == cudaSuccess) err = cuda.cudaMalloc(&dev, kBytes);
      if (err == cudaSuccess) err = cuda.cudaEventCreate(&start);
      if (err == cudaSuccess) err = cuda.cudaEventCreate(&stop);
      double gbs[2] = {0, 0};
      for (int dir = 0; dir < 2 && err == cudaSuccess; ++dir) {
        void* dst = dir == 0 ? dev : host;
        void* src = dir == 0 ? host : dev;
        cudaMemcpyKind kind = dir == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
        err = cuda.cudaMemcpy(dst, src, kBytes, kind);  // warm-up
        if (err == cudaSuccess) err = cuda.cudaEventRecord(start, nullptr);
        for (int it = 0; it < kIters && err == cudaSuccess; ++it) {
          err = cuda.cudaMemcpyAsync(dst, src, kBytes, kind, nullptr);
        }
        if (err == cudaSuccess) err = cuda.cudaEventRecord(stop, nullptr);
        if (err == cudaSuccess) err = cuda.cudaEventSynchronize(stop);
        float ms = 0;
        if (err == cudaSuccess) err = cuda.cudaEventElapsedTime(&ms, start, stop);
        if (err == cudaSuccess && ms > 0) gbs[dir] = kBytes * double(kIters) / (ms / 1e3) / 1e9;
      }
      cleanup();
      if (err != cudaSuccess) {
        r.outcome = Outcome::kError;
        r.fault_code = kFaultSetup;
        r.message = fmt::format("GPU {}: CUDA error: {}", i, cuda.cudaGetErrorString(err));
        return r;
      }
      worst_h2d = std::min(worst_h2d, gbs[0]);
      worst_d2h = std::min(worst_d2h, gbs[1]);
      const char* names[2] = {"H2D", "D2H"};
      double mins[2] = {min_h2d_, min_d2h_};
      for (int dir = 0; dir < 2; ++dir) {
        if (gbs[dir] < mins[dir]) {
          fails.push_back(fmt::format("GPU {} {} {:.1f} GB/s below {:.1f}", i, names[dir], gbs[dir],
                                      mins[dir]));
        } else if (gbs[dir] < mins[dir] * 1.05) {
          warns.push_back(fmt::format("GPU {} {} {:.1f} GB/s within 5% of {:.1f}", i, names[dir],
                                      gbs[dir], mins[dir]));
        }
      }
    }
    r.measured =
        fmt::format("h2d {:.1f} GB/s, d2h {:.1f} GB/s (slowest GPU)", worst_h2d, worst_d2h);
    if (!fails.empty()) {
      r.outcome = Outcome::kFail;
      r.fault_code = kFaultBandwidth;
      r.message = Join(fails, "; ") + ": check the PCIe link (gpu_pcie) and NUMA placement";
    } else if (!warns.empty()) {
      r.outcome = Outcome::kWarn;
      r.message = Join(warns, "; ");
    } else {
      r.message = fmt::format("host<->device copies at full speed on {} GPUs", n);
    }
    return r;
  }
#endif
  double min_h2d_, min_d2h_;
};

// ---------------------------------------------------------------- factories

template <typename T>
Result<std::unique_ptr<Check>> Made(std::unique_ptr<T> c) {
  return std::unique_ptr<Check>(std::move(c));
}

Result<std::optional<int64_t>> OptionalInt(const Params& p, std::string_view name) {
  if (!p.Has(name)) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, p.Int(name, 0));
  return std::optional<int64_t>(v);
}

}  // namespace

void RegisterGpuChecks(Registry* r) {
  r->Add("gpu_count",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"count"}));
           if (!p.Has("count")) {
             return InvalidArgument(fmt::format(
                 "{}: 'count' is required (the number of GPUs this VM size has)", c.Locate(key)));
           }
           ASSIGN_OR_RETURN(int64_t count, p.Int("count", 0));
           return Made(std::make_unique<GpuCountCheck>(count));
         });
  r->Add("gpu_persistence",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"required"}));
           ASSIGN_OR_RETURN(bool required, p.Bool("required", true));
           return Made(std::make_unique<GpuPersistenceCheck>(required));
         });
  r->Add("gpu_driver",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"version"}));
           ASSIGN_OR_RETURN(std::string version, p.String("version", ""));
           return Made(std::make_unique<GpuDriverCheck>(version));
         });
  r->Add("gpu_ecc", [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
    Params p(c, key);
    RETURN_IF_ERROR(p.Known({"dram_max", "sram_correctable_max"}));
    // AzNHC's `check_gpu_ecc 20000000 10000` on every ND size.
    ASSIGN_OR_RETURN(int64_t dram, p.Int("dram_max", 20000000));
    ASSIGN_OR_RETURN(int64_t sram, p.Int("sram_correctable_max", 10000));
    return Made(std::make_unique<GpuEccCheck>(dram, sram));
  });
  r->Add("gpu_row_remap",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({}));
           return Made(std::make_unique<GpuRowRemapCheck>());
         });
  r->Add("gpu_xid", [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
    Params p(c, key);
    RETURN_IF_ERROR(p.Known({"window", "codes", "logs"}));
    ASSIGN_OR_RETURN(std::chrono::nanoseconds window, p.Duration("window", std::chrono::hours(2)));
    if (window.count() <= 0) {
      return InvalidArgument(fmt::format("{}: the window must be positive", p.Locate("window")));
    }
    std::vector<int> codes = DefaultXids();
    if (p.Has("codes")) {
      ASSIGN_OR_RETURN(std::vector<std::string> list, p.List("codes"));
      codes.clear();
      for (const std::string& s : list) {
        Result<int64_t> v = ParseInt("Xid code", s);
        if (!v.ok() || *v < 0) {
          return InvalidArgument(
              fmt::format("{}: '{}' is not an Xid number", p.Locate("codes"), s));
        }
        codes.push_back(static_cast<int>(*v));
      }
    }
    ASSIGN_OR_RETURN(std::vector<std::string> logs, p.List("logs"));
    return Made(std::make_unique<GpuXidCheck>(window, std::move(codes), std::move(logs)));
  });
  r->Add(
      "gpu_clocks", [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
        Params p(c, key);
        RETURN_IF_ERROR(p.Known({"fail_on"}));
        ASSIGN_OR_RETURN(std::vector<std::string> names, p.List("fail_on"));
        uint64_t mask = 0;
        for (const std::string& n : names) {
          uint64_t bit = 0;
          for (const ReasonName& rn : kBadReasons) {
            if (n == rn.name) bit = rn.bit;
          }
          if (bit == 0) {
            return InvalidArgument(fmt::format(
                "{}: unknown clock event reason '{}'; use hw_slowdown, sw_thermal, hw_thermal or "
                "power_brake",
                p.Locate("fail_on"), n));
          }
          mask |= bit;
        }
        return Made(std::make_unique<GpuClocksCheck>(mask));
      });
  r->Add("gpu_nvlink",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"min_active"}));
           ASSIGN_OR_RETURN(std::optional<int64_t> min_active, OptionalInt(p, "min_active"));
           return Made(std::make_unique<GpuNvLinkCheck>(min_active));
         });
  r->Add("gpu_pcie", [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
    Params p(c, key);
    RETURN_IF_ERROR(p.Known({"min_gen", "min_width"}));
    ASSIGN_OR_RETURN(std::optional<int64_t> gen, OptionalInt(p, "min_gen"));
    ASSIGN_OR_RETURN(std::optional<int64_t> width, OptionalInt(p, "min_width"));
    return Made(std::make_unique<GpuPcieCheck>(gen, width));
  });
  r->Add("gpu_thermal",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"max_temp_c"}));
           ASSIGN_OR_RETURN(int64_t max_temp, p.Int("max_temp_c", 85));
           return Made(std::make_unique<GpuThermalCheck>(max_temp));
         });
  r->Add("gpu_bandwidth",
         [](const Config& c, const std::string& key) -> Result<std::unique_ptr<Check>> {
           Params p(c, key);
           RETURN_IF_ERROR(p.Known({"min_h2d_gbs", "min_d2h_gbs"}));
           ASSIGN_OR_RETURN(double h2d, p.Double("min_h2d_gbs", 0));
           ASSIGN_OR_RETURN(double d2h, p.Double("min_d2h_gbs", 0));
           if (h2d < 0 || d2h < 0) {
             return InvalidArgument(
                 fmt::format("{}: bandwidth thresholds must not be negative", c.Locate(key)));
           }
           return Made(std::make_unique<GpuBandwidthCheck>(h2d, d2h));
         });
}

}  // namespace gantry::health
