#!/usr/bin/env bash
# gantry autoscale benchmark: a request trace replayed in simulated time through
# four rule sets against one capacity model (src/autoscale/simulate.h):
#   fixed capacity sized for the busiest minute; the HPA on utilisation (70 %,
#   min 1, default behavior); KEDA on queue length (min 0, cooldown 300 s,
#   activation 0, polling 30 s at zero); Gantry on the gateway's in flight +
#   pending + held with scale to zero (settings: GantrySettings in simulate.h).
# The baselines run at their documented defaults, signal paths included: the
# HPA reads metrics-server's 15 s CPU average (--metric-resolution 15 s),
# published up to 15 s before (modelled 8 s), with pods not ready for a whole
# window set aside (CPU initialization period); KEDA reads the Prometheus
# sample of the last 15 s scrape; Gantry reads the gateway's gauges live, as
# its controller scrapes /metrics when it evaluates (sources in simulate.h).
# Instances take STARTUP s to
# become ready (a GPU VM or pod loading its model), serve CONCURRENCY requests
# at once for SERVICE s each; requests queue at the gateway while there is no
# free slot. Prints instance-hours, requests that waited > 1 s, the worst
# wait, the ns per Decide call (steady_clock around each call), the ratios to
# the HPA and KEDA, and MEETS/MISSES for the targets (issue "gantry autoscale"):
#   fewer instance-hours than the HPA and KEDA rule sets at no more waiting
#   requests; decision cost < 1 ms per target per evaluation.
#
# usage: bench/autoscale.sh [--hourly] [--trace FILE.csv]
#   default: the generated one-day diurnal trace with bursts (SEED); a day
#   simulates in well under a second, so there is no --quick
#   --hourly: also instances and waited requests per hour and rule set
# Environment: BUILD_DIR (default build/release), SIM (default
# $BUILD_DIR/bin/autoscale_sim), SEED (1), STARTUP (90), CONCURRENCY (8),
# SERVICE (2), SEEDS (e.g. "1 2 3 4": also print one summary line per seed).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
sim=${SIM:-$build/bin/autoscale_sim}
seed=${SEED:-1}
args=(--startup "${STARTUP:-90}" --concurrency "${CONCURRENCY:-8}" --service "${SERVICE:-2}")
trace_args=(--seed "$seed")
while (($#)); do
  case "$1" in
    --hourly) args+=(--hourly) ;;
    --trace) [[ $# -ge 2 ]] || { echo "autoscale.sh: --trace needs a file" >&2; exit 2; }
             trace_args=(--trace "$2"); shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "autoscale.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $sim ]] || { echo "autoscale.sh: $sim not found; build it first:" \
  "cmake --build ${build#$root/} --target autoscale_sim" >&2; exit 2; }

"$sim" "${trace_args[@]}" "${args[@]}"

if [[ -n ${SEEDS:-} ]]; then
  echo
  echo "per seed (instance-hours / waited > 1 s):"
  printf '  %-5s %-22s %-22s %-22s %s\n' seed HPA KEDA Gantry verdict
  for s in $SEEDS; do
    "$sim" --seed "$s" "${args[@]}" --json | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
r = {x["name"].split()[0]: x for x in j["rule_sets"]}
cell = lambda x: "%.1f / %d" % (x["instance_hours"], x["waited"])
ok = j["targets"]["fewer_instance_hours_no_more_waiting"]
print("  %-5s %-22s %-22s %-22s %s" % (sys.argv[1], cell(r["HPA"]), cell(r["KEDA"]),
      cell(r["Gantry"]), "MEETS" if ok else "MISSES"))' "$s"
  done
fi
