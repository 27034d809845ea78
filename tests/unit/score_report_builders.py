"""What the score-report tests share: the jobs they report on, the time they report at,
a report built from ranks, and the wire form an older schema version wrote."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")
LLAMA_JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llama")


def build(
    ranks: list[RankScores],
    *,
    job: JobIdentity = JOB,
    generated_at: datetime = NOW,
    sequence: int = 1,
    window_s: float = 60.0,
) -> ScoreReport:
    return ScoreReport.build(
        job=job, sequence=sequence, generated_at=generated_at, window_s=window_s, ranks=ranks
    )


def old_wire(
    version: int, ranks: list[dict[str, Any]], summary: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    """A report of ``JOB`` at ``NOW`` as schema ``version`` wrote it; ``fields`` are the
    top-level keys only that version had."""
    return {
        "schemaVersion": version,
        "job": {"platform": "kubernetes", "namespace": "ml", "name": "llm"},
        "sequence": 3,
        "generatedAt": NOW.isoformat(),
        "windowS": 60.0,
        **fields,
        "ranks": ranks,
        "summary": summary,
    }
