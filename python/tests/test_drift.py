"""Known-answer tests of gantry.drift against scipy/numpy computed live.

Every statistic runs on random data (fixed seeds; tiny, small, medium and
100k samples) and on adversarial data (ties, constant columns, a single value,
empty bins, NaN, values exactly on bin edges). Tolerances, unless a test says
otherwise:
  - statistics, distances, edges and metrics: rtol 1e-9, atol 1e-12 (the
    engine sums in a different order than numpy, nothing more);
  - p-values: rtol 1e-6, atol 1e-12 (special functions: scipy's kstwo,
    chi2, normal sf; the engine evaluates its own);
  - counts: exact.
Model-quality references are computed in plain numpy the way sklearn does
(sklearn is not a dependency): precision of a never-predicted class is 0,
averages run over the classes present in labels or predictions, ROC-AUC is the
Mann-Whitney U with average ranks for ties, r2 is 1 (perfect) or 0 when the
labels are constant.
"""

import json
import math
import os
import subprocess
import warnings

import numpy as np
import pytest

import scipy.stats as scipy_stats  # noqa: E402  (python3-scipy, scripts/install-deps.sh)
import scipy.spatial.distance as scipy_distance  # noqa: E402

from gantry import drift  # noqa: E402

STAT = dict(rel=1e-9, abs=1e-12)
PVAL = dict(rel=1e-6, abs=1e-12)

SIZES = [(1, 1), (1, 4), (3, 5), (8, 8), (25, 40), (100, 80), (1000, 1200), (5000, 4000),
         (100_000, 100_000)]


def samples(seed, n, m, kind="normal", shift=0.25):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(0, 1, n), rng.normal(shift, 1.2, m)
    if kind == "ties":  # few distinct values: ties within and across samples
        return (rng.integers(0, 6, n).astype(np.float64),
                rng.integers(1, 7, m).astype(np.float64))
    if kind == "lognormal":
        return rng.lognormal(0, 1, n), rng.lognormal(0.1, 1, m)
    raise AssertionError(kind)


