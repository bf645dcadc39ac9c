"""Proxying through `gantry gateway run`: KServe v2 and OpenAI (plain and streamed) to the
real model server, usage sniffing, request ids and credential stripping, errors from the
upstream, keep-alive on both sides, and nginx as a second backend chosen by model glob."""

import json
import os
import re
import time

import pytest

import fixtures as fx
from gwtest import CHAT, INFER, base_config, chat, error_code, metric_sum, metrics


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    state = os.path.join(tmp_dir, "proxy.db")
    keys = {n: fx.create_key(state, n, r) for n, r in
            (("u1", "user"), ("admin", "admin"), ("usage", "user"))}
    nginx = gateways.service(fx.Nginx(tmpdir=tmp_dir))
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["limits"]["upstream_timeout"] = "2s"
    cfg["backends"].append({"name": "static", "url": nginx.url})
    cfg["backends"].append({"name": "down", "url": "http://127.0.0.1:%d" % fx.free_port()})
    v1 = cfg["routes"][2]
    v1["models"] = [{"match": "tiny-static", "backend": "static"},
                    {"match": "tiny-down", "backend": "down"}, {"match": "*", "backend": "llm"}]
    cfg["routes"][3]["models"] = [{"match": "tiny-static*", "backend": "static"},
                                  {"match": "*", "backend": "llm"}]
    cfg["routes"].append({"prefix": "/static/", "protocol": "http", "backend": "static",
                          "auth": "none"})
    # A quota far above anything used, so that /admin/usage counts calls and tokens.
    cfg["quotas"] = [{"scope": "key", "match": "*", "calls_per_day": 1000000,
                      "tokens_per_month": 100000000}]
    gw = gateways.start(cfg)
    return {"gw": gw, "keys": keys, "model": model, "nginx": nginx, "state": state}


def key(env, name="u1"):
    return env["keys"][name]["key"]


def last_backend_request(model, path_rx):
    reqs = [r for r in model.requests() if re.search(path_rx, r["path"])]
    assert reqs, "the backend never saw a request to %s" % path_rx
    return reqs[-1]


def test_kserve_health_metadata_infer(env):
    gw, model = env["gw"], env["model"]
    for p in ("/v2/health/ready", "/v2/health/live"):
        r = fx.request("GET", gw.url + p)
        assert r.status == 200, "GET %s (auth none route): %r" % (p, r)
    r = fx.request("GET", gw.url + "/v2/models/tiny-mlp", headers=fx.auth(key(env)))
    assert r.status == 200, r
    assert r.json()["name"] == "tiny-mlp"
    r = fx.request("GET", gw.url + "/v2/models/tiny-mlp/ready", headers=fx.auth(key(env)))
    assert r.status == 200, r
    direct = fx.request("POST", model.url + "/v2/models/tiny-mlp/infer", INFER).json()
    for path in ("/v2/models/tiny-mlp/infer", "/v2/models/tiny-mlp/versions/1/infer"):
        r = fx.request("POST", gw.url + path, INFER, fx.auth(key(env)))
        assert r.status == 200, "POST %s: %r" % (path, r)
        assert r.json()["outputs"] == direct["outputs"]
    bad = {"inputs": [dict(INFER["inputs"][0], shape=[1, 3])]}
    r = fx.request("POST", gw.url + "/v2/models/tiny-mlp/infer", bad, fx.auth(key(env)))
    assert r.status == 400, "backend 400 must pass through: %r" % r
    assert "error" in r.json()


def test_chat_non_stream_and_forwarded_headers(env):
    gw, model = env["gw"], env["model"]
    r = chat(gw, key(env), headers={"X-Custom": "kept"})
    assert r.status == 200, r
    doc = r.json()
    assert doc["object"] == "chat.completion"
    assert doc["usage"]["total_tokens"] == doc["usage"]["prompt_tokens"] + 4
    rid = r.headers.get("x-request-id")
    assert rid, "the gateway must add x-request-id to responses: %r" % r.headers
    seen = last_backend_request(model, r"^/v1/chat/completions")
    names = {k.lower(): v for k, v in seen["headers"]}
    assert "authorization" not in names, "Authorization forwarded upstream: %r" % names
    assert "x-api-key" not in names
    assert names.get("x-request-id") == rid, "upstream x-request-id %r != response %r" % (
        names.get("x-request-id"), rid)
    assert names.get("x-custom") == "kept"
    assert json.loads(seen["body"])["messages"] == CHAT["messages"]
    # x-api-key works as well and is stripped as well.
    r = chat(gw, headers={"x-api-key": key(env)})
    assert r.status == 200, r
    names = {k.lower() for k, _ in last_backend_request(model, r"^/v1/chat")["headers"]}
    assert "x-api-key" not in names and "authorization" not in names


