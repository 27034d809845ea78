"""Stable, bounded kernel identities, and the rule that tells communication kernels apart.

A kernel key is ``<readable base name>~<hash of the full name>/t<shape bucket>``:
- the full (mangled) name separates template instantiations that share a base name,
  and is the same on every rank running the same build;
- the shape bucket is ``floor(log2(grid threads x block threads))``, so a kernel whose
  launch size changes with dynamic shapes lands in at most ~40 keys, and ranks compare
  launches of similar size only;
- at most ``max_keys`` keys exist; later ones share the ``<overflow>`` key (counted).

Names are read once per distinct CUPTI name pointer (CUPTI keeps one string per
function for the life of its module), so the per-record work is a vectorized lookup.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from . import native

logger = logging.getLogger(__name__)

OVERFLOW_KEY = "<overflow>"
COMM_PATTERN_ENV = "PACEKEEPER_COMM_KERNEL_PATTERN"
"""Extra regular expression (case-insensitive) naming communication kernels."""

COMM_KERNEL = re.compile(
    r"nccl|rccl|nvshmem|userbuffers|multimem|cross_device_reduce"
    r"|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|send_?recv",
    re.IGNORECASE,
)
"""Collectives wait for the slowest peer, so their time says more about the other ranks
than about this one: NCCL/RCCL/NVSHMEM kernels, torch symmetric-memory and custom
all-reduce kernels, and anything named after a collective."""

_BASE_MAX = 96
_MAX_BUCKET = 63


def is_comm_kernel(name: str, extra: re.Pattern[str] | None = None) -> bool:
    """True for communication kernels (checked on the raw and the demangled name)."""
    if COMM_KERNEL.search(name) is not None:
        return True
    return extra is not None and extra.search(name) is not None


def comm_pattern_from_env(environ: dict[str, str] | None = None) -> re.Pattern[str] | None:
    """The user's extra communication-kernel pattern; a bad one raises naming the variable."""
    raw = (os.environ if environ is None else environ).get(COMM_PATTERN_ENV, "").strip()
    if not raw:
        return None
    try:
        return re.compile(raw, re.IGNORECASE)
    except re.error as e:
        msg = f"{COMM_PATTERN_ENV}={raw!r} is not a valid regular expression: {e}"
        raise ValueError(msg) from e


class _Demangler:
    """``__cxa_demangle`` from libstdc++ through ctypes; names pass through without it."""

    def __init__(self) -> None:
        self._fn: Any = None
        self._free: Any = None
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            # getattr: inside a class body `lib.__cxa_demangle` would be name-mangled.
            fn = getattr(lib, "__cxa_demangle")
            fn.restype = ctypes.c_void_p
            fn.argtypes = [
                ctypes.c_char_p,
                ctypes.c_void_p,
                ctypes.c_void_p,
                ctypes.POINTER(ctypes.c_int),
            ]
            libc.free.argtypes = [ctypes.c_void_p]
            self._fn, self._free = fn, libc.free
        except (OSError, AttributeError):
            logger.info("no C++ demangler available; kernel names stay mangled")

    def __call__(self, name: str) -> str:
        if self._fn is None or not name.startswith("_Z"):
            return name
        status = ctypes.c_int(0)
        ptr = self._fn(name.encode(), None, None, ctypes.byref(status))
        if not ptr or status.value != 0:
            return name
        try:
            return ctypes.string_at(ptr).decode("utf-8", "replace")
        finally:
            self._free(ptr)


_demangle = _Demangler()


def readable_base(name: str) -> str:
    """Demangled name without template arguments and parameters, shortened."""
    text = _demangle(name)
    for stop in ("<", "("):
        cut = text.find(stop)
        if cut > 0:
            text = text[:cut]
    text = " ".join(text.split())
    # A demangled "void ns::kernel" keeps only the qualified name.
    if " " in text:
        text = text.rsplit(" ", 1)[-1]
    return text[:_BASE_MAX] or name[:_BASE_MAX]


def name_hash(name: str) -> str:
    return hashlib.blake2b(name.encode(), digest_size=3).hexdigest()


