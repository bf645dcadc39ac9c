// The workflow runner: one thread, one loop. Each turn it observes the
// backend, reads the sweep trials' metrics, decides early terminations,
// starts what is ready and fits, and records the state. The DAG lives here
// (never in Slurm dependencies), so a restarted runner picks up from the
// state file.
#include "gantry/jobs/runner.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/jobs/prereq.h"
#include "gantry/registry/client.h"
#include "gantry/registry/registry.h"
#include "gantry/security/audit.h"
#include "runner_report.h"
#include "step_files.h"

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string NewRunId() {
  std::random_device rd;
  std::string t = FormatUtc(std::chrono::system_clock::now(), "%Y%m%d-%H%M%S");
  char suffix[8];
  snprintf(suffix, sizeof suffix, "%04x", rd() & 0xffff);
  return t + "-" + suffix;
}

std::string TrialKey(const std::string& step, int index) {
  char buf[32];
  snprintf(buf, sizeof buf, "/trial-%04d", index);
  return step + buf;
}

int CountGpus() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    static const std::regex kGpu("nvidia[0-9]+");
    if (std::regex_match(e.path().filename().string(), kGpu)) ++n;
  }
  return n;
}

double CountCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<double>(n) : 1;
}

uint64_t MemTotal() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kb = 0;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb * 1024;
  }
  return 0;
}

// A Slurm backend whose sacct queries reach back a day before now unless
// the options say from when.
std::unique_ptr<Backend> SlurmBackend(SlurmOptions so) {
  if (so.since == std::chrono::system_clock::time_point{}) {
    so.since = std::chrono::system_clock::now() - std::chrono::hours(24);
  }
  return MakeSlurmBackend(so);
}

// One thing the backend runs: a plain step (trial -1) or a sweep trial.
struct Unit {
  std::string step;
  int trial = -1;
  std::vector<int> gpus;
  double cpus = 0;
  uint64_t memory = 0;
  bool counted = true;  // holds local resources
};

class Runner {
 public:
  Runner(const Workflow& wf, const RunOptions& o) : wf_(wf), o_(o) {}
  ~Runner() {
    if (journal_fd_ >= 0) ::close(journal_fd_);
    if (lock_fd_ >= 0) ::close(lock_fd_);
  }

  Result<RunRecord> Run() {
    RETURN_IF_ERROR(Init());
    Loop();
    Finish();
    return rec_;
  }

 private:
  // ---------------------------------------------------------------- set-up
  Status Init() {
    if (o_.backend == "local") {
      backend_ = MakeLocalBackend();
    } else if (o_.backend == "slurm") {
      backend_ = SlurmBackend(o_.slurm);
      poll_interval_ = o_.slurm.poll_min;
      poll_min_ = o_.slurm.poll_min;
      poll_max_ = o_.slurm.poll_max;
    } else {
      return InvalidArgument("unknown backend '" + o_.backend + "': expected local or slurm");
    }
    RETURN_IF_ERROR(SelectSteps());
    dir_ = o_.state_dir.empty() ? DefaultStateDir(wf_.dir, wf_.name) : o_.state_dir;
    std::error_code ec;
    fs::create_directories(fs::path(dir_) / "logs", ec);
    if (ec) {
      return IoError("cannot create the state directory " + dir_ + " (use --state-dir DIR)",
                     ec.value());
    }
    if (::access(dir_.c_str(), W_OK) != 0) {
      return IoError("the state directory " + dir_ + " is not writable (use --state-dir DIR)",
                     errno);
    }
    RETURN_IF_ERROR(Lock());
    ReadJournal();
    Result<RunRecord> prev = ReadState(dir_);
    if (!prev.ok() && prev.status().code() != StatusCode::kNotFound) return prev.status();
    if (prev.ok() && prev->workflow != wf_.name) {
      return FailedPrecondition(dir_ + " holds the state of workflow '" + prev->workflow + "' (" +
                                prev->workflow_path + "), not of '" + wf_.name +
                                "': pass another --state-dir");
    }
    if (o_.resume) {
      if (!prev.ok()) {
        return FailedPrecondition("nothing to resume: no run of '" + wf_.name + "' recorded in " +
                                  dir_ + " (start one with gantry jobs run)");
      }
      RETURN_IF_ERROR(Recover(*prev));
    } else {
      if (prev.ok()) CleanUpAfterDeadRunner(*prev);
      rec_.run_id = NewRunId();
      rec_.started = UnixNow();
      for (const std::string& name : AllSteps()) {
        StepRecord r;
        if (prev.ok()) {
          auto it = prev->steps.find(name);
          if (it != prev->steps.end() && IsDone(it->second.state)) {
            r.fingerprint = it->second.fingerprint;  // for the up-to-date check
          }
        }
        rec_.steps[name] = std::move(r);
      }
    }
    rec_.workflow = wf_.name;
    rec_.workflow_path = wf_.path;
    rec_.workflow_digest = wf_.digest;
    rec_.backend = o_.backend;
    rec_.state = "running";
    rec_.runner_pid = ::getpid();
    rec_.finished = 0;
    InitCapacity();
    RETURN_IF_ERROR(OpenJournal(/*truncate=*/!o_.resume));
    if (!o_.audit_log.empty()) {
      security::AuditOptions ao;
      ao.path = o_.audit_log;
      ASSIGN_OR_RETURN(audit_, security::AuditLog::Open(ao));
    }
    Status s = WriteState(dir_, rec_);
    if (!s.ok()) return s;
    Emit("", StepState::kRunning,
         (o_.resume ? "resuming run " : "run ") + rec_.run_id + " of " + wf_.name + " (" +
             std::to_string(selected_.size()) + " steps, " + o_.backend + " backend, state in " +
             dir_ + ")");
    return Status();
  }

  // All steps, handlers included, in a stable order.
  std::vector<std::string> AllSteps() const {
    std::vector<std::string> out = wf_.order;
    for (const auto& [name, s] : wf_.steps) {
      if (s.handler) out.push_back(name);
    }
    return out;
  }

  Status SelectSteps() {
    if (o_.targets.empty()) {
      selected_.insert(wf_.order.begin(), wf_.order.end());
      return Status();
    }
    std::vector<std::string> todo;
    for (const std::string& t : o_.targets) {
      if (!wf_.steps.count(t)) {
        std::vector<std::string> names(wf_.order);
        std::optional<std::string> close = ClosestMatch(t, names, 2);
        return InvalidArgument("no step '" + t + "' in " + wf_.path +
                               (close ? " (did you mean '" + *close + "'?)" : ""));
      }
      todo.push_back(t);
    }
    while (!todo.empty()) {
      std::string n = todo.back();
      todo.pop_back();
      if (!selected_.insert(n).second) continue;
      for (const std::string& m : wf_.steps.at(n).needs) todo.push_back(m);
    }
    return Status();
  }

