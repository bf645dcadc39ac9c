// `gantry jobs run|resume|status|logs|cancel|check|replay`: flag parsing and
// printing only; the work is in gantry::jobs (include/gantry/jobs/).
//
// Exit codes: run/resume 0 every step succeeded or was up to date, 1 a step
// failed or the run was cancelled, 2 a workflow that does not parse, a state
// directory held by another runner or another workflow; status 0; logs 0,
// 2 for an unknown step; cancel 0, 2 when no run is recorded; check 0 or 2;
// replay 0 or 2.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "cli.h"
#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/table.h"
#include "gantry/core/text.h"
#include "gantry/core/units.h"
#include "gantry/jobs/runner.h"
#include "gantry/jobs/state.h"
#include "gantry/jobs/sweep.h"
#include "gantry/jobs/workflow.h"

namespace gantry::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kDefaultWorkflow = "workflow.yaml";

struct JobsFlags {
  CommonFlags common;
  std::string workflow;
  std::string state_dir;
  std::string backend = "local";
  std::vector<std::string> targets;
  bool force = false;
  int gpus = -1;
  double cpus = 0;
  std::string memory;
  std::string metrics_textfile;
  std::string audit_log;
  std::string nvml_library;
  bool quiet = false;
  bool trials = false;
  std::string step;  // logs, replay
  bool follow = false;
  std::string grace = "10s";
  std::string events;  // replay
};

std::atomic<bool> g_cancel{false};

void OnSignal(int) { g_cancel.store(true); }

std::string Dump(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string WorkflowPath(const JobsFlags& f) {
  return f.workflow.empty() ? std::string(kDefaultWorkflow) : f.workflow;
}

// The state directory of the flags: --state-dir, or the workflow's default.
Result<std::string> StateDir(const JobsFlags& f) {
  if (!f.state_dir.empty()) return f.state_dir;
  ASSIGN_OR_RETURN(jobs::Workflow wf, jobs::LoadWorkflow(WorkflowPath(f)));
  return jobs::DefaultStateDir(wf.dir, wf.name);
}

std::string Clock() { return FormatUtc(std::chrono::system_clock::now(), "%H:%M:%S"); }

std::string Duration(double seconds) {
  if (seconds <= 0) return "";
  return FormatDuration(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)));
}

int RunOrResume(const JobsFlags& f, bool resume) {
  std::string command = resume ? "jobs resume" : "jobs run";
  Result<jobs::Workflow> wf = jobs::LoadWorkflow(WorkflowPath(f));
  if (!wf.ok()) return Fail(command, wf.status());
  jobs::RunOptions o;
  o.backend = f.backend;
  o.state_dir = f.state_dir;
  o.resume = resume;
  o.force = f.force;
  o.targets = f.targets;
  o.gpus = f.gpus;
  o.cpus = f.cpus;
  if (!f.memory.empty()) {
    Result<uint64_t> m = ParseSize(f.memory);
    if (!m.ok()) return Fail(command, m.status().WithContext("--memory"));
    o.memory_bytes = *m;
  }
  o.metrics_textfile = f.metrics_textfile;
  o.audit_log = f.audit_log;
  o.nvml_library = f.nvml_library;
  bool print = !f.quiet && !f.common.json;
  std::ostream& out = f.common.json ? std::cerr : std::cout;
  o.on_event = [&](const jobs::RunEvent& e) {
    if (!print && !(f.common.json && !f.quiet)) return;
    out << Clock() << "  " << (e.key.empty() ? std::string("-") : e.key) << "  " << e.message
        << "\n";
    out.flush();
  };
  g_cancel.store(false);
  o.cancel = &g_cancel;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Result<jobs::RunRecord> rec = jobs::RunWorkflow(*wf, o);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  if (!rec.ok()) return Fail(command, rec.status());
  if (f.common.json) std::cout << Dump(jobs::ToJson(*rec));
  return rec->state == "succeeded" ? kExitOk : kExitCheckFailed;
}

