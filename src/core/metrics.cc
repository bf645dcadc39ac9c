#include "gantry/core/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace gantry::metrics {
namespace {

enum Type : int { kCounter = 0, kGauge = 1, kHistogram = 2 };

std::string_view TypeName(int type) {
  switch (type) {
    case kCounter:
      return "counter";
    case kGauge:
      return "gauge";
    default:
      return "histogram";
  }
}

}  // namespace

// Prometheus accepts Go's float syntax. Integral values print without a
// fraction ("3", not "3.0" or "3e+00") because counters are mostly integers and
// exact text is easier to read and to test; others use the shortest text that
// round-trips, in %g style (so 0.0001 stays "0.0001").

void AppendSampleValue(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buf[64];
  std::to_chars_result r;
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {  // 2^53: exact as int64
    r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  }
  out->append(buf, r.ptr);
}

void AppendEscaped(std::string* out, std::string_view s, bool quote) {
  for (char c : s) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        if (quote) {
          out->append("\\\"");
        } else {
          out->push_back(c);
        }
        break;
      default:
        out->push_back(c);
    }
  }
}

namespace {

// Adds v to an atomic double. std::atomic<double>::fetch_add is a CAS loop on
// x86-64 and arm64 anyway; spelling it out keeps the memory order explicit.
void AtomicAdd(std::atomic<double>& a, double v) {
  double cur = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

}  // namespace

bool ValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool ValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::vector<double> DefaultLatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   10,   60};
}

// ---- Counter / Gauge --------------------------------------------------------

void Counter::Inc(double v) {
  if (!(v >= 0)) return;  // negative or NaN: a counter never goes down
  AtomicAdd(value_, v);
}
double Counter::Value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::Set(double v) { value_.store(v, std::memory_order_relaxed); }
void Gauge::Inc(double v) { AtomicAdd(value_, v); }
void Gauge::Dec(double v) { AtomicAdd(value_, -v); }
double Gauge::Value() const { return value_.load(std::memory_order_relaxed); }

// ---- Histogram ----------------------------------------------------------------

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  if (std::isnan(v)) return;
  // First bound >= v: an observation equal to a bound belongs to that bucket (le = "<=").
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

uint64_t Histogram::BucketCount(size_t i) const {
  return i <= bounds_.size() ? buckets_[i].load(std::memory_order_relaxed) : 0;
}

uint64_t Histogram::Count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) n += buckets_[i].load(std::memory_order_relaxed);
  return n;
}

double Histogram::Sum() const { return sum_.load(std::memory_order_relaxed); }

// ---- Registry -----------------------------------------------------------------

struct Registry::Family {
  int type;
  std::string name;
  std::string help;
  std::vector<double> bounds;            // histograms only
  std::vector<std::string> label_names;  // sorted
  struct Series {
    Labels labels;  // sorted by name
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  // Keyed by the label values in label-name order, so rendering is sorted by values.
  std::map<std::string, Series, std::less<>> series;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Result<void*> Registry::GetSeries(int type, std::string_view name_in, std::string_view help,
                                  const Labels& labels, const std::vector<double>* buckets) {
  std::string name(name_in);
  if (!ValidMetricName(name)) {
    return InvalidArgument(
        fmt::format("metric name '{}' is invalid; use [a-zA-Z_:][a-zA-Z0-9_:]* (e.g. "
                    "gantry_gateway_requests_total)",
                    name));
  }
  // Prometheus convention: counters end in _total. Appending (rather than
  // rejecting) lets callers pass either spelling and get the same family.
  if (type == kCounter && !(name.size() >= 6 && name.compare(name.size() - 6, 6, "_total") == 0)) {
    name += "_total";
  }
  Labels sorted = labels;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    const std::string& ln = sorted[i].first;
    if (!ValidLabelName(ln)) {
      return InvalidArgument(
          fmt::format("metric '{}': label name '{}' is invalid; use [a-zA-Z_][a-zA-Z0-9_]* not "
                      "starting with __",
                      name, ln));
    }
    if (i > 0 && sorted[i - 1].first == ln) {
      return InvalidArgument(
          fmt::format("metric '{}': label '{}' given twice; pass each label once", name, ln));
    }
    if (type == kHistogram && ln == "le") {
      return InvalidArgument(fmt::format(
          "metric '{}': label name 'le' is reserved for histogram buckets; rename the label",
          name));
    }
  }
  if (buckets != nullptr) {
    if (buckets->empty()) {
      return InvalidArgument(
          fmt::format("histogram '{}': no buckets given; pass e.g. DefaultLatencyBuckets()", name));
    }
    for (size_t i = 0; i < buckets->size(); ++i) {
      double b = (*buckets)[i];
      if (!std::isfinite(b)) {
        return InvalidArgument(fmt::format(
            "histogram '{}': bucket bound {} is not finite; the +Inf bucket is implicit", name, b));
      }
      if (i > 0 && !((*buckets)[i - 1] < b)) {
        return InvalidArgument(
            fmt::format("histogram '{}': buckets must be strictly ascending, but {} follows {}",
                        name, b, (*buckets)[i - 1]));
      }
    }
  }

  std::vector<std::string> label_names;
  std::string key;
  for (const auto& [ln, lv] : sorted) {
    label_names.push_back(ln);
    key.append(lv);
    key.push_back('\0');  // cannot occur inside names, so keys cannot collide
  }

