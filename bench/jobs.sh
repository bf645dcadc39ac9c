#!/usr/bin/env bash
# gantry jobs benchmark, in one run on the same generated data (bench/jobs_gen.py):
#   1. a DAG of STEPS trivial steps (`touch out/s<i>`, 10 chains, each step needing
#      two earlier ones): `gantry jobs run` against Snakemake (Debian's snakemake,
#      local executor, --cores J) and `make -j J`, from scratch; then the re-run of
#      the up-to-date workflow (nothing to do) by each. Each cell is the best of
#      REPEAT runs (wall clock). Prints the ratios and the per-step overhead.
#   2. early-termination decisions for TRIALS x INTERVALS recorded reports
#      (`gantry jobs replay`), per policy: the decision time it reports.
# Targets (issue "gantry jobs"): gantry <= 0.1x Snakemake, <= make, <= 2 ms per
# step; policy decisions well under a second.
#
# usage: bench/jobs.sh [--quick]
# Environment: BUILD_DIR (default build/release), GANTRY, BENCH_DIR (scratch,
# default build/jobs-bench), STEPS (1000), J (2), REPEAT (3), TRIALS (10000),
# INTERVALS (100).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
gantry=${GANTRY:-$build/bin/gantry}
scratch=${BENCH_DIR:-$root/build/jobs-bench}
steps=${STEPS:-1000}
jobs_n=${J:-2}
repeat=${REPEAT:-3}
trials=${TRIALS:-10000}
intervals=${INTERVALS:-100}
case "${1:-}" in
  --quick) repeat=${REPEAT:-1}; trials=${TRIALS:-2000} ;;
  "") ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "jobs.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
die() { echo "jobs.sh: $*" >&2; exit 2; }
[[ -x $gantry ]] || die "$gantry not found; build first (make build) or set GANTRY"
command -v snakemake >/dev/null || die "snakemake not found (apt-get install snakemake)"
command -v make >/dev/null || die "make not found"
rm -rf "$scratch"
mkdir -p "$scratch"
[[ -n ${KEEP_DATA:-} ]] || trap 'rm -rf "$scratch"' EXIT
d=$scratch/dag
/usr/bin/python3 "$here/jobs_gen.py" "$d" --steps "$steps"

now() { date +%s.%N; }
# best wall seconds of REPEAT runs of "$@" in $d; `clean` first when $1 is clean
best() {
  local mode=$1; shift
  local b="" s e t
  for ((r = 0; r < repeat; r++)); do
    if [[ $mode == clean ]]; then rm -rf "$d/out" "$d/.snakemake" "$d/.gantry"; mkdir -p "$d/out"; fi
    s=$(now)
    (cd "$d" && "$@") >"$scratch/out.log" 2>&1 || { tail -20 "$scratch/out.log" >&2; die "$* failed"; }
    e=$(now)
    t=$(echo "$e - $s" | bc -l)
    if [[ -z $b ]] || (( $(echo "$t < $b" | bc -l) )); then b=$t; fi
  done
  printf '%.3f' "$b"
}
# the warm cells must start from a complete run of the same tool
warm() { rm -rf "$d/out" "$d/.snakemake" "$d/.gantry"; mkdir -p "$d/out"; (cd "$d" && "$@") >/dev/null 2>&1; }

g_cmd=("$gantry" jobs run workflow.yaml --quiet --cpus "$jobs_n")
s_cmd=(snakemake --cores "$jobs_n" --quiet -s Snakefile)
m_cmd=(make -s -j "$jobs_n")

