"""`gantry jobs` with real Python trials: the example workflow end to end
(prepare -> sweep with Bandit -> evaluate -> register), and ASHA pausing a
trial that uses gantry.CheckpointManager, then promoting it so it resumes
from its latest checkpoint instead of starting over."""

import json
import os
import pathlib
import shutil
import subprocess

SOURCE = pathlib.Path(os.environ.get("GANTRY_SOURCE_DIR", pathlib.Path(__file__).parents[2]))
BINARY = pathlib.Path(os.environ.get("GANTRY_BINARY_DIR", SOURCE / "build" / "release"))
GANTRY = str(BINARY / "bin" / "gantry")


def env():
    e = dict(os.environ)
    # The workflows run `python3`: Debian's, which has numpy and the gantry
    # package's dependencies (another python3 on PATH may lack them).
    e["PATH"] = os.pathsep.join([str(BINARY / "bin"), "/usr/bin", "/bin", e.get("PATH", "")])
    return e


def gantry(*args, check=True, timeout=600):
    r = subprocess.run([GANTRY, *args], capture_output=True, text=True, env=env(),
                       timeout=timeout)
    if check:
        assert r.returncode == 0, f"gantry {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def test_example_workflow_end_to_end(tmp_path):
    work = tmp_path / "jobs"
    shutil.copytree(SOURCE / "examples" / "jobs", work)
    wf = str(work / "workflow.yaml")
    r = gantry("jobs", "run", wf, "--cpus", "2")
    assert "sweep done" in r.stdout
    status = json.loads(gantry("jobs", "status", wf, "--json").stdout)
    assert status["state"] == "succeeded"
    train = status["steps"]["train"]
    assert len(train["trials"]) == 8
    best = train["trials"][train["best_trial"]]
    assert best["state"] == "succeeded"
    finished = [t for t in train["trials"] if t["state"] == "succeeded"]
    assert all(best["last_value"] <= t["last_value"] for t in finished)  # loss: minimize
    # Bandit stopped the trials whose loss lagged (the low learning rates).
    assert any(t["pruned"] for t in train["trials"])
    assert json.loads((work / "eval.json").read_text())["test_accuracy"] > 0.6
    shown = json.loads(gantry("registry", "show", "logreg/1", "--db",
                              str(work / "registry" / "registry.db"), "--json").stdout)
    assert shown["lineage"]["run_id"] == status["run_id"]
    assert "test_accuracy" in shown["lineage"]["metrics"]
    # Up to date now: prepare and evaluate are skipped, the sweep is not
    # (it declares no outputs).
    again = json.loads(gantry("jobs", "run", wf, "--cpus", "2", "--target", "prepare", "--json",
                              "--quiet").stdout)
    assert again["steps"]["prepare"]["state"] == "skipped"


TRAINER = r'''
import os, sys, time
import gantry
from gantry import jobs
q = float(jobs.params()["q"])
# The trial with q=0.5 is a late bloomer: 0.95 from epoch 4 on.
def score(epoch):
    return 0.95 if q == 0.5 and epoch >= 4 else q
ckpt = gantry.CheckpointManager(jobs.checkpoint_dir(), run="t", keep_last=3)
start = ckpt.latest()
if start is not None:
    print(f"resumed from epoch {start} (resuming={jobs.resuming()})", flush=True)
for epoch in range((start or 0) + 1, 9):
    ckpt.save(epoch, {"epoch": epoch})
    jobs.report(step=epoch, score=score(epoch))
    time.sleep(0.5)
os.makedirs(os.path.join(jobs.trial_dir(), "model"), exist_ok=True)
open(os.path.join(jobs.trial_dir(), "model", "q.txt"), "w").write(str(q))
'''

ASHA = """
steps:
  sweep:
    run: [python3, trainer.py]
    sweep:
      search_space: {q: {type: choice, values: [0.6, 0.5, 0.3, 0.2]}}
      sampling_algorithm: grid
      objective: {primary_metric: score, goal: maximize}
      early_termination: {type: asha, grace_period: 2, reduction_factor: 2, max_t: 8}
      limits: {max_total_trials: 4, max_concurrent_trials: 1}
      checkpoint: pause
      register: {name: best-q, path: model, registry: registry}
"""


def test_asha_pauses_and_promotes_a_checkpointing_trial(tmp_path):
    (tmp_path / "trainer.py").write_text(TRAINER)
    (tmp_path / "asha.yaml").write_text(ASHA)
    wf = str(tmp_path / "asha.yaml")
    r = gantry("jobs", "run", wf, "--cpus", "1")
    status = json.loads(gantry("jobs", "status", wf, "--json").stdout)
    trials = status["steps"]["sweep"]["trials"]
    # One at a time, in grid order: 0.6 runs to the end; 0.5 is below the
    # median of {0.6, 0.5} at the rung of step 2 and is paused; 0.3 and 0.2
    # too; once four trials are at that rung, 0.5 is in the top half and is
    # promoted: it resumes from its checkpoint and, at 0.95 from epoch 4,
    # passes the rung of step 4 and finishes best.
    assert [t["state"] for t in trials] == ["succeeded", "succeeded", "cancelled", "cancelled"], r.stdout
    assert trials[2]["paused"] and trials[3]["paused"]
    assert "promoted by ASHA" in r.stdout
    log = gantry("jobs", "logs", "sweep/1", "-w", wf).stdout
    assert "resumed from epoch" in log and "resuming=True" in log
    resumed = int(log.split("resumed from epoch ")[1].split()[0])
    assert resumed >= 2
    # The best trial (the late bloomer) is registered with its parameters.
    shown = json.loads(gantry("registry", "show", "best-q/1", "--db",
                              str(tmp_path / "registry" / "registry.db"), "--json").stdout)
    assert shown["tags"]["param.q"] == "0.5"
    assert shown["lineage"]["metrics"]["score"] == 0.95
