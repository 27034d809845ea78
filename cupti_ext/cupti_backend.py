"""Kernel timing with CUPTI's activity API through cupti-python (imported lazily).

Hot path (training thread), per sampled outermost section entry:
  start: enable CONCURRENT_KERNEL records, then a marker; nested entries add a marker.
  stop:  a marker, then (outermost) disable CONCURRENT_KERNEL records.
A marker ties an external id naming the entry to a correlation id: a traced driver call
under a pushed external id (modes ``api``/``driver``) or a memset on a private stream
whose value names it (``memset``); see _pick_marker and markers.py. So kernels launched
outside sampled sections are never traced (CUPTI's tracing is the expensive part, ~1 us
per kernel on the H200), and attribution is exact (see attribution.py).

Buffers arrive on CUPTI's own thread (or inside ``collect``'s flush); each is decoded in
one pass (compiled where built, native.py; numpy otherwise, records.py) and folded into
bounded per-key statistics right away, so a report only reads summaries. Failures are
logged once per cause, counted, and never raised into the training loop.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .attribution import MAX_SECTION_ID, encode_external_id
from .backend import KernelWindow
from .kernel_keys import comm_pattern_from_env
from .markers import MARKER_BYTES, MARKER_WORDS, MemsetMarkers
from .records import (
    DecodeScratch,
    RecordLayout,
    block_view,
    decode_addresses,
    decode_buffer,
    memory_view,
    record_addresses,
)
from .sampling import START_SAMPLE_EVERY, keep_records_on, next_sample_every
from .window_builder import KernelWindowBuilder

logger = logging.getLogger(__name__)

SAMPLE_EVERY_ENV = "PACEKEEPER_KERNEL_SAMPLE_EVERY"
"""``auto`` (the default: chosen per window, sampling.py) or a fixed N: trace kernels in
one of N outermost section entries."""

INJECTION_ENV = ("CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID", "NV_NSIGHT_INJECTION")
_MARKER_CANDIDATES = ("cuDriverGetVersion", "cuDeviceGetCount")
MARKER_ENV = "PACEKEEPER_KERNEL_MARKER"
BUFFER_ENV = "PACEKEEPER_CUPTI_BUFFER_KIB"
_BUFFER_KIB_RANGE = (64, 1 << 16)
MARKER_MODES = ("memset", "api", "driver")
"""How section markers reach CUPTI's records (see _pick_marker)."""
AUTO_MARKERS = ("memset", "api", "driver")
"""The order tried by default: ``memset`` needs a current CUDA context (a detector
started after the model has one); ``api`` works where none exists yet (see _pick_marker)."""


_BufferRequested = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
)
_BufferCompleted = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)


def register_callbacks_function() -> Any | None:
    """``cuptiActivityRegisterCallbacks`` of the very libcupti cupti-python uses.

    Taken from cupti-python's own function table: a process can hold two libcupti
    copies (torch's and cupti-python's), and callbacks registered on the wrong one
    never receive a buffer.
    """
    try:
        from cupti._internal import cupti as internal

        pointers = internal._inspect_function_pointers()
    except Exception:
        return None
    addr = next(
        (v for k, v in pointers.items() if k.lstrip("_") == "cuptiActivityRegisterCallbacks"), 0
    )
    if not addr:
        return None
    proto = ctypes.CFUNCTYPE(ctypes.c_int, _BufferRequested, _BufferCompleted)
    return proto(addr)


