"""The harness itself, without the gateway: the model server speaks KServe v2 and OpenAI
(stream and not), the knobs work, nginx serves static JSON with keep-alive, redis-server
starts and stops, promtool is installed. If these fail, the gateway suites cannot be
trusted either way."""

import json
import shutil
import socket
import subprocess

import fixtures as fx

CHAT = {"model": "tiny-lm", "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 5}


def test_kserve(model):
    assert fx.request("GET", model.url + "/v2/health/ready").status == 200
    assert fx.request("GET", model.url + "/v2/health/live").status == 200
    st, meta = fx.get_json(model.url + "/v2/models/tiny-mlp")
    assert st == 200 and meta["inputs"][0]["shape"] == [-1, 4]
    body = {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 4],
                        "data": [1, 2, 3, 4, 5, 6, 7, 8]}]}
    r1 = fx.request("POST", model.url + "/v2/models/tiny-mlp/infer", body)
    r2 = fx.request("POST", model.url + "/v2/models/tiny-mlp/versions/1/infer", body)
    assert r1.status == 200, r1
    out = r1.json()["outputs"][0]
    assert out["shape"] == [2, 3] and len(out["data"]) == 6
    assert r2.json()["outputs"] == r1.json()["outputs"]  # same seeded model
    bad = dict(body, inputs=[dict(body["inputs"][0], datatype="INT8")])
    r = fx.request("POST", model.url + "/v2/models/tiny-mlp/infer", bad)
    assert r.status == 400 and "error" in r.json()
    assert fx.request("GET", model.url + "/v2/models/nope").status == 404


def test_openai_non_stream(model):
    r = fx.request("POST", model.url + "/v1/chat/completions", CHAT)
    assert r.status == 200
    doc = r.json()
    assert doc["object"] == "chat.completion"
    u = doc["usage"]
    assert u["prompt_tokens"] == 5 and u["completion_tokens"] == 5 and u["total_tokens"] == 10
    r = fx.request("POST", model.url + "/v1/completions",
                   {"model": "tiny-lm", "prompt": "abc", "max_tokens": 3})
    assert r.status == 200 and r.json()["usage"]["total_tokens"] == 6
    r = fx.request("POST", model.url + "/v1/embeddings", {"model": "tiny-lm", "input": ["a", "bc"]})
    assert r.status == 200 and len(r.json()["data"]) == 2
    assert r.json()["usage"]["prompt_tokens"] == 3
    r = fx.request("POST", model.url + "/v1/chat/completions", b"{not json",
                   {"Content-Type": "application/json"})
    assert r.status == 400
    st, models = fx.get_json(model.url + "/v1/models")
    assert st == 200 and "tiny-lm" in [m["id"] for m in models["data"]]


def test_openai_stream_usage_chunk(model):
    body = dict(CHAT, stream=True, stream_options={"include_usage": True})
    r = fx.request("POST", model.url + "/v1/chat/completions", body)
    ev = fx.sse_events(r.body)
    assert ev[-1] == "[DONE]"
    last = json.loads(ev[-2])
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 5
    assert all(json.loads(e)["usage"] is None for e in ev[:-2])
    r = fx.request("POST", model.url + "/v1/chat/completions", dict(CHAT, stream=True))
    ev = fx.sse_events(r.body)
    assert all(json.loads(e)["choices"] and "usage" not in json.loads(e) for e in ev[:-1])


def test_stream_is_incremental(model):
    body = json.dumps(dict(CHAT, stream=True)).encode()
    with fx.RawConn(model.url) as c:
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
               b"\r\nx-test-chunk-delay-ms: 200\r\nContent-Length: %d\r\n\r\n%s" %
               (len(body), body))
        st, h = c.read_head()
        assert st == 200 and h["transfer-encoding"] == "chunked"
        times = [t for t, _ in c.iter_chunks()]
    # 7 events 200 ms apart: the first must arrive well before the last was produced.
    assert len(times) == 7
    assert times[-1] - times[0] > 0.5


