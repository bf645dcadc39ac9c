// The run's state file: JSON in and out, written atomically.
#include "gantry/jobs/state.h"

#include <filesystem>

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kFormat = "gantry.jobs.state/1";

struct StateName {
  StepState state;
  std::string_view name;
};
constexpr StateName kStateNames[] = {
    {StepState::kPending, "pending"},     {StepState::kWaiting, "waiting"},
    {StepState::kRunning, "running"},     {StepState::kSucceeded, "succeeded"},
    {StepState::kSkipped, "skipped"},     {StepState::kFailed, "failed"},
    {StepState::kCancelled, "cancelled"}, {StepState::kUpstreamFailed, "upstream_failed"},
};

Json ParamsJson(const ParamValues& p) {
  Json out = Json::array();
  for (const auto& [name, value] : p) out.push_back(Json::array({name, value}));
  return out;
}

Json OptionalNumber(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

Json TrialJson(const TrialRecord& t) {
  return {{"index", t.index},
          {"params", ParamsJson(t.params)},
          {"state", StepStateName(t.state)},
          {"paused", t.paused},
          {"pruned", t.pruned},
          {"pruned_at", t.pruned_at},
          {"attempts", t.attempts},
          {"exit_code", t.exit_code},
          {"job_id", t.job_id},
          {"dir", t.dir},
          {"last_step", t.last_step},
          {"last_value", OptionalNumber(t.last_value)},
          {"best_value", OptionalNumber(t.best_value)},
          {"metrics_offset", t.metrics_offset},
          {"reports", t.reports},
          {"started", t.started},
          {"finished", t.finished}};
}

// Readers that name the field at fault. The file is ours, but it may be
// truncated by hand or come from another version.
struct Reader {
  const Json& j;
  std::string where;

  Status Bad(std::string_view key, std::string_view want) const {
    return InvalidArgument(where + ": field '" + std::string(key) + "' " + std::string(want) +
                           "; the state file is damaged or from another version (move it away "
                           "and start over with gantry jobs run)");
  }
  template <typename T>
  Status Get(std::string_view key, T* out) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status();  // keep the default
    try {
      *out = it->get<T>();
    } catch (const std::exception&) {
      return Bad(key, "has the wrong type");
    }
    return Status();
  }
  Status State(std::string_view key, StepState* out) const {
    std::string name;
    RETURN_IF_ERROR(Get(key, &name));
    if (name.empty()) return Status();
    Result<StepState> s = ParseStepState(name);
    if (!s.ok()) return Bad(key, "is not a step state ('" + name + "')");
    *out = *s;
    return Status();
  }
  Status Optional(std::string_view key, std::optional<double>* out) const {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status();
    if (!it->is_number()) return Bad(key, "is not a number");
    *out = it->get<double>();
    return Status();
  }
};

Result<TrialRecord> TrialFromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": expected an object");
  Reader r{j, where};
  TrialRecord t;
  RETURN_IF_ERROR(r.Get("index", &t.index));
  if (auto it = j.find("params"); it != j.end() && it->is_array()) {
    for (const Json& p : *it) {
      if (!p.is_array() || p.size() != 2 || !p[0].is_string())
        return r.Bad("params", "is malformed");
      t.params.emplace_back(p[0].get<std::string>(), p[1]);
    }
  }
  RETURN_IF_ERROR(r.State("state", &t.state));
  RETURN_IF_ERROR(r.Get("paused", &t.paused));
  RETURN_IF_ERROR(r.Get("pruned", &t.pruned));
  RETURN_IF_ERROR(r.Get("pruned_at", &t.pruned_at));
  RETURN_IF_ERROR(r.Get("attempts", &t.attempts));
  RETURN_IF_ERROR(r.Get("exit_code", &t.exit_code));
  RETURN_IF_ERROR(r.Get("job_id", &t.job_id));
  RETURN_IF_ERROR(r.Get("dir", &t.dir));
  RETURN_IF_ERROR(r.Get("last_step", &t.last_step));
  RETURN_IF_ERROR(r.Optional("last_value", &t.last_value));
  RETURN_IF_ERROR(r.Optional("best_value", &t.best_value));
  RETURN_IF_ERROR(r.Get("metrics_offset", &t.metrics_offset));
  RETURN_IF_ERROR(r.Get("reports", &t.reports));
  RETURN_IF_ERROR(r.Get("started", &t.started));
  RETURN_IF_ERROR(r.Get("finished", &t.finished));
  return t;
}

