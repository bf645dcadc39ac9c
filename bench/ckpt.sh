#!/usr/bin/env bash
# Checkpoint save/load benchmark on this machine, one run, one disk: fp32 model
# states of 1 GiB and 4 GiB (64 MiB tensors) saved and loaded by
#   dd (O_DIRECT sequential write + fsync, and read): the disk's limit
#   torch.save + fsync, and torch.load
#   gantry sync save, async save (how long the training loop is blocked, and
#   until the step is committed), and load (full checksum verification)
# through the Python API (PyTorch state_dicts), plus `gantry ckpt bench` (the
# C++ engine alone, no Python) from BUILD_DIR/bin/gantry. Page cache is dropped before every
# read so loads come from the disk. Prints Markdown (paste it into
# docs/benchmarks.md) ending with the project's targets:
#   gantry sync save >= 0.9x dd write
#   gantry async blocking time <= 10% of gantry sync save time
#   gantry load >= 2x torch.load
#
# usage: bench/ckpt.sh [--quick]
#   --quick   64 MiB and 256 MiB states, one repetition (a smoke run)
# Environment:
#   BUILD_DIR  build tree with bin/gantry and python/gantry (default: build/release)
#   BENCH_DIR  scratch directory on the disk to measure (default: build/ckpt-bench;
#              removed at the end)
#   SIZES      state sizes in MiB (default "1024 4096")
#   REPEAT     runs of every measurement; each row reports the best (default 2)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=${BUILD_DIR:-$root/build/release}
scratch=${BENCH_DIR:-$root/build/ckpt-bench}
sizes=${SIZES:-1024 4096}
repeat=${REPEAT:-2}
case "${1:-}" in
  --quick) sizes=${SIZES:-64 256}; repeat=${REPEAT:-1} ;;
  "") ;;
  -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "ckpt.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac
if [[ ! -f $build/python/gantry/__init__.py ]]; then
  echo "ckpt.sh: $build/python/gantry not found; build first (make build) or set BUILD_DIR" >&2
  exit 2
fi

mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
trap 'rm -rf "$scratch"' EXIT

