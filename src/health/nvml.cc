// NVML through dlopen: Gantry declares the few types and functions it uses
// itself, so the build needs neither the driver nor the CUDA toolkit.
//
// Numeric values below were checked against NVIDIA's own Python bindings
// (pynvml.py, "Copyright (c) 2011-2025, NVIDIA Corporation", vendored at
// ray-project/ray python/ray/_private/thirdparty/pynvml/pynvml.py), which
// mirror nvml.h:
//   nvmlReturn_t:  NVML_SUCCESS 0, NVML_ERROR_INVALID_ARGUMENT 2,
//                  NVML_ERROR_NOT_SUPPORTED 3, NVML_ERROR_NO_PERMISSION 4,
//                  NVML_ERROR_FUNCTION_NOT_FOUND 13, NVML_ERROR_GPU_IS_LOST 15
//   nvmlClockType_t: NVML_CLOCK_GRAPHICS 0, NVML_CLOCK_SM 1, NVML_CLOCK_MEM 2
//   NVML_ERROR_TIMEOUT 10; nvmlEventTypeXidCriticalError 0x8
//   nvmlUtilization_t { unsigned gpu, memory }
//   nvmlMemory_t (v1) { unsigned long long total, free, used }
//   nvmlEventData_t { nvmlDevice_t device; unsigned long long eventType, eventData;
//                     unsigned gpuInstanceId, computeInstanceId }
//   nvmlMemoryErrorType_t: NVML_MEMORY_ERROR_TYPE_CORRECTED 0, _UNCORRECTED 1
//   nvmlEccCounterType_t: NVML_VOLATILE_ECC 0, NVML_AGGREGATE_ECC 1
//   nvmlMemoryLocation_t: NVML_MEMORY_LOCATION_DRAM 2 (= DEVICE_MEMORY),
//                         NVML_MEMORY_LOCATION_SRAM 7
//   nvmlTemperatureSensors_t: NVML_TEMPERATURE_GPU 0
//   nvmlEnableState_t: NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1
//   NVML_NVLINK_MAX_LINKS 18
//   nvmlPciInfo_t (v3): char busIdLegacy[16]; unsigned domain, bus, device,
//                       pciDeviceId, pciSubSystemId; char busId[32]
//   buffer sizes: NVML_DEVICE_NAME_V2_BUFFER_SIZE 96, NVML_DEVICE_UUID_V2_BUFFER_SIZE 96,
//                 NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
// GPM, field values and nvmlMemory_v2_t (nvml.h of CUDA 12, mirrored in
// nvml_abi.h): NVML_GPM_METRIC_GRAPHICS_UTIL 1, ANY_TENSOR_UTIL 5,
// DRAM_BW_UTIL 10 (percent 0.0-100.0), PCIE_TX_PER_SEC 20, PCIE_RX_PER_SEC 21
// (MiB/sec), NVML_GPM_METRIC_MAX 98, NVML_GPM_METRICS_GET_VERSION 1,
// NVML_GPM_SUPPORT_VERSION 1; NVML_FI_DEV_MEMORY_TEMP 82,
// NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138 / _RX 139 (KiB);
// NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25.
// Function signatures follow nvml.h as reproduced by NCCL's and DCGM's NVML
// wrappers (nvmlDeviceGetRemappedRows(dev, unsigned*, unsigned*, unsigned*,
// unsigned*), nvmlDeviceGetNvLinkState(dev, unsigned link, nvmlEnableState_t*), ...).
#include "gantry/health/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "nvml_abi.h"

namespace gantry::health {
namespace {

using namespace nvml_abi;  // NOLINT(google-build-using-namespace): the ABI names

using FnUtil = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using FnMem = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using FnEventSetCreate = nvmlReturn_t (*)(nvmlEventSet_t*);
using FnEventSetFree = nvmlReturn_t (*)(nvmlEventSet_t);
using FnRegisterEvents = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
using FnEventSetWait = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
using FnVoid = nvmlReturn_t (*)();
using FnErrorString = const char* (*)(nvmlReturn_t);
using FnUintOut = nvmlReturn_t (*)(unsigned*);
using FnHandle = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
using FnStrOut = nvmlReturn_t (*)(char*, unsigned);
using FnDevStr = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
using FnDevPci = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using FnDevInt = nvmlReturn_t (*)(nvmlDevice_t, int*);  // nvmlEnableState_t*
using FnDevUint = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using FnDevU64 = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using FnDevArgUint = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned*);
using FnTotalEcc = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);
using FnMemErr = nvmlReturn_t (*)(nvmlDevice_t, int, int, int, unsigned long long*);
using FnRemapped = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*);
using FnNvLinkState = nvmlReturn_t (*)(nvmlDevice_t, unsigned, int*);
using FnDev = nvmlReturn_t (*)(nvmlDevice_t);
using FnDevSetInt = nvmlReturn_t (*)(nvmlDevice_t, int);
using FnDevSet2 = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned);
using FnMemV2 = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using FnDevUint2 = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*);
using FnFieldValues = nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*);
using FnGpmSupport = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using FnGpmSampleAlloc = nvmlReturn_t (*)(nvmlGpmSample_t*);
using FnGpmSampleFree = nvmlReturn_t (*)(nvmlGpmSample_t);
using FnGpmSampleGet = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
using FnGpmMetricsGet = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);