  Status Lock() {
    std::string path = (fs::path(dir_) / "lock").string();
    lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd_ < 0) return IoError("cannot open " + path, errno);
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      int64_t pid = ActiveRunner(dir_);
      return FailedPrecondition("another gantry jobs runner" +
                                (pid ? " (pid " + std::to_string(pid) + ")" : std::string()) +
                                " is running this workflow in " + dir_ +
                                ": wait for it, or stop it with gantry jobs cancel");
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    (void)!::ftruncate(lock_fd_, 0);
    (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);
    return Status();
  }

  void InitCapacity() {
    int gpus = o_.gpus >= 0 ? o_.gpus : CountGpus();
    node_gpus_ = gpus;
    for (int i = 0; i < gpus; ++i) free_gpus_.insert(i);
    node_cpus_ = o_.cpus > 0 ? o_.cpus : CountCpus();
    free_cpus_ = node_cpus_;
    node_memory_ = o_.memory_bytes > 0 ? o_.memory_bytes : MemTotal();
    free_memory_ = node_memory_;
  }

  // The journal (<state dir>/journal) records each submission and each exit
  // as one appended line, "job RUN KEY ATTEMPT ID" / "exit RUN KEY ATTEMPT
  // CODE", before the coalesced state write: a runner that dies in between
  // leaves in it what the state file does not say yet. One file and one
  // write() per event (no file per attempt: creating inodes is what costs on
  // ext4 with thousands of short steps).
  void ReadJournal() {
    std::ifstream in((fs::path(dir_) / "journal").string());
    std::string kind, run, key, value;
    int attempt = 0;
    while (in >> kind >> run >> key >> attempt >> value) {
      if (kind == "job") {
        journal_jobs_[run + " " + key] = {attempt, value};
      } else if (kind == "exit") {
        journal_exits_[run + " " + key + " " + std::to_string(attempt)] = value;
      }
    }
  }

  Status OpenJournal(bool truncate) {
    std::string path = (fs::path(dir_) / "journal").string();
    journal_fd_ = ::open(
        path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
    if (journal_fd_ < 0) return IoError("cannot open " + path, errno);
    return Status();
  }

  void Journal(std::string_view kind, const std::string& key, int attempt,
               const std::string& value) {
    if (journal_fd_ < 0) return;
    std::string line = std::string(kind) + " " + rec_.run_id + " " + key + " " +
                       std::to_string(attempt) + " " + value + "\n";
    (void)!::write(journal_fd_, line.data(), line.size());
  }

  // The last submission the journal knows of for `key` in `run`.
  std::optional<std::pair<int, std::string>> JournalJob(const std::string& run,
                                                        const std::string& key) const {
    auto it = journal_jobs_.find(run + " " + key);
    if (it == journal_jobs_.end()) return std::nullopt;
    return it->second;
  }

  std::string ExitPath(const std::string& key, int attempt) const {
    return LogPath(dir_, key) + "." + std::to_string(attempt) + ".exit";
  }

  // A previous runner of this directory died with jobs still out there: a new
  // run must not leave them running beside its own.
  void CleanUpAfterDeadRunner(const RunRecord& prev) {
    std::unique_ptr<Backend> other;
    for (const auto& [name, r] : prev.steps) {
      std::vector<std::string> ids;
      if (r.state == StepState::kRunning && !r.job_id.empty()) ids.push_back(r.job_id);
      std::vector<std::string> keys = {name};
      for (const TrialRecord& t : r.trials) {
        if (t.state == StepState::kRunning && !t.job_id.empty()) ids.push_back(t.job_id);
        keys.push_back(TrialKey(name, t.index));
      }
      if (prev.state == "running") {
        // Started after the last state write (see RecoverUnit).
        for (const std::string& key : keys) {
          std::optional<std::pair<int, std::string>> job = JournalJob(prev.run_id, key);
          if (job && std::find(ids.begin(), ids.end(), job->second) == ids.end()) {
            ids.push_back(job->second);
          }
        }
      }
      for (const std::string& id : ids) {
        if (id.rfind("local:", 0) == 0) {
          KillStrayLocalJob(id, std::chrono::seconds(5));
        } else if (id.rfind("slurm:", 0) == 0) {
          if (o_.backend == "slurm") {
            (void)backend_->Cancel(id, std::chrono::seconds(5));
          } else {
            if (!other) other = SlurmBackend(o_.slurm);
            (void)other->Cancel(id, std::chrono::seconds(5));
          }
        }
      }
    }
  }

  // resume: keep what finished; follow (Slurm) or restart (local) what ran;
  // give failed and cancelled steps a fresh set of retries.
  Status Recover(const RunRecord& prev) {
    rec_ = prev;
    for (const std::string& name : AllSteps()) {
      if (!rec_.steps.count(name)) rec_.steps[name] = StepRecord{};
    }
    for (auto it = rec_.steps.begin(); it != rec_.steps.end();) {
      if (!wf_.steps.count(it->first)) {
        it = rec_.steps.erase(it);  // a step removed from the file
      } else {
        ++it;
      }
    }
    bool adopt = backend_->Adopts() && prev.backend == o_.backend;
    for (auto& [name, r] : rec_.steps) {
      const Step& s = wf_.steps.at(name);
      if (IsDone(r.state) && r.state == StepState::kSucceeded && !r.fingerprint.empty() &&
          r.fingerprint != Fingerprint(s)) {
        Emit(name, StepState::kPending, "changed since it succeeded: it runs again");
        r = StepRecord{};
        continue;
      }
      if (s.sweep) {
        for (TrialRecord& t : r.trials)
          RecoverUnit(name, t.index, t.state, t.job_id, t.attempts, adopt, &t);
        if (!IsDone(r.state)) {
          if (r.state != StepState::kPending) r.state = StepState::kRunning;
          r.reason.clear();
        }
        continue;
      }
      RecoverUnit(name, -1, r.state, r.job_id, r.attempts, adopt, nullptr);
      if (r.state == StepState::kFailed || r.state == StepState::kCancelled ||
          r.state == StepState::kUpstreamFailed) {
        r.state = StepState::kPending;
        r.attempts = 0;
        r.reason.clear();
      }
    }
    return Status();
  }

  void RecoverUnit(const std::string& step, int trial, StepState& state, std::string& job_id,
                   int& attempts, bool adopt, TrialRecord* t) {
    std::string key = trial < 0 ? step : TrialKey(step, trial);
    // An attempt newer than the state knows of was started by the runner
    // that died (see ReadJournal).
    if (!IsDone(state)) {
      std::optional<std::pair<int, std::string>> job = JournalJob(rec_.run_id, key);
      if (job && job->first > 0 && (job->first > attempts || state != StepState::kRunning)) {
        bool stale = state != StepState::kRunning && job->first <= attempts;
        if (!stale) {
          state = StepState::kRunning;
          attempts = job->first;
          job_id = job->second;
        }
      }
    }
    if (state == StepState::kRunning && !job_id.empty()) {
      if (adopt) {
        Unit u{step, trial, {}, 0, 0, false};
        running_[job_id] = u;
        Launch l;
        l.key = key;
        l.run_id = rec_.run_id;
        l.log_path = LogPath(dir_, key);
        l.exit_path = ExitPath(key, attempts);
        backend_->Reattach(job_id, l);
        Emit(key, StepState::kRunning, "following " + job_id + " started by the previous runner");
        return;
      }
      std::optional<int> code;
      auto journaled =
          journal_exits_.find(rec_.run_id + " " + key + " " + std::to_string(attempts));
      if (journaled != journal_exits_.end()) {
        code = static_cast<int>(ParseInt("exit code", journaled->second).value_or(1));
      }
      if (!code) code = ReadExitCode(ExitPath(key, attempts));
      if (code) {
        // It finished after its runner died: its exit code is on disk.
        Unit u{step, trial, {}, 0, 0, false};
        Observed o;
        o.exit_code = *code;
        o.state = *code == 0 ? JobState::kSucceeded : JobState::kFailed;
        o.reason = *code == 0 ? "" : "exit code " + std::to_string(*code);
        recovered_.emplace_back(u, o);
        return;
      }
      KillStrayLocalJob(job_id, s_grace_);
      Emit(key, StepState::kPending, "its runner stopped while it ran: it starts again");
      state = StepState::kPending;
      attempts = std::max(0, attempts - 1);
      job_id.clear();
      return;
    }
    if (t) {
      if (state == StepState::kFailed || (state == StepState::kCancelled && !t->pruned)) {
        state = StepState::kPending;
        t->attempts = 0;
      }
      if (state == StepState::kWaiting) state = StepState::kPending;
    } else if (state == StepState::kWaiting) {
      state = StepState::kPending;
    }
  }

  // ---------------------------------------------------------------- loop
  // Indices into wf_.order for the scheduler, built once the records are
  // final (after Init/Recover): the loop then never looks a step up by name.
  void Index() {
    const size_t n = wf_.order.size();
    steps_.resize(n);
    recs_.resize(n);
    needs_.assign(n, {});
    dependents_.assign(n, {});
    checked_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) index_[wf_.order[i]] = i;
    for (size_t i = 0; i < n; ++i) {
      steps_[i] = &wf_.steps.at(wf_.order[i]);
      recs_[i] = &rec_.steps.at(wf_.order[i]);
      for (const std::string& m : steps_[i]->needs) {
        needs_[i].push_back(index_.at(m));
        dependents_[index_.at(m)].push_back(i);
      }
      if (selected_.count(wf_.order[i])) ready_.insert(i);
    }
  }

  // A step reached a final state: what needs it may be ready (or never will).
  void Settled(const std::string& name) {
    auto it = index_.find(name);
    if (it == index_.end()) return;  // a handler
    for (size_t d : dependents_[it->second]) {
      if (selected_.count(wf_.order[d])) ready_.insert(d);
    }
  }

  void Loop() {
    Index();
    for (auto& [u, o] : recovered_) Finished(u, o);
    recovered_.clear();
    while (true) {
      if (o_.cancel && o_.cancel->load() && !cancelling_) CancelAll();
      Observe();
      if (!cancelling_) Schedule();
      MaybeWriteState(false);
      if (running_.empty() && (cancelling_ || !Startable())) break;
      backend_->Wait(NextWait());
    }
  }

  std::chrono::milliseconds NextWait() const {
    auto wait = std::chrono::milliseconds(250);
    double now = UnixNow();
    for (size_t i : ready_) {
      const StepRecord& r = *recs_[i];
      if (r.state == StepState::kWaiting && r.next_attempt_at > now) {
        wait = std::min(wait, std::chrono::milliseconds(
                                  static_cast<int64_t>((r.next_attempt_at - now) * 1000) + 1));
      }
    }
    return wait;
  }

  // Whether Schedule could still start something (or a retry is pending).
  // ready_ holds, after Schedule, only steps that could start (or sweeps
  // that could start trials).
  bool Startable() const {
    if (!pending_handlers_.empty()) return true;
    return !stop_new_ && !ready_.empty();
  }

  void Observe() {
    if (running_.empty()) return;
    Clock::time_point now = Clock::now();
    if (o_.backend == "slurm" && now - last_poll_ < poll_interval_) {
      ReadAllTrialMetrics();
      return;
    }
    last_poll_ = now;
    std::vector<std::string> ids;
    for (const auto& [id, u] : running_) ids.push_back(id);
    Result<std::map<std::string, Observed>> seen = backend_->Poll(ids);
    if (!seen.ok()) {
      // Transient (sacct timed out, the controller restarting): never read as
      // a failed job; try again next turn.
      Emit("", StepState::kRunning,
           "cannot read job states (" + seen.status().message() + "); trying again");
      poll_interval_ = std::min(poll_max_, poll_interval_ * 2);
      return;
    }
    bool changed = false;
    for (const auto& [id, o] : *seen) {
      auto it = running_.find(id);
      if (it == running_.end()) continue;
      Unit u = it->second;
      if (u.trial >= 0) ReadTrialMetrics(u.step, u.trial);
      if (o.state == JobState::kPreempted) {
        if (!preempted_.count(id)) {
          Emit(KeyOf(u), StepState::kRunning, "preempted; Slurm requeued it (" + id + ")");
          preempted_.insert(id);
        }
        continue;
      }
      if (!IsFinal(o.state)) continue;
      running_.erase(it);
      preempted_.erase(id);
      Release(u);
      Finished(u, o);
      changed = true;
    }
    ReadAllTrialMetrics();
    if (changed) {
      poll_interval_ = poll_min_;
    } else {
      poll_interval_ = std::min(poll_max_, poll_interval_ * 3 / 2);
    }
  }

  std::string KeyOf(const Unit& u) const {
    return u.trial < 0 ? u.step : TrialKey(u.step, u.trial);
  }

  // ---------------------------------------------------------------- endings
  void Finished(const Unit& u, const Observed& o) {
    dirty_ = true;
    {
      int attempt = u.trial >= 0 ? rec_.steps.at(u.step).trials[u.trial].attempts
                                 : rec_.steps.at(u.step).attempts;
      Journal("exit", KeyOf(u), attempt, std::to_string(o.exit_code));
    }
    if (u.trial >= 0) return TrialFinished(u, o);
    StepRecord& r = rec_.steps.at(u.step);
    const Step& s = wf_.steps.at(u.step);
    r.finished = UnixNow();
    r.exit_code = o.exit_code;
    if (o.state == JobState::kSucceeded) {
      r.state = StepState::kSucceeded;
      r.reason.clear();
      r.fingerprint = Fingerprint(s);
      Audit(u.step, r);
      Settled(u.step);
      Emit(u.step, r.state,
           "succeeded in " + FormatDuration(std::chrono::milliseconds(
                                 static_cast<int64_t>((r.finished - r.started) * 1000))));
      return;
    }
    if (o.state == JobState::kCancelled && cancelling_) {
      r.state = StepState::kCancelled;
      r.reason = "cancelled";
      Audit(u.step, r);
      Settled(u.step);
      Emit(u.step, r.state, "cancelled");
      return;
    }
    std::string why = o.reason.empty() ? "exit code " + std::to_string(o.exit_code) : o.reason;
    if (o.state == JobState::kLost) {
      why = "lost (" + why + ")";
    }
    if (!cancelling_ && r.attempts <= s.retries.limit && s.retries.Retries(o.exit_code)) {
      auto delay = s.retries.Delay(r.attempts);
      r.state = StepState::kWaiting;
      r.reason = why;
      r.next_attempt_at = UnixNow() + std::chrono::duration<double>(delay).count();
      if (auto i = index_.find(u.step); i != index_.end()) ready_.insert(i->second);
      Emit(u.step, r.state,
           "failed: " + why + "; retry " + std::to_string(r.attempts) + " of " +
               std::to_string(s.retries.limit) + " in " + FormatDuration(delay));
      return;
    }
    r.state = StepState::kFailed;
    r.reason = why;
    Audit(u.step, r);
    Settled(u.step);
    Emit(u.step, r.state, "failed: " + why + " (log: " + LogPath(dir_, u.step) + ")");
    StepFailed(u.step);
  }

  void StepFailed(const std::string& name) {
    const Step& s = wf_.steps.at(name);
    if (s.handler) return;  // a failing handler changes nothing more
    switch (s.on_failure) {
      case FailureMode::kStop:
        if (!stop_new_) Emit(name, StepState::kFailed, "on_failure stop: no new steps start");
        stop_new_ = true;
        break;
      case FailureMode::kContinue:
        break;  // its dependents become upstream_failed, the rest goes on
      case FailureMode::kHandler:
        StartHandler(s.on_failure_handler, name);
        stop_new_ = true;
        break;
    }
  }

  void StartHandler(const std::string& handler, const std::string& failed) {
    StepRecord& r = rec_.steps.at(handler);
    if (r.state == StepState::kRunning) return;
    const StepRecord& f = rec_.steps.at(failed);
    handler_env_[handler] = {{"GANTRY_FAILED_STEP", failed},
                             {"GANTRY_FAILED_EXIT_CODE", std::to_string(f.exit_code)},
                             {"GANTRY_FAILED_LOG", LogPath(dir_, failed)}};
    r = StepRecord{};
    Emit(handler, StepState::kPending, "on_failure handler for " + failed);
    if (!Start(handler, -1, true)) {
      // Resources: start it as soon as they free up, whatever stop says.
      pending_handlers_.insert(handler);
    }
  }

  // ---------------------------------------------------------------- schedule
  enum class NeedState { kDone, kWaiting, kFailed };

  NeedState NeedsState(size_t i) const {
    NeedState out = NeedState::kDone;
    for (size_t m : needs_[i]) {
      StepState st = recs_[m]->state;
      if (st == StepState::kFailed || st == StepState::kCancelled ||
          st == StepState::kUpstreamFailed) {
        return NeedState::kFailed;
      }
      if (!IsDone(st)) out = NeedState::kWaiting;
    }
    return out;
  }

  void Schedule() {
    for (auto it = pending_handlers_.begin(); it != pending_handlers_.end();) {
      if (Start(*it, -1, true)) {
        it = pending_handlers_.erase(it);
      } else {
        ++it;
      }
    }
    double now = UnixNow();
    for (auto it = ready_.begin(); it != ready_.end();) {
      size_t i = *it;
      bool keep = ScheduleOne(i, now);
      it = keep ? std::next(it) : ready_.erase(it);
    }
  }

  // Examines one step of ready_; returns whether it stays there (it could
  // start later: resources, a retry's backoff, a sweep with trials to go).
  bool ScheduleOne(size_t i, double now) {
    const std::string& name = wf_.order[i];
    StepRecord& r = *recs_[i];
    const Step& s = *steps_[i];
    bool sweeping = r.state == StepState::kRunning && s.sweep;
    if (r.state != StepState::kPending && r.state != StepState::kWaiting && !sweeping) {
      return false;
    }
    NeedState needs = NeedsState(i);
    if (needs == NeedState::kFailed && !sweeping) {
      r.state = StepState::kUpstreamFailed;
      r.reason = "a step it needs failed";
      dirty_ = true;
      Emit(name, r.state, "not run: a step it needs failed");
      Settled(name);
      return false;
    }
    if (needs != NeedState::kDone) return false;  // back when a need settles
    if (s.sweep) {
      ScheduleSweep(name);
      return r.state == StepState::kRunning || r.state == StepState::kPending;
    }
    if (stop_new_) return true;
    if (r.state == StepState::kWaiting && now < r.next_attempt_at) return true;
    if (r.attempts == 0 && !o_.force && !checked_[i]) {
      checked_[i] = 1;
      std::string fp = Fingerprint(s);
      std::optional<std::string> why = WhyRun(s, fp, r.fingerprint);
      if (!why) {
        r.state = StepState::kSkipped;
        r.reason = "up to date";
        r.fingerprint = fp;
        dirty_ = true;
        Emit(name, r.state, "up to date: skipped");
        Settled(name);
        return false;
      }
    }
    Start(name, -1, false);
    return r.state == StepState::kPending || r.state == StepState::kWaiting;
  }

  // Whether `res` fits now; sets *never when it can never fit on this node.
  bool Fits(const Resources& res, std::string* never) const {
    if (o_.backend != "local") return true;
    if (res.gpus > node_gpus_) {
      *never = "needs " + Plural(res.gpus, "GPU", "GPUs") + ", this node has " +
               std::to_string(node_gpus_) + " (set --gpus, or lower resources.gpus)";
      return false;
    }
    if (res.cpus > node_cpus_ + 1e-9) {
      *never = "needs " + FormatNumber(res.cpus) + " CPUs, this node has " +
               FormatNumber(node_cpus_) + " (set --cpus, or lower resources.cpus)";
      return false;
    }
    if (res.memory_bytes > node_memory_) {
      *never = "needs " + FormatSize(res.memory_bytes) + " of memory, this node has " +
               FormatSize(node_memory_);
      return false;
    }
    return static_cast<int>(free_gpus_.size()) >= res.gpus && res.cpus <= free_cpus_ + 1e-9 &&
           res.memory_bytes <= free_memory_;
  }

  static std::string FormatNumber(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }

  Unit Allocate(const std::string& step, int trial, const Resources& res) {
    Unit u{step, trial, {}, 0, 0, o_.backend == "local"};
    if (!u.counted) return u;
    for (int i = 0; i < res.gpus; ++i) {
      u.gpus.push_back(*free_gpus_.begin());
      free_gpus_.erase(free_gpus_.begin());
    }
    u.cpus = res.cpus;
    u.memory = res.memory_bytes;
    free_cpus_ -= u.cpus;
    free_memory_ -= u.memory;
    return u;
  }

  void Release(const Unit& u) {
    if (!u.counted) return;
    free_gpus_.insert(u.gpus.begin(), u.gpus.end());
    free_cpus_ += u.cpus;
    free_memory_ += u.memory;
  }

  std::map<std::string, std::string> Vars(const std::string& step, const TrialRecord* t) const {
    std::map<std::string, std::string> v = {{"run.id", rec_.run_id}, {"workflow.dir", wf_.dir}};
    if (t) {
      v["trial.index"] = std::to_string(t->index);
      v["trial.dir"] = t->dir;
      for (const auto& [name, value] : t->params) v["search_space." + name] = ParamText(value);
    }
    // Results of finished sweeps this step needs.
    for (const std::string& m : wf_.steps.at(step).needs) {
      const StepRecord& r = rec_.steps.at(m);
      if (!r.best_trial || *r.best_trial < 0 ||
          *r.best_trial >= static_cast<int>(r.trials.size())) {
        continue;
      }
      const TrialRecord& b = r.trials[*r.best_trial];
      v["steps." + m + ".best.dir"] = b.dir;
      v["steps." + m + ".best.index"] = std::to_string(b.index);
      if (b.last_value) v["steps." + m + ".best.metric"] = ParamText(Json(*b.last_value));
      for (const auto& [name, value] : b.params) {
        v["steps." + m + ".best.params." + name] = ParamText(value);
      }
    }
    return v;
  }

  // Builds the launch of a step or trial attempt; InvalidArgument for a bad
  // substitution.
  Result<Launch> MakeLaunch(const std::string& name, TrialRecord* t, const Unit& u, int attempt,
                            bool resume_trial) {
    const Step& s = wf_.steps.at(name);
    std::string key = t ? TrialKey(name, t->index) : name;
    std::map<std::string, std::string> vars = Vars(name, t);
    Launch l;
    l.key = key;
    l.run_id = rec_.run_id;
    l.workdir = s.workdir;
    l.resources = s.resources;
    l.attempt = attempt;
    l.kill_grace = s.kill_grace;
    l.timeout = s.timeout;
    if (t && s.sweep->trial_timeout.count() > 0) {
      l.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(s.sweep->trial_timeout);
    }
    std::vector<std::string> argv;
    if (!s.shell.empty()) {
      ASSIGN_OR_RETURN(std::string cmd, Substitute(s.shell, vars, s.position));
      argv = {"/bin/sh", "-c", cmd};
    } else {
      for (const std::string& a : s.argv) {
        ASSIGN_OR_RETURN(std::string v, Substitute(a, vars, s.position));
        argv.push_back(std::move(v));
      }
    }
    for (const auto& [k, v] : s.env) {
      ASSIGN_OR_RETURN(l.env[k], Substitute(v, vars, s.position));
    }
    if (!s.image.empty()) {
      // The container sees the workdir at the same path, so relative paths
      // and outputs behave as on the host.
      std::vector<std::string> c = {wf_.container_runtime,       "run", "--rm",   "-v",
                                    s.workdir + ":" + s.workdir, "-w",  s.workdir};
      for (const auto& [k, v] : l.env) {
        c.push_back("-e");
        c.push_back(k + "=" + v);
      }
      if (!u.gpus.empty()) {
        std::vector<std::string> ids;
        for (int g : u.gpus) ids.push_back(std::to_string(g));
        c.push_back("--gpus");
        c.push_back("\"device=" + Join(ids, ",") + "\"");
      }
      c.push_back(s.image);
      c.insert(c.end(), argv.begin(), argv.end());
      argv = std::move(c);
    }
    l.argv = std::move(argv);
    l.env["GANTRY_JOBS_RUN_ID"] = rec_.run_id;
    l.env["GANTRY_STEP"] = name;
    l.env["GANTRY_ATTEMPT"] = std::to_string(attempt);
    if (o_.backend == "local" && node_gpus_ > 0) {
      std::vector<std::string> ids;
      for (int g : u.gpus) ids.push_back(std::to_string(g));
      l.env["CUDA_VISIBLE_DEVICES"] = Join(ids, ",");
    }
    if (t) {
      l.env["GANTRY_TRIAL_INDEX"] = std::to_string(t->index);
      l.env["GANTRY_TRIAL_DIR"] = t->dir;
      l.env["GANTRY_METRICS_FILE"] = (fs::path(t->dir) / "metrics.txt").string();
      l.env["GANTRY_CKPT_DIR"] = (fs::path(t->dir) / "ckpt").string();
      for (const auto& [pname, value] : t->params) {
        l.env["GANTRY_PARAM_" + AsciiUpper(pname)] = ParamText(value);
      }
      if (resume_trial) l.env["GANTRY_TRIAL_RESUME"] = "1";
    }
    if (auto h = handler_env_.find(name); h != handler_env_.end()) {
      for (const auto& [k, v] : h->second) l.env[k] = v;
    }
    l.log_path = LogPath(dir_, key);
    // Slurm jobs write their exit code into a file of their own (the runner
    // may be gone); local ones go to the journal (Finished).
    if (o_.backend != "local") l.exit_path = ExitPath(key, attempt);
    return l;
  }

  // Starts one attempt. Returns false when it did not start because the
  // resources are busy (try again later); true when it started or failed for
  // good (bad prerequisite, cannot start, never fits).
  bool Start(const std::string& name, int trial, bool handler) {
    const Step& s = wf_.steps.at(name);
    StepRecord& r = rec_.steps.at(name);
    TrialRecord* t = trial >= 0 ? &r.trials[trial] : nullptr;
    std::string key = t ? TrialKey(name, trial) : name;
    std::string never;
    if (!Fits(s.resources, &never)) {
      if (never.empty()) return false;
      FailUnit(name, t, "cannot run here: " + never);
      return true;
    }
    Unit u = Allocate(name, trial, s.resources);
    int attempt = (t ? t->attempts : r.attempts) + 1;
    bool resume_trial = t && (t->attempts > 0 || t->reports > 0);
    std::error_code ec;
    fs::create_directories(fs::path(LogPath(dir_, key)).parent_path(), ec);
    if (t) fs::create_directories(t->dir, ec);
    Result<Launch> l = MakeLaunch(name, t, u, attempt, resume_trial);
    if (!l.ok()) {
      Release(u);
      FailUnit(name, t, l.status().message());
      return true;
    }
    if (!s.prereqs.empty()) {
      PrereqContext ctx{s.workdir, s.image, u.gpus, o_.nvml_library};
      std::vector<PrereqResult> results = TrialPrereqs(name, t != nullptr, s.prereqs, ctx);
      r.prereq = ToJson(results);
      std::string failed = FailureSummary(results);
      if (!failed.empty()) {
        Release(u);
        FailUnit(name, t, "prerequisite failed: " + failed);
        return true;
      }
    }
    if (!l->exit_path.empty()) ::unlink(l->exit_path.c_str());
    Result<std::string> id = backend_->Submit(*l);
    if (!id.ok()) {
      Release(u);
      FailUnit(name, t, id.status().message());
      return true;
    }
    running_[*id] = u;
    Journal("job", key, attempt, *id);
    double now = UnixNow();
    if (t) {
      t->attempts = attempt;
      t->job_id = *id;
      t->state = StepState::kRunning;
      if (t->started == 0) t->started = now;
    } else {
      r.attempts = attempt;
      r.job_id = *id;
      r.state = StepState::kRunning;
      r.started = now;
      r.reason.clear();
    }
    dirty_ = true;
    // A Slurm job id must be on disk before anything else can go wrong, so a
    // restarted runner follows the job instead of submitting it twice.
    if (o_.backend == "slurm") MaybeWriteState(true);
    std::string gpus;
    if (!u.gpus.empty()) {
      std::vector<std::string> ids;
      for (int g : u.gpus) ids.push_back(std::to_string(g));
      gpus = ", GPUs " + Join(ids, ",");
    }
    Emit(key, StepState::kRunning,
         std::string(handler ? "handler " : "") + "started (attempt " + std::to_string(attempt) +
             (resume_trial ? ", resuming" : "") + gpus + ", " + *id + ")");
    return true;
  }

  void FailUnit(const std::string& name, TrialRecord* t, const std::string& why) {
    dirty_ = true;
    StepRecord& r = rec_.steps.at(name);
    if (t) {
      t->state = StepState::kFailed;
      t->finished = UnixNow();
      Emit(TrialKey(name, t->index), StepState::kFailed, why);
      trial_failure_ = why;
      return;
    }
    r.state = StepState::kFailed;
    r.reason = why;
    r.finished = UnixNow();
    Audit(name, r);
    Settled(name);
    Emit(name, StepState::kFailed, why);
    StepFailed(name);
  }

  // ---------------------------------------------------------------- sweeps
  void ScheduleSweep(const std::string& name) {
    const Step& s = wf_.steps.at(name);
    const SweepSpec& sw = *s.sweep;
    StepRecord& r = rec_.steps.at(name);
    if (r.trials.empty() && r.state != StepState::kRunning) {
      if (stop_new_) return;
      Result<std::vector<ParamValues>> plan = PlanTrials(sw);
      if (!plan.ok()) {
        FailUnit(name, nullptr, plan.status().message());
        return;
      }
      for (size_t i = 0; i < plan->size(); ++i) {
        TrialRecord t;
        t.index = static_cast<int>(i);
        t.params = (*plan)[i];
        t.dir = (fs::path(dir_) / "trials" / name / TrialKey("", t.index).substr(1)).string();
        r.trials.push_back(std::move(t));
      }
      r.state = StepState::kRunning;
      r.started = UnixNow();
      r.attempts = 1;
      dirty_ = true;
      Emit(name, StepState::kRunning,
           "sweep of " + Plural(static_cast<int64_t>(r.trials.size()), "trial", "trials") + " on " +
               sw.primary_metric + " (" + (sw.goal == Goal::kMaximize ? "maximize" : "minimize") +
               ")");
    }
    EarlyTermination* policy = Policy(name);
    if (!policy) return;
    int limit = sw.max_concurrent_trials > 0 ? sw.max_concurrent_trials : sw.max_total_trials;
    int running = 0;
    for (const TrialRecord& t : r.trials) running += t.state == StepState::kRunning;
    double elapsed = UnixNow() - r.started;
    bool timed_out = elapsed > std::chrono::duration<double>(sw.timeout).count();
    if (timed_out && !sweep_timed_out_.count(name)) {
      sweep_timed_out_.insert(name);
      Emit(name, StepState::kRunning,
           "sweep timeout (" + FormatDuration(sw.timeout) + ") reached: cancelling its trials");
      for (TrialRecord& t : r.trials) {
        if (t.state == StepState::kRunning) {
          (void)backend_->Cancel(t.job_id, s.kill_grace);
        } else if (t.state == StepState::kPending || t.state == StepState::kWaiting) {
          t.state = StepState::kCancelled;
          t.finished = UnixNow();
        }
      }
    }
    if (!timed_out && !stop_new_) {
      double now = UnixNow();
      for (TrialRecord& t : r.trials) {
        if (running >= limit) break;
        if (t.state == StepState::kWaiting && now < t.finished + NextRetryDelay(s, t)) continue;
        if (t.state != StepState::kPending && t.state != StepState::kWaiting) continue;
        if (!Start(name, t.index, false)) break;  // resources busy
        if (t.state == StepState::kRunning) ++running;
      }
    }
    // Done when no trial is left to run.
    bool open = std::any_of(r.trials.begin(), r.trials.end(), [](const TrialRecord& t) {
      return t.state == StepState::kPending || t.state == StepState::kWaiting ||
             t.state == StepState::kRunning;
    });
    if (!open) FinishSweep(name);
  }

  double NextRetryDelay(const Step& s, const TrialRecord& t) const {
    return std::chrono::duration<double>(s.retries.Delay(t.attempts)).count();
  }

  EarlyTermination* Policy(const std::string& name) {
    auto it = policies_.find(name);
    if (it != policies_.end()) return it->second.get();
    const SweepSpec& sw = *wf_.steps.at(name).sweep;
    Result<std::unique_ptr<EarlyTermination>> p =
        EarlyTermination::Create(sw.policy, sw.goal, sw.pause_on_prune);
    if (!p.ok()) {
      FailUnit(name, nullptr, p.status().message());
      return nullptr;
    }
    EarlyTermination* raw = p->get();
    policies_[name] = std::move(*p);
    // A resumed sweep replays what its trials reported before.
    StepRecord& r = rec_.steps.at(name);
    for (TrialRecord& t : r.trials) {
      uint64_t offset = t.metrics_offset;
      t.metrics_offset = 0;
      t.reports = 0;
      ReadMetricsFile(name, t, /*decide=*/false);
      t.metrics_offset = std::max(offset, t.metrics_offset);
      if (t.state == StepState::kSucceeded) raw->Complete(t.index);
    }
    return raw;
  }

  // A sweep's trials share their step's prerequisite check: a passing result
  // is reused for kTrialPrereqReuse. This loop is the one that reads running
  // trials' metrics, and checking `python:` (importing torch) takes seconds
  // per trial, so early termination would land after the trials it stops had
  // finished. GPU memory depends on the GPUs each trial gets: never reused.
  std::vector<PrereqResult> TrialPrereqs(const std::string& step, bool trial,
                                         const Prerequisites& p, const PrereqContext& ctx) {
    constexpr auto kTrialPrereqReuse = std::chrono::minutes(5);
    const bool reusable = trial && p.gpu_memory_free_bytes == 0;
    auto now = Clock::now();
    if (reusable) {
      auto it = trial_prereqs_.find(step);
      if (it != trial_prereqs_.end() && now - it->second.first < kTrialPrereqReuse) {
        return it->second.second;
      }
    }
    std::vector<PrereqResult> results = prereq_.Check(p, ctx);
    if (reusable && FailureSummary(results).empty()) trial_prereqs_[step] = {now, results};
    return results;
  }

  void ReadAllTrialMetrics() {
    for (const auto& [id, u] : running_) {
      if (u.trial >= 0) ReadTrialMetrics(u.step, u.trial);
    }
  }

  void ReadTrialMetrics(const std::string& step, int trial) {
    StepRecord& r = rec_.steps.at(step);
    if (trial >= static_cast<int>(r.trials.size())) return;
    ReadMetricsFile(step, r.trials[trial], /*decide=*/true);
  }

  // Reads the complete lines added to the trial's metrics file and feeds the
  // primary metric to the policy; with `decide`, acts on its decisions.
  void ReadMetricsFile(const std::string& step, TrialRecord& t, bool decide) {
    const Step& s = wf_.steps.at(step);
    const SweepSpec& sw = *s.sweep;
    std::string path = (fs::path(t.dir) / "metrics.txt").string();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) <= t.metrics_offset) {
      return;
    }
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(t.metrics_offset));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t end = text.rfind('\n');
    if (end == std::string::npos) return;  // no complete line yet
    t.metrics_offset += end + 1;
    dirty_ = true;
    EarlyTermination* policy = decide ? Policy(step) : policies_[step].get();
    std::istringstream lines(text.substr(0, end + 1));
    std::string line;
    while (std::getline(lines, line)) {
      if (TrimSpace(line).empty()) continue;
      Result<MetricLine> m = ParseMetricLine(line);
      if (!m.ok()) {
        if (decide) {
          Emit(TrialKey(step, t.index), t.state,
               "ignored a metrics line (" + m.status().message() + ")");
        }
        continue;
      }
      for (const auto& [metric, value] : m->values) {
        if (metric != sw.primary_metric) continue;
        ++t.reports;
        int64_t at = m->step ? *m->step : t.reports;
        t.last_step = at;
        t.last_value = value;
        bool better = !t.best_value ||
                      (sw.goal == Goal::kMaximize ? value > *t.best_value : value < *t.best_value);
        if (!std::isnan(value) && better) t.best_value = value;
        // A trial being stopped may still report before the signal lands;
        // the policy decided on it already.
        if (!policy || (decide && t.pruned)) continue;
        Decision d = policy->Report(t.index, at, value);
        if (!decide || d == Decision::kContinue || t.pruned || t.state != StepState::kRunning) {
          continue;
        }
        // ASHA's max_t is the end of a trial's budget, not a verdict on it
        // (Ray ends such trials as completed): the trial finishes on its own
        // and counts for the best.
        if (sw.policy.kind == PolicyKind::kAsha && d == Decision::kStop && at >= sw.policy.max_t) {
          continue;
        }
        t.pruned = true;
        t.paused = d == Decision::kPause;
        t.pruned_at = at;
        Emit(TrialKey(step, t.index), StepState::kRunning,
             std::string(t.paused ? "paused" : "stopped") + " by " + PolicyName(sw.policy.kind) +
                 " at step " + std::to_string(at) + " (" + sw.primary_metric + " " + Short(value) +
                 ")");
        (void)backend_->Cancel(t.job_id, s.kill_grace);
      }
    }
    if (decide && policy) {
      for (int promoted : policy->TakePromotions()) {
        StepRecord& r = rec_.steps.at(step);
        if (promoted < 0 || promoted >= static_cast<int>(r.trials.size())) continue;
        TrialRecord& p = r.trials[promoted];
        if (!p.paused) continue;
        p.paused = false;
        p.pruned = false;
        if (p.state != StepState::kRunning)
          p.state = StepState::kPending;
        else
          promote_after_stop_.insert(TrialKey(step, promoted));
        Emit(TrialKey(step, promoted), StepState::kPending,
             "promoted by ASHA: resumes from its latest checkpoint");
      }
    }
  }

  // A metric value for messages: six significant digits.
  static std::string Short(double v) { return fmt::format("{:.6g}", v); }

  static std::string PolicyName(PolicyKind k) {
    switch (k) {
      case PolicyKind::kNone:
        return "no policy";
      case PolicyKind::kBandit:
        return "bandit";
      case PolicyKind::kMedian:
        return "median stopping";
      case PolicyKind::kTruncation:
        return "truncation selection";
      case PolicyKind::kAsha:
        return "ASHA";
      case PolicyKind::kOptunaMedian:
        return "median pruner";
      case PolicyKind::kOptunaPercentile:
        return "percentile pruner";
    }
    return "policy";
  }

  void TrialFinished(const Unit& u, const Observed& o) {
    const Step& s = wf_.steps.at(u.step);
    StepRecord& r = rec_.steps.at(u.step);
    TrialRecord& t = r.trials[u.trial];
    std::string key = TrialKey(u.step, u.trial);
    t.exit_code = o.exit_code;
    t.finished = UnixNow();
    if (promote_after_stop_.erase(key)) {
      t.state = StepState::kPending;  // promoted while it was stopping
      return;
    }
    if (t.pruned) {
      t.state = StepState::kCancelled;
      return;
    }
    if (o.state == JobState::kSucceeded) {
      t.state = StepState::kSucceeded;
      if (EarlyTermination* p = Policy(u.step)) p->Complete(u.trial);
      Emit(key, t.state,
           "completed" +
               (t.last_value ? ", " + s.sweep->primary_metric + " " + ParamText(Json(*t.last_value))
                             : std::string(", no ") + s.sweep->primary_metric + " reported"));
      return;
    }
    if (o.state == JobState::kCancelled && (cancelling_ || sweep_timed_out_.count(u.step))) {
      t.state = StepState::kCancelled;
      return;
    }
    std::string why = o.reason.empty() ? "exit code " + std::to_string(o.exit_code) : o.reason;
    if (!cancelling_ && t.attempts <= s.retries.limit && s.retries.Retries(o.exit_code)) {
      t.state = StepState::kWaiting;
      Emit(key, t.state,
           "failed: " + why + "; retry " + std::to_string(t.attempts) + " of " +
               std::to_string(s.retries.limit));
      return;
    }
    t.state = StepState::kFailed;
    trial_failure_ = why;
    Emit(key, t.state, "failed: " + why + " (log: " + LogPath(dir_, key) + ")");
  }

  void FinishSweep(const std::string& name) {
    FinishSweepRecord(name);
    if (IsTerminal(rec_.steps.at(name).state)) Settled(name);
  }

  void FinishSweepRecord(const std::string& name) {
    const Step& s = wf_.steps.at(name);
    const SweepSpec& sw = *s.sweep;
    StepRecord& r = rec_.steps.at(name);
    if (IsTerminal(r.state)) return;
    int completed = 0, failed = 0, pruned = 0, cancelled = 0;
    std::optional<int> best;
    for (const TrialRecord& t : r.trials) {
      if (t.state == StepState::kSucceeded) {
        ++completed;
        if (!t.last_value || std::isnan(*t.last_value)) continue;
        if (!best || (sw.goal == Goal::kMaximize ? *t.last_value > *r.trials[*best].last_value
                                                 : *t.last_value < *r.trials[*best].last_value)) {
          best = t.index;
        }
      } else if (t.state == StepState::kFailed) {
        ++failed;
      } else if (t.pruned) {
        ++pruned;
      } else {
        ++cancelled;
      }
    }
    r.finished = UnixNow();
    r.best_trial = best;
    dirty_ = true;
    std::string counts = std::to_string(completed) + " completed, " + std::to_string(pruned) +
                         " stopped early, " + std::to_string(failed) + " failed, " +
                         std::to_string(cancelled) + " cancelled";
    if (cancelling_) {
      r.state = StepState::kCancelled;
      r.reason = "cancelled (" + counts + ")";
      Emit(name, r.state, r.reason);
      return;
    }
    if (!best) {
      r.state = StepState::kFailed;
      r.reason = "no trial completed with a " + sw.primary_metric + " value (" + counts + ")" +
                 (trial_failure_.empty() ? "" : "; last failure: " + trial_failure_);
      r.exit_code = 1;
      Audit(name, r);
      Emit(name, r.state, r.reason);
      StepFailed(name);
      return;
    }
    const TrialRecord& b = r.trials[*best];
    Status written = WriteBest(name, b);
    if (written.ok() && sw.register_best) written = RegisterBest(name, b);
    if (!written.ok()) {
      r.state = StepState::kFailed;
      r.reason = written.message();
      r.exit_code = 1;
      Audit(name, r);
      Emit(name, r.state, r.reason);
      StepFailed(name);
      return;
    }
    r.state = StepState::kSucceeded;
    r.exit_code = 0;
    r.fingerprint = Fingerprint(s);
    r.reason = counts;
    Audit(name, r);
    std::string params;
    for (const auto& [p, v] : b.params)
      params += (params.empty() ? "" : " ") + p + "=" + ParamText(v);
    Emit(name, r.state,
         "sweep done (" + counts + "); best trial " + std::to_string(b.index) + ": " +
             sw.primary_metric + " " + Short(*b.last_value) + " with " + params);
  }

  Json BestJson(const std::string& name, const TrialRecord& b) const {
    const SweepSpec& sw = *wf_.steps.at(name).sweep;
    Json params = Json::object();
    for (const auto& [p, v] : b.params) params[p] = v;
    return {{"step", name},
            {"run_id", rec_.run_id},
            {"trial", b.index},
            {"dir", b.dir},
            {"primary_metric", sw.primary_metric},
            {"goal", sw.goal == Goal::kMaximize ? "maximize" : "minimize"},
            {"value", *b.last_value},
            {"best_value", b.best_value ? Json(*b.best_value) : Json(nullptr)},
            {"params", params}};
  }

  Status WriteBest(const std::string& name, const TrialRecord& b) {
    return WriteFileAtomic((fs::path(dir_) / "trials" / name / "best.json").string(),
                           BestJson(name, b).dump(2) + "\n");
  }

  // The best trial's output as a registry version, its hyper-parameters and
  // metrics as lineage.
  Status RegisterBest(const std::string& name, const TrialRecord& b) {
    const SweepSpec& sw = *wf_.steps.at(name).sweep;
    const RegisterSpec& rs = *sw.register_best;
    fs::path root = fs::path(rs.registry).is_absolute() ? fs::path(rs.registry)
                                                        : fs::path(wf_.dir) / rs.registry;
    std::error_code ec;
    fs::create_directories(root, ec);
    registry::OpenOptions oo;
    oo.db = (root / "registry.db").string();
    oo.artifacts = (root / "artifacts").string();
    oo.actor = "gantry-jobs";
    Result<std::unique_ptr<registry::Registry>> reg = registry::OpenRegistry(oo);
    if (!reg.ok())
      return reg.status().WithContext("registering the best trial in " + root.string());
    registry::LocalClient client(std::move(*reg));
    registry::RegisterRequest req;
    req.name = rs.name;
    req.path = (fs::path(b.dir) / rs.path).string();
    req.description = "best trial " + std::to_string(b.index) + " of sweep " + name + " (run " +
                      rec_.run_id + ")";
    req.lineage.source = "jobs:" + wf_.name + "/" + name + "/trial-" + std::to_string(b.index);
    req.lineage.run_id = rec_.run_id;
    Json metrics = Json::object();
    metrics[sw.primary_metric] = *b.last_value;
    for (const auto& [p, v] : b.params) {
      req.tags["param." + p] = ParamText(v);
    }
    req.tags["jobs.workflow"] = wf_.name;
    req.tags["jobs.step"] = name;
    req.lineage.metrics = metrics;
    Result<registry::ModelVersion> v = client.Register(req);
    if (!v.ok()) return v.status().WithContext("registering the best trial as " + rs.name);
    Emit(name, StepState::kRunning,
         "registered the best trial as " + v->model + "/" + std::to_string(v->version));
    return Status();
  }

  // ---------------------------------------------------------------- cancel, finish
  void CancelAll() {
    cancelling_ = true;
    dirty_ = true;
    Emit("", StepState::kCancelled, "cancelling the run");
    for (const auto& [id, u] : running_) {
      (void)backend_->Cancel(id, wf_.steps.at(u.step).kill_grace);
    }
  }

  void Finish() {
    bool failed = false, cancelled = cancelling_, unfinished = false;
    for (auto& [name, r] : rec_.steps) {
      if (!selected_.count(name)) continue;
      if (r.state == StepState::kFailed || r.state == StepState::kUpstreamFailed) failed = true;
      if (r.state == StepState::kPending || r.state == StepState::kWaiting) {
        if (cancelling_) {
          r.state = StepState::kCancelled;
          r.reason = "cancelled before it started";
        } else {
          r.reason = "not started: the run stopped after a failure (on_failure: stop)";
          unfinished = true;
        }
      }
      if (r.state == StepState::kRunning) {
        // A sweep whose remaining trials were never started (stop, or a full disk).
        for (TrialRecord& t : r.trials) {
          if (cancelling_ && (t.state == StepState::kPending || t.state == StepState::kWaiting)) {
            t.state = StepState::kCancelled;
          }
        }
        r.state = cancelling_ ? StepState::kCancelled : StepState::kPending;
        r.reason = cancelling_ ? "cancelled" : "not finished: resume continues its sweep";
        unfinished = !cancelling_;
      }
      if (r.state == StepState::kCancelled) cancelled = true;
    }
    rec_.state = cancelling_  ? "cancelled"
                 : failed     ? "failed"
                 : cancelled  ? "cancelled"
                 : unfinished ? "failed"
                              : "succeeded";
    rec_.finished = UnixNow();
    rec_.runner_pid = 0;
    MaybeWriteState(true);
    if (audit_) {
      Status closed = audit_->Close();
      if (!closed.ok()) Emit("", StepState::kFailed, "audit log: " + closed.message());
    }
    Emit("", StepState::kSucceeded, "run " + rec_.run_id + " " + rec_.state);
  }

  // ---------------------------------------------------------------- records
  void MaybeWriteState(bool now) {
    if (!dirty_ && !now) return;
    Clock::time_point t = Clock::now();
    if (!now && t - last_write_ < o_.state_write_interval) return;
    Status s = WriteState(dir_, rec_);
    last_write_ = t;
    if (!s.ok()) {
      // A full disk: what is recorded stays as it was; start nothing more
      // and say so once.
      if (!state_error_) {
        Emit("", StepState::kFailed, s.message() + ": no new steps start until it can be written");
      }
      state_error_ = true;
      stop_new_ = true;
      return;
    }
    dirty_ = false;
    if (!o_.metrics_textfile.empty()) {
      Status m = WriteMetricsTextfile(o_.metrics_textfile, wf_, rec_);
      if (!m.ok() && !metrics_error_) {
        Emit("", StepState::kRunning, m.message());
        metrics_error_ = true;
      }
    }
  }

  void Audit(const std::string& name, const StepRecord& r) {
    if (!audit_) return;
    Json j = {{"time", FormatUtc(std::chrono::system_clock::now(), "%Y-%m-%dT%H:%M:%SZ")},
              {"type", "jobs.step"},
              {"workflow", wf_.name},
              {"workflow_digest", wf_.digest},
              {"run_id", rec_.run_id},
              {"step", name},
              {"state", StepStateName(r.state)},
              {"attempts", r.attempts},
              {"exit_code", r.exit_code},
              {"job_id", r.job_id},
              {"duration_s", r.finished > r.started ? r.finished - r.started : 0},
              {"reason", r.reason}};
    audit_->Append(j.dump(-1, ' ', true, Json::error_handler_t::replace));
  }

  void Emit(const std::string& key, StepState state, const std::string& message) {
    if (o_.on_event) o_.on_event(RunEvent{key, state, message});
  }

  const Workflow& wf_;
  const RunOptions& o_;
  std::unique_ptr<Backend> backend_;
  std::string dir_;
  int lock_fd_ = -1;
  int journal_fd_ = -1;
  std::map<std::string, std::pair<int, std::string>> journal_jobs_;  // "run key" -> attempt, id
  std::map<std::string, std::string> journal_exits_;  // "run key attempt" -> exit code
  RunRecord rec_;
  std::set<std::string> selected_;
  // The scheduler's view (Index()): by position in wf_.order.
  std::vector<const Step*> steps_;
  std::vector<StepRecord*> recs_;
  std::vector<std::vector<size_t>> needs_, dependents_;
  std::vector<char> checked_;  // the up-to-date check ran
  std::map<std::string, size_t> index_;
  std::set<size_t> ready_;  // steps to examine: their needs settled, or they could start
  std::map<std::string, Unit> running_;
  std::vector<std::pair<Unit, Observed>> recovered_;
  std::set<std::string> preempted_;
  std::map<std::string, std::unique_ptr<EarlyTermination>> policies_;
  std::set<std::string> sweep_timed_out_;
  std::set<std::string> promote_after_stop_;
  std::set<std::string> pending_handlers_;
  std::map<std::string, std::map<std::string, std::string>> handler_env_;
  std::string trial_failure_;
  PrereqChecker prereq_;
  std::map<std::string, std::pair<Clock::time_point, std::vector<PrereqResult>>> trial_prereqs_;
  std::unique_ptr<security::AuditLog> audit_;
  int node_gpus_ = 0;
  std::set<int> free_gpus_;
  double node_cpus_ = 1, free_cpus_ = 1;
  uint64_t node_memory_ = 0, free_memory_ = 0;
  bool stop_new_ = false, cancelling_ = false, dirty_ = false;
  bool state_error_ = false, metrics_error_ = false;
  Clock::time_point last_write_{};
  Clock::time_point last_poll_{};
  std::chrono::milliseconds poll_interval_{0}, poll_min_{0}, poll_max_{0};
  std::chrono::milliseconds s_grace_{5000};
};

}  // namespace