Result<StepRecord> StepFromJson(const Json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": expected an object");
  Reader r{j, where};
  StepRecord s;
  RETURN_IF_ERROR(r.State("state", &s.state));
  RETURN_IF_ERROR(r.Get("attempts", &s.attempts));
  RETURN_IF_ERROR(r.Get("exit_code", &s.exit_code));
  RETURN_IF_ERROR(r.Get("job_id", &s.job_id));
  RETURN_IF_ERROR(r.Get("reason", &s.reason));
  RETURN_IF_ERROR(r.Get("fingerprint", &s.fingerprint));
  RETURN_IF_ERROR(r.Get("started", &s.started));
  RETURN_IF_ERROR(r.Get("finished", &s.finished));
  RETURN_IF_ERROR(r.Get("next_attempt_at", &s.next_attempt_at));
  if (auto it = j.find("prereq"); it != j.end() && it->is_array()) s.prereq = *it;
  if (auto it = j.find("trials"); it != j.end()) {
    if (!it->is_array()) return r.Bad("trials", "is not a list");
    for (size_t i = 0; i < it->size(); ++i) {
      ASSIGN_OR_RETURN(TrialRecord t,
                       TrialFromJson((*it)[i], where + ".trials[" + std::to_string(i) + "]"));
      s.trials.push_back(std::move(t));
    }
  }
  if (auto it = j.find("best_trial"); it != j.end() && it->is_number_integer()) {
    s.best_trial = it->get<int>();
  }
  return s;
}

}  // namespace

std::string_view StepStateName(StepState s) {
  for (const StateName& n : kStateNames) {
    if (n.state == s) return n.name;
  }
  return "unknown";
}

Result<StepState> ParseStepState(std::string_view name) {
  for (const StateName& n : kStateNames) {
    if (n.name == name) return n.state;
  }
  return InvalidArgument("unknown step state '" + std::string(name) + "'");
}

bool IsTerminal(StepState s) {
  return s != StepState::kPending && s != StepState::kWaiting && s != StepState::kRunning;
}

Json ToJson(const RunRecord& r) {
  Json steps = Json::object();
  for (const auto& [name, s] : r.steps) {
    Json j = {{"state", StepStateName(s.state)},
              {"attempts", s.attempts},
              {"exit_code", s.exit_code},
              {"job_id", s.job_id},
              {"reason", s.reason},
              {"fingerprint", s.fingerprint},
              {"started", s.started},
              {"finished", s.finished},
              {"next_attempt_at", s.next_attempt_at},
              {"prereq", s.prereq}};
    if (!s.trials.empty()) {
      Json trials = Json::array();
      for (const TrialRecord& t : s.trials) trials.push_back(TrialJson(t));
      j["trials"] = std::move(trials);
      j["best_trial"] = s.best_trial ? Json(*s.best_trial) : Json(nullptr);
    }
    steps[name] = std::move(j);
  }
  return {{"format", r.format},
          {"workflow", r.workflow},
          {"workflow_path", r.workflow_path},
          {"workflow_digest", r.workflow_digest},
          {"run_id", r.run_id},
          {"backend", r.backend},
          {"state", r.state},
          {"runner_pid", r.runner_pid},
          {"started", r.started},
          {"finished", r.finished},
          {"steps", std::move(steps)}};
}

Result<RunRecord> RunRecordFromJson(const Json& j, const std::string& origin) {
  if (!j.is_object()) return InvalidArgument(origin + ": not a gantry jobs state file");
  Reader r{j, origin};
  RunRecord rec;
  RETURN_IF_ERROR(r.Get("format", &rec.format));
  if (rec.format != kFormat) {
    return InvalidArgument(origin + ": format '" + rec.format + "' is not " + std::string(kFormat) +
                           " (a state file of another gantry version?)");
  }
  RETURN_IF_ERROR(r.Get("workflow", &rec.workflow));
  RETURN_IF_ERROR(r.Get("workflow_path", &rec.workflow_path));
  RETURN_IF_ERROR(r.Get("workflow_digest", &rec.workflow_digest));
  RETURN_IF_ERROR(r.Get("run_id", &rec.run_id));
  RETURN_IF_ERROR(r.Get("backend", &rec.backend));
  RETURN_IF_ERROR(r.Get("state", &rec.state));
  RETURN_IF_ERROR(r.Get("runner_pid", &rec.runner_pid));
  RETURN_IF_ERROR(r.Get("started", &rec.started));
  RETURN_IF_ERROR(r.Get("finished", &rec.finished));
  auto it = j.find("steps");
  if (it == j.end() || !it->is_object()) return r.Bad("steps", "is missing");
  for (const auto& [name, sj] : it->items()) {
    ASSIGN_OR_RETURN(StepRecord s, StepFromJson(sj, origin + ": steps." + name));
    rec.steps.emplace(name, std::move(s));
  }
  return rec;
}

Result<RunRecord> ReadState(const std::string& dir) {
  std::string path = (fs::path(dir) / "state.json").string();
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) return text.status();
    return NotFound("no run recorded in " + dir + " (" + path +
                    " does not exist): start one with gantry jobs run");
  }
  Json j = Json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    return InvalidArgument(path +
                           ": not valid JSON; the state file is damaged (move it away and "
                           "start over with gantry jobs run)");
  }
  return RunRecordFromJson(j, path);
}

Status WriteState(const std::string& dir, const RunRecord& r) {
  std::string path = (fs::path(dir) / "state.json").string();
  Status s =
      WriteFileAtomic(path, ToJson(r).dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
  if (!s.ok()) return s.WithContext("the state file (the previous one is kept)");
  return Status();
}

std::string DefaultStateDir(const std::string& workflow_dir, const std::string& workflow_name) {
  return (fs::path(workflow_dir) / ".gantry" / "jobs" / workflow_name).string();
}

}  // namespace gantry::jobs
