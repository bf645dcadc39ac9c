"""Flattening of nested state_dicts into named arrays plus a JSON skeleton.

A PyTorch state_dict is a tree: dicts (with str or int keys), lists and tuples,
whose leaves are tensors, numpy arrays or plain Python values (the optimizer's
hyper-parameters, a step counter). A checkpoint stores only flat, named arrays,
so `flatten` turns the tree into

  * a list of (name, array) pairs, each array C-contiguous, little-endian and
    sharing memory with the caller's tensor whenever that is possible, and
  * a JSON-serialisable skeleton recording the containers (dict, OrderedDict
    with its `_metadata` versions, list, tuple), the key types, the
    plain values and, at each array leaf, its name and whether it was a tensor
    or a numpy array,

and `unflatten` rebuilds the same tree from the skeleton and the loaded arrays.
Names join the keys with "." ("model.fc1.weight", "optimizer.state.0.exp_avg"),
the convention of torch.distributed.checkpoint, so other tools see readable
safetensors names.
"""

import json
import math
from collections import OrderedDict

import numpy as np

try:
    import torch
except ImportError:  # numpy-only use of the module
    torch = None

# Element type names are those of safetensors. Types numpy lacks (bfloat16 and
# the float8 types) travel as same-sized integers and are viewed back as the
# torch dtype after loading.
_NUMPY_TO_NAME = {
    np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "U8", np.dtype(np.int8): "I8",
    np.dtype(np.int16): "I16", np.dtype(np.uint16): "U16", np.dtype(np.float16): "F16",
    np.dtype(np.int32): "I32", np.dtype(np.uint32): "U32", np.dtype(np.float32): "F32",
    np.dtype(np.float64): "F64", np.dtype(np.int64): "I64", np.dtype(np.uint64): "U64",
}
_NAME_TO_NUMPY = {name: dt for dt, name in _NUMPY_TO_NAME.items()}
# How a dtype numpy lacks is carried: (name, numpy stand-in).
_CARRIED = {"BF16": np.dtype(np.int16), "F8_E4M3": np.dtype(np.uint8), "F8_E5M2": np.dtype(np.uint8)}

if torch is not None:
    _TORCH_TO_NAME = {
        torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
        torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32",
        torch.float32: "F32", torch.float64: "F64", torch.int64: "I64",
    }
    for _attr, _name in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2"),
                         ("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64")):
        if hasattr(torch, _attr):
            _TORCH_TO_NAME[getattr(torch, _attr)] = _name
    _NAME_TO_TORCH = {name: dt for dt, name in _TORCH_TO_NAME.items()}
else:
    _TORCH_TO_NAME, _NAME_TO_TORCH = {}, {}


def _is_tensor(value):
    return torch is not None and isinstance(value, torch.Tensor)


def _tensor_to_numpy(tensor, path):
    """A numpy array over the tensor's memory (a copy only when the tensor is on
    a device, not contiguous or of a type numpy lacks a same-size stand-in for)."""
    name = _TORCH_TO_NAME.get(tensor.dtype)
    if name is None:
        raise TypeError(f"state{path}: tensor dtype {tensor.dtype} cannot be checkpointed; "
                        f"convert it to one of {sorted(set(_TORCH_TO_NAME.values()))}")
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if name in _CARRIED:
        t = t.view(torch.int16 if name == "BF16" else torch.uint8)
    return name, t.numpy()


def _array_to_numpy(array, path):
    arr = np.ascontiguousarray(array)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    name = _NUMPY_TO_NAME.get(np.dtype(arr.dtype.str.replace(">", "<")))
    if name is None:
        raise TypeError(f"state{path}: numpy dtype {array.dtype} cannot be checkpointed; "
                        f"convert it to one of {sorted(set(_NUMPY_TO_NAME.values()))}")
    return name, arr


def _encode_key(key, path):
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError(f"state{path}: dict key {key!r} of type {type(key).__name__} is not "
                        "supported; use str or int keys")
    return key


