// RunHealth: runs checks in parallel where safe, each with its own deadline,
// under one global watchdog, so that no check can hang the run.
//
// How a check runs:
//   - isolate() == true: in a forked child. The child runs Check::Run, writes
//     the result as JSON to a pipe and _exit(0)s; the parent polls the pipe
//     until the check's deadline and then SIGKILLs and reaps the child. A
//     statvfs() on a dead NFS mount or a stuck driver ioctl therefore costs
//     at most the check's timeout.
//   - otherwise: on a thread. A thread cannot be killed, so when one overruns
//     its deadline the runner stops waiting, records an error and detaches it.
//     The detached thread may still touch the Check object after RunHealth
//     returns; that is why every check that can block in the kernel must set
//     isolate(): isolation is the only real cure for a hang.
//
// Fork in a multithreaded process: only the runner thread forks (never a
// worker thread), and the child does only the check's work, the JSON
// serialisation and write()/_exit(). glibc makes malloc usable in the child
// of a multithreaded parent; other locks (the logger, iostreams) may be held
// by a thread that does not exist in the child, so isolated checks and this
// file's child path never log. _exit() skips atexit handlers and stdio
// flushing, which belong to the parent.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "gantry/health/check.h"
#include "gantry/health/profile.h"

namespace gantry::health {
namespace {

using Steady = std::chrono::steady_clock;

constexpr size_t kMaxChildOutput = 1 << 20;  // a result is a few hundred bytes
// How long a SIGKILLed child gets to be reaped; one stuck in uninterruptible
// sleep (a hard NFS mount) cannot die until its call returns, and the run must
// not wait for that.
constexpr auto kReapGrace = std::chrono::milliseconds(200);

std::string Seconds(std::chrono::nanoseconds d) {
  return fmt::format("{:g}", std::chrono::duration<double>(d).count());
}

std::string Hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

CheckResult ErrorResult(const std::string& name, std::string message) {
  CheckResult r;
  r.name = name;
  r.outcome = Outcome::kError;
  r.message = std::move(message);
  r.fault_code = "NHCNA";
  return r;
}

// A pipe that worker threads write one byte to when they finish, so the
// runner's poll() wakes up. Shared with the threads: a detached thread that
// finishes after RunHealth returned still writes to a valid descriptor.
struct WakePipe {
  int fds[2] = {-1, -1};
  WakePipe() {
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) fds[0] = fds[1] = -1;
  }
  ~WakePipe() {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  void Wake() const {
    if (fds[1] >= 0) {
      char c = 1;
      [[maybe_unused]] ssize_t n = ::write(fds[1], &c, 1);
    }
  }
  void Drain() const {
    char buf[64];
    while (fds[0] >= 0 && ::read(fds[0], buf, sizeof buf) > 0) {
    }
  }
};

struct ThreadState {
  std::mutex mu;
  bool done = false;
  CheckResult result;
  Context ctx;  // a copy: the caller's may be gone when a detached thread ends
};

struct Running {
  size_t index = 0;
  Steady::time_point start, deadline;
  bool deadline_is_watchdog = false;
  // isolated
  pid_t pid = -1;
  int fd = -1;
  std::string out;
  bool eof = false;
  Steady::time_point eof_at;
  // thread
  std::thread thread;
  std::shared_ptr<ThreadState> state;
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// The child side. No logging, no exceptions out, no return.
[[noreturn]] void ChildMain(const Check& check, const Context& ctx, int fd) {
  std::string text;
  try {
    CheckResult r = check.Run(ctx);
    r.name = check.name();
    text = r.ToJson().dump(-1, ' ', false, Json::error_handler_t::replace);
  } catch (...) {
    text = ErrorResult(check.name(), "the check threw an exception (a bug in Gantry)")
               .ToJson()
               .dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  WriteAll(fd, text);
  ::_exit(0);
}

class Runner {
 public:
  Runner(const std::vector<std::unique_ptr<Check>>& checks, const Context& ctx,
         const RunOptions& options, std::vector<std::optional<CheckResult>>* results)
      : checks_(checks), ctx_(ctx), options_(options), results_(*results) {
    watchdog_deadline_ = Steady::now() + options.watchdog;
  }

  void RunBatch(const std::vector<size_t>& order, int parallelism) {
    size_t next = 0;
    std::vector<Running> running;
    while (next < order.size() || !running.empty()) {
      if (!watchdog_fired_ && Steady::now() >= watchdog_deadline_) watchdog_fired_ = true;
      if (watchdog_fired_) {
        for (Running& r : running) TimeOut(r);
        running.clear();
        break;
      }
      while (static_cast<int>(running.size()) < parallelism && next < order.size()) {
        running.push_back(Start(order[next++]));
      }
      Wait(running);
      Collect(&running);
    }
    // Anything the watchdog left unstarted.
    for (; next < order.size(); ++next) NotRun(order[next]);
  }

  void NotRunRest(const std::vector<size_t>& order) {
    for (size_t i : order) NotRun(i);
  }

  bool watchdog_fired() const { return watchdog_fired_; }

 private:
  void NotRun(size_t i) {
    results_[i] = ErrorResult(checks_[i]->name(), fmt::format("not run: the {} s watchdog fired",
                                                              Seconds(options_.watchdog)));
  }

  Running Start(size_t i) {
    const Check& check = *checks_[i];
    Running r;
    r.index = i;
    r.start = Steady::now();
    r.deadline = r.start + check.timeout();
    if (r.deadline >= watchdog_deadline_) {
      r.deadline = watchdog_deadline_;
      r.deadline_is_watchdog = true;
    }
    if (check.isolate()) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        results_[i] = ErrorResult(
            check.name(), fmt::format("could not start the probe: pipe: {}", std::strerror(errno)));
        r.eof = true;
        return r;
      }
      pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        ChildMain(check, ctx_, fds[1]);
      }
      ::close(fds[1]);
      if (pid < 0) {
        ::close(fds[0]);
        results_[i] = ErrorResult(
            check.name(), fmt::format("could not start the probe: fork: {}", std::strerror(errno)));
        r.eof = true;
        return r;
      }
      ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
      r.pid = pid;
      r.fd = fds[0];
    } else {
      r.state = std::make_shared<ThreadState>();
      r.state->ctx = ctx_;
      auto state = r.state;
      auto wake = wake_;
      // The name is copied up front so that a thread which returns after
      // being abandoned never touches the Check again once Run() is done.
      r.thread = std::thread([state, wake, &check, name = check.name()] {
        CheckResult res;
        try {
          res = check.Run(state->ctx);
        } catch (...) {
          res = ErrorResult(name, "the check threw an exception (a bug in Gantry)");
        }
        res.name = name;
        {
          std::lock_guard<std::mutex> lock(state->mu);
          state->result = std::move(res);
          state->done = true;
        }
        wake->Wake();
      });
    }
    return r;
  }

