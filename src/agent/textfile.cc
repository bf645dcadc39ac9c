// The Prometheus text format parser of the textfile collector (textfile.h).
#include "textfile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace gantry::agent {
namespace {

bool NameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool NameChar(char c) { return NameStart(c) || (c >= '0' && c <= '9'); }

// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or label name (no ':') at the
// start of *s, removed from it; "" when there is none.
std::string_view TakeName(std::string_view* s, bool metric) {
  size_t i = 0;
  auto ok = [&](char c, bool first) {
    if (metric && c == ':') return true;
    return first ? NameStart(c) : NameChar(c);
  };
  while (i < s->size() && ok((*s)[i], i == 0)) ++i;
  std::string_view n = s->substr(0, i);
  s->remove_prefix(i);
  return n;
}

void TrimLeft(std::string_view* s) {
  while (!s->empty() && (s->front() == ' ' || s->front() == '\t')) s->remove_prefix(1);
}

// Go's ParseFloat as the text format uses it: decimal or exponent forms,
// NaN, +Inf, -Inf (any case), an optional leading sign.
bool ParseValue(std::string_view t, double* out) {
  if (t.empty()) return false;
  std::string_view body = t;
  bool neg = false;
  if (body.front() == '+' || body.front() == '-') {
    neg = body.front() == '-';
    body.remove_prefix(1);
  }
  auto lower_is = [&](std::string_view want) {
    if (body.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      char c = body[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != want[i]) return false;
    }
    return true;
  };
  if (lower_is("inf") || lower_is("infinity")) {
    *out = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return true;
  }
  if (lower_is("nan")) {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (body.empty() || body.front() == '+' || body.front() == '-') return false;
  double v = 0;
  auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  if (r.ec != std::errc() || r.ptr != body.data() + body.size()) return false;
  *out = neg ? -v : v;
  return true;
}

// HELP text: \\ and \n are the only escapes.
void UnescapeHelp(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 1 < in.size() && (in[i + 1] == '\\' || in[i + 1] == 'n')) {
      out->push_back(in[i + 1] == 'n' ? '\n' : '\\');
      ++i;
    } else {
      out->push_back(in[i]);
    }
  }
}

struct Declared {
  std::string name;
  std::string help;
  bool has_type = false;
  std::string type;  // counter, gauge, histogram, summary, untyped
};

MetricType TypeOf(std::string_view t) {
  if (t == "counter") return MetricType::kCounter;
  if (t == "gauge") return MetricType::kGauge;
  return MetricType::kUntyped;
}

Declared* FindDeclared(std::vector<Declared>* d, std::string_view name) {
  for (Declared& x : *d) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

TextFamily* FindFamily(std::vector<TextFamily>* f, std::string_view name) {
  for (TextFamily& x : *f) {
    if (x.name == name) return &x;
  }
  return nullptr;
}

// The declared family a sample belongs to: its own name, or for histograms
// and summaries the name without _bucket/_sum/_count.
const Declared* OwnerOf(const std::vector<Declared>& d, std::string_view sample) {
  for (const Declared& x : d) {
    if (x.name == sample) return &x;
  }
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (sample.size() > suffix.size() && sample.substr(sample.size() - suffix.size()) == suffix) {
      std::string_view base = sample.substr(0, sample.size() - suffix.size());
      for (const Declared& x : d) {
        if (x.name == base && (x.type == "histogram" || x.type == "summary")) return &x;
      }
    }
  }
  return nullptr;
}

}  // namespace

