"""The ScoreBoard's state and rules, without Ray: validate, deduplicate, bound, query.

The Ray actor (``ray_scoreboard.py``) wraps one ``ScoreBoardCore`` and adds persistence.
Rules:
- Only a registered job writes, and only its own reports: ``register`` (called once the
  actor has checked with Ray which job is registering) returns a token, and ``publish``
  needs the current token of the report's own ``job`` (``publish_tokens.py``). Anything
  else raises ``PublishRefused``, is counted as ``refused`` and changes nothing.
- Every report is validated with ``ScoreReport.from_wire``; a payload over
  ``max_payload_bytes`` is refused before parsing. A refusal raises ``ReportRejected`` and
  changes nothing.
- Delivery is at-least-once (a reporter retries after a timeout whose call may still have
  landed), so a report whose (incarnation, sequence) was already stored is a duplicate:
  acknowledged, not stored twice.
- A job that restarts starts its sequence again at 0 under a new incarnation (a string
  the reporter picks once per process). The new incarnation replaces the old one; a late
  report from an incarnation seen before is stale and ignored. Without an incarnation
  (third-party publishers) a sequence that goes back with a later ``generatedAt`` counts
  as a restart.
- History per job is bounded in reports and in bytes (the newest report is always kept),
  and the number of jobs is bounded; the job updated least recently is evicted first.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ..score_report import ReportRejected, ScoreReport
from .publish_tokens import PublishRefused, PublishTokens

DEFAULT_MAX_HISTORY = 256
DEFAULT_MAX_JOBS = 1024
DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""A 16,384-rank report in full JSON form is ~4.5 MiB; over three times that is a bug."""
DEFAULT_MAX_JOB_BYTES = 64 * 1024 * 1024
"""History of one job, in JSON bytes: ~14 full reports of a 16,384-rank job, all 256 of
a 256-rank one. Keeps one huge job from holding gigabytes in the actor and GCS."""
_PAST_INCARNATIONS = 8


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    NEW_INCARNATION = "new-incarnation"
    DUPLICATE = "duplicate"
    STALE = "stale"
    REFUSED = "refused"
    """Not from the report's own job (no token, another job's, an old one): never stored."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored report with what the board knows about its arrival."""

    job: str
    counter: int
    """Position in this job's history since the board first saw the job; never reused."""
    incarnation: str | None
    sequence: int
    generated_at: datetime
    received_at: float
    wire: dict[str, Any]
    size: int = 0
    """JSON bytes of the report as received (what the byte bound counts)."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "job": self.job,
                "counter": self.counter,
                "incarnation": self.incarnation,
                "sequence": self.sequence,
                "generatedAt": self.generated_at.isoformat(),
                "receivedAt": self.received_at,
                "size": self.size,
                "report": self.wire,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Entry:
        d = json.loads(text)
        return cls(
            job=d["job"],
            counter=int(d["counter"]),
            incarnation=d["incarnation"],
            sequence=int(d["sequence"]),
            generated_at=datetime.fromisoformat(d["generatedAt"]),
            received_at=float(d["receivedAt"]),
            wire=d["report"],
            size=int(d.get("size", 0)),
        )


@dataclass(frozen=True, slots=True)
class PublishResult:
    outcome: Outcome
    job: str
    entry: Entry | None
    evicted_jobs: tuple[str, ...] = ()
    dropped: tuple[Entry, ...] = ()
    """Older entries of this job pushed out by the bounds (the actor deletes their keys)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "job": self.job,
            "counter": None if self.entry is None else self.entry.counter,
        }


class _JobHistory:
    __slots__ = (
        "bytes",
        "entries",
        "incarnation",
        "last_touch",
        "next_counter",
        "past_incarnations",
    )

    def __init__(self) -> None:
        self.entries: collections.deque[Entry] = collections.deque()
        self.bytes = 0
        self.incarnation: str | None = None
        self.past_incarnations: collections.deque[str] = collections.deque(
            maxlen=_PAST_INCARNATIONS
        )
        self.next_counter = 0
        self.last_touch = 0.0


