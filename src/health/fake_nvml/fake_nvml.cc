// A fake NVML (libgantry_fake_nvml.so) for tests on machines without GPUs.
//
// It exports the C symbols src/health/nvml.cc looks up, driven by a JSON
// scenario read at nvmlInit from $GANTRY_FAKE_NVML_SCENARIO (format: the
// comment in include/gantry/health/nvml.h). Beyond that format:
//   - a missing per-GPU section ("ecc", "remapped_rows", "nvlink", "pcie",
//     "clocks", "retired_pages_pending", "clocks_event_reasons",
//     "temperature_c", "power_mw", "power_limit_mw", "persistence", ECC
//     location keys) makes the matching call return NVML_ERROR_NOT_SUPPORTED,
//     as a GPU without that feature does;
//   - top-level "errors" / "hang" apply to calls without a device
//     (nvmlDeviceGetCount_v2, nvmlSystemGetDriverVersion, nvmlDeviceGetHandleByIndex_v2);
//   - "xids" are consumed by nvmlEventSetWait_v2, which never blocks;
//   - nvmlDeviceGetMemoryInfo_v2 answers NOT_SUPPORTED without
//     "memory_info"."reserved" (as a pre-v2 driver would), so the loader's
//     fallback to nvmlDeviceGetMemoryInfo is exercised;
//   - nvmlDeviceGetFieldValues models NVML_FI_DEV_MEMORY_TEMP and the NVLink
//     data throughput fields (all-links scope only); any other field, or a
//     missing scenario key, is NOT_SUPPORTED in that field's nvmlReturn;
//   - GPM samples are heap objects tagged with GPU and sequence number;
//     nvmlGpmMetricsGet rejects samples of two GPUs or out of order, and a
//     version other than NVML_GPM_METRICS_GET_VERSION / _SUPPORT_VERSION;
//   - the per-GPU "driver_version" override is accepted but has no NVML call
//     to surface it (the driver version is system-wide in NVML).
// Every state-changing call, and nvmlInit/nvmlShutdown, is appended as one
// JSON line to $GANTRY_FAKE_NVML_LOG when set, e.g.
//   {"call":"nvmlDeviceSetApplicationsClocks","gpu":0,"memory_mhz":2619,"graphics_mhz":1980}
// and changes the in-memory scenario, so a later query sees the new state.
//
// Values of the NVML enums are the documented ones (see src/health/nvml.cc).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../nvml_abi.h"

namespace {

using json = nlohmann::json;
using namespace gantry::health::nvml_abi;  // NOLINT(google-build-using-namespace)

// Handles are small integers in disguise: index + kHandleBase.
constexpr uintptr_t kHandleBase = 0x1000;

std::mutex g_mu;
int g_refcount = 0;
json g_scenario;
std::map<int, unsigned> g_gpm_next_seq;  // GPM samples taken, per GPU index

void AppendLog(const json& line) {
  const char* path = std::getenv("GANTRY_FAKE_NVML_LOG");
  if (path == nullptr || *path == '\0') return;
  std::ofstream out(path, std::ios::app);
  out << line.dump() << "\n";
}

[[noreturn]] void HangForever() {
  for (;;) pause();
}

json* GpuLocked(nvmlDevice_t dev) {
  uintptr_t v = reinterpret_cast<uintptr_t>(dev);
  if (v < kHandleBase) return nullptr;
  size_t index = v - kHandleBase;
  json& gpus = g_scenario["gpus"];
  if (!gpus.is_array() || index >= gpus.size()) return nullptr;
  return &gpus[index];
}

int IndexOf(nvmlDevice_t dev) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(dev) - kHandleBase);
}

// The scenario's "errors"/"hang" for `call` in `scope` (a GPU object or the
// top level): returns the error to answer with, or 0. Hangs (after releasing
// the lock) when the call is listed under "hang".
nvmlReturn_t Injected(std::unique_lock<std::mutex>& lock, const json& scope, const char* call) {
  if (scope.contains("hang") && scope["hang"].is_array()) {
    for (const json& h : scope["hang"]) {
      if (h.is_string() && h.get<std::string>() == call) {
        lock.unlock();
        HangForever();
      }
    }
  }
  if (scope.contains("errors") && scope["errors"].is_object() && scope["errors"].contains(call)) {
    return scope["errors"][call].get<int>();
  }
  return kSuccess;
}

