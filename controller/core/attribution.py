"""Who is slow: one rank, all ranks of a node, the whole job, or the workload itself.

Pure functions on one report (``digest``) and on the job's short history
(``imbalance.imbalance_of``). Only rank and node findings may lead to actions; a job-wide
slowdown and workload imbalance or structure never lead to hardware (node) actions.
Each rank is judged against its peers (``peers``: robust reference, victims and
culprits of collective waits); a slow set that lines up with the job's parallel
topology is structure (``structure``); in a report without a topology, a slow set that
forms a regular pattern from the job's first windows is too (``structure_pattern``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import assert_never

import numpy as np

from pacekeeper.controller.core import (
    imbalance,
    peers,
    rank_columns,
    rank_table,
    structure_pattern,
)
from pacekeeper.controller.core.breadth import gpu_slow
from pacekeeper.controller.core.ids import NodeName, Rank
from pacekeeper.controller.core.node_digests import NodeDigest, NodeDigests
from pacekeeper.controller.core.peer_stats import F64, I64
from pacekeeper.controller.core.policy import Policy, ScoreKind, ScoreSelector
from pacekeeper.controller.core.state import HistoryEntry
from pacekeeper.controller.core.structure import Alignment, align
from pacekeeper.controller.core.structure_pattern import Layout, PatternMatch
from pacekeeper.detector.score_report import RankScores, ScoreReport

HISTORY_BELOW_CAP = 64
"""Below-threshold ranks remembered per history entry (more is job-wide anyway)."""


class Verdict(StrEnum):
    """What one report says about the job as a whole."""

    LOCAL = "local"
    """Zero or more rank/node findings: candidates for the ladder."""
    JOB_WIDE = "jobWide"
    STRUCTURAL = "structural"
    """Too many nodes slow at once to be hardware: the workload's shape."""
    ALIGNED = "aligned"
    """Every slow rank lies in whole cells of one parallelism dimension (``structure``)."""


class Finding(StrEnum):
    RANK = "rank"
    """Some ranks of a node are slow, others on it are fine."""
    NODE = "node"
    """Every measured rank of a node is slow (and it has more than one)."""


