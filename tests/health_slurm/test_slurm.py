"""`gantry health --slurm` against a real single-node Slurm (slurmctld + slurmd + munged,
started by slurm_cluster.SlurmCluster in a temp dir on free ports).

The health runs are restricted to the `filesystems` check (--only filesystems) with a
profile that extends `generic`: a path that does not exist makes the run fail, `/` makes it
pass. gantry reaches the test cluster through SLURM_CONF in its environment.
"""

import glob
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import slurm_cluster as sc  # noqa: E402

MISSING_PATH = "/nonexistent/gantry-slurm-test"

FAIL_PROFILE = """\
name: slurm_test_fail
description: generic, with a filesystem that does not exist (tests/health_slurm)
extends: generic
checks:
  filesystems:
    - {path: %s}
""" % MISSING_PATH

PASS_PROFILE = """\
name: slurm_test_pass
description: generic, with / as the only filesystem (tests/health_slurm)
extends: generic
checks:
  filesystems:
    - {path: /}
"""


def gantry_path():
    p = os.environ.get("GANTRY")
    if p:
        if not os.access(p, os.X_OK):
            raise sc.ToolMissing("GANTRY=%s is not an executable file" % p)
        return p
    cands = sorted(glob.glob(os.path.join(REPO, "build", "*", "bin", "gantry")),
                   key=os.path.getmtime, reverse=True)
    if not cands:
        raise sc.ToolMissing("gantry binary not found: set GANTRY=/path/to/gantry or build it")
    return cands[0]


@pytest.fixture(scope="module")
def cluster():
    with sc.SlurmCluster() as c:
        yield c


@pytest.fixture(scope="module")
def profiles(cluster):
    paths = {}
    for name, text in (("fail", FAIL_PROFILE), ("pass", PASS_PROFILE)):
        p = os.path.join(cluster.tmp, "profile-%s.yaml" % name)
        with open(p, "w") as f:
            f.write(text)
        paths[name] = p
    return paths


@pytest.fixture
def node(cluster):
    """The cluster with its node back to plain IDLE before each test."""
    cluster.reset()
    return cluster


class Health:
    def __init__(self, cluster, profiles):
        self.cluster = cluster
        self.profiles = profiles
        self.gantry = gantry_path()

    def run(self, which, *extra, node=True):
        argv = [self.gantry, "health", "--slurm", "--profile", self.profiles[which],
                "--only", "filesystems"]
        if node:
            argv += ["--node", self.cluster.node]
        argv += list(extra)
        r = subprocess.run(argv, env=self.cluster.env(), capture_output=True, text=True,
                           timeout=120)
        r.argv = argv
        return r


@pytest.fixture
def health(node, profiles):
    return Health(node, profiles)


def describe(r, cluster):
    return "%s -> exit %d\nstdout:\n%s\nstderr:\n%s\nnode: %r\n%s" % (
        " ".join(r.argv), r.returncode, r.stdout, r.stderr, cluster.node_state(),
        cluster.logs(10))


def drained(state):
    return bool(sc.state_flags(state) & {"DRAIN", "DRAINED", "DRAINING"})


def test_harness_drains_and_resumes_by_hand(node):
    # The fixture itself: scontrol reaches the test cluster and the node can be drained
    # and resumed, so a failure below is gantry's.
    node.drain("gantry: by hand")
    state, reason = node.node_state()
    assert drained(state) and reason == "gantry: by hand"
    node.resume()
    node.wait_idle(60)
    assert node.node_state() == ("IDLE", "")


def test_failing_run_drains_the_node_with_a_gantry_reason(health, node):
    # No --node: gantry names the node by its short hostname, as Slurm does.
    r = health.run("fail", node=False)
    assert r.returncode == 1, describe(r, node)
    state, reason = node.node_state()
    assert drained(state), describe(r, node)
    assert reason.startswith("gantry:"), describe(r, node)
    assert "filesystems" in reason, describe(r, node)
    assert MISSING_PATH in reason, describe(r, node)
    assert '"' not in reason


def test_passing_run_resumes_a_node_gantry_drained(health, node):
    r = health.run("fail")
    assert r.returncode == 1, describe(r, node)
    assert drained(node.node_state()[0]), describe(r, node)

    r = health.run("pass")
    assert r.returncode == 0, describe(r, node)
    state, reason = node.node_state()
    assert not drained(state), describe(r, node)
    node.wait_idle(60)
    assert node.node_state() == ("IDLE", "")


def test_passing_run_keeps_an_admins_drain(health, node):
    node.drain("admin maintenance")
    r = health.run("pass")
    assert r.returncode == 0, describe(r, node)
    state, reason = node.node_state()
    assert drained(state), describe(r, node)
    assert reason == "admin maintenance", describe(r, node)

    # A failing run does not take the admin's drain over either: a later clean pass
    # must still leave it alone.
    r = health.run("fail")
    assert r.returncode == 1, describe(r, node)
    assert node.node_state()[1] == "admin maintenance", describe(r, node)
    r = health.run("pass")
    assert r.returncode == 0, describe(r, node)
    state, reason = node.node_state()
    assert drained(state) and reason == "admin maintenance", describe(r, node)


def test_a_gantry_lookalike_reason_is_not_gantrys(health, node):
    node.drain("gantry maintenance by the admin")
    r = health.run("pass")
    assert r.returncode == 0, describe(r, node)
    state, reason = node.node_state()
    assert drained(state) and reason == "gantry maintenance by the admin", describe(r, node)


def test_dry_run_changes_nothing(health, node):
    r = health.run("fail", "--dry-run")
    assert r.returncode == 1, describe(r, node)
    assert node.node_state() == ("IDLE", ""), describe(r, node)

    r = health.run("fail")
    assert r.returncode == 1, describe(r, node)
    before = node.node_state()
    assert drained(before[0]) and before[1].startswith("gantry:"), describe(r, node)
    r = health.run("pass", "--dry-run")
    assert r.returncode == 0, describe(r, node)
    assert node.node_state() == before, describe(r, node)


def test_unknown_node_is_an_error_and_touches_nothing(health, node):
    r = health.run("fail", "--node", "no-such-node-gantry", node=False)
    assert r.returncode != 0, describe(r, node)
    assert "no-such-node-gantry" in r.stdout + r.stderr, describe(r, node)
    assert node.node_state() == ("IDLE", ""), describe(r, node)
