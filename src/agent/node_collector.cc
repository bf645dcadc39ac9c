// Node metrics from procfs/sysfs with node_exporter's names, labels and units
// (reference: shared/reference/monitoring.md §1). Files stay open and are
// re-read with pread; parsing works on string_views into the read buffer.
#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "gantry/agent/collector.h"

namespace gantry::agent {

// ---------------------------------------------------------------- FileReader

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

FileReader::FileReader(FileReader&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), buf_(std::move(other.buf_)) {
  other.fd_ = -1;
}

const std::string* FileReader::Read() {
  if (fd_ < 0) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return nullptr;
  }
  // Read until EOF: seq files hand out about a page per read.
  size_t cap = std::max<size_t>(buf_.capacity(), 4096);
  buf_.resize(cap);
  size_t len = 0;
  for (;;) {
    if (len == buf_.size()) buf_.resize(buf_.size() * 2);
    ssize_t n = ::pread(fd_, buf_.data() + len, buf_.size() - len, static_cast<off_t>(len));
    if (n < 0) {
      if (errno == EINTR) continue;
      // A file that went away (a NIC removed): reopen next time.
      ::close(fd_);
      fd_ = -1;
      buf_.clear();
      return nullptr;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  buf_.resize(len);  // keeps the capacity for the next read
  return &buf_;
}

namespace {

// ------------------------------------------------------------------ parsing

void SkipSpaces(std::string_view* s) {
  size_t i = 0;
  while (i < s->size() && ((*s)[i] == ' ' || (*s)[i] == '\t')) ++i;
  s->remove_prefix(i);
}

std::string_view NextToken(std::string_view* s) {
  SkipSpaces(s);
  size_t i = 0;
  while (i < s->size() && (*s)[i] != ' ' && (*s)[i] != '\t' && (*s)[i] != '\n') ++i;
  std::string_view t = s->substr(0, i);
  s->remove_prefix(i);
  return t;
}

bool NextU64(std::string_view* s, uint64_t* out) {
  std::string_view t = NextToken(s);
  if (t.empty()) return false;
  auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

bool ParseDouble(std::string_view t, double* out) {
  auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  return r.ec == std::errc();
}

// Calls fn(line) for each line of `text`.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    fn(line);
  }
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// node_exporter's default diskstats exclusion:
// ^(z?ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\d+n\d+p)\d+$ (partitions and virtual devices).
bool ExcludedDisk(std::string_view d) {
  for (std::string_view p : {"zram", "ram", "loop", "fd"}) {
    if (StartsWith(d, p) && AllDigits(d.substr(p.size()))) return true;
  }
  for (std::string_view p : {"hd", "sd", "vd", "xvd"}) {
    if (StartsWith(d, p) && d.size() > p.size() + 1 && d[p.size()] >= 'a' && d[p.size()] <= 'z' &&
        AllDigits(d.substr(p.size() + 1))) {
      return true;
    }
  }
  if (StartsWith(d, "nvme")) {
    std::string_view r = d.substr(4);
    size_t n = r.find('n');
    if (n == std::string_view::npos || !AllDigits(r.substr(0, n))) return false;
    r = r.substr(n + 1);
    size_t p = r.find('p');
    return p != std::string_view::npos && AllDigits(r.substr(0, p)) && AllDigits(r.substr(p + 1));
  }
  return false;
}

// /proc/mounts escapes space, tab, newline and backslash as octal (\040).
void UnescapeMount(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = in[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out->push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out->push_back(in[i]);
  }
}

constexpr std::string_view kCpuModes[] = {"user",   "nice", "system",  "idle",
                                          "iowait", "irq",  "softirq", "steal"};

class NodeCollector : public Collector {
 public:
  explicit NodeCollector(const NodeCollectorOptions& o)
      : options_(o),
        prefix_(o.root == "/" ? "" : o.root),
        stat_(prefix_ + "/proc/stat"),
        loadavg_(prefix_ + "/proc/loadavg"),
        meminfo_(prefix_ + "/proc/meminfo"),
        diskstats_(prefix_ + "/proc/diskstats"),
        mounts_(prefix_ + "/proc/mounts"),
        netdev_(prefix_ + "/proc/net/dev"),
        psi_{FileReader(prefix_ + "/proc/pressure/cpu"), FileReader(prefix_ + "/proc/pressure/io"),
             FileReader(prefix_ + "/proc/pressure/memory")} {
    long hz = ::sysconf(_SC_CLK_TCK);
    user_hz_ = hz > 0 ? static_cast<double>(hz) : 100.0;
    utsname u{};
    if (::uname(&u) == 0) {
      uname_ = {u.domainname, u.machine, u.nodename, u.release, u.sysname, u.version};
    }
  }

  std::string_view name() const override { return "node"; }

  void Collect(SnapshotWriter* w) override {
    CollectStat(w);
    CollectLoad(w);
    CollectPressure(w);
    CollectMeminfo(w);
    CollectDisks(w);
    CollectFilesystems(w);
    CollectNetwork(w);
    auto t = w->Begin("node_time_seconds", "System time in seconds since epoch (1970).",
                      MetricType::kGauge);
    w->Add(t, static_cast<double>(w->time_ms()) / 1000.0);
    if (!uname_.empty()) {
      auto f = w->Begin("node_uname_info",
                        "Labeled system information as provided by the uname "
                        "system call.",
                        MetricType::kGauge);
      w->Add(f, 1,
             {{"domainname", uname_[0]},
              {"machine", uname_[1]},
              {"nodename", uname_[2]},
              {"release", uname_[3]},
              {"sysname", uname_[4]},
              {"version", uname_[5]}});
    }
  }

 private:
  void CollectStat(SnapshotWriter* w) {
    const std::string* text = stat_.Read();
    if (text == nullptr) return;
    auto cpu = w->Begin("node_cpu_seconds_total", "Seconds the CPUs spent in each mode.",
                        MetricType::kCounter);
    auto guest =
        w->Begin("node_cpu_guest_seconds_total",
                 "Seconds the CPUs spent in guests (VMs) for each mode.", MetricType::kCounter);
    ForEachLine(*text, [&](std::string_view line) {
      if (StartsWith(line, "cpu") && line.size() > 3 && line[3] >= '0' && line[3] <= '9') {
        std::string_view rest = line;
        std::string_view id = NextToken(&rest).substr(3);
        uint64_t v[10] = {};
        int n = 0;
        while (n < 10 && NextU64(&rest, &v[n])) ++n;
        if (n < 8) return;
        for (int m = 0; m < 8; ++m) {
          uint64_t ticks = v[m];
          w->Add(cpu, static_cast<double>(ticks) / user_hz_, {{"cpu", id}, {"mode", kCpuModes[m]}});
        }
        if (n >= 10) {
          w->Add(guest, static_cast<double>(v[8]) / user_hz_, {{"cpu", id}, {"mode", "user"}});
          w->Add(guest, static_cast<double>(v[9]) / user_hz_, {{"cpu", id}, {"mode", "nice"}});
        }
        return;
      }
      std::string_view rest = line;
      std::string_view key = NextToken(&rest);
      uint64_t value = 0;
      if (!NextU64(&rest, &value)) return;
      if (key == "btime") {
        w->Add(
            w->Begin("node_boot_time_seconds", "Node boot time, in unixtime.", MetricType::kGauge),
            static_cast<double>(value));
      } else if (key == "ctxt") {
        w->Add(w->Begin("node_context_switches_total", "Total number of context switches.",
                        MetricType::kCounter),
               static_cast<double>(value));
      } else if (key == "intr") {
        w->Add(w->Begin("node_intr_total", "Total number of interrupts serviced.",
                        MetricType::kCounter),
               static_cast<double>(value));
      } else if (key == "processes") {
        w->Add(w->Begin("node_forks_total", "Total number of forks.", MetricType::kCounter),
               static_cast<double>(value));
      } else if (key == "procs_running") {
        w->Add(w->Begin("node_procs_running", "Number of processes in runnable state.",
                        MetricType::kGauge),
               static_cast<double>(value));
      } else if (key == "procs_blocked") {
        w->Add(w->Begin("node_procs_blocked",
                        "Number of processes blocked waiting for I/O to "
                        "complete.",
                        MetricType::kGauge),
               static_cast<double>(value));
      }
    });
  }

  void CollectLoad(SnapshotWriter* w) {
    const std::string* text = loadavg_.Read();
    if (text == nullptr) return;
    std::string_view rest = *text;
    static constexpr std::string_view kNames[] = {"node_load1", "node_load5", "node_load15"};
    static constexpr std::string_view kHelp[] = {"1m load average.", "5m load average.",
                                                 "15m load average."};
    for (int i = 0; i < 3; ++i) {
      double v = 0;
      if (!ParseDouble(NextToken(&rest), &v)) return;
      w->Add(w->Begin(kNames[i], kHelp[i], MetricType::kGauge), v);
    }
  }

  void CollectPressure(SnapshotWriter* w) {
    static constexpr std::string_view kRes[] = {"cpu", "io", "memory"};
    for (int r = 0; r < 3; ++r) {
      const std::string* text = psi_[r].Read();
      if (text == nullptr) continue;  // kernels without PSI
      ForEachLine(*text, [&](std::string_view line) {
        std::string_view rest = line;
        std::string_view kind = NextToken(&rest);
        size_t at = line.find("total=");
        if (at == std::string_view::npos) return;
        uint64_t us = 0;
        std::string_view num = line.substr(at + 6);
        if (std::from_chars(num.data(), num.data() + num.size(), us).ec != std::errc()) return;
        double seconds = static_cast<double>(us) / 1e6;
        // node_exporter: "some" is waiting, "full" is stalled (not for cpu).
        if (kind == "some") {
          pressure_name_.assign("node_pressure_").append(kRes[r]).append("_waiting_seconds_total");
          w->Add(w->Begin(pressure_name_, PressureHelp(r, false), MetricType::kCounter), seconds);
        } else if (kind == "full" && r != 0) {
          pressure_name_.assign("node_pressure_").append(kRes[r]).append("_stalled_seconds_total");
          w->Add(w->Begin(pressure_name_, PressureHelp(r, true), MetricType::kCounter), seconds);
        }
      });
    }
  }

  static std::string_view PressureHelp(int r, bool stalled) {
    static constexpr std::string_view kWaiting[] = {
        "Total time in seconds that processes have waited for CPU time",
        "Total time in seconds that processes have waited due to IO congestion",
        "Total time in seconds that processes have waited for memory"};
    static constexpr std::string_view kStalled[] = {
        "", "Total time in seconds no process could make progress due to IO congestion",
        "Total time in seconds no process could make progress due to memory congestion"};
    return stalled ? kStalled[r] : kWaiting[r];
  }

  void CollectMeminfo(SnapshotWriter* w) {
    const std::string* text = meminfo_.Read();
    if (text == nullptr) return;
    size_t index = 0;
    ForEachLine(*text, [&](std::string_view line) {
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) return;
      std::string_view field = line.substr(0, colon);
      std::string_view rest = line.substr(colon + 1);
      uint64_t v = 0;
      if (!NextU64(&rest, &v)) return;
      bool kb = NextToken(&rest) == "kB";
      // Names are derived once per field and kept: meminfo's fields do not
      // change between reads.
      if (index >= mem_names_.size()) mem_names_.emplace_back();
      MemName& n = mem_names_[index++];
      if (n.raw != field || n.kb != kb) {
        n.raw.assign(field);
        n.kb = kb;
        n.metric = "node_memory_";
        for (char c : field) {
          if (c == '(') {
            n.metric.push_back('_');
          } else if (c != ')') {
            n.metric.push_back(c);
          }
        }
        if (kb) n.metric.append("_bytes");
        n.help = "Memory information field " + n.metric.substr(12) + ".";
      }
      w->Add(w->Begin(n.metric, n.help, MetricType::kGauge),
             static_cast<double>(kb ? v * 1024 : v));
    });
  }

  void CollectDisks(SnapshotWriter* w) {
    const std::string* text = diskstats_.Read();
    if (text == nullptr) return;
    using F = SnapshotWriter::FamilyId;
    F reads = w->Begin("node_disk_reads_completed_total",
                       "The total number of reads completed successfully.", MetricType::kCounter);
    F reads_merged = w->Begin("node_disk_reads_merged_total", "The total number of reads merged.",
                              MetricType::kCounter);
    F read_bytes = w->Begin("node_disk_read_bytes_total",
                            "The total number of bytes read successfully.", MetricType::kCounter);
    F read_time = w->Begin("node_disk_read_time_seconds_total",
                           "The total number of seconds spent by all reads.", MetricType::kCounter);
    F writes = w->Begin("node_disk_writes_completed_total",
                        "The total number of writes completed successfully.", MetricType::kCounter);
    F writes_merged = w->Begin("node_disk_writes_merged_total", "The number of writes merged.",
                               MetricType::kCounter);
    F written_bytes =
        w->Begin("node_disk_written_bytes_total", "The total number of bytes written successfully.",
                 MetricType::kCounter);
    F write_time =
        w->Begin("node_disk_write_time_seconds_total",
                 "This is the total number of seconds spent by all writes.", MetricType::kCounter);
    F io_now = w->Begin("node_disk_io_now", "The number of I/Os currently in progress.",
                        MetricType::kGauge);
    F io_time = w->Begin("node_disk_io_time_seconds_total", "Total seconds spent doing I/Os.",
                         MetricType::kCounter);
    F io_weighted = w->Begin("node_disk_io_time_weighted_seconds_total",
                             "The weighted # of seconds spent doing I/Os.", MetricType::kCounter);
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      uint64_t major = 0, minor = 0;
      if (!NextU64(&rest, &major) || !NextU64(&rest, &minor)) return;
      std::string_view dev = NextToken(&rest);
      if (dev.empty() || ExcludedDisk(dev)) return;
      uint64_t v[11] = {};
      for (int i = 0; i < 11; ++i) {
        if (!NextU64(&rest, &v[i])) return;
      }
      std::initializer_list<LabelView> l = {{"device", dev}};
      w->Add(reads, static_cast<double>(v[0]), l);
      w->Add(reads_merged, static_cast<double>(v[1]), l);
      w->Add(read_bytes, static_cast<double>(v[2]) * 512.0, l);
      w->Add(read_time, static_cast<double>(v[3]) / 1000.0, l);
      w->Add(writes, static_cast<double>(v[4]), l);
      w->Add(writes_merged, static_cast<double>(v[5]), l);
      w->Add(written_bytes, static_cast<double>(v[6]) * 512.0, l);
      w->Add(write_time, static_cast<double>(v[7]) / 1000.0, l);
      w->Add(io_now, static_cast<double>(v[8]), l);
      w->Add(io_time, static_cast<double>(v[9]) / 1000.0, l);
      w->Add(io_weighted, static_cast<double>(v[10]) / 1000.0, l);
    });
  }

