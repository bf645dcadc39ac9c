"""Hostile clients: every way in without valid credentials must be a 401, every way past
RBAC a 403, every ambiguous or malformed HTTP/1.1 framing a 400 with the connection closed
(and the pipelined request behind it never reaching the backend), oversized input 431/413,
slow headers 408 while normal clients are still served. Zero bypasses: each case is its own
assertion message naming the attack."""

import json
import os
import select
import socket
import time

import pytest

import fixtures as fx
import jwtutil
from gwtest import AUDIENCE, CHAT, INFER, ISSUER, base_config, chat, error_code


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir, jwt_keys):
    state = os.path.join(tmp_dir, "hostile.db")
    keys = {n: fx.create_key(state, n, r) for n, r in
            (("u1", "user"), ("admin", "admin"), ("reader", "reader"), ("victim", "user"))}
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["auth"] = {"api_keys": True, "jwt": jwt_keys.config(ISSUER, AUDIENCE)}
    gw = gateways.start(cfg)
    adm = fx.auth(keys["admin"]["key"])
    # a revoked key and a key that expires in 1 s, both through the admin API
    r = fx.request("POST", gw.url + "/admin/keys", {"name": "revoked", "role": "user"}, adm)
    assert r.status == 201, "POST /admin/keys: %r" % r
    keys["revoked"] = r.json()
    r = fx.request("DELETE", gw.url + "/admin/keys/" + keys["revoked"]["id"], headers=adm)
    assert r.status == 200, "DELETE /admin/keys/ID: %r" % r
    r = fx.request("POST", gw.url + "/admin/keys",
                   {"name": "expiring", "role": "user", "expires_in_s": 1}, adm)
    assert r.status == 201, "POST /admin/keys with expires_in_s: %r" % r
    keys["expiring"] = r.json()
    keys["expiring_created"] = time.time()
    return {"gw": gw, "keys": keys, "model": model, "jwt": jwt_keys}


def k(env, name):
    return env["keys"][name]["key"]


def assert_401(r, what):
    assert r.status == 401, "%s: expected 401, got %r" % (what, r)
    assert r.headers.get("www-authenticate", "").lower().startswith("bearer"), (
        "%s: 401 without WWW-Authenticate: Bearer: %r" % (what, r.headers))
    error_code(r)


def test_valid_credentials_work(env):
    """Positive control: without it every 401 below could be a broken gateway."""
    gw = env["gw"]
    assert chat(gw, k(env, "u1")).status == 200
    assert chat(gw, headers={"x-api-key": k(env, "u1")}).status == 200


def test_missing_and_wrong_api_keys(env):
    gw = env["gw"]
    good = k(env, "u1")
    flipped = good[:-1] + ("A" if good[-1] != "A" else "B")
    cases = {
        "no credentials": {},
        "empty bearer": {"Authorization": "Bearer "},
        "scheme only": {"Authorization": "Bearer"},
        "unknown key": {"Authorization": "Bearer gk_thisisnotakey0000000000000000"},
        "last char changed": {"Authorization": "Bearer " + flipped},
        "key + suffix": {"Authorization": "Bearer " + good + "x"},
        "key prefix only": {"Authorization": "Bearer " + good[:12]},
        "basic auth": {"Authorization": "Basic dTE6cGFzcw=="},
        "key without scheme": {"Authorization": good},
        "empty x-api-key": {"x-api-key": ""},
        "wrong x-api-key": {"x-api-key": flipped},
    }
    for what, h in cases.items():
        assert_401(chat(gw, headers=h), what)


def test_key_in_query_string_is_ignored(env):
    gw = env["gw"]
    for q in ("api_key", "key", "access_token", "x-api-key"):
        r = chat(gw, path="/v1/chat/completions?%s=%s" % (q, k(env, "u1")))
        assert_401(r, "key in query ?%s=" % q)


