// Known-answer tests for the drift statistics. Expected values were computed
// with /usr/bin/python3, scipy 1.10.1 and numpy 1.24.2 (Debian bookworm); the
// call is written next to every constant. Samples come from a splitmix64
// generator that is easy to reproduce in Python:
//
//   M = (1 << 64) - 1
//   class R:
//       def __init__(s, seed): s.x = seed & M
//       def u(s):
//           s.x = (s.x + 0x9E3779B97F4A7C15) & M; z = s.x
//           z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
//           z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M; z ^= z >> 31
//           return (z >> 11) * 2.0**-53
//   def sample(seed, n, scale=1.0, shift=0.0, grid=0.0):
//       r = R(seed); out = []
//       for _ in range(n):
//           v = (r.u() + r.u() + r.u() + r.u() - 2.0) * scale + shift
//           if grid: v = math.floor(v / grid) * grid
//           out.append(v)
//       return np.array(out)
//
// Only IEEE + - * / and floor are involved, so C++ and Python get the same bits.
// Bit-for-bit agreement with numpy needs a*b+c rounded twice, as numpy
// does: no FMA contraction under -march=native.
#pragma GCC optimize("fp-contract=off")
#include "gantry/drift/stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "stats_internal.h"

namespace gantry::drift {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct SplitMix {
  uint64_t x;
  double U() {
    x += 0x9E3779B97F4A7C15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1p-53;
  }
};

std::vector<double> Sample(uint64_t seed, int n, double scale = 1.0, double shift = 0.0,
                           double grid = 0.0) {
  SplitMix r{seed};
  std::vector<double> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    double a = r.U();
    double b = r.U();
    double c = r.U();
    double d = r.U();
    double v = ((((a + b) + c) + d) - 2.0) * scale + shift;
    if (grid != 0) v = std::floor(v / grid) * grid;
    out.push_back(v);
  }
  return out;
}