static_assert(kFieldMemoryTemp == kFiDevMemoryTemp);
static_assert(kFieldNvLinkThroughputDataTx == kFiDevNvLinkThroughputDataTx);
static_assert(kFieldNvLinkThroughputDataRx == kFiDevNvLinkThroughputDataRx);
static_assert(kFieldScopeAllLinks == kScopeAllLinks);

// A GPU's two GPM sample buffers: `prev` holds the last sample taken.
struct GpmState {
  nvmlGpmSample_t prev = nullptr, next = nullptr;
  bool has_prev = false;
};

}  // namespace

struct Nvml::Impl {
  void* handle = nullptr;
  std::string library;

  FnVoid init = nullptr;
  FnVoid shutdown = nullptr;
  FnErrorString error_string = nullptr;
  FnUintOut device_count = nullptr;
  FnHandle handle_by_index = nullptr;
  FnStrOut driver_version = nullptr;
  FnDevStr name = nullptr;
  FnDevStr uuid = nullptr;
  FnDevPci pci_info = nullptr;
  FnDevInt persistence = nullptr;
  FnTotalEcc total_ecc = nullptr;
  FnMemErr memory_error_counter = nullptr;
  FnRemapped remapped_rows = nullptr;
  FnDevInt retired_pending = nullptr;
  FnDevU64 clocks_event_reasons = nullptr;
  FnNvLinkState nvlink_state = nullptr;
  FnDevUint pcie_gen = nullptr, pcie_max_gen = nullptr, pcie_width = nullptr,
            pcie_max_width = nullptr;
  FnDevArgUint temperature = nullptr;
  FnDevUint power_usage = nullptr, power_limit = nullptr;
  FnDevArgUint app_clock = nullptr, max_clock = nullptr, default_app_clock = nullptr;
  FnDevSetInt set_persistence = nullptr;
  FnDevSet2 set_app_clocks = nullptr;
  FnDev reset_app_clocks = nullptr;
  FnDevSet2 set_locked_clocks = nullptr;
  FnDev reset_locked_clocks = nullptr;
  FnDevArgUint clock_info = nullptr;
  FnUtil utilization = nullptr;
  FnMem memory_info = nullptr;
  FnDevU64 total_energy = nullptr;
  FnDevUint pcie_replay = nullptr;
  FnEventSetCreate event_set_create = nullptr;
  FnEventSetFree event_set_free = nullptr;
  FnRegisterEvents register_events = nullptr;
  FnEventSetWait event_set_wait = nullptr;
  FnMemV2 memory_info_v2 = nullptr;
  FnDevUint2 encoder_util = nullptr, decoder_util = nullptr;
  FnDevInt virtualization_mode = nullptr;
  FnFieldValues field_values = nullptr;
  FnGpmSupport gpm_support = nullptr;
  FnGpmSampleAlloc gpm_sample_alloc = nullptr;
  FnGpmSampleFree gpm_sample_free = nullptr;
  FnGpmSampleGet gpm_sample_get = nullptr;
  FnGpmMetricsGet gpm_metrics_get = nullptr;
  std::vector<GpmState> gpm;  // index = NVML index, grown on demand

  // PollXids state: the event set and the handle of each registered GPU.
  bool xid_subscribed = false;
  nvmlEventSet_t xid_set = nullptr;
  std::vector<nvmlDevice_t> xid_devices;  // index = NVML index

  template <typename F>
  void Bind(F* out, const char* symbol, const char* fallback = nullptr) {
    void* p = dlsym(handle, symbol);
    if (p == nullptr && fallback != nullptr) p = dlsym(handle, fallback);
    *out = reinterpret_cast<F>(p);
  }

  std::string ErrorText(nvmlReturn_t rc) const {
    const char* s = error_string != nullptr ? error_string(rc) : nullptr;
    return s != nullptr ? std::string(s) : fmt::format("NVML error {}", rc);
  }

  // "nvmlDeviceGetRemappedRows(GPU 3): GPU is lost", with a code that lets
  // checks tell "not supported on this GPU" from real failures.
  Status Error(std::string_view call, int gpu, nvmlReturn_t rc) const {
    std::string where = gpu >= 0 ? fmt::format("{}(GPU {})", call, gpu) : std::string(call);
    std::string msg = fmt::format("{}: {}", where, ErrorText(rc));
    switch (rc) {
      case kErrorNotSupported:
        return Unimplemented(std::move(msg));
      case kErrorNoPermission:
        return PermissionDenied(msg + " (run as root)");
      case kErrorInvalidArgument:
      case kErrorFunctionNotFound:
        return Internal(std::move(msg));
      default:
        return Unavailable(std::move(msg));
    }
  }

  Status Missing(std::string_view call) const {
    return Unimplemented(fmt::format("{} is not exported by {} (driver too old?)", call, library));
  }

