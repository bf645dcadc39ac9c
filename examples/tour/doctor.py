#!/usr/bin/python3
"""Tour step `doctor`: one verdict on this node, then the Well-Architected
assessment of this node and of the Azure deployment the tour stands for
(azure/main.json, compiled from azure/main.bicep).

A CPU machine gets doctor's verdict for a CPU machine (GPU checks skipped, not
failed); what matters here is that every command gives a verdict the tour can
read, and that the template's findings name their rules.
"""

import json
import os

import common


def main(step):
    g = common.gantry()
    d = common.out_dir("doctor")
    doc = common.run([g, "doctor", "--json"], check=False, timeout=300, quiet=True)
    try:
        verdict = json.loads(doc.stdout)
    except ValueError:
        verdict = {}
    overall = verdict.get("overall", "?")
    counts = {}
    for c in verdict.get("checks", []):
        counts[c.get("verdict", "?")] = counts.get(c.get("verdict", "?"), 0) + 1
    step.check(doc.returncode in (0, 1) and overall in ("pass", "warn", "fail"),
               "gantry doctor gives one verdict on this node",
               f"exit {doc.returncode}, overall {overall}, checks {counts}")
    with open(os.path.join(d, "doctor.json"), "w") as f:
        f.write(doc.stdout)
    step.say(f"doctor: {overall} in {verdict.get('elapsed_s', 0):.0f} s "
             f"({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}); "
             "the full answer is in doctor/doctor.json")

    for what, argv in (("node", ["--node"]),
                       ("template", [os.path.join(common.HERE, "azure", "main.json")])):
        out = os.path.join(d, f"assess_{what}.json")
        p = common.run([g, "assess", "run", *argv, "--format", "json", "--output", out,
                        "--fail-on", "critical"], check=False, timeout=300)
        rep = common.load_json(out) if os.path.exists(out) else {}
        results = rep.get("findings", [])
        failed = [r for r in results if r.get("outcome") == "fail"]
        step.check(p.returncode in (0, 1) and results,
                   f"gantry assess run {' '.join(argv) if what == 'node' else 'azure/main.json'} "
                   f"gives findings", f"exit {p.returncode}, {len(results)} results, "
                   f"{len(failed)} failed")
        ids = sorted({r["rule"] for r in failed})
        step.say(f"assess {what}: {len(results)} checks, {len(failed)} failed"
                 + (f" ({', '.join(ids[:8])}{'...' if len(ids) > 8 else ''})" if ids else ""))


if __name__ == "__main__":
    common.Step("doctor", 1, "Doctor and Well-Architected assessment").run(main)