// |got - want| <= rel * |want| (or exact equality, for 0 and infinities).
::testing::AssertionResult Near(double got, double want, double rel) {
  if (got == want) return ::testing::AssertionSuccess();
  if (std::fabs(got - want) <= rel * std::fabs(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << " want " << want << " (rel err "
         << std::fabs(got - want) / std::fabs(want) << " > " << rel << ")";
}

struct KsCase {
  const char* name;
  uint64_t sa;
  int na;
  double shift_a, grid_a;
  uint64_t sb;
  int nb;
  double shift_b, grid_b;
  KsMethod method;
  double d, p;
};

// D, p = scipy.stats.ks_2samp(sample(sa, na, 1, shift_a, grid_a),
//                             sample(sb, nb, 1, shift_b, grid_b), method=...)
const KsCase kKsCases[] = {
    // exact, n1 != n2 (_compute_outer_prob_inside_method)
    {"exact_small", 1, 8, 0, 0, 2, 7, 0.5, 0, KsMethod::kAuto, 0.375, 0.5076923076923078},
    // exact, n1 == n2 (_compute_prob_outside_square)
    {"exact_square", 3, 50, 0, 0, 4, 50, 0.3, 0, KsMethod::kAuto, 0.36, 0.002834980581320342},
    // ties on a 0.25 grid
    {"exact_ties", 5, 300, 0, 0.25, 6, 200, 0.1, 0.25, KsMethod::kAuto, 0.07166666666666667,
     0.5519872111664754},
    // asymptotic, en = 5739: Pelz-Good
    {"asymp_pelzgood", 7, 12000, 0, 0, 8, 11000, 0.01, 0, KsMethod::kAuto, 0.023287878787878802,
     0.003896410538047903},
    // asymptotic, n x^2 >= 2.2: 2 * smirnov(n, x)
    {"asymp_smirnov", 9, 12000, 0, 0, 10, 11000, 0.08, 0, KsMethod::kAuto, 0.05681818181818188,
     1.5172602777001398e-16},
    // asymptotic, en = 60 (n <= 140): Durbin matrix
    {"asymp_durbin", 11, 20000, 0, 0, 12, 60, 0.0, 0, KsMethod::kAuto, 0.0990333333333333,
     0.564525785507148},
    // en = 60, 0.754693 < n x^2 <= 4... here > 4: smirnov for n <= 140
    {"asymp_small_n", 13, 20000, 0, 0, 14, 60, 0.5, 0, KsMethod::kAuto, 0.37776666666666664,
     3.3406295640066944e-08},
    // method='asymp' on small samples
    {"asymp_forced", 15, 30, 0, 0, 16, 40, 0.4, 0, KsMethod::kAsymptotic, 0.4333333333333333,
     0.002030682905732273},
    // disjoint samples: D = 1
    {"disjoint", 17, 5, 0, 0, 18, 6, 100, 0, KsMethod::kAuto, 1.0, 0.004329004329004329},
    // method='exact' on larger samples
    {"exact_forced_large", 19, 3000, 0, 0, 20, 2500, 0.05, 0, KsMethod::kExact, 0.0436,
     0.010862650373912958},
};

TEST(KsTwoSample, MatchesScipy) {
  for (const KsCase& c : kKsCases) {
    SCOPED_TRACE(c.name);
    auto a = Sample(c.sa, c.na, 1, c.shift_a, c.grid_a);
    auto b = Sample(c.sb, c.nb, 1, c.shift_b, c.grid_b);
    auto r = KsTwoSample(a, b, c.method);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(Near(r->statistic, c.d, 1e-15));
    // The Smirnov sum runs in long double where scipy uses double-double:
    // agreement is ~1e-13 there; exact paths agree to rounding.
    EXPECT_TRUE(Near(r->p_value, c.p, 1e-12));
  }
}

TEST(KsTwoSample, SymmetricAndSortedReferenceAgrees) {
  for (const KsCase& c : kKsCases) {
    if (c.method != KsMethod::kAuto) continue;
    SCOPED_TRACE(c.name);
    auto a = Sample(c.sa, c.na, 1, c.shift_a, c.grid_a);
    auto b = Sample(c.sb, c.nb, 1, c.shift_b, c.grid_b);
    auto a2 = a, b2 = b;
    auto ab = KsTwoSample(a, b);
    auto ba = KsTwoSample(b2, a2);
    ASSERT_TRUE(ab.ok() && ba.ok());
    EXPECT_EQ(ab->statistic, ba->statistic);
    EXPECT_EQ(ab->p_value, ba->p_value);
    // a is now sorted: the profile path gives the same answer.
    auto cur = Sample(c.sb, c.nb, 1, c.shift_b, c.grid_b);
    auto sr = KsTwoSampleSortedReference(a, cur);
    ASSERT_TRUE(sr.ok());
    EXPECT_EQ(sr->statistic, ab->statistic);
    EXPECT_EQ(sr->p_value, ab->p_value);
    // Both sorted (a and b were sorted in place above): the no-copy path agrees.
    auto ss = KsTwoSampleSorted(a, b);
    ASSERT_TRUE(ss.ok());
    EXPECT_EQ(ss->statistic, ab->statistic);
    EXPECT_EQ(ss->p_value, ab->p_value);
    auto wa = a, wb = b;
    auto w = WassersteinNormed(wa, wb, /*presorted=*/true);
    auto ws = WassersteinNormedSorted(a, b);
    ASSERT_TRUE(w.ok() && ws.ok());
    EXPECT_EQ(*ws, *w);
  }
  // Unsorted input is refused, naming the argument.
  std::vector<double> unsorted = {2, 1}, sorted = {1, 2};
  EXPECT_THAT(KsTwoSampleSorted(unsorted, sorted).status().message(), ::testing::HasSubstr("a"));
  EXPECT_FALSE(WassersteinNormedSorted(sorted, unsorted).ok());
  EXPECT_FALSE(KsTwoSampleSorted({}, sorted).ok());
}

TEST(KsTwoSample, EdgeCases) {
  // Identical samples: D = 0, p = 1 (exact and asymptotic).
  {
    auto a = Sample(40, 100);
    auto b = a;
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 0.0);
    EXPECT_EQ(r->p_value, 1.0);
    auto c = Sample(41, 20000);
    auto d = c;
    r = KsTwoSample(c, d);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 0.0);
    EXPECT_EQ(r->p_value, 1.0);
  }
  // n = 1 each: scipy.stats.ks_2samp([0.], [1.]) -> (1.0, 1.0)
  {
    std::vector<double> a{0.0}, b{1.0};
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 1.0);
    EXPECT_EQ(r->p_value, 1.0);
  }
  // n = 2 vs 1: scipy.stats.ks_2samp([0., 2.], [1.]) -> (0.5, 1.0)
  {
    std::vector<double> a{0.0, 2.0}, b{1.0};
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 0.5);
    EXPECT_EQ(r->p_value, 1.0);
  }
  // Constant columns, same constant: D = 0; different constants: D = 1.
  // scipy.stats.ks_2samp([3.]*4, [5.]*4) -> (1.0, 0.028571428571428577)
  {
    std::vector<double> a(4, 3.0), b(4, 5.0);
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 1.0);
    EXPECT_TRUE(Near(r->p_value, 0.028571428571428577, 1e-15));
  }
  // NaN dropped, infinities are data; -0.0 == 0.0.
  // scipy.stats.ks_2samp([-inf, -0.0, 1., inf], [0.0, 0.5, 2.]) -> (0.25, 1.0)
  {
    std::vector<double> a{kNaN, -kInf, -0.0, 1.0, kInf, kNaN}, b{0.0, 0.5, kNaN, 2.0};
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->statistic, 0.25);
    EXPECT_EQ(r->p_value, 1.0);
  }
  // Huge values do not overflow anything.
  {
    std::vector<double> a{1e308, -1e308, 1.7e308}, b{1.6e308, 1.65e308};
    auto r = KsTwoSample(a, b);
    ASSERT_TRUE(r.ok());
    // scipy.stats.ks_2samp([1e308, -1e308, 1.7e308], [1.6e308, 1.65e308]) -> (0.6666666666666666,
    // 0.6)
    EXPECT_TRUE(Near(r->statistic, 0.6666666666666666, 1e-15));
    EXPECT_TRUE(Near(r->p_value, 0.6, 1e-14));
  }
  // NaN-only input names the argument.
  {
    std::vector<double> a{kNaN, kNaN}, b{1.0};
    auto r = KsTwoSample(a, b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("a:"), std::string::npos) << r.status().message();
    std::vector<double> c{1.0}, d{kNaN};
    auto r2 = KsTwoSample(c, d);
    ASSERT_FALSE(r2.ok());
    EXPECT_NE(r2.status().message().find("b:"), std::string::npos);
  }
  // presorted input that is not sorted is refused rather than silently wrong.
  {
    std::vector<double> a{2.0, 1.0}, b{1.0};
    EXPECT_FALSE(KsTwoSample(a, b, KsMethod::kAuto, true).ok());
    std::vector<double> cur{1.0};
    std::vector<double> ref{3.0, 2.0};
    EXPECT_FALSE(KsTwoSampleSortedReference(ref, cur).ok());
  }
}

