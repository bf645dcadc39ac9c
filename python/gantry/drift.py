"""gantry.drift: data drift, data quality and model quality on numpy/pandas data.

    import gantry.drift
    report = gantry.drift.compare(train_df, window_df)          # a dict
    report["dataset_drift"], [c["column"] for c in report["columns"] if c["drifted"]]
    ref = gantry.drift.profile(train_df); ref.save("ref.profile")  # once
    gantry.drift.compare(ref, next_window_df)                    # per window

compare() runs the engine behind `gantry drift compare` (C++, columns in
parallel) on in-memory data and returns the same JSON report as a dict. The
low-level functions below compute single statistics with scipy/numpy
semantics (the unit tests check them against scipy live); each says where it
differs. Conventions, as in include/gantry/drift/stats.h:
  - NaN is a null and ignored; infinities are data.
  - Distances are "drifted when >= threshold"; p-value tests when
    p < threshold (KS: p <= threshold).
Bad arguments raise ValueError naming the argument; other engine errors
raise RuntimeError. float64 C-contiguous arrays are read in place; anything
else (lists, other dtypes, strided views) is converted once.
"""

import json
import warnings

import numpy as np

from ._gantry import _drift as _native

__all__ = [
    "compare", "profile", "Profile", "default_test", "ks_2samp", "wasserstein", "wasserstein_normed",
    "anderson_ksamp", "jensenshannon", "hellinger", "linf", "psi", "chisquare", "ztest",
    "bin_edges", "histogram", "classification", "regression",
]

_ROLES = ("feature", "target", "prediction", "score", "ignore")


# -- statistics ---------------------------------------------------------------

def ks_2samp(a, b, method="auto"):
    """scipy.stats.ks_2samp(a, b, method=...) two-sided: (statistic, pvalue).
    method: "auto" (exact for small samples as scipy decides), "exact", "asymp"."""
    return _native.ks_2samp(a, b, method)


def wasserstein(u, v):
    """scipy.stats.wasserstein_distance(u, v) (1-D, unweighted)."""
    return _native.wasserstein(u, v, False)


def wasserstein_normed(reference, current):
    """Evidently's normed Wasserstein: W / max(std(reference), 0.001), std with ddof=0."""
    return _native.wasserstein(reference, current, True)


def anderson_ksamp(a, b):
    """scipy.stats.anderson_ksamp([a, b]): (statistic, significance_level); the
    significance level is capped to [0.001, 0.25] as scipy does."""
    return _native.anderson_ksamp(a, b)


def jensenshannon(p, q):
    """scipy.spatial.distance.jensenshannon(p, q) with the natural log (p and q
    are normalised to sum 1)."""
    return _native.distance("jensenshannon", p, q)


def hellinger(p, q):
    """Hellinger distance sqrt(1 - sum sqrt(p q)) of two share vectors, in [0, 1]."""
    return _native.distance("hellinger", p, q)


def linf(p, q):
    """L-infinity (Chebyshev) distance max |p - q| of two share vectors."""
    return _native.distance("linf", p, q)


def psi(reference_shares, current_shares):
    """Population stability index sum (ref - cur) ln(ref / cur), with zero
    shares replaced as Evidently does (0.0001, or min/1e6 when the smallest
    non-zero share is <= 0.0001)."""
    return _native.distance("psi", reference_shares, current_shares)


def chisquare(reference_counts, current_counts):
    """Pearson chi-squared of current counts against the reference proportions
    scaled to the current total (scipy.stats.chisquare(f_obs, f_exp)):
    (statistic, pvalue). Categories absent from the reference get the
    zero-share replacement of psi() so the statistic stays finite."""
    return _native.count_test("chisquare", reference_counts, current_counts)


def ztest(reference_counts, current_counts):
    """Two-sided two-proportion Z-test on the first category: (z, pvalue)."""
    return _native.count_test("z", reference_counts, current_counts)


def bin_edges(values, binning="sturges", bins=10, other=None):
    """Bin edges as a float64 array: "sturges"/"doane" follow
    numpy.histogram_bin_edges(values, bins=binning); "fixed" makes `bins`
    equal-width bins over [min, max]; "quantiles" `bins` bins at quantiles of
    `values`, merging duplicate edges (at least 1 bin). With `other`, the
    edges of the union of both samples (as numpy on their concatenation,
    without making it). Infinities are left out of the edges (numpy refuses
    them); histogram() counts them below/above."""
    return _native.bin_edges(values, binning, int(bins), other)


