// GPU metrics through NVML with dcgm-exporter's field names and labels
// (reference: shared/reference/monitoring.md §2). Identity labels are read
// once; a call a GPU does not support (Unimplemented) is not asked again.
#include <unistd.h>

#include <array>

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
}};

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
  kCallCount
};

struct Gpu {
  std::string index, uuid, device, model, pci_bus_id;
  std::array<bool, kCallCount> unsupported{};
  double last_xid = 0;
  bool xid_supported = false;
};

class GpuCollector : public Collector {
 public:
  GpuCollector(std::unique_ptr<health::Nvml> nvml, std::vector<Gpu> gpus, std::string hostname)
      : nvml_(std::move(nvml)), gpus_(std::move(gpus)), hostname_(std::move(hostname)) {
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
      std::initializer_list<LabelView> l = {{"Hostname", hostname_}, {"UUID", g.uuid},
                                            {"device", g.device},    {"gpu", g.index},
                                            {"modelName", g.model},  {"pci_bus_id", g.pci_bus_id}};
      auto add = [&](Field f, double v) { w->Add(fam[f], v, l); };
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
    }
  }

 private:
  static bool Ask(const Gpu& g, Call c) { return !g.unsupported[c]; }

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
  bool xid_supported_ = false;
  std::array<bool, kCallCount> logged_{};
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
  return std::unique_ptr<Collector>(
      std::make_unique<GpuCollector>(std::move(nvml), std::move(gpus), std::move(host)));
}

}  // namespace gantry::agent
