"""Gantry: checkpoints of PyTorch state_dicts and numpy arrays.

    import gantry
    ckpt = gantry.CheckpointManager("/mnt/ckpt", run="llm", keep_last=3)
    ckpt.save_async(step, {"model": model.state_dict(), "optim": opt.state_dict()})
    ...
    step = ckpt.latest()                      # None when nothing is committed
    state = ckpt.load(step)
    model.load_state_dict(state["model"]); opt.load_state_dict(state["optim"])

Each step is written as safetensors shards, a manifest with per-chunk XXH3
checksums and a commit marker, atomically: a crash during a save leaves the
previously committed steps untouched. Tensors (and numpy arrays) go to the
shards; everything else in the state (step counters, optimizer
hyper-parameters, tuples, int dict keys) is kept in the manifest's metadata,
and `load` returns the same nested structure with tensors that own their
memory (no copy after the read). See README.md, section "gantry ckpt".
"""

import datetime
import json
import warnings

import numpy as np

from . import _tree
from ._gantry import CheckpointError
from ._gantry import Manager as _Manager

__all__ = ["CheckpointManager", "CheckpointError"]

# The manifest metadata key holding the state's skeleton (see _tree.flatten).
# The manifest keeps rank 0's metadata only, so in a distributed save every
# other rank stores its skeleton as a small U8 tensor named _TREE_KEY.rank<r>
# in its own shard, and load() merges the trees.
_TREE_KEY = "gantry.state_tree"


def _rank_tree_name(rank):
    return f"{_TREE_KEY}.rank{rank}"


def _seconds(value, what):
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if value < 0:
        raise ValueError(f"{what}={value} is negative; pass seconds >= 0 or a timedelta")
    return int(value)