def test_request_ids_unique(env):
    gw = env["gw"]
    c = fx.http.client.HTTPConnection("127.0.0.1", gw.port, timeout=10)
    ids = [fx.request("GET", gw.url + "/v2/health/ready", conn=c).headers.get("x-request-id")
           for _ in range(100)]
    ids += [fx.request("GET", gw.url + "/nope").headers.get("x-request-id") for _ in range(20)]
    ids.append(chat(gw).headers.get("x-request-id"))  # also on a 401
    c.close()
    assert all(ids) and len(set(ids)) == len(ids), "x-request-id missing or repeated"


def test_gateway_keys_not_leaked_on_open_routes(env):
    """A gantry key sent to an `auth: none` route is still the gateway's secret: it must not
    reach the backend either (forward_credentials is off)."""
    gw = env["gw"]
    for h in (fx.auth(key(env)), {"x-api-key": key(env)}):
        r = fx.request("GET", gw.url + "/debug/headers", headers=h)
        assert r.status == 200, r
        assert key(env) not in r.body.decode(), "gantry key forwarded on an auth-none route: %r" % h


def test_client_request_id_is_kept(env):
    gw, model = env["gw"], env["model"]
    r = chat(gw, key(env), headers={"x-request-id": "client-req-42"})
    assert r.status == 200 and r.headers.get("x-request-id") == "client-req-42", r
    names = {k.lower(): v for k, v in last_backend_request(model, r"^/v1/chat")["headers"]}
    assert names.get("x-request-id") == "client-req-42"


def test_completions_and_embeddings(env):
    gw = env["gw"]
    r = chat(gw, key(env), {"model": "tiny-lm", "prompt": "abc", "max_tokens": 3},
             path="/v1/completions")
    assert r.status == 200 and r.json()["usage"]["total_tokens"] == 6, r
    r = chat(gw, key(env), {"model": "tiny-lm", "input": "hello"}, path="/v1/embeddings")
    assert r.status == 200 and r.json()["usage"]["prompt_tokens"] == 5, r


def stream_request(gw, k, body, extra=b""):
    data = json.dumps(body).encode()
    c = fx.RawConn(gw.url, timeout=15)
    c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"
           b"Content-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" %
           (k.encode(), extra, len(data), data))
    return c


def sse_from_chunks(chunks):
    return fx.sse_events(b"".join(d for _, d in chunks))


def test_stream_is_incremental_and_hides_usage_chunk(env):
    gw = env["gw"]
    body = dict(CHAT, stream=True, max_tokens=6)
    with stream_request(gw, key(env), body, b"x-test-chunk-delay-ms: 300\r\n") as c:
        st, h = c.read_head()
        assert st == 200, (st, h)
        assert h.get("content-type", "").startswith("text/event-stream")
        arrivals = []
        for t, d in c.iter_chunks():
            arrivals.append((t, d))
    events = sse_from_chunks(arrivals)
    assert events[-1] == "[DONE]", events
    parsed = [json.loads(e) for e in events[:-1]]
    assert len(parsed) == 7, "role chunk + 6 tokens expected, got %d: %r" % (len(parsed), events)
    for p in parsed:
        assert p["choices"], "client did not ask for include_usage but got a usage chunk: %r" % p
        assert not p.get("usage"), "usage leaked into a chunk: %r" % p
    text = "".join(p["choices"][0]["delta"].get("content", "") for p in parsed)
    assert len(text) == 6
    # Incremental: the backend needs >= 7 x 300 ms for the whole stream; the first event
    # must reach us long before the last one (a buffering proxy delivers them together).
    first = next(t for t, d in arrivals if b"data:" in d)
    last = arrivals[-1][0]
    assert last - first > 1.0, "stream was buffered: first and last event %.3fs apart" % (
        last - first)


def test_stream_with_include_usage(env):
    gw = env["gw"]
    body = dict(CHAT, stream=True, stream_options={"include_usage": True}, max_tokens=3)
    with stream_request(gw, key(env), body) as c:
        r = c.read_response()
    assert r.status == 200, r
    events = fx.sse_events(r.body)
    assert events[-1] == "[DONE]"
    final = json.loads(events[-2])
    assert final["choices"] == [] and final["usage"]["completion_tokens"] == 3, events


