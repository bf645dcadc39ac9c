#include "gantry/agent/idle.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utmpx.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "gantry/core/log.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"

namespace gantry::agent {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

std::string Dur(nanoseconds d) { return FormatDuration(d); }

// Reads a whole (small, /proc) file with plain read(2): the probe reads a few
// hundred of them per tick, so iostreams' overhead shows.
bool ReadSmallFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > (size_t{1} << 20)) break;
  }
  ::close(fd);
  return true;
}

std::string Basename(std::string_view p) {
  size_t slash = p.rfind('/');
  return std::string(slash == std::string_view::npos ? p : p.substr(slash + 1));
}

// The last non-empty line of a program's output (its most telling error).
std::string LastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// One /proc/<pid> as the probe needs it.
struct Proc {
  int pid = 0;
  int ppid = 0;
  std::string comm;
  std::vector<std::string> args;
  uint64_t cpu_ticks = 0;  // utime + stime
};

bool ReadProc(const std::string& dir, int pid, Proc* p) {
  p->pid = pid;
  std::string stat;
  if (!ReadSmallFile(dir + "/stat", &stat)) return false;
  // "pid (comm) state ppid ... utime(14) stime(15)": comm may hold spaces and
  // parentheses, so fields are counted after the last ')'.
  size_t open = stat.find('(');
  size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  p->comm = stat.substr(open + 1, close - open - 1);
  std::istringstream rest(stat.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (f.size() < 13 && rest >> tok) f.push_back(tok);
  if (f.size() >= 2) p->ppid = std::atoi(f[1].c_str());
  if (f.size() >= 13) {
    p->cpu_ticks =
        std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
  }
  // Kernel threads (children of kthreadd, pid 2) have no command line.
  if (pid == 2 || p->ppid == 2) return true;
  std::string cmdline;
  if (ReadSmallFile(dir + "/cmdline", &cmdline)) {
    size_t start = 0;
    while (start < cmdline.size()) {
      size_t end = cmdline.find('\0', start);
      if (end == std::string::npos) end = cmdline.size();
      p->args.push_back(cmdline.substr(start, end - start));
      start = end + 1;
    }
  }
  return true;
}

// The name in `names` a process answers to ("" for none): its comm (15
// characters at most), the basename of argv[0], or for an interpreted program
// ("python3 /opt/train.py") the basename of its script.
std::string MatchName(const Proc& p, const std::vector<std::string>& names) {
  if (names.empty()) return "";
  if (Contains(names, p.comm)) return p.comm;
  if (!p.args.empty() && Contains(names, Basename(p.args[0]))) return Basename(p.args[0]);
  if (p.args.size() >= 2 && !p.args[1].empty() && p.args[1][0] != '-' &&
      Contains(names, Basename(p.args[1]))) {
    return Basename(p.args[1]);
  }
  return "";
}

bool IsJupyterKernel(const Proc& p) {
  for (const std::string& a : p.args) {
    if (a.find("ipykernel_launcher") != std::string::npos) return true;
    std::string b = Basename(a);
    // Every Jupyter kernel (Python, R, Julia, ...) gets a kernel-<id>.json connection file.
    if (b.size() > 12 && b.rfind("kernel-", 0) == 0 && b.compare(b.size() - 5, 5, ".json") == 0) {
      return true;
    }
  }
  return false;
}

bool IsJupyterServer(const Proc& p) {
  for (size_t i = 0; i < p.args.size(); ++i) {
    std::string b = Basename(p.args[i]);
    for (const char* s :
         {"jupyter-lab", "jupyter-notebook", "jupyter-server", "jupyterhub-singleuser"}) {
      if (b.rfind(s, 0) == 0) return true;
    }
    if ((b == "jupyter" || b == "jupyter.py") && i + 1 < p.args.size()) {
      const std::string& sub = p.args[i + 1];
      if (sub == "lab" || sub == "notebook" || sub == "server") return true;
    }
    if (p.args[i] == "-m" && i + 1 < p.args.size()) {
      const std::string& mod = p.args[i + 1];
      if (mod == "jupyterlab" || mod == "notebook" || mod == "jupyter_server") return true;
    }
  }
  return false;
}

bool IsShell(const Proc& p) {
  static const std::vector<std::string> shells = {"bash", "sh", "zsh", "fish", "dash", "tcsh"};
  return Contains(shells, p.comm);
}

// Sum of all fields of the "cpu " line of /proc/stat, in clock ticks.
uint64_t TotalCpuTicks(const std::string& root) {
  std::string text;
  if (!ReadSmallFile(root + "/proc/stat", &text)) return 0;
  std::istringstream in(text.substr(0, text.find('\n')));
  std::string label;
  in >> label;
  if (label != "cpu") return 0;
  uint64_t total = 0, v = 0;
  while (in >> v) total += v;
  return total;
}

// Established TCP connections whose local port is `port`.
int CountEstablished(const std::string& path, int port) {
  std::string text;
  if (!ReadSmallFile(path, &text)) return 0;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  int n = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, state;
    if (!(fields >> sl >> local >> remote >> state)) continue;
    size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    long local_port = std::strtol(local.c_str() + colon + 1, nullptr, 16);
    if (local_port == port && state == "01") ++n;  // 01 = TCP_ESTABLISHED
  }
  return n;
}

