"""Shared pieces of the end-to-end smoke scripts (doctor_smoke.py, health_smoke.py):
a fake Azure IMDS on 127.0.0.1 and the run/fail/check helpers."""
import http.server
import json
import subprocess
import sys
import threading
import time

IMDS_PATH = "/metadata/instance?api-version=2021-02-01"


class FakeImds(http.server.BaseHTTPRequestHandler):
    """Answers IMDS's instance query like Azure (Metadata: true required); the VM
    size is a class attribute the tests change between runs."""
    vm_size = "Standard_D8s_v5"

    def do_GET(self):
        if self.path != IMDS_PATH or self.headers.get("Metadata") != "true":
            self.send_error(400, "Bad request. Required metadata header not specified")
            return
        body = json.dumps({"compute": {"vmSize": FakeImds.vm_size, "location": "westeurope",
                                       "vmId": "4a3e9c1e-0000-4000-8000-000000000001",
                                       "priority": "Regular", "zone": "1"},
                           "network": {"interface": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start_fake_imds():
    """Returns (server, endpoint URL); call server.shutdown() and server_close() after."""
    server = http.server.HTTPServer(("127.0.0.1", 0), FakeImds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_port


def run(gantry, command, args, env, timeout=240):
    """Runs `gantry <command> <args>`; returns (CompletedProcess, seconds)."""
    start = time.monotonic()
    proc = subprocess.run([gantry, command, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc, time.monotonic() - start


def fail(message, proc=None):
    print("FAIL:", message)
    if proc is not None:
        print("--- stdout\n" + proc.stdout + "--- stderr\n" + proc.stderr)
    sys.exit(1)


def check(cond, message, proc=None):
    if not cond:
        fail(message, proc)
