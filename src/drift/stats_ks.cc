// Sorting and the two-sample Kolmogorov-Smirnov test, following
// scipy.stats.ks_2samp (scipy 1.10): the statistic from one merge pass over
// the two sorted samples, the exact p-value (lattice-path counting) when
// scipy's 'auto' would use it, else kstwo.sf(D, round(m n / (m + n))) with
// the same branch structure as scipy.stats._ksstats._kolmogn.
// Bit-for-bit agreement with numpy needs a*b+c rounded twice, as numpy
// does: no FMA contraction under -march=native.
#pragma GCC optimize("fp-contract=off")
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>

#include "gantry/drift/stats.h"
#include "stats_internal.h"

namespace gantry::drift {
namespace internal {

size_t DropNaN(std::vector<double>& v) {
  size_t w = 0;
  for (size_t r = 0; r < v.size(); ++r) {
    double x = v[r];
    if (!std::isnan(x)) v[w++] = x;
  }
  size_t dropped = v.size() - w;
  v.resize(w);
  return dropped;
}

namespace {

// Order-preserving map from double bits to unsigned keys: negative numbers
// have all bits flipped, non-negative ones only the sign bit.
inline uint64_t ToKey(uint64_t b) { return b ^ ((b >> 63) ? ~uint64_t{0} : (uint64_t{1} << 63)); }
inline uint64_t FromKey(uint64_t k) { return k ^ ((k >> 63) ? (uint64_t{1} << 63) : ~uint64_t{0}); }

constexpr int kDigitBits = 11;
constexpr int kPasses = 6;  // 66 bits >= 64
constexpr size_t kBuckets = size_t{1} << kDigitBits;

}  // namespace

void SortDoubles(std::vector<double>& v) {
  const size_t n = v.size();
  if (n < 256) {
    std::sort(v.begin(), v.end());
    return;
  }
  static_assert(sizeof(double) == sizeof(uint64_t));
  uint64_t* keys = reinterpret_cast<uint64_t*>(v.data());
  // One histogram pass for all digits.
  std::vector<uint32_t> hist(kPasses * kBuckets, 0);
  for (size_t i = 0; i < n; ++i) {
    uint64_t b;
    std::memcpy(&b, &v[i], 8);
    uint64_t k = ToKey(b);
    keys[i] = k;
    for (int p = 0; p < kPasses; ++p)
      ++hist[p * kBuckets + ((k >> (p * kDigitBits)) & (kBuckets - 1))];
  }
  std::vector<uint64_t> tmp(n);
  uint64_t* src = keys;
  uint64_t* dst = tmp.data();
  // A digit shared by every key (typical for exponent bits) needs no pass.
  int passes[kPasses], npasses = 0;
  for (int p = 0; p < kPasses; ++p) {
    const uint32_t* h = &hist[p * kBuckets];
    bool trivial = false;
    for (size_t d = 0; d < kBuckets; ++d) {
      if (h[d] == n) trivial = true;
      if (h[d] != 0) break;
    }
    if (!trivial) passes[npasses++] = p;
  }
  for (int q = 0; q < npasses; ++q) {
    const int p = passes[q];
    uint32_t* h = &hist[p * kBuckets];
    uint32_t sum = 0;
    for (size_t d = 0; d < kBuckets; ++d) {
      uint32_t c = h[d];
      h[d] = sum;
      sum += c;
    }
    const int shift = p * kDigitBits;
    if (q + 1 < npasses) {
      for (size_t i = 0; i < n; ++i) {
        uint64_t k = src[i];
        dst[h[(k >> shift) & (kBuckets - 1)]++] = k;
      }
    } else {
      // The last pass writes the double bit patterns back directly.
      for (size_t i = 0; i < n; ++i) {
        uint64_t k = src[i];
        dst[h[(k >> shift) & (kBuckets - 1)]++] = FromKey(k);
      }
    }
    std::swap(src, dst);
  }
  if (npasses == 0) {
    for (size_t i = 0; i < n; ++i) src[i] = FromKey(src[i]);
  }
  if (src != keys) std::memcpy(keys, src, n * sizeof(uint64_t));
}

void SortTwo(std::vector<double>& a, std::vector<double>& b) {
  // Two cores here: sorting the samples concurrently halves the dominant cost.
  if (a.size() + b.size() >= (size_t{1} << 17) && std::thread::hardware_concurrency() > 1) {
    std::thread t([&a] { SortDoubles(a); });
    SortDoubles(b);
    t.join();
  } else {
    SortDoubles(a);
    SortDoubles(b);
  }
}

// ---------------------------------------------------- Kolmogorov / Smirnov --

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kMinLog = -7.451332191019412076235E2;  // cephes MINLOG

double Clip01(double p) { return std::isnan(p) ? p : std::min(1.0, std::max(0.0, p)); }

// Exact one-sided survival via the Birnbaum-Tingey sum, in long double with
// the binomial coefficient held as mantissa * 2^exponent (it overflows any
// float format for large n). Accuracy ~1e-14 relative (see the tests).
// Sum of terms [j0, j1) with C(n, j0) = cman * 2^cexp on entry.
long double SmirnovPartial(int n, long double nxL, long double alpha, int64_t nxfl, int64_t j0,
                           int64_t j1, int64_t last, long double cman, long double cexp) {
  const long double nL = n;
  long double sum = 0;
  constexpr int64_t kBlock = 64;
  const double inv_ln2 = 1.4426950408889634074;
  for (int64_t jb = j0; jb < j1; jb += kBlock) {
    const int64_t je = std::min(j1, jb + kBlock);
    // Logs at the block start in long double; inside the block the bases
    // move by a small relative step, whose log1p in double times the
    // exponent stays below ~2 * kBlock in magnitude (error < 1e-13), two
    // cheap double log1p instead of two log2l per term. Near the end of the
    // range, where 1 - x - j/n gets small, every term takes the long path.
    const long double d1 = nxL + jb;                                         // n (x + jb/n)
    const long double d2 = static_cast<long double>(n - jb - nxfl) - alpha;  // n (1 - x - jb/n)
    const bool fast = d2 >= std::max<long double>(nxL, 4 * kBlock);
    const long double L1 = std::log2(d1 / nL), L2 = std::log2(d2 / nL);
    for (int64_t j = jb; j < je; ++j) {
      long double e;
      if (fast) {
        const double k = static_cast<double>(j - jb);
        const double small =
            (static_cast<double>(j - 1) * std::log1p(k / static_cast<double>(d1)) +
             static_cast<double>(n - j) * std::log1p(-k / static_cast<double>(d2))) *
            inv_ln2;
        e = cexp + static_cast<long double>(j - 1) * L1 + static_cast<long double>(n - j) * L2 +
            small;
      } else {
        long double b1 = (nxL + j) / nL;                                         // x + j/n
        long double b2 = (static_cast<long double>(n - j - nxfl) - alpha) / nL;  // 1 - x - j/n
        e = cexp + static_cast<long double>(j - 1) * std::log2(b1) +
            static_cast<long double>(n - j) * std::log2(b2);
      }
      // 2^e as 2^floor(e) * 2^frac: the fraction in double is accurate to
      // 1e-16 relative and much cheaper than exp2l.
      long double ef = std::floor(e);
      double frac = static_cast<double>(e - ef);
      long double term = cman * std::ldexp(static_cast<long double>(std::exp2(frac)),
                                           static_cast<int>(std::max<long double>(ef, -30000)));
      sum += term;
      if (j0 == 0 && term != 0 &&
          4.0L * static_cast<long double>(last + 1 - j) * term <
              std::numeric_limits<double>::epsilon() * sum &&
          j != last) {
        return sum;
      }
      cman *= static_cast<long double>(n - j) / static_cast<long double>(j + 1);
      if (cman > 0x1p+4096L) {
        cman *= 0x1p-4096L;
        cexp += 4096;
      } else if (cman < 0x1p-4096L) {  // past j = n/2 the coefficient shrinks
        cman *= 0x1p+4096L;
        cexp -= 4096;
      }
    }
  }
  return sum;
}

// Exact one-sided survival via the Birnbaum-Tingey sum, in long double with
// the binomial coefficient held as mantissa * 2^exponent (it overflows any
// float format for large n). Accuracy ~1e-14 relative (see the tests). Large
// n (up to scipy's 10^6 cut-off) is split over two threads.
double SmirnovSum(int n, double x, long double nx_hi, long double nx_lo, int64_t nxfl) {
  const long double alpha = (nx_hi - static_cast<long double>(nxfl)) + nx_lo;  // frac(n x)
  const long double nxL = static_cast<long double>(nxfl) + alpha;
  // Terms j = 0 .. floor(n (1 - x)); when n x is an integer the last one,
  // 0^(n x), is 0 and left out as scipy does.
  const int64_t last = n - nxfl - 1;
  long double sum;
  if (last > 20000 && std::thread::hardware_concurrency() > 1) {
    // The second half starts from C(n, mid), carried by the cheap recurrence.
    const int64_t mid = (last + 1) / 2;
    long double cman = 1.0L, cexp = 0;
    for (int64_t j = 0; j < mid; ++j) {
      cman *= static_cast<long double>(n - j) / static_cast<long double>(j + 1);
      if (cman > 0x1p+4096L) {
        cman *= 0x1p-4096L;
        cexp += 4096;
      } else if (cman < 0x1p-4096L) {
        cman *= 0x1p+4096L;
        cexp -= 4096;
      }
    }
    long double upper = 0;
    std::thread t(
        [&] { upper = SmirnovPartial(n, nxL, alpha, nxfl, mid, last + 1, last, cman, cexp); });
    long double lower = SmirnovPartial(n, nxL, alpha, nxfl, 0, mid, last, 1.0L, 0);
    t.join();
    sum = lower + upper;
  } else {
    sum = SmirnovPartial(n, nxL, alpha, nxfl, 0, last + 1, last, 1.0L, 0);
  }
  return static_cast<double>(static_cast<long double>(x) * sum);
}

}  // namespace

double SmirnovSf(int n, double x) {
  if (!(n > 0 && x >= 0.0 && x <= 1.0)) return std::numeric_limits<double>::quiet_NaN();
  if (n == 1) return 1 - x;
  if (x == 0.0) return 1.0;
  if (x == 1.0) return 0.0;
  // n x split exactly into hi + lo, then floor and fractional part.
  double hi = static_cast<double>(n) * x;
  double lo = std::fma(static_cast<double>(n), x, -hi);
  long double nxL = static_cast<long double>(hi) + lo;
  int64_t nxfl = static_cast<int64_t>(std::floor(nxL));
  long double alpha = nxL - nxfl;
  if (alpha >= 1) {
    nxfl += 1;
    alpha = 0;
  }
  if (nxfl == 0 || (nxfl == 1 && alpha == 0)) {
    long double cdf =
        static_cast<long double>(x) * std::pow(1.0L + x, static_cast<long double>(n - 1));
    return static_cast<double>(1.0L - cdf);
  }
  if (-2 * n * x * x < kMinLog) return 0.0;
  if (nxfl >= n - 1) return static_cast<double>(std::pow(1.0L - x, static_cast<long double>(n)));
  if (n > 1000000) {
    // scipy's approximation above SMIRNOV_MAX_COMPUTE_N.
    double logp = -std::pow(6 * n * x + 1.0, 2) / 18.0 / n;
    return std::exp(logp);
  }
  return Clip01(SmirnovSum(n, x, hi, lo, nxfl));
}

namespace {

constexpr double kE128 = 0x1p128;
constexpr double kEM128 = 0x1p-128;

// Durbin matrix (Marsaglia-Tsang-Wang) for Pr(D_n <= d).
double DurbinCdf(int n, double d) {
  if (d >= 1.0) return 1.0;
  double nd = n * d;
  if (nd <= 0.5) return 0.0;
  int k = static_cast<int>(std::ceil(nd));
  double h = k - nd;
  int m = 2 * k - 1;
  std::vector<double> H(size_t(m) * m, 0.0), v(m), w(m);
  double fac = 1.0;
  for (int j = 1; j <= m; ++j) {
    w[j - 1] = fac;
    fac /= j;
    v[j - 1] = (1.0 - std::pow(h, j)) * fac;
  }
  double tt = std::pow(std::max(2 * h - 1.0, 0.0), m) - 2 * std::pow(h, m);
  v[m - 1] = (1.0 + tt) * fac;
  for (int i = 1; i < m; ++i)
    for (int r = i - 1; r < m; ++r) H[size_t(r) * m + i] = w[r - (i - 1)];
  for (int r = 0; r < m; ++r) H[size_t(r) * m] = v[r];
  for (int c = 0; c < m; ++c) H[size_t(m - 1) * m + c] = v[m - 1 - c];
  std::vector<double> P(size_t(m) * m, 0.0), T(size_t(m) * m);
  for (int i = 0; i < m; ++i) P[size_t(i) * m + i] = 1.0;
  auto matmul = [m](const std::vector<double>& A, const std::vector<double>& B,
                    std::vector<double>& C) {
    std::fill(C.begin(), C.end(), 0.0);
    for (int i = 0; i < m; ++i)
      for (int kk = 0; kk < m; ++kk) {
        double a = A[size_t(i) * m + kk];
        if (a == 0) continue;
        const double* b = &B[size_t(kk) * m];
        double* c = &C[size_t(i) * m];
        for (int j = 0; j < m; ++j) c[j] += a * b[j];
      }
  };
  int expnt = 0, hexpnt = 0;
  int nn = n;
  while (nn > 0) {
    if (nn % 2) {
      matmul(P, H, T);
      P.swap(T);
      expnt += hexpnt;
    }
    matmul(H, H, T);
    H.swap(T);
    hexpnt *= 2;
    if (std::fabs(H[size_t(k - 1) * m + (k - 1)]) > kE128) {
      for (double& x : H) x /= kE128;
      hexpnt += 128;
    }
    nn /= 2;
  }
  long double p = P[size_t(k - 1) * m + (k - 1)];
  for (int i = 1; i <= n; ++i) {
    p = i * p / n;
    if (std::fabs(p) < kEM128) {
      p *= kE128;
      expnt -= 128;
    }
  }
  return static_cast<double>(std::ldexp(p, expnt));
}

// Pomeranz recursion for Pr(D_n <= x) (used for n <= 140).
double PomeranzCdf(int n, double x) {
  double t = n * x;
  int ll = static_cast<int>(std::floor(t));
  double f = t - ll;
  double g = std::min(f, 1.0 - f);
  int ceilf = f > 0 ? 1 : 0;
  int roundf = f > 0.5 ? 1 : 0;
  int npwrs = 2 * (ll + 1);
  std::vector<double> gp(npwrs), tgp(npwrs), omp(npwrs);
  gp[0] = tgp[0] = omp[0] = 1.0;
  double gn = g / n, tgn = 2 * g / n, omn = (1 - 2 * g) / n;
  for (int m = 1; m < npwrs; ++m) {
    gp[m] = gp[m - 1] * gn / m;
    tgp[m] = tgp[m - 1] * tgn / m;
    omp[m] = omp[m - 1] * omn / m;
  }
  auto j1j2 = [&](int i, int* j1, int* j2) {
    int a, b;
    if (i == 0) {
      a = -ll - ceilf - 1;
      b = ll + ceilf - 1;
    } else {
      int q = (i + 1) / 2, r = (i + 1) % 2;
      if (r == 0) {
        if (q == n + 1) {
          a = n - ll - ceilf - 1;
          b = n + ll + ceilf - 1;
        } else {
          a = q - 1 - ll - roundf - 1;
          b = q + ll - 1 + ceilf - 1;
        }
      } else {
        a = q - 1 - ll - 1;
        b = q + ll + roundf - 1;
      }
    }
    *j1 = std::max(a + 2, 0);
    *j2 = std::min(b, n);
  };
  std::vector<double> V0(npwrs, 0.0), V1(npwrs, 0.0);
  V1[0] = 1;
  int V0s = 0, V1s = 0;
  int j1, j2;
  j1j2(0, &j1, &j2);
  int expnt = 0;
  for (int i = 1; i < 2 * n + 2; ++i) {
    int k1 = j1;
    std::swap(V0, V1);
    std::swap(V0s, V1s);
    std::fill(V1.begin(), V1.end(), 0.0);
    j1j2(i, &j1, &j2);
    const std::vector<double>& pw = (i == 1 || i == 2 * n + 1) ? gp : ((i % 2) ? tgp : omp);
    int ln2 = j2 - k1 + 1;
    if (ln2 > 0) {
      int cstart = j1 - k1, clen = j2 - j1 + 1;
      // Full convolution of V0[k1-V0s : +ln2] with pw[:ln2], entries cstart..cstart+clen-1.
      const double* a = &V0[k1 - V0s];
      double mx = 0;
      for (int c = 0; c < clen; ++c) {
        int idx = cstart + c;
        double s = 0;
        for (int q = std::max(0, idx - (ln2 - 1)); q <= std::min(idx, ln2 - 1); ++q)
          s += a[q] * pw[idx - q];
        V1[c] = s;
        mx = std::max(mx, s);
      }
      if (0 < mx && mx < kEM128) {
        for (double& z : V1) z *= kE128;
        expnt -= 128;
      }
      V1s = V0s + j1 - k1;
    }
  }
  long double ans = V1[n - V1s];
  for (int m = 1; m <= n; ++m) {
    if (std::fabs(ans) > kE128) {
      ans *= kEM128;
      expnt += 128;
    }
    ans *= m;
  }
  return static_cast<double>(std::ldexp(ans, expnt));
}

// Pelz-Good asymptotic expansion of Pr(D_n <= x).
double PelzGoodCdf(double n, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double pi2 = kPi * kPi, pi4 = pi2 * pi2, pi6 = pi4 * pi2;
  const double sqrt2pi = std::sqrt(2 * kPi);
  double z = std::sqrt(n) * x;
  double z2 = z * z, z3 = z2 * z, z4 = z2 * z2, z6 = z4 * z2;
  double qlog = -pi2 / 8 / z2;
  if (qlog < -708) return 0.0;
  double q = std::exp(qlog);
  double k1a = -z2, k1b = pi2 / 4;
  double k2a = 6 * z6 + 2 * z4, k2b = (2 * z4 - 5 * z2) * pi2 / 4, k2c = pi4 * (1 - 2 * z2) / 16;
  double k3d = pi6 * (5 - 30 * z2) / 64, k3c = pi4 * (-60 * z2 + 212 * z4) / 16;
  double k3b = pi2 * (135 * z4 - 96 * z6) / 4, k3a = -30 * z6 - 90 * std::pow(z, 8);
  double K[4] = {0, 0, 0, 0};
  int maxk = static_cast<int>(std::ceil(16 * z / kPi));
  for (int k = maxk; k >= 1; --k) {
    double m = 2 * k - 1, m2 = m * m, m4 = m2 * m2, m6 = m4 * m2;
    double qp = std::pow(q, 8 * k);
    double c[4] = {1.0, k1a + k1b * m2, k2a + k2b * m2 + k2c * m4,
                   k3a + k3b * m2 + k3c * m4 + k3d * m6};
    for (int i = 0; i < 4; ++i) K[i] = K[i] * qp + c[i];
  }
  double den[4] = {z, 6 * z4, 72 * std::pow(z, 7), 6480 * std::pow(z, 10)};
  for (int i = 0; i < 4; ++i) K[i] = K[i] * q * sqrt2pi / den[i];
  double q2 = std::exp(-pi2 / 2 / z2);
  double e2 = 0, e3 = 0;
  double s3z = std::sqrt(3.0) * z;
  for (int k = maxk; k >= 1; --k) {
    double k2 = double(k) * k;
    double qk = std::pow(q2, k2);
    e2 += k2 * qk;
    double kp = kPi * k;
    e3 += (s3z + kp) * (s3z - kp) * k2 * qk;
  }
  K[2] += e2 * pi2 * sqrt2pi / (-36 * z3);
  K[3] += e3 * pi2 * sqrt2pi / (216 * z6);
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += K[i] / std::pow(n, i / 2.0);
  return sum;
}

double LogNFactorialDivNPowN(double n) {
  static const double c[] = {-2.955065359477124183e-2,  6.4102564102564102564e-3,
                             -1.9175269175269175269e-3, 8.4175084175084175084e-4,
                             -5.952380952380952381e-4,  7.9365079365079365079e-4,
                             -2.7777777777777777778e-3, 8.3333333333333333333e-2};
  double rn = 1.0 / n, y = rn / n, poly = 0;
  for (double ci : c) poly = poly * y + ci;
  return std::log(n) / 2 - n + std::log(2 * kPi) / 2 + rn * poly;
}

}  // namespace

double KolmogorovSf(double x, double nd) {
  if (std::isnan(x) || std::isnan(nd) || nd < 1 || nd != std::round(nd))
    return std::numeric_limits<double>::quiet_NaN();
  // kstwo's support is (0.5/n, 1): sf is 1 below it and 0 above.
  if (x <= 0.5 / nd) return 1.0;
  if (x >= 1.0) return 0.0;
  const int n = static_cast<int>(nd);
  double t = nd * x;
  if (t <= 1.0) {  // Ruben-Gambino
    double prob;
    if (n <= 140) {
      prob = 1.0;
      for (int i = 1; i <= n; ++i) prob *= i * (1.0 / n) * (2 * t - 1);
    } else {
      prob = std::exp(LogNFactorialDivNPowN(nd) + nd * std::log(2 * t - 1));
    }
    return Clip01(1.0 - prob);
  }
  if (t >= nd - 1) return Clip01(2 * std::pow(1.0 - x, nd));
  if (x >= 0.5) return Clip01(2 * SmirnovSf(n, x));
  double nxx = t * x;
  if (n <= 140) {
    if (nxx <= 0.754693) return Clip01(1.0 - DurbinCdf(n, x));
    if (nxx <= 4) return Clip01(1.0 - PomeranzCdf(n, x));
    return Clip01(2 * SmirnovSf(n, x));
  }
  if (nxx >= 370.0) return 0.0;
  if (nxx >= 2.2) return Clip01(2 * SmirnovSf(n, x));
  double cdf;
  if (n <= 100000 && n * std::pow(x, 1.5) <= 1.4) {
    cdf = DurbinCdf(n, x);
  } else {
    cdf = PelzGoodCdf(nd, x);
  }
  return Clip01(1.0 - cdf);
}

}  // namespace internal