  std::lock_guard<std::mutex> lock(mu_);
  auto fit = families_.find(name);
  if (fit == families_.end()) {
    auto fam = std::make_unique<Family>();
    fam->type = type;
    fam->name = name;
    fam->help = std::string(help);
    if (buckets != nullptr) fam->bounds = *buckets;
    fam->label_names = label_names;
    fit = families_.emplace(name, std::move(fam)).first;
  }
  Family& fam = *fit->second;
  if (fam.type != type) {
    return InvalidArgument(
        fmt::format("metric '{}' is already registered as a {}, not a {}; use another name", name,
                    TypeName(fam.type), TypeName(type)));
  }
  if (buckets != nullptr && fam.bounds != *buckets) {
    return InvalidArgument(fmt::format(
        "histogram '{}' is already registered with other buckets; use the same buckets for every "
        "series of a family",
        name));
  }
  if (fam.label_names != label_names) {
    return InvalidArgument(fmt::format(
        "metric '{}' is already registered with labels {{{}}}, not {{{}}}; every series of a "
        "family needs the same label names",
        name, fmt::join(fam.label_names, ","), fmt::join(label_names, ",")));
  }
  auto sit = fam.series.find(key);
  if (sit == fam.series.end()) {
    Family::Series s;
    s.labels = std::move(sorted);
    switch (type) {
      case kCounter:
        s.counter = std::make_unique<Counter>();
        break;
      case kGauge:
        s.gauge = std::make_unique<Gauge>();
        break;
      default:
        s.histogram = std::make_unique<Histogram>(fam.bounds);
        break;
    }
    sit = fam.series.emplace(key, std::move(s)).first;
  }
  Family::Series& s = sit->second;
  switch (type) {
    case kCounter:
      return static_cast<void*>(s.counter.get());
    case kGauge:
      return static_cast<void*>(s.gauge.get());
    default:
      return static_cast<void*>(s.histogram.get());
  }
}

Result<Counter*> Registry::GetCounter(std::string_view name, std::string_view help,
                                      const Labels& labels) {
  ASSIGN_OR_RETURN(void* p, GetSeries(kCounter, name, help, labels, nullptr));
  return static_cast<Counter*>(p);
}

Result<Gauge*> Registry::GetGauge(std::string_view name, std::string_view help,
                                  const Labels& labels) {
  ASSIGN_OR_RETURN(void* p, GetSeries(kGauge, name, help, labels, nullptr));
  return static_cast<Gauge*>(p);
}

Result<Histogram*> Registry::GetHistogram(std::string_view name, std::string_view help,
                                          const Labels& labels,
                                          const std::vector<double>& buckets) {
  ASSIGN_OR_RETURN(void* p, GetSeries(kHistogram, name, help, labels, &buckets));
  return static_cast<Histogram*>(p);
}

void Registry::AddCollectHook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(hooks_mu_);
  hooks_.push_back(std::move(hook));
}

namespace {

// Appends `{a="x",b="y"}` (plus an optional extra le label) or nothing.
void AppendLabels(std::string* out, const Labels& labels, const char* le = nullptr,
                  double le_value = 0) {
  if (labels.empty() && le == nullptr) return;
  out->push_back('{');
  bool first = true;
  for (const auto& [n, v] : labels) {
    if (!first) out->push_back(',');
    first = false;
    out->append(n);
    out->append("=\"");
    AppendEscaped(out, v, /*quote=*/true);
    out->push_back('"');
  }
  if (le != nullptr) {
    if (!first) out->push_back(',');
    out->append("le=\"");
    AppendSampleValue(out, le_value);
    out->push_back('"');
  }
  out->push_back('}');
}

}  // namespace

std::string Registry::Render() const {
  // Hooks run outside both locks so they may register and set metrics.
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(hooks_mu_);
    hooks = hooks_;
  }
  for (const auto& h : hooks) h();

  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, fam] : families_) {  // std::map: sorted by name
    out.append("# HELP ").append(name).push_back(' ');
    AppendEscaped(&out, fam->help, /*quote=*/false);
    out.append("\n# TYPE ").append(name).push_back(' ');
    out.append(TypeName(fam->type)).push_back('\n');
    for (const auto& [key, s] : fam->series) {
      if (fam->type == kHistogram) {
        const Histogram& h = *s.histogram;
        uint64_t cum = 0;
        const size_t nb = h.bounds().size();
        for (size_t i = 0; i <= nb; ++i) {
          cum += h.BucketCount(i);
          out.append(name).append("_bucket");
          AppendLabels(&out, s.labels, "le",
                       i < nb ? h.bounds()[i] : std::numeric_limits<double>::infinity());
          out.push_back(' ');
          AppendSampleValue(&out, static_cast<double>(cum));
          out.push_back('\n');
        }
        out.append(name).append("_sum");
        AppendLabels(&out, s.labels);
        out.push_back(' ');
        AppendSampleValue(&out, h.Sum());
        out.push_back('\n');
        // _count equals the +Inf bucket of this same snapshot, as Prometheus expects.
        out.append(name).append("_count");
        AppendLabels(&out, s.labels);
        out.push_back(' ');
        AppendSampleValue(&out, static_cast<double>(cum));
        out.push_back('\n');
      } else {
        out.append(name);
        AppendLabels(&out, s.labels);
        out.push_back(' ');
        AppendSampleValue(&out, fam->type == kCounter ? s.counter->Value() : s.gauge->Value());
        out.push_back('\n');
      }
    }
  }
  return out;
}

}  // namespace gantry::metrics
