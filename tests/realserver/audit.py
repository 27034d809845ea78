"""kube-apiserver's audit log, read back: what each identity asked and what it was answered.

The real-server tier counts writes and refusals from the server's own record rather
than from the client's logs: a write the operator never logged, or a 403 it swallowed,
shows up here all the same. `servers.py` says which requests are audited (those of
ServiceAccount identities) and at which level (node patches with their bodies).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One completed request (stage ResponseComplete)."""

    raw: Mapping[str, Any]

    @property
    def user(self) -> str:
        return str((self.raw.get("user") or {}).get("username", ""))

    @property
    def verb(self) -> str:
        return str(self.raw.get("verb", ""))

    @property
    def code(self) -> int | None:
        code = (self.raw.get("responseStatus") or {}).get("code")
        return None if code is None else int(code)

    def _ref(self, key: str) -> str | None:
        value = (self.raw.get("objectRef") or {}).get(key)
        return None if value is None else str(value)

    @property
    def resource(self) -> str | None:
        return self._ref("resource")

    @property
    def subresource(self) -> str | None:
        return self._ref("subresource")

    @property
    def namespace(self) -> str | None:
        return self._ref("namespace")

    @property
    def name(self) -> str | None:
        return self._ref("name")

    @property
    def request_object(self) -> Mapping[str, Any]:
        """The request body, where the audit policy keeps it (node patches)."""
        return self.raw.get("requestObject") or {}

    def describe(self) -> str:
        where = "/".join(p for p in (self.namespace, self.resource, self.name) if p)
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.user} {self.verb} {where}{sub} -> {self.code}"


class AuditLog:
    """The audit log file; offsets (`mark`) let a test read only its own requests."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """The current end of the log: pass it as `since` to see only what follows."""
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _lines(self, since: int) -> Iterator[bytes]:
        try:
            with self.path.open("rb") as f:
                f.seek(since)
                data = f.read()
        except FileNotFoundError:
            return
        # The server may be half-way through a line: only whole lines count.
        yield from data[: data.rfind(b"\n") + 1].splitlines()

    def events(self, since: int = 0) -> list[AuditEvent]:
        out = []
        for line in self._lines(since):
            raw = json.loads(line)
            if raw.get("stage") == "ResponseComplete":
                out.append(AuditEvent(raw))
        return out

    def find(
        self,
        since: int = 0,
        *,
        user: str | None = None,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        code: int | None = None,
    ) -> list[AuditEvent]:
        """Completed requests matching every filter given (None: any)."""
        wanted = {
            "user": user,
            "verb": verb,
            "resource": resource,
            "subresource": subresource,
            "name": name,
            "code": code,
        }
        return [
            e
            for e in self.events(since)
            if all(v is None or getattr(e, k) == v for k, v in wanted.items())
        ]
