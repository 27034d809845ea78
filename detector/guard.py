"""Keeps the detector's own failures out of the training loop.

Every entry point that does more than the hot path (report generation, backend calls,
listeners) runs under ``Guard``: a failure is counted as ``internal_errors{where}``,
logged once per cause (where + exception type), and the caller degrades (no report,
no GPU data) instead of raising. Bad *user input* is not an internal failure: it raises
at ``Detector.initialize``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
D = TypeVar("D")


class Guard:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def record(self, where: str, exc: BaseException) -> None:
        """Count a failure at ``where``; log it the first time this cause is seen."""
        cause = (where, type(exc).__qualname__)
        with self._lock:
            self._counts[where] += 1
            first = cause not in self._logged
            self._logged.add(cause)
        if first:
            logger.warning(
                "detector internal error; degrading (logged once per cause)",
                extra={"where": where, "error": repr(exc)},
                exc_info=exc,
            )

    def call(self, where: str, fn: Callable[[], T], default: D) -> T | D:
        """Run ``fn``; on any exception record it and return ``default``."""
        try:
            return fn()
        except Exception as exc:
            self.record(where, exc)
            return default

    def counts(self) -> dict[str, int]:
        """``internal_errors`` by where they happened (a copy)."""
        with self._lock:
            return dict(self._counts)