// Common prologue of a per-device call: initialised, valid handle, injected
// errors. Sets *gpu on success.
#define FAKE_DEVICE_CALL(dev, name)                 \
  std::unique_lock<std::mutex> lock(g_mu);          \
  if (g_refcount == 0) return kErrorUninitialized;  \
  json* gpu = GpuLocked(dev);                       \
  if (gpu == nullptr) return kErrorInvalidArgument; \
  if (nvmlReturn_t injected = Injected(lock, *gpu, name); injected != 0) return injected;

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned length) {
  if (buf == nullptr) return kErrorInvalidArgument;
  if (s.size() + 1 > length) return kErrorInsufficientSize;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return kSuccess;
}

// Reads an unsigned field of `obj` into *out; NOT_SUPPORTED when absent.
template <typename T>
nvmlReturn_t Field(const json& obj, const char* key, T* out) {
  if (out == nullptr) return kErrorInvalidArgument;
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return kErrorNotSupported;
  if (!obj[key].is_number()) return kErrorUnknown;  // a malformed scenario; never throw into C
  *out = obj[key].get<T>();
  return kSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 5:
      return "Already Initialized";
    case 6:
      return "Not Found";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 10:
      return "Timeout";
    case 12:
      return "NVML Shared Library Not Found";
    case 14:
      return "Corrupted infoROM";
    case 15:
      return "GPU is lost";
    case 16:
      return "GPU requires restart";
    case 18:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refcount > 0) {
    ++g_refcount;
    return kSuccess;
  }
  const char* path = std::getenv("GANTRY_FAKE_NVML_SCENARIO");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr, "fake NVML: GANTRY_FAKE_NVML_SCENARIO is not set\n");
    return kErrorLibraryNotFound;
  }
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "fake NVML: cannot read scenario %s\n", path);
    return kErrorLibraryNotFound;
  }
  std::stringstream text;
  text << in.rdbuf();
  json scenario = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (scenario.is_discarded() || !scenario.is_object()) {
    std::fprintf(stderr, "fake NVML: scenario %s is not a JSON object\n", path);
    return kErrorUnknown;
  }
  int init_error = scenario.value("init_error", 0);
  AppendLog({{"call", "nvmlInit_v2"}});
  if (init_error != 0) return init_error;
  g_scenario = std::move(scenario);
  if (!g_scenario.contains("gpus") || !g_scenario["gpus"].is_array()) {
    g_scenario["gpus"] = json::array();
  }
  g_refcount = 1;
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit() { return nvmlInit_v2(); }

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  AppendLog({{"call", "nvmlShutdown"}});
  if (--g_refcount == 0) {
    g_scenario = json();
    g_gpm_next_seq.clear();
  }
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (nvmlReturn_t e = Injected(lock, g_scenario, "nvmlDeviceGetCount_v2"); e != 0) return e;
  if (count == nullptr) return kErrorInvalidArgument;
  *count = static_cast<unsigned>(g_scenario["gpus"].size());
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned index, nvmlDevice_t* dev) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (nvmlReturn_t e = Injected(lock, g_scenario, "nvmlDeviceGetHandleByIndex_v2"); e != 0) {
    return e;
  }
  if (dev == nullptr || index >= g_scenario["gpus"].size()) return kErrorInvalidArgument;
  *dev = reinterpret_cast<nvmlDevice_t>(kHandleBase + index);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* buf,
                                                                               unsigned length) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (nvmlReturn_t e = Injected(lock, g_scenario, "nvmlSystemGetDriverVersion"); e != 0) return e;
  return CopyString(g_scenario.value("driver_version", "550.54.15"), buf, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* buf,
                                                                      unsigned length) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetName");
  return CopyString(gpu->value("name", "NVIDIA H100 80GB HBM3"), buf, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* buf,
                                                                      unsigned length) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetUUID");
  char fallback[64];
  std::snprintf(fallback, sizeof(fallback), "GPU-fake-%04d", IndexOf(dev));
  return CopyString(gpu->value("uuid", std::string(fallback)), buf, length);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev,
                                                                            nvmlPciInfo_t* pci) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetPciInfo_v3");
  if (pci == nullptr) return kErrorInvalidArgument;
  std::memset(pci, 0, sizeof(*pci));
  char fallback[32];
  std::snprintf(fallback, sizeof(fallback), "00000001:%02X:00.0", IndexOf(dev));
  std::string id = gpu->value("pci_bus_id", std::string(fallback));
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", id.c_str());
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", id.c_str());
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev,
                                                                                 int* mode) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetPersistenceMode");
  return Field(*gpu, "persistence", mode);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(
    nvmlDevice_t dev, int error_type, int counter_type, unsigned long long* count) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetTotalEccErrors");
  if (!gpu->contains("ecc")) return kErrorNotSupported;
  const json& ecc = (*gpu)["ecc"];
  const char* counter = counter_type == kVolatileEcc ? "volatile" : "aggregate";
  if (!ecc.contains(counter)) return kErrorNotSupported;
  return Field(ecc[counter], error_type == 0 ? "corrected" : "uncorrected", count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(
    nvmlDevice_t dev, int error_type, int /*counter_type*/, int location,
    unsigned long long* count) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetMemoryErrorCounter");
  if (!gpu->contains("ecc")) return kErrorNotSupported;
  std::string key;
  if (location == kMemoryLocationSram) {
    key = "sram_";
  } else if (location == kMemoryLocationDram) {
    key = "dram_";
  } else {
    return kErrorNotSupported;
  }
  key += error_type == 0 ? "corrected" : "uncorrected";
  return Field((*gpu)["ecc"], key.c_str(), count);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev,
                                                                              unsigned* corrected,
                                                                              unsigned* uncorrected,
                                                                              unsigned* pending,
                                                                              unsigned* failure) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetRemappedRows");
  if (!gpu->contains("remapped_rows")) return kErrorNotSupported;
  if (!corrected || !uncorrected || !pending || !failure) return kErrorInvalidArgument;
  const json& r = (*gpu)["remapped_rows"];
  *corrected = r.value("corrected", 0u);
  *uncorrected = r.value("uncorrected", 0u);
  *pending = r.value("pending", 0u);
  *failure = r.value("failure", 0u);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(
    nvmlDevice_t dev, int* pending) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetRetiredPagesPendingStatus");
  return Field(*gpu, "retired_pages_pending", pending);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(
    nvmlDevice_t dev, unsigned long long* reasons) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetCurrentClocksEventReasons");
  return Field(*gpu, "clocks_event_reasons", reasons);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev,
                                                                             unsigned link,
                                                                             int* active) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetNvLinkState");
  if (active == nullptr) return kErrorInvalidArgument;
  if (!gpu->contains("nvlink") || !(*gpu)["nvlink"].is_array()) return kErrorNotSupported;
  const json& links = (*gpu)["nvlink"];
  if (link >= links.size()) return kErrorNotSupported;
  *active = links[link].get<int>();
  return kSuccess;
}

