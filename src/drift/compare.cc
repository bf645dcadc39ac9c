// Compare: a current window against a saved reference profile, per column in
// parallel. The statistics come from stats.h; this file decides which test
// runs on what data (Evidently's rules, docs/drift.md) and gathers the data
// quality and model quality figures.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <unordered_map>

#include "gantry/drift/drift.h"
#include "names.h"
#include "quality.h"

#include "stats_internal.h"

namespace gantry::drift {
namespace {

// Evidently bins a numerical column only when the reference has more than
// 20 distinct values; below that each distinct value is a category.
constexpr uint64_t kMaxDiscreteValues = 20;

// Distinct values of the union of two sorted arrays.
// Distinct values of the union of two sorted arrays, counted up to `limit`
// (the default test only asks whether there are more than 5, so the merge
// stops after a few elements on continuous data instead of walking 2M).
uint64_t UnionUnique(const std::vector<double>& a, const std::vector<double>& b, uint64_t limit) {
  uint64_t n = 0;
  size_t i = 0, j = 0;
  bool have = false;
  double last = 0;
  while ((i < a.size() || j < b.size()) && n < limit) {
    double v = (j >= b.size() || (i < a.size() && a[i] <= b[j])) ? a[i++] : b[j++];
    if (!have || v != last) ++n, last = v, have = true;
  }
  return n;
}

// Counts of each distinct value of the union (sorted arrays), as categories.
void ValueCounts(const std::vector<double>& ref, const std::vector<double>& cur,
                 std::vector<uint64_t>* rc, std::vector<uint64_t>* cc,
                 std::vector<double>* values) {
  size_t i = 0, j = 0;
  while (i < ref.size() || j < cur.size()) {
    double v = (j >= cur.size() || (i < ref.size() && ref[i] <= cur[j])) ? ref[i] : cur[j];
    uint64_t a = 0, b = 0;
    while (i < ref.size() && ref[i] == v) ++i, ++a;
    while (j < cur.size() && cur[j] == v) ++j, ++b;
    values->push_back(v);
    rc->push_back(a);
    cc->push_back(b);
  }
}

std::vector<double> SharesOf(const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  std::vector<double> s(counts.size(), 0.0);
  if (total == 0) return s;
  for (size_t i = 0; i < counts.size(); ++i) s[i] = static_cast<double>(counts[i]) / total;
  return s;
}

// Runs a test on category counts (reference and current on one dictionary).
Result<TestResult> CountTest(StatTest test, const std::vector<uint64_t>& rc,
                             const std::vector<uint64_t>& cc) {
  switch (test) {
    case StatTest::kChiSquared:
      return ChiSquared(rc, cc);
    case StatTest::kZTest:
      return ZTestProportions(rc, cc);
    default:
      break;
  }
  std::vector<double> rs = SharesOf(rc), cs = SharesOf(cc);
  Result<double> d = InvalidArgument("unsupported test");
  switch (test) {
    case StatTest::kPsi:
      d = Psi(rs, cs);
      break;
    case StatTest::kJensenShannon:
      d = JensenShannon(rs, cs);
      break;
    case StatTest::kHellinger:
      d = Hellinger(rs, cs);
      break;
    case StatTest::kLInfinity:
      d = LInfinity(rs, cs);
      break;
    default:
      return InvalidArgument(
          fmt::format("test '{}' does not run on category counts", StatTestName(test)));
  }
  if (!d.ok()) return d.status();
  return TestResult{*d, -1};
}

bool Drifted(StatTest test, const TestResult& r, double threshold) {
  if (std::isnan(r.statistic)) return false;
  if (test == StatTest::kKs) return r.p_value <= threshold;
  if (IsPValueTest(test)) return r.p_value < threshold;
  return r.statistic >= threshold;
}

Result<std::vector<double>> HistogramEdges(const ColumnSpec& spec, const std::vector<double>& ref,
                                           const std::vector<double>& cur) {
  if (spec.binning == Binning::kReferenceQuantiles) return BinEdges(ref, spec.binning, spec.bins);
  // Edges over reference and current together, without concatenating them.
  return BinEdgesOfUnion(ref, cur, spec.binning, spec.bins);
}

Status CompareNumerical(const Profile::ColumnProfile& ref, const Column& cur, uint64_t ref_rows,
                        ColumnDrift* out) {
  const auto& rn = ref.numerical;
  std::vector<double> cv;
  cv.reserve(cur.numbers.size());
  uint64_t outside = 0;
  for (double x : cur.numbers) {
    if (std::isnan(x)) continue;
    cv.push_back(x);
    if (ref.rows > ref.nulls && (x < rn.min || x > rn.max)) ++outside;
  }
  const uint64_t rows = cur.numbers.size();
  out->out_of_range_rate = rows ? static_cast<double>(outside) / rows : 0;
  out->exact = rn.exact;
  internal::SortDoubles(cv);  // radix sort: the window's sort dominates a comparison
  // DefaultStatTest distinguishes 1-2, 3-5 and more than 5 distinct values.
  out->test = ref.spec.test ? *ref.spec.test
                            : DefaultStatTest(ColumnKind::kNumerical, ref_rows,
                                              UnionUnique(rn.sorted, cv, /*limit=*/6));
  out->threshold = ref.spec.threshold ? *ref.spec.threshold : DefaultThreshold(out->test);
  if (rn.sorted.empty() || cv.empty()) {
    out->statistic = std::nan("");
    out->note = rn.sorted.empty() ? "the reference has no non-null values"
                                  : "the current window has no non-null values";
    return Status::Ok();
  }
  // Histograms for the report (and for binned distances).
  ASSIGN_OR_RETURN(out->edges, HistogramEdges(ref.spec, rn.sorted, cv));
  // Both sides are sorted: binary searches at the edges instead of passes.
  const Histogram rh = BinSorted(rn.sorted, out->edges), ch = BinSorted(cv, out->edges);
  // Shares over the bins plus, when either side has mass outside the edges
  // (quantile binning), a below and an above bin on both sides so the two
  // vectors stay aligned and no mass is lost.
  auto aligned = [&](const Histogram& h) {
    std::vector<uint64_t> c;
    if (rh.below + ch.below > 0) c.push_back(h.below);
    c.insert(c.end(), h.counts.begin(), h.counts.end());
    if (rh.above + ch.above > 0) c.push_back(h.above);
    return SharesOf(c);
  };
  const std::vector<double> ref_binned = aligned(rh), cur_binned = aligned(ch);
  out->reference_shares = SharesOf(rh.counts);  // the report draws the in-edge bins
  out->current_shares = SharesOf(ch.counts);

  TestResult r;
  switch (out->test) {
    case StatTest::kKs: {
      // Both sides are sorted and NaN-free already: the kernel, no checks.
      ASSIGN_OR_RETURN(r, internal::KsOfSorted(rn.sorted, cv));
      break;
    }
    case StatTest::kWasserstein: {
      // The profile holds np.std of the reference (ddof 0); Evidently's floor.
      r.statistic = internal::WassersteinOfSorted(rn.sorted, cv) / std::max(rn.std, 0.001);
      break;
    }
    case StatTest::kAndersonDarling: {
      std::vector<double> rv = rn.sorted, cc = cv;
      ASSIGN_OR_RETURN(r, AndersonDarling(rv, cc));
      break;
    }
    default: {
      // Distances and count tests: few distinct reference values are
      // categories (Evidently); more are binned (Sturges over reference and
      // current by default, or the configured binning). Count tests (chi2, z)
      // always use the distinct values.
      uint64_t ref_unique = ref.n_unique;
      bool by_value = out->test == StatTest::kChiSquared || out->test == StatTest::kZTest ||
                      ref_unique <= kMaxDiscreteValues;
      if (by_value) {
        std::vector<uint64_t> rc, cc;
        std::vector<double> values;
        ValueCounts(rn.sorted, cv, &rc, &cc, &values);
        ASSIGN_OR_RETURN(r, CountTest(out->test, rc, cc));
      } else {
        Result<double> d = InvalidArgument("");
        const std::vector<double>& a = ref_binned;
        const std::vector<double>& b = cur_binned;
        switch (out->test) {
          case StatTest::kPsi:
            d = Psi(a, b);
            break;
          case StatTest::kJensenShannon:
            d = JensenShannon(a, b);
            break;
          case StatTest::kHellinger:
            d = Hellinger(a, b);
            break;
          case StatTest::kLInfinity:
            d = LInfinity(a, b);
            break;
          default:
            return Internal("unhandled numerical test");
        }
        if (!d.ok()) return d.status();
        r.statistic = *d;
      }
      break;
    }
  }
  out->statistic = r.statistic;
  out->p_value = r.p_value;
  out->drifted = Drifted(out->test, r, out->threshold);
  return Status::Ok();
}

Status CompareCategorical(const Profile::ColumnProfile& ref, const Column& cur, uint64_t ref_rows,
                          ColumnDrift* out) {
  const auto& rcat = ref.categorical;
  // One dictionary: the reference's categories, then the current's new ones.
  std::vector<std::string> names = rcat.dictionary;
  std::unordered_map<std::string, int32_t> index;
  for (size_t i = 0; i < names.size(); ++i) index.emplace(names[i], static_cast<int32_t>(i));
  std::vector<int32_t> remap(cur.dictionary.size());
  for (size_t i = 0; i < cur.dictionary.size(); ++i) {
    auto [it, inserted] = index.emplace(cur.dictionary[i], static_cast<int32_t>(names.size()));
    if (inserted) names.push_back(cur.dictionary[i]);
    remap[i] = it->second;
  }
  std::vector<uint64_t> rc = rcat.counts, cc(names.size(), 0);
  rc.resize(names.size(), 0);
  uint64_t outside = 0;
  for (int32_t code : cur.codes) {
    if (code < 0) continue;
    int32_t u = remap[code];
    ++cc[u];
    if (rc[u] == 0) ++outside;
  }
  // Drop categories seen in neither (possible for reference dictionary
  // entries whose rows were all filtered).
  std::vector<std::string> kept;
  std::vector<uint64_t> krc, kcc;
  for (size_t i = 0; i < names.size(); ++i) {
    if (rc[i] + cc[i] == 0) continue;
    kept.push_back(names[i]);
    krc.push_back(rc[i]);
    kcc.push_back(cc[i]);
  }
  const uint64_t rows = cur.codes.size();
  out->out_of_range_rate = rows ? static_cast<double>(outside) / rows : 0;
  out->categories = kept;
  out->reference_shares = SharesOf(krc);
  out->current_shares = SharesOf(kcc);
  out->test = ref.spec.test ? *ref.spec.test
                            : DefaultStatTest(ColumnKind::kCategorical, ref_rows, kept.size());
  out->threshold = ref.spec.threshold ? *ref.spec.threshold : DefaultThreshold(out->test);
  uint64_t rtotal = 0, ctotal = 0;
  for (uint64_t k : krc) rtotal += k;
  for (uint64_t k : kcc) ctotal += k;
  if (rtotal == 0 || ctotal == 0) {
    out->statistic = std::nan("");
    out->note = rtotal == 0 ? "the reference has no non-null values"
                            : "the current window has no non-null values";
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(TestResult r, CountTest(out->test, krc, kcc));
  out->statistic = r.statistic;
  out->p_value = r.p_value;
  out->drifted = Drifted(out->test, r, out->threshold);
  return Status::Ok();
}


Status ModelQuality(const Profile& profile, const Table& current, DriftReport* report) {
  const Column *target = nullptr, *pred = nullptr, *score = nullptr;
  for (const Column& c : current.columns) {
    if (c.spec.role == Role::kTarget) target = &c;
    if (c.spec.role == Role::kPrediction) pred = &c;
    if (c.spec.role == Role::kScore) score = &c;
  }
  if (target == nullptr || pred == nullptr) return Status::Ok();
  std::string task = profile.task();
  if (task.empty())
    task = target->spec.kind == ColumnKind::kCategorical ? "classification" : "regression";
  if (task == "regression") {
    if (target->spec.kind != ColumnKind::kNumerical || pred->spec.kind != ColumnKind::kNumerical) {
      return InvalidArgument(
          fmt::format("regression quality needs numerical target '{}' and "
                      "prediction '{}'; fix their types in the schema",
                      target->spec.name, pred->spec.name));
    }
    std::vector<double> y, p;
    for (size_t i = 0; i < current.rows; ++i) {
      if (std::isnan(target->numbers[i]) || std::isnan(pred->numbers[i])) continue;
      y.push_back(target->numbers[i]);
      p.push_back(pred->numbers[i]);
    }
    if (y.empty()) return Status::Ok();
    ASSIGN_OR_RETURN(report->regression, Regression(y, p));
    return Status::Ok();
  }
  // Classification: one sorted dictionary over labels and predictions, so a
  // binary 0/1 or false/true task has the positive class at code 1.
  std::vector<std::optional<std::string>> ys(current.rows), ps(current.rows);
  std::map<std::string, int32_t> classes;
  for (size_t i = 0; i < current.rows; ++i) {
    ys[i] = internal::CellText(*target, i);
    ps[i] = internal::CellText(*pred, i);
    if (ys[i]) classes.emplace(*ys[i], 0);
    if (ps[i]) classes.emplace(*ps[i], 0);
  }
  int32_t k = 0;
  for (auto& [name, code] : classes) code = k++;
  std::vector<int32_t> y, p;
  std::vector<double> s;
  const bool with_scores = score != nullptr && k == 2;
  for (size_t i = 0; i < current.rows; ++i) {
    if (!ys[i] || !ps[i]) continue;
    if (with_scores && std::isnan(score->numbers[i])) continue;
    y.push_back(classes[*ys[i]]);
    p.push_back(classes[*ps[i]]);
    if (with_scores) s.push_back(score->numbers[i]);
  }
  if (y.empty() || k < 1) return Status::Ok();
  ASSIGN_OR_RETURN(report->classification, Classification(y, p, k, s));
  return Status::Ok();
}

}  // namespace

Result<DriftReport> Compare(const Profile& reference, const Table& current,
                            const CompareOptions& options) {
  auto start = std::chrono::steady_clock::now();
  DriftReport report;
  report.reference_rows = reference.rows();
  report.current_rows = current.rows;
  report.drift_share = reference.drift_share();

  std::vector<const Profile::ColumnProfile*> todo;
  std::vector<const Column*> cur_cols;
  std::string missing;
  for (const auto& cp : reference.columns()) {
    if (cp.spec.role != Role::kFeature && cp.spec.role != Role::kPrediction) continue;
    const Column* c = current.Find(cp.spec.name);
    if (c == nullptr) {
      missing += (missing.empty() ? "'" : ", '") + cp.spec.name + "'";
      continue;
    }
    if (c->spec.kind != cp.spec.kind) {
      return InvalidArgument(fmt::format(
          "column '{}' is {} in the profile but {} in the current data; use the schema the "
          "profile was built with",
          cp.spec.name, cp.spec.kind == ColumnKind::kNumerical ? "numerical" : "categorical",
          c->spec.kind == ColumnKind::kNumerical ? "numerical" : "categorical"));
    }
    todo.push_back(&cp);
    cur_cols.push_back(c);
  }
  if (!missing.empty()) {
    return InvalidArgument(
        fmt::format("the current data has no column {} of the reference "
                    "profile; add the columns or rebuild the profile",
                    missing));
  }
  report.columns.resize(todo.size());
  std::vector<Status> errors(todo.size());
  int threads = options.threads > 0
                    ? options.threads
                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(todo.size())));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < todo.size();) {
      const auto& cp = *todo[i];
      const Column& c = *cur_cols[i];
      ColumnDrift& d = report.columns[i];
      d.column = cp.spec.name;
      d.role = cp.spec.role;
      d.kind = cp.spec.kind;
      const double rows = current.rows ? static_cast<double>(current.rows) : 1.0;
      d.null_rate = current.rows ? c.nulls / rows : 0;
      d.type_error_rate = current.rows ? c.type_errors / rows : 0;
      Status s = cp.spec.kind == ColumnKind::kNumerical
                     ? CompareNumerical(cp, c, reference.rows(), &d)
                     : CompareCategorical(cp, c, reference.rows(), &d);
      if (!s.ok()) errors[i] = s.WithContext(fmt::format("column '{}'", cp.spec.name));
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const Status& s : errors) RETURN_IF_ERROR(s);

  int features = 0, drifted = 0;
  for (size_t i = 0; i < todo.size(); ++i) {
    if (todo[i]->spec.role != Role::kFeature) continue;  // prediction drift is reported apart
    ++features;
    drifted += report.columns[i].drifted;
  }
  report.drifted_share = features ? static_cast<double>(drifted) / features : 0;
  report.dataset_drift = features > 0 && report.drifted_share >= report.drift_share;
  RETURN_IF_ERROR(ModelQuality(reference, current, &report));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace gantry::drift