  // Blocks until something may have changed: output from a child, a thread
  // finishing, or the nearest deadline.
  void Wait(const std::vector<Running>& running) {
    std::vector<pollfd> fds;
    fds.push_back({wake_->fds[0], POLLIN, 0});
    Steady::time_point until = watchdog_deadline_;
    for (const Running& r : running) {
      if (r.pid < 0 && !r.state) return;  // failed to start: collect it now
      if (r.pid >= 0 && !r.eof) fds.push_back({r.fd, POLLIN, 0});
      // A child that closed its pipe is being reaped: look again soon.
      until = std::min(until, r.eof ? Steady::now() + std::chrono::milliseconds(2) : r.deadline);
    }
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - Steady::now()).count();
    ms = std::clamp<int64_t>(ms, 0, 60'000);
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(ms));
    if (n < 0) return;  // EINTR: the loop looks again
  }

  void Collect(std::vector<Running>* running) {
    wake_->Drain();
    auto now = Steady::now();
    for (auto it = running->begin(); it != running->end();) {
      Running& r = *it;
      bool finished = false;
      if (r.pid < 0 && !r.state) {
        finished = true;  // never started; its error result is set
      } else if (r.state) {
        std::lock_guard<std::mutex> lock(r.state->mu);
        if (r.state->done) {
          CheckResult res = r.state->result;
          res.seconds = std::chrono::duration<double>(now - r.start).count();
          results_[r.index] = std::move(res);
          finished = true;
        }
      } else {
        ReadChild(&r);
        if (r.eof) finished = Reap(&r);
      }
      if (finished) {
        if (r.thread.joinable()) r.thread.join();
        it = running->erase(it);
        continue;
      }
      if (now >= r.deadline) {
        TimeOut(r);
        it = running->erase(it);
        continue;
      }
      ++it;
    }
  }