# One program, run twice: "python" measures the Python API and its anchors,
# "engine" runs `gantry ckpt bench` afterwards, in its own process, so the two
# never hold their multi-GiB states at the same time.
program=$(cat <<'PY'
import gc, json, os, platform, subprocess, sys, time

import torch

import gantry

mode, scratch, repeat, gantry_bin = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
sizes = [int(s) for s in sys.argv[5:]]
MIB = 1 << 20
TENSOR_MIB = 64


def drop_caches():
    """Reads after this come from the disk (needs root; otherwise say so once)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def best(fn):
    return min(fn() for _ in range(repeat))


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def dd(args):
    subprocess.run(["dd", *args, "status=none"], check=True)


def state_of(mib):
    torch.manual_seed(0)
    n = max(1, mib // TENSOR_MIB)
    per = min(mib, TENSOR_MIB) * MIB // 4
    return {"model": {f"layers.{i}.weight": torch.rand(per) for i in range(n)}, "step": 1}


def engine():
    """The C++ engine alone (no Python, no torch): `gantry ckpt bench`."""
    print("\n`gantry ckpt bench` (C++ API, 16 fp32 tensors):\n")
    print("| state | O_DIRECT write | save | async blocked | async until committed | load (cold) | load (warm) |")
    print("|---|---|---|---|---|---|---|")
    for mib in sizes:
        run = subprocess.run([gantry_bin, "ckpt", "bench", scratch, "--size", f"{mib}M",
                              "--iters", str(repeat), "--json"], capture_output=True, text=True)
        if run.returncode != 0:
            why = (f"killed by signal {-run.returncode}" if run.returncode < 0
                   else f"exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}")
            print(f"| {mib} MiB | failed ({why}) | | | | | |", flush=True)
            continue
        r = json.loads(run.stdout)
        gb = r["state_bytes"] / 1e9
        rate = lambda s: f"{gb / s:.2f} GB/s ({s:.2f} s)"
        print(f"| {mib} MiB | {rate(r['raw_write_s'])} | {rate(r['save_s'])} | "
              f"{r['async_block_s']:.3f} s | {r['async_total_s']:.2f} s | {rate(r['load_cold_s'])} | "
              f"{rate(r['load_warm_s'])} |", flush=True)


if mode == "engine":
    engine()
    sys.exit(0)

cached = drop_caches()
print(f"# gantry ckpt benchmark\n")
print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
      f"{platform.platform()}, torch {torch.__version__}, scratch {scratch}, best of {repeat}"
      + ("" if cached else "; page cache NOT dropped (not root): loads may be cached") + "\n")
print("| state | dd write | dd read | torch.save+fsync | torch.load | gantry save | "
      "gantry async blocked | async until committed | gantry load |")
print("|---|---|---|---|---|---|---|---|---|")
checks = []
for mib in sizes:
    gib = mib * MIB / 1e9
    rate = lambda s: f"{gib / s:.2f} GB/s ({s:.2f} s)"
    state = state_of(mib)
    raw = os.path.join(scratch, "dd.bin")
    count = max(1, mib // 64)
    dd_w = best(lambda: timed(lambda: dd(["if=/dev/zero", f"of={raw}", "bs=64M", f"count={count}",
                                          "oflag=direct", "conv=fsync"])))
    def dd_read():
        drop_caches()
        return timed(lambda: dd([f"if={raw}", "of=/dev/null", "bs=64M", "iflag=direct"]))

    dd_r = best(dd_read)
    os.remove(raw)

    pt = os.path.join(scratch, "state.pt")

    def torch_save():
        def run():
            with open(pt, "wb") as f:
                torch.save(state, f)
                f.flush()
                os.fsync(f.fileno())
        return timed(run)

    def torch_load():
        drop_caches()
        return timed(lambda: torch.load(pt))

    t_save = best(torch_save)
    t_load = best(torch_load)
    os.remove(pt)

    step = iter(range(1, 1 << 30))
    ck = gantry.CheckpointManager(scratch, run=f"bench-{mib}", keep_last=1)
    g_save = best(lambda: timed(lambda: ck.save(next(step), state)))

    def async_save():
        t0 = time.perf_counter()
        ck.save_async(next(step), state)
        blocked = time.perf_counter() - t0
        ck.wait()
        return blocked, time.perf_counter() - t0

    a_block, a_total = min(async_save() for _ in range(repeat))

    ck.close()  # frees the staging pool before loading
    ck = gantry.CheckpointManager(scratch, run=f"bench-{mib}")

    def g_load():
        drop_caches()
        return timed(lambda: ck.load())

    g_ld = best(g_load)
    ck.close()
    del state
    gc.collect()
    print(f"| {mib} MiB | {rate(dd_w)} | {rate(dd_r)} | {rate(t_save)} | {rate(t_load)} | "
          f"{rate(g_save)} | {a_block:.3f} s | {a_total:.2f} s | {rate(g_ld)} |", flush=True)
    checks.append((mib, dd_w / g_save, a_block / g_save, t_load / g_ld))

print("\nTargets (Python API, measured above):\n")
for mib, save_frac, block_frac, load_x in checks:
    ok = lambda c: "met" if c else "MISSED"
    print(f"- {mib} MiB: sync save at {save_frac:.2f}x dd write (>= 0.9x: {ok(save_frac >= 0.9)}); "
          f"async blocking {100 * block_frac:.1f}% of sync save (<= 10%: {ok(block_frac <= 0.10)}); "
          f"load {load_x:.2f}x torch.load (>= 2x: {ok(load_x >= 2)})")
PY
)

export PYTHONPATH=$build/python
/usr/bin/python3 -B -c "$program" python "$scratch" "$repeat" "$build/bin/gantry" $sizes
if [[ -x $build/bin/gantry ]]; then
  /usr/bin/python3 -B -c "$program" engine "$scratch" "$repeat" "$build/bin/gantry" $sizes
fi