std::string TrialSummary(const jobs::StepRecord& r) {
  std::map<std::string, int> n;
  for (const jobs::TrialRecord& t : r.trials) {
    ++n[t.paused   ? "paused"
        : t.pruned ? "stopped early"
                   : std::string(jobs::StepStateName(t.state))];
  }
  std::vector<std::string> parts;
  for (const auto& [k, v] : n) parts.push_back(std::to_string(v) + " " + k);
  std::string s =
      Plural(static_cast<int64_t>(r.trials.size()), "trial", "trials") + ": " + Join(parts, ", ");
  if (r.best_trial && *r.best_trial >= 0 && *r.best_trial < static_cast<int>(r.trials.size())) {
    const jobs::TrialRecord& b = r.trials[*r.best_trial];
    if (b.last_value)
      s += "; best #" + std::to_string(b.index) + " = " + fmt::format("{:.6g}", *b.last_value);
  }
  return s;
}

int Status_(const JobsFlags& f) {
  Result<std::string> dir = StateDir(f);
  if (!dir.ok()) return Fail("jobs status", dir.status());
  Result<jobs::RunRecord> rec = jobs::ReadState(*dir);
  if (!rec.ok()) return Fail("jobs status", rec.status());
  int64_t runner = jobs::ActiveRunner(*dir);
  if (f.common.json) {
    Json j = jobs::ToJson(*rec);
    j["runner_alive"] = runner != 0;
    std::cout << Dump(j);
    return kExitOk;
  }
  std::cout << "workflow " << rec->workflow << "  run " << rec->run_id << "  " << rec->state
            << "  (" << rec->backend << " backend"
            << (runner > 0 ? ", runner pid " + std::to_string(runner) : std::string())
            << (rec->state == "running" && runner == 0 ? ", runner not alive: gantry jobs resume"
                                                       : "")
            << ")\n";
  Table t({"step", "state", "attempts", "exit", "duration", "job", "note"});
  t.SetAlign(2, Table::Align::kRight);
  t.SetAlign(3, Table::Align::kRight);
  t.SetAlign(4, Table::Align::kRight);
  // State-file order is by name; show the workflow's order when the file is there.
  std::vector<std::string> order;
  Result<jobs::Workflow> wf = jobs::LoadWorkflow(rec->workflow_path);
  if (wf.ok()) {
    order = wf->order;
    for (const auto& [n, s] : wf->steps) {
      if (s.handler) order.push_back(n);
    }
  }
  for (const auto& [n, r] : rec->steps) {
    if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  }
  double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const std::string& n : order) {
    auto it = rec->steps.find(n);
    if (it == rec->steps.end()) continue;
    const jobs::StepRecord& r = it->second;
    double end = r.finished > 0 ? r.finished : (r.state == jobs::StepState::kRunning ? now : 0);
    std::string note = r.trials.empty() ? r.reason : TrialSummary(r);
    t.AddRow({n, std::string(jobs::StepStateName(r.state)), std::to_string(r.attempts),
              r.exit_code >= 0 ? std::to_string(r.exit_code) : "",
              r.started > 0 && end > r.started ? Duration(end - r.started) : "", r.job_id, note});
    if (!f.trials) continue;
    for (const jobs::TrialRecord& tr : r.trials) {
      std::string params;
      for (const auto& [p, v] : tr.params)
        params += (params.empty() ? "" : " ") + p + "=" + jobs::ParamText(v);
      std::string st = tr.paused   ? "paused"
                       : tr.pruned ? "stopped"
                                   : std::string(jobs::StepStateName(tr.state));
      std::string val = tr.last_value ? fmt::format("{:.6g}", *tr.last_value) + " @" +
                                            std::to_string(tr.last_step)
                                      : "";
      double tend =
          tr.finished > 0 ? tr.finished : (tr.state == jobs::StepState::kRunning ? now : 0);
      t.AddRow({"  #" + std::to_string(tr.index), st, std::to_string(tr.attempts),
                tr.exit_code >= 0 ? std::to_string(tr.exit_code) : "",
                tr.started > 0 && tend > tr.started ? Duration(tend - tr.started) : "", tr.job_id,
                params + (val.empty() ? "" : "  -> " + val)});
    }
  }
  std::cout << t.Render();
  return kExitOk;
}

