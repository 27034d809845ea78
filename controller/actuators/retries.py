"""Bounded retries around one read-modify-write step of an actuator.

Every step re-reads the object before it writes, so repeating a step is safe: a 409
(someone changed the object) re-reads at once; 5xx, timeouts and connection failures
back off exponentially; a 4xx that retrying cannot fix gives up. When the attempts are
spent the caller gets `RetryLater` and nothing is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from pacekeeper.controller.actuators.errors import (
    API_CONFLICT,
    API_REFUSED,
    API_THROTTLED,
    API_UNAVAILABLE,
    GiveUp,
    RetryLater,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

_TRANSIENT_STATUSES = frozenset({500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetrySettings:
    attempts: int = 4
    """API attempts per actuator call, the first included."""
    backoff_base_s: float = 0.2
    backoff_max_s: float = 5.0
    request_timeout_s: float = 10.0
    retry_later_s: float = 15.0
    """Delay suggested to the caller once the attempts are spent."""
    pdb_backoff_base_s: float = 10.0
    pdb_backoff_max_s: float = 300.0
    """Backoff of rank restarts that a PodDisruptionBudget refuses, by caller attempt."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts={self.attempts} must be >= 1")
        for name in ("backoff_base_s", "backoff_max_s", "request_timeout_s", "retry_later_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")


def backoff_delay(attempt: int, base_s: float, max_s: float) -> float:
    """`base_s * 2**attempt`, capped at `max_s` (attempt 0 waits `base_s`)."""
    return float(min(max_s, base_s * (2 ** max(0, attempt))))


class Failure(StrEnum):
    CONFLICT = "conflict"
    NOT_FOUND = "notFound"
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    FATAL = "fatal"


def status_of(exc: BaseException) -> int | None:
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        return int(exc.status) if exc.status is not None else None
    return None


def server_message(exc: BaseException, limit: int = 500) -> str | None:
    """The ``message`` of the Status the API server answered with, else its body text."""
    import json

    body: Any = getattr(exc, "body", None)
    if not body:
        return None
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(body)
    except (TypeError, ValueError):
        return str(body)[:limit]
    if isinstance(parsed, dict) and parsed.get("message"):
        return str(parsed["message"])[:limit]
    return str(body)[:limit]


def classify(exc: BaseException) -> Failure | None:
    """How to treat a failed API call; `None` for errors that are not the API's."""
    import urllib3

    status = status_of(exc)
    if status is not None:
        if status == 409:
            return Failure.CONFLICT
        if status == 404:
            return Failure.NOT_FOUND
        if status == 429:
            return Failure.THROTTLED
        if status in _TRANSIENT_STATUSES:
            return Failure.TRANSIENT
        return Failure.FATAL
    if isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError):
        return Failure.TRANSIENT
    return None


def retry_after_s(exc: BaseException) -> float | None:
    headers: Any = getattr(exc, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def retrying(
    step: Callable[[], T],
    *,
    settings: RetrySettings,
    sleep: Callable[[float], None],
    what: str,
    unanswered: Callable[[], bool] = lambda: False,
) -> T:
    """Run `step` until it returns, within `settings.attempts`; see the module docstring.

    `unanswered()` true means a write of this call got no answer and may have landed:
    then one more step runs past the attempts, so that its read can confirm the write
    instead of leaving the next call to find the change done with no record of who did it.
    """
    last: BaseException | None = None
    last_failure: Failure | None = None
    for attempt in range(settings.attempts):
        try:
            return step()
        except Exception as exc:
            failure = classify(exc)
            if failure is None or failure is Failure.NOT_FOUND:
                raise
            if failure is Failure.FATAL:
                status, message = status_of(exc), server_message(exc)
                raise GiveUp(
                    API_REFUSED, f"{what}: HTTP {status}: {message}" if message else
                    f"{what}: HTTP {status}", http_status=status, server_message=message,
                ) from exc  # fmt: skip
            last, last_failure = exc, failure
            final = attempt == settings.attempts - 1
            if failure is Failure.CONFLICT:
                logger.info("conflict, re-reading", extra={"what": what, "attempt": attempt})
                continue
            delay = retry_after_s(exc)
            if delay is None:
                delay = backoff_delay(attempt, settings.backoff_base_s, settings.backoff_max_s)
            logger.warning(
                "API call failed, retrying",
                extra={"what": what, "attempt": attempt, "failure": str(failure), "delay_s": delay},
            )
            if not final:
                sleep(delay)
    if unanswered():
        try:
            return step()
        except Exception:
            logger.warning("unanswered write left unconfirmed", extra={"what": what})
    reason = {
        Failure.CONFLICT: API_CONFLICT,
        Failure.THROTTLED: API_THROTTLED,
    }.get(last_failure or Failure.TRANSIENT, API_UNAVAILABLE)
    raise RetryLater(settings.retry_later_s, reason, f"{what}: {last!r}") from last
