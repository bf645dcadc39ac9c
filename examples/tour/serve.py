#!/usr/bin/python3
"""Tour step `serve`: the signed model behind the gateway, scaled from zero,
surviving the loss of its server, and watched.

Starts (all on 127.0.0.1, each in its own process group, all stopped at the
end): a real Alertmanager; the fallback model server; `gantry gateway` with API
keys, RBAC, rate limits, a call quota, the signed audit log, the pool `churn`
(tier 0 empty, scaled from zero; tier 1 the fallback) and output anomaly
detection notifying Alertmanager; `gantry autoscale`, whose gateway actuator
starts the primary model server (it downloads churn@production, verifying the
signature) when the first request arrives. Then a client sends traffic in
phases:

  1. the first request is held while the primary starts, then answered by it;
  2. limits: a key over its rate limit gets 429, one over its daily call quota 403;
  3. steady traffic, which the anomaly detector learns;
  4. the primary is SIGKILLed: requests go to the fallback tier with
     X-Gantry-Degraded and none fails; the autoscaler brings a primary back;
  5. the input distribution shifts: the output anomaly alert fires in
     Alertmanager; `gantry drift compare` on the captured inputs reports
     drift (and none on the normal window); `gantry drift validate` through the
     gateway with labelled data reports the accuracy drop.
"""

import csv
import json
import os
import random
import shutil
import signal
import threading
import time

import common

G = common.gantry()
BASELINE_S = 16   # > the detector's min_history (10 s) and min_samples (10 windows)
KILL_S = 8
SHIFT_MAX_S = 40


def yaml_list(items):
    return "[" + ", ".join(json.dumps(str(i)) for i in items) + "]"


def read_rows(path):
    with open(path) as f:
        r = csv.reader(f)
        header = next(r)
        return header, [[float(v) for v in row] for row in r]


class Client:
    """Threads sending KServe infer requests (one row each) through the
    gateway; records every answer and captures every input sent."""

    def __init__(self, url, key, header, t0):
        self.url, self.key, self.header, self.t0 = url, key, header, t0
        self.lock = threading.Lock()
        self.points, self.failures, self.captured = [], [], {}
        self.rows, self.window = None, None
        self.stop_evt = threading.Event()
        self.threads = []

    def use(self, rows, window):
        with self.lock:
            self.rows, self.window = rows, window

    def one(self, rng):
        with self.lock:
            rows, window = self.rows, self.window
        row = rows[rng.randrange(len(rows))]
        body = {"inputs": [{"name": "input-0", "shape": [1, len(row)], "datatype": "FP64",
                            "data": row}]}
        t = time.monotonic()
        try:
            status, hdr, data = common.http("POST", self.url, body,
                                            {"Authorization": "Bearer " + self.key}, timeout=30)
        except OSError as e:
            status, hdr, data = 0, {}, str(e).encode()
        ms = (time.monotonic() - t) * 1000
        tier = "fallback" if hdr.get("x-gantry-degraded") else "primary"
        with self.lock:
            if status != 200:
                self.failures.append((round(t - self.t0, 2), status, data[:200].decode(errors="replace")))
                tier = "error"
            else:
                self.captured.setdefault(window, []).append(row)
            self.points.append([round(t - self.t0, 3), round(ms, 2), tier,
                                hdr.get("x-gantry-degraded", "")])
        return status, hdr, data

    def start(self, threads=3, pause=0.03):
        def loop(seed):
            rng = random.Random(seed)
            while not self.stop_evt.is_set():
                self.one(rng)
                time.sleep(pause)
        self.threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
        for th in self.threads:
            th.start()

    def stop(self):
        self.stop_evt.set()
        for th in self.threads:
            th.join(35)

    def since(self, t):
        with self.lock:
            return [p for p in self.points if p[0] >= t], [f for f in self.failures if f[0] >= t]

    def write_capture(self, window, path):
        with self.lock:
            rows = list(self.captured.get(window, []))
        with open(path, "w") as f:
            f.write(",".join(self.header) + "\n")
            for row in rows:
                f.write(",".join(f"{v:.4f}" for v in row) + "\n")
        return len(rows)


