#!/usr/bin/env bash
# gantry assess benchmark: wall time and peak memory of `gantry assess run` on
# generated inputs of 1,000, 2,000, 5,000 and 10,000 resources (an ARM template
# with parameters, variables and expressions, and a Terraform plan with one
# child module per team; bench/assess_gen.py, deterministic), in three
# renderings: table, --format json and --format sarif (a file). Each cell is the
# best of REPEAT runs, measured with /usr/bin/time -v (elapsed wall clock and
# maximum resident set size). The binary's own start-up (shared libraries such as
# CUDA and NCCL in a full build, the built-in catalog) is measured on an empty
# input and reported apart; the last column is the time per 1,000 resources
# above it, which stays flat when growth is linear. Ends with the project's
# target: 5,000 resources under 1 s.
#
# PSRule for Azure needs PowerShell and Checkov needs pip packages that this
# environment cannot install, so no side-by-side numbers are measured here;
# the script says so. What can be compared is the rule coverage and semantics:
# the Rules section of docs/assess.md maps every rule to its PSRule/Checkov/Policy anchor.
#
# usage: bench/assess.sh [--quick]
#   --quick   sizes 1000 and 5000, REPEAT 1
# Environment:
#   BUILD_DIR  build tree with bin/gantry (default: build/release)
#   GANTRY     the gantry binary (overrides BUILD_DIR/bin/gantry)
#   BENCH_DIR  scratch directory (default: build/assess-bench; removed unless KEEP_DATA)
#   SIZES      resource counts (default "1000 2000 5000 10000")
#   REPEAT     runs per cell (default 3)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
gantry=${GANTRY:-$build/bin/gantry}
scratch=${BENCH_DIR:-$root/build/assess-bench}
python=/usr/bin/python3
[[ -x $python ]] || python=python3
sizes=${SIZES:-1000 2000 5000 10000}
repeat=${REPEAT:-3}
case "${1:-}" in
  --quick) sizes=${SIZES:-1000 5000}; repeat=${REPEAT:-1} ;;
  "") ;;
  -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "assess.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
die() { echo "assess.sh: $*" >&2; exit 2; }
[[ -x $gantry ]] || die "$gantry not found; build first (make build) or set GANTRY"
[[ -x /usr/bin/time ]] || die "/usr/bin/time not found (apt-get install time)"
mkdir -p "$scratch"
[[ -n ${KEEP_DATA:-} ]] || trap 'rm -rf "$scratch"' EXIT

# One run: prints "seconds kib"; `gantry assess run` exits 1 on findings, which
# the generated inputs have on purpose.
measure() {
  local log=$scratch/time.log rc=0
  /usr/bin/time -v "$@" >"$scratch/out" 2>"$log" || rc=$?
  ((rc <= 1)) || { cat "$log" >&2; die "$* exited $rc"; }
  awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
                for (i = 1; i <= n; i++) s = s * 60 + p[i]; secs = s}
              /Maximum resident set size/ {kib = $2}
              END {printf "%.3f %d\n", secs, kib}' "$log"
}

best() {  # best of REPEAT: lowest time, and the lowest peak memory seen
  local t m bt=999999 bm=999999999
  for ((i = 0; i < repeat; i++)); do
    read -r t m < <(measure "$@")
    bt=$(awk -v a="$t" -v b="$bt" 'BEGIN {print (a < b) ? a : b}')
    ((m < bm)) && bm=$m
  done
  echo "$bt $bm"
}

echo "## gantry assess ($(uname -m), $(nproc) cores, $("$gantry" --version | head -1))"
echo
echo '[]' >"$scratch/empty.json"
read -r base_s base_m < <(best "$gantry" assess run "$scratch/empty.json" --no-suppressions)
echo "Start-up on an empty input: ${base_s} s, $((base_m / 1024)) MiB (subtracted in the last column)."
echo
echo "| input | resources | bytes | table s | table MiB | json s | json MiB | sarif s | sarif MiB | s per 1k above start-up (table) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
declare -A per_k
target_line=""
for kind in arm tf; do
  for n in $sizes; do
    f=$scratch/$kind-$n.json
    [[ -f $f ]] || "$python" "$here/assess_gen.py" "$kind" "$n" "$f"
    bytes=$(stat -c %s "$f")
    common=(assess run "$f" --today 2027-01-15 --no-suppressions)
    read -r ts tm < <(best "$gantry" "${common[@]}")
    read -r js jm < <(best "$gantry" "${common[@]}" --format json)
    read -r ss sm < <(best "$gantry" "${common[@]}" --format sarif --output "$scratch/out.sarif")
    pk=$(awk -v s="$ts" -v b="$base_s" -v n="$n" 'BEGIN {printf "%.3f", (s - b) * 1000 / n}')
    per_k[$kind-$n]=$pk
    label=$([[ $kind == arm ]] && echo "ARM template" || echo "Terraform plan")
    printf '| %s | %d | %d | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f | %s |\n' "$label" "$n" "$bytes" \
      "$ts" "$((tm / 1024))" "$js" "$((jm / 1024))" "$ss" "$((sm / 1024))" "$pk"
    if [[ $n == 5000 ]]; then
      ok=$(awk -v s="$ts" 'BEGIN {print (s < 1.0) ? "met" : "MISSED"}')
      target_line+="- $label, 5,000 resources: ${ts} s (table) -> target < 1 s: $ok"$'\n'
    fi
  done
done
echo
echo "Linear growth: the seconds per 1,000 resources above start-up stay flat from the smallest to the largest"
echo "input (ARM: $(for n in $sizes; do printf '%s ' "${per_k[arm-$n]}"; done)s;"
echo "Terraform: $(for n in $sizes; do printf '%s ' "${per_k[tf-$n]}"; done)s)."
echo
printf '%s' "$target_line"
echo
echo "PSRule for Azure (PowerShell) and Checkov (pip) cannot be installed in this environment,"
echo "so only Gantry's numbers are measured; compare coverage and semantics with the anchors in"
echo "the Rules section of docs/assess.md."
