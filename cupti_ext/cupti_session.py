"""The CUPTI side of section markers: how they are traced, chosen at start-up by a
self-check per mode; emitting one; fences; and handing CUPTI back.

A marker ties an external id naming a section entry to a correlation id: a traced driver
call under a pushed external id (modes ``api``/``driver``) or a memset on a private
stream whose value names it (``memset``; markers.py reads those records back). Apart
from the backend, which decides *when* to mark (section entries, sampling, switching
kernel records per entry), because this is the part that owns CUPTI's and the driver's
resources: buffer callbacks registered, the marker's stream and buffer, the kinds
enabled for markers.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .attribution import encode_external_id
from .buffer_policy import BufferPolicy, apply_buffer_policy, buffer_policy_from_env
from .cupti_buffers import BufferIntake, RawBuffers
from .cupti_env import CuptiUnavailable
from .markers import MARKER_BYTES, MARKER_WORDS, MemsetMarkers
from .window_builder import KernelWindowBuilder

logger = logging.getLogger(__name__)

_MARKER_CANDIDATES = ("cuDriverGetVersion", "cuDeviceGetCount")
_CU_STREAM_NON_BLOCKING = 1


def no_call() -> None:
    """The marker call of memset mode: the memset itself is made in ``emit``."""


class MemsetResources(NamedTuple):
    fn: Any
    """cuMemsetD32Async, typed."""
    buffer: int
    stream: int
    libcuda: Any


def memset_resources(libcuda: Any) -> MemsetResources:
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
    return MemsetResources(fn, int(buffer.value), int(stream.value or 0), libcuda)


class CuptiSession:
    """CUPTI as one backend holds it: buffer callbacks, section markers, fences.

    ``raw`` and ``memset`` are final once ``choose_marker`` returns, until ``release``.
    """

    def __init__(
        self,
        c: Any,
        *,
        libcuda: Any,
        modes: Sequence[str],
        builder: KernelWindowBuilder,
        intake: BufferIntake,
        raw: RawBuffers | None,
        kernel_kind: Any,
        external_kind: int,
        buffer_policy: BufferPolicy | None = None,
    ) -> None:
        self._c = c
        self._policy_wanted = buffer_policy_from_env() if buffer_policy is None else buffer_policy
        self.buffer_policy: BufferPolicy | None = None
        """The buffer policy CUPTI runs with, once ``attach`` set it (buffer_policy.py;
        the environment's where none is given)."""
        self._libcuda = libcuda
        self._modes = modes
        self._builder = builder
        self._intake = intake
        self._delivered = intake.delivered
        self.raw = raw
        self._kernel_kind = kernel_kind
        self._ext_kind = external_kind
        self.mode = modes[0]
        """How section markers are traced: ``memset``, ``api`` or ``driver``."""
        self.memset: MemsetResources | None = None
        """The memset markers' stream and buffer (None in the other modes, and after
        ``release``)."""
        self.cbid: int | None = None
        """The marker call's driver callback id, once chosen (0 for memset markers)."""
        self.fence_parts: dict[str, float] = {}
        """Where the last fence spent its time (see ``CuptiBackend.last_collect``)."""
        self._dropped_count = ctypes.c_size_t(0)

    def use(self, c: Any, raw: RawBuffers | None) -> None:
        """Hold CUPTI through ``c`` and ``raw`` from now on (the backend leaving the
        shared API for the single one); ``attach`` registers them."""
        self._c, self.raw = c, raw
        if raw is not None and self.buffer_policy is not None:
            raw.zero_after = self.buffer_policy.we_zero

    @property
    def start_info(self) -> dict[str, str]:
        """How buffers come to us and the policy CUPTI keeps them by, for the start-up
        log."""
        policy = {} if self.buffer_policy is None else self.buffer_policy.describe()
        return {"buffers": self.buffer_path, **policy}

    @property
    def buffer_path(self) -> str:
        """``raw`` (ctypes, bulk numpy walk) or ``objects`` (cupti-python's record list)."""
        return "raw" if self.raw is not None else "objects"

    # --- attach and the marker's choice (start-up) -------------------------------------

    def attach(self) -> None:
        c = self._c
        wanted = self._policy_wanted
        if self.buffer_policy is None:
            # Once, before the first registration: CUPTI's attributes are undefined when
            # changed mid-session (a resume after a profiler keeps what was set).
            if self.raw is None:  # cupti-python's own buffers: it zeroes nothing for us
                wanted = BufferPolicy(per_thread=wanted.per_thread, we_zero=False)
            self.buffer_policy = apply_buffer_policy(c, wanted)
            if self.raw is not None:
                self.raw.zero_after = self.buffer_policy.we_zero
        if self.raw is not None:
            self.raw.register()
        else:
            c.activity_register_callbacks(self._intake.buffer_requested, self._intake.on_buffer)
        # Memset markers carry their id in the memset's value: no external ids needed.
        if self.memset is None:
            c.activity_enable(c.ActivityKind.EXTERNAL_CORRELATION)

    def resume(self, marker: Callable[[], Any], timeout_s: float) -> Callable[[], Any]:
        """Take CUPTI back after a profiler held it, and check that markers come again
        (a self-check, as at start-up). Where they do not, choose the marker again from
        the modes; return the marker call to use from now on.

        ``api`` markers are chosen again at once, ``memset`` first: seen on the H200
        (issue 19), ``api`` markers set before the CUDA context gave no record at all
        once torch.profiler had run, so every window was empty and every fence waited
        out its timeout; a context exists by now, and memset markers cost less. Raises
        ``CuptiUnavailable`` if no mode works."""
        self.attach()
        was = self.mode
        if was != "api":
            if self.cbid is not None:
                self.marker_on(self.cbid)
            try:
                if self.fence(marker, timeout_s, gated=False, forced=True):
                    return marker
            except Exception as e:
                logger.debug("marker self-check failed", extra={"error": repr(e)})
            logger.warning(
                "section markers stopped coming after a profiler held CUPTI; choosing again",
                extra={"was": was},
            )
        if self.cbid is not None:
            with contextlib.suppress(Exception):
                self.marker_off(self.cbid)
        if self.memset is not None:
            self._free_memset()  # and external ids are needed again (``attach``)
            self._builder.memset_markers = None
        # ``api`` after memset: alive only where set before a context, and one exists
        # now; after driver where its check has just failed.
        order = ("memset", "api", "driver") if was == "api" else ("memset", "driver", "api")
        others = [m for m in order if m in self._modes and (m != was or was == "api")]
        call, self.cbid = self._pick_marker(timeout_s, others)
        return call

    def choose_marker(self, timeout_s: float) -> Callable[[], Any]:
        """Attach, and find a marker whose records arrive (a self-check per mode tried,
        each waiting ``timeout_s`` for its record after a forced flush); return its call.

        ``memset`` (tried first): see markers.py. Where it cannot be used (no current
        CUDA context yet), two ways to get a driver call's API record, cheapest first:
          ``api``     trace only the marker's callback id. On the H200 (CUDA 13.0) this
                      gave records only when set before the process's CUDA context
                      existed, which a detector started after the model cannot rely on.
          ``driver``  switch the DRIVER kind on around each marker call only. Kept on
                      through a section it traced every launch's driver calls and made
                      a 602-kernel step 4x slower, so it is never left on.
        """
        call, self.cbid = self._pick_marker(timeout_s, self._modes)
        return call

    def _pick_marker(self, timeout_s: float, modes: Sequence[str]) -> tuple[Callable[[], Any], int]:
        c = self._c
        try:
            libcuda = self._libcuda or ctypes.CDLL("libcuda.so.1")
            self.attach()
        except Exception as e:
            raise CuptiUnavailable(f"CUPTI activity API unavailable: {e}") from e
        with contextlib.suppress(Exception):
            libcuda.cuInit(0)  # CUPTI traces nothing before the driver is initialised
        value = ctypes.c_int(0)
        for mode in modes:
            if mode == "memset":
                if self._memset_marker_works(libcuda, timeout_s):
                    return no_call, 0
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
                    self.mode = mode
                    self.marker_on(cbid)
                    seen = self.fence(call, timeout_s, gated=False, forced=True)
                except Exception as e:
                    with contextlib.suppress(Exception):
                        self.marker_off(cbid)
                    self.release()
                    raise CuptiUnavailable(f"CUPTI activity API unavailable: {e}") from e
                if seen:
                    logger.info(
                        "CUPTI section marker chosen", extra={"marker": fname, "mode": mode}
                    )
                    return call, cbid
                self.marker_off(cbid)
        if self.raw is not None:
            # Raw callbacks got nothing: fall back to cupti-python's own buffer callbacks.
            logger.warning("raw CUPTI buffers received nothing; using cupti-python's records")
            self.raw = None
            return self._pick_marker(timeout_s, modes)
        received = self._builder.received
        self.release()
        raise CuptiUnavailable(
            "CUPTI did not trace a section marker call "
            f"({received} records received, buffer path {self.buffer_path})"
        )

    def _memset_marker_works(self, libcuda: Any, timeout_s: float) -> bool:
        """Set up memset markers (private stream and buffer) and self-check them."""
        self.mode = "memset"
        try:
            self.memset = memset_resources(libcuda)
            stream_id = int(self._c.get_stream_id_ex(0, self.memset.stream, 0))
            self._builder.memset_markers = MemsetMarkers(stream_id)
            if self.fence(no_call, timeout_s, gated=False, forced=True):
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
        memset, self.memset = self.memset, None
        if memset is None:
            return
        with contextlib.suppress(Exception):
            memset.libcuda.cuMemFree_v2(ctypes.c_uint64(memset.buffer))
        with contextlib.suppress(Exception):
            memset.libcuda.cuStreamDestroy_v2(ctypes.c_void_p(memset.stream))

    def marker_on(self, cbid: int) -> None:
        if self.mode == "api":
            self._c.activity_enable_driver_api(cbid, 1)

    def marker_off(self, cbid: int) -> None:
        # In ``driver`` mode the kind is already off again (``emit``); switching it off
        # here could cut off a profiler that enabled it.
        if self.mode == "api":
            self._c.activity_enable_driver_api(cbid, 0)

    # --- markers (the training thread, in traced entries) ------------------------------

    def emit(self, external_id: int, marker: Callable[[], Any], gated: bool) -> None:
        """One marker call under our external id; ``gated``: kernel (and memset) records
        are on. In ``driver`` mode the DRIVER kind is on only for this call (another
        thread's call in that instant makes an API record with no external id of ours,
        which attribution ignores)."""
        c = self._c
        if self.memset is not None:
            self._emit_memset(self.memset, external_id, gated)
            return
        driver = self.mode == "driver"
        if driver:
            c.activity_enable(c.ActivityKind.DRIVER)
        c.activity_push_external_correlation_id(self._ext_kind, external_id)
        try:
            marker()
        finally:
            c.activity_pop_external_correlation_id(self._ext_kind)
            if driver:
                c.activity_disable(c.ActivityKind.DRIVER)

    def _emit_memset(self, memset: MemsetResources, external_id: int, gated: bool) -> None:
        """A 244-byte memset on our private stream; its value indexes the marker ring.
        Where records are off (fences) the MEMSET kind is switched on for this call alone."""
        c = self._c
        markers = self._builder.memset_markers
        assert markers is not None
        value = markers.ring.put(external_id)
        gate = not gated
        if gate:
            c.activity_enable(c.ActivityKind.MEMSET)
        try:
            rc = memset.fn(memset.buffer, value, MARKER_WORDS, memset.stream)
        finally:
            if gate:
                c.activity_disable(c.ActivityKind.MEMSET)
        if rc != 0:
            raise RuntimeError(f"cuMemsetD32Async returned {rc}")

    # --- fences and release (start-up, report time, shutdown) --------------------------

    def fence(
        self,
        marker: Callable[[], Any],
        timeout_s: float,
        *,
        gated: bool,
        forced: bool = False,
        ready: Callable[[], bool] | None = None,
        plain_grace_s: float | None = None,
        settled: Callable[[], bool] | None = None,
    ) -> bool:
        """Emit a fence marker, flush, and wait until our callback has processed it
        (and, with ``ready``, until that says so too: every section marker made before
        the fence is in, which CUPTI may hand over in a buffer after the fence's).
        True when the fence itself came.

        CUPTI may hand buffers over on its own thread after a flush returns (and that
        thread needs the GIL), so a flush alone does not mean the records were seen.
        ``forced`` flushes incomplete buffers at once (start-up, where a missing record
        must be found out quickly); otherwise a forced flush follows a wait of
        ``plain_grace_s`` (a report's fence, after the detector synchronized: every
        record is complete, and a plain flush hands them over without CUPTI's forced
        walk of its buffers) or of ``timeout_s``.

        ``settled`` (a plain fence only): CUPTI holds none of our buffers and none is
        being handled. Then a plain flush first, and if after it CUPTI holds nothing
        and ``ready`` says every section marker is in, the window is whole without a
        fence marker (a report's marker, its stream wait and the MEMSET kind's two
        switches cost about 0.1 ms on the H200 host). On the H200 a plain flush after
        the device synchronized handed every buffer over inside the call
        (bench/cupti_flush_probe.py); where CUPTI keeps one, or hands it over later on
        its thread, the marker fence follows as before.
        """
        c = self._c
        target = self._builder.fences_seen + 1
        t0 = time.perf_counter()
        if settled is not None and not forced:
            c.activity_flush_all(0)
            if settled() and (ready is None or ready()):
                t1 = time.perf_counter()
                self.fence_parts = {
                    "forced_after_plain": 0.0,
                    "quiet": 1.0,
                    "marker_ms": 0.0,
                    "flush_ms": (t1 - t0) * 1e3,
                    "wait_ms": 0.0,
                }
                return True
        self.emit(encode_external_id(0, 0, False), marker, gated)
        if self.memset is not None:
            # A memset's record exists once it ran; it runs on our own stream, which
            # holds nothing but tiny memsets, so waiting for it is short.
            self.memset.libcuda.cuStreamSynchronize(ctypes.c_void_p(self.memset.stream))
        t1 = time.perf_counter()
        c.activity_flush_all(1 if forced else 0)
        t2 = time.perf_counter()
        first_wait = timeout_s if forced or plain_grace_s is None else plain_grace_s
        deadline = time.monotonic() + first_wait
        forced_after = 0.0

        def seen() -> bool:
            return self._builder.fences_seen >= target and (ready is None or ready())

        try:
            while True:
                with self._delivered:
                    if self._delivered.wait_for(seen, max(0.0, deadline - time.monotonic())):
                        return True
                if forced:
                    return self._builder.fences_seen >= target
                forced, forced_after = True, 1.0
                # Never under our lock: a flush may run our callback in this thread.
                c.activity_flush_all(1)
                deadline = time.monotonic() + timeout_s
        finally:
            self.fence_parts = {
                "forced_after_plain": forced_after,
                "quiet": 0.0,
                "marker_ms": (t1 - t0) * 1e3,
                "flush_ms": (t2 - t1) * 1e3,
                "wait_ms": (time.perf_counter() - t2) * 1e3,
            }

    def dropped_records(self) -> int:
        """Records CUPTI dropped (no buffer to put them in) since the last call."""
        self._dropped_count.value = 0
        self._c.activity_get_num_dropped_records(0, 0, ctypes.addressof(self._dropped_count))
        return int(self._dropped_count.value)

    def release(self) -> None:
        """Stop every kind of record we asked for and hand over what is buffered.

        No ``cuptiFinalize``: called from an ordinary thread it races with CUPTI calls
        on other threads (Kineto saw crashes), and on the H200 a backend started after it
        in the same process received no records at all. With our kinds disabled CUPTI
        is idle; a profiler started later registers its own callbacks and enables its
        own kinds (tests/gpu checks that torch.profiler sees every kernel after this).
        """
        c = self._c
        cbid = self.cbid
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("disable kernels", lambda: c.activity_disable(self._kernel_kind)),
            ("disable memsets", lambda: c.activity_disable(c.ActivityKind.MEMSET)),
            ("disable marker", lambda: None if cbid is None else self.marker_off(cbid)),
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
        if self.raw is not None:
            self.raw.trim()


__all__ = ["CuptiSession", "MemsetResources", "memset_resources", "no_call"]