def test_revoked_and_expired_keys(env):
    gw = env["gw"]
    assert_401(chat(gw, k(env, "revoked")), "revoked key")
    left = env["keys"]["expiring_created"] + 2.2 - time.time()
    if left > 0:
        time.sleep(left)
    assert_401(chat(gw, k(env, "expiring")), "expired key (expires_in_s 1, used 2 s later)")


def test_jwt_valid_tokens_work(env):
    gw, jk = env["gw"], env["jwt"]
    c = jwtutil.claims(ISSUER, AUDIENCE)
    r = fx.request("GET", gw.url + "/admin/keys",
                   headers=fx.auth(jk.es256(jwtutil.claims(ISSUER, AUDIENCE, role="admin"))))
    assert r.status == 200, "JWT with role admin on GET /admin/keys: %r" % r
    for what, tok in (("HS256", jk.hs256(c)), ("RS256", jk.rs256(c)), ("ES256", jk.es256(c)),
                      ("role array", jk.rs256(dict(c, role=["user"]))),
                      ("aud as string", jk.rs256(dict(c, aud=AUDIENCE))),
                      ("exp 10 s ago, within leeway 30s", jk.rs256(dict(c, exp=int(time.time()) - 10))),
                      ("nbf in 10 s, within leeway 30s", jk.rs256(dict(c, nbf=int(time.time()) + 10)))):
        r = chat(gw, tok)
        assert r.status == 200, "valid %s JWT: %r" % (what, r)


def test_jwt_from_gantry_gateway_token(env):
    """`gantry gateway token` (the CLI's JWT signer) makes tokens the gateway accepts, and
    its role claim is enforced."""
    gw, jk = env["gw"], env["jwt"]
    base = ["gateway", "token", "--iss", ISSUER, "--aud", AUDIENCE, "--sub", "cli"]
    for alg, kid, keyfile in (("RS256", "k2", jk.rsa_priv_file), ("HS256", "k1", jk.secret_file)):
        tok = fx.gantry(*(base + ["--alg", alg, "--kid", kid, "--key-file", keyfile,
                                  "--role", "user"])).stdout.strip()
        r = chat(gw, tok)
        assert r.status == 200, "gantry gateway token --alg %s: %r" % (alg, r)
        r = chat(gw, tok, dict(CHAT, model="big-lm"))
        assert r.status == 403, "CLI token role user, model big-lm: %r" % r


def test_jwt_attacks(env):
    gw, jk = env["gw"], env["jwt"]
    now = int(time.time())
    c = jwtutil.claims(ISSUER, AUDIENCE)
    cases = {
        "expired (beyond 30 s leeway)": jk.rs256(dict(c, exp=now - 120)),
        "not yet valid (nbf in 2 min)": jk.rs256(dict(c, nbf=now + 120)),
        "wrong issuer": jk.rs256(dict(c, iss="https://evil.example")),
        "wrong audience": jk.rs256(dict(c, aud="other")),
        "wrong audience list": jk.rs256(dict(c, aud=["other", "more"])),
        "forged RS256 signature": jwtutil.flip_signature(jk.rs256(c)),
        "forged HS256 signature": jwtutil.flip_signature(jk.hs256(c)),
        "forged ES256 signature": jwtutil.flip_signature(jk.es256(c)),
        "HS256 with a different secret": jk.hs256(c, secret=b"x" * 32),
        "alg=none (kid k1)": jwtutil.alg_none(c, "k1"),
        "alg=none (kid k2)": jwtutil.alg_none(c, "k2"),
        "alg=none, signature dropped": jwtutil.alg_none(c).rstrip("."),
        "HS256 keyed with the RSA public key (kid k2)": jk.hs256(c, kid="k2",
                                                                  secret=jk.rsa_pub_pem),
        "HS256 keyed with the RSA public key (kid k1)": jk.hs256(c, kid="k1",
                                                                  secret=jk.rsa_pub_pem),
        "RS256 token under the HS256 kid": jk.rs256(c, kid="k1"),
        "unknown kid": jk.rs256(c, kid="k9"),
        "kid path traversal": jk.rs256(c, kid="../../../../etc/passwd"),
        "no kid": jwtutil.encode({"alg": "RS256", "typ": "JWT"}, c,
                                 lambda si: b"\x00" * 256),
        "missing aud": jk.rs256({x: y for x, y in c.items() if x != "aud"}),
        "missing iss": jk.rs256({x: y for x, y in c.items() if x != "iss"}),
        "exp as a string": jk.rs256(dict(c, exp=str(now + 600) + "x")),
        "ES256 key, alg ES512 header": jwtutil.encode(
            {"alg": "ES512", "kid": "k3"}, c, lambda si: b"\x01" * 132),
        "embedded jwk (attacker key)": jwtutil.embedded_jwk_token(c, "k2"),
        "two segments": ".".join(jk.rs256(c).split(".")[:2]),
        "garbage": "eyJhbGciOi.not.a.jwt",
    }
    for what, tok in cases.items():
        assert_401(chat(gw, tok), "JWT " + what)


