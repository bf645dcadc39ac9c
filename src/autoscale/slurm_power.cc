// Slurm's ResumeProgram / SuspendProgram / ResumeFailProgram
// (`gantry autoscale slurm-resume|slurm-suspend|slurm-resume-fail HOSTLIST`).
//
// Slurm keeps none of their output and ignores their exit code beyond its own
// log, so everything this does goes to slurm.log_file, one timestamped line
// per step:
//   2026-12-02T07:40:00Z slurm-resume[4242] cloud-[1-2]: run: /opt/start-node cloud-1
#include "gantry/autoscale/slurm_power.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gantry/core/log.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "slurm_power_internal.h"

namespace gantry::autoscale {
namespace {

// Per-node commands run side by side (a cloud node takes minutes to boot and
// Slurm's ResumeTimeout covers the whole call), but not hundreds at once.
constexpr size_t kMaxParallel = 16;
// How much of a command's stdout/stderr goes to the log.
constexpr size_t kMaxLoggedOutput = 4096;

std::string_view ActionName(PowerAction action) {
  switch (action) {
    case PowerAction::kResume:
      return "slurm-resume";
    case PowerAction::kSuspend:
      return "slurm-suspend";
    case PowerAction::kResumeFail:
      return "slurm-resume-fail";
  }
  return "slurm-power";
}

// The log file, opened for appending. Not being able to write it does not
// stop the action (the nodes matter more than the log), but says so on stderr.
class PowerLog {
 public:
  PowerLog(const std::string& path, const Clock& clock, PowerAction action,
           std::string_view hostlist)
      : path_(path), clock_(clock) {
    // A call for thousands of nodes would otherwise repeat a long list on every line.
    constexpr size_t kMaxShown = 120;
    std::string shown(hostlist.substr(0, kMaxShown));
    if (hostlist.size() > kMaxShown) shown += "...";
    prefix_ =
        std::string(ActionName(action)) + "[" + std::to_string(getpid()) + "] " + shown + ": ";
    if (path.empty()) return;
    fd_ = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      log::warn(
          "slurm.log_file '{}' cannot be opened for appending: {}; the Slurm power "
          "program goes on without its log",
          path, std::strerror(errno));
    }
  }
  ~PowerLog() {
    if (fd_ >= 0) close(fd_);
  }
  PowerLog(const PowerLog&) = delete;
  PowerLog& operator=(const PowerLog&) = delete;

