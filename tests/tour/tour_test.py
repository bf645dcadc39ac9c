#!/usr/bin/python3
"""`make tour` as a test: runs examples/tour/run.sh against this build in a
temporary TOUR_OUT and fails unless every step of the story behaved as
described (each step's checks are in its results file), the report renders in
headless Chromium (screenshot kept as <build>/tour-screenshot.png) and no
process of the tour is left running.

    tour_test.py BUILD_DIR
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = ["doctor", "data", "train", "sweep", "register", "serve", "backup", "audit"]


def main():
    build = os.path.abspath(sys.argv[1])
    out = tempfile.mkdtemp(prefix="gantry-tour-")
    failures = []
    try:
        t = time.monotonic()
        env = dict(os.environ, BUILD_DIR=build, TOUR_OUT=out)
        p = subprocess.run(["bash", os.path.join(ROOT, "examples", "tour", "run.sh")], env=env,
                           timeout=1500)
        print(f"tour: exit {p.returncode} in {time.monotonic() - t:.0f} s", flush=True)
        if p.returncode != 0:
            failures.append(f"run.sh exited {p.returncode}")
        results = {}
        for path in glob.glob(os.path.join(out, "results", "*.json")):
            with open(path) as f:
                doc = json.load(f)
            results[doc["step"]] = doc
        for name in STEPS:
            doc = results.get(name)
            if doc is None:
                failures.append(f"step {name}: no results file")
                continue
            bad = [c for c in doc["checks"] if not c["ok"]]
            for c in bad:
                failures.append(f"step {name}: {c['what']} ({c['detail']})")
            if not doc["checks"]:
                failures.append(f"step {name}: no checks recorded")
            print(f"{'ok  ' if doc['ok'] else 'FAIL'} {name:9} {doc['seconds']:7.1f} s  "
                  f"{len(doc['checks']) - len(bad)}/{len(doc['checks'])} checks", flush=True)
        html = os.path.join(out, "report.html")
        if not os.path.exists(html):
            failures.append("no report.html")
        else:
            shot = os.path.join(build, "tour-screenshot.png")
            s = subprocess.run(["node", os.path.join(ROOT, "tests", "tour", "screenshot.mjs"),
                                "--html", html, "--screenshot", shot], cwd=ROOT, timeout=180)
            if s.returncode != 0:
                failures.append(f"screenshot.mjs exited {s.returncode}")
            shutil.copy(html, os.path.join(build, "tour-report.html"))
        left = subprocess.run(["pgrep", "-f", "--", out + "/"], capture_output=True, text=True)
        if left.stdout.strip():
            failures.append(f"processes left running: {left.stdout.split()}")
    finally:
        if failures:
            for log in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
                with open(log, errors="replace") as f:
                    print(f"--- {log} (tail)\n{f.read()[-3000:]}")
            for log in sorted(glob.glob(os.path.join(out, "jobs", "logs", "*.log"))):
                with open(log, errors="replace") as f:
                    tail = f.read()[-4000:]
                print(f"--- {log} (tail)\n{tail}")
        shutil.rmtree(out, ignore_errors=True)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
