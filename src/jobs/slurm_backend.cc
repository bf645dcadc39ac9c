// The Slurm backend: each attempt is one `sbatch` job running a generated
// batch script (slurm_parse.h) that records its exit code in a file; Poll asks
// sacct once for every id and squeue for what sacct does not list (accounting
// disabled, or slurmdbd behind), then the exit files.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"
#include "gantry/jobs/backend.h"
#include "slurm_parse.h"

namespace gantry::jobs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr std::string_view kIdPrefix = "slurm:";
// sbatch is retried this many times after a transient error, waiting
// kSubmitBackoff, then twice that, ... (the controller may be restarting).
constexpr int kSubmitRetries = 3;
constexpr milliseconds kSubmitBackoff{500};

// "slurm:123" -> "123"; "" for an id this backend did not make.
std::string SlurmJobId(const std::string& id) {
  if (id.compare(0, kIdPrefix.size(), kIdPrefix) != 0) return "";
  std::string job = id.substr(kIdPrefix.size());
  if (job.empty() || job.front() < '0' || job.front() > '9') return "";
  for (char c : job) {
    if (!((c >= '0' && c <= '9') || c == '_')) return "";
  }
  return job;
}

std::string FirstLines(const std::string& text) {
  std::string t(TrimSpace(text));
  if (t.size() > 2000) t = t.substr(0, 2000) + "...";
  return t.empty() ? "(no output)" : t;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return IoError("cannot write the batch script " + path, errno);
  out << text;
  out.close();
  if (!out) return IoError("cannot write the batch script " + path, errno);
  return Status();
}

class SlurmBackend final : public Backend {
 public:
  explicit SlurmBackend(const SlurmOptions& options)
      : options_(options), interval_(options.poll_min) {}

  std::string_view name() const override { return "slurm"; }
  bool Adopts() const override { return true; }

  Result<std::string> Submit(const Launch& launch) override;
  Result<std::map<std::string, Observed>> Poll(const std::vector<std::string>& ids) override;
  Status Cancel(const std::string& id, milliseconds grace) override;
  void Wait(milliseconds max) override;
  void Reattach(const std::string& id, const Launch& launch) override {
    std::string job = SlurmJobId(id);
    if (job.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[job].exit_path = launch.exit_path;
  }

 private:
  // What this process knows about a job beyond what Slurm says.
  struct Job {
    std::string exit_path;
    bool cancelled = false;
    std::optional<Clock::time_point> kill_at;        // plain scancel due then
    std::optional<Clock::time_point> missing_since;  // no record and no exit file
    std::optional<JobState> last;                    // as last reported
  };

  Result<SubprocessResult> Run(const std::vector<std::string>& argv) {
    return RunSubprocess(argv, options_.command_timeout);
  }
  // Records keyed by job id and by raw id, from sacct (unless accounting is
  // off) and then squeue for the ids sacct did not list.
  Result<std::map<std::string, slurm::SlurmRecord>> Query(const std::vector<std::string>& jobs);
  Observed Observe(const std::string& job, const slurm::SlurmRecord* record, Job& info);
  // Sends the plain scancel of every Cancel whose grace is over. Needs mu_.
  void SendDueKills();

  const SlurmOptions options_;
  std::mutex mu_;
  std::map<std::string, Job> jobs_;  // by Slurm job id
  bool accounting_disabled_ = false;
  milliseconds interval_;
};

Result<std::string> SlurmBackend::Submit(const Launch& launch) {
  if (launch.log_path.empty()) {
    return InvalidArgument("step " + launch.key + ": no log path; the Slurm backend needs one");
  }
  ASSIGN_OR_RETURN(std::string script, slurm::BatchScript(launch));
  const std::string script_path = slurm::ScriptPath(launch);
  ASSIGN_OR_RETURN(std::vector<std::string> argv,
                   slurm::SbatchArgs(launch, options_.sbatch, script_path, options_.requeue));
  // A code left by an earlier attempt must not be read as this one's.
  if (!launch.exit_path.empty()) ::unlink(launch.exit_path.c_str());
  RETURN_IF_ERROR(WriteFile(script_path, script).WithContext("step " + launch.key));

  milliseconds backoff = kSubmitBackoff;
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(SubprocessResult r, Run(argv));
    if (r.exit_code == 0) {
      Result<std::string> job = slurm::ParseSbatchJobId(r.out);
      if (!job.ok()) return Unavailable(job.status().message() + "; command: " + JoinArgv(argv));
      std::lock_guard<std::mutex> lock(mu_);
      Job& info = jobs_[*job];
      info = Job{};
      info.exit_path = launch.exit_path;
      return std::string(kIdPrefix) + *job;
    }
    if (attempt >= kSubmitRetries || !slurm::IsTransientSlurmError(r.err)) {
      return Unavailable("step " + launch.key + ": sbatch exited with " +
                         std::to_string(r.exit_code) +
                         (attempt > 0 ? " (after " + std::to_string(attempt + 1) + " tries)" : "") +
                         ": " + FirstLines(r.err + r.out) + "; command: " + JoinArgv(argv));
    }
    std::this_thread::sleep_for(backoff);
    backoff *= 2;
  }
}