std::mutex& UtmpMutex() {
  static std::mutex mu;
  return mu;
}

class SystemProbe : public ActivityProbe {
 public:
  SystemProbe(const IdleConfig& config, SystemProbeOptions options)
      : config_(config), opt_(std::move(options)) {
    while (opt_.root.size() > 1 && opt_.root.back() == '/') opt_.root.pop_back();
    if (opt_.root == "/") opt_.root.clear();  // paths are root + "/proc/..."
    if (opt_.hostname.empty()) opt_.hostname = HostName();
    if (config_.check_slurm && !opt_.squeue.empty()) {
      squeue_path_ = FindExecutable(opt_.squeue);
    }
  }

  Activity Probe() override {
    Activity a;
    ScanProcesses(&a);
    if (config_.check_ssh) {
      a.user_sessions = CountUserSessions();
      a.ssh_connections = CountEstablished(opt_.root + "/proc/net/tcp", config_.ssh_port) +
                          CountEstablished(opt_.root + "/proc/net/tcp6", config_.ssh_port);
    }
    if (config_.check_slurm) {
      std::optional<int> jobs = SqueueJobs();
      a.slurm_jobs = std::max(jobs.value_or(0), slurmstepd_);
    }
    return a;
  }

 private:
  void ScanProcesses(Activity* a) {
    slurmstepd_ = 0;
    std::vector<Proc> procs;
    DIR* d = ::opendir((opt_.root + "/proc").c_str());
    if (d == nullptr) {
      if (!warned_proc_) log::debug("idle: cannot read {}/proc", opt_.root);
      warned_proc_ = true;
      return;
    }
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || pid <= 0) continue;
      Proc p;
      if (ReadProc(opt_.root + "/proc/" + e->d_name, static_cast<int>(pid), &p)) {
        procs.push_back(std::move(p));
      }
    }
    ::closedir(d);

    std::set<int> servers;
    std::set<std::string> busy;
    std::map<int, uint64_t> ignored_now;
    for (const Proc& p : procs) {
      if (config_.check_jupyter && IsJupyterServer(p)) servers.insert(p.pid);
      if (std::string name = MatchName(p, config_.busy_processes); !name.empty()) {
        busy.insert(name);
      }
      if (!MatchName(p, config_.ignore_processes).empty()) ignored_now[p.pid] = p.cpu_ticks;
      if (p.comm == "slurmstepd") ++slurmstepd_;
    }
    if (config_.check_jupyter) {
      for (const Proc& p : procs) {
        // Kernels, and terminals: shells the server started.
        if (IsJupyterKernel(p) || (servers.count(p.ppid) != 0 && IsShell(p))) ++a->jupyter;
      }
    }
    a->busy_processes.assign(busy.begin(), busy.end());

    // CPU of ignored processes as a share of all CPU ticks since the last probe.
    uint64_t total = TotalCpuTicks(opt_.root);
    if (!ignored_now.empty() && prev_total_ != 0 && total > prev_total_) {
      uint64_t used = 0;
      for (const auto& [pid, ticks] : ignored_now) {
        auto prev = prev_ignored_.find(pid);
        if (prev != prev_ignored_.end() && ticks >= prev->second) used += ticks - prev->second;
      }
      a->ignored_cpu_percent = std::min(
          100.0, 100.0 * static_cast<double>(used) / static_cast<double>(total - prev_total_));
    }
    prev_total_ = total;
    prev_ignored_ = std::move(ignored_now);
  }

  int CountUserSessions() {
    std::string path = opt_.utmp_path;
    if (path.empty()) {
      struct stat st;
      path = opt_.root + "/run/utmp";
      if (::stat(path.c_str(), &st) != 0) path = opt_.root + "/var/run/utmp";
      if (::stat(path.c_str(), &st) != 0) return 0;
    }
    int n = 0;
    // getutxent keeps its state in globals: one reader at a time.
    std::lock_guard<std::mutex> lock(UtmpMutex());
    if (::utmpxname(path.c_str()) != 0) return 0;
    ::setutxent();
    while (const utmpx* u = ::getutxent()) {
      if (u->ut_type != USER_PROCESS) continue;
      // A session whose process is gone (a crash left the record) is not a user.
      if (u->ut_pid > 0) {
        struct stat st;
        std::string proc = opt_.root + "/proc/" + std::to_string(u->ut_pid);
        if (::stat(proc.c_str(), &st) != 0) continue;
      }
      ++n;
    }
    ::endutxent();
    ::utmpxname(_PATH_UTMPX);
    return n;
  }

  std::optional<int> SqueueJobs() {
    if (squeue_path_.empty()) return std::nullopt;
    const auto now = std::chrono::steady_clock::now();
    if (now < squeue_next_) return squeue_jobs_;
    // A node with slurm-client but no reachable slurmctld makes squeue wait:
    // a short timeout, and a long pause after a failure, keep ticks quick.
    Result<SubprocessResult> r =
        RunSubprocess({squeue_path_, "-h", "-w", opt_.hostname, "-t", "R", "-o", "%i"}, seconds(5));
    if (!r.ok() || r->exit_code != 0) {
      if (!warned_squeue_) {
        log::info(
            "idle: {} failed ({}); counting slurmstepd processes instead, retrying every 10 "
            "minutes",
            squeue_path_,
            r.ok() ? "exit " + std::to_string(r->exit_code) + ": " + LastLine(r->err)
                   : r.status().message());
      }
      warned_squeue_ = true;
      squeue_jobs_.reset();
      squeue_next_ = now + std::chrono::minutes(10);
      return std::nullopt;
    }
    int n = 0;
    std::istringstream in(r->out);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") != std::string::npos) ++n;
    }
    squeue_jobs_ = n;
    squeue_next_ = now + opt_.squeue_every;
    return n;
  }

  IdleConfig config_;
  SystemProbeOptions opt_;
  std::string squeue_path_;
  int slurmstepd_ = 0;
  uint64_t prev_total_ = 0;
  std::map<int, uint64_t> prev_ignored_;
  bool warned_proc_ = false;
  bool warned_squeue_ = false;
  std::chrono::steady_clock::time_point squeue_next_{};
  std::optional<int> squeue_jobs_;
};

