// GPU metrics through NVML with dcgm-exporter's field names and labels
// (reference: shared/reference/monitoring.md §2). Identity labels and the
// driver version are read once; a call a GPU does not support
// (Unimplemented) is not asked again.
//
// Profiling fields (DCGM_FI_PROF_*) come from NVML's GPM API, which needs two
// samples: the collector takes each GPM GPU's first sample when it is
// created, so the first collection already reports the interval since start
// (dcgm-exporter's users see these series from the first scrape). If the two
// samples would be less than kGpmMinInterval apart, the first collection
// waits out the rest once. GPUs without GPM support leave the series out.
#include <unistd.h>

#include <array>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "gantry/agent/collector.h"
#include "gantry/core/log.h"
#include "gantry/health/nvml.h"

namespace gantry::agent {
namespace {

enum Field : int {
  kGpuUtil,
  kMemCopyUtil,
  kFbUsed,
  kFbFree,
  kPower,
  kEnergy,
  kTemp,
  kSmClock,
  kMemClock,
  kXid,
  kPcieReplay,
  kRemapCorrectable,
  kRemapUncorrectable,
  kRemapFailure,
  kEccSbe,
  kEccDbe,
  kMemoryTemp,
  kEncUtil,
  kDecUtil,
  kFbReserved,
  kNvLinkBandwidth,
  kVgpuLicense,
  kProfGrEngine,
  kProfTensor,
  kProfDram,
  kProfPcieTx,
  kProfPcieRx,
  kFieldCount
};

struct FieldInfo {
  std::string_view name;
  std::string_view help;
  MetricType type;
};

constexpr std::array<FieldInfo, kFieldCount> kFields = {{
    {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", MetricType::kGauge},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", MetricType::kGauge},
    {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", MetricType::kGauge},
    {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", MetricType::kGauge},
    {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", MetricType::kGauge},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
     MetricType::kCounter},
    {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", MetricType::kGauge},
    {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", MetricType::kGauge},
    {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", MetricType::kGauge},
    {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", MetricType::kGauge},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", MetricType::kCounter},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
     MetricType::kCounter},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors",
     MetricType::kCounter},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed", MetricType::kGauge},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
     MetricType::kCounter},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
     MetricType::kCounter},
    {"DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", MetricType::kGauge},
    {"DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", MetricType::kGauge},
    {"DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", MetricType::kGauge},
    {"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", MetricType::kGauge},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
     "Total number of NVLink bandwidth counters for all lanes.", MetricType::kCounter},
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "vGPU License status", MetricType::kGauge},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
     MetricType::kGauge},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
     MetricType::kGauge},
    {"DCGM_FI_PROF_DRAM_ACTIVE",
     "Ratio of cycles the device memory interface is active sending or receiving data.",
     MetricType::kGauge},
    {"DCGM_FI_PROF_PCIE_TX_BYTES",
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second.",
     MetricType::kGauge},
    {"DCGM_FI_PROF_PCIE_RX_BYTES",
     "The rate of data received over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second.",
     MetricType::kGauge},
}};

// The label dcgm-exporter adds to every series for its "label" field.
constexpr std::string_view kDriverVersionLabel = "DCGM_FI_DRIVER_VERSION";
// Shortest GPM interval the first collection accepts (see the file comment).
constexpr std::chrono::milliseconds kGpmMinInterval{100};
constexpr double kMiB = 1024.0 * 1024.0;

// The groups of fields that come from one NVML call; a group the GPU does
// not support is skipped from then on.
enum Call : int {
  kCallUtil,
  kCallMemory,
  kCallPower,
  kCallEnergy,
  kCallTemp,
  kCallSmClock,
  kCallMemClock,
  kCallPcieReplay,
  kCallRemapped,
  kCallEcc,
  kCallEncoder,
  kCallDecoder,
  kCallFields,
  kCallVirtualization,
  kCallGpm,
  kCallCount
};

