// The drift statistics other than KS (stats_ks.cc): Wasserstein,
// Anderson-Darling, binning, distances, categorical tests, the default test
// choice and model quality. Sums go through numpy's pairwise order
// (internal::PairwiseSum) so results match numpy/scipy to the last bits.
// Bit-for-bit agreement with numpy needs a*b+c rounded twice, as numpy
// does: no FMA contraction under -march=native.
#pragma GCC optimize("fp-contract=off")
#include "gantry/drift/stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <thread>

#include "gantry/core/text.h"
#include "stats_internal.h"

namespace gantry::drift {

using internal::PairwiseSum;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Status CheckSortedNoNaN(std::span<const double> v, const char* name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i]) || (i > 0 && v[i] < v[i - 1]))
      return InvalidArgument(fmt::format(
          "{}: marked presorted but has NaN or is not ascending at index {}; pass presorted=false",
          name, i));
  }
  return Status();
}

// Prepares two samples: drops NaN (or checks presorted input), refuses empty.
Status PrepareTwo(std::vector<double>& a, std::vector<double>& b, bool presorted, const char* na,
                  const char* nb) {
  if (presorted) {
    RETURN_IF_ERROR(CheckSortedNoNaN(a, na));
    RETURN_IF_ERROR(CheckSortedNoNaN(b, nb));
  } else {
    internal::DropNaN(a);
    internal::DropNaN(b);
  }
  if (a.empty()) return InvalidArgument(fmt::format("{}: no non-null values", na));
  if (b.empty()) return InvalidArgument(fmt::format("{}: no non-null values", nb));
  if (!presorted) internal::SortTwo(a, b);
  return Status();
}

// np.mean and np.std (ddof=0) of NaN-free values, numpy's operation order.
void MeanStd(std::span<const double> v, double* mean, double* sd) {
  const double n = static_cast<double>(v.size());
  double m = internal::NumpySum(v) / n;
  size_t i = 0;
  auto sq = [&] {
    double d = v[i++] - m;
    return d * d;
  };
  double var = (0.0 + PairwiseSum(sq, v.size())) / n;
  *mean = m;
  *sd = std::sqrt(var);
}

}  // namespace

// ------------------------------------------------------------ Wasserstein --

namespace {

// scipy's _cdf_distance(p=1): sum over the sorted union (N-1 gaps) of
// |F_u - F_v| * gap, the same terms in the same pairwise order, generated
// by one merge pass instead of two searchsorted calls.
double WassersteinSorted(std::span<const double> u, std::span<const double> v) {
  const size_t nu = u.size(), nv = v.size(), N = nu + nv;
  if (N < 2) return 0.0;
  const double dnu = double(nu), dnv = double(nv);
  internal::UnionGroups walk{u, v};
  size_t left = 0;  // terms still to emit for the current group of equal values
  double val = 0, diff = 0;
  // numpy's term at each position of the sorted union: |F_u - F_v| times the
  // gap to the next element; within a group of equal values the gap is
  // val - val (0, or NaN for a repeated infinity, as np.diff gives).
  auto term = [&]() -> double {
    if (left == 0) {
      size_t i0 = walk.i, j0 = walk.j;
      walk.Next(&val);
      left = (walk.i - i0) + (walk.j - j0);
      diff = std::fabs(double(walk.i) / dnu - double(walk.j) / dnv);
    }
    --left;
    if (left > 0) return diff * (val - val);
    return diff * (walk.Peek() - val);
  };
  return 0.0 + PairwiseSum(term, N - 1);
}

}  // namespace

Result<double> Wasserstein(std::vector<double>& u, std::vector<double>& v, bool presorted) {
  RETURN_IF_ERROR(PrepareTwo(u, v, presorted, "u", "v"));
  return WassersteinSorted(u, v);
}

Result<double> WassersteinNormed(std::vector<double>& reference, std::vector<double>& current,
                                 bool presorted) {
  RETURN_IF_ERROR(PrepareTwo(reference, current, presorted, "reference", "current"));
  double mean, sd;
  MeanStd(reference, &mean, &sd);
  return WassersteinSorted(reference, current) / std::max(sd, 0.001);
}

Result<double> WassersteinNormedSorted(std::span<const double> reference_sorted,
                                       std::span<const double> current_sorted) {
  for (auto [v, name] : {std::pair{reference_sorted, "reference"}, {current_sorted, "current"}}) {
    if (v.empty()) return InvalidArgument(std::string(name) + ": no non-null values");
    for (size_t i = 1; i < v.size(); ++i) {
      if (!(v[i - 1] <= v[i])) {
        return InvalidArgument(std::string(name) + ": not sorted or contains NaN");
      }
    }
  }
  double mean, sd;
  MeanStd(reference_sorted, &mean, &sd);
  return WassersteinSorted(reference_sorted, current_sorted) / std::max(sd, 0.001);
}

// -------------------------------------------------------- Anderson-Darling --