def histogram(values, edges, full=False):
    """Counts per bin like numpy.histogram(values, edges)[0] (last bin closed,
    NaN ignored). With full=True a dict: counts, below, above (values outside
    the edges, which numpy drops), nulls, and shares (below/above become extra
    bins when non-zero)."""
    h = _native.histogram(values, edges)
    return h if full else h["counts"]


def classification(labels, predictions, k, scores=None):
    """Accuracy, precision/recall/F1 (macro and weighted, sklearn semantics)
    for labels and predictions coded 0..k-1, and ROC-AUC when `scores`
    (positive-class scores, binary only) are given (else None)."""
    return _native.classification(labels, predictions, int(k), scores)


def regression(labels, predictions):
    """mae, mse, rmse and r2 (sklearn's r2_score) as a dict."""
    return _native.regression(labels, predictions)


def default_test(kind, reference_rows, n_unique):
    """The test compare() picks for a column (Evidently's rule): "ks",
    "wasserstein", "jensenshannon", "chisquare" or "z"."""
    return _native.default_test(kind, int(reference_rows), int(n_unique))


# -- compare --------------------------------------------------------------------

def _columns_of(data, what):
    """{name: 1-D array-like} from a pandas DataFrame or a mapping."""
    if hasattr(data, "columns") and hasattr(data, "__getitem__") and hasattr(data, "shape"):
        return {str(c): data[c] for c in data.columns}
    if isinstance(data, dict):
        return {str(k): v for k, v in data.items()}
    raise TypeError(f"{what}: expected a pandas DataFrame or a dict of arrays, "
                    f"got {type(data).__name__}")


def _is_categorical_dtype(x):
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        x = np.asarray(x)
        dtype = x.dtype
    if getattr(dtype, "name", "") in ("category", "string", "boolean"):
        return True
    kind = getattr(dtype, "kind", "O")
    if kind in "iuf":
        return False
    if kind in "OUSb":
        return True
    raise ValueError(f"dtype {dtype} is neither numerical nor categorical; "
                     "convert the column or pass kinds={name: ...}")


def _numbers(x, column, what):
    if isinstance(x, np.ndarray) and x.dtype.kind in "fiu":
        return x  # float64 is read in place; other numeric dtypes converted once natively
    dtype = getattr(x, "dtype", None)
    if hasattr(x, "to_numpy") and isinstance(dtype, np.dtype) and dtype.kind in "fiu":
        return x.to_numpy()  # a numpy-backed Series: a view, NaN already null
    if hasattr(x, "to_numpy"):  # nullable extension dtypes (Int64, Float64): NA -> NaN
        try:
            return x.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    try:
        return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).ravel()
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} column '{column}' is numerical but holds non-numbers ({e}); "
                         f"pass kinds={{'{column}': 'categorical'}} or clean it") from None


def _is_null(v):
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, pd.NA raises or is ambiguous
    except (TypeError, ValueError):
        return True


def _codes(ref, cur):
    """Shared dictionary (sorted strings) and int32 codes (-1 = null) for both sides."""
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a Debian dependency
        pd = None
    if pd is not None:
        joined = pd.concat([pd.Series(np.asarray(ref, dtype=object)),
                            pd.Series(np.asarray(cur, dtype=object))], ignore_index=True)
        with warnings.catch_warnings():
            # pandas 1.5 warns about its own Index inference on object data.
            warnings.simplefilter("ignore", FutureWarning)
            codes, uniques = pd.factorize(joined, use_na_sentinel=True)
        names = [str(u) for u in uniques]
    else:
        table, names, codes = {}, [], []
        for v in list(ref) + list(cur):
            if _is_null(v):
                codes.append(-1)
                continue
            if v not in table:
                table[v] = len(names)
                names.append(str(v))
            codes.append(table[v])
        codes = np.asarray(codes, dtype=np.int64)
    # Sort by name and merge values whose names collide (1 and "1").
    dictionary = sorted(set(names))
    index = {n: i for i, n in enumerate(dictionary)}
    remap = np.asarray([index[n] for n in names] + [-1], dtype=np.int32)  # [-1] maps null
    codes = remap[np.asarray(codes, dtype=np.int64)]  # -1 picks the trailing -1
    n = len(ref)
    return dictionary, np.ascontiguousarray(codes[:n]), np.ascontiguousarray(codes[n:])