// ------------------------------------------------------------------- KS --

namespace {

using internal::KolmogorovSf;

// Pr(D >= h/n) for two samples of equal size n (scipy's
// _compute_prob_outside_square, same operation order).
double ProbOutsideSquare(int64_t n, int64_t h) {
  double P = 0.0;
  int64_t k = static_cast<int64_t>(std::floor(static_cast<double>(n) / static_cast<double>(h)));
  while (k >= 0) {
    double p1 = 1.0;
    for (int64_t j = 0; j < h; ++j)
      p1 = static_cast<double>(n - k * h - j) * p1 / static_cast<double>(n + k * h + j + 1);
    P = p1 * (1.0 - P);
    --k;
  }
  return 2 * P;
}

// 1 - Pr(paths stay strictly inside |x/m - y/n| < h/lcm), Hodges' inside
// method with Viehmann's recursion for the complement (scipy's
// _compute_outer_prob_inside_method).
double OuterProbInside(int64_t m, int64_t n, int64_t g, int64_t h) {
  if (m < n) std::swap(m, n);
  const int64_t mg = m / g, ng = n / g;
  int64_t minj = 0;
  int64_t maxj = std::min<int64_t>(static_cast<int64_t>(std::ceil(double(h) / double(mg))), n + 1);
  int64_t curlen = maxj - minj;
  int64_t lenA = std::min<int64_t>(2 * maxj + 2, n + 1);
  std::vector<double> A(std::max<int64_t>(lenA, n + 2), 1.0);
  for (int64_t j = minj; j < maxj; ++j) A[j] = 0.0;
  for (int64_t i = 1; i <= m; ++i) {
    int64_t lastminj = minj, lastlen = curlen;
    minj =
        std::max<int64_t>(static_cast<int64_t>(std::floor(double(ng * i - h) / double(mg))) + 1, 0);
    minj = std::min(minj, n);
    maxj =
        std::min<int64_t>(static_cast<int64_t>(std::ceil(double(ng * i + h) / double(mg))), n + 1);
    if (maxj <= minj) return 1.0;
    double val = minj == 0 ? 0.0 : 1.0;
    const double di = static_cast<double>(i);
    for (int64_t jj = 0; jj < maxj - minj; ++jj) {
      int64_t j = jj + minj;
      val = (A[jj + minj - lastminj] * di + val * static_cast<double>(j)) /
            static_cast<double>(i + j);
      A[jj] = val;
    }
    curlen = maxj - minj;
    if (lastlen > curlen) {
      for (int64_t q = maxj - minj; q < maxj - minj + (lastlen - curlen); ++q) A[q] = 1.0;
    }
  }
  return A[maxj - minj - 1];
}

Status CheckSortedNoNaN(std::span<const double> v, const char* name) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i]))
      return InvalidArgument(
          fmt::format("{}: marked presorted but contains NaN at index {}", name, i));
    if (i > 0 && v[i] < v[i - 1])
      return InvalidArgument(fmt::format(
          "{}: marked presorted but not ascending at index {}; sort it or pass presorted=false",
          name, i));
  }
  return Status();
}

