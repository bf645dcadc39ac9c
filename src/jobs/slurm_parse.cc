#include "slurm_parse.h"

#include <sys/wait.h>

#include <cmath>
#include <ctime>

#include "gantry/core/text.h"

namespace gantry::jobs::slurm {
namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::vector<std::string_view> SplitBar(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t bar = line.find('|', start);
    if (bar == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, bar - start));
    start = bar + 1;
  }
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = TrimSpace(text.substr(start, nl - start));
    if (!line.empty()) f(line);
    start = nl + 1;
  }
}

// Job ids are digits, optionally "_<task>" for an array task ("123_4") or
// "_[4-7]" for a pending array; anything else on a line means it is not a
// job line.
bool LooksLikeJobId(std::string_view id) {
  if (id.empty() || id.front() < '0' || id.front() > '9') return false;
  for (char c : id) {
    bool ok = (c >= '0' && c <= '9') || c == '_' || c == '[' || c == ']' || c == '-' || c == ',' ||
              c == '%' || c == '+' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string FirstWordUpper(std::string_view state) {
  state = TrimSpace(state);
  return AsciiUpper(state.substr(0, state.find(' ')));
}

bool Ended(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kTimedOut ||
         s == JobState::kCancelled || s == JobState::kLost;
}

// The most telling text for a reason: "CANCELLED by 0" as it is, else
// Slurm's Reason ("NonZeroExitCode", "Priority") unless it is empty or
// "None", else the state name.
std::string ReasonOf(const SlurmRecord& r) {
  if (r.state_text.find(' ') != std::string::npos) return r.state_text;
  if (!r.reason.empty() && r.reason != "None" && r.reason != "(null)") return r.reason;
  return r.state;
}

}  // namespace

std::vector<SlurmRecord> ParseSacct(std::string_view out) {
  std::vector<SlurmRecord> records;
  ForEachLine(out, [&](std::string_view line) {
    std::vector<std::string_view> f = SplitBar(line);
    if (f.size() < 5 || !LooksLikeJobId(f[0]) || TrimSpace(f[2]).empty()) return;
    SlurmRecord r;
    r.job_id = std::string(f[0]);
    r.raw_id = std::string(TrimSpace(f[1]));
    r.state_text = std::string(TrimSpace(f[2]));
    r.state = FirstWordUpper(f[2]);
    r.exit_code = ParseExitCodeField(f[3]);
    r.reason = std::string(TrimSpace(f[4]));
    records.push_back(std::move(r));
  });
  return records;
}

std::vector<SlurmRecord> ParseSqueue(std::string_view out) {
  std::vector<SlurmRecord> records;
  ForEachLine(out, [&](std::string_view line) {
    std::vector<std::string_view> f = SplitBar(line);
    if (f.size() < 4 || !LooksLikeJobId(TrimSpace(f[0])) || TrimSpace(f[1]).empty()) return;
    SlurmRecord r;
    r.job_id = std::string(TrimSpace(f[0]));
    r.state_text = std::string(TrimSpace(f[1]));
    r.state = FirstWordUpper(f[1]);
    int status = 0;
    if (ParseNumber(f[2], &status)) r.exit_code = DecodeWaitStatus(status);
    r.reason = std::string(TrimSpace(f[3]));
    records.push_back(std::move(r));
  });
  return records;
}

int ParseExitCodeField(std::string_view field) {
  field = TrimSpace(field);
  size_t colon = field.find(':');
  if (colon == std::string_view::npos) return -1;
  int code = 0, signal = 0;
  if (!ParseNumber(field.substr(0, colon), &code) ||
      !ParseNumber(field.substr(colon + 1), &signal) || code < 0 || signal < 0) {
    return -1;
  }
  return signal > 0 ? 128 + signal : code;
}

int DecodeWaitStatus(int status) {
  if (status < 0) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -1;
}

std::optional<JobState> MapSlurmState(std::string_view state) {
  const std::string s = FirstWordUpper(state);
  // Requeued and held-for-requeue jobs will run again under the same id.
  for (const char* q : {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                        "RESV_DEL_HOLD", "SPECIAL_EXIT"}) {
    if (s == q) return JobState::kQueued;
  }
  for (const char* r :
       {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}) {
    if (s == r) return JobState::kRunning;
  }
  if (s == "COMPLETED") return JobState::kSucceeded;
  for (const char* f : {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}) {
    if (s == f) return JobState::kFailed;
  }
  if (s == "TIMEOUT") return JobState::kTimedOut;
  if (s == "CANCELLED") return JobState::kCancelled;
  if (s == "PREEMPTED") return JobState::kPreempted;
  return std::nullopt;
}

std::optional<Observed> Combine(const SlurmRecord* record, std::optional<int> exit_file,
                                bool cancelled) {
  Observed o;
  if (record == nullptr) {
    if (!exit_file) return std::nullopt;
    o.exit_code = *exit_file;
    o.state = *exit_file == 0 ? JobState::kSucceeded : JobState::kFailed;
    o.reason = "exit code " + std::to_string(*exit_file) +
               " from the exit file (Slurm no longer lists the job)";
  } else {
    std::optional<JobState> state = MapSlurmState(record->state);
    if (!state) {
      // Slurm still lists the job, so it is not over as far as we can tell.
      o.state = JobState::kRunning;
      o.reason = "Slurm state " + record->state_text + " (not known to gantry)";
      return o;
    }
    o.state = *state;
    o.reason = ReasonOf(*record);
    if (!Ended(o.state)) return o;
    o.exit_code = exit_file ? *exit_file : record->exit_code;
    if (o.state == JobState::kTimedOut) {
      o.exit_code = 124;
    } else if (exit_file && (record->state == "COMPLETED" || record->state == "FAILED")) {
      // The script's own record decides between success and failure.
      o.state = *exit_file == 0 ? JobState::kSucceeded : JobState::kFailed;
    } else if (o.state == JobState::kSucceeded && o.exit_code < 0) {
      o.exit_code = 0;
    }
  }
  if (cancelled && o.state != JobState::kSucceeded && o.state != JobState::kTimedOut) {
    o.reason = "cancelled (Slurm: " + (record ? record->state_text : o.reason) + ")";
    o.state = JobState::kCancelled;
  }
  return o;
}

Result<std::string> ParseSbatchJobId(std::string_view out) {
  std::string_view last;
  ForEachLine(out, [&](std::string_view line) { last = line; });
  std::string_view id = last.substr(0, last.find(';'));
  bool digits = !id.empty();
  for (char c : id) digits = digits && c >= '0' && c <= '9';
  if (!digits) {
    return InvalidArgument("sbatch --parsable printed \"" + std::string(TrimSpace(out)) +
                           "\", not a job id (\"<jobid>[;<cluster>]\")");
  }
  return std::string(id);
}

bool IsTransientSlurmError(std::string_view err) {
  const std::string e = AsciiLower(err);
  for (const char* s : {"socket timed out", "unable to contact slurm controller",
                        "temporarily unable to accept job"}) {
    if (e.find(s) != std::string::npos) return true;
  }
  return false;
}

bool IsAccountingDisabled(std::string_view err) {
  return AsciiLower(err).find("accounting storage is disabled") != std::string::npos;
}

bool IsInvalidJobId(std::string_view err) {
  return AsciiLower(err).find("invalid job id specified") != std::string::npos;
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

namespace {

bool IsShellName(std::string_view name) {
  if (name.empty() || (name.front() >= '0' && name.front() <= '9')) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// For a comment line: no newline may end the comment early (a following
// "#SBATCH" line would be read by sbatch as an option).
std::string OneLine(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

}  // namespace

Result<std::string> BatchScript(const Launch& launch) {
  if (launch.argv.empty()) {
    return InvalidArgument("step " + launch.key + ": empty command; give the program to run");
  }
  std::string s = "#!/bin/sh\n";
  s += "# Written by gantry jobs (Slurm backend) for " + OneLine(launch.key) + ", attempt " +
       std::to_string(launch.attempt) + ".\n";
  if (!launch.exit_path.empty()) {
    // The runner trusts this file over Slurm's record, which can be late
    // (slurmdbd) or gone (MinJobAge without accounting); tmp + mv so that a
    // reader never sees half a code.
    const std::string tmp = ShellQuote(launch.exit_path + ".tmp.") + "$$";
    s += "gantry_done() {\n";
    s += "  printf '%s\\n' \"$1\" > " + tmp + " && mv -f " + tmp + " " +
         ShellQuote(launch.exit_path) + "\n";
    s += "  exit \"$1\"\n}\n";
  } else {
    s += "gantry_done() { exit \"$1\"; }\n";
  }
  // scancel --signal=TERM and the time limit signal every process of the job.
  // A trap (an ignored signal would be inherited by the step) keeps this
  // shell alive until the step is gone, so that its code is still recorded.
  s += "trap : TERM\n";
  if (!launch.workdir.empty()) {
    // 126: the step could not be started, as sh says for a program it cannot
    // execute. Slurm itself would fall back to /tmp for a missing --chdir.
    s += "cd " + ShellQuote(launch.workdir) + " || gantry_done 126\n";
  }
  for (const auto& [name, value] : launch.env) {
    if (!IsShellName(name)) {
      return InvalidArgument("step " + launch.key + ": environment variable name \"" + name +
                             "\" is not a shell name (letters, digits, '_', not starting with a "
                             "digit)");
    }
    s += "export " + ShellQuote(name + "=" + value) + "\n";
  }
  // exec in a subshell: the program is looked up in $PATH like posix_spawnp
  // does, never as a shell builtin or function (sh's echo is not
  // /bin/echo), and this shell stays to record the code.
  s += "(exec";
  for (const std::string& arg : launch.argv) s += " " + ShellQuote(arg);
  s += ")\ngantry_done $?\n";
  return s;
}

std::string ScriptPath(const Launch& launch) { return launch.log_path + ".sbatch.sh"; }

std::string EscapeSlurmPattern(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '%') out.push_back('%');
    out.push_back(c);
  }
  return out;
}

Result<std::vector<std::string>> SbatchArgs(const Launch& launch, const std::string& sbatch,
                                            const std::string& script, bool requeue) {
  if (launch.log_path.find('\\') != std::string::npos) {
    return InvalidArgument("step " + launch.key + ": log path " + launch.log_path +
                           " contains a backslash, which makes Slurm ignore '%' escapes; "
                           "use a path without one");
  }
  const Resources& r = launch.resources;
  std::vector<std::string> a = {sbatch,
                                "--parsable",
                                "--job-name",
                                "gantry-" + launch.run_id,
                                "--comment",
                                launch.key,
                                "--output",
                                EscapeSlurmPattern(launch.log_path),
                                "--open-mode=append",
                                "--export=ALL"};
  if (!launch.workdir.empty()) {
    a.push_back("--chdir");
    a.push_back(launch.workdir);
  }
  a.push_back(requeue ? "--requeue" : "--no-requeue");
  if (r.gpus > 0) a.push_back("--gres=gpu:" + std::to_string(r.gpus));
  if (r.cpus > 0) {
    a.push_back("--cpus-per-task=" + std::to_string(static_cast<int64_t>(std::ceil(r.cpus))));
  }
  if (r.memory_bytes > 0) {
    a.push_back("--mem=" + std::to_string((r.memory_bytes + kMiB - 1) / kMiB) + "M");
  }
  int64_t seconds = r.time.count();
  if (seconds <= 0 && launch.timeout.count() > 0) seconds = (launch.timeout.count() + 999) / 1000;
  if (seconds > 0) a.push_back("--time=" + std::to_string((seconds + 59) / 60));
  if (!r.partition.empty()) {
    a.push_back("-p");
    a.push_back(r.partition);
  }
  if (!r.account.empty()) {
    a.push_back("-A");
    a.push_back(r.account);
  }
  a.insert(a.end(), r.slurm_args.begin(), r.slurm_args.end());
  a.push_back(script);
  return a;
}

std::string SacctTime(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

}  // namespace gantry::jobs::slurm