  void ReadChild(Running* r) {
    char buf[4096];
    while (!r->eof) {
      ssize_t n = ::read(r->fd, buf, sizeof buf);
      if (n > 0) {
        if (r->out.size() < kMaxChildOutput) r->out.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        r->eof = true;
        r->eof_at = Steady::now();
        ::close(r->fd);
        r->fd = -1;
      } else {
        if (errno == EINTR) continue;
        break;  // EAGAIN: nothing more now
      }
    }
  }

  // True when the child was reaped and its result recorded.
  bool Reap(Running* r) {
    int status = 0;
    pid_t got = ::waitpid(r->pid, &status, WNOHANG);
    if (got == 0) return false;  // closed its pipe but still running: wait (bounded by deadline)
    const Check& check = *checks_[r->index];
    double secs = std::chrono::duration<double>(Steady::now() - r->start).count();
    CheckResult res;
    if (got < 0) {
      res = ErrorResult(check.name(),
                        fmt::format("lost the probe process: waitpid: {}", std::strerror(errno)));
    } else if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      res = ErrorResult(check.name(), fmt::format("the probe crashed: killed by signal {} ({})",
                                                  sig, ::strsignal(sig)));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      res = ErrorResult(check.name(), fmt::format("the probe exited with code {} without a result",
                                                  WEXITSTATUS(status)));
    } else {
      Result<Json> j = ParseJson(r->out, "the probe's output");
      Result<CheckResult> parsed =
          j.ok() ? CheckResult::FromJson(*j) : Result<CheckResult>(j.status());
      if (parsed.ok()) {
        res = std::move(*parsed);
        res.name = check.name();
      } else {
        res = ErrorResult(check.name(), fmt::format("the probe exited without a result ({})",
                                                    parsed.status().message()));
      }
    }
    res.seconds = secs;
    results_[r->index] = std::move(res);
    r->pid = -1;
    return true;
  }

  void TimeOut(Running& r) {
    const Check& check = *checks_[r.index];
    const bool watchdog = r.deadline_is_watchdog || watchdog_fired_;
    std::string msg;
    if (r.pid >= 0) {
      ::kill(r.pid, SIGKILL);
      bool reaped = false;
      auto until = Steady::now() + kReapGrace;
      while (true) {
        pid_t got = ::waitpid(r.pid, nullptr, WNOHANG);
        if (got != 0) {
          reaped = true;
          break;
        }
        if (Steady::now() >= until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (r.fd >= 0) ::close(r.fd);
      r.fd = -1;
      msg = watchdog ? fmt::format(
                           "timed out: the {} s watchdog fired while it ran; the probe "
                           "was killed (a hung filesystem or driver call?)",
                           Seconds(options_.watchdog))
                     : fmt::format(
                           "timed out after {} s: the probe was killed (a hung "
                           "filesystem or driver call?)",
                           Seconds(check.timeout()));
      if (!reaped) msg += "; it has not exited yet (stuck in the kernel)";
      r.pid = -1;
    } else {
      // Threads cannot be killed: abandon it (see the file comment).
      if (r.thread.joinable()) r.thread.detach();
      msg = watchdog ? fmt::format(
                           "timed out: the {} s watchdog fired before the check returned; "
                           "it was abandoned (a hung filesystem or driver call?)",
                           Seconds(options_.watchdog))
                     : fmt::format(
                           "timed out after {} s: the check did not return and was "
                           "abandoned (a hung filesystem or driver call?)",
                           Seconds(check.timeout()));
    }
    CheckResult res = ErrorResult(check.name(), std::move(msg));
    res.seconds = std::chrono::duration<double>(Steady::now() - r.start).count();
    results_[r.index] = std::move(res);
  }

  const std::vector<std::unique_ptr<Check>>& checks_;
  const Context& ctx_;
  const RunOptions& options_;
  std::vector<std::optional<CheckResult>>& results_;
  std::shared_ptr<WakePipe> wake_ = std::make_shared<WakePipe>();
  Steady::time_point watchdog_deadline_;
  bool watchdog_fired_ = false;
};

}  // namespace

