"""One report, end to end: this rank's payload, the gather, the scores, the NVRx
``Report``, its ``ScoreReport``, and the listeners told about it.

``Detector.generate_report`` is this module over the current ``RunState``. Every step
runs under the run's guard, so an internal failure degrades the report (an empty
payload still joins the collective, so no rank is left waiting; a failed gather or
scoring gives ``None``; a failed conversion gives the ``Report`` and no
``ScoreReport``) and never raises into training. The maths is ``payload`` and
``scoring``'s; the collectives are ``gather``'s.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from . import gather, host_scores, key_references, topology_discovery
from .host_scores import HostScores
from .key_references import References
from .payload import MAX_NAMES, RankPayload, Scores, score_payloads
from .reports import RankInfo, Report, to_score_report
from .score_report import JobIdentity, KernelTiming, ScoreReport
from .tree_group import TreeGroup
from .work_mix import with_mix_groups

if TYPE_CHECKING:
    from pacekeeper.cupti_ext import BackendChoice

    from .guard import Guard
    from .run_state import RunState

ReportListener = Callable[[ScoreReport], None]

_FEW_PAYLOADS = 64

_MAX_SEEN_SECTIONS = 4096
"""Bound on the section names a gathered NVRx-shaped report lists (NaN where unscored)."""


Convert = Callable[[], "ScoreReport | None"]
"""Makes the report's ScoreReport (None: the conversion failed, counted), on demand."""


def generate(
    run: RunState, *, scores_to_compute: Sequence[str], gather_on_rank0: bool
) -> tuple[Report, Convert] | None:
    """Score the window since the last report; a collective over the run's group.

    Returns None on ranks that get no report (not group rank 0 when ``gather_on_rank0``)
    and when gathering or scoring failed. The ScoreReport is made by the returned
    function, when a listener or ``latest_score_report`` asks: a drop-in NVRx user
    with neither pays nothing for it (a fifth of a small report's time). What it
    reads from the run is taken now, so a later call describes this window.
    """
    t0 = time.perf_counter_ns()
    guard, builder = run.guard, run.payloads
    # Rank and world size now, not at initialize (which may precede init_process_group).
    info = guard.call("report.group", run.refresh, None)
    if info is None:
        return None
    discover(run)
    control = run.control
    # False: disabled (or enabled at this report); None: the broadcast failed, and the
    # gather on the same group would fail too.
    if control is not None and not guard.call(
        "control.exchange", lambda: control.exchange(run, info), None
    ):
        return None
    sequence, window_s = run.next_window()
    local = guard.call("report.local", functools.partial(builder.collect, sequence), None)
    payload, sec_summ, ker_summ = builder.empty() if local is None else local

    relative = "relative_perf_scores" in scores_to_compute
    individual = "individual_perf_scores" in scores_to_compute
    failed = object()
    gathered: Any
    if gather_on_rank0 or relative:
        exchange = functools.partial(
            _exchange,
            run=run,
            gather_on_rank0=gather_on_rank0,
            relative=relative,
            individual=individual,
        )
        gathered = guard.call(
            "report.gather", lambda: run.group.collective(exchange, payload, info), failed
        )
        if gathered is failed or (gather_on_rank0 and gathered is None):
            return None
    else:
        gathered = [payload]

    # Only now do we know the names reached the receiver.
    builder.mark_sent(payload)
    me = None if gather_on_rank0 else info.global_rank

    def build() -> tuple[Report, Callable[[], dict[int, RankInfo]], dict[int, float]]:
        scores, ranks, rank_info = _scores(run, gathered, me, relative, individual)
        if run.config.missing_scores == "nan":
            # NVRx's shape: every rank (or this one) under each score it computes, NaN
            # where there is nothing to score; sections as its name table holds them.
            sections: Iterable[str] = run.seen_sections if me is None else sec_summ
            scores = scores.nan_filled(
                ranks if me is None else [me], sections, relative=relative, individual=individual
            )
        report = Report(
            gpu_relative_perf_scores=scores.gpu_relative,
            section_relative_perf_scores=scores.section_relative,
            gpu_individual_perf_scores=scores.gpu_individual,
            section_individual_perf_scores=scores.section_individual,
            rank_to_node=scores.rank_to_node,
            local_section_summaries=sec_summ,
            local_kernel_summaries=ker_summ,
            generate_report_elapsed_time=(time.perf_counter_ns() - t0) * 1e-6,
            gather_on_rank0=gather_on_rank0,
            rank=info.global_rank,
        )
        return report, rank_info, scores.gpu_relative_median

    built = guard.call("report.score", build, None)
    if built is None:
        return None
    report, rank_info, rel_median = built
    convert = functools.partial(
        _score_report,
        report,
        rank_info,
        rel_median,
        job=run.job,
        sequence=sequence,
        window_s=window_s,
        generated_at=datetime.now(UTC),
        world_size=run.info.world_size,
        choice=run.choice,
        counts=dict(run.payloads.kernel_counts),
    )
    made: list[ScoreReport | None] = []

    def once() -> ScoreReport | None:
        if not made:
            made.append(guard.call("report.convert", convert, None))
        return made[0]

    return report, once


def discover(run: RunState, *, at_start: bool = False) -> None:
    """The job's layout and DDP models, found without a call (``topology_discovery``):
    at ``initialize`` a walk over the job's objects; at a report, the layout (cached)."""
    if not topology_discovery.enabled():
        return
    found = topology_discovery.of_run(run.payloads)
    found.watch_ddp = run.time_collectives
    if at_start:
        run.guard.call("topology.scan", found.scan, None)
        return
    topology = run.guard.call(
        "topology.discover", lambda: found.at_report(run.payloads.topology), None
    )
    if topology is not None:
        run.payloads.topology = topology


