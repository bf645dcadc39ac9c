// LocalBackend: attempts as child processes of the runner, each in a process
// group of its own. One pump thread owns every child: it reads their output
// through pipes (to timestamp it line by line), notices exits through pidfds,
// and enforces timeouts and kill graces. Nothing here blocks the runner: it
// only Submits, Polls and Waits.
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/jobs/backend.h"

extern char** environ;

namespace gantry::jobs {
namespace {

using Clock = std::chrono::steady_clock;

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot): with
// the pid it names one process even after the pid is reused.
std::string ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return "";
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return field;
  }
  return "";
}

// "2026-12-02T10:00:00.123Z"
std::string Timestamp() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char buf[40];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &t);
  snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1'000'000);
  return buf;
}

struct Child {
  std::string id;
  pid_t pid = 0;
  int pidfd = -1;
  int out = -1, err = -1;  // pipe read ends, -1 once closed
  int log = -1;            // opened on the first output
  std::string log_path, header;
  std::string log_error;
  std::string out_buf, err_buf;  // partial lines
  std::string exit_path;
  Clock::time_point deadline = Clock::time_point::max();  // timeout
  Clock::time_point kill_at = Clock::time_point::max();   // SIGKILL after a SIGTERM
  std::chrono::milliseconds timeout{0}, grace{0};
  bool timed_out = false, cancelled = false;
  Observed observed{JobState::kRunning, -1, ""};
};

