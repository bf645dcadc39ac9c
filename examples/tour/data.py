#!/usr/bin/python3
"""Tour step `data`: a generated tabular churn dataset, the drift schema, and
the fallback model.

Six numerical features of a subscription customer; the label (churned, 0/1)
is a fixed non-linear rule plus noise, so a small MLP beats a linear model.
Besides train/val/test it writes what the later steps send and compare:

  live_normal.csv      inputs like the training data (the gateway's normal traffic)
  live_shifted.csv     inputs after a market change: usage and spend moved
  labelled_normal.csv  labelled rows like the training data (validate passes)
  labelled_shifted.csv labelled rows after the change, whose churn rule moved too:
                       spend and usage stopped predicting churn (validate
                       reports the accuracy drop)
  fallback.json        a logistic regression on the same features, the gateway's
                       fallback tier: simpler, less accurate, always up
  schema.yaml          the `gantry drift` schema
  dataset.json         the training file's SHA-256 (the registry's lineage)
"""

import hashlib
import json
import os

import numpy as np

import common

FEATURES = ["tenure_months", "monthly_spend", "support_calls", "usage_hours", "discount",
            "late_payments"]


def features(rng, n, shifted=False):
    tenure = rng.gamma(2.0, 12.0, n)
    spend = rng.normal(60.0, 18.0, n)
    calls = rng.poisson(1.5, n).astype(float)
    usage = rng.normal(40.0, 12.0, n)
    discount = rng.uniform(0.0, 0.3, n)
    late = rng.poisson(0.4, n).astype(float)
    if shifted:  # a price rise: spend up, usage down, more support calls
        spend = spend * 1.35 + 10.0
        usage = usage * 0.6
        calls = calls + rng.poisson(1.5, n)
    return np.column_stack([tenure, spend, calls, usage, discount, late])


def labels(rng, x, shifted=False):
    tenure, spend, calls, usage, discount, late = x.T
    if shifted:
        # After the price change everyone spends more and uses less, so spend and
        # usage no longer tell who leaves: the model, which learnt that they do,
        # over-predicts churn (about 0.4 accuracy instead of 0.85).
        z = -0.06 * tenure + 0.9 * late + 0.3 * (calls - 3) - 0.5
    else:
        z = (-0.06 * tenure + 0.045 * (spend - 60) + 0.55 * calls - 0.05 * (usage - 40)
             - 6.0 * discount + 0.9 * late + 0.8 * np.sin(usage / 6.0) - 0.2)
    p = 1.0 / (1.0 + np.exp(-2.0 * z))
    return (rng.uniform(size=len(p)) < p).astype(int)


def write_csv(path, x, y=None):
    header = ",".join(FEATURES + (["churned"] if y is not None else []))
    with open(path, "w") as f:
        f.write(header + "\n")
        for i, row in enumerate(x):
            cells = [f"{v:.4f}" for v in row] + ([str(int(y[i]))] if y is not None else [])
            f.write(",".join(cells) + "\n")


def fit_logistic(x, y, mean, std, steps=400, lr=0.5):
    """Plain gradient descent on standardised features: the fallback model."""
    z = (x - mean) / std
    w, b = np.zeros(z.shape[1]), 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(z @ w + b)))
        w -= lr * z.T @ (p - y) / len(y)
        b -= lr * float(np.mean(p - y))
    return w, b


def main(step):
    d = common.out_dir("data")
    rng = np.random.default_rng(20261203)
    splits = {"train": 6000, "val": 1500, "test": 1500}
    arrays = {}
    for name, n in splits.items():
        x = features(rng, n)
        arrays[name] = (x, labels(rng, x))
        write_csv(os.path.join(d, name + ".csv"), *arrays[name])
    write_csv(os.path.join(d, "live_normal.csv"), features(rng, 2000))
    write_csv(os.path.join(d, "live_shifted.csv"), features(rng, 2000, shifted=True))
    xn = features(rng, 600)
    write_csv(os.path.join(d, "labelled_normal.csv"), xn, labels(rng, xn))
    xs = features(rng, 600, shifted=True)
    write_csv(os.path.join(d, "labelled_shifted.csv"), xs, labels(rng, xs, shifted=True))

    x, y = arrays["train"]
    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
    w, b = fit_logistic(x, y, mean, std)
    xt, yt = arrays["test"]
    acc = float(np.mean(((((xt - mean) / std) @ w + b) > 0).astype(int) == yt))
    with open(os.path.join(d, "fallback.json"), "w") as f:
        json.dump({"kind": "logistic", "features": FEATURES, "mean": mean.tolist(),
                   "std": std.tolist(), "w": w.tolist(), "b": b, "test_accuracy": acc}, f)
    with open(os.path.join(d, "schema.yaml"), "w") as f:
        f.write("# gantry drift schema of the tour's churn data (docs/drift.md)\ncolumns:\n")
        for name in FEATURES:
            f.write(f"  {name}: numerical\n")
        f.write("  churned: {type: categorical, role: target}\ndrift_share: 0.3\n")
    with open(os.path.join(d, "train.csv"), "rb") as f:
        digest = "sha256:" + hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(d, "dataset.json"), "w") as f:
        json.dump({"digest": digest, "rows": splits, "features": FEATURES}, f)

    step.say(f"wrote {sum(splits.values())} labelled rows ({', '.join(f'{k} {v}' for k, v in splits.items())}), "
             f"live windows and labelled windows to {d}")
    step.say(f"training set {digest[:19]}..., churn rate {y.mean():.1%}")
    step.check(0.15 < y.mean() < 0.6, "classes are balanced enough to learn", f"churn {y.mean():.1%}")
    step.check(0.6 < acc < 0.95, "the fallback logistic regression learns something",
               f"test accuracy {acc:.3f}")


if __name__ == "__main__":
    common.Step("data", 2, "Generate the churn dataset").run(main)