def test_body_timeout_and_slow_body(env):
    """Headers arrive at once, the body one byte per second: body_timeout (5 s) must end it
    (408 or a close), while a normal client is served meanwhile."""
    gw = env["gw"]
    body = json.dumps(CHAT).encode()
    with fx.RawConn(gw.url, timeout=20) as c:
        c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"
               b"Content-Length: %d\r\n\r\n" % (k(env, "u1").encode(), len(body)))
        answered = b""
        closed = False  # the gateway ended the request (408 or a close) before the body did
        for i in range(len(body)):
            try:
                c.send(body[i:i + 1])
            except OSError:
                closed = True
                break
            if i == 1:
                assert chat(gw, k(env, "u1"), timeout=10).status == 200
            rd, _, _ = select.select([c.sock], [], [], 1.0)
            if rd:
                answered = drain(c.sock)
                closed = True
                break
        if not closed:
            answered = drain(c.sock)
    # No clock in the assertion: the body needs a byte per second for its whole length, far
    # longer than body_timeout, so finishing it means the timeout never fired.
    assert closed, "the whole body was accepted at 1 byte/s: body_timeout (5 s) never fired"
    assert answered == b"" or answered.startswith(b"HTTP/1.1 408"), answered[:200]


def test_max_connections(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "maxconn.db")
    key = fx.create_key(state, "u", "user")["key"]
    cfg = base_config(g.tmp, model.url, state=state)
    cfg["limits"]["max_connections"] = 20
    gw = g.start(cfg)
    host, port, _ = fx._split(gw.url)
    held = [socket.create_connection((host, port), timeout=5) for _ in range(40)]
    try:
        time.sleep(0.5)
        closed = sum(1 for s_ in held if select.select([s_], [], [], 0)[0])
        try:
            extra = chat(gw, key, timeout=2).status
        except OSError as e:
            extra = repr(e)
        print("max_connections 20: %d of 40 idle connections answered/closed; a 41st "
              "request got %s" % (closed, extra))
        assert closed >= 15 or extra != 200, (
            "max_connections 20 not enforced: 40 idle connections held, none closed, and "
            "another request was served")
    finally:
        for s_ in held:
            s_.close()

    def serving():
        try:
            return chat(gw, key, timeout=5).status == 200
        except (OSError, fx.http.client.HTTPException):
            return False
    fx.wait_until(serving, timeout=10, interval=0.2,
                  what="serving again after the excess connections closed")


