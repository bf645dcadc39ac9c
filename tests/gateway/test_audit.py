"""Audit log end to end: requests through the gateway become hash-chained records with
signed checkpoints; `gantry audit verify` accepts the untouched log and rejects an edited,
deleted, reordered or truncated one (exit 1, naming the line), and a wrong public key."""

import glob
import json
import os
import shutil

import pytest

import fixtures as fx
from gwtest import CHAT, base_config, chat


def keygen(d):
    prefix = os.path.join(d, "audit")
    fx.gantry("audit", "keygen", "--out", prefix)
    priv = pub = None
    for f in glob.glob(prefix + "*"):
        text = open(f, errors="replace").read()
        if "PRIVATE KEY" in text:
            priv = f
        elif "PUBLIC KEY" in text:
            pub = f
    assert priv and pub, "gantry audit keygen --out %s wrote %r" % (prefix, glob.glob(prefix + "*"))
    return priv, pub


@pytest.fixture(scope="module")
def env(gateways, model, tmp_dir):
    state = os.path.join(tmp_dir, "audit.db")
    keys = {n: fx.create_key(state, n, r) for n, r in (("u1", "user"),)}
    priv, pub = keygen(tmp_dir)
    log = os.path.join(tmp_dir, "audit.jsonl")
    cfg = base_config(tmp_dir, model.url, state=state)
    cfg["audit"] = {"path": log, "signing_key": priv, "checkpoint_every": 4,
                    "checkpoint_interval": "1s"}
    gw = gateways.start(cfg)
    ids = {"ok": [], "denied": []}
    for i in range(6):
        r = chat(gw, keys["u1"]["key"], dict(CHAT, max_tokens=2 + i))
        assert r.status == 200, r
        ids["ok"].append(r.headers.get("x-request-id"))
    r = chat(gw)  # 401
    ids["denied"].append(r.headers.get("x-request-id"))
    r = chat(gw, keys["u1"]["key"], dict(CHAT, model="big-lm"))  # 403
    ids["denied"].append(r.headers.get("x-request-id"))
    rc = gw.proc.stop()  # graceful: flush + final checkpoint
    gw.proc = None
    assert rc == 0, "gantry gateway run exited %s on SIGTERM" % rc
    return {"log": log, "pub": pub, "priv": priv, "ids": ids, "tmp": tmp_dir, "cfg": cfg,
            "gateways": gateways, "keys": keys}


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


def records(path):
    return [json.loads(ln) for ln in lines(path) if ln.strip()]


def verify(path, pub=None):
    args = ["audit", "verify", path] + (["--key", pub] if pub else [])
    return fx.gantry(*args, check=False)


def test_requests_produce_records(env):
    recs = [r for r in records(env["log"]) if r.get("type") != "checkpoint"]
    assert len(recs) >= 6, "6 proxied requests, %d audit records" % len(recs)
    text = open(env["log"]).read()
    missing = [i for i in env["ids"]["ok"] if not i or i not in text]
    assert not missing, "request ids not in the audit log: %r" % missing
    seqs = [r["seq"] for r in records(env["log"]) if "seq" in r]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs


def test_record_content(env):
    recs = {r.get("request_id"): r for r in records(env["log"])}
    first = recs.get(env["ids"]["ok"][0])
    assert first, "no record with request_id %s" % env["ids"]["ok"][0]
    want = {"status": 200, "key_id": env["keys"]["u1"]["id"], "model": "tiny-lm",
            "prompt_tokens": 5, "completion_tokens": 2}
    got = {f: first.get(f) for f in want}
    assert got == want, "audit record fields: %r" % first
    assert env["keys"]["u1"]["key"] not in open(env["log"]).read(), "API key in the audit log"


def test_denied_requests_are_audited(env):
    text = open(env["log"]).read()
    missing = [i for i in env["ids"]["denied"] if not i or i not in text]
    assert not missing, "401/403 request ids not in the audit log: %r" % missing


