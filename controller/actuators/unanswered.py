"""Writes that got no answer, remembered across calls until a read settles them.

A write whose answer is lost (client timeout, 504) may have landed. The read that
follows settles it; when that read fails too and the caller is told to retry later,
the next call must still know the write was ours, or it finds the change done with no
Event and no claim to it. The memory lives as long as the actuator object (the
operator's process); it is bounded, and an entry goes as soon as a read settles it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

_DEFAULT_CAPACITY = 1024


class UnansweredWrites:
    """Shared by the operator's concurrent reconciles: every access takes the lock."""

    def __init__(self, capacity: int = _DEFAULT_CAPACITY) -> None:
        self._entries: OrderedDict[Hashable, dict[str, Any]] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def remember(self, key: Hashable, before: dict[str, Any]) -> None:
        """`before`: the object as read just before the unanswered write."""
        with self._lock:
            self._entries[key] = before
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def get(self, key: Hashable) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.get(key)

    def settle(self, key: Hashable) -> dict[str, Any] | None:
        with self._lock:
            return self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries
