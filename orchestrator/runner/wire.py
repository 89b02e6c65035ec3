"""Messages between a judge and a process that runs untrusted code (a candidate, a
translation library, a rank), over a multiprocessing pipe.

The untrusted process can write anything to its end of the pipe: native code in it (a
load_inline extension, a CUDA library) can find the socket among its file descriptors
and send a message of its own. `pickle.loads` on such bytes runs whatever callable they
name, in the judge, which holds the nonce that signs verdicts. So the judge reads with
`loads`, which accepts plain data (None, bool, int, float, complex, str, bytes, lists,
tuples, dicts, sets) and tensors in this module's own encoding, and nothing else.

Tensors travel as their storage's raw bytes plus dtype, size, stride and offset (views
keep their geometry, tensors sharing a storage in one message still share it). That is
also faster than torch's own pickling, which goes through torch.save and torch.load.
"""
from __future__ import annotations

import io
import pickle
import re
from typing import Any

import torch

_DEVICE = re.compile(r"cpu|cuda(:\d{1,3})?")
_PLAIN = (bool, int, float, complex, str, bytes, tuple, list, dict, set, frozenset)
_ALLOWED = {("orchestrator.runner.wire", "_storage"), ("orchestrator.runner.wire", "_tensor"),
            ("builtins", "bytearray"), *(("builtins", t.__name__) for t in _PLAIN)}


class _StorageRef:
    """One storage of a message, pickled once however many tensors view it."""

    def __init__(self, tensor: torch.Tensor):
        self.storage = tensor.untyped_storage()
        self.device = str(tensor.device)

    def payload(self) -> tuple[Any, str]:
        flat = torch.empty(0, dtype=torch.uint8, device=self.storage.device)
        flat.set_(self.storage, 0, (self.storage.nbytes(),), (1,))
        data = flat.cpu().numpy()
        return pickle.PickleBuffer(data) if data.size else bytearray(), self.device


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._storages: dict[tuple[int, str], _StorageRef] = {}

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            if obj.layout != torch.strided or obj.is_quantized or obj.is_nested:
                raise pickle.PicklingError(f"only dense tensors cross the pipe, not {obj.layout}")
            t = obj.detach()
            key = (t.untyped_storage().data_ptr(), str(t.device))
            ref = self._storages.setdefault(key, _StorageRef(t))
            return _tensor, (ref, str(t.dtype).removeprefix("torch."), tuple(t.shape), tuple(t.stride()),
                             t.storage_offset())
        if isinstance(obj, _StorageRef):
            return _storage, obj.payload()
        if type(obj) in (complex, bytearray, pickle.PickleBuffer) or any(obj is x for x in (*_PLAIN, _storage, _tensor)):
            return NotImplemented  # pickled as they are (the classes and functions by name)
        if type(obj).__module__ == "numpy" and getattr(obj, "ndim", None) == 0:
            obj = obj.item()  # a numpy scalar: its Python value
        plain = next((t for t in _PLAIN if isinstance(obj, t)), None)
        if plain is None:  # refused here, in the sender, so a refusal in the judge means a forged message
            raise pickle.PicklingError(f"a {type(obj).__module__}.{type(obj).__qualname__} cannot cross the pipe "
                                       "(tensors and plain Python data only)")
        return plain, (plain(obj),)  # a subclass (torch.Size, OrderedDict) as its plain type


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf).dump(obj)
    return buf.getvalue()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"a message named {module}.{name}; only data and tensors are accepted")
        return super().find_class(module, name)


def loads(data: bytes) -> Any:
    """A message from an untrusted process: plain data and tensors, or UnpicklingError."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except Exception as exc:  # a malformed stream, a bad tensor geometry: the same refusal
        raise pickle.UnpicklingError(f"a malformed message: {type(exc).__name__}: {exc}") from exc


def send(conn: Any, obj: Any) -> None:
    conn.send_bytes(dumps(obj))


def recv(conn: Any) -> Any:
    return loads(conn.recv_bytes())


def _device(name: Any) -> torch.device:
    if not isinstance(name, str) or not _DEVICE.fullmatch(name):
        raise pickle.UnpicklingError(f"a tensor on device {name!r}")
    return torch.device(name)


def _storage(data: Any, device: Any) -> torch.Tensor:
    if not isinstance(data, (bytes, bytearray)):
        raise pickle.UnpicklingError("a storage that is not bytes")
    flat = torch.frombuffer(bytearray(data) if isinstance(data, bytes) else data, dtype=torch.uint8) \
        if len(data) else torch.empty(0, dtype=torch.uint8)
    return flat.to(_device(device))


def _tensor(storage: Any, dtype: Any, size: Any, stride: Any, offset: Any) -> torch.Tensor:
    dt = getattr(torch, dtype, None) if isinstance(dtype, str) else None
    if not isinstance(storage, torch.Tensor) or storage.dtype != torch.uint8 or not isinstance(dt, torch.dtype):
        raise pickle.UnpicklingError(f"a tensor of dtype {dtype!r}")
    if not all(isinstance(x, int) for x in (*size, *stride, offset)):
        raise pickle.UnpicklingError("a tensor geometry that is not integers")
    typed = storage.view(dt) if storage.numel() % dt.itemsize == 0 else storage[:0].view(dt)
    return typed.as_strided(size, stride, offset)  # bounds-checked against the storage