Result<TestResult> AndersonDarling(std::vector<double>& a, std::vector<double>& b) {
  RETURN_IF_ERROR(PrepareTwo(a, b, false, "a", "b"));
  const size_t n0 = a.size(), n1 = b.size(), Nz = n0 + n1;
  if (a.front() == a.back() && b.front() == b.back() && a.front() == b.front())
    return InvalidArgument(
        "a, b: anderson_ksamp needs more than one distinct observation (all values are equal)");
  const double N = double(Nz);
  // Count distinct values first: scipy uses lj = 1 exactly when there are no ties.
  size_t i = 0, j = 0, groups = 0;
  while (i < n0 || j < n1) {
    double v = (j >= n1 || (i < n0 && a[i] <= b[j])) ? a[i] : b[j];
    while (i < n0 && a[i] <= v) ++i;
    while (j < n1 && b[j] <= v) ++j;
    ++groups;
  }
  // Midrank statistic: for each distinct z, lj = multiplicity, Bj = (#< z)
  // + lj/2, Mij = (#sample_i <= z) - f_ij/2. Two pairwise sums in one pass.
  const double dn[2] = {double(n0), double(n1)};
  double inner_sum[2];
  {
    // One pass per sample over the same groups (numpy's order for each sum);
    // the two passes are independent, so large inputs run them in parallel.
    auto pass = [&](int s) {
      size_t ii = 0, jj = 0, bl = 0;
      internal::UnionGroups walk{a, b};
      auto gen = [&]() -> double {
        double v;
        walk.Next(&v);
        const size_t i0 = ii, j0 = jj;
        ii = walk.i;
        jj = walk.j;
        size_t l = (ii - i0) + (jj - j0);
        double lj = (groups == Nz) ? 1.0 : double(l);
        double Bj = double(bl) + lj / 2.;
        bl += l;
        size_t right = s == 0 ? ii : jj;
        size_t f = s == 0 ? ii - i0 : jj - j0;
        double Mij = double(right) - double(f) / 2.;
        double num = N * Mij - Bj * dn[s];
        double nlj4 = (groups == Nz) ? N * 1.0 / 4. : double(Nz * l) / 4.;
        return lj / N * (num * num) / (Bj * (N - Bj) - nlj4);
      };
      inner_sum[s] = 0.0 + PairwiseSum(gen, groups);
    };
    if (Nz >= (size_t{1} << 18) && std::thread::hardware_concurrency() > 1) {
      std::thread t(pass, 1);
      pass(0);
      t.join();
    } else {
      pass(0);
      pass(1);
    }
  }
  double A2akN = 0.;
  A2akN += inner_sum[0] / dn[0];
  A2akN += inner_sum[1] / dn[1];
  A2akN *= (N - 1.) / N;

  const double k = 2;
  double H = 0.0;
  {
    double r = 0.;
    r += 1. / dn[0];
    r += 1. / dn[1];
    H = 0.0 + r;
  }
  // hs_cs = cumsum(1 / [N-1, ..., 2]); h = hs_cs[-1] + 1; g = sum(hs_cs / [2..N-1]).
  double h, g;
  if (Nz < 4) {
    // scipy fails (N = 2) or returns NaN (N = 3: the variance divides by N - 3).
    return InvalidArgument("a, b: anderson_ksamp needs at least 4 non-null values in total");
  }
  {
    double cs = 0;
    size_t idx = 0;
    const size_t cnt = Nz - 2;
    auto gen = [&]() -> double {
      cs = idx == 0 ? 1. / double(Nz - 1) : cs + 1. / double(Nz - 1 - idx);
      double t = cs / double(idx + 2);
      ++idx;
      return t;
    };
    g = 0.0 + PairwiseSum(gen, cnt);
    h = cs + 1;
  }
  double av = (4 * g - 6) * (k - 1) + (10 - 6 * g) * H;
  double bv = (2 * g - 4) * k * k + 8 * h * k + (2 * g - 14 * h - 4) * H - 8 * h + 4 * g - 6;
  double cv = (6 * h + 2 * g - 2) * k * k + (4 * h - 4 * g + 6) * k + (2 * h - 6) * H + 4 * h;
  double dv = (2 * h + 6) * k * k - 4 * h * k;
  const unsigned __int128 NN = Nz;
  double N2 = static_cast<double>(NN * NN), N3 = static_cast<double>(NN * NN * NN);
  double sigmasq = (av * N3 + bv * N2 + cv * N + dv) / ((N - 1.) * (N - 2.) * (N - 3.));
  const double m = 1;
  double A2 = (A2akN - m) / std::sqrt(sigmasq);

  // Scholz & Stephens (1987) table 2 coefficients, as scipy 1.10 uses them.
  static const double b0[7] = {0.675, 1.281, 1.645, 1.96, 2.326, 2.573, 3.085};
  static const double b1[7] = {-0.245, 0.25, 0.678, 1.149, 1.822, 2.364, 3.615};
  static const double b2[7] = {-0.105, -0.305, -0.362, -0.391, -0.396, -0.345, -0.154};
  static const double sig[7] = {0.25, 0.1, 0.05, 0.025, 0.01, 0.005, 0.001};
  double crit[7];
  for (int q = 0; q < 7; ++q) crit[q] = b0[q] + b1[q] / std::sqrt(m) + b2[q] / m;
  double cmin = *std::min_element(crit, crit + 7), cmax = *std::max_element(crit, crit + 7);
  double p;
  if (A2 < cmin) {
    p = 0.25;
  } else if (A2 > cmax) {
    p = 0.001;
  } else {
    // Least-squares quadratic through (crit, log(sig)) as np.polyfit(.., 2):
    // normal equations in long double (7 points, well conditioned).
    long double S[5] = {0, 0, 0, 0, 0}, T[3] = {0, 0, 0};
    for (int q = 0; q < 7; ++q) {
      long double x = crit[q], y = std::log(sig[q]), xp = 1;
      for (int e = 0; e < 5; ++e) {
        if (e < 3) T[e] += xp * y;
        S[e] += xp;
        xp *= x;
      }
    }
    // Solve [[S4 S3 S2],[S3 S2 S1],[S2 S1 S0]] [c2 c1 c0] = [T2 T1 T0].
    long double M[3][4] = {
        {S[4], S[3], S[2], T[2]}, {S[3], S[2], S[1], T[1]}, {S[2], S[1], S[0], T[0]}};
    for (int c = 0; c < 3; ++c) {
      int piv = c;
      for (int r = c + 1; r < 3; ++r)
        if (std::fabs(M[r][c]) > std::fabs(M[piv][c])) piv = r;
      for (int e = 0; e < 4; ++e) std::swap(M[c][e], M[piv][e]);
      for (int r = 0; r < 3; ++r) {
        if (r == c) continue;
        long double f = M[r][c] / M[c][c];
        for (int e = c; e < 4; ++e) M[r][e] -= f * M[c][e];
      }
    }
    long double c2 = M[0][3] / M[0][0], c1 = M[1][3] / M[1][1], c0 = M[2][3] / M[2][2];
    p = std::exp(static_cast<double>((c2 * A2 + c1) * A2 + c0));
  }
  return TestResult{A2, p};
}

