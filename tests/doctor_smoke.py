#!/usr/bin/python3
"""End-to-end check of `gantry doctor` (tests/doctor.cmake).

Serves a fake Azure IMDS on 127.0.0.1 (GANTRY_IMDS_ENDPOINT), runs the real
binary and checks the report: JSON on stdout and in --out, its keys, the VM
size from the fake IMDS, the all_reduce rows, the exit codes for a failing
check and for usage errors. The run time is printed, never asserted.

Usage: doctor_smoke.py <path to gantry>
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import smoke_util  # noqa: E402
from smoke_util import FakeImds, check, fail  # noqa: E402,F401

GANTRY = sys.argv[1]


def run(args, env):
    return smoke_util.run(GANTRY, "doctor", args, env, timeout=240)


def main():
    server, endpoint = smoke_util.start_fake_imds()
    env = dict(os.environ, GANTRY_IMDS_ENDPOINT=endpoint)
    try:
        with tempfile.TemporaryDirectory(prefix="gantry-doctor-smoke-") as tmp:
            out = os.path.join(tmp, "report.json")

            # 1. The full run: JSON on stdout and in --out.
            proc, seconds = run(["--json", "--out", out, "--ranks", "2"], env)
            print("gantry doctor --json took %.1f s (exit %d)" % (seconds, proc.returncode))
            try:
                report = json.loads(proc.stdout)
            except json.JSONDecodeError as e:
                fail("stdout is not JSON: %s" % e, proc)
            with open(out) as f:
                check(json.load(f) == report, "--out differs from stdout", proc)
            for key in ("report", "version", "gantry_version", "timestamp", "elapsed_s", "overall",
                        "checks", "machine", "memcpy", "bench"):
                check(key in report, "missing key %r" % key, proc)
            check(report["report"] == "gantry.doctor" and report["version"] == 1, "bad header", proc)
            verdicts = {c["name"]: c["verdict"] for c in report["checks"]}
            check(set(verdicts) == {"vm", "cpu", "memory", "numa", "gpus", "shm", "memcpy", "assess",
                                    "gemm", "all_reduce", "advice", "health", "storage"},
                  "unexpected checks %s" % sorted(verdicts), proc)
            advice = {c["name"]: c for c in report["checks"]}["advice"]
            check(advice["verdict"] == "ok" and
                  advice["value"] == "Standard_D8s_v5: 8 vCPU, 32 GiB (CPU size)",
                  "advice check: %s" % advice, proc)
            # Standard_D8s_v5 has no health profile: generic runs, and never silently passes.
            health = {c["name"]: c for c in report["checks"]}["health"]
            check(health["verdict"] in ("warn", "fail") and " passed, " in health["value"] and
                  "Standard_D8s_v5 has no health profile" in health["detail"],
                  "health check: %s" % health, proc)
            check(all(v in ("ok", "warn", "fail", "skip") for v in verdicts.values()),
                  "unknown verdict in %s" % verdicts, proc)
            check(proc.returncode == (1 if report["overall"] == "fail" else 0),
                  "exit %d for overall %s" % (proc.returncode, report["overall"]), proc)
            machine = report["machine"]
            check(machine["vm"] is not None and machine["vm"]["vm_size"] == "Standard_D8s_v5",
                  "VM size not taken from the fake IMDS", proc)
            check(verdicts["vm"] == "ok" and verdicts["cpu"] == "ok", "vm/cpu not ok", proc)
            check(machine["cpu"]["threads"] >= 1 and machine["memory"]["total_bytes"] > 0,
                  "machine facts missing", proc)
            check(report["memcpy"]["bandwidth_gbs"] > 0, "no memcpy bandwidth", proc)
            gemm = report["gemm"]
            check(gemm is not None and gemm["tflops"] > 0 and gemm["verified"],
                  "no verified GEMM measurement: %s" % gemm, proc)
            check(verdicts["gemm"] in ("ok", "warn"), "gemm %s" % verdicts["gemm"], proc)
            bench = report["bench"]
            check(bench is not None and bench["collective"] == "all_reduce" and bench["ranks"] == 2,
                  "no all_reduce section", proc)
            check(len(bench["rows"]) > 0, "the all_reduce section has no rows", proc)
            for row in bench["rows"]:
                for placement in ("out_of_place", "in_place"):
                    check(row[placement]["wrong"] == 0, "wrong results at %d B" % row["size_bytes"],
                          proc)
            check(verdicts["all_reduce"] in ("ok", "warn"), "all_reduce %s" % verdicts["all_reduce"],
                  proc)
            print("overall %s; all_reduce %d rows on %s, peak busbw %.2f GB/s; memcpy %.2f GB/s" %
                  (report["overall"], len(bench["rows"]), bench["backend"], bench["peak_busbw_gbs"],
                   report["memcpy"]["bandwidth_gbs"]))

            # 2. An ND H100 v5 VM without its 8 GPUs fails the gpus check: exit 1.
            FakeImds.vm_size = "Standard_ND96isr_H100_v5"
            proc, _ = run(["--json", "--skip-bench"], env)
            report = json.loads(proc.stdout)
            gpus = {c["name"]: c for c in report["checks"]}["gpus"]
            if report["machine"]["gpus"]["count"] < 8:
                check(gpus["verdict"] == "fail" and proc.returncode == 1,
                      "8-GPU VM size without GPUs: gpus %s, exit %d" % (gpus["verdict"],
                                                                        proc.returncode), proc)
            check({c["name"]: c for c in report["checks"]}["all_reduce"]["verdict"] == "skip",
                  "--skip-bench did not skip", proc)
            check(report["bench"] is None, "bench section present with --skip-bench", proc)

            # 3. The table for people.
            FakeImds.vm_size = "Standard_D8s_v5"
            proc, _ = run(["--skip-bench"], env)
            check(proc.returncode == 0 or "fail" in proc.stdout, "text run exit %d" % proc.returncode,
                  proc)
            for text in ("check", "verdict", "Standard_D8s_v5", "verdict: "):
                check(text in proc.stdout, "table lacks %r" % text, proc)

            # 4. With a workload, the advice check judges this VM size for it.
            workload = os.path.join(tmp, "w.yaml")
            with open(workload, "w") as f:
                f.write("name: small-ft\nstage: training\nmodel: {params: 1.5B}\n"
                        "training: {tokens: 10B}\n")
            FakeImds.vm_size = "Standard_ND96isr_H100_v5"
            proc, _ = run(["--json", "--skip-bench", "--workload", workload], env)
            advice = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["advice"]
            check(advice["verdict"] == "ok" and
                  advice["detail"].startswith("suits small-ft: on this VM alone, ZeRO-0"),
                  "advice with a workload: %s" % advice, proc)
            FakeImds.vm_size = "Standard_NC4as_T4_v3"
            proc, _ = run(["--json", "--skip-bench", "--workload", workload], env)
            advice = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}["advice"]
            check(advice["verdict"] == "warn" and "does not suit small-ft" in advice["detail"],
                  "advice on a T4 for a 1.5B fine-tune: %s" % advice, proc)

            # 5. Usage errors exit 2.
            with open(os.path.join(tmp, "bad.yaml"), "w") as f:
                f.write("stage: training\nmodel: {params: 1B}\n")
            for args in (["--ranks", "1"], ["--no-such-flag"], ["--log-level", "loud"],
                         ["--skip-bench", "--out", os.path.join(tmp, "missing", "r.json")],
                         ["--skip-bench", "--workload", os.path.join(tmp, "bad.yaml")],
                         ["--skip-bench", "--workload", os.path.join(tmp, "none.yaml")],
                         ["--skip-bench", "--catalog", os.path.join(tmp, "bad.yaml")],
                         ["--skip-bench", "--health-profile", os.path.join(tmp, "none.yaml")]):
                proc, _ = run(args, env)
                check(proc.returncode == 2, "%s: exit %d, expected 2" % (args, proc.returncode), proc)
    finally:
        server.shutdown()
        server.server_close()
    print("PASS")


if __name__ == "__main__":
    main()