def test_rbac_no_escalation(env):
    gw = env["gw"]
    u = fx.auth(k(env, "u1"))
    cases = [
        ("user POST /admin/keys", "POST", "/admin/keys", {"name": "x", "role": "admin"}, u),
        ("user GET /admin/keys", "GET", "/admin/keys", None, u),
        ("user DELETE another key", "DELETE", "/admin/keys/" + env["keys"]["victim"]["id"],
         None, u),
        ("user rotate another key", "POST", "/admin/keys/%s/rotate" % env["keys"]["victim"]["id"],
         {}, u),
        ("user GET /admin/usage", "GET", "/admin/usage", None, u),
        ("user chat with big-lm (outside tiny-*)", "POST", "/v1/chat/completions",
         dict(CHAT, model="big-lm"), u),
        ("user KServe big-mlp (outside tiny-*)", "POST", "/v2/models/big-mlp/infer", INFER, u),
        ("reader chat", "POST", "/v1/chat/completions", CHAT, fx.auth(k(env, "reader"))),
        ("reader POST /admin/keys", "POST", "/admin/keys", {"name": "y", "role": "admin"},
         fx.auth(k(env, "reader"))),
    ]
    for what, method, path, body, h in cases:
        r = fx.request(method, env["gw"].url + path, body, h)
        assert r.status == 403, "%s: expected 403, got %r" % (what, r)
        error_code(r)
    # The victim key still works (nothing above revoked or rotated it).
    assert chat(gw, k(env, "victim")).status == 200
    # positive control: reader may read usage
    r = fx.request("GET", gw.url + "/admin/usage", headers=fx.auth(k(env, "reader")))
    assert r.status == 200, "reader GET /admin/usage: %r" % r
    jk = env["jwt"]
    tok = jk.rs256(jwtutil.claims(ISSUER, AUDIENCE, role="user"))
    r = chat(gw, tok, dict(CHAT, model="big-lm"))
    assert r.status == 403, "JWT role user, model big-lm: %r" % r


def test_model_name_tricks(env):
    """The gateway must authorize the model the backend will run."""
    gw, model = env["gw"], env["model"]
    h = dict(fx.auth(k(env, "u1")), **{"Content-Type": "application/json"})
    raw = {
        "duplicate model keys": b'{"model":"tiny-lm","messages":[{"role":"user","content":"hi"}],'
                                b'"model":"big-lm"}',
        "escaped model name": b'{"model":"\\u0062ig-lm","messages":[{"role":"user",'
                              b'"content":"hi"}]}',
        "model not a string": b'{"model":["tiny-lm"],"messages":[{"role":"user","content":"hi"}]}',
        "no model": b'{"messages":[{"role":"user","content":"hi"}]}',
    }
    for what, body in raw.items():
        model.reset()
        r = fx.request("POST", gw.url + "/v1/chat/completions", body, h)
        if r.status == 200:
            assert r.json()["model"].startswith("tiny-"), (
                "%s: backend ran %r for a tiny-* key" % (what, r.json()["model"]))
        else:
            assert r.status in (400, 403), "%s: %r" % (what, r)
    # escaped but allowed name is still allowed
    body = b'{"model":"tiny\\u002dlm","messages":[{"role":"user","content":"hi"}]}'
    r = fx.request("POST", gw.url + "/v1/chat/completions", body, h)
    assert r.status == 200, "model tiny\\u002dlm (= tiny-lm): %r" % r


