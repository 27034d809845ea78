"""What a job's newest report calls for: a job-wide slowdown or the workload's shape
(no action of any kind), per slow node a candidate judged on persistence, imbalance
history and its ladder, the step taken when every gate lets it through, and recovery
for the nodes no longer slow.

``job_window`` has already decided that there is new, usable evidence; the marks a
step places or releases are kept by ``mark_records``, the limits it must pass by
``budgets``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from pacekeeper.controller.core import (
    budgets,
    hardware_trust,
    hardware_views,
    host_side,
    mark_records,
    probe_check,
    sequential,
)
from pacekeeper.controller.core.attribution import Digest, NodeFinding, attribute
from pacekeeper.controller.core.attribution import Verdict as Attributed
from pacekeeper.controller.core.decisions import Reason, Verdict, node_subject
from pacekeeper.controller.core.ids import NodeName, Rank
from pacekeeper.controller.core.imbalance import imbalance_of
from pacekeeper.controller.core.ladder import Exhausted, Take, Wait, next_move
from pacekeeper.controller.core.observations import MARK_OF_ACTION
from pacekeeper.controller.core.policy import DISRUPTIVE_ACTIONS, NODE_ACTIONS, ActionKind
from pacekeeper.controller.core.policy_hardware import Calibration, Confirm
from pacekeeper.controller.core.run import JobRun, Run
from pacekeeper.controller.core.state import ActionStamp, LadderState, Streak

EVIDENCE_RANKS_CAP = 64
REGROUPING_ACTIONS = frozenset({ActionKind.RESTART_RANK, ActionKind.DRAIN_NODE})
"""Actions that replace the job's pods (the job regroups, scores restart)."""


def judge(run: Run, ctx: JobRun, d: Digest) -> None:
    """Decide on the job from its newest report's digest ``d``."""
    if d.unknown:
        run.job_hold(ctx, Reason.STALE_DATA, _ranks_evidence(d.unknown))
    if d.insufficient:
        ev = {
            **_ranks_evidence(d.insufficient),
            "minSamples": ctx.policy.persistence.min_samples,
        }
        run.job_hold(ctx, Reason.INSUFFICIENT_SAMPLES, ev)
    att = attribute(d, ctx.policy)
    base = {
        "belowFraction": round(att.below_fraction, 4),
        "below": len(d.below),
        "measured": d.measured,
        "slowNodes": att.slow_nodes,
        "jobNodes": att.job_nodes,
        "sequence": d.sequence,
        **_wait_evidence(d),
    }
    if att.alignment is not None:
        # The aligned ranks are the workload's shape: one hold names the dimension, and
        # they are no finding (the rest of the report is judged as usual).
        ev = {**base, **att.alignment.evidence()}
        run.job_hold(ctx, Reason.WORKLOAD_STRUCTURE, ev)
    match att.verdict:
        case Attributed.JOB_WIDE:
            run.job_hold(ctx, Reason.JOB_WIDE_SLOWDOWN, {**base, **_ranks_evidence(d.below)})
            return
        case Attributed.STRUCTURAL:
            ev = {**base, "kind": "structural", **_ranks_evidence(d.below)}
            run.job_hold(ctx, Reason.WORKLOAD_IMBALANCE, ev)
            if not att.findings:
                return
            # The ranks whose own GPU is slow apart from the spread (attribution.py,
            # _gpus_apart) are judged as usual; the rest stay held.
        case Attributed.ALIGNED:
            return
        case Attributed.LOCAL:
            pass
        case _:
            assert_never(att.verdict)
    # Every finding is judged on the streaks as the reports left them, even when an
    # earlier finding's action (restart, drain) resets them for what comes next.
    streaks = ctx.state.streaks
    for f in att.findings:
        _candidate(run, ctx, d, f, streaks)
    if ctx.state.regrouped_at == run.now:
        ctx.state = replace(ctx.state, streaks={}, tests=sequential.forget(ctx.state.tests))
    slow = {f.node for f in att.findings}
    for node in list(ctx.state.ladders):
        if node not in slow:
            mark_records.maybe_recover(run, ctx, d, node)
    if not ctx.decisions or all(
        x.reason in (Reason.STALE_DATA, Reason.INSUFFICIENT_SAMPLES) for x in ctx.decisions
    ):
        ev = {
            "minScore": d.worst_score,
            "worstRank": d.worst_rank,
            "measured": d.measured,
            "sequence": d.sequence,
            **_wait_evidence(d),
        }
        run.job_hold(ctx, Reason.HEALTHY, ev)