  // One line per line of `text`. Thread-safe; each line is one append.
  void Line(std::string_view text) {
    const std::string ts = FormatUtc(clock_.WallNow(), "%Y-%m-%dT%H:%M:%SZ");
    std::string out;
    size_t start = 0;
    do {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      out += ts + " " + prefix_ + std::string(text.substr(start, end - start)) + "\n";
      start = end + 1;
    } while (start < text.size());
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) {
      log::debug("{}", out);
      return;
    }
    const char* p = out.data();
    size_t left = out.size();
    while (left > 0) {
      const ssize_t n = write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        log::warn("slurm.log_file '{}': write failed: {}", path_, std::strerror(errno));
        return;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  // Holds an exclusive flock on the log file until destruction: two programs
  // reading the scale set's count and setting it from what they read would
  // otherwise race (Slurm runs resume and suspend side by side).
  void LockExclusive() {
    if (fd_ < 0) return;
    while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }

 private:
  std::string path_;
  const Clock& clock_;
  std::string prefix_;
  int fd_ = -1;
  std::mutex mu_;
};

std::string Tail(std::string_view s) {
  s = TrimSpace(s);
  if (s.size() <= kMaxLoggedOutput) return std::string(s);
  return "..." + std::string(s.substr(s.size() - kMaxLoggedOutput));
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

bool Mentions(const std::vector<std::string>& argv, std::string_view word) {
  return std::any_of(argv.begin(), argv.end(),
                     [&](const std::string& a) { return a.find(word) != std::string::npos; });
}

// Runs one command line; the error names it and says how it ended.
Status RunOne(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
              PowerLog& plog) {
  plog.Line("run: " + JoinArgv(argv));
  auto r = RunSubprocess(argv, timeout);
  if (!r.ok()) {
    plog.Line("failed: " + r.status().message());
    return r.status();
  }
  if (!TrimSpace(r->out).empty()) plog.Line("stdout: " + Tail(r->out));
  if (!TrimSpace(r->err).empty()) plog.Line("stderr: " + Tail(r->err));
  if (r->exit_code != 0) {
    std::string msg = JoinArgv(argv) + " exited with " + std::to_string(r->exit_code);
    const std::string err = Tail(r->err);
    if (!err.empty()) msg += ": " + err.substr(0, 512);
    plog.Line("failed: exit code " + std::to_string(r->exit_code));
    return Unavailable(msg);
  }
  return Status::Ok();
}

// Commands mode: `{nodes}` is the compressed hostlist of the call; an argument
// with `{node}` makes it one run per node (side by side, kMaxParallel at a
// time); with neither, the hostlist is appended as the last argument, as
// Slurm itself calls its programs. ResumeFail runs the suspend command (the
// node is to be cleaned up, as CycleCloud's ResumeFail = suspend). Each run
// may take resume_timeout (suspend too: there is no suspend_timeout); a
// command that starts a daemon must detach it from its stdout and stderr, which
// are read until they close.
Result<PowerResult> RunCommands(const SlurmPowerConfig& config, PowerAction action,
                                const std::vector<std::string>& nodes, PowerLog& plog) {
  const bool resume = action == PowerAction::kResume;
  const std::vector<std::string>& tmpl = resume ? config.resume_command : config.suspend_command;
  if (tmpl.empty()) {
    return FailedPrecondition(
        std::string("slurm.") + (resume ? "resume_command" : "suspend_command") +
        " is not set, and neither is slurm.vmss: " + std::string(ActionName(action)) +
        " has nothing to run; set one of them in the autoscale config");
  }
  const std::string hostlist = CompressHostlist(nodes);
  const auto timeout = config.resume_timeout;
  PowerResult result;
  if (!Mentions(tmpl, "{node}")) {
    std::vector<std::string> argv;
    for (const std::string& a : tmpl) argv.push_back(ReplaceAll(a, "{nodes}", hostlist));
    if (!Mentions(tmpl, "{nodes}")) argv.push_back(hostlist);
    RETURN_IF_ERROR(RunOne(argv, timeout, plog));
    result.acted = nodes;
    return result;
  }

  std::vector<Status> status(nodes.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < nodes.size(); i = next++) {
      std::vector<std::string> argv;
      for (const std::string& a : tmpl) {
        argv.push_back(ReplaceAll(ReplaceAll(a, "{nodes}", hostlist), "{node}", nodes[i]));
      }
      status[i] = RunOne(argv, timeout, plog);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(kMaxParallel, nodes.size()); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();

  std::vector<std::string> failed;
  std::string first_error;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (status[i].ok()) {
      result.acted.push_back(nodes[i]);
    } else {
      failed.push_back(nodes[i]);
      if (first_error.empty()) first_error = nodes[i] + ": " + status[i].message();
    }
  }
  if (!failed.empty()) {
    return Unavailable(std::string(ActionName(action)) + ": the command failed for " +
                       CompressHostlist(failed) + " (" + std::to_string(failed.size()) + " of " +
                       std::to_string(nodes.size()) + " nodes); first: " + first_error);
  }
  return result;
}

bool Transient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kResourceExhausted;
}

bool BeingDeleted(const Instance& in) {
  return AsciiLower(in.state).find("delet") != std::string::npos;
}

// VMSS mode. The count and the instances are read again before every try, so
// a retry after a timeout never scales twice: resume sets the count decided
// on the first read (an absolute number) only while the set is below it;
// suspend deletes the named nodes' instances that still exist.
Result<PowerResult> RunVmss(Actuator& vmss, const SlurmPowerConfig& config, PowerAction action,
                            const std::vector<std::string>& nodes, const Clock& clock,
                            PowerLog& plog) {
  if (!vmss.CanChooseVictims()) {
    return FailedPrecondition("slurm.vmss: the actuator cannot delete chosen instances, which " +
                              std::string(ActionName(action)) + " needs");
  }
  plog.LockExclusive();
  const auto deadline = clock.Now() + config.resume_timeout;
  std::chrono::nanoseconds backoff = std::chrono::seconds(1);
  int64_t resume_target = -1;  // resume: the count decided on the first read
  std::vector<std::string> resume_missing;
  PowerResult result;
  std::set<std::string> acted;
  for (int attempt = 1;; ++attempt) {
    Status s;
    auto cap = vmss.Read();
    if (!cap.ok()) {
      s = cap.status().WithContext("reading the scale set");
    } else {
      std::map<std::string, const Instance*> by_name;
      for (const Instance& in : cap->instances) {
        if (!BeingDeleted(in)) by_name.emplace(in.name, &in);
      }
      if (action == PowerAction::kResume) {
        if (resume_target < 0) {
          for (const std::string& n : nodes) {
            if (by_name.count(n)) {
              result.skipped.push_back(n);
            } else {
              resume_missing.push_back(n);
            }
          }
          if (!result.skipped.empty()) {
            plog.Line("already running: " + CompressHostlist(result.skipped));
          }
          if (resume_missing.empty()) return result;
          resume_target = cap->target + static_cast<int64_t>(resume_missing.size());
        }
        if (cap->target >= resume_target) {
          plog.Line("the scale set is at " + std::to_string(cap->target) +
                    " (wanted: " + std::to_string(resume_target) + "), done");
          result.acted = resume_missing;
          return result;
        }
        plog.Line("scale out " + std::to_string(cap->target) + " -> " +
                  std::to_string(resume_target) + " for " + CompressHostlist(resume_missing));
        s = vmss.ScaleOut(resume_target);
        if (s.ok()) {
          result.acted = resume_missing;
          return result;
        }
      } else {
        std::vector<std::string> victims, victim_nodes;
        for (const std::string& n : nodes) {
          auto it = by_name.find(n);
          if (it != by_name.end()) {
            victims.push_back(it->second->id);
            victim_nodes.push_back(n);
          } else if (!acted.count(n) && std::find(result.skipped.begin(), result.skipped.end(),
                                                  n) == result.skipped.end()) {
            result.skipped.push_back(n);
          }
        }
        if (attempt == 1 && !result.skipped.empty()) {
          plog.Line("no instance (already gone): " + CompressHostlist(result.skipped));
        }
        if (victims.empty()) {
          for (const std::string& n : nodes) {
            if (acted.count(n)) result.acted.push_back(n);
          }
          return result;
        }
        const int64_t desired =
            std::max<int64_t>(0, cap->target - static_cast<int64_t>(victims.size()));
        plog.Line("scale in " + std::to_string(cap->target) + " -> " + std::to_string(desired) +
                  ": delete " + CompressHostlist(victim_nodes) + " (instances " +
                  Join(victims, ",") + ")");
        s = vmss.ScaleIn(desired, victims);
        // Nodes asked for on this try count as done once it succeeds, or
        // once a retry finds their instance gone.
        acted.insert(victim_nodes.begin(), victim_nodes.end());
        if (s.ok()) {
          // Keep the order of the argument.
          for (const std::string& n : nodes) {
            if (acted.count(n)) result.acted.push_back(n);
          }
          return result;
        }
      }
    }
    const auto left = deadline - clock.Now();
    if (!Transient(s) || left <= std::chrono::nanoseconds(0)) return s;
    const auto wait = std::min(backoff, left);
    plog.Line("try " + std::to_string(attempt) + " failed (" + s.ToString() + "); again in " +
              FormatDuration(wait));
    clock.SleepFor(wait);
    backoff = std::min<std::chrono::nanoseconds>(backoff * 2, std::chrono::seconds(30));
  }
}

}  // namespace

namespace internal {

Result<PowerResult> RunPowerActionWith(const SlurmPowerConfig& config, PowerAction action,
                                       std::string_view hostlist, const Clock& clock,
                                       Actuator* vmss) {
  PowerLog plog(config.log_file, clock, action, hostlist);
  auto run = [&]() -> Result<PowerResult> {
    auto asked = ExpandHostlist(hostlist);
    if (!asked.ok()) return asked.status().WithContext(std::string(ActionName(action)));
    // Slurm never names a node twice, but a hand-written call might.
    std::vector<std::string> nodes;
    std::set<std::string> seen;
    for (std::string& n : *asked) {
      if (seen.insert(n).second) nodes.push_back(std::move(n));
    }
    if (nodes.empty()) {
      return InvalidArgument(std::string(ActionName(action)) +
                             ": no node named; the argument is a hostlist such as gpu-[1-3]");
    }
    if (config.nodes.empty()) {
      return FailedPrecondition(
          "slurm.nodes is not set: the autoscale config must name the "
          "nodes it powers (a hostlist such as gpu-[0-15])");
    }
    auto mine = ExpandHostlist(config.nodes);
    if (!mine.ok()) return mine.status().WithContext("slurm.nodes");
    const std::set<std::string> known(mine->begin(), mine->end());
    std::vector<std::string> unknown;
    for (const std::string& n : nodes) {
      if (!known.count(n)) unknown.push_back(n);
    }
    if (!unknown.empty()) {
      return FailedPrecondition("node " + CompressHostlist(unknown) + " is not in slurm.nodes \"" +
                                config.nodes +
                                "\": add it there, or take it out of slurm.conf's power saving; "
                                "nothing was done");
    }
    if (!config.use_vmss) return RunCommands(config, action, nodes, plog);
    if (vmss != nullptr) return RunVmss(*vmss, config, action, nodes, clock, plog);
    // One ARM operation may not outlast the call: Slurm marks the node DOWN
    // at its ResumeTimeout whatever we are still waiting for.
    VmssConfig vc = config.vmss;
    vc.operation_timeout = std::min(vc.operation_timeout, config.resume_timeout);
    auto made = NewVmssActuator(vc, clock);
    if (!made.ok()) return made.status().WithContext("slurm.vmss");
    return RunVmss(**made, config, action, nodes, clock, plog);
  };
  plog.Line("called");
  auto result = run();
  if (!result.ok()) {
    plog.Line("error: " + result.status().ToString());
  } else {
    plog.Line("done: " + std::to_string(result->acted.size()) + " acted" +
              (result->acted.empty() ? "" : " (" + CompressHostlist(result->acted) + ")") + ", " +
              std::to_string(result->skipped.size()) + " skipped" +
              (result->skipped.empty() ? "" : " (" + CompressHostlist(result->skipped) + ")"));
  }
  return result;
}

}  // namespace internal

Result<PowerResult> RunPowerAction(const SlurmPowerConfig& config, PowerAction action,
                                   std::string_view hostlist, const Clock& clock) {
  return internal::RunPowerActionWith(config, action, hostlist, clock, nullptr);
}

}  // namespace gantry::autoscale
