// Node metrics from procfs/sysfs with node_exporter's names, labels and units
// (reference: shared/reference/monitoring.md §1). Files stay open and are
// re-read with pread; parsing works on string_views into the read buffer.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <regex>

#include "gantry/agent/collector.h"
#include "gantry/core/log.h"
#include "textfile.h"

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

// A number token of a procfs file (integers, possibly negative, as in
// /proc/net/snmp's Tcp MaxConn -1).
bool ParseNumber(std::string_view t, double* out) {
  if (t.empty()) return false;
  auto r = std::from_chars(t.data(), t.data() + t.size(), *out);
  return r.ec == std::errc() && r.ptr == t.data() + t.size();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// One integer in a sysfs/procfs file ("1500\n", "0x1003\n", "-1\n").
bool ReadInt(FileReader* f, int64_t* out) {
  const std::string* s = f->Read();
  if (s == nullptr) return false;
  std::string_view t = Trim(*s);
  int base = 10;
  bool neg = false;
  if (!t.empty() && t.front() == '-') {
    neg = true;
    t.remove_prefix(1);
  }
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty()) return false;
  int64_t v = 0;
  auto r = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (r.ec != std::errc() || r.ptr != t.data() + t.size()) return false;
  *out = neg ? -v : v;
  return true;
}

// Metric names and HELP texts derived from a file's field names, kept
// between collections by position: the fields of /proc/net/netstat,
// /proc/vmstat and the like do not change while the system runs, so a
// collection that sees the same fields builds no strings.
class NameCache {
 public:
  struct Entry {
    std::string a, b, metric, help;
    bool keep = true;  // passes the collector's field filter
  };
  void Reset() { next_ = 0; }
  template <typename Make>
  const Entry& Get(std::string_view a, std::string_view b, Make make) {
    if (next_ == entries_.size()) entries_.emplace_back();
    Entry& e = entries_[next_++];
    if (e.metric.empty() || e.a != a || e.b != b) {
      e.a.assign(a);
      e.b.assign(b);
      make(&e);
    }
    return e;
  }

 private:
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

// node_exporter's default --collector.netstat.fields and
// --collector.vmstat.fields.
constexpr const char* kNetstatFilter =
    "^(.*_(InErrors|InErrs)|Ip_Forwarding|Ip(6|Ext)_(InOctets|OutOctets)|Icmp6?_(InMsgs|OutMsgs)|"
    "TcpExt_(Listen.*|Syncookies.*|TCPSynRetrans|TCPTimeouts|TCPOFOQueue)|"
    "Tcp_(ActiveOpens|InSegs|OutSegs|OutRsts|PassiveOpens|RetransSegs|CurrEstab)|"
    "Udp6?_(InDatagrams|OutDatagrams|NoPorts|RcvbufErrors|SndbufErrors))$";
constexpr const char* kVmstatFilter = "^(oom_kill|pgpg|pswp|pg.*fault).*";

constexpr std::string_view kCpuModes[] = {"user",   "nice", "system",  "idle",
                                          "iowait", "irq",  "softirq", "steal"};

class NodeCollector : public Collector {
  // udev's properties of each block device (node_disk_info), read once per
  // device: they change only when the device does.
  struct DiskInfo {
    std::string major, minor, model, path, revision, serial, wwn;
  };