std::string LogPath(const std::string& state_dir, const std::string& key) {
  return (fs::path(state_dir) / "logs" / (key + ".log")).string();
}

Result<RunRecord> RunWorkflow(const Workflow& wf, const RunOptions& options) {
  Runner runner(wf, options);
  return runner.Run();
}

int64_t ActiveRunner(const std::string& state_dir) {
  std::string path = (fs::path(state_dir) / "lock").string();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int64_t pid = 0;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    if (n > 0)
      pid = ParseInt("pid", TrimSpace(std::string_view(buf, static_cast<size_t>(n)))).value_or(0);
    if (pid == 0) pid = -1;  // held, pid not yet written
  }
  ::close(fd);
  return pid;
}

Result<std::string> CancelRun(const std::string& state_dir, const SlurmOptions& slurm,
                              std::chrono::milliseconds grace) {
  ASSIGN_OR_RETURN(RunRecord rec, ReadState(state_dir));
  int64_t pid = ActiveRunner(state_dir);
  if (pid > 0) {
    if (::kill(static_cast<pid_t>(pid), SIGTERM) != 0) {
      return IoError("cannot signal the runner (pid " + std::to_string(pid) + ")", errno);
    }
    return "asked the runner (pid " + std::to_string(pid) + ") of run " + rec.run_id +
           " to cancel its jobs";
  }
  if (rec.state != "running") {
    return "run " + rec.run_id + " is not running (" + rec.state + "): nothing to cancel";
  }
  // The runner is gone: cancel what it left behind and record it.
  std::unique_ptr<Backend> slurm_backend;
  int n = 0;
  auto cancel = [&](std::string& id, StepState& st) {
    if (st != StepState::kRunning && st != StepState::kPending && st != StepState::kWaiting) {
      return;
    }
    if (st == StepState::kRunning && !id.empty()) {
      if (id.rfind("slurm:", 0) == 0) {
        if (!slurm_backend) {
          slurm_backend = SlurmBackend(slurm);
        }
        (void)slurm_backend->Cancel(id, grace);
      } else {
        KillStrayLocalJob(id, grace);
      }
      ++n;
    }
    st = StepState::kCancelled;
  };
  for (auto& [name, r] : rec.steps) {
    cancel(r.job_id, r.state);
    for (TrialRecord& t : r.trials) cancel(t.job_id, t.state);
  }
  rec.state = "cancelled";
  rec.finished = UnixNow();
  RETURN_IF_ERROR(WriteState(state_dir, rec));
  return "run " + rec.run_id + " had no live runner: cancelled " + Plural(n, "job", "jobs") +
         " it left and recorded the run as cancelled";
}

}  // namespace gantry::jobs
