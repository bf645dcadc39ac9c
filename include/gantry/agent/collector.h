// The agent's collectors: node metrics from procfs/sysfs with node_exporter's
// names, GPU metrics from NVML with dcgm-exporter's names and labels, and the
// exposition of a Snapshot in the Prometheus text format 0.0.4 or OpenMetrics
// 1.0.0.
//
//   auto node = NewNodeCollector({});                 // root "/"
//   auto gpu = NewGpuCollector({});                   // Unavailable without NVML
//   Snapshot snap;                                    // reused between collections
//   SnapshotWriter w(&snap, now_ms);
//   node->Collect(&w);
//   if (gpu.ok()) (*gpu)->Collect(&w);
//   w.Finish();
//   std::string text;                                 // reused between scrapes
//   RenderExposition(snap, NegotiateFormat(req.Header("Accept")), &text);
//
// Cost: collectors keep their procfs/sysfs files open and re-read them with
// pread into buffers they own; SnapshotWriter overwrites the previous
// Snapshot's families and series in place, so a collection whose set of
// series did not change allocates nothing. Collectors are not thread-safe:
// one thread collects at a time.
#pragma once

#include <sys/timex.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gantry/agent/snapshot.h"
#include "gantry/core/status.h"

namespace gantry::agent {

using LabelView = std::pair<std::string_view, std::string_view>;

// Fills a Snapshot in collection order, reusing what the Snapshot held from
// the previous collection. Families may be begun in any order (Finish sorts
// them by name); within one family, labels must be given sorted by name and
// each label set at most once.
class SnapshotWriter {
 public:
  SnapshotWriter(Snapshot* snapshot, int64_t time_ms);
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Starts a family and returns its id for Add (an index: it stays valid
  // while other families are begun). A family without series is dropped.
  using FamilyId = size_t;
  FamilyId Begin(std::string_view name, std::string_view help, MetricType type);
  // Adds one series to `family` (from Begin on this writer).
  void Add(FamilyId family, double value, std::initializer_list<LabelView> labels = {});
  void Add(FamilyId family, double value, const std::vector<LabelView>& labels);
  // Whether a family called `name` was begun on this writer (a textfile must
  // not serve a name a collector serves).
  bool Begun(std::string_view name) const;
  // Drops unused leftovers of the previous collection and sorts by name.
  void Finish();

  int64_t time_ms() const { return snap_->time_ms; }

 private:
  template <typename Labels>
  void AddImpl(FamilyId family, double value, const Labels& labels);

  Snapshot* snap_;
  size_t families_used_ = 0;
  std::vector<size_t> series_used_;  // per family slot
};

// A procfs/sysfs file kept open and re-read from offset 0 into a reused
// buffer (pread regenerates seq files such as /proc/stat). Exposed for tests.
class FileReader {
 public:
  explicit FileReader(std::string path) : path_(std::move(path)) {}
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  FileReader(FileReader&& other) noexcept;

