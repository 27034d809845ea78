"""Fault injection: answer the next N matching requests with an error and/or a delay.

Rules are added from the test thread and consumed on the server's event loop, so the
book takes a lock. A rule matches on the HTTP method, the Kubernetes verb, a regular
expression searched in the path, and the resource's plural and subresource.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestShape:
    """What a fault rule can match on; built by the server from each request."""

    method: str
    verb: str | None
    path: str
    plural: str | None
    subresource: str | None


@dataclass(slots=True)
class Fault:
    """One rule. `status=None` with a delay serves the request normally after the delay.

    A delay longer than the client's timeout is how a test makes a request time out:
    with `status=None` the write still happens after the client gave up, which is the
    case idempotent callers must survive.
    """

    status: int | None = 500
    delay_s: float = 0.0
    times: int = 1
    skip: int = 0
    """Let this many matching requests through first (fault the 3rd patch: skip=2)."""
    method: str | None = None
    verb: str | None = None
    path: str | None = None
    plural: str | None = None
    subresource: str | None = None
    reason: str | None = None
    message: str = "injected by the test harness"
    retry_after_s: int | None = None
    before: Callable[[Any], None] | None = None
    """Run on the server's loop, with the `ApiServer`, just before the request is served:
    another actor's write landing between a client's read and its write (a real race,
    answered by real resourceVersion checks rather than an injected status)."""
    fired: int = field(default=0, init=False)
    skipped: int = field(default=0, init=False)

    def matches(self, shape: RequestShape) -> bool:
        return (
            (self.method is None or self.method.upper() == shape.method.upper())
            and (self.verb is None or self.verb == shape.verb)
            and (self.path is None or re.search(self.path, shape.path) is not None)
            and (self.plural is None or self.plural == shape.plural)
            and (self.subresource is None or self.subresource == shape.subresource)
        )

    @property
    def exhausted(self) -> bool:
        return self.fired >= self.times


class FaultBook:
    """Rules in the order added; the first live match fires and counts down."""

    def __init__(self) -> None:
        self._rules: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._rules.append(fault)
        return fault

    def take(self, shape: RequestShape) -> Fault | None:
        with self._lock:
            for rule in self._rules:
                if not rule.exhausted and rule.matches(shape):
                    if rule.skipped < rule.skip:
                        rule.skipped += 1
                        continue
                    rule.fired += 1
                    return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def pending(self) -> list[Fault]:
        with self._lock:
            return [rule for rule in self._rules if not rule.exhausted]
