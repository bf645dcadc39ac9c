"""`gantry autoscale slurm-resume|slurm-suspend` as a real Slurm's power saving programs.

A cluster from tests/health_slurm/slurm_cluster.py (munged, slurmctld on free 127.0.0.1
ports, in a temp dir, as root) without any slurmd at start: its two nodes, cloud-[1-2], are
State=CLOUD, so they start powered down, and slurm.conf's ResumeProgram / SuspendProgram /
ResumeFailProgram are wrappers around `$GANTRY autoscale slurm-* HOSTLIST --config
autoscale.yaml`. That config's `slurm:` section powers a node with commands that do what a
cloud would: start-node boots the node (here: `slurmd -D -N <node>` on this machine, on the
node's own port) and stop-node shuts it down (kills that slurmd).

So a job sent to a powered-down node makes Slurm call gantry to resume it, the node comes up
and runs the job; once idle for SuspendTime, Slurm calls gantry to suspend it and the slurmd
is gone. Missing Slurm, munge or GANTRY fails the test (never skips), with what to install.
"""

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "health_slurm"))

import slurm_cluster as sc  # noqa: E402

NODES = ["cloud-1", "cloud-2"]
SUSPEND_TIME = 5  # seconds idle before Slurm suspends a node


def gantry_path():
    p = os.environ.get("GANTRY")
    if not p or not os.access(p, os.X_OK):
        raise sc.ToolMissing("set GANTRY to the built gantry binary (ctest does)")
    return p


def write_script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def alive(pid):
    """True while `pid` runs (a zombie, which no one may reap here, does not count)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] not in ("Z", "X")


class PowerSavingCluster(sc.SlurmCluster):
    """slurmctld with power saving over cloud-[1-2]; no slurmd until Slurm resumes a node."""

    def __init__(self):
        super().__init__()
        self.gantry = gantry_path()
        self.bin = os.path.join(self.tmp, "bin")
        self.run_dir = os.path.join(self.tmp, "run")
        self.log_dir = os.path.join(self.tmp, "log")
        self.autoscale_yaml = os.path.join(self.tmp, "autoscale.yaml")
        self.power_log = os.path.join(self.log_dir, "power.log")
        self.programs_log = os.path.join(self.log_dir, "programs.log")
        self.gantry_out = os.path.join(self.log_dir, "gantry.out")
        self.nodes_log = os.path.join(self.log_dir, "nodes.log")
        for d in (self.bin, self.run_dir, self.log_dir):
            os.makedirs(d, exist_ok=True)

    def start(self):
        munged = sc.need_tool("munged", "munge")
        slurmctld = sc.need_tool("slurmctld", "slurmctld")
        self.slurmd = sc.need_tool("slurmd", "slurmd")
        sc.need_tool("sbatch", "slurm-client")
        sc.need_tool("sinfo", "slurm-client")
        self._start_munge(munged)
        self._write_programs()
        self._write_conf(self.slurmd)
        self._spawn("slurmctld", [slurmctld, "-D", "-f", self.conf])
        self.wait_for(self._controller_answers, 60, "slurmctld to answer `scontrol ping`")
        return self

    def stop(self):
        # The slurmds that start-node left running (a failed test may leave some).
        for node in NODES:
            pid = self.slurmd_pid(node)
            if pid:
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                    deadline = time.monotonic() + 5
                    while alive(pid) and time.monotonic() < deadline:
                        time.sleep(0.1)
        super().stop()

    # ------------------------------------------------------------------ setup
    def _write_programs(self):
        t = self.tmp
        # What a cloud does when asked for a node: boot it. Here the "machine" is a slurmd
        # for that node name on this host, in a session of its own (it must outlive gantry,
        # which kills its children's process group on a timeout), output to a file (gantry
        # reads the command's stdout until it closes). -b: report a fresh boot, or slurmctld
        # (which compares the host's uptime with the time it asked for the node) would keep
        # "waiting for boot" until ResumeTimeout.
        write_script(os.path.join(self.bin, "start-node"), f"""#!/bin/sh
set -e
node="$1"
echo "start $node" >> {self.nodes_log}
SLURM_CONF={self.conf} setsid {self.slurmd} -D -b -f {self.conf} -N "$node" \\
    </dev/null >>{self.log_dir}/slurmd-"$node".out 2>&1 &
echo $! > {self.run_dir}/slurmd-"$node".pid
echo "started slurmd for $node, pid $!"
""")
        # ... and shut it down: idempotent, a node already off is fine.
        write_script(os.path.join(self.bin, "stop-node"), f"""#!/bin/sh
