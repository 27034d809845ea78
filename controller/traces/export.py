"""Live history out to the JSONL that ``pacekeeper replay`` backtests: the ScoreBoard's
bounded history of a Ray job, or the report a StragglerReport's status holds (one per
read: ``--follow`` polls and appends each new one).

Every report is validated on the way out, as the controller would on the way in
(``ScoreReport.from_wire``): one that fails is counted and left out, never written. A
report is written once, by (incarnation, sequence, generatedAt), so following a
StragglerReport for an hour writes each report the job published, once.

The readers take the board and the API source as arguments (the CLI connects them),
so this module is the same with a real cluster and with the tests' stand-ins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from pacekeeper.detector.score_report import ReportRejected, ScoreReport


class ExportError(ValueError):
    """Nothing can be exported (no such job, several jobs and none chosen); one line."""


@dataclass
class JsonlExport:
    """Writes each distinct valid report once, in the order given."""

    out: IO[str]
    job: str | None = None
    """Only reports of this job key (``ScoreReport.job.key``); None: the first seen."""
    written: int = 0
    rejected: int = 0
    _seen: set[tuple[str | None, int, str]] = field(default_factory=set)

    def add(self, wire: Mapping[str, Any] | str, incarnation: str | None = None) -> bool:
        """Write ``wire`` unless it is invalid, another job's or written already."""
        try:
            report = ScoreReport.from_wire(wire if isinstance(wire, str) else dict(wire))
        except ReportRejected:
            self.rejected += 1
            return False
        if self.job is None:
            self.job = report.job.key
        if report.job.key != self.job:
            return False
        key = (incarnation, report.sequence, report.generated_at.isoformat())
        if key in self._seen:
            return False
        self._seen.add(key)
        self.out.write(report.to_json() + "\n")
        self.written += 1
        return True


def ray_history(board: Any, job: str | None, get: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """Every report the ScoreBoard keeps for ``job`` (oldest first); ``get`` is
    ``ray.get``. Without ``job`` the board must hold exactly one."""
    heads = get(board.jobs.remote())
    keys = [str(h["job"]) for h in heads]
    chosen = _choose(job, keys, "the ScoreBoard")
    wires: list[dict[str, Any]] = get(board.window.remote(chosen))
    return wires


def status_reports(objects: Iterable[Mapping[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """(report wire, incarnation) of each StragglerReport that holds one."""
    out = []
    for obj in objects:
        status = obj.get("status") or {}
        wire = status.get("report")
        if isinstance(wire, dict):
            inc = status.get("incarnation")
            out.append((wire, inc if isinstance(inc, str) else None))
    return out


def _choose(job: str | None, keys: list[str], where: str) -> str:
    if job is not None:
        if job not in keys:
            known = ", ".join(sorted(keys)) or "none"
            raise ExportError(f"{where} has no job {job!r} (jobs: {known})")
        return job
    if len(keys) != 1:
        known = ", ".join(sorted(keys)) or "none"
        raise ExportError(f"{where} holds {len(keys)} jobs ({known}); choose one with --job")
    return keys[0]