  Result<nvmlDevice_t> Device(int gpu) const {
    if (gpu < 0) return InvalidArgument(fmt::format("GPU index {} is negative", gpu));
    nvmlDevice_t dev = nullptr;
    nvmlReturn_t rc = handle_by_index(static_cast<unsigned>(gpu), &dev);
    if (rc != kSuccess) return Error("nvmlDeviceGetHandleByIndex_v2", gpu, rc);
    return dev;
  }

  Result<std::string> DevString(FnDevStr fn, std::string_view call, int gpu) const {
    if (fn == nullptr) return Missing(call);
    ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(gpu));
    char buf[128] = {};
    nvmlReturn_t rc = fn(dev, buf, sizeof(buf));
    if (rc != kSuccess) return Error(call, gpu, rc);
    buf[sizeof(buf) - 1] = '\0';
    return std::string(buf);
  }

  Result<unsigned> DevUint(FnDevUint fn, std::string_view call, int gpu) const {
    if (fn == nullptr) return Missing(call);
    ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(gpu));
    unsigned v = 0;
    nvmlReturn_t rc = fn(dev, &v);
    if (rc != kSuccess) return Error(call, gpu, rc);
    return v;
  }

  Result<unsigned> DevClock(FnDevArgUint fn, std::string_view call, int gpu, int type) const {
    if (fn == nullptr) return Missing(call);
    ASSIGN_OR_RETURN(nvmlDevice_t dev, Device(gpu));
    unsigned v = 0;
    nvmlReturn_t rc = fn(dev, type, &v);
    if (rc != kSuccess) {
      return Error(fmt::format("{}({})", call,
                               type == kClockMem  ? "memory"
                               : type == kClockSm ? "sm"
                                                  : "graphics"),
                   gpu, rc);
    }
    return v;
  }

  Status DevSet(nvmlReturn_t rc, std::string_view call, int gpu) const {
    return rc == kSuccess ? Status::Ok() : Error(call, gpu, rc);
  }
};

