#!/usr/bin/env bash
# `gantry ckpt bench` on a small state: the JSON has every measurement, each
# positive, and the scratch run is removed afterwards. Never asserts speed.
set -euo pipefail
gantry=$1
dir=$(mktemp -d /tmp/gantry-ckpt-bench-XXXXXX)
trap 'rm -rf "$dir"' EXIT
out=$("$gantry" ckpt bench "$dir" --size 8M --tensors 4 --iters 1 --json)
echo "$out"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
for k in ("raw_write_s", "save_s", "async_block_s", "async_total_s", "load_cold_s", "load_warm_s"):
    assert r[k] > 0, k
assert r["state_bytes"] == 8 << 20, r["state_bytes"]
PY
if [[ -n $(ls -A "$dir") ]]; then
  echo "bench left files behind: $(ls -A "$dir")" >&2
  exit 1
fi
# Refused as usage (exit 2) with the reason, not any failure (a crash is not a refusal).
rc=0
err=$("$gantry" ckpt bench "$dir" --size 8M --tensors 0 2>&1) || rc=$?
if [[ $rc -ne 2 || $err != *"--tensors and --iters must be at least 1"* ]]; then
  echo "--tensors 0: exit $rc, expected 2 with the reason; got: $err" >&2
  exit 1
fi
echo ok
