"""Who may write which job's reports on the ScoreBoard: tokens bound to a job at registration.

Ray does not tell an actor method who called it, so the board cannot check a publisher on
each call. A job proves once which job it is, by registering an actor that Ray records as
the job's own (``ray_badge.py`` checks it against the GCS actor table before ``register``
is called), and gets a random token in return. After that, every publish must carry the
job's current token, and the report inside must be for that job. Registering again (a
restarted rank 0) replaces the token: the old one stops working at once.

Tokens live in the board's memory only, never in the GCS store that any driver can read,
so a board that restarted knows none: publishers get ``UnknownToken`` and register again.
Pure (no Ray); ``secrets`` makes the tokens.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..score_report import ReportRejected

TOKEN_BYTES = 32
DEFAULT_MAX_REGISTRATIONS = 4096


class PublishRefused(ReportRejected):
    """A publish or registration the board refuses for who sent it, not for its content:
    counted, never stored, never retried as it is."""


class UnknownToken(PublishRefused):
    """The token is not any job's current one (the board restarted, or the job registered
    again from another process): the publisher should register again, then retry."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True)
class Registration:
    job: str
    badge: str
    """The registering actor's id (hex): which process of the job holds the token."""
    registered_at: float
    digest: bytes
    """SHA-256 of the token: the token itself is handed out, not kept."""

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "badge": self.badge, "registeredAt": self.registered_at}


class PublishTokens:
    """The current token of each registered job (bounded: the oldest registration goes
    first, and its job simply registers again)."""

    def __init__(
        self,
        *,
        max_registrations: int = DEFAULT_MAX_REGISTRATIONS,
        new_token: Callable[[], str] = lambda: secrets.token_urlsafe(TOKEN_BYTES),
    ) -> None:
        if max_registrations < 1:
            raise ValueError(f"max_registrations must be >= 1, got {max_registrations!r}")
        self.max_registrations = max_registrations
        self._new_token = new_token
        self._by_job: collections.OrderedDict[str, Registration] = collections.OrderedDict()
        self._job_of_digest: dict[bytes, str] = {}

    def register(self, job: str, badge: str, *, now: float) -> str:
        """A new token for ``job`` (the caller has proved the job); replaces the old one."""
        old = self._by_job.pop(job, None)
        if old is not None:
            del self._job_of_digest[old.digest]
        while len(self._by_job) >= self.max_registrations:
            _, gone = self._by_job.popitem(last=False)
            del self._job_of_digest[gone.digest]
        token = self._new_token()
        digest = _digest(token)
        self._by_job[job] = Registration(job, badge, now, digest)
        self._job_of_digest[digest] = job
        return token

    def job_of(self, token: object) -> str:
        """The job whose current token this is. Cheap, before the report is parsed, so a
        caller without a token costs the board no parsing."""
        if not isinstance(token, str) or not token:
            raise PublishRefused(
                "publish needs the token that ScoreBoard.register returned "
                "(a reporter older than the board sends none)"
            )
        if ":" in token or "/" in token:  # what an older reporter sends: a job key
            raise PublishRefused(
                f"publish got a job key ({token[:80]!r}) where the registration token "
                "goes: this reporter is older than the board and cannot publish to it"
            )
        job = self._job_of_digest.get(_digest(token))
        if job is None:
            raise UnknownToken("the token is not a registered job's current one")
        return job

    def check(self, job: str, token: object) -> None:
        """Raises unless ``token`` is ``job``'s current token (compared in constant time)."""
        holder = self.job_of(token)
        reg = self._by_job.get(job)
        assert isinstance(token, str)  # job_of refused anything else
        if reg is None or not hmac.compare_digest(_digest(token), reg.digest):
            raise PublishRefused(
                f"job identity mismatch: the token is registered for {holder!r}, "
                f"report.job is {job!r}"
            )

    def registrations(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self._by_job.values()]

    def __len__(self) -> int:
        return len(self._by_job)