echo "gantry jobs benchmark: $steps steps, $jobs_n at a time, best of $repeat ($(nproc) CPUs)"
echo "versions: $("$gantry" --version 2>/dev/null | head -1); snakemake $(snakemake --version); $(make --version | head -1)"
g_cold=$(best clean "${g_cmd[@]}")
s_cold=$(best clean "${s_cmd[@]}")
m_cold=$(best clean "${m_cmd[@]}")
warm "${g_cmd[@]}"; g_warm=$(best keep "${g_cmd[@]}")
warm "${s_cmd[@]}"; s_warm=$(best keep "${s_cmd[@]}")
warm "${m_cmd[@]}"; m_warm=$(best keep "${m_cmd[@]}")
# gantry's own start-up on a one-step workflow, to read the per-step cost apart
printf 'steps:\n  one: {run: [true]}\n' >"$scratch/one.yaml"
g_one=$(best keep "$gantry" jobs run "$scratch/one.yaml" --quiet --state-dir "$scratch/one-state")

ratio() { echo "scale=3; $1 / $2" | bc -l | sed 's/^\./0./'; }
per_step=$(echo "scale=3; ($g_cold - $g_one) * 1000 / $steps" | bc -l | sed 's/^\./0./')
over_make=$(echo "scale=3; ($g_cold - $m_cold) * 1000 / $steps" | bc -l | sed 's/^\./0./; s/^-\./-0./')
printf '\n%-28s %10s %10s %10s %14s %12s\n' "" gantry snakemake make "gantry/snake" "gantry/make"
printf '%-28s %10s %10s %10s %14s %12s\n' "run from scratch (s)" "$g_cold" "$s_cold" "$m_cold" \
  "$(ratio "$g_cold" "$s_cold")" "$(ratio "$g_cold" "$m_cold")"
printf '%-28s %10s %10s %10s %14s %12s\n' "re-run, up to date (s)" "$g_warm" "$s_warm" "$m_warm" \
  "$(ratio "$g_warm" "$s_warm")" "$(ratio "$g_warm" "$m_warm")"
echo "gantry start-up (1-step workflow): ${g_one} s; per step (wall, start-up excluded, the step's own process included): ${per_step} ms; above make: ${over_make} ms"
verdict() { # name value target op
  if (( $(echo "$2 $4 $3" | bc -l) )); then echo "  $1: $2 (target $3) MEETS"; else echo "  $1: $2 (target $3) MISSES"; fi
}
echo "targets:"
verdict "cold gantry/snakemake" "$(ratio "$g_cold" "$s_cold")" 0.1 "<="
verdict "cold gantry/make" "$(ratio "$g_cold" "$m_cold")" 1 "<="
verdict "re-run gantry/snakemake" "$(ratio "$g_warm" "$s_warm")" 0.1 "<="
verdict "re-run gantry/make" "$(ratio "$g_warm" "$m_warm")" 1 "<="
verdict "per step (ms)" "$per_step" 2 "<="

echo
echo "policy decisions: $trials trials x $intervals intervals ($((trials * intervals)) reports)"
/usr/bin/python3 "$here/jobs_gen.py" "$scratch" --events "$trials" "$intervals"
for policy in "bandit, slack_factor: 0.1, delay_evaluation: 5" "median_stopping, delay_evaluation: 5" \
              "truncation_selection, truncation_percentage: 20, delay_evaluation: 5" \
              "asha, grace_period: 1, reduction_factor: 4, max_t: $intervals" \
              "optuna_median, n_startup_trials: 5" "optuna_percentile, percentile: 25"; do
  cat >"$scratch/sweep.yaml" <<YAML
steps:
  train:
    run: [true]
    sweep:
      search_space: {lr: {type: uniform, min_value: 0, max_value: 1}}
      objective: {primary_metric: acc, goal: maximize}
      early_termination: {type: $policy}
YAML
  out=$("$gantry" jobs replay "$scratch/sweep.yaml" --step train --events "$scratch/events.txt" --json)
  secs=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.3f %d" % (j["seconds"], sum(1 for s in j["stops"] if s["decision"] == "stop")))')
  set -- $secs
  printf '  %-22s %8s s  %6s trials stopped  %s\n' "${policy%%,*}" "$1" "$2" \
    "$( (( $(echo "$1 < 1" | bc -l) )) && echo MEETS || echo MISSES)"
done