TEST(Kolmogorov, SmirnovMatchesScipy) {
  struct C {
    int n;
    double x, want;
  } cases[] = {
      {500000, 0.003, 0.00012316150619593377},  // scipy.special.smirnov(500000, 0.003)
      {200000, 0.01, 4.216562849935046e-18},    // scipy.special.smirnov(200000, 0.01)
      {1000, 0.05, 0.006506037390545166},       // scipy.special.smirnov(1000, 0.05)
      {141, 0.2, 1.0138392111988456e-05},       // scipy.special.smirnov(141, 0.2)
      {50, 0.6, 4.817035228071187e-18},         // scipy.special.smirnov(50, 0.6)
      {3000000, 0.001, 0.00247710018005445},    // scipy.special.smirnov(3000000, 0.001)
      {10, 0.35, 0.06698659406601565},          // scipy.special.smirnov(10, 0.35)
  };
  for (const C& c : cases) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " x=" << c.x);
    EXPECT_TRUE(Near(internal::SmirnovSf(c.n, c.x), c.want, 1e-12));
  }
}

TEST(Kolmogorov, KstwoSfMatchesScipy) {
  struct C {
    double x, n, want;
  } cases[] = {
      {0.001, 500000, 0.6989801443663661},     // scipy.stats.kstwo.sf(0.001, 500000) Pelz-Good
      {0.0021, 500000, 0.024276288597831493},  // scipy.stats.kstwo.sf(0.0021, 500000) smirnov
      {0.0005, 100000, 1.0},                   // scipy.stats.kstwo.sf(0.0005, 100000) Durbin
      {0.05, 60, 0.9965119852877966},          // scipy.stats.kstwo.sf(0.05, 60) Durbin
      {0.2, 60, 0.014023403960275127},         // scipy.stats.kstwo.sf(0.2, 60) Pomeranz
      {0.3, 60, 2.7617543388165356e-05},       // scipy.stats.kstwo.sf(0.3, 60) smirnov
      {0.7, 60, 5.4015291550789014e-30},       // scipy.stats.kstwo.sf(0.7, 60) x >= 0.5
      {0.0009, 1000, 1.0},                     // scipy.stats.kstwo.sf(0.0009, 1000) below support
      {0.15, 5, 0.9988},                       // scipy.stats.kstwo.sf(0.15, 5) Ruben-Gambino
      {0.004, 200, 1.0},                       // scipy.stats.kstwo.sf(0.004, 200)
      {0.02, 10000, 0.0006616848639387309},    // scipy.stats.kstwo.sf(0.02, 10000)
      {0.0003, 30000, 1.0},                    // scipy.stats.kstwo.sf(0.0003, 30000)
  };
  for (const C& c : cases) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " x=" << c.x);
    EXPECT_TRUE(Near(internal::KolmogorovSf(c.x, c.n), c.want, 1e-12));
  }
}