def watch_if_ddp(run: RunState, obj: object) -> None:
    """Watch ``obj`` when it is a DDP model (``wrap_callables`` on one of its methods)."""
    if run.time_collectives and topology_discovery.enabled():
        run.guard.call("topology.watch_ddp", lambda: topology_discovery.watch_if_ddp(obj), None)


def notify(guard: Guard, listeners: Iterable[ReportListener], score_report: ScoreReport) -> None:
    """Call each listener; one that raises is counted as ``listener`` and the rest still run."""
    for listener in list(listeners):
        guard.call("listener", functools.partial(listener, score_report), None)


def _learn_names(names: dict[int, str], payloads: Iterable[RankPayload]) -> None:
    for p in payloads:
        if len(names) + len(p.names) > MAX_NAMES:
            names.clear()
        names.update(p.names)


def _exchange(
    payload: RankPayload,
    info: gather.GroupInfo,
    group: Any,
    *,
    run: RunState,
    gather_on_rank0: bool,
    relative: bool,
    individual: bool,
) -> Any:
    """The report's collective: on the tree, scoring on the node leaders
    (``HostScores``: the whole job's on the root, joined on the way up, or this rank's
    host's; None on the other ranks of a gathered report); on any other group, the
    payloads (rank 0's list, or every rank's when each scores itself)."""
    if isinstance(group, TreeGroup):
        guard = run.guard

        def summarize(payloads: list[Any]) -> References:
            return guard.call(
                "report.references",
                lambda: key_references.of_payloads(_payloads(payloads)),
                References.empty(),
            )

        def score(payloads: list[Any], refs: References) -> HostScores:
            def scored() -> HostScores:
                mine = _payloads(payloads)
                _learn_names(run.names, mine)
                return host_scores.score_host(
                    mine, run.names, refs, relative=relative, individual=individual
                )

            return guard.call("report.score", scored, HostScores.empty())

        return group.score_at_leaders(
            payload,
            summarize,
            key_references.merge,
            score,
            host_scores.join,
            to_root=gather_on_rank0,
        )
    if gather_on_rank0:
        return gather.gather_to_reporter(payload, info, group)
    return gather.all_gather(payload, info, group)


def _payloads(items: Iterable[Any]) -> list[RankPayload]:
    return [p for p in items if isinstance(p, RankPayload)]


def _scores(
    run: RunState, gathered: Any, me: int | None, relative: bool, individual: bool
) -> tuple[Scores, list[int], Callable[[], dict[int, RankInfo]]]:
    """The report's scores, its ranks and (made when asked) their ``RankInfo`` with mix
    groups, from what the exchange gave: hosts' scores from the tree, or payloads."""
    if isinstance(gathered, HostScores):
        if me is not None:  # this rank's host's scores: it reports its own
            infos = {i.rank: i for i in gathered.infos if i.rank == me}
            return gathered.scores().only(me), [me], lambda: infos
        _learn_section_names(run.seen_sections, gathered.sections)
        return gathered.scores(), gathered.ranks.tolist(), gathered.rank_info
    payloads = _payloads(gathered)
    _learn_names(run.names, payloads)
    scores = score_payloads(
        payloads, run.names, relative=relative, individual=individual, only_rank=me
    )
    if me is not None:
        payloads = [p for p in payloads if p.info.rank == me]
    elif run.config.missing_scores == "nan":
        _learn_sections(run.seen_sections, run.names, payloads)
    return (
        scores,
        [p.info.rank for p in payloads],
        lambda: with_mix_groups({p.info.rank: p.info for p in payloads}, payloads),
    )


def _learn_sections(
    seen: dict[str, None], names: dict[int, str], payloads: Sequence[RankPayload]
) -> None:
    if not payloads:
        return
    if len(payloads) <= _FEW_PAYLOADS:  # a set of a few ints beats numpy's per-call cost
        ids: Iterable[int] = sorted({s for p in payloads for s in p.section_ids.tolist()})
    else:
        ids = np.unique(np.concatenate([p.section_ids for p in payloads])).tolist()
    _learn_section_names(seen, (n for sid in ids if (n := names.get(sid)) is not None))


def _learn_section_names(seen: dict[str, None], names: Iterable[str]) -> None:
    for name in names:
        if name not in seen and len(seen) < _MAX_SEEN_SECTIONS:
            seen[name] = None


def _score_report(
    report: Report,
    rank_info: Callable[[], dict[int, RankInfo]],
    gpu_relative_median: dict[int, float],
    *,
    job: JobIdentity,
    sequence: int,
    window_s: float,
    generated_at: datetime,
    world_size: int,
    choice: BackendChoice,
    counts: dict[str, int],
) -> ScoreReport:
    return to_score_report(
        report,
        job=job,
        sequence=sequence,
        generated_at=generated_at,
        window_s=window_s,
        rank_info=rank_info(),
        world_size=world_size,
        kernel_timing=_kernel_timing(choice, counts),
        gpu_relative_median=gpu_relative_median,
    )


def _kernel_timing(choice: BackendChoice, counts: dict[str, int]) -> KernelTiming:
    """The backend, and what became of this rank's kernel records in the window;
    ``droppedRecords`` stays the sum over the gathered ranks (``to_score_report``).
    Made with the ScoreReport, not at every report (a validated model costs ~20 µs)."""
    return KernelTiming(
        backend=choice.name,
        reason=choice.reason,
        attributed_records=counts["attributed"],
        unattributed_records=counts["unattributed"],
        held_records=counts["held"],
        lost_markers=counts["lost_markers"],
    )
