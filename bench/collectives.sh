#!/usr/bin/env bash
# Side-by-side all_reduce benchmark on this machine: Gantry's shared-memory
# engine against Open MPI and Gloo on the same sizes (float sum, 2 ranks, 8 B to
# 256 MiB doubling), plus the memcpy ceiling, in one run. Prints Markdown
# (paste it into docs/benchmarks.md) ending with the project's targets:
#   gantry busbw >= 2x MPI at every size >= 8 MiB
#   gantry busbw >= 4x Gloo at every size
#   gantry 8-byte latency <= MPI's
#   gantry busbw at the largest size >= 50% of memcpy bandwidth
#
# usage: bench/collectives.sh [--quick]
#   --quick   8 B to 16 MiB with fewer iterations (a minute, for a smoke run)
# Environment:
#   BUILD_DIR  build tree with bin/gantry and bin/gloo_allreduce_bench
#              (default: build/release next to this script)
#   ITERS, WARMUP  timed and warm-up iterations per size (default 20 and 5;
#              --quick: 10 and 2)
#   REPEAT     runs of every tool, interleaved; each size reports its best run,
#              so a burst of noise from other processes does not decide a row
#              (default 3; --quick: 1)
#
# Columns are nccl-tests' out-of-place busbw (GB/s, 2(n-1)/n x algbw) for
# Gantry and MPI. Gloo only reduces in place; its column is the better of its
# ring_chunked and halving_doubling algorithms at each size.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
gantry=$build/bin/gantry
gloo=$build/bin/gloo_allreduce_bench
ranks=2
min_bytes=8

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "collectives.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
if [[ $quick -eq 1 ]]; then
  max_bytes=16M
  iters=${ITERS:-10}
  warmup=${WARMUP:-2}
  repeat=${REPEAT:-1}
else
  max_bytes=256M
  iters=${ITERS:-20}
  warmup=${WARMUP:-5}
  repeat=${REPEAT:-3}
fi

if [[ ! -x $gantry ]]; then
  echo "collectives.sh: $gantry not found; build first (make build) or set BUILD_DIR" >&2
  exit 2
fi
python=/usr/bin/python3
[[ -x $python ]] || python=python3

tmp=$(mktemp -d /tmp/gantry-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

sweep=(-b "$min_bytes" -e "$max_bytes" -f 2 -n "$iters" -w "$warmup" -d float -o sum)
log() { echo "collectives.sh: $*" >&2; }

mpirun_flags=(--mca btl self,vader -np "$ranks")
[[ $(id -u) -eq 0 ]] && mpirun_flags=(--allow-run-as-root "${mpirun_flags[@]}")
[[ $(nproc) -lt $ranks ]] && mpirun_flags=(--oversubscribe "${mpirun_flags[@]}")
have_mpi=0
if command -v mpirun >/dev/null && "$gantry" --version | grep -q "mpi=on"; then
  have_mpi=1
else
  log "no MPI (mpirun missing or gantry built without MPI): MPI column skipped"
fi
[[ -x $gloo ]] || log "$gloo not built (libgloo-dev missing): Gloo column skipped"

for ((run = 1; run <= repeat; run++)); do
  log "run $run/$repeat: gantry shm ($ranks forked ranks)"
  "$gantry" bench all_reduce --backend shm --ranks "$ranks" "${sweep[@]}" \
    -J "$tmp/shm_$run.json" >"$tmp/shm_$run.txt"
  if [[ $have_mpi -eq 1 ]]; then
    log "run $run/$repeat: Open MPI (mpirun ${mpirun_flags[*]})"
    mpirun "${mpirun_flags[@]}" "$gantry" bench all_reduce --backend mpi "${sweep[@]}" \
      -J "$tmp/mpi_$run.json" >"$tmp/mpi_$run.txt"
  fi
  if [[ -x $gloo ]]; then
    for algo in ring_chunked halving_doubling; do
      log "run $run/$repeat: Gloo allreduce_$algo over TCP 127.0.0.1"
      "$gloo" --ranks "$ranks" --algorithm "$algo" -b "$min_bytes" -e "$max_bytes" -f 2 \
        -n "$iters" -w "$warmup" --json >"$tmp/gloo_${algo}_$run.json"
    done
  fi
done

log "memcpy ceiling"
"$gantry" bench memcpy --json >"$tmp/memcpy.json"

"$python" - "$tmp" "$ranks" "$quick" "$gantry" <<'EOF'
import json, os, platform, subprocess, sys

tmp, ranks, quick, gantry = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]

def load(name):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)

def runs(prefix):
    names = sorted(n for n in os.listdir(tmp) if n.startswith(prefix) and n.endswith(".json"))
    return [(n, load(n)) for n in names]

def keep_best(best, size, bw, t, tag):
    """Keeps, per size, the run with the lowest time (= highest bandwidth)."""
    if size not in best or t < best[size][1]:
        best[size] = (bw, t, tag)

def nccl_rows(prefix, label):
    """size -> (busbw GB/s, time us, run) of the out-of-place column, best run."""
    best = {}
    for name, doc in runs(prefix):
        if doc.get("out_of_bounds", {}).get("count", 0):
            sys.exit("collectives.sh: %s reported wrong results (%s)" % (label, name))
        for r in doc["results"]:
            oop = r["out_of_place"]
            keep_best(best, int(r["size"]), float(oop["bus_bw"]), float(oop["time"]), name)
    return best