 public:
  explicit NodeCollector(const NodeCollectorOptions& o)
      : options_(o),
        prefix_(o.root == "/" ? "" : o.root),
        stat_(prefix_ + "/proc/stat"),
        cpu_stat_(prefix_ + "/proc/stat"),
        loadavg_(prefix_ + "/proc/loadavg"),
        meminfo_(prefix_ + "/proc/meminfo"),
        diskstats_(prefix_ + "/proc/diskstats"),
        mounts_(prefix_ + "/proc/mounts"),
        netdev_(prefix_ + "/proc/net/dev"),
        psi_{FileReader(prefix_ + "/proc/pressure/cpu"), FileReader(prefix_ + "/proc/pressure/io"),
             FileReader(prefix_ + "/proc/pressure/memory")},
        netstat_(prefix_ + "/proc/net/netstat"),
        snmp_(prefix_ + "/proc/net/snmp"),
        snmp6_(prefix_ + "/proc/net/snmp6"),
        sockstat_(prefix_ + "/proc/net/sockstat"),
        sockstat6_(prefix_ + "/proc/net/sockstat6"),
        vmstat_(prefix_ + "/proc/vmstat"),
        filenr_(prefix_ + "/proc/sys/fs/file-nr"),
        softnet_(prefix_ + "/proc/net/softnet_stat"),
        conntrack_count_(prefix_ + "/proc/sys/net/netfilter/nf_conntrack_count"),
        conntrack_max_(prefix_ + "/proc/sys/net/netfilter/nf_conntrack_max"),
        conntrack_stat_(prefix_ + "/proc/net/stat/nf_conntrack"),
        entropy_avail_(prefix_ + "/proc/sys/kernel/random/entropy_avail"),
        entropy_pool_(prefix_ + "/proc/sys/kernel/random/poolsize"),
        arp_(prefix_ + "/proc/net/arp"),
        udp_(prefix_ + "/proc/net/udp"),
        udp6_(prefix_ + "/proc/net/udp6"),
        clocksource_available_(
            prefix_ + "/sys/devices/system/clocksource/clocksource0/available_clocksource"),
        clocksource_current_(prefix_ +
                             "/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        os_release_(prefix_ + "/etc/os-release"),
        os_release_lib_(prefix_ + "/usr/lib/os-release"),
        selinux_enforce_(prefix_ + "/sys/fs/selinux/enforce"),
        selinux_config_(prefix_ + "/etc/selinux/config"),
        netstat_filter_(kNetstatFilter, std::regex::optimize),
        vmstat_filter_(kVmstatFilter, std::regex::optimize) {
    long hz = ::sysconf(_SC_CLK_TCK);
    user_hz_ = hz > 0 ? static_cast<double>(hz) : 100.0;
    utsname u{};
    if (::uname(&u) == 0) {
      uname_ = {u.domainname, u.machine, u.nodename, u.release, u.sysname, u.version};
    }
    long page = ::sysconf(_SC_PAGESIZE);
    page_size_ = page > 0 ? static_cast<double>(page) : 4096.0;
    adjtimex_ = o.adjtimex;
    if (!adjtimex_) adjtimex_ = [](::timex* t) { return ::adjtimex(t); };
    for (const NodeCollectorInfo& info : NodeExporterCollectors()) {
      if (!info.implemented || !NodeCollectorEnabled(o, info.name)) continue;
      PartFn fn = PartFor(info.name);
      if (fn != nullptr) parts_.push_back({info.name, fn, 0, false});
    }
    // textfile last: it checks its names against every other collector's.
    std::stable_partition(parts_.begin(), parts_.end(),
                          [](const Part& p) { return p.name != "textfile"; });
  }

  std::string_view name() const override { return "node"; }

  void Collect(SnapshotWriter* w) override {
    for (Part& p : parts_) {
      auto start = std::chrono::steady_clock::now();
      p.ok = (this->*p.fn)(w);
      p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    auto duration = w->Begin("node_scrape_collector_duration_seconds",
                             "node_exporter: Duration of a collector scrape.", MetricType::kGauge);
    auto success = w->Begin("node_scrape_collector_success",
                            "node_exporter: Whether a collector succeeded.", MetricType::kGauge);
    for (const Part& p : parts_) {
      w->Add(duration, p.seconds, {{"collector", p.name}});
      w->Add(success, p.ok ? 1 : 0, {{"collector", p.name}});
    }
  }

 private:
  using PartFn = bool (NodeCollector::*)(SnapshotWriter*);
  struct Part {
    std::string_view name;
    PartFn fn;
    double seconds;
    bool ok;
  };

  static PartFn PartFor(std::string_view name) {
    static const std::pair<std::string_view, PartFn> kParts[] = {
        {"arp", &NodeCollector::CollectArp},
        {"conntrack", &NodeCollector::CollectConntrack},
        {"cpu", &NodeCollector::CollectCpu},
        {"diskstats", &NodeCollector::CollectDisks},
        {"entropy", &NodeCollector::CollectEntropy},
        {"filefd", &NodeCollector::CollectFilefd},
        {"filesystem", &NodeCollector::CollectFilesystems},
        {"loadavg", &NodeCollector::CollectLoad},
        {"meminfo", &NodeCollector::CollectMeminfo},
        {"netclass", &NodeCollector::CollectNetclass},
        {"netdev", &NodeCollector::CollectNetwork},
        {"netstat", &NodeCollector::CollectNetstat},
        {"os", &NodeCollector::CollectOs},
        {"pressure", &NodeCollector::CollectPressure},
        {"selinux", &NodeCollector::CollectSelinux},
        {"sockstat", &NodeCollector::CollectSockstat},
        {"softnet", &NodeCollector::CollectSoftnet},
        {"stat", &NodeCollector::CollectStat},
        {"textfile", &NodeCollector::CollectTextfile},
        {"time", &NodeCollector::CollectTime},
        {"timex", &NodeCollector::CollectTimex},
        {"udp_queues", &NodeCollector::CollectUdpQueues},
        {"uname", &NodeCollector::CollectUname},
        {"vmstat", &NodeCollector::CollectVmstat},
    };
    for (const auto& [n, fn] : kParts) {
      if (n == name) return fn;
    }
    return nullptr;
  }

  bool CollectTime(SnapshotWriter* w) {
    auto t = w->Begin("node_time_seconds", "System time in seconds since epoch (1970).",
                      MetricType::kGauge);
    w->Add(t, static_cast<double>(w->time_ms()) / 1000.0);
    // localtime_r re-reads the zone file (and allocates): once an hour is
    // enough to follow daylight saving time.
    std::time_t now = static_cast<std::time_t>(w->time_ms() / 1000);
    if (now / 3600 != zone_hour_) {
      zone_hour_ = now / 3600;
      std::tm local{};
      zone_name_.clear();
      if (::localtime_r(&now, &local) != nullptr && local.tm_zone != nullptr) {
        zone_name_.assign(local.tm_zone);
        zone_offset_ = static_cast<double>(local.tm_gmtoff);
      }
    }
    if (!zone_name_.empty()) {
      w->Add(w->Begin("node_time_zone_offset_seconds", "System time zone offset in seconds.",
                      MetricType::kGauge),
             zone_offset_, {{"time_zone", zone_name_}});
    }
    // clocksource0, the one clock event device Linux has. (Families are
    // begun only when they get series: an empty one is dropped by Finish and
    // would be built anew on every collection.)
    if (const std::string* a = clocksource_available_.Read(); a != nullptr) {
      auto available =
          w->Begin("node_time_clocksource_available_info",
                   "Available clocksources read from '/sys/devices/system/clocksource'.",
                   MetricType::kGauge);
      std::string_view rest = *a;
      for (std::string_view c = NextToken(&rest); !c.empty(); c = NextToken(&rest)) {
        w->Add(available, 1, {{"clocksource", c}, {"device", "0"}});
      }
    }
    if (const std::string* c = clocksource_current_.Read(); c != nullptr) {
      std::string_view name = Trim(*c);
      if (!name.empty()) {
        auto current = w->Begin("node_time_clocksource_current_info",
                                "Current clocksource read from '/sys/devices/system/clocksource'.",
                                MetricType::kGauge);
        w->Add(current, 1, {{"clocksource", name}, {"device", "0"}});
      }
    }
    return true;
  }

  // node_exporter's os collector: /etc/os-release, else /usr/lib/os-release
  // (os-release(5)). Values are unquoted; backslash escapes are kept as written.
  bool CollectOs(SnapshotWriter* w) {
    const std::string* text = os_release_.Read();
    if (text == nullptr) text = os_release_lib_.Read();
    if (text == nullptr) return false;
    std::string_view build_id, id, id_like, image_id, image_version, name, pretty_name, variant,
        variant_id, version, version_codename, version_id;
    struct Key {
      std::string_view key;
      std::string_view* value;
    };
    const Key keys[] = {{"BUILD_ID", &build_id},
                        {"ID", &id},
                        {"ID_LIKE", &id_like},
                        {"IMAGE_ID", &image_id},
                        {"IMAGE_VERSION", &image_version},
                        {"NAME", &name},
                        {"PRETTY_NAME", &pretty_name},
                        {"VARIANT", &variant},
                        {"VARIANT_ID", &variant_id},
                        {"VERSION", &version},
                        {"VERSION_CODENAME", &version_codename},
                        {"VERSION_ID", &version_id}};
    ForEachLine(*text, [&](std::string_view line) {
      line = Trim(line);
      size_t eq = line.find('=');
      if (line.empty() || line[0] == '#' || eq == std::string_view::npos) return;
      std::string_view k = line.substr(0, eq), v = Trim(line.substr(eq + 1));
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        v = v.substr(1, v.size() - 2);
      }
      for (const Key& key : keys) {
        if (key.key == k) *key.value = v;
      }
    });
    auto info = w->Begin("node_os_info",
                         "A metric with a constant '1' value labeled by build_id, id, id_like, "
                         "image_id, image_version, name, pretty_name, variant, variant_id, "
                         "version, version_codename, version_id.",
                         MetricType::kGauge);
    w->Add(info, 1,
           {{"build_id", build_id},
            {"id", id},
            {"id_like", id_like},
            {"image_id", image_id},
            {"image_version", image_version},
            {"name", name},
            {"pretty_name", pretty_name},
            {"variant", variant},
            {"variant_id", variant_id},
            {"version", version},
            {"version_codename", version_codename},
            {"version_id", version_id}});
    // The major.minor part of VERSION_ID ("22.04.3" -> 22.04); 0 without one.
    size_t end = 0;
    while (end < version_id.size() && version_id[end] >= '0' && version_id[end] <= '9') ++end;
    if (end > 0 && end + 1 < version_id.size() && version_id[end] == '.' &&
        version_id[end + 1] >= '0' && version_id[end + 1] <= '9') {
      ++end;
      while (end < version_id.size() && version_id[end] >= '0' && version_id[end] <= '9') ++end;
    }
    double number = 0;
    if (end > 0) std::from_chars(version_id.data(), version_id.data() + end, number);
    auto ver =
        w->Begin("node_os_version", "Metric containing the major.minor part of the OS version.",
                 MetricType::kGauge);
    w->Add(ver, number, {{"id", id}, {"id_like", id_like}, {"name", name}});
    return true;
  }

  // node_exporter's selinux collector: enabled when selinuxfs is mounted
  // (its enforce file exists); the modes only then.
  bool CollectSelinux(SnapshotWriter* w) {
    const std::string* enforce = selinux_enforce_.Read();
    auto enabled = w->Begin("node_selinux_enabled", "SELinux is enabled, 1 is true, 0 is false",
                            MetricType::kGauge);
    w->Add(enabled, enforce != nullptr ? 1 : 0);
    if (enforce == nullptr) return true;
    auto current = w->Begin("node_selinux_current_mode", "Current SELinux enforcement mode",
                            MetricType::kGauge);
    w->Add(current, Trim(*enforce) == "1" ? 1 : 0);
    if (const std::string* cfg = selinux_config_.Read(); cfg != nullptr) {
      double mode = -2;
      ForEachLine(*cfg, [&](std::string_view line) {
        line = Trim(line);
        if (!StartsWith(line, "SELINUX=")) return;
        std::string_view v = Trim(line.substr(8));
        mode = v == "enforcing" ? 1 : v == "permissive" ? 0 : v == "disabled" ? -1 : mode;
      });
      if (mode > -2) {
        auto config = w->Begin("node_selinux_config_mode", "Configured SELinux enforcement mode",
                               MetricType::kGauge);
        w->Add(config, mode);
      }
    }
    return true;
  }

  // udev's database entry of a block device, /run/udev/data/b<major>:<minor>
  // (E:KEY=value lines); empty labels when there is none (as node_exporter).
  const DiskInfo& DiskInfoFor(std::string_view dev, uint64_t major, uint64_t minor) {
    for (const auto& [name, info] : disk_info_) {
      if (name == dev) return info;
    }
    DiskInfo info;
    info.major = std::to_string(major);
    info.minor = std::to_string(minor);
    FileReader udev(prefix_ + "/run/udev/data/b" + info.major + ":" + info.minor);
    if (const std::string* text = udev.Read(); text != nullptr) {
      ForEachLine(*text, [&](std::string_view line) {
        if (!StartsWith(line, "E:")) return;
        line.remove_prefix(2);
        size_t eq = line.find('=');
        if (eq == std::string_view::npos) return;
        std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
        if (k == "ID_MODEL") info.model = v;
        if (k == "ID_PATH") info.path = v;
        if (k == "ID_REVISION") info.revision = v;
        if (k == "ID_SERIAL_SHORT") info.serial = v;
        if (k == "ID_WWN") info.wwn = v;
      });
    }
    disk_info_.emplace_back(std::string(dev), std::move(info));
    return disk_info_.back().second;
  }

  bool CollectUname(SnapshotWriter* w) {
    if (uname_.empty()) return false;
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
    return true;
  }

  // node_exporter's cpu collector: the cpuN lines of /proc/stat.
  bool CollectCpu(SnapshotWriter* w) {
    const std::string* text = cpu_stat_.Read();
    if (text == nullptr) return false;
    bool any = false;
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
        any = true;
        for (int m = 0; m < 8; ++m) {
          uint64_t ticks = v[m];
          w->Add(cpu, static_cast<double>(ticks) / user_hz_, {{"cpu", id}, {"mode", kCpuModes[m]}});
        }
        if (n >= 10) {
          w->Add(guest, static_cast<double>(v[8]) / user_hz_, {{"cpu", id}, {"mode", "user"}});
          w->Add(guest, static_cast<double>(v[9]) / user_hz_, {{"cpu", id}, {"mode", "nice"}});
        }
      }
    });
    return any;
  }

  // node_exporter's stat collector: the other lines of /proc/stat.
  bool CollectStat(SnapshotWriter* w) {
    const std::string* text = stat_.Read();
    if (text == nullptr) return false;
    bool any = false;
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      std::string_view key = NextToken(&rest);
      uint64_t value = 0;
      if (!NextU64(&rest, &value)) return;
      any = any || key == "btime";
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
    return any;
  }

  bool CollectLoad(SnapshotWriter* w) {
    const std::string* text = loadavg_.Read();
    if (text == nullptr) return false;
    std::string_view rest = *text;
    static constexpr std::string_view kNames[] = {"node_load1", "node_load5", "node_load15"};
    static constexpr std::string_view kHelp[] = {"1m load average.", "5m load average.",
                                                 "15m load average."};
    for (int i = 0; i < 3; ++i) {
      double v = 0;
      if (!ParseNumber(NextToken(&rest), &v)) return false;
      w->Add(w->Begin(kNames[i], kHelp[i], MetricType::kGauge), v);
    }
    return true;
  }

  bool CollectPressure(SnapshotWriter* w) {
    static constexpr std::string_view kRes[] = {"cpu", "io", "memory"};
    bool any = false;
    for (int r = 0; r < 3; ++r) {
      const std::string* text = psi_[r].Read();
      if (text == nullptr) continue;  // kernels without PSI
      any = true;
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
    return any;
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

  bool CollectMeminfo(SnapshotWriter* w) {
    const std::string* text = meminfo_.Read();
    if (text == nullptr) return false;
    size_t index = 0;
    bool ok = true;
    ForEachLine(*text, [&](std::string_view line) {
      if (std::string_view probe = line; NextToken(&probe).empty()) return;  // a blank line
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        ok = false;
        return;
      }
      std::string_view field = line.substr(0, colon);
      std::string_view rest = line.substr(colon + 1);
      uint64_t v = 0;
      if (!NextU64(&rest, &v)) {
        ok = false;
        return;
      }
      std::string_view unit = NextToken(&rest);
      bool kb = unit == "kB";
      if ((!unit.empty() && !kb) || !NextToken(&rest).empty()) {
        ok = false;
        return;
      }
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
    return ok && index > 0;
  }

  bool CollectDisks(SnapshotWriter* w) {
    const std::string* text = diskstats_.Read();
    if (text == nullptr) return false;
    bool ok = true;
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
    // Kernel 4.18+ adds discards, 5.5+ flushes.
    F discards =
        w->Begin("node_disk_discards_completed_total",
                 "The total number of discards completed successfully.", MetricType::kCounter);
    F discards_merged = w->Begin("node_disk_discards_merged_total",
                                 "The total number of discards merged.", MetricType::kCounter);
    F discarded_sectors =
        w->Begin("node_disk_discarded_sectors_total",
                 "The total number of sectors discarded successfully.", MetricType::kCounter);
    F discard_time = w->Begin("node_disk_discard_time_seconds_total",
                              "This is the total number of seconds spent by all discards.",
                              MetricType::kCounter);
    F flushes =
        w->Begin("node_disk_flush_requests_total",
                 "The total number of flush requests completed successfully", MetricType::kCounter);
    F flush_time = w->Begin("node_disk_flush_requests_time_seconds_total",
                            "This is the total number of seconds spent by all flush requests.",
                            MetricType::kCounter);
    F disk_info =
        w->Begin("node_disk_info", "Info of /sys/block/<block_device>.", MetricType::kGauge);
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      uint64_t major = 0, minor = 0;
      if (!NextU64(&rest, &major) || !NextU64(&rest, &minor)) {
        if (!NextToken(&line).empty()) ok = false;  // not a blank line
        return;
      }
      std::string_view dev = NextToken(&rest);
      uint64_t v[17] = {};
      int n = 0;
      while (n < 17 && NextU64(&rest, &v[n])) ++n;
      if (dev.empty() || n < 11) {
        ok = false;
        return;
      }
      if (ExcludedDisk(dev)) return;
      const DiskInfo& info = DiskInfoFor(dev, major, minor);
      w->Add(disk_info, 1,
             {{"device", dev},
              {"major", info.major},
              {"minor", info.minor},
              {"model", info.model},
              {"path", info.path},
              {"revision", info.revision},
              {"serial", info.serial},
              {"wwn", info.wwn}});
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
      if (n >= 15) {
        w->Add(discards, static_cast<double>(v[11]), l);
        w->Add(discards_merged, static_cast<double>(v[12]), l);
        w->Add(discarded_sectors, static_cast<double>(v[13]), l);
        w->Add(discard_time, static_cast<double>(v[14]) / 1000.0, l);
      }
      if (n >= 17) {
        w->Add(flushes, static_cast<double>(v[15]), l);
        w->Add(flush_time, static_cast<double>(v[16]) / 1000.0, l);
      }
    });
    return ok;
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

  bool CollectFilesystems(SnapshotWriter* w) {
    const std::string* text = mounts_.Read();
    if (text == nullptr) return false;
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
    return true;
  }

  bool CollectNetwork(SnapshotWriter* w) {
    const std::string* text = netdev_.Read();
    if (text == nullptr) return false;
    bool ok = true;
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
    // Not in /proc/net/dev: node_exporter takes it from netlink, the same
    // counter as sysfs statistics/rx_nohandler.
    auto nohandler = w->Begin("node_network_receive_nohandler_total",
                              "Network device statistic receive_nohandler.", MetricType::kCounter);
    ForEachLine(*text, [&](std::string_view line) {
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) return;  // the two header lines
      std::string_view dev = line.substr(0, colon);
      SkipSpaces(&dev);
      std::string_view rest = line.substr(colon + 1);
      uint64_t v[16] = {};
      for (int i = 0; i < 16; ++i) {
        if (!NextU64(&rest, &v[i])) {
          ok = false;
          return;
        }
      }
      std::initializer_list<LabelView> l = {{"device", dev}};
      for (int i = 0; i < 16; ++i) w->Add(fam[i], static_cast<double>(v[i]), l);
      NetDevFiles* files = DevFiles(dev);
      if (int64_t nh = 0; ReadInt(&files->nohandler, &nh)) {
        w->Add(nohandler, static_cast<double>(nh), l);
      }
      if (const std::string* s = files->operstate.Read(); s != nullptr) {
        std::string_view state = *s;
        while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) {
          state.remove_suffix(1);
        }
        w->Add(up, state == "up" ? 1 : 0, l);
      }
    });
    return ok;
  }

  struct NetDevFiles {
    std::string name;
    FileReader operstate, nohandler;
  };

  NetDevFiles* DevFiles(std::string_view dev) {
    for (NetDevFiles& d : netdev_files_) {
      if (d.name == dev) return &d;
    }
    std::string base = prefix_ + "/sys/class/net/" + std::string(dev);
    netdev_files_.push_back(NetDevFiles{std::string(dev), FileReader(base + "/operstate"),
                                        FileReader(base + "/statistics/rx_nohandler")});
    return &netdev_files_.back();
  }

  // ---------------------------------------------------------------- netstat

  // "Proto: name name ...\nProto: value value ...\n" pairs (/proc/net/netstat,
  // /proc/net/snmp). False when a pair does not line up.
  bool NetstatPairs(std::string_view text, SnapshotWriter* w) {
    while (!text.empty()) {
      size_t nl = text.find('\n');
      std::string_view names = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      if (names.empty()) continue;
      nl = text.find('\n');
      std::string_view values = text.substr(0, nl);
      text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
      std::string_view proto = NextToken(&names);
      if (proto.size() < 2 || proto.back() != ':' || NextToken(&values) != proto) return false;
      proto.remove_suffix(1);
      for (;;) {
        std::string_view field = NextToken(&names);
        std::string_view value = NextToken(&values);
        if (field.empty() != value.empty()) return false;
        if (field.empty()) break;
        double v = 0;
        if (!ParseNumber(value, &v)) return false;
        AddNetstat(w, proto, field, v);
      }
    }
    return true;
  }

  void AddNetstat(SnapshotWriter* w, std::string_view proto, std::string_view field, double v) {
    const NameCache::Entry& e = netstat_names_.Get(proto, field, [&](NameCache::Entry* n) {
      n->metric.assign("node_netstat_").append(proto).append("_").append(field);
      n->help.assign("Statistic ").append(proto).append(field).append(".");
      n->keep = std::regex_match(n->metric.begin() + 13, n->metric.end(), netstat_filter_);
    });
    if (e.keep) w->Add(w->Begin(e.metric, e.help, MetricType::kUntyped), v);
  }

  bool CollectNetstat(SnapshotWriter* w) {
    netstat_names_.Reset();
    const std::string* netstat = netstat_.Read();
    if (netstat == nullptr || !NetstatPairs(*netstat, w)) return false;
    const std::string* snmp = snmp_.Read();
    if (snmp == nullptr || !NetstatPairs(*snmp, w)) return false;
    // "Ip6InReceives 123" lines; absent without IPv6.
    const std::string* snmp6 = snmp6_.Read();
    if (snmp6 == nullptr) return true;
    bool ok = true;
    ForEachLine(*snmp6, [&](std::string_view line) {
      std::string_view rest = line;
      std::string_view key = NextToken(&rest);
      if (key.empty()) return;
      double v = 0;
      size_t six = key.find('6');
      if (six == std::string_view::npos || six + 1 >= key.size() ||
          !ParseNumber(NextToken(&rest), &v)) {
        ok = false;
        return;
      }
      AddNetstat(w, key.substr(0, six + 1), key.substr(six + 1), v);
    });
    return ok;
  }

  // --------------------------------------------------------------- sockstat

  // "sockets: used 5" and "TCP: inuse 3 orphan 0 tw 1 alloc 4 mem 2" lines.
  bool SockstatLines(std::string_view text, SnapshotWriter* w) {
    bool ok = true;
    ForEachLine(text, [&](std::string_view line) {
      std::string_view rest = line;
      std::string_view proto = NextToken(&rest);
      if (proto.empty()) return;
      if (proto.size() < 2 || proto.back() != ':') {
        ok = false;
        return;
      }
      proto.remove_suffix(1);
      for (;;) {
        std::string_view key = NextToken(&rest);
        if (key.empty()) break;
        double v = 0;
        if (!ParseNumber(NextToken(&rest), &v)) {
          ok = false;
          return;
        }
        if (proto == "sockets" && key == "used") {
          w->Add(w->Begin("node_sockstat_sockets_used", "Number of IPv4 sockets in use.",
                          MetricType::kGauge),
                 v);
          continue;
        }
        AddSockstat(w, proto, key, v);
        if (key == "mem") AddSockstat(w, proto, "mem_bytes", v * page_size_);
      }
    });
    return ok;
  }

  void AddSockstat(SnapshotWriter* w, std::string_view proto, std::string_view key, double v) {
    const NameCache::Entry& e = sockstat_names_.Get(proto, key, [&](NameCache::Entry* n) {
      n->metric.assign("node_sockstat_").append(proto).append("_").append(key);
      n->help.assign("Number of ")
          .append(proto)
          .append(" sockets in state ")
          .append(key)
          .append(".");
    });
    w->Add(w->Begin(e.metric, e.help, MetricType::kGauge), v);
  }

  bool CollectSockstat(SnapshotWriter* w) {
    sockstat_names_.Reset();
    const std::string* v4 = sockstat_.Read();
    if (v4 == nullptr || !SockstatLines(*v4, w)) return false;
    const std::string* v6 = sockstat6_.Read();  // absent without IPv6
    return v6 == nullptr || SockstatLines(*v6, w);
  }

  // ----------------------------------------------------------------- vmstat

  bool CollectVmstat(SnapshotWriter* w) {
    vmstat_names_.Reset();
    const std::string* text = vmstat_.Read();
    if (text == nullptr) return false;
    bool ok = true;
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      std::string_view key = NextToken(&rest);
      if (key.empty()) return;
      double v = 0;
      if (!ParseNumber(NextToken(&rest), &v) || !NextToken(&rest).empty()) {
        ok = false;
        return;
      }
      const NameCache::Entry& e = vmstat_names_.Get(key, "", [&](NameCache::Entry* n) {
        n->metric.assign("node_vmstat_").append(key);
        n->help.assign("/proc/vmstat information field ").append(key).append(".");
        n->keep = std::regex_search(n->metric.begin() + 12, n->metric.end(), vmstat_filter_);
      });
      if (e.keep) w->Add(w->Begin(e.metric, e.help, MetricType::kUntyped), v);
    });
    return ok;
  }

  // ------------------------------------------------ filefd, entropy, conntrack

  bool CollectFilefd(SnapshotWriter* w) {
    const std::string* text = filenr_.Read();
    if (text == nullptr) return false;
    std::string_view rest = *text;
    double allocated = 0, unused = 0, maximum = 0;
    if (!ParseNumber(NextToken(&rest), &allocated) || !ParseNumber(NextToken(&rest), &unused) ||
        !ParseNumber(NextToken(&rest), &maximum)) {
      return false;
    }
    w->Add(w->Begin("node_filefd_allocated", "File descriptor statistics: allocated.",
                    MetricType::kGauge),
           allocated);
    w->Add(
        w->Begin("node_filefd_maximum", "File descriptor statistics: maximum.", MetricType::kGauge),
        maximum);
    return true;
  }

  bool CollectEntropy(SnapshotWriter* w) {
    int64_t avail = 0, pool = 0;
    if (!ReadInt(&entropy_avail_, &avail) || !ReadInt(&entropy_pool_, &pool)) return false;
    w->Add(
        w->Begin("node_entropy_available_bits", "Bits of available entropy.", MetricType::kGauge),
        static_cast<double>(avail));
    w->Add(w->Begin("node_entropy_pool_size_bits", "Bits of entropy pool.", MetricType::kGauge),
           static_cast<double>(pool));
    return true;
  }

  bool CollectConntrack(SnapshotWriter* w) {
    int64_t count = 0, max = 0;
    if (!ReadInt(&conntrack_count_, &count) || !ReadInt(&conntrack_max_, &max)) return false;
    w->Add(w->Begin("node_nf_conntrack_entries",
                    "Number of currently allocated flow entries for connection tracking.",
                    MetricType::kGauge),
           static_cast<double>(count));
    w->Add(w->Begin("node_nf_conntrack_entries_limit", "Maximum size of connection tracking table.",
                    MetricType::kGauge),
           static_cast<double>(max));
    // Per-CPU rows of hex counters under a header of names, summed.
    const std::string* text = conntrack_stat_.Read();
    if (text == nullptr) return true;
    static constexpr std::pair<std::string_view, std::string_view> kStats[] = {
        {"found", "Number of searched entries which were successful."},
        {"invalid", "Number of packets seen which can not be tracked."},
        {"ignore", "Number of packets seen which are already connected to a conntrack entry."},
        {"insert", "Number of entries inserted into the list."},
        {"insert_failed", "Number of entries for which list insertion was attempted but failed."},
        {"drop", "Number of packets dropped due to conntrack failure."},
        {"early_drop",
         "Number of dropped conntrack entries to make room for new ones, if maximum table size "
         "was reached."},
        {"search_restart",
         "Number of conntrack table lookups which had to be restarted due to hashtable resizes."},
    };
    constexpr size_t kN = sizeof kStats / sizeof kStats[0];
    int column[kN];
    double sum[kN] = {};
    std::string_view body = *text;
    size_t nl = body.find('\n');
    std::string_view header = body.substr(0, nl);
    body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    for (size_t k = 0; k < kN; ++k) {
      column[k] = -1;
      std::string_view h = header;
      for (int c = 0;; ++c) {
        std::string_view name = NextToken(&h);
        if (name.empty()) break;
        if (name == kStats[k].first) column[k] = c;
      }
    }
    bool ok = true;
    ForEachLine(body, [&](std::string_view line) {
      std::string_view rest = line;
      for (int c = 0;; ++c) {
        std::string_view t = NextToken(&rest);
        if (t.empty()) break;
        uint64_t v = 0;
        auto r = std::from_chars(t.data(), t.data() + t.size(), v, 16);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) {
          ok = false;
          return;
        }
        for (size_t k = 0; k < kN; ++k) {
          if (column[k] == c) sum[k] += static_cast<double>(v);
        }
      }
    });
    if (!ok) return false;
    for (size_t k = 0; k < kN; ++k) {
      if (column[k] < 0) continue;
      stat_name_.assign("node_nf_conntrack_stat_").append(kStats[k].first);
      w->Add(w->Begin(stat_name_, kStats[k].second, MetricType::kGauge), sum[k]);
    }
    return true;
  }

  // ---------------------------------------------------------------- softnet

  bool CollectSoftnet(SnapshotWriter* w) {
    const std::string* text = softnet_.Read();
    if (text == nullptr) return false;
    using F = SnapshotWriter::FamilyId;
    F processed = w->Begin("node_softnet_processed_total", "Number of processed packets",
                           MetricType::kCounter);
    F dropped =
        w->Begin("node_softnet_dropped_total", "Number of dropped packets", MetricType::kCounter);
    F squeezed =
        w->Begin("node_softnet_times_squeezed_total",
                 "Number of times processing packets ran out of quota", MetricType::kCounter);
    F rps = w->Begin("node_softnet_received_rps_total",
                     "Number of times the CPU was woken up by an inter-processor interrupt to "
                     "process packets steered to it (RPS)",
                     MetricType::kCounter);
    F flow_limit = w->Begin("node_softnet_flow_limit_count_total",
                            "Number of times the flow limit was reached", MetricType::kCounter);
    F backlog = w->Begin("node_softnet_backlog_len",
                         "Packets waiting in the CPU's input backlog queue", MetricType::kGauge);
    bool ok = true;
    int index = 0;
    ForEachLine(*text, [&](std::string_view line) {
      std::string_view rest = line;
      uint64_t v[13] = {};
      int n = 0;
      for (; n < 13; ++n) {
        std::string_view t = NextToken(&rest);
        if (t.empty()) break;
        auto r = std::from_chars(t.data(), t.data() + t.size(), v[n], 16);
        if (r.ec != std::errc() || r.ptr != t.data() + t.size()) {
          ok = false;
          return;
        }
      }
      if (n == 0) return;
      if (n < 3) {
        ok = false;
        return;
      }
      // Kernel 5.10+ writes the CPU number in column 13; older kernels skip
      // offline CPUs, so the line index is only a fallback.
      uint64_t cpu = n >= 13 ? v[12] : static_cast<uint64_t>(index);
      ++index;
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, cpu);
      std::initializer_list<LabelView> l = {{"cpu", std::string_view(buf, r.ptr - buf)}};
      w->Add(processed, static_cast<double>(v[0]), l);
      w->Add(dropped, static_cast<double>(v[1]), l);
      w->Add(squeezed, static_cast<double>(v[2]), l);
      if (n >= 10) w->Add(rps, static_cast<double>(v[9]), l);
      if (n >= 11) w->Add(flow_limit, static_cast<double>(v[10]), l);
      if (n >= 12) w->Add(backlog, static_cast<double>(v[11]), l);
    });
    return ok;
  }

  // -------------------------------------------------------------------- arp

  bool CollectArp(SnapshotWriter* w) {
    const std::string* text = arp_.Read();
    if (text == nullptr) return false;
    arp_used_ = 0;
    bool ok = true, header = true;
    ForEachLine(*text, [&](std::string_view line) {
      if (header) {  // "IP address       HW type     Flags ..."
        header = false;
        return;
      }
      std::string_view rest = line;
      std::string_view device;
      int n = 0;
      for (std::string_view t = NextToken(&rest); !t.empty(); t = NextToken(&rest), ++n) device = t;
      if (n == 0) return;
      if (n != 6) {
        ok = false;
        return;
      }
      for (size_t i = 0; i < arp_used_; ++i) {
        if (arp_counts_[i].first == device) {
          arp_counts_[i].second += 1;
          return;
        }
      }
      if (arp_used_ == arp_counts_.size()) arp_counts_.emplace_back();
      arp_counts_[arp_used_].first.assign(device);
      arp_counts_[arp_used_++].second = 1;
    });
    auto f = w->Begin("node_arp_entries", "ARP entries by device", MetricType::kGauge);
    for (size_t i = 0; i < arp_used_; ++i) {
      w->Add(f, arp_counts_[i].second, {{"device", arp_counts_[i].first}});
    }
    return ok;
  }

  // ------------------------------------------------------------- udp_queues

  // Sums the tx_queue:rx_queue column of /proc/net/udp or udp6 (hex bytes).
  static bool UdpQueues(std::string_view text, double* tx, double* rx) {
    *tx = *rx = 0;
    bool ok = true, header = true;
    ForEachLine(text, [&](std::string_view line) {
      if (header) {
        header = false;
        return;
      }
      std::string_view rest = line;
      std::string_view t;
      for (int i = 0; i < 5; ++i) t = NextToken(&rest);
      if (t.empty()) return;
      size_t colon = t.find(':');
      uint64_t a = 0, b = 0;
      if (colon == std::string_view::npos) {
        ok = false;
        return;
      }
      auto r1 = std::from_chars(t.data(), t.data() + colon, a, 16);
      auto r2 = std::from_chars(t.data() + colon + 1, t.data() + t.size(), b, 16);
      if (r1.ec != std::errc() || r1.ptr != t.data() + colon || r2.ec != std::errc() ||
          r2.ptr != t.data() + t.size()) {
        ok = false;
        return;
      }
      *tx += static_cast<double>(a);
      *rx += static_cast<double>(b);
    });
    return ok;
  }

  bool CollectUdpQueues(SnapshotWriter* w) {
    auto f = w->Begin("node_udp_queues",
                      "Number of allocated memory in the kernel for UDP datagrams in bytes.",
                      MetricType::kGauge);
    bool any = false, ok = true;
    FileReader* files[2] = {&udp_, &udp6_};
    static constexpr std::string_view kIp[] = {"v4", "v6"};
    for (int i = 0; i < 2; ++i) {
      const std::string* text = files[i]->Read();
      if (text == nullptr) continue;
      any = true;
      double tx = 0, rx = 0;
      if (!UdpQueues(*text, &tx, &rx)) {
        ok = false;
        continue;
      }
      w->Add(f, rx, {{"ip", kIp[i]}, {"queue", "rx"}});
      w->Add(f, tx, {{"ip", kIp[i]}, {"queue", "tx"}});
    }
    return any && ok;
  }

  // ------------------------------------------------------------------ timex

  bool CollectTimex(SnapshotWriter* w) {
    ::timex t{};
    int state = adjtimex_(&t);
    if (state < 0) return false;
    constexpr int kTimeError = 5;      // TIME_ERROR: the clock is not synchronised
    constexpr long kStaNano = 0x2000;  // STA_NANO: offset and jitter in ns
    constexpr double kPpm16 = 1e6 * 65536.0;
    const double unit = (t.status & kStaNano) != 0 ? 1e9 : 1e6;
    auto g = [&](std::string_view name, std::string_view help, double v) {
      w->Add(w->Begin(name, help, MetricType::kGauge), v);
    };
    auto c = [&](std::string_view name, std::string_view help, double v) {
      w->Add(w->Begin(name, help, MetricType::kCounter), v);
    };
    g("node_timex_offset_seconds", "Time offset in between local system and reference clock.",
      static_cast<double>(t.offset) / unit);
    g("node_timex_frequency_adjustment_ratio", "Local clock frequency adjustment.",
      1 + static_cast<double>(t.freq) / kPpm16);
    g("node_timex_maxerror_seconds", "Maximum error in seconds.",
      static_cast<double>(t.maxerror) / 1e6);
    g("node_timex_estimated_error_seconds", "Estimated error in seconds.",
      static_cast<double>(t.esterror) / 1e6);
    g("node_timex_status", "Value of the status array bits.", static_cast<double>(t.status));
    g("node_timex_loop_time_constant", "Phase-locked loop time constant.",
      static_cast<double>(t.constant));
    g("node_timex_tick_seconds", "Seconds between clock ticks.", static_cast<double>(t.tick) / 1e6);
    g("node_timex_pps_frequency_hertz", "Pulse per second frequency.",
      static_cast<double>(t.ppsfreq) / kPpm16);
    g("node_timex_pps_jitter_seconds", "Pulse per second jitter.",
      static_cast<double>(t.jitter) / unit);
    g("node_timex_pps_shift_seconds", "Pulse per second interval duration.",
      static_cast<double>(t.shift));
    g("node_timex_pps_stability_hertz",
      "Pulse per second stability, average of recent frequency changes.",
      static_cast<double>(t.stabil) / kPpm16);
    c("node_timex_pps_jitter_total", "Pulse per second count of jitter limit exceeded events.",
      static_cast<double>(t.jitcnt));
    c("node_timex_pps_calibration_total", "Pulse per second count of calibration intervals.",
      static_cast<double>(t.calcnt));
    c("node_timex_pps_error_total", "Pulse per second count of calibration errors.",
      static_cast<double>(t.errcnt));
    c("node_timex_pps_stability_exceeded_total",
      "Pulse per second count of stability limit exceeded events.", static_cast<double>(t.stbcnt));
    g("node_timex_tai_offset_seconds", "International Atomic Time (TAI) offset.",
      static_cast<double>(t.tai));
    g("node_timex_sync_status", "Is clock synchronized to a reliable server (1 = yes, 0 = no).",
      state == kTimeError ? 0 : 1);
    return true;
  }

  // --------------------------------------------------------------- netclass

  struct NetClassDev {
    std::string name;
    bool seen = false;
    std::vector<FileReader> attrs;       // kNetClassAttrs order
    std::vector<FileReader> info_attrs;  // kNetClassInfo order
  };

  struct NetClassAttr {
    std::string_view file, metric, help;
    MetricType type;
    double scale;
  };
  static constexpr NetClassAttr kNetClassAttrs[] = {
      {"addr_assign_type", "node_network_address_assign_type",
       "Network device property: address_assign_type", MetricType::kGauge, 1},
      {"carrier", "node_network_carrier", "Network device property: carrier", MetricType::kGauge,
       1},
      {"carrier_changes", "node_network_carrier_changes_total",
       "Network device property: carrier_changes_total", MetricType::kCounter, 1},
      {"carrier_up_count", "node_network_carrier_up_changes_total",
       "Network device property: carrier_up_changes_total", MetricType::kCounter, 1},
      {"carrier_down_count", "node_network_carrier_down_changes_total",
       "Network device property: carrier_down_changes_total", MetricType::kCounter, 1},
      {"dev_id", "node_network_device_id", "Network device property: device_id", MetricType::kGauge,
       1},
      {"dormant", "node_network_dormant", "Network device property: dormant", MetricType::kGauge,
       1},
      {"flags", "node_network_flags", "Network device property: flags", MetricType::kGauge, 1},
      {"ifindex", "node_network_iface_id", "Network device property: iface_id", MetricType::kGauge,
       1},
      {"iflink", "node_network_iface_link", "Network device property: iface_link",
       MetricType::kGauge, 1},
      {"link_mode", "node_network_iface_link_mode", "Network device property: iface_link_mode",
       MetricType::kGauge, 1},
      {"mtu", "node_network_mtu_bytes", "Network device property: mtu_bytes", MetricType::kGauge,
       1},
      {"name_assign_type", "node_network_name_assign_type",
       "Network device property: name_assign_type", MetricType::kGauge, 1},
      {"netdev_group", "node_network_net_dev_group", "Network device property: net_dev_group",
       MetricType::kGauge, 1},
      {"type", "node_network_protocol_type", "Network device property: protocol_type",
       MetricType::kGauge, 1},
      // Mbit/s in sysfs; node_exporter reports bytes/s (-1 "unknown" stays -125000).
      {"speed", "node_network_speed_bytes", "Network device property: speed_bytes",
       MetricType::kGauge, 125000},
      {"tx_queue_len", "node_network_transmit_queue_length",
       "Network device property: transmit_queue_length", MetricType::kGauge, 1},
  };
  static constexpr size_t kNetClassN = sizeof kNetClassAttrs / sizeof kNetClassAttrs[0];
  // node_network_info's labels (sorted), from these files.
  static constexpr std::string_view kNetClassInfo[] = {"address", "broadcast", "duplex", "ifalias",
                                                       "operstate"};

  NetClassDev* NetClass(std::string_view dev) {
    for (NetClassDev& d : netclass_) {
      if (d.name == dev) return &d;
    }
    NetClassDev d;
    d.name.assign(dev);
    std::string base = prefix_ + "/sys/class/net/" + d.name + "/";
    for (const NetClassAttr& a : kNetClassAttrs) d.attrs.emplace_back(base + std::string(a.file));
    for (std::string_view f : kNetClassInfo) d.info_attrs.emplace_back(base + std::string(f));
    netclass_.push_back(std::move(d));
    return &netclass_.back();
  }

  bool CollectNetclass(SnapshotWriter* w) {
    dir_entry_.assign(prefix_).append("/sys/class/net");
    DIR* dir = ::opendir(dir_entry_.c_str());
    if (dir == nullptr) return false;
    SnapshotWriter::FamilyId fam[kNetClassN];
    for (size_t i = 0; i < kNetClassN; ++i) {
      fam[i] = w->Begin(kNetClassAttrs[i].metric, kNetClassAttrs[i].help, kNetClassAttrs[i].type);
    }
    auto info = w->Begin("node_network_info",
                         "Non-numeric data from /sys/class/net/<iface>, value is always 1.",
                         MetricType::kGauge);
    for (NetClassDev& d : netclass_) d.seen = false;
    while (dirent* e = ::readdir(dir)) {
      std::string_view name = e->d_name;
      if (name == "." || name == ".." || name == "bonding_masters") continue;
      NetClassDev* d = NetClass(name);
      if (d->seen) continue;
      d->seen = true;
      std::initializer_list<LabelView> l = {{"device", d->name}};
      for (size_t i = 0; i < kNetClassN; ++i) {
        int64_t v = 0;
        // Attributes the driver does not support fail to read (EINVAL): left out.
        if (ReadInt(&d->attrs[i], &v)) {
          w->Add(fam[i], static_cast<double>(v) * kNetClassAttrs[i].scale, l);
        }
      }
      std::string_view values[5];
      for (size_t i = 0; i < 5; ++i) {
        const std::string* s = d->info_attrs[i].Read();
        values[i] = s == nullptr ? std::string_view() : Trim(*s);
      }
      w->Add(info, 1,
             {{"address", values[0]},
              {"broadcast", values[1]},
              {"device", d->name},
              {"duplex", values[2]},
              {"ifalias", values[3]},
              {"operstate", values[4]}});
    }
    ::closedir(dir);
    return true;
  }

  // --------------------------------------------------------------- textfile

  bool CollectTextfile(SnapshotWriter* w) {
    auto error = w->Begin("node_textfile_scrape_error",
                          "1 if there was an error opening or reading a file, 0 otherwise",
                          MetricType::kGauge);
    const std::string& dir_path = options_.textfile_directory;
    if (dir_path.empty()) {
      w->Add(error, 0);
      return true;
    }
    auto mtime = w->Begin("node_textfile_mtime_seconds",
                          "Unixtime mtime of textfiles successfully read.", MetricType::kGauge);
    bool failed = false;
    for (TextFamily& f : tf_families_) f.samples.clear();
    tf_families_.clear();
    tf_files_.clear();
    if (DIR* dir = ::opendir(dir_path.c_str()); dir != nullptr) {
      while (dirent* e = ::readdir(dir)) {
        std::string_view name = e->d_name;
        if (name.size() > 5 && name.substr(name.size() - 5) == ".prom")
          tf_files_.emplace_back(name);
      }
      ::closedir(dir);
    } else {
      LogTextfile("cannot open the textfile directory " + dir_path + ": " + std::strerror(errno));
      failed = true;
    }
    std::sort(tf_files_.begin(), tf_files_.end());
    for (const std::string& file : tf_files_) {
      tf_path_.assign(dir_path).append("/").append(file);
      struct stat st {};
      if (!ReadWhole(tf_path_, &tf_buf_, &st)) {
        LogTextfile("cannot read " + tf_path_ + ": " + std::strerror(errno));
        failed = true;
        continue;
      }
      Status s = ParsePrometheusText(tf_buf_, tf_path_, &tf_families_);
      if (!s.ok()) {
        LogTextfile(s.message());
        failed = true;
        continue;
      }
      w->Add(mtime,
             static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9,
             {{"file", tf_path_}});
    }
    for (const TextFamily& f : tf_families_) {
      // A name a collector serves (or the scrape status families) would
      // make a second family of that name, which Prometheus rejects.
      std::string_view n = f.name;
      if (w->Begun(n) || StartsWith(n, "node_scrape_collector_") ||
          StartsWith(n, "node_textfile_")) {
        LogTextfile(f.name + " in " + dir_path +
                    " is a name the agent serves itself; rename it in the textfile");
        failed = true;
        continue;
      }
      auto id = w->Begin(f.name, f.help, f.type);
      for (const TextSample& s : f.samples) {
        tf_labels_.clear();
        for (const auto& [k, v] : s.labels) tf_labels_.emplace_back(k, v);
        w->Add(id, s.value, tf_labels_);
      }
    }
    w->Add(error, failed ? 1 : 0);
    return true;
  }

  // One message per distinct problem, not one per scrape.
  void LogTextfile(const std::string& message) {
    if (message == last_textfile_error_) return;
    last_textfile_error_ = message;
    log::warn("agent: textfile collector: {}", message);
  }

  // Reads a whole file afresh (textfiles are replaced by rename, so a kept
  // descriptor would read the old file).
  static bool ReadWhole(const std::string& path, std::string* out, struct stat* st) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::fstat(fd, st) == 0 && S_ISREG(st->st_mode);
    out->clear();
    char buf[8192];
    while (ok) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ok = false;
      if (n <= 0) break;
      out->append(buf, static_cast<size_t>(n));
    }
    int saved = errno;
    ::close(fd);
    errno = saved;
    return ok;
  }

  struct MemName {
    std::string raw, metric, help;
    bool kb = false;
  };

  NodeCollectorOptions options_;
  std::string prefix_;
  FileReader stat_, cpu_stat_, loadavg_, meminfo_, diskstats_, mounts_, netdev_;
  FileReader psi_[3];
  FileReader netstat_, snmp_, snmp6_, sockstat_, sockstat6_, vmstat_, filenr_, softnet_;
  FileReader conntrack_count_, conntrack_max_, conntrack_stat_, entropy_avail_, entropy_pool_;
  FileReader arp_, udp_, udp6_, clocksource_available_, clocksource_current_;
  FileReader os_release_, os_release_lib_, selinux_enforce_, selinux_config_;
  std::vector<std::pair<std::string, DiskInfo>> disk_info_;
  std::regex netstat_filter_, vmstat_filter_;
  std::function<int(::timex*)> adjtimex_;
  std::vector<Part> parts_;
  std::vector<NetDevFiles> netdev_files_;
  std::vector<NetClassDev> netclass_;
  NameCache netstat_names_, sockstat_names_, vmstat_names_;
  std::vector<std::pair<std::string, double>> arp_counts_;
  size_t arp_used_ = 0;
  std::string dir_entry_, tf_path_, tf_buf_;
  std::vector<std::string> tf_files_;
  std::vector<TextFamily> tf_families_;
  std::vector<LabelView> tf_labels_;
  double page_size_ = 4096;
  std::time_t zone_hour_ = -1;
  std::string zone_name_;
  double zone_offset_ = 0;
  std::vector<MemName> mem_names_;
  std::vector<std::string> uname_;
  std::vector<std::string> seen_mounts_;
  size_t seen_mounts_used_ = 0;
  std::string mountpoint_, stat_path_, pressure_name_, stat_name_, last_textfile_error_;
  double user_hz_ = 100;
};

}  // namespace