class Poller(threading.Thread):
    """Samples the autoscaler's capacity and the gateway's anomaly band twice a second."""

    def __init__(self, autoscale_url, gw_url, admin_key, t0):
        super().__init__(daemon=True)
        self.autoscale_url, self.gw_url, self.admin_key, self.t0 = autoscale_url, gw_url, admin_key, t0
        self.capacity, self.anomaly, self.fired_at = [], [], None
        self.stop_evt = threading.Event()

    def run(self):
        while not self.stop_evt.wait(0.5):
            t = round(time.monotonic() - self.t0, 2)
            try:
                _, _, body = common.http("GET", self.autoscale_url + "/status", timeout=2)
                tgt = next(x for x in json.loads(body)["targets"] if x.get("name") == "churn")
                self.capacity.append([t, tgt["capacity"]["ready"]])  # backends that serve
            except (OSError, ValueError, KeyError, TypeError, StopIteration):
                pass
            try:
                _, _, body = common.http("GET", self.gw_url + "/admin/anomalies",
                                         headers={"Authorization": "Bearer " + self.admin_key},
                                         timeout=2)
                for s in json.loads(body).get("signals", []):
                    if s.get("model") == "churn" and s.get("signal") == "output:churn:mean":
                        self.anomaly.append([t, s.get("value"), s.get("lower"), s.get("upper")])
                        if self.fired_at is None and s.get("firing"):
                            self.fired_at = t
            except (OSError, ValueError, AttributeError):
                pass


def alertmanager_alerts(url):
    try:
        _, _, body = common.http("GET", url + "/api/v2/alerts", timeout=2)
        return [a for a in json.loads(body)
                if a.get("labels", {}).get("alertname") == "GantryModelOutputAnomaly"]
    except (OSError, ValueError):
        return []


def write_configs(d, ports):
    am_cfg = os.path.join(d, "alertmanager.yml")
    with open(am_cfg, "w") as f:
        f.write("route: {receiver: ml-oncall, group_by: [alertname], group_wait: 100ms, "
                "group_interval: 1s, repeat_interval: 1h}\nreceivers:\n  - name: ml-oncall\n")
    gw_cfg = os.path.join(d, "gateway.yaml")
    with open(gw_cfg, "w") as f:
        f.write(f"""# the tour's gateway (examples/tour/serve.py writes it)
listen: 127.0.0.1:{ports['gateway']}
workers: 2
state: gateway.db
backends:
  - {{name: fallback, url: "http://127.0.0.1:{ports['fallback']}"}}
pools:
  - name: churn
    tiers:
      - backends: []                                     # the primary: gantry autoscale adds it
      - {{backends: [fallback], model: churn-fallback}}   # simpler model, always up
    health_check: {{path: /v2/health/ready, interval: 300ms, timeout: 1s, unhealthy_threshold: 1}}
    retry: {{attempts: 2}}
    scale_from_zero: {{hold: 64, hold_timeout: 120s, wake: "http://127.0.0.1:{ports['autoscale']}/wake/churn", retry_after: 5s}}
routes:
  - {{prefix: /v2/, protocol: kserve, pool: churn, auth: required, idempotent: true}}
  - {{prefix: /v1/, protocol: openai, pool: churn, auth: required}}   # churn risk explained
roles:
  admin: [{{action: "*"}}]
  app: [{{action: "model:invoke", resource: "churn*"}}]
  batch: [{{action: "model:invoke", resource: "churn*"}}]
  trial: [{{action: "model:invoke", resource: "churn*"}}]
  explain: [{{action: "model:invoke", resource: "churn*"}}]
rate_limits:
  - {{scope: key, requests: 100000, per: 1m, burst: 5000}}   # every key
  - {{scope: role, match: batch, requests: 5, per: 1m}}      # batch jobs: 5 a minute
quotas:
  - {{scope: role, match: trial, calls_per_day: 3}}          # trial users: 3 calls a day
  - {{scope: role, match: explain, tokens_per_day: 250}}     # explanations: 250 tokens a day
audit:
  path: audit.jsonl
  signing_key: audit.key
  checkpoint_every: 500
  checkpoint_interval: 5s
anomaly:
  window: 1s
  min_requests: 3
  min_samples: 10
  min_history: 10s
  sensitivity: low
  violations: 2
  of: 3
  resolve_after: 2
  signals: [outputs]
  notify:
    receiver: ml-oncall
    sinks:
      - {{type: alertmanager, url: "http://127.0.0.1:{ports['alertmanager']}", resend_interval: 2s}}
      - {{type: log}}
""")
    as_cfg = os.path.join(d, "autoscale.yaml")
    registry = common.out_dir("registry")
    with open(as_cfg, "w") as f:
        f.write(f"""# the tour's autoscaler (examples/tour/serve.py writes it)
listen: 127.0.0.1:{ports['autoscale']}
state_dir: autoscale
targets:
  - name: churn
    min: 0
    max: 2
    interval: 1s
    cooldown: 10m                  # no scale-in during the tour
    metrics:
      - name: queue
        gateway: {{url: "http://127.0.0.1:{ports['gateway']}", pool: churn, signal: in_flight_and_pending}}
        target: 8
    actuator:
      gateway:
        url: "http://127.0.0.1:{ports['gateway']}"
        pool: churn
        admin_key_env: GANTRY_ADMIN_KEY
        start: {yaml_list([common.PY, os.path.join(common.HERE, 'model_server.py'), '--port', '{port}',
                           '--name', '{name}', '--model', 'churn', '--registry-db',
                           os.path.join(registry, 'registry.db'), '--ref', 'churn@production',
                           '--dest', os.path.join(d, 'models', '{name}')])}
        ports: {ports['primary_lo']}-{ports['primary_lo'] + 20}
        ready_timeout: 120s
        drain_timeout: 10s
        stop_grace: 5s
""")
    return am_cfg, gw_cfg, as_cfg


