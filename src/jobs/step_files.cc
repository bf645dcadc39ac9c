// Up-to-date checks and command-line substitution for the runner.
#include "step_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "gantry/security/crypto.h"

namespace gantry::jobs {
namespace {

namespace fs = std::filesystem;

bool HasGlob(const std::string& p) { return p.find_first_of("*?[") != std::string::npos; }

// Newest (or oldest) mtime in nanoseconds of `files`; a directory counts by
// its own mtime, like make.
std::optional<int64_t> MTime(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::vector<std::string> ExpandPatterns(const std::string& workdir,
                                        const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    std::string full = fs::path(p).is_absolute() ? p : (fs::path(workdir) / p).string();
    if (!HasGlob(p)) {
      if (MTime(full)) out.push_back(full);
      continue;
    }
    glob_t g{};
    if (::glob(full.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string Fingerprint(const Step& s) {
  // Length-prefixed fields, so no two different steps give the same text.
  std::string text;
  auto add = [&text](std::string_view field) {
    text += std::to_string(field.size());
    text += ':';
    text.append(field);
  };
  add("argv");
  for (const std::string& a : s.argv) add(a);
  add("shell");
  add(s.shell);
  add("workdir");
  add(s.workdir);
  add("env");
  for (const auto& [k, v] : s.env) {
    add(k);
    add(v);
  }
  add("image");
  add(s.image);
  add("inputs");
  for (const std::string& i : s.inputs) add(i);
  add("outputs");
  for (const std::string& o : s.outputs) add(o);
  if (s.sweep) {
    add("sweep");
    add(s.sweep->primary_metric);
    add(std::to_string(s.sweep->max_total_trials));
    add(std::to_string(s.sweep->seed));
    for (const ParamDomain& d : s.sweep->space) {
      add(d.name);
      add(std::to_string(static_cast<int>(d.kind)));
      add(Json(d.values).dump());
      add(std::to_string(d.min_value) + "," + std::to_string(d.max_value) + "," +
          std::to_string(d.q) + "," + std::to_string(d.upper));
    }
  }
  return security::Sha256Hex(text);
}

std::optional<std::string> WhyRun(const Step& s, const std::string& fingerprint,
                                  const std::string& previous_fingerprint) {
  if (s.outputs.empty()) return "it declares no outputs";
  if (previous_fingerprint.empty()) return "no earlier success is recorded";
  if (previous_fingerprint != fingerprint) {
    return "its command, environment or declared files changed since the last success";
  }
  std::optional<int64_t> oldest_output;
  for (const std::string& pattern : s.outputs) {
    std::vector<std::string> files = ExpandPatterns(s.workdir, {pattern});
    if (files.empty()) return "output " + pattern + " is missing";
    for (const std::string& f : files) {
      std::optional<int64_t> t = MTime(f);
      if (t && (!oldest_output || *t < *oldest_output)) oldest_output = t;
    }
  }
  for (const std::string& pattern : s.inputs) {
    std::vector<std::string> files = ExpandPatterns(s.workdir, {pattern});
    if (files.empty()) return "input " + pattern + " is missing";
    for (const std::string& f : files) {
      std::optional<int64_t> t = MTime(f);
      if (t && oldest_output && *t > *oldest_output) {
        return "input " + fs::path(f).lexically_relative(s.workdir).string() +
               " is newer than its outputs";
      }
    }
  }
  return std::nullopt;
}

Result<std::string> Substitute(std::string_view text,
                               const std::map<std::string, std::string>& vars,
                               std::string_view where) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = text.find("${{", pos);
    if (open == std::string_view::npos) break;
    size_t close = text.find("}}", open + 3);
    if (close == std::string_view::npos) {
      return InvalidArgument(std::string(where) + ": '${{' without '}}' in \"" + std::string(text) +
                             "\"");
    }
    out.append(text.substr(pos, open - pos));
    std::string name(text.substr(open + 3, close - open - 3));
    // ${{ name }} with spaces, as in Azure ML and GitHub Actions.
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    auto it = vars.find(name);
    if (it == vars.end()) {
      std::string known;
      for (const auto& [k, v] : vars) known += (known.empty() ? "" : ", ") + k;
      return InvalidArgument(std::string(where) + ": unknown variable ${{" + name +
                             "}} (known here: " + (known.empty() ? "none" : known) + ")");
    }
    out += it->second;
    pos = close + 2;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace gantry::jobs
