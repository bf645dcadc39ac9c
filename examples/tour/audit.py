#!/usr/bin/python3
"""Tour step `audit`: `gantry audit verify` on the gateway's audit log (every
request of the serve step, hash-chained, checkpoints signed with Ed25519) and
on the registry's (every register, sign, trust, policy and alias change; it
came back from the backup). Then one edited line in a copy must be caught,
naming the line.
"""

import json
import os

import common


def count(path):
    with open(path) as f:
        return sum(1 for line in f if line.strip())


def main(step):
    g = common.gantry()
    serve = common.out_dir("serve")
    gw_log = os.path.join(serve, "audit.jsonl")
    reg_log = os.path.join(common.out_dir("registry"), "audit.jsonl")
    v = common.run([g, "audit", "verify", gw_log, "--key", os.path.join(serve, "audit.pub")],
                   check=False)
    step.check(v.returncode == 0, "the gateway's audit log verifies (chain and signed checkpoints)",
               f"{count(gw_log)} records, exit {v.returncode}")
    r = common.run([g, "audit", "verify", reg_log], check=False)
    step.check(r.returncode == 0, "the registry's audit log verifies (restored from the backup)",
               f"{count(reg_log)} records, exit {r.returncode}")
    with open(reg_log) as f:
        actions = [json.loads(line).get("action") for line in f if line.strip()]
    step.say(f"registry audit: {', '.join(a for a in actions if a)}")

    # Tamper with a copy: change one request's status in the middle of the log.
    tampered = os.path.join(serve, "audit.tampered.jsonl")
    with open(gw_log) as f:
        lines = f.readlines()
    k = len(lines) // 2
    rec = json.loads(lines[k])
    rec["status"] = 200 if rec.get("status") != 200 else 201
    lines[k] = json.dumps(rec, separators=(",", ":")) + "\n"
    with open(tampered, "w") as f:
        f.writelines(lines)
    t = common.run([g, "audit", "verify", tampered, "--key", os.path.join(serve, "audit.pub")],
                   check=False)
    out = t.stdout + t.stderr
    said = "; ".join(" ".join(line.split()) for line in out.splitlines()
                     if line.startswith(("verdict", "first bad line", "reason")))
    step.check(t.returncode == 1 and f"first bad line  {k + 1}" in out,
               "one edited record is found, naming its line", f"line {k + 1} edited: {said}")


if __name__ == "__main__":
    common.Step("audit", 8, "Verify the audit logs").run(main)
