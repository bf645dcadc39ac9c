// Idle auto-shutdown of `gantry agent`: a node is idle when CPU and every GPU
// are below their thresholds and nobody uses it (no SSH or other interactive
// session, no Jupyter kernel or terminal, no running Slurm job, none of the
// configured busy processes) for `idle_for`. Then the agent sends a warning
// notification, waits `warn_before` (activity, `gantry agent idle cancel` or
// the cancel file cancel it), and runs the configured action once (default:
// none - log and notify only).
//
//   active --idle--> idle_since --(idle_for - warn_before)--> warning
//     ^                  |                                      |  \-- activity/cancel --> active
//     +---- activity ----+                                      v
//     +------------------ activity ----------------------- action_taken
//
// agent.yaml:
//   idle:
//     enabled: true              # default true when the section exists
//     cpu_threshold: 5           # percent of all CPUs (cpu_utilization)
//     gpu_threshold: 5           # percent, every GPU (gpu_utilization)
//     idle_for: 30m              # at least 15m (Azure ML's minimum) unless allow_below_floor
//     allow_below_floor: false   # for tests and demos only
//     warn_before: 5m            # warning notification this long before the action
//     action: [shutdown, -h, now]  # argv, no shell; absent = log and notify only
//     action_timeout: 5m
//     ignore_processes: [node_exporter]  # their CPU time does not count as use
//     busy_processes: [rsync, python-train]  # any of them running = in use
//     check_ssh: true            # utmp user sessions and established TCP to ssh_port
//     ssh_port: 22
//     check_jupyter: true        # Jupyter kernels and terminals
//     check_slurm: true          # squeue -h -w $(hostname) -t R, else slurmstepd processes
//     cancel_file: /run/gantry/idle.cancel
//
// Thread-safety: Update/Cancel/status may be called from different threads
// (one mutex); Update is meant for one caller (the collection loop).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gantry/alerting/notify.h"
#include "gantry/agent/snapshot.h"
#include "gantry/core/clock.h"
#include "gantry/core/config.h"
#include "gantry/core/status.h"

