"""Robustness beyond the contract's happy paths: HTTP/1.0 clients, idle
timeout, a pipelined flood, upstream connection reuse after a 504 or a client that went
away (no response may ever reach the wrong client), and no secrets in logs, metrics or
error bodies."""

import json
import os

import pytest

import fixtures as fx
from gwtest import CHAT, base_config, chat


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    state = os.path.join(tmp_dir, "robust.db")
    keys = {n: fx.create_key(state, n, r) for n, r in (("u1", "user"), ("admin", "admin"))}
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["limits"]["upstream_timeout"] = "1s"
    cfg["limits"]["idle_timeout"] = "1s"
    gw = gateways.start(cfg)
    return {"gw": gw, "keys": keys, "model": model, "tmp": tmp_dir, "state": state,
            "gateways": gateways}


def k(env, name="u1"):
    return env["keys"][name]["key"]


def test_http10_client(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"GET /v2/health/ready HTTP/1.0\r\n\r\n")
        r = c.read_response()
        assert r.status == 200, r
        assert c.closed_by_peer(timeout=5), "HTTP/1.0 without keep-alive: connection left open"


def test_idle_keep_alive_closed(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n")
        assert c.read_response().status == 200
        assert c.closed_by_peer(timeout=10), "idle keep-alive connection open after 10 s " \
                                            "(idle_timeout 1s)"


def test_pipelined_flood(env):
    gw = env["gw"]
    n = 500
    with fx.RawConn(gw.url, timeout=20) as c:
        c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n" * n)
        got = 0
        try:
            while got < n:
                assert c.read_response().status == 200
                got += 1
        except EOFError:
            pass
    assert got >= 1, "no answer to a pipelined flood"
    assert chat(gw, k(env)).status == 200, "gateway unusable after a pipelined flood"


def check_no_crossed_responses(gw, n=12):
    for i in range(n):
        r = fx.request("GET", gw.url + "/debug/headers?probe=%d" % i)
        assert r.status == 200, r
        doc = r.json()
        assert doc.get("path") == "/debug/headers?probe=%d" % i, (
            "response %d belongs to another request: %r" % (i, r.body[:200]))


def wait_backend_idle(env, what):
    """Waits until the model server has finished every request (answered, or failed to
    write to a connection the gateway dropped): any late bytes are then on the gateway's
    side of its upstream connections, where they must not reach a later client."""
    fx.wait_until(lambda: env["model"].stats()["in_flight"] == 0, timeout=30,
                  what="model server idle after " + what)


def test_no_stale_response_after_upstream_timeout(env):
    gw = env["gw"]
    r = chat(gw, k(env), headers={"x-test-latency-ms": "1500"})  # upstream_timeout 1s
    assert r.status == 504, r
    wait_backend_idle(env, "the timed-out request")  # its late answer was sent
    check_no_crossed_responses(gw)


def test_no_stale_response_after_client_abort(env):
    gw = env["gw"]
    body = json.dumps(dict(CHAT, stream=True, max_tokens=20)).encode()
    for _ in range(3):
        c = fx.RawConn(gw.url)
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"
               b"x-test-chunk-delay-ms: 50\r\nContent-Length: %d\r\n\r\n%s" %
               (k(env).encode(), len(body), body))
        c.read_head()
        c.close()  # mid-stream
        c = fx.RawConn(gw.url)
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"
               b"x-test-latency-ms: 300\r\nContent-Length: %d\r\n\r\n%s" %
               (k(env).encode(), len(body), body))
        c.close()  # before the answer
    wait_backend_idle(env, "the aborted requests")
    check_no_crossed_responses(gw)