def flatten(state):
    """Returns (arrays, skeleton): arrays is a list of (name, dtype_name, ndarray).

    Raises TypeError naming the path of a value that cannot be stored and
    ValueError when two leaves map to the same name."""
    arrays = []
    seen = set()

    def name_of(parts):
        return ".".join(str(p) for p in parts)

    def walk(value, parts):
        path = "".join(f"[{p!r}]" for p in parts)
        if isinstance(value, dict):
            node = {"o" if isinstance(value, OrderedDict) else "d":
                    [[_encode_key(k, path), walk(v, parts + [k])] for k, v in value.items()]}
            # Module.state_dict() carries per-module versions that
            # load_state_dict reads; torch.save keeps them, and so do we.
            extra = getattr(value, "_metadata", None)
            if isinstance(extra, dict):
                node["m"] = json.loads(json.dumps(extra))
            return node
        if isinstance(value, (list, tuple)):
            items = [walk(v, parts + [i]) for i, v in enumerate(value)]
            return {"u" if isinstance(value, tuple) else "l": items}
        if _is_tensor(value) or isinstance(value, np.ndarray):
            if _is_tensor(value):
                dtype, arr = _tensor_to_numpy(value, path)
            else:
                dtype, arr = _array_to_numpy(value, path)
            name = name_of(parts)
            if not name:
                raise TypeError("state must be a dict, list or tuple, not a single array")
            if name in seen:
                raise ValueError(f"state{path}: name '{name}' is used by two values; "
                                 "rename a key so that dotted paths are unique")
            seen.add(name)
            arrays.append((name, dtype, arr))
            return {"t" if _is_tensor(value) else "n": name}
        if value is None or isinstance(value, (bool, int, str)):
            return {"v": value}
        if isinstance(value, float):
            # JSON has no inf or nan; repr() round-trips every float exactly.
            return {"f": repr(value)} if not math.isfinite(value) else {"v": value}
        if isinstance(value, np.generic):
            return walk(value.item(), parts)
        raise TypeError(f"state{path}: value of type {type(value).__name__} cannot be "
                        "checkpointed; use tensors, numpy arrays, dict/list/tuple, "
                        "or str/int/float/bool/None")

    skeleton = walk(state, [])
    if not skeleton.keys() & {"d", "o", "l", "u"}:
        raise TypeError(f"state must be a dict, list or tuple, not {type(state).__name__}")
    return arrays, skeleton


def to_leaf(array, dtype_name, as_tensor):
    """The caller-facing value of a loaded array: a torch tensor sharing its
    memory (as_tensor and torch available) or the numpy array itself."""
    if dtype_name in _CARRIED:
        if torch is None:
            return array
        t = torch.from_numpy(array)
        return t.view(_NAME_TO_TORCH[dtype_name]) if dtype_name in _NAME_TO_TORCH else t
    if not as_tensor or torch is None or dtype_name not in _NAME_TO_TORCH:
        return array
    return torch.from_numpy(array)


def numpy_dtype(dtype_name):
    """The numpy dtype a stored array of this type is exposed as."""
    if dtype_name in _CARRIED:
        return _CARRIED[dtype_name]
    return _NAME_TO_NUMPY[dtype_name]


def unflatten(skeleton, leaves, names=None):
    """Rebuilds the tree. leaves maps name -> loaded ndarray paired with its dtype
    name: {name: (dtype_name, ndarray)}. With names (a set), only the branches
    holding a selected array are kept and plain values are dropped."""

    def build(node):
        kind = next(k for k in node if k != "m")
        body = node[kind]
        if kind in ("d", "o"):
            out = OrderedDict() if kind == "o" else {}
            for key, child in body:
                v = build(child)
                if v is not _SKIP:
                    out[key] = v
            if "m" in node:
                out._metadata = node["m"]
            return _SKIP if names is not None and not out else out
        if kind in ("l", "u"):
            items = [build(c) for c in body]
            if names is not None:
                items = [v for v in items if v is not _SKIP]
                if not items:
                    return _SKIP
            return tuple(items) if kind == "u" else items
        if kind in ("t", "n"):
            if names is not None and body not in names:
                return _SKIP
            dtype_name, array = leaves[body]
            return to_leaf(array, dtype_name, kind == "t")
        if names is not None:
            return _SKIP
        return float(body) if kind == "f" else body

    out = build(skeleton)
    return {} if out is _SKIP else out


def merge(a, b):
    """Merges skeleton b into skeleton a: dicts key by key (recursively),
    anything else keeps a's node. Used to combine the states of several ranks."""
    kind_a = next(k for k in a if k != "m")
    kind_b = next(k for k in b if k != "m")
    if kind_a not in ("d", "o") or kind_b not in ("d", "o"):
        return a
    pairs = [list(p) for p in a[kind_a]]
    index = {json.dumps(k): i for i, (k, _) in enumerate(pairs)}
    for key, child in b[kind_b]:
        i = index.get(json.dumps(key))
        if i is None:
            index[json.dumps(key)] = len(pairs)
            pairs.append([key, child])
        else:
            pairs[i][1] = merge(pairs[i][1], child)
    return dict(a, **{kind_a: pairs})


class _Skip:
    pass


_SKIP = _Skip()