namespace gantry::agent {

// Alerting building blocks live in gantry/alerting (shared with the gateway).
using alerting::Alert;
using alerting::CommandResult;
using alerting::FormatRfc3339;
using alerting::Notifier;
using alerting::RunCommand;

// Azure ML's minimum idleTimeBeforeShutdown; the floor for idle_for.
inline constexpr std::chrono::minutes kIdleFloor{15};

struct IdleConfig {
  bool enabled = false;
  double cpu_threshold = 5;  // percent
  double gpu_threshold = 5;  // percent
  std::chrono::seconds idle_for{std::chrono::minutes(30)};
  bool allow_below_floor = false;
  std::chrono::seconds warn_before{std::chrono::minutes(5)};
  std::vector<std::string> action;  // empty: log and notify only
  std::chrono::seconds action_timeout{std::chrono::minutes(5)};
  std::vector<std::string> ignore_processes;
  std::vector<std::string> busy_processes;
  bool check_ssh = true;
  int ssh_port = 22;
  bool check_jupyter = true;
  bool check_slurm = true;
  std::string cancel_file = "/run/gantry/idle.cancel";
};

// Checks a config built by hand (ParseIdleConfig applies the same rules):
// idle_for below kIdleFloor without allow_below_floor, warn_before not
// shorter than idle_for, negative thresholds, an ssh_port outside 1..65535.
// InvalidArgument naming the field (and "15 minutes" for the floor).
Status ValidateIdleConfig(const IdleConfig& config);

// Parses the map at `key` (the `idle:` section of agent.yaml). An absent
// section gives enabled = false. Errors are InvalidArgument naming file,
// line and key, e.g. "agent.yaml:3:13: key 'idle.idle_for': 5m is below the
// 15-minute floor (Azure ML's minimum idle time); use at least 15m, or set
// idle.allow_below_floor: true for tests".
Result<IdleConfig> ParseIdleConfig(const Config& config, std::string_view key = "idle");

// What uses the node besides CPU and GPU load, as one probe saw it.
struct Activity {
  int user_sessions = 0;                    // utmp USER_PROCESS entries whose process is alive
  int ssh_connections = 0;                  // established TCP connections to the local ssh port
  int jupyter = 0;                          // Jupyter kernels and terminals
  int slurm_jobs = 0;                       // running jobs on this node (or slurmstepd processes)
  std::vector<std::string> busy_processes;  // configured busy processes found running
  double ignored_cpu_percent =
      0;  // CPU of ignore_processes since the previous probe, % of all CPUs
};

// Looks at the system for activity. Probe() is called once per Update().
class ActivityProbe {
 public:
  virtual ~ActivityProbe() = default;
  virtual Activity Probe() = 0;
};

struct SystemProbeOptions {
  std::string root = "/";  // /proc, /run/utmp are read below it (tests: a FakeRoot)
  // utmp file; "" = <root>/run/utmp (then <root>/var/run/utmp).
  std::string utmp_path;
  // The squeue program (searched in $PATH); "" or not found: count
  // slurmstepd processes instead.
  std::string squeue = "squeue";
  // squeue asks slurmctld: at most once per squeue_every (the count is reused
  // in between), and after a failure not again for 10 minutes.
  std::chrono::seconds squeue_every{60};
  std::string hostname;  // "" = gethostname()
};

// The real probe: reads utmp (getutxent), <root>/proc/net/tcp{,6},
// <root>/proc/<pid>/{cmdline,stat}, <root>/proc/stat and runs squeue, as
// `config`'s check_* switches say. Slurm jobs: the larger of squeue's count
// and the number of slurmstepd processes. Never fails: what cannot be read counts as
// no activity from that source (logged once at debug level).
std::unique_ptr<ActivityProbe> MakeSystemActivityProbe(const IdleConfig& config,
                                                       SystemProbeOptions options = {});

enum class IdleState { kActive, kIdleSince, kWarning, kActionTaken };
// "active", "idle_since", "warning", "action_taken".
std::string_view IdleStateName(IdleState state);

struct IdleStatus {
  IdleState state = IdleState::kActive;
  int64_t idle_since_ms = 0;  // wall time the node became idle (0 when active)
  int64_t action_at_ms = 0;   // wall time the action is due (warning) or ran (action_taken)
  // Why the node is not idle now, e.g. "cpu 37.5% >= 5%", "ssh: 1 session(s)";
  // empty when idle.
  std::vector<std::string> busy_reasons;
  std::string last_action_result;  // "exited with status 0", "timed out", "" before any
  int actions_run = 0;
};

// For the agent's API and dashboard:
//   {"state":"warning","idle_since":"2027-01-15T08:00:00.000Z","action_at":"...",
//    "busy_reasons":[],"last_action_result":"","actions_run":0}
// idle_since and action_at are null when 0.
Json IdleStatusJson(const IdleStatus& status);

class IdleDetector {
 public:
  // `notifier` may be null (log only) and must outlive the detector.
  // Errors: ValidateIdleConfig's. `config.enabled` is not looked at: the
  // agent creates a detector only when it is true.
  static Result<std::unique_ptr<IdleDetector>> Create(const IdleConfig& config,
                                                      std::unique_ptr<ActivityProbe> probe,
                                                      Notifier* notifier,
                                                      const Clock& clock = SystemClock());
  ~IdleDetector();  // waits for a running action (up to its timeout)
  IdleDetector(const IdleDetector&) = delete;
  IdleDetector& operator=(const IdleDetector&) = delete;

  // One step of the state machine with this tick's signals (cpu_utilization,
  // gpu_utilization{gpu}) and a fresh probe. `now` is monotonic (Clock::Now());
  // wall times in the status and notifications come from the clock. A missing
  // cpu_utilization (the first tick has no rates) counts as busy. The action
  // runs on a thread of its own, so Update never waits for it.
  IdleStatus Update(std::chrono::nanoseconds now, const std::vector<Signal>& signals);

  // Cancels a pending warning (and restarts the idle timer) at the next
  // Update, as activity would. The same happens when the cancel file exists;
  // the detector then deletes it.
  void Cancel();

  IdleStatus status() const;

  // Waits until no action is running (tests). True when none is.
  bool WaitForAction(std::chrono::milliseconds timeout);

  const IdleConfig& config() const;

 private:
  IdleDetector(IdleConfig config, std::unique_ptr<ActivityProbe> probe, Notifier* notifier,
               const Clock& clock);
  void Notify(bool firing, const std::string& alertname, const std::string& summary, double value);
  void StartAction();

  IdleConfig config_;
  std::unique_ptr<ActivityProbe> probe_;
  Notifier* notifier_;
  const Clock& clock_;
  std::string hostname_;

  mutable std::mutex mu_;
  std::condition_variable action_done_;
  IdleStatus status_;
  std::chrono::nanoseconds idle_since_{0};
  std::chrono::nanoseconds action_due_{0};
  int64_t warning_started_ms_ = 0;
  int64_t action_started_ms_ = 0;
  bool cancel_requested_ = false;
  bool action_running_ = false;
  bool failed_alert_firing_ = false;
  std::thread action_thread_;
};

}  // namespace gantry::agent