int Logs(const JobsFlags& f) {
  Result<std::string> dir = StateDir(f);
  if (!dir.ok()) return Fail("jobs logs", dir.status());
  Result<jobs::RunRecord> rec = jobs::ReadState(*dir);
  if (!rec.ok()) return Fail("jobs logs", rec.status());
  std::string step = f.step;
  std::string base = step.substr(0, step.find('/'));
  if (!rec->steps.count(base)) {
    std::vector<std::string> names;
    for (const auto& [n, r] : rec->steps) names.push_back(n);
    std::optional<std::string> close = ClosestMatch(base, names, 2);
    return Fail("jobs logs", NotFound("no step '" + base + "' in run " + rec->run_id +
                                      (close ? " (did you mean '" + *close + "'?)" : "")));
  }
  // "train/3" is trial 3 of the sweep step train.
  if (step.find('/') != std::string::npos && step.find("trial-") == std::string::npos) {
    Result<int64_t> idx = ParseInt("trial", step.substr(step.find('/') + 1));
    if (!idx.ok()) return Fail("jobs logs", idx.status());
    step = fmt::format("{}/trial-{:04d}", base, *idx);
  }
  std::string path = jobs::LogPath(*dir, step);
  // The state of the step (or trial) in the recorded run.
  auto state_of = [&](const jobs::RunRecord& r) {
    const jobs::StepRecord& sr = r.steps.at(base);
    jobs::StepState st = sr.state;
    if (step != base) {
      for (const jobs::TrialRecord& t : sr.trials) {
        if (fmt::format("{}/trial-{:04d}", base, t.index) == step) st = t.state;
      }
    }
    return st;
  };
  auto live = [&](const jobs::RunRecord& r) {
    jobs::StepState st = state_of(r);
    return r.state == "running" &&
           (st == jobs::StepState::kRunning || st == jobs::StepState::kWaiting ||
            st == jobs::StepState::kPending);
  };
  std::ifstream in(path, std::ios::binary);
  // A log is created with the step's first output line.
  while (!in && f.follow && live(*rec)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    in.open(path, std::ios::binary);
    Result<jobs::RunRecord> now = jobs::ReadState(*dir);
    if (now.ok()) rec = std::move(now);
  }
  if (!in) {
    if (jobs::IsTerminal(state_of(*rec))) {
      std::cerr << step << " printed nothing (" << jobs::StepStateName(state_of(*rec)) << ")\n";
      return kExitOk;
    }
    return Fail("jobs logs", NotFound("no output from " + step + " yet (" + path + ")"));
  }
  auto copy = [&] {
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) std::cout.write(buf, in.gcount());
    in.clear();
    std::cout.flush();
  };
  copy();
  if (!f.follow) return kExitOk;
  // -f: until the step (or trial) is over and its log stops growing.
  while (true) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    copy();
    Result<jobs::RunRecord> now = jobs::ReadState(*dir);
    if (!now.ok()) continue;
    if (!live(*now)) {
      copy();
      return kExitOk;
    }
  }
}

int Cancel(const JobsFlags& f) {
  Result<std::string> dir = StateDir(f);
  if (!dir.ok()) return Fail("jobs cancel", dir.status());
  Result<std::chrono::nanoseconds> grace = ParseDuration(f.grace);
  if (!grace.ok()) return Fail("jobs cancel", grace.status().WithContext("--grace"));
  Result<std::string> done =
      jobs::CancelRun(*dir, {}, std::chrono::duration_cast<std::chrono::milliseconds>(*grace));
  if (!done.ok()) return Fail("jobs cancel", done.status());
  std::cout << *done << "\n";
  return kExitOk;
}

