"""The request log: every request the server saw, with the status it answered."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RequestRecord:
    """One request. `status` is filled in when the answer is ready (200 for watches)."""

    id: int
    method: str
    path: str
    query: dict[str, str]
    verb: str | None
    group: str | None
    version: str | None
    plural: str | None
    namespace: str | None
    name: str | None
    subresource: str | None
    body: Any
    content_type: str | None
    fault: bool = False
    status: int | None = field(default=None)
    at: float = field(default_factory=time.monotonic)
    """When the request arrived (CLOCK_MONOTONIC, comparable across local processes)."""


class History:
    """Thread-safe, append-only; `find` filters on any record field given as a keyword."""

    def __init__(self) -> None:
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    @property
    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def find(self, **criteria: Any) -> list[RequestRecord]:
        unknown = set(criteria) - set(RequestRecord.__dataclass_fields__)
        if unknown:
            raise TypeError(f"RequestRecord has no fields {sorted(unknown)}")
        return [
            record
            for record in self.records
            if all(getattr(record, key) == value for key, value in criteria.items())
        ]

    def writes(self) -> list[RequestRecord]:
        """Requests that change state (everything but get/list/watch)."""
        return [r for r in self.records if r.verb not in {None, "get", "list", "watch"}]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
