// The statistics behind `gantry drift`: two-sample tests and distances for
// numerical and categorical columns, binning, data and model quality. Pure
// functions over spans; every result matches scipy/numpy (the tests compute
// scipy's values live) unless a comment says how and why it differs.
//
// Conventions:
// - Numerical inputs may contain NaN (nulls): every function ignores them and
//   reports how many it dropped where that matters. Infinite values are data.
// - Categorical inputs are dictionary codes (int32, -1 = null) with the
//   category count `k`; reference and current share one dictionary.
// - Distances are "drifted when >= threshold", p-value tests "drifted when
//   p < threshold" (KS: p <= threshold), as Evidently.
// - Functions that need non-empty input return InvalidArgument naming the
//   argument ("current: no non-null values").
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "gantry/core/status.h"

namespace gantry::drift {

// ------------------------------------------------------------- numerical --

struct TestResult {
  double statistic = 0;  // D for KS, the distance for distances, chi2, z, A2
  double p_value = -1;   // -1 for distances (no p-value)
};

enum class KsMethod { kAuto, kExact, kAsymptotic };
// scipy.stats.ks_2samp(a, b, alternative='two-sided', method=...): D and the
// p-value; kAuto is exact when scipy's 'auto' is (both samples small enough),
// else asymptotic. Sorting dominates: both inputs are sorted in place when
// `presorted` is false (pass copies you can spare).
Result<TestResult> KsTwoSample(std::vector<double>& a, std::vector<double>& b,
                               KsMethod method = KsMethod::kAuto, bool presorted = false);
// The same with `reference` already sorted and NaN-free (a saved profile).
Result<TestResult> KsTwoSampleSortedReference(std::span<const double> reference_sorted,
                                              std::vector<double>& current);

// Both samples already sorted and NaN-free (a saved profile and a sorted
// window): no copy, no sort. Errors when either is empty or unsorted.
Result<TestResult> KsTwoSampleSorted(std::span<const double> a_sorted,
                                     std::span<const double> b_sorted,
                                     KsMethod method = KsMethod::kAuto);

// scipy.stats.wasserstein_distance(u, v) (1-D, unweighted).
Result<double> Wasserstein(std::vector<double>& u, std::vector<double>& v, bool presorted = false);
// Evidently's "normed" Wasserstein: W / max(std(reference), 0.001) (std with ddof=0).
Result<double> WassersteinNormed(std::vector<double>& reference, std::vector<double>& current,
                                 bool presorted = false);
// The same on sorted, NaN-free samples, without copies.
Result<double> WassersteinNormedSorted(std::span<const double> reference_sorted,
                                       std::span<const double> current_sorted);

// scipy.stats.anderson_ksamp([a, b]).statistic and its approximate
// significance level (scipy caps it to [0.001, 0.25]). Needs >= 4 values in
// total and two distinct values (scipy fails or returns NaN otherwise).
Result<TestResult> AndersonDarling(std::vector<double>& a, std::vector<double>& b);

// ----------------------------------------------------------------- bins --

enum class Binning { kSturges, kDoane, kFixed, kReferenceQuantiles };
std::string_view BinningName(Binning b);  // "sturges", "doane", "fixed", "quantiles"
Result<Binning> ParseBinning(std::string_view text);

// Bin edges (size bins+1, increasing). Sturges and Doane follow
// numpy.histogram_bin_edges(values, bins='sturges'|'doane') over `values`;
// kFixed makes `bins` equal-width bins over [min, max]; kReferenceQuantiles
// makes `bins` bins at reference quantiles, merging duplicate edges (ties),
// so the count may be smaller — the function never returns fewer than 1 bin.
Result<std::vector<double>> BinEdges(std::span<const double> values, Binning binning,
                                     int bins = 10);
// The same over the union of two samples without concatenating them
// (Evidently bins reference + current together). Non-finite values are left
// out of the edges (numpy would refuse an infinite range); Bin() counts them
// in below/above. Errors name `values` when nothing finite is left.
Result<std::vector<double>> BinEdgesOfUnion(std::span<const double> a, std::span<const double> b,
                                            Binning binning, int bins = 10);
// Counts per bin like numpy.histogram (last bin closed); values outside the
// edges are counted in `below`/`above` instead of being dropped.
struct Histogram {
  std::vector<uint64_t> counts;
  uint64_t below = 0, above = 0, nulls = 0;
  uint64_t total() const;  // counts + below + above (not nulls)
};
Histogram Bin(std::span<const double> values, std::span<const double> edges);
// The same counts for sorted, NaN-free values in O(bins log n) (binary
// searches at the edges instead of a pass over the values).
Histogram BinSorted(std::span<const double> sorted_values, std::span<const double> edges);

// Shares from counts (the outside-of-edges mass becomes extra bins when
// non-zero, NannyML-style, so no mass is lost: `below` first, `above` last,
// each present only when its count is non-zero; use AlignedShares for a pair).
std::vector<double> Shares(const Histogram& h);
// Shares of two histograms over the same edges, aligned: the below/above
// bins are present in both when either has mass there (so PSI/JS/Hellinger
// get equal-length vectors). An empty histogram gives all-zero shares.
void AlignedShares(const Histogram& a, const Histogram& b, std::vector<double>* sa,
                   std::vector<double>* sb);

// ------------------------------------------------ distribution distances --

// Zero shares are replaced as Evidently does for PSI/KL (0.0001, or min/1e6
// when the smallest non-zero share is <= 0.0001); documented in docs/drift.md.
// PSI = sum (ref - cur) * ln(ref / cur).
Result<double> Psi(std::span<const double> reference_shares, std::span<const double> current_shares);
// scipy.spatial.distance.jensenshannon(p, q) with natural log (a distance, 0..sqrt(ln 2)).
Result<double> JensenShannon(std::span<const double> p, std::span<const double> q);
// Hellinger distance: sqrt(1 - sum sqrt(p q)), in [0, 1].
Result<double> Hellinger(std::span<const double> p, std::span<const double> q);
// max |p - q|.
Result<double> LInfinity(std::span<const double> p, std::span<const double> q);

// ----------------------------------------------------------- categorical --

// Counts per code 0..k-1 (nulls counted apart).
std::vector<uint64_t> CategoryCounts(std::span<const int32_t> codes, int k, uint64_t* nulls);
// Pearson chi-squared of current counts against expected counts from the
// reference proportions (scipy.stats.chisquare(f_obs, f_exp) with f_exp
// scaled to the current total; categories absent from the reference get the
// Evidently zero-share replacement so the statistic stays finite).
Result<TestResult> ChiSquared(std::span<const uint64_t> reference_counts,
                              std::span<const uint64_t> current_counts);
// Two-proportion Z-test on the first category (binary columns), two-sided,
// as Evidently's z_stat_test.
Result<TestResult> ZTestProportions(std::span<const uint64_t> reference_counts,
                                    std::span<const uint64_t> current_counts);

// ----------------------------------------------------------- the choice --

enum class StatTest {
  kKs, kWasserstein, kPsi, kJensenShannon, kHellinger, kAndersonDarling,  // numerical (+PSI/JS/Hellinger for both)
  kChiSquared, kZTest, kLInfinity                                          // categorical
};
std::string_view StatTestName(StatTest t);  // "ks", "wasserstein", "psi", "jensenshannon", "hellinger", "anderson", "chisquare", "z", "linf"
Result<StatTest> ParseStatTest(std::string_view text);
bool IsPValueTest(StatTest t);   // ks, anderson, chisquare, z
double DefaultThreshold(StatTest t);  // 0.05 p-value tests (anderson 0.1), 0.1 distances

enum class ColumnKind { kNumerical, kCategorical };
// Evidently's default (shared/reference/monitoring.md §4): with <= 1000
// reference rows: numerical n_unique <= 2 -> Z, 3..5 -> chi2, > 5 -> KS;
// categorical n_unique <= 2 -> Z, else chi2. With > 1000: numerical
// n_unique <= 5 -> JS, else Wasserstein (normed); categorical -> JS.
// n_unique counts distinct non-null values of reference and current together.
StatTest DefaultStatTest(ColumnKind kind, uint64_t reference_rows, uint64_t n_unique);

// --------------------------------------------------------- model quality --

struct ClassificationQuality {
  double accuracy = 0;
  double precision_macro = 0, recall_macro = 0, f1_macro = 0;
  double precision_weighted = 0, recall_weighted = 0, f1_weighted = 0;
  double roc_auc = -1;  // binary with scores only; -1 when not computed
};
// Labels and predictions as codes 0..k-1 (sklearn semantics: a class with no
// predicted samples has precision 0). `scores` (optional, binary only) is the
// positive-class score for ROC-AUC (ties averaged as sklearn).
Result<ClassificationQuality> Classification(std::span<const int32_t> labels,
                                             std::span<const int32_t> predictions, int k,
                                             std::span<const double> scores = {});

struct RegressionQuality {
  double mae = 0, mse = 0, rmse = 0, r2 = 0;
};
Result<RegressionQuality> Regression(std::span<const double> labels,
                                     std::span<const double> predictions);

}  // namespace gantry::drift