def test_usage_is_counted(env):
    gw = env["gw"]
    k = env["keys"]["usage"]
    before = metric_sum(metrics(gw), r"^gantry_gateway_tokens_total$") or 0.0
    r = chat(gw, k["key"], dict(CHAT, max_tokens=7))  # 5 prompt + 7 completion
    assert r.status == 200, r
    with stream_request(gw, k["key"], dict(CHAT, stream=True, max_tokens=4)) as c:  # 5 + 4
        assert c.read_response().status == 200
    want = 21

    def usage():
        r = fx.request("GET", gw.url + "/admin/usage?key=" + k["id"],
                       headers=fx.auth(key(env, "admin")))
        assert r.status == 200, "GET /admin/usage: %r" % r
        rows = r.json()["usage"]
        calls = max([u["calls"] for u in rows] or [0])
        tokens = max([u["tokens"] for u in rows] or [0])
        return (calls, tokens) if (calls, tokens) == (2, want) else None

    try:
        fx.wait_until(usage, timeout=5, what="/admin/usage showing 2 calls, %d tokens" % want)
    finally:
        print(fx.request("GET", gw.url + "/admin/usage?key=" + k["id"],
                         headers=fx.auth(key(env, "admin"))).body)
    after = metric_sum(metrics(gw), r"^gantry_gateway_tokens_total$")
    assert after is not None, "no gantry_gateway_tokens_total in /metrics"
    assert after - before >= want, "token counter grew by %s, expected >= %d" % (
        after - before, want)


def test_usage_counted_when_client_opts_out(env):
    """stream_options.include_usage false (or a chunked non-stream answer) must not hide
    tokens from the gateway's counters; the client still gets no usage chunk."""
    gw = env["gw"]
    k = fx.create_key(env["state"], "optout", "user")
    fx.wait_until(lambda: chat(gw, k["key"], dict(CHAT, max_tokens=1)).status == 200, 5,
                  what="new key usable")  # 5 + 1 tokens
    body = dict(CHAT, stream=True, max_tokens=5, stream_options={"include_usage": False})
    with stream_request(gw, k["key"], body) as c:
        r = c.read_response()
    assert r.status == 200
    events = fx.sse_events(r.body)
    assert all(json.loads(e)["choices"] for e in events[:-1]), "usage chunk shown: %r" % events
    r = chat(gw, k["key"], dict(CHAT, max_tokens=3), headers={"x-test-chunked": "1"})
    assert r.status == 200 and r.json()["usage"]["total_tokens"] == 8, r
    want = 6 + 10 + 8

    def tokens():
        r = fx.request("GET", gw.url + "/admin/usage?key=" + k["id"],
                       headers=fx.auth(key(env, "admin")))
        return max([u["tokens"] for u in r.json()["usage"]] or [0])
    fx.wait_until(lambda: tokens() == want, timeout=5,
                  what="%d tokens counted (opt-out stream + chunked answer)" % want)


def test_usage_counted_for_completions_stream_and_embeddings(env):
    gw = env["gw"]
    k = fx.create_key(env["state"], "emb", "user")
    fx.wait_until(lambda: chat(gw, k["key"], {"model": "tiny-lm", "input": "hello"},
                               path="/v1/embeddings").status == 200, 5,
                  what="new key usable")  # 5 tokens
    r = chat(gw, k["key"], {"model": "tiny-lm", "prompt": "abc", "max_tokens": 4,
                            "stream": True}, path="/v1/completions")  # 3 + 4
    assert r.status == 200 and fx.sse_events(r.body)[-1] == "[DONE]", r
    assert all(json.loads(e)["choices"] for e in fx.sse_events(r.body)[:-1])
    want = 12

    def tokens():
        r = fx.request("GET", gw.url + "/admin/usage?key=" + k["id"],
                       headers=fx.auth(key(env, "admin")))
        return max([u["tokens"] for u in r.json()["usage"]] or [0])
    fx.wait_until(lambda: tokens() == want, timeout=5,
                  what="%d tokens (embeddings 5 + completions stream 7)" % want)


def test_request_body_framings(env):
    gw = env["gw"]
    body = json.dumps(CHAT).encode()
    auth = b"Authorization: Bearer %s\r\n" % key(env).encode()
    with fx.RawConn(gw.url) as c:  # chunked request body, two chunks + extension + trailer
        half = len(body) // 2
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + auth +
               b"Transfer-Encoding: chunked\r\n\r\n%x;ext=1\r\n%s\r\n%x\r\n%s\r\n0\r\n"
               b"X-Trailer: t\r\n\r\n" % (half, body[:half], len(body) - half, body[half:]))
        r = c.read_response()
        assert r.status == 200, "chunked request body: %r" % r
        assert r.json()["usage"]["completion_tokens"] == 4
    with fx.RawConn(gw.url) as c:  # Expect: 100-continue
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + auth +
               b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        c.sock.settimeout(3)
        try:
            st, _ = c.read_head()
            assert st == 100, "answer to Expect before the body: %d" % st
        except OSError:
            pass  # no 100 is allowed; the client sends the body anyway
        c.sock.settimeout(10)
        c.send(body)
        r = c.read_response()
        assert r.status == 200, "Expect: 100-continue: %r" % r