Result<std::map<std::string, slurm::SlurmRecord>> SlurmBackend::Query(
    const std::vector<std::string>& jobs) {
  std::map<std::string, slurm::SlurmRecord> found;
  auto add = [&](std::vector<slurm::SlurmRecord> records) {
    for (slurm::SlurmRecord& r : records) {
      if (!r.raw_id.empty() && r.raw_id != r.job_id) found[r.raw_id] = r;
      found[r.job_id] = std::move(r);
    }
  };
  const std::string list = Join(jobs, ",");
  std::string sacct_error;
  bool sacct_answered = false;
  if (!accounting_disabled_) {
    std::vector<std::string> argv = {options_.sacct, "-X", "--parsable2", "--noheader",
                                     "--format=" + std::string(slurm::kSacctFormat)};
    if (options_.since.time_since_epoch().count() != 0) {
      argv.push_back("--starttime");
      argv.push_back(slurm::SacctTime(options_.since));
    }
    argv.push_back("-j");
    argv.push_back(list);
    Result<SubprocessResult> r = Run(argv);
    if (r.ok() && r->exit_code == 0) {
      sacct_answered = true;
      add(slurm::ParseSacct(r->out));
    } else if (r.ok() && slurm::IsAccountingDisabled(r->err)) {
      // Asked once: without a database sacct never answers on this cluster.
      accounting_disabled_ = true;
    } else {
      sacct_error = r.ok() ? "exited with " + std::to_string(r->exit_code) + ": " +
                                 FirstLines(r->err + r->out)
                           : r.status().message();
    }
  }
  std::vector<std::string> missing;
  for (const std::string& j : jobs) {
    if (!found.count(j)) missing.push_back(j);
  }
  if (missing.empty()) return found;
  // Running jobs can be missing from sacct while slurmctld has not yet sent
  // them to slurmdbd; squeue (slurmctld itself) knows them, and finished
  // ones until MinJobAge.
  Result<SubprocessResult> r = Run({options_.squeue, "--noheader", "-t", "all", "-O",
                                    std::string(slurm::kSqueueFormat), "-j", Join(missing, ",")});
  if (r.ok() && r->exit_code == 0) {
    add(slurm::ParseSqueue(r->out));
  } else if (r.ok() && slurm::IsInvalidJobId(r->err)) {
    // None of them is in slurmctld's list any more: not an error.
  } else if (!sacct_answered) {
    std::string squeue_error =
        r.ok() ? "exited with " + std::to_string(r->exit_code) + ": " + FirstLines(r->err + r->out)
               : r.status().message();
    return Unavailable("cannot ask Slurm about jobs " + list + ": " +
                       (sacct_error.empty() ? "" : "sacct " + sacct_error + "; ") + "squeue " +
                       squeue_error);
  }
  return found;
}

Observed SlurmBackend::Observe(const std::string& job, const slurm::SlurmRecord* record,
                               Job& info) {
  std::optional<Observed> o = slurm::Combine(record, ReadExitCode(info.exit_path), info.cancelled);
  if (o) {
    info.missing_since.reset();
    return *o;
  }
  const Clock::time_point now = Clock::now();
  if (!info.missing_since) info.missing_since = now;
  const auto missing = std::chrono::duration_cast<std::chrono::seconds>(now - *info.missing_since);
  Observed q;
  if (now - *info.missing_since < options_.lost_after) {
    q.state = JobState::kQueued;
    q.reason = "not listed by Slurm yet";
  } else {
    q.state = JobState::kLost;
    q.reason = "Slurm has not listed job " + job + " for " + std::to_string(missing.count()) +
               " s and it left no exit file" +
               (info.exit_path.empty() ? "" : " (" + info.exit_path + ")");
  }
  return q;
}

