"""Kernel timing with CUDA events: GPU time of each section, no per-kernel detail.

Used where CUPTI is missing or held by another tool. Each section entry records an
event pair on the current stream; ``collect`` reads the pairs that completed. The
GPU score then compares whole sections' GPU time (one pseudo-kernel ``section:<name>``
per outermost section), which includes gaps between kernels on that stream.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from .backend import KernelStat, KernelWindow
from .kernel_stats import RingStats

logger = logging.getLogger(__name__)

SECTION_KEY_PREFIX = "section:"


class EventsBackend:
    name = "events"

    def __init__(self, *, max_pending: int = 65536, ring: int = 256, torch_module: Any = None):
        if torch_module is None:
            import torch as torch_module
        self._torch = torch_module
        self._max_pending = max_pending
        self._free: list[Any] = []
        self._stack: list[tuple[str, Any, bool]] = []
        self._pending: deque[tuple[int, Any, Any, bool]] = deque()
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._outer = RingStats(ring)
        self._all = RingStats(ring)
        self._dropped = 0
        self._failures: dict[str, int] = {}

    def _event(self) -> Any:
        if self._free:
            return self._free.pop()
        return self._torch.cuda.Event(enable_timing=True)

    def start(self, section: str) -> None:
        try:
            ev = self._event()
            ev.record()
            self._stack.append((section, ev, not self._stack))
        except Exception as e:
            self._fail("start", e)

    def stop(self, section: str) -> None:
        try:
            if not self._stack:
                return
            name, ev0, outer = self._stack.pop()
            ev1 = self._event()
            ev1.record()
            if len(self._pending) >= self._max_pending:
                self._dropped += 1
                _, a, b, _ = self._pending.popleft()
                self._free += (a, b)
            sid = self._ids.get(name)
            if sid is None:
                sid = self._ids[name] = len(self._names)
                self._names.append(name)
            self._pending.append((sid, ev0, ev1, outer))
        except Exception as e:
            self._fail("stop", e)

    def collect(self) -> KernelWindow:
        try:
            return self._collect()
        except Exception as e:
            self._fail("collect", e)
            return KernelWindow()

    def _collect(self) -> KernelWindow:
        import numpy as np

        done_sid: list[int] = []
        done_ns: list[float] = []
        done_outer: list[bool] = []
        while self._pending:
            sid, ev0, ev1, outer = self._pending[0]
            if not ev1.query():
                break  # later pairs were recorded later on the same streams
            self._pending.popleft()
            done_sid.append(sid)
            done_ns.append(ev0.elapsed_time(ev1) * 1e6)
            done_outer.append(outer)
            self._free += (ev0, ev1)
        sids = np.asarray(done_sid, np.int64)
        ns = np.asarray(done_ns, np.float64)
        is_outer = np.asarray(done_outer, np.bool_)
        self._all.add(sids, ns)
        self._outer.add(sids[is_outer], ns[is_outer])
        kernels = {
            SECTION_KEY_PREFIX + self._names[s]: st for s, st in self._outer.snapshot().items()
        }
        sections: dict[str, dict[str, KernelStat]] = {
            self._names[s]: {SECTION_KEY_PREFIX + self._names[s]: st}
            for s, st in self._all.snapshot().items()
        }
        window = KernelWindow(
            kernels=kernels,
            sections=sections,
            dropped_records=self._dropped,
            records=int(is_outer.sum()),
        )
        self._outer.reset()
        self._all.reset()
        self._dropped = 0
        return window

    def shutdown(self) -> None:
        self._pending.clear()
        self._free.clear()
        self._stack.clear()

    def _fail(self, where: str, error: BaseException) -> None:
        n = self._failures.get(where, 0) + 1
        self._failures[where] = n
        if n == 1:
            logger.warning(
                "event timing failed; continuing without it here",
                extra={"where": where, "error": repr(error)},
            )
