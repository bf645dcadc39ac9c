"""Process and HTTP helpers for the gateway tests and bench/gateway.sh.

Everything here starts real processes (redis-server, nginx, the model server, `gantry gateway
run`) on free 127.0.0.1 ports inside a private temp dir, and stops them in stop()/__exit__,
also when a test fails. Missing tools fail loudly (ToolMissing), never skip.

The gantry binary comes from $GANTRY (CTest sets it to $<TARGET_FILE:gantry>); without it,
build/*/bin/gantry under the repository root is used, newest first.
"""

import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"

# What nginx answers for every path when used as a static backend: a small OpenAI-shaped
# chat completion, so that usage sniffing is exercised on the bench too.
STATIC_JSON = ('{"id":"chatcmpl-static","object":"chat.completion","created":0,'
               '"model":"tiny-lm","choices":[{"index":0,"message":{"role":"assistant",'
               '"content":"ok"},"finish_reason":"stop"}],'
               '"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}')


class ToolMissing(RuntimeError):
    pass


def need_tool(name, package):
    path = shutil.which(name) or (os.path.exists("/usr/sbin/" + name) and "/usr/sbin/" + name)
    if not path:
        raise ToolMissing("%s not found: install the Debian package %s "
                          "(scripts/install-deps.sh installs it)" % (name, package))
    return path


def gantry_path():
    p = os.environ.get("GANTRY")
    if p:
        if not os.access(p, os.X_OK):
            raise ToolMissing("GANTRY=%s is not an executable file" % p)
        return p
    cands = sorted(glob.glob(os.path.join(REPO, "build", "*", "bin", "gantry")),
                   key=os.path.getmtime, reverse=True)
    if not cands:
        raise ToolMissing("gantry binary not found: set GANTRY=/path/to/gantry or build it "
                          "(make build)")
    return cands[0]


def free_port():
    """A port that was free a moment ago (bind 0, close): another process may take it
    before a server binds it. Services here use reserved_port() instead."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reserved_port():
    """(socket, port): a 127.0.0.1 port held by a socket that is bound with SO_REUSEADDR
    and never listens. A server that sets SO_REUSEADDR itself (redis-server, nginx) can
    listen on it, while no other process can take it: neither before the server binds
    it nor while the server is down between a kill and a restart. Keep the socket for
    as long as the port is in use."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    return s, s.getsockname()[1]


_DEAD = []  # the sockets behind dead_port(), held for the life of the process