// Extremes of F_a - F_b over the distinct values of a[i0:] and b[j0:] (the
// counts stay absolute). The exact integer key i*n2 - j*n1 finds the extreme
// positions; the double value there is computed as scipy does (i/n1 - j/n2),
// keeping the most extreme rounded value among exact ties.
struct Extremes {
  int64_t maxkey = std::numeric_limits<int64_t>::min(),
          minkey = std::numeric_limits<int64_t>::max();
  double maxval = 0, minval = 0;
  void Merge(const Extremes& o) {
    if (o.maxkey > maxkey || (o.maxkey == maxkey && o.maxval > maxval)) {
      maxkey = o.maxkey;
      maxval = o.maxval;
    }
    if (o.minkey < minkey || (o.minkey == minkey && o.minval < minval)) {
      minkey = o.minkey;
      minval = o.minval;
    }
  }
};

Extremes ScanExtremes(std::span<const double> a, std::span<const double> b, int64_t i0, int64_t j0,
                      int64_t n1, int64_t n2) {
  Extremes e;
  const double dn1 = double(n1), dn2 = double(n2);
  internal::UnionGroups walk{a, b};
  double v;
  while (walk.Next(&v)) {
    const int64_t i = i0 + static_cast<int64_t>(walk.i), j = j0 + static_cast<int64_t>(walk.j);
    const int64_t key = i * n2 - j * n1;
    if (key >= e.maxkey) {
      double val = double(i) / dn1 - double(j) / dn2;
      if (key > e.maxkey || val > e.maxval) e.maxval = val;
      e.maxkey = key;
    }
    if (key <= e.minkey) {
      double val = double(i) / dn1 - double(j) / dn2;
      if (key < e.minkey || val < e.minval) e.minval = val;
      e.minkey = key;
    }
  }
  return e;
}