TYPE_CONFUSION = [
    # OpenAI bodies the gateway sniffs (model, stream, stream_options, max_tokens)
    ("/v1/chat/completions", {"model": 5, "messages": []}),
    ("/v1/chat/completions", {"model": None}),
    ("/v1/chat/completions", {"model": {"a": 1}}),
    ("/v1/chat/completions", {"model": "tiny-lm", "stream": "yes", "messages": "x"}),
    ("/v1/chat/completions", {"model": "tiny-lm", "stream": True, "stream_options": "x",
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "tiny-lm", "stream": True,
                              "stream_options": {"include_usage": "yes"},
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "tiny-lm", "max_tokens": "many",
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/chat/completions", {"model": "tiny-lm", "max_tokens": 1e308,
                              "messages": [{"role": "user", "content": "hi"}]}),
    ("/v1/completions", {"model": "tiny-lm", "prompt": ["a", 1], "max_tokens": -1}),
    ("/v1/embeddings", {"model": "tiny-lm", "input": {"x": 1}}),
    ("/v1/chat/completions", [1, 2, 3]),
    ("/v1/chat/completions", "just a string"),
    ("/v1/chat/completions", {"model": "tiny-lm", "messages": [[[[[[[[[[[[[[[]]]]]]]]]]]]]]]}),
    # KServe
    ("/v2/models/tiny-mlp/infer", {"inputs": "x"}),
    ("/v2/models/tiny-mlp/infer", {"inputs": [{"datatype": 5, "shape": "x", "data": None}]}),
    ("/v2/models/tiny-mlp/infer", []),
    # admin API (admin key)
    ("/admin/keys", {"name": 5, "role": "user"}),
    ("/admin/keys", {"name": "x", "role": None}),
    ("/admin/keys", {"name": "x", "role": ["admin"]}),
    ("/admin/keys", {"name": ["x"], "role": {"r": 1}}),
    ("/admin/keys", {"name": "x", "role": "user", "expires_in_s": [1]}),
]


def test_json_type_confusion_always_answered(env):
    """Wrong JSON types in every body the gateway reads: each gets an answer (2xx from the
    backend, or 400/403 from the gateway) quickly; none hangs or kills the connection."""
    gw = env["gw"]
    failures = []
    for path, body in TYPE_CONFUSION:
        who = "admin" if path.startswith("/admin/") else "u1"
        try:
            r = fx.request("POST", gw.url + path, body, fx.auth(k(env, who)), timeout=5)
            if r.status >= 500 or r.status in (401, 404):
                failures.append("POST %s %s -> %d %r" % (path, json.dumps(body)[:60], r.status,
                                                         r.body[:80]))
        except (OSError, fx.http.client.HTTPException) as e:
            failures.append("POST %s %s -> no answer (%s)" % (path, json.dumps(body)[:60],
                                                             e.__class__.__name__))
    assert not failures, "\n  ".join(["bodies not answered properly:"] + failures)
    assert chat(env["gw"], k(env, "u1")).status == 200


def test_deeply_nested_json(env):
    """30000 nested arrays (60 KB, under max_body_bytes): a recursive parser or destructor
    would overflow the stack."""
    gw = env["gw"]
    for path, who in (("/v1/chat/completions", "u1"), ("/admin/keys", "admin"),
                      ("/v2/models/tiny-mlp/infer", "u1")):
        body = b'{"model":"tiny-lm","messages":' + b"[" * 30000 + b"]" * 30000 + b"}"
        try:
            r = fx.request("POST", gw.url + path, body, dict(fx.auth(k(env, who)), **{
                "Content-Type": "application/json"}), timeout=10)
            assert r.status in (200, 400, 413), "%s: %r" % (path, r)
        except (OSError, fx.http.client.HTTPException) as e:
            pytest.fail("%s with deeply nested JSON: no answer (%s); gateway alive: %s" % (
                path, e.__class__.__name__, gw.proc.alive()))
    assert gw.proc.alive()
    assert chat(gw, k(env, "u1")).status == 200