@dataclass(slots=True)
class Digest:
    """One report reduced to what the engine needs; built in one pass over the ranks."""

    at: datetime
    sequence: int
    world_size: int
    measured: int
    below: dict[int, float]
    """Rank -> score, for ranks strictly below ``thresholds.act``."""
    unknown: list[int]
    insufficient: list[int]
    nodes: NodeDigests
    node_of: dict[int, NodeName]
    """Node of each below rank."""
    pod_of: dict[int, str]
    """Pod of each below rank (Kubernetes reports)."""
    listed: int
    """Ranks listed in the report."""
    report: ScoreReport

    def is_ok(self, rank: int) -> bool:
        """Listed with a usable score at or above ``thresholds.act`` (its streak ends)."""
        if rank in self.below or rank in self.unknown or rank in self.insufficient:
            return False
        if self._listed is None:
            self._listed = set(rank_columns.numbers(self.report.ranks).tolist())
        return rank in self._listed

    def ray_workers(self, ranks: list[int]) -> list[dict[str, object]]:
        """Where each of ``ranks`` runs on Ray (node id and process id), for restarting
        exactly those workers; ranks without both are left out."""
        listed = self.report.ranks
        return [
            {"rank": r.rank, "rayNodeId": r.ray_node_id, "pid": r.pid}
            for r in (listed[i] for i in rank_columns.rows_of(listed, ranks))
            if r.ray_node_id and r.pid
        ]

    def placement(self, node: NodeName) -> tuple[list[str], list[str]]:
        """Pods and Ray node ids of the job on ``node`` (off the hot path: only an
        action needs them)."""
        pods: list[str] = []
        ray_ids: list[str] = []
        listed = self.report.ranks
        code, index = self.node_rows
        rows = (
            np.flatnonzero(code == index[node]).tolist()
            if code is not None and node in index
            else range(len(listed))
        )
        for r in (listed[i] for i in rows):
            if r.node != node:
                continue
            if r.pod:
                pods.append(r.pod)
            if r.ray_node_id and r.ray_node_id not in ray_ids:
                ray_ids.append(r.ray_node_id)
        return pods, ray_ids

    worst_rank: int | None
    worst_score: float | None
    victims: dict[int, float] = field(default_factory=dict)
    """Rank -> wait share: slow on the judged score only because it waited (``peers``)."""
    culprits: dict[int, float] = field(default_factory=dict)
    """Rank -> busy score: ranks the others wait for, judged by it."""
    reported_below: frozenset[int] | None = None
    """Ranks below ``act`` on the scores as reported, victims left out (``peers``);
    None: the same as ``below``."""
    gpu_ratio: list[float | None] | None = None
    """Per listed rank (report order), its GPU relative score over its peers' median
    (``peers.Judged.gpu_ratio``), when the report was judged with the memory of
    hardware; None otherwise."""
    host_side: dict[int, float] = field(default_factory=dict)
    """Rank -> host score: ranks judged slow by their host side (``host_side``)."""
    tail: dict[int, float] = field(default_factory=dict)
    """Rank -> tail against its peers': ranks slow in their tail (``tail``)."""
    calibration: peers.GpuCalibration | None = None
    """What the memory of hardware knew of the listed ranks' GPUs when judged."""
    waits_timed: bool = False
    """Some listed rank carries a wait share (``peers.Judged.waits_timed``)."""
    values: F64 | None = None
    """Per listed rank (report order), the judged score; NaN where not usable."""
    pattern: PatternMatch | None = None
    """The slow ranks the job's learned pattern accounts for (``with_pattern``)."""
    gpu_worst_rank: int | None = None
    """The below rank whose own GPU score is the lowest, when that is below ``act``
    (``imbalance.gpu_slowest``); None for a policy that judges no GPU score."""
    peers_only: dict[int, float] = field(default_factory=dict)
    """Rank -> score before the peer check, for ranks it lowered that a healthy spread
    explains when read broadly (``peers.Judged.peers_only``): the lowering is no
    evidence for a disruptive step."""
    unlisted_nodes: int = 0
    """Nodes a bounded report counts but does not name (``summary.omittedNodes``):
    counted in ``job_nodes``, never acted on (no rank of theirs is listed)."""
    unlisted_floor: float | None = None
    """Every unlisted node's ranks score at least this (None: some unmeasured, or none)."""
    placed_nodes: frozenset[NodeName] | None = None
    """The job's nodes as the API places its pods (``JobView.placed_nodes``)."""
    node_rows: tuple[I64 | None, dict[str, int]] = (None, {})
    """Per listed row, its node's number, and the numbers by node (``placement``)."""
    _listed: set[int] | None = None

    @property
    def job_nodes(self) -> int:
        """The job's nodes, named or only counted."""
        return len(self.nodes) + self.unlisted_nodes

    def judged_scores(self) -> dict[int, float]:
        """Rank -> judged score, for the ranks with a usable one (off the hot path: only
        a job without a topology whose first reports showed slow ranks reads them)."""
        if self.values is None:
            return {}
        ok = ~np.isnan(self.values)
        # Whole columns, not a lookup per rank: 131,072 of them cost ~100 ms a report.
        numbers = rank_columns.numbers(self.report.ranks)
        return dict(zip(numbers[ok].tolist(), self.values[ok].tolist(), strict=True))

    def scored(self) -> structure_pattern.Scored:
        """``judged_scores`` as columns, ranks ascending (what ``structure_pattern``
        reads while a job's pattern is learned or explained)."""
        if self.values is None:
            return structure_pattern.Scored.of_dict({})
        return structure_pattern.Scored.of(rank_columns.numbers(self.report.ranks), self.values)

    def slower_than_known(self, ratio: float) -> frozenset[int]:
        """Ranks whose GPU the memory of hardware knows and that runs below ``ratio`` of
        its learned speed factor now."""
        cal, gpu = self.calibration, self.gpu_ratio
        if cal is None or gpu is None or not cal.known.any():
            return frozenset()
        ranks = self.report.ranks
        return frozenset(
            ranks[i].rank
            for i in np.flatnonzero(cal.known).tolist()
            if (g := gpu[i]) is not None and g < cal.factors[i] * ratio
        )

    def unlabelled(self) -> bool:
        """No rank carries ``group`` or ``coords``: a drop-in job that said nothing of
        its layout."""
        ranks = self.report.ranks
        return not rank_columns.any_given(ranks, "group") and not rank_columns.any_true(
            ranks, "coords"
        )

    def gpu_factors(self) -> dict[int, float]:
        """Rank -> its GPU's learned speed factor, for the listed ranks that have one."""
        cal = self.calibration
        if cal is None:
            return {}
        known = np.flatnonzero(cal.known).tolist()
        return {self.report.ranks[i].rank: float(cal.factors[i]) for i in known}

    def gpus_of(self, ranks: Sequence[int]) -> tuple[str, ...]:
        """The GPUs ``ranks`` name in the report, in rank order (off the hot path)."""
        listed = self.report.ranks
        rows = rank_columns.rows_of(listed, ranks)
        return tuple(dict.fromkeys(g for i in rows if (g := listed[i].gpu_uuid)))

    def measured_ranks(self) -> set[int]:
        """Listed ranks with a usable score (below or not)."""
        skip = set(self.unknown) | set(self.insufficient)
        listed = rank_columns.numbers(self.report.ranks).tolist()
        return set(listed).difference(skip) if skip else set(listed)

    def node_state(self, node: NodeName, recover: float) -> str:
        """``recovered`` | ``below`` | ``between`` | ``unknown`` | ``unlisted`` |
        ``absent``. A node a bounded report does not name is placed by the API
        (``placed_nodes``); without it, it may still be the job's (``unlisted``): it
        neither recovers nor relapses, and never reads as left."""
        nd = self.nodes.get(node)
        if nd is None and self.unlisted_nodes:
            return self._unlisted_state(node, recover)
        if nd is None or nd.ranks == 0:
            return "absent"
        if nd.below:
            return "below"
        if nd.unknown or nd.measured == 0 or nd.min_score is None:
            return "unknown"
        return "recovered" if nd.min_score >= recover else "between"

    def _unlisted_state(self, node: NodeName, recover: float) -> str:
        """A node a bounded report only counts: gone when the API places no pod of the
        job there; recovered when every counted node is; else not known."""
        placed = self.placed_nodes
        if placed is None:
            return "unlisted"
        if node not in placed:
            return "absent"
        floor = self.unlisted_floor
        return "recovered" if floor is not None and floor >= recover else "unknown"

    def to_history(self) -> HistoryEntry:
        worst_below = sorted(self.below, key=lambda r: (self.below[r], r))
        return HistoryEntry(
            at=self.at,
            worst_rank=worst_below[0] if worst_below else None,
            below=tuple(sorted(worst_below[:HISTORY_BELOW_CAP])),
            gpu_worst_rank=self.gpu_worst_rank,
        )