Result<TestResult> KsSorted(std::span<const double> a, std::span<const double> b, KsMethod method) {
  const int64_t n1 = static_cast<int64_t>(a.size()), n2 = static_cast<int64_t>(b.size());
  Extremes ex;
  if (n1 + n2 >= (int64_t{1} << 18) && std::thread::hardware_concurrency() > 1) {
    // Split at a value so no group of equal values straddles the halves.
    const double s = n1 >= n2 ? a[n1 / 2] : b[n2 / 2];
    const int64_t i0 = std::lower_bound(a.begin(), a.end(), s) - a.begin();
    const int64_t j0 = std::lower_bound(b.begin(), b.end(), s) - b.begin();
    Extremes hi;
    std::thread t([&] { hi = ScanExtremes(a.subspan(i0), b.subspan(j0), i0, j0, n1, n2); });
    ex = ScanExtremes(a.first(i0), b.first(j0), 0, 0, n1, n2);
    t.join();
    ex.Merge(hi);
  } else {
    ex = ScanExtremes(a, b, 0, 0, n1, n2);
  }
  const double minval = ex.minval, maxval = ex.maxval;
  const double dn1 = double(n1), dn2 = double(n2);
  double minS = std::min(1.0, std::max(0.0, -minval));
  double maxS = maxval;
  double d = minS > maxS ? minS : maxS;

  const int64_t g = std::gcd(n1, n2);
  const int64_t n1g = n1 / g, n2g = n2 / g;
  bool exact = false;
  if (method == KsMethod::kAuto) {
    exact = std::max(n1, n2) <= 10000;
  } else if (method == KsMethod::kExact) {
    exact = !(double(n1g) >= double(std::numeric_limits<int32_t>::max()) / double(n2g));
  }
  double prob = -std::numeric_limits<double>::infinity();
  if (exact) {
    const int64_t lcm = n1g * n2;
    const int64_t h = static_cast<int64_t>(std::nearbyint(d * double(lcm)));
    const double dd = double(h) * 1.0 / double(lcm);
    bool ok = true;
    double p;
    if (h == 0) {
      p = 1.0;
    } else if (n1 == n2) {
      p = ProbOutsideSquare(n1, h);
    } else {
      p = OuterProbInside(n1, n2, g, h);
    }
    if (!std::isfinite(p) || !(0 <= p && p <= 1)) ok = false;
    if (ok) {
      d = dd;
      prob = p;
    } else {
      exact = false;  // scipy falls back to the asymptotic p-value (keeping h/lcm as D)
      d = dd;
    }
  }
  if (!exact) {
    double m = std::max(dn1, dn2), n = std::min(dn1, dn2);
    double en = m * n / (m + n);
    prob = KolmogorovSf(d, std::nearbyint(en));
  }
  if (!std::isnan(prob)) prob = std::min(1.0, std::max(0.0, prob));
  return TestResult{d, prob};
}

}  // namespace