def _wait_evidence(d: Digest) -> dict[str, Any]:
    """Victims lifted and the ranks they wait for, when the report carried wait shares."""
    ev: dict[str, Any] = {}
    if d.victims:
        ev["victims"] = _ranks_evidence(d.victims)
    if d.culprits:
        worst = sorted(d.culprits, key=lambda r: (d.culprits[r], r))[:EVIDENCE_RANKS_CAP]
        ev["waitedFor"] = {str(r): d.culprits[r] for r in worst}
    if d.host_side:
        worst = sorted(d.host_side, key=lambda r: (d.host_side[r], r))[:EVIDENCE_RANKS_CAP]
        ev["hostSide"] = {str(r): d.host_side[r] for r in worst}
    return ev


def _ranks_evidence(ranks: Mapping[int, float] | list[int]) -> dict[str, Any]:
    listed = sorted(ranks)
    return {"ranks": listed[:EVIDENCE_RANKS_CAP], "count": len(listed)}


# --- a slow node ------------------------------------------------------------------------


def _persistent(ctx: JobRun, st: Streak | None, at: datetime) -> bool:
    if st is None:
        return False
    p = ctx.policy.persistence
    checks = []
    if p.consecutive_reports is not None:
        checks.append(st.count >= p.consecutive_reports)
    if p.below_for_s is not None:
        checks.append((at - st.since).total_seconds() >= p.below_for_s)
    return all(checks) if p.require == "all" else any(checks)


def _candidate(
    run: Run, ctx: JobRun, d: Digest, f: NodeFinding, streaks: Mapping[Rank, Streak]
) -> None:
    persistent = [r for r in f.ranks if _persistent(ctx, streaks.get(Rank(r)), d.at)]
    ev: dict[str, Any] = {
        "node": f.node,
        "finding": f.kind.value,
        "ranks": list(f.ranks),
        "scores": {str(r): round(d.below[r], 4) for r in f.ranks},
        "threshold": ctx.policy.thresholds.act,
        "reference": ctx.policy.score.reference.value,
        "consecutive": {str(r): streaks[Rank(r)].count for r in f.ranks if Rank(r) in streaks},
        "sequence": d.sequence,
        **_wait_evidence(d),
    }
    counts = {r: streaks[Rank(r)].count for r in f.ranks if Rank(r) in streaks}
    imb = imbalance_of(ctx.state.history, persistent or f.ranks, ctx.policy, counts)
    if imb is not None:
        run.node_hold(ctx, f.node, None, Reason.WORKLOAD_IMBALANCE, {**ev, **imb})
        return
    if not persistent:
        p = ctx.policy.persistence
        ev |= {"needConsecutive": p.consecutive_reports, "needBelowForS": p.below_for_s}
        run.node_hold(ctx, f.node, None, Reason.NOT_PERSISTENT, ev)
        return
    ev["ranks"] = persistent
    gpus = d.gpus_of(persistent)
    elsewhere = hardware_trust.Elsewhere()
    if gpus:
        # What the memory holds of these GPUs is evidence; slow in another job too, it is
        # the hardware (no rank restart helps) when the job may believe it: its own
        # tenant's record, two namespaces', or the probe will check before the node step.
        tenant = hardware_trust.tenant_of(ctx.view)
        ev["gpus"] = hardware_views.describe(
            run.hardware, f.node, gpus, run.now, run.doc.hardware_memory, tenant
        )
        elsewhere = hardware_trust.slow_elsewhere(
            run.hardware, f.node, gpus, ctx.view.key, tenant,
            probed=ctx.policy.confirm is Confirm.PROBE,
        )  # fmt: skip
        if elsewhere.trusted:
            ev["slowElsewhere"] = elsewhere.trusted
        if elsewhere.untrusted:
            ev["slowElsewhereUntrusted"] = elsewhere.untrusted
    lad = ctx.state.ladders.get(f.node)
    if (
        lad is not None
        and lad.step is ActionKind.DRAIN_NODE
        and f.node in ctx.view.pdb_blocked_nodes
    ):
        run.node_hold(ctx, f.node, ActionKind.DRAIN_NODE, Reason.PDB_BLOCKED, ev)
        return
    hardware = bool(elsewhere.trusted) and ctx.policy.hardware.slow_elsewhere_skips_restart
    process = _process_only(d, f.node, persistent)
    if process:
        ev["processOnly"] = True
    move = next_move(lad, ctx.policy.ladder, f.kind, run.now, hardware=hardware, process=process)
    match move:
        case Wait(step=step, until=until):
            ev["until"] = until.isoformat()
            run.rechecks.append(until)
            if mark_records.hold_for_human(run, ctx, f.node, ev):
                return
            run.node_hold(ctx, f.node, step, Reason.AWAITING_EFFECT, ev)
        case Exhausted(step=step):
            run.node_hold(ctx, f.node, step, Reason.LADDER_EXHAUSTED, ev)
        case Take(step=step, attempt=attempt):
            if step in DISRUPTIVE_ACTIONS:
                persistent = _tested(ctx, d, persistent, ev)
                if not persistent:
                    run.node_hold(ctx, f.node, step, Reason.NOT_PERSISTENT, ev)
                    return
            if step in NODE_ACTIONS and ctx.policy.confirm is Confirm.PROBE:
                lad = _confirmed(run, ctx, d, f.node, persistent, step, lad, ev)
                if lad is None:
                    return
            _take(
                run, ctx, d=d, f=f, ranks=persistent, gpus=gpus, step=step, attempt=attempt,
                lad=lad, ev=ev,
            )  # fmt: skip
        case _:
            assert_never(move)