def test_checkpoints_written(env):
    cps = [r for r in records(env["log"]) if r.get("type") == "checkpoint"]
    assert cps, "no checkpoint lines in the audit log"
    assert all(c.get("sig") for c in cps), "unsigned checkpoint with a signing key: %r" % cps
    assert os.path.exists(env["log"] + ".checkpoints")


def test_verify_ok(env):
    cp = verify(env["log"], env["pub"])
    assert cp.returncode == 0, "audit verify of the untouched log: %s %s" % (cp.stdout, cp.stderr)
    cp = verify(env["log"])
    assert cp.returncode == 0, "audit verify without --key: %s %s" % (cp.stdout, cp.stderr)


def tampered_copy(env, name, edit):
    d = os.path.join(env["tmp"], "tamper-" + name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "audit.jsonl")
    shutil.copy(env["log"], path)
    shutil.copy(env["log"] + ".checkpoints", path + ".checkpoints")
    ls = lines(path)
    ls = edit(ls)
    with open(path, "w") as f:
        f.write("\n".join(ls) + "\n")
    return path


def first_record_line(ls, nth=1):
    n = 0
    for i, ln in enumerate(ls):
        if '"type":"checkpoint"' not in ln:
            n += 1
            if n == nth:
                return i
    raise AssertionError("no record %d" % nth)


def test_verify_detects_edit_and_names_line(env):
    ls = lines(env["log"])
    i = first_record_line(ls, 3)

    def edit(ls):
        ls = list(ls)
        rec = json.loads(ls[i])
        # change one value, keep valid JSON and the same keys
        for k, v in rec.items():
            if isinstance(v, int) and k not in ("seq",) and not isinstance(v, bool):
                ls[i] = ls[i].replace('"%s":%d' % (k, v), '"%s":%d' % (k, v + 1), 1)
                break
        else:
            ls[i] = ls[i].replace('"prev":"', '"prev":"0', 1)[:-1] + "}"
        assert ls[i] != lines(env["log"])[i]
        return ls
    path = tampered_copy(env, "edit", edit)
    cp = verify(path, env["pub"])
    out = cp.stdout + cp.stderr
    assert cp.returncode == 1, "edited record: exit %d: %s" % (cp.returncode, out)
    assert str(i + 1) in out, "edited line %d not named: %s" % (i + 1, out)


@pytest.mark.parametrize("what", ["delete", "reorder", "truncate"])
def test_verify_detects_other_tampering(env, what):
    ls0 = lines(env["log"])
    i = first_record_line(ls0, 2)

    def edit(ls):
        ls = list(ls)
        if what == "delete":
            del ls[i]
        elif what == "reorder":
            ls[i], ls[i + 1] = ls[i + 1], ls[i]
        else:
            ls = ls[:i + 1]
        return ls
    path = tampered_copy(env, what, edit)
    cp = verify(path, env["pub"])
    assert cp.returncode == 1, "%s: exit %d: %s %s" % (what, cp.returncode, cp.stdout, cp.stderr)


def test_verify_wrong_key(env):
    other = os.path.join(env["tmp"], "other")
    os.makedirs(other, exist_ok=True)
    _, other_pub = keygen(other)
    cp = verify(env["log"], other_pub)
    assert cp.returncode == 1, "verify with another key: exit %d: %s %s" % (
        cp.returncode, cp.stdout, cp.stderr)


def test_restart_continues_chain(env):
    before = len(records(env["log"]))
    gw = env["gateways"].start(env["cfg"], "gateway-restarted")
    assert chat(gw, env["keys"]["u1"]["key"]).status == 200
    assert gw.proc.stop() == 0
    gw.proc = None
    assert len(records(env["log"])) > before
    cp = verify(env["log"], env["pub"])
    assert cp.returncode == 0, "after a restart: %s %s" % (cp.stdout, cp.stderr)