std::vector<std::string> BusyReasons(const IdleConfig& c, const Activity& a,
                                     const std::vector<Signal>& signals) {
  std::vector<std::string> r;
  const Signal* cpu = nullptr;
  for (const Signal& s : signals) {
    if (s.name == "cpu_utilization" && s.labels.empty()) cpu = &s;
  }
  if (cpu == nullptr) {
    r.push_back("cpu: no cpu_utilization yet");
  } else {
    double eff = std::max(0.0, cpu->value - a.ignored_cpu_percent);
    if (eff >= c.cpu_threshold) {
      r.push_back(a.ignored_cpu_percent > 0
                      ? fmt::format("cpu {:.1f}% (without ignored processes) >= {:g}%", eff,
                                    c.cpu_threshold)
                      : fmt::format("cpu {:.1f}% >= {:g}%", eff, c.cpu_threshold));
    }
  }
  for (const Signal& s : signals) {
    if (s.name != "gpu_utilization" || s.value < c.gpu_threshold) continue;
    std::string gpu = "?";
    for (const auto& [k, v] : s.labels) {
      if (k == "gpu") gpu = v;
    }
    r.push_back(fmt::format("gpu {} {:.1f}% >= {:g}%", gpu, s.value, c.gpu_threshold));
  }
  if (a.user_sessions > 0) r.push_back(fmt::format("{} interactive session(s)", a.user_sessions));
  if (a.ssh_connections > 0) r.push_back(fmt::format("{} ssh connection(s)", a.ssh_connections));
  if (a.jupyter > 0) r.push_back(fmt::format("{} Jupyter kernel(s)/terminal(s)", a.jupyter));
  if (a.slurm_jobs > 0) r.push_back(fmt::format("{} running Slurm job(s)", a.slurm_jobs));
  for (const std::string& p : a.busy_processes) r.push_back("busy process " + p + " running");
  return r;
}