Result<std::map<std::string, Observed>> SlurmBackend::Poll(const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, Observed> result;
  std::vector<std::string> jobs;
  for (const std::string& id : ids) {
    std::string job = SlurmJobId(id);
    if (job.empty()) {
      result[id] = Observed{JobState::kLost, -1, "not a Slurm job id (want slurm:<jobid>)"};
    } else if (std::find(jobs.begin(), jobs.end(), job) == jobs.end()) {
      jobs.push_back(job);
    }
  }
  if (!jobs.empty()) {
    ASSIGN_OR_RETURN(auto records, Query(jobs));
    bool changed = false;
    for (const std::string& id : ids) {
      std::string job = SlurmJobId(id);
      if (job.empty()) continue;
      auto it = records.find(job);
      Job& info = jobs_[job];
      Observed o = Observe(job, it == records.end() ? nullptr : &it->second, info);
      if (!info.last || *info.last != o.state) changed = true;
      info.last = o.state;
      if (o.state != JobState::kQueued && o.state != JobState::kRunning &&
          o.state != JobState::kPreempted) {
        info.kill_at.reset();  // over: nothing left to kill
      }
      result[id] = std::move(o);
    }
    if (changed) interval_ = options_.poll_min;
  }
  SendDueKills();
  return result;
}

Status SlurmBackend::Cancel(const std::string& id, milliseconds grace) {
  const std::string job = SlurmJobId(id);
  if (job.empty()) return InvalidArgument("cannot cancel " + id + ": not a Slurm job id");
  std::lock_guard<std::mutex> lock(mu_);
  Job& info = jobs_[job];
  info.cancelled = true;
  // A pending job has nothing to be graceful about, and signalling one makes
  // scancel retry "Job can not be altered now" until our timeout: cancel it
  // outright first. --full: the batch shell and the step's processes, so that
  // the step sees SIGTERM while the script (which traps it) stays to record
  // the code. A job that starts between the two calls is signalled by the
  // second.
  for (std::vector<std::string> argv :
       {std::vector<std::string>{options_.scancel, "--state=PENDING", job},
        std::vector<std::string>{options_.scancel, "--state=RUNNING", "--signal=TERM", "--full",
                                 job}}) {
    ASSIGN_OR_RETURN(SubprocessResult r, Run(argv));
    if (r.exit_code != 0 && !slurm::IsInvalidJobId(r.err)) {
      return Unavailable(JoinArgv(argv) + " exited with " + std::to_string(r.exit_code) + ": " +
                         FirstLines(r.err + r.out));
    }
  }
  // The plain scancel (SIGTERM again, SIGKILL after Slurm's KillWait) is sent
  // by the first Poll, Cancel or Wait after the grace, so that Cancel returns
  // at once.
  info.kill_at = Clock::now() + grace;
  SendDueKills();
  return Status();
}

void SlurmBackend::SendDueKills() {
  const Clock::time_point now = Clock::now();
  for (auto& [job, info] : jobs_) {
    if (!info.kill_at || *info.kill_at > now) continue;
    info.kill_at.reset();
    // Best effort: a job that already ended makes scancel complain, and the
    // next Poll reports what happened either way.
    (void)Run({options_.scancel, job});
  }
}

void SlurmBackend::Wait(milliseconds max) {
  milliseconds sleep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sleep = std::min(interval_, max);
    const Clock::time_point now = Clock::now();
    for (const auto& [job, info] : jobs_) {
      if (!info.kill_at) continue;
      auto until = std::chrono::duration_cast<milliseconds>(*info.kill_at - now);
      sleep = std::min(sleep, std::max(until, milliseconds(0)));
    }
    // Back off while nothing changes; a Poll that sees a change resets it.
    interval_ = std::min(interval_ * 2, std::max(options_.poll_max, options_.poll_min));
  }
  if (sleep.count() > 0) std::this_thread::sleep_for(sleep);
  std::lock_guard<std::mutex> lock(mu_);
  SendDueKills();
}

}  // namespace

std::unique_ptr<Backend> MakeSlurmBackend(const SlurmOptions& options) {
  return std::make_unique<SlurmBackend>(options);
}

}  // namespace gantry::jobs