def test_jwt_claim_type_confusion(env):
    gw, jk = env["gw"], env["jwt"]
    c = jwtutil.claims(ISSUER, AUDIENCE)
    failures = []
    for what, over in (("role number", {"role": 5}), ("role object", {"role": {"a": "admin"}}),
                       ("role null", {"role": None}), ("role list of lists", {"role": [["admin"]]}),
                       ("aud number", {"aud": 7}), ("exp float", {"exp": time.time() + 600.5}),
                       ("exp huge", {"exp": 1e300}), ("iss list", {"iss": [ISSUER]}),
                       ("sub object", {"sub": {"x": 1}}), ("nbf string", {"nbf": "0"})):
        tok = jk.rs256(dict(c, **over))
        try:
            r = chat(gw, tok, timeout=5)
        except (OSError, fx.http.client.HTTPException) as e:
            failures.append("%s: no answer (%s)" % (what, e.__class__.__name__))
            continue
        if r.status == 200 and what.startswith("role") and what != "role list of lists":
            failures.append("%s: admitted as %r" % (what, over))
        elif r.status not in (200, 401, 403):
            failures.append("%s: %d" % (what, r.status))
    assert not failures, failures


def test_path_tricks_do_not_reach_admin(env):
    gw = env["gw"]
    u = fx.auth(k(env, "u1"))
    for path in ("/v1/../admin/keys", "/v1/%2e%2e/admin/keys", "//admin/keys",
                 "/admin//keys", "/debug/../admin/keys", "/admin/keys/../keys",
                 "/debug/%2e%2e/admin/keys"):
        for method in ("GET", "POST"):
            with fx.RawConn(gw.url) as c:
                body = json.dumps({"name": "pwn", "role": "admin"}).encode()
                c.send(b"%s %s HTTP/1.1\r\nHost: gw\r\nAuthorization: %s\r\n"
                       b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" %
                       (method.encode(), path.encode(), u["Authorization"].encode(),
                        len(body), body))
                try:
                    r = c.read_response()
                except EOFError:
                    continue
            assert not 200 <= r.status < 300 or b"gk_" not in r.body, (
                "%s %s with a user key created a key: %r" % (method, path, r))
            assert r.status in (400, 403, 404), "%s %s: %r" % (method, path, r)


# Cases where another 4xx/5xx than 400 is as correct (the request is still refused).
ALLOWED = {"lowercase_version": (400, 505)}
INNER = b"GET /debug/headers?smuggled=%s HTTP/1.1\r\nHost: gw\r\n\r\n"


