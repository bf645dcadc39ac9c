// ParseMetricLine: the two line formats a trial may append to its metrics
// file, "name=value ..." pairs and one JSON object per line.
#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "gantry/core/text.h"
#include "gantry/jobs/sweep.h"

namespace gantry::jobs {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Metric names as trainers write them: "accuracy", "val/loss", "top-1.acc".
bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  unsigned char first = static_cast<unsigned char>(name.front());
  if (!std::isalpha(first) && first != '_') return false;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!std::isalnum(u) && c != '_' && c != '-' && c != '.' && c != '/') return false;
  }
  return true;
}

Status BadName(std::string_view name) {
  return InvalidArgument(fmt::format(
      "metric line: '{}' is not a metric name (a letter or '_', then letters, digits, '_', '-', "
      "'.', '/')",
      name));
}

bool IsNaNWord(std::string_view s) {
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  return EqualsIgnoreCase(s, "nan");
}

// Adds `name` = `value` to `out`, or the step when the name is "step".
Status AddPair(std::string_view name, double value, bool integral, MetricLine* out) {
  if (name == "step") {
    if (out->step.has_value()) return InvalidArgument("metric line: 'step' given twice");
    // 2^53: beyond it a double no longer holds every integer.
    if (!integral || std::isnan(value) || value < 0 || value > 9007199254740992.0 ||
        value != std::floor(value)) {
      return InvalidArgument(
          fmt::format("metric line: step must be a non-negative integer, got {}", value));
    }
    out->step = static_cast<int64_t>(value);
    return Status::Ok();
  }
  if (!ValidName(name)) return BadName(name);
  for (const auto& [seen, v] : out->values) {
    if (seen == name) return InvalidArgument(fmt::format("metric line: '{}' given twice", name));
  }
  out->values.emplace_back(std::string(name), value);
  return Status::Ok();
}

Result<MetricLine> ParsePairs(std::string_view line) {
  MetricLine out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size()) break;
    size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    std::string_view token = line.substr(i, end - i);
    i = end;
    size_t eq = token.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format(
          "metric line: '{}' is not name=value (write \"accuracy=0.91 step=3\" or a JSON object)",
          token));
    }
    std::string_view name = token.substr(0, eq);
    std::string_view text = token.substr(eq + 1);
    if (name == "step") {
      int64_t step = 0;
      if (!ParseNumber(text, &step) || step < 0) {
        return InvalidArgument(
            fmt::format("metric line: step must be a non-negative integer, got '{}'", text));
      }
      RETURN_IF_ERROR(AddPair(name, static_cast<double>(step), true, &out));
      continue;
    }
    double value = 0;
    if (IsNaNWord(text)) {
      value = kNaN;
    } else if (!ParseNumber(text, &value)) {
      return InvalidArgument(fmt::format(
          "metric line: '{}': '{}' is not a finite number (numbers such as 0.91 or 1e-3, or nan)",
          token, text));
    }
    RETURN_IF_ERROR(AddPair(name, value, false, &out));
  }
  return out;
}

// Python's json.dumps writes NaN for float('nan'), which is not JSON; turn a
// bare NaN outside strings into null so such lines parse.
std::string NaNToNull(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (text.substr(i, 3) == "NaN") {
      out += "null";
      i += 2;
      continue;
    }
    out += c;
  }
  return out;
}

Result<MetricLine> ParseJsonLine(std::string_view line) {
  Result<Json> parsed = ParseJson(line, "metric line");
  if (!parsed.ok() && line.find("NaN") != std::string_view::npos) {
    parsed = ParseJson(NaNToNull(line), "metric line");
  }
  if (!parsed.ok()) return parsed.status();
  const Json& obj = *parsed;
  if (!obj.is_object()) return InvalidArgument("metric line: expected a JSON object");
  MetricLine out;
  for (const auto& [name, v] : obj.items()) {
    if (v.is_number()) {
      double value = v.get<double>();
      RETURN_IF_ERROR(AddPair(name, value, v.is_number_integer() || name == "step", &out));
    } else if (name != "step" &&
               (v.is_null() || (v.is_string() && IsNaNWord(v.get<std::string>())))) {
      RETURN_IF_ERROR(AddPair(name, kNaN, false, &out));
    } else {
      return InvalidArgument(
          fmt::format("metric line: '{}' is {}, expected a number{}", name, v.dump(),
                      name == "step" ? "" : " (or null / \"nan\" for a diverged metric)"));
    }
  }
  return out;
}

}  // namespace

Result<MetricLine> ParseMetricLine(std::string_view line) {
  line = TrimSpace(line);
  if (line.empty()) return InvalidArgument("metric line: empty");
  ASSIGN_OR_RETURN(MetricLine out, line.front() == '{' ? ParseJsonLine(line) : ParsePairs(line));
  if (out.values.empty()) {
    return InvalidArgument("metric line: no metric values (only a step); add name=value pairs");
  }
  return out;
}

}  // namespace gantry::jobs
