#!/usr/bin/python3
"""Crash-safe training with gantry checkpoints: kill it, restart it, and it
continues exactly where the last committed checkpoint left off.

A small PyTorch classifier (an MLP with dropout, AdamW, a cosine learning-rate
schedule) trains on a fixed synthetic dataset on the CPU. Every --every steps
the whole training state is saved with save_async, so the loop is blocked only
while the tensors are copied into staging:

    model and optimizer state_dicts, the scheduler's state (plain values, kept
    in the manifest), the global RNG state (dropout) and the data sampler's
    generator state, and the step number.

On start the script resumes from the newest committed checkpoint, if any. As
long as every source of randomness is part of the checkpoint, a run that is
killed (even with SIGKILL, in the middle of a save) and restarted prints the
same loss for every step as a run that was never interrupted; the test
python/tests/test_train_resume_integration.py checks exactly that.

    /usr/bin/python3 examples/train_resume.py --ckpt /tmp/ckpt --steps 300
    # prints "step <n> loss <value>" per step; kill it and run it again.
"""

import argparse
import sys

import torch

import gantry


def build(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Dropout(0.1),
        torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    return model, optimizer


def dataset(seed, n=4096):
    """A fixed synthetic 4-class problem: the label is decided by a random
    linear map, so the loss keeps falling for a few hundred steps."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(n, 32, generator=g)
    w = torch.randn(32, 4, generator=g)
    return x, (x @ w).argmax(dim=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ckpt", required=True, help="checkpoint root directory")
    p.add_argument("--run", default="train_resume", help="run name under --ckpt")
    p.add_argument("--steps", type=int, default=300, help="total training steps")
    p.add_argument("--every", type=int, default=20, help="checkpoint every N steps")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep-last", type=int, default=3, help="checkpoints to keep")
    args = p.parse_args(argv)

    torch.set_num_threads(1)  # one thread: bit-for-bit reproducible CPU kernels
    model, optimizer = build(args.seed)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    x, y = dataset(args.seed)
    sampler = torch.Generator().manual_seed(args.seed + 2)

    ckpt = gantry.CheckpointManager(args.ckpt, run=args.run, keep_last=args.keep_last)
    start = 0
    step = ckpt.latest()
    if step is not None:
        state = ckpt.load(step)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"]["torch"])
        sampler.set_state(state["rng"]["sampler"])
        start = state["step"]
        print(f"resumed from step {start}", flush=True)

    model.train()
    for step in range(start + 1, args.steps + 1):
        idx = torch.randint(0, x.shape[0], (args.batch,), generator=sampler)
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        # repr of the Python float: every bit of the loss, so runs compare exactly.
        print(f"step {step} loss {loss.item()!r}", flush=True)
        if step % args.every == 0 or step == args.steps:
            ckpt.save_async(step, {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": {"torch": torch.get_rng_state(), "sampler": sampler.get_state()},
                "step": step,
            }, metadata={"loss": loss.item()})
    ckpt.close()  # waits for the last save
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
