"""Configuration reload (SIGHUP) and graceful stop (SIGTERM): a changed route and a changed
limit apply to new requests while a streaming response that started before keeps going
to [DONE]; a broken config is refused and the old one keeps serving; `gantry gateway check`
validates files."""

import copy
import json
import os
import signal
import threading

import fixtures as fx
from gwtest import CHAT, base_config, chat, metric_sum, metrics


def start_stream(gw, key, tokens=12, delay_ms=250):
    """Reads a slow stream in a thread; returns (thread, result dict, first-chunk event)."""
    res = {"events": [], "status": None, "error": None, "complete": False}
    first = threading.Event()

    def run():
        body = json.dumps(dict(CHAT, stream=True, max_tokens=tokens)).encode()
        try:
            with fx.RawConn(gw.url, timeout=20) as c:
                c.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: "
                       b"Bearer %s\r\nx-test-chunk-delay-ms: %d\r\nContent-Length: %d\r\n\r\n%s" %
                       (key.encode(), delay_ms, len(body), body))
                res["status"], _ = c.read_head()
                data = b""
                for _, d in c.iter_chunks():
                    data += d
                    first.set()
                res["events"] = fx.sse_events(data)
                res["complete"] = True
        except Exception as e:
            res["error"] = repr(e)
        finally:
            first.set()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, res, first


def check_stream(res, tokens):
    assert res["error"] is None, "in-flight stream broke: %s" % res["error"]
    assert res["status"] == 200 and res["complete"], res
    assert res["events"][-1] == "[DONE]", res["events"][-3:]
    assert len(res["events"]) == tokens + 2, "%d events" % len(res["events"])


def test_sighup_applies_route_and_limit_without_dropping_stream(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "reload.db")
    key = fx.create_key(state, "lim", "limited")["key"]
    user = fx.create_key(state, "usr", "user")["key"]
    cfg = base_config(g.tmp, model.url, state=state)
    cfg["routes"] = [r for r in cfg["routes"] if r.get("prefix") != "/debug/"]
    cfg["rate_limits"] = [{"scope": "role", "match": "limited", "requests": 1000, "per": "1h"}]
    gw = g.start(cfg)
    assert fx.request("GET", gw.url + "/debug/headers").status == 404
    reloads0 = metric_sum(metrics(gw), r"^gantry_gateway_config_reloads_total$") or 0
    t, res, first = start_stream(gw, key)
    assert first.wait(10), "no first stream chunk"
    new = copy.deepcopy(cfg)
    new["routes"].append({"prefix": "/debug/", "protocol": "http", "backend": "llm",
                          "auth": "none"})
    new["rate_limits"] = [{"scope": "role", "match": "limited", "requests": 2, "per": "1h"}]
    new["roles"] = dict(new["roles"], user=[{"action": "model:invoke", "resource": "other-*"}])
    assert chat(gw, user).status == 200
    gw.reload(new)
    fx.wait_until(lambda: fx.request("GET", gw.url + "/debug/headers").status == 200,
                  timeout=5, what="route added by SIGHUP serving")
    assert t.is_alive(), "stream finished before the reload was checked; make it slower"
    statuses = [chat(gw, key).status for _ in range(4)]
    assert statuses.count(200) <= 2 and 429 in statuses, (
        "limit lowered to 2 by reload, got %r" % statuses)
    r = chat(gw, user)
    assert r.status == 403, "role user lost tiny-* in the reload: %r" % r
    t.join(20)
    check_stream(res, 12)
    reloads = metric_sum(metrics(gw), r"^gantry_gateway_config_reloads_total$")
    assert reloads is not None and reloads > reloads0, "config_reloads_total %r" % reloads


def test_broken_config_on_sighup_keeps_old(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "broken.db")
    key = fx.create_key(state, "u", "user")["key"]
    gw = g.start(base_config(g.tmp, model.url, state=state))
    with open(gw.config_path, "w") as f:
        f.write("routes: [\n  - {prefix: /v1/, backend: nowhere\n")
    gw.proc.send_signal(signal.SIGHUP)
    bad = base_config(g.tmp, model.url, state=state)
    bad["routes"][2]["backend"] = "nowhere"
    fx.write_config(gw.config_path + ".2", bad)
    os.replace(gw.config_path + ".2", gw.config_path)
    gw.proc.send_signal(signal.SIGHUP)
    for _ in range(5):
        assert chat(gw, key).status == 200
        assert fx.request("GET", gw.url + "/debug/headers").status == 200
    assert gw.proc.alive(), "gateway died on a broken config reload"