def test_knobs(model):
    r = fx.request("POST", model.url + "/v1/chat/completions", CHAT, {"x-test-status": "503"})
    assert r.status == 503 and r.headers.get("retry-after") == "1"
    r = fx.request("POST", model.url + "/v1/chat/completions", CHAT,
                   {"x-test-completion-tokens": "5000"})
    assert r.json()["usage"]["completion_tokens"] == 5000
    r = fx.request("POST", model.url + "/v1/chat/completions", CHAT, {"x-test-chunked": "1"})
    assert r.status == 200 and r.headers["transfer-encoding"] == "chunked" and r.json()["usage"]
    with fx.RawConn(model.url) as c:
        body = json.dumps(dict(CHAT, stream=True)).encode()
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nx-test-close-after-chunks: 2"
               b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        st, _ = c.read_head()
        assert st == 200
        got = c.read_to_close(timeout=5)
        assert b"[DONE]" not in got and got.count(b"data:") == 2
    with fx.RawConn(model.url) as c:
        c.send(b"GET /v2 HTTP/1.1\r\nHost: t\r\nx-test-status: drop\r\n\r\n")
        assert c.read_to_close(timeout=5) == b""
    r = fx.request("GET", model.url + "/debug/headers", headers={"X-Probe": "1"})
    assert ["X-Probe", "1"] in r.json()["headers"]
    model.reset()
    fx.request("GET", model.url + "/v2?x=1")
    assert [q["path"] for q in model.requests()] == ["/v2?x=1"]


def test_keep_alive(model):
    c = fx.http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    before = model.stats()["connections"]
    for _ in range(20):
        assert fx.request("GET", model.url + "/v2", conn=c).status == 200
    c.close()
    assert model.stats()["connections"] - before <= 2  # 1 + the stats call's own


def test_nginx_static_backend(tmp_dir):
    with fx.Nginx(tmpdir=tmp_dir, workers=1) as n:
        c = fx.http.client.HTTPConnection("127.0.0.1", n.port, timeout=10)
        for path in ("/", "/v1/chat/completions", "/anything/else"):
            r = fx.request("POST", n.url + path, {"x": 1}, conn=c)
            assert r.status == 200 and r.json()["usage"]["total_tokens"] == 7
        c.close()
    with socket.socket() as s:  # stopped: port closed
        assert s.connect_ex(("127.0.0.1", n.port)) != 0


def test_redis(tmp_dir):
    with fx.Redis(tmpdir=tmp_dir) as r:
        assert r.command("PING") == b"+PONG\r\n"
        port = r.port
        r.kill()
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0


def test_promtool_present():
    exe = fx.need_tool("promtool", "prometheus")
    good = b"# HELP x_total A counter.\n# TYPE x_total counter\nx_total 1\n"
    assert subprocess.run([exe, "check", "metrics"], input=good).returncode == 0
    bad = b"# TYPE x counter\nx{a=\"1\" 1\n"
    assert subprocess.run([exe, "check", "metrics"], input=bad,
                          capture_output=True).returncode != 0


def test_tools_for_bench_present():
    for tool, pkg in (("wrk", "wrk"), ("haproxy", "haproxy")):
        fx.need_tool(tool, pkg)
    assert shutil.which("redis-server"), "redis-server missing (Debian package redis-server)"


def test_smuggling_detector_sees_smuggled_requests(model):
    """The hostile suite's check ("the backend never sees the smuggled request") is only
    worth something if a smuggled request shows up in /debug/requests: send the CL+TE case
    straight to the (naive) model server, which reads it as two requests."""
    from test_hostile import smuggling_cases
    model.reset()
    with fx.RawConn(model.url) as c:
        c.send(smuggling_cases()["cl_te"])
        c.read_response()
        c.read_response()
    paths = [q["path"] for q in model.requests()]
    assert any("smuggled=cl_te" in p for p in paths), paths


def test_error_rate_flag(tmp_dir):
    with fx.ModelServer(tmpdir=tmp_dir, args=["--error-rate", "1", "--error-status", "500",
                                              "--latency-ms", "1"]) as m:
        r = fx.request("POST", m.url + "/v1/chat/completions", CHAT)
        assert r.status == 500 and r.json()["error"]["code"] == 500
        assert fx.request("GET", m.url + "/debug/stats").status == 200  # debug: no injection