class CheckpointManager:
    """Saves and loads the checkpoints of one run: <root>/<run>/step-<step>/.

    Args:
      root: directory holding runs (created if missing).
      run: run name, a directory under root.
      keep_last, keep_every, keep_for: retention applied after each committed
        save: keep the N newest steps, every step divisible by K, and steps
        younger than keep_for (seconds or a timedelta). 0 disables a rule; all
        0 keeps everything. The newest committed step is never deleted.
      verify: "full", "sample" or "none": how load() and latest() check the
        per-chunk checksums.
      fallback: when the newest committed step fails verification, latest()
        falls back to the next older one (with a warning saying why).
      rank, world_size: this process's shard of a distributed checkpoint;
        every rank saves its own tensors (names must be unique across ranks)
        and rank 0 commits once all shards are durable.
      staging_bytes: initial size of the save_async staging pool (0: sized by
        the first save).
      chunk_bytes: checksum granularity (0: the library's default, 4 MiB).
      direct_io: write shards with O_DIRECT where the filesystem supports it.
      persist: object-store URL of the durable tier ("az://acct/container/prefix",
        "file:///mnt/share/ckpts", or an Azure connection string such as
        "UseDevelopmentStorage=true" together with `container`). After each
        committed save a background uploader copies the step there (shards,
        manifest, commit marker last); load()/latest() fall back to the store
        when the local copy is missing or damaged (e.g. a new VM after a Spot
        eviction). Credentials come from the URL / connection string or the
        AZURE_STORAGE_* environment variables. root itself may be such a URL
        (no local disk: checkpoints go straight to the store).
      container: the container for a connection-string `persist` or `root`.
      persist_keep_last, persist_keep_every, persist_keep_for: retention on
        the store, applied after each upload (like keep_last etc.).

    Not thread-safe: use one manager from one thread. Errors raise
    CheckpointError (a RuntimeError) whose `code` names the cause, e.g.
    "data_loss" for a corrupted shard; bad arguments raise ValueError/TypeError.
    """

    def __init__(self, root, run="default", *, keep_last=0, keep_every=0, keep_for=0,
                 verify="full", fallback=True, rank=0, world_size=1, staging_bytes=0,
                 chunk_bytes=0, direct_io=True, persist=None, container="",
                 persist_keep_last=0, persist_keep_every=0, persist_keep_for=0):
        self._m = _Manager(str(root), run, rank, world_size, keep_last, keep_every,
                           _seconds(keep_for, "keep_for"), verify, fallback, staging_bytes,
                           chunk_bytes, direct_io, "" if persist is None else str(persist),
                           container, persist_keep_last, persist_keep_every,
                           _seconds(persist_keep_for, "persist_keep_for"))
        self._rank = rank

    # -- saving -------------------------------------------------------------

    def _request(self, state, metadata):
        arrays, skeleton = _tree.flatten(state)
        meta = {} if metadata is None else dict(metadata)
        if _TREE_KEY in meta:
            raise ValueError(f"metadata key '{_TREE_KEY}' is reserved by gantry")
        meta[_TREE_KEY] = skeleton
        try:
            text = json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"metadata must be JSON-serialisable with finite floats: {e}") from None
        if self._rank != 0:
            tree = json.dumps(skeleton).encode()
            arrays.append((_rank_tree_name(self._rank), "U8", np.frombuffer(tree, np.uint8)))
        return arrays, text

    def save(self, step, state, metadata=None):
        """Saves `state` (a nested dict/list of tensors, arrays and plain values)
        as `step` and returns once the step is committed. `metadata` is an
        optional JSON-serialisable dict stored in the manifest. Tensors are
        written from their own memory (GPU tensors are copied to the host
        first); do not modify them until save returns."""
        arrays, text = self._request(state, metadata)
        self._m.save(step, arrays, text, False)

    def save_async(self, step, state, metadata=None):
        """Copies the tensors into a reusable staging pool and returns; a
        background writer commits the step. The caller may modify the tensors
        as soon as this returns. At most one save is in flight: a second call
        first waits for the previous one. The error of a failed background
        save is raised by the next save/save_async/wait call."""
        arrays, text = self._request(state, metadata)
        self._m.save(step, arrays, text, True)

    def wait(self):
        """Waits for the in-flight save_async; raises its error, if any."""
        self._m.wait()

    # -- reading ------------------------------------------------------------

    def latest(self):
        """The newest committed step that verifies, or None. When newer
        committed steps failed verification (and fallback is on) a
        RuntimeWarning names each skipped step and why."""
        found = self._m.latest()
        if found is None:
            return None
        step, skipped = found
        for line in skipped:
            warnings.warn(f"gantry: checkpoint {line}; falling back to step {step}",
                          RuntimeWarning, stacklevel=2)
        return step

    def list(self):
        """Committed steps, oldest first, as dicts: step, path, bytes, tensors,
        world_size, created (ISO-8601 UTC), created_unix_s, metadata."""
        out = []
        for info in self._m.list():
            meta = json.loads(info["metadata"]) if info["metadata"] else {}
            meta.pop(_TREE_KEY, None)
            info["metadata"] = meta
            out.append(info)
        return out

    def load(self, step=None, names=None, *, with_metadata=False):
        """Loads `step` (default: latest()) after verifying it, and returns the
        state as it was saved: same nesting, tensors as torch tensors and
        numpy arrays as numpy arrays, each owning its memory. `names` (dotted
        tensor names such as "model.fc1.weight") loads only those tensors; the
        result then holds only the branches leading to them. With
        with_metadata=True returns (state, metadata dict) instead.

        A distributed checkpoint comes back as the merge of every rank's state
        (dicts merged key by key; where ranks disagree on a plain value, rank
        0's wins); the metadata is rank 0's. A checkpoint written without this
        module (e.g. by the C++ API) comes back as a flat {name: tensor} dict."""
        selected = None if names is None else [str(n) for n in names]
        wanted = selected or []
        if selected:
            # Selected tensors of ranks > 0 are placed by their rank's skeleton.
            if step is None:
                step = self.latest()  # None: nothing committed, load() says so
            info = next((c for c in self._m.list() if c["step"] == step), None)
            world = info["world_size"] if info else 1
            wanted = selected + [_rank_tree_name(r) for r in range(1, world)]
        loaded_step, meta_text, tensors = self._m.load(step, wanted)
        trees = []
        leaves = {}
        for name, dtype_name, shape, buf in tensors:
            if name.startswith(_TREE_KEY + ".rank"):
                trees.append(json.loads(bytes(buf)))
                continue
            dt = _tree.numpy_dtype(dtype_name)
            if len(buf) == 0:
                array = np.zeros(shape, dtype=dt)
            else:
                array = np.frombuffer(buf, dtype=dt).reshape(shape)
            leaves[name] = (dtype_name, array)
        meta = json.loads(meta_text) if meta_text else {}
        skeleton = meta.pop(_TREE_KEY, None)
        for tree in trees:
            skeleton = tree if skeleton is None else _tree.merge(skeleton, tree)
        if skeleton is None:
            state = {name: _tree.to_leaf(arr, dt, True) for name, (dt, arr) in leaves.items()}
        else:
            state = _tree.unflatten(skeleton, leaves, None if names is None else set(selected))
        return (state, meta) if with_metadata else state

    def verify(self, step, mode="full"):
        """Checks `step` against its manifest ("full", "sample" or "none").
        Returns {step, bytes_checked, chunks_checked}; raises CheckpointError
        with code "data_loss" naming the shard and offset of a bad chunk."""
        return self._m.verify(step, mode)

    def prune(self):
        """Applies the retention rules now; returns the deleted steps."""
        return self._m.prune()

    def step_dir(self, step):
        """The directory of `step`: <root>/<run>/step-<10-digit step>."""
        return self._m.step_dir(step)

    # -- tiering and spot eviction ------------------------------------------

    def wait_for_uploads(self):
        """Waits until every committed step is on the `persist` store; raises
        the first upload error not reported yet (wait() raises it too; save()
        does not, so that an emergency checkpoint is never refused because an
        older upload failed)."""
        self._m.wait_for_uploads()

    def upload_status(self):
        """The background uploader: {enabled, store, pending (steps not yet on
        the store), last_uploaded, bytes_uploaded, last_seconds, last_error,
        failed}."""
        return self._m.upload_status()

    def persisted_steps(self):
        """Steps committed on the store (marker present), oldest first."""
        return self._m.persisted_steps()

    def on_eviction(self, fn, *, endpoint="", interval=1.0, acknowledge=False):
        """Watches Azure Scheduled Events (IMDS, polled every `interval`
        seconds; `endpoint` overrides http://169.254.169.254 and the
        GANTRY_IMDS_ENDPOINT variable) in a background thread and calls
        fn(event) once for each Preempt, Terminate or Redeploy event, so that
        training can make an emergency checkpoint before
        event["not_before_unix"] (a Spot eviction gives about 30 s). `event` is
        a dict: event_id, event_type, resources, event_status, not_before
        (text), not_before_unix (float or None), description, event_source,
        duration_s. fn runs on the watcher thread: the simplest safe handler
        sets a flag that the training loop checks, which then calls save()
        (the manager is not thread-safe). With acknowledge=True the event is
        acknowledged after fn returns, letting the platform proceed early.
        Calling it again replaces the watcher; close() stops it."""
        self._m.on_eviction(fn, endpoint, float(interval), bool(acknowledge))

    def stop_eviction_watcher(self):
        """Stops the watcher started by on_eviction (no-op without one)."""
        self._m.stop_eviction_watcher()

    # -- lifetime -----------------------------------------------------------

    def close(self):
        """Waits for an in-flight save (raising its error) and for queued
        uploads, stops the eviction watcher and releases the manager.
        Idempotent."""
        if not self._m.closed:
            try:
                self._m.wait()
            finally:
                self._m.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False
