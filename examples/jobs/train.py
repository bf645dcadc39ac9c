"""One sweep trial: logistic regression by gradient descent, one epoch per
reported step. It checkpoints every epoch with gantry.CheckpointManager, so a
trial that the sweep pauses (ASHA with `checkpoint: pause`), retries or Slurm
requeues continues from its last epoch instead of starting over."""

import argparse
import os
import time

import numpy as np

import gantry
from gantry import jobs


def accuracy(w, x, y):
    return float((((x @ w) > 0).astype(np.float64) == y).mean())


def log_loss(w, x, y):
    p = np.clip(1 / (1 + np.exp(-(x @ w))), 1e-12, 1 - 1e-12)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data")
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--out", default=jobs.trial_dir() or "out")
    p.add_argument("--epoch-seconds", type=float, default=0.0,
                   help="sleep per epoch (lets a demo show trials side by side)")
    a = p.parse_args()
    train = np.load(os.path.join(a.data, "train.npz"))
    val = np.load(os.path.join(a.data, "val.npz"))
    ckpt = gantry.CheckpointManager(jobs.checkpoint_dir() or os.path.join(a.out, "ckpt"),
                                    run="trial", keep_last=2)
    w = np.zeros(train["x"].shape[1])
    start = ckpt.latest()
    if start is not None:
        w = ckpt.load(start)["w"]
        print(f"resumed from epoch {start}", flush=True)
    for epoch in range((start or 0) + 1, a.epochs + 1):
        z = train["x"] @ w
        grad = train["x"].T @ (1 / (1 + np.exp(-z)) - train["y"]) / len(z)
        w = w - a.lr * grad
        ckpt.save(epoch, {"w": w})
        acc = accuracy(w, val["x"], val["y"])
        loss = log_loss(w, val["x"], val["y"])
        jobs.report(step=epoch, loss=loss, accuracy=acc)
        print(f"epoch {epoch} loss {loss:.4f} accuracy {acc:.4f}", flush=True)
        time.sleep(a.epoch_seconds)
    os.makedirs(os.path.join(a.out, "model"), exist_ok=True)
    np.save(os.path.join(a.out, "model", "weights.npy"), w)


if __name__ == "__main__":
    main()