def smuggling_cases():
    def post(headers, body):
        return (b"POST /debug/headers?front=1 HTTP/1.1\r\nHost: gw\r\n" + headers + b"\r\n" +
                body)
    cases = {}
    for name in ("cl_te", "te_cl", "dup_cl", "cl_list", "obs_fold", "obs_fold_te", "bare_lf",
                 "bad_chunk_size", "chunk_size_overflow", "cl_plus", "cl_minus", "cl_hex",
                 "cl_alpha", "cl_space_inside", "te_xchunked", "te_chunked_identity",
                 "space_before_colon", "nul_in_header", "space_in_name",
                 "request_line_junk", "te_http10", "no_host", "dup_host", "te_dup_chunked",
                 "chunk_ext_bare_lf", "lowercase_version"):
        inner = INNER % name.encode()
        chunk0 = b"0\r\n\r\n" + inner
        cases[name] = {
            "cl_te": post(b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(chunk0),
                          chunk0),
            "te_cl": post(b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n" % len(chunk0),
                          chunk0),
            "dup_cl": post(b"Content-Length: 0\r\nContent-Length: %d\r\n" % len(inner), inner),
            "cl_list": post(b"Content-Length: 0, %d\r\n" % len(inner), inner),
            "obs_fold": post(b"X-Folded: a\r\n b\r\nContent-Length: 0\r\n", inner),
            "obs_fold_te": post(b"Content-Length: %d\r\nTransfer-Encoding:\r\n chunked\r\n" %
                                len(chunk0), chunk0),
            "bare_lf": post(b"X-A: 1\nContent-Length: 0\r\n", inner),
            "bad_chunk_size": post(b"Transfer-Encoding: chunked\r\n", b"zz\r\nabc\r\n" + chunk0),
            "chunk_size_overflow": post(b"Transfer-Encoding: chunked\r\n",
                                        b"10000000000000001\r\na\r\n" + chunk0),
            "cl_plus": post(b"Content-Length: +%d\r\n" % len(inner), inner),
            "cl_minus": post(b"Content-Length: -1\r\n", inner),
            "cl_hex": post(b"Content-Length: 0x%x\r\n" % len(inner), inner),
            "cl_alpha": post(b"Content-Length: %da\r\n" % len(inner), inner),
            "cl_space_inside": post(b"Content-Length: 1 %d\r\n" % len(inner), inner),
            "te_xchunked": post(b"Transfer-Encoding: xchunked\r\n", chunk0),
            "te_chunked_identity": post(b"Transfer-Encoding: chunked, identity\r\n", chunk0),
            "space_before_colon": post(b"Content-Length : %d\r\n" % len(inner), inner),
            "nul_in_header": post(b"X-A: a\x00b\r\nContent-Length: 0\r\n", inner),
            "space_in_name": post(b"Bad Name: x\r\nContent-Length: 0\r\n", inner),
            "request_line_junk": b"POST /debug/headers HTTP/1.1 junk\r\nHost: gw\r\n"
                                 b"Content-Length: 0\r\n\r\n" + inner,
            "no_host": b"POST /debug/headers?front=1 HTTP/1.1\r\nContent-Length: %d\r\n\r\n"
                       % len(inner) + inner,
            "dup_host": post(b"Host: other\r\nContent-Length: %d\r\n" % len(inner), inner),
            "te_dup_chunked": post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked"
                                   b"\r\n", chunk0),
            "chunk_ext_bare_lf": post(b"Transfer-Encoding: chunked\r\n",
                                      b"3;x=1\nabc\r\n" + chunk0),
            "lowercase_version": b"POST /debug/headers?front=1 http/1.1\r\nHost: gw\r\n"
                                 b"Content-Length: %d\r\n\r\n" % len(inner) + inner,
            "te_http10": b"POST /debug/headers?front=1 HTTP/1.0\r\nHost: gw\r\n"
                         b"Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(chunk0)
                         + chunk0,
        }[name]
    return cases


def test_request_smuggling_rejected(env):
    gw, model = env["gw"], env["model"]
    model.reset()
    failures = []
    for name, payload in smuggling_cases().items():
        with fx.RawConn(gw.url, timeout=5) as c:
            c.send(payload)
            try:
                r = c.read_response()
            except (EOFError, ConnectionResetError, socket.timeout) as e:
                failures.append("%s: no response (%s)" % (name, e.__class__.__name__))
                continue
            if r.status not in ALLOWED.get(name, (400,)):
                failures.append("%s: status %d, expected 400 (%r)" % (name, r.status, r.body[:100]))
            if not c.closed_by_peer(timeout=3):
                failures.append("%s: connection left open after the 400" % name)
            elif c.buf.startswith(b"HTTP/"):
                failures.append("%s: a second response followed: %r" % (name, c.buf[:80]))
    time.sleep(0.3)
    smuggled = [q["path"] for q in model.requests() if "smuggled" in q["path"] or
                "smuggled" in q.get("body", "")]
    assert not smuggled, "the backend received smuggled requests: %r" % smuggled
    assert not failures, "framing attacks not rejected:\n  " + "\n  ".join(failures)
    assert chat(gw, k(env, "u1")).status == 200


def test_oversized_header_431(env):
    gw = env["gw"]
    for what, extra in (("one 10 KiB header", {"X-Big": "a" * 10240}),
                        ("200 headers", {"X-H%03d" % i: "v" * 40 for i in range(200)})):
        try:
            r = chat(gw, k(env, "u1"), headers=extra)
        except (ConnectionResetError, BrokenPipeError) as e:
            pytest.fail("%s: connection reset without a 431 (%s)" % (what, e))
        assert r.status == 431, "%s (max_header_bytes 8KiB): %r" % (what, r)
    assert chat(gw, k(env, "u1")).status == 200


