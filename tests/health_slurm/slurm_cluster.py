"""A real single-node Slurm cluster for the `gantry health --slurm` tests.

SlurmCluster starts, in a private temp dir and on free 127.0.0.1 ports:
  - munged, with its own key (1 KiB from /dev/urandom, mode 0400) and its own socket
    (run as root with --force: the temp dir's ownership would otherwise make it refuse);
  - slurmctld -D and slurmd -D, sharing one slurm.conf that points Slurm's auth/munge and
    cred/munge at that socket (AuthInfo=socket=...), keeps every state/spool/log/pid file in
    the temp dir, runs as root (SlurmUser=root) and describes this machine as the one node
    (NodeName=<short hostname>, CPU layout from `slurmd -C`), without cgroups.
It waits until `scontrol show node` answers and the node is IDLE, and stop() kills
everything it started (process groups, SIGTERM then SIGKILL), also when a test fails.

`env()` is the environment for any Slurm client (scontrol, gantry): SLURM_CONF set to the
cluster's slurm.conf. Missing Slurm or munge programs fail with the Debian package to
install, never skip.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SBIN_DIRS = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]


class ToolMissing(RuntimeError):
    pass


def need_tool(name, package):
    path = shutil.which(name)
    if not path:
        for d in SBIN_DIRS:
            if os.access(os.path.join(d, name), os.X_OK):
                path = os.path.join(d, name)
                break
    if not path:
        raise ToolMissing("%s not found: install the Debian package %s "
                          "(scripts/install-deps.sh installs it)" % (name, package))
    return path


def free_port():
    """A port that was free a moment ago (bind 0, close). Small race, fine for tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def short_hostname():
    return socket.gethostname().split(".")[0]