BUFFER_BYTES = 4 << 20
"""CUPTI buffer size. Handling a buffer has a fixed cost besides its records (tens of
numpy calls): 4 MiB (~19,000 kernel records) made the cost per record 27-36% lower than
1 MiB did. The price: at interval 1 a report's flush hands over more (docs/kernel-timing.md)."""
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

    def __init__(self, register_fn: Any, size: int, on_bytes: Callable[[Any], None]) -> None:
        self._register_fn = register_fn
        self._size = size
        self._on_bytes = on_bytes
        self._free: list[Any] = []
        self._max_spare = max(2, SPARE_BYTES // size)
        self._live: dict[int, Any] = {}
        self._lock = threading.Lock()
        # Keep the C callbacks alive as long as CUPTI may call them.
        self._requested = _BufferRequested(self._request)
        self._completed = _BufferCompleted(self._complete)

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

    def _complete(self, ctx: Any, stream: int, buf: int, size: int, valid: int) -> None:
        with self._lock:
            block = self._live.pop(buf, None) if buf else None
        try:
            if buf and valid:
                # A view of our own block: no ctypes array type made per buffer size
                # (memory_view's way, ~25 us per buffer on the H200 host).
                self._on_bytes(
                    memory_view(buf, valid) if block is None else block_view(block, valid)
                )
        finally:
            if block is not None:
                with self._lock:
                    if len(self._free) < self._max_spare:
                        self._free.append(block)


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot be used here; the message says why (shown as the selection reason)."""


class CuptiConflict(CuptiUnavailable):
    """Another tool holds CUPTI (Nsight Systems, an injected profiler)."""


def load_cupti() -> Any:
    """The ``cupti.cupti`` module, or ``CuptiUnavailable`` naming the reason."""
    try:
        from cupti import cupti
    except ImportError as e:
        raise CuptiUnavailable(f"cupti-python is not installed ({e})") from e
    except OSError as e:
        raise CuptiUnavailable(f"cupti-python cannot load libcupti ({e})") from e
    return cupti


def injected_tool(environ: dict[str, str] | None = None) -> str | None:
    """The env variable showing a CUPTI-based tool injected into this process, if any."""
    env = os.environ if environ is None else environ
    for name in INJECTION_ENV:
        if env.get(name):
            return name
    return None


def marker_modes_from_env(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Marker modes to try, in order: the one named first, then the default order."""
    raw = (os.environ if environ is None else environ).get(MARKER_ENV, "").strip().lower()
    if raw in ("", "auto"):
        return AUTO_MARKERS
    if raw not in MARKER_MODES:
        allowed = ", ".join(("auto", *MARKER_MODES))
        raise ValueError(f"{MARKER_ENV}={raw!r} is not one of {allowed}")
    return (raw, *(m for m in AUTO_MARKERS if m != raw))


def buffer_bytes_from_env(environ: dict[str, str] | None = None) -> int | None:
    """CUPTI's buffer size from the environment (in KiB there), or None (unset)."""
    raw = (os.environ if environ is None else environ).get(BUFFER_ENV, "").strip()
    if not raw:
        return None
    try:
        kib = int(raw)
    except ValueError:
        raise ValueError(f"{BUFFER_ENV}={raw!r} is not an integer (KiB)") from None
    low, high = _BUFFER_KIB_RANGE
    if not low <= kib <= high:
        raise ValueError(f"{BUFFER_ENV}={kib} must be between {low} and {high} KiB")
    return kib << 10


def sample_every_from_env(environ: dict[str, str] | None = None) -> int | None:
    """A fixed N from the environment, or None for the adaptive rule (unset, ``auto``)."""
    raw = (os.environ if environ is None else environ).get(SAMPLE_EVERY_ENV, "").strip()
    if raw.lower() in ("", "auto"):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SAMPLE_EVERY_ENV}={raw!r} is not an integer or 'auto'") from None
    if value < 1:
        raise ValueError(f"{SAMPLE_EVERY_ENV}={value} must be >= 1")
    return value