  bool ExcludedMount(std::string_view fstype, std::string_view mountpoint) const {
    for (const std::string& t : options_.exclude_fstypes) {
      if (fstype == t) return true;
    }
    for (const std::string& p : options_.exclude_mount_prefixes) {
      std::string_view pv = p;
      if (!pv.empty() && pv.back() == '/') {
        if (StartsWith(mountpoint, pv)) return true;  // "/var/lib/docker/..." below only
      } else if (StartsWith(mountpoint, pv) &&
                 (mountpoint.size() == pv.size() || mountpoint[pv.size()] == '/')) {
        return true;
      }
    }
    return false;
  }

  void CollectFilesystems(SnapshotWriter* w) {
    const std::string* text = mounts_.Read();
    if (text == nullptr) return;
    using F = SnapshotWriter::FamilyId;
    F size =
        w->Begin("node_filesystem_size_bytes", "Filesystem size in bytes.", MetricType::kGauge);
    F free = w->Begin("node_filesystem_free_bytes", "Filesystem free space in bytes.",
                      MetricType::kGauge);
    F avail =
        w->Begin("node_filesystem_avail_bytes",
                 "Filesystem space available to non-root users in bytes.", MetricType::kGauge);
    F files = w->Begin("node_filesystem_files", "Filesystem total file nodes.", MetricType::kGauge);
    F files_free = w->Begin("node_filesystem_files_free", "Filesystem total free file nodes.",
                            MetricType::kGauge);
    F readonly =
        w->Begin("node_filesystem_readonly", "Filesystem read-only status.", MetricType::kGauge);
    F device_error = w->Begin("node_filesystem_device_error",
                              "Whether an error occurred while getting statistics for the given "
                              "device.",
                              MetricType::kGauge);
    seen_mounts_used_ = 0;
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      std::string_view device = NextToken(&rest);
      std::string_view mp_raw = NextToken(&rest);
      std::string_view fstype = NextToken(&rest);
      std::string_view opts = NextToken(&rest);
      if (fstype.empty()) return;
      UnescapeMount(mp_raw, &mountpoint_);
      if (ExcludedMount(fstype, mountpoint_)) return;
      // A mount point mounted over (or bind-mounted twice) is reported once.
      for (size_t i = 0; i < seen_mounts_used_; ++i) {
        if (seen_mounts_[i] == mountpoint_) return;
      }
      if (seen_mounts_used_ == seen_mounts_.size()) seen_mounts_.emplace_back();
      seen_mounts_[seen_mounts_used_++].assign(mountpoint_);
      std::string_view first_opt = opts.substr(0, opts.find(','));
      std::initializer_list<LabelView> l = {
          {"device", device}, {"fstype", fstype}, {"mountpoint", mountpoint_}};
      stat_path_.assign(prefix_).append(mountpoint_);
      struct statvfs st {};
      if (::statvfs(stat_path_.c_str(), &st) != 0) {
        w->Add(device_error, 1, l);
        return;
      }
      double frsize = static_cast<double>(st.f_frsize);
      w->Add(size, static_cast<double>(st.f_blocks) * frsize, l);
      w->Add(free, static_cast<double>(st.f_bfree) * frsize, l);
      w->Add(avail, static_cast<double>(st.f_bavail) * frsize, l);
      w->Add(files, static_cast<double>(st.f_files), l);
      w->Add(files_free, static_cast<double>(st.f_ffree), l);
      w->Add(readonly, (first_opt == "ro" || (st.f_flag & ST_RDONLY) != 0) ? 1 : 0, l);
      w->Add(device_error, 0, l);
    });
  }

  void CollectNetwork(SnapshotWriter* w) {
    const std::string* text = netdev_.Read();
    if (text == nullptr) return;
    static constexpr std::string_view kNames[16] = {
        "node_network_receive_bytes_total",      "node_network_receive_packets_total",
        "node_network_receive_errs_total",       "node_network_receive_drop_total",
        "node_network_receive_fifo_total",       "node_network_receive_frame_total",
        "node_network_receive_compressed_total", "node_network_receive_multicast_total",
        "node_network_transmit_bytes_total",     "node_network_transmit_packets_total",
        "node_network_transmit_errs_total",      "node_network_transmit_drop_total",
        "node_network_transmit_fifo_total",      "node_network_transmit_colls_total",
        "node_network_transmit_carrier_total",   "node_network_transmit_compressed_total"};
    static constexpr std::string_view kHelp[16] = {"Network device statistic receive_bytes.",
                                                   "Network device statistic receive_packets.",
                                                   "Network device statistic receive_errs.",
                                                   "Network device statistic receive_drop.",
                                                   "Network device statistic receive_fifo.",
                                                   "Network device statistic receive_frame.",
                                                   "Network device statistic receive_compressed.",
                                                   "Network device statistic receive_multicast.",
                                                   "Network device statistic transmit_bytes.",
                                                   "Network device statistic transmit_packets.",
                                                   "Network device statistic transmit_errs.",
                                                   "Network device statistic transmit_drop.",
                                                   "Network device statistic transmit_fifo.",
                                                   "Network device statistic transmit_colls.",
                                                   "Network device statistic transmit_carrier.",
                                                   "Network device statistic transmit_compressed."};
    SnapshotWriter::FamilyId fam[16];
    for (int i = 0; i < 16; ++i) fam[i] = w->Begin(kNames[i], kHelp[i], MetricType::kCounter);
    auto up = w->Begin("node_network_up", "Value is 1 if operstate is 'up', 0 otherwise.",
                       MetricType::kGauge);
    ForEachLine(*text, [&](std::string_view line) {
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) return;  // the two header lines
      std::string_view dev = line.substr(0, colon);
      SkipSpaces(&dev);
      std::string_view rest = line.substr(colon + 1);
      uint64_t v[16] = {};
      for (int i = 0; i < 16; ++i) {
        if (!NextU64(&rest, &v[i])) return;
      }
      std::initializer_list<LabelView> l = {{"device", dev}};
      for (int i = 0; i < 16; ++i) w->Add(fam[i], static_cast<double>(v[i]), l);
      FileReader* oper = Operstate(dev);
      if (const std::string* s = oper->Read(); s != nullptr) {
        std::string_view state = *s;
        while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) {
          state.remove_suffix(1);
        }
        w->Add(up, state == "up" ? 1 : 0, l);
      }
    });
  }

  FileReader* Operstate(std::string_view dev) {
    for (auto& [name, reader] : operstate_) {
      if (name == dev) return &reader;
    }
    std::string path = prefix_ + "/sys/class/net/" + std::string(dev) + "/operstate";
    operstate_.emplace_back(std::string(dev), FileReader(path));
    return &operstate_.back().second;
  }

  struct MemName {
    std::string raw, metric, help;
    bool kb = false;
  };

  NodeCollectorOptions options_;
  std::string prefix_;
  FileReader stat_, loadavg_, meminfo_, diskstats_, mounts_, netdev_;
  FileReader psi_[3];
  std::vector<std::pair<std::string, FileReader>> operstate_;
  std::vector<MemName> mem_names_;
  std::vector<std::string> uname_;
  std::vector<std::string> seen_mounts_;
  size_t seen_mounts_used_ = 0;
  std::string mountpoint_, stat_path_, pressure_name_;
  double user_hz_ = 100;
};

}  // namespace

std::unique_ptr<Collector> NewNodeCollector(const NodeCollectorOptions& options) {
  return std::make_unique<NodeCollector>(options);
}

}  // namespace gantry::agent
