#!/usr/bin/python3
"""Tour step `train`: training survives a SIGKILL.

Runs train.py once uninterrupted (the reference), then again, SIGKILLs it in
the middle of the run (checkpoints are being written asynchronously all the
time), starts it again, and checks that the resumed run continues from its
last committed checkpoint with exactly the reference's loss for every step,
and that retention kept --keep-last checkpoints.
"""

import os
import re
import shutil
import signal
import subprocess

import common

EPOCHS = 6
KEEP_LAST = 3
KILL_AT = 150  # of 282 steps
EVERY = 25     # checkpoint interval


def losses(text):
    return {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^step (\d+) loss (\S+)$", text, re.M)}


def train_cmd(data, ckpt):
    return [common.PY, os.path.join(common.HERE, "train.py"), "--data", data, "--ckpt", ckpt,
            "--epochs", str(EPOCHS), "--every", str(EVERY), "--keep-last", str(KEEP_LAST)]


def main(step):
    data = common.out_dir("data")
    work = common.out_dir("train")
    ref_dir, crash_dir = os.path.join(work, "reference"), os.path.join(work, "ckpt")
    for d in (ref_dir, crash_dir):
        shutil.rmtree(d, ignore_errors=True)

    ref = common.run(train_cmd(data, ref_dir), timeout=600)
    reference = losses(ref.stdout)

    # The run that gets killed: read its output as it comes, SIGKILL at KILL_AT.
    print("$ " + " ".join(train_cmd(data, crash_dir)) + "   # SIGKILL at step %d" % KILL_AT)
    proc = subprocess.Popen(train_cmd(data, crash_dir), stdout=subprocess.PIPE, text=True)
    before = []
    for line in proc.stdout:
        before.append(line)
        if line.startswith(f"step {KILL_AT} "):
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait()
    before_kill = losses("".join(before))
    step.check(proc.returncode == -signal.SIGKILL, "training was killed with SIGKILL mid-run",
               f"exit {proc.returncode} after step {max(before_kill, default=0)}")

    resumed_run = common.run(train_cmd(data, crash_dir), timeout=600)
    m = re.search(r"^resumed from step (\d+)$", resumed_run.stdout, re.M)
    resumed_from = int(m.group(1)) if m else None
    step.check(resumed_from is not None and KILL_AT - EVERY <= resumed_from <= KILL_AT,
               "the restart resumed from the newest committed checkpoint",
               f"resumed from step {resumed_from}")
    resumed = losses(resumed_run.stdout)
    combined = dict(before_kill)
    combined.update(resumed)
    mismatch = [s for s in reference if combined.get(s) != reference[s]]
    step.check(len(reference) > 0 and not mismatch,
               "killed + resumed run has the reference's loss at every step, bit for bit",
               f"{len(reference)} steps compared" + (f", first mismatch at {mismatch[0]}"
                                                      if mismatch else ""))
    redone = [s for s in resumed if s <= KILL_AT]
    step.check(all(before_kill[s] == resumed[s] for s in redone),
               "the steps redone after the crash repeat exactly",
               f"{len(redone)} steps redone ({resumed_from + 1 if resumed_from else '?'}..{KILL_AT})")

    listed = common.run_json([common.gantry(), "ckpt", "ls", os.path.join(crash_dir, "churn"),
                              "--json"], check=False, quiet=True)
    steps = [c.get("step") for c in (listed.get("checkpoints", listed) if isinstance(listed, dict)
                                     else listed)]
    step.check(0 < len(steps) <= KEEP_LAST, f"retention kept at most keep_last={KEEP_LAST}",
               f"checkpoints at steps {steps}")
    v = common.run([common.gantry(), "ckpt", "verify", os.path.join(crash_dir, "churn")],
                   check=False)
    step.check(v.returncode == 0, "gantry ckpt verify passes on the survivors",
               "; ".join((v.stdout or v.stderr).strip().splitlines()[-3:]))

    step.say(f"reference run: {len(reference)} steps, final loss {reference[max(reference)]:.4f}")
    step.say(f"killed at step {KILL_AT}, resumed from step {resumed_from}; "
             f"{len(redone)} steps recomputed, all identical")
    step.series["loss"] = {"reference": sorted(reference.items()),
                           "resumed": sorted(combined.items()), "killed_at": KILL_AT}


if __name__ == "__main__":
    common.Step("train", 3, "Train with async checkpoints, SIGKILL, resume").run(main)