def score_getter(sel: ScoreSelector) -> Callable[[RankScores], float | None]:
    match sel.kind:
        case ScoreKind.GPU_RELATIVE:
            return lambda r: r.gpu_relative
        case ScoreKind.GPU_INDIVIDUAL:
            return lambda r: r.gpu_individual
        case ScoreKind.SECTION_RELATIVE:
            name = sel.section or ""
            return lambda r: r.section_relative.get(name)
        case ScoreKind.SECTION_INDIVIDUAL:
            name = sel.section or ""
            return lambda r: r.section_individual.get(name)
        case ScoreKind.WORST:
            return _worst
        case _:
            assert_never(sel.kind)


def _worst(r: RankScores) -> float | None:
    """``RankScores.worst_score`` without building lists: this runs once per rank per
    report (16,384 times for a large job) and dominates the decision time."""
    low: float | None = r.gpu_relative
    v = r.gpu_individual
    if v is not None and (low is None or v < low):
        low = v
    for section in (r.section_relative, r.section_individual):
        for v in section.values():
            if v is not None and (low is None or v < low):
                low = v
    return low


_SAMPLES: dict[ScoreKind, tuple[str, ...]] = {
    ScoreKind.GPU_RELATIVE: ("kernel_samples",),
    ScoreKind.GPU_INDIVIDUAL: ("kernel_samples",),
    ScoreKind.SECTION_RELATIVE: ("section_samples",),
    ScoreKind.SECTION_INDIVIDUAL: ("section_samples",),
    ScoreKind.WORST: ("kernel_samples", "section_samples"),
}
"""The sample counts a score kind is built from (``persistence.minSamples`` reads them)."""


