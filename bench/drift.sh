#!/usr/bin/env bash
# Drift statistics benchmark, one run, one machine, the same data for everyone:
# COLS float64 columns x ROWS reference rows x ROWS current rows (mixed
# distributions, some columns drifted), generated once with numpy (fixed seed)
# and saved as .npy and CSV in a scratch directory.
#   per statistic, on the same column pair (1 x ROWS vs 1 x ROWS):
#     ks            scipy.stats.ks_2samp              vs gantry.drift.ks_2samp
#     wasserstein   scipy.stats.wasserstein_distance  vs gantry.drift.wasserstein
#     js            numpy histogram_bin_edges(concatenation, sturges) + 2x numpy.histogram +
#                   scipy jensenshannon vs gantry.drift.bin_edges(a, other=b) + 2x histogram +
#                   jensenshannon
#     psi           the same bins + a PSI in numpy (Evidently's zero fill)
#                   vs gantry.drift.bin_edges + 2x histogram + psi
#   the whole COLS-column report:
#     gantry drift profile (reference CSV -> profile) and gantry drift compare
#     (profile + current CSV -> table, JSON, HTML), the CLI from CSV
#     gantry.drift.compare(ref, cur) in memory (numpy arrays, profile included), and
#     gantry.drift.profile(ref) once + gantry.drift.compare(profile, cur) per window
# Every measurement runs REPEAT times; each row reports the best. Gantry's
# values are checked against scipy's (the "max rel diff" column). Prints
# Markdown (paste it into docs/benchmarks.md) ending with the project's targets:
#   gantry >= 10x scipy/numpy per statistic
#   the whole COLS-column report faster than one scipy ks_2samp
#
# usage: bench/drift.sh [--quick]
#   --quick   ROWS 100000 and REPEAT 1 (a smoke run, well under a minute)
# Environment:
#   BUILD_DIR  build tree with bin/gantry and python/gantry (default: build/release)
#   GANTRY     the gantry binary (overrides BUILD_DIR/bin/gantry)
#   BENCH_DIR  scratch directory for the data (default: build/drift-bench; removed at
#              the end unless KEEP_DATA is set; reused when its data matches ROWS/COLS)
#   ROWS       rows of the reference and of the current window (default 1000000)
#   COLS       columns (default 20)
#   REPEAT     runs of every measurement (default 3)
#   COLUMN     the column the per-statistic rows use (default c00, normal, drifted)
#   SKIP_CLI   set to skip the CLI rows (no bin/gantry needed)
#   KEEP_DATA  set to keep BENCH_DIR (data, profile, report.json, report.html)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
gantry=${GANTRY:-$build/bin/gantry}
scratch=${BENCH_DIR:-$root/build/drift-bench}
python=/usr/bin/python3
[[ -x $python ]] || python=python3
rows=${ROWS:-1000000}
cols=${COLS:-20}
repeat=${REPEAT:-3}
column=${COLUMN:-c00}
case "${1:-}" in
  --quick) rows=${ROWS:-100000}; repeat=${REPEAT:-1} ;;
  "") ;;
  -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "drift.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
die() { echo "drift.sh: $*" >&2; exit 2; }
[[ -f $build/python/gantry/drift.py ]] ||
  die "$build/python/gantry/drift.py not found; build first (make build) or set BUILD_DIR"
if [[ -z ${SKIP_CLI:-} && ! -x $gantry ]]; then
  die "$gantry not found; build it (make build), set GANTRY, or set SKIP_CLI=1"
fi
$python -c 'import scipy, numpy' 2>/dev/null ||
  die "scipy/numpy missing for $python: install python3-scipy python3-numpy (scripts/install-deps.sh)"

mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
[[ -n ${KEEP_DATA:-} ]] || trap 'rm -rf "$scratch"' EXIT