struct Gpu {
  std::string index, uuid, device, model, pci_bus_id;
  std::array<bool, kCallCount> unsupported{};
  // Fields of nvmlDeviceGetFieldValues the GPU answered NOT_SUPPORTED for.
  bool memory_temp_unsupported = false, nvlink_unsupported = false;
  double last_xid = 0;
  bool xid_supported = false;
};

class GpuCollector : public Collector {
 public:
  GpuCollector(std::unique_ptr<health::Nvml> nvml, std::vector<Gpu> gpus, std::string hostname,
               std::string driver_version)
      : nvml_(std::move(nvml)),
        gpus_(std::move(gpus)),
        hostname_(std::move(hostname)),
        driver_version_(std::move(driver_version)) {
    // GPM: the first sample of each supported GPU now (see the file comment).
    for (size_t i = 0; i < gpus_.size(); ++i) {
      Gpu& g = gpus_[i];
      auto supported = nvml_->GpmSupported(static_cast<int>(i));
      if (!supported.ok() || !*supported) {
        g.unsupported[kCallGpm] = true;
        if (!supported.ok() && supported.status().code() != StatusCode::kUnimplemented) {
          log::warn("agent: {}; DCGM_FI_PROF_* left out for GPU {}", supported.status().message(),
                    i);
        }
        continue;
      }
      auto first = nvml_->GpmCollect(static_cast<int>(i));
      if (!first.ok()) Record(g, kCallGpm, first.status());
    }
    gpm_primed_at_ = std::chrono::steady_clock::now();
    // Subscribe to Xid events now, so errors between start and the first
    // scrape are not lost.
    auto first = nvml_->PollXids();
    xid_supported_ = first.ok();
    if (!first.ok()) {
      log::info("agent: no Xid events from NVML ({}); DCGM_FI_DEV_XID_ERRORS stays 0",
                first.status().message());
    } else {
      ApplyXids(*first);
    }
  }

  std::string_view name() const override { return "gpu"; }