int Check(const JobsFlags& f) {
  Result<jobs::Workflow> wf = jobs::LoadWorkflow(WorkflowPath(f));
  if (!wf.ok()) return Fail("jobs check", wf.status());
  if (f.common.json) {
    Json steps = Json::array();
    for (const std::string& n : wf->order) {
      const jobs::Step& s = wf->steps.at(n);
      steps.push_back({{"name", n},
                       {"needs", s.needs},
                       {"sweep", s.sweep.has_value()},
                       {"gpus", s.resources.gpus},
                       {"cpus", s.resources.cpus}});
    }
    std::cout << Dump(
        {{"workflow", wf->name}, {"path", wf->path}, {"order", wf->order}, {"steps", steps}});
    return kExitOk;
  }
  Table t({"step", "needs", "command", "resources", "retries", "sweep"});
  for (const std::string& n : wf->order) {
    const jobs::Step& s = wf->steps.at(n);
    std::string cmd = s.shell.empty() ? JoinArgv(s.argv) : "sh -c " + s.shell;
    if (cmd.size() > 60) cmd = cmd.substr(0, 57) + "...";
    std::string res = std::to_string(s.resources.gpus) + " GPU, " +
                      fmt::format("{:g}", s.resources.cpus) + " CPU" +
                      (s.resources.memory_bytes ? ", " + FormatSize(s.resources.memory_bytes) : "");
    std::string sweep;
    if (s.sweep) {
      Result<std::vector<jobs::ParamValues>> plan = jobs::PlanTrials(*s.sweep);
      sweep = plan.ok() ? Plural(static_cast<int64_t>(plan->size()), "trial", "trials")
                        : plan.status().message();
    }
    t.AddRow({n, Join(s.needs, ","), cmd, res, std::to_string(s.retries.limit), sweep});
  }
  std::cout << "workflow " << wf->name << ": "
            << Plural(static_cast<int64_t>(wf->order.size()), "step", "steps") << ", valid\n"
            << t.Render();
  return kExitOk;
}

// Reads metric events: JSON lines {"trial":0,"step":1,"value":0.5} or
// {"trial":0,"complete":true}, or text lines "TRIAL STEP VALUE" / "TRIAL complete".
Result<std::vector<jobs::MetricEvent>> ReadEvents(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot read the events file");
  std::vector<jobs::MetricEvent> out;
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    std::string_view t = TrimSpace(line);
    if (t.empty() || t[0] == '#') continue;
    std::string where = path + ":" + std::to_string(no);
    jobs::MetricEvent e;
    if (t[0] == '{') {
      Json j = Json::parse(t, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("trial") ||
          !j["trial"].is_number_integer()) {
        return InvalidArgument(where +
                               ": expected {\"trial\": N, \"step\": S, \"value\": V} or "
                               "{\"trial\": N, \"complete\": true}");
      }
      e.trial = j["trial"].get<int>();
      if (j.value("complete", false)) {
        e.complete = true;
      } else {
        if (!j.contains("step") || !j["step"].is_number_integer() || !j.contains("value") ||
            !(j["value"].is_number() || j["value"].is_null())) {
          return InvalidArgument(where + ": needs an integer step and a numeric value");
        }
        e.step = j["step"].get<int64_t>();
        e.value = j["value"].is_null() ? std::nan("") : j["value"].get<double>();
      }
    } else {
      std::istringstream fields{std::string(t)};
      std::string a, b, c;
      fields >> a >> b >> c;
      Result<int64_t> trial = ParseInt("trial", a);
      if (!trial.ok()) return InvalidArgument(where + ": " + trial.status().message());
      e.trial = static_cast<int>(*trial);
      if (b == "complete") {
        e.complete = true;
      } else {
        Result<int64_t> step = ParseInt("step", b);
        double v = 0;
        if (!step.ok() || !ParseNumber(c, &v)) {
          return InvalidArgument(where + ": expected 'TRIAL STEP VALUE' or 'TRIAL complete'");
        }
        e.step = *step;
        e.value = v;
      }
    }
    if (e.trial < 0) return InvalidArgument(where + ": trial must be >= 0");
    out.push_back(e);
  }
  return out;
}

