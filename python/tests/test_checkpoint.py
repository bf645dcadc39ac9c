"""gantry.CheckpointManager from Python: nested PyTorch state_dicts and numpy
arrays round-trip exactly (values, dtypes, nesting, key types, plain values),
through save, save_async, latest, load(names=...), retention, verification and
corruption fallback; shards are plain safetensors files."""

import json
import math
import pathlib
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import gantry


def trained_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        loss = model(torch.randn(4, 8)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


def assert_same(a, b, path="state"):
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(a)} != {list(b)}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert np.array_equal(a, b), path
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def rich_state():
    model, opt = trained_state()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),  # int keys, tuples (betas), None, bools
        "extra": {
            "bf16": torch.arange(6, dtype=torch.float32).reshape(2, 3).to(torch.bfloat16),
            "f16": torch.linspace(-1, 1, 5, dtype=torch.float16),
            "f64": torch.tensor([math.pi], dtype=torch.float64),
            "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "bool": torch.tensor([True, False, True]),
            "scalar": torch.tensor(7, dtype=torch.int64),
            "empty": torch.zeros(0, 4),
            "strided": torch.arange(12.0).reshape(3, 4).t(),  # not contiguous
            "np_u16": np.arange(10, dtype=np.uint16),
            "np_u64": np.array([[2**63 + 1]], dtype=np.uint64),
            "np_f32": np.ones((2, 2), dtype=np.float32),
        },
        "plain": {"step": 12, "lr": 0.5, "inf": float("inf"), "nan": float("nan"), "name": "x",
                  "flag": True, "none": None, "pair": (1, "a"), "list": [1.5, [2, 3]]},
    }


def test_nested_state_round_trips_exactly(tmp_path):
    state = rich_state()
    with gantry.CheckpointManager(tmp_path) as ckpt:
        assert ckpt.latest() is None
        ckpt.save(12, state, metadata={"loss": 0.25})
        assert ckpt.latest() == 12
        loaded, meta = ckpt.load(with_metadata=True)
    expected = dict(state)
    expected["extra"] = dict(state["extra"], strided=state["extra"]["strided"].contiguous())
    assert_same(expected, loaded)
    assert loaded["model"]._metadata == state["model"]._metadata
    assert meta == {"loss": 0.25}


def test_loaded_state_restores_model_and_optimizer(tmp_path):
    model, opt = trained_state()
    with gantry.CheckpointManager(tmp_path) as ckpt:
        ckpt.save(1, {"model": model.state_dict(), "optimizer": opt.state_dict()})
        state = ckpt.load(1)
    model2 = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt2 = torch.optim.Adam(model2.parameters(), lr=1.0)
    model2.load_state_dict(state["model"])
    opt2.load_state_dict(state["optimizer"])
    assert_same(model.state_dict(), model2.state_dict())
    assert_same(opt.state_dict(), opt2.state_dict())
    # Loaded tensors own their memory: writable, page-aligned buffers from the
    # loader itself, not copies.
    weight = state["model"]["0.weight"]
    assert weight.data_ptr() % 4096 == 0
    weight.add_(1.0)


def test_save_async_snapshots_tensors_before_returning(tmp_path):
    weights = torch.ones(1000, 100)
    with gantry.CheckpointManager(tmp_path) as ckpt:
        ckpt.save_async(5, {"w": weights, "step": 5})
        weights.zero_()  # the training loop moves on at once
        ckpt.save_async(6, {"w": weights, "step": 6})  # waits for step 5 first
        ckpt.wait()
        assert [c["step"] for c in ckpt.list()] == [5, 6]
        assert torch.equal(ckpt.load(5)["w"], torch.ones(1000, 100))
        latest = ckpt.load(6)
        assert latest["step"] == 6 and not latest["w"].any()


def test_load_selected_names(tmp_path):
    model, opt = trained_state()
    with gantry.CheckpointManager(tmp_path) as ckpt:
        ckpt.save(3, {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3})
        part = ckpt.load(names=["model.2.bias", "optimizer.state.0.exp_avg"])
        assert list(part) == ["model", "optimizer"]
        assert list(part["model"]) == ["2.bias"]
        assert torch.equal(part["model"]["2.bias"], model.state_dict()["2.bias"])
        assert torch.equal(part["optimizer"]["state"][0]["exp_avg"],
                           opt.state_dict()["state"][0]["exp_avg"])
        with pytest.raises(gantry.CheckpointError, match="model.9.weight") as e:
            ckpt.load(names=["model.9.weight"])
        assert e.value.code == "not_found"


