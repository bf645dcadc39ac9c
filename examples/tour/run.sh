#!/bin/bash
# `make tour`: the whole Gantry story on this machine, everything on 127.0.0.1 (README "Tour").
#
#   bash examples/tour/run.sh            # after `make doctor` (or `make build`)
#
# BUILD_DIR (default build/release) is the build to use; TOUR_OUT (default $BUILD_DIR/tour) gets
# every file of the run: results/, logs/, report.html. Exit 0 when every step behaved as described.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${BUILD_DIR:-$ROOT/build/release}" 2>/dev/null && pwd) || {
  echo "tour: no build at ${BUILD_DIR:-$ROOT/build/release}: run \`make build\` first" >&2; exit 2; }
[ -x "$BUILD/bin/gantry" ] || { echo "tour: $BUILD/bin/gantry is missing: run \`make build\`" >&2; exit 2; }
export TOUR_OUT=${TOUR_OUT:-$BUILD/tour}
export GANTRY=$BUILD/bin/gantry
export PATH=$BUILD/bin:$PATH
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1

rm -rf "$TOUR_OUT" && mkdir -p "$TOUR_OUT"
start=$(date +%s)
"$GANTRY" jobs run "$ROOT/examples/tour/tour.yaml" --state-dir "$TOUR_OUT/jobs"
rc=$?
# A failed step stops the workflow before its report step: the report still shows what happened.
[ -f "$TOUR_OUT/report.html" ] && [ $rc -eq 0 ] ||
  /usr/bin/python3 "$ROOT/examples/tour/report.py" --results "$TOUR_OUT/results" --out "$TOUR_OUT/report.html"

# Every service a step started carries $TOUR_OUT in its command line; none may outlive the tour.
left=$(pgrep -f -- "$TOUR_OUT/" | grep -v "^$$\$" || true)
if [ -n "$left" ]; then
  echo "tour: processes left behind, killing them:" >&2
  ps -o pid,args -p $(echo $left | tr ' ' ',') >&2 || true
  kill -9 $left 2>/dev/null || true
  rc=1
fi
"$GANTRY" jobs status "$ROOT/examples/tour/tour.yaml" --state-dir "$TOUR_OUT/jobs" || true
echo "tour: $([ $rc -eq 0 ] && echo PASS || echo FAIL) in $(( $(date +%s) - start )) s; report: $TOUR_OUT/report.html"
exit $rc