class CuptiBackend:
    """CUPTI activity-API backend; one per process (CUPTI's activity API is global)."""

    name = "cupti"
    self_check_timeout_s = 0.25
    """How long start-up waits for the self-check marker's record (after a forced flush,
    per marker tried)."""
    fence_timeout_s = 0.25
    """How long ``collect`` waits for its fence marker's record (per flush kind)."""

    def __init__(
        self,
        *,
        sample_every: int | None = None,
        buffer_size: int | None = None,
        ring: int = 256,
        max_keys: int = 1024,
        max_section_groups: int = 8192,
        max_pending_records: int = 1 << 20,
        bucket_shapes: bool = True,
        comm_pattern: Any = None,
        cupti_module: Any = None,
        libcuda: Any = None,
        raw_buffers: bool = True,
        keep_records_on: bool = True,
        section_stats: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        fixed = sample_every_from_env() if sample_every is None else sample_every
        self._modes = marker_modes_from_env()
        if fixed is not None and fixed < 1:
            raise ValueError(f"sample_every={fixed} must be >= 1")
        self.adaptive_sampling = fixed is None
        """True when N follows each window's measured cost (sampling.py)."""
        self.sample_every = START_SAMPLE_EVERY if fixed is None else fixed
        """Trace kernels in one of this many outermost section entries (now)."""
        tool = injected_tool()
        if tool is not None:
            raise CuptiConflict(f"another CUPTI tool is injected ({tool} is set)")
        self._c = load_cupti() if cupti_module is None else cupti_module
        self._libcuda = libcuda
        c = self._c
        self._layout = RecordLayout.from_cupti(c)
        self._kernel_kind = c.ActivityKind.CONCURRENT_KERNEL
        self._ext_kind = int(c.ExternalCorrelationKind.CUSTOM2)  # CUSTOM0/1 are Kineto's
        if buffer_size is None:
            buffer_size = buffer_bytes_from_env() or BUFFER_BYTES
        self._buffer_size = buffer_size
        self._lock = threading.Lock()
        # Signalled by the buffer callbacks: a fence waits on it instead of polling.
        self._delivered = threading.Condition(self._lock)
        self._scratch = DecodeScratch()
        self._builder = KernelWindowBuilder(
            self._ext_kind,
            ring=ring,
            max_keys=max_keys,
            max_section_groups=max_section_groups,
            max_pending_records=max_pending_records,
            bucket_shapes=bucket_shapes,
            comm_pattern=comm_pattern if comm_pattern is not None else comm_pattern_from_env(),
            section_stats=section_stats,
        )
        self._section_ids: dict[str, int] = {}
        self._section_names: list[str] = []
        # hot-path state (training thread)
        self._depth = 0
        # Outermost entries per section id: each section is sampled on its own count,
        # so a loop of several sections is not traced in one of them only.
        self._entry_counts: dict[int, int] = {}
        self._window_entries = 0
        self._window_traced = 0
        self._clock = clock
        self._window_started = clock()
        self._serial = 0
        self._active = False
        self._gated = False  # kernel (and memset) records switched on by a section
        # At N = 1, records stay on from one traced entry to the next (sampling.py's
        # keep_records_on); refused for good once a window shows it cost more: left
        # switched per entry, a window cannot see what ran outside, and would flip back.
        self._keep_on = keep_records_on
        self._stack: list[tuple[int, int]] = []
        self._paused = False
        self._closed = False
        self._markers_sent = 0
        self._unparsed_buffers = 0
        self._buffers_handled = 0
        self._handling_s = 0.0  # wall time in the buffer callback, since start
        self._last_collect: dict[str, float] = {}
        self._fence_parts: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._dropped_count = ctypes.c_size_t(0)
        self._profiler_enabled = _torch_profiler_probe()
        self._marker_mode = self._modes[0]
        self._memset: _MemsetResources | None = None
        self._raw: RawBuffers | None = None
        if raw_buffers:
            c.get_timestamp()  # loads libcupti
            register_fn = register_callbacks_function()
            if register_fn is not None:
                self._raw = RawBuffers(register_fn, self._buffer_size, self._on_bytes)
            else:
                logger.info("raw CUPTI buffers unavailable; using cupti-python's record objects")
        self._marker, self._marker_cbid = self._pick_marker()
        self._builder.received = 0  # the self-check's records are not a window's

    # --- CUPTI attach / detach -----------------------------------------------------

    def _buffer_requested(self) -> tuple[int, int]:
        return self._buffer_size, 0

    def _attach(self) -> None:
        c = self._c
        if self._raw is not None:
            self._raw.register()
        else:
            c.activity_register_callbacks(self._buffer_requested, self._on_buffer)
        # Memset markers carry their id in the memset's value: no external ids needed.
        if self._memset is None:
            c.activity_enable(c.ActivityKind.EXTERNAL_CORRELATION)

    @property
    def marker_mode(self) -> str:
        """How section markers are traced: ``memset``, ``api`` or ``driver``."""
        return self._marker_mode

    @property
    def buffer_path(self) -> str:
        """``raw`` (ctypes, bulk numpy walk) or ``objects`` (cupti-python's record list)."""
        return "raw" if self._raw is not None else "objects"

    def _pick_marker(self) -> tuple[Callable[[], Any], int]:
        """Attach, and find a marker whose records arrive (a self-check per mode tried).

        ``memset`` (tried first): see markers.py. Where it cannot be used (no current
        CUDA context yet), two ways to get a driver call's API record, cheapest first:
          ``api``     trace only the marker's callback id. On the H200 (CUDA 13.0) this
                      gave records only when set before the process's CUDA context
                      existed, which a detector started after the model cannot rely on.
          ``driver``  switch the DRIVER kind on around each marker call only. Kept on
                      through a section it traced every launch's driver calls and made
                      a 602-kernel step 4x slower, so it is never left on.
        """
        c = self._c
        try:
            libcuda = self._libcuda or ctypes.CDLL("libcuda.so.1")
            self._attach()
        except Exception as e:
            raise CuptiUnavailable(f"CUPTI activity API unavailable: {e}") from e
        with contextlib.suppress(Exception):
            libcuda.cuInit(0)  # CUPTI traces nothing before the driver is initialised
        value = ctypes.c_int(0)
        for mode in self._modes:
            if mode == "memset":
                if self._memset_marker_works(libcuda):
                    return _no_call, 0
                continue
            # A context-bound failure of ``api`` is not the candidate's fault: try one.
            for fname in _MARKER_CANDIDATES[:1] if mode == "api" else _MARKER_CANDIDATES:
                cbid = int(getattr(c.driver_api_trace_cbid, fname))
                fn = getattr(libcuda, fname)
                fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
                fn.restype = ctypes.c_int
                arg = ctypes.byref(value)

                def call(fn: Any = fn, arg: Any = arg) -> Any:
                    return fn(arg)

                try:
                    self._marker_mode = mode
                    self._marker_on(cbid)
                    seen = self._fence(call, timeout_s=self.self_check_timeout_s, forced=True)
                except Exception as e:
                    with contextlib.suppress(Exception):
                        self._marker_off(cbid)
                    self._release()
                    raise CuptiUnavailable(f"CUPTI activity API unavailable: {e}") from e
                if seen:
                    logger.info(
                        "CUPTI section marker chosen", extra={"marker": fname, "mode": mode}
                    )
                    return call, cbid
                self._marker_off(cbid)
        if self._raw is not None:
            # Raw callbacks got nothing: fall back to cupti-python's own buffer callbacks.
            logger.warning("raw CUPTI buffers received nothing; using cupti-python's records")
            self._raw = None
            return self._pick_marker()
        received = self._builder.received
        self._release()
        raise CuptiUnavailable(
            "CUPTI did not trace a section marker call "
            f"({received} records received, buffer path {self.buffer_path})"
        )

    def _memset_marker_works(self, libcuda: Any) -> bool:
        """Set up memset markers (private stream and buffer) and self-check them."""
        self._marker_mode = "memset"
        try:
            self._memset = _memset_resources(libcuda)
            stream_id = int(self._c.get_stream_id_ex(0, self._memset.stream, 0))
            self._builder.memset_markers = MemsetMarkers(stream_id)
            if self._fence(_no_call, timeout_s=self.self_check_timeout_s, forced=True):
                logger.info("CUPTI section marker chosen", extra={"mode": "memset"})
                self._c.activity_disable(self._c.ActivityKind.EXTERNAL_CORRELATION)
                return True
            reason = "no marker record arrived"
        except Exception as e:
            reason = repr(e)
        logger.warning("memset section markers unusable here", extra={"reason": reason})
        self._free_memset()
        self._builder.memset_markers = None
        return False

    def _free_memset(self) -> None:
        memset, self._memset = self._memset, None
        if memset is None:
            return
        with contextlib.suppress(Exception):
            memset.libcuda.cuMemFree_v2(ctypes.c_uint64(memset.buffer))
        with contextlib.suppress(Exception):
            memset.libcuda.cuStreamDestroy_v2(ctypes.c_void_p(memset.stream))

    def _marker_on(self, cbid: int) -> None:
        if self._marker_mode == "api":
            self._c.activity_enable_driver_api(cbid, 1)

    def _marker_off(self, cbid: int) -> None:
        # In ``driver`` mode the kind is already off again (``_emit``); switching it off
        # here could cut off a profiler that enabled it.
        if self._marker_mode == "api":
            self._c.activity_enable_driver_api(cbid, 0)

    def _emit(self, external_id: int, marker: Callable[[], Any]) -> None:
        """One marker call under our external id; in ``driver`` mode the DRIVER kind is
        on only for this call (another thread's call in that instant makes an API record
        with no external id of ours, which attribution ignores)."""
        c = self._c
        if self._memset is not None:
            self._emit_memset(self._memset, external_id)
            return
        driver = self._marker_mode == "driver"
        if driver:
            c.activity_enable(c.ActivityKind.DRIVER)
        c.activity_push_external_correlation_id(self._ext_kind, external_id)
        try:
            marker()
        finally:
            c.activity_pop_external_correlation_id(self._ext_kind)
            if driver:
                c.activity_disable(c.ActivityKind.DRIVER)

    def _emit_memset(self, memset: _MemsetResources, external_id: int) -> None:
        """A 244-byte memset on our private stream; its value indexes the marker ring.
        Where records are off (fences) the MEMSET kind is switched on for this call alone."""
        c = self._c
        markers = self._builder.memset_markers
        assert markers is not None
        value = markers.ring.put(external_id)
        gate = not self._gated
        if gate:
            c.activity_enable(c.ActivityKind.MEMSET)
        try:
            rc = memset.fn(memset.buffer, value, MARKER_WORDS, memset.stream)
        finally:
            if gate:
                c.activity_disable(c.ActivityKind.MEMSET)
        if rc != 0:
            raise RuntimeError(f"cuMemsetD32Async returned {rc}")

    def _fence(self, marker: Callable[[], Any], timeout_s: float, forced: bool = False) -> bool:
        """Emit a fence marker, flush, and wait until our callback has processed it.

        CUPTI may hand buffers over on its own thread after a flush returns (and that
        thread needs the GIL), so a flush alone does not mean the records were seen.
        ``forced`` flushes incomplete buffers at once (start-up, where a missing record
        must be found out quickly); otherwise a forced flush follows only a timeout.
        """
        c = self._c
        target = self._builder.fences_seen + 1
        t0 = time.perf_counter()
        self._emit(encode_external_id(0, 0, False), marker)
        if self._memset is not None:
            # A memset's record exists once it ran; it runs on our own stream, which
            # holds nothing but tiny memsets, so waiting for it is short.
            self._memset.libcuda.cuStreamSynchronize(ctypes.c_void_p(self._memset.stream))
        t1 = time.perf_counter()
        deadline = time.monotonic() + timeout_s
        c.activity_flush_all(1 if forced else 0)
        t2 = time.perf_counter()

        def seen() -> bool:
            return self._builder.fences_seen >= target

        try:
            while True:
                with self._delivered:
                    if self._delivered.wait_for(seen, max(0.0, deadline - time.monotonic())):
                        return True
                if forced:
                    return False
                forced = True
                # Never under our lock: a flush may run our callback in this thread.
                c.activity_flush_all(1)
                deadline = time.monotonic() + timeout_s
        finally:
            self._fence_parts = {
                "marker_ms": (t1 - t0) * 1e3,
                "flush_ms": (t2 - t1) * 1e3,
                "wait_ms": (time.perf_counter() - t2) * 1e3,
            }

    def _release(self) -> None:
        """Stop every kind of record we asked for and hand over what is buffered.

        No ``cuptiFinalize``: called from an ordinary thread it races with CUPTI calls
        on other threads (Kineto saw crashes), and on the H200 a backend started after it
        in the same process received no records at all. With our kinds disabled CUPTI
        is idle; a profiler started later registers its own callbacks and enables its
        own kinds (tests/gpu checks that torch.profiler sees every kernel after this).
        """
        c = self._c
        cbid = getattr(self, "_marker_cbid", None)
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("disable kernels", lambda: c.activity_disable(self._kernel_kind)),
            ("disable memsets", lambda: c.activity_disable(c.ActivityKind.MEMSET)),
            ("disable marker", lambda: None if cbid is None else self._marker_off(cbid)),
            ("flush", lambda: c.activity_flush_all(1)),
            (
                "disable external correlation",
                lambda: c.activity_disable(c.ActivityKind.EXTERNAL_CORRELATION),
            ),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as e:
                logger.debug("CUPTI release step failed", extra={"step": what, "error": repr(e)})
        self._free_memset()
        if self._raw is not None:
            self._raw.trim()

    # --- hot path --------------------------------------------------------------------

    def _gate(self, on: bool) -> None:
        c = self._c
        switch = c.activity_enable if on else c.activity_disable
        # Off counts as done even if switching fails: one attempt per entry, counted.
        self._gated = on
        switch(self._kernel_kind)
        if self._memset is not None:
            switch(c.ActivityKind.MEMSET)

    def _mark(self, external_id: int) -> None:
        self._emit(external_id, self._marker)
        self._markers_sent += 1

    def _section_id(self, section: str) -> int:
        sid = self._section_ids.get(section)
        if sid is None:
            if len(self._section_names) >= MAX_SECTION_ID:
                return MAX_SECTION_ID
            sid = len(self._section_names)
            self._section_names.append(section)
            self._section_ids[section] = sid
        return sid

    def _profiler_busy(self) -> bool:
        probe = self._profiler_enabled
        busy = probe is not None and bool(probe())
        if busy:
            if not self._paused:
                self._paused = True
                # The profiler switches the kinds it needs now (ours among them);
                # switching them off would cut its trace short.
                self._gated = False
                logger.warning(
                    "CUPTI in use by torch.profiler: kernel timing paused until it stops"
                )
            return True
        if self._paused:
            # The profiler registered its own buffer callbacks; take them back.
            self._attach()
            self._marker_on(self._marker_cbid)
            self._paused = False
            logger.warning("torch.profiler stopped: kernel timing resumed")
        return False

    def start(self, section: str) -> None:
        # Untraced entries (all but one in N) leave here after a few dict operations:
        # in a real step they run with cold caches, ~6 us on the H200 host as written
        # before (0.3 us in a tight loop), so every call and attribute read counts.
        depth = self._depth
        self._depth = depth + 1
        if depth and not self._active:
            return  # nested in an entry that is not traced
        try:
            sid = self._section_ids.get(section)
            if sid is None:
                sid = self._section_id(section)
            if not depth:
                self._window_entries += 1
                counts = self._entry_counts
                seen = counts.get(sid, 0)
                counts[sid] = seen + 1
                self._active = False
                if self._stack:
                    self._stack.clear()  # what a failed entry may have left behind
                if seen % self.sample_every or self._closed or self._profiler_busy():
                    if self._gated:
                        self._ungate()  # left on by the last entry: this one is not traced
                    return
                if not self._gated:
                    self._gate(True)
                self._active = True
                self._window_traced += 1
            self._serial += 1
            self._stack.append((self._serial, sid))
            self._mark(encode_external_id(self._serial, sid, False))
        except Exception as e:
            self._abandon_entry()
            self._fail("start", e)

    def stop(self, section: str) -> None:
        depth = self._depth
        if not depth:
            return
        self._depth = depth = depth - 1
        if not self._active:
            return  # untraced: nothing was switched on for it
        popped: list[int] = []
        try:
            if self._stack:
                serial, sid = self._stack.pop()
                popped.append(serial)
                self._mark(encode_external_id(serial, sid, True))
        except Exception as e:
            self._abandon_entry(popped)
            self._fail("stop", e)
        finally:
            if not depth:
                self._active = False
                if not (self._keep_on and self.sample_every == 1):
                    self._ungate()

    def _abandon_entry(self, popped: Sequence[int] = ()) -> None:
        """A marker failed: trace nothing more until the next sampled entry. Records
        must not stay on, or every later kernel would be traced (and never attributed),
        and the open entries must be forgotten, or their kernels and every later one
        would wait for exit markers that never come."""
        self._active = False
        self._ungate()
        serials = [*popped, *(serial for serial, _ in self._stack)]
        self._stack.clear()
        if serials:
            with self._lock:
                self._builder.book.abandon(serials)

    def _ungate(self) -> None:
        if not self._gated:
            return
        try:
            self._gate(False)
        except Exception as e:
            self._fail("gate", e)

    # --- buffer processing (CUPTI's thread, or collect's flush) --------------------------

    def _on_buffer(self, activities: Sequence[Any]) -> None:
        try:
            n = len(activities)
            if n == 0:
                return
            decoded = decode_addresses(record_addresses(activities), self._layout)
            with self._lock:
                self._builder.add(decoded, n)
                self._delivered.notify_all()
        except Exception as e:
            self._fail("buffer", e)

    def _on_bytes(self, raw: Any) -> None:
        t0 = time.perf_counter()
        try:
            with self._lock:  # the scratch's arrays are reused buffer after buffer
                decoded, records, whole = decode_buffer(raw, self._layout, self._scratch)
                self._buffers_handled += 1
                if not whole:
                    self._unparsed_buffers += 1
                    if self._unparsed_buffers == 1:
                        logger.warning(
                            "CUPTI buffer with an unexpected record layout; its tail is skipped"
                        )
                self._builder.add(decoded, records)
                self._handling_s += time.perf_counter() - t0
                self._delivered.notify_all()
        except Exception as e:
            self._fail("buffer", e)

    # --- report time -------------------------------------------------------------------

    def _cupti_dropped(self) -> int:
        try:
            self._dropped_count.value = 0
            self._c.activity_get_num_dropped_records(0, 0, ctypes.addressof(self._dropped_count))
            return int(self._dropped_count.value)
        except Exception as e:
            self._fail("dropped", e)
            return 0

    def collect(self) -> KernelWindow:
        try:
            t0 = time.perf_counter()
            buffers0, handling0 = self._buffers_handled, self._handling_s
            live = not self._closed and not self._paused
            if self._depth == 0:
                self._ungate()
            # The detector synchronizes before collecting, so every kernel has finished
            # and a forced flush hands over complete records at once.
            if live and not self._fence(self._marker, timeout_s=self.fence_timeout_s, forced=True):
                self._fail("fence", TimeoutError("CUPTI buffers not delivered in time"))
            t1 = time.perf_counter()
            cupti_dropped = 0 if self._closed else self._cupti_dropped()
            t2 = time.perf_counter()
            with self._lock:
                received = self._builder.received
                window = self._builder.take(self._section_names, cupti_dropped)
            self._last_collect = {
                "fence_ms": (t1 - t0) * 1e3,
                **(self._fence_parts if live else {}),
                "dropped_query_ms": (t2 - t1) * 1e3,
                "take_ms": (time.perf_counter() - t2) * 1e3,
                "buffers_in_fence": float(self._buffers_handled - buffers0),
                "handling_in_fence_ms": (self._handling_s - handling0) * 1e3,
            }
            self._check_conflict(received)
            self._markers_sent = 0
            self._resample(window)
            if window.dropped_records:
                logger.warning("kernel records dropped", extra={"dropped": window.dropped_records})
            return window
        except Exception as e:
            self._fail("collect", e)
            return KernelWindow()

    def _resample(self, window: KernelWindow) -> None:
        """Choose N for the next window from what this one's tracing cost."""
        now = self._clock()
        entries, traced = self._window_entries, self._window_traced
        elapsed, self._window_started = now - self._window_started, now
        self._window_entries = self._window_traced = 0
        if (
            self._keep_on
            and self.sample_every == 1
            and not keep_records_on(
                outside_kernels=window.unattributed_records, traced_entries=traced
            )
        ):
            self._keep_on = False
            logger.info(
                "kernel records now switched per entry: many kernels ran outside sections",
                extra={"outside_kernels": window.unattributed_records, "entries": traced},
            )
        if not self.adaptive_sampling:
            return
        kernels = window.records + window.comm_records + window.unattributed_records
        before = self.sample_every
        self.sample_every = next_sample_every(
            current=before,
            entries=entries,
            traced_entries=traced,
            traced_kernels=kernels,
            elapsed_s=elapsed,
        )
        if self.sample_every != before:
            logger.info(
                "kernel sampling adjusted",
                extra={"sample_every": self.sample_every, "was": before, "entries": entries},
            )

    @property
    def last_collect(self) -> dict[str, float]:
        """Where the last ``collect`` spent its time: the fence (its marker, the flush
        call, the wait for the buffers it handed over to be handled, and of all that
        the time our buffer callback took), CUPTI's dropped count, and building the
        window."""
        return dict(self._last_collect)

    def _check_conflict(self, received: int) -> None:
        if self._markers_sent and not received and not self._paused:
            # Markers always produce records; none arrived, so another tool registered
            # its own buffer callbacks over ours. Take them back once per window.
            self._failures["conflict"] = self._failures.get("conflict", 0) + 1
            if self._failures["conflict"] == 1:
                logger.warning("CUPTI records went to another tool; re-attaching kernel timing")
            try:
                self._attach()
            except Exception as e:
                self._fail("reattach", e)

    def shutdown(self) -> None:
        """Flush, disable our activity kinds and detach CUPTI so another tool can attach."""
        if self._closed:
            return
        self._closed = True
        self._active = False
        self._release()

    # --- failures ------------------------------------------------------------------------

    def _fail(self, where: str, error: BaseException) -> None:
        n = self._failures.get(where, 0) + 1
        self._failures[where] = n
        if n == 1:
            logger.warning(
                "kernel timing failed; continuing without it here",
                extra={"where": where, "error": repr(error)},
            )

    def kernel_names(self) -> dict[str, str]:
        """Kernel key -> full demangled kernel name, for every key seen so far."""
        with self._lock:
            keys = self._builder.keys
            return dict(zip(keys.keys, keys.full_names, strict=True))

    @property
    def paused(self) -> bool:
        """True while another tool (torch.profiler) holds CUPTI."""
        return self._paused

    @property
    def failures(self) -> dict[str, int]:
        """Internal failures by cause since start (each logged once)."""
        return dict(self._failures)


def _no_call() -> None:
    """The marker call of memset mode: the memset itself is made in ``_emit``."""


_CU_STREAM_NON_BLOCKING = 1


class _MemsetResources(NamedTuple):
    fn: Any
    """cuMemsetD32Async, typed."""
    buffer: int
    stream: int
    libcuda: Any


def _memset_resources(libcuda: Any) -> _MemsetResources:
    """The private stream and buffer of memset markers, in the current CUDA context.

    The stream is non-blocking and ours alone, so a marker never orders or waits for the
    program's work; CUPTI's record of it names that stream, which tells it apart."""
    ctx = ctypes.c_void_p()
    if libcuda.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
        raise RuntimeError("no current CUDA context")
    stream = ctypes.c_void_p()
    rc = libcuda.cuStreamCreate(ctypes.byref(stream), ctypes.c_uint(_CU_STREAM_NON_BLOCKING))
    if rc != 0:
        raise RuntimeError(f"cuStreamCreate returned {rc}")
    buffer = ctypes.c_uint64()
    rc = libcuda.cuMemAlloc_v2(ctypes.byref(buffer), ctypes.c_size_t(MARKER_BYTES))
    if rc != 0:
        libcuda.cuStreamDestroy_v2(stream)
        raise RuntimeError(f"cuMemAlloc returned {rc}")
    fn = libcuda.cuMemsetD32Async
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return _MemsetResources(fn, int(buffer.value), int(stream.value or 0), libcuda)


def _torch_profiler_probe() -> Callable[[], bool] | None:
    """A cheap check for an active torch profiler (Kineto holds CUPTI while it runs)."""
    try:
        import torch
    except ImportError:
        return None
    probe = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    return probe if callable(probe) else None


__all__ = [
    "BUFFER_ENV",
    "MARKER_ENV",
    "CuptiBackend",
    "CuptiConflict",
    "CuptiUnavailable",
    "injected_tool",
    "load_cupti",
]
