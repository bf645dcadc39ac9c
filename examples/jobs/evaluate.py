"""Scores the best trial's model on the held-out test set and writes eval.json."""

import argparse
import json

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--data", default="data")
    p.add_argument("--out", default="eval.json")
    a = p.parse_args()
    w = np.load(a.model + "/weights.npy")
    test = np.load(a.data + "/test.npz")
    acc = float((((test["x"] @ w) > 0).astype(np.float64) == test["y"]).mean())
    with open(a.out, "w") as f:
        json.dump({"test_accuracy": acc}, f)
    print(f"test accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