Result<std::unique_ptr<Nvml>> Nvml::Load(const std::string& library) {
  std::string lib = library;
  if (lib.empty()) {
    const char* env = std::getenv("GANTRY_NVML_LIBRARY");
    lib = (env != nullptr && *env != '\0') ? env : "libnvidia-ml.so.1";
  }
  auto impl = std::make_unique<Impl>();
  impl->library = lib;
  // RTLD_LOCAL: NVML's symbols must not leak into the global namespace, where
  // they could satisfy another library's references (a CUDA runtime, NCCL).
  impl->handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (impl->handle == nullptr) {
    const char* err = dlerror();
    return Unavailable(fmt::format("cannot load NVML from '{}': {} (no NVIDIA driver installed?)",
                                   lib, err != nullptr ? err : "unknown error"));
  }
  Impl& m = *impl;
  m.Bind(&m.init, "nvmlInit_v2", "nvmlInit");
  m.Bind(&m.shutdown, "nvmlShutdown");
  m.Bind(&m.error_string, "nvmlErrorString");
  m.Bind(&m.device_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  m.Bind(&m.handle_by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  if (m.init == nullptr || m.shutdown == nullptr || m.device_count == nullptr ||
      m.handle_by_index == nullptr) {
    dlclose(m.handle);
    return Unavailable(fmt::format(
        "'{}' is not a usable NVML library: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or "
        "nvmlDeviceGetHandleByIndex_v2 is missing",
        lib));
  }
  m.Bind(&m.driver_version, "nvmlSystemGetDriverVersion");
  m.Bind(&m.name, "nvmlDeviceGetName");
  m.Bind(&m.uuid, "nvmlDeviceGetUUID");
  m.Bind(&m.pci_info, "nvmlDeviceGetPciInfo_v3");
  m.Bind(&m.persistence, "nvmlDeviceGetPersistenceMode");
  m.Bind(&m.total_ecc, "nvmlDeviceGetTotalEccErrors");
  m.Bind(&m.memory_error_counter, "nvmlDeviceGetMemoryErrorCounter");
  m.Bind(&m.remapped_rows, "nvmlDeviceGetRemappedRows");
  m.Bind(&m.retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
  // Renamed in the 535 driver; older libraries only export the Throttle name
  // (same signature, same bits).
  m.Bind(&m.clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons",
         "nvmlDeviceGetCurrentClocksThrottleReasons");
  m.Bind(&m.nvlink_state, "nvmlDeviceGetNvLinkState");
  m.Bind(&m.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
  m.Bind(&m.pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration");
  m.Bind(&m.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
  m.Bind(&m.pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth");
  m.Bind(&m.temperature, "nvmlDeviceGetTemperature");
  m.Bind(&m.power_usage, "nvmlDeviceGetPowerUsage");
  m.Bind(&m.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  m.Bind(&m.app_clock, "nvmlDeviceGetApplicationsClock");
  m.Bind(&m.max_clock, "nvmlDeviceGetMaxClockInfo");
  m.Bind(&m.default_app_clock, "nvmlDeviceGetDefaultApplicationsClock");
  m.Bind(&m.set_persistence, "nvmlDeviceSetPersistenceMode");
  m.Bind(&m.set_app_clocks, "nvmlDeviceSetApplicationsClocks");
  m.Bind(&m.reset_app_clocks, "nvmlDeviceResetApplicationsClocks");
  m.Bind(&m.set_locked_clocks, "nvmlDeviceSetGpuLockedClocks");
  m.Bind(&m.reset_locked_clocks, "nvmlDeviceResetGpuLockedClocks");
  m.Bind(&m.clock_info, "nvmlDeviceGetClockInfo");
  m.Bind(&m.utilization, "nvmlDeviceGetUtilizationRates");
  m.Bind(&m.memory_info, "nvmlDeviceGetMemoryInfo");
  m.Bind(&m.total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  m.Bind(&m.pcie_replay, "nvmlDeviceGetPcieReplayCounter");
  m.Bind(&m.event_set_create, "nvmlEventSetCreate");
  m.Bind(&m.event_set_free, "nvmlEventSetFree");
  m.Bind(&m.register_events, "nvmlDeviceRegisterEvents");
  m.Bind(&m.event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait");
  m.Bind(&m.memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
  m.Bind(&m.encoder_util, "nvmlDeviceGetEncoderUtilization");
  m.Bind(&m.decoder_util, "nvmlDeviceGetDecoderUtilization");
  m.Bind(&m.virtualization_mode, "nvmlDeviceGetVirtualizationMode");
  m.Bind(&m.field_values, "nvmlDeviceGetFieldValues");
  m.Bind(&m.gpm_support, "nvmlGpmQueryDeviceSupport");
  m.Bind(&m.gpm_sample_alloc, "nvmlGpmSampleAlloc");
  m.Bind(&m.gpm_sample_free, "nvmlGpmSampleFree");
  m.Bind(&m.gpm_sample_get, "nvmlGpmSampleGet");
  m.Bind(&m.gpm_metrics_get, "nvmlGpmMetricsGet");

  nvmlReturn_t rc = m.init();
  if (rc != kSuccess) {
    std::string why = m.ErrorText(rc);
    dlclose(m.handle);
    return Unavailable(
        fmt::format("nvmlInit_v2 failed ({}): {}; is the NVIDIA driver loaded "
                    "(nvidia-smi)?",
                    lib, why));
  }
  return std::unique_ptr<Nvml>(new Nvml(std::move(impl)));
}

Nvml::Nvml(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Nvml::~Nvml() {
  if (impl_ && impl_->handle != nullptr) {
    if (impl_->xid_set != nullptr && impl_->event_set_free != nullptr) {
      impl_->event_set_free(impl_->xid_set);
    }
    for (GpmState& g : impl_->gpm) {
      if (impl_->gpm_sample_free == nullptr) break;
      if (g.prev != nullptr) impl_->gpm_sample_free(g.prev);
      if (g.next != nullptr) impl_->gpm_sample_free(g.next);
    }
    impl_->shutdown();
    dlclose(impl_->handle);
  }
}

const std::string& Nvml::library() const { return impl_->library; }

Result<int> Nvml::DeviceCount() {
  unsigned n = 0;
  nvmlReturn_t rc = impl_->device_count(&n);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetCount_v2", -1, rc);
  return static_cast<int>(n);
}

Result<std::string> Nvml::DriverVersion() {
  if (impl_->driver_version == nullptr) return impl_->Missing("nvmlSystemGetDriverVersion");
  char buf[96] = {};
  nvmlReturn_t rc = impl_->driver_version(buf, sizeof(buf));
  if (rc != kSuccess) return impl_->Error("nvmlSystemGetDriverVersion", -1, rc);
  buf[sizeof(buf) - 1] = '\0';
  return std::string(buf);
}

Result<std::string> Nvml::Name(int gpu) {
  return impl_->DevString(impl_->name, "nvmlDeviceGetName", gpu);
}

Result<std::string> Nvml::Uuid(int gpu) {
  return impl_->DevString(impl_->uuid, "nvmlDeviceGetUUID", gpu);
}

Result<std::string> Nvml::PciBusId(int gpu) {
  if (impl_->pci_info == nullptr) return impl_->Missing("nvmlDeviceGetPciInfo_v3");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  nvmlPciInfo_t info;
  std::memset(&info, 0, sizeof(info));
  nvmlReturn_t rc = impl_->pci_info(dev, &info);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetPciInfo_v3", gpu, rc);
  info.busId[sizeof(info.busId) - 1] = '\0';
  return std::string(info.busId);
}

Result<bool> Nvml::PersistenceMode(int gpu) {
  if (impl_->persistence == nullptr) return impl_->Missing("nvmlDeviceGetPersistenceMode");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  int state = 0;
  nvmlReturn_t rc = impl_->persistence(dev, &state);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetPersistenceMode", gpu, rc);
  return state == 1;
}

Result<EccCounts> Nvml::Ecc(int gpu) {
  if (impl_->total_ecc == nullptr) return impl_->Missing("nvmlDeviceGetTotalEccErrors");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  EccCounts c;
  struct Total {
    int type, counter;
    uint64_t* out;
  } totals[] = {{kMemoryErrorCorrected, kVolatileEcc, &c.volatile_corrected},
                {kMemoryErrorUncorrected, kVolatileEcc, &c.volatile_uncorrected},
                {kMemoryErrorCorrected, kAggregateEcc, &c.aggregate_corrected},
                {kMemoryErrorUncorrected, kAggregateEcc, &c.aggregate_uncorrected}};
  for (const Total& t : totals) {
    unsigned long long v = 0;
    nvmlReturn_t rc = impl_->total_ecc(dev, t.type, t.counter, &v);
    // NOT_SUPPORTED here means ECC is off or absent: the whole call is.
    if (rc != kSuccess) return impl_->Error("nvmlDeviceGetTotalEccErrors", gpu, rc);
    *t.out = v;
  }
  struct ByLocation {
    int type, location;
    uint64_t* out;
  } locations[] = {{kMemoryErrorCorrected, kMemoryLocationSram, &c.sram_corrected},
                   {kMemoryErrorUncorrected, kMemoryLocationSram, &c.sram_uncorrected},
                   {kMemoryErrorCorrected, kMemoryLocationDram, &c.dram_corrected},
                   {kMemoryErrorUncorrected, kMemoryLocationDram, &c.dram_uncorrected}};
  bool dram_supported = true;
  for (const ByLocation& l : locations) {
    unsigned long long v = 0;
    nvmlReturn_t rc = impl_->memory_error_counter == nullptr
                          ? kErrorNotSupported
                          : impl_->memory_error_counter(dev, l.type, kAggregateEcc, l.location, &v);
    if (rc == kErrorNotSupported) {
      if (l.location == kMemoryLocationDram) dram_supported = false;
      continue;  // SRAM counters stay 0: GPUs without them cannot report SRAM errors
    }
    if (rc != kSuccess) return impl_->Error("nvmlDeviceGetMemoryErrorCounter", gpu, rc);
    *l.out = v;
  }
  if (!dram_supported) {
    // Older GPUs only report totals; counting them all as DRAM errors keeps the
    // DRAM threshold meaningful (it can only overstate, never hide, errors).
    c.dram_corrected = c.aggregate_corrected;
    c.dram_uncorrected = c.aggregate_uncorrected;
  }
  return c;
}

Result<RemappedRows> Nvml::RemappedRowsOf(int gpu) {
  if (impl_->remapped_rows == nullptr) return impl_->Missing("nvmlDeviceGetRemappedRows");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  nvmlReturn_t rc = impl_->remapped_rows(dev, &corr, &unc, &pending, &failure);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetRemappedRows", gpu, rc);
  RemappedRows r;
  r.corrected = corr;
  r.uncorrected = unc;
  r.pending = pending != 0;
  r.failure = failure != 0;
  return r;
}

Result<bool> Nvml::RetiredPagesPending(int gpu) {
  if (impl_->retired_pending == nullptr) {
    return impl_->Missing("nvmlDeviceGetRetiredPagesPendingStatus");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  int state = 0;
  nvmlReturn_t rc = impl_->retired_pending(dev, &state);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetRetiredPagesPendingStatus", gpu, rc);
  return state == 1;
}

Result<uint64_t> Nvml::ClocksEventReasons(int gpu) {
  if (impl_->clocks_event_reasons == nullptr) {
    return impl_->Missing("nvmlDeviceGetCurrentClocksEventReasons");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned long long v = 0;
  nvmlReturn_t rc = impl_->clocks_event_reasons(dev, &v);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetCurrentClocksEventReasons", gpu, rc);
  return static_cast<uint64_t>(v);
}

Result<std::vector<bool>> Nvml::NvLinkStates(int gpu) {
  if (impl_->nvlink_state == nullptr) return std::vector<bool>{};
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  std::vector<bool> states;
  for (unsigned link = 0; link < kNvLinkMaxLinks; ++link) {
    int active = 0;
    nvmlReturn_t rc = impl_->nvlink_state(dev, link, &active);
    // The driver answers NOT_SUPPORTED (or INVALID_ARGUMENT) past the GPU's
    // last link; at link 0 that means no NVLink at all.
    if (rc == kErrorNotSupported || rc == kErrorInvalidArgument) break;
    if (rc != kSuccess) {
      return impl_->Error(fmt::format("nvmlDeviceGetNvLinkState(link {})", link), gpu, rc);
    }
    states.push_back(active == 1);
  }
  return states;
}

Result<PcieLink> Nvml::Pcie(int gpu) {
  PcieLink p;
  ASSIGN_OR_RETURN(p.gen,
                   impl_->DevUint(impl_->pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", gpu));
  ASSIGN_OR_RETURN(p.max_gen,
                   impl_->DevUint(impl_->pcie_max_gen, "nvmlDeviceGetMaxPcieLinkGeneration", gpu));
  ASSIGN_OR_RETURN(p.width,
                   impl_->DevUint(impl_->pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", gpu));
  ASSIGN_OR_RETURN(p.max_width,
                   impl_->DevUint(impl_->pcie_max_width, "nvmlDeviceGetMaxPcieLinkWidth", gpu));
  return p;
}

Result<unsigned> Nvml::TemperatureC(int gpu) {
  if (impl_->temperature == nullptr) return impl_->Missing("nvmlDeviceGetTemperature");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned v = 0;
  nvmlReturn_t rc = impl_->temperature(dev, kTemperatureGpu, &v);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetTemperature", gpu, rc);
  return v;
}

Result<unsigned> Nvml::PowerUsageMw(int gpu) {
  return impl_->DevUint(impl_->power_usage, "nvmlDeviceGetPowerUsage", gpu);
}

Result<unsigned> Nvml::PowerLimitMw(int gpu) {
  return impl_->DevUint(impl_->power_limit, "nvmlDeviceGetEnforcedPowerLimit", gpu);
}

Result<GpuClocks> Nvml::Clocks(int gpu) {
  GpuClocks c;
  Impl& m = *impl_;
  ASSIGN_OR_RETURN(c.app_graphics,
                   m.DevClock(m.app_clock, "nvmlDeviceGetApplicationsClock", gpu, kClockGraphics));
  ASSIGN_OR_RETURN(c.app_memory,
                   m.DevClock(m.app_clock, "nvmlDeviceGetApplicationsClock", gpu, kClockMem));
  ASSIGN_OR_RETURN(c.max_graphics,
                   m.DevClock(m.max_clock, "nvmlDeviceGetMaxClockInfo", gpu, kClockGraphics));
  ASSIGN_OR_RETURN(c.max_memory,
                   m.DevClock(m.max_clock, "nvmlDeviceGetMaxClockInfo", gpu, kClockMem));
  ASSIGN_OR_RETURN(c.default_app_graphics,
                   m.DevClock(m.default_app_clock, "nvmlDeviceGetDefaultApplicationsClock", gpu,
                              kClockGraphics));
  ASSIGN_OR_RETURN(
      c.default_app_memory,
      m.DevClock(m.default_app_clock, "nvmlDeviceGetDefaultApplicationsClock", gpu, kClockMem));
  return c;
}

Result<unsigned> Nvml::SmClockMhz(int gpu) {
  return impl_->DevClock(impl_->clock_info, "nvmlDeviceGetClockInfo", gpu, kClockSm);
}

Result<unsigned> Nvml::MemClockMhz(int gpu) {
  return impl_->DevClock(impl_->clock_info, "nvmlDeviceGetClockInfo", gpu, kClockMem);
}

Result<GpuUtilization> Nvml::Utilization(int gpu) {
  if (impl_->utilization == nullptr) return impl_->Missing("nvmlDeviceGetUtilizationRates");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  nvmlUtilization_t u{};
  nvmlReturn_t rc = impl_->utilization(dev, &u);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetUtilizationRates", gpu, rc);
  GpuUtilization out;
  out.gpu = u.gpu;
  out.memory = u.memory;
  return out;
}

Result<GpuMemory> Nvml::MemoryInfo(int gpu) {
  Impl& m = *impl_;
  if (m.memory_info_v2 != nullptr) {
    ASSIGN_OR_RETURN(nvmlDevice_t dev, m.Device(gpu));
    nvmlMemory_v2_t v2{};
    v2.version = kMemoryV2Version;
    nvmlReturn_t rc = m.memory_info_v2(dev, &v2);
    if (rc == kSuccess) {
      GpuMemory out;
      out.total = v2.total;
      out.free = v2.free;
      out.used = v2.used;
      out.has_reserved = true;
      out.reserved = v2.reserved;
      return out;
    }
    // NOT_SUPPORTED / version mismatch (older drivers): the v1 call below.
    if (rc != kErrorNotSupported && rc != kErrorArgumentVersionMismatch &&
        rc != kErrorFunctionNotFound) {
      return m.Error("nvmlDeviceGetMemoryInfo_v2", gpu, rc);
    }
  }
  if (m.memory_info == nullptr) return m.Missing("nvmlDeviceGetMemoryInfo");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, m.Device(gpu));
  nvmlMemory_t v1{};
  nvmlReturn_t rc = m.memory_info(dev, &v1);
  if (rc != kSuccess) return m.Error("nvmlDeviceGetMemoryInfo", gpu, rc);
  GpuMemory out;
  out.total = v1.total;
  out.free = v1.free;
  out.used = v1.used;
  return out;
}

Result<uint64_t> Nvml::TotalEnergyMj(int gpu) {
  if (impl_->total_energy == nullptr) {
    return impl_->Missing("nvmlDeviceGetTotalEnergyConsumption");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned long long v = 0;
  nvmlReturn_t rc = impl_->total_energy(dev, &v);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetTotalEnergyConsumption", gpu, rc);
  return static_cast<uint64_t>(v);
}

Result<unsigned> Nvml::PcieReplayCounter(int gpu) {
  return impl_->DevUint(impl_->pcie_replay, "nvmlDeviceGetPcieReplayCounter", gpu);
}

Result<unsigned> Nvml::EncoderUtilization(int gpu) {
  if (impl_->encoder_util == nullptr) return impl_->Missing("nvmlDeviceGetEncoderUtilization");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned util = 0, period_us = 0;
  nvmlReturn_t rc = impl_->encoder_util(dev, &util, &period_us);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetEncoderUtilization", gpu, rc);
  return util;
}

Result<unsigned> Nvml::DecoderUtilization(int gpu) {
  if (impl_->decoder_util == nullptr) return impl_->Missing("nvmlDeviceGetDecoderUtilization");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  unsigned util = 0, period_us = 0;
  nvmlReturn_t rc = impl_->decoder_util(dev, &util, &period_us);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetDecoderUtilization", gpu, rc);
  return util;
}

Result<int> Nvml::VirtualizationMode(int gpu) {
  if (impl_->virtualization_mode == nullptr) {
    return impl_->Missing("nvmlDeviceGetVirtualizationMode");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  int mode = 0;
  nvmlReturn_t rc = impl_->virtualization_mode(dev, &mode);
  if (rc != kSuccess) return impl_->Error("nvmlDeviceGetVirtualizationMode", gpu, rc);
  return mode;
}

Result<std::vector<FieldValue>> Nvml::FieldValues(int gpu, std::vector<FieldValue> fields) {
  Impl& m = *impl_;
  if (m.field_values == nullptr) return m.Missing("nvmlDeviceGetFieldValues");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, m.Device(gpu));
  std::vector<nvmlFieldValue_t> raw(fields.size());
  for (size_t i = 0; i < fields.size(); ++i) {
    std::memset(&raw[i], 0, sizeof(raw[i]));
    raw[i].fieldId = fields[i].field;
    raw[i].scopeId = fields[i].scope;
  }
  nvmlReturn_t rc = m.field_values(dev, static_cast<int>(raw.size()), raw.data());
  if (rc != kSuccess) return m.Error("nvmlDeviceGetFieldValues", gpu, rc);
  for (size_t i = 0; i < fields.size(); ++i) {
    const nvmlFieldValue_t& r = raw[i];
    FieldValue& f = fields[i];
    if (r.nvmlReturn != kSuccess) {
      f.status =
          m.Error(fmt::format("nvmlDeviceGetFieldValues(field {})", f.field), gpu, r.nvmlReturn);
      continue;
    }
    switch (r.valueType) {
      case kValueTypeDouble:
        f.value = r.value.dVal;
        break;
      case kValueTypeUnsignedInt:
        f.value = r.value.uiVal;
        break;
      case kValueTypeUnsignedLong:
        f.value = static_cast<double>(r.value.ulVal);
        break;
      case kValueTypeUnsignedLongLong:
        f.value = static_cast<double>(r.value.ullVal);
        break;
      case kValueTypeSignedLongLong:
        f.value = static_cast<double>(r.value.sllVal);
        break;
      case kValueTypeSignedInt:
        f.value = r.value.siVal;
        break;
      default:
        f.status = Internal(
            fmt::format("nvmlDeviceGetFieldValues(GPU {}): field {} has unknown value type {}", gpu,
                        f.field, r.valueType));
    }
  }
  return fields;
}

Result<bool> Nvml::GpmSupported(int gpu) {
  Impl& m = *impl_;
  if (m.gpm_support == nullptr || m.gpm_sample_alloc == nullptr || m.gpm_sample_free == nullptr ||
      m.gpm_sample_get == nullptr || m.gpm_metrics_get == nullptr) {
    return m.Missing("nvmlGpmQueryDeviceSupport/nvmlGpmSampleGet/nvmlGpmMetricsGet");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, m.Device(gpu));
  nvmlGpmSupport_t support{};
  support.version = kGpmSupportVersion;
  nvmlReturn_t rc = m.gpm_support(dev, &support);
  if (rc != kSuccess) return m.Error("nvmlGpmQueryDeviceSupport", gpu, rc);
  return support.isSupportedDevice != 0;
}

Result<std::optional<GpmMetrics>> Nvml::GpmCollect(int gpu) {
  Impl& m = *impl_;
  if (m.gpm_sample_alloc == nullptr || m.gpm_sample_free == nullptr ||
      m.gpm_sample_get == nullptr || m.gpm_metrics_get == nullptr) {
    return m.Missing("nvmlGpmSampleAlloc/nvmlGpmSampleGet/nvmlGpmMetricsGet");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, m.Device(gpu));
  if (m.gpm.size() <= static_cast<size_t>(gpu)) m.gpm.resize(static_cast<size_t>(gpu) + 1);
  GpmState& st = m.gpm[static_cast<size_t>(gpu)];
  for (nvmlGpmSample_t* s : {&st.prev, &st.next}) {
    if (*s != nullptr) continue;
    nvmlReturn_t rc = m.gpm_sample_alloc(s);
    if (rc != kSuccess) {
      *s = nullptr;
      return m.Error("nvmlGpmSampleAlloc", gpu, rc);
    }
  }
  nvmlReturn_t rc = m.gpm_sample_get(dev, st.next);
  if (rc != kSuccess) {
    // The previous sample stays the baseline: the next interval is longer,
    // never wrong.
    return m.Error("nvmlGpmSampleGet", gpu, rc);
  }
  std::swap(st.prev, st.next);  // prev = the sample just taken, next = the older one
  if (!st.has_prev) {
    st.has_prev = true;
    return std::optional<GpmMetrics>();
  }
  // nvmlGpmMetricsGet_t is about 4 KiB (room for every metric id): on the heap.
  auto get = std::make_unique<nvmlGpmMetricsGet_t>();
  std::memset(get.get(), 0, sizeof(*get));
  get->version = kGpmMetricsGetVersion;
  constexpr unsigned kIds[] = {kGpmMetricGraphicsUtil, kGpmMetricAnyTensorUtil,
                               kGpmMetricDramBwUtil, kGpmMetricPcieTxPerSec,
                               kGpmMetricPcieRxPerSec};
  get->numMetrics = static_cast<unsigned>(std::size(kIds));
  get->sample1 = st.next;  // older
  get->sample2 = st.prev;  // newer
  for (unsigned i = 0; i < get->numMetrics; ++i) get->metrics[i].metricId = kIds[i];
  rc = m.gpm_metrics_get(get.get());
  if (rc != kSuccess) return m.Error("nvmlGpmMetricsGet", gpu, rc);
  GpmMetrics out;
  std::optional<double>* slots[] = {&out.graphics_util, &out.any_tensor_util, &out.dram_bw_util,
                                    &out.pcie_tx_mib_s, &out.pcie_rx_mib_s};
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    const nvmlGpmMetric_t& x = get->metrics[i];
    if (x.metricId == kIds[i] && x.nvmlReturn == kSuccess) *slots[i] = x.value;
  }
  return std::optional<GpmMetrics>(out);
}

Result<std::vector<GpuXid>> Nvml::PollXids() {
  Impl& m = *impl_;
  if (m.event_set_create == nullptr || m.register_events == nullptr ||
      m.event_set_wait == nullptr) {
    return m.Missing("nvmlEventSetCreate/nvmlDeviceRegisterEvents/nvmlEventSetWait_v2");
  }
  if (!m.xid_subscribed) {
    m.xid_subscribed = true;
    nvmlReturn_t rc = m.event_set_create(&m.xid_set);
    if (rc != kSuccess) {
      m.xid_set = nullptr;
      return m.Error("nvmlEventSetCreate", -1, rc);
    }
    ASSIGN_OR_RETURN(int n, DeviceCount());
    m.xid_devices.assign(static_cast<size_t>(n), nullptr);
    for (int i = 0; i < n; ++i) {
      auto dev = m.Device(i);
      if (!dev.ok()) continue;
      // NOT_SUPPORTED on GPUs without events: that GPU reports no Xids.
      if (m.register_events(*dev, kEventTypeXidCriticalError, m.xid_set) == kSuccess) {
        m.xid_devices[static_cast<size_t>(i)] = *dev;
      }
    }
  }
  std::vector<GpuXid> out;
  if (m.xid_set == nullptr) return out;
  for (int guard = 0; guard < 1024; ++guard) {  // bounded: a storm cannot stall the caller
    nvmlEventData_t data{};
    nvmlReturn_t rc = m.event_set_wait(m.xid_set, &data, 0);
    if (rc == kErrorTimeout) break;
    if (rc != kSuccess) return m.Error("nvmlEventSetWait_v2", -1, rc);
    if ((data.eventType & kEventTypeXidCriticalError) == 0) continue;
    auto it = std::find(m.xid_devices.begin(), m.xid_devices.end(), data.device);
    if (it == m.xid_devices.end()) continue;
    GpuXid e;
    e.gpu = static_cast<int>(it - m.xid_devices.begin());
    e.xid = data.eventData;
    out.push_back(e);
  }
  return out;
}

Status Nvml::SetPersistenceMode(int gpu, bool enabled) {
  if (impl_->set_persistence == nullptr) return impl_->Missing("nvmlDeviceSetPersistenceMode");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  return impl_->DevSet(impl_->set_persistence(dev, enabled ? 1 : 0), "nvmlDeviceSetPersistenceMode",
                       gpu);
}

Status Nvml::SetApplicationsClocks(int gpu, unsigned memory_mhz, unsigned graphics_mhz) {
  if (impl_->set_app_clocks == nullptr) return impl_->Missing("nvmlDeviceSetApplicationsClocks");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  return impl_->DevSet(impl_->set_app_clocks(dev, memory_mhz, graphics_mhz),
                       "nvmlDeviceSetApplicationsClocks", gpu);
}

Status Nvml::ResetApplicationsClocks(int gpu) {
  if (impl_->reset_app_clocks == nullptr) {
    return impl_->Missing("nvmlDeviceResetApplicationsClocks");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  return impl_->DevSet(impl_->reset_app_clocks(dev), "nvmlDeviceResetApplicationsClocks", gpu);
}

Status Nvml::SetGpuLockedClocks(int gpu, unsigned min_mhz, unsigned max_mhz) {
  if (impl_->set_locked_clocks == nullptr) return impl_->Missing("nvmlDeviceSetGpuLockedClocks");
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  return impl_->DevSet(impl_->set_locked_clocks(dev, min_mhz, max_mhz),
                       "nvmlDeviceSetGpuLockedClocks", gpu);
}

Status Nvml::ResetGpuLockedClocks(int gpu) {
  if (impl_->reset_locked_clocks == nullptr) {
    return impl_->Missing("nvmlDeviceResetGpuLockedClocks");
  }
  ASSIGN_OR_RETURN(nvmlDevice_t dev, impl_->Device(gpu));
  return impl_->DevSet(impl_->reset_locked_clocks(dev), "nvmlDeviceResetGpuLockedClocks", gpu);
}

}  // namespace gantry::health