  void Collect(SnapshotWriter* w) override {
    if (xid_supported_) {
      auto xids = nvml_->PollXids();
      if (xids.ok()) ApplyXids(*xids);
    }
    std::array<SnapshotWriter::FamilyId, kFieldCount> fam;
    for (int f = 0; f < kFieldCount; ++f) {
      fam[f] = w->Begin(kFields[f].name, kFields[f].help, kFields[f].type);
    }
    for (size_t i = 0; i < gpus_.size(); ++i) {
      Gpu& g = gpus_[i];
      int gi = static_cast<int>(i);
      // dcgm-exporter's labels, sorted by name (uppercase sorts first).
      labels_.clear();
      if (!driver_version_.empty()) labels_.emplace_back(kDriverVersionLabel, driver_version_);
      labels_.insert(labels_.end(), {{"Hostname", hostname_},
                                     {"UUID", g.uuid},
                                     {"device", g.device},
                                     {"gpu", g.index},
                                     {"modelName", g.model},
                                     {"pci_bus_id", g.pci_bus_id}});
      auto add = [&](Field f, double v) { w->Add(fam[f], v, labels_); };
      if (Ask(g, kCallUtil)) {
        auto u = nvml_->Utilization(gi);
        if (Record(g, kCallUtil, u.status())) {
          add(kGpuUtil, u->gpu);
          add(kMemCopyUtil, u->memory);
        }
      }
      if (Ask(g, kCallMemory)) {
        auto m = nvml_->MemoryInfo(gi);
        if (Record(g, kCallMemory, m.status())) {
          add(kFbUsed, static_cast<double>(m->used / (1024 * 1024)));
          add(kFbFree, static_cast<double>(m->free / (1024 * 1024)));
          if (m->has_reserved) add(kFbReserved, static_cast<double>(m->reserved / (1024 * 1024)));
        }
      }
      if (Ask(g, kCallPower)) {
        auto p = nvml_->PowerUsageMw(gi);
        if (Record(g, kCallPower, p.status())) add(kPower, *p / 1000.0);
      }
      if (Ask(g, kCallEnergy)) {
        auto e = nvml_->TotalEnergyMj(gi);
        if (Record(g, kCallEnergy, e.status())) add(kEnergy, static_cast<double>(*e));
      }
      if (Ask(g, kCallTemp)) {
        auto t = nvml_->TemperatureC(gi);
        if (Record(g, kCallTemp, t.status())) add(kTemp, *t);
      }
      if (Ask(g, kCallSmClock)) {
        auto c = nvml_->SmClockMhz(gi);
        if (Record(g, kCallSmClock, c.status())) add(kSmClock, *c);
      }
      if (Ask(g, kCallMemClock)) {
        auto c = nvml_->MemClockMhz(gi);
        if (Record(g, kCallMemClock, c.status())) add(kMemClock, *c);
      }
      if (xid_supported_) add(kXid, g.last_xid);
      if (Ask(g, kCallPcieReplay)) {
        auto r = nvml_->PcieReplayCounter(gi);
        if (Record(g, kCallPcieReplay, r.status())) add(kPcieReplay, *r);
      }
      if (Ask(g, kCallRemapped)) {
        auto r = nvml_->RemappedRowsOf(gi);
        if (Record(g, kCallRemapped, r.status())) {
          add(kRemapCorrectable, r->corrected);
          add(kRemapUncorrectable, r->uncorrected);
          add(kRemapFailure, r->failure ? 1 : 0);
        }
      }
      if (Ask(g, kCallEcc)) {
        auto e = nvml_->Ecc(gi);
        if (Record(g, kCallEcc, e.status())) {
          add(kEccSbe, static_cast<double>(e->volatile_corrected));
          add(kEccDbe, static_cast<double>(e->volatile_uncorrected));
        }
      }
      if (Ask(g, kCallEncoder)) {
        auto u = nvml_->EncoderUtilization(gi);
        if (Record(g, kCallEncoder, u.status())) add(kEncUtil, *u);
      }
      if (Ask(g, kCallDecoder)) {
        auto u = nvml_->DecoderUtilization(gi);
        if (Record(g, kCallDecoder, u.status())) add(kDecUtil, *u);
      }
      CollectFields(g, gi, add);
      if (Ask(g, kCallVirtualization)) {
        // dcgm-exporter's vGPU license status is only meaningful inside a
        // vGPU guest, which Gantry does not query (left out there); on bare
        // metal and passthrough it is 0, as DCGM reports it.
        auto mode = nvml_->VirtualizationMode(gi);
        if (Record(g, kCallVirtualization, mode.status()) && *mode != kVgpuGuestMode) {
          add(kVgpuLicense, 0);
        }
      }
      CollectGpm(g, gi, add);
    }
  }

 private:
  static constexpr int kVgpuGuestMode = 2;  // NVML_GPU_VIRTUALIZATION_MODE_VGPU

  static bool Ask(const Gpu& g, Call c) { return !g.unsupported[c]; }

  // nvmlDeviceGetFieldValues: memory temperature and NVLink data throughput
  // (TX + RX over all links, KiB since driver load, the counter dcgm-exporter
  // names DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL), in one call.
  template <typename Add>
  void CollectFields(Gpu& g, int gi, const Add& add) {
    if (!Ask(g, kCallFields) || (g.memory_temp_unsupported && g.nvlink_unsupported)) return;
    std::vector<health::FieldValue> req;
    if (!g.memory_temp_unsupported) req.push_back(health::FieldRequest(health::kFieldMemoryTemp));
    if (!g.nvlink_unsupported) {
      req.push_back(
          health::FieldRequest(health::kFieldNvLinkThroughputDataTx, health::kFieldScopeAllLinks));
      req.push_back(
          health::FieldRequest(health::kFieldNvLinkThroughputDataRx, health::kFieldScopeAllLinks));
    }
    auto got = nvml_->FieldValues(gi, std::move(req));
    if (!Record(g, kCallFields, got.status())) return;
    std::optional<double> tx, rx;
    bool nvlink_seen = false;
    for (const health::FieldValue& f : *got) {
      bool unsupported = f.status.code() == StatusCode::kUnimplemented;
      if (f.field == health::kFieldMemoryTemp) {
        if (unsupported) g.memory_temp_unsupported = true;
        if (f.status.ok()) add(kMemoryTemp, f.value);
      } else {
        nvlink_seen = true;
        if (unsupported) g.nvlink_unsupported = true;
        if (f.status.ok()) (f.field == health::kFieldNvLinkThroughputDataTx ? tx : rx) = f.value;
      }
    }
    if (nvlink_seen && tx && rx) add(kNvLinkBandwidth, *tx + *rx);
  }

