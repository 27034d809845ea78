"""The bounded (Kubernetes status) form of a score report, at any rank count.

A StragglerReport's status must stay under ``K8S_STATUS_MAX_BYTES`` however large the
job. What goes in, in this order:

1. Everything but ranks and per-node entries: the job, the summary's statistics over all
   ranks, the peer groups' spreads (already bounded, ``MAX_PEER_SUMMARIES``).
2. The per-node entries (``summary.nodes``): all of them when they leave at least
   ``MIN_RANK_BYTES`` for ranks (a 16,384-rank job of 2,048 nodes keeps every one);
   otherwise the worst nodes that fit in what the ranks leave, the rest counted in
   ``summary.omittedNodes`` (``NodeSketch``: how many, their ranks, a histogram of their
   minima, the lowest), so the size no longer grows with the nodes.
3. The worst ranks, with their sections, as many as fit; the cut stops at the first rank
   whose node is not listed, so every listed rank's node is listed (the schema refuses a
   bounded report that breaks this).

Nodes are ordered by their worst rank under the ranks' own order (lowest score or tail),
so the listed ranks lie on the first listed nodes. The controller acts only on what is
listed in full and counts the rest (docs/transports.md).
"""

from __future__ import annotations

import bisect
import math

from .score_report import (
    K8S_STATUS_MAX_BYTES,
    NODE_SKETCH_EDGES,
    NodeSketch,
    NodeSummary,
    RankScores,
    ScoreReport,
)

MIN_RANK_BYTES = 64 * 1024
"""Room the ranks keep when the per-node entries would crowd them out (about 300 ranks
of four sections; a quarter of a smaller bound): the worst ranks are what a decision
reads first."""
_SKETCH_BYTES = 512
"""Room for ``omittedNodes`` (a dozen counts and four numbers)."""
_SLACK_BYTES = 16
_MIN_RANK_JSON = 24
"""No rank's JSON is shorter (``{"rank":0,"node":"n"},``): more ranks than the bound
holds at this size need no serialising of the whole report to know it does not fit."""


def compaction_key(r: RankScores) -> tuple[float, int]:
    """Worst first by its lowest score or tail (a rank slow only in its tail must stay
    listed); unmeasured ranks last; rank breaks ties so the cut is stable."""
    lows = [v for v in (r.worst_score(), r.worst_tail()) if v is not None]
    return (min(lows) if lows else math.inf, r.rank)


def _size(model: NodeSummary | RankScores) -> int:
    return len(model.model_dump_json(by_alias=True, exclude_none=True)) + 1


def sketch(nodes: list[NodeSummary]) -> NodeSketch:
    """``nodes`` counted: their ranks, a histogram of their minima, the extremes."""
    counts = [0] * (len(NODE_SKETCH_EDGES) + 1)
    lows = [n.min_score for n in nodes if n.min_score is not None]
    for v in lows:
        counts[bisect.bisect_right(NODE_SKETCH_EDGES, v)] += 1
    return NodeSketch(
        nodes=len(nodes),
        ranks=sum(n.ranks for n in nodes),
        unmeasured=len(nodes) - len(lows),
        min_score=min(lows) if lows else None,
        max_score=max(lows) if lows else None,
        edges=list(NODE_SKETCH_EDGES),
        counts=counts,
    )


def compact(report: ScoreReport, max_bytes: int = K8S_STATUS_MAX_BYTES) -> ScoreReport:
    """``report`` within ``max_bytes`` of JSON (itself when it fits)."""
    if len(report.ranks) * _MIN_RANK_JSON <= max_bytes and len(report.to_json()) <= max_bytes:
        return report
    order = sorted(report.ranks, key=compaction_key)
    worst_of_node: dict[str, float] = {}
    for r in order:
        worst_of_node.setdefault(r.node, compaction_key(r)[0])
    summary = report.summary
    bare = report.model_copy(
        update={
            "ranks": [],
            "truncated": True,
            "summary": summary.model_copy(update={"nodes": [], "omitted_nodes": None}),
        }
    )
    room = max_bytes - len(bare.to_json()) - _SLACK_BYTES
    sizes = [_size(n) for n in summary.nodes]
    nodes, omitted = list(summary.nodes), None
    for_ranks = min(MIN_RANK_BYTES, room // 4)
    if sum(sizes) > room - for_ranks:
        by_worst = sorted(
            zip(summary.nodes, sizes, strict=True),
            key=lambda ns: (worst_of_node.get(ns[0].node, math.inf), ns[0].node),
        )
        budget = room - for_ranks - _SKETCH_BYTES
        nodes = []
        for n, size in by_worst:
            if size > budget:
                break
            nodes.append(n)
            budget -= size
        rest = by_worst[len(nodes) :]
        omitted = sketch([n for n, _ in rest]) if rest else None
        nodes.sort(key=lambda n: n.node)
    base = bare.model_copy(
        update={"summary": summary.model_copy(update={"nodes": nodes, "omitted_nodes": omitted})}
    )
    listed = {n.node for n in nodes} if omitted is not None else None
    budget = max_bytes - len(base.to_json()) - _SLACK_BYTES
    kept: list[RankScores] = []
    for r in order:
        size = _size(r)
        if size > budget or (listed is not None and r.node not in listed):
            break
        kept.append(r)
        budget -= size
    kept.sort(key=lambda r: r.rank)
    return base.model_copy(update={"ranks": kept})