def dead_port():
    """A 127.0.0.1 port that refuses connections for as long as this process runs (bound,
    never listening, so no other process can start listening there meanwhile)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    _DEAD.append(s)
    return s.getsockname()[1]


def wait_port(port, timeout=10.0, proc=None, what="server"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("%s exited with %s before listening on %d" %
                               (what, proc.returncode, port))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("%s did not listen on 127.0.0.1:%d within %.0fs" % (what, port, timeout))


class Proc:
    """A child process whose stdout+stderr are collected into a log file and a line list."""

    def __init__(self, name, argv, cwd=None, env=None, log_dir=None):
        self.name = name
        self.argv = argv
        self.lines = []
        self.cond = threading.Condition()
        log_dir = log_dir or tempfile.gettempdir()
        self.log_path = os.path.join(log_dir, "%s.log" % name)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            self.log.write(raw)
            self.log.flush()
            with self.cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def wait_line(self, pattern, timeout=15.0, start=0):
        """Waits for a line matching `pattern` (regex); returns the match. Raises with the
        process output when it exits first or the timeout passes."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    if m:
                        return m
                    i += 1
                if self.proc.poll() is not None and not self.reader.is_alive():
                    raise RuntimeError("%s exited with %s before printing /%s/; output:\n%s" %
                                       (self.name, self.proc.returncode, pattern, self.tail()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError("%s did not print /%s/ within %.0fs; output:\n%s" %
                                       (self.name, pattern, timeout, self.tail()))
                self.cond.wait(min(left, 0.2))

    def tail(self, n=40):
        with self.cond:
            return "\n".join(self.lines[-n:])

    def send_signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def stop(self, timeout=10.0, sig=signal.SIGTERM):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.alive():
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        # Children of the process (its session) that outlived it.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.reader.join(2)
        self.log.close()
        return self.proc.returncode


class Service:
    """Base: a context manager with start()/stop() and its own temp dir."""

    def __init__(self, tmpdir=None):
        self.own_tmp = tmpdir is None
        self.tmp = tmpdir or tempfile.mkdtemp(prefix="gantry-gw-")
        os.makedirs(self.tmp, exist_ok=True)
        self.proc = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc is not None:
            self.proc.stop()
            self.proc = None
        held = getattr(self, "held", None)
        if held is not None:
            held.close()
            self.held = None
        if self.own_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def tail(self):
        return self.proc.tail() if self.proc else ""


# --------------------------------------------------------------------------- redis
class Redis(Service):
    def __init__(self, tmpdir=None, port=None):
        super().__init__(tmpdir)
        self.port = port
        self.held = None  # the reserved_port() socket when the port was picked here

    def start(self):
        """Starts on `port` (a reserved one the first time, held until stop()); start()
        after kill() restarts on the same port, as a Redis coming back would."""
        exe = need_tool("redis-server", "redis-server")
        if not self.port:
            self.held, self.port = reserved_port()
        d = os.path.join(self.tmp, "redis-%d" % self.port)
        os.makedirs(d, exist_ok=True)
        self.proc = Proc("redis-%d" % self.port,
                         [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "no", "--dir", d, "--daemonize", "no",
                          "--protected-mode", "no", "--logfile", ""], log_dir=self.tmp)
        self.proc.wait_line(r"Ready to accept connections", timeout=10)
        return self

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def command(self, *args):
        """One RESP command (for tests that look at keys); returns the raw reply bytes."""
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(out)
            time.sleep(0.05)
            return s.recv(1 << 20)

    def kill(self):
        """SIGKILL, as a crash would."""
        if self.proc:
            self.proc.stop(timeout=0.1, sig=signal.SIGKILL)
            self.proc = None


# --------------------------------------------------------------------------- nginx
NGINX_STATIC_CONF = """\
# nginx as a fast static JSON backend (written by tests/gateway/fixtures.py)
{user}
daemon off;
master_process on;
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location / {{
      default_type application/json;
      return 200 '{body}';
    }}
  }}
}}
"""


def nginx_user_line():
    # As root, nginx switches workers to `nobody`, who cannot write our temp dirs.
    return "user root root;" if os.geteuid() == 0 else ""


class Nginx(Service):
    """nginx-light serving STATIC_JSON (or `body`) for every path, or any given config."""

    def __init__(self, tmpdir=None, workers=1, body=STATIC_JSON, conf=None, port=None):
        super().__init__(tmpdir)
        self.workers = workers
        self.body = body
        self.conf_text = conf
        self.port = port
        self.held = None  # the reserved_port() socket when the port was picked here

    def start(self):
        exe = need_tool("nginx", "nginx-light")
        if not self.port:
            self.held, self.port = reserved_port()
        prefix = os.path.join(self.tmp, "nginx-%d" % self.port)
        os.makedirs(prefix, exist_ok=True)
        conf = self.conf_text or NGINX_STATIC_CONF.format(
            user=nginx_user_line(), workers=self.workers, prefix=prefix, port=self.port,
            body=self.body.replace("'", "\\'"))
        self.conf_path = os.path.join(prefix, "nginx.conf")
        with open(self.conf_path, "w") as f:
            f.write(conf)
        pid_file = os.path.join(prefix, "nginx.pid")
        try:
            os.unlink(pid_file)  # a killed nginx's
        except FileNotFoundError:
            pass
        self.proc = Proc("nginx-%d" % self.port,
                         [exe, "-p", prefix, "-c", self.conf_path, "-e",
                          os.path.join(prefix, "error.log")], log_dir=self.tmp)
        try:
            if self.conf_text is None:
                # nginx writes its pid file once it holds its listening socket: a connect
                # before that could reach whatever else listens there.
                deadline = time.monotonic() + 15
                while not os.path.exists(pid_file):
                    if self.proc.proc.poll() is not None:
                        raise RuntimeError("nginx exited with %s before listening on %d" %
                                           (self.proc.proc.returncode, self.port))
                    if time.monotonic() > deadline:
                        raise RuntimeError("nginx wrote no pid file within 15 s")
                    time.sleep(0.05)
            wait_port(self.port, 10, self.proc.proc, "nginx")
        except RuntimeError as e:
            err = ""
            try:
                err = open(os.path.join(prefix, "error.log")).read()[-2000:]
            except OSError:
                pass
            raise RuntimeError("%s\n%s\n%s" % (e, self.proc.tail(), err))
        return self

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port


# --------------------------------------------------------------------------- model server
class ModelServer(Service):
    """tests/gateway/model_server.py as a process. `name` and `zone` become --name/--zone
    (the server then tags every response with `x-test-server: NAME`); `port` pins the port
    (else a free one is picked at the first start and kept for restart())."""

    def __init__(self, tmpdir=None, args=(), name=None, zone=None, port=None):
        super().__init__(tmpdir)
        self.args = list(args)
        self.name = name
        self.zone = zone
        self.port = port
        self.url = None

    def launch(self):
        """Starts the process without waiting for it to listen (see wait_ready): several
        servers then load torch in parallel."""
        argv = [PYTHON, os.path.join(HERE, "model_server.py"), "--port", str(self.port or 0)]
        if self.name:
            argv += ["--name", self.name]
        if self.zone:
            argv += ["--zone", self.zone]
        self.proc = Proc("model_server-%s" % (self.name or id(self)), argv + self.args,
                         log_dir=self.tmp)
        return self

    def wait_ready(self, timeout=60):
        m = self.proc.wait_line(r"model_server listening on (http://[\d.]+:(\d+))",
                                timeout=timeout)
        self.url, self.port = m.group(1), int(m.group(2))
        return self

    def start(self):
        return self.launch().wait_ready()

    def requests(self):
        return get_json(self.url + "/debug/requests")[1]["requests"]

    def reset(self):
        request("POST", self.url + "/debug/reset")

    def stats(self):
        return get_json(self.url + "/debug/stats")[1]

    def set_mode(self, **mode):
        """POST /debug/mode (status, latency_ms, unready, drift, hold); returns the mode."""
        r = request("POST", self.url + "/debug/mode", mode, timeout=10)
        if r.status != 200:
            raise RuntimeError("%s: POST /debug/mode %r -> %r" % (self.name, mode, r))
        return r.json()

    def normal(self):
        """Back to normal behaviour (every mode key reset)."""
        return self.set_mode(status=None, latency_ms=None, unready=None, drift=None, hold=None)

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def terminate(self, timeout=60):
        """SIGTERM (graceful: requests in flight finish) and wait; returns the exit code."""
        rc = self.proc.stop(timeout=timeout)
        self.proc = None
        return rc

    def kill(self):
        """SIGKILL, as a crash would; restart() brings it back on the same port."""
        if self.proc is not None:
            self.proc.stop(timeout=0.1, sig=signal.SIGKILL)
            self.proc = None

    def restart(self, timeout=60):
        """Starts again on the same port (after terminate() or kill())."""
        if self.alive():
            raise RuntimeError("%s is still running" % self.name)
        return self.launch().wait_ready(timeout)


def start_all(servers, timeout=90):
    """Starts several services at once (model servers load torch in parallel)."""
    for s in servers:
        s.launch()
    for s in servers:
        s.wait_ready(timeout)
    return servers


# --------------------------------------------------------------------------- gateway
def write_config(path, config):
    """Writes `config` (a dict) as YAML. JSON is a subset of YAML 1.2, which yaml-cpp reads,
    so no YAML library is needed and the file is still readable."""
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


class Gateway(Service):
    """`gantry gateway run --config F` with `config` (dict). Port 0 in `listen` is resolved
    from the startup line. Relative file names in the config resolve against self.tmp (the
    process runs there)."""

    LISTEN_RX = r"gantry gateway listening on (https?://([\d.]+):(\d+))"

    def __init__(self, config, tmpdir=None, name="gateway"):
        super().__init__(tmpdir)
        self.config = dict(config)
        self.config.setdefault("listen", "127.0.0.1:0")
        self.name = name
        self.url = None
        self.config_path = os.path.join(self.tmp, "%s.yaml" % name)

    def start(self):
        write_config(self.config_path, self.config)
        self.proc = Proc(self.name, [gantry_path(), "gateway", "run", "--config",
                                     self.config_path], cwd=self.tmp, log_dir=self.tmp)
        m = self.proc.wait_line(self.LISTEN_RX, timeout=20)
        self.url, self.host, self.port = m.group(1), m.group(2), int(m.group(3))
        return self

    def reload(self, config):
        """Rewrites the config file and sends SIGHUP (the listen address is kept)."""
        self.config = dict(config)
        self.config.setdefault("listen", "127.0.0.1:0")
        write_config(self.config_path, self.config)
        self.proc.send_signal(signal.SIGHUP)

    def log(self):
        return self.proc.tail(200) if self.proc else ""


def gantry(*args, timeout=30, check=True, cwd=None):
    """Runs the gantry CLI; returns CompletedProcess (text)."""
    cp = subprocess.run([gantry_path()] + [str(a) for a in args], capture_output=True,
                        text=True, timeout=timeout, cwd=cwd)
    if check and cp.returncode != 0:
        raise RuntimeError("gantry %s exited %d\nstdout: %s\nstderr: %s" %
                           (" ".join(map(str, args)), cp.returncode, cp.stdout, cp.stderr))
    return cp


def create_key(state, name, role, expires_in_s=None, url=None, admin_key=None):
    """`gantry gateway keys create ... --json` offline (state=DB) or online (url+admin_key);
    returns the parsed JSON ({id, key, name, role, ...})."""
    args = ["gateway", "keys", "create", "--name", name, "--role", role, "--json"]
    if url:
        args += ["--url", url, "--admin-key", admin_key]
    else:
        args += ["--state", state]
    if expires_in_s is not None:
        args += ["--expires-in", "%ds" % expires_in_s]
    cp = gantry(*args)
    try:
        return json.loads(cp.stdout)
    except ValueError:
        raise RuntimeError("gantry %s: stdout is not JSON: %r" % (" ".join(args), cp.stdout))


# --------------------------------------------------------------------------- HTTP clients
class Response:
    def __init__(self, status, headers, body, reason=""):
        self.status = status
        self.headers = headers  # dict, lower-case names (last value wins)
        self.body = body
        self.reason = reason

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %s %r>" % (self.status, self.headers, self.body[:300])


def _split(url):
    m = re.match(r"http://([^:/]+):(\d+)(/.*)?$", url)
    if not m:
        raise ValueError("not an http://host:port URL: %s" % url)
    return m.group(1), int(m.group(2)), m.group(3) or "/"


def request(method, url, body=None, headers=None, timeout=30, conn=None):
    """One HTTP request with http.client; `conn` reuses a keep-alive connection."""
    host, port, path = _split(url)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers = dict(headers or {})
        headers.setdefault("Content-Type", "application/json")
    own = conn is None
    c = conn or http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data, r.reason)
    finally:
        if own:
            c.close()


def get_json(url, headers=None, timeout=30):
    r = request("GET", url, headers=headers, timeout=timeout)
    try:
        return r.status, json.loads(r.body)
    except ValueError:
        return r.status, None


def auth(key):
    return {"Authorization": "Bearer " + key}


class RawConn:
    """A raw TCP connection to send hand-written (also malformed) requests and read
    responses byte by byte: status, headers, body by Content-Length, chunked or close."""

    def __init__(self, url_or_port, timeout=10.0):
        if isinstance(url_or_port, int):
            host, port = "127.0.0.1", url_or_port
        else:
            host, port, _ = _split(url_or_port)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self):
        d = self.sock.recv(65536)
        if not d:
            raise EOFError("connection closed by peer")
        self.buf += d

    def read_until(self, sep):
        while sep not in self.buf:
            self._fill()
        i = self.buf.index(sep) + len(sep)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_n(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_head(self):
        head = self.read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        headers = {}
        for ln in lines[1:]:
            if ln:
                k, _, v = ln.partition(":")
                headers[k.strip().lower()] = v.strip()
        return status, headers

    def iter_chunks(self):
        """For a chunked response whose head was read: yields (time, data) per chunk."""
        while True:
            size_line = self.read_until(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                self.read_until(b"\r\n")
                return
            data = self.read_n(size)
            self.read_n(2)
            yield time.monotonic(), data

    def read_response(self, head_only=False, method="GET"):
        status, headers = self.read_head()
        if head_only:
            return Response(status, headers, b"")
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return Response(status, headers, b"")
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b"".join(d for _, d in self.iter_chunks())
        elif "content-length" in headers:
            body = self.read_n(int(headers["content-length"]))
        else:
            body = self.read_to_close()
        return Response(status, headers, body)

    def read_to_close(self, timeout=None):
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    break
                self.buf += d
        except (ConnectionResetError, socket.timeout):
            pass
        out, self.buf = self.buf, b""
        return out

    def closed_by_peer(self, timeout=5.0):
        """True when the peer closed (EOF or reset) within `timeout`, after any bytes."""
        self.sock.settimeout(timeout)
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    return True
                self.buf += d
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


def sse_events(body):
    """Splits an SSE body into the `data:` payloads (str), [DONE] included."""
    out = []
    for block in body.decode().split("\n\n"):
        for ln in block.split("\n"):
            if ln.startswith("data:"):
                out.append(ln[5:].strip())
    return out


def parse_metrics(text):
    """Prometheus text -> {name: [(labels dict, value float)]}."""
    out = {}
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)', ln)
        if not m:
            continue
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                 m.group(3) or ""))
        try:
            v = float(m.group(4))
        except ValueError:
            continue
        out.setdefault(m.group(1), []).append((labels, v))
    return out