#define FAKE_PCIE_GETTER(fn, key)                                                         \
  __attribute__((visibility("default"))) nvmlReturn_t fn(nvmlDevice_t dev, unsigned* v) { \
    FAKE_DEVICE_CALL(dev, #fn);                                                           \
    if (!gpu->contains("pcie")) return kErrorNotSupported;                                \
    return Field((*gpu)["pcie"], key, v);                                                 \
  }
FAKE_PCIE_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, "gen")
FAKE_PCIE_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, "max_gen")
FAKE_PCIE_GETTER(nvmlDeviceGetCurrPcieLinkWidth, "width")
FAKE_PCIE_GETTER(nvmlDeviceGetMaxPcieLinkWidth, "max_width")

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev,
                                                                             int /*sensor*/,
                                                                             unsigned* temp) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetTemperature");
  return Field(*gpu, "temperature_c", temp);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev,
                                                                            unsigned* mw) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetPowerUsage");
  return Field(*gpu, "power_mw", mw);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(
    nvmlDevice_t dev, unsigned* mw) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetEnforcedPowerLimit");
  return Field(*gpu, "power_limit_mw", mw);
}

namespace {
nvmlReturn_t ClockField(const json& gpu, const char* graphics_key, const char* memory_key, int type,
                        unsigned* mhz) {
  if (!gpu.contains("clocks")) return kErrorNotSupported;
  if (type == kClockGraphics || type == kClockSm) return Field(gpu["clocks"], graphics_key, mhz);
  if (type == kClockMem) return Field(gpu["clocks"], memory_key, mhz);
  return kErrorNotSupported;
}
}  // namespace

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t dev,
                                                                                   int type,
                                                                                   unsigned* mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetApplicationsClock");
  return ClockField(*gpu, "app_graphics", "app_memory", type, mhz);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev,
                                                                              int type,
                                                                              unsigned* mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetMaxClockInfo");
  return ClockField(*gpu, "max_graphics", "max_memory", type, mhz);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(
    nvmlDevice_t dev, int type, unsigned* mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetDefaultApplicationsClock");
  return ClockField(*gpu, "default_app_graphics", "default_app_memory", type, mhz);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev,
                                                                           int type,
                                                                           unsigned* mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetClockInfo");
  return ClockField(*gpu, "sm", "memory", type, mhz);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t dev, nvmlUtilization_t* u) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetUtilizationRates");
  if (u == nullptr) return kErrorInvalidArgument;
  if (!gpu->contains("utilization")) return kErrorNotSupported;
  const json& j = (*gpu)["utilization"];
  if (nvmlReturn_t rc = Field(j, "gpu", &u->gpu); rc != kSuccess) return rc;
  return Field(j, "memory", &u->memory);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev,
                                                                            nvmlMemory_t* m) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetMemoryInfo");
  if (m == nullptr) return kErrorInvalidArgument;
  if (!gpu->contains("memory_info")) return kErrorNotSupported;
  const json& j = (*gpu)["memory_info"];
  if (nvmlReturn_t rc = Field(j, "total", &m->total); rc != kSuccess) return rc;
  if (nvmlReturn_t rc = Field(j, "used", &m->used); rc != kSuccess) return rc;
  m->free = m->total > m->used ? m->total - m->used : 0;
  if (j.contains("free")) return Field(j, "free", &m->free);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(
    nvmlDevice_t dev, unsigned long long* mj) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetTotalEnergyConsumption");
  return Field(*gpu, "energy_mj", mj);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPcieReplayCounter(
    nvmlDevice_t dev, unsigned* count) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetPcieReplayCounter");
  return Field(*gpu, "pcie_replay", count);
}