node="$1"
pidf={self.run_dir}/slurmd-"$node".pid
echo "stop $node" >> {self.nodes_log}
[ -f "$pidf" ] || {{ echo "$node is already off"; exit 0; }}
pid=$(cat "$pidf")
running() {{ [ -r /proc/$pid/stat ] && ! sed 's/.*) //' /proc/$pid/stat | grep -q '^[ZX]'; }}
kill -TERM "$pid" 2>/dev/null
i=0
while running && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
running && kill -KILL -"$pid" 2>/dev/null
rm -f "$pidf"
echo "stopped slurmd for $node"
""")
        # slurm.conf's programs: gantry, with its output and exit code kept (Slurm keeps
        # neither).
        for verb in ("slurm-resume", "slurm-suspend", "slurm-resume-fail"):
            write_script(os.path.join(self.bin, verb), f"""#!/bin/sh
{self.gantry} autoscale {verb} "$1" --config {self.autoscale_yaml} >>{self.gantry_out} 2>&1
rc=$?
echo "{verb} $1 rc=$rc" >> {self.programs_log}
exit $rc
""")
        with open(self.autoscale_yaml, "w") as f:
            f.write(f"""# Written by tests/autoscale_slurm/test_autoscale_slurm.py
slurm:
  nodes: "cloud-[1-2]"
  resume_command: [{self.bin}/start-node, "{{node}}"]
  suspend_command: [{self.bin}/stop-node, "{{node}}"]
  resume_timeout: 60s
  log_file: {self.power_log}
""")

    def _write_conf(self, slurmd):
        t = self.tmp
        for sub in ["state", "log"] + [os.path.join("spool", n) for n in NODES]:
            os.makedirs(os.path.join(t, sub), exist_ok=True)
        ports = set()
        while len(ports) < 2 + len(NODES):
            ports.add(sc.free_port())
        ports = sorted(ports)
        self.ctld_port = ports[0]
        self.slurmd_port = ports[1]
        node_lines = "\n".join(
            f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[2 + i]} "
            f"{self._node_hardware(slurmd)} State=CLOUD"
            for i, n in enumerate(NODES))
        conf = f"""\