Result<HealthReport> RunHealth(const std::vector<std::unique_ptr<Check>>& checks,
                               const Context& ctx, const RunOptions& options) {
  if (options.parallelism < 1) {
    return InvalidArgument(fmt::format("parallelism {} must be at least 1", options.parallelism));
  }
  if (options.watchdog <= std::chrono::milliseconds(0)) {
    return InvalidArgument("the watchdog must be positive (e.g. --timeout 60s)");
  }
  std::set<std::string> ids;
  std::string id_list;
  for (const auto& c : checks) {
    if (c == nullptr) return InvalidArgument("a null check");
    ids.insert(c->name());
    id_list += (id_list.empty() ? "" : ", ") + c->name();
  }
  for (const auto* list : {&options.only, &options.skip}) {
    for (const std::string& id : *list) {
      if (ids.count(id) == 0) {
        return InvalidArgument(fmt::format("--{} {}: the profile has no check '{}' (checks: {})",
                                           list == &options.only ? "only" : "skip", id, id,
                                           id_list.empty() ? "none" : id_list));
      }
    }
  }

  const Clock& clock = ctx.clock != nullptr ? *ctx.clock : SystemClock();
  HealthReport report;
  report.timestamp = clock.WallNow();
  const auto start = clock.Now();
  report.hostname = Hostname();
  report.profile = ctx.profile != nullptr ? ctx.profile->name() : "";
  report.vm_size = ctx.vm ? ctx.vm->vm_size : "";

  auto listed = [](const std::vector<std::string>& v, const std::string& id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  std::vector<std::optional<CheckResult>> results(checks.size());
  std::vector<bool> included(checks.size(), false);
  std::vector<size_t> parallel, serial;
  for (size_t i = 0; i < checks.size(); ++i) {
    const std::string id = checks[i]->name();
    if (!options.only.empty() && !listed(options.only, id)) continue;
    included[i] = true;
    if (listed(options.skip, id)) {
      CheckResult r;
      r.name = id;
      r.outcome = Outcome::kSkip;
      r.message = "skipped (--skip)";
      results[i] = r;
      continue;
    }
    (checks[i]->parallel_safe() ? parallel : serial).push_back(i);
  }

  Runner runner(checks, ctx, options, &results);
  runner.RunBatch(parallel, options.parallelism);
  // Bandwidth probes measure the machine: they run alone, after the rest.
  if (runner.watchdog_fired()) {
    runner.NotRunRest(serial);
  } else {
    runner.RunBatch(serial, 1);
  }

  for (size_t i = 0; i < checks.size(); ++i) {
    if (!included[i]) continue;
    if (!results[i]) {
      results[i] = ErrorResult(checks[i]->name(), "no result (a bug in Gantry's runner)");
    }
    report.results.push_back(std::move(*results[i]));
  }
  report.overall = Overall(report.results);
  report.elapsed_s = std::chrono::duration<double>(clock.Now() - start).count();
  return report;
}

}  // namespace gantry::health