// Left out of libgantry_fake_nvml_old.so (GANTRY_FAKE_NVML_PRE_GPM): a driver
// from before these calls, so a missing symbol can be tested.
#ifndef GANTRY_FAKE_NVML_PRE_GPM

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev,
                                                                               nvmlMemory_v2_t* m) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetMemoryInfo_v2");
  if (m == nullptr) return kErrorInvalidArgument;
  if (m->version != kMemoryV2Version) return kErrorArgumentVersionMismatch;
  if (!gpu->contains("memory_info")) return kErrorNotSupported;
  const json& j = (*gpu)["memory_info"];
  if (!j.contains("reserved")) return kErrorNotSupported;  // a driver without the v2 call
  if (nvmlReturn_t rc = Field(j, "total", &m->total); rc != kSuccess) return rc;
  if (nvmlReturn_t rc = Field(j, "used", &m->used); rc != kSuccess) return rc;
  if (nvmlReturn_t rc = Field(j, "reserved", &m->reserved); rc != kSuccess) return rc;
  unsigned long long taken = m->used + m->reserved;
  m->free = m->total > taken ? m->total - taken : 0;
  if (j.contains("free")) return Field(j, "free", &m->free);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEncoderUtilization(
    nvmlDevice_t dev, unsigned* util, unsigned* period_us) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetEncoderUtilization");
  if (period_us == nullptr) return kErrorInvalidArgument;
  *period_us = 167000;
  return Field(*gpu, "encoder_util", util);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetDecoderUtilization(
    nvmlDevice_t dev, unsigned* util, unsigned* period_us) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetDecoderUtilization");
  if (period_us == nullptr) return kErrorInvalidArgument;
  *period_us = 167000;
  return Field(*gpu, "decoder_util", util);
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetVirtualizationMode(
    nvmlDevice_t dev, int* mode) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetVirtualizationMode");
  if (mode == nullptr) return kErrorInvalidArgument;
  *mode = 0;  // bare metal unless the scenario says otherwise
  if (gpu->contains("virtualization_mode")) return Field(*gpu, "virtualization_mode", mode);
  return kSuccess;
}

namespace {
// One field of nvmlDeviceGetFieldValues from the scenario.
void FillField(const json& gpu, nvmlFieldValue_t* v) {
  v->timestamp = 0;
  v->latencyUsec = 0;
  v->nvmlReturn = kErrorNotSupported;
  if (v->fieldId == kFiDevMemoryTemp) {
    v->valueType = kValueTypeUnsignedInt;
    v->nvmlReturn = Field(gpu, "memory_temp_c", &v->value.uiVal);
  } else if (v->fieldId == kFiDevNvLinkThroughputDataTx ||
             v->fieldId == kFiDevNvLinkThroughputDataRx) {
    // Only the all-links scope is modelled.
    if (v->scopeId != kScopeAllLinks || !gpu.contains("nvlink_throughput_kib")) return;
    v->valueType = kValueTypeUnsignedLongLong;
    v->nvmlReturn =
        Field(gpu["nvlink_throughput_kib"],
              v->fieldId == kFiDevNvLinkThroughputDataTx ? "tx" : "rx", &v->value.ullVal);
  }
}
}  // namespace

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFieldValues(
    nvmlDevice_t dev, int count, nvmlFieldValue_t* values) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceGetFieldValues");
  if (count < 0 || (count > 0 && values == nullptr)) return kErrorInvalidArgument;
  for (int i = 0; i < count; ++i) FillField(*gpu, &values[i]);
  return kSuccess;
}