def gloo_rows():
    best = {}
    for algo in ("ring_chunked", "halving_doubling"):
        for name, doc in runs("gloo_%s_" % algo):
            for r in doc["results"]:
                if r.get("nwrong", 0):
                    sys.exit("collectives.sh: Gloo %s returned wrong results at %s B" %
                             (algo, r["size"]))
                keep_best(best, int(r["size"]), float(r["bus_bw"]), float(r["time"]), algo)
    return best

def find_key(doc, key):
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            found = find_key(v, key)
            if found is not None:
                return found
    elif isinstance(doc, list):
        for v in doc:
            found = find_key(v, key)
            if found is not None:
                return found
    return None

shm, mpi, gloo = nccl_rows("shm_", "gantry shm"), nccl_rows("mpi_", "mpi"), gloo_rows()
if not shm:
    sys.exit("collectives.sh: no gantry results")
repeat = len(runs("shm_"))
memcpy = load("memcpy.json")
memcpy_bw = find_key(memcpy, "bandwidth_gbs") if memcpy else None

def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b

def fmt_bw(v):
    return "%.3f" % v if v < 10 else "%.2f" % v

def ratio(a, b):
    return a / b if b > 0 else float("inf")

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"

version = subprocess.run([gantry, "--version"], capture_output=True, text=True).stdout.strip()
print("### all_reduce, float sum, %d ranks on one machine%s" % (ranks, " (quick)" if quick else ""))
print()
print("%s, %d CPUs, %s. %s" % (cpu_model(), os.cpu_count(), platform.platform(), version))
print()
print("busbw in GB/s (nccl-tests definition, out-of-place; Gloo: the better of ring_chunked and "
      "halving_doubling, in place). Time in us. Each row is the best of %d run(s)." % repeat)
print()
print("| size | gantry shm | mpi | gloo | gantry/mpi | gantry/gloo | gantry us | mpi us | gloo us |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted(shm):
    g_bw, g_t = shm[size][:2]
    cells = [fmt_size(size), fmt_bw(g_bw)]
    m = mpi.get(size)
    l = gloo.get(size)
    cells.append(fmt_bw(m[0]) if m else "n/a")
    cells.append(fmt_bw(l[0]) if l else "n/a")
    cells.append("%.2fx" % ratio(g_bw, m[0]) if m else "n/a")
    cells.append("%.2fx" % ratio(g_bw, l[0]) if l else "n/a")
    cells.append("%.2f" % g_t)
    cells.append("%.2f" % m[1] if m else "n/a")
    cells.append("%.2f" % l[1] if l else "n/a")
    print("| " + " | ".join(cells) + " |")
print()

small = min(shm)
large = max(shm)
lat = {"gantry": shm[small][1]}
if small in mpi:
    lat["mpi"] = mpi[small][1]
if small in gloo:
    lat["gloo"] = gloo[small][1]
print("%s latency: " % fmt_size(small) +
      ", ".join("%s %.2f us" % (k, v) for k, v in lat.items()) + ".")
if memcpy_bw:
    print("memcpy: %.2f GB/s; gantry busbw at %s is %.0f%% of it." %
          (memcpy_bw, fmt_size(large), 100 * shm[large][0] / memcpy_bw))
print()

targets = []
big = [s for s in sorted(shm) if s >= (8 << 20) and s in mpi]
if big:
    worst = min(big, key=lambda s: ratio(shm[s][0], mpi[s][0]))
    r = ratio(shm[worst][0], mpi[worst][0])
    targets.append((">= 2x MPI busbw at every size >= 8 MiB",
                    "min %.2fx (at %s)" % (r, fmt_size(worst)), r >= 2))
else:
    targets.append((">= 2x MPI busbw at every size >= 8 MiB", "no MPI data >= 8 MiB", None))
both = [s for s in sorted(shm) if s in gloo]
if both:
    worst = min(both, key=lambda s: ratio(shm[s][0], gloo[s][0]))
    r = ratio(shm[worst][0], gloo[worst][0])
    targets.append((">= 4x Gloo busbw at every size", "min %.2fx (at %s)" % (r, fmt_size(worst)),
                    r >= 4))
else:
    targets.append((">= 4x Gloo busbw at every size", "no Gloo data", None))
if "mpi" in lat:
    targets.append(("%s latency <= MPI" % fmt_size(small),
                    "%.2f us vs %.2f us" % (lat["gantry"], lat["mpi"]), lat["gantry"] <= lat["mpi"]))
else:
    targets.append(("%s latency <= MPI" % fmt_size(small), "no MPI data", None))
if memcpy_bw:
    pct = 100 * shm[large][0] / memcpy_bw
    targets.append((">= 50%% of memcpy at %s" % fmt_size(large), "%.0f%%" % pct, pct >= 50))
else:
    targets.append((">= 50% of memcpy at the largest size", "no memcpy data", None))

print("| target | measured | result |")
print("|---|---|---|")
for name, measured, ok in targets:
    print("| %s | %s | %s |" % (name, measured, "SKIP" if ok is None else ("PASS" if ok else "MISS")))
EOF