def _array(x, kind, name, what):
    """(array, dictionary) of one column of one side, ready for the engine."""
    if kind == "numerical":
        a, dictionary = _numbers(x, name, what), []
    else:
        dictionary, a, _ = _codes(x, [])
    if a.ndim != 1:
        raise ValueError(f"{what} column '{name}' is not 1-D (shape {a.shape})")
    return a, dictionary


def _side(cols, specs, what):
    """Arrays, dictionaries and the row count of one side, in spec order."""
    arrays, dictionaries, rows = [], [], None
    for spec in specs:
        a, dictionary = _array(cols[spec["name"]], spec["kind"], spec["name"], what)
        if rows is None:
            rows = len(a)
        elif len(a) != rows:
            raise ValueError(f"{what} column '{spec['name']}' has {len(a)} rows, "
                             f"the first column {rows}")
        arrays.append(a)
        dictionaries.append(dictionary)
    return arrays, dictionaries, rows


class Profile:
    """What a comparison needs of the reference, computed once (per-column
    sorted values, category counts, min/max, ...): the in-memory twin of the
    file `gantry drift profile` writes. save()/load() use that file format, so
    a profile built here works with `gantry drift compare --reference` and
    the other way round."""

    def __init__(self, native):
        self._native = native

    @classmethod
    def load(cls, path):
        """Loads a profile file (from save() or `gantry drift profile`)."""
        return cls(_native.Profile.load(str(path)))

    def save(self, path):
        """Writes the profile file atomically."""
        self._native.save(str(path))

    @property
    def rows(self):
        return self._native.rows

    @property
    def columns(self):
        """[{name, kind, role}] in profile order."""
        return self._native.columns

    @property
    def drift_share(self):
        return self._native.drift_share

    @property
    def task(self):
        return self._native.task

    def __repr__(self):
        return f"<gantry.drift.Profile rows={self.rows} columns={len(self.columns)}>"


def profile(reference, columns=None, kinds=None, tests=None, thresholds=None, drift_share=0.5,
            *, roles=None, task=None, binning=None, bins=None):
    """Builds the reference Profile once, for several compare(profile, window)
    calls. Arguments as for compare()."""
    ref_cols = _columns_of(reference, "reference")
    names = [str(c) for c in (columns if columns is not None else ref_cols.keys())]
    missing = [n for n in names if n not in ref_cols]
    if missing:
        raise ValueError(f"reference lacks column(s) {', '.join(missing)}")
    kinds, tests, thresholds = dict(kinds or {}), dict(tests or {}), dict(thresholds or {})
    roles, binning, bins = dict(roles or {}), dict(binning or {}), dict(bins or {})
    for arg, mapping in (("kinds", kinds), ("tests", tests), ("thresholds", thresholds),
                         ("roles", roles), ("binning", binning), ("bins", bins)):
        unknown = [str(k) for k in mapping if str(k) not in names]
        if unknown:
            raise ValueError(f"{arg} names column(s) not compared: {', '.join(unknown)}")
    names = [n for n in names if roles.get(n) != "ignore"]  # as a schema's role: ignore
    if not names:
        raise ValueError("no columns to compare")
    specs = []
    for name in names:
        kind = kinds.get(name)
        if kind is None:
            try:
                kind = "categorical" if _is_categorical_dtype(ref_cols[name]) else "numerical"
            except ValueError as e:
                raise ValueError(f"reference column '{name}': {e}") from None
        if kind not in ("numerical", "categorical"):
            raise ValueError(f"kinds['{name}'] = {kind!r}: expected 'numerical' or 'categorical'")
        role = roles.get(name, "feature")
        if role not in _ROLES:
            raise ValueError(f"roles['{name}'] = {role!r}: expected one of {', '.join(_ROLES)}")
        threshold = thresholds.get(name)
        specs.append({
            "name": name, "kind": kind, "role": role, "test": tests.get(name),
            "threshold": None if threshold is None else float(threshold),
            "binning": binning.get(name, "sturges"), "bins": int(bins.get(name, 10)),
        })
    arrays, dictionaries, rows = _side(ref_cols, specs, "reference")
    return Profile(_native.profile(specs, dictionaries, arrays, rows, float(drift_share),
                                   task or ""))