// ---- GPM: a sample is a heap object naming its GPU and sequence number. ----

namespace {
struct FakeGpmSample {
  int gpu = -1;      // -1: allocated, never filled
  unsigned seq = 0;  // the GPU's n-th sample, from 0
};
bool GpmSupportedLocked(const json& gpu) {
  return gpu.contains("gpm") && gpu["gpm"].is_object() && gpu["gpm"].value("supported", 0) != 0;
}
}  // namespace

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmQueryDeviceSupport(
    nvmlDevice_t dev, nvmlGpmSupport_t* support) {
  FAKE_DEVICE_CALL(dev, "nvmlGpmQueryDeviceSupport");
  if (support == nullptr) return kErrorInvalidArgument;
  if (support->version != kGpmSupportVersion) return kErrorArgumentVersionMismatch;
  support->isSupportedDevice = GpmSupportedLocked(*gpu) ? 1 : 0;
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (sample == nullptr) return kErrorInvalidArgument;
  if (nvmlReturn_t e = Injected(lock, g_scenario, "nvmlGpmSampleAlloc"); e != 0) return e;
  *sample = reinterpret_cast<nvmlGpmSample_t>(new FakeGpmSample());
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (sample == nullptr) return kErrorInvalidArgument;
  delete reinterpret_cast<FakeGpmSample*>(sample);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dev,
                                                                     nvmlGpmSample_t sample) {
  FAKE_DEVICE_CALL(dev, "nvmlGpmSampleGet");
  if (sample == nullptr) return kErrorInvalidArgument;
  if (!GpmSupportedLocked(*gpu)) return kErrorNotSupported;
  auto* s = reinterpret_cast<FakeGpmSample*>(sample);
  s->gpu = IndexOf(dev);
  s->seq = g_gpm_next_seq[s->gpu]++;
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (get == nullptr) return kErrorInvalidArgument;
  if (get->version != kGpmMetricsGetVersion) return kErrorArgumentVersionMismatch;
  if (get->numMetrics > kGpmMetricMax || get->sample1 == nullptr || get->sample2 == nullptr) {
    return kErrorInvalidArgument;
  }
  const auto* s1 = reinterpret_cast<const FakeGpmSample*>(get->sample1);
  const auto* s2 = reinterpret_cast<const FakeGpmSample*>(get->sample2);
  // Both filled, from one GPU, sample2 the later one.
  if (s1->gpu < 0 || s1->gpu != s2->gpu || s2->seq <= s1->seq) return kErrorInvalidArgument;
  json* gpu = GpuLocked(reinterpret_cast<nvmlDevice_t>(kHandleBase + s2->gpu));
  if (gpu == nullptr) return kErrorInvalidArgument;
  if (nvmlReturn_t e = Injected(lock, *gpu, "nvmlGpmMetricsGet"); e != 0) return e;
  if (!GpmSupportedLocked(*gpu)) return kErrorNotSupported;
  const json& list = (*gpu)["gpm"].value("metrics", json::array());
  json interval = json::object();
  if (list.is_array() && !list.empty()) {
    size_t k = std::min<size_t>(s2->seq - 1, list.size() - 1);
    interval = list[k];
  }
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    const char* key = nullptr;
    switch (m.metricId) {
      case kGpmMetricGraphicsUtil:
        key = "graphics_util";
        break;
      case kGpmMetricAnyTensorUtil:
        key = "any_tensor_util";
        break;
      case kGpmMetricDramBwUtil:
        key = "dram_bw_util";
        break;
      case kGpmMetricPcieTxPerSec:
        key = "pcie_tx_mib_s";
        break;
      case kGpmMetricPcieRxPerSec:
        key = "pcie_rx_mib_s";
        break;
      default:
        break;
    }
    m.value = 0;
    m.metricInfo.shortName = m.metricInfo.longName = m.metricInfo.unit = nullptr;
    m.nvmlReturn = key == nullptr ? kErrorNotSupported : Field(interval, key, &m.value);
  }
  return kSuccess;
}