class LocalBackend final : public Backend {
 public:
  LocalBackend() {
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_;
    ::epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &ev);
    pump_ = std::thread([this] { Pump(); });
  }

  ~LocalBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      for (auto& [id, c] : children_) {
        if (c.pidfd >= 0) ::kill(-c.pid, SIGKILL);
      }
    }
    Wake();
    pump_.join();
    for (auto& [id, c] : children_) Close(c);
    ::close(epoll_);
    ::close(wake_);
  }

  std::string_view name() const override { return "local"; }
  bool Adopts() const override { return false; }

  Result<std::string> Submit(const Launch& l) override {
    if (l.argv.empty()) return InvalidArgument(l.key + ": empty command");
    // $PATH does not change under a run: one lookup per program, not one
    // access() per directory per step.
    std::string& program = programs_[l.argv[0]];
    if (program.empty() || l.argv[0].find('/') != std::string::npos) {
      program = FindExecutable(l.argv[0]);
    }
    if (program.empty()) {
      return NotFound(l.key + ": program '" + l.argv[0] +
                      "' not found (not an executable path, nor in $PATH)");
    }
    // The log's directory must be writable now, not when the first line comes.
    if (::access(std::string(l.log_path.substr(0, l.log_path.rfind('/'))).c_str(), W_OK) != 0) {
      return IoError(l.key + ": cannot write the log file " + l.log_path, errno);
    }
    std::vector<std::string> env = Environment(l.env);
    SpawnOptions so;
    so.workdir = l.workdir;
    so.env = &env;
    so.default_signals = true;  // a runner that ignores SIGPIPE must not pass that on
    Result<SpawnedChild> spawned = SpawnInGroup(program, l.argv, so);
    if (!spawned.ok()) return Unavailable(l.key + ": " + spawned.status().message());
    const pid_t pid = spawned->pid;
    Child c;
    c.pid = pid;
    c.pidfd = PidfdOpen(pid);
    c.out = spawned->out;
    c.err = spawned->err;
    // The log is created with the first output: thousands of silent steps
    // then cost no file each.
    c.log_path = l.log_path;
    c.header = Timestamp() + " gantry| start " + l.key + " attempt " + std::to_string(l.attempt) +
               ": " + JoinArgv(l.argv) + "\n";
    c.exit_path = l.exit_path;
    c.timeout = l.timeout;
    c.grace = l.kill_grace;
    if (l.timeout.count() > 0) c.deadline = Clock::now() + l.timeout;
    c.id = "local:" + std::to_string(pid) + ":" + ProcessStartTime(pid);
    for (int fd : {c.out, c.err})
      ::fcntl(fd, F_SETFL, O_NONBLOCK);  // a fresh pipe end has no other flags
    std::string id = c.id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : {c.out, c.err, c.pidfd}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        ::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
        by_fd_[fd] = id;
      }
      children_.emplace(id, std::move(c));
    }
    Wake();
    return id;
  }

  Result<std::map<std::string, Observed>> Poll(const std::vector<std::string>& ids) override {
    std::lock_guard<std::mutex> lock(mu_);
    polled_changes_ = changes_;
    std::map<std::string, Observed> out;
    for (const std::string& id : ids) {
      auto it = children_.find(id);
      if (it == children_.end()) {
        out[id] = Observed{JobState::kLost, -1, "not started by this runner"};
      } else {
        out[id] = it->second.observed;
      }
    }
    return out;
  }

  Status Cancel(const std::string& id, std::chrono::milliseconds grace) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = children_.find(id);
      if (it == children_.end()) return NotFound("no local job " + id);
      Child& c = it->second;
      if (c.pidfd < 0) return Status();  // already gone
      c.cancelled = true;
      ::kill(-c.pid, SIGTERM);
      c.kill_at = std::min(c.kill_at, Clock::now() + grace);
    }
    Wake();
    return Status();
  }

  void Wait(std::chrono::milliseconds max) override {
    // Compared with what the last Poll saw, so an exit between Poll and Wait
    // does not cost a full `max`.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, max, [&] { return changes_ != polled_changes_; });
  }

 private:
  static std::vector<std::string> Environment(const std::map<std::string, std::string>& extra) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
      std::string_view kv(*e);
      std::string name(kv.substr(0, kv.find('=')));
      if (!extra.count(name)) env.emplace_back(kv);
    }
    for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
    return env;
  }

  void Wake() {
    uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
  }

  static void Close(Child& c) {
    for (int* fd : {&c.out, &c.err, &c.pidfd, &c.log}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  static bool OpenLog(Child& c) {
    if (c.log >= 0) return true;
    if (c.log_path.empty()) return false;
    c.log = ::open(c.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (c.log < 0) {
      c.log_path.clear();  // say it once, in the end reason
      c.log_error = "cannot write the log file: " + std::string(std::strerror(errno));
      return false;
    }
    (void)!::write(c.log, c.header.data(), c.header.size());
    return true;
  }

  // Appends complete lines of `buf` to the log, timestamped; `final` flushes
  // a last line without its newline.
  static void WriteLines(Child& c, std::string& buf, const char* stream, bool final) {
    std::string text;
    size_t start = 0;
    while (true) {
      size_t nl = buf.find('\n', start);
      if (nl == std::string::npos) break;
      text += Timestamp() + " " + stream + "| " + buf.substr(start, nl - start + 1);
      start = nl + 1;
    }
    buf.erase(0, start);
    // A line that never ends (progress bars with \r) is written in pieces of
    // 64 KiB so memory stays bounded.
    if ((final && !buf.empty()) || buf.size() > (64u << 10)) {
      text += Timestamp() + " " + stream + "| " + buf + "\n";
      buf.clear();
    }
    if (text.empty()) return;
    if (c.log < 0 && !OpenLog(c)) return;
    (void)!::write(c.log, text.data(), text.size());
  }

  // Reads what `fd` has now; closes it at EOF.
  void Drain(Child& c, int* fd, std::string& buf, const char* stream) {
    char chunk[16384];
    while (*fd >= 0) {
      ssize_t n = ::read(*fd, chunk, sizeof chunk);
      if (n > 0) {
        buf.append(chunk, static_cast<size_t>(n));
        WriteLines(c, buf, stream, false);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      WriteLines(c, buf, stream, true);
      ::epoll_ctl(epoll_, EPOLL_CTL_DEL, *fd, nullptr);
      by_fd_.erase(*fd);
      ::close(*fd);
      *fd = -1;
      return;
    }
  }

  void Reap(Child& c) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG) != 0) return;
    if (info.si_pid == 0) return;  // not yet
    int code = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
    // Output already in the pipes belongs to this attempt; a grandchild that
    // keeps them open is not waited for.
    Drain(c, &c.out, c.out_buf, "out");
    Drain(c, &c.err, c.err_buf, "err");
    WriteLines(c, c.out_buf, "out", true);
    WriteLines(c, c.err_buf, "err", true);
    for (int* fd : {&c.out, &c.err}) {
      if (*fd >= 0) {
        ::epoll_ctl(epoll_, EPOLL_CTL_DEL, *fd, nullptr);
        by_fd_.erase(*fd);
        ::close(*fd);
        *fd = -1;
      }
    }
    Observed o;
    o.exit_code = code;
    if (c.timed_out) {
      // Whatever it started goes too: the timeout is for the whole group.
      ::kill(-c.pid, SIGKILL);
      o.state = JobState::kTimedOut;
      o.exit_code = 124;
      o.reason = "timed out after " + FormatDuration(c.timeout) + " (exit " + std::to_string(code) +
                 "): the process group was killed";
    } else if (c.cancelled) {
      ::kill(-c.pid, SIGKILL);
      o.state = JobState::kCancelled;
      o.reason = "cancelled";
    } else if (code == 0) {
      o.state = JobState::kSucceeded;
    } else {
      o.state = JobState::kFailed;
      o.reason = code > 128 ? "killed by signal " + std::to_string(code - 128)
                            : "exit code " + std::to_string(code);
    }
    std::string footer =
        Timestamp() + " gantry| end: " + std::string(JobStateName(o.state)) + ", exit code " +
        std::to_string(o.exit_code) +
        (o.reason.empty() || o.reason.rfind("exit code", 0) == 0 ? "" : " (" + o.reason + ")") +
        "\n";
    if (c.log >= 0) (void)!::write(c.log, footer.data(), footer.size());
    if (!c.log_error.empty()) o.reason += (o.reason.empty() ? "" : "; ") + c.log_error;
    Status s = WriteExitCode(c.exit_path, o.exit_code);
    if (!s.ok() && o.state == JobState::kSucceeded) {
      o.state = JobState::kFailed;
      o.reason = s.message();
    }
    ::epoll_ctl(epoll_, EPOLL_CTL_DEL, c.pidfd, nullptr);
    by_fd_.erase(c.pidfd);
    Close(c);
    c.observed = o;
    ++changes_;
  }

  // Timeouts and kill graces; returns the wait until the next one.
  int Timers() {
    Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    for (auto& [id, c] : children_) {
      if (c.pidfd < 0) continue;
      if (now >= c.deadline) {
        c.timed_out = true;
        c.deadline = Clock::time_point::max();
        ::kill(-c.pid, SIGTERM);
        c.kill_at = now + c.grace;
      }
      if (now >= c.kill_at) {
        ::kill(-c.pid, SIGKILL);
        c.kill_at = Clock::time_point::max();
      }
      next = std::min({next, c.deadline, c.kill_at});
    }
    if (next == Clock::time_point::max()) return 1000;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1;
    return static_cast<int>(std::clamp<int64_t>(ms, 1, 1000));
  }

  void Pump() {
    epoll_event events[64];
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      int wait_ms = Timers();
      lock.unlock();
      int n = ::epoll_wait(epoll_, events, 64, wait_ms);
      lock.lock();
      bool changed = false;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == wake_) {
          uint64_t v;
          (void)!::read(wake_, &v, sizeof v);
          continue;
        }
        auto it = by_fd_.find(fd);
        if (it == by_fd_.end()) continue;
        Child& c = children_.at(it->second);
        if (fd == c.pidfd) {
          Reap(c);
          changed = true;
        } else if (fd == c.out) {
          Drain(c, &c.out, c.out_buf, "out");
        } else if (fd == c.err) {
          Drain(c, &c.err, c.err_buf, "err");
        }
      }
      if (changed) cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t changes_ = 0;
  uint64_t polled_changes_ = 0;
  bool stop_ = false;
  int epoll_ = -1, wake_ = -1;
  std::map<std::string, Child> children_;
  std::map<int, std::string> by_fd_;
  std::map<std::string, std::string> programs_;  // argv[0] -> resolved path (Submit's thread only)
  std::thread pump_;
};

}  // namespace

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kTimedOut:
      return "timed_out";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kPreempted:
      return "preempted";
    case JobState::kLost:
      return "lost";
  }
  return "unknown";
}

