#include "gantry/health/slurm.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"

namespace gantry::health {
namespace {

constexpr std::chrono::seconds kScontrolTimeout{10};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool HasGantryPrefix(std::string_view reason) {
  return TrimSpace(reason).substr(0, kSlurmReasonPrefix.size()) == kSlurmReasonPrefix;
}

// Position of the value of `key` ("State") in `text`: the key must start the
// text or follow whitespace, so "NextState=" never matches "State=".
std::string_view::size_type FindField(std::string_view text, std::string_view key) {
  const std::string needle = std::string(key) + "=";
  for (size_t pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + 1)) {
    if (pos == 0 || IsSpace(text[pos - 1])) return pos + needle.size();
  }
  return std::string_view::npos;
}

// A whitespace-free field value ("IDLE+DRAIN").
std::string Field(std::string_view text, std::string_view key) {
  size_t at = FindField(text, key);
  if (at == std::string_view::npos) return "";
  size_t end = at;
  while (end < text.size() && !IsSpace(text[end])) ++end;
  return std::string(text.substr(at, end - at));
}

// Keeps a reason safe to pass as one scontrol argument and to show in
// `sinfo -R`: one line, no quotes (scontrol's own parser would take them as
// delimiters), single spaces. Square brackets become parentheses: Slurm
// appends " [user@time]" to a reason, ParseScontrolShowNode cuts it at the
// first text of that shape, and a message holding one would read back as a
// different reason (found by fuzz_health_scontrol).
std::string CleanReasonText(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '"' || c == '\'' || c == '`') continue;
    if (c == '[') c = '(';
    if (c == ']') c = ')';
    if (IsSpace(c) || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Cuts `s` to at most `max_len` bytes, ending in "..." when cut, never in
// the middle of a UTF-8 sequence.
std::string CutUtf8(std::string s, size_t max_len) {
  if (s.size() <= max_len) return s;
  if (max_len < 4) return s.substr(0, max_len);
  size_t n = max_len - 3;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s + "...";
}

std::string ShortHostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

std::string FirstLine(std::string_view text) {
  text = TrimSpace(text);
  return std::string(text.substr(0, text.find('\n')));
}

// What scontrol said, for an error message.
std::string Said(const SubprocessResult& r) {
  std::string s = FirstLine(r.err);
  if (s.empty()) s = FirstLine(r.out);
  if (s.empty()) s = "no output";
  return s;
}

}  // namespace

std::string_view SlurmActionName(SlurmAction a) {
  switch (a) {
    case SlurmAction::kNone:
      return "none";
    case SlurmAction::kDrain:
      return "drain";
    case SlurmAction::kResume:
      return "resume";
    case SlurmAction::kKeepDrained:
      return "keep-drained";
  }
  return "none";
}

SlurmAction DecideSlurmAction(Outcome overall, bool node_drained, std::string_view current_reason) {
  const bool ours = node_drained && HasGantryPrefix(current_reason);
  switch (overall) {
    case Outcome::kFail:
      // Somebody else's drain is theirs to lift: overwriting its reason would
      // let a later clean pass resume a node an admin took out.
      if (node_drained && !ours) return SlurmAction::kKeepDrained;
      return SlurmAction::kDrain;
    case Outcome::kError:
      // A check that could not run says nothing about the hardware: neither
      // drain a healthy node nor resume one gantry drained for a real fault.
      return node_drained ? SlurmAction::kKeepDrained : SlurmAction::kNone;
    case Outcome::kPass:
    case Outcome::kWarn:
    case Outcome::kSkip:
      if (!node_drained) return SlurmAction::kNone;
      return ours ? SlurmAction::kResume : SlurmAction::kKeepDrained;
  }
  return SlurmAction::kNone;
}

bool SlurmStateIsDrained(std::string_view state) {
  state = TrimSpace(state);
  while (!state.empty()) {
    size_t plus = state.find('+');
    std::string_view tok = state.substr(0, plus);
    // sinfo marks non-responding nodes with a trailing '*'; scontrol does not,
    // but a caller may hand us either.
    while (!tok.empty() && (tok.back() == '*' || tok.back() == '~' || tok.back() == '#')) {
      tok.remove_suffix(1);
    }
    if (EqualsIgnoreCase(tok, "DRAIN") || EqualsIgnoreCase(tok, "DRAINED") ||
        EqualsIgnoreCase(tok, "DRAINING")) {
      return true;
    }
    if (plus == std::string_view::npos) break;
    state.remove_prefix(plus + 1);
  }
  return false;
}

Result<SlurmNodeState> ParseScontrolShowNode(std::string_view text) {
  // With several nodes (a hostlist) only the first record counts; with -o a
  // record is one line, without it a block of indented lines.
  size_t start = FindField(text, "NodeName");
  if (start == std::string_view::npos) {
    return InvalidArgument("scontrol show node output has no NodeName= field: '" + FirstLine(text) +
                           "'");
  }
  start -= std::string_view("NodeName=").size();
  std::string_view rec = text.substr(start);
  // The next record starts a line with NodeName= (a "NodeName=" inside a
  // field, e.g. in a free-text Reason=, does not end this one; found by
  // fuzz_health_scontrol).
  for (size_t nl = rec.find('\n'); nl != std::string_view::npos; nl = rec.find('\n', nl + 1)) {
    std::string_view line = rec.substr(nl + 1);
    line.remove_prefix(std::min(line.size(), line.find_first_not_of(" \t")));
    if (line.starts_with("NodeName=")) {
      rec = rec.substr(0, nl + 1);
      break;
    }
  }

  SlurmNodeState st;
  st.name = Field(rec, "NodeName");
  // Fields are looked up before Reason= only: a reason is free text and may
  // contain "State=".
  size_t reason_at = FindField(rec, "Reason");
  std::string_view head = reason_at == std::string_view::npos ? rec : rec.substr(0, reason_at);
  st.state = Field(head, "State");
  if (st.state.empty()) {
    return InvalidArgument("scontrol show node output for '" + st.name +
                           "' has no State= field: '" + FirstLine(rec) + "'");
  }
  st.drained = SlurmStateIsDrained(st.state);
  if (reason_at != std::string_view::npos) {
    std::string_view value = rec.substr(reason_at);
    value = value.substr(0, value.find('\n'));
    // Slurm appends " [user@YYYY-MM-DDThh:mm:ss]"; newer versions may print
    // more fields after it, so the reason ends where the suffix starts.
    static const std::regex kSuffix(R"(\s*\[[^\]\s]*@\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\])");
    std::string v(value);
    std::smatch m;
    if (std::regex_search(v, m, kSuffix)) v.resize(static_cast<size_t>(m.position(0)));
    st.reason = std::string(TrimSpace(v));
    if (st.reason == "(null)") st.reason.clear();
  }
  return st;
}

std::string SlurmDrainReason(const HealthReport& report, size_t max_len) {
  // The first *fail* names the fault; an earlier error result (a check that
  // could not run) would send the admin after the wrong thing.
  const CheckResult* first = nullptr;
  for (const auto& r : report.results) {
    if (r.outcome == Outcome::kFail) {
      first = &r;
      break;
    }
  }
  if (first == nullptr) {
    for (const auto& r : report.results) {
      if (r.outcome == Outcome::kError) {
        first = &r;
        break;
      }
    }
  }
  std::string body;
  if (first == nullptr) {
    body = "health check failed";
  } else {
    std::string msg = CleanReasonText(first->message);
    body = CleanReasonText(first->name) + ": " + (msg.empty() ? "failed" : msg);
  }
  return CutUtf8(std::string(kSlurmReasonPrefix) + " " + body, max_len);
}

Result<SlurmOutcome> ApplySlurmVerdict(const HealthReport& report, const SlurmOptions& options) {
  std::string node = options.node;
  if (node.empty()) {
    const char* env = std::getenv("SLURMD_NODENAME");
    node = env != nullptr ? env : "";
  }
  if (node.empty()) node = ShortHostname();
  if (node.empty()) {
    return InvalidArgument("no Slurm node name: pass --node, or set SLURMD_NODENAME");
  }
  for (char c : node) {
    if (IsSpace(c) || c == '=' || c == '"' || c == '\'' || static_cast<unsigned char>(c) < 0x20) {
      return InvalidArgument("Slurm node name '" + node +
                             "' contains whitespace, quotes or '=': pass a single node name");
    }
  }
  if (node.front() == '-') {
    return InvalidArgument("Slurm node name '" + node + "' starts with '-': pass a node name");
  }
  const std::string scontrol = options.scontrol.empty() ? "scontrol" : options.scontrol;

  std::vector<std::string> show = {scontrol, "show", "node", "-o", node};
  auto ran = RunSubprocess(show, kScontrolTimeout);
  if (!ran.ok()) {
    // A scontrol without a usable slurm.conf may wait on DNS for a configless
    // controller until the deadline: say where to look.
    return Unavailable(ran.status().message() +
                       " (is Slurm's client installed, slurmctld running and SLURM_CONF right?)");
  }
  SubprocessResult shown = *std::move(ran);
  if (shown.exit_code != 0) {
    std::string said = Said(shown);
    // "Node <name> not found" (22.05 prints it on stdout).
    if (said.find("not found") != std::string::npos && said.find(node) != std::string::npos) {
      return NotFound("Slurm does not know node '" + node + "' (" + JoinArgv(show) + ": " + said +
                      "): pass the Slurm node name with --node");
    }
    return Unavailable(JoinArgv(show) + " failed with exit code " +
                       std::to_string(shown.exit_code) + ": " + said +
                       " (is slurmctld running and SLURM_CONF right?)");
  }
  auto parsed = ParseScontrolShowNode(shown.out);
  if (!parsed.ok()) {
    if (FirstLine(shown.out).find("not found") != std::string::npos) {
      return NotFound("Slurm does not know node '" + node + "' (" + JoinArgv(show) + ": " +
                      FirstLine(shown.out) + "): pass the Slurm node name with --node");
    }
    return Unavailable(parsed.status().message() + " (from " + JoinArgv(show) + ")");
  }
  SlurmNodeState st = *std::move(parsed);
  if (st.name != node) {
    return NotFound(JoinArgv(show) + " answered for node '" + st.name + "', not '" + node +
                    "': pass the Slurm node name with --node");
  }

  SlurmOutcome out;
  out.node = node;
  out.action = DecideSlurmAction(report.overall, st.drained, st.reason);
  const std::string dry = options.dry_run ? "dry run: would " : "";
  std::vector<std::string> update;
  switch (out.action) {
    case SlurmAction::kNone:
      out.reason = st.reason;
      out.message = report.overall == Outcome::kError
                        ? "node " + node + " left as it is (" + st.state +
                              "): checks could not run, which is not a hardware fault"
                        : "node " + node + " is in service (" + st.state + "); nothing to do";
      return out;
    case SlurmAction::kKeepDrained:
      out.reason = st.reason;
      if (!HasGantryPrefix(st.reason)) {
        out.message = "node " + node + " stays drained (" + st.state +
                      "): drained by someone else" +
                      (st.reason.empty() ? "" : " with reason '" + st.reason + "'") +
                      "; gantry only resumes nodes whose reason starts with 'gantry:'";
      } else {
        out.message = "node " + node + " stays drained ('" + st.reason +
                      "'): checks could not run, so the fault is not known to be fixed";
      }
      return out;
    case SlurmAction::kDrain:
      out.reason = SlurmDrainReason(report);
      if (st.drained && st.reason == out.reason) {
        out.message = "node " + node + " is already drained with reason '" + out.reason + "'";
        return out;
      }
      out.message = (options.dry_run ? dry + "drain" : std::string("drained")) + " node " + node +
                    ": " + out.reason;
      update = {scontrol, "update", "NodeName=" + node, "State=DRAIN", "Reason=" + out.reason};
      break;
    case SlurmAction::kResume:
      out.reason = st.reason;
      out.message = (options.dry_run ? dry + "resume" : std::string("resumed")) + " node " + node +
                    " (was drained with '" + st.reason + "')";
      update = {scontrol, "update", "NodeName=" + node, "State=RESUME"};
      break;
  }
  if (options.dry_run) return out;

  ASSIGN_OR_RETURN(SubprocessResult updated, RunSubprocess(update, kScontrolTimeout));
  if (updated.exit_code != 0) {
    return Unavailable(JoinArgv(update) + " failed with exit code " +
                       std::to_string(updated.exit_code) + ": " + Said(updated) +
                       " (scontrol update needs SlurmUser or root)");
  }
  return out;
}

}  // namespace gantry::health