// A replayed change: a stop, a pause, or the promotion of a paused trial.
std::string DecisionName(jobs::Decision d) {
  switch (d) {
    case jobs::Decision::kStop:
      return "stop";
    case jobs::Decision::kPause:
      return "pause";
    case jobs::Decision::kContinue:
      return "promote";
  }
  return "stop";
}

int Replay(const JobsFlags& f) {
  Result<jobs::Workflow> wf = jobs::LoadWorkflow(WorkflowPath(f));
  if (!wf.ok()) return Fail("jobs replay", wf.status());
  auto it = wf->steps.find(f.step);
  if (it == wf->steps.end() || !it->second.sweep) {
    return Fail("jobs replay",
                InvalidArgument("--step " + f.step + ": not a sweep step of " + wf->path));
  }
  const jobs::SweepSpec& sw = *it->second.sweep;
  Result<std::vector<jobs::MetricEvent>> events = ReadEvents(f.events);
  if (!events.ok()) return Fail("jobs replay", events.status());
  auto t0 = std::chrono::steady_clock::now();
  Result<std::vector<jobs::StopEvent>> stops =
      jobs::Replay(sw.policy, sw.goal, sw.pause_on_prune, *events);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!stops.ok()) return Fail("jobs replay", stops.status());
  std::set<int> trials;
  for (const jobs::MetricEvent& e : *events) trials.insert(e.trial);
  if (f.common.json) {
    Json j = Json::array();
    for (const jobs::StopEvent& s : *stops) {
      j.push_back({{"trial", s.trial}, {"step", s.step}, {"decision", DecisionName(s.decision)}});
    }
    std::cout << Dump(
        {{"events", events->size()}, {"trials", trials.size()}, {"stops", j}, {"seconds", secs}});
    return kExitOk;
  }
  Table t({"trial", "at step", "decision"});
  t.SetAlign(0, Table::Align::kRight);
  t.SetAlign(1, Table::Align::kRight);
  for (const jobs::StopEvent& s : *stops) {
    t.AddRow({std::to_string(s.trial), std::to_string(s.step), DecisionName(s.decision)});
  }
  std::cout << t.Render()
            << fmt::format("{} of {} stopped early; {} events decided in {:.3f} s\n", stops->size(),
                           trials.size(), events->size(), secs);
  return kExitOk;
}

void AddRunFlags(CLI::App* c, JobsFlags* f) {
  c->add_option("workflow", f->workflow, "The workflow file (default workflow.yaml)");
  c->add_option("--backend", f->backend, "local (this node) or slurm (sbatch per step)")
      ->capture_default_str();
  c->add_option("--state-dir", f->state_dir,
                "State, logs and trial directories (default <workflow dir>/.gantry/jobs/<name>)");
  c->add_option("--target", f->targets, "Run only this step and what it needs (repeatable)");
  c->add_flag("--force", f->force, "Run steps even when their outputs are up to date");
  c->add_option("--gpus", f->gpus, "GPUs of this node for local steps (default: /dev/nvidiaN)");
  c->add_option("--cpus", f->cpus, "CPUs of this node for local steps (default: this process's)");
  c->add_option("--memory", f->memory, "Memory of this node for local steps (default MemTotal)");
  c->add_option("--metrics-textfile", f->metrics_textfile,
                "Write step and trial metrics here (Prometheus text, node_exporter textfile "
                "collector)");
  c->add_option("--audit-log", f->audit_log, "Append a hash-chained audit record per step");
  c->add_option("--nvml-library", f->nvml_library, "NVML for gpu_memory_free prerequisites");
  c->add_flag("--quiet,-q", f->quiet, "Print nothing but errors");
}

}  // namespace

