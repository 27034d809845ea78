"""A job's window of reports, before anything is judged: may the job be judged at all
(policy, opt-out), is its newest report usable (malformed, from the future, stale,
inside a warm-up), and what its new reports add to its memory (streaks, imbalance
history, recovery counts).

Separate from ``job_decisions`` (what the newest report calls for) because these gates
decide whether there is evidence, not what it says; the first that applies decides.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from pacekeeper.controller.core import (
    hardware_memory,
    hardware_trust,
    mark_records,
    sequential,
    tail_gate,
)
from pacekeeper.controller.core.attribution import Digest, digest, learn_early, with_pattern
from pacekeeper.controller.core.decisions import JOB_SUBJECT, Reason, Verdict
from pacekeeper.controller.core.hardware_memory import Observation
from pacekeeper.controller.core.ids import NodeName, Rank
from pacekeeper.controller.core.observations import JobView, RejectedReport
from pacekeeper.controller.core.peers import GpuCalibration
from pacekeeper.controller.core.policy import Mode
from pacekeeper.controller.core.run import JobRun, Run
from pacekeeper.controller.core.state import JobState, Streak
from pacekeeper.detector.score_report import ScoreReport


def open_job(run: Run, jv: JobView) -> JobRun | None:
    """The job with its policy and effective mode resolved; None (after recording
    ``UnknownPolicy``) when it names a policy the document does not have."""
    resolved = run.doc.policy_for(jv.policy_name)
    if resolved is None:
        known = sorted(run.doc.policies)
        ev: dict[str, Any] = {"policy": jv.policy_name, "known": known}
        if jv.policy_source:
            ev["policySource"] = jv.policy_source
        close = difflib.get_close_matches(jv.policy_name or "", known, n=1)
        if close:
            ev["didYouMean"] = close[0]
        run.record(
            None, jv.key, JOB_SUBJECT, Verdict.HOLD, None, Reason.UNKNOWN_POLICY, ev,
            policy=jv.policy_name or "",
        )  # fmt: skip
        return None
    name, policy = resolved
    mode = Mode.lowest(run.doc.mode, policy.mode, jv.mode_override)
    sources = _sources(jv, mode)
    js = run.jobs.get(jv.key) or JobState(first_seen_at=run.now)
    chosen = (sources.get("policySource"), sources.get("modeSource"))
    if (js.policy_source, js.mode_source) != chosen:
        js = replace(js, policy_source=chosen[0], mode_source=chosen[1])
    return JobRun(jv, name, policy, mode, js, sources=sources)


def _sources(jv: JobView, mode: Mode) -> dict[str, str]:
    """The job's own annotations that chose its policy or hold its mode. The mode
    annotation is named whenever it sits at the effective mode, even when the document
    is there too: it alone keeps the job there once the document is raised."""
    out: dict[str, str] = {}
    if jv.policy_name is not None and jv.policy_source:
        out["policySource"] = jv.policy_source
    lowered = jv.mode_override is mode and mode is not Mode.ENFORCE
    if lowered and jv.mode_source:
        out["modeSource"] = jv.mode_source
    return out


def read_window(run: Run, ctx: JobRun) -> Digest | None:
    """Absorb the job's new reports; the newest report's digest when it may be judged,
    else None after recording why not."""
    jv, policy = ctx.view, ctx.policy
    if _job_opted_out(run, jv):
        mark_records.release_all(run, ctx, Reason.OPTED_OUT)
        run.job_hold(ctx, Reason.OPTED_OUT, {"namespace": jv.namespace, "name": jv.name})
        return None
    reports = [r for r in jv.reports if isinstance(r, ScoreReport)]
    rejected = [r for r in jv.reports if isinstance(r, RejectedReport)]
    reports.sort(key=lambda r: (r.generated_at, r.sequence))
    newest_ok = reports[-1].generated_at if reports else None
    bad = [r for r in rejected if newest_ok is None or r.received_at >= newest_ok]
    if bad:
        # MalformedReport, or UntrustedReport when its identities contradict the API.
        run.job_hold(ctx, bad[-1].reason, {"error": bad[-1].error[:500], **bad[-1].evidence})
        return None
    skew = timedelta(seconds=policy.persistence.max_clock_skew_s)
    future = [r for r in reports if r.generated_at > run.now + skew]
    if future:
        ev = {
            "generatedAt": future[-1].generated_at.isoformat(),
            "sequence": future[-1].sequence,
            "error": "generatedAt is in the future",
        }
        run.job_hold(ctx, Reason.MALFORMED_REPORT, ev)
        return None
    if not reports:
        run.job_hold(ctx, Reason.STALE_DATA, {"reports": 0})
        return None
    latest = reports[-1]
    age_s = (run.now - latest.generated_at).total_seconds()
    if age_s > policy.persistence.max_report_age_s:
        run.job_hold(
            ctx,
            Reason.STALE_DATA,
            {
                "ageS": round(age_s, 3),
                "maxReportAgeS": policy.persistence.max_report_age_s,
                "sequence": latest.sequence,
            },
        )
        return None
    warm_until = _warm_until(ctx)
    latest_digest: Digest | None = None
    for r in reports:
        if ctx.state.last_report_at is not None and r.generated_at <= ctx.state.last_report_at:
            continue
        ctx.state = replace(ctx.state, last_report_at=r.generated_at)
        if r.generated_at < warm_until:
            calibrate = partial(_calibration, run, ctx, r)
            layout = learn_early(ctx.state.layout, r, policy, calibrate)
            ctx.state = replace(ctx.state, layout=layout)
            _learn_noise(ctx, r, calibrate)
            continue
        d = digest(r, policy, _calibration(run, ctx, r))
        d.placed_nodes = jv.placed_nodes
        _remember(run, ctx, d)
        _absorb(ctx, d)
        latest_digest = d if r is latest else latest_digest
    if latest.generated_at < warm_until:
        run.job_hold(ctx, Reason.WARMING_UP, {"until": warm_until.isoformat()})
        run.rechecks.append(warm_until)
        return None
    if latest_digest is not None:
        return latest_digest
    d = digest(latest, policy, _calibration(run, ctx, latest))
    d.placed_nodes = jv.placed_nodes
    with_pattern(ctx.state.layout, d, policy.thresholds.act, learn=False)
    return d


def _learn_noise(
    ctx: JobRun, report: ScoreReport, calibration: Callable[[], GpuCalibration | None]
) -> None:
    """A warm-up report teaches the sequential tests the job's noise (their histories)
    and moves no statistic: the disruptive steps then need no history of their own
    after the warm-up, and a rank slow while it reloads builds no evidence."""
    if ctx.policy.safety.false_disruptions_per_gpu_day is None:
        return
    d = digest(report, ctx.policy, calibration())
    shift = sequential.shift_for(ctx.policy.thresholds.act)
    scores, slow_at = tail_gate.test_input(d, ctx.policy, ctx.state.gpu_slow_at)
    tests = sequential.advance(ctx.state.tests, scores, shift=shift, learn_only=True)
    ctx.state = replace(ctx.state, tests=tests, gpu_slow_at=slow_at)


def _job_opted_out(run: Run, jv: JobView) -> bool:
    o = run.doc.opt_outs
    return (
        jv.opted_out
        or (jv.namespace is not None and jv.namespace in o.namespaces)
        or jv.key in o.jobs
        or (bool(jv.name) and jv.name in o.jobs)
    )


def _warm_until(ctx: JobRun) -> datetime:
    w = ctx.policy.warmup
    start = ctx.view.started_at or ctx.state.first_seen_at
    until: datetime = start + timedelta(seconds=w.after_job_start_s)
    if ctx.state.regrouped_at is not None:
        until = max(until, ctx.state.regrouped_at + timedelta(seconds=w.after_action_s))
    return until


def _calibration(run: Run, ctx: JobRun, report: ScoreReport) -> GpuCalibration | None:
    return hardware_memory.calibration(
        run.hardware, report, run.doc.hardware_memory, ctx.policy.hardware,
        hardware_trust.tenant_of(ctx.view),
    )  # fmt: skip


def _remember(run: Run, ctx: JobRun, d: Digest) -> None:
    """Teach the memory of hardware what this report says of each GPU it names (before
    the report moves the job's streaks). A rank below now or in a streak, on a node the
    job's ladder is on or that carries our marks, is flagged: it teaches no calibration,
    so a failing GPU cannot make its failure its normal."""
    settings = run.doc.hardware_memory
    if d.gpu_ratio is None or not settings.enabled:
        return
    js = ctx.state
    marked = frozenset(n for n, ns in run.cluster.nodes.items() if ns.marks)
    observations = [
        Observation(
            node=NodeName(r.node),
            uuid=r.gpu_uuid,
            ratio=ratio,
            flagged=(
                r.rank in d.below
                or Rank(r.rank) in js.streaks
                or r.node in js.ladders
                or r.node in marked
            ),
        )
        for r, ratio in zip(d.report.ranks, d.gpu_ratio, strict=True)
        if r.gpu_uuid is not None and ratio is not None
    ]
    if not observations:
        return
    start = ctx.view.started_at or js.first_seen_at
    since = max(start, js.regrouped_at) if js.regrouped_at is not None else start
    run.hardware = hardware_memory.observe(
        run.hardware,
        observations,
        job=ctx.view.key,
        since=since,
        at=d.at,
        window_s=d.report.window_s,
        settings=settings,
        protected=marked,
        turn=d.sequence,
        tenant=hardware_trust.tenant_of(ctx.view),
    )


def _absorb(ctx: JobRun, d: Digest) -> None:
    """Advance streaks, history and recovery counters by one new report."""
    js = ctx.state
    act = ctx.policy.thresholds.act
    recover = ctx.policy.thresholds.recover
    layout = with_pattern(js.layout, d, act, learn=True)
    held = d.pattern.ranks if d.pattern is not None else frozenset()
    streaks = dict(js.streaks)
    for r, _score in d.below.items():
        if r in held:
            streaks.pop(Rank(r), None)  # the workload's shape: a later fault counts anew
            continue
        st = streaks.get(Rank(r))
        node = d.node_of[r]
        streaks[Rank(r)] = Streak(st.count + 1, st.since, node) if st else Streak(1, d.at, node)
    for r in list(streaks):
        if r in d.below:
            continue
        if r >= d.world_size or d.is_ok(r):
            del streaks[r]
            continue
        nd = d.nodes.get(streaks[r].node)
        # An unlisted rank (truncated report) clears only when its whole node is fine;
        # on a node the report only counts, when every counted node is.
        if (
            nd is not None
            and not nd.below
            and nd.unknown == 0
            and nd.min_score is not None
            and nd.min_score >= act
        ) or (nd is None and d.unlisted_floor is not None and d.unlisted_floor >= act):
            del streaks[r]
    ladders = dict(js.ladders)
    for node, lad in js.ladders.items():
        match d.node_state(node, recover):
            case "recovered":
                ladders[node] = lad.recovering(d.at)
            case "below" | "between":
                ladders[node] = lad.relapsed()
            case _:
                pass  # Unknown or gone: neither counts nor clears
    keep = ctx.policy.attribution.imbalance_history
    history = (*js.history, d.to_history())[-keep:]
    tests, slow_at = js.tests, js.gpu_slow_at
    if ctx.policy.safety.false_disruptions_per_gpu_day is not None:
        shift = sequential.shift_for(act)
        # The test judges a GPU finding as broadly as its kernels show it (breadth.py),
        # and a tail finding only where the GPU was slow within the tail (tail_gate.py).
        scores, slow_at = tail_gate.test_input(d, ctx.policy, js.gpu_slow_at)
        tests = sequential.advance(js.tests, scores, shift=shift)
    ctx.state = replace(
        js,
        streaks=streaks,
        ladders=ladders,
        history=history,
        layout=layout,
        tests=tests,
        gpu_slow_at=slow_at,
    )
