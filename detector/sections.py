"""User-defined code sections: the hot path of the detector.

``Detector.detection_section(name)`` returns a cached ``SectionHandle`` (one per name and
``profile_cuda`` flag). Entering it costs a counter bump, one ``perf_counter_ns`` and a
list append; leaving it one ``perf_counter_ns``, a pop and one ring-buffer store. No
frame inspection when a name is given, no allocation per entry, no numpy.

Entries and exits pair last-in first-out per handle, so a section may nest inside
itself; entering the *same* section from several threads at once pairs exits across
threads (the times stay bounded but mix) — time per-thread work in per-thread sections.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import numpy as np

from .collectives import DDP_READY_NS, WAIT_NS
from .collectives import waited as add_wait
from .timings import RingBuffer, summarize_list

if TYPE_CHECKING:
    from pacekeeper.cupti_ext import KernelTimingBackend

    from .guard import Guard

P = ParamSpec("P")
R = TypeVar("R")

OVERFLOW_SECTION = "<other>"
"""Where entries of names beyond the section cap are timed (memory stays bounded)."""

_NOT_TIMED = -1


DEFAULT_MAX_ELAPSEDS_LEN = 8 * 1024
"""NVRx's ``CustomSection.max_elapseds_len``."""


class _MaxElapsedsLen:
    """``CustomSection.max_elapseds_len``: NVRx's default (8192) on the class, the
    section's own bound on an instance."""

    def __get__(self, obj: CustomSection | None, owner: type | None = None) -> int:
        if obj is None:
            return DEFAULT_MAX_ELAPSEDS_LEN
        return obj.times.capacity


class CustomSection:
    """One user-defined section: its name, where it was first entered, and its CPU times.

    NVRx's fields (``name``, ``location``, ``total_entry_cnt``, ``max_elapseds_len``,
    ``cpu_elapsed_times``, a ``deque`` of milliseconds with ``maxlen=max_elapseds_len``)
    and dataclass-style repr, over a bounded ring of nanosecond samples: the hot path
    stores one int; ``cpu_elapsed_times`` is made from the ring when read (a copy:
    appending to it does not add a sample).
    """

    __slots__ = (
        "location",
        "name",
        "profiling_interval",
        "times",
        "total_entry_cnt",
        "wait_ns",
        "waits",
    )

    max_elapseds_len = _MaxElapsedsLen()

    def __init__(
        self,
        name: str,
        location: str,
        total_entry_cnt: int = 0,
        max_elapseds_len: int = DEFAULT_MAX_ELAPSEDS_LEN,
        cpu_elapsed_times: Iterable[float] | None = None,
        *,
        profiling_interval: int = 1,
    ) -> None:
        self.name = name
        self.location = location
        self.total_entry_cnt = total_entry_cnt
        self.profiling_interval = profiling_interval
        self.times = RingBuffer(max_elapseds_len)
        self.wait_ns = 0
        """Time blocked in the job's collectives inside the timed entries of this window
        (``collectives``)."""
        self.waits = [0] * self.times.capacity
        """Each kept entry's wait, at its sample's place in ``times``: an entry's work is
        its time less its own wait, and the section is scored on the median work."""
        for ms in cpu_elapsed_times or ():
            self.times.add(round(ms * 1e6))

    @property
    def cpu_elapsed_times(self) -> deque[float]:
        """Times kept in this window, oldest first, in milliseconds (NVRx's unit)."""
        ring = self.times
        n = len(ring)
        buf = ring._buf
        if ring.count > n:  # wrapped: the oldest sample sits at the write position
            start = ring.count & ring._mask
            ordered = buf[start:n] + buf[:start]
        else:
            ordered = buf[:n]
        return deque((t * 1e-6 for t in ordered), maxlen=ring.capacity)

    def __repr__(self) -> str:
        return (
            f"CustomSection(name={self.name!r}, location={self.location!r}, "
            f"total_entry_cnt={self.total_entry_cnt!r}, "
            f"max_elapseds_len={self.max_elapseds_len!r}, "
            f"cpu_elapsed_times={self.cpu_elapsed_times!r})"
        )


class SectionHandle:
    """The context manager ``detection_section`` returns; cached and reused per entry."""

    __slots__ = ("_backend", "_guard", "_starts", "_waits", "name", "section")

    def __init__(
        self, section: CustomSection, backend: KernelTimingBackend | None, guard: Guard
    ) -> None:
        self.section = section
        self.name = section.name
        self._backend = backend
        self._guard = guard
        self._starts: list[int] = []
        self._waits: list[int] = []

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Use as a decorator, as NVRx's generator-based context manager allows."""

        @functools.wraps(fn)
        def timed(*args: P.args, **kwargs: P.kwargs) -> R:
            with self:
                return fn(*args, **kwargs)

        return timed

    def __enter__(self) -> SectionHandle:
        s = self.section
        n = s.total_entry_cnt
        s.total_entry_cnt = n + 1
        if n % s.profiling_interval:
            self._starts.append(_NOT_TIMED)  # no wait mark: only timed entries push one
            return self
        if self._backend is not None:
            try:
                self._backend.start(self.name)
            except Exception as exc:
                self._guard.record("backend.start", exc)
        self._waits.append(WAIT_NS[0])
        self._starts.append(perf_counter_ns())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        t1 = perf_counter_ns()
        t0 = self._starts.pop()
        ready = DDP_READY_NS[0]
        # A DDP backward finished in here: its tail was the wait for peers. One that
        # finished before this section began (a backward outside every section, as the
        # Hugging Face Trainer runs it) is not this section's wait.
        if ready and ready >= t0:
            DDP_READY_NS[0] = 0
            add_wait(t1 - ready)
        if t0 == _NOT_TIMED:
            return
        w0 = self._waits.pop()
        # A section that raised is not a timing sample (NVRx drops it too).
        if exc_type is None:
            section = self.section
            ring = section.times
            at = ring.count & ring._mask
            ring._buf[at] = t1 - t0
            ring.count += 1
            waited = WAIT_NS[0] - w0
            section.waits[at] = waited
            if waited:
                section.wait_ns += waited
        if self._backend is not None:
            try:
                self._backend.stop(self.name)
            except Exception as exc2:
                self._guard.record("backend.stop", exc2)