def parse_node_line(text):
    """State and Reason (without Slurm's ' [user@time]' suffix) of `scontrol show node -o`."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    head, _, reason = line.partition(" Reason=")
    m = re.search(r"(?:^|\s)State=(\S+)", head)
    state = m.group(1) if m else ""
    reason = re.split(r"\s*\[[^\]\s]*@\d{4}-\d\d-\d\dT[\d:]+\]", reason, maxsplit=1)[0].strip()
    return state, reason


def state_flags(state):
    return set(state.upper().split("+")) if state else set()


class SlurmCluster:
    def __init__(self, tmp=None):
        if os.geteuid() != 0:
            raise RuntimeError(
                "the Slurm fixture needs root: slurmd runs jobs as their users and "
                "`scontrol update` needs SlurmUser or root (run the integration tests as root, "
                "as CI does)")
        self.own_tmp = tmp is None
        self.tmp = tmp or tempfile.mkdtemp(prefix="gantry-slurm-")
        # slurmd and munged check the permissions of the directories their files are in.
        os.chmod(self.tmp, 0o755)
        self.node = short_hostname()
        self.procs = {}  # name -> (Popen, log path)
        self.conf = os.path.join(self.tmp, "slurm.conf")
        self.munge_socket = os.path.join(self.tmp, "munge", "munge.socket")
        self.scontrol = need_tool("scontrol", "slurm-client")

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        munged = need_tool("munged", "munge")
        slurmctld = need_tool("slurmctld", "slurmctld")
        slurmd = need_tool("slurmd", "slurmd")
        self._start_munge(munged)
        self._write_conf(slurmd)
        self._spawn("slurmctld", [slurmctld, "-D", "-f", self.conf])
        self.wait_for(self._controller_answers, 60, "slurmctld to answer `scontrol ping`")
        self._spawn("slurmd", [slurmd, "-D", "-f", self.conf, "-N", self.node])
        self.wait_idle(90)
        return self

    def stop(self):
        for name in ["slurmd", "slurmctld", "munged"]:
            entry = self.procs.pop(name, None)
            if entry is None:
                continue
            proc, _ = entry
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
            # Anything left in its process group (slurmstepd, helpers).
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ pieces
    def _spawn(self, name, argv):
        log_path = os.path.join(self.tmp, "log", name + ".out")
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        log = open(log_path, "ab")
        proc = subprocess.Popen(argv, env=self.env(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[name] = (proc, log_path)
        return proc

    def _start_munge(self, munged):
        d = os.path.join(self.tmp, "munge")
        os.makedirs(d, mode=0o700, exist_ok=True)
        key = os.path.join(d, "munge.key")
        with open("/dev/urandom", "rb") as src, open(key, "wb") as dst:
            dst.write(src.read(1024))
        os.chmod(key, 0o400)
        self._spawn("munged", [munged, "--foreground", "--force",
                               "--socket=" + self.munge_socket, "--key-file=" + key,
                               "--pid-file=" + os.path.join(d, "munged.pid"),
                               "--log-file=" + os.path.join(d, "munged.log"),
                               "--seed-file=" + os.path.join(d, "munged.seed")])
        munge = need_tool("munge", "munge")

        def answers():
            if not os.path.exists(self.munge_socket):
                return False
            r = subprocess.run([munge, "-n", "-S", self.munge_socket], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=10)
            return r.returncode == 0

        self.wait_for(answers, 30, "munged to answer on " + self.munge_socket)

    def _node_hardware(self, slurmd):
        """'CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1' from
        `slurmd -C`: a node configured with other counts would be drained as invalid.
        RealMemory is left at Slurm's default (1 MB), so free memory never matters."""
        r = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=30)
        first = r.stdout.strip().splitlines()[0] if r.stdout.strip() else ""
        fields = [f for f in first.split() if "=" in f and
                  f.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket",
                                      "ThreadsPerCore")]
        if r.returncode != 0 or not fields:
            raise RuntimeError("`slurmd -C` did not describe this machine (exit %d): %s %s" %
                               (r.returncode, r.stdout, r.stderr))
        return " ".join(fields)

    def _write_conf(self, slurmd):
        t = self.tmp
        for sub in ("state", "spool", "log"):
            os.makedirs(os.path.join(t, sub), exist_ok=True)
        self.ctld_port = free_port()
        self.slurmd_port = free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = free_port()
        conf = f"""\
# Written by tests/health_slurm/slurm_cluster.py: a throwaway single-node cluster.
ClusterName=gantrytest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={t}/state
SlurmdSpoolDir={t}/spool
SlurmctldPidFile={t}/slurmctld.pid
SlurmdPidFile={t}/slurmd.pid
SlurmctldLogFile={t}/log/slurmctld.log
SlurmdLogFile={t}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
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
NodeName={self.node} NodeAddr=127.0.0.1 {self._node_hardware(slurmd)} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)

    # ------------------------------------------------------------------ queries
    def env(self, base=None):
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf
        # slurmd sets this for its HealthCheckProgram; a stray one would name another node.
        env.pop("SLURMD_NODENAME", None)
        return env

    def scontrol_run(self, *args, check=True):
        r = subprocess.run([self.scontrol, *args], env=self.env(), capture_output=True,
                           text=True, timeout=30)
        if check and r.returncode != 0:
            raise RuntimeError("scontrol %s failed (%d): %s%s\n%s" %
                               (" ".join(args), r.returncode, r.stdout, r.stderr, self.logs()))
        return r

    def _controller_answers(self):
        self._check_alive()
        r = self.scontrol_run("ping", check=False)
        return r.returncode == 0 and "UP" in r.stdout

    def node_state(self):
        """(State, Reason) of the node, e.g. ('IDLE+DRAIN', 'gantry: filesystems: ...')."""
        r = self.scontrol_run("show", "node", "-o", self.node)
        return parse_node_line(r.stdout)

    def is_idle(self):
        state, _ = self.node_state()
        return state_flags(state) == {"IDLE"}

    def wait_idle(self, timeout=60):
        """Until the node is plain IDLE (no DRAIN, no NOT_RESPONDING: right after a resume
        Slurm may show IDLE+NOT_RESPONDING until its next ping)."""
        def idle():
            self._check_alive()
            r = self.scontrol_run("show", "node", "-o", self.node, check=False)
            if r.returncode != 0:
                return False
            return state_flags(parse_node_line(r.stdout)[0]) == {"IDLE"}

        self.wait_for(idle, timeout,
                      lambda: "node %s to be IDLE (now %r)" % (self.node, self._state_or_error()))

    def _state_or_error(self):
        r = self.scontrol_run("show", "node", "-o", self.node, check=False)
        return parse_node_line(r.stdout) if r.returncode == 0 else (r.stderr.strip(),)

    def drain(self, reason):
        self.scontrol_run("update", "NodeName=" + self.node, "State=DRAIN", "Reason=" + reason)

    def resume(self):
        self.scontrol_run("update", "NodeName=" + self.node, "State=RESUME")

    def reset(self):
        """Back to IDLE with no reason, whatever the last test left."""
        state, _ = self.node_state()
        if "DRAIN" in state_flags(state) or "DRAINED" in state_flags(state):
            self.resume()
        self.wait_idle(60)

    # ------------------------------------------------------------------ diagnostics
    def _check_alive(self):
        for name, (proc, _) in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError("%s exited with %s\n%s" % (name, proc.returncode, self.logs()))

    def wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.2)
        if callable(what):
            what = what()
        raise RuntimeError("timed out after %ds waiting for %s\n%s" % (timeout, what, self.logs()))

    def logs(self, n=25):
        out = []
        paths = [p for _, p in self.procs.values()]
        paths += [os.path.join(self.tmp, "log", f) for f in ("slurmctld.log", "slurmd.log")]
        paths.append(os.path.join(self.tmp, "munge", "munged.log"))
        for p in paths:
            try:
                with open(p, errors="replace") as f:
                    lines = f.read().splitlines()[-n:]
            except OSError:
                continue
            out.append("---- %s\n%s" % (p, "\n".join(lines)))
        return "\n".join(out)
