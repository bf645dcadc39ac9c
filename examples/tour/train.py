#!/usr/bin/python3
"""The tour's training program: a small PyTorch MLP on the churn data, with
crash-safe checkpoints through gantry.CheckpointManager.

    train.py --data DIR --ckpt DIR [--lr X] [--epochs N] [--out MODEL_DIR]

Every --every steps the whole training state (model, optimizer, the batch
sampler's generator, the step) is saved with save_async, keeping --keep-last
checkpoints; on start it resumes from the newest committed one. It prints
"step N loss L" per step (repr of the float, so runs compare bit for bit) and,
under `gantry jobs`, reports the validation loss once per epoch
(gantry.jobs.report), which the sweep's Bandit policy reads. --out writes the
trained model: weights.npz (plain arrays, loaded without pickle) and
model.json (architecture, feature scaling, metrics).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

import gantry
from gantry import jobs

HIDDEN = 64


def load(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1)
    return a[:, :-1], a[:, -1].astype(np.int64)


def build(seed, n_features):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(n_features, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, 2))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--ckpt", required=True, help="checkpoint root")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--every", type=int, default=25, help="checkpoint every N steps")
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", help="write the trained model here")
    args = p.parse_args(argv)

    torch.set_num_threads(1)  # one thread: bit-for-bit reproducible CPU kernels
    xtr, ytr = load(os.path.join(args.data, "train.csv"))
    xva, yva = load(os.path.join(args.data, "val.csv"))
    mean, std = xtr.mean(axis=0), xtr.std(axis=0) + 1e-9
    x = torch.tensor((xtr - mean) / std, dtype=torch.float32)
    y = torch.tensor(ytr)
    xv = torch.tensor((xva - mean) / std, dtype=torch.float32)
    yv = torch.tensor(yva)

    model = build(args.seed, x.shape[1])
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-3)
    sampler = torch.Generator().manual_seed(args.seed + 1)
    per_epoch = (x.shape[0] + args.batch - 1) // args.batch
    total = per_epoch * args.epochs

    ckpt = gantry.CheckpointManager(args.ckpt, run="churn", keep_last=args.keep_last)
    start = 0
    latest = ckpt.latest()
    if latest is not None:
        state = ckpt.load(latest)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sampler.set_state(state["sampler"])
        start = state["step"]
        print(f"resumed from step {start}", flush=True)

    val_loss = float("nan")
    for step in range(start + 1, total + 1):
        idx = torch.randint(0, x.shape[0], (args.batch,), generator=sampler)
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item()!r}", flush=True)
        if step % per_epoch == 0:
            with torch.no_grad():
                logits = model(xv)
                val_loss = torch.nn.functional.cross_entropy(logits, yv).item()
                acc = (logits.argmax(dim=1) == yv).float().mean().item()
            print(f"epoch {step // per_epoch} val_loss {val_loss:.5f} val_accuracy {acc:.4f}",
                  flush=True)
            jobs.report(step=step // per_epoch, val_loss=val_loss, val_accuracy=acc)
        if step % args.every == 0 or step == total:
            ckpt.save_async(step, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                   "sampler": sampler.get_state(), "step": step},
                            metadata={"loss": loss.item()})
    ckpt.close()  # waits for the last save

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        arrays = {k: v.detach().numpy() for k, v in model.state_dict().items()}
        np.savez(os.path.join(args.out, "weights.npz"), **arrays)
        with open(os.path.join(args.out, "model.json"), "w") as f:
            json.dump({"kind": "mlp", "hidden": HIDDEN, "layers": ["0", "2", "4"],
                       "mean": mean.tolist(), "std": std.tolist(), "lr": args.lr,
                       "epochs": args.epochs, "val_loss": val_loss}, f, indent=1)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
