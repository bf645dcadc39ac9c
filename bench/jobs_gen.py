#!/usr/bin/env python3
"""Generates the same DAG of N trivial steps three ways, for bench/jobs.sh:
workflow.yaml (gantry jobs), Snakefile (Snakemake) and Makefile (make).

Step i writes out/s<i> (`touch`) and needs the steps i-1 and i-7 within its
chain: 10 chains side by side, so there is parallelism to use, and a long
critical path. Also writes events.txt for the policy benchmark:
`gen.py --events TRIALS INTERVALS` prints TRIAL STEP VALUE lines, interleaved
by interval as a live sweep reports them, after ten trials that complete
first (deterministic)."""

import argparse
import os
import random


def deps(i, chains):
    out = []
    for back in (1, 7):
        j = i - back * chains
        if j >= 0:
            out.append(j)
    return out


def write_dag(d, n, chains):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "workflow.yaml"), "w") as f:
        f.write("name: bench\nsteps:\n")
        for i in range(n):
            f.write(f"  s{i}:\n    run: [touch, out/s{i}]\n    outputs: [out/s{i}]\n")
            ds = deps(i, chains)
            if ds:
                f.write("    needs: [" + ", ".join(f"s{j}" for j in ds) + "]\n")
                f.write("    inputs: [" + ", ".join(f"out/s{j}" for j in ds) + "]\n")
    with open(os.path.join(d, "Snakefile"), "w") as f:
        f.write(f"CHAINS = {chains}\nN = {n}\n")
        f.write("def deps(w):\n    i = int(w.i)\n"
                "    return [f'out/s{i - b * CHAINS}' for b in (1, 7) if i - b * CHAINS >= 0]\n\n")
        f.write("rule all:\n    input: [f'out/s{i}' for i in range(N)]\n\n")
        f.write("rule step:\n    output: 'out/s{i}'\n    input: deps\n    shell: 'touch {output}'\n")
    with open(os.path.join(d, "Makefile"), "w") as f:
        f.write("all: " + " ".join(f"out/s{i}" for i in range(n)) + "\n\n")
        f.write("out/s%:\n\ttouch $@\n\n")
        for i in range(n):
            ds = deps(i, chains)
            if ds:
                f.write(f"out/s{i}: " + " ".join(f"out/s{j}" for j in ds) + "\n")
    os.makedirs(os.path.join(d, "out"), exist_ok=True)


def write_events(path, trials, intervals):
    rng = random.Random(5)
    quality = [rng.random() for _ in range(trials)]
    first = min(10, trials)  # these complete first: Optuna's pruners need complete trials
    with open(path, "w") as f:
        for t in range(first):
            for step in range(1, intervals + 1):
                v = quality[t] * (1 - 0.9 ** step) + rng.gauss(0, 0.01)
                f.write(f"{t} {step} {v:.6f}\n")
            f.write(f"{t} complete\n")
        for step in range(1, intervals + 1):
            for t in range(first, trials):
                v = quality[t] * (1 - 0.9 ** step) + rng.gauss(0, 0.01)
                f.write(f"{t} {step} {v:.6f}\n")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--chains", type=int, default=10)
    p.add_argument("--events", nargs=2, type=int, metavar=("TRIALS", "INTERVALS"))
    a = p.parse_args()
    if a.events:
        write_events(os.path.join(a.dir, "events.txt"), *a.events)
    else:
        write_dag(a.dir, a.steps, a.chains)


if __name__ == "__main__":
    main()