// a = sample(21, 1000); b = sample(22, 1500, 2, 0.3)
TEST(Wasserstein, MatchesScipy) {
  auto a = Sample(21, 1000), b = Sample(22, 1500, 2, 0.3);
  auto a2 = a, b2 = b;
  auto w = Wasserstein(a, b);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(Near(*w, 0.5400930488019482, 1e-14));  // scipy.stats.wasserstein_distance(a, b)
  auto wn = WassersteinNormed(a2, b2);
  ASSERT_TRUE(wn.ok());
  // scipy.stats.wasserstein_distance(a, b) / max(np.std(a), 0.001)
  EXPECT_TRUE(Near(*wn, 0.948062906551435, 1e-14));
  // ties: scipy.stats.wasserstein_distance(sample(23, 400, grid=.5), sample(24, 300, 1, .2, .5))
  auto at = Sample(23, 400, 1, 0, 0.5), bt = Sample(24, 300, 1, 0.2, 0.5);
  auto wt = Wasserstein(at, bt);
  ASSERT_TRUE(wt.ok());
  EXPECT_TRUE(Near(*wt, 0.26083333333333336, 1e-14));
}

TEST(Wasserstein, Properties) {
  auto a = Sample(50, 3000), b = Sample(51, 2000, 1.5, 0.2);
  auto a1 = a, b1 = b, a2 = a, b2 = b;
  auto ab = Wasserstein(a1, b1), ba = Wasserstein(b2, a2);
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_TRUE(Near(*ab, *ba, 1e-14));
  EXPECT_GT(*ab, 0);
  auto c = a, d = a;
  EXPECT_EQ(*Wasserstein(c, d), 0.0);
  // Shifting one sample by s moves W by s when distributions are otherwise equal.
  auto e = a, f = a;
  for (double& x : f) x += 0.25;
  EXPECT_TRUE(Near(*Wasserstein(e, f), 0.25, 1e-12));
  // Tiny samples: scipy.stats.wasserstein_distance([0.], [1.]) -> 1.0;
  // wasserstein_distance([0., 2.], [1.]) -> 1.0
  std::vector<double> x{0.0}, y{1.0};
  EXPECT_EQ(*Wasserstein(x, y), 1.0);
  std::vector<double> x2{0.0, 2.0}, y2{1.0};
  EXPECT_EQ(*Wasserstein(x2, y2), 1.0);
  // Constant reference: normed by the 0.001 floor.
  std::vector<double> r(10, 1.0), cu(10, 1.5);
  EXPECT_TRUE(Near(*WassersteinNormed(r, cu), 500.0, 1e-15));
  // Infinities: scipy gives inf for one, NaN for a duplicated one.
  std::vector<double> i1{0.0, kInf}, j1{0.0, 1.0};
  EXPECT_EQ(*Wasserstein(i1, j1), kInf);
  std::vector<double> i2{0.0, kInf}, j2{kInf, 1.0};
  EXPECT_TRUE(std::isnan(*Wasserstein(i2, j2)));
  std::vector<double> n1{kNaN}, n2{1.0};
  auto bad = Wasserstein(n1, n2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("u:"), std::string::npos);
}

TEST(AndersonDarling, MatchesScipy) {
  // scipy.stats.anderson_ksamp([sample(21, 1000), sample(22, 1500, 2, 0.3)]) -> floored p
  auto a = Sample(21, 1000), b = Sample(22, 1500, 2, 0.3);
  auto r = AndersonDarling(a, b);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->statistic, 112.4443395796852, 1e-13));
  EXPECT_EQ(r->p_value, 0.001);
  // ties (midrank): anderson_ksamp([sample(23, 400, grid=.5), sample(24, 300, 1, .2, .5)])
  auto at = Sample(23, 400, 1, 0, 0.5), bt = Sample(24, 300, 1, 0.2, 0.5);
  r = AndersonDarling(at, bt);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->statistic, 25.69216209825517, 1e-13));
  EXPECT_EQ(r->p_value, 0.001);
  // interpolated p: anderson_ksamp([sample(25, 200), sample(26, 220, 1, 0.15)])
  auto a3 = Sample(25, 200), b3 = Sample(26, 220, 1, 0.15);
  r = AndersonDarling(a3, b3);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->statistic, 4.504455781805831, 1e-13));
  EXPECT_TRUE(Near(r->p_value, 0.005247304827338951, 1e-12));
  // Identical samples: p capped at 0.25.
  auto c = Sample(27, 300), d = c;
  r = AndersonDarling(c, d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->p_value, 0.25);
  // All values equal: scipy raises; we refuse.
  std::vector<double> e(5, 1.0), f(3, 1.0);
  EXPECT_FALSE(AndersonDarling(e, f).ok());
  // Tiny samples: scipy.stats.anderson_ksamp([[1., 5.], [2., 3.]]) -> (-0.7713892158398593, 0.25);
  // with 3 values in total scipy returns NaN, we refuse.
  std::vector<double> t1{1.0, 5.0}, t2{2.0, 3.0};
  r = AndersonDarling(t1, t2);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->statistic, -0.7713892158398593, 1e-14));
  EXPECT_EQ(r->p_value, 0.25);
  std::vector<double> t3{1.0}, t4{2.0, 3.0};
  EXPECT_FALSE(AndersonDarling(t3, t4).ok());
}