# Written by tests/autoscale_slurm/test_autoscale_slurm.py: power saving over cloud nodes.
ClusterName=gantrypower
SlurmctldHost={sc.short_hostname()}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={t}/state
SlurmdSpoolDir={t}/spool/%n
SlurmctldPidFile={t}/slurmctld.pid
SlurmdPidFile={t}/run/slurmd.%n.pid
SlurmctldLogFile={t}/log/slurmctld.log
SlurmdLogFile={t}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
DebugFlags=Power
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
SlurmdTimeout=300
# Power saving (slurm.conf.5, power_save.shtml): gantry is the resume/suspend program.
ResumeProgram={self.bin}/slurm-resume
SuspendProgram={self.bin}/slurm-suspend
ResumeFailProgram={self.bin}/slurm-resume-fail
SuspendTime={SUSPEND_TIME}
SuspendTimeout=5
ResumeTimeout=60
ResumeRate=0
SuspendRate=0
SlurmctldParameters=power_save_interval=1,power_save_min_interval=0,idle_on_node_suspend
PrivateData=cloud
TreeWidth=65533
{node_lines}
PartitionName=cloud Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)

    # ------------------------------------------------------------------ queries
    def node_state(self, node):
        r = self.scontrol_run("show", "node", "-o", node)
        return sc.parse_node_line(r.stdout)[0]

    def flags(self, node):
        return sc.state_flags(self.node_state(node))

    def slurmd_pid(self, node):
        try:
            with open(os.path.join(self.run_dir, "slurmd-%s.pid" % node)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def sinfo(self, node):
        """sinfo's state for `node`, with its power suffix ('idle~', 'alloc#', 'idle%')."""
        r = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%t"], env=self.env(),
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip()

    def read(self, path):
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def diagnostics(self):
        out = ["---- sinfo -N\n" + subprocess.run(
            ["sinfo", "-N", "-o", "%N %t %E"], env=self.env(), capture_output=True, text=True,
            timeout=30).stdout]
        for p in (self.programs_log, self.gantry_out, self.power_log, self.nodes_log):
            out.append("---- %s\n%s" % (p, self.read(p)[-4000:]))
        for n in NODES:
            out.append("---- slurmd %s\n%s" % (n, self.read(
                os.path.join(self.log_dir, "slurmd.%s.log" % n))[-6000:]))
        out.append(self.logs(40))
        return "\n".join(out)

    def wait_until(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if pred():
                return
            time.sleep(0.3)
        raise AssertionError("timed out after %ds waiting for %s\n%s" %
                             (timeout, what() if callable(what) else what, self.diagnostics()))


@pytest.fixture(scope="module")
def cluster():
    with PowerSavingCluster() as c:
        yield c


def sbatch(cluster, node, out):
    r = subprocess.run(["sbatch", "--parsable", "-p", "cloud", "-w", node, "-N1", "-n1",
                        "-D", cluster.tmp, "-o", out,
                        "--wrap", "echo ran on $SLURMD_NODENAME"],
                       env=cluster.env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, "sbatch: %s %s\n%s" % (r.stdout, r.stderr, cluster.diagnostics())
    return r.stdout.strip().split(";")[0]


def job_state(cluster, job):
    r = cluster.scontrol_run("show", "job", "-o", job, check=False)
    m = re.search(r"JobState=(\S+)", r.stdout)
    return m.group(1) if m else ""


def powered_down(cluster, node):
    return "POWERED_DOWN" in cluster.flags(node)


def test_gantry_refuses_a_node_it_does_not_map(cluster):
    """The CLI itself: a node outside slurm.nodes fails, naming it, and starts nothing."""
    r = subprocess.run([cluster.gantry, "autoscale", "slurm-resume", "gpu-7", "--config",
                        cluster.autoscale_yaml], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, "gantry autoscale slurm-resume gpu-7 exited 0:\n%s%s" % (
        r.stdout, r.stderr)
    assert "gpu-7" in r.stderr and "slurm.nodes" in r.stderr, (
        "gantry autoscale slurm-resume gpu-7 (exit %d) should say that gpu-7 is not in "
        "slurm.nodes:\n%s%s" % (r.returncode, r.stdout, r.stderr))
    assert "error:" in cluster.read(cluster.power_log), cluster.read(cluster.power_log)
    assert cluster.read(cluster.nodes_log) == ""


def test_nodes_start_powered_down(cluster):
    for node in NODES:
        cluster.wait_until(lambda: powered_down(cluster, node), 30,
                           lambda: "%s to be POWERED_DOWN (now %s)" % (node,
                                                                       cluster.node_state(node)))
        assert cluster.sinfo(node).endswith("~"), cluster.sinfo(node)
        assert cluster.slurmd_pid(node) is None


def test_a_job_resumes_its_node_and_the_idle_node_is_suspended(cluster, tmp_path):
    out = str(tmp_path / "job.out")
    job = sbatch(cluster, "cloud-1", out)

    # Slurm calls gantry slurm-resume cloud-1; start-node boots it; the job runs.
    cluster.wait_until(lambda: job_state(cluster, job) == "COMPLETED", 120,
                       lambda: "job %s to complete (now %s, cloud-1 %s)" %
                       (job, job_state(cluster, job), cluster.node_state("cloud-1")))
    with open(out) as f:
        assert f.read().strip() == "ran on cloud-1"
    programs = cluster.read(cluster.programs_log)
    assert "slurm-resume cloud-1 rc=0" in programs, cluster.diagnostics()
    power = cluster.read(cluster.power_log)
    assert re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ slurm-resume\[\d+\] cloud-1: done: 1 acted",
                     power, re.M), power
    assert "start cloud-1" in cluster.read(cluster.nodes_log)
    # Only the node the job needed came up.
    assert "cloud-2" not in cluster.read(cluster.nodes_log)
    assert powered_down(cluster, "cloud-2"), cluster.node_state("cloud-2")
    pid = cluster.slurmd_pid("cloud-1")
    assert pid and alive(pid), "no slurmd for cloud-1 after the resume\n" + cluster.diagnostics()

    # Idle for SuspendTime: Slurm calls gantry slurm-suspend cloud-1; stop-node ends the slurmd.
    cluster.wait_until(lambda: "slurm-suspend cloud-1 rc=0" in cluster.read(cluster.programs_log),
                       SUSPEND_TIME + 60, "Slurm to suspend the idle cloud-1")
    assert not alive(pid), "the slurmd of cloud-1 (pid %d) still runs after the suspend" % pid
    assert cluster.slurmd_pid("cloud-1") is None
    assert re.search(r"slurm-suspend\[\d+\] cloud-1: done: 1 acted", cluster.read(
        cluster.power_log)), cluster.read(cluster.power_log)
    cluster.wait_until(lambda: powered_down(cluster, "cloud-1") and
                       cluster.sinfo("cloud-1").endswith("~"), 60,
                       lambda: "cloud-1 to be POWERED_DOWN (now %s, sinfo %s)" %
                       (cluster.node_state("cloud-1"), cluster.sinfo("cloud-1")))
    assert not re.search(r"rc=[1-9]", cluster.read(cluster.programs_log)), cluster.diagnostics()


def test_both_nodes_come_up_again_for_a_second_round(cluster, tmp_path):
    """After a suspend, the same nodes resume again (one hostlist for both), run, and go."""
    cluster.wait_until(lambda: all(powered_down(cluster, n) for n in NODES), 60,
                       "both nodes POWERED_DOWN")
    jobs = {n: sbatch(cluster, n, str(tmp_path / ("%s.out" % n))) for n in NODES}
    for n, job in jobs.items():
        cluster.wait_until(lambda: job_state(cluster, job) == "COMPLETED", 120,
                           lambda: "job %s on %s to complete (now %s, node %s)" %
                           (job, n, job_state(cluster, job), cluster.node_state(n)))
        with open(str(tmp_path / ("%s.out" % n))) as f:
            assert f.read().strip() == "ran on " + n
    cluster.wait_until(lambda: all(powered_down(cluster, n) for n in NODES) and
                       all(cluster.slurmd_pid(n) is None for n in NODES), SUSPEND_TIME + 90,
                       "both nodes suspended again")
    assert not re.search(r"rc=[1-9]", cluster.read(cluster.programs_log)), cluster.diagnostics()