def wait_until(fn, timeout=10.0, interval=0.1, what="condition"):
    """Polls fn() until truthy; returns its value or raises AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("%s not reached within %.0fs (last: %r)" % (what, timeout, last))


def gantry_json(*args, timeout=30):
    """`gantry ARGS --json` that must exit 0; returns the parsed stdout."""
    cp = gantry(*(list(args) + ["--json"]), timeout=timeout)
    try:
        return json.loads(cp.stdout)
    except ValueError:
        raise RuntimeError("gantry %s --json: stdout is not JSON: %r" %
                           (" ".join(map(str, args)), cp.stdout))


class Load:
    """A load generator: `threads` keep-alive connections, each sending the same request
    back to back (optionally `total` requests in all) until stop(). Counts answers by
    status and by label (`classify(Response)`, default the `x-test-server` header) and
    keeps the first failures (a non-`ok_status` answer, or an exception: a connection
    broken by the server counts as a failed request, then a new connection is opened)."""

    def __init__(self, url, path, body=None, method="POST", headers=None, threads=4,
                 total=None, classify=None, ok_status=(200,), pause_s=0.0, timeout=30):
        self.host, self.port, _ = _split(url)
        self.path = path
        self.method = method
        self.body = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        self.headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            self.headers.setdefault("Content-Type", "application/json")
        self.nthreads = threads
        self.total = total
        self.classify = classify or (lambda r: r.headers.get("x-test-server", "?"))
        self.ok_status = ok_status
        self.pause_s = pause_s
        self.timeout = timeout
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.sent = 0
        self.ok = 0
        self.by_label = {}
        self.by_status = {}
        self.failures = []
        self.nfail = 0
        self.threads = []

    def _next(self):
        with self.lock:
            if self.stop_ev.is_set() or (self.total is not None and self.sent >= self.total):
                return False
            self.sent += 1
            return True

    def _run(self):
        conn = None
        while self._next():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                conn.request(self.method, self.path, body=self.body, headers=self.headers)
                r = conn.getresponse()
                data = r.read()
                resp = Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data,
                                r.reason)
                if resp.headers.get("connection", "").lower() == "close":
                    conn.close()
                    conn = None
                with self.lock:
                    self.by_status[resp.status] = self.by_status.get(resp.status, 0) + 1
                    if resp.status in self.ok_status:
                        self.ok += 1
                        label = self.classify(resp)
                        self.by_label[label] = self.by_label.get(label, 0) + 1
                    else:
                        self.nfail += 1
                        if len(self.failures) < 20:
                            self.failures.append((time.time(), repr(resp)))
            except (OSError, http.client.HTTPException) as e:
                with self.lock:
                    self.nfail += 1
                    if len(self.failures) < 20:
                        self.failures.append((time.time(), "exception: %r" % e))
                if conn is not None:
                    conn.close()
                conn = None
            if self.pause_s:
                time.sleep(self.pause_s)
        if conn is not None:
            conn.close()

    def start(self):
        for _ in range(self.nthreads):
            t = threading.Thread(target=self._run, daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self, timeout=60):
        self.stop_ev.set()
        return self.join(timeout)

    def join(self, timeout=120):
        for t in self.threads:
            t.join(timeout)
        return self

    def run(self):
        """start() and join(): for a fixed `total`."""
        return self.start().join()

    def snapshot(self):
        with self.lock:
            return {"sent": self.sent, "ok": self.ok, "failed": self.nfail,
                    "by_label": dict(self.by_label), "by_status": dict(self.by_status),
                    "failures": list(self.failures)}


class WebhookReceiver(Service):
    """A tiny HTTP server (a thread of this process) that records every JSON body POSTed
    to it, e.g. Alertmanager v4 webhook payloads. `url` is where to send them."""

    def __init__(self):
        super().__init__(None)
        self.payloads = []
        self.cond = threading.Condition()
        self.server = None

    def start(self):
        import http.server
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0") or "0")
                raw = self.rfile.read(n)
                try:
                    doc = json.loads(raw)
                except ValueError:
                    doc = {"unparsable": raw.decode("utf-8", "replace")}
                with outer.cond:
                    outer.payloads.append({"path": self.path, "body": doc,
                                           "time": time.time()})
                    outer.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d/alerts" % self.port
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
        return self

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        super().stop()

    def bodies(self):
        with self.cond:
            return [p["body"] for p in self.payloads]

    def wait_alert(self, pred, timeout=30, what="webhook alert"):
        """Waits for a payload holding an alert with pred(payload, alert) true; returns
        (payload, alert)."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for p in self.payloads[seen:]:
                    for a in p["body"].get("alerts", []) if isinstance(p["body"], dict) else []:
                        if pred(p["body"], a):
                            return p["body"], a
                seen = 0  # payloads are few: look at all of them again next time
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%s did not arrive within %.0fs; payloads: %s" % (
                        what, timeout, json.dumps([p["body"] for p in self.payloads])[-3000:]))
                self.cond.wait(min(left, 0.5))


if __name__ == "__main__":
    # Manual use: `python3 fixtures.py nginx [workers]` runs a static nginx until Ctrl-C.
    if len(sys.argv) > 1 and sys.argv[1] == "nginx":
        with Nginx(workers=int(sys.argv[2]) if len(sys.argv) > 2 else 1) as n:
            print("nginx static JSON on", n.url, flush=True)
            signal.pause()