def test_retention_and_duplicate_step(tmp_path):
    with gantry.CheckpointManager(tmp_path, run="r", keep_last=2) as ckpt:
        for step in (10, 20, 30, 40):
            ckpt.save(step, {"x": np.full(4, step, dtype=np.int32)})
        assert [c["step"] for c in ckpt.list()] == [30, 40]
        assert pathlib.Path(ckpt.step_dir(40)) == tmp_path / "r" / "step-0000000040"
        with pytest.raises(gantry.CheckpointError) as e:
            ckpt.save(40, {"x": np.zeros(1)})
        assert e.value.code == "already_exists"
        assert np.array_equal(ckpt.load(40)["x"], np.full(4, 40, dtype=np.int32))


def read_safetensors(path):
    """A minimal independent reader of the safetensors layout."""
    raw = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return header, raw[8 + n:]


def test_shards_are_plain_safetensors(tmp_path):
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with gantry.CheckpointManager(tmp_path) as ckpt:
        ckpt.save(1, {"model": {"w": w, "b": torch.tensor([1.0, 2.0], dtype=torch.bfloat16)}})
        shards = list(pathlib.Path(ckpt.step_dir(1)).glob("*.safetensors"))
    assert len(shards) == 1
    header, data = read_safetensors(shards[0])
    assert header["model.w"]["dtype"] == "F32" and header["model.w"]["shape"] == [2, 3]
    begin, end = header["model.w"]["data_offsets"]
    assert np.array_equal(np.frombuffer(data[begin:end], dtype="<f4").reshape(2, 3), w.numpy())
    assert header["model.b"]["dtype"] == "BF16"


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


def test_corruption_is_detected_and_latest_falls_back(tmp_path):
    with gantry.CheckpointManager(tmp_path) as ckpt:
        ckpt.save(1, {"w": torch.ones(1024)})
        ckpt.save(2, {"w": torch.full((1024,), 2.0)})
        shard = next(pathlib.Path(ckpt.step_dir(2)).glob("*.safetensors"))
        flip_byte(shard, shard.stat().st_size - 100)
        with pytest.raises(gantry.CheckpointError) as e:
            ckpt.load(2)
        assert e.value.code == "data_loss" and shard.name in str(e.value)
        with pytest.raises(gantry.CheckpointError):
            ckpt.verify(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert ckpt.latest() == 1
        assert any("step 2" in str(w.message) for w in caught)
        assert torch.equal(ckpt.load()["w"], torch.ones(1024))


def test_bad_state_is_refused_with_its_path(tmp_path):
    with gantry.CheckpointManager(tmp_path) as ckpt:
        with pytest.raises(TypeError, match=r"\['opt'\]\['fn'\]"):
            ckpt.save(1, {"opt": {"fn": object()}})
        with pytest.raises(ValueError, match="a.b"):
            ckpt.save(1, {"a.b": torch.ones(1), "a": {"b": torch.ones(1)}})
        with pytest.raises(TypeError, match="complex"):
            ckpt.save(1, {"z": torch.ones(2, dtype=torch.complex64)})
        with pytest.raises(ValueError, match="reserved"):
            ckpt.save(1, {"x": torch.ones(1)}, metadata={"gantry.state_tree": 1})
        assert ckpt.latest() is None
    with pytest.raises(ValueError, match="most"):
        gantry.CheckpointManager(tmp_path, verify="most")


def test_closed_manager_refuses_calls(tmp_path):
    ckpt = gantry.CheckpointManager(tmp_path)
    ckpt.save_async(1, {"x": torch.ones(3)})
    ckpt.close()  # waits for the save
    ckpt.close()
    with pytest.raises(ValueError, match="closed"):
        ckpt.save(2, {"x": torch.ones(3)})
    with gantry.CheckpointManager(tmp_path) as again:
        assert again.latest() == 1


RANK_SCRIPT = """
import sys, torch, gantry
root, rank = sys.argv[1], int(sys.argv[2])
with gantry.CheckpointManager(root, rank=rank, world_size=2) as ckpt:
    state = {"model": {f"shard{rank}.w": torch.full((4,), float(rank))}, "step": 7, "rank": rank}
    ckpt.save(7, state, metadata={"by": rank})
"""


def test_distributed_save_merges_every_ranks_state(tmp_path):
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(tmp_path), str(r)])
             for r in (1, 0)]
    assert [p.wait(timeout=120) for p in ranks] == [0, 0]
    with gantry.CheckpointManager(tmp_path) as ckpt:
        assert ckpt.list()[0]["world_size"] == 2
        state, meta = ckpt.load(with_metadata=True)
        assert sorted(state["model"]) == ["shard0.w", "shard1.w"]
        assert torch.equal(state["model"]["shard1.w"], torch.ones(4))
        assert state["step"] == 7 and state["rank"] == 0 and meta == {"by": 0}
        part = ckpt.load(names=["model.shard1.w"])
        assert list(part) == ["model"] and list(part["model"]) == ["shard1.w"]