// ------------------------------------------------------------------ bins --

std::string_view BinningName(Binning b) {
  switch (b) {
    case Binning::kSturges:
      return "sturges";
    case Binning::kDoane:
      return "doane";
    case Binning::kFixed:
      return "fixed";
    case Binning::kReferenceQuantiles:
      return "quantiles";
  }
  return "?";
}

Result<Binning> ParseBinning(std::string_view text) {
  std::string t = AsciiLower(text);
  if (t == "sturges") return Binning::kSturges;
  if (t == "doane") return Binning::kDoane;
  if (t == "fixed" || t == "uniform" || t == "equal") return Binning::kFixed;
  if (t == "quantiles" || t == "quantile" || t == "reference_quantiles")
    return Binning::kReferenceQuantiles;
  return InvalidArgument(
      fmt::format("unknown binning '{}'; use sturges, doane, fixed or quantiles", text));
}

namespace {

// np.linspace(first, last, nb + 1) as numpy computes it.
std::vector<double> Linspace(double first, double last, int64_t nb) {
  std::vector<double> e(static_cast<size_t>(nb) + 1);
  double delta = last - first;
  double step = delta / double(nb);
  for (int64_t i = 0; i <= nb; ++i) {
    e[i] = (step == 0 ? (double(i) / double(nb)) * delta : double(i) * step) + first;
  }
  e[nb] = last;
  return e;
}

}  // namespace

