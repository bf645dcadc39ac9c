#!/usr/bin/python3
"""End-to-end check of `gantry health` (tests/health.cmake).

Serves a fake Azure IMDS on 127.0.0.1 (GANTRY_IMDS_ENDPOINT) and runs the real
binary: the generic profile with --json, --nhc-log and --junit (the XML parsed
back with xml.etree), an extension that adds a failing filesystems check (exit
1 and the NHC ERROR line), bad profiles (exit 2 naming file:line), an unknown
VM size (a warning, never a silent pass), --list-profiles and --show-profile.
The generic run's time is printed, never asserted.

Usage: health_smoke.py <path to gantry>
"""
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke_util  # noqa: E402
from smoke_util import FakeImds, check, fail  # noqa: E402,F401

GANTRY = sys.argv[1]
GENERIC_CHECKS = ["cpu", "memory", "swap", "filesystems", "network", "services",
                  "memory_bandwidth", "disk_bandwidth", "collective", "gemm"]


def run(args, env):
    return smoke_util.run(GANTRY, "health", args, env, timeout=120)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    server, endpoint = smoke_util.start_fake_imds()
    env = dict(os.environ, GANTRY_IMDS_ENDPOINT=endpoint)
    try:
        with tempfile.TemporaryDirectory(prefix="gantry-health-smoke-") as tmp:
            nhc = os.path.join(tmp, "health.log")
            junit = os.path.join(tmp, "junit.xml")
            scratch = os.path.join(tmp, "scratch")
            os.mkdir(scratch)

            # 1. The generic profile, every output at once.
            proc, seconds = run(["--profile", "generic", "--json", "--nhc-log", nhc,
                                 "--junit", junit, "--scratch", scratch], env)
            print("gantry health --profile generic took %.2f s (exit %d)" %
                  (seconds, proc.returncode))
            try:
                report = json.loads(proc.stdout)
            except json.JSONDecodeError as e:
                fail("stdout is not JSON: %s" % e, proc)
            for key in ("report", "version", "profile", "vm_size", "hostname", "timestamp",
                        "elapsed_s", "overall", "results"):
                check(key in report, "missing key %r" % key, proc)
            check(report["report"] == "gantry.health" and report["profile"] == "generic",
                  "bad header", proc)
            check(report["vm_size"] == "Standard_D8s_v5", "VM size not from the fake IMDS", proc)
            names = [r["name"] for r in report["results"]]
            check(names == GENERIC_CHECKS, "unexpected checks %s" % names, proc)
            outcomes = {r["name"]: r["outcome"] for r in report["results"]}
            check(all(o in ("pass", "warn", "fail", "skip", "error") for o in outcomes.values()),
                  "unknown outcome in %s" % outcomes, proc)
            bad = report["overall"] in ("fail", "error")
            check(proc.returncode == (1 if bad else 0),
                  "exit %d for overall %s" % (proc.returncode, report["overall"]), proc)
            print("generic: overall %s, elapsed_s %.2f; %s" %
                  (report["overall"], report["elapsed_s"],
                   ", ".join("%s=%s" % kv for kv in outcomes.items())))
            for r in report["results"]:
                if r["outcome"] in ("fail", "error", "warn"):
                    print("  %s %s: %s" % (r["outcome"], r["name"], r["message"]))

            with open(nhc) as f:
                lines = f.read().splitlines()
            check(len(lines) == len(names) + 1, "NHC log has %d lines" % len(lines))
            check(lines[-1] == "Health checks completed with exit code: %d." % (1 if bad else 0),
                  "NHC completion line: %r" % lines[-1])
            for line, name in zip(lines, names):
                check(line.split(":  ")[0] in ("SUCCESS", "WARNING", "ERROR") and
                      ("  %s: " % name) in line, "NHC line %r" % line)

            suite = ET.parse(junit).getroot()
            check(suite.tag == "testsuite" and suite.get("name") == "gantry.health",
                  "JUnit root %s %s" % (suite.tag, suite.attrib))
            cases = suite.findall("testcase")
            check([c.get("name") for c in cases] == names, "JUnit testcases differ")
            failures = sum(1 for c in cases if c.find("failure") is not None)
            check(int(suite.get("failures")) == failures, "JUnit failure count")

            # 2. An extension that adds a failing filesystems check: exit 1, NHC ERROR line.
            ext = write(os.path.join(tmp, "site.yaml"),
                        "name: site\nchecks:\n  filesystems:\n"
                        "    - {path: /nonexistent/gantry-health-smoke}\n")
            proc, _ = run(["--profile", "generic", "--extend", ext, "--only", "filesystems",
                           "--nhc-log", nhc], env)
            check(proc.returncode == 1, "failing extension: exit %d" % proc.returncode, proc)
            with open(nhc) as f:
                log = f.read()
            check("ERROR:  nhc:  Health check failed:  filesystems: " in log,
                  "no NHC ERROR line for filesystems:\n" + log, proc)
            check(log.endswith("Health checks completed with exit code: 1.\n"), "NHC end", proc)
            check("filesystems" in proc.stdout and "verdict: fail" in proc.stdout,
                  "table", proc)

            # 3. Bad profiles: exit 2, naming the file and line.
            syntax = write(os.path.join(tmp, "syntax.yaml"),
                           "name: bad\nchecks:\n  cpu: {sockets: 2\n")
            typo = write(os.path.join(tmp, "typo.yaml"),
                         "name: typo\nextends: generic\nchecks:\n  memroy: {}\n")
            for path, needle in ((syntax, syntax + ":"), (typo, typo + ":4:")):
                proc, _ = run(["--profile", path], env)
                check(proc.returncode == 2, "%s: exit %d, expected 2" % (path, proc.returncode),
                      proc)
                check(needle in proc.stderr, "%s: error does not name %s" % (path, needle), proc)
            check("did you mean 'memory'?" in proc.stderr, "no suggestion", proc)
            proc, _ = run(["--profile", "no_such_profile"], env)
            check(proc.returncode == 2 and "generic" in proc.stderr, "unknown --profile", proc)
            proc, _ = run(["--profile", "generic", "--timeout", "soon"], env)
            check(proc.returncode == 2, "bad --timeout: exit %d" % proc.returncode, proc)

            # 4. No --profile, an unknown VM size: generic, with a warning, never a silent pass.
            proc, _ = run(["--json", "--only", "cpu"], env)
            check("VM size Standard_D8s_v5 has no profile; using generic" in proc.stderr,
                  "no warning on stderr", proc)
            report = json.loads(proc.stdout)
            check(report["profile"] == "generic" and report["results"][0]["name"] == "profile" and
                  report["results"][0]["outcome"] == "warn", "no profile warning result", proc)
            check(report["overall"] != "pass", "unknown VM size passed silently", proc)

            # 5. A known VM size picks its profile.
            FakeImds.vm_size = "Standard_ND96isr_H100_v5"
            proc, _ = run(["--show-profile"], env)
            check(proc.returncode == 0 and "name: nd96isr_h100_v5" in proc.stdout,
                  "--show-profile for an ND H100 v5 VM", proc)

            # 6. The profile list.
            proc, _ = run(["--list-profiles"], env)
            check(proc.returncode == 0 and "generic" in proc.stdout and
                  "Standard_ND96isr_H100_v5" in proc.stdout, "--list-profiles", proc)
    finally:
        server.shutdown()
    print("health_smoke: ok")


if __name__ == "__main__":
    main()
