"""Bulk decoding of CUPTI activity records with numpy, driven by cupti-python's dtypes.

cupti-python hands the buffer-completed callback a list of record objects, one per
record, each pointing (``.ptr``) into the CUPTI buffer. Touching fields through those
objects costs Python work per field per record. Instead we read every record's address
once (a C-level ``map``), view the buffer memory as bytes, and gather the few fields we
need for all records at once, at the offsets the real ``cupti.cupti.*_dtype`` declare.
Nothing here imports cupti: the layout is built from the module by the caller, so the
same code runs on synthesized buffers in CPU tests.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import native

U8 = npt.NDArray[np.uint8]
U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_PTR = operator.attrgetter("ptr")

# One CUPTI buffer is contiguous; records further apart than this came from different
# buffers (never seen, but cheap to handle) and are decoded as separate spans.
_SPAN_LIMIT = 64 * 1024 * 1024
_RUN_CHUNK = 512


RECORD_VERSIONS: tuple[tuple[int, int, int], ...] = (
    (130400, 13, 5),
    (130300, 12, 4),
    (130100, 11, 4),
    (0, 10, 4),
)
"""(lowest CUPTI_API_VERSION, kernel record, memset record): the records a CUPTI library
writes for CONCURRENT_KERNEL and MEMSET, newest first. Read from cupti_activity.h of
the nvidia-cuda-cupti wheels 13.0.85 to 13.5.25 (the newest ``CUpti_ActivityKernelN``
and ``CUpti_ActivityMemsetN`` each defines): 13.0 writes Kernel10 and Memset4, 13.1 and
13.2 Kernel11, 13.3 Kernel12, 13.4 and 13.5 Kernel13 and Memset5. Decoding a newer
library's records with an older struct misreads every record after the first
(seen on the H200, 2026-12-03: CUPTI 13.4 read as 13.0's, no kernel counted)."""


class RecordLayoutUnavailable(Exception):
    """This cupti-python has no dtype for the records its CUPTI library writes."""


def record_versions(api_version: int | None) -> tuple[int, int]:
    """(kernel, memset) record versions a CUPTI library of ``api_version`` writes; None
    (unknown) is taken for 13.0's, the pairing cupti-python 13.0 ships with."""
    version = 0 if api_version is None else api_version
    for lowest, kernel, memset in RECORD_VERSIONS:
        if version >= lowest:
            return kernel, memset
    return RECORD_VERSIONS[-1][1:]


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """Kinds and dtypes of the records we decode (from ``cupti.cupti``)."""

    kernel_kind: int
    external_kind: int
    driver_kind: int
    runtime_kind: int
    kernel_dtype: np.dtype[Any]
    external_dtype: np.dtype[Any]
    api_dtype: np.dtype[Any]
    memset_kind: int
    memset_dtype: np.dtype[Any]

    @classmethod
    def from_cupti(cls, cupti: Any, api_version: int | None = None) -> RecordLayout:
        """The layout of the records a CUPTI library of ``api_version`` writes, from
        cupti-python's dtypes; ``RecordLayoutUnavailable`` where this cupti-python is
        older than the library (it has no dtype for them: pair the two versions)."""
        kinds = cupti.ActivityKind
        kernel, memset = record_versions(api_version)
        dtypes = []
        for name in (f"activity_kernel{kernel}_dtype", f"activity_memset{memset}_dtype"):
            dtype = getattr(cupti, name, None)
            if dtype is None:
                raise RecordLayoutUnavailable(
                    f"CUPTI {_dotted(api_version)} writes records this cupti-python has "
                    f"no {name} for: install the cupti-python of the CUPTI the job loads"
                )
            dtypes.append(dtype)
        return cls(
            kernel_kind=int(kinds.CONCURRENT_KERNEL),
            external_kind=int(kinds.EXTERNAL_CORRELATION),
            driver_kind=int(kinds.DRIVER),
            runtime_kind=int(kinds.RUNTIME),
            kernel_dtype=dtypes[0],
            external_dtype=cupti.activity_external_correlation_dtype,
            api_dtype=cupti.activity_api_dtype,
            memset_kind=int(kinds.MEMSET),
            memset_dtype=dtypes[1],
        )

    def itemsize(self, kind: int) -> int:
        if kind == self.kernel_kind:
            return int(self.kernel_dtype.itemsize)
        if kind == self.external_kind:
            return int(self.external_dtype.itemsize)
        if kind in (self.driver_kind, self.runtime_kind):
            return int(self.api_dtype.itemsize)
        if kind == self.memset_kind:
            return int(self.memset_dtype.itemsize)
        return 8  # only the kind field is read from records we do not decode


@dataclass(frozen=True, slots=True)
class KernelBatch:
    """Kernel records of one buffer, one array element per record."""

    correlation_id: U32
    duration_ns: I64
    name_ptr: U64
    threads: I64
    """Grid size times block size: the launch's total threads (shape bucket input)."""


@dataclass(frozen=True, slots=True)
class DecodedBuffer:
    kernels: KernelBatch
    api_correlation_id: U32
    """Correlation ids of driver/runtime API records (our section markers)."""
    api_cbid: U32
    external_correlation_id: U32
    external_id: U64
    external_kind: npt.NDArray[np.int32]
    memset_correlation_id: U32
    """MEMSET records (memset section markers, and the program's own memsets)."""
    memset_value: U32
    memset_bytes: U64
    memset_stream: U32
    incomplete: int
    """Kernel records without a valid end timestamp (never counted as timings)."""
    other: int
    """Records of kinds we do not decode."""


def record_offsets(raw: U8, layout: RecordLayout) -> tuple[I64, bool]:
    """Start offsets of the records packed in ``raw`` (a CUPTI buffer's valid bytes).

    Records are back to back, each as long as its kind's struct, so finding them is a
    walk; but nearly all are kernel records, so runs of them are checked in one
    vectorized step and Python only steps over the rare other records (section
    markers). Returns the offsets and whether the walk ended exactly at the end (False:
    an unknown kind or a size mismatch; the rest of the buffer is not trusted).
    """
    n = len(raw)
    kinds = raw[: n - n % 4].view(np.int32)
    ksize = int(layout.kernel_dtype.itemsize)
    known = {
        layout.kernel_kind: ksize,
        layout.external_kind: int(layout.external_dtype.itemsize),
        layout.driver_kind: int(layout.api_dtype.itemsize),
        layout.runtime_kind: int(layout.api_dtype.itemsize),
        layout.memset_kind: int(layout.memset_dtype.itemsize),
    }
    if ksize % 4:
        return np.empty(0, dtype=np.int64), False  # not CUPTI's layout: trust nothing
    parts: list[I64] = []
    # Kind field index of the k-th record of a kernel run starting at 0, k = 0, 1, ...
    stride = np.arange(0, n // ksize + 1, dtype=np.int64) * (ksize // 4)
    chunk = _RUN_CHUNK
    o = 0
    while o < n:
        if o % 4:
            return _joined(parts), False
        kind = int(kinds[o // 4]) if o + 4 <= n else -1
        if kind == layout.kernel_kind:
            # Probe a chunk ahead; the chunk doubles while runs fill it, so a run of r
            # kernels costs O(log r) numpy calls, and sparse markers cost one each.
            run_max = min((n - o) // ksize, chunk)
            if run_max:
                is_kernel = kinds[o // 4 + stride[:run_max]] == layout.kernel_kind
                run = run_max if bool(is_kernel.all()) else int(np.argmin(is_kernel))
                parts.append(o + 4 * stride[:run])
                o += ksize * run
                chunk = chunk * 2 if run == run_max else _RUN_CHUNK
                continue
        size = known.get(kind)
        if size is None or kind == layout.kernel_kind or o + size > n:
            return _joined(parts), False
        parts.append(np.array([o], dtype=np.int64))
        o += size
    return _joined(parts), o == n


def _joined(parts: list[I64]) -> I64:
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def record_addresses(activities: Sequence[Any]) -> U64:
    """The address of every record object's data, without a Python loop per record."""
    return np.fromiter(map(_PTR, activities), dtype=np.uint64, count=len(activities))


def memory_view(address: int, size: int) -> U8:
    """Bytes at ``address`` as a read-only numpy array (no copy)."""
    raw = (ctypes.c_char * size).from_address(address)
    out: U8 = np.frombuffer(memoryview(raw).cast("B"), dtype=np.uint8)
    out.flags.writeable = False
    return out


def block_view(block: Any, valid: int) -> U8:
    """The first ``valid`` bytes of a ctypes buffer we allocated, as a numpy array (no
    copy, and no ctypes array type made for the size, which costs more than the view)."""
    return np.frombuffer(block, np.uint8, count=min(valid, ctypes.sizeof(block)))


def _field(raw: U8, offsets: I64, dtype: np.dtype[Any], name: str) -> npt.NDArray[Any]:
    """Field ``name`` of the records of ``dtype`` starting at byte ``offsets`` in ``raw``."""
    fdtype, foff = dtype.fields[name][:2]  # type: ignore[index]
    width = int(fdtype.itemsize)
    idx = (offsets + int(foff))[:, None] + np.arange(width)
    out: npt.NDArray[Any] = raw[idx].view(fdtype).reshape(len(offsets))
    return out


_KERNEL_FIELDS = (
    "start",
    "end",
    "correlation_id",
    "name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)


def _columns(raw: U8, offsets: I64, dtype: np.dtype[Any], names: Sequence[str]) -> dict[str, Any]:
    """Fields of same-kind records at ``offsets``: a strided view per run of adjacent
    records (records of one kind mostly sit back to back), so no per-byte gather."""
    size = int(dtype.itemsize)
    if len(offsets) == 0:
        return {n: np.empty(0, dtype.fields[n][0]) for n in names}  # type: ignore[index]
    cuts = np.flatnonzero(np.diff(offsets) != size) + 1
    starts = np.r_[0, cuts]
    ends = np.r_[cuts, len(offsets)]
    views = [
        np.ndarray((int(e - b),), dtype=dtype, buffer=raw, offset=int(offsets[b]))
        for b, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    if len(views) == 1:
        return {n: np.array(views[0][n]) for n in names}
    return {n: np.concatenate([v[n] for v in views]) for n in names}


def decode_span(raw: U8, offsets: I64, layout: RecordLayout) -> DecodedBuffer:
    """Decode the records that start at ``offsets`` in ``raw`` (one buffer's bytes)."""
    kinds = _field(raw, offsets, layout.api_dtype, "kind").astype(np.int32)
    k_off = offsets[kinds == layout.kernel_kind]
    e_off = offsets[kinds == layout.external_kind]
    a_off = offsets[(kinds == layout.driver_kind) | (kinds == layout.runtime_kind)]
    kc = _columns(raw, k_off, layout.kernel_dtype, _KERNEL_FIELDS)
    start = kc["start"].astype(np.int64)
    end = kc["end"].astype(np.int64)
    ok = (end > start) & (start > 0)
    grid = (kc["grid_x"].astype(np.int64) * kc["grid_y"].astype(np.int64) * kc["grid_z"]).astype(
        np.int64
    )
    block = (
        kc["block_x"].astype(np.int64) * kc["block_y"].astype(np.int64) * kc["block_z"]
    ).astype(np.int64)
    kernels = KernelBatch(
        correlation_id=kc["correlation_id"].astype(np.uint32)[ok],
        duration_ns=(end - start)[ok],
        name_ptr=kc["name"].astype(np.uint64)[ok],
        threads=np.maximum(grid * block, 1)[ok],
    )
    m_off = offsets[kinds == layout.memset_kind]
    ed, ad, md = layout.external_dtype, layout.api_dtype, layout.memset_dtype
    known = len(k_off) + len(e_off) + len(a_off) + len(m_off)
    return DecodedBuffer(
        kernels=kernels,
        api_correlation_id=_field(raw, a_off, ad, "correlation_id").astype(np.uint32),
        api_cbid=_field(raw, a_off, ad, "cbid").astype(np.uint32),
        external_correlation_id=_field(raw, e_off, ed, "correlation_id").astype(np.uint32),
        external_id=_field(raw, e_off, ed, "external_id").astype(np.uint64),
        external_kind=_field(raw, e_off, ed, "external_kind").astype(np.int32),
        memset_correlation_id=_field(raw, m_off, md, "correlation_id").astype(np.uint32),
        memset_value=_field(raw, m_off, md, "value").astype(np.uint32),
        memset_bytes=_field(raw, m_off, md, "bytes").astype(np.uint64),
        memset_stream=_field(raw, m_off, md, "stream_id").astype(np.uint32),
        incomplete=int(len(k_off) - int(ok.sum())),
        other=int(len(offsets) - known),
    )


def decode_buffer(
    raw: U8, layout: RecordLayout, scratch: DecodeScratch | None = None
) -> tuple[DecodedBuffer, int, bool]:
    """Walk and decode one buffer's valid bytes: (records we use, how many records the
    walk found, whether it ended exactly at the end). Compiled where built (native.py),
    else ``record_offsets`` and ``decode_span``.

    With a ``scratch``, the compiled path writes into its arrays and the result's
    arrays are views of them: valid only until the next call with the same scratch.
    """
    lib = native.library()
    values = None if lib is None else native.layout_array(layout, lib)
    if lib is not None and values is not None:
        return _decode_native(raw, lib, values, scratch or DecodeScratch())
    offsets, whole = record_offsets(raw, layout)
    return decode_span(raw, offsets, layout), len(offsets), whole


_OUT_DTYPES = (
    np.uint32,  # kernel correlation id
    np.int64,  # kernel duration
    np.uint64,  # kernel name pointer
    np.int64,  # kernel threads
    np.uint32,  # memset correlation id
    np.uint32,  # memset value
    np.uint64,  # memset bytes
    np.uint32,  # memset stream
    np.uint32,  # external correlation id
    np.uint64,  # external id
    np.int32,  # external kind
    np.uint32,  # api correlation id
    np.uint32,  # api cbid
)
assert len(_OUT_DTYPES) == native.OUT_FIELDS
_SMALLEST_RECORD = 24  # an external-correlation record


class DecodeScratch:
    """The compiled decoder's output arrays, carved from one block and reused from one
    buffer to the next (their addresses are computed once, not per call)."""

    def __init__(self) -> None:
        self._cap = 0
        self.outs: list[npt.NDArray[Any]] = []
        self.pointers: Any = None
        self.counts = np.zeros(native.COUNT_FIELDS, np.int64)
        self.counts_ptr = native.ptr(self.counts)

    def ensure(self, cap: int) -> None:
        if cap <= self._cap:
            return
        # A multiple of 8, so every array starts 8-byte aligned within the block.
        cap = -(-max(cap, 2 * self._cap) // 8) * 8
        widths = [np.dtype(d).itemsize for d in _OUT_DTYPES]
        block = np.empty(cap * sum(widths), np.uint8)
        base = native.ptr(block)
        outs, addresses, offset = [], [], 0
        for dtype, width in zip(_OUT_DTYPES, widths, strict=True):
            outs.append(block[offset : offset + cap * width].view(dtype))
            addresses.append(base + offset)
            offset += cap * width
        self.outs = outs
        self.pointers = (ctypes.c_void_p * len(outs))(*addresses)
        self._cap = cap


def _decode_native(
    raw: U8, lib: Any, layout: npt.NDArray[np.int32], scratch: DecodeScratch
) -> tuple[DecodedBuffer, int, bool]:
    cap = len(raw) // _SMALLEST_RECORD + 1
    scratch.ensure(cap)
    outs = scratch.outs
    lib.lib.pk_decode(
        native.ptr(raw), len(raw), native.ptr(layout), scratch.pointers, cap, scratch.counts_ptr
    )
    nk, nm, ne, na, incomplete, records, whole = scratch.counts.tolist()
    decoded = DecodedBuffer(
        kernels=KernelBatch(
            correlation_id=outs[0][:nk],
            duration_ns=outs[1][:nk],
            name_ptr=outs[2][:nk],
            threads=outs[3][:nk],
        ),
        api_correlation_id=outs[11][:na],
        api_cbid=outs[12][:na],
        external_correlation_id=outs[8][:ne],
        external_id=outs[9][:ne],
        external_kind=outs[10][:ne],
        memset_correlation_id=outs[4][:nm],
        memset_value=outs[5][:nm],
        memset_bytes=outs[6][:nm],
        memset_stream=outs[7][:nm],
        incomplete=incomplete,
        other=0,  # the walk stops at a kind it does not know
    )
    return decoded, records, bool(whole)


def decode_addresses(addresses: U64, layout: RecordLayout) -> DecodedBuffer:
    """Decode live records by address (the buffer must stay alive during the call)."""
    if len(addresses) == 0:
        return concat([], layout)
    order = np.sort(addresses)
    cuts = np.flatnonzero(np.diff(order) > _SPAN_LIMIT) + 1
    parts = []
    for span in np.split(order, cuts):
        base = int(span[0])
        # Read the last record's kind first: its size decides how far the span reaches.
        last = int(span[-1])
        last_kind = int(memory_view(last, 4).view(np.int32)[0])
        size = last - base + layout.itemsize(last_kind)
        raw = memory_view(base, size)
        parts.append(decode_span(raw, (span - np.uint64(base)).astype(np.int64), layout))
    return parts[0] if len(parts) == 1 else concat(parts, layout)


def concat(parts: Sequence[DecodedBuffer], layout: RecordLayout) -> DecodedBuffer:
    """One ``DecodedBuffer`` holding all of ``parts`` (an empty one for no parts)."""

    def cat(arrays: list[npt.NDArray[Any]], dtype: Any) -> npt.NDArray[Any]:
        return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.empty(0, dtype)

    return DecodedBuffer(
        kernels=KernelBatch(
            correlation_id=cat([p.kernels.correlation_id for p in parts], np.uint32),
            duration_ns=cat([p.kernels.duration_ns for p in parts], np.int64),
            name_ptr=cat([p.kernels.name_ptr for p in parts], np.uint64),
            threads=cat([p.kernels.threads for p in parts], np.int64),
        ),
        api_correlation_id=cat([p.api_correlation_id for p in parts], np.uint32),
        api_cbid=cat([p.api_cbid for p in parts], np.uint32),
        external_correlation_id=cat([p.external_correlation_id for p in parts], np.uint32),
        external_id=cat([p.external_id for p in parts], np.uint64),
        external_kind=cat([p.external_kind for p in parts], np.int32),
        memset_correlation_id=cat([p.memset_correlation_id for p in parts], np.uint32),
        memset_value=cat([p.memset_value for p in parts], np.uint32),
        memset_bytes=cat([p.memset_bytes for p in parts], np.uint64),
        memset_stream=cat([p.memset_stream for p in parts], np.uint32),
        incomplete=sum(p.incomplete for p in parts),
        other=sum(p.other for p in parts),
    )


def _dotted(api_version: int | None) -> str:
    """130401 -> '13.4' (CUPTI_API_VERSION is major*10000 + minor*100 + patch)."""
    if not api_version:
        return "(version unknown)"
    return f"{api_version // 10000}.{api_version // 100 % 100}"