Result<std::vector<double>> BinEdgesOfUnion(std::span<const double> a, std::span<const double> b,
                                            Binning binning, int bins) {
  if ((binning == Binning::kFixed || binning == Binning::kReferenceQuantiles) && bins < 1)
    return InvalidArgument(fmt::format("bins = {}: need at least 1 bin", bins));
  // Finite values only: numpy refuses an infinite range; here infinities land
  // in Histogram::below/above instead. One pass over both spans, no copy.
  size_t n = 0;
  double mn = std::numeric_limits<double>::infinity(), mx = -mn;
  for (std::span<const double> part : {a, b}) {
    for (double x : part) {
      if (!std::isfinite(x)) continue;
      ++n;
      mn = x < mn ? x : mn;
      mx = x > mx ? x : mx;
    }
  }
  if (n == 0) return InvalidArgument("values: no finite non-null values to bin");
  // The finite values of a then b, in order (numpy's concatenation order, so
  // the pairwise sums of Doane's moments are the same).
  auto finite_gen = [&a, &b]() {
    size_t ia = 0, ib = 0;
    return [&a, &b, ia, ib]() mutable -> double {
      while (ia < a.size()) {
        double x = a[ia++];
        if (std::isfinite(x)) return x;
      }
      while (ib < b.size()) {
        double x = b[ib++];
        if (std::isfinite(x)) return x;
      }
      return 0.0;
    };
  };
  double first = mn, last = mx;
  if (first == last) {
    first -= 0.5;
    last += 0.5;
  }
  double ptp = mx - mn;
  int64_t nb = 1;
  switch (binning) {
    case Binning::kSturges: {
      double width = ptp / (std::log2(double(n)) + 1.0);
      nb = width != 0 ? static_cast<int64_t>(std::ceil((last - first) / width)) : 1;
      break;
    }
    case Binning::kDoane: {
      double width = 0;
      if (n > 2) {
        double sg1 = std::sqrt(6.0 * double(n - 2) / ((double(n) + 1.0) * double(n + 3)));
        auto g0 = finite_gen();
        double mean = (0.0 + PairwiseSum(g0, n)) / double(n);
        auto g1 = finite_gen();
        auto sq = [&] {
          double d = g1() - mean;
          return d * d;
        };
        double sigma = std::sqrt((0.0 + PairwiseSum(sq, n)) / double(n));
        if (sigma > 0.0) {
          auto g2 = finite_gen();
          auto cube = [&] {
            double t = (g2() - mean) / sigma;
            return t * t * t;
          };
          double skew = (0.0 + PairwiseSum(cube, n)) / double(n);
          width = ptp / (1.0 + std::log2(double(n)) + std::log2(1.0 + std::fabs(skew) / sg1));
        }
      }
      nb = width != 0 ? static_cast<int64_t>(std::ceil((last - first) / width)) : 1;
      break;
    }
    case Binning::kFixed:
      nb = bins;
      break;
    case Binning::kReferenceQuantiles: {
      std::vector<double> v;
      v.reserve(n);
      auto g = finite_gen();
      for (size_t i = 0; i < n; ++i) v.push_back(g());
      internal::SortDoubles(v);
      std::vector<double> e;
      e.reserve(bins + 1);
      for (int q = 0; q <= bins; ++q) {
        // np.quantile(v, q / bins), linear method.
        double qq = double(q) / double(bins);
        double pos = qq * double(n - 1);
        double lo = std::floor(pos);
        size_t li = static_cast<size_t>(lo);
        double t = pos - lo;
        double x0 = v[li], x1 = v[std::min(li + 1, n - 1)];
        double d = x1 - x0;
        double val = t >= 0.5 ? x1 - d * (1 - t) : x0 + d * t;
        if (q == 0) val = mn;
        if (q == bins) val = mx;
        if (e.empty() || val > e.back()) e.push_back(val);
      }
      if (e.size() < 2) return Linspace(first, last, 1);
      return e;
    }
  }
  if (nb < 1) nb = 1;
  return Linspace(first, last, nb);
}

Result<std::vector<double>> BinEdges(std::span<const double> values, Binning binning, int bins) {
  return BinEdgesOfUnion(values, {}, binning, bins);
}

uint64_t Histogram::total() const {
  uint64_t t = below + above;
  for (uint64_t c : counts) t += c;
  return t;
}

Histogram BinSorted(std::span<const double> v, std::span<const double> edges) {
  if (edges.size() < 2) return Bin(v, edges);
  Histogram h;
  const size_t nb = edges.size() - 1;
  h.counts.assign(nb, 0);
  // numpy.histogram: [e_i, e_{i+1}) for every bin but the last, which is closed.
  auto lower = [&](double e) {
    return static_cast<uint64_t>(std::lower_bound(v.begin(), v.end(), e) - v.begin());
  };
  uint64_t start = lower(edges[0]);
  h.below = start;
  for (size_t i = 0; i + 1 < nb; ++i) {
    const uint64_t end = lower(edges[i + 1]);
    h.counts[i] = end - start;
    start = end;
  }
  const uint64_t last_end =
      static_cast<uint64_t>(std::upper_bound(v.begin(), v.end(), edges.back()) - v.begin());
  h.counts[nb - 1] = last_end - start;
  h.above = v.size() - last_end;
  return h;
}

Histogram Bin(std::span<const double> values, std::span<const double> edges) {
  Histogram h;
  if (edges.size() < 2) {
    for (double x : values) (std::isnan(x) ? h.nulls : h.above) += 1;
    return h;
  }
  const size_t nb = edges.size() - 1;
  h.counts.assign(nb, 0);
  const double first = edges.front(), last = edges.back();
  // Uniform edges (linspace) get numpy's direct index plus a one-step fix-up
  // against the actual edges; anything else a binary search.
  // Zero-width edges (all equal) are not uniform: the direct index would
  // divide by zero; the binary search handles them as numpy does.
  bool uniform = last > first;
  const double step = (last - first) / double(nb);
  for (size_t i = 0; i <= nb && uniform; ++i) {
    double expect = first + double(i) * step;
    if (std::fabs(edges[i] - expect) > 1e-9 * std::fabs(step)) uniform = false;
  }
  const double scale = double(nb) / (last - first);
  uint64_t* counts = h.counts.data();
  for (double x : values) {
    if (std::isnan(x)) {
      ++h.nulls;
      continue;
    }
    if (x < first) {
      ++h.below;
      continue;
    }
    if (x > last) {
      ++h.above;
      continue;
    }
    size_t idx;
    if (uniform) {
      double f = (x - first) * scale;
      idx = f >= double(nb) ? nb - 1 : static_cast<size_t>(f);
      while (idx > 0 && x < edges[idx]) --idx;
      while (idx + 1 < nb && x >= edges[idx + 1]) ++idx;
    } else {
      idx = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin());
      idx = idx == 0 ? 0 : idx - 1;
      if (idx >= nb) idx = nb - 1;  // x == last: last bin is closed
    }
    ++counts[idx];
  }
  return h;
}

