"""The pipe between a judge and an untrusted process (orchestrator/runner/wire.py): what a
judge accepts is data and tensors, never a callable the sender names."""
from __future__ import annotations

import collections
import os
import pickle

import numpy as np
import pytest
import torch

from orchestrator.runner import wire


class _CallsSystem:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_tensors_keep_values_dtypes_views_and_shared_storage() -> None:
    a = torch.randn(5, 7)
    msg = {"x": a, "t": a.t(), "view": a[1:3, 2:], "bool": torch.tensor([True, False]),
           "half": torch.randn(3).half(), "bf16": torch.randn(4).bfloat16(), "int8": torch.arange(-3, 3, dtype=torch.int8),
           "fp8": torch.randn(4).to(torch.float8_e4m3fn), "empty": torch.empty(0, 3)}
    out = wire.loads(wire.dumps(msg))
    for name in ("x", "t", "view", "bool", "half", "bf16", "int8", "empty"):
        assert out[name].dtype == msg[name].dtype and torch.equal(out[name], msg[name]), name
        assert out[name].stride() == msg[name].stride() and out[name].storage_offset() == msg[name].storage_offset()
    assert torch.equal(out["fp8"].view(torch.uint8), msg["fp8"].view(torch.uint8))
    assert out["t"].untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()  # still one storage
    out["x"][0, 0] = 123.0
    assert a[0, 0] != 123.0  # a copy, not shared with the sender


def test_plain_data_crosses_and_numpy_scalars_become_python_numbers() -> None:
    msg = {"ints": (1, -2), "f": 2.5, "c": complex(1, 2), "s": "x", "b": b"k", "none": None, "set": {1, 2},
           "np": [np.float64(1.5), np.int64(3)], "size": torch.Size([2, 3]), "od": collections.OrderedDict(k=1)}
    out = wire.loads(wire.dumps(msg))
    assert out == {**msg, "np": [1.5, 3], "size": (2, 3), "od": {"k": 1}}
    assert type(out["np"][1]) is int and type(out["size"]) is tuple


@pytest.mark.parametrize("payload", [
    pickle.dumps({"ok": True, "output": _CallsSystem()}),       # a callable the sender names
    pickle.dumps(torch.ones(3)),                                 # torch's own pickling runs torch.load
    pickle.dumps(np.zeros(3)),
    b"\x80\x05not a pickle",
])
def test_the_judge_refuses_anything_but_data_and_tensors(payload: bytes) -> None:
    with pytest.raises(pickle.UnpicklingError):
        wire.loads(payload)


class _Bytes16:
    def __reduce__(self):
        return (wire._storage, (bytearray(16), "cpu"))


class _Geometry:
    def __init__(self, size: tuple, stride: tuple, offset: int):
        self.args = size, stride, offset

    def __reduce__(self):
        return (wire._tensor, (_Bytes16(), "float32", *self.args))


def test_a_tensor_reaching_past_its_storage_is_refused() -> None:
    assert wire.loads(pickle.dumps(_Geometry((4,), (1,), 0))).shape == (4,)  # 16 bytes: four floats
    for size, stride, offset in [((400,), (1,), 0), ((2,), (1,), 3), ((2,), (-1,), 1)]:
        with pytest.raises(pickle.UnpicklingError):
            wire.loads(pickle.dumps(_Geometry(size, stride, offset)))


@pytest.mark.parametrize("value", [np.zeros(3), object(), torch.ones(2).to_sparse()])
def test_the_sender_refuses_what_the_judge_would_refuse(value: object) -> None:
    # a legitimate process fails in its own code, so a refusal in the judge means a forged message
    with pytest.raises(pickle.PicklingError):
        wire.dumps({"output": value})


@pytest.mark.gpu
def test_cuda_tensors_come_back_on_their_device_with_their_views() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    a = torch.randn(64, 48, device="cuda")
    msg = {"x": a, "t": a.t(), "bf16": a[3:9].bfloat16(), "cpu": torch.arange(5)}
    out = wire.loads(wire.dumps(msg))
    assert out["x"].device == a.device and out["cpu"].device.type == "cpu"
    for name in ("x", "t", "bf16"):
        assert torch.equal(out[name], msg[name]) and out[name].stride() == msg[name].stride(), name
    assert out["t"].untyped_storage().data_ptr() == out["x"].untyped_storage().data_ptr()
    assert out["x"].data_ptr() != a.data_ptr()