TEST(Binning, SturgesAndDoaneMatchNumpy) {
  auto a = Sample(21, 1000), b = Sample(22, 1500, 2, 0.3);
  // np.histogram_bin_edges(np.concatenate([a, b]), bins='sturges')
  const double sturges[] = {-2.9514834318101513, -2.4255720675019523, -1.8996607031937538,
                            -1.373749338885555,  -0.8478379745773563, -0.3219266102691578,
                            0.20398475403904115, 0.7298961183472401,  1.2558074826554386,
                            1.7817188469636371,  2.3076302112718357,  2.833541575580035,
                            3.3594529398882336,  3.8853643041964325};
  auto e = BinEdgesOfUnion(a, b, Binning::kSturges);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->size(), std::size(sturges));
  for (size_t i = 0; i < e->size(); ++i) EXPECT_EQ((*e)[i], sturges[i]) << i;
  // np.histogram(a, edges)[0], np.histogram(b, edges)[0]
  const uint64_t ha[] = {0, 0, 9, 74, 211, 345, 268, 82, 11, 0, 0, 0, 0};
  const uint64_t hb[] = {11, 39, 72, 137, 219, 246, 249, 207, 162, 97, 41, 18, 2};
  Histogram h1 = Bin(a, *e), h2 = Bin(b, *e);
  for (size_t i = 0; i < 13; ++i) {
    EXPECT_EQ(h1.counts[i], ha[i]) << i;
    EXPECT_EQ(h2.counts[i], hb[i]) << i;
  }
  EXPECT_EQ(h1.below + h1.above + h2.below + h2.above, 0u);
  // Doane on a skewed sample: np.histogram_bin_edges(np.exp(sample(27, 700)), bins='doane')
  std::vector<double> sk = Sample(27, 700);
  for (double& x : sk) x = std::exp(x);
  auto d = BinEdges(sk, Binning::kDoane);
  ASSERT_TRUE(d.ok());
  const double doane[] = {
      0.22905607181462742, 0.5032063186457618, 0.7773565654768961, 1.0515068123080307,
      1.325657059139165,   1.5998073059702993, 1.8739575528014338, 2.148107799632568,
      2.4222580464637025,  2.6964082932948368, 2.970558540125971,  3.2447087869571054,
      3.51885903378824,    3.7930092806193745, 4.067159527450508,  4.341309774281642};
  ASSERT_EQ(d->size(), std::size(doane));
  for (size_t i = 0; i < d->size(); ++i) EXPECT_TRUE(Near((*d)[i], doane[i], 1e-15)) << i;
}

TEST(Binning, SortedCountsEqualThePass) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  for (int n : {0, 1, 5, 1000}) {
    std::vector<double> v(n);
    for (double& x : v) x = std::round(normal(rng) * 4) / 4;  // ties on the edges
    std::sort(v.begin(), v.end());
    for (std::vector<double> edges :
         {std::vector<double>{-1, -0.5, 0, 0.5, 1}, std::vector<double>{-10, 0.25, 10},
          std::vector<double>{0.0, 0.0}, std::vector<double>{3}}) {
      Histogram a = Bin(v, edges), b = BinSorted(v, edges);
      EXPECT_EQ(a.counts, b.counts) << n;
      EXPECT_EQ(a.below, b.below) << n;
      EXPECT_EQ(a.above, b.above) << n;
    }
  }
}

