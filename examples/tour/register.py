#!/usr/bin/python3
"""Tour step `register`: the sweep's best trial becomes churn/1 in the
registry, with lineage, signed, and promoted to `production` with
compare-and-set.

    register.py --best DIR --run-id ID --lr X --metric V

Also records the sweep (every trial's validation-loss curve, which ones the
Bandit policy stopped) for the report, from the jobs state file.
"""

import argparse
import glob
import json
import os
import shutil

import common


def sweep_series(step):
    """The sweep's trials from gantry jobs' state file and each trial's metrics."""
    state = common.load_json(os.path.join(common.out_dir("jobs"), "state.json"))
    sweep = state["steps"]["sweep"]
    trials, best = [], sweep.get("best_trial")
    if sweep.get("started") and sweep.get("finished"):
        step.seconds = sweep["finished"] - sweep["started"]
    for t in sweep.get("trials", []):
        values = []
        for path in glob.glob(os.path.join(t["dir"], "*metrics*")):
            with open(path) as f:
                for line in f:
                    kv = dict(p.split("=", 1) for p in line.split() if "=" in p)
                    if "val_loss" in kv and "step" in kv:
                        values.append([int(kv["step"]), float(kv["val_loss"])])
        status = ("early_terminated" if t.get("pruned") else
                  "succeeded" if t.get("state") == "succeeded" else t.get("state", "?"))
        trials.append({"trial": t["index"], "params": dict(t.get("params", [])),
                       "values": sorted(values), "status": status, "best": t["index"] == best})
    step.series["sweep"] = {"trials": trials, "metric": "val_loss"}
    stopped = [t for t in trials if t["status"] == "early_terminated"]
    step.say(f"{len(trials)} trials, {len(stopped)} stopped early by Bandit "
             f"(slack 0.1): trials {[t['trial'] for t in stopped]}")
    if best is not None:
        b = next(t for t in trials if t["trial"] == best)
        step.say(f"best trial {best}: lr={b['params'].get('lr'):.4g}, "
                 f"val_loss {b['values'][-1][1] if b['values'] else float('nan'):.4f}")
    step.check(len(trials) >= 4, "the sweep ran its trials", f"{len(trials)} trials")
    step.check(len(stopped) >= 1, "Bandit early termination stopped at least one trial",
               f"{len(stopped)} stopped")
    step.check(best is not None, "the sweep picked a best trial", f"trial {best}")


def registry_env():
    root = common.out_dir("registry")
    return root, {"GANTRY_REGISTRY_DB": os.path.join(root, "registry.db"),
                  "GANTRY_REGISTRY_AUDIT_LOG": os.path.join(root, "audit.jsonl")}


def main(step, args):
    sweep = common.Step("sweep", 4, "Sweep the learning rate with Bandit early termination")
    try:
        sweep_series(sweep)
    except (KeyError, OSError, ValueError) as e:
        sweep.check(False, "the jobs state file has the sweep", repr(e))
    sweep.write()

    g = common.gantry()
    root, env = registry_env()
    keys = common.out_dir("keys")
    for p in glob.glob(os.path.join(root, "*")):  # a re-run starts a fresh registry
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    dataset = common.load_json(os.path.join(common.out_dir("data"), "dataset.json"))["digest"]
    artifacts = "file://" + os.path.join(root, "artifacts")

    common.run([g, "registry", "keygen", "--alg", "ed25519", "--out",
                os.path.join(keys, "release")], env=env, check=False)
    if not os.path.exists(os.path.join(keys, "release.key")):
        raise RuntimeError("gantry registry keygen wrote no release.key")
    common.run([g, "registry", "list", "--artifacts", artifacts], env=env)
    common.run([g, "registry", "trust", "add", os.path.join(keys, "release.pub"),
                "--comment", "tour release key"], env=env)
    common.run([g, "registry", "policy", "--require-signatures", "on"], env=env)
    reg = common.run_json([g, "registry", "register", "churn", args.best, "--run-id", args.run_id,
                           "--dataset", dataset, "--metric", f"val_loss={args.metric}",
                           "--tag", f"lr={args.lr}", "--json"], env=env)
    version = reg.get("version", 1)
    ref = f"churn/{version}"
    step.say(f"registered {ref} from {args.best} (run {args.run_id}, dataset {dataset[:19]}...)")

    unsigned = common.run([g, "registry", "download", ref, os.path.join(root, "unsigned-try")],
                          env=env, check=False)
    step.check(unsigned.returncode == 2 and "sign" in (unsigned.stderr + unsigned.stdout),
               "an unsigned version is refused under require_signatures",
               (unsigned.stderr or unsigned.stdout).strip()[-160:])
    common.run([g, "registry", "sign", ref, "--key", os.path.join(keys, "release.key")], env=env)
    common.run([g, "registry", "alias", "set", "churn", "production", str(version),
                "--expect", "0"], env=env)
    moved = common.run([g, "registry", "alias", "set", "churn", "production", str(version),
                        "--expect", "0"], env=env, check=False)
    step.check(moved.returncode == 2, "a second compare-and-set expecting the old target is refused",
               (moved.stderr or moved.stdout).strip()[-160:])
    v = common.run([g, "registry", "verify", "churn@production"], env=env, check=False)
    step.check(v.returncode == 0, "gantry registry verify churn@production passes",
               v.stdout.strip().splitlines()[-1] if v.stdout.strip() else v.stderr.strip())
    info = common.run_json([g, "registry", "show", "churn@production", "--json"], env=env,
                           check=False)
    text = json.dumps(info)
    step.check(dataset in text and args.run_id in text, "lineage records the dataset and the run",
               f"dataset {dataset[:19]}..., run {args.run_id}")
    step.say(f"signed {ref} with an Ed25519 release key; production -> {version} "
             f"(compare-and-set from none)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--best", required=True)
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--lr", required=True)
    ap.add_argument("--metric", required=True)
    a = ap.parse_args()
    common.Step("register", 5, "Register, sign, promote to production").run(lambda s: main(s, a))