constexpr const char* kWarningAlert = "GantryIdleShutdownPending";
constexpr const char* kActionAlert = "GantryIdleActionTaken";
constexpr const char* kFailedAlert = "GantryIdleActionFailed";

}  // namespace

std::string_view IdleStateName(IdleState state) {
  switch (state) {
    case IdleState::kActive:
      return "active";
    case IdleState::kIdleSince:
      return "idle_since";
    case IdleState::kWarning:
      return "warning";
    case IdleState::kActionTaken:
      return "action_taken";
  }
  return "?";
}

Json IdleStatusJson(const IdleStatus& st) {
  Json j = Json::object();
  j["state"] = std::string(IdleStateName(st.state));
  j["idle_since"] = st.idle_since_ms != 0 ? Json(FormatRfc3339(st.idle_since_ms)) : Json(nullptr);
  j["action_at"] = st.action_at_ms != 0 ? Json(FormatRfc3339(st.action_at_ms)) : Json(nullptr);
  j["busy_reasons"] = st.busy_reasons;
  j["last_action_result"] = st.last_action_result;
  j["actions_run"] = st.actions_run;
  return j;
}

Status ValidateIdleConfig(const IdleConfig& c) {
  if (c.idle_for < kIdleFloor && !c.allow_below_floor) {
    return InvalidArgument(
        fmt::format("idle_for {} is below the 15-minute floor (Azure ML's minimum idle time); use "
                    "at least 15m, "
                    "or set allow_below_floor: true for tests",
                    Dur(c.idle_for)));
  }
  if (c.idle_for.count() <= 0) return InvalidArgument("idle_for must be positive");
  if (c.warn_before.count() < 0 || c.warn_before >= c.idle_for) {
    return InvalidArgument(
        fmt::format("warn_before {} must be at least 0 and shorter than idle_for {}",
                    Dur(c.warn_before), Dur(c.idle_for)));
  }
  if (c.cpu_threshold < 0 || c.cpu_threshold > 100) {
    return InvalidArgument(
        fmt::format("cpu_threshold must be a percentage 0..100, got {:g}", c.cpu_threshold));
  }
  if (c.gpu_threshold < 0 || c.gpu_threshold > 100) {
    return InvalidArgument(
        fmt::format("gpu_threshold must be a percentage 0..100, got {:g}", c.gpu_threshold));
  }
  if (c.ssh_port < 1 || c.ssh_port > 65535) {
    return InvalidArgument(fmt::format("ssh_port must be 1..65535, got {}", c.ssh_port));
  }
  if (!c.action.empty() && c.action[0].empty()) {
    return InvalidArgument("action: the program (first item) is empty");
  }
  if (c.action_timeout.count() <= 0) return InvalidArgument("action_timeout must be positive");
  return Status::Ok();
}