program=$(cat <<'PY'
import json, os, platform, subprocess, sys, time

import numpy as np

scratch, rows, cols, repeat, column, gantry_bin = sys.argv[1:7]
rows, cols, repeat = int(rows), int(cols), int(repeat)
names = [f"c{i:02d}" for i in range(cols)]


def log(*a):
    print("drift.sh:", *a, file=sys.stderr, flush=True)


# -- data: generated once, reused while ROWS/COLS match --------------------------
stamp = os.path.join(scratch, "data.json")
meta = {"rows": rows, "cols": cols, "seed": 20261130, "version": 1}
if not (os.path.exists(stamp) and json.load(open(stamp)) == meta):
    log(f"generating {cols} columns x {rows} rows (reference and current)")
    rng = np.random.default_rng(meta["seed"])

    def column_pair(i):
        # (generator, drifted?) cycling over shapes; every third column drifts.
        drifted = i % 3 == 0
        s = 1 if drifted else 0
        kind = i % 6
        def make(shift):
            if kind == 0: return rng.normal(10 + 0.3 * shift, 2, rows)
            if kind == 1: return rng.lognormal(1 + 0.2 * shift, 0.6, rows)
            if kind == 2: return rng.uniform(0, 100 + 15 * shift, rows)
            if kind == 3: return rng.exponential(3 * (1 + 0.3 * shift), rows)
            if kind == 4: return rng.standard_t(5, rows) * (1 + 0.4 * shift)
            mix = rng.random(rows) < 0.3 + 0.2 * shift  # bimodal
            return np.where(mix, rng.normal(-4, 1, rows), rng.normal(3, 1.5, rows))
        # 4 decimals: the CSV text round-trips to the same doubles.
        return np.round(make(0), 4), np.round(make(s), 4)

    ref = np.empty((cols, rows)); cur = np.empty((cols, rows))
    for i in range(cols):
        ref[i], cur[i] = column_pair(i)
    np.save(os.path.join(scratch, "ref.npy"), ref)
    np.save(os.path.join(scratch, "cur.npy"), cur)
    import pandas as pd  # CSV writer (python3-pandas)
    for side, data in (("ref", ref), ("cur", cur)):
        pd.DataFrame(data.T, columns=names).to_csv(os.path.join(scratch, side + ".csv"),
                                                   index=False, float_format="%.4f")
    with open(os.path.join(scratch, "schema.yaml"), "w") as f:
        f.write("columns:\n" + "".join(f"  {n}: numerical\n" for n in names))
    json.dump(meta, open(stamp, "w"))
ref = np.load(os.path.join(scratch, "ref.npy"))
cur = np.load(os.path.join(scratch, "cur.npy"))

import scipy
from scipy import stats
from scipy.spatial import distance

import gantry.drift as gd


def best(fn):
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t)
    return min(times), value


def rel(a, b):
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def np_fill(s):
    s = s.copy()
    smallest = s[s != 0].min()
    s[s == 0] = smallest / 1e6 if smallest <= 0.0001 else 0.0001
    return s


def scipy_hist(a, b):
    edges = np.histogram_bin_edges(np.concatenate([a, b]), bins="sturges")
    return np.histogram(a, edges)[0], np.histogram(b, edges)[0]


def scipy_js(a, b):
    p, q = scipy_hist(a, b)
    return distance.jensenshannon(p, q)


def scipy_psi(a, b):
    p, q = scipy_hist(a, b)
    p, q = np_fill(p / p.sum()), np_fill(q / q.sum())
    return float(np.sum((p - q) * np.log(p / q)))


def gantry_hist(a, b):
    edges = gd.bin_edges(a, "sturges", other=b)  # the union's edges, no concatenation
    return gd.histogram(a, edges, full=True), gd.histogram(b, edges, full=True)


def gantry_js(a, b):
    p, q = gantry_hist(a, b)
    return gd.jensenshannon(p["shares"], q["shares"])


def gantry_psi(a, b):
    p, q = gantry_hist(a, b)
    return gd.psi(p["shares"], q["shares"])


a, b = ref[names.index(column)], cur[names.index(column)]
rows_out = []
stat_rows = [
    ("ks", "scipy.stats.ks_2samp", lambda: tuple(stats.ks_2samp(a, b)), lambda: gd.ks_2samp(a, b)),
    ("wasserstein", "scipy.stats.wasserstein_distance", lambda: stats.wasserstein_distance(a, b),
     lambda: gd.wasserstein(a, b)),
    ("js", "numpy histogram (sturges) + scipy jensenshannon", lambda: scipy_js(a, b),
     lambda: gantry_js(a, b)),
    ("psi", "numpy histogram (sturges) + numpy PSI", lambda: scipy_psi(a, b),
     lambda: gantry_psi(a, b)),
]
ks_seconds = None
for name, anchor, ref_fn, gantry_fn in stat_rows:
    log(f"{name}: scipy/numpy")
    ts, vs = best(ref_fn)
    log(f"{name}: gantry")
    tg, vg = best(gantry_fn)
    if name == "ks":
        ks_seconds = ts
    rows_out.append((name, anchor, ts, tg, rel(vg, vs)))

