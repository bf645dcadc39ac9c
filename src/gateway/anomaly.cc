// Output anomaly detection (see anomaly.h for the model).
#include "anomaly.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "gantry/core/log.h"
#include "gantry/core/units.h"

namespace gantry::gateway {

using alerting::DynamicThresholdModel;
using alerting::TimedValue;
using alerting::Verdict;
using alerting::ViolationWindow;

std::string_view SignalName(Signal s) {
  switch (s) {
    case Signal::kLatency:
      return "latency";
    case Signal::kErrorRate:
      return "error_rate";
    case Signal::kResponseBytes:
      return "response_bytes";
    case Signal::kCompletionTokens:
      return "completion_tokens";
    case Signal::kOutputs:
      return "outputs";
  }
  return "latency";
}

namespace {

constexpr Signal kAllSignals[] = {Signal::kLatency, Signal::kErrorRate, Signal::kResponseBytes,
                                  Signal::kCompletionTokens, Signal::kOutputs};
constexpr const char* kValidSignals =
    "latency, error_rate, response_bytes, completion_tokens, outputs";

// Upper bounds that keep a typo from allocating the machine away.
constexpr int64_t kMaxOf = 1000;
constexpr int64_t kMaxModels = 100'000;

std::chrono::milliseconds ToMs(std::chrono::nanoseconds d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

// ---- ParseAnomalyConfig -------------------------------------------------------------

Result<AnomalyConfig> ParseAnomalyConfig(const Config& config, std::string_view key) {
  AnomalyConfig c;
  const std::string k(key);
  if (!config.Has(k)) return c;  // absent (or empty): disabled
  RETURN_IF_ERROR(
      config.CheckKnownKeys(k, {"enabled", "window", "min_requests", "signals", "sensitivity",
                                "direction", "seasonality", "min_history", "min_samples", "history",
                                "violations", "of", "resolve_after", "max_models", "notify"}));
  ASSIGN_OR_RETURN(c.enabled, config.GetBool(k + ".enabled", true));

  ASSIGN_OR_RETURN(std::chrono::nanoseconds window, config.GetDuration(k + ".window", c.window));
  if (window < std::chrono::seconds(1)) {
    return InvalidArgument(fmt::format("{}: window must be at least 1s, got {}",
                                       config.Locate(k + ".window"), FormatDuration(window)));
  }
  c.window = ToMs(window);

  auto whole = [&](const std::string& name, int64_t fallback, int64_t lo, int64_t hi,
                   const char* why) -> Result<int64_t> {
    ASSIGN_OR_RETURN(int64_t v, config.GetInt(k + "." + name, fallback));
    if (v < lo || v > hi) {
      return InvalidArgument(fmt::format("{}: {} must be between {} and {} ({}), got {}",
                                         config.Locate(k + "." + name), name, lo, hi, why, v));
    }
    return v;
  };
  ASSIGN_OR_RETURN(int64_t min_requests,
                   whole("min_requests", static_cast<int64_t>(c.min_requests), 1, int64_t{1} << 40,
                         "requests a window needs to be evaluated"));
  c.min_requests = static_cast<uint64_t>(min_requests);

  if (config.Has(k + ".signals")) {
    if (config.IsScalar(k + ".signals")) {
      return InvalidArgument(fmt::format("{}: expected a list such as [latency, error_rate]",
                                         config.Locate(k + ".signals")));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names, config.GetStringList(k + ".signals"));
    if (names.empty()) {
      return InvalidArgument(
          fmt::format("{}: no signals listed; list at least one of {} (or set enabled: false)",
                      config.Locate(k + ".signals"), kValidSignals));
    }
    c.signals.clear();
    for (size_t i = 0; i < names.size(); ++i) {
      std::optional<Signal> found;
      for (Signal s : kAllSignals) {
        if (SignalName(s) == names[i]) found = s;
      }
      if (!found) {
        return InvalidArgument(fmt::format("{}: unknown signal '{}'; valid signals: {}",
                                           config.Locate(fmt::format("{}.signals.{}", k, i)),
                                           names[i], kValidSignals));
      }
      if (std::find(c.signals.begin(), c.signals.end(), *found) == c.signals.end()) {
        c.signals.push_back(*found);
      }
    }
  }

  auto word = [&](const char* name, auto parse, auto* out) -> Status {
    const std::string wk = k + "." + name;
    if (!config.Has(wk)) return Status::Ok();
    ASSIGN_OR_RETURN(std::string s, config.GetString(wk, ""));
    auto v = parse(s);
    if (!v.ok()) return InvalidArgument(config.Locate(wk) + ": " + v.status().message());
    *out = *v;
    return Status::Ok();
  };
  RETURN_IF_ERROR(word("sensitivity", alerting::ParseSensitivity, &c.threshold.sensitivity));
  RETURN_IF_ERROR(word("direction", alerting::ParseDirection, &c.threshold.direction));
  RETURN_IF_ERROR(word("seasonality", alerting::ParseSeasonality, &c.threshold.seasonality));

  ASSIGN_OR_RETURN(std::chrono::nanoseconds min_history,
                   config.GetDuration(k + ".min_history", c.threshold.min_history));
  c.threshold.min_history = ToMs(min_history);
  ASSIGN_OR_RETURN(int64_t min_samples,
                   whole("min_samples", static_cast<int64_t>(c.threshold.min_samples), 1, 1'000'000,
                         "learned windows before the first alert"));
  c.threshold.min_samples = static_cast<size_t>(min_samples);
  ASSIGN_OR_RETURN(std::chrono::nanoseconds history, config.GetDuration(k + ".history", c.history));
  c.history = ToMs(history);
  // A baseline that can never become ready would silently never alert.
  if (c.history < c.threshold.min_history + c.window) {
    return InvalidArgument(fmt::format(
        "{}: history {} is too short for min_history {} (windows older than history are "
        "forgotten, so the baseline would never be ready); make history longer than min_history",
        config.Locate(config.Has(k + ".history") ? k + ".history" : k + ".min_history"),
        FormatDuration(c.history), FormatDuration(c.threshold.min_history)));
  }
  if (c.history.count() / c.window.count() < static_cast<int64_t>(c.threshold.min_samples)) {
    return InvalidArgument(fmt::format(
        "{}: history {} holds only {} windows of {}, fewer than min_samples {}; lengthen history "
        "or shorten window",
        config.Locate(config.Has(k + ".history") ? k + ".history" : k + ".min_samples"),
        FormatDuration(c.history), c.history.count() / c.window.count(), FormatDuration(c.window),
        c.threshold.min_samples));
  }

  ASSIGN_OR_RETURN(int64_t of, whole("of", c.of, 1, kMaxOf, "evaluated windows looked at"));
  c.of = static_cast<int>(of);
  ASSIGN_OR_RETURN(int64_t violations,
                   whole("violations", c.violations, 1, kMaxOf, "windows outside the band"));
  if (violations > of) {
    return InvalidArgument(fmt::format(
        "{}: violations {} is more than of {}, so the alert could never fire; use violations <= of",
        config.Locate(k + ".violations"), violations, of));
  }
  c.violations = static_cast<int>(violations);
  ASSIGN_OR_RETURN(int64_t resolve_after,
                   whole("resolve_after", c.resolve_after, 1, kMaxOf, "clean windows in a row"));
  c.resolve_after = static_cast<int>(resolve_after);
  ASSIGN_OR_RETURN(int64_t max_models, whole("max_models", static_cast<int64_t>(c.max_models), 1,
                                             kMaxModels, "(model, version) pairs tracked"));
  c.max_models = static_cast<size_t>(max_models);

  ASSIGN_OR_RETURN(c.notify, alerting::ParseNotifyConfig(config, k + ".notify"));
  return c;
}

// ---- KserveOutputStats ------------------------------------------------------------

namespace {

// Nesting (objects and lists together) beyond this is rejected: a KServe
// tensor of rank 8 in an output of a response is 11 levels deep.
constexpr size_t kMaxDepth = 40;
// Outputs beyond this many are not summarized (bounded result size).
constexpr size_t kMaxOutputs = 64;

enum class DataType { kUnknown, kBool, kNumeric, kBytes };

DataType ParseDataType(const std::string& t) {
  if (t == "BOOL") return DataType::kBool;
  if (t == "BYTES") return DataType::kBytes;
  static const char* const kNumeric[] = {"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                         "INT32", "INT64",  "FP16",   "FP32",   "FP64", "BF16"};
  for (const char* n : kNumeric) {
    if (t == n) return DataType::kNumeric;
  }
  return DataType::kUnknown;
}

// SAX handler: reads the response in one pass without building a DOM (an
// output can hold millions of numbers) and with bounded nesting.
class KserveSax {
 public:
  using json = nlohmann::json;

  bool null() { return Value(Kind::kNull, 0); }
  bool boolean(bool v) { return Value(Kind::kBool, v ? 1.0 : 0.0); }
  bool number_integer(json::number_integer_t v) {
    return Value(Kind::kNumber, static_cast<double>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return Value(Kind::kNumber, static_cast<double>(v));
  }
  bool number_float(json::number_float_t v, const json::string_t&) {
    return Value(Kind::kNumber, v);
  }
  bool string(json::string_t& s) {
    if (!stack_.empty() && stack_.back() == Ctx::kOutput && !pending_.empty()) {
      if (pending_ == "name") {
        cur_.name = s;
        cur_.has_name = true;
        return true;
      }
      if (pending_ == "datatype") {
        cur_.datatype = s;
        cur_.has_datatype = true;
        return true;
      }
    }
    return Value(Kind::kString, 0);
  }
  bool binary(json::binary_t&) { return Value(Kind::kString, 0); }
  bool start_object(size_t) { return Open(/*object=*/true); }
  bool key(json::string_t& k) {
    pending_ = k;
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(size_t) { return Open(/*object=*/false); }
  bool end_array() { return Close(); }
  bool parse_error(size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    if (error_.ok()) {
      // ex.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ...".
      std::string what = ex.what();
      size_t p = what.find("] ");
      if (p != std::string::npos) what = what.substr(p + 2);
      error_ =
          InvalidArgument(fmt::format("KServe response: invalid JSON near byte {}: {}", pos, what));
    }
    return false;
  }

  Status Finish() {
    if (!error_.ok()) return error_;
    if (!saw_outputs_) {
      return InvalidArgument("KServe response: no 'outputs' list in the body");
    }
    return Status::Ok();
  }
  std::vector<TensorStats>& stats() { return stats_; }

 private:
  enum class Ctx { kRoot, kOutputs, kOutput, kData, kSkip };
  enum class Kind { kNull, kBool, kNumber, kString, kObject, kArray };

  struct Output {
    std::string name;
    std::string datatype;
    bool has_name = false;
    bool has_datatype = false;
    bool has_data = false;
    const char* bad = nullptr;  // first value in data of a kind no numeric tensor holds
    uint64_t count = 0;
    double mean = 0;
    double min = 0;
    double max = 0;
  };

  std::string Who() const {
    std::string w = fmt::format("outputs[{}]", index_);
    if (cur_.has_name) w += " ('" + cur_.name.substr(0, 64) + "')";
    return w;
  }

  bool Fail(std::string msg) {
    if (error_.ok()) error_ = InvalidArgument("KServe response: " + std::move(msg));
    return false;
  }

  // A value (scalar, or the start of a container) in the current context.
  // Returns false to stop parsing; for a container, `push` is set to the
  // context it opens.
  bool Dispatch(Kind kind, double v, Ctx* push) {
    *push = Ctx::kSkip;
    if (stack_.empty()) {
      if (kind != Kind::kObject) return Fail("the body is not a JSON object");
      *push = Ctx::kRoot;
      return true;
    }
    const std::string key = std::move(pending_);
    pending_.clear();
    switch (stack_.back()) {
      case Ctx::kRoot:
        if (key == "outputs") {
          if (kind != Kind::kArray) return Fail("'outputs' is not a list");
          saw_outputs_ = true;
          *push = Ctx::kOutputs;
        }
        return true;
      case Ctx::kOutputs:
        ++index_;
        if (kind != Kind::kObject) return Fail(fmt::format("outputs[{}] is not an object", index_));
        cur_ = Output{};
        *push = Ctx::kOutput;
        return true;
      case Ctx::kOutput:
        if (key == "name" || key == "datatype") {
          // Strings are taken in string(); anything else here is wrong.
          return Fail(fmt::format("{}: '{}' is not a string", Who(), key));
        }
        if (key == "data") {
          if (kind != Kind::kArray) return Fail(fmt::format("{}: 'data' is not a list", Who()));
          cur_.has_data = true;
          *push = Ctx::kData;
        }
        return true;
      case Ctx::kData:
        switch (kind) {
          case Kind::kArray:
            *push = Ctx::kData;
            return true;
          case Kind::kObject:
            if (!cur_.bad) cur_.bad = "an object";
            return true;
          case Kind::kString:
            if (!cur_.bad) cur_.bad = "a string";
            return true;
          case Kind::kNull:
            return true;  // how some encoders write NaN: not finite, skipped
          case Kind::kBool:
          case Kind::kNumber:
            if (!std::isfinite(v)) return true;
            if (cur_.count == 0) {
              cur_.min = cur_.max = v;
            } else {
              cur_.min = std::min(cur_.min, v);
              cur_.max = std::max(cur_.max, v);
            }
            ++cur_.count;
            // A running mean cannot overflow where a sum of large values would.
            cur_.mean += (v - cur_.mean) / static_cast<double>(cur_.count);
            return true;
        }
        return true;
      case Ctx::kSkip:
        return true;
    }
    return true;
  }

  bool Value(Kind kind, double v) {
    Ctx push;
    return Dispatch(kind, v, &push);
  }

  bool Open(bool object) {
    if (stack_.size() >= kMaxDepth) {
      return Fail(fmt::format("nested deeper than {} levels", kMaxDepth));
    }
    Ctx push;
    if (!Dispatch(object ? Kind::kObject : Kind::kArray, 0, &push)) return false;
    stack_.push_back(push);
    return true;
  }

  bool Close() {
    if (stack_.empty()) return true;
    Ctx done = stack_.back();
    stack_.pop_back();
    pending_.clear();
    if (done == Ctx::kOutput) return FinishOutput();
    return true;
  }

  bool FinishOutput() {
    if (!cur_.has_name) return Fail(fmt::format("outputs[{}] has no 'name'", index_));
    if (!cur_.has_datatype) return Fail(fmt::format("{} has no 'datatype'", Who()));
    DataType dt = ParseDataType(cur_.datatype);
    if (dt == DataType::kUnknown) {
      return Fail(fmt::format(
          "{}: unknown datatype '{}'; KServe v2 uses BOOL, UINT8..UINT64, INT8..INT64, FP16, "
          "FP32, FP64, BF16 or BYTES",
          Who(), cur_.datatype.substr(0, 32)));
    }
    if (dt == DataType::kBytes) return true;  // strings: nothing numeric to watch
    if (cur_.bad) {
      return Fail(
          fmt::format("{}: 'data' of a {} tensor holds {}", Who(), cur_.datatype, cur_.bad));
    }
    if (cur_.count == 0 || stats_.size() >= kMaxOutputs) return true;
    TensorStats t;
    t.name = std::move(cur_.name);
    t.mean = std::clamp(cur_.mean, cur_.min, cur_.max);  // rounding must not leave [min, max]
    t.min = cur_.min;
    t.max = cur_.max;
    t.count = cur_.count;
    stats_.push_back(std::move(t));
    return true;
  }

  std::vector<Ctx> stack_;
  std::string pending_;  // the key whose value comes next (objects only)
  Output cur_;
  int64_t index_ = -1;
  bool saw_outputs_ = false;
  Status error_;
  std::vector<TensorStats> stats_;
};

}  // namespace

namespace {

// Python's json module (and others) write NaN, Infinity and -Infinity, which
// are not JSON. Returns a copy of `body` with those tokens (outside strings)
// replaced by null, which the reader skips as non-finite; nullopt when there
// are none.
std::optional<std::string> NonFiniteLiteralsAsNull(std::string_view body) {
  std::string out;
  bool changed = false, in_string = false, escaped = false;
  out.reserve(body.size());
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      out += c;
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    std::string_view rest = body.substr(i);
    size_t skip = 0;
    if (rest.substr(0, 3) == "NaN") skip = 3;
    if (rest.substr(0, 8) == "Infinity") skip = 8;
    if (rest.substr(0, 9) == "-Infinity") skip = 9;
    if (skip > 0) {
      out += "null";
      i += skip - 1;
      changed = true;
      continue;
    }
    out += c;
  }
  if (!changed) return std::nullopt;
  return out;
}

Result<std::vector<TensorStats>> ReadKserve(std::string_view body) {
  KserveSax sax;
  try {
    (void)nlohmann::json::sax_parse(body.begin(), body.end(), &sax);
  } catch (const std::exception& e) {
    // The SAX parser reports through parse_error; this is only a safety net.
    return InvalidArgument(std::string("KServe response: ") + e.what());
  }
  RETURN_IF_ERROR(sax.Finish());
  return std::move(sax.stats());
}

}  // namespace

Result<std::vector<TensorStats>> KserveOutputStats(std::string_view body) {
  // nlohmann's lexer takes a NUL byte for the end of input, which would
  // ignore whatever follows; JSON never holds a raw NUL (not even in strings).
  if (size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument(
        fmt::format("KServe response: invalid JSON: a NUL byte at offset {}", nul));
  }
  Result<std::vector<TensorStats>> r = ReadKserve(body);
  if (r.ok() || r.status().message().find("invalid JSON") == std::string::npos) return r;
  // Only a body that failed to parse pays for the copy.
  std::optional<std::string> lenient = NonFiniteLiteralsAsNull(body);
  if (!lenient) return r;
  Result<std::vector<TensorStats>> again = ReadKserve(*lenient);
  return again.ok() ? again : r;
}

// ---- AnomalyDetector ----------------------------------------------------------------

namespace {

constexpr size_t kStripes = 16;
constexpr size_t kMaxTensorsPerPair = 8;
constexpr const char* kOther = "other";
constexpr const char* kAlertName = "GantryModelOutputAnomaly";

struct PairKey {
  std::string model;
  std::string version;
};

// Transparent ordering so that Record looks up with string_views.
struct PairLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::pair<std::string_view, std::string_view>(a.model, a.version) <
           std::pair<std::string_view, std::string_view>(b.model, b.version);
  }
};
struct PairView {
  std::string_view model;
  std::string_view version;
};
struct TensorAcc {
  double sum_mean = 0, sum_min = 0, sum_max = 0;
  uint64_t n = 0;
};

struct Acc {
  uint64_t requests = 0;
  uint64_t errors = 0;
  double latency_sum = 0;
  double bytes_sum = 0;
  double tokens_sum = 0;
  uint64_t tokens_n = 0;
  std::map<std::string, TensorAcc, std::less<>> outputs;

  void Merge(const Acc& o) {
    requests += o.requests;
    errors += o.errors;
    latency_sum += o.latency_sum;
    bytes_sum += o.bytes_sum;
    tokens_sum += o.tokens_sum;
    tokens_n += o.tokens_n;
    for (const auto& [name, t] : o.outputs) {
      if (outputs.size() >= kMaxTensorsPerPair && !outputs.count(name)) continue;
      TensorAcc& d = outputs[name];
      d.sum_mean += t.sum_mean;
      d.sum_min += t.sum_min;
      d.sum_max += t.sum_max;
      d.n += t.n;
    }
  }
};

struct Stripe {
  std::mutex mu;
  std::map<PairKey, Acc, PairLess> accs;  // the open window
  std::set<PairKey, PairLess> admitted;   // pairs of this stripe that count to max_models
};

// Learned state of one (model, version, signal).
struct SignalHistory {
  std::deque<TimedValue> history;
  ViolationWindow violations;
  bool firing = false;
  int clean_streak = 0;
  int64_t fired_at_ms = 0;
  bool ready = false;
  std::string not_ready_reason = "no samples";
  double last_value = 0;
  alerting::Band band;
  metrics::Gauge* g_value = nullptr;
  metrics::Gauge* g_lower = nullptr;
  metrics::Gauge* g_upper = nullptr;
  metrics::Gauge* g_firing = nullptr;
};

using SignalKey = std::tuple<std::string, std::string, std::string>;  // model, version, signal

std::string Num(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

struct AnomalyDetector::Impl {
  Impl(const AnomalyConfig& c, metrics::Registry* r, const Clock& clk,
       std::shared_ptr<alerting::Notifier> n, bool injected)
      : registry(r), clock(clk), cfg(c), notifier(std::move(n)), injected_sinks(injected) {
    enabled.store(c.enabled);
    window_ms.store(c.window.count());
    max_models.store(c.max_models);
    ApplyConfigLocked();
  }

  metrics::Registry* registry;
  const Clock& clock;

  std::array<Stripe, kStripes> stripes;
  std::atomic<bool> enabled{false};
  std::atomic<size_t> max_models{100};
  std::atomic<size_t> tracked{0};  // admitted pairs over all stripes
  std::atomic<int64_t> window_ms{60'000};

  // Evaluation state; CloseWindow holds close_mu for its whole run and mu
  // while it touches this state.
  std::mutex close_mu;
  mutable std::mutex mu;
  AnomalyConfig cfg;
  std::array<bool, 5> signal_on{};
  std::map<SignalKey, SignalHistory> states;
  std::shared_ptr<alerting::Notifier> notifier;
  bool injected_sinks;
  std::function<std::unique_ptr<alerting::Sink>()> extra_sink;  // see Create

  // The window thread.
  std::mutex thread_mu;
  std::condition_variable cv;
  bool stop = false;
  bool wake = false;
  std::thread thread;

  void ApplyConfigLocked() {
    signal_on.fill(false);
    for (Signal s : cfg.signals) signal_on[static_cast<size_t>(s)] = true;
  }

  Stripe& StripeFor(std::string_view model) {
    return stripes[std::hash<std::string_view>{}(model) % kStripes];
  }

  // Whether a new pair may be tracked (and counts it when so).
  bool Admit() {
    size_t cur = tracked.load();
    const size_t limit = max_models.load();
    while (cur < limit) {
      if (tracked.compare_exchange_weak(cur, cur + 1)) return true;
    }
    return false;
  }

  void Record(const OutputRecord& r) {
    if (!enabled.load(std::memory_order_relaxed)) return;
    Stripe& st = StripeFor(r.model);
    std::lock_guard<std::mutex> lock(st.mu);
    PairView view{r.model, r.version};
    auto it = st.accs.find(view);
    if (it == st.accs.end()) {
      if (st.admitted.count(view) ||
          (Admit() &&
           st.admitted.emplace(PairKey{std::string(r.model), std::string(r.version)}).second)) {
        it = st.accs.emplace(PairKey{std::string(r.model), std::string(r.version)}, Acc{}).first;
      } else {
        // Over max_models: counted under "other" (merged over stripes at close).
        PairView other{kOther, ""};
        it = st.accs.find(other);
        if (it == st.accs.end()) it = st.accs.emplace(PairKey{kOther, ""}, Acc{}).first;
      }
    }
    Acc& a = it->second;
    ++a.requests;
    if (r.error) ++a.errors;
    if (std::isfinite(r.latency_s) && r.latency_s >= 0) a.latency_sum += r.latency_s;
    a.bytes_sum += static_cast<double>(r.response_bytes);
    if (r.completion_tokens >= 0) {
      a.tokens_sum += static_cast<double>(r.completion_tokens);
      ++a.tokens_n;
    }
    if (r.outputs) {
      for (const TensorStats& t : *r.outputs) {
        if (t.count == 0) continue;
        auto ot = a.outputs.find(t.name);
        if (ot == a.outputs.end()) {
          if (a.outputs.size() >= kMaxTensorsPerPair) continue;
          ot = a.outputs.emplace(t.name, TensorAcc{}).first;
        }
        ot->second.sum_mean += t.mean;
        ot->second.sum_min += t.min;
        ot->second.sum_max += t.max;
        ++ot->second.n;
      }
    }
  }

  void SetupMetrics(const SignalKey& key, SignalHistory* h) {
    if (!registry || h->g_value) return;
    metrics::Labels labels = {
        {"model", std::get<0>(key)}, {"version", std::get<1>(key)}, {"signal", std::get<2>(key)}};
    auto gauge = [&](const char* name, const char* help) -> metrics::Gauge* {
      Result<metrics::Gauge*> g = registry->GetGauge(name, help, labels);
      if (!g.ok()) {
        log::warn("anomaly: metric {}: {}", name, g.status().message());
        return nullptr;
      }
      return *g;
    };
    h->g_value = gauge("gantry_gateway_anomaly_value",
                       "Last window value of an output-anomaly signal per model and version");
    h->g_lower = gauge("gantry_gateway_anomaly_band_lower",
                       "Lower edge of the learned band of an output-anomaly signal");
    h->g_upper = gauge("gantry_gateway_anomaly_band_upper",
                       "Upper edge of the learned band of an output-anomaly signal");
    h->g_firing = gauge("gantry_gateway_anomaly_firing",
                        "1 while the output-anomaly alert of the signal fires, else 0");
  }

  void CountAlert(const std::string& model, const std::string& signal) {
    if (!registry) return;
    Result<metrics::Counter*> c = registry->GetCounter(
        "gantry_gateway_anomaly_alerts_total", "Output-anomaly alerts fired per model and signal",
        {{"model", model}, {"signal", signal}});
    if (c.ok()) (*c)->Inc();
  }

  // `gone`: a resolution because the signal is no longer watched.
  alerting::Alert MakeAlert(const SignalKey& key, const SignalHistory& h, bool firing,
                            int64_t now_ms, std::string_view seasonality, bool gone = false) const {
    const auto& [model, version, signal] = key;
    alerting::Alert a;
    a.labels["alertname"] = kAlertName;
    a.labels["model"] = model;
    if (!version.empty()) a.labels["version"] = version;
    a.labels["signal"] = signal;
    a.labels["severity"] = "warning";
    const std::string who = version.empty() ? model : model + " (" + version + ")";
    const std::string band = fmt::format("[{}, {}]", Num(h.band.lower), Num(h.band.upper));
    if (firing) {
      a.annotations["summary"] = fmt::format("{} of model {} left its learned band", signal, who);
      a.annotations["description"] = fmt::format(
          "{} of model {} was {} in the window ending {}, outside the learned band {} "
          "(centre {}, seasonality {}, {} windows learned); {} of the last {} evaluated windows "
          "were outside the band",
          signal, who, Num(h.last_value), alerting::FormatRfc3339(now_ms), band, Num(h.band.center),
          seasonality, h.history.size(), h.violations.count(), h.violations.of());
    } else if (gone) {
      a.annotations["summary"] = fmt::format("{} of model {} is no longer watched", signal, who);
      a.annotations["description"] = fmt::format(
          "{} of model {} is no longer evaluated at {} (removed from anomaly.signals, detection "
          "disabled, or no traffic for the whole history); last value {}, band {}",
          signal, who, alerting::FormatRfc3339(now_ms), Num(h.last_value), band);
    } else {
      a.annotations["summary"] = fmt::format("{} of model {} is back within its band", signal, who);
      a.annotations["description"] = fmt::format(
          "{} of model {} was {} in the window ending {}, within the learned band {} for {} "
          "windows in a row",
          signal, who, Num(h.last_value), alerting::FormatRfc3339(now_ms), band, h.clean_streak);
    }
    a.firing = firing;
    a.starts_at_ms = h.fired_at_ms;
    a.ends_at_ms = firing ? 0 : now_ms;
    a.value = h.last_value;
    return a;
  }

  // Evaluates and learns one window value. Called with `mu` held.
  void Evaluate(const SignalKey& key, double value, int64_t now_ms, WindowSummary* sum,
                std::vector<alerting::Alert>* alerts) {
    if (!std::isfinite(value)) return;
    auto it = states.find(key);
    if (it == states.end()) {
      SignalHistory fresh;
      fresh.violations = ViolationWindow(cfg.violations, cfg.of);
      it = states.emplace(key, std::move(fresh)).first;
      SetupMetrics(key, &it->second);
    }
    SignalHistory& h = it->second;
    alerting::DynamicThresholdOptions opt = cfg.threshold;
    const std::string& signal = std::get<2>(key);
    // Absolute spread floors (see anomaly.h): near-constant signals would
    // otherwise alert on the smallest wiggle.
    if (signal == "latency") opt.min_spread = std::max(opt.min_spread, 0.001);
    if (signal == "error_rate") opt.min_spread = std::max(opt.min_spread, 0.01);

    std::vector<TimedValue> samples(h.history.begin(), h.history.end());
    // Fitted on the history before this value is added: the value is judged
    // against what was normal until now.
    DynamicThresholdModel model = DynamicThresholdModel::Fit(samples, opt);
    const Verdict verdict = model.Check(now_ms, value);
    h.ready = model.ready();
    h.not_ready_reason = model.not_ready_reason();
    h.band = model.BandAt(now_ms);
    h.last_value = value;
    // Learned whatever the verdict: a lasting change becomes the new normal,
    // but only after it has been outside the band long enough to fire.
    h.history.push_back(TimedValue{now_ms, value});
    ++sum->learned;

    if (verdict != Verdict::kNotReady) {
      ++sum->evaluated;
      const bool violated = verdict != Verdict::kNormal;
      h.violations.Push(violated);
      h.clean_streak = violated ? 0 : h.clean_streak + 1;
      const std::string_view seasonality = alerting::SeasonalityName(model.seasonality());
      if (!h.firing && h.violations.triggered()) {
        h.firing = true;
        h.fired_at_ms = now_ms;
        alerts->push_back(MakeAlert(key, h, true, now_ms, seasonality));
        CountAlert(std::get<0>(key), signal);
        ++sum->fired;
      } else if (h.firing && h.clean_streak >= cfg.resolve_after) {
        h.firing = false;
        alerts->push_back(MakeAlert(key, h, false, now_ms, seasonality));
        // Old violations must not re-fire the alert on the next single one.
        h.violations.Reset();
        ++sum->resolved;
      }
    }
    if (h.g_value) h.g_value->Set(value);
    if (h.g_lower) h.g_lower->Set(h.ready ? h.band.lower : 0);
    if (h.g_upper) h.g_upper->Set(h.ready ? h.band.upper : 0);
    if (h.g_firing) h.g_firing->Set(h.firing ? 1 : 0);
  }

  // Resolves the alert of a state that goes away (signal disabled).
  void ResolveGone(const SignalKey& key, SignalHistory& h, int64_t now_ms,
                   std::vector<alerting::Alert>* alerts) {
    if (h.g_firing) h.g_firing->Set(0);
    if (!h.firing) return;
    h.firing = false;
    alerts->push_back(MakeAlert(key, h, false, now_ms, "none", /*gone=*/true));
  }

  void Deliver(std::vector<alerting::Alert> alerts, const std::shared_ptr<alerting::Notifier>& n) {
    for (const alerting::Alert& a : alerts) {
      const auto get = [&](const char* l) {
        auto it = a.labels.find(l);
        return it == a.labels.end() ? std::string() : it->second;
      };
      if (a.firing) {
        log::warn("anomaly: FIRING model={} version={} signal={}: {}", get("model"), get("version"),
                  get("signal"), a.annotations.at("description"));
      } else {
        log::info("anomaly: resolved model={} version={} signal={}: {}", get("model"),
                  get("version"), get("signal"), a.annotations.at("description"));
      }
    }
    if (n && !alerts.empty()) n->Notify(std::move(alerts));
  }

  WindowSummary CloseWindow(int64_t now_ms) {
    std::lock_guard<std::mutex> close_lock(close_mu);
    // 1. Swap the open window out, stripe by stripe (Record waits at most for one swap).
    std::map<PairKey, Acc, PairLess> window;
    for (Stripe& st : stripes) {
      std::map<PairKey, Acc, PairLess> taken;
      {
        std::lock_guard<std::mutex> lock(st.mu);
        taken.swap(st.accs);
      }
      for (auto& [key, acc] : taken) {
        auto it = window.find(key);
        if (it == window.end()) {
          window.emplace(key, std::move(acc));
        } else {
          it->second.Merge(acc);
        }
      }
    }

    WindowSummary sum;
    std::vector<alerting::Alert> alerts;
    std::shared_ptr<alerting::Notifier> notifier_copy;
    std::set<PairKey, PairLess> live;  // pairs that keep state after this window
    {
      std::lock_guard<std::mutex> lock(mu);
      notifier_copy = notifier;
      for (const auto& entry : window) {
        const PairKey& key = entry.first;  // named (not bound) so that the lambda may capture it
        const Acc& acc = entry.second;
        sum.requests += acc.requests;
        ++sum.pairs;
        if (acc.requests < cfg.min_requests) {
          ++sum.skipped;
          continue;
        }
        const double n = static_cast<double>(acc.requests);
        auto eval = [&](Signal s, std::string name, double v) {
          if (!signal_on[static_cast<size_t>(s)]) return;
          Evaluate(SignalKey{key.model, key.version, std::move(name)}, v, now_ms, &sum, &alerts);
        };
        eval(Signal::kLatency, "latency", acc.latency_sum / n);
        eval(Signal::kErrorRate, "error_rate", static_cast<double>(acc.errors) / n);
        eval(Signal::kResponseBytes, "response_bytes", acc.bytes_sum / n);
        if (acc.tokens_n > 0) {
          eval(Signal::kCompletionTokens, "completion_tokens",
               acc.tokens_sum / static_cast<double>(acc.tokens_n));
        }
        for (const auto& [tensor, t] : acc.outputs) {
          if (t.n == 0) continue;
          const double tn = static_cast<double>(t.n);
          eval(Signal::kOutputs, "output:" + tensor + ":mean", t.sum_mean / tn);
          eval(Signal::kOutputs, "output:" + tensor + ":min", t.sum_min / tn);
          eval(Signal::kOutputs, "output:" + tensor + ":max", t.sum_max / tn);
        }
      }
      // Forget windows older than `history`; a state with nothing left (and
      // not firing) goes, so that departed models free their place.
      const int64_t horizon = now_ms - cfg.history.count();
      for (auto it = states.begin(); it != states.end();) {
        SignalHistory& h = it->second;
        while (!h.history.empty() && h.history.front().time_ms <= horizon) h.history.pop_front();
        if (h.history.empty()) {
          // No traffic for the whole history: nothing left to judge by.
          ResolveGone(it->first, h, now_ms, &alerts);
          it = states.erase(it);
          continue;
        }
        live.insert(PairKey{std::get<0>(it->first), std::get<1>(it->first)});
        ++it;
      }
    }
    // Release the places of pairs without state that sent nothing since the swap.
    for (Stripe& st : stripes) {
      std::lock_guard<std::mutex> lock(st.mu);
      for (auto it = st.admitted.begin(); it != st.admitted.end();) {
        if (!live.count(*it) && !st.accs.count(*it) && !window.count(*it)) {
          it = st.admitted.erase(it);
          tracked.fetch_sub(1);
        } else {
          ++it;
        }
      }
    }
    Deliver(std::move(alerts), notifier_copy);
    return sum;
  }

  void Run() {
    std::unique_lock<std::mutex> lk(thread_mu);
    while (!stop) {
      const int64_t w = std::max<int64_t>(window_ms.load(), 1000);
      const int64_t now =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
              .count();
      const int64_t next = (now / w + 1) * w;  // windows end on wall-time multiples of `window`
      cv.wait_for(lk, std::chrono::milliseconds(next - now), [&] { return stop || wake; });
      if (stop) break;
      if (wake) {  // reconfigured: recompute the boundary
        wake = false;
        continue;
      }
      const int64_t after =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
              .count();
      if (after < next) continue;  // woke early
      lk.unlock();
      CloseWindow(next);
      lk.lock();
    }
  }
};

AnomalyDetector::AnomalyDetector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AnomalyDetector::AnomalyDetector(const AnomalyConfig& config, metrics::Registry* registry,
                                 const Clock& clock,
                                 std::vector<std::unique_ptr<alerting::Sink>> sinks)
    : impl_(std::make_unique<Impl>(config, registry, clock,
                                   std::make_shared<alerting::Notifier>(
                                       std::move(sinks), config.notify.queue_capacity, clock),
                                   /*injected=*/true)) {}

namespace {
// config.notify's sinks plus the extra one, on one Notifier.
Result<std::shared_ptr<alerting::Notifier>> BuildNotifier(
    const AnomalyConfig& config, const Clock& clock,
    const std::function<std::unique_ptr<alerting::Sink>()>& extra_sink) {
  std::vector<std::unique_ptr<alerting::Sink>> sinks;
  for (const alerting::SinkConfig& s : config.notify.sinks) {
    Result<std::unique_ptr<alerting::Sink>> sink = alerting::MakeSink(s, config.notify.meta);
    if (!sink.ok()) return sink.status().WithContext("anomaly.notify");
    sinks.push_back(std::move(*sink));
  }
  if (extra_sink) sinks.push_back(extra_sink());
  return std::make_shared<alerting::Notifier>(std::move(sinks), config.notify.queue_capacity,
                                              clock);
}
}  // namespace

Result<std::unique_ptr<AnomalyDetector>> AnomalyDetector::Create(
    const AnomalyConfig& config, metrics::Registry* registry, const Clock& clock,
    std::function<std::unique_ptr<alerting::Sink>()> extra_sink) {
  ASSIGN_OR_RETURN(std::shared_ptr<alerting::Notifier> notifier,
                   BuildNotifier(config, clock, extra_sink));
  auto impl = std::make_unique<Impl>(config, registry, clock, std::move(notifier),
                                     /*injected=*/false);
  impl->extra_sink = std::move(extra_sink);
  return std::unique_ptr<AnomalyDetector>(new AnomalyDetector(std::move(impl)));
}

AnomalyDetector::~AnomalyDetector() {
  {
    std::lock_guard<std::mutex> lk(impl_->thread_mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  std::shared_ptr<alerting::Notifier> n;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    n = impl_->notifier;
  }
  // Alerts already produced are delivered (bounded: a dead webhook must not
  // hold shutdown for long).
  if (n) n->Flush(std::chrono::seconds(5));
}

void AnomalyDetector::Start() {
  std::lock_guard<std::mutex> lk(impl_->thread_mu);
  if (impl_->thread.joinable() || impl_->stop) return;
  impl_->thread = std::thread([this] { impl_->Run(); });
}

void AnomalyDetector::Record(const OutputRecord& r) { impl_->Record(r); }

AnomalyDetector::WindowSummary AnomalyDetector::CloseWindow(int64_t now_ms) {
  return impl_->CloseWindow(now_ms);
}

Status AnomalyDetector::Reconfigure(const AnomalyConfig& config) {
  if (config.violations < 1 || config.of < 1 || config.violations > config.of ||
      config.resolve_after < 1 || config.window < std::chrono::seconds(1) ||
      config.max_models < 1 || config.min_requests < 1) {
    return InvalidArgument(
        "anomaly: invalid configuration (need 1 <= violations <= of, resolve_after >= 1, "
        "window >= 1s, max_models >= 1, min_requests >= 1); use ParseAnomalyConfig");
  }
  std::shared_ptr<alerting::Notifier> fresh;
  if (!impl_->injected_sinks) {
    ASSIGN_OR_RETURN(fresh, BuildNotifier(config, impl_->clock, impl_->extra_sink));
  }
  std::lock_guard<std::mutex> close_lock(impl_->close_mu);
  std::vector<alerting::Alert> alerts;
  std::shared_ptr<alerting::Notifier> old, deliver_to;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    const AnomalyConfig before = impl_->cfg;
    impl_->cfg = config;
    impl_->ApplyConfigLocked();
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               impl_->clock.WallNow().time_since_epoch())
                               .count();
    for (auto it = impl_->states.begin(); it != impl_->states.end();) {
      const std::string& signal = std::get<2>(it->first);
      Signal s = Signal::kOutputs;
      for (Signal c : kAllSignals) {
        if (SignalName(c) == signal) s = c;
      }
      if (!config.enabled || !impl_->signal_on[static_cast<size_t>(s)]) {
        // A signal no longer watched: its alert must not stay firing forever.
        impl_->ResolveGone(it->first, it->second, now_ms, &alerts);
        if (!config.enabled) {
          ++it;  // disabled as a whole: keep what was learned
        } else {
          it = impl_->states.erase(it);
        }
        continue;
      }
      if (before.violations != config.violations || before.of != config.of) {
        it->second.violations = ViolationWindow(config.violations, config.of);
      }
      ++it;
    }
    if (fresh) {
      old = impl_->notifier;
      impl_->notifier = fresh;
    }
    deliver_to = impl_->notifier;
  }
  impl_->enabled.store(config.enabled);
  impl_->max_models.store(config.max_models);
  impl_->window_ms.store(config.window.count());
  // Resolutions go to the new sinks (the old ones may be gone from the config).
  impl_->Deliver(std::move(alerts), deliver_to);
  if (old) old->Flush(std::chrono::seconds(2));
  {
    std::lock_guard<std::mutex> lk(impl_->thread_mu);
    impl_->wake = true;
  }
  impl_->cv.notify_all();
  return Status::Ok();
}

std::vector<SignalState> AnomalyDetector::States() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<SignalState> out;
  out.reserve(impl_->states.size());
  for (const auto& [key, h] : impl_->states) {
    SignalState s;
    s.model = std::get<0>(key);
    s.version = std::get<1>(key);
    s.signal = std::get<2>(key);
    s.windows = h.history.size();
    s.ready = h.ready;
    s.not_ready_reason = h.not_ready_reason;
    s.last_value = h.last_value;
    s.lower = h.band.lower;
    s.upper = h.band.upper;
    s.firing = h.firing;
    s.recent_violations = h.violations.count();
    out.push_back(std::move(s));
  }
  return out;
}

bool AnomalyDetector::Flush(std::chrono::milliseconds timeout) {
  std::shared_ptr<alerting::Notifier> n;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    n = impl_->notifier;
  }
  return n ? n->Flush(timeout) : true;
}

}  // namespace gantry::gateway