Result<IdleConfig> ParseIdleConfig(const Config& config, std::string_view key) {
  IdleConfig c;
  const std::string k(key);
  if (!config.Has(k)) {
    // A bare "idle:" (null) reads as absent to Config; it means "on, with defaults".
    size_t dot = k.rfind('.');
    Result<std::vector<std::string>> siblings =
        config.Keys(dot == std::string::npos ? "" : k.substr(0, dot));
    std::string last = dot == std::string::npos ? k : k.substr(dot + 1);
    c.enabled =
        siblings.ok() && std::find(siblings->begin(), siblings->end(), last) != siblings->end();
    return c;
  }
  RETURN_IF_ERROR(config.CheckKnownKeys(
      k, {"enabled", "cpu_threshold", "gpu_threshold", "idle_for", "allow_below_floor",
          "warn_before", "action", "action_timeout", "ignore_processes", "busy_processes",
          "check_ssh", "ssh_port", "check_jupyter", "check_slurm", "cancel_file"}));
  auto secs = [](nanoseconds d) { return duration_cast<seconds>(d); };
  ASSIGN_OR_RETURN(c.enabled, config.GetBool(k + ".enabled", true));
  ASSIGN_OR_RETURN(c.cpu_threshold, config.GetDouble(k + ".cpu_threshold", c.cpu_threshold));
  ASSIGN_OR_RETURN(c.gpu_threshold, config.GetDouble(k + ".gpu_threshold", c.gpu_threshold));
  ASSIGN_OR_RETURN(nanoseconds idle_for, config.GetDuration(k + ".idle_for", c.idle_for));
  c.idle_for = secs(idle_for);
  ASSIGN_OR_RETURN(c.allow_below_floor, config.GetBool(k + ".allow_below_floor", false));
  ASSIGN_OR_RETURN(nanoseconds warn, config.GetDuration(k + ".warn_before", c.warn_before));
  c.warn_before = secs(warn);
  if (config.IsScalar(k + ".action")) {
    return InvalidArgument(config.Locate(k + ".action") +
                           ": expected a list [program, args...] (no shell), e.g. [shutdown, -h, "
                           "now]; for a pipeline use [sh, -c, '...']");
  }
  ASSIGN_OR_RETURN(c.action, config.GetStringList(k + ".action"));
  ASSIGN_OR_RETURN(nanoseconds at, config.GetDuration(k + ".action_timeout", c.action_timeout));
  c.action_timeout = secs(at);
  ASSIGN_OR_RETURN(c.ignore_processes, config.GetStringList(k + ".ignore_processes"));
  ASSIGN_OR_RETURN(c.busy_processes, config.GetStringList(k + ".busy_processes"));
  ASSIGN_OR_RETURN(c.check_ssh, config.GetBool(k + ".check_ssh", true));
  ASSIGN_OR_RETURN(int64_t port, config.GetInt(k + ".ssh_port", 22));
  c.ssh_port = static_cast<int>(std::clamp<int64_t>(port, -1, 70000));
  ASSIGN_OR_RETURN(c.check_jupyter, config.GetBool(k + ".check_jupyter", true));
  ASSIGN_OR_RETURN(c.check_slurm, config.GetBool(k + ".check_slurm", true));
  ASSIGN_OR_RETURN(c.cancel_file, config.GetString(k + ".cancel_file", c.cancel_file));

  // Name the key at fault for the rules ValidateIdleConfig checks.
  auto at_key = [&](const std::string& sub, const std::string& msg) {
    return InvalidArgument(config.Locate(k + "." + sub) + ": " + msg);
  };
  if (c.idle_for < kIdleFloor && !c.allow_below_floor) {
    return at_key("idle_for",
                  fmt::format("{} is below the 15-minute floor (Azure ML's minimum idle time); use "
                              "at least 15m, or set {}.allow_below_floor: true for tests",
                              Dur(c.idle_for), k));
  }
  Status valid = ValidateIdleConfig(c);
  if (!valid.ok()) {
    const std::string& m = valid.message();
    std::string sub = m.substr(0, m.find(' '));
    if (sub.back() == ':') sub.pop_back();
    return config.Has(k + "." + sub) ? at_key(sub, m)
                                     : InvalidArgument(config.Locate(k) + ": " + m);
  }
  return c;
}

std::unique_ptr<ActivityProbe> MakeSystemActivityProbe(const IdleConfig& config,
                                                       SystemProbeOptions options) {
  return std::make_unique<SystemProbe>(config, std::move(options));
}

// ---------------------------------------------------------------- IdleDetector

