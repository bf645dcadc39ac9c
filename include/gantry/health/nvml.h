// NVML, loaded with dlopen at run time (no build dependency on the driver or
// CUDA): the few calls `gantry health` and `gantry tune` use, declared by
// Gantry itself. Tests load a fake NVML built from this repository
// (src/health/fake_nvml/), which implements the same C symbols from a JSON
// scenario and records every call that changes state.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Nvml> nvml, Nvml::Load());   // "" = libnvidia-ml.so.1
//   ASSIGN_OR_RETURN(int n, nvml->DeviceCount());
//   ASSIGN_OR_RETURN(EccCounts ecc, nvml->Ecc(0));
//
// Every per-device call takes the NVML index. A call the GPU does not support
// returns Unimplemented (NVML_ERROR_NOT_SUPPORTED), so checks can skip that
// part; other NVML errors return Unavailable/Internal with NVML's error string
// and the call's name ("nvmlDeviceGetRemappedRows(GPU 3): GPU is lost").
// Thread-safe as NVML is; the object calls nvmlShutdown when destroyed.
//
// Fake NVML scenario (JSON; path in $GANTRY_FAKE_NVML_SCENARIO, call log
// appended as JSON lines to $GANTRY_FAKE_NVML_LOG when set):
//   {"driver_version": "550.54.15", "init_error": 0 (an nvmlReturn_t to fail nvmlInit with),
//    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...", "pci_bus_id":
//    "00000001:00:00.0",
//              "driver_version": optional per-GPU override (to test inconsistency),
//              "persistence": 1, "ecc": {"volatile": {"corrected": 0, "uncorrected": 0},
//                                       "aggregate": {"corrected": 0, "uncorrected": 0},
//                                       "sram_uncorrected": 0, "sram_corrected": 0,
//                                       "dram_uncorrected": 0, "dram_corrected": 0},
//              "remapped_rows": {"corrected": 0, "uncorrected": 0, "pending": 0, "failure": 0},
//              "retired_pages_pending": 0,
//              "clocks_event_reasons": 0, "nvlink": [1,1,...] (state per link; absent = not
//              supported), "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
//              "temperature_c": 40, "power_mw": 300000, "power_limit_mw": 700000,
//              "clocks": {"app_graphics": 1755, "app_memory": 2619, "max_graphics": 1980,
//                         "max_memory": 2619, "default_app_graphics": 1755,
//                         "default_app_memory": 2619,
//                         "sm": 1980, "memory": 2619 (current, nvmlDeviceGetClockInfo)},
//              "utilization": {"gpu": 37, "memory": 12} (percent),
//              "memory_info": {"total": 85899345920, "used": 1073741824, "reserved": 0}
//                             (bytes; free = total - used - reserved unless "free" is given;
//                             "reserved" absent = nvmlDeviceGetMemoryInfo_v2 not supported),
//              "memory_temp_c": 45 (NVML_FI_DEV_MEMORY_TEMP), "encoder_util": 3,
//              "decoder_util": 4 (percent), "nvlink_throughput_kib": {"tx": 1024, "rx": 2048}
//                             (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX, all links),
//              "virtualization_mode": 0 (nvmlGpuVirtualizationMode_t),
//              "gpm": {"supported": 1, "metrics": [{"graphics_util": 55.5, "any_tensor_util": 20,
//                      "dram_bw_util": 30, "pcie_tx_mib_s": 100, "pcie_rx_mib_s": 200}, ...]}
//                     (nvmlGpmMetricsGet between a GPU's samples n-1 and n, counted from 0,
//                     answers metrics[n-1], the last entry once past the end; a key left out is
//                     NOT_SUPPORTED for that metric; no "gpm" = GPM not supported),
//              "energy_mj": 123456 (total energy since driver load), "pcie_replay": 0,
//              "xids": [79, ...] (Xid critical errors, delivered once each, in order,
//                      by nvmlEventSetWait_v2 to an event set registered for the GPU),
//              "errors": {"nvmlDeviceGetRemappedRows": 15 (an nvmlReturn_t to return), ...},
//              "hang": ["nvmlDeviceGetTemperature"] (calls that block forever)}]}
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::health {

struct EccCounts {
  // nvmlDeviceGetTotalEccErrors: volatile (since driver load) and aggregate (lifetime).
  uint64_t volatile_corrected = 0, volatile_uncorrected = 0;
  uint64_t aggregate_corrected = 0, aggregate_uncorrected = 0;
  // nvmlDeviceGetMemoryErrorCounter (aggregate) by location.
  uint64_t sram_corrected = 0, sram_uncorrected = 0;
  uint64_t dram_corrected = 0, dram_uncorrected = 0;
};

struct RemappedRows {
  unsigned corrected = 0, uncorrected = 0;
  bool pending = false, failure = false;
};

struct PcieLink {
  unsigned gen = 0, max_gen = 0, width = 0, max_width = 0;
};

struct GpuClocks {  // MHz
  unsigned app_graphics = 0, app_memory = 0;
  unsigned max_graphics = 0, max_memory = 0;
  unsigned default_app_graphics = 0, default_app_memory = 0;
};

struct GpuUtilization {  // percent over NVML's last sample period
  unsigned gpu = 0, memory = 0;
};

struct GpuMemory {  // bytes (nvmlDeviceGetMemoryInfo_v2, else nvmlDeviceGetMemoryInfo)
  uint64_t total = 0, free = 0, used = 0;
  // Reserved by the driver and firmware; only nvmlDeviceGetMemoryInfo_v2
  // reports it (false with the v1 call).
  bool has_reserved = false;
  uint64_t reserved = 0;
};

// nvmlDeviceGetFieldValues: one requested field and what NVML answered.
struct FieldValue {
  unsigned field = 0;  // NVML_FI_* id
  unsigned scope = 0;  // link for NVLink fields; 0xFFFFFFFF = all links
  Status status;       // the per-field nvmlReturn (Unimplemented: not supported)
  double value = 0;    // converted from NVML's value type
};

// A FieldValue to ask nvmlDeviceGetFieldValues for.
inline FieldValue FieldRequest(unsigned field, unsigned scope = 0) {
  FieldValue f;
  f.field = field;
  f.scope = scope;
  return f;
}

// Five GPM metrics (nvmlGpmMetricsGet) over the interval between two samples,
// in NVML's units: utilisations in percent (0..100), PCIe in MiB/s. A metric
// the GPU did not report is unset.
struct GpmMetrics {
  std::optional<double> graphics_util, any_tensor_util, dram_bw_util;
  std::optional<double> pcie_tx_mib_s, pcie_rx_mib_s;
};

// NVML field ids Gantry reads (nvml.h NVML_FI_DEV_*).
inline constexpr unsigned kFieldMemoryTemp = 82;
inline constexpr unsigned kFieldNvLinkThroughputDataTx = 138;  // KiB since driver load
inline constexpr unsigned kFieldNvLinkThroughputDataRx = 139;
inline constexpr unsigned kFieldScopeAllLinks = 0xFFFFFFFFu;

struct GpuXid {
  int gpu = 0;       // NVML index
  uint64_t xid = 0;  // the Xid number (eventData)
};

// nvmlDeviceGetCurrentClocksEventReasons bits (reference: health.md §3).
inline constexpr uint64_t kClockEventIdle = 0x1;
inline constexpr uint64_t kClockEventAppSetting = 0x2;
inline constexpr uint64_t kClockEventSwPowerCap = 0x4;
inline constexpr uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr uint64_t kClockEventSwThermal = 0x20;
inline constexpr uint64_t kClockEventHwThermal = 0x40;
inline constexpr uint64_t kClockEventPowerBrake = 0x80;

class Nvml {
 public:
  // `library` "" means $GANTRY_NVML_LIBRARY if set, else "libnvidia-ml.so.1".
  // Unavailable when the library cannot be opened (no NVIDIA driver: checks
  // then report GPUs as absent) or nvmlInit fails (the message says why).
  static Result<std::unique_ptr<Nvml>> Load(const std::string& library = "");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  Result<int> DeviceCount();
  Result<std::string> DriverVersion();  // system-wide
  Result<std::string> Name(int gpu);
  Result<std::string> Uuid(int gpu);
  Result<std::string> PciBusId(int gpu);
  Result<bool> PersistenceMode(int gpu);
  Result<EccCounts> Ecc(int gpu);
  Result<RemappedRows> RemappedRowsOf(int gpu);
  Result<bool> RetiredPagesPending(int gpu);
  Result<uint64_t> ClocksEventReasons(int gpu);
  // One entry per link the GPU reports (true = active); empty when the GPU
  // has no NVLink (Unimplemented for link 0).
  Result<std::vector<bool>> NvLinkStates(int gpu);
  Result<PcieLink> Pcie(int gpu);
  Result<unsigned> TemperatureC(int gpu);
  Result<unsigned> PowerUsageMw(int gpu);
  Result<unsigned> PowerLimitMw(int gpu);
  Result<GpuClocks> Clocks(int gpu);
  // Current clocks in MHz (nvmlDeviceGetClockInfo NVML_CLOCK_SM / NVML_CLOCK_MEM).
  Result<unsigned> SmClockMhz(int gpu);
  Result<unsigned> MemClockMhz(int gpu);
  Result<GpuUtilization> Utilization(int gpu);  // nvmlDeviceGetUtilizationRates
  Result<GpuMemory> MemoryInfo(int gpu);        // nvmlDeviceGetMemoryInfo_v2, else _v1
  Result<uint64_t> TotalEnergyMj(int gpu);      // nvmlDeviceGetTotalEnergyConsumption
  Result<unsigned> PcieReplayCounter(int gpu);  // nvmlDeviceGetPcieReplayCounter
  // Encoder / decoder utilisation in percent (nvmlDeviceGet{En,De}coderUtilization).
  Result<unsigned> EncoderUtilization(int gpu);
  Result<unsigned> DecoderUtilization(int gpu);
  // nvmlGpuVirtualizationMode_t (0 bare metal, 1 passthrough, 2 vGPU guest, ...).
  Result<int> VirtualizationMode(int gpu);
  // nvmlDeviceGetFieldValues for `fields` ({field, scope} filled in; status
  // and value filled from NVML). The whole call fails only when NVML does;
  // a field the GPU does not support has its own Unimplemented status.
  Result<std::vector<FieldValue>> FieldValues(int gpu, std::vector<FieldValue> fields);

  // GPM (GPU Performance Monitoring, Hopper and later; driver 525+).
  // GpmSupported: nvmlGpmQueryDeviceSupport; Unimplemented when the library
  // has no GPM API. GpmCollect takes a new sample (nvmlGpmSampleGet) and
  // returns the metrics between it and the GPU's previous sample, which the
  // object keeps (two sample buffers per GPU, freed at destruction); the first
  // call for a GPU only takes the sample and returns std::nullopt. Call from
  // one thread at a time.
  Result<bool> GpmSupported(int gpu);
  Result<std::optional<GpmMetrics>> GpmCollect(int gpu);

  // Xid critical errors that arrived since the last call, without waiting.
  // The first call creates an NVML event set and registers every GPU for
  // nvmlEventTypeXidCriticalError (as dcgm-exporter does); GPUs that do not
  // support events are left out. Unimplemented when the library has no event
  // API. Call from one thread at a time.
  Result<std::vector<GpuXid>> PollXids();

  // State changes (root): gantry tune.
  Status SetPersistenceMode(int gpu, bool enabled);
  Status SetApplicationsClocks(int gpu, unsigned memory_mhz, unsigned graphics_mhz);
  Status ResetApplicationsClocks(int gpu);
  Status SetGpuLockedClocks(int gpu, unsigned min_mhz, unsigned max_mhz);
  Status ResetGpuLockedClocks(int gpu);

  // The library actually opened (for messages and `--json`).
  const std::string& library() const;

 private:
  struct Impl;
  explicit Nvml(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gantry::health