def digest(
    report: ScoreReport, policy: Policy, calibration: peers.GpuCalibration | None = None
) -> Digest:
    """Classify every rank of one report against the policy's thresholds, each judged
    against its peers as ``policy.score.reference`` says (``peers.judge``), with its
    GPU's learned speed factor when ``calibration`` is given (``hardware_memory``).

    A rank without the selected score, or with fewer than ``minSamples`` samples, is
    Unknown. In a truncated (compact) report an absent rank counts as at or above the
    threshold only when its node's minimum (over every score kind, so a lower bound of
    the selected one) is; otherwise it is Unknown too.
    """
    with rank_table.reading():
        return _digest(report, policy, calibration)


def _digest(
    report: ScoreReport, policy: Policy, calibration: peers.GpuCalibration | None
) -> Digest:
    judged = peers.judge(report, policy, score_getter(policy.score), calibration)
    ranks = report.ranks
    act = policy.thresholds.act
    min_samples = policy.persistence.min_samples
    # Array work, not a loop per rank: this runs on every rank of every report, and at
    # 16,384 ranks a Python loop with a node lookup per rank cost as much as the scoring.
    values = judged.values
    known = ~np.isnan(values)
    if min_samples:
        counts = rank_columns.ints(ranks, *_SAMPLES[policy.score.kind])
        usable = known & (counts >= min_samples)
    else:
        usable = known
    with np.errstate(invalid="ignore"):
        low = usable & (values < act)
    # Nodes in the order the report first names them (their ranks need not come together).
    code, index = rank_columns.node_codes(ranks)
    per_node = np.bincount(code, minlength=len(index)).tolist()
    measured_per = np.bincount(code[usable], minlength=len(index)).tolist()
    node_min = np.full(len(index), np.inf)
    np.minimum.at(node_min, code[usable], values[usable])
    # The below ranks from the columns (a fleet pattern has thousands): only the pod is
    # read off each rank object.
    numbers = rank_columns.numbers(ranks)
    rows = np.flatnonzero(low)
    low_ranks: list[int] = numbers[rows].tolist()
    below = dict(zip(low_ranks, values[rows].tolist(), strict=True))
    node_of: dict[int, NodeName] = dict(
        zip(low_ranks, rank_table.table(ranks).objects("node")[rows].tolist(), strict=True)
    )
    below_of: dict[int, list[int]] = {}
    for c, r in zip(code[rows].tolist(), low_ranks, strict=True):
        below_of.setdefault(c, []).append(r)
    pods = [ranks[i].pod for i in rows.tolist()]
    pod_of: dict[int, str] = {r: p for r, p in zip(low_ranks, pods, strict=True) if p}
    unknown = numbers[~known].tolist()
    insufficient = numbers[known & ~usable].tolist()
    worst_rank: int | None = None
    worst_score: float | None = None
    if usable.any():
        at = np.flatnonzero(usable)
        i = int(at[np.argmin(values[at])])  # the first of the lowest, in report order
        worst_rank, worst_score = ranks[i].rank, float(values[i])
    measured = int(np.count_nonzero(usable))
    gpu_worst = imbalance.gpu_slowest(ranks, rows.tolist(), policy.score.kind, act)
    nodes = NodeDigests(index, per_node, measured_per, node_min.tolist(), below_of)
    if report.truncated:
        _fill_truncated(report, act, nodes)
    omitted = report.summary.omitted_nodes
    return Digest(
        at=report.generated_at,
        sequence=report.sequence,
        world_size=report.summary.world_size or len(report.ranks),
        measured=measured,
        below=below,
        unknown=unknown,
        insufficient=insufficient,
        nodes=nodes,
        node_of=node_of,
        pod_of=pod_of,
        listed=len(report.ranks),
        report=report,
        worst_rank=worst_rank,
        worst_score=worst_score,
        victims=judged.victims,
        culprits=judged.culprits,
        reported_below=judged.reported_below,
        gpu_ratio=judged.gpu_ratio,
        host_side=judged.host_side,
        tail=judged.tail,
        peers_only=judged.peers_only,
        calibration=calibration,
        waits_timed=judged.waits_timed,
        values=np.where(usable, values, np.nan),
        gpu_worst_rank=gpu_worst,
        node_rows=(code, index),
        unlisted_nodes=omitted.nodes if omitted is not None else 0,
        unlisted_floor=omitted.min_score
        if omitted is not None and not omitted.unmeasured
        else None,
    )