Result<std::unique_ptr<IdleDetector>> IdleDetector::Create(const IdleConfig& config,
                                                           std::unique_ptr<ActivityProbe> probe,
                                                           Notifier* notifier, const Clock& clock) {
  RETURN_IF_ERROR(ValidateIdleConfig(config).WithContext("idle"));
  if (probe == nullptr) return InvalidArgument("idle: no activity probe");
  return std::unique_ptr<IdleDetector>(new IdleDetector(config, std::move(probe), notifier, clock));
}

IdleDetector::IdleDetector(IdleConfig config, std::unique_ptr<ActivityProbe> probe,
                           Notifier* notifier, const Clock& clock)
    : config_(std::move(config)),
      probe_(std::move(probe)),
      notifier_(notifier),
      clock_(clock),
      hostname_(HostName()) {}

IdleDetector::~IdleDetector() {
  if (action_thread_.joinable()) action_thread_.join();
}

const IdleConfig& IdleDetector::config() const { return config_; }

void IdleDetector::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_requested_ = true;
}

IdleStatus IdleDetector::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

bool IdleDetector::WaitForAction(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return action_done_.wait_for(lock, timeout, [&] { return !action_running_; });
}

void IdleDetector::Notify(bool firing, const std::string& alertname, const std::string& summary,
                          double value) {
  if (notifier_ == nullptr) return;
  int64_t now_ms = duration_cast<milliseconds>(clock_.WallNow().time_since_epoch()).count();
  Alert a;
  a.labels = {{"alertname", alertname},
              {"instance", hostname_},
              {"severity", alertname == kWarningAlert  ? "warning"
                           : alertname == kFailedAlert ? "critical"
                                                       : "info"}};
  a.annotations = {{"summary", summary}};
  a.firing = firing;
  a.starts_at_ms = alertname == kWarningAlert ? warning_started_ms_ : action_started_ms_;
  if (a.starts_at_ms == 0) a.starts_at_ms = now_ms;
  a.ends_at_ms = firing ? 0 : now_ms;
  a.value = value;
  notifier_->Notify({std::move(a)});
}