class ScoreBoardCore:
    def __init__(
        self,
        *,
        max_history: int = DEFAULT_MAX_HISTORY,
        max_jobs: int = DEFAULT_MAX_JOBS,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_job_bytes: int = DEFAULT_MAX_JOB_BYTES,
    ) -> None:
        for label, value in (
            ("max_history", max_history),
            ("max_jobs", max_jobs),
            ("max_payload_bytes", max_payload_bytes),
            ("max_job_bytes", max_job_bytes),
        ):
            if value < 1:
                raise ValueError(f"ScoreBoard {label} must be >= 1, got {value!r}")
        self.max_history = max_history
        self.max_jobs = max_jobs
        self.max_payload_bytes = max_payload_bytes
        self.max_job_bytes = max_job_bytes
        self._jobs: dict[str, _JobHistory] = {}
        self.tokens = PublishTokens(max_registrations=4 * max_jobs)
        self.counters: dict[str, int] = {o.value: 0 for o in Outcome} | {
            "rejected": 0,
            "evicted_jobs": 0,
            "registered": 0,
            "registration_refused": 0,
        }

    # --- writes -----------------------------------------------------------------

    def register(self, job: str, badge: str, *, now: float) -> str:
        """The publishing token of ``job``, which the caller has proved (see the module
        docstring); replaces the job's previous token."""
        self.counters["registered"] += 1
        return self.tokens.register(job, badge, now=now)

    def publish(
        self,
        payload: str | bytes | dict[str, Any],
        *,
        token: object,
        incarnation: str | None,
        now: float,
    ) -> PublishResult:
        try:
            self.tokens.job_of(token)  # before parsing: no token, no work
            try:
                report, size = self._validate(payload)
            except ReportRejected:
                self.counters["rejected"] += 1
                raise
            self.tokens.check(report.job.key, token)
        except PublishRefused:
            self.counters[Outcome.REFUSED.value] += 1
            raise
        key = report.job.key
        history = self._jobs.get(key)
        evicted: tuple[str, ...] = ()
        if history is None:
            evicted = self._make_room()
            history = self._jobs[key] = _JobHistory()
        outcome = self._classify(history, report, incarnation)
        self.counters[outcome.value] += 1
        if outcome in (Outcome.DUPLICATE, Outcome.STALE):
            return PublishResult(outcome, key, None, evicted)
        if outcome is Outcome.NEW_INCARNATION and history.incarnation is not None:
            history.past_incarnations.append(history.incarnation)
        history.incarnation = incarnation
        entry = Entry(
            job=key,
            counter=history.next_counter,
            incarnation=incarnation,
            sequence=report.sequence,
            generated_at=report.generated_at,
            received_at=now,
            wire=report.to_wire(),
            size=size,
        )
        history.next_counter += 1
        history.last_touch = now
        dropped = self._append(history, entry)
        return PublishResult(outcome, key, entry, evicted, dropped)

    def _append(self, history: _JobHistory, entry: Entry) -> tuple[Entry, ...]:
        history.entries.append(entry)
        history.bytes += entry.size
        dropped = []
        while len(history.entries) > 1 and (
            len(history.entries) > self.max_history or history.bytes > self.max_job_bytes
        ):
            gone = history.entries.popleft()
            history.bytes -= gone.size
            dropped.append(gone)
        return tuple(dropped)

    def _validate(self, payload: str | bytes | dict[str, Any]) -> tuple[ScoreReport, int]:
        if isinstance(payload, dict):
            size = len(json.dumps(payload, separators=(",", ":"), default=str))
        elif isinstance(payload, str | bytes):
            size = len(payload)
        else:
            raise ReportRejected(
                f"report payload must be JSON text or an object, got {type(payload).__name__}"
            )
        if size > self.max_payload_bytes:
            raise ReportRejected(
                f"report payload is {size} bytes, ScoreBoard limit is {self.max_payload_bytes}"
            )
        return ScoreReport.from_wire(payload), size

    @staticmethod
    def _classify(history: _JobHistory, report: ScoreReport, incarnation: str | None) -> Outcome:
        last = history.entries[-1] if history.entries else None
        if last is None:
            return Outcome.ACCEPTED if history.incarnation is None else Outcome.NEW_INCARNATION
        if incarnation is not None and incarnation != history.incarnation:
            if incarnation in history.past_incarnations:
                return Outcome.STALE
            return Outcome.NEW_INCARNATION
        if report.sequence > last.sequence:
            return Outcome.ACCEPTED
        if incarnation is None and report.generated_at > last.generated_at:
            return Outcome.NEW_INCARNATION
        return Outcome.DUPLICATE

    def _make_room(self) -> tuple[str, ...]:
        evicted: list[str] = []
        while len(self._jobs) >= self.max_jobs:
            oldest = min(self._jobs, key=lambda k: self._jobs[k].last_touch)
            del self._jobs[oldest]
            evicted.append(oldest)
            self.counters["evicted_jobs"] += 1
        return tuple(evicted)

    def restore(
        self, entries: list[Entry], incarnation: str | None, past: list[str]
    ) -> tuple[Entry, ...]:
        """Reload one job's history (after the actor restarted); returns the entries the
        bounds leave out (stored under older, larger bounds)."""
        if not entries:
            return ()
        ordered = sorted(entries, key=lambda e: e.counter)
        key = ordered[0].job
        history = self._jobs.get(key)
        if history is None:
            self._make_room()
            history = self._jobs[key] = _JobHistory()
        dropped: list[Entry] = []
        for entry in ordered:
            dropped.extend(self._append(history, entry))
        history.incarnation = incarnation
        history.past_incarnations.extend(past)
        history.next_counter = ordered[-1].counter + 1
        history.last_touch = ordered[-1].received_at
        return tuple(dropped)

    # --- reads ------------------------------------------------------------------

    def latest(self, job: str) -> dict[str, Any] | None:
        history = self._jobs.get(job)
        if history is None or not history.entries:
            return None
        return history.entries[-1].wire

    def head(self, job: str) -> dict[str, Any] | None:
        """Sequence, incarnation and times of the latest report, without the report: a
        cheap poll for readers that only fetch when something changed."""
        history = self._jobs.get(job)
        if history is None or not history.entries:
            return None
        last = history.entries[-1]
        return {
            "job": job,
            "incarnation": last.incarnation,
            "sequence": last.sequence,
            "counter": last.counter,
            "generatedAt": last.generated_at.isoformat(),
            "receivedAt": last.received_at,
        }

    def window(
        self, job: str, n: int | None = None, since: datetime | str | float | None = None
    ) -> list[dict[str, Any]]:
        """Recent reports of ``job``, oldest first: the last ``n`` and/or those generated
        strictly after ``since`` (a datetime, ISO-8601 text or epoch seconds)."""
        history = self._jobs.get(job)
        if history is None:
            return []
        entries = list(history.entries)
        if since is not None:
            cut = _as_datetime(since)
            entries = [e for e in entries if e.generated_at > cut]
        if n is not None:
            if n < 0:
                raise ValueError(f"window n must be >= 0, got {n!r}")
            entries = entries[-n:] if n else []
        return [e.wire for e in entries]

    def jobs(self) -> list[dict[str, Any]]:
        out = []
        for key, h in sorted(self._jobs.items()):
            head = self.head(key) or {"job": key, "sequence": None}
            out.append(head | {"incarnation": h.incarnation, "reports": len(h.entries)})
        return out

    def past_incarnations(self, job: str) -> list[str]:
        history = self._jobs.get(job)
        return [] if history is None else list(history.past_incarnations)


def _as_datetime(value: datetime | str | float) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("window since must carry a timezone")
        return value
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError(f"window since must carry a timezone, got {value!r}")
        return parsed
    return datetime.fromtimestamp(float(value), tz=UTC)