def test_hop_by_hop_headers_not_forwarded(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"GET /debug/headers HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive, X-Hop\r\n"
               b"X-Hop: secret\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eDp5"
               b"\r\nTE: trailers\r\nX-End: kept\r\n\r\n")
        r = c.read_response()
    assert r.status == 200, r
    names = {k_.lower() for k_, _ in r.json()["headers"]}
    leaked = names & {"x-hop", "keep-alive", "proxy-authorization", "te"}
    assert not leaked, "hop-by-hop headers forwarded upstream: %r" % leaked
    assert "x-end" in names


def test_invalid_client_request_id_replaced(env):
    gw = env["gw"]
    for bad in ("has spaces and <script>", "x" * 300):
        r = chat(gw, key(env), headers={"x-request-id": bad})
        assert r.status == 200
        rid = r.headers.get("x-request-id")
        assert rid and rid != bad, "invalid client x-request-id %r echoed back" % bad[:40]


def test_unknown_route_is_404_json(env):
    gw = env["gw"]
    for method, path in (("GET", "/nope"), ("POST", "/v3/models/x/infer"), ("GET", "/")):
        r = fx.request(method, gw.url + path, headers=fx.auth(key(env)))
        assert r.status == 404, "%s %s: %r" % (method, path, r)
        assert r.headers.get("content-type", "").startswith("application/json")
        error_code(r)


def test_keep_alive_many_requests_one_connection(env):
    gw, model = env["gw"], env["model"]
    before = model.stats()["connections"]
    with fx.RawConn(gw.url) as c:
        body = json.dumps(CHAT).encode()
        for i in range(60):
            if i % 2:
                c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: "
                       b"Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d"
                       b"\r\n\r\n%s" % (key(env).encode(), len(body), body))
            else:
                c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n")
            r = c.read_response()
            assert r.status == 200, "request %d on one connection: %r" % (i, r)
            assert r.headers.get("connection", "").lower() != "close", r.headers
    opened = model.stats()["connections"] - before
    # 60 proxied requests; pooled upstream connections mean only a few new ones (the
    # stats calls themselves open 1).
    assert opened <= 6, "gateway opened %d upstream connections for 60 requests" % opened


def test_pipelined_requests_answered_in_order(env):
    gw = env["gw"]
    with fx.RawConn(gw.url) as c:
        c.send(b"".join(b"GET /debug/headers?n=%d HTTP/1.1\r\nHost: gw\r\n\r\n" % i
                        for i in range(3)))
        got = []
        try:
            for _ in range(3):
                r = c.read_response()
                assert r.status == 200, r
                got.append(r.json()["path"])
        except EOFError:
            pass  # closing after the first answer is allowed; answering out of order is not
    assert got and got == ["/debug/headers?n=%d" % i for i in range(len(got))], got


def test_nginx_backend_by_model_and_route(env):
    gw = env["gw"]
    r = chat(gw, key(env), dict(CHAT, model="tiny-static"))
    assert r.status == 200 and r.json()["id"] == "chatcmpl-static", r
    r = fx.request("GET", gw.url + "/static/anything")
    assert r.status == 200 and r.json()["usage"]["total_tokens"] == 7, r
    r = fx.request("POST", gw.url + "/v2/models/tiny-static-mlp/infer", INFER, fx.auth(key(env)))
    assert r.status == 200 and r.json()["id"] == "chatcmpl-static", (
        "KServe model tiny-static-mlp must go to the static backend: %r" % r)


def test_upstream_errors(env):
    gw = env["gw"]
    r = chat(gw, key(env), headers={"x-test-status": "503"})
    assert r.status == 503, "backend 503 must pass through: %r" % r
    r = chat(gw, key(env), headers={"x-test-status": "drop"})
    assert r.status == 502, "backend closed without answering -> 502: %r" % r
    error_code(r)
    r = chat(gw, key(env), dict(CHAT, model="tiny-down"))
    assert r.status == 502, "backend down -> 502: %r" % r
    error_code(r)
    r = chat(gw, key(env), headers={"x-test-latency-ms": "4000"})  # upstream_timeout 2s
    assert r.status == 504, "no first byte within upstream_timeout -> 504: %r" % r
    error_code(r)
    # the gateway still serves normally afterwards
    assert chat(gw, key(env)).status == 200


def test_stream_cut_by_backend_is_not_completed(env):
    gw = env["gw"]
    with stream_request(gw, key(env), dict(CHAT, stream=True, max_tokens=8),
                        b"x-test-close-after-chunks: 3\r\n") as c:
        st, h = c.read_head()
        assert st == 200
        got = b""
        try:
            for _, d in c.iter_chunks():
                got += d
            completed = True
        except (EOFError, ConnectionResetError, ValueError):
            completed = False
    # The client must be able to tell: no [DONE], and the chunked body is not terminated.
    assert b"[DONE]" not in got
    assert not completed, "gateway ended the chunked body cleanly after an upstream cut"
    assert chat(gw, key(env)).status == 200
    time.sleep(0)
