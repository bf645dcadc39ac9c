// Workflow files: reading, defaults, validation and the DAG's order.
#include "gantry/jobs/workflow.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "gantry/core/json.h"
#include "gantry/core/text.h"
#include "gantry/security/crypto.h"

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTopKeys = {"name",       "defaults", "requires",
                                           "on_failure", "steps",    "container_runtime"};
const std::vector<std::string> kDefaultKeys = {"timeout",   "kill_grace", "retries",
                                               "resources", "env",        "workdir"};
const std::vector<std::string> kStepKeys = {
    "run",     "shell",   "workdir", "env",        "inputs",   "outputs", "needs",   "resources",
    "retries", "timeout", "image",   "kill_grace", "requires", "sweep",   "handler", "on_failure"};
const std::vector<std::string> kResourceKeys = {"gpus",      "cpus",    "memory",    "time",
                                                "partition", "account", "slurm_args"};
const std::vector<std::string> kRetryKeys = {"limit", "backoff", "factor", "max_backoff",
                                             "exit_codes"};

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return name != "." && name != "..";
}

std::chrono::milliseconds Ms(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

Result<Resources> ParseResources(const Config& c, std::string_view key, Resources r) {
  if (!c.Has(key)) return r;
  if (!c.IsMap(key))
    return InvalidArgument(c.Locate(key) + ": expected a map {gpus, cpus, memory, time}");
  RETURN_IF_ERROR(c.CheckKnownKeys(key, kResourceKeys));
  ASSIGN_OR_RETURN(Config v, c.Sub(key));
  ASSIGN_OR_RETURN(int64_t gpus, v.GetInt("gpus", r.gpus));
  if (gpus < 0 || gpus > 1024) return InvalidArgument(v.Locate("gpus") + ": expected 0..1024 GPUs");
  r.gpus = static_cast<int>(gpus);
  ASSIGN_OR_RETURN(r.cpus, v.GetDouble("cpus", r.cpus));
  if (!(r.cpus > 0) || r.cpus > 100000) {
    return InvalidArgument(v.Locate("cpus") + ": expected a number of CPUs > 0");
  }
  ASSIGN_OR_RETURN(r.memory_bytes, v.GetSize("memory", r.memory_bytes));
  ASSIGN_OR_RETURN(std::chrono::nanoseconds t, v.GetDuration("time", r.time));
  r.time = std::chrono::duration_cast<std::chrono::seconds>(t);
  ASSIGN_OR_RETURN(r.partition, v.GetString("partition", r.partition));
  ASSIGN_OR_RETURN(r.account, v.GetString("account", r.account));
  if (v.Has("slurm_args")) {
    ASSIGN_OR_RETURN(r.slurm_args, v.GetStringList("slurm_args"));
  }
  return r;
}

Result<RetryPolicy> ParseRetries(const Config& c, std::string_view key, RetryPolicy p) {
  if (!c.Has(key)) return p;
  if (c.IsScalar(key)) {
    ASSIGN_OR_RETURN(int64_t n, c.GetInt(key, 0));
    if (n < 0 || n > 100) return InvalidArgument(c.Locate(key) + ": expected 0..100 retries");
    p.limit = static_cast<int>(n);
    return p;
  }
  if (!c.IsMap(key)) {
    return InvalidArgument(c.Locate(key) +
                           ": expected a number or a map {limit, backoff, factor, max_backoff, "
                           "exit_codes}");
  }
  RETURN_IF_ERROR(c.CheckKnownKeys(key, kRetryKeys));
  ASSIGN_OR_RETURN(Config v, c.Sub(key));
  ASSIGN_OR_RETURN(int64_t n, v.GetInt("limit", p.limit));
  if (n < 0 || n > 100) return InvalidArgument(v.Locate("limit") + ": expected 0..100 retries");
  p.limit = static_cast<int>(n);
  ASSIGN_OR_RETURN(std::chrono::nanoseconds b, v.GetDuration("backoff", p.backoff));
  p.backoff = Ms(b);
  ASSIGN_OR_RETURN(p.factor, v.GetDouble("factor", p.factor));
  if (!(p.factor >= 1) || p.factor > 100) {
    return InvalidArgument(v.Locate("factor") + ": expected a backoff factor in [1, 100]");
  }
  ASSIGN_OR_RETURN(std::chrono::nanoseconds mb, v.GetDuration("max_backoff", p.max_backoff));
  p.max_backoff = Ms(mb);
  if (v.Has("exit_codes")) {
    ASSIGN_OR_RETURN(std::vector<Config> items, v.Items("exit_codes"));
    p.exit_codes.clear();
    for (const Config& item : items) {
      ASSIGN_OR_RETURN(int64_t code, item.GetInt("", 0));
      if (code < 1 || code > 255) {
        return InvalidArgument(item.Locate("") + ": expected an exit code 1..255");
      }
      p.exit_codes.push_back(static_cast<int>(code));
    }
  }
  return p;
}

Result<std::map<std::string, std::string>> ParseEnv(const Config& c, std::string_view key,
                                                    std::map<std::string, std::string> env) {
  if (!c.Has(key)) return env;
  if (!c.IsMap(key)) return InvalidArgument(c.Locate(key) + ": expected a map NAME: value");
  ASSIGN_OR_RETURN(std::vector<std::string> names, c.Keys(key));
  ASSIGN_OR_RETURN(Config v, c.Sub(key));
  for (const std::string& name : names) {
    if (name.empty() || name.find('=') != std::string::npos) {
      return InvalidArgument(v.Locate(name) + ": not an environment variable name");
    }
    ASSIGN_OR_RETURN(env[name], v.GetString(name, ""));
  }
  return env;
}

Result<std::vector<std::string>> ParseList(const Config& c, std::string_view key) {
  if (!c.Has(key)) return std::vector<std::string>{};
  if (c.IsScalar(key)) {
    ASSIGN_OR_RETURN(std::string one, c.GetString(key, ""));
    return std::vector<std::string>{one};
  }
  return c.GetStringList(key);
}

// The settings every step starts from (`defaults:`).
struct Defaults {
  std::string workdir;
  std::map<std::string, std::string> env;
  Resources resources;
  RetryPolicy retries;
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{10'000};
};

Result<Defaults> ParseDefaults(const Config& c, const std::string& dir) {
  Defaults d;
  d.workdir = dir;
  if (!c.Has("defaults")) return d;
  RETURN_IF_ERROR(c.CheckKnownKeys("defaults", kDefaultKeys));
  ASSIGN_OR_RETURN(Config v, c.Sub("defaults"));
  ASSIGN_OR_RETURN(std::string wd, v.GetString("workdir", ""));
  if (!wd.empty()) d.workdir = (fs::path(dir) / wd).lexically_normal().string();
  ASSIGN_OR_RETURN(d.env, ParseEnv(v, "env", {}));
  ASSIGN_OR_RETURN(d.resources, ParseResources(v, "resources", {}));
  ASSIGN_OR_RETURN(d.retries, ParseRetries(v, "retries", {}));
  ASSIGN_OR_RETURN(std::chrono::nanoseconds t, v.GetDuration("timeout", d.timeout));
  d.timeout = Ms(t);
  ASSIGN_OR_RETURN(std::chrono::nanoseconds g, v.GetDuration("kill_grace", d.kill_grace));
  d.kill_grace = Ms(g);
  return d;
}

Status ParseOnFailure(const Config& c, std::string_view key, Step* s) {
  if (!c.Has(key)) return Status();
  ASSIGN_OR_RETURN(std::string v, c.GetString(key, "stop"));
  if (v == "stop") {
    s->on_failure = FailureMode::kStop;
  } else if (v == "continue") {
    s->on_failure = FailureMode::kContinue;
  } else {
    s->on_failure = FailureMode::kHandler;
    s->on_failure_handler = v;
  }
  return Status();
}

Result<Step> ParseStep(const Config& steps, const std::string& name, const Defaults& d,
                       const Prerequisites& workflow_requires, const Step& workflow_failure,
                       const std::string& dir) {
  if (!ValidName(name)) {
    return InvalidArgument(steps.Locate(name) + ": step name '" + name +
                           "' must be 1-64 letters, digits, '_', '-' or '.'");
  }
  if (!steps.IsMap(name)) {
    return InvalidArgument(steps.Locate(name) + ": a step is a map with `run:` or `shell:`");
  }
  RETURN_IF_ERROR(steps.CheckKnownKeys(name, kStepKeys));
  ASSIGN_OR_RETURN(Config v, steps.Sub(name));
  Step s;
  s.name = name;
  s.position = v.Position("").ToString();
  if (v.Has("run") && v.Has("shell")) {
    return InvalidArgument(v.Locate("shell") + ": step '" + name +
                           "' has both run: and shell:; keep one");
  }
  if (v.Has("run")) {
    if (!v.IsList("run")) {
      return InvalidArgument(v.Locate("run") +
                             ": expected the command as a list of arguments ([python3, "
                             "train.py]); for a shell command line use `shell:`");
    }
    ASSIGN_OR_RETURN(s.argv, v.GetStringList("run"));
    if (s.argv.empty() || s.argv[0].empty()) {
      return InvalidArgument(v.Locate("run") + ": step '" + name + "' has an empty command");
    }
  } else if (v.Has("shell")) {
    ASSIGN_OR_RETURN(s.shell, v.GetString("shell", ""));
    if (TrimSpace(s.shell).empty()) {
      return InvalidArgument(v.Locate("shell") + ": step '" + name + "' has an empty command");
    }
  } else {
    return InvalidArgument(s.position + ": step '" + name +
                           "' has no command: add `run: [program, args...]` or `shell: \"...\"`");
  }
  s.workdir = d.workdir;
  ASSIGN_OR_RETURN(std::string wd, v.GetString("workdir", ""));
  if (!wd.empty()) s.workdir = (fs::path(dir) / wd).lexically_normal().string();
  ASSIGN_OR_RETURN(s.env, ParseEnv(v, "env", d.env));
  ASSIGN_OR_RETURN(s.inputs, ParseList(v, "inputs"));
  ASSIGN_OR_RETURN(s.outputs, ParseList(v, "outputs"));
  ASSIGN_OR_RETURN(s.needs, ParseList(v, "needs"));
  ASSIGN_OR_RETURN(s.resources, ParseResources(v, "resources", d.resources));
  ASSIGN_OR_RETURN(s.retries, ParseRetries(v, "retries", d.retries));
  ASSIGN_OR_RETURN(std::chrono::nanoseconds t, v.GetDuration("timeout", d.timeout));
  s.timeout = Ms(t);
  ASSIGN_OR_RETURN(std::chrono::nanoseconds g, v.GetDuration("kill_grace", d.kill_grace));
  s.kill_grace = Ms(g);
  ASSIGN_OR_RETURN(s.image, v.GetString("image", ""));
  Prerequisites own;
  if (v.Has("requires")) {
    ASSIGN_OR_RETURN(Config r, v.Sub("requires"));
    ASSIGN_OR_RETURN(own, ParsePrerequisites(r));
  }
  s.prereqs = MergePrerequisites(workflow_requires, own);
  if (v.Has("sweep")) {
    ASSIGN_OR_RETURN(Config sw, v.Sub("sweep"));
    ASSIGN_OR_RETURN(SweepSpec spec, ParseSweep(sw));
    s.sweep = std::move(spec);
  }
  ASSIGN_OR_RETURN(s.handler, v.GetBool("handler", false));
  s.on_failure = workflow_failure.on_failure;
  s.on_failure_handler = workflow_failure.on_failure_handler;
  RETURN_IF_ERROR(ParseOnFailure(v, "on_failure", &s));
  return s;
}

// The steps on a cycle through `start`, "a -> b -> a", or "" when none.
std::string FindCycle(const Workflow& wf) {
  std::map<std::string, int> color;  // 0 new, 1 on the stack, 2 done
  std::vector<std::string> stack;
  std::string found;
  std::function<bool(const std::string&)> visit = [&](const std::string& n) {
    color[n] = 1;
    stack.push_back(n);
    for (const std::string& m : wf.steps.at(n).needs) {
      if (color[m] == 1) {
        auto it = std::find(stack.begin(), stack.end(), m);
        std::vector<std::string> cycle(it, stack.end());
        cycle.push_back(m);
        found = Join(cycle, " -> ");
        return true;
      }
      if (color[m] == 0 && visit(m)) return true;
    }
    stack.pop_back();
    color[n] = 2;
    return false;
  };
  for (const auto& [name, step] : wf.steps) {
    if (color[name] == 0 && visit(name)) break;
  }
  return found;
}

Status Validate(Workflow* wf, const std::vector<std::string>& file_order) {
  for (const std::string& name : file_order) {
    const Step& s = wf->steps.at(name);
    for (const std::string& need : s.needs) {
      if (!wf->steps.count(need)) {
        std::vector<std::string> names(file_order);
        std::optional<std::string> close = ClosestMatch(need, names, 2);
        return InvalidArgument(s.position + ": step '" + name + "' needs '" + need +
                               "', which is not a step" +
                               (close ? " (did you mean '" + *close + "'?)" : ""));
      }
      if (need == name) {
        return InvalidArgument(s.position + ": step '" + name + "' needs itself");
      }
      if (wf->steps.at(need).handler) {
        return InvalidArgument(s.position + ": step '" + name + "' needs '" + need +
                               "', a handler step (handlers run only when a step fails)");
      }
    }
    if (s.on_failure == FailureMode::kHandler) {
      auto h = wf->steps.find(s.on_failure_handler);
      if (h == wf->steps.end() || !h->second.handler) {
        return InvalidArgument(s.position + ": step '" + name + "': on_failure '" +
                               s.on_failure_handler +
                               "' is neither stop, continue nor a step with `handler: true`");
      }
    }
    if (s.handler && !s.needs.empty()) {
      return InvalidArgument(s.position + ": handler step '" + name +
                             "' cannot have needs: it runs when another step fails");
    }
    if (s.handler && s.sweep) {
      return InvalidArgument(s.position + ": handler step '" + name + "' cannot be a sweep");
    }
  }
  std::string cycle = FindCycle(*wf);
  if (!cycle.empty()) {
    return InvalidArgument(wf->path + ": the steps' needs form a cycle: " + cycle);
  }
  // Kahn's algorithm, taking ready steps in file order so that the order (and
  // so what starts first when resources are short) follows the file.
  std::map<std::string, int> missing;
  for (const std::string& n : file_order) {
    missing[n] = static_cast<int>(wf->steps.at(n).needs.size());
  }
  std::set<std::string> done;
  while (wf->order.size() + std::count_if(file_order.begin(), file_order.end(),
                                          [&](auto& n) { return wf->steps.at(n).handler; }) <
         file_order.size()) {
    bool progressed = false;
    for (const std::string& n : file_order) {
      const Step& s = wf->steps.at(n);
      if (s.handler || done.count(n)) continue;
      bool ready = std::all_of(s.needs.begin(), s.needs.end(),
                               [&](const std::string& m) { return done.count(m) > 0; });
      if (ready) {
        done.insert(n);
        wf->order.push_back(n);
        progressed = true;
      }
    }
    if (!progressed) break;  // unreachable: FindCycle found none
  }
  return Status();
}

}  // namespace

std::chrono::milliseconds RetryPolicy::Delay(int retry) const {
  double ms = static_cast<double>(backoff.count()) * std::pow(factor, std::max(0, retry - 1));
  ms = std::min(ms, static_cast<double>(max_backoff.count()));
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

bool RetryPolicy::Retries(int exit_code) const {
  if (exit_code == 0) return false;
  if (exit_codes.empty()) return true;
  return std::find(exit_codes.begin(), exit_codes.end(), exit_code) != exit_codes.end();
}

Result<Workflow> ParseWorkflow(std::string_view yaml, const std::string& path) {
  ASSIGN_OR_RETURN(Config c, Config::LoadString(yaml, path));
  RETURN_IF_ERROR(c.CheckKnownKeys("", kTopKeys));
  Workflow wf;
  wf.path = fs::absolute(path).lexically_normal().string();
  wf.dir = fs::path(wf.path).parent_path().string();
  wf.digest = security::Sha256Hex(yaml);
  std::string stem = fs::path(path).stem().string();
  ASSIGN_OR_RETURN(wf.name, c.GetString("name", stem));
  if (!ValidName(wf.name)) {
    return InvalidArgument(c.Locate("name") + ": workflow name '" + wf.name +
                           "' must be 1-64 letters, digits, '_', '-' or '.'");
  }
  ASSIGN_OR_RETURN(wf.container_runtime, c.GetString("container_runtime", "docker"));
  ASSIGN_OR_RETURN(Defaults d, ParseDefaults(c, wf.dir));
  Prerequisites workflow_requires;
  if (c.Has("requires")) {
    ASSIGN_OR_RETURN(Config r, c.Sub("requires"));
    ASSIGN_OR_RETURN(workflow_requires, ParsePrerequisites(r));
  }
  Step failure;
  RETURN_IF_ERROR(ParseOnFailure(c, "on_failure", &failure));
  if (!c.IsMap("steps")) {
    return InvalidArgument(c.Locate("steps") + ": expected `steps:`, a map of step names to steps");
  }
  ASSIGN_OR_RETURN(std::vector<std::string> names, c.Keys("steps"));
  if (names.empty()) return InvalidArgument(c.Locate("steps") + ": the workflow has no steps");
  ASSIGN_OR_RETURN(Config steps, c.Sub("steps"));
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(Step s, ParseStep(steps, name, d, workflow_requires, failure, wf.dir));
    wf.steps.emplace(name, std::move(s));
  }
  RETURN_IF_ERROR(Validate(&wf, names));
  return wf;
}

Result<Workflow> LoadWorkflow(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status().WithContext("the workflow file");
  return ParseWorkflow(*text, path);
}

std::vector<std::string> Dependents(const Workflow& wf, const std::string& name) {
  std::set<std::string> found{name};
  // wf.order is topological, so one pass collects the transitive dependents.
  std::vector<std::string> out;
  for (const std::string& n : wf.order) {
    const Step& s = wf.steps.at(n);
    bool depends = std::any_of(s.needs.begin(), s.needs.end(),
                               [&](const std::string& m) { return found.count(m) > 0; });
    if (depends && !found.count(n)) {
      found.insert(n);
      out.push_back(n);
    }
  }
  return out;
}

}  // namespace gantry::jobs
