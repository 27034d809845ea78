"""Synthetic score reports of any size, for tests, benchmarks and docs examples.

Real reports come from ``Detector.generate_report``; these have the same shape with
chosen scores, so a 16,384-rank job can be checked against the status bound without
16,384 processes.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def synthetic_report(
    *,
    job: JobIdentity | None = None,
    sequence: int = 0,
    world_size: int = 4,
    ranks_per_node: int = 8,
    sections: Iterable[str] = ("forward", "backward", "optimizer"),
    slow: dict[int, float] | None = None,
    gpu: bool = True,
    generated_at: datetime | None = None,
    window_s: float = 60.0,
    ray_node_ids: dict[str, str] | None = None,
) -> ScoreReport:
    """A report where every rank scores ~1.0 except ``slow`` (rank -> score); nodes are
    ``node-00000``, ``node-00001``... (``ray_node_ids`` maps them to Ray node ids)."""
    job = job or JobIdentity(platform=Platform.LOCAL, name="synthetic")
    slow = slow or {}
    names = list(sections)
    ranks = []
    for rank in range(world_size):
        # A little spread (0.95-1.0) so summaries and truncation have real work to do.
        base = slow.get(rank, 1.0 - (rank * 7919 % 50) / 1000.0)
        node = f"node-{rank // ranks_per_node:05d}"
        ranks.append(
            RankScores(
                rank=rank,
                node=node,
                pod=f"{job.name}-{rank}" if job.platform is Platform.KUBERNETES else None,
                ray_node_id=(ray_node_ids or {}).get(node),
                gpu_relative=base if gpu else None,
                gpu_individual=min(1.0, base + 0.02) if gpu else None,
                section_relative={s: base for s in names},
                section_individual={s: min(1.0, base + 0.01) for s in names},
                section_samples=len(names) * 100,
                kernel_samples=8000 if gpu else 0,
            )
        )
    return ScoreReport.build(
        job=job,
        sequence=sequence,
        generated_at=generated_at or datetime.now(UTC),
        window_s=window_s,
        ranks=ranks,
        world_size=world_size,
    )