def _process_only(d: Digest, node: NodeName, ranks: list[int]) -> bool:
    """Every slow rank of ``node`` is slow on its host side alone, and fewer of the
    node's ranks than a host finding needs (``score.hostSideOneRank``): the ranks'
    processes are the finding, and no node step mends a process."""
    if not ranks or not all(r in d.host_side for r in ranks):
        return False
    on_node = sum(1 for r in d.host_side if d.node_of.get(r) == node)
    return on_node < host_side.MIN_NODE_RANKS


def _tested(ctx: JobRun, d: Digest, ranks: list[int], ev: dict[str, Any]) -> list[int]:
    """The ranks whose sequential test passes at the policy's false-disruption rate (all
    of ``ranks`` when the policy states none); the test's figures go into ``ev``."""
    rate = ctx.policy.safety.false_disruptions_per_gpu_day
    if rate is None:
        return ranks
    h = sequential.threshold(rate, d.report.window_s)
    tests = ctx.state.tests
    passed = [r for r in ranks if Rank(r) in tests and tests[Rank(r)].passes(h)]
    ev["sequentialTest"] = {
        "threshold": round(h, 3),
        "falseDisruptionsPerGpuDay": rate,
        "passed": passed,
        "statistic": {str(r): round(tests[Rank(r)].cusum, 3) for r in ranks if Rank(r) in tests},
        "wideStatistic": {str(r): round(tests[Rank(r)].wide, 3) for r in ranks if Rank(r) in tests},
        "peerRecord": {str(r): round(tests[Rank(r)].extreme, 3) for r in ranks if Rank(r) in tests},
        "thresholds": {
            "clipped": round(h + sequential.NARROW_EXTRA, 3),
            "wide": round(h + sequential.WIDE_EXTRA, 3),
            "peerRecord": round(h + sequential.EXTREME_EXTRA, 3),
        },
        "scale": {str(r): round(tests[Rank(r)].scale, 5) for r in ranks if Rank(r) in tests},
    }
    if passed:
        ev["ranks"] = passed
    return passed


def _confirmed(  # noqa: PLR0917 (the candidate's context, passed on)
    run: Run,
    ctx: JobRun,
    d: Digest,
    node: NodeName,
    ranks: list[int],
    step: ActionKind,
    lad: LadderState | None,
    ev: dict[str, Any],
) -> LadderState | None:
    """``confirm: probe``: the ladder to take the node step with, or None (held here:
    asked and waiting, or cleared by the answer). Off enforce mode nothing is asked."""
    lad = lad or LadderState(started_at=run.now)
    if not ctx.enforce:
        ev["probe"] = {"wouldAsk": lad.probe_confirmed is None}
        return lad
    cal = d.calibration
    g = probe_check.gate(
        lad, d.report, ranks, ctx.policy.probe, job=ctx.view.key, node=node, now=run.now,
        factors=d.gpu_factors(),
        spread=cal.max_deviation if cal is not None else Calibration().max_deviation,
    )  # fmt: skip
    ev |= g.evidence
    ladders = dict(ctx.state.ladders)
    ladders[node] = g.ladder
    ctx.state = replace(ctx.state, ladders=ladders)
    if g.proceed:
        return g.ladder
    assert g.reason is not None
    run.node_hold(ctx, node, step, g.reason, ev)
    if g.recheck is not None:
        run.rechecks.append(g.recheck)
    return None