Result<TestResult> KsTwoSample(std::vector<double>& a, std::vector<double>& b, KsMethod method,
                               bool presorted) {
  if (presorted) {
    RETURN_IF_ERROR(CheckSortedNoNaN(a, "a"));
    RETURN_IF_ERROR(CheckSortedNoNaN(b, "b"));
  } else {
    internal::DropNaN(a);
    internal::DropNaN(b);
  }
  if (a.empty())
    return InvalidArgument("a: no non-null values; KS needs at least one value per sample");
  if (b.empty())
    return InvalidArgument("b: no non-null values; KS needs at least one value per sample");
  if (!presorted) internal::SortTwo(a, b);
  return KsSorted(a, b, method);
}

Result<TestResult> KsTwoSampleSorted(std::span<const double> a_sorted,
                                     std::span<const double> b_sorted, KsMethod method) {
  RETURN_IF_ERROR(CheckSortedNoNaN(a_sorted, "a"));
  RETURN_IF_ERROR(CheckSortedNoNaN(b_sorted, "b"));
  if (a_sorted.empty()) return InvalidArgument("a: no non-null values");
  if (b_sorted.empty()) return InvalidArgument("b: no non-null values");
  return KsSorted(a_sorted, b_sorted, method);
}

Result<TestResult> KsTwoSampleSortedReference(std::span<const double> reference_sorted,
                                              std::vector<double>& current) {
  RETURN_IF_ERROR(CheckSortedNoNaN(reference_sorted, "reference"));
  internal::DropNaN(current);
  if (reference_sorted.empty()) return InvalidArgument("reference: no non-null values");
  if (current.empty()) return InvalidArgument("current: no non-null values");
  internal::SortDoubles(current);
  return KsSorted(reference_sorted, current, KsMethod::kAuto);
}

namespace internal {
Result<TestResult> KsOfSorted(std::span<const double> a, std::span<const double> b) {
  return KsSorted(a, b, KsMethod::kAuto);
}
}  // namespace internal

}  // namespace gantry::drift