def shape_bucket(threads: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """``floor(log2(threads))`` for threads >= 1, exact for powers of two."""
    t = np.maximum(threads, 1).astype(np.uint64)
    # frexp is exact in float64 for the integers a launch can have (< 2**53).
    _, exp = np.frexp(t.astype(np.float64))
    return np.minimum(exp.astype(np.int64) - 1, _MAX_BUCKET)


def read_c_string(address: int) -> str:
    return ctypes.string_at(address).decode("utf-8", "replace") if address else "<unnamed>"


class KernelKeyTable:
    """Maps (name pointer, launch size) to a bounded set of kernel keys.

    Not thread-safe: one processing thread owns it.
    """

    def __init__(
        self,
        max_keys: int = 1024,
        *,
        bucket_shapes: bool = True,
        comm_pattern: re.Pattern[str] | None = None,
        resolve_name: Callable[[int], str] = read_c_string,
    ) -> None:
        if max_keys < 1:
            raise ValueError(f"max_keys={max_keys} must be >= 1")
        self.max_keys = max_keys
        self.bucket_shapes = bucket_shapes
        self._comm_pattern = comm_pattern
        self._resolve = resolve_name
        self._name_ids: dict[int, int] = {}
        self._names: list[tuple[str, bool, str]] = []  # (key prefix, is comm, full name)
        self._key_ids: dict[int, int] = {}
        self._packed: dict[int, int] = {}  # (pointer << 6 | bucket) -> key id
        self.keys: list[str] = []
        self.full_names: list[str] = []
        """Demangled full name of each key (the overflow key's is itself)."""
        self._comm = np.zeros(64, dtype=np.bool_)
        # The compiled lookup's hash table mirrors ``_packed`` (value -1: empty slot).
        self._hkeys = np.zeros(64, np.uint64)
        self._hvals = np.full(64, -1, np.int64)
        self._hptrs = (native.ptr(self._hkeys), native.ptr(self._hvals))
        self.overflowed = 0
        """Records mapped to the overflow key since creation."""
        self._overflow_id: int | None = None
        self._warned = False

    def is_comm(self, key_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        return self._comm[key_ids]

    @property
    def comm_flags(self) -> npt.NDArray[np.bool_]:
        """Whether each key id is a communication kernel's (one byte per key id, at
        least ``len(keys)`` of them; for the compiled fold)."""
        return self._comm

    def _name_id(self, ptr: int) -> int:
        nid = self._name_ids.get(ptr)
        if nid is None:
            full = self._resolve(ptr)
            prefix = f"{readable_base(full)}~{name_hash(full)}"
            demangled = _demangle(full)
            comm = is_comm_kernel(full, self._comm_pattern) or is_comm_kernel(
                demangled, self._comm_pattern
            )
            nid = len(self._names)
            self._names.append((prefix, comm, demangled))
            self._name_ids[ptr] = nid
        return nid

    def _new_key(self, text: str, comm: bool, full: str) -> int:
        kid = len(self.keys)
        self.keys.append(text)
        self.full_names.append(full)
        if kid >= len(self._comm):
            self._comm = np.concatenate([self._comm, np.zeros(len(self._comm), np.bool_)])
        self._comm[kid] = comm
        return kid

    def _packed_key(self, packed: int) -> int:
        kid = self._packed.get(packed)
        if kid is None:
            nid = self._name_id(packed >> 6)
            kid = self._packed[packed] = self._key_id(nid * (_MAX_BUCKET + 1) + (packed & 63))
        return kid

    def _key_id(self, combined: int) -> int:
        kid = self._key_ids.get(combined)
        if kid is not None:
            return kid
        nid, bucket = divmod(combined, _MAX_BUCKET + 1)
        prefix, comm, full = self._names[nid]
        real = len(self.keys) - (0 if self._overflow_id is None else 1)
        if real >= self.max_keys and not comm:
            if self._overflow_id is None:
                self._overflow_id = self._new_key(OVERFLOW_KEY, False, OVERFLOW_KEY)
            if not self._warned:
                self._warned = True
                logger.warning(
                    "kernel key limit reached; further kernels share the overflow key",
                    extra={"max_keys": self.max_keys},
                )
            kid = self._overflow_id
        else:
            text = f"{prefix}/t{bucket}" if self.bucket_shapes else prefix
            kid = self._new_key(text, comm, full)
        self._key_ids[combined] = kid
        return kid

    def lookup(
        self, name_ptr: npt.NDArray[np.uint64], threads: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        """Key id of every record (vectorized; Python work per distinct kernel only)."""
        if len(name_ptr) == 0:
            return np.empty(0, dtype=np.int64)
        lib = native.library()
        kids = (
            self._lookup_native(lib, name_ptr, threads)
            if lib is not None
            else self._lookup_numpy(name_ptr, threads)
        )
        if self._overflow_id is not None:
            self.overflowed += int(np.count_nonzero(kids == self._overflow_id))
        return kids

    def _lookup_native(
        self,
        lib: native.NativeLib,
        name_ptr: npt.NDArray[np.uint64],
        threads: npt.NDArray[np.int64],
    ) -> npt.NDArray[np.int64]:
        n = len(name_ptr)
        name = np.ascontiguousarray(name_ptr, np.uint64)
        thr = np.ascontiguousarray(threads, np.int64)
        kids = np.empty(n, np.int64)
        packed = np.empty(n, np.uint64)

        args = (native.ptr(name), native.ptr(thr), n, int(self.bucket_shapes), _MAX_BUCKET)
        out = (native.ptr(kids), native.ptr(packed))

        def probe() -> int:
            mask = len(self._hkeys) - 1
            return int(lib.lib.pk_lookup(*args, *self._hptrs, mask, *out))

        if probe():
            # Kernels not seen before: named in Python once, then known to the table.
            for p in np.unique(packed[kids < 0]).tolist():
                self._hash_insert(lib, p, self._packed_key(p))
            probe()
        return kids

    def _hash_insert(self, lib: native.NativeLib, packed: int, kid: int) -> None:
        if 2 * (len(self._packed) + 1) > len(self._hkeys):
            size = 2 * len(self._hkeys)
            while 2 * (len(self._packed) + 1) > size:
                size *= 2
            self._hkeys = np.zeros(size, np.uint64)
            self._hvals = np.full(size, -1, np.int64)
            self._hptrs = (native.ptr(self._hkeys), native.ptr(self._hvals))
            for p, k in self._packed.items():
                lib.lib.pk_insert(*self._hptrs, size - 1, p, k)
        lib.lib.pk_insert(*self._hptrs, len(self._hkeys) - 1, packed, kid)

    def _lookup_numpy(
        self, name_ptr: npt.NDArray[np.uint64], threads: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.int64]:
        buckets = (
            shape_bucket(threads).astype(np.uint64)
            if self.bucket_shapes
            else np.zeros(len(name_ptr), np.uint64)
        )
        # Pointer and bucket in one integer (user-space pointers use < 56 bits), so one
        # sort finds the distinct (kernel, launch size) pairs.
        packed = (name_ptr.astype(np.uint64) << np.uint64(6)) | buckets
        uniq, inv = np.unique(packed, return_inverse=True)
        kids: npt.NDArray[np.int64] = np.fromiter(
            (self._packed_key(int(p)) for p in uniq.tolist()), np.int64, len(uniq)
        )[inv]
        return kids