IdleStatus IdleDetector::Update(std::chrono::nanoseconds now, const std::vector<Signal>& signals) {
  // The probe may run squeue: outside the lock, so status() stays quick.
  Activity activity = probe_->Probe();
  std::vector<std::string> reasons = BusyReasons(config_, activity, signals);
  bool cancel_file = false;
  if (!config_.cancel_file.empty()) {
    struct stat st;
    if (::stat(config_.cancel_file.c_str(), &st) == 0) {
      cancel_file = true;
      // Consumed: one cancel postpones one idle period.
      if (::unlink(config_.cancel_file.c_str()) != 0) {
        log::warn("idle: cannot remove {} ({}); it will cancel again at every tick",
                  config_.cancel_file, std::strerror(errno));
      }
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (cancel_requested_ || cancel_file) {
    reasons.push_back(cancel_file ? "cancelled by " + config_.cancel_file
                                  : "cancelled (gantry agent idle cancel)");
    cancel_requested_ = false;
  }
  const int64_t wall_ms = duration_cast<milliseconds>(clock_.WallNow().time_since_epoch()).count();
  status_.busy_reasons = reasons;

  if (!reasons.empty()) {
    std::string why = Join(reasons, ", ");
    if (status_.state == IdleState::kWarning) {
      log::info("idle: shutdown cancelled: {}", why);
      Notify(false, kWarningAlert, "idle action cancelled on " + hostname_ + ": " + why, 0);
    } else if (status_.state == IdleState::kActionTaken) {
      log::info("idle: node in use again: {}", why);
      Notify(false, kActionAlert, "node " + hostname_ + " in use again: " + why, 0);
      if (failed_alert_firing_) {
        Notify(false, kFailedAlert, "node " + hostname_ + " in use again: " + why, 0);
        failed_alert_firing_ = false;
      }
    } else if (status_.state == IdleState::kIdleSince) {
      log::debug("idle: node in use: {}", why);
    }
    status_.state = IdleState::kActive;
    status_.idle_since_ms = 0;
    status_.action_at_ms = 0;
    warning_started_ms_ = 0;
    return status_;
  }

  if (status_.state == IdleState::kActive) {
    idle_since_ = now;
    status_.state = IdleState::kIdleSince;
    status_.idle_since_ms = wall_ms;
    log::info("idle: node idle (cpu < {:g}%, gpu < {:g}%, no sessions); action after {}",
              config_.cpu_threshold, config_.gpu_threshold, Dur(config_.idle_for));
  }
  const nanoseconds idle = now - idle_since_;
  const std::string action_text = config_.action.empty()
                                      ? "no action configured (log and notify only)"
                                      : "'" + JoinArgv(config_.action) + "'";
  if (status_.state == IdleState::kIdleSince && idle >= config_.idle_for - config_.warn_before) {
    // The whole warning window is given even when ticks are coarse.
    action_due_ = std::max<nanoseconds>(idle_since_ + config_.idle_for, now + config_.warn_before);
    status_.state = IdleState::kWarning;
    status_.action_at_ms = wall_ms + duration_cast<milliseconds>(action_due_ - now).count();
    warning_started_ms_ = wall_ms;
    std::string summary =
        fmt::format("{} idle for {}: {} at {} unless it is used or 'gantry agent idle cancel' runs",
                    hostname_, Dur(idle),
                    config_.action.empty() ? "idle period ends (no action configured)"
                                           : "running " + action_text,
                    FormatRfc3339(status_.action_at_ms));
    log::warn("idle: {}", summary);
    Notify(true, kWarningAlert, summary, duration_cast<seconds>(idle).count());
  }
  if (status_.state == IdleState::kWarning && now >= action_due_) {
    status_.state = IdleState::kActionTaken;
    status_.action_at_ms = wall_ms;
    action_started_ms_ = wall_ms;
    Notify(false, kWarningAlert, "idle period over on " + hostname_, 0);
    std::string summary =
        fmt::format("{} idle for {}: {}", hostname_, Dur(idle),
                    config_.action.empty() ? action_text : "running " + action_text);
    log::warn("idle: {}", summary);
    Notify(true, kActionAlert, summary, duration_cast<seconds>(idle).count());
    if (!config_.action.empty()) StartAction();
  }
  return status_;
}

// Called with mu_ held.
void IdleDetector::StartAction() {
  if (action_running_) {
    log::warn("idle: the previous action is still running; not starting another");
    return;
  }
  if (action_thread_.joinable()) action_thread_.join();  // finished: action_running_ is false
  action_running_ = true;
  ++status_.actions_run;
  std::vector<std::pair<std::string, std::string>> env = {
      {"GANTRY_IDLE_SINCE", FormatRfc3339(status_.idle_since_ms)}, {"GANTRY_IDLE_HOST", hostname_}};
  action_thread_ = std::thread([this, env] {
    // Give the notifications a chance to leave before a shutdown does.
    if (notifier_ != nullptr) notifier_->Flush(milliseconds(10'000));
    Result<CommandResult> r =
        RunCommand(config_.action, "", env, duration_cast<milliseconds>(config_.action_timeout));
    std::string result;
    bool failed = true;
    if (!r.ok()) {
      result = r.status().message();
    } else if (r->timed_out) {
      result = fmt::format("timed out after {} and was killed", Dur(config_.action_timeout));
    } else {
      result = fmt::format("exited with status {}", r->exit_code);
      failed = r->exit_code != 0;
    }
    std::string out = r.ok() ? r->output.substr(0, 500) : "";
    while (!out.empty() && out.back() == '\n') out.pop_back();
    std::lock_guard<std::mutex> lock(mu_);
    status_.last_action_result = result;
    if (failed) {
      failed_alert_firing_ = true;
      log::error("idle: action '{}' {}{}{}", JoinArgv(config_.action), result,
                 out.empty() ? "" : ": ", out);
      Notify(true, kFailedAlert,
             fmt::format("idle action '{}' on {} {}", JoinArgv(config_.action), hostname_, result),
             0);
    } else {
      log::info("idle: action '{}' {}", JoinArgv(config_.action), result);
    }
    action_running_ = false;
    action_done_.notify_all();
  });
}

}  // namespace gantry::agent
