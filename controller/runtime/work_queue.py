"""The operator's per-job work queue: due times, at most one job in flight per key.

Like client-go's workqueue: a job is queued at most once (enqueued twice, it keeps the
earlier time, so a burst of events is one reconcile); a job handed to a worker is *in
flight* until the worker says ``done``, and is never handed out again meanwhile. An event
for it in that time marks it to run again right after ``done``, so the change is seen by
a reconcile that starts after it, never by two reconciles at once. Separate from
``operator.py`` because it is the one piece the workers share, with rules of its own
that tests pin down without Kopf.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable

from pacekeeper.controller.core.ids import JobKey


class WorkQueue:
    """Due times per job for several workers on one event loop (not thread-safe)."""

    def __init__(self, loop_time: Callable[[], float]) -> None:
        self._due: dict[JobKey, float] = {}
        self._heap: list[tuple[float, int, JobKey]] = []
        """(due, tie, key); an entry whose time is not ``_due[key]`` is stale."""
        self._tie = itertools.count()
        self._active: set[JobKey] = set()
        self._again: dict[JobKey, float] = {}
        """Jobs asked for while in flight: when, once ``done``."""
        self._wake = asyncio.Event()
        self._time = loop_time

    def add(self, key: JobKey, delay_s: float = 0.0) -> None:
        when = self._time() + max(0.0, delay_s)
        if key in self._active:
            self._again[key] = min(when, self._again.get(key, when))
            return
        self._put(key, when)

    def _put(self, key: JobKey, when: float) -> None:
        if key not in self._due or when < self._due[key]:
            self._due[key] = when
            heapq.heappush(self._heap, (when, next(self._tie), key))
            self._wake.set()

    def forget(self, key: JobKey) -> None:
        """Drop a queued job (one in flight finishes; nothing runs it again)."""
        self._due.pop(key, None)
        self._again.pop(key, None)

    def done(self, key: JobKey) -> None:
        """The worker that took ``key`` is through with it."""
        self._active.discard(key)
        again = self._again.pop(key, None)
        if again is not None:
            self._put(key, again)

    def __len__(self) -> int:
        """Jobs waiting (in flight ones not counted unless asked for again)."""
        return len(self._due) + len(self._again)

    def in_flight(self) -> frozenset[JobKey]:
        return frozenset(self._active)

    def backlog(self) -> tuple[int, float]:
        """(jobs due by now that no worker has taken, seconds the longest of them waited).
        Timers not yet due are not backlog. Safe from another thread (the metrics
        server's): the due times are copied in one step under the GIL."""
        now = self._time()
        waits = [now - when for when in list(self._due.values()) if when <= now]
        return len(waits), max(waits, default=0.0)

    async def next(self) -> JobKey:
        """The job due first, once due; it is in flight until ``done``."""
        while True:
            now = self._time()
            timeout: float | None = None
            while self._heap:
                when, _, key = self._heap[0]
                if self._due.get(key) != when:
                    heapq.heappop(self._heap)  # stale: re-timed or forgotten
                    continue
                if when > now:
                    timeout = when - now
                    break
                heapq.heappop(self._heap)
                del self._due[key]
                self._active.add(key)
                return key
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