TEST(Binning, EdgeCasesAndCounting) {
  // Constant column: numpy widens to [v - 0.5, v + 0.5], one bin.
  std::vector<double> c(10, 2.0);
  auto e = BinEdges(c, Binning::kSturges);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[0], 1.5);
  EXPECT_EQ((*e)[1], 2.5);
  // Last bin closed, outside counted apart, NaN as null.
  std::vector<double> edges{0.0, 1.0, 2.0};
  std::vector<double> v{0.0, 0.5, 1.0, 2.0, -1.0, 3.0, kNaN, kInf, -kInf};
  Histogram h = Bin(v, edges);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(h.below, 2u);
  EXPECT_EQ(h.above, 2u);
  EXPECT_EQ(h.nulls, 1u);
  EXPECT_EQ(h.total(), 8u);
  // Non-uniform edges use the binary search path.
  std::vector<double> q{0.0, 0.1, 5.0, 5.5};
  Histogram hq = Bin(std::vector<double>{0.05, 0.1, 4.9, 5.0, 5.5}, q);
  EXPECT_EQ(hq.counts, (std::vector<uint64_t>{1, 2, 2}));
  // Fixed count is honoured; quantile edges merge ties but keep >= 1 bin.
  auto f = BinEdges(Sample(60, 100), Binning::kFixed, 7);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->size(), 8u);
  std::vector<double> tied{1, 1, 1, 1, 1, 1, 2, 3};
  auto qe = BinEdges(tied, Binning::kReferenceQuantiles, 4);
  ASSERT_TRUE(qe.ok());
  EXPECT_EQ(*qe, (std::vector<double>{1, 1.25, 3}));  // np.quantile(tied, [0,.25,.5,.75,1]) deduped
  auto q1 = BinEdges(c, Binning::kReferenceQuantiles, 4);
  ASSERT_TRUE(q1.ok());
  EXPECT_EQ(q1->size(), 2u);
  // Empty bins and only NaN.
  std::vector<double> nan_only{kNaN, kNaN};
  auto bad = BinEdges(nan_only, Binning::kSturges);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("values"), std::string::npos);
  EXPECT_FALSE(BinEdges(c, Binning::kFixed, 0).ok());
  // Shares with outside mass, aligned across two histograms.
  Histogram ref{{5, 5}, 0, 0, 0}, cur{{4, 4}, 1, 1, 3};
  EXPECT_EQ(Shares(cur), (std::vector<double>{0.1, 0.4, 0.4, 0.1}));
  std::vector<double> sa, sb;
  AlignedShares(ref, cur, &sa, &sb);
  EXPECT_EQ(sa, (std::vector<double>{0, 0.5, 0.5, 0}));
  EXPECT_EQ(sb, (std::vector<double>{0.1, 0.4, 0.4, 0.1}));
}

TEST(Distances, MatchScipyAndEvidently) {
  auto a = Sample(21, 1000), b = Sample(22, 1500, 2, 0.3);
  auto e = BinEdgesOfUnion(a, b, Binning::kSturges);
  ASSERT_TRUE(e.ok());
  std::vector<double> p = Shares(Bin(a, *e)), q = Shares(Bin(b, *e));
  // scipy.spatial.distance.jensenshannon(p, q) with p, q the np.histogram shares
  EXPECT_TRUE(Near(*JensenShannon(p, q), 0.32836206574424887, 1e-15));
  // Evidently psi: zero shares filled (min/1e6 or 1e-4), sum((p-q)*log(p/q))
  EXPECT_TRUE(Near(*Psi(p, q), 1.332970836728501, 1e-14));
  // Evidently hellinger (categorical form): sqrt(1 - clip(sum(sqrt(p*q)), 0, 1))
  EXPECT_TRUE(Near(*Hellinger(p, q), 0.3631205574211685, 1e-15));
  // Properties: symmetry, identity, bounds.
  EXPECT_EQ(*JensenShannon(p, q), *JensenShannon(q, p));
  EXPECT_EQ(*Hellinger(p, q), *Hellinger(q, p));
  EXPECT_EQ(*LInfinity(p, q), *LInfinity(q, p));
  EXPECT_EQ(*JensenShannon(p, p), 0.0);
  EXPECT_EQ(*Hellinger(p, p), 0.0);
  EXPECT_EQ(*Psi(p, p), 0.0);
  std::vector<double> d1{1, 0}, d2{0, 1};
  EXPECT_TRUE(Near(*JensenShannon(d1, d2), std::sqrt(std::log(2.0)), 1e-15));
  EXPECT_EQ(*Hellinger(d1, d2), 1.0);
  EXPECT_EQ(*LInfinity(d1, d2), 1.0);
  // PSI zero-share rule: 1e-4 fill when min share > 1e-4.
  // ref = [0.5, 0.5, 0], cur = [0.4, 0.4, 0.2] -> ref[2] = 1e-4
  double want = 2 * (0.1 * std::log(0.5 / 0.4)) + (1e-4 - 0.2) * std::log(1e-4 / 0.2);
  EXPECT_TRUE(Near(*Psi(std::vector<double>{0.5, 0.5, 0}, std::vector<double>{0.4, 0.4, 0.2}), want,
                   1e-14));
  // Misaligned and invalid input.
  EXPECT_FALSE(JensenShannon(std::vector<double>{1}, std::vector<double>{0.5, 0.5}).ok());
  EXPECT_FALSE(Psi(std::vector<double>{0, 0}, std::vector<double>{0.5, 0.5}).ok());
  EXPECT_FALSE(Hellinger(std::vector<double>{kNaN}, std::vector<double>{1}).ok());
}