std::vector<double> Shares(const Histogram& h) {
  std::vector<double> s;
  const double t = static_cast<double>(h.total());
  s.reserve(h.counts.size() + 2);
  if (h.below) s.push_back(t > 0 ? double(h.below) / t : 0.0);
  for (uint64_t c : h.counts) s.push_back(t > 0 ? double(c) / t : 0.0);
  if (h.above) s.push_back(t > 0 ? double(h.above) / t : 0.0);
  return s;
}

void AlignedShares(const Histogram& a, const Histogram& b, std::vector<double>* sa,
                   std::vector<double>* sb) {
  const bool below = a.below || b.below, above = a.above || b.above;
  auto make = [&](const Histogram& h, std::vector<double>* out) {
    const double t = static_cast<double>(h.total());
    out->clear();
    if (below) out->push_back(t > 0 ? double(h.below) / t : 0.0);
    for (uint64_t c : h.counts) out->push_back(t > 0 ? double(c) / t : 0.0);
    if (above) out->push_back(t > 0 ? double(h.above) / t : 0.0);
  };
  make(a, sa);
  make(b, sb);
}

// ------------------------------------------------ distribution distances --

namespace {

Status CheckShares(std::span<const double> p, std::span<const double> q, const char* np_,
                   const char* nq) {
  if (p.size() != q.size())
    return InvalidArgument(
        fmt::format("{} has {} entries but {} has {}; shares must be aligned bins", np_, p.size(),
                    nq, q.size()));
  if (p.empty()) return InvalidArgument(fmt::format("{}: empty shares", np_));
  for (size_t i = 0; i < p.size(); ++i) {
    if (!(p[i] >= 0) || !std::isfinite(p[i]))
      return InvalidArgument(
          fmt::format("{}[{}] = {}: shares must be finite and >= 0", np_, i, p[i]));
    if (!(q[i] >= 0) || !std::isfinite(q[i]))
      return InvalidArgument(
          fmt::format("{}[{}] = {}: shares must be finite and >= 0", nq, i, q[i]));
  }
  return Status();
}

// Evidently's zero-share replacement (utils.get_binned_data, feel_zeroes).
Result<std::vector<double>> FillZeros(std::span<const double> s, const char* name) {
  double mn = std::numeric_limits<double>::infinity();
  for (double x : s)
    if (x != 0) mn = std::min(mn, x);
  if (!std::isfinite(mn)) return InvalidArgument(fmt::format("{}: all shares are zero", name));
  double fill = mn <= 0.0001 ? mn / 1e6 : 0.0001;
  std::vector<double> out(s.begin(), s.end());
  for (double& x : out)
    if (x == 0) x = fill;
  return out;
}

double RelEntr(double x, double y) {
  if (x > 0 && y > 0) return x * std::log(x / y);
  if (x == 0 && y >= 0) return 0.0;
  return std::numeric_limits<double>::infinity();
}

}  // namespace

Result<double> Psi(std::span<const double> reference_shares,
                   std::span<const double> current_shares) {
  RETURN_IF_ERROR(
      CheckShares(reference_shares, current_shares, "reference_shares", "current_shares"));
  ASSIGN_OR_RETURN(std::vector<double> r, FillZeros(reference_shares, "reference_shares"));
  ASSIGN_OR_RETURN(std::vector<double> c, FillZeros(current_shares, "current_shares"));
  size_t i = 0;
  auto gen = [&] {
    double t = (r[i] - c[i]) * std::log(r[i] / c[i]);
    ++i;
    return t;
  };
  return 0.0 + PairwiseSum(gen, r.size());
}

Result<double> JensenShannon(std::span<const double> p, std::span<const double> q) {
  RETURN_IF_ERROR(CheckShares(p, q, "p", "q"));
  double sp = internal::NumpySum(p), sq = internal::NumpySum(q);
  if (sp == 0) return InvalidArgument("p: all shares are zero");
  if (sq == 0) return InvalidArgument("q: all shares are zero");
  const size_t n = p.size();
  size_t i = 0;
  auto left = [&] {
    double pi = p[i] / sp, qi = q[i] / sq;
    ++i;
    return RelEntr(pi, (pi + qi) / 2.0);
  };
  double ls = 0.0 + PairwiseSum(left, n);
  i = 0;
  auto right = [&] {
    double pi = p[i] / sp, qi = q[i] / sq;
    ++i;
    return RelEntr(qi, (pi + qi) / 2.0);
  };
  double rs = 0.0 + PairwiseSum(right, n);
  double js = ls + rs;
  // Rounding can leave js a hair below 0 for identical inputs, where scipy
  // returns NaN; the distance is 0 there.
  return std::sqrt(std::max(0.0, js / 2.0));
}

