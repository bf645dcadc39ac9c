// Helpers shared by the stats_*.cc files (not part of the public interface).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gantry/drift/stats.h"

namespace gantry::drift::internal {

// numpy's pairwise summation (numpy/core/src/umath/loops_utils.h.src,
// pairwise_sum): blocks of <= 128 terms summed with 8 accumulators, larger
// runs split in two at a multiple of 8. Reproducing the order makes np.sum,
// np.mean and np.std results bit-identical, which is what lets the tests hold
// scipy to 1e-15 rather than "close". `next()` yields the terms in order.
template <typename Gen>
double PairwiseSum(Gen& next, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; ++i) res += next();
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = next();
    size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += next();
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += next();
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  double left = PairwiseSum(next, n2);
  return left + PairwiseSum(next, n - n2);
}

// np.sum(values) for a contiguous float64 array.
inline double NumpySum(std::span<const double> v) {
  size_t i = 0;
  auto next = [&] { return v[i++]; };
  return 0.0 + PairwiseSum(next, v.size());
}

// Walks the distinct values of the union of two ascending NaN-free arrays
// (-0.0 == 0.0). After Next(), i and j count the elements <= the value, i.e.
// searchsorted(side='right'). The two-sided step is branch-free so the merge
// does not pay a misprediction per element.
struct UnionGroups {
  std::span<const double> a, b;
  size_t i = 0, j = 0;
  bool Next(double* value) {
    double v;
    if (i < a.size() && j < b.size()) {
      const double x = a[i], y = b[j];
      v = y < x ? y : x;
      i += (x <= v);
      j += (y <= v);
    } else if (i < a.size()) {
      v = a[i++];
    } else if (j < b.size()) {
      v = b[j++];
    } else {
      return false;
    }
    while (i < a.size() && a[i] <= v) ++i;
    while (j < b.size() && b[j] <= v) ++j;
    *value = v;
    return true;
  }
  // The next value without consuming it; precondition: not at the end.
  double Peek() const {
    if (i < a.size() && j < b.size()) return b[j] < a[i] ? b[j] : a[i];
    return i < a.size() ? a[i] : b[j];
  }
};

// Removes NaN in place (order kept); returns how many were removed.
size_t DropNaN(std::vector<double>& v);

// Sorts NaN-free doubles ascending (LSD radix sort on the order-preserving
// bit pattern; -0.0 sorts just before +0.0, which compare equal, so every
// consumer groups equal values with ==).
void SortDoubles(std::vector<double>& v);
// Sorts both, in parallel when they are large.
void SortTwo(std::vector<double>& a, std::vector<double>& b);

// The engine's kernels on sorted, NaN-free input without the public
// functions' argument checks, for callers that hold sorted data already
// (compare.cc): np.mean/np.std (ddof 0) in numpy's order, the Wasserstein
// merge, and the KS statistic and p-value.
void MeanStdOf(std::span<const double> v, double* mean, double* sd);
double WassersteinOfSorted(std::span<const double> u, std::span<const double> v);
Result<TestResult> KsOfSorted(std::span<const double> a, std::span<const double> b);

// Kolmogorov distribution of the one-sample two-sided D_n (scipy.stats.kstwo.sf).
double KolmogorovSf(double x, double n);
// One-sided Smirnov survival function (scipy.special.smirnov).
double SmirnovSf(int n, double x);

// Regularized upper incomplete gamma Q(a, x) (chi2.sf(x, k) = Q(k/2, x/2)).
double GammaQ(double a, double x);

}  // namespace gantry::drift::internal
