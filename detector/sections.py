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
import threading
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from .timings import RingBuffer, summarize_ns

if TYPE_CHECKING:
    from pacekeeper.cupti_ext import KernelTimingBackend

    from .guard import Guard

P = ParamSpec("P")
R = TypeVar("R")

OVERFLOW_SECTION = "<other>"
"""Where entries of names beyond the section cap are timed (memory stays bounded)."""

_NOT_TIMED = -1


class CustomSection:
    """One user-defined section: its name, where it was first entered, and its CPU times.

    Mirrors NVRx's ``CustomSection`` fields (``name``, ``location``, ``total_entry_cnt``,
    ``cpu_elapsed_times`` in milliseconds) over a bounded ring of nanosecond samples.
    """

    __slots__ = ("location", "name", "profiling_interval", "times", "total_entry_cnt")

    def __init__(
        self, name: str, location: str, *, capacity: int = 8192, profiling_interval: int = 1
    ) -> None:
        self.name = name
        self.location = location
        self.total_entry_cnt = 0
        self.profiling_interval = profiling_interval
        self.times = RingBuffer(capacity)

    @property
    def max_elapseds_len(self) -> int:
        return self.times.capacity

    @property
    def cpu_elapsed_times(self) -> list[float]:
        """Times kept in this window, in milliseconds (NVRx's unit)."""
        n = len(self.times)
        return [t * 1e-6 for t in self.times._buf[:n]]

    def __repr__(self) -> str:
        return (
            f"CustomSection(name={self.name!r}, location={self.location!r}, "
            f"total_entry_cnt={self.total_entry_cnt})"
        )


class SectionHandle:
    """The context manager ``detection_section`` returns; cached and reused per entry."""

    __slots__ = ("_backend", "_guard", "_starts", "name", "section")

    def __init__(
        self, section: CustomSection, backend: KernelTimingBackend | None, guard: Guard
    ) -> None:
        self.section = section
        self.name = section.name
        self._backend = backend
        self._guard = guard
        self._starts: list[int] = []

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
            self._starts.append(_NOT_TIMED)
            return self
        if self._backend is not None:
            try:
                self._backend.start(self.name)
            except Exception as exc:
                self._guard.record("backend.start", exc)
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
        if t0 == _NOT_TIMED:
            return
        # A section that raised is not a timing sample (NVRx drops it too).
        if exc_type is None:
            ring = self.section.times
            ring._buf[ring.count & ring._mask] = t1 - t0
            ring.count += 1
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
                    name, location, capacity=self._capacity, profiling_interval=self._interval
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
                capacity=self._capacity,
                profiling_interval=self._interval,
            )
            self.sections[OVERFLOW_SECTION] = section
        h = SectionHandle(section, self._backend if profile_cuda else None, self._guard)
        table[OVERFLOW_SECTION] = h
        return h

    def drain(self) -> list[SectionSummary]:
        """Summaries of every section entered (and timed) in this window; resets them."""
        out = []
        for name, section in list(self.sections.items()):
            dropped = section.times.dropped
            samples = section.times.drain()
            if samples.size == 0:
                continue
            mn, mx, med, mean, std, num = summarize_ns(samples)
            out.append(SectionSummary(name, mn, mx, med, mean, std, num, dropped))
        return out
