"""What every tour step shares: where the run's files go, how a step records its
outcome for the report, how commands and background services are started and
stopped.

A step is a script run by `gantry jobs` (tour.yaml). It writes
$TOUR_OUT/results/<step>.json (the schema report.py reads) and exits 1 when
one of its checks failed, so the workflow stops at the first step that did not
behave as described.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"  # Debian's interpreter: the one with torch and numpy


def out_dir(*parts):
    """The directory $TOUR_OUT/<parts>, created. run.sh sets TOUR_OUT; by hand
    it defaults to /tmp/gantry-tour."""
    path = os.path.join(os.environ.get("TOUR_OUT") or "/tmp/gantry-tour", *parts)
    os.makedirs(path, exist_ok=True)
    return path


def out_file(*parts):
    """The file $TOUR_OUT/<parts>, its directory created."""
    return os.path.join(out_dir(*parts[:-1]), parts[-1])


def gantry():
    return os.environ.get("GANTRY", "gantry")


def free_port():
    """A free loopback port. The tour's services bind what they are given, so a
    race with another process is possible but harmless here: the service then
    fails to start and the step says so."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Step:
    """Collects a step's checks, summary lines and plot series, and writes the
    result file at the end (also when the step raised)."""

    def __init__(self, name, order, title):
        self.name, self.order, self.title = name, order, title
        self.checks, self.summary, self.series = [], [], {}
        self.t0 = time.monotonic()
        self.seconds = None  # set when the work was timed elsewhere (the sweep, by gantry jobs)

    def say(self, line):
        print(line, flush=True)
        self.summary.append(line)

    def check(self, ok, what, detail=""):
        ok = bool(ok)
        print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""), flush=True)
        self.checks.append({"what": what, "ok": ok, "detail": str(detail)})
        return ok

    def ok(self):
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    def write(self):
        doc = {"step": self.name, "order": self.order, "title": self.title, "ok": self.ok(),
               "seconds": round(self.seconds if self.seconds is not None
                                else time.monotonic() - self.t0, 2), "summary": self.summary,
               "checks": self.checks, "series": self.series}
        path = out_file("results", self.name + ".json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, path)

    def run(self, body):
        """Runs body(self); an exception is a failed check, never a lost result."""
        try:
            body(self)
        except Exception as e:  # noqa: BLE001 - any failure must reach the report
            import traceback
            traceback.print_exc()
            self.check(False, f"step raised {type(e).__name__}", str(e)[:500])
        finally:
            self.write()
        sys.exit(0 if self.ok() else 1)


def run(argv, *, check=True, env=None, cwd=None, timeout=300, input=None, quiet=False):
    """Runs a command, echoing it (and, unless quiet, its output); returns the
    CompletedProcess with text output."""
    print("$ " + " ".join(str(a) for a in argv), flush=True)
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=full_env,
                       cwd=cwd, timeout=timeout, input=input)
    if p.stdout.strip() and not quiet:
        print(p.stdout.rstrip()[-4000:], flush=True)
    if p.stderr.strip():
        print(p.stderr.rstrip()[-4000:], file=sys.stderr, flush=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{argv[0]} {argv[1] if len(argv) > 1 else ''} exited "
                           f"{p.returncode}: {(p.stderr or p.stdout).strip()[-500:]}")
    return p


def run_json(argv, **kw):
    kw.setdefault("quiet", True)
    p = run(argv, **kw)
    return json.loads(p.stdout)


class Service:
    """A background process in its own process group with its log in
    $TOUR_OUT/logs/<name>.log; stop() ends the whole group (SIGTERM, then
    SIGKILL), so nothing it started outlives the step."""

    def __init__(self, name, argv, *, env=None, cwd=None):
        self.name = name
        self.log_path = out_file("logs", name + ".log")
        self.log = open(self.log_path, "ab")
        print(f"start {name}: " + " ".join(str(a) for a in argv), flush=True)
        self.proc = subprocess.Popen([str(a) for a in argv], stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})), cwd=cwd,
                                     start_new_session=True)

    def alive(self):
        return self.proc.poll() is None

    def tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self, grace=10):
        stop_group(self.proc.pid, grace)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever is left in the group
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(5)
        self.log.close()
        return self.proc.returncode


def running(pid):
    """Alive and not a zombie (a zombie has exited; its parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_group(pid, grace=5):
    """SIGTERM to the process group led by pid, SIGKILL after grace; returns
    once the leader is gone (exited or a zombie)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and running(pid):
            time.sleep(0.05)
        if not running(pid):
            return


def http(method, url, body=None, headers=None, timeout=10):
    """(status, headers dict lower-cased, body bytes); HTTP errors are answers,
    not exceptions; a refused connection raises."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def wait_http(url, *, timeout=60, what=None, service=None):
    """Waits until GET url answers 2xx; raises naming what did not come up."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if service is not None and not service.alive():
            raise RuntimeError(f"{service.name} exited {service.proc.returncode}: {service.tail()}")
        try:
            status, _, _ = http("GET", url, timeout=2)
            if 200 <= status < 300:
                return
            last = f"HTTP {status}"
        except OSError as e:
            last = str(e)
        time.sleep(0.2)
    raise RuntimeError(f"{what or url} not ready within {timeout} s ({last})"
                       + (f"; log: {service.tail()}" if service else ""))


def wait_until(pred, *, timeout, interval=0.25, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def load_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        if default is not None:
            return default
        raise
