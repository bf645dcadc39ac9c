#include "exposition_text.h"

#include <fmt/format.h>

#include <cctype>

#include "gantry/core/text.h"

namespace gantry::autoscale {

std::string ExpositionSample::Label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}

namespace {

bool NameChar(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

}  // namespace

Result<std::vector<ExpositionSample>> ParseExpositionText(std::string_view text) {
  std::vector<ExpositionSample> out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    line = TrimSpace(line);
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](std::string_view what) {
      return InvalidArgument(
          fmt::format("exposition text line {}: {}: '{}'", line_no, what, line.substr(0, 120)));
    };
    ExpositionSample s;
    size_t i = 0;
    while (i < line.size() && NameChar(line[i], i == 0)) ++i;
    if (i == 0) return bad("expected a metric name");
    s.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        size_t start = i;
        while (i < line.size() && NameChar(line[i], i == start)) ++i;
        if (i == start) return bad("expected a label name");
        std::string key(line.substr(start, i - start));
        if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          return bad("expected =\"value\" after a label name");
        }
        i += 2;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          char c = line[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\' && i < line.size()) {
            char e = line[i++];
            value += e == 'n' ? '\n' : e;
          } else {
            value += c;
          }
        }
        if (!closed) return bad("unterminated label value");
        s.labels.emplace_back(std::move(key), std::move(value));
      }
    }
    std::string_view rest = TrimSpace(line.substr(i));
    std::string_view value = rest.substr(0, rest.find_first_of(" \t"));
    if (value.empty()) return bad("expected a value");
    if (value == "NaN" || value == "+Inf" || value == "-Inf" || value == "Inf") continue;
    if (!ParseNumber(value, &s.value)) return bad("the value is not a number");
    if (out.size() >= 1'000'000) return bad("more than 1,000,000 samples");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gantry::autoscale