def test_oversized_body_413(env):
    gw = env["gw"]
    big = json.dumps(dict(CHAT, messages=[{"role": "user", "content": "a" * 100000}])).encode()
    for what, head, body in (
            ("Content-Length 100 KB", b"Content-Length: %d\r\n" % len(big), big),
            ("chunked 100 KB", b"Transfer-Encoding: chunked\r\n",
             b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big))):
        with fx.RawConn(gw.url) as c:
            c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s"
                   b"\r\nContent-Type: application/json\r\n%s\r\n" % (k(env, "u1").encode(), head))
            try:
                c.send(body)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                r = c.read_response()
            except (EOFError, ConnectionResetError) as e:
                pytest.fail("%s: no 413 response (%s)" % (what, e))
            assert r.status == 413, "%s (max_body_bytes 64KiB): %r" % (what, r)


def test_malformed_json_400(env):
    gw = env["gw"]
    h = dict(fx.auth(k(env, "u1")), **{"Content-Type": "application/json"})
    for what, body in (("truncated", b'{"model":"tiny-lm","messages":['), ("not JSON", b"hello"),
                       ("array", b"[]"), ("empty", b""), ("trailing garbage",
                                                          b'{"model":"tiny-lm"} x')):
        r = fx.request("POST", gw.url + "/v1/chat/completions", body, h)
        assert r.status == 400, "%s body on /v1/chat/completions: %r" % (what, r)
        error_code(r)


def drain(s):
    out = b""
    s.settimeout(0.5)
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            out += d
    except OSError:
        pass
    return out


def test_slowloris_408_while_others_are_served(env):
    gw = env["gw"]
    host, port, _ = fx._split(gw.url)
    socks = []
    for _ in range(8):
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
        socks.append(s)
    got = {s: b"" for s in socks}
    open_ = set(socks)
    served = []
    drip = b"X-Slow: " + b"a" * 64
    start = time.monotonic()
    i = 0
    while open_ and time.monotonic() - start < 15:
        # one byte per second on every slow socket
        for s in list(open_):
            try:
                s.sendall(drip[i % len(drip):i % len(drip) + 1])
            except OSError:  # closed by the gateway: keep what it answered before
                got[s] += drain(s)
                open_.discard(s)
        i += 1
        if len(served) < 2 and i in (1, 2):
            r = chat(gw, k(env, "u1"), timeout=10)  # a normal client, meanwhile
            served.append(r.status)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and open_:
            rd, _, _ = select.select(list(open_), [], [], max(0, deadline - time.monotonic()))
            for s in rd:
                try:
                    d = s.recv(4096)
                except OSError:
                    d = b""
                if d:
                    got[s] += d
                else:
                    open_.discard(s)
    for s in socks:
        s.close()
    assert served == [200, 200], "normal requests during slowloris: %r" % served
    assert not open_, "%d slowloris sockets still open after 15 s (header_timeout 2s)" % len(
        open_)
    statuses = [g.split(b"\r\n", 1)[0] for g in got.values()]
    assert all(b" 408 " in st for st in statuses), "slowloris answers: %r" % statuses


def test_many_idle_connections(env):
    gw = env["gw"]
    host, port, _ = fx._split(gw.url)
    idle = []
    try:
        for _ in range(300):
            idle.append(socket.create_connection((host, port), timeout=5))
        for _ in range(5):
            assert chat(gw, k(env, "u1"), timeout=10).status == 200
        # keep-alive connections that sent one request and went idle
        conns = []
        for _ in range(50):
            c = fx.RawConn(gw.url)
            c.send(b"GET /v2/health/ready HTTP/1.1\r\nHost: gw\r\n\r\n")
            assert c.read_response().status == 200
            conns.append(c)
        assert chat(gw, k(env, "u1"), timeout=10).status == 200
        for c in conns:
            c.close()
    finally:
        for s in idle:
            s.close()