  // The whole file, or nullptr when it cannot be opened or read. The string
  // stays valid until the next Read.
  const std::string* Read();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::string buf_;
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual std::string_view name() const = 0;
  // Adds this collector's families. Parts that cannot be read (a missing
  // file, an NVML call that fails) are left out; nothing here fails a scrape.
  virtual void Collect(SnapshotWriter* writer) = 0;
};

// node_exporter's collectors by their `--collector.<name>` names. `implemented`:
// gantry serves that collector's families; the others are accepted in
// switches (so a node_exporter command line translates one to one) and do
// nothing. `default_on` is node_exporter 1.5's default.
struct NodeCollectorInfo {
  std::string_view name;
  bool default_on;
  bool implemented;
  std::string_view files;     // what it reads (docs)
  std::string_view families;  // what it serves (docs)
};
const std::vector<NodeCollectorInfo>& NodeExporterCollectors();
// The entry called `name`, or nullptr when node_exporter has no such collector.
const NodeCollectorInfo* FindNodeExporterCollector(std::string_view name);

struct NodeCollectorOptions {
  // Prefix for /proc and /sys and for statfs of mount points ("/" normally;
  // a FakeRoot directory in tests).
  std::string root = "/";
  // Filesystems left out, as node_exporter's defaults: pseudo and container
  // filesystem types, and mount points under /dev, /proc, /sys, /run/credentials
  // and container storage.
  std::vector<std::string> exclude_fstypes = {
      "autofs",    "binfmt_misc", "bpf",   "cgroup",  "cgroup2",   "configfs",   "debugfs",
      "devpts",    "devtmpfs",    "erofs", "fusectl", "hugetlbfs", "iso9660",    "mqueue",
      "nsfs",      "overlay",     "proc",  "procfs",  "pstore",    "rpc_pipefs", "securityfs",
      "selinuxfs", "squashfs",    "sysfs", "tracefs"};
  std::vector<std::string> exclude_mount_prefixes = {"/dev",
                                                     "/proc",
                                                     "/sys",
                                                     "/run/credentials/",
                                                     "/var/lib/docker/",
                                                     "/var/lib/containers/storage/"};
  // Switches over node_exporter's defaults, like --collector.<name> (true) and
  // --no-collector.<name> (false); names from NodeExporterCollectors().
  std::vector<std::pair<std::string, bool>> collectors{};
  // The textfile collector's directory (--collector.textfile.directory): every
  // *.prom file there, in the Prometheus text format, is merged into the
  // scrape. "" = none (node_textfile_scrape_error stays 0).
  std::string textfile_directory{};
  // The timex collector's adjtimex(2); null = the system call. Returns the
  // clock state (5 = TIME_ERROR: not synchronised) or -1 on error.
  std::function<int(::timex*)> adjtimex{};
};

// Whether `options` switch on the collector `name` (the default, then the
// last switch for it).
bool NodeCollectorEnabled(const NodeCollectorOptions& options, std::string_view name);

// node_exporter's collectors cpu, stat, loadavg, pressure, meminfo,
// diskstats, filesystem, netdev, netclass, netstat, sockstat, vmstat, filefd,
// timex, softnet, conntrack, entropy, arp, udp_queues, textfile, time and
// uname (docs/agent.md lists files and families), each timed as
// node_scrape_collector_duration_seconds{collector} with
// node_scrape_collector_success{collector} (0 when its files cannot be read
// or parsed). Named as node_exporter names them, e.g.:
//   node_cpu_seconds_total{cpu,mode}, node_cpu_guest_seconds_total{cpu,mode},
//   node_load1/5/15, node_pressure_{cpu,io,memory}_waiting_seconds_total,
//   node_pressure_{io,memory}_stalled_seconds_total, node_memory_<Field>_bytes,
//   node_disk_*{device}, node_filesystem_*{device,fstype,mountpoint},
//   node_network_*{device}, node_network_up{device}, node_boot_time_seconds,
//   node_time_seconds, node_uname_info{...}, node_context_switches_total,
//   node_intr_total, node_forks_total, node_procs_running, node_procs_blocked.
std::unique_ptr<Collector> NewNodeCollector(const NodeCollectorOptions& options);

struct GpuCollectorOptions {
  std::string nvml_library;  // "" = $GANTRY_NVML_LIBRARY or libnvidia-ml.so.1
  std::string hostname;      // the Hostname label; "" = gethostname()
};

// dcgm-exporter's default fields with its labels {gpu, UUID, device
// ("nvidia<i>"), modelName, pci_bus_id, Hostname}: DCGM_FI_DEV_GPU_UTIL,
// MEM_COPY_UTIL, FB_USED/FB_FREE (MiB), POWER_USAGE (W),
// TOTAL_ENERGY_CONSUMPTION (mJ), GPU_TEMP, SM_CLOCK, MEM_CLOCK, XID_ERRORS
// (last Xid, 0 = none), PCIE_REPLAY_COUNTER, CORRECTABLE/UNCORRECTABLE
// _REMAPPED_ROWS, ROW_REMAP_FAILURE, ECC_SBE_VOL_TOTAL, ECC_DBE_VOL_TOTAL.
// Unavailable when NVML cannot be loaded (no driver): run without GPU metrics.
Result<std::unique_ptr<Collector>> NewGpuCollector(const GpuCollectorOptions& options);

enum class ExpositionFormat { kPrometheusText, kOpenMetrics };

// OpenMetrics when the Accept header (may be null) lists
// application/openmetrics-text without q=0; the text format otherwise.
ExpositionFormat NegotiateFormat(const std::string* accept);
std::string_view ContentType(ExpositionFormat format);

// Renders `snapshot` into *out (cleared first; its capacity is reused).
// Prometheus text 0.0.4: HELP, TYPE and samples, no timestamps.
// OpenMetrics 1.0.0: a counter named "x_total" is announced as family "x"
// with samples "x_total"; a counter whose name lacks "_total" is announced
// as type "unknown" so its sample name stays the same in both formats (the
// names dashboards query); ends with "# EOF".
void RenderExposition(const Snapshot& snapshot, ExpositionFormat format, std::string* out);

}  // namespace gantry::agent
