"""Wait for a condition that another thread (kopf, a controller) makes true."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None], *, timeout_s: float = 10.0, poll_s: float = 0.02
) -> T:
    """Return the first truthy result of `probe`; fail with AssertionError at the deadline."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout_s} s: {probe!r}")
        pause.wait(poll_s)