TEST(Categorical, ChiSquaredAndZ) {
  // scipy.stats.chisquare([40, 30, 25, 15], np.array([50, 30, 20, 10]) / 110 * 110)
  //   -> (5.75, 0.12442739778238558)
  std::vector<uint64_t> rc{50, 30, 20, 10}, cc{40, 30, 25, 15};
  auto r = ChiSquared(rc, cc);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->statistic, 5.75, 1e-14));
  EXPECT_TRUE(Near(r->p_value, 0.12442739778238558, 1e-12));
  // A category absent from the reference stays finite (filled share).
  std::vector<uint64_t> rz{50, 30, 0, 20}, cz{40, 30, 5, 25};
  r = ChiSquared(rz, cz);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::isfinite(r->statistic));
  EXPECT_GT(r->statistic, 1000);
  EXPECT_EQ(r->p_value, 0.0);
  // Identical proportions: statistic 0, p 1; one category only: p 1.
  r = ChiSquared(std::vector<uint64_t>{10, 20}, std::vector<uint64_t>{20, 40});
  EXPECT_EQ(r->statistic, 0.0);
  EXPECT_EQ(r->p_value, 1.0);
  r = ChiSquared(std::vector<uint64_t>{10, 0}, std::vector<uint64_t>{7, 0});
  EXPECT_EQ(r->p_value, 1.0);
  EXPECT_FALSE(ChiSquared(std::vector<uint64_t>{0, 0}, std::vector<uint64_t>{1, 1}).ok());
  // chi2.sf spot checks: scipy.stats.chi2.sf(3.0, 1) = 0.08326451666355042,
  // chi2.sf(250.0, 200) = 0.009460480648480466 (computed with scipy 1.10.1)
  EXPECT_TRUE(Near(internal::GammaQ(0.5, 1.5), 0.08326451666355042, 1e-13));
  // Z test: Evidently z with p1 = 30/100, p2 = 45/100 -> z = -2.1908902300206647,
  // p = 2 * scipy.stats.norm.sf(|z|) = 0.02845973691631055
  auto z = ZTestProportions(std::vector<uint64_t>{70, 30}, std::vector<uint64_t>{55, 45});
  ASSERT_TRUE(z.ok());
  EXPECT_TRUE(Near(z->statistic, -2.1908902300206647, 1e-15));
  EXPECT_TRUE(Near(z->p_value, 0.02845973691631055, 1e-13));
  // Both constant, same value: p = 1.
  z = ZTestProportions(std::vector<uint64_t>{5, 0}, std::vector<uint64_t>{7, 0});
  EXPECT_EQ(z->p_value, 1.0);
  uint64_t nulls = 0;
  auto counts = CategoryCounts(std::vector<int32_t>{0, 1, -1, 1, 2, 5}, 3, &nulls);
  EXPECT_EQ(counts, (std::vector<uint64_t>{1, 2, 1}));
  EXPECT_EQ(nulls, 2u);
}

TEST(Choice, DefaultsNamesParsers) {
  using K = ColumnKind;
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1000, 2), StatTest::kZTest);
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1000, 3), StatTest::kChiSquared);
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1000, 5), StatTest::kChiSquared);
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1000, 6), StatTest::kKs);
  EXPECT_EQ(DefaultStatTest(K::kCategorical, 10, 2), StatTest::kZTest);
  EXPECT_EQ(DefaultStatTest(K::kCategorical, 10, 3), StatTest::kChiSquared);
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1001, 5), StatTest::kJensenShannon);
  EXPECT_EQ(DefaultStatTest(K::kNumerical, 1001, 6), StatTest::kWasserstein);
  EXPECT_EQ(DefaultStatTest(K::kCategorical, 1001, 2), StatTest::kJensenShannon);
  EXPECT_EQ(DefaultThreshold(StatTest::kKs), 0.05);
  EXPECT_EQ(DefaultThreshold(StatTest::kAndersonDarling), 0.1);
  EXPECT_EQ(DefaultThreshold(StatTest::kWasserstein), 0.1);
  EXPECT_TRUE(IsPValueTest(StatTest::kZTest));
  EXPECT_FALSE(IsPValueTest(StatTest::kPsi));
  for (StatTest t : {StatTest::kKs, StatTest::kWasserstein, StatTest::kPsi,
                     StatTest::kJensenShannon, StatTest::kHellinger, StatTest::kAndersonDarling,
                     StatTest::kChiSquared, StatTest::kZTest, StatTest::kLInfinity}) {
    auto p = ParseStatTest(StatTestName(t));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, t);
  }
  auto bad = ParseStatTest("kolmogorov");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("kolmogorov"), std::string::npos);
  for (Binning b :
       {Binning::kSturges, Binning::kDoane, Binning::kFixed, Binning::kReferenceQuantiles})
    EXPECT_EQ(*ParseBinning(BinningName(b)), b);
  EXPECT_FALSE(ParseBinning("auto").ok());
}