def key(d, name, role):
    out = common.run_json([G, "gateway", "keys", "create", "--config", os.path.join(d, "gateway.yaml"),
                           "--name", name, "--role", role, "--json"])
    return out["key"]


def main(step):
    d = common.out_dir("serve")
    for sub in ("autoscale", "models", "alertmanager-data"):
        shutil.rmtree(os.path.join(d, sub), ignore_errors=True)
    for f in ("gateway.db", "audit.jsonl", "audit.jsonl.checkpoints"):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    data = common.out_dir("data")
    ports = {k: common.free_port() for k in ("gateway", "fallback", "autoscale", "alertmanager")}
    ports["primary_lo"] = random.Random().randrange(21000, 29000)
    am_cfg, gw_cfg, as_cfg = write_configs(d, ports)
    if not os.path.exists(os.path.join(d, "audit.key")):
        common.run([G, "audit", "keygen", "--out", os.path.join(d, "audit")])
    admin = key(d, "autoscaler", "admin")
    app_key = key(d, "web-app", "app")
    batch_key = key(d, "batch-scorer", "batch")
    trial_key = key(d, "trial-user", "trial")
    explain_key = key(d, "support-desk", "explain")

    services = []
    t0 = time.monotonic()
    client = poller = None
    phases = []
    try:
        am = common.Service("alertmanager", [
            "prometheus-alertmanager", "--config.file=" + am_cfg,
            "--storage.path=" + os.path.join(d, "alertmanager-data"),
            f"--web.listen-address=127.0.0.1:{ports['alertmanager']}",
            f"--web.external-url=http://127.0.0.1:{ports['alertmanager']}",
            "--cluster.listen-address=", "--log.level=warn"])
        services.append(am)
        fb = common.Service("fallback", [common.PY, os.path.join(common.HERE, "model_server.py"),
                                         "--port", ports["fallback"], "--name", "fallback",
                                         "--model", "churn-fallback", "--fallback",
                                         os.path.join(data, "fallback.json")])
        services.append(fb)
        gw = common.Service("gateway", [G, "gateway", "run", "--config", gw_cfg], cwd=d)
        services.append(gw)
        asc = common.Service("autoscale", [G, "autoscale", "run", "--config", as_cfg], cwd=d,
                             env={"GANTRY_ADMIN_KEY": admin})
        services.append(asc)
        gw_url = f"http://127.0.0.1:{ports['gateway']}"
        as_url = f"http://127.0.0.1:{ports['autoscale']}"
        am_url = f"http://127.0.0.1:{ports['alertmanager']}"
        common.wait_http(am_url + "/-/ready", what="alertmanager", service=am)
        common.wait_http(f"http://127.0.0.1:{ports['fallback']}/v2/health/ready", what="fallback", service=fb)
        common.wait_http(gw_url + "/healthz", what="gateway", service=gw)
        common.wait_http(as_url + "/healthz", what="autoscale", service=asc)
        def fallback_up():  # the gateway's own health check has passed it
            _, _, b = common.http("GET", gw_url + "/admin/pools",
                                  headers={"Authorization": "Bearer " + admin})
            pools = json.loads(b).get("pools", [])
            return any(p.get("name") == "churn" and p.get("up", 0) >= 1 for p in pools)
        common.wait_until(fallback_up, timeout=30, what="the gateway's health check of the fallback")
        poller = Poller(as_url, gw_url, admin, t0)
        poller.start()
        infer = gw_url + "/v2/models/churn/infer"
        header, normal = read_rows(os.path.join(data, "live_normal.csv"))
        _, shifted = read_rows(os.path.join(data, "live_shifted.csv"))
        client = Client(infer, app_key, header, t0)

        # 1. Scale from zero. The pool's primary tier is empty: the first
        # request is answered at once by the fallback (degraded) and wakes the
        # autoscaler, which starts the primary; then the primary serves.
        phases.append([round(time.monotonic() - t0, 2), "first request"])
        client.use(normal, "normal")
        t = time.monotonic()
        status, hdr, body = client.one(random.Random(1))
        first_s = time.monotonic() - t
        step.check(status == 200 and hdr.get("x-gantry-degraded") == "primary_unavailable",
                   "the first request is answered at once by the fallback tier, degraded",
                   f"HTTP {status} in {first_s * 1000:.0f} ms, X-Gantry-Degraded: "
                   f"{hdr.get('x-gantry-degraded')}")
        rng = random.Random(2)

        def primary_serves():
            st, h, b = client.one(rng)
            if st == 200 and not h.get("x-gantry-degraded"):
                return json.loads(b).get("parameters", {}).get("served_by", "?")
            time.sleep(0.2)
            return None
        served = common.wait_until(primary_serves, timeout=120, interval=0,
                                   what="the primary scaled from zero")
        primary_s = time.monotonic() - t
        step.check(served.startswith("churn-"),
                   "that request woke the autoscaler: the primary scaled from zero and serves",
                   f"{served} serves {primary_s:.1f} s after the first request (start, "
                   f"registry download with signature check, model load, health check)")
        nobody = common.http("POST", infer, {"inputs": []})[0]
        step.check(nobody == 401, "a request without an API key is refused", f"HTTP {nobody}")

        # 2. Limits.
        codes = [common.http("POST", infer, {"inputs": [{"name": "input-0", "shape": [1, 6],
                                                         "datatype": "FP64", "data": normal[0]}]},
                             {"Authorization": "Bearer " + batch_key})[0] for _ in range(7)]
        step.check(codes[:5] == [200] * 5 and codes[5] == 429,
                   "a key over its rate limit (5/min) gets 429", f"answers {codes}")
        codes = [common.http("POST", infer, {"inputs": [{"name": "input-0", "shape": [1, 6],
                                                         "datatype": "FP64", "data": normal[0]}]},
                             {"Authorization": "Bearer " + trial_key})[0] for _ in range(4)]
        step.check(codes == [200, 200, 200, 403], "a key over its daily call quota (3) gets 403",
                   f"answers {codes}")

        record = json.dumps(dict(zip(header, normal[0])))
        chat = {"model": "churn", "messages": [{"role": "user", "content": record}]}
        answers, spent = [], 0
        for _ in range(12):
            st, _, b = common.http("POST", gw_url + "/v1/chat/completions", chat,
                                   {"Authorization": "Bearer " + explain_key})
            answers.append(st)
            if st != 200:
                break
            spent += json.loads(b)["usage"]["total_tokens"]
        step.check(answers[-1] == 403 and answers.count(200) >= 2 and 150 <= spent <= 350,
                   "a key over its daily token quota (250) gets 403, counted from the answers' usage",
                   f"{answers.count(200)} answers spent {spent} tokens, then HTTP {answers[-1]}")

        # 3. Steady traffic.
        phases.append([round(time.monotonic() - t0, 2), "steady traffic"])
        client.start()
        time.sleep(BASELINE_S)

        # 4. Kill the primary.
        pids = primary_pids(d)
        kill_t = round(time.monotonic() - t0, 2)
        phases.append([kill_t, "primary SIGKILLed"])
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        step.check(len(pids) == 1, "the autoscaler ran one primary", f"pids {pids}")
        time.sleep(KILL_S)
        pts, fails = client.since(kill_t)
        degraded = [p for p in pts if p[2] == "fallback"]
        step.check(not fails and pts, "no request failed while the primary was down",
                   f"{len(pts)} requests, {len(fails)} failed" + (f": {fails[:3]}" if fails else ""))
        step.check(degraded and all(p[3] == "primary_unavailable" for p in degraded),
                   "the fallback tier served with X-Gantry-Degraded: primary_unavailable",
                   f"{len(degraded)} degraded answers")
        back = common.wait_until(lambda: [p for p in client.since(kill_t + 0.5)[0][-20:]
                                          if p[2] == "primary"], timeout=120, what="primary back")
        step.check(bool(back), "the autoscaler replaced the primary and it serves again",
                   f"primary answers again {back[0][0] - kill_t:.1f} s after the kill")

        # 5. The inputs shift.
        time.sleep(4)  # a few clean windows with the new primary
        shift_t = round(time.monotonic() - t0, 2)
        phases.append([shift_t, "inputs shift"])
        client.use(shifted, "shifted")
        fired = None
        deadline = time.monotonic() + SHIFT_MAX_S
        while time.monotonic() < deadline and not fired:
            fired = alertmanager_alerts(am_url)
            time.sleep(0.5)
        step.check(bool(fired), "the output anomaly alert fired in Alertmanager",
                   (f"GantryModelOutputAnomaly {fired[0]['labels'].get('signal')} "
                    f"{round(time.monotonic() - t0 - shift_t, 1)} s after the shift") if fired
                   else f"nothing in {am_url}/api/v2/alerts within {SHIFT_MAX_S} s")
        time.sleep(2)
        client.stop()
        pts, fails = client.since(0)
        step.check(not fails, "no request failed in the whole run",
                   f"{len(pts)} requests, {len(fails)} failed" + (f": {fails[:3]}" if fails else ""))

        # Drift on what the client sent, and the model's accuracy on labelled data.
        drift(step, d, data, client, gw_url, app_key)

        lat = sorted(p[1] for p in pts if p[2] == "primary")
        if lat:
            step.say(f"{len(pts)} requests, p50 {lat[len(lat) // 2]:.1f} ms, "
                     f"p99 {lat[int(len(lat) * 0.99)]:.1f} ms through the gateway (primary)")
        step.say(f"scale from zero: the fallback answered the first request in "
                 f"{first_s * 1000:.0f} ms; the primary served {primary_s:.1f} s later")
    finally:
        if client:
            client.stop()
            step.series["latency"] = {"points": [p[:3] for p in client.points], "phases": phases}
        if poller:
            poller.stop_evt.set()
            poller.join(5)
            step.series["capacity"] = {"points": poller.capacity}
            step.series["anomaly"] = {"points": poller.anomaly, "signal": "output:churn:mean",
                                      "fired_at": poller.fired_at}
        # The primaries first: a stopped autoscaler leaves its backends running
        # on purpose (a restarted one adopts them), so the tour ends them as an
        # operator would, by their pid files. Then the services, last started first.
        primaries = primary_pids(d)
        for pid in primaries:
            common.stop_group(pid)
        for svc in reversed(services):
            svc.stop()
        left = [pid for pid in primaries + [svc.proc.pid for svc in services]
                if common.running(pid)]
        step.check(not left, "every process the step started is stopped",
                   f"left behind: {left}" if left else
                   f"{len(services)} services and {len(primaries)} primary stopped")


