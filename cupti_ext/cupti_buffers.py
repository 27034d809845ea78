"""CUPTI's activity buffers: where they come from and where they go.

``RawBuffers`` hands CUPTI our own blocks through ctypes and gets raw bytes back, once
per buffer; ``BufferIntake`` decodes each buffer in one pass (compiled where built,
native.py; numpy otherwise, records.py) and folds it into the window builder under the
lock that fences and ``collect`` share. Apart from the backend because this runs on
CUPTI's thread (or inside a flush), never on the training thread's section path.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .cupti_env import CuptiUnavailable, cupti_function_address
from .records import (
    DecodeScratch,
    RecordLayout,
    block_view,
    decode_addresses,
    decode_buffer,
    memory_view,
    record_addresses,
)
from .window_builder import KernelWindowBuilder

logger = logging.getLogger(__name__)

# cuptiActivityRegisterCallbacks' two callback types (cupti_activity.h).
BufferRequested = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
)
BufferCompleted = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)
# cuptiActivityRegisterCallbacks_v2's (a subscriber's): each with an info pointer more.
BufferRequestedV2 = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p,
)
BufferCompletedV2 = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p
)


def register_callbacks_function() -> Any | None:
    """``cuptiActivityRegisterCallbacks`` of the very libcupti cupti-python uses.

    Taken from cupti-python's own function table: a process can hold two libcupti
    copies (torch's and cupti-python's), and callbacks registered on the wrong one
    never receive a buffer.
    """
    addr = cupti_function_address("cuptiActivityRegisterCallbacks")
    if not addr:
        return None
    proto = ctypes.CFUNCTYPE(ctypes.c_int, BufferRequested, BufferCompleted)
    return proto(addr)


BUFFER_BYTES = 1 << 20
"""CUPTI buffer size. 1 MiB (~4,800 kernel records): a report's forced flush completes
CUPTI's partly filled buffers, and its cost grows with their size, full or not (an idle
fence 0.39 ms with 1 MiB against 0.65-0.70 with 4 MiB on the H200; a report at interval
1 on the launch-bound step 4.7 ms against 21, NVRx's 11.9, in one run), while the
callback per step stayed within the runs' noise (docs/kernel-timing.md)."""
ZERO_MARGIN_BYTES = 64 << 10
"""Zeroed past a handled buffer's valid bytes (``RawBuffers.zero_after``)."""
SPARE_BYTES = 16 << 20
"""At most this much of handed-back buffers is kept for reuse."""

_REGISTERED: list[RawBuffers] = []
"""Every RawBuffers ever handed to CUPTI, kept alive for the life of the process."""