Status ParsePrometheusText(std::string_view text, std::string_view origin,
                           std::vector<TextFamily>* out) {
  std::vector<Declared> declared;
  std::vector<TextFamily> mine;  // this file's families, merged into *out at the end
  size_t line_no = 0;
  auto fail = [&](std::string_view what) {
    return InvalidArgument(std::string(origin) + ":" + std::to_string(line_no) + ": " +
                           std::string(what) +
                           "; fix the file (Prometheus text format 0.0.4, no timestamps)");
  };
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    TrimLeft(&line);
    if (line.empty()) continue;
    if (line.front() == '#') {
      std::string_view rest = line.substr(1);
      TrimLeft(&rest);
      bool help =
          rest.substr(0, 4) == "HELP" && (rest.size() == 4 || rest[4] == ' ' || rest[4] == '\t');
      bool type =
          rest.substr(0, 4) == "TYPE" && (rest.size() == 4 || rest[4] == ' ' || rest[4] == '\t');
      if (!help && !type) continue;  // a comment
      rest.remove_prefix(4);
      TrimLeft(&rest);
      std::string_view name = TakeName(&rest, true);
      if (name.empty())
        return fail(help ? "HELP without a metric name" : "TYPE without a metric name");
      if (!rest.empty() && rest.front() != ' ' && rest.front() != '\t') {
        return fail("invalid metric name in " + std::string(help ? "HELP" : "TYPE"));
      }
      TrimLeft(&rest);
      Declared* d = FindDeclared(&declared, name);
      if (d == nullptr) {
        declared.emplace_back();
        d = &declared.back();
        d->name.assign(name);
      }
      if (help) {
        UnescapeHelp(rest, &d->help);
      } else {
        while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
        if (rest != "counter" && rest != "gauge" && rest != "histogram" && rest != "summary" &&
            rest != "untyped") {
          return fail("unknown metric type '" + std::string(rest) + "' for " + std::string(name));
        }
        if (d->has_type) return fail("second TYPE line for " + std::string(name));
        if (FindFamily(&mine, name) != nullptr) {
          return fail("TYPE for " + std::string(name) + " after its samples");
        }
        d->has_type = true;
        d->type.assign(rest);
      }
      continue;
    }
    // A sample: name [{labels}] value
    std::string_view rest = line;
    std::string_view name = TakeName(&rest, true);
    if (name.empty()) return fail("expected a metric name");
    TextSample sample;
    if (!rest.empty() && rest.front() == '{') {
      rest.remove_prefix(1);
      for (;;) {
        TrimLeft(&rest);
        if (!rest.empty() && rest.front() == '}') {
          rest.remove_prefix(1);
          break;
        }
        std::string_view lname = TakeName(&rest, false);
        if (lname.empty())
          return fail("expected a label name in the labels of " + std::string(name));
        TrimLeft(&rest);
        if (rest.empty() || rest.front() != '=')
          return fail("expected '=' after label " + std::string(lname));
        rest.remove_prefix(1);
        TrimLeft(&rest);
        if (rest.empty() || rest.front() != '"')
          return fail("expected '\"' to start the value of label " + std::string(lname));
        rest.remove_prefix(1);
        std::string value;
        bool closed = false;
        while (!rest.empty()) {
          char c = rest.front();
          rest.remove_prefix(1);
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (rest.empty()) break;
            char e = rest.front();
            rest.remove_prefix(1);
            if (e == 'n') {
              value.push_back('\n');
            } else if (e == '\\' || e == '"') {
              value.push_back(e);
            } else {
              return fail("invalid escape in the value of label " + std::string(lname));
            }
            continue;
          }
          value.push_back(c);
        }
        if (!closed) return fail("unterminated value of label " + std::string(lname));
        for (const auto& [k, v] : sample.labels) {
          if (k == lname) return fail("label " + std::string(lname) + " given twice");
        }
        sample.labels.emplace_back(std::string(lname), std::move(value));
        TrimLeft(&rest);
        if (!rest.empty() && rest.front() == ',') {
          rest.remove_prefix(1);
          continue;
        }
        if (!rest.empty() && rest.front() == '}') {
          rest.remove_prefix(1);
          break;
        }
        return fail("expected ',' or '}' in the labels of " + std::string(name));
      }
    }
    if (rest.empty() || (rest.front() != ' ' && rest.front() != '\t')) {
      return fail("expected a space and a value after " + std::string(name));
    }
    TrimLeft(&rest);
    size_t end = rest.find_first_of(" \t");
    std::string_view value = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    TrimLeft(&rest);
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
    if (!ParseValue(value, &sample.value)) {
      return fail("expected a number as the value of " + std::string(name) + ", got '" +
                  std::string(value) + "'");
    }
    if (!rest.empty())
      return fail("client-side timestamps are not supported (" + std::string(name) + ")");
    std::sort(sample.labels.begin(), sample.labels.end());

    TextFamily* f = FindFamily(&mine, name);
    if (f == nullptr) {
      mine.emplace_back();
      f = &mine.back();
      f->name.assign(name);
      if (const Declared* d = OwnerOf(declared, name); d != nullptr) {
        f->help = d->help;
        f->type = d->name == name ? TypeOf(d->type) : MetricType::kUntyped;
      }
    }
    for (const TextSample& s : f->samples) {
      if (s.labels == sample.labels) return fail("sample " + std::string(name) + " seen twice");
    }
    f->samples.push_back(std::move(sample));
  }
  // A family declared by an earlier file must have the same type; a series
  // must not repeat one of an earlier file.
  for (const TextFamily& f : mine) {
    const TextFamily* prev = nullptr;
    for (const TextFamily& x : *out) {
      if (x.name == f.name) prev = &x;
    }
    if (prev == nullptr) continue;
    if (prev->type != f.type) {
      line_no = 0;
      return InvalidArgument(std::string(origin) + ": " + f.name +
                             " has a different TYPE than in an earlier file; use one type");
    }
    for (const TextSample& s : f.samples) {
      for (const TextSample& p : prev->samples) {
        if (p.labels == s.labels) {
          return InvalidArgument(std::string(origin) + ": " + f.name +
                                 " repeats a series of an earlier file; each series once");
        }
      }
    }
  }
  for (TextFamily& f : mine) {
    TextFamily* prev = FindFamily(out, f.name);
    if (prev == nullptr) {
      out->push_back(std::move(f));
    } else {
      for (TextSample& s : f.samples) prev->samples.push_back(std::move(s));
    }
  }
  return Status::Ok();
}

}  // namespace gantry::agent