report_rows = []
ref_cols = {n: ref[i] for i, n in enumerate(names)}
cur_cols = {n: cur[i] for i, n in enumerate(names)}
log("gantry.drift.compare in memory")
t_mem, rep = best(lambda: gd.compare(ref_cols, cur_cols))
drifted = [c["column"] for c in rep["columns"] if c["drifted"]]
report_rows.append((f"gantry.drift.compare (in memory, {cols} columns, profile included)", t_mem))
log("gantry.drift.profile + compare(profile, window) in memory")
t_prof_mem, prof = best(lambda: gd.profile(ref_cols))
t_win, rep_win = best(lambda: gd.compare(prof, cur_cols))
report_rows.append(("gantry.drift.profile (in memory, once per reference)", t_prof_mem))
report_rows.append(("gantry.drift.compare(profile, window) (in memory, per window)", t_win))
report_rows.append(("  of which the engine's Compare (report 'seconds')", rep_win["seconds"]))

if gantry_bin != "-":
    schema = os.path.join(scratch, "schema.yaml")
    profile = os.path.join(scratch, "ref.profile")
    prof_cmd = [gantry_bin, "drift", "profile", "--schema", schema,
                "--data", os.path.join(scratch, "ref.csv"), "--out", profile]
    cmp_cmd = [gantry_bin, "drift", "compare", "--reference", profile, "--schema", schema,
               "--current", os.path.join(scratch, "cur.csv"),
               "--out", os.path.join(scratch, "report.json"),
               "--html", os.path.join(scratch, "report.html")]

    def run(cmd):
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # compare exits 1 when the dataset drifts (the alerting convention); 2+ is an error
        if r.returncode not in (0, 1):
            sys.exit(f"drift.sh: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")

    log("gantry drift profile (CLI)")
    t_prof, _ = best(lambda: run(prof_cmd))
    log("gantry drift compare (CLI)")
    t_cmp, _ = best(lambda: run(cmp_cmd))
    report_rows.append(("gantry drift profile (CLI, reference CSV -> profile)", t_prof))
    report_rows.append(("gantry drift compare (CLI, profile + current CSV -> table/JSON/HTML)",
                        t_cmp))
    report_rows.append(("  of which the engine's Compare (report.json 'seconds')",
                        json.load(open(os.path.join(scratch, "report.json")))["seconds"]))
    report_rows.append(("gantry drift profile + compare (CLI, from CSV)", t_prof + t_cmp))

cpu = platform.processor() or platform.machine()
try:
    with open("/proc/cpuinfo") as f:
        cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
except (OSError, StopIteration):
    pass
print(f"## gantry drift vs scipy ({time.strftime('%Y-%m-%d')})\n")
print(f"{cols} float64 columns, {rows:,} reference x {rows:,} current rows; {os.cpu_count()} CPUs "
      f"({cpu}); numpy {np.__version__}, scipy {scipy.__version__}; best of {repeat}.\n")
print(f"Per statistic, column {column} (1 x {rows:,} vs 1 x {rows:,}), Gantry through the Python binding:\n")
print("| statistic | scipy/numpy | scipy (ms) | gantry (ms) | speedup | max rel diff |")
print("|---|---|---:|---:|---:|---:|")
for name, anchor, ts, tg, diff in rows_out:
    print(f"| {name} | {anchor} | {ts * 1e3:.1f} | {tg * 1e3:.1f} | {ts / tg:.1f}x | {diff:.1e} |")
print(f"\nWhole report ({cols} columns; {len(drifted)} drifted: {', '.join(drifted) or 'none'}) "
      f"vs one scipy ks_2samp ({ks_seconds * 1e3:.1f} ms):\n")
print("| run | time (ms) | / one scipy KS |")
print("|---|---:|---:|")
for label, t in report_rows:
    print(f"| {label} | {t * 1e3:.1f} | {t / ks_seconds:.2f} |")
print("\nTargets:")
worst = min(rows_out, key=lambda r: r[2] / r[3])
ok = worst[2] / worst[3] >= 10
print(f"- per statistic >= 10x scipy/numpy: {'met' if ok else 'MISSED'} "
      f"(lowest: {worst[0]} {worst[2] / worst[3]:.1f}x)")
for label, t in report_rows:
    if label.startswith(("gantry.drift.compare", "gantry drift profile +")):
        print(f"- whole report < one scipy KS, {label.split(' (')[0]}: "
              f"{'met' if t < ks_seconds else 'MISSED'} ({t / ks_seconds:.2f}x the KS time)")
PY
)

cli=$gantry
[[ -n ${SKIP_CLI:-} ]] && cli=-
PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} \
  $python -B -c "$program" "$scratch" "$rows" "$cols" "$repeat" "$column" "$cli"