def primary_pids(d):
    pids, root = [], os.path.join(d, "autoscale", "churn")
    for name in os.listdir(root) if os.path.isdir(root) else []:
        if name.endswith(".pid"):
            with open(os.path.join(root, name)) as f:
                pids.append(int(f.read().split()[0]))
    return pids


def fmt3(x):
    return "?" if x is None else f"{x:.3f}"


def drift(step, d, data, client, gw_url, app_key):
    schema = os.path.join(data, "schema.yaml")
    profile = os.path.join(d, "reference.profile")
    common.run([G, "drift", "profile", "--schema", schema, "--data",
                os.path.join(data, "train.csv"), "--out", profile])
    n_norm = client.write_capture("normal", os.path.join(d, "captured_normal.csv"))
    n_shift = client.write_capture("shifted", os.path.join(d, "captured_shifted.csv"))
    quiet = common.run([G, "drift", "compare", "--reference", profile, "--current",
                        os.path.join(d, "captured_normal.csv")], check=False)
    step.check(quiet.returncode == 0, "drift compare on the normal traffic: no dataset drift",
               f"exit {quiet.returncode}, {n_norm} rows")
    report = os.path.join(d, "drift.json")
    loud = common.run([G, "drift", "compare", "--reference", profile, "--current",
                       os.path.join(d, "captured_shifted.csv"), "--html",
                       os.path.join(d, "drift.html"), "--out", report], check=False)
    rep = common.load_json(report) if os.path.exists(report) else {}
    drifted = [c["column"] for c in rep.get("columns", []) if c.get("drifted")]
    step.check(loud.returncode == 1 and rep.get("dataset_drift"),
               "drift compare on the shifted traffic reports dataset drift",
               f"exit {loud.returncode}, {n_shift} rows, drifted: {', '.join(drifted)}")
    step.series["drift"] = {"dataset_drift": rep.get("dataset_drift"), "columns": [
        {"column": c["column"], "statistic": c.get("statistic"), "threshold": c.get("threshold"),
         "drifted": c.get("drifted"), "test": c.get("test")} for c in rep.get("columns", [])]}
    results = {}
    for window in ("normal", "shifted"):
        out = os.path.join(d, f"validate_{window}.json")
        p = common.run([G, "drift", "validate", "--model-endpoint", gw_url + "/v2/models/churn/infer",
                        "--data", os.path.join(data, f"labelled_{window}.csv"), "--schema", schema,
                        "--min-accuracy", "0.8", "--api-key", app_key, "--out", out], check=False)
        acc = (common.load_json(out).get("quality", {}) or {}).get("accuracy") \
            if os.path.exists(out) else None
        results[window] = (p.returncode, acc)
    (rc_n, acc_n), (rc_s, acc_s) = results["normal"], results["shifted"]
    step.check(rc_n == 0, "drift validate through the gateway passes on normal labelled data",
               f"accuracy {fmt3(acc_n)}, exit {rc_n}")
    step.check(rc_s == 1 and acc_s is not None and acc_n is not None and acc_s < acc_n - 0.05,
               "drift validate reports the accuracy drop after the shift",
               f"accuracy {fmt3(acc_n)} -> {fmt3(acc_s)}, exit {rc_s}")
    step.say(f"drift: {len(drifted)} of {len(rep.get('columns', []))} columns drifted; "
             f"accuracy {fmt3(acc_n)} on normal data, {fmt3(acc_s)} after the shift")


if __name__ == "__main__":
    common.Step("serve", 6, "Serve behind the gateway: scale from zero, fallback, anomaly, drift").run(main)