class RawBuffers:
    """CUPTI buffer callbacks registered through ctypes, handing over raw bytes.

    cupti-python's own callback builds one Python object per record while holding the
    GIL, which the training thread needs to launch kernels; here CUPTI calls us once per
    buffer and the records are decoded with numpy (records.record_offsets/decode_span).
    """

    def __init__(
        self,
        register_fn: Any,
        size: int,
        on_bytes: Callable[[Any], None],
        *,
        per_subscriber: bool = False,
    ) -> None:
        self._register_fn = register_fn
        self._size = size
        self._on_bytes = on_bytes
        self._free: list[Any] = []
        self._max_spare = max(2, SPARE_BYTES // size)
        self._live: dict[int, Any] = {}
        self._in_hand = 0  # buffers CUPTI handed back whose bytes are being handled
        self.zero_after = False
        """Zero what CUPTI wrote into a block once handled (buffer_policy.py: CUPTI was
        told our buffers come zeroed). Fresh blocks are zeroed by their allocation."""
        self._lock = threading.Lock()
        # Keep the C callbacks alive as long as CUPTI may call them. A subscriber of the
        # per-subscriber API (cupti_subscriber.py) gets callbacks of its own types.
        self._requested: Any
        self._completed: Any
        if per_subscriber:
            self._requested = BufferRequestedV2(lambda b, s, m, _i: self._request(b, s, m))
            self._completed = BufferCompletedV2(
                lambda buf, _size, valid, _i: self._complete(None, 0, buf, _size, valid)
            )
        else:
            self._requested = BufferRequested(self._request)
            self._completed = BufferCompleted(self._complete)

    def register(self) -> None:
        # CUPTI keeps calling the last registered pair (a flush at process exit, say)
        # after the backend that made it is gone; freed ctypes thunks would crash it.
        if self not in _REGISTERED:
            _REGISTERED.append(self)
        status = self._register_fn(self._requested, self._completed)
        if status != 0:
            raise CuptiUnavailable(f"cuptiActivityRegisterCallbacks returned {status}")

    def _request(self, buf: Any, size: Any, max_records: Any) -> None:
        try:
            with self._lock:
                block = self._free.pop() if self._free else ctypes.create_string_buffer(self._size)
                addr = ctypes.addressof(block)
                self._live[addr] = block
            buf[0] = addr
            size[0] = self._size
            max_records[0] = 0
        except Exception:
            buf[0] = None
            size[0] = 0

    def trim(self) -> None:
        """Free the spare blocks (the object itself stays alive, see ``_REGISTERED``)."""
        with self._lock:
            self._free.clear()

    def settled(self) -> bool:
        """CUPTI holds none of our buffers, and none it handed back is being handled:
        every record it wrote has reached ``on_bytes``."""
        with self._lock:
            return not self._live and not self._in_hand

    def _complete(self, ctx: Any, stream: int, buf: int, size: int, valid: int) -> None:
        with self._lock:
            block = self._live.pop(buf, None) if buf else None
            self._in_hand += 1
        try:
            if buf and valid:
                # A view of our own block: no ctypes array type made per buffer size
                # (memory_view's way, ~25 us per buffer on the H200 host).
                self._on_bytes(
                    memory_view(buf, valid) if block is None else block_view(block, valid)
                )
        finally:
            if block is not None and self.zero_after:
                # CUPTI writes records one after another up to ``valid``; the margin
                # covers a record it may have begun past the last one it handed over.
                ctypes.memset(buf, 0, min(self._size, valid + ZERO_MARGIN_BYTES))
            with self._lock:
                self._in_hand -= 1
                if block is not None and len(self._free) < self._max_spare:
                    self._free.append(block)


class BufferIntake:
    """Buffers in (raw bytes, or cupti-python's record objects), the window builder fed.

    ``lock`` guards the builder and the decode scratch; ``delivered`` is signalled after
    every buffer, so a fence waits on it instead of polling. Failures go to ``fail``
    (the backend's: logged once per cause, counted) and never raise into CUPTI.
    """

    def __init__(
        self,
        builder: KernelWindowBuilder,
        layout: RecordLayout,
        buffer_size: int,
        fail: Callable[[str, BaseException], None],
    ) -> None:
        self._builder = builder
        self._layout = layout
        self._buffer_size = buffer_size
        self._fail = fail
        self.lock = threading.Lock()
        self.delivered = threading.Condition(self.lock)
        self._scratch = DecodeScratch()
        self.unparsed_buffers = 0
        self.buffers_handled = 0
        self.handling_s = 0.0
        """Wall time in the raw buffer callback, since start."""

    def buffer_requested(self) -> tuple[int, int]:
        """cupti-python's buffer-request callback: (size, max records: no limit)."""
        return self._buffer_size, 0

    def on_buffer(self, activities: Sequence[Any]) -> None:
        """cupti-python's buffer-completed callback (one object per record)."""
        try:
            n = len(activities)
            if n == 0:
                return
            decoded = decode_addresses(record_addresses(activities), self._layout)
            with self.lock:
                self._builder.add(decoded, n)
                self.delivered.notify_all()
        except Exception as e:
            self._fail("buffer", e)

    def on_bytes(self, raw: Any) -> None:
        """RawBuffers' hand-over: one buffer's valid bytes."""
        t0 = time.perf_counter()
        try:
            with self.lock:  # the scratch's arrays are reused buffer after buffer
                decoded, records, whole = decode_buffer(raw, self._layout, self._scratch)
                self.buffers_handled += 1
                if not whole:
                    self.unparsed_buffers += 1
                    if self.unparsed_buffers == 1:
                        logger.warning(
                            "CUPTI buffer with an unexpected record layout; its tail is skipped"
                        )
                self._builder.add(decoded, records)
                self.handling_s += time.perf_counter() - t0
                self.delivered.notify_all()
        except Exception as e:
            self._fail("buffer", e)


__all__ = [
    "BUFFER_BYTES",
    "SPARE_BYTES",
    "ZERO_MARGIN_BYTES",
    "BufferCompleted",
    "BufferCompletedV2",
    "BufferIntake",
    "BufferRequested",
    "BufferRequestedV2",
    "RawBuffers",
    "register_callbacks_function",
]
