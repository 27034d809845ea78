"""How the operator stops: the stop request, the signals that raise it, the bound it keeps.

Kubernetes sends SIGTERM and, after the pod's ``terminationGracePeriodSeconds`` (30 s: the
chart keeps the Kubernetes default), SIGKILL. A stop that waits on the API server cannot
keep that promise when the server does not answer, so blocking API work runs on daemon
threads that a stop may leave behind (``BlockingCalls``), and a watchdog ends the process
at ``STOP_TIMEOUT_S`` whatever still hangs. Kept apart from ``operator.py`` because the
same rules hold before Kopf starts (waiting for the Lease), inside Kopf's loop and after
it, and because only the process owner (the CLI) may install signal handlers and exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

GRACE_S = 30.0
"""Kubernetes' default terminationGracePeriodSeconds, which the chart's Deployment keeps."""
STOP_TIMEOUT_S = 20.0
"""From the stop request to the process's exit, at most (the watchdog's bound)."""
RECONCILE_DRAIN_S = 5.0
"""How long a stop waits for a reconcile in flight before it leaves it behind."""
EXIT_STOP_OVERRAN = 1
"""The watchdog's exit code: a stop that had to abandon the process is not a clean one."""

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Whether, why and since when the operator is stopping.

    ``flag`` is the ``threading.Event`` Kopf watches as its ``stop_flag``; SIGTERM,
    SIGINT, a lost Lease or the end of Kopf's loop set it through ``request``. A flag
    set from outside (a test, an embedding program) counts from when the operator
    first notices it.
    """

    def __init__(self, flag: threading.Event | None = None) -> None:
        self.flag = flag or threading.Event()
        self.reason: str | None = None
        self._at: float | None = None
        self._watchdog_s: float | None = None
        self._signalled = False

    def is_set(self) -> bool:
        return self.flag.is_set()

    def request(self, reason: str) -> None:
        if self._at is None:
            self._at = time.monotonic()
            self.reason = reason
            logger.info("stop requested", extra={"reason": reason})
            if self._watchdog_s is not None:
                timer = threading.Timer(self._watchdog_s, self._overran)
                timer.daemon = True
                timer.start()
        self.flag.set()

    def elapsed_s(self) -> float:
        if self._at is None:
            self._at = time.monotonic()
        return time.monotonic() - self._at

    def left_s(self, budget_s: float) -> float:
        """What is left of ``budget_s`` counted from the stop request."""
        return max(0.0, budget_s - self.elapsed_s())

    # --- signals (the process owner only) ---------------------------------------------

    def handle_signals(self, *, watchdog_s: float = STOP_TIMEOUT_S) -> None:
        """Own SIGTERM and SIGINT for this process: the first asks for a stop and arms the
        watchdog, a second one ends the process at once. Call from the main thread."""
        self._watchdog_s = watchdog_s
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal_frame)

    def restore_signal_handlers(self) -> None:
        """Closing an event loop resets the signals it handled to their defaults (SIGTERM
        would kill again): put ours back."""
        if self._watchdog_s is not None:
            self.handle_signals(watchdog_s=self._watchdog_s)

    def take_over_loop_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        """Kopf adds its own SIGINT/SIGTERM handlers to the loop it runs in. Ours replace
        them, so a signal stops Kopf through the same flag as everything else (Kopf then
        also never arms its own SIGKILL, which it keeps for signal stops, 10 minutes on)."""
        if self._watchdog_s is None:
            return
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal_frame(self, signum: int, _frame: FrameType | None) -> None:
        self._on_signal(signum)

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._signalled:
            logger.warning("second stop signal: exiting now", extra={"signal": name})
            _exit_now(128 + signum)
        self._signalled = True
        self.request(name)

    def _overran(self) -> None:
        logger.error(
            "stop overran its bound: exiting now",
            extra={"bound_s": self._watchdog_s, "reason": self.reason},
        )
        _exit_now(EXIT_STOP_OVERRAN)


def _exit_now(code: int) -> None:
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(code)


class BlockingCalls:
    """Blocking API work off the event loop, on daemon threads a stop may leave behind.

    ``asyncio.to_thread`` would use the loop's default executor, which ``asyncio.run``
    joins on its way out and the interpreter joins again at exit: one request to a
    server that never answers would hold the process past SIGKILL.
    """

    def __init__(self) -> None:
        self._guarded = 0
        self._changed = threading.Condition()

    async def run(self, fn: Callable[..., T], *args: Any, guarded: bool = False) -> T:
        """Run ``fn(*args)`` on a daemon thread and await its result. ``guarded``: work
        the Lease protects (a reconcile, which may write); a stop waits for it a while
        and releases the Lease only when none is left (``wait_guarded``)."""
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        context = contextvars.copy_context()
        if guarded:
            with self._changed:
                self._guarded += 1

        def work() -> None:
            try:
                if done.set_running_or_notify_cancel():
                    try:
                        done.set_result(context.run(fn, *args))
                    except BaseException as exc:  # handed to the awaiting task
                        done.set_exception(exc)
            finally:
                if guarded:
                    with self._changed:
                        self._guarded -= 1
                        self._changed.notify_all()

        name = f"pacekeeper-{getattr(fn, '__name__', 'call')}"
        threading.Thread(target=work, name=name, daemon=True).start()
        return await asyncio.wrap_future(done)

    def wait_guarded(self, timeout_s: float) -> bool:
        """True when no guarded call is in flight, waiting up to ``timeout_s`` for that."""
        with self._changed:
            return self._changed.wait_for(lambda: self._guarded == 0, timeout_s)