TEST(Quality, ClassificationAndRegression) {
  // numpy re-implementation of sklearn (labels = union of present classes,
  // zero_division=0): accuracy 0.6666666666666666, macro P/R/F1 =
  // 0.6722222222222222 / 0.6666666666666666 / 0.6626984126984127, weighted the same.
  std::vector<int32_t> y{0, 1, 2, 2, 1, 0, 0, 2, 1, 1, 0, 2}, p{0, 2, 2, 2, 1, 0, 1, 0, 1, 1, 0, 1};
  auto q = Classification(y, p, 3);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(Near(q->accuracy, 0.6666666666666666, 1e-15));
  EXPECT_TRUE(Near(q->precision_macro, 0.6722222222222222, 1e-15));
  EXPECT_TRUE(Near(q->recall_macro, 0.6666666666666666, 1e-15));
  EXPECT_TRUE(Near(q->f1_macro, 0.6626984126984127, 1e-15));
  EXPECT_TRUE(Near(q->precision_weighted, 0.6722222222222222, 1e-15));
  EXPECT_TRUE(Near(q->f1_weighted, 0.6626984126984127, 1e-15));
  EXPECT_EQ(q->roc_auc, -1);
  // A class never predicted has precision 0 (zero_division=0).
  auto q2 = Classification(std::vector<int32_t>{0, 1, 1}, std::vector<int32_t>{0, 0, 0}, 2);
  EXPECT_TRUE(Near(q2->precision_macro, (1.0 / 3.0 + 0.0) / 2, 1e-15));
  // ROC AUC with ties: scipy.stats.mannwhitneyu(pos, neg).statistic / (4 * 4) = 0.8125
  std::vector<double> sc{0.1, 0.4, 0.35, 0.8, 0.4, 0.4, 0.9, 0.2};
  std::vector<int32_t> lb{0, 0, 1, 1, 1, 0, 1, 0};
  auto q3 = Classification(lb, lb, 2, sc);
  ASSERT_TRUE(q3.ok());
  EXPECT_EQ(q3->roc_auc, 0.8125);
  EXPECT_FALSE(Classification(std::vector<int32_t>{0}, std::vector<int32_t>{0, 1}, 2).ok());
  EXPECT_FALSE(Classification(std::vector<int32_t>{-1}, std::vector<int32_t>{0}, 2).ok());

  // yt = sample(31, 100, 3, 1); yp = yt + sample(32, 100, 0.5, 0.1)
  // np.mean(abs(yp - yt)), np.mean((yt - yp)**2), sqrt, 1 - sum((yt-yp)**2)/sum((yt-mean)**2)
  auto yt = Sample(31, 100, 3, 1), noise = Sample(32, 100, 0.5, 0.1);
  std::vector<double> yp(100);
  for (int i = 0; i < 100; ++i) yp[i] = yt[i] + noise[i];
  auto r = Regression(yt, yp);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Near(r->mae, 0.22622711373137896, 1e-15));
  EXPECT_TRUE(Near(r->mse, 0.08072016002539806, 1e-15));
  EXPECT_TRUE(Near(r->rmse, 0.28411293533628146, 1e-15));
  EXPECT_TRUE(Near(r->r2, 0.9717924952197134, 1e-15));
  // Constant labels: sklearn's force_finite.
  auto rc = Regression(std::vector<double>{1, 1}, std::vector<double>{1, 1});
  EXPECT_EQ(rc->r2, 1.0);
  rc = Regression(std::vector<double>{1, 1}, std::vector<double>{1, 2});
  EXPECT_EQ(rc->r2, 0.0);
  EXPECT_FALSE(Regression(std::vector<double>{kNaN}, std::vector<double>{1}).ok());
}

TEST(Sorting, RadixSortMatchesStdSort) {
  std::mt19937_64 rng(7);
  std::vector<double> v(100000);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (i % 97 == 0) ? 0.0 : ((i % 89 == 0) ? -0.0 : u(rng));
  v[5] = kInf;
  v[6] = -kInf;
  v[7] = 1e-310;  // subnormal
  v[8] = -1e-310;
  auto w = v;
  internal::SortDoubles(v);
  std::sort(w.begin(), w.end());
  ASSERT_EQ(v.size(), w.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_TRUE(v[i] == w[i]) << i;
  std::vector<double> n{1.0, kNaN, 2.0, kNaN};
  EXPECT_EQ(internal::DropNaN(n), 2u);
  EXPECT_EQ(n, (std::vector<double>{1.0, 2.0}));
}

}  // namespace
}  // namespace gantry::drift