def test_no_secrets_in_logs_metrics_errors(env):
    gw = env["gw"]
    secret = k(env)
    chat(gw, secret)
    chat(gw, secret[:-1] + "x")  # a wrong key near a real one
    chat(gw, secret, dict(CHAT, model="big-lm"))
    r = fx.request("POST", gw.url + "/admin/keys", {"name": "z", "role": "user"},
                   fx.auth(secret))
    assert secret not in r.body.decode(), "error body echoes the key"
    text = fx.request("GET", gw.url + "/metrics").body.decode()
    assert secret[8:] not in text, "API key in /metrics"
    log = open(gw.proc.log_path, errors="replace").read()
    for name, v in env["keys"].items():
        assert v["key"][8:] not in log, "API key of %s in the gateway log" % name


def test_broken_upstream_responses_502(env):
    """A backend that answers garbage, a response with both Content-Length and chunked (with
    a second response hidden behind), a bad chunk size or a short body: the client gets a
    502 (or, once the head was sent, a cut-off body), never the hidden response, and later
    requests get their own answers."""
    gw = env["gw"]
    for bad in ("garbage", "cl_te", "bad_chunk", "short_body"):
        with fx.RawConn(gw.url) as c:
            c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\nx-test-status: %s\r\n\r\n"
                   % bad.encode())
            try:
                r = c.read_response()
                rest = c.read_to_close(timeout=3)
            except (EOFError, ConnectionResetError, ValueError):
                r, rest = None, b""
        if r is not None:
            assert b"smuggled" not in r.body + rest, "%s: hidden response reached the client" % bad
            if bad in ("garbage", "cl_te"):
                assert r.status == 502, "%s upstream answer: %r" % (bad, r)
        check_no_crossed_responses(gw, 4)


def test_head_204_and_keepalive(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"HEAD /debug/headers HTTP/1.1\r\nHost: gw\r\n\r\n")
        r = c.read_response(method="HEAD")
        assert r.status == 200, r
        c.send(b"GET /debug/headers?after=head HTTP/1.1\r\nHost: gw\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.json()["path"] == "/debug/headers?after=head", r
        c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\nx-test-status: 204\r\n\r\n")
        r = c.read_response()
        assert r.status == 204, r
        c.send(b"GET /debug/headers?after=204 HTTP/1.1\r\nHost: gw\r\n\r\n")
        r = c.read_response()
        assert r.status == 200 and r.json()["path"] == "/debug/headers?after=204", r


def test_upstream_headers_pass_through(env):
    gw = env["gw"]
    r = chat(gw, k(env), headers={"x-test-status": "503"})
    assert r.status == 503 and r.headers.get("retry-after") == "1", (
        "backend 503 Retry-After not passed through: %r" % r)


def test_large_bodies(env):
    gw = env["gw"]
    r = chat(gw, k(env), dict(CHAT, max_tokens=60000), timeout=60)
    assert r.status == 200, r
    assert len(r.json()["choices"][0]["message"]["content"]) == 60000
    r = chat(gw, k(env), dict(CHAT, max_tokens=3000, stream=True), timeout=60)
    assert r.status == 200
    ev = fx.sse_events(r.body)
    assert ev[-1] == "[DONE]" and len(ev) == 3000 + 2


def test_concurrent_streams(env):
    import threading
    gw = env["gw"]
    results = []

    def one():
        try:
            r = chat(gw, k(env), dict(CHAT, stream=True, max_tokens=10),
                     headers={"x-test-chunk-delay-ms": "30"}, timeout=30)
            ev = fx.sse_events(r.body)
            results.append((r.status, ev[-1] if ev else None, len(ev)))
        except Exception as e:
            results.append(repr(e))
    ts = [threading.Thread(target=one) for _ in range(40)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    bad = [x for x in results if x != (200, "[DONE]", 12)]
    assert len(results) == 40 and not bad, bad[:5]


def test_odd_header_bytes(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"GET /debug/headers HTTP/1.1\r\nHost: gw\r\nX-Name: caf\xe9 \xff\r\n\r\n")
        try:
            r = c.read_response()
            assert r.status in (200, 400), r
        except EOFError:
            pass
    assert chat(gw, k(env)).status == 200