def compare(reference, current, columns=None, kinds=None, tests=None, thresholds=None,
            drift_share=0.5, *, roles=None, task=None, binning=None, bins=None, threads=0,
            html=None):
    """Compares `current` with `reference` column by column and returns the
    report (the JSON of `gantry drift compare`) as a dict: reference_rows,
    current_rows, dataset_drift, drifted_share, drift_share, columns (column,
    type, test, statistic, p_value, threshold, drifted, null_rate,
    out_of_range_rate, histogram, ...) and quality (None unless a target and
    a prediction are given).

    Args:
      reference: a pandas DataFrame, a dict of 1-D arrays/lists, or a Profile
        (then columns..bins below were fixed by profile() and must be left out).
      current: a pandas DataFrame or a dict of 1-D arrays/lists; it needs every
        feature and prediction column of the reference (extra ones are ignored).
      columns: the columns to compare (default: every column of reference).
      kinds: {column: "numerical" | "categorical"}; default from the dtype
        (ints and floats numerical; object, str, bool, category categorical).
      tests: {column: "ks" | "wasserstein" | "psi" | "jensenshannon" |
        "hellinger" | "anderson" | "chisquare" | "z" | "linf"}; default by
        Evidently's rule (default_test()).
      thresholds: {column: float}; default per test (0.05 p-values, anderson
        0.1, 0.1 distances).
      drift_share: the dataset drifts when drifted columns / columns >= this.
      roles: {column: "feature" | "target" | "prediction" | "score" | "ignore"};
        with a target and a prediction the report gains model quality, and
        the prediction column is compared too (prediction drift) without
        counting towards drifted_share.
      task: "classification" or "regression" (default: from the target's kind).
      binning, bins: {column: "sturges" | "doane" | "fixed" | "quantiles"} and
        {column: int} for the binned tests.
      threads: columns compared in parallel; 0 = all cores.
      html: a path to write the self-contained HTML report to.
    """
    cur_cols = _columns_of(current, "current")
    if isinstance(reference, Profile):
        fixed = {"columns": columns, "kinds": kinds, "tests": tests, "thresholds": thresholds,
                 "roles": roles, "task": task, "binning": binning, "bins": bins}
        given = [k for k, v in fixed.items() if v is not None]
        if drift_share != 0.5:
            given.append("drift_share")
        if given:
            raise ValueError(f"{', '.join(given)}: fixed when the profile was built; "
                             "pass them to gantry.drift.profile()")
        prof = reference
    else:
        names = columns if columns is not None else _columns_of(reference, "reference").keys()
        missing = [str(n) for n in names
                   if str(n) not in cur_cols and (roles or {}).get(n, "feature") != "ignore"]
        if missing:
            raise ValueError(f"current lacks column(s) {', '.join(missing)}")
        prof = profile(reference, columns, kinds, tests, thresholds, drift_share, roles=roles,
                       task=task, binning=binning, bins=bins)
    # The current side: features and the prediction are required; the target
    # and score are used for model quality when present.
    specs, missing = [], []
    for c in prof.columns:
        if c["name"] in cur_cols:
            specs.append({"name": c["name"], "kind": c["kind"], "role": c["role"], "test": None,
                          "threshold": None, "binning": "sturges", "bins": 10})
        elif c["role"] in ("feature", "prediction"):
            missing.append(c["name"])
    if missing:
        raise ValueError(f"current lacks column(s) {', '.join(missing)}")
    arrays, dictionaries, rows = _side(cur_cols, specs, "current")
    text = _native.compare(prof._native, specs, dictionaries, arrays, rows, int(threads),
                           html is not None)
    report = json.loads(text)
    page = report.pop("html", None)
    if html is not None:
        with open(html, "w", encoding="utf-8") as f:
            f.write(page)
    return report
