// SnapshotWriter (in-place reuse of the previous collection) and the
// Prometheus text / OpenMetrics renderer.
#include <algorithm>
#include <charconv>
#include <cmath>

#include "gantry/agent/collector.h"
#include "gantry/core/http_parser.h"
#include "gantry/core/metrics.h"

namespace gantry::agent {

SnapshotWriter::SnapshotWriter(Snapshot* snapshot, int64_t time_ms) : snap_(snapshot) {
  snap_->time_ms = time_ms;
  series_used_.reserve(snap_->families.size() + 8);
}

SnapshotWriter::FamilyId SnapshotWriter::Begin(std::string_view name, std::string_view help,
                                               MetricType type) {
  // The previous collection had the same families in the same begin order
  // almost always, but Finish sorted them; look for the name in the unused
  // part and swap it into the next slot.
  auto& fams = snap_->families;
  size_t slot = families_used_;
  size_t found = fams.size();
  for (size_t i = slot; i < fams.size(); ++i) {
    if (fams[i].name == name) {
      found = i;
      break;
    }
  }
  if (found == fams.size()) {
    if (slot < fams.size()) {
      // Reuse the slot's storage for a different family: move it to the end
      // so a later Begin of its name still finds it.
      fams.emplace_back(std::move(fams[slot]));
      fams[slot] = Family();
    } else {
      fams.emplace_back();
    }
    fams[slot].name.assign(name);
  } else if (found != slot) {
    std::swap(fams[slot], fams[found]);
  }
  Family& f = fams[slot];
  if (f.help != help) f.help.assign(help);
  f.type = type;
  series_used_.push_back(0);
  return families_used_++;
}

template <typename Labels>
void SnapshotWriter::AddImpl(FamilyId family, double value, const Labels& labels) {
  size_t& used = series_used_[family];
  auto& series = snap_->families[family].series;
  if (used == series.size()) series.emplace_back();
  Series& s = series[used++];
  s.value = value;
  if (s.labels.size() != labels.size()) s.labels.resize(labels.size());
  size_t i = 0;
  for (const LabelView& l : labels) {
    auto& [k, v] = s.labels[i++];
    // assign() into existing capacity: no allocation when the series is the
    // same as in the previous collection.
    if (k != l.first) k.assign(l.first);
    if (v != l.second) v.assign(l.second);
  }
}

void SnapshotWriter::Add(FamilyId family, double value, std::initializer_list<LabelView> labels) {
  AddImpl(family, value, labels);
}

void SnapshotWriter::Add(FamilyId family, double value, const std::vector<LabelView>& labels) {
  AddImpl(family, value, labels);
}

bool SnapshotWriter::Begun(std::string_view name) const {
  for (size_t i = 0; i < families_used_; ++i) {
    if (snap_->families[i].name == name) return true;
  }
  return false;
}

void SnapshotWriter::Finish() {
  auto& fams = snap_->families;
  // Drop families not begun this time, and families without series.
  size_t out = 0;
  for (size_t i = 0; i < families_used_; ++i) {
    fams[i].series.resize(series_used_[i]);
    if (fams[i].series.empty()) continue;
    if (out != i) std::swap(fams[out], fams[i]);
    ++out;
  }
  fams.resize(out);
  auto by_name = [](const Family& a, const Family& b) { return a.name < b.name; };
  if (!std::is_sorted(fams.begin(), fams.end(), by_name)) {
    std::sort(fams.begin(), fams.end(), by_name);
  }
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

ExpositionFormat NegotiateFormat(const std::string* accept) {
  if (accept == nullptr) return ExpositionFormat::kPrometheusText;
  std::string_view a = *accept;
  // Each comma-separated media range; openmetrics wins unless refused (q=0).
  while (!a.empty()) {
    size_t comma = a.find(',');
    std::string_view range = a.substr(0, comma);
    a = comma == std::string_view::npos ? std::string_view() : a.substr(comma + 1);
    while (!range.empty() && (range.front() == ' ' || range.front() == '\t'))
      range.remove_prefix(1);
    std::string_view type = range.substr(0, range.find(';'));
    while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
    if (!http::IEquals(type, "application/openmetrics-text")) continue;
    size_t q = range.find("q=");
    if (q != std::string_view::npos) {
      std::string_view qv = range.substr(q + 2);
      double qd = 1;
      std::from_chars(qv.data(), qv.data() + qv.size(), qd);
      if (qd <= 0) continue;
    }
    return ExpositionFormat::kOpenMetrics;
  }
  return ExpositionFormat::kPrometheusText;
}

std::string_view ContentType(ExpositionFormat format) {
  return format == ExpositionFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

void RenderExposition(const Snapshot& snapshot, ExpositionFormat format, std::string* out) {
  out->clear();
  const bool om = format == ExpositionFormat::kOpenMetrics;
  for (const Family& f : snapshot.families) {
    if (f.series.empty()) continue;
    std::string_view name = f.name;
    std::string_view type = f.type == MetricType::kCounter ? "counter"
                            : f.type == MetricType::kGauge ? "gauge"
                            : om                           ? "unknown"
                                                           : "untyped";
    std::string_view family_name = name;
    if (om && f.type == MetricType::kCounter) {
      if (EndsWith(name, "_total")) {
        family_name = name.substr(0, name.size() - 6);
      } else {
        type = "unknown";  // keeps the sample name the same as in the text format
      }
    }
    if (om) {
      out->append("# TYPE ").append(family_name).append(" ").append(type).append("\n");
    }
    if (!f.help.empty()) {
      out->append("# HELP ").append(family_name).append(" ");
      metrics::AppendEscaped(out, f.help, /*quote=*/om);
      out->push_back('\n');
    }
    if (!om) out->append("# TYPE ").append(family_name).append(" ").append(type).append("\n");
    for (const Series& s : f.series) {
      out->append(name);
      if (!s.labels.empty()) {
        out->push_back('{');
        bool first = true;
        for (const auto& [k, v] : s.labels) {
          if (!first) out->push_back(',');
          first = false;
          out->append(k).append("=\"");
          metrics::AppendEscaped(out, v, /*quote=*/true);
          out->push_back('"');
        }
        out->push_back('}');
      }
      out->push_back(' ');
      metrics::AppendSampleValue(out, s.value);
      out->push_back('\n');
    }
  }
  if (om) out->append("# EOF\n");
}

}  // namespace gantry::agent