namespace {

// node_exporter 1.5's collectors (its --collector.<name> flags); the
// implemented ones are served by NodeCollector.
const std::vector<NodeCollectorInfo>& Table() {
  static const std::vector<NodeCollectorInfo> kTable = {
      {"arp", true, true, "/proc/net/arp", "node_arp_entries{device}"},
      {"bcache", true, false, "", ""},
      {"bonding", true, false, "", ""},
      {"btrfs", true, false, "", ""},
      {"buddyinfo", false, false, "", ""},
      {"cgroups", false, false, "", ""},
      {"conntrack", true, true,
       "/proc/sys/net/netfilter/nf_conntrack_{count,max}, /proc/net/stat/nf_conntrack",
       "node_nf_conntrack_entries, node_nf_conntrack_entries_limit, node_nf_conntrack_stat_*"},
      {"cpu", true, true, "/proc/stat (cpuN lines)",
       "node_cpu_seconds_total{cpu,mode}, node_cpu_guest_seconds_total{cpu,mode}"},
      {"cpufreq", true, false, "", ""},
      {"diskstats", true, true, "/proc/diskstats, /run/udev/data/b<major>:<minor>",
       "node_disk_info, node_disk_{reads,writes,discards}_completed_total, "
       "node_disk_*_merged_total, "
       "node_disk_{read,written}_bytes_total, node_disk_discarded_sectors_total, "
       "node_disk_*_time_seconds_total, node_disk_flush_requests_total, node_disk_io_now"},
      {"dmi", true, false, "", ""},
      {"drbd", false, false, "", ""},
      {"drm", false, false, "", ""},
      {"edac", true, false, "", ""},
      {"entropy", true, true, "/proc/sys/kernel/random/{entropy_avail,poolsize}",
       "node_entropy_available_bits, node_entropy_pool_size_bits"},
      {"ethtool", false, false, "", ""},
      {"fibrechannel", true, false, "", ""},
      {"filefd", true, true, "/proc/sys/fs/file-nr", "node_filefd_allocated, node_filefd_maximum"},
      {"filesystem", true, true, "/proc/mounts, statvfs(2)",
       "node_filesystem_{size,free,avail}_bytes, node_filesystem_files{,_free}, "
       "node_filesystem_readonly, node_filesystem_device_error"},
      {"hwmon", true, false, "", ""},
      {"infiniband", true, false, "", ""},
      {"interrupts", false, false, "", ""},
      {"ipvs", true, false, "", ""},
      {"ksmd", false, false, "", ""},
      {"lnstat", false, false, "", ""},
      {"loadavg", true, true, "/proc/loadavg", "node_load1, node_load5, node_load15"},
      {"logind", false, false, "", ""},
      {"mdadm", true, false, "", ""},
      {"meminfo", true, true, "/proc/meminfo", "node_memory_<Field>_bytes"},
      {"meminfo_numa", false, false, "", ""},
      {"mountstats", false, false, "", ""},
      {"netclass", true, true, "/sys/class/net/<dev>/*",
       "node_network_{carrier,mtu_bytes,speed_bytes,flags,iface_id,...}{device}, "
       "node_network_info"},
      {"netdev", true, true,
       "/proc/net/dev, /sys/class/net/<dev>/{operstate,statistics/rx_nohandler}",
       "node_network_{receive,transmit}_*_total{device}, node_network_up"},
      {"netstat", true, true, "/proc/net/netstat, /proc/net/snmp, /proc/net/snmp6",
       "node_netstat_<Proto>_<Field> (node_exporter's default field filter)"},
      {"network_route", false, false, "", ""},
      {"nfs", true, false, "", ""},
      {"nfsd", true, false, "", ""},
      {"ntp", false, false, "", ""},
      {"nvme", true, false, "", ""},
      {"os", true, true, "/etc/os-release, /usr/lib/os-release", "node_os_info, node_os_version"},
      {"perf", false, false, "", ""},
      {"powersupplyclass", true, false, "", ""},
      {"pressure", true, true, "/proc/pressure/{cpu,io,memory}",
       "node_pressure_*_{waiting,stalled}_seconds_total"},
      {"processes", false, false, "", ""},
      {"qdisc", false, false, "", ""},
      {"rapl", true, false, "", ""},
      {"runit", false, false, "", ""},
      {"schedstat", true, false, "", ""},
      {"selinux", true, true, "/sys/fs/selinux/enforce, /etc/selinux/config",
       "node_selinux_enabled, node_selinux_{current,config}_mode"},
      {"slabinfo", false, false, "", ""},
      {"sockstat", true, true, "/proc/net/sockstat, /proc/net/sockstat6",
       "node_sockstat_sockets_used, node_sockstat_<PROTO>_<state>, "
       "node_sockstat_<PROTO>_mem_bytes"},
      {"softnet", true, true, "/proc/net/softnet_stat",
       "node_softnet_{processed,dropped,times_squeezed,received_rps,flow_limit_count}_total{cpu}, "
       "node_softnet_backlog_len{cpu}"},
      {"stat", true, true, "/proc/stat",
       "node_boot_time_seconds, node_context_switches_total, node_intr_total, node_forks_total, "
       "node_procs_running, node_procs_blocked"},
      {"supervisord", false, false, "", ""},
      {"sysctl", false, false, "", ""},
      {"systemd", false, false, "", ""},
      {"tapestats", true, false, "", ""},
      {"tcpstat", false, false, "", ""},
      {"textfile", true, true, "<textfile_directory>/*.prom",
       "the files' families, node_textfile_mtime_seconds{file}, node_textfile_scrape_error"},
      {"thermal_zone", true, false, "", ""},
      {"time", true, true, "the clock, localtime(3), /sys/devices/system/clocksource",
       "node_time_seconds, node_time_zone_offset_seconds, node_time_clocksource_*_info"},
      {"timex", true, true, "adjtimex(2)", "node_timex_*"},
      {"udp_queues", true, true, "/proc/net/udp, /proc/net/udp6", "node_udp_queues{ip,queue}"},
      {"uname", true, true, "uname(2)", "node_uname_info"},
      {"vmstat", true, true, "/proc/vmstat",
       "node_vmstat_<field> (node_exporter's default field filter)"},
      {"wifi", false, false, "", ""},
      {"xfs", true, false, "", ""},
      {"zfs", true, false, "", ""},
      {"zoneinfo", false, false, "", ""},
  };
  return kTable;
}

}  // namespace

const std::vector<NodeCollectorInfo>& NodeExporterCollectors() { return Table(); }

const NodeCollectorInfo* FindNodeExporterCollector(std::string_view name) {
  for (const NodeCollectorInfo& c : Table()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

bool NodeCollectorEnabled(const NodeCollectorOptions& options, std::string_view name) {
  const NodeCollectorInfo* info = FindNodeExporterCollector(name);
  bool on = info != nullptr && info->default_on;
  for (const auto& [n, enabled] : options.collectors) {
    if (n == name) on = enabled;
  }
  return on;
}

std::unique_ptr<Collector> NewNodeCollector(const NodeCollectorOptions& options) {
  return std::make_unique<NodeCollector>(options);
}

}  // namespace gantry::agent