void RegisterJobs(CLI::App& app, Action* action) {
  auto flags = std::make_shared<JobsFlags>();
  CLI::App* jobs = app.add_subcommand(
      "jobs",
      "Workflows and hyper-parameter sweeps with early termination, prerequisites checked "
      "before each step, resumable on this node or on Slurm (gantry jobs --help)");
  jobs->require_subcommand(1);
  auto set = [&](CLI::App* c, std::function<int(const JobsFlags&)> fn) {
    AddCommonFlags(c, &flags->common);
    c->callback([flags, action, fn] {
      *action = [flags, fn] {
        if (!ApplyCommonFlags(flags->common)) return kExitUsage;
        return fn(*flags);
      };
    });
  };
  CLI::App* run = jobs->add_subcommand(
      "run",
      "Run a workflow (exit 0 all steps succeeded or up to date, 1 a step failed or the "
      "run was cancelled, 2 a bad workflow)");
  AddRunFlags(run, flags.get());
  set(run, [](const JobsFlags& f) { return RunOrResume(f, false); });
  CLI::App* resume = jobs->add_subcommand(
      "resume",
      "Continue the recorded run: finished steps stay finished, Slurm jobs are "
      "followed, failed steps get their retries again");
  AddRunFlags(resume, flags.get());
  set(resume, [](const JobsFlags& f) { return RunOrResume(f, true); });

  CLI::App* status = jobs->add_subcommand("status", "The recorded run's steps (table or --json)");
  status->add_option("workflow", flags->workflow, "The workflow file (default workflow.yaml)");
  status->add_option("--state-dir", flags->state_dir, "The run's state directory");
  status->add_flag("--trials", flags->trials, "List every sweep trial");
  set(status, Status_);

  CLI::App* logs = jobs->add_subcommand("logs", "A step's log (STEP, or STEP/N for trial N)");
  logs->add_option("step", flags->step, "The step, or STEP/N for trial N of a sweep")->required();
  logs->add_option("--workflow,-w", flags->workflow, "The workflow file (default workflow.yaml)");
  logs->add_option("--state-dir", flags->state_dir, "The run's state directory");
  logs->add_flag("--follow,-f", flags->follow, "Keep printing until the step ends");
  set(logs, Logs);

  CLI::App* cancel = jobs->add_subcommand(
      "cancel", "Cancel the recorded run: its runner stops its jobs (SIGTERM, then SIGKILL)");
  cancel->add_option("workflow", flags->workflow, "The workflow file (default workflow.yaml)");
  cancel->add_option("--state-dir", flags->state_dir, "The run's state directory");
  cancel->add_option("--grace", flags->grace, "Without a live runner: SIGTERM to SIGKILL")
      ->capture_default_str();
  set(cancel, Cancel);

  CLI::App* check =
      jobs->add_subcommand("check", "Validate a workflow and print its steps in order");
  check->add_option("workflow", flags->workflow, "The workflow file (default workflow.yaml)");
  set(check, Check);

  CLI::App* replay = jobs->add_subcommand(
      "replay",
      "Replay recorded metrics through a sweep step's early-termination policy and "
      "print which trials it stops, at which step");
  replay->add_option("workflow", flags->workflow, "The workflow file")->required();
  replay->add_option("--step", flags->step, "The sweep step whose policy to use")->required();
  replay
      ->add_option(
          "--events", flags->events,
          "JSON lines {\"trial\":N,\"step\":S,\"value\":V} / {\"trial\":N,\"complete\":true}, "
          "or 'TRIAL STEP VALUE' lines")
      ->required();
  set(replay, Replay);
}

}  // namespace gantry::cli
