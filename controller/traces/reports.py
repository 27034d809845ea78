"""A cut trace scored window by window through the detector's own scoring
(``RealScoring``: the same payloads, baselines and report conversion a job's ranks
run), into ScoreReports that ``pacekeeper replay`` backtests, and the JSONL they are
written as (one wire report per line, the form ``read_trace`` reads).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import Layout
from pacekeeper.controller.traces.windows import Trace
from pacekeeper.detector.score_report import KernelTiming, ScoreReport

GPUS_PER_NODE = 8
"""Nodes of an imported job, when the trace does not say: global rank // 8."""


def scoring_for(
    trace: Trace, *, source: str, job_name: str, gpus_per_node: int = GPUS_PER_NODE
) -> RealScoring:
    """The scoring that plays ``trace``'s ranks; nodes are ``node-%05d`` of
    ``rank // gpus_per_node``."""
    if gpus_per_node < 1:
        raise ValueError(f"gpus per node must be >= 1, got {gpus_per_node}")
    return RealScoring(
        Layout(trace.world_size, gpus_per_node),
        job_name,
        rank_ids=trace.rank_ids,
        kernel_timing=KernelTiming(backend="trace", reason=f"imported from {source}"),
    )


def trace_reports(
    trace: Trace, *, source: str, job_name: str, gpus_per_node: int = GPUS_PER_NODE
) -> Iterator[ScoreReport]:
    """One ScoreReport per window of ``trace``."""
    scoring = scoring_for(trace, source=source, job_name=job_name, gpus_per_node=gpus_per_node)
    for w in trace.windows:
        yield scoring.report(w.summary, w.placements)


def write_jsonl(reports: Iterable[ScoreReport], path: str | Path) -> int:
    """Write ``reports`` one wire form per line; returns how many."""
    n = 0
    with Path(path).open("w", encoding="utf-8") as fh:
        for r in reports:
            fh.write(r.to_json() + "\n")
            n += 1
    return n
