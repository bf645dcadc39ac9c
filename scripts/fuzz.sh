#!/usr/bin/env bash
# Runs libFuzzer targets (built by `make fuzz` into BIN_DIR) for FUZZ_SECONDS each
# on the corpus kept in the repository, one after the other:
#
#   FUZZ_SECONDS=20 bash scripts/fuzz.sh build/fuzz/bin fuzz_units fuzz_config ...
#
# Each target runs on a temporary copy of fuzz/corpus/<target>/ (libFuzzer adds the
# inputs it finds to its first corpus folder; they must not land in the working tree)
# plus fuzz/regressions/<target>/ when it exists. A crash, leak, timeout or
# out-of-memory input is kept under build/fuzz/artifacts/<target>/ and fails the run
# after every target has had its turn; to keep one as a regression case, copy it to
# fuzz/regressions/<target>/ (the ctest <target>_replay then replays it in `make test`).
# Prints one line per target (executions, executions per second, corpus growth) and
# writes the same table to build/fuzz/stats.txt.
set -uo pipefail
cd "$(dirname "$0")/.."

BIN_DIR=${1:?usage: scripts/fuzz.sh BIN_DIR TARGET...}
shift
SECONDS_EACH=${FUZZ_SECONDS:-30}
OUT=build/fuzz
mkdir -p "$OUT/artifacts" "$OUT/logs"
STATS=$OUT/stats.txt
printf '%-26s %10s %8s %7s %7s %s\n' target execs exec/s seeds corpus result | tee "$STATS"

failed=()
# With FUZZ_ALL=1 (make fuzz): every corpus belongs to a target of this run, so that
# none is left out of FUZZERS.
for d in fuzz/corpus/*/; do
  [[ ${FUZZ_ALL:-0} == 1 ]] || break
  d=$(basename "$d")
  if [[ " $* " != *" $d "* ]]; then
    echo "fuzz: fuzz/corpus/$d has no target in this run (add it to FUZZERS in the Makefile)" >&2
    failed+=("$d")
  fi
done
for t in "$@"; do
  bin=$BIN_DIR/$t
  if [[ ! -x $bin ]]; then
    echo "fuzz: $bin is missing (build it with make fuzz)" >&2
    failed+=("$t")
    continue
  fi
  if [[ ! -d fuzz/corpus/$t ]] || [[ -z $(ls -A "fuzz/corpus/$t") ]]; then
    echo "fuzz: fuzz/corpus/$t is missing or empty (run fuzz/make_seeds.py)" >&2
    failed+=("$t")
    continue
  fi
  work=$(mktemp -d "${TMPDIR:-/tmp}/gantry-fuzz-$t.XXXXXX")
  cp -r "fuzz/corpus/$t/." "$work/"
  seeds=$(find "$work" -type f | wc -l)
  dirs=("$work")
  [[ -d fuzz/regressions/$t ]] && dirs+=("fuzz/regressions/$t")
  mkdir -p "$OUT/artifacts/$t"
  log=$OUT/logs/$t.log
  "$bin" -max_total_time="$SECONDS_EACH" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$OUT/artifacts/$t/" "${dirs[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  rm -rf "$work"
  result=ok
  if [[ $rc -ne 0 ]]; then
    result="FAILED (rc $rc, see $log; input in $OUT/artifacts/$t/)"
    failed+=("$t")
    tail -n 40 "$log" >&2
  fi
  printf '%-26s %10s %8s %7s %7s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$seeds" "$corpus" "$result" \
    | tee -a "$STATS"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
