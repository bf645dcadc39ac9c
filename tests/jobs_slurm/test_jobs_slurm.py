"""`gantry jobs --backend slurm` against a real single-node Slurm (slurmctld +
slurmd + munged from tests/health_slurm/slurm_cluster.py, accounting off, so
the backend reads job states from squeue and each job's exit file).

Each test runs a workflow in its own temporary directory (the jobs run on this
machine, so the directory is shared with them as a cluster file system would be)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "health_slurm"))

import slurm_cluster as sc  # noqa: E402


def gantry_path():
    p = os.environ.get("GANTRY")
    if not p or not os.access(p, os.X_OK):
        raise sc.ToolMissing("set GANTRY to the built gantry binary (ctest does)")
    return p


@pytest.fixture(scope="module")
def cluster():
    with sc.SlurmCluster() as c:
        yield c


def gantry(cluster, *args, check=None, timeout=300):
    r = subprocess.run([gantry_path(), *args], env=cluster.env(), capture_output=True, text=True,
                       timeout=timeout)
    if check is not None:
        assert r.returncode == check, "gantry %s: exit %d\n%s\n%s" % (
            " ".join(args), r.returncode, r.stdout, r.stderr)
    return r


def status(cluster, wf):
    return json.loads(gantry(cluster, "jobs", "status", wf, "--json", check=0).stdout)


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError("timed out after %ds waiting for %s" % (timeout, what))


def squeue_ids(cluster):
    r = subprocess.run(["squeue", "--noheader", "-o", "%i"], env=cluster.env(),
                       capture_output=True, text=True, timeout=30)
    return set(r.stdout.split())


def write(tmp_path, text):
    wf = tmp_path / "workflow.yaml"
    wf.write_text(text)
    return str(wf)


def test_failures_retries_and_exit_codes(cluster, tmp_path):
    wf = write(tmp_path, """
on_failure: continue
steps:
  prepare: {shell: "echo prepared > data.txt"}
  flaky:
    needs: [prepare]
    # exits 75 on its first attempt, then succeeds
    shell: "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; [ $n -ge 1 ] || exit 75"
    retries: {limit: 2, backoff: 100ms, exit_codes: [75]}
  broken: {needs: [prepare], shell: "echo no >&2; exit 3"}
  after: {needs: [flaky], run: [cat, data.txt]}
  never: {needs: [broken], shell: "touch never"}
""")
    r = gantry(cluster, "jobs", "run", wf, "--backend", "slurm")
    assert r.returncode == 1, r.stdout + r.stderr
    s = status(cluster, wf)
    steps = s["steps"]
    assert s["backend"] == "slurm"
    assert steps["prepare"]["state"] == "succeeded"
    assert steps["prepare"]["job_id"].startswith("slurm:")
    assert steps["flaky"]["state"] == "succeeded" and steps["flaky"]["attempts"] == 2
    assert steps["broken"]["state"] == "failed" and steps["broken"]["exit_code"] == 3
    assert steps["after"]["state"] == "succeeded"
    assert steps["never"]["state"] == "upstream_failed"
    assert not (tmp_path / "never").exists()
    log = gantry(cluster, "jobs", "logs", "after", "-w", wf, check=0).stdout
    assert "prepared" in log


def test_cancel_scancels_the_running_job(cluster, tmp_path):
    wf = write(tmp_path, """
steps:
  long: {shell: "touch started; sleep 300", kill_grace: 2s}
""")
    runner = subprocess.Popen([gantry_path(), "jobs", "run", wf, "--backend", "slurm"],
                              env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_for(lambda: (tmp_path / "started").exists(), 120, "the job to start")
        job = status(cluster, wf)["steps"]["long"]["job_id"].split(":")[1]
        assert job in squeue_ids(cluster)
        gantry(cluster, "jobs", "cancel", wf, check=0)
        out, err = runner.communicate(timeout=120)
        assert runner.returncode == 1, out + err
    finally:
        if runner.poll() is None:
            runner.kill()
    s = status(cluster, wf)
    assert s["state"] == "cancelled"
    assert s["steps"]["long"]["state"] == "cancelled"
    wait_for(lambda: job not in squeue_ids(cluster), 60, "job %s to leave squeue" % job)


def test_a_client_killed_mid_workflow_follows_its_job_after_resume(cluster, tmp_path):
    wf = write(tmp_path, """
steps:
  one: {shell: "echo one >> runs.txt"}
  two: {needs: [one], shell: "echo two >> runs.txt; touch two.started; while [ ! -e go ]; do sleep 0.2; done"}
  three: {needs: [two], shell: "echo three >> runs.txt"}
""")
    runner = subprocess.Popen([gantry_path(), "jobs", "run", wf, "--backend", "slurm"],
                              env=cluster.env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (tmp_path / "two.started").exists(), 120, "step two to start")
        wait_for(lambda: status(cluster, wf)["steps"]["two"]["job_id"] != "", 30,
                 "the state file to record step two's job")
        runner.send_signal(signal.SIGKILL)
        runner.wait(30)
    finally:
        if runner.poll() is None:
            runner.kill()
    job = status(cluster, wf)["steps"]["two"]["job_id"]
    assert job.split(":")[1] in squeue_ids(cluster)  # the job outlived its client
    (tmp_path / "go").write_text("")
    r = gantry(cluster, "jobs", "resume", wf, "--backend", "slurm", check=0)
    assert "following " + job in r.stdout
    s = status(cluster, wf)
    assert s["state"] == "succeeded"
    assert s["steps"]["two"]["job_id"] == job and s["steps"]["two"]["attempts"] == 1
    assert (tmp_path / "runs.txt").read_text() == "one\ntwo\nthree\n"