Result<double> Hellinger(std::span<const double> p, std::span<const double> q) {
  RETURN_IF_ERROR(CheckShares(p, q, "p", "q"));
  double s = 0.0;  // Evidently sums in a Python loop: sequential order
  for (size_t i = 0; i < p.size(); ++i) s += std::sqrt(p[i] * q[i]);
  s = std::min(1.0, std::max(0.0, s));
  return std::sqrt(1 - s);
}

Result<double> LInfinity(std::span<const double> p, std::span<const double> q) {
  RETURN_IF_ERROR(CheckShares(p, q, "p", "q"));
  double m = 0;
  for (size_t i = 0; i < p.size(); ++i) m = std::max(m, std::fabs(p[i] - q[i]));
  return m;
}

// ----------------------------------------------------------- categorical --

std::vector<uint64_t> CategoryCounts(std::span<const int32_t> codes, int k, uint64_t* nulls) {
  std::vector<uint64_t> counts(k > 0 ? k : 0, 0);
  uint64_t nn = 0;
  for (int32_t c : codes) {
    if (c < 0 || c >= k) {
      ++nn;  // -1 (null) and codes outside the dictionary
    } else {
      ++counts[c];
    }
  }
  if (nulls) *nulls = nn;
  return counts;
}

namespace internal {

// Q(a, x) by the series for P (x < a + 1) or the continued fraction for Q,
// in long double so the prefactor x^a e^-x / Gamma(a) keeps ~1e-16.
double GammaQ(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || a <= 0 || x < 0) return kNaN;
  if (x == 0) return 1.0;
  if (std::isinf(x)) return 0.0;
  const long double A = a, X = x;
  long double logpre = A * std::log(X) - X - std::lgamma(A);
  if (x < a + 1) {
    long double sum = 1.0L / A, term = sum, ap = A;
    for (int it = 0; it < 100000; ++it) {
      ap += 1;
      term *= X / ap;
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-21L) break;
    }
    long double P = sum * std::exp(logpre);
    return static_cast<double>(1.0L - P);
  }
  // Modified Lentz for the continued fraction of Q.
  const long double tiny = 1e-4000L;
  long double b = X + 1 - A, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; ++i) {
    long double an = -i * (i - A);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    long double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-21L) break;
  }
  return static_cast<double>(std::exp(logpre) * h);
}

}  // namespace internal

Result<TestResult> ChiSquared(std::span<const uint64_t> reference_counts,
                              std::span<const uint64_t> current_counts) {
  if (reference_counts.size() != current_counts.size())
    return InvalidArgument(fmt::format(
        "reference_counts has {} categories but current_counts has {}; use one dictionary",
        reference_counts.size(), current_counts.size()));
  uint64_t rt = 0, ct = 0;
  for (uint64_t c : reference_counts) rt += c;
  for (uint64_t c : current_counts) ct += c;
  if (rt == 0) return InvalidArgument("reference_counts: no non-null values");
  if (ct == 0) return InvalidArgument("current_counts: no non-null values");
  // Categories seen in either sample (Evidently's keys); zero reference
  // shares filled, then renormalised so sum(f_exp) == sum(f_obs) as scipy
  // requires.
  std::vector<double> rs, obs;
  for (size_t i = 0; i < reference_counts.size(); ++i) {
    if (reference_counts[i] == 0 && current_counts[i] == 0) continue;
    rs.push_back(double(reference_counts[i]) / double(rt));
    obs.push_back(double(current_counts[i]));
  }
  if (rs.size() < 2) return TestResult{0.0, 1.0};
  ASSIGN_OR_RETURN(std::vector<double> filled, FillZeros(rs, "reference_counts"));
  double fs = internal::NumpySum(filled);
  size_t i = 0;
  auto term = [&] {
    double e = filled[i] / fs * double(ct);
    double d = obs[i] - e;
    ++i;
    return d * d / e;
  };
  double stat = 0.0 + PairwiseSum(term, rs.size());
  double p = internal::GammaQ((double(rs.size()) - 1) / 2.0, stat / 2.0);
  return TestResult{stat, p};
}

