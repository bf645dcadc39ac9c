"""examples/train_resume.py, killed with SIGKILL twice and restarted, prints
for every step exactly the loss of an uninterrupted run, and resumes from a
committed checkpoint each time."""

import fcntl
import os
import pathlib
import re
import signal
import subprocess
import sys

import gantry

EXAMPLE = pathlib.Path(os.environ.get("GANTRY_SOURCE_DIR", pathlib.Path(__file__).parents[2])) \
    / "examples" / "train_resume.py"
STEPS, EVERY = 400, 20
LINE = re.compile(r"step (\d+) loss (\S+)$")


def command(root):
    return [sys.executable, str(EXAMPLE), "--ckpt", str(root), "--steps", str(STEPS),
            "--every", str(EVERY)]


def parse(lines):
    losses, resumed = {}, None
    for line in lines:
        m = LINE.match(line)
        if m:
            losses[int(m.group(1))] = m.group(2)
        elif line.startswith("resumed from step "):
            resumed = int(line.split()[-1])
    return losses, resumed


def run_to_end(root):
    out = subprocess.run(command(root), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "done"
    return lines


def run_and_kill(root, kill_after):
    """Starts the example and SIGKILLs it once it has printed step
    `kill_after`. The pipe is shrunk to one page, so the trainer can run at most
    ~110 steps ahead of the lines read here: the kill always lands mid-run."""
    proc = subprocess.Popen(command(root), stdout=subprocess.PIPE, text=True)
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            m = LINE.match(lines[-1])
            if m and int(m.group(1)) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.stdout.close()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"trainer exited with {proc.returncode} before the kill"
    return lines


def test_killed_run_continues_the_same_loss_trajectory(tmp_path):
    reference, resumed = parse(run_to_end(tmp_path / "reference"))
    assert resumed is None and sorted(reference) == list(range(1, STEPS + 1))

    root = tmp_path / "interrupted"
    attempts = [run_and_kill(root, 70), run_and_kill(root, 200), run_to_end(root)]

    last_seen = 0
    for i, lines in enumerate(attempts):
        losses, resumed = parse(lines)
        if i == 0:
            assert resumed is None
        else:
            # Resumed from a checkpoint the killed attempt committed.
            assert resumed is not None and resumed > 0 and resumed % EVERY == 0
            assert resumed <= last_seen
            assert min(losses) == resumed + 1
        for step, loss in losses.items():
            assert loss == reference[step], f"attempt {i}, step {step}: {loss} != {reference[step]}"
        last_seen = max(losses)
    assert last_seen == STEPS

    with gantry.CheckpointManager(root, run="train_resume") as ckpt:
        assert ckpt.latest() == STEPS
        assert [c["step"] for c in ckpt.list()] == [STEPS - 2 * EVERY, STEPS - EVERY, STEPS]
    leftovers = [p.name for p in (root / "train_resume").iterdir() if p.name.startswith(".tmp")]
    assert leftovers == []
