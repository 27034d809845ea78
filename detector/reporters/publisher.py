"""Background delivery of score reports: the training thread only appends to a queue.

``Publisher.submit`` never blocks and never raises. A daemon thread sends the oldest
queued report through a ``Sink``; a failure is retried with capped exponential backoff
and jitter while newer reports wait behind it (order is kept, so the board sees
sequences in order). When the queue is full the oldest report is dropped and counted:
the newest scores matter most to the controller.

A ``ReportRejected`` from the sink is permanent (the receiver refused the content):
that report is dropped, counted and logged; retrying it would only repeat the refusal.
The refusal's reason is in the printed message (a default handler drops ``extra``), once
per cause per ``LogThrottle`` interval: the same refusal repeats with every report.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..score_report import ReportRejected, ScoreReport
from .backoff import Backoff
from .log_throttle import LogThrottle, message_cause, more_since

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """Where reports go. ``send`` raises ``ReportRejected`` for content the receiver
    refuses, anything else for a failure worth retrying."""

    name: str

    def send(self, report: ScoreReport) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PublisherStats:
    """A snapshot of the publisher's counters (monotonic since start)."""

    submitted: int
    published: int
    dropped_oldest: int
    rejected: int
    send_errors: int
    queue_depth: int
    errors_by_cause: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None
    last_published_sequence: int | None = None
    consecutive_failures: int = 0


class Publisher:
    """Delivers reports through ``sink`` from a daemon thread; see the module docstring."""

    def __init__(
        self,
        sink: Sink,
        *,
        max_queue: int = 64,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        log_throttle: LogThrottle | None = None,
    ) -> None:
        if max_queue < 1:
            raise ValueError(f"reporter max_queue must be >= 1, got {max_queue!r}")
        self.sink = sink
        self.max_queue = max_queue
        self._backoff = backoff or Backoff()
        self._rng = rng or random.Random()
        self._clock = clock
        self._refusal_log = log_throttle or LogThrottle()
        self._queue: collections.deque[ScoreReport] = collections.deque()
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._submitted = 0
        self._published = 0
        self._dropped = 0
        self._rejected = 0
        self._send_errors = 0
        self._errors_by_cause: dict[str, int] = {}
        self._last_error: str | None = None
        self._last_sequence: int | None = None
        self._failures = 0
        self._in_flight = False

    # --- training-thread side ---------------------------------------------------

    def submit(self, report: ScoreReport) -> None:
        """Queue ``report`` for delivery; O(1), never blocks on I/O, never raises."""
        try:
            with self._cond:
                if self._closing:
                    self._dropped += 1
                    return
                if len(self._queue) >= self.max_queue:
                    self._queue.popleft()
                    self._dropped += 1
                    if self._dropped == 1 or self._dropped % 100 == 0:
                        logger.warning(
                            "report queue full, dropped oldest",
                            extra={"sink": self.sink.name, "dropped": self._dropped},
                        )
                self._queue.append(report)
                self._submitted += 1
                self._cond.notify()
            if self._thread is None:
                self._start()
        except Exception:  # the training loop must never see a reporter failure
            logger.exception("report submit failed", extra={"sink": self.sink.name})

    __call__ = submit

    def stats(self) -> PublisherStats:
        with self._cond:
            return PublisherStats(
                submitted=self._submitted,
                published=self._published,
                dropped_oldest=self._dropped,
                rejected=self._rejected,
                send_errors=self._send_errors,
                queue_depth=len(self._queue),
                errors_by_cause=dict(self._errors_by_cause),
                last_error=self._last_error,
                last_published_sequence=self._last_sequence,
                consecutive_failures=self._failures,
            )

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued report was handled; False on timeout."""
        deadline = self._clock() + timeout_s
        with self._cond:
            while self._queue or self._in_flight:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout_s: float = 2.0) -> None:
        """Try to deliver what is queued within ``timeout_s``, then stop the thread."""
        if self._thread is not None:
            self.flush(timeout_s)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=max(timeout_s, 0.1))
        try:
            self.sink.close()
        except Exception:
            logger.debug("sink close failed", exc_info=True, extra={"sink": self.sink.name})

    # --- delivery thread --------------------------------------------------------

    def _start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            # Started on first use, not in __init__: a fork between the two would
            # leave the child a publisher without a thread.
            self._thread = threading.Thread(
                target=self._run, name=f"pacekeeper-reporter-{self.sink.name}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        attempt = 0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                report = self._queue[0]
                self._in_flight = True
            outcome = self._send(report)
            with self._cond:
                self._in_flight = False
                if outcome == "retry":
                    attempt += 1
                    # New submissions notify the condition too; they must not cut the
                    # backoff short, only close() may.
                    until = self._clock() + self._backoff.delay_s(attempt, self._rng)
                    while not self._closing and (left := until - self._clock()) > 0:
                        self._cond.wait(left)
                    if self._closing:
                        self._cond.notify_all()
                        return
                    continue
                attempt = 0
                # Drop-oldest may already have removed it while we were sending.
                if self._queue and self._queue[0] is report:
                    self._queue.popleft()
                self._cond.notify_all()

    def _send(self, report: ScoreReport) -> str:
        try:
            self.sink.send(report)
        except ReportRejected as e:
            why = _text(e)
            with self._cond:
                self._rejected += 1
                self._last_error = why
            try:
                self._log_refusal(report, e, why)
            except Exception:  # a log line must not stop the delivery thread
                logger.debug("refusal not logged", exc_info=True)
            return "done"
        except Exception as e:
            cause = failure_cause(e)
            with self._cond:
                self._send_errors += 1
                first = cause not in self._errors_by_cause
                self._errors_by_cause[cause] = self._errors_by_cause.get(cause, 0) + 1
                self._last_error = f"{cause}: {e}"
                self._failures += 1
            # Once per cause at WARNING; repeats at DEBUG so a long outage does not flood.
            log = logger.warning if first else logger.debug
            log(
                "report delivery failed, will retry",
                extra={"sink": self.sink.name, "cause": cause, "error": str(e)},
            )
            return "retry"
        with self._cond:
            recovered = self._failures > 0
            self._published += 1
            self._last_sequence = report.sequence
            self._failures = 0
        if recovered:
            logger.info(
                "report delivery recovered",
                extra={"sink": self.sink.name, "sequence": report.sequence},
            )
        return "done"

    def _log_refusal(self, report: ScoreReport, error: ReportRejected, why: str) -> None:
        extra = {
            "sink": self.sink.name,
            "sequence": report.sequence,
            "job": report.job.key,
            "error": why,
        }
        held_back = self._refusal_log.admit(message_cause(error, why))
        if held_back is None:
            logger.debug("report refused by receiver, dropped: %s", why, extra=extra)
            return
        logger.error(
            "report refused by receiver, dropped: %s (job %s, sequence %d, sink %s)%s",
            why,
            report.job.key,
            report.sequence,
            self.sink.name,
            more_since(held_back),
            extra={**extra, "held_back": held_back},
        )


def _text(error: BaseException) -> str:
    """``str(error)``, or its type when even that fails: the delivery thread must outlive
    whatever a sink raises."""
    try:
        return str(error)
    except Exception:
        return type(error).__name__


def failure_cause(error: BaseException) -> str:
    """A small, stable label for counting failures: the HTTP status when the error has
    one (Kubernetes clients raise a different subclass per status), else the type."""
    status = getattr(error, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return f"HTTP {status}"
    return type(error).__name__