bool IsFinal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kTimedOut ||
         s == JobState::kCancelled || s == JobState::kLost;
}

std::optional<int> ReadExitCode(const std::string& path) {
  if (path.empty()) return std::nullopt;
  Result<std::string> text = ReadFile(path);
  int code = 0;
  if (!text.ok() || !ParseNumber(TrimSpace(*text), &code) || code < 0) return std::nullopt;
  return code;
}

Status WriteExitCode(const std::string& path, int code) {
  if (path.empty()) return Status();
  return WriteFileAtomic(path, std::to_string(code) + "\n");
}

std::unique_ptr<Backend> MakeLocalBackend() { return std::make_unique<LocalBackend>(); }

void KillStrayLocalJob(const std::string& id, std::chrono::milliseconds grace) {
  // "local:<pgid>:<start time>"
  if (id.rfind("local:", 0) != 0) return;
  size_t colon = id.find(':', 6);
  if (colon == std::string::npos) return;
  Result<int64_t> parsed = ParseInt("pgid", id.substr(6, colon - 6));
  if (!parsed.ok() || *parsed <= 1) return;
  const int64_t pgid = *parsed;
  std::string start = id.substr(colon + 1);
  if (ProcessStartTime(static_cast<pid_t>(pgid)) != start || start.empty()) return;
  ::kill(-static_cast<pid_t>(pgid), SIGTERM);
  Clock::time_point until = Clock::now() + grace;
  while (Clock::now() < until && ::kill(-static_cast<pid_t>(pgid), 0) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-static_cast<pid_t>(pgid), SIGKILL);
}

}  // namespace gantry::jobs
