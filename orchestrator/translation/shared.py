"""Buffers every rank of a multi-GPU task can address (peer buffers).

A rank allocates each of the task's shared buffers (zeroed), the judge collects the
handles and hands every rank all of them, and each rank opens its peers'. Two backends:

    CudaShared   device memory through CUDA IPC (cudaMalloc, cudaIpcGetMemHandle,
                 cudaIpcOpenMemHandle), via the harness helper translation/common/ipc
    HostShared   POSIX shared memory, for the harness's CPU tests with host-built stand-ins

Handles are bytes; pointers are integers.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import re
import uuid
from typing import Any


HOST_HANDLE = re.compile(rb"(/dev/shm/popcorn-[0-9a-f]{32}):[0-9]+")  # what HostShared.alloc hands out


class HostShared:
    def __init__(self) -> None:
        self._maps: list[tuple[mmap.mmap, Any]] = []
        self._names: list[str] = []

    def _map(self, path: str, size: int) -> int:
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        anchor = ctypes.c_char.from_buffer(mm)  # keeps the mapping's address valid
        self._maps.append((mm, anchor))
        return ctypes.addressof(anchor)

    @staticmethod
    def unlink(handles: list[Any]) -> None:
        """The judge, once every rank has opened every buffer: their files unlinked, a buffer goes
        when the last rank's mapping does, even if the ranks are killed (a crash, a timeout, a
        restart), instead of staying in /dev/shm. Only names this class makes are touched: the
        candidate's ranks report the handles."""
        for handle in handles:
            match = HOST_HANDLE.fullmatch(handle) if isinstance(handle, bytes) else None
            if match:
                try:
                    os.unlink(match.group(1).decode())
                except OSError:
                    pass

    def alloc(self, nbytes: int) -> tuple[int, bytes]:
        name = f"/dev/shm/popcorn-{uuid.uuid4().hex}"
        with open(name, "wb") as fh:
            fh.truncate(max(nbytes, 1))
        self._names.append(name)
        return self._map(name, max(nbytes, 1)), f"{name}:{max(nbytes, 1)}".encode()

    def open(self, handle: bytes) -> int:
        name, size = handle.decode().rsplit(":", 1)
        return self._map(name, int(size))

    def close(self) -> None:
        self._maps.clear()
        for name in self._names:
            try:
                os.unlink(name)
            except OSError:
                pass


class CudaShared:
    def __init__(self, helper_library: str) -> None:
        self.lib = ctypes.CDLL(helper_library, mode=ctypes.RTLD_LOCAL)
        for fn in ("popcorn_ipc_alloc", "popcorn_ipc_open", "popcorn_ipc_close", "popcorn_ipc_free"):
            getattr(self.lib, fn).restype = ctypes.c_int
        self.handle_bytes = int(self.lib.popcorn_ipc_handle_bytes())
        self.owned: list[int] = []
        self.opened: list[int] = []

    def alloc(self, nbytes: int) -> tuple[int, bytes]:
        ptr = ctypes.c_void_p()
        handle = ctypes.create_string_buffer(self.handle_bytes)
        rc = self.lib.popcorn_ipc_alloc(ctypes.c_size_t(max(nbytes, 1)), ctypes.byref(ptr), handle)
        if rc != 0:
            raise RuntimeError(f"popcorn_ipc_alloc({nbytes}) returned cudaError {rc}")
        self.owned.append(int(ptr.value or 0))
        return int(ptr.value or 0), handle.raw

    def open(self, handle: bytes) -> int:
        ptr = ctypes.c_void_p()
        rc = self.lib.popcorn_ipc_open(ctypes.c_char_p(handle), ctypes.byref(ptr))
        if rc != 0:
            raise RuntimeError(f"popcorn_ipc_open returned cudaError {rc}")
        self.opened.append(int(ptr.value or 0))
        return int(ptr.value or 0)

    def close(self) -> None:
        for ptr in self.opened:
            self.lib.popcorn_ipc_close(ctypes.c_void_p(ptr))
        for ptr in self.owned:
            self.lib.popcorn_ipc_free(ctypes.c_void_p(ptr))
        self.opened.clear()
        self.owned.clear()