Result<TestResult> ZTestProportions(std::span<const uint64_t> reference_counts,
                                    std::span<const uint64_t> current_counts) {
  if (reference_counts.size() != current_counts.size())
    return InvalidArgument(fmt::format(
        "reference_counts has {} categories but current_counts has {}; use one dictionary",
        reference_counts.size(), current_counts.size()));
  uint64_t n1 = 0, n2 = 0;
  for (uint64_t c : reference_counts) n1 += c;
  for (uint64_t c : current_counts) n2 += c;
  if (n1 == 0) return InvalidArgument("reference_counts: no non-null values");
  if (n2 == 0) return InvalidArgument("current_counts: no non-null values");
  size_t first = reference_counts.size(), present = 0;
  for (size_t i = 0; i < reference_counts.size(); ++i) {
    if (reference_counts[i] || current_counts[i]) {
      if (first == reference_counts.size()) first = i;
      ++present;
    }
  }
  if (present <= 1) return TestResult{0.0, 1.0};  // both constant, same value
  // Evidently codes the first category 0 and every other 1.
  double p1 = double(n1 - reference_counts[first]) / double(n1);
  double p2 = double(n2 - current_counts[first]) / double(n2);
  double P = (p1 * double(n1) + p2 * double(n2)) / double(n1 + n2);
  double z = (p1 - p2) / std::sqrt(P * (1 - P) * (1.0 / double(n1) + 1.0 / double(n2)));
  // erfc keeps the tail accurate where Evidently's 2 * (1 - cdf) rounds to 0.
  double p = std::erfc(std::fabs(z) / std::sqrt(2.0));
  return TestResult{z, p};
}

// ----------------------------------------------------------- the choice --

std::string_view StatTestName(StatTest t) {
  switch (t) {
    case StatTest::kKs:
      return "ks";
    case StatTest::kWasserstein:
      return "wasserstein";
    case StatTest::kPsi:
      return "psi";
    case StatTest::kJensenShannon:
      return "jensenshannon";
    case StatTest::kHellinger:
      return "hellinger";
    case StatTest::kAndersonDarling:
      return "anderson";
    case StatTest::kChiSquared:
      return "chisquare";
    case StatTest::kZTest:
      return "z";
    case StatTest::kLInfinity:
      return "linf";
  }
  return "?";
}

Result<StatTest> ParseStatTest(std::string_view text) {
  std::string t = AsciiLower(text);
  if (t == "ks" || t == "kolmogorov_smirnov") return StatTest::kKs;
  if (t == "wasserstein" || t == "wasserstein_normed") return StatTest::kWasserstein;
  if (t == "psi") return StatTest::kPsi;
  if (t == "jensenshannon" || t == "js" || t == "jensen_shannon") return StatTest::kJensenShannon;
  if (t == "hellinger") return StatTest::kHellinger;
  if (t == "anderson" || t == "anderson_darling" || t == "ad") return StatTest::kAndersonDarling;
  if (t == "chisquare" || t == "chi2" || t == "chi_square") return StatTest::kChiSquared;
  if (t == "z" || t == "ztest" || t == "z_test") return StatTest::kZTest;
  if (t == "linf" || t == "l_infinity" || t == "chebyshev") return StatTest::kLInfinity;
  return InvalidArgument(
      fmt::format("unknown test '{}'; use ks, wasserstein, psi, jensenshannon, hellinger, "
                  "anderson, chisquare, z "
                  "or linf",
                  text));
}

bool IsPValueTest(StatTest t) {
  return t == StatTest::kKs || t == StatTest::kAndersonDarling || t == StatTest::kChiSquared ||
         t == StatTest::kZTest;
}

double DefaultThreshold(StatTest t) {
  if (t == StatTest::kAndersonDarling) return 0.1;
  return IsPValueTest(t) ? 0.05 : 0.1;
}

StatTest DefaultStatTest(ColumnKind kind, uint64_t reference_rows, uint64_t n_unique) {
  if (reference_rows <= 1000) {
    if (n_unique <= 2) return StatTest::kZTest;
    if (kind == ColumnKind::kCategorical) return StatTest::kChiSquared;
    return n_unique <= 5 ? StatTest::kChiSquared : StatTest::kKs;
  }
  if (kind == ColumnKind::kCategorical) return StatTest::kJensenShannon;
  return n_unique <= 5 ? StatTest::kJensenShannon : StatTest::kWasserstein;
}

// --------------------------------------------------------- model quality --

