"""gantry.CheckpointManager tiering from Python: persist= uploads committed
steps to an object store (a file:// store here; Azurite is covered by the C++
tier_integration_test), a wiped local tier resumes from the store with
identical arrays, upload errors are raised, and on_eviction(fn) reports a
Preempt from a mock IMDS so that the training loop can save an emergency
checkpoint."""

import email.utils
import http.server
import json
import shutil
import threading
import time

import numpy as np
import pytest

import gantry


def state(step):
    rng = np.random.default_rng(step)
    return {"w": rng.standard_normal((64, 32)).astype(np.float32),
            "b": np.arange(10, dtype=np.int64) * step, "step": step}


def assert_state(got, want):
    assert set(got) == set(want)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype and got[k].tobytes() == v.tobytes(), k
        else:
            assert got[k] == v, k


def test_persist_uploads_and_resumes_after_wipe(tmp_path):
    local, store = tmp_path / "nvme", tmp_path / "store"
    with gantry.CheckpointManager(local, run="r", persist=f"file://{store}",
                                  keep_last=1, persist_keep_last=2) as ckpt:
        for step in (1, 2, 3):
            ckpt.save(step, state(step))
        ckpt.wait_for_uploads()
        st = ckpt.upload_status()
        assert st["enabled"] and st["pending"] == [] and st["last_uploaded"] == 3
        assert st["last_error"] == "" and st["bytes_uploaded"] > 0
        assert ckpt.persisted_steps() == [2, 3]
        assert [c["step"] for c in ckpt.list()] == [3]
    assert (store / "r" / "step-0000000003" / "COMMITTED").exists()

    shutil.rmtree(local)  # a new VM after an eviction
    with gantry.CheckpointManager(local, run="r", persist=f"file://{store}") as ckpt:
        assert ckpt.latest() == 3
        assert_state(ckpt.load(), state(3))
        assert_state(ckpt.load(2), state(2))


def test_direct_mode_needs_no_local_root(tmp_path, monkeypatch):
    # A file:// root is a local directory; a remote root is direct mode. Without
    # a key or SAS (and Entra ID ruled out, as off Azure) opening it fails with a
    # message naming what to set.
    monkeypatch.setenv("GANTRY_STORAGE_AUTH", "key")
    with pytest.raises(gantry.CheckpointError, match="AZURE_STORAGE"):
        gantry.CheckpointManager("az://acct/ckpts", run="r")


def test_upload_error_is_raised(tmp_path):
    store = tmp_path / "store"
    with gantry.CheckpointManager(tmp_path / "nvme", persist=f"file://{store}") as ckpt:
        # The store goes away under the manager: a file where its directory was.
        shutil.rmtree(store, ignore_errors=True)
        store.write_text("not a directory")
        ckpt.save(1, state(1))  # the local commit works
        with pytest.raises(gantry.CheckpointError):
            ckpt.wait_for_uploads()
        st = ckpt.upload_status()
        assert st["failed"] == 1 and st["last_error"]
        assert [c["step"] for c in ckpt.list()] == [1]


class _Imds(http.server.BaseHTTPRequestHandler):
    document = {"DocumentIncarnation": 0, "Events": []}
    posts = []

    def do_GET(self):
        if self.headers.get("Metadata") != "true":
            self.send_response(400)
            self.end_headers()
            return
        body = json.dumps(type(self).document).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        type(self).posts.append(json.loads(self.rfile.read(n)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_on_eviction_triggers_an_emergency_checkpoint(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    store = tmp_path / "store"
    try:
        with gantry.CheckpointManager(tmp_path / "nvme", run="r",
                                      persist=f"file://{store}") as ckpt:
            evicted = threading.Event()
            events = []

            def handler(event):
                events.append(event)
                evicted.set()

            ckpt.on_eviction(handler, endpoint=f"http://127.0.0.1:{server.server_port}",
                             interval=0.05, acknowledge=True)
            not_before = time.time() + 30
            _Imds.document = {"DocumentIncarnation": 1, "Events": [{
                "EventId": "evict-1", "EventType": "Preempt", "ResourceType": "VirtualMachine",
                "Resources": ["vm0"], "EventStatus": "Scheduled",
                "NotBefore": email.utils.formatdate(not_before, usegmt=True),
                "Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}
            # The training loop checks the flag between steps.
            assert evicted.wait(60), "no eviction reported within 60 s"
            ckpt.save(77, state(77))
            ckpt.wait_for_uploads()
            assert time.time() < events[0]["not_before_unix"]
            assert ckpt.persisted_steps() == [77]
            ckpt.stop_eviction_watcher()
        ev = events[0]
        assert ev["event_type"] == "Preempt" and ev["event_id"] == "evict-1"
        assert abs(ev["not_before_unix"] - int(not_before)) < 1
        assert ev["resources"] == ["vm0"]
        assert len(events) == 1
        assert _Imds.posts == [{"StartRequests": [{"EventId": "evict-1"}]}]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_on_eviction_callback_errors_do_not_kill_the_watcher(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Imds.document = {"DocumentIncarnation": 1, "Events": [
        {"EventId": "a", "EventType": "Terminate", "NotBefore": ""},
        {"EventId": "b", "EventType": "Preempt", "NotBefore": ""}]}
    try:
        with gantry.CheckpointManager(tmp_path / "nvme") as ckpt:
            seen = []
            done = threading.Event()

            def handler(event):
                seen.append(event["event_id"])
                if event["event_id"] == "a":
                    raise RuntimeError("handler bug")
                done.set()

            ckpt.on_eviction(handler, endpoint=f"http://127.0.0.1:{server.server_port}",
                             interval=0.05)
            assert done.wait(60)
        assert seen == ["a", "b"]
    finally:
        server.shutdown()
        server.server_close()