def _take(
    run: Run,
    ctx: JobRun,
    *,
    d: Digest,
    f: NodeFinding,
    ranks: list[int],
    gpus: tuple[str, ...],
    step: ActionKind,
    attempt: int,
    lad: LadderState | None,
    ev: dict[str, Any],
) -> None:
    """Take ``step`` on the finding's node when the node and the budgets let it; in
    observe and dry-run mode record it as the would-be act."""
    node, job = f.node, ctx.view.key
    lad = lad or LadderState(started_at=run.now)
    key = f"{job}/{node}/{step.value}/{attempt}/{lad.started_at.strftime('%Y%m%dT%H%M%SZ')}"
    ev |= {"attempt": attempt, "actionKey": key}
    if step in NODE_ACTIONS:
        off = mark_records.hands_off(run, node)
        if off is not None:
            reason, extra = off
            run.node_hold(ctx, node, step, reason, {**ev, **extra})
            return
    # A bounded report (schemaVersion 5) lists its worst nodes and only counts the rest
    # (``summary.omittedNodes``): a budget in percent of the job's nodes counts them all.
    job_nodes = d.job_nodes
    if step in DISRUPTIVE_ACTIONS:
        request = budgets.Request(
            step=step,
            node=node,
            job=job,
            job_state=ctx.state,
            policy=ctx.policy,
            safety=run.doc.cluster,
            job_nodes=job_nodes,
            cluster_nodes=max(run.view.node_count(), job_nodes),
            now=run.now,
            include_simulated=not ctx.enforce,
        )
        admission = budgets.admit(request, run.cluster)
        run.cluster = admission.cluster
        refusal = admission.refusal
        if refusal is not None:
            run.node_hold(ctx, node, step, refusal.reason, {**ev, **refusal.evidence})
            if refusal.until is not None:
                run.rechecks.append(refusal.until)
            return
        ev |= admission.evidence
    match step:
        case ActionKind.RESTART_RANK:
            ev["pods"] = [d.pod_of[r] for r in ranks if r in d.pod_of]
            ev["rayWorkers"] = d.ray_workers(ranks)
        case ActionKind.DRAIN_NODE:
            pods, ray_ids = d.placement(node)
            ev |= {"pods": pods, "rayNodeIds": ray_ids}
        case ActionKind.NOTIFY | ActionKind.TAINT_NODE | ActionKind.CORDON_NODE:
            ev["rayNodeIds"] = d.placement(node)[1]
        case _:
            assert_never(step)
    if step is ActionKind.TAINT_NODE:
        # The actuator writes what the decision says: the effect travels in the record.
        ev["taintEffect"] = ctx.policy.ladder.taint_node.effect.value
    simulated = not ctx.enforce
    ladders = dict(ctx.state.ladders)
    ladders[node] = lad.advanced(step, run.now, simulated=simulated, gpus=gpus)
    ctx.state = replace(ctx.state, ladders=ladders)
    if step in DISRUPTIVE_ACTIONS:
        stamp = ActionStamp(run.now, job, simulated)
        run.cluster, ctx.state = budgets.charge(run.cluster, ctx.state, stamp)
    if step in REGROUPING_ACTIONS:
        # The job's pods changed: ignore the warm-up and start counting anew, so the
        # next step needs evidence gathered after this one. A taint or cordon leaves
        # the running pods alone, so their evidence keeps counting.
        ctx.state = replace(ctx.state, regrouped_at=run.now)
        run.rechecks.append(run.now + timedelta(seconds=ctx.policy.warmup.after_action_s))
    if step in MARK_OF_ACTION:
        rec = mark_records.place(run, ctx, node, MARK_OF_ACTION[step], key, simulated=simulated)
        ev["markedAt"] = rec.applied_at.isoformat()  # what the actuator claims as ours
    if ctx.enforce:
        run.record(ctx, job, node_subject(node), Verdict.ACT, step, Reason.BELOW_THRESHOLD, ev)
    else:
        ev["wouldBe"] = Verdict.ACT.value
        run.node_hold(ctx, node, step, Reason.OBSERVE_MODE, ev)
    timeout = ctx.policy.ladder.step(step).timeout_s
    run.rechecks.append(run.now + timedelta(seconds=timeout))