def with_nans(x, seed):
    rng = np.random.default_rng(seed)
    out = x.copy()
    out = np.insert(out, rng.integers(0, len(out) + 1, max(1, len(out) // 10)), np.nan)
    return out


# -- KS ------------------------------------------------------------------------

@pytest.mark.parametrize("n,m", SIZES)
@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_ks_auto_matches_scipy(n, m, kind):
    a, b = samples(n * 7 + m, n, m, kind)
    want = scipy_stats.ks_2samp(a, b, method="auto")
    got = drift.ks_2samp(a, b)
    assert got[0] == pytest.approx(want.statistic, **STAT)
    assert got[1] == pytest.approx(want.pvalue, **PVAL)


@pytest.mark.parametrize("n,m", [(1, 1), (2, 3), (10, 10), (30, 17), (200, 300), (1000, 1000)])
@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_ks_exact_matches_scipy(n, m, kind):
    a, b = samples(n + 3 * m, n, m, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns when exact falls back
        want = scipy_stats.ks_2samp(a, b, method="exact")
    got = drift.ks_2samp(a, b, method="exact")
    assert got[0] == pytest.approx(want.statistic, **STAT)
    assert got[1] == pytest.approx(want.pvalue, **PVAL)


@pytest.mark.parametrize("n,m", [(5, 7), (100, 80), (3000, 5000), (100_000, 100_000)])
@pytest.mark.parametrize("shift", [0.0, 0.05, 0.5])
def test_ks_asymp_matches_scipy(n, m, shift):
    a, b = samples(n + m, n, m, "normal", shift)
    want = scipy_stats.ks_2samp(a, b, method="asymp")
    got = drift.ks_2samp(a, b, method="asymp")
    assert got[0] == pytest.approx(want.statistic, **STAT)
    assert got[1] == pytest.approx(want.pvalue, **PVAL)


def test_ks_adversarial():
    # Constant columns: equal -> D 0, p 1; different -> D 1.
    same = drift.ks_2samp(np.full(50, 3.0), np.full(70, 3.0))
    assert same[0] == 0 and same[1] == pytest.approx(1.0)
    apart = drift.ks_2samp(np.full(50, 3.0), np.full(70, 4.0))
    assert apart[0] == 1
    assert apart[1] == pytest.approx(scipy_stats.ks_2samp(np.full(50, 3.0), np.full(70, 4.0)).pvalue,
                                     **PVAL)
    # A single value each.
    assert drift.ks_2samp([1.0], [2.0])[0] == 1
    # NaN is ignored: the same answer as scipy on the non-NaN values.
    a, b = samples(11, 300, 200)
    got = drift.ks_2samp(with_nans(a, 1), with_nans(b, 2))
    want = scipy_stats.ks_2samp(a, b)
    assert got[0] == pytest.approx(want.statistic, **STAT)
    assert got[1] == pytest.approx(want.pvalue, **PVAL)
    # Infinities are data.
    a2, b2 = np.append(a, np.inf), np.append(b, -np.inf)
    assert drift.ks_2samp(a2, b2)[0] == pytest.approx(scipy_stats.ks_2samp(a2, b2).statistic, **STAT)
    # The caller's arrays are not sorted in place.
    before = a.copy()
    drift.ks_2samp(a, b)
    assert np.array_equal(a, before)
    # Nothing left after dropping NaN: a ValueError naming the side.
    with pytest.raises(ValueError):
        drift.ks_2samp([np.nan, np.nan], [1.0])
    with pytest.raises(ValueError):
        drift.ks_2samp([], [1.0])
    with pytest.raises(ValueError, match="method"):
        drift.ks_2samp([1.0], [2.0], method="fast")


def test_ks_accepts_other_dtypes_and_lists():
    a, b = samples(5, 40, 50)
    want = drift.ks_2samp(a, b)
    assert drift.ks_2samp(a.astype(np.float32).astype(np.float64), b)[0] == pytest.approx(
        scipy_stats.ks_2samp(a.astype(np.float32).astype(np.float64), b).statistic, **STAT)
    assert drift.ks_2samp(list(a), list(b)) == pytest.approx(want)
    assert drift.ks_2samp(np.repeat(a, 2)[::2], b) == pytest.approx(want)  # strided view
    assert drift.ks_2samp([1, 2, 3], [2, 3, 4])[0] == pytest.approx(
        scipy_stats.ks_2samp([1, 2, 3], [2, 3, 4]).statistic)


# -- Wasserstein ---------------------------------------------------------------

@pytest.mark.parametrize("n,m", SIZES)
@pytest.mark.parametrize("kind", ["normal", "ties", "lognormal"])
def test_wasserstein_matches_scipy(n, m, kind):
    u, v = samples(3 * n + m, n, m, kind)
    assert drift.wasserstein(u, v) == pytest.approx(scipy_stats.wasserstein_distance(u, v), **STAT)


def test_wasserstein_normed_and_adversarial():
    u, v = samples(21, 2000, 1500)
    w = scipy_stats.wasserstein_distance(u, v)
    assert drift.wasserstein_normed(u, v) == pytest.approx(w / max(np.std(u), 0.001), **STAT)
    # Constant reference: std floor 0.001.
    c = np.full(100, 2.0)
    assert drift.wasserstein_normed(c, v) == pytest.approx(
        scipy_stats.wasserstein_distance(c, v) / 0.001, **STAT)
    assert drift.wasserstein(c, c) == 0
    assert drift.wasserstein([1.0], [4.0]) == pytest.approx(3.0)
    # NaN ignored.
    assert drift.wasserstein(with_nans(u, 3), with_nans(v, 4)) == pytest.approx(w, **STAT)
    with pytest.raises(ValueError):
        drift.wasserstein([np.nan], [1.0])


# -- Anderson-Darling ----------------------------------------------------------

def scipy_anderson(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns when it caps the p-value
        r = scipy_stats.anderson_ksamp([a, b])
    return r.statistic, r.significance_level


@pytest.mark.parametrize("n,m", [(2, 3), (8, 8), (25, 40), (100, 80), (1000, 1200),
                                 (100_000, 100_000)])
@pytest.mark.parametrize("kind", ["normal", "ties"])
@pytest.mark.parametrize("shift", [0.0, 0.1, 1.0])
def test_anderson_matches_scipy(n, m, kind, shift):
    a, b = samples(n + 5 * m, n, m, kind, shift)
    if kind == "ties":
        b = b + shift
    if len(np.unique(np.concatenate([a, b]))) < 2:
        # scipy refuses a single distinct value; so does Gantry.
        with pytest.raises(ValueError):
            scipy_anderson(a, b)
        with pytest.raises(ValueError):
            drift.anderson_ksamp(a, b)
        return
    stat, p = scipy_anderson(a, b)
    got = drift.anderson_ksamp(a, b)
    assert got[0] == pytest.approx(stat, **STAT)
    assert got[1] == pytest.approx(p, **PVAL)
    assert 0.001 <= got[1] <= 0.25


def test_anderson_nan_ignored():
    a, b = samples(8, 500, 400)
    got = drift.anderson_ksamp(with_nans(a, 5), with_nans(b, 6))
    stat, p = scipy_anderson(a, b)
    assert got[0] == pytest.approx(stat, **STAT)
    assert got[1] == pytest.approx(p, **PVAL)


# -- share distances -----------------------------------------------------------

def random_shares(rng, k, zeros=0):
    p = rng.random(k)
    if zeros:
        p[rng.choice(k, zeros, replace=False)] = 0
    return p / p.sum()


@pytest.mark.parametrize("k,zeros", [(k, z) for k in (1, 2, 5, 30, 1000) for z in (0, 1, 3)
                                     if z < k])
def test_jensenshannon_matches_scipy(k, zeros):
    rng = np.random.default_rng(k * 10 + zeros)
    p, q = random_shares(rng, k, zeros), random_shares(rng, k, zeros)
    assert drift.jensenshannon(p, q) == pytest.approx(scipy_distance.jensenshannon(p, q), **STAT)
    # scipy normalises unnormalised inputs (counts).
    assert drift.jensenshannon(p * 7, q * 3) == pytest.approx(
        scipy_distance.jensenshannon(p * 7, q * 3), **STAT)


def test_jensenshannon_extremes():
    assert drift.jensenshannon([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0, abs=1e-12)
    assert drift.jensenshannon([1, 0], [0, 1]) == pytest.approx(math.sqrt(math.log(2)), **STAT)
    with pytest.raises(ValueError):
        drift.jensenshannon([0.5, 0.5], [1.0])  # length mismatch


def evidently_fill(shares):
    """Evidently's zero replacement, per vector (stattests/utils.py)."""
    s = np.asarray(shares, dtype=np.float64).copy()
    smallest = s[s != 0].min()
    s[s == 0] = smallest / 1e6 if smallest <= 0.0001 else 0.0001
    return s


def numpy_psi(r, c):
    r, c = evidently_fill(r), evidently_fill(c)
    return float(np.sum((r - c) * np.log(r / c)))


@pytest.mark.parametrize("k,zeros", [(k, z) for k in (2, 10, 30, 500) for z in (0, 1, 2)
                                     if z < k])
def test_psi_matches_numpy(k, zeros):
    rng = np.random.default_rng(100 + k + zeros)
    r, c = random_shares(rng, k, zeros), random_shares(rng, k, zeros)
    assert drift.psi(r, c) == pytest.approx(numpy_psi(r, c), **STAT)


def test_psi_tiny_shares_and_identity():
    r = np.array([0.5, 0.49999, 0.00001, 0.0])  # smallest non-zero <= 1e-4: min/1e6
    c = np.array([0.4, 0.5, 0.0, 0.1])
    assert drift.psi(r, c) == pytest.approx(numpy_psi(r, c), **STAT)
    assert drift.psi([0.2, 0.8], [0.2, 0.8]) == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("k", [2, 7, 100])
def test_hellinger_and_linf(k):
    rng = np.random.default_rng(k)
    p, q = random_shares(rng, k, 1), random_shares(rng, k)
    assert drift.hellinger(p, q) == pytest.approx(
        math.sqrt(max(0.0, 1 - np.sum(np.sqrt(p * q)))), **STAT)
    assert drift.linf(p, q) == pytest.approx(np.max(np.abs(p - q)), **STAT)
    assert drift.hellinger(p, p) == pytest.approx(0.0, abs=1e-7)  # sqrt of a rounding residue
    assert drift.hellinger([1, 0], [0, 1]) == pytest.approx(1.0, **STAT)


# -- categorical tests ---------------------------------------------------------

@pytest.mark.parametrize("k,n_ref,n_cur", [(2, 50, 70), (3, 1000, 800), (10, 5000, 5000),
                                           (40, 100_000, 90_000)])
@pytest.mark.parametrize("drifted", [False, True])
def test_chisquare_matches_scipy(k, n_ref, n_cur, drifted):
    rng = np.random.default_rng(k + n_ref)
    p = random_shares(rng, k)
    q = random_shares(rng, k) if drifted else p
    ref = rng.multinomial(n_ref, p)
    cur = rng.multinomial(n_cur, q)
    ref[ref == 0] = 1  # scipy's reference needs every expected count > 0
    f_exp = ref / ref.sum() * cur.sum()
    want = scipy_stats.chisquare(cur, f_exp)
    got = drift.chisquare(ref, cur)
    assert got[0] == pytest.approx(want.statistic, **STAT)
    assert got[1] == pytest.approx(want.pvalue, **PVAL)


def test_chisquare_adversarial():
    # A category the reference never saw: finite, and clearly drifted.
    stat, p = drift.chisquare([50, 50, 0], [40, 40, 20])
    assert math.isfinite(stat) and stat > 0 and p < 1e-6
    # Identical proportions: statistic 0, p 1.
    stat, p = drift.chisquare([10, 20, 30], [20, 40, 60])
    assert stat == pytest.approx(0.0, abs=1e-12) and p == pytest.approx(1.0)
    with pytest.raises(ValueError):
        drift.chisquare([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="negative"):
        drift.chisquare([1, -2], [1, 2])


def numpy_ztest(ref, cur):
    n1, n2 = sum(ref), sum(cur)
    p1, p2 = ref[0] / n1, cur[0] / n2
    pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    z = (p1 - p2) / math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return z, 2 * scipy_stats.norm.sf(abs(z))


@pytest.mark.parametrize("ref,cur", [([30, 70], [40, 60]), ([500, 500], [520, 480]),
                                     ([9000, 1000], [8000, 2000]), ([3, 4], [4, 3])])
def test_ztest_matches_numpy(ref, cur):
    z, p = numpy_ztest(ref, cur)
    got = drift.ztest(ref, cur)
    assert abs(got[0]) == pytest.approx(abs(z), **STAT)
    assert got[1] == pytest.approx(p, **PVAL)


def test_ztest_same_single_category_is_no_drift():
    assert drift.ztest([10, 0], [20, 0])[1] == pytest.approx(1.0)


# -- bins ------------------------------------------------------------------------

def edge_data(seed, n, kind):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.normal(3, 2, n)
    if kind == "skewed":
        return rng.exponential(1, n)
    if kind == "ties":
        return rng.integers(0, 4, n).astype(np.float64)
    if kind == "constant":
        return np.full(n, 7.5)
    raise AssertionError(kind)


@pytest.mark.parametrize("binning", ["sturges", "doane"])
@pytest.mark.parametrize("n", [1, 2, 3, 10, 1000, 100_000])
@pytest.mark.parametrize("kind", ["normal", "skewed", "ties", "constant"])
def test_bin_edges_match_numpy(binning, n, kind):
    x = edge_data(n, n, kind)
    want = np.histogram_bin_edges(x, bins=binning)
    got = drift.bin_edges(x, binning)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # NaN is ignored.
    np.testing.assert_allclose(drift.bin_edges(with_nans(x, n), binning), want,
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("binning", ["sturges", "doane"])
@pytest.mark.parametrize("n,m", [(1, 1), (5, 300), (1000, 1000), (100_000, 50_000)])
def test_bin_edges_of_union_match_numpy_on_the_concatenation(binning, n, m):
    a, b = samples(n + m, n, m, "lognormal")
    want = np.histogram_bin_edges(np.concatenate([a, b]), bins=binning)
    got = drift.bin_edges(with_nans(a, 1), binning, other=np.append(b, np.inf))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bins", [1, 3, 10, 37])
def test_fixed_bins_honour_the_count(bins):
    x = edge_data(1, 5000, "normal")
    got = drift.bin_edges(x, "fixed", bins)
    np.testing.assert_allclose(got, np.linspace(x.min(), x.max(), bins + 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bins", [2, 10, 50])
def test_quantile_bins_honour_the_count_and_merge_ties(bins):
    x = edge_data(2, 20_000, "skewed")
    got = drift.bin_edges(x, "quantiles", bins)
    assert len(got) == bins + 1 and np.all(np.diff(got) > 0)
    counts = np.histogram(x, got)[0]
    # Equal-mass bins: each within 1% of n/bins (quantiles of continuous data).
    assert np.all(np.abs(counts - len(x) / bins) <= 0.01 * len(x) / bins + 1)
    # Ties: 4 distinct values cannot make 10 bins; duplicate edges merge.
    t = drift.bin_edges(edge_data(3, 1000, "ties"), "quantiles", 10)
    assert 2 <= len(t) <= 5 and np.all(np.diff(t) > 0)
    c = drift.bin_edges(np.full(10, 1.0), "quantiles", 10)
    assert len(c) >= 2  # never fewer than one bin


def test_bin_edges_errors():
    with pytest.raises(ValueError):
        drift.bin_edges([np.nan, np.nan], "sturges")
    with pytest.raises(ValueError):
        drift.bin_edges([1.0, 2.0], "bogus")


@pytest.mark.parametrize("n", [1, 10, 1000, 100_000])
@pytest.mark.parametrize("binning", ["sturges", "doane"])
def test_histogram_matches_numpy(n, binning):
    x = edge_data(n + 1, n, "normal")
    edges = np.histogram_bin_edges(x, bins=binning)
    np.testing.assert_array_equal(drift.histogram(x, edges), np.histogram(x, edges)[0])


def test_histogram_adversarial():
    edges = np.array([0.0, 0.1, 0.2, 0.30000000000000004, 1.0])
    # Values exactly on edges (the last edge closes the last bin), outside, NaN.
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.30000000000000004, 1.0, 0.99999, -1e-300, 1.0000001,
                  np.nan, np.inf, -np.inf])
    h = drift.histogram(x, edges, full=True)
    inside = x[np.isfinite(x)]
    np.testing.assert_array_equal(h["counts"], np.histogram(inside, edges)[0])
    assert h["below"] == 2 and h["above"] == 2 and h["nulls"] == 1
    # Empty bins, and shares with the outside mass as extra bins.
    h = drift.histogram(np.array([0.05, 0.05, 0.95, 2.0]), edges, full=True)
    np.testing.assert_array_equal(h["counts"], [2, 0, 0, 1])
    assert sum(h["shares"]) == pytest.approx(1.0)
    assert len(h["shares"]) == 5 and h["shares"][-1] == pytest.approx(0.25)
    # Edges on a fine uniform grid: every value sits exactly on an edge.
    grid = np.linspace(-3, 3, 61)
    np.testing.assert_array_equal(drift.histogram(grid, grid), np.histogram(grid, grid)[0])
    with pytest.raises(ValueError):
        drift.histogram([1.0], [1.0])
    with pytest.raises(ValueError):
        drift.histogram([1.0], [2.0, 1.0])


# -- model quality ---------------------------------------------------------------

def numpy_classification(y, p, k, scores=None):
    """sklearn's precision_recall_fscore_support/accuracy/roc_auc, in numpy."""
    y, p = np.asarray(y), np.asarray(p)
    present = np.union1d(np.unique(y), np.unique(p))
    cm = np.zeros((k, k), dtype=np.int64)
    np.add.at(cm, (y, p), 1)
    tp = np.diag(cm)[present].astype(float)
    predicted = cm.sum(axis=0)[present]
    support = cm.sum(axis=1)[present]
    prec = np.divide(tp, predicted, out=np.zeros_like(tp), where=predicted > 0)
    rec = np.divide(tp, support, out=np.zeros_like(tp), where=support > 0)
    denom = prec + rec
    f1 = np.divide(2 * prec * rec, denom, out=np.zeros_like(tp), where=denom > 0)
    w = support / support.sum()
    out = {
        "accuracy": float(np.mean(y == p)),
        "precision_macro": prec.mean(), "recall_macro": rec.mean(), "f1_macro": f1.mean(),
        "precision_weighted": (prec * w).sum(), "recall_weighted": (rec * w).sum(),
        "f1_weighted": (f1 * w).sum(), "roc_auc": None,
    }
    if scores is not None:
        ranks = scipy_stats.rankdata(scores)  # average ranks for ties
        pos = y == 1
        n_pos, n_neg = pos.sum(), (~pos).sum()
        out["roc_auc"] = (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return out


def assert_metrics(got, want):
    assert set(got) == set(want)
    for key, value in want.items():
        if value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, **STAT), key


@pytest.mark.parametrize("k,n", [(2, 10), (2, 1000), (3, 50), (5, 10_000), (10, 100_000)])
def test_classification_matches_numpy(k, n):
    rng = np.random.default_rng(k * n)
    y = rng.integers(0, k, n)
    p = np.where(rng.random(n) < 0.7, y, rng.integers(0, k, n))
    y[0], p[1] = 0, k - 1  # class 0 present in labels, k-1 in predictions
    scores = None
    if k == 2:
        scores = np.round(np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1), 2)  # rounded: ties
    assert_metrics(drift.classification(y, p, k, scores), numpy_classification(y, p, k, scores))


def test_classification_adversarial():
    # Class 2 never predicted (precision 0), class 3 absent from both (not averaged).
    y = np.array([0, 1, 2, 2, 1, 0])
    p = np.array([0, 1, 1, 1, 1, 0])
    assert_metrics(drift.classification(y, p, 4), numpy_classification(y, p, 4))
    # Perfect predictions; constant scores give AUC 0.5.
    y = np.array([0, 1, 0, 1])
    got = drift.classification(y, y, 2, np.full(4, 0.3))
    assert got["accuracy"] == 1 and got["f1_macro"] == 1 and got["roc_auc"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        drift.classification([0, 1], [0], 2)
    with pytest.raises(ValueError):
        drift.classification([0, 5], [0, 1], 2)  # code outside 0..k-1


@pytest.mark.parametrize("n", [2, 100, 100_000])
def test_regression_matches_numpy(n):
    rng = np.random.default_rng(n)
    y = rng.normal(10, 3, n)
    p = y + rng.normal(0.5, 1, n)
    err = p - y
    mse = np.mean(err ** 2)
    want = {"mae": np.mean(np.abs(err)), "mse": mse, "rmse": math.sqrt(mse),
            "r2": 1 - np.sum(err ** 2) / np.sum((y - y.mean()) ** 2)}
    assert_metrics(drift.regression(y, p), want)


def test_regression_constant_labels():
    y = np.full(5, 2.0)
    assert drift.regression(y, y)["r2"] == 1.0
    assert drift.regression(y, y + 1)["r2"] == 0.0
    assert drift.regression(y, y + 1)["mae"] == pytest.approx(1.0)


# -- the default test choice -------------------------------------------------------

@pytest.mark.parametrize("kind,rows,n_unique,want", [
    ("numerical", 1000, 2, "z"), ("numerical", 1000, 4, "chisquare"),
    ("numerical", 1000, 6, "ks"), ("categorical", 500, 2, "z"),
    ("categorical", 500, 9, "chisquare"), ("numerical", 1001, 5, "jensenshannon"),
    ("numerical", 1001, 6, "wasserstein"), ("categorical", 5000, 2, "jensenshannon"),
])
def test_default_test(kind, rows, n_unique, want):
    assert drift.default_test(kind, rows, n_unique) == want


# -- compare() ---------------------------------------------------------------------

def frames(n_ref, n_cur, drift_on, seed=0):
    import pandas as pd  # python3-pandas, scripts/install-deps.sh
    rng = np.random.default_rng(seed)
    cur_rng = np.random.default_rng(seed + 1)

    def make(r, n, drifted):
        return pd.DataFrame({
            "age": r.normal(40 + (8 if drifted else 0), 10, n),
            "income": r.lognormal(10 + (0.5 if drifted else 0), 1, n),
            "score": r.uniform(0, 1 + (1 if drifted else 0), n),
            "steady": r.normal(0, 1, n),
            "country": pd.Series(r.choice(["de", "fr", "us", "jp"], n,
                                          p=[0.1, 0.1, 0.7, 0.1] if drifted
                                          else [0.4, 0.3, 0.2, 0.1])),
            "plan": pd.Series(r.choice(["free", "pro"], n, p=[0.5, 0.5])),
        })
    return make(rng, n_ref, False), make(cur_rng, n_cur, drift_on)


def by_column(report):
    return {c["column"]: c for c in report["columns"]}


def test_compare_detects_known_drift():
    ref, cur = frames(20_000, 10_000, True)
    report = drift.compare(ref, cur)
    json.dumps(report)  # plain JSON types
    assert report["reference_rows"] == 20_000 and report["current_rows"] == 10_000
    cols = by_column(report)
    assert set(cols) == set(ref.columns)
    for name in ("age", "income", "score", "country"):
        assert cols[name]["drifted"], name
    for name in ("steady", "plan"):
        assert not cols[name]["drifted"], name
    # > 1000 reference rows: Wasserstein (normed) for numbers, JS for categories.
    assert cols["age"]["test"] == "wasserstein" and cols["country"]["test"] == "jensenshannon"
    assert cols["age"]["statistic"] == pytest.approx(
        drift.wasserstein_normed(ref["age"].to_numpy(), cur["age"].to_numpy()), **STAT)
    assert report["drifted_share"] == pytest.approx(4 / 6)
    assert report["dataset_drift"] is True
    # The dataset rule follows drift_share.
    assert drift.compare(ref, cur, drift_share=0.9)["dataset_drift"] is False


def test_compare_no_drift():
    ref, cur = frames(20_000, 10_000, False)
    report = drift.compare(ref, cur)
    assert [c["column"] for c in report["columns"] if c["drifted"]] == []
    assert report["dataset_drift"] is False and report["drifted_share"] == 0


def test_compare_small_samples_use_ks_and_match_scipy():
    ref, cur = frames(300, 200, True, seed=4)
    cols = by_column(drift.compare(ref, cur, columns=["age", "steady", "plan"]))
    assert set(cols) == {"age", "steady", "plan"}
    assert cols["age"]["test"] == "ks" and cols["plan"]["test"] == "z"
    want = scipy_stats.ks_2samp(ref["age"], cur["age"])
    assert cols["age"]["statistic"] == pytest.approx(want.statistic, **STAT)
    assert cols["age"]["p_value"] == pytest.approx(want.pvalue, **PVAL)
    assert cols["age"]["drifted"] and not cols["steady"]["drifted"]


def test_compare_overrides_and_dict_input():
    rng = np.random.default_rng(9)
    ref = {"x": rng.normal(0, 1, 5000), "y": rng.normal(0, 1, 5000).tolist(),
           "c": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 500}
    cur = {"x": rng.normal(0.3, 1, 4000), "y": rng.normal(0, 1, 4000).tolist(),
           "c": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 400}
    report = drift.compare(ref, cur, kinds={"c": "categorical"}, tests={"x": "psi", "y": "ks"},
                           thresholds={"x": 0.001})
    cols = by_column(report)
    assert cols["x"]["test"] == "psi" and cols["x"]["threshold"] == pytest.approx(0.001)
    assert cols["x"]["drifted"]
    assert cols["y"]["test"] == "ks"
    assert cols["y"]["p_value"] == pytest.approx(scipy_stats.ks_2samp(ref["y"], cur["y"]).pvalue,
                                                 **PVAL)
    assert cols["c"]["type"] == "categorical" and not cols["c"]["drifted"]


def test_compare_data_quality():
    import pandas as pd  # python3-pandas, scripts/install-deps.sh
    rng = np.random.default_rng(3)
    ref = pd.DataFrame({"x": rng.uniform(0, 1, 2000), "c": rng.choice(["a", "b"], 2000)})
    x = rng.uniform(0, 1, 1000)
    x[:100] = np.nan          # 10% nulls
    x[100:150] = 5.0          # 5% above the reference max
    c = np.array(rng.choice(["a", "b"], 1000), dtype=object)
    c[:20] = None             # 2% nulls
    c[20:60] = "zz"           # 4% outside the reference set
    cols = by_column(drift.compare(ref, pd.DataFrame({"x": x, "c": c})))
    assert cols["x"]["null_rate"] == pytest.approx(0.1)
    # Of the rows or of the non-null values: either denominator is accepted.
    assert cols["x"]["out_of_range_rate"] == pytest.approx(50 / 900, abs=50 / 900 - 50 / 1000)
    assert cols["c"]["null_rate"] == pytest.approx(0.02)
    assert cols["c"]["out_of_range_rate"] == pytest.approx(40 / 980, abs=40 / 980 - 40 / 1000)


def test_compare_model_quality():
    rng = np.random.default_rng(12)
    n = 3000
    y = rng.integers(0, 2, n)
    p = np.where(rng.random(n) < 0.8, y, 1 - y)
    score = np.round(np.clip(0.4 * y + rng.random(n) * 0.6, 0, 1), 3)
    x = rng.normal(0, 1, n)
    ref = {"x": x, "label": y, "pred": p, "score": score}
    report = drift.compare(ref, ref, roles={"label": "target", "pred": "prediction",
                                            "score": "score"}, task="classification")
    q = report["quality"]
    assert q["task"] == "classification"
    want = numpy_classification(y, p, 2, score)
    for key, value in want.items():
        assert q[key] == pytest.approx(value, **STAT), key
    # The prediction is compared (prediction drift) but is not a feature.
    assert {c["column"] for c in report["columns"]} == {"x", "pred"}
    # Regression: numerical target and prediction.
    t = rng.normal(5, 2, n)
    report = drift.compare({"x": x, "t": t, "p": t + 0.5}, {"x": x, "t": t, "p": t + 0.5},
                           roles={"t": "target", "p": "prediction"})
    q = report["quality"]
    assert q["task"] == "regression" and q["mae"] == pytest.approx(0.5, **STAT)
    assert q["rmse"] == pytest.approx(0.5, **STAT)
    assert q["r2"] == pytest.approx(1 - 0.25 / np.var(t), **STAT)
    assert drift.compare({"x": x}, {"x": x})["quality"] is None


def test_compare_nullable_and_integer_columns():
    import pandas as pd  # python3-pandas, scripts/install-deps.sh
    ref = pd.DataFrame({"n": pd.array([1, 2, None, 4] * 500, dtype="Int64"),
                        "i": np.arange(2000) % 7, "f": np.arange(2000.0)[::-1]})
    cols = by_column(drift.compare(ref, ref))
    assert cols["n"]["type"] == "numerical" and cols["n"]["null_rate"] == pytest.approx(0.25)
    assert cols["i"]["type"] == "numerical" and cols["f"]["type"] == "numerical"
    assert not any(c["drifted"] for c in cols.values())


def test_compare_html(tmp_path):
    ref, cur = frames(3000, 3000, True)
    page = tmp_path / "report.html"
    report = drift.compare(ref, cur, html=str(page))
    text = page.read_text()
    assert "html" not in report
    assert text.lstrip().lower().startswith("<!doctype html") and "<svg" in text
    assert "<script" not in text.lower() and "age" in text


def without_seconds(report):
    return {k: v for k, v in report.items() if k != "seconds"}


def test_profile_once_compare_many_and_the_cli_reads_it(tmp_path):
    ref, cur = frames(5000, 3000, True, seed=7)
    prof = drift.profile(ref, thresholds={"age": 0.2})
    assert prof.rows == 5000
    assert [c["name"] for c in prof.columns] == list(ref.columns)
    assert {c["kind"] for c in prof.columns} == {"numerical", "categorical"}
    direct = drift.compare(ref, cur, thresholds={"age": 0.2})
    assert without_seconds(drift.compare(prof, cur)) == without_seconds(direct)
    path = tmp_path / "ref.profile"
    prof.save(path)
    loaded = drift.Profile.load(path)
    assert without_seconds(drift.compare(loaded, cur)) == without_seconds(direct)
    with pytest.raises(ValueError, match="profile"):
        drift.compare(prof, cur, kinds={"age": "numerical"})
    with pytest.raises(ValueError, match="age"):
        drift.compare(prof, cur.drop(columns=["age"]))
    with pytest.raises(RuntimeError):
        drift.Profile.load(tmp_path / "missing.profile")
    # `gantry drift compare` reads the profile written here.
    gantry = os.path.join(os.environ.get("GANTRY_BINARY_DIR", ""), "bin", "gantry")
    # ctest sets GANTRY_BINARY_DIR and builds bin/gantry first (`make test`).
    assert os.access(gantry, os.X_OK), "no gantry binary at %s" % gantry
    cur.to_csv(tmp_path / "cur.csv", index=False)
    out = tmp_path / "report.json"
    r = subprocess.run([gantry, "drift", "compare", "--reference", str(path), "--current",
                        str(tmp_path / "cur.csv"), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stderr  # 1: the dataset drifted
    cli = by_column(json.loads(out.read_text()))
    for name, col in by_column(direct).items():
        assert cli[name]["test"] == col["test"] and cli[name]["drifted"] == col["drifted"]
        assert cli[name]["statistic"] == pytest.approx(col["statistic"], **STAT), name


def test_compare_errors():
    ref, cur = frames(100, 100, False)
    with pytest.raises(ValueError, match="steady"):
        drift.compare(ref, cur.drop(columns=["steady"]))
    with pytest.raises(ValueError, match="kinds"):
        drift.compare(ref, cur, kinds={"age": "text"})
    with pytest.raises(ValueError, match="nope"):
        drift.compare(ref, cur, tests={"nope": "ks"})
    with pytest.raises(ValueError):
        drift.compare(ref, cur, tests={"age": "bogus"})
    with pytest.raises(ValueError, match="rows"):
        drift.compare({"a": [1.0, 2.0], "b": [1.0]}, {"a": [1.0], "b": [2.0]})
    with pytest.raises(TypeError):
        drift.compare([1, 2], [1, 2])
