"""Writes a synthetic two-class dataset (seeded, so every run is the same):
data/train.npz, data/val.npz and data/test.npz with arrays x (n x 20) and y."""

import argparse
import os

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="data")
    p.add_argument("--samples", type=int, default=6000)
    a = p.parse_args()
    rng = np.random.default_rng(7)
    w_true = rng.normal(size=20)
    x = rng.normal(size=(a.samples, 20))
    y = (x @ w_true + rng.normal(scale=2.0, size=a.samples) > 0).astype(np.float64)
    os.makedirs(a.out, exist_ok=True)
    n = a.samples
    for name, lo, hi in (("train", 0, n * 4 // 6), ("val", n * 4 // 6, n * 5 // 6),
                         ("test", n * 5 // 6, n)):
        np.savez(os.path.join(a.out, name + ".npz"), x=x[lo:hi], y=y[lo:hi])
    print(f"wrote {n} samples to {a.out}/")


if __name__ == "__main__":
    main()