def test_sigterm_lets_stream_finish(fresh_gateways, model):
    g = fresh_gateways
    state = os.path.join(g.tmp, "term.db")
    key = fx.create_key(state, "u", "user")["key"]
    gw = g.start(base_config(g.tmp, model.url, state=state))
    t, res, first = start_stream(gw, key, tokens=8, delay_ms=200)
    assert first.wait(10)
    gw.proc.send_signal(signal.SIGTERM)
    t.join(20)
    check_stream(res, 8)
    rc = gw.proc.stop(timeout=15)
    gw.proc = None
    assert rc == 0, "exit code after SIGTERM: %s" % rc


def _bad_configs(tmp, model_url):
    """(name, config, text the error must contain): typos in security settings must be
    refused, never ignored (a silently dropped `rate_limts` means no limits)."""
    def mk(edit):
        c = base_config(tmp, model_url)
        edit(c)
        return c
    return [
        ("top-level typo", mk(lambda c: c.update(rate_limts=[])), "rate_limts"),
        ("route typo", mk(lambda c: c["routes"][2].update(auht="none")), "auht"),
        ("rule typo", mk(lambda c: c.update(rate_limits=[{"scope": "key", "match": "*",
                                                          "requets": 1}])), "requets"),
        ("bad scope", mk(lambda c: c.update(rate_limits=[{"scope": "kye", "requests": 1}])),
         "kye"),
        ("bad auth mode", mk(lambda c: c["routes"][2].update(auth="optional")), "optional"),
        ("unreadable JWT secret", mk(lambda c: c.update(auth={"api_keys": True, "jwt": {
            "issuer": "x", "audience": ["a"], "keys": [{"alg": "HS256", "kid": "k",
                                                        "secret_file": "/nonexistent"}]}})),
         "/nonexistent"),
        ("alg none", mk(lambda c: c.update(auth={"api_keys": True, "jwt": {
            "issuer": "x", "audience": ["a"], "keys": [{"alg": "none", "kid": "k"}]}})),
         "none"),
        ("role typo", mk(lambda c: c["roles"].update(user=[{"acton": "model:invoke"}])),
         "acton"),
        ("negative limit", mk(lambda c: c.update(rate_limits=[{"scope": "key",
                                                               "requests": -5}])), "-5"),
        ("bad failure_mode", mk(lambda c: c.update(redis={"address": "127.0.0.1:6379",
                                                          "failure_mode": "opne"})), "opne"),
        ("unknown backend", mk(lambda c: c["routes"][2].update(backend="nowhere")), "nowhere"),
        ("bad port", mk(lambda c: c.update(listen="127.0.0.1:99999")), "99999"),
    ]


def test_check_refuses_bad_configs(tmp_dir, model):
    failures = []
    for i, (what, cfg, needle) in enumerate(_bad_configs(tmp_dir, model.url)):
        path = os.path.join(tmp_dir, "bad%d.yaml" % i)
        fx.write_config(path, cfg)
        cp = fx.gantry("gateway", "check", "--config", path, check=False)
        out = cp.stdout + cp.stderr
        if cp.returncode != 2 or needle not in out:
            failures.append("%s: exit %d, %r" % (what, cp.returncode, out[:150]))
    assert not failures, failures


def test_check_command(tmp_dir, model):
    good = os.path.join(tmp_dir, "good.yaml")
    fx.write_config(good, base_config(tmp_dir, model.url))
    cp = fx.gantry("gateway", "check", "--config", good, check=False)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    bad_cfg = base_config(tmp_dir, model.url)
    bad_cfg["routes"][2]["backend"] = "nowhere"
    bad = os.path.join(tmp_dir, "bad.yaml")
    fx.write_config(bad, bad_cfg)
    cp = fx.gantry("gateway", "check", "--config", bad, check=False)
    assert cp.returncode == 2, "exit %d: %s" % (cp.returncode, cp.stdout + cp.stderr)
    assert "nowhere" in cp.stdout + cp.stderr, cp.stdout + cp.stderr