def with_pattern(layout: Layout | None, d: Digest, act: float, *, learn: bool) -> Layout | None:
    """Set ``d.pattern`` from the job's layout (first folding ``d`` into it when
    ``learn``: each new report once); the layout to keep. Reports with a topology leave
    it alone: ``structure`` reads theirs."""
    settled = layout is not None and layout.learned and layout.world == d.world_size
    if settled and layout is not None and layout.pattern is None:
        return layout  # nothing regular from the start: the common case costs nothing
    if not (d.below or (learn and not settled)) or not d.unlabelled():
        return layout
    scored = d.scored()
    # A GPU the memory of hardware knows, now slower than it has run before, is the
    # hardware even when its whole node is slow from the job's first window.
    below = set(d.below) - d.slower_than_known(structure_pattern.tolerance(act))
    if learn:
        layout = structure_pattern.learn(layout, d.world_size, below, scored)
    d.pattern = structure_pattern.explain(layout, below, scored, act)
    return layout


def learn_early(
    layout: Layout | None,
    report: ScoreReport,
    policy: Policy,
    calibration: Callable[[], peers.GpuCalibration | None],
) -> Layout | None:
    """Fold a report from the job's warm-up into its layout: those are the job's first
    windows too (a fault that begins during the warm-up is no pattern from the start).
    ``calibration`` is asked only when the report is read."""
    world = report.summary.world_size or len(report.ranks)
    if layout is not None and layout.learned and layout.world == world:
        return layout
    if rank_columns.any_true(report.ranks, "coords"):
        return layout
    d = digest(report, policy, calibration())
    return with_pattern(layout, d, policy.thresholds.act, learn=True)


def _fill_truncated(report: ScoreReport, act: float, nodes: NodeDigests) -> None:
    """The listed nodes' unlisted ranks: fine when the node's minimum is, else Unknown.
    Nodes in ``summary.omittedNodes`` get no entry: they are only counted."""
    for ns in report.summary.nodes:
        name = NodeName(ns.node)
        nd = nodes.get(name)
        if nd is None:
            nd = nodes[name] = NodeDigest()
        missing = ns.ranks - nd.ranks
        if missing <= 0:
            continue
        nd.ranks = ns.ranks
        if ns.min_score is not None and ns.min_score >= act and not nd.below:
            nd.measured += missing
            nd.min_score = ns.min_score if nd.min_score is None else min(nd.min_score, ns.min_score)
        else:
            nd.unknown += missing


@dataclass(frozen=True, slots=True)
class NodeFinding:
    node: NodeName
    kind: Finding
    ranks: tuple[int, ...]
    min_score: float


@dataclass(frozen=True, slots=True)
class Attribution:
    verdict: Verdict
    findings: tuple[NodeFinding, ...]
    below_fraction: float
    slow_nodes: int
    job_nodes: int
    alignment: Alignment | PatternMatch | None = None
    """The slow ranks that line up with a parallelism dimension, or with the pattern
    the job's first reports showed (never findings)."""