Result<ClassificationQuality> Classification(std::span<const int32_t> labels,
                                             std::span<const int32_t> predictions, int k,
                                             std::span<const double> scores) {
  if (labels.size() != predictions.size())
    return InvalidArgument(fmt::format("labels has {} rows but predictions has {}", labels.size(),
                                       predictions.size()));
  if (!scores.empty() && scores.size() != labels.size())
    return InvalidArgument(
        fmt::format("scores has {} rows but labels has {}", scores.size(), labels.size()));
  if (k < 1) return InvalidArgument(fmt::format("k = {}: need at least one class", k));
  std::vector<uint64_t> tp(k, 0), pred(k, 0), truth(k, 0);
  uint64_t rows = 0, correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    int32_t y = labels[i], p = predictions[i];
    if (y < 0 || p < 0) continue;  // rows with a null label or prediction are skipped
    if (y >= k) return InvalidArgument(fmt::format("labels[{}] = {} is not below k = {}", i, y, k));
    if (p >= k)
      return InvalidArgument(fmt::format("predictions[{}] = {} is not below k = {}", i, p, k));
    ++rows;
    ++truth[y];
    ++pred[p];
    if (y == p) {
      ++tp[y];
      ++correct;
    }
  }
  if (rows == 0) return InvalidArgument("labels: no rows with both a label and a prediction");
  ClassificationQuality q;
  q.accuracy = double(correct) / double(rows);
  // sklearn averages over the labels present in y_true or y_pred.
  std::vector<double> P, R, F, W;
  for (int c = 0; c < k; ++c) {
    if (!truth[c] && !pred[c]) continue;
    double pr = pred[c] ? double(tp[c]) / double(pred[c]) : 0.0;
    double rc = truth[c] ? double(tp[c]) / double(truth[c]) : 0.0;
    uint64_t fden = 2 * tp[c] + (pred[c] - tp[c]) + (truth[c] - tp[c]);
    double f1 = fden ? double(2 * tp[c]) / double(fden) : 0.0;
    P.push_back(pr);
    R.push_back(rc);
    F.push_back(f1);
    W.push_back(double(truth[c]));
  }
  const double nl = double(P.size());
  q.precision_macro = internal::NumpySum(P) / nl;
  q.recall_macro = internal::NumpySum(R) / nl;
  q.f1_macro = internal::NumpySum(F) / nl;
  double ws = internal::NumpySum(W);
  auto weighted = [&](const std::vector<double>& v) {
    if (ws == 0) return 0.0;
    size_t i = 0;
    auto g = [&] {
      double t = v[i] * W[i];
      ++i;
      return t;
    };
    return (0.0 + PairwiseSum(g, v.size())) / ws;
  };
  q.precision_weighted = weighted(P);
  q.recall_weighted = weighted(R);
  q.f1_weighted = weighted(F);
  if (!scores.empty() && k == 2) {
    // Mann-Whitney form of the ROC AUC with ties counted 1/2 (what sklearn's
    // trapezoid over the ROC curve computes), in exact integer arithmetic.
    std::vector<std::pair<double, int>> sv;
    sv.reserve(labels.size());
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] < 0 || std::isnan(scores[i])) continue;
      sv.emplace_back(scores[i], labels[i]);
    }
    std::sort(sv.begin(), sv.end(), [](auto& x, auto& y) { return x.first < y.first; });
    unsigned __int128 u2 = 0;  // 2 * U
    uint64_t neg_below = 0, npos = 0, nneg = 0;
    for (size_t i = 0; i < sv.size();) {
      size_t j = i;
      uint64_t gp = 0, gn = 0;
      while (j < sv.size() && sv[j].first == sv[i].first) {
        (sv[j].second == 1 ? gp : gn) += 1;
        ++j;
      }
      u2 += (unsigned __int128)gp * (2 * neg_below + gn);
      neg_below += gn;
      npos += gp;
      nneg += gn;
      i = j;
    }
    if (npos > 0 && nneg > 0) {
      q.roc_auc = static_cast<double>(static_cast<long double>(u2) /
                                      (2.0L * (long double)npos * (long double)nneg));
    }
  }
  return q;
}

Result<RegressionQuality> Regression(std::span<const double> labels,
                                     std::span<const double> predictions) {
  if (labels.size() != predictions.size())
    return InvalidArgument(fmt::format("labels has {} rows but predictions has {}", labels.size(),
                                       predictions.size()));
  std::vector<double> y, p;
  y.reserve(labels.size());
  p.reserve(labels.size());
  for (size_t i = 0; i < labels.size(); ++i) {
    if (std::isnan(labels[i]) || std::isnan(predictions[i])) continue;  // nulls skipped
    y.push_back(labels[i]);
    p.push_back(predictions[i]);
  }
  if (y.empty()) return InvalidArgument("labels: no rows with both a label and a prediction");
  const size_t n = y.size();
  const double dn = double(n);
  RegressionQuality q;
  size_t i = 0;
  auto ae = [&] {
    double t = std::fabs(p[i] - y[i]);
    ++i;
    return t;
  };
  q.mae = (0.0 + PairwiseSum(ae, n)) / dn;
  i = 0;
  auto se = [&] {
    double d = y[i] - p[i];
    ++i;
    return d * d;
  };
  double sse = 0.0 + PairwiseSum(se, n);
  q.mse = sse / dn;
  q.rmse = std::sqrt(q.mse);
  double ym = internal::NumpySum(y) / dn;
  i = 0;
  auto st = [&] {
    double d = y[i] - ym;
    ++i;
    return d * d;
  };
  double sst = 0.0 + PairwiseSum(st, n);
  if (sst != 0) {
    q.r2 = 1 - sse / sst;
  } else {
    q.r2 = sse == 0 ? 1.0 : 0.0;  // sklearn's force_finite
  }
  return q;
}

namespace internal {
void MeanStdOf(std::span<const double> v, double* mean, double* sd) { MeanStd(v, mean, sd); }
double WassersteinOfSorted(std::span<const double> u, std::span<const double> v) {
  return WassersteinSorted(u, v);
}
}  // namespace internal

}  // namespace gantry::drift