  // GPM: the interval since the previous sample, in dcgm-exporter's units
  // (ratios 0..1 from NVML's percent, bytes/s from NVML's MiB/s).
  template <typename Add>
  void CollectGpm(Gpu& g, int gi, const Add& add) {
    if (!Ask(g, kCallGpm)) return;
    if (!gpm_waited_) {
      gpm_waited_ = true;
      auto since = std::chrono::steady_clock::now() - gpm_primed_at_;
      if (since < kGpmMinInterval) std::this_thread::sleep_for(kGpmMinInterval - since);
    }
    auto got = nvml_->GpmCollect(gi);
    if (!Record(g, kCallGpm, got.status()) || !got->has_value()) return;
    const health::GpmMetrics& m = **got;
    if (m.graphics_util) add(kProfGrEngine, *m.graphics_util / 100.0);
    if (m.any_tensor_util) add(kProfTensor, *m.any_tensor_util / 100.0);
    if (m.dram_bw_util) add(kProfDram, *m.dram_bw_util / 100.0);
    if (m.pcie_tx_mib_s) add(kProfPcieTx, *m.pcie_tx_mib_s * kMiB);
    if (m.pcie_rx_mib_s) add(kProfPcieRx, *m.pcie_rx_mib_s * kMiB);
  }

  // True when the call succeeded; remembers "not supported" so it is not
  // asked again, and logs other errors once per call kind.
  bool Record(Gpu& g, Call c, const Status& st) {
    if (st.ok()) return true;
    if (st.code() == StatusCode::kUnimplemented) {
      g.unsupported[c] = true;
      return false;
    }
    if (!logged_[c]) {
      logged_[c] = true;
      log::warn("agent: {} (metric left out while it fails)", st.message());
    }
    return false;
  }

  void ApplyXids(const std::vector<health::GpuXid>& events) {
    for (const auto& e : events) {
      if (e.gpu >= 0 && static_cast<size_t>(e.gpu) < gpus_.size()) {
        gpus_[static_cast<size_t>(e.gpu)].last_xid = static_cast<double>(e.xid);
      }
    }
  }

  std::unique_ptr<health::Nvml> nvml_;
  std::vector<Gpu> gpus_;
  std::string hostname_;
  std::string driver_version_;  // "" when NVML could not tell: the label is left out
  bool xid_supported_ = false;
  std::array<bool, kCallCount> logged_{};
  std::vector<LabelView> labels_;  // reused per GPU
  std::chrono::steady_clock::time_point gpm_primed_at_;
  bool gpm_waited_ = false;
};

}  // namespace

Result<std::unique_ptr<Collector>> NewGpuCollector(const GpuCollectorOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<health::Nvml> nvml, health::Nvml::Load(options.nvml_library));
  ASSIGN_OR_RETURN(int n, nvml->DeviceCount());
  std::vector<Gpu> gpus(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Gpu& g = gpus[static_cast<size_t>(i)];
    g.index = std::to_string(i);
    // dcgm-exporter uses the /dev/nvidia<minor> name; the minor number equals
    // the NVML index on the usual single-driver node.
    g.device = "nvidia" + g.index;
    g.uuid = nvml->Uuid(i).value_or("");
    g.model = nvml->Name(i).value_or("");
    g.pci_bus_id = nvml->PciBusId(i).value_or("");
  }
  std::string host = options.hostname;
  if (host.empty()) {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == 0) host = buf;
  }
  std::string driver = nvml->DriverVersion().value_or("");
  return std::unique_ptr<Collector>(std::make_unique<GpuCollector>(
      std::move(nvml), std::move(gpus), std::move(host), std::move(driver)));
}

}  // namespace gantry::agent
