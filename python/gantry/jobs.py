"""Helpers for programs run by `gantry jobs` (steps and sweep trials).

    from gantry import jobs
    lr = float(jobs.params().get("lr", 0.01))
    for epoch in range(...):
        ...
        jobs.report(step=epoch, accuracy=acc, loss=loss)

Outside `gantry jobs` every function is harmless: report() writes nothing and
params() is empty, so the same script runs by hand.
"""

import math
import os

__all__ = ["report", "params", "resuming", "trial_dir", "checkpoint_dir", "trial_index"]


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"metric {name}={value!r} is not a number")
    return value


def report(step=None, **metrics):
    """Appends one metrics line for the runner ("accuracy=0.91 step=3") to
    $GANTRY_METRICS_FILE. The sweep's early-termination policy reads the
    primary metric from it; `step` (an int) is the interval it belongs to
    (default: the count of reports)."""
    path = os.environ.get("GANTRY_METRICS_FILE")
    if not metrics:
        raise ValueError("report() needs at least one metric, e.g. report(accuracy=0.9)")
    parts = []
    for name, value in metrics.items():
        if not name.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"metric name {name!r}: use letters, digits, '_' and '.'")
        v = float(_number(name, value))
        parts.append(f"{name}={'nan' if math.isnan(v) else repr(v)}")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"step={step!r} is not an int")
        parts.append(f"step={step}")
    if not path:
        return
    # One write of a whole line, so the runner never reads half of one.
    with open(path, "a") as f:
        f.write(" ".join(parts) + "\n")


def _value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def params():
    """The trial's hyper-parameters from GANTRY_PARAM_<NAME> (names lower-cased),
    as int, float or str."""
    out = {}
    for k, v in os.environ.items():
        if k.startswith("GANTRY_PARAM_"):
            out[k[len("GANTRY_PARAM_"):].lower()] = _value(v)
    return out


def resuming():
    """True when this trial continues an earlier attempt (promoted by ASHA,
    retried): load the latest checkpoint instead of starting over."""
    return os.environ.get("GANTRY_TRIAL_RESUME") == "1"


def trial_dir():
    """The trial's own directory, or None outside a sweep."""
    return os.environ.get("GANTRY_TRIAL_DIR")


def checkpoint_dir():
    """Where the trial keeps its checkpoints (GANTRY_CKPT_DIR), or None."""
    return os.environ.get("GANTRY_CKPT_DIR")


def trial_index():
    """The trial's index in the sweep, or None."""
    v = os.environ.get("GANTRY_TRIAL_INDEX")
    return int(v) if v is not None else None
