"""Kernel timing with CUPTI's activity API through cupti-python (imported lazily).

Hot path (training thread), per sampled outermost section entry (gated attribution, the
detector's default, makes no marker: records are on inside traced entries alone):
  start: enable CONCURRENT_KERNEL records, then a marker; nested entries add a marker.
  stop:  a marker, then (outermost) disable CONCURRENT_KERNEL records. A marker ties an
external id naming the entry to a correlation id (cupti_session.py chooses how at
start-up; markers.py reads memset markers back). Kernels launched outside sampled
sections are never traced (CUPTI's tracing is the expensive part, ~1 us per kernel on
the H200), and attribution is exact (attribution.py).

Buffers arrive on CUPTI's own thread (or inside ``collect``'s flush); each is decoded in
one pass and folded into bounded per-key statistics right away (cupti_buffers.py,
window_builder.py), so a report only reads summaries. Settings come from the environment
(cupti_env.py), the share of entries traced from sampling.py. Failures are logged once
per cause, counted, and never raised into the training loop.

``CuptiBackend`` holds the hot path and report time; older names still import from here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from .attribution import MAX_SECTION_ID, encode_external_id
from .backend import KernelWindow
from .cupti_buffers import BUFFER_BYTES, BufferIntake, RawBuffers, register_callbacks_function
from .cupti_env import (
    ATTRIBUTION_ENV,
    BEFORE_PROFILER,
    BUFFER_ENV,
    MARKER_ENV,
    SAMPLE_EVERY_ENV,
    CuptiConflict,
    CuptiUnavailable,
    attribution_from_env,
    buffer_bytes_from_env,
    default_attribution,
    injected_tool,
    load_cupti,
    marker_modes_from_env,
    open_cupti,
    report_flush_forced_from_env,
    sample_every_from_env,
    torch_profiler_probe,
)
from .cupti_session import CuptiSession, memset_resources
from .cupti_subscriber import CuptiAccess, subscriber_mode_from_env
from .kernel_keys import comm_pattern_from_env
from .sampling import START_SAMPLE_EVERY, keep_records_on, next_sample_every
from .window_builder import KernelWindowBuilder

logger = logging.getLogger(__name__)

_memset_resources = memset_resources  # its old name here, which bench/ imports


class CuptiBackend:
    """CUPTI activity-API backend; one per process (CUPTI's activity API is global)."""

    name = "cupti"
    self_check_timeout_s = 0.25
    """How long start-up waits for the self-check marker's record (after a forced flush,
    per marker tried)."""
    plain_flush_grace_s = 0.01
    """How long a report's fence waits after a plain flush before forcing one."""
    fence_timeout_s = 0.25
    """How long ``collect`` waits for its fence marker's record (per flush kind)."""
    quiet_fence = True
    """A report's fence makes no marker where a plain flush left CUPTI holding nothing
    and every section marker is in (``CuptiSession.fence``'s ``settled``)."""

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
        attribution: str | None = None,
        subscriber: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        fixed = sample_every_from_env() if sample_every is None else sample_every
        if attribution is None:
            attribution = attribution_from_env() or default_attribution(section_stats)
        if attribution not in ("markers", "gated"):
            raise ValueError(f"attribution={attribution!r} is not one of markers, gated")
        self.attribution = attribution
        """``markers`` (section markers in CUPTI's records) or ``gated`` (kernel records
        on inside traced entries alone, no markers: NVRx's way). The argument, else
        ``ATTRIBUTION_ENV``, else ``markers`` with a per-section table (``section_stats``)
        and ``gated`` without one (the detector's)."""
        self._gated_only = attribution == "gated"
        modes = marker_modes_from_env()
        self.report_flush_forced = report_flush_forced_from_env()
        if fixed is not None and fixed < 1:
            raise ValueError(f"sample_every={fixed} must be >= 1")
        self.adaptive_sampling = fixed is None
        """True when N follows each window's measured cost (sampling.py)."""
        self.sample_every = START_SAMPLE_EVERY if fixed is None else fixed
        """Trace kernels in one of this many outermost section entries (now)."""
        self._c_module, self.cupti_version, self._layout = open_cupti(cupti_module)
        self._c: Any = self._c_module
        c = self._c
        self._kernel_kind = c.ActivityKind.CONCURRENT_KERNEL
        self._ext_kind = int(c.ExternalCorrelationKind.CUSTOM2)  # CUSTOM0/1 are Kineto's
        if buffer_size is None:
            buffer_size = buffer_bytes_from_env() or BUFFER_BYTES
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
        self._keep_on = keep_records_on and not self._gated_only
        self._stack: list[tuple[int, int]] = []
        self._paused = False
        self._closed = False
        self._markers_sent = 0
        self._last_collect: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._profiler_enabled = torch_profiler_probe()
        self._intake = BufferIntake(self._builder, self._layout, buffer_size, self._fail)
        self._lock = self._intake.lock
        self._access = CuptiAccess(
            self._c_module,
            mode=subscriber_mode_from_env() if subscriber is None else subscriber,
            lib=None if cupti_module is None else getattr(cupti_module, "libcupti", False),
            buffer_size=buffer_size,
            on_bytes=self._intake.on_bytes,
            register_fn=register_callbacks_function,  # this module's (tests patch it here)
        )
        self._access.open(
            lambda: self._start_session(raw_buffers, libcuda, modes), subscribe=raw_buffers
        )
        self._memset_kind: Any = self._section_memset_kind()
        self._builder.gated = self._gated_only
        self._builder.received = 0  # the self-check's records are not a window's
        # Kernels above the markers of the entries all heard of wait for the rest: CUPTI
        # may hand a buffer of kernels over before the buffer of their markers.
        self._builder.book.sent = self._marked
        BEFORE_PROFILER.append(self._yield_to_profiler)  # once CUPTI is ours for sure
        ready = {"attribution": self.attribution, "marker": self.marker_mode}
        ready |= self._session.start_info | {"sharing": self.sharing}
        logger.info("CUPTI kernel timing ready", extra=ready | {"cupti": self.cupti_version})

    def _start_session(self, raw_buffers: bool, libcuda: Any, modes: Sequence[str]) -> None:
        """Buffer callbacks and the section marker (a self-check), through the CUPTI
        API held (cupti_subscriber.py)."""
        access = self._access
        c = self._c = access.c
        self._session = CuptiSession(
            c,
            libcuda=libcuda,
            modes=modes,
            builder=self._builder,
            intake=self._intake,
            raw=access.raw_buffers(raw_buffers),
            kernel_kind=self._kernel_kind,
            external_kind=self._ext_kind,
        )
        self._emit_marker = self._session.emit  # bound once: called per traced entry
        self._marker = self._session.choose_marker(self.self_check_timeout_s)
        if access.shared is not None and self._session.raw is None:
            # cupti-python's record objects come through the single API only.
            raise CuptiUnavailable("raw buffers gave nothing through the shared CUPTI")
        self._raw = self._session.raw  # final now (bench/ swaps its hand-off)

    @property
    def sharing(self) -> str:
        """``shared`` (a subscriber of CUPTI's per-subscriber API: other such tools trace
        beside us) or ``single`` (CUPTI's single-subscriber API)."""
        return self._access.sharing

    def _section_memset_kind(self) -> Any:
        """The kind switched with kernel records: memset section markers are recorded
        only then (None: no memset markers, or none at all in gated attribution)."""
        if self._session.memset is None or self._gated_only:
            return None
        return self._c.ActivityKind.MEMSET

    def _memset_on(self) -> bool:
        """Whether the MEMSET kind is on now (a fence marker switches it itself where
        not): with kernel records, where section markers are memsets."""
        return self._gated and self._memset_kind is not None

    def _marked(self) -> int:
        """Entries marked so far (the buffer thread reads it; serials are 1..this)."""
        return self._serial

    @property
    def marker_mode(self) -> str:
        """How section markers are traced: ``memset``, ``api`` or ``driver``."""
        return self._session.mode

    @property
    def buffer_path(self) -> str:
        """``raw`` (ctypes, bulk numpy walk) or ``objects`` (cupti-python's record list)."""
        return self._session.buffer_path

    # --- hot path --------------------------------------------------------------------

    def _gate(self, on: bool) -> None:
        c = self._c
        switch = c.activity_enable if on else c.activity_disable
        # Off counts as done even if switching fails: one attempt per entry, counted.
        self._gated = on
        switch(self._kernel_kind)
        if self._memset_kind is not None:
            switch(self._memset_kind)

    def _mark(self, external_id: int) -> None:
        # Made inside a traced entry only, where records are on (``_active`` implies
        # ``_gated``): the emit switches no kind.
        self._emit_marker(external_id, self._marker, True)
        self._markers_sent += 1

    def _emit(self, external_id: int, marker: Callable[[], Any]) -> None:
        """One marker call now, records on or off (bench/ warms CUPTI up with it)."""
        self._session.emit(external_id, marker, self._memset_on())

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
        if probe is not None and bool(probe()):
            if not self._paused:
                self._pause()
            return True
        if self._paused:
            return not self._resume()
        return False

    def _pause(self) -> None:
        """Step aside for a torch profiler. On the single-subscriber API the kinds stay
        as they are: the profiler switches those it needs (ours among them), and
        switching them off would cut its trace short. A subscriber of the shared API
        goes: a single-subscriber profiler gets nothing beside one (cupti_subscriber.py)."""
        self._paused = True
        self._gated = False
        try:
            self._access.leave((self._kernel_kind, self._c_module.ActivityKind.MEMSET))
        except Exception as e:
            self._fail("unsubscribe", e)
        logger.warning("CUPTI in use by torch.profiler: kernel timing paused until it stops")

    def _yield_to_profiler(self) -> None:
        """A torch profiler is about to take CUPTI (called just before it prepares
        Kineto, on the thread starting it): first hand ourselves what CUPTI holds of our
        records, or they and their entries' markers would reach the profiler's callbacks
        instead (issue 19); then pause."""
        if self._closed or self._paused:
            return
        if self._active:  # the entry's exit marker would reach the profiler
            self._abandon_entry(ungate=False)
        try:
            import torch

            if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
                torch.cuda.synchronize()  # running kernels' records are incomplete
            self._c.activity_flush_all(1)
        except Exception as e:
            self._fail("yield", e)
        self._pause()

    def _resume(self) -> bool:
        """The profiler stopped: take CUPTI back (the shared API again where granted,
        else the single one from now on), and say so only once markers come again
        (cupti_session.py checks, and changes the marker mode where it must)."""
        self._paused = False
        try:
            if not self._access.rejoin():
                self._c, self._raw = self._access.c, self._access.raw_buffers(True)
                self._session.use(self._c, self._raw)
            self._marker = self._session.resume(self._marker, self.self_check_timeout_s)
        except Exception as e:
            self._closed = True  # nothing more is traced; reports carry no GPU score
            self._fail("resume", e)
            logger.warning("torch.profiler stopped, but kernel timing could not resume")
            return False
        self._memset_kind = self._section_memset_kind()
        logger.warning(
            "torch.profiler stopped: kernel timing resumed", extra={"marker": self.marker_mode}
        )
        return True

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
            if self._gated_only:
                return  # no markers: records are on for this entry alone
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

    def _abandon_entry(self, popped: Sequence[int] = (), *, ungate: bool = True) -> None:
        """A marker failed: trace nothing more until the next sampled entry. Records
        must not stay on, or every later kernel would be traced (and never attributed),
        and the open entries must be forgotten, or their kernels and every later one
        would wait for exit markers that never come. (Not ``ungate``: a profiler takes
        CUPTI, and the kinds stay as they are for it.)"""
        self._active = False
        if ungate:
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

    # --- report time -------------------------------------------------------------------

    def _cupti_dropped(self) -> int:
        try:
            return self._session.dropped_records()
        except Exception as e:
            self._fail("dropped", e)
            return 0

    def collect(self) -> KernelWindow:
        try:
            t0 = time.perf_counter()
            intake = self._intake
            buffers0, handling0 = intake.buffers_handled, intake.handling_s
            if not self._closed:
                self._profiler_busy()  # a profiler that came and went: take CUPTI back
            live = not self._closed and not self._paused
            if self._depth == 0:
                self._ungate()
            marked, book = self._serial, self._builder.book
            # The detector synchronizes before collecting, so every kernel has finished
            # and a plain flush hands over complete records (NVRx's report flushes
            # plain too); forced only if the fence is not in by the grace. The wait is
            # for the fence and every marker made before it (they may come after it).
            if live and not self._session.fence(
                self._marker,
                self.fence_timeout_s,
                gated=self._memset_on(),
                forced=self.report_flush_forced,
                ready=lambda: book.known_through >= marked,
                plain_grace_s=self.plain_flush_grace_s,
                settled=None if self._raw is None or not self.quiet_fence else self._raw.settled,
            ):
                self._fail("fence", TimeoutError("CUPTI buffers not delivered in time"))
            # Gated, no section marker says whether CUPTI still hands our records to us:
            # a window of traced entries that brought no record at all asks for a fence
            # marker (entries that launch nothing get one; a tool that took the buffer
            # callbacks gets ours, and the conflict check below sees none came).
            probe = (
                live
                and self._gated_only
                and bool(self._window_traced)
                and not self._builder.received
            )
            if probe:
                self._session.fence(
                    self._marker,
                    self.fence_timeout_s,
                    gated=self._memset_on(),
                    plain_grace_s=self.plain_flush_grace_s,
                )
            t1 = time.perf_counter()
            cupti_dropped = 0 if self._closed else self._cupti_dropped()
            t2 = time.perf_counter()
            with self._lock:
                # Markers not in by now will not come (or went to a profiler that holds
                # CUPTI): rule on the kernels held for them.
                self._builder.settle(marked)
                received = self._builder.received
                window = self._builder.take(self._section_names, cupti_dropped)
            self._last_collect = {
                "fence_ms": (t1 - t0) * 1e3,
                **(self._session.fence_parts if live else {}),
                "dropped_query_ms": (t2 - t1) * 1e3,
                "take_ms": (time.perf_counter() - t2) * 1e3,
                "buffers_in_fence": float(intake.buffers_handled - buffers0),
                "handling_in_fence_ms": (intake.handling_s - handling0) * 1e3,
            }
            self._check_conflict(received, expected=bool(self._markers_sent) or probe)
            self._markers_sent = 0
            self._resample(window)
            window.log_losses(logger)
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

    def _check_conflict(self, received: int, *, expected: bool) -> None:
        if expected and not received and not self._paused:
            # Markers always produce records (section markers, or the gated window's
            # fence); none arrived, so another tool registered its own buffer callbacks
            # over ours. Take them back once per window.
            self._failures["conflict"] = self._failures.get("conflict", 0) + 1
            if self._failures["conflict"] == 1:
                logger.warning("CUPTI records went to another tool; re-attaching kernel timing")
            try:
                self._session.attach()
            except Exception as e:
                self._fail("reattach", e)

    def shutdown(self) -> None:
        """Flush, disable our activity kinds and detach CUPTI so another tool can attach."""
        if self._closed:
            return
        self._closed = True
        self._active = False
        if self._yield_to_profiler in BEFORE_PROFILER:
            BEFORE_PROFILER.remove(self._yield_to_profiler)
        self._session.release()
        self._access.single()
        self._memset_kind = None

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


__all__ = [
    "ATTRIBUTION_ENV",
    "BUFFER_BYTES",
    "BUFFER_ENV",
    "MARKER_ENV",
    "SAMPLE_EVERY_ENV",
    "CuptiBackend",
    "CuptiConflict",
    "CuptiUnavailable",
    "RawBuffers",
    "buffer_bytes_from_env",
    "injected_tool",
    "load_cupti",
    "marker_modes_from_env",
    "register_callbacks_function",
    "sample_every_from_env",
]