def attribute(d: Digest, policy: Policy, candidates: Sequence[int] | None = None) -> Attribution:
    """Attribute the below-threshold ranks of one report.

    ``candidates`` restricts the findings to these ranks (the persistent ones); the
    job-wide and structural rules always look at every below rank of the report.
    """
    cfg = policy.attribution
    job_nodes = d.job_nodes
    below_fraction = len(d.below) / d.measured if d.measured else 0.0
    slow_nodes = len({d.node_of[r] for r in d.below})
    aligned: Alignment | PatternMatch | None = None
    if len(d.below) > 1:
        aligned = align(d.report, d.below, d.measured_ranks)
    if aligned is None and d.pattern is not None:
        aligned = d.pattern
    if aligned is not None and set(d.below) <= aligned.ranks:
        return Attribution(
            Verdict.ALIGNED, (), below_fraction, slow_nodes, job_nodes, alignment=aligned
        )
    pattern = aligned if isinstance(aligned, PatternMatch) else None
    if pattern is not None:
        # The pattern's ranks are the workload's shape, not part of a job-wide slowdown:
        # a node slowing mid-job beside a heavier stage is still that node.
        rest = set(d.below) - pattern.ranks
        others = d.measured - len(pattern.ranks)
        below_fraction = len(rest) / others if others > 0 else 0.0
        slow_nodes = len({d.node_of[r] for r in rest})
    if d.measured and below_fraction >= cfg.job_wide_fraction and len(d.below) > 1:
        return Attribution(Verdict.JOB_WIDE, (), below_fraction, slow_nodes, job_nodes)
    far = d.reported_below or frozenset()
    reported = len(far) / d.measured if d.measured else 0.0
    if pattern is not None:
        others = d.measured - len(pattern.ranks)
        reported = len(far - pattern.ranks) / others if others > 0 else 0.0
    # A detector that measured its ranks' collective waits (``waitShare``) took them out
    # of the sections already: a section holding a collective then points at the rank
    # the others waited for, and the reported scores' spread around the fastest rank is
    # noise, not the shape this rule guards against.
    waits_out = d.waits_timed
    if reported >= cfg.job_wide_fraction and len(far) > 1 and not waits_out:
        # Most ranks far from the fastest as reported: the job's shape (named when it
        # lines up with a dimension) or a section holding a collective (all wait for
        # one); no rank is judged alone.
        shape: Alignment | PatternMatch | None = align(d.report, far, d.measured_ranks)
        if shape is not None and far <= shape.ranks:
            return Attribution(
                Verdict.ALIGNED, (), reported, slow_nodes, job_nodes, alignment=shape
            )
        return Attribution(Verdict.JOB_WIDE, (), reported, slow_nodes, job_nodes)
    wanted = set(d.below) if candidates is None else set(candidates) & set(d.below)
    if aligned is not None:
        wanted -= aligned.ranks
    if (
        slow_nodes >= cfg.structural_min_nodes
        and job_nodes
        and slow_nodes / job_nodes >= cfg.structural_node_fraction
    ):
        apart = _gpus_apart(d, policy, wanted)
        return Attribution(
            Verdict.STRUCTURAL, _findings(d, apart), below_fraction, slow_nodes, job_nodes
        )
    return Attribution(
        Verdict.LOCAL,
        _findings(d, wanted),
        below_fraction,
        slow_nodes,
        job_nodes,
        alignment=aligned,
    )


def _gpus_apart(d: Digest, policy: Policy, wanted: set[int]) -> set[int]:
    """The ranks a structural hold leaves to be judged: those whose own GPU is slow
    (``breadth.gpu_slow``), when they are on fewer nodes than a structure needs.

    A spread of slow ranks across many nodes is the workload (a heavier stage, bursty
    host stalls on every rank), and the hold keeps every one of them from being acted on
    alone. A GPU whose kernels are slow against its peers' is no part of that spread:
    held with it, a 27 % slow GPU amid bursty host stalls was never acted on (issue #38,
    sampled scenario 271). A GPU slowdown on many nodes at once is itself structure, and
    stays held."""
    slow = {int(r) for r in gpu_slow(d.report, policy.thresholds.act)} & wanted
    if not slow or len({d.node_of[r] for r in slow}) >= policy.attribution.structural_min_nodes:
        return set()
    return slow


def _findings(d: Digest, wanted: set[int]) -> tuple[NodeFinding, ...]:
    by_node: dict[NodeName, list[int]] = {}
    for r in wanted:
        by_node.setdefault(d.node_of[r], []).append(r)
    findings = []
    for node, ranks in sorted(by_node.items()):
        nd = d.nodes[node]
        whole = nd.measured > 1 and len(nd.below) == nd.measured
        findings.append(
            NodeFinding(
                node=node,
                kind=Finding.NODE if whole else Finding.RANK,
                ranks=tuple(sorted(ranks)),
                min_score=min(d.below[r] for r in ranks),
            )
        )
    findings.sort(key=lambda f: (f.min_score, f.node))
    return tuple(findings)


def rank_nodes(report: ScoreReport) -> dict[Rank, NodeName]:
    return {Rank(r.rank): NodeName(r.node) for r in report.ranks}