@dataclass(frozen=True, slots=True)
class SectionSummary:
    """One section's window on this rank, in nanoseconds."""

    name: str
    min_ns: float
    max_ns: float
    median_ns: float
    mean_ns: float
    std_ns: float
    num: int
    dropped: int
    wait_ns: float = 0.0
    """Time blocked in collectives inside this window's timed entries (all of them)."""
    work_median_ns: float = math.nan
    """The median over entries of each entry's time less its own wait: the work this
    rank did in the section, what it is scored on (``collectives``). Per entry, not
    the median less the mean wait: one long wait (a peer's GC pause, a loader stall)
    raises the mean, not the median, and would make a short section look fast."""

    def __post_init__(self) -> None:
        if math.isnan(self.work_median_ns):  # made without waits: the work is the time
            object.__setattr__(self, "work_median_ns", self.median_ns)


class SectionTable:
    """All sections of this process; creates handles on first use (slow path, locked)."""

    def __init__(
        self,
        *,
        backend: KernelTimingBackend | None,
        guard: Guard,
        profiling_interval: int,
        capacity: int,
        max_sections: int,
    ) -> None:
        self.sections: dict[str, CustomSection] = {}
        self.cuda_handles: dict[str, SectionHandle] = {}
        self.cpu_handles: dict[str, SectionHandle] = {}
        self._backend = backend
        self._guard = guard
        self._interval = profiling_interval
        self._capacity = capacity
        self._max_sections = max_sections
        self._lock = threading.Lock()

    def handle(self, name: str, profile_cuda: bool, location: str) -> SectionHandle:
        with self._lock:
            table = self.cuda_handles if profile_cuda else self.cpu_handles
            found = table.get(name)
            if found is not None:
                return found
            section = self.sections.get(name)
            if section is None:
                if len(self.sections) >= self._max_sections and name != OVERFLOW_SECTION:
                    # Over the cap: time under the overflow section, remember the alias
                    # so the next entry takes the fast path.
                    alias = self._handle_unlocked_overflow(profile_cuda, location)
                    table[name] = alias
                    return alias
                section = CustomSection(
                    name,
                    location,
                    max_elapseds_len=self._capacity,
                    profiling_interval=self._interval,
                )
                self.sections[name] = section
            h = SectionHandle(section, self._backend if profile_cuda else None, self._guard)
            table[name] = h
            return h

    def _handle_unlocked_overflow(self, profile_cuda: bool, location: str) -> SectionHandle:
        table = self.cuda_handles if profile_cuda else self.cpu_handles
        found = table.get(OVERFLOW_SECTION)
        if found is not None:
            return found
        section = self.sections.get(OVERFLOW_SECTION)
        if section is None:
            section = CustomSection(
                OVERFLOW_SECTION,
                location,
                max_elapseds_len=self._capacity,
                profiling_interval=self._interval,
            )
            self.sections[OVERFLOW_SECTION] = section
        h = SectionHandle(section, self._backend if profile_cuda else None, self._guard)
        table[OVERFLOW_SECTION] = h
        return h

    def set_profiling_interval(self, interval: int) -> None:
        """Time every ``interval``-th entry from now on (runtime control): each section
        reads its own attribute on entry, so the hot path is unchanged."""
        with self._lock:
            self._interval = interval
            for section in self.sections.values():
                section.profiling_interval = interval

    def drain(self) -> list[SectionSummary]:
        """Summaries of every section entered (and timed) in this window; resets them."""
        out = []
        for name, section in list(self.sections.items()):
            dropped = section.times.dropped
            samples = section.times.drain_list()
            wait, section.wait_ns = section.wait_ns, 0
            if not samples:
                continue
            mn, mx, med, mean, std, num = summarize_list(samples)
            work = med
            if wait:
                # Same places as the samples (both rings are written at one index).
                waits = np.array(section.waits[: len(samples)], dtype=np.int64)
                works = np.sort(np.array(samples, np.int64) - waits)
                # The median as the section's own (torch's lower middle): with no
                # waits the work is exactly the section's MED.
                work = max(0.0, float(works[(len(works) - 1) // 2]))
            out.append(
                SectionSummary(name, mn, mx, med, mean, std, num, dropped, float(wait), work)
            )
        return out