#endif  // GANTRY_FAKE_NVML_PRE_GPM

// ---- Events: one event set at a time is enough for the agent. ----

namespace {
// GPU indices registered for Xid events (per set: the set pointer is a tag).
std::vector<int> g_xid_registered;
}  // namespace

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (set == nullptr) return kErrorInvalidArgument;
  g_xid_registered.clear();
  *set = reinterpret_cast<nvmlEventSet_t>(kHandleBase);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t) {
  std::unique_lock<std::mutex> lock(g_mu);
  g_xid_registered.clear();
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(
    nvmlDevice_t dev, unsigned long long types, nvmlEventSet_t) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceRegisterEvents");
  if ((types & kEventTypeXidCriticalError) == 0) return kErrorNotSupported;
  g_xid_registered.push_back(IndexOf(dev));
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t,
                                                                        nvmlEventData_t* data,
                                                                        unsigned /*timeout_ms*/) {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_refcount == 0) return kErrorUninitialized;
  if (data == nullptr) return kErrorInvalidArgument;
  // Never blocks: the agent polls with timeout 0 anyway.
  for (int index : g_xid_registered) {
    json& gpu = g_scenario["gpus"][static_cast<size_t>(index)];
    if (!gpu.contains("xids") || !gpu["xids"].is_array() || gpu["xids"].empty()) continue;
    json& xids = gpu["xids"];
    if (!xids[0].is_number()) return kErrorUnknown;
    data->device = reinterpret_cast<nvmlDevice_t>(kHandleBase + static_cast<uintptr_t>(index));
    data->eventType = kEventTypeXidCriticalError;
    data->eventData = xids[0].get<unsigned long long>();
    data->gpuInstanceId = data->computeInstanceId = 0xFFFFFFFF;
    xids.erase(0);
    return kSuccess;
  }
  return kErrorTimeout;
}

// ---- State changes: logged, then applied to the scenario. ----

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t dev,
                                                                                 int mode) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceSetPersistenceMode");
  AppendLog({{"call", "nvmlDeviceSetPersistenceMode"}, {"gpu", IndexOf(dev)}, {"enabled", mode}});
  (*gpu)["persistence"] = mode;
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceSetApplicationsClocks(
    nvmlDevice_t dev, unsigned memory_mhz, unsigned graphics_mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceSetApplicationsClocks");
  AppendLog({{"call", "nvmlDeviceSetApplicationsClocks"},
             {"gpu", IndexOf(dev)},
             {"memory_mhz", memory_mhz},
             {"graphics_mhz", graphics_mhz}});
  if (!gpu->contains("clocks")) return kErrorNotSupported;
  json& c = (*gpu)["clocks"];
  // The real driver refuses a pair it does not support; the fake refuses
  // anything above the maximum.
  if (memory_mhz > c.value("max_memory", 0u) || graphics_mhz > c.value("max_graphics", 0u)) {
    return kErrorInvalidArgument;
  }
  c["app_memory"] = memory_mhz;
  c["app_graphics"] = graphics_mhz;
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceResetApplicationsClocks(
    nvmlDevice_t dev) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceResetApplicationsClocks");
  AppendLog({{"call", "nvmlDeviceResetApplicationsClocks"}, {"gpu", IndexOf(dev)}});
  if (!gpu->contains("clocks")) return kErrorNotSupported;
  json& c = (*gpu)["clocks"];
  c["app_memory"] = c.value("default_app_memory", 0u);
  c["app_graphics"] = c.value("default_app_graphics", 0u);
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t dev,
                                                                                 unsigned min_mhz,
                                                                                 unsigned max_mhz) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceSetGpuLockedClocks");
  AppendLog({{"call", "nvmlDeviceSetGpuLockedClocks"},
             {"gpu", IndexOf(dev)},
             {"min_mhz", min_mhz},
             {"max_mhz", max_mhz}});
  if (min_mhz > max_mhz) return kErrorInvalidArgument;
  (*gpu)["locked_clocks"] = {{"min", min_mhz}, {"max", max_mhz}};
  return kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceResetGpuLockedClocks(
    nvmlDevice_t dev) {
  FAKE_DEVICE_CALL(dev, "nvmlDeviceResetGpuLockedClocks");
  AppendLog({{"call", "nvmlDeviceResetGpuLockedClocks"}, {"gpu", IndexOf(dev)}});
  gpu->erase("locked_clocks");
  return kSuccess;
}

}  // extern "C"
