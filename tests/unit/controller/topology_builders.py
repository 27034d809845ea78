"""Reports with a parallel topology (coords, groups, wait shares) for the peer-reference,
victim and structure tests, fed to the real engine through ``controller_builders.Loop``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from controller_builders import REPORT_S, Loop

from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

Coords = Callable[[int], dict[str, int]]


def grid(tp: int = 1, dp: int = 1, pp: int = 1) -> Coords:
    """Megatron's rank order: tp fastest, then dp, then pp."""
    return lambda r: {"tp": r % tp, "dp": (r // tp) % dp, "pp": r // (tp * dp)}


def topo_report(
    scores: Mapping[int, float],
    *,
    seq: int,
    at: datetime,
    coords: Coords | None = None,
    waits: Mapping[int, float] | None = None,
    section: str | None = None,
    per_node: int = 8,
    groups: Mapping[int, str] | None = None,
) -> ScoreReport:
    """GPU relative scores (or one section's, with ``section``) for ranks 0..n-1."""
    ranks = [
        RankScores(
            rank=r,
            node=f"node-{r // per_node:03d}",
            pod=f"train-{r}",
            gpu_relative=None if section else s,
            section_relative={section: s} if section else {},
            section_samples=10,
            kernel_samples=10,
            coords=coords(r) if coords else None,
            group=(groups or {}).get(r),
            wait_share=(waits or {}).get(r),
        )
        for r, s in scores.items()
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="train"),
        sequence=seq,
        generated_at=at,
        window_s=REPORT_S,
        ranks=ranks,
    )


def feed(loop: Loop, scores: Mapping[int, float], **kw: object) -> None:
    """One more report interval through ``loop`` with these scores."""
    from datetime import timedelta

    loop.now += timedelta(seconds=REPORT_S)
    loop.seq += 1
    loop.reports.append(topo_report(scores, seq=loop.seq, at=loop.now, **kw))  # type: ignore[arg-type]
    loop.decide()
