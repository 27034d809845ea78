"""The decision core: ``decide(window, state, policies, now) -> Outcome``.

Pure: it reads no clock, environment, file or socket and imports no Kubernetes or Ray.
The operator (per-job reconcile), the Ray-side runner and the simulator call it the same
way: build a ``Window`` of what they observed, pass the ``State`` they persisted last
time and the time, apply the act/undo decisions through their actuators, persist
``Outcome.next_state``, and call again at ``Outcome.recheck_at`` or on new data.

Calls are level-based: deciding twice on the same window decides the same and counts
nothing twice (only reports newer than the state's ``lastReportAt`` advance streaks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, assert_never

from pacekeeper.controller.core import budgets
from pacekeeper.controller.core.attribution import (
    Digest,
    NodeFinding,
    attribute,
    digest,
    imbalance_of,
)
from pacekeeper.controller.core.attribution import Verdict as Attributed
from pacekeeper.controller.core.decisions import (
    JOB_SUBJECT,
    Decision,
    Reason,
    Verdict,
    node_subject,
)
from pacekeeper.controller.core.ids import JobKey, NodeName, Rank
from pacekeeper.controller.core.ladder import Exhausted, Take, Wait, next_move
from pacekeeper.controller.core.observations import (
    ACTION_OF_MARK,
    MARK_OF_ACTION,
    ClusterView,
    JobView,
    MarkKind,
    RejectedReport,
    Window,
)
from pacekeeper.controller.core.policy import (
    DISRUPTIVE_ACTIONS,
    NODE_ACTIONS,
    ActionKind,
    Mode,
    Policy,
    PolicyDocument,
)
from pacekeeper.controller.core.state import (
    ActionStamp,
    JobState,
    LadderState,
    MarkRecord,
    NodeState,
    State,
    Streak,
)
from pacekeeper.detector.score_report import ScoreReport

CONFIRM_GRACE = timedelta(seconds=120)
"""A mark we decided but have not seen on the node after this long is decided again
(same action key): the actuator failed or the controller died before acting."""
EVIDENCE_RANKS_CAP = 64
REGROUPING_ACTIONS = frozenset({ActionKind.RESTART_RANK, ActionKind.DRAIN_NODE})
"""Actions that replace the job's pods (the job regroups, scores restart)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    decisions: tuple[Decision, ...]
    next_state: State
    recheck_at: datetime | None = None
    """The earliest time a decision asked to be looked at again (a ladder timeout, the
    end of a warm-up or cooldown); None when only new data can change anything."""


def decide(window: Window, state: State, policies: PolicyDocument, now: datetime) -> Outcome:
    """Decide on every job in ``window``; jobs not in it keep their state untouched."""
    run = _Run(policies, now, state, window.cluster)
    run.reconcile_marks()
    for jv in sorted(window.jobs, key=lambda j: j.key):
        run.decide_job(jv)
    return run.outcome()


@dataclass(slots=True)
class _Job:
    view: JobView
    policy_name: str
    policy: Policy
    mode: Mode
    state: JobState
    decisions: list[Decision] = field(default_factory=list)

    @property
    def enforce(self) -> bool:
        return self.mode is Mode.ENFORCE


class _Run:
    """Working copies for one ``decide`` call (mutated here, frozen on the way out)."""

    def __init__(
        self, doc: PolicyDocument, now: datetime, state: State, cluster_view: ClusterView
    ) -> None:
        self.doc = doc
        self.now = now
        self.view = cluster_view
        self.cluster = state.cluster
        self.jobs: dict[JobKey, JobState] = dict(state.jobs)
        self.decisions: list[Decision] = []
        self.rechecks: list[datetime] = []

    # --- output --------------------------------------------------------------------

    def outcome(self) -> Outcome:
        return Outcome(
            decisions=tuple(self.decisions),
            next_state=State(jobs=self.jobs, cluster=self.cluster),
            recheck_at=min(self.rechecks) if self.rechecks else None,
        )

    def record(  # noqa: PLR0917 (a decision record has this many parts)
        self,
        ctx: _Job | None,
        job: JobKey,
        subject: str,
        verdict: Verdict,
        action: ActionKind | None,
        reason: Reason,
        evidence: Mapping[str, Any] | None = None,
        *,
        policy: str = "",
        mode: Mode | None = None,
    ) -> Decision:
        d = Decision(
            job=job,
            subject=subject,
            verdict=verdict,
            action=action,
            reason=reason,
            evidence=dict(evidence or {}),
            policy=ctx.policy_name if ctx else policy,
            mode=ctx.mode if ctx else (mode or self.doc.mode),
            decided_at=self.now,
        )
        self.decisions.append(d)
        if ctx is not None:
            ctx.decisions.append(d)
        return d

    # --- cluster pass: our marks against the world ----------------------------------

    def reconcile_marks(self) -> None:
        """Confirm our marks, notice the ones someone else removed (respect it: cooldown,
        no fight), re-issue ones never applied, and adopt ours we have no record of."""
        nodes = dict(self.cluster.nodes)
        for name, ns in self.cluster.nodes.items():
            nv = self.view.nodes.get(name)
            if nv is None:
                continue  # not observed this time: nothing can be concluded
            marks = dict(ns.marks)
            cooldown_until, cause = ns.cooldown_until, ns.cooldown_cause
            for kind, rec in ns.marks.items():
                if rec.simulated:
                    continue
                present = kind in nv.our_marks
                if present and not rec.seen:
                    marks[kind] = replace(rec, seen=True)
                elif not present and rec.seen:
                    del marks[kind]
                    hold_s = self._policy_or_default(rec.policy).cooldowns.node_after_human_s
                    cooldown_until = self.now + timedelta(seconds=hold_s)
                    cause = "humanOverride"
                    for job in rec.holders or (JobKey(""),):
                        self.record(
                            None,
                            job,
                            node_subject(name),
                            Verdict.HOLD,
                            ACTION_OF_MARK[kind],
                            Reason.HUMAN_OVERRIDE,
                            {"mark": kind.value, "cooldownUntil": cooldown_until.isoformat()},
                            policy=rec.policy,
                        )
                elif not present and self.now - rec.applied_at >= CONFIRM_GRACE:
                    mode = Mode.lowest(self.doc.mode, self._policy_or_default(rec.policy).mode)
                    if mode is Mode.ENFORCE:
                        marks[kind] = replace(rec, applied_at=self.now)
                        for job in rec.holders[:1]:
                            self.record(
                                None,
                                job,
                                node_subject(name),
                                Verdict.ACT,
                                ACTION_OF_MARK[kind],
                                Reason.BELOW_THRESHOLD,
                                {"node": name, "actionKey": rec.action_key, "reissue": True},
                                policy=rec.policy,
                                mode=Mode.ENFORCE,
                            )
                    else:
                        del marks[kind]  # never applied and no longer allowed to be
            nodes[name] = replace(
                ns, marks=marks, cooldown_until=cooldown_until, cooldown_cause=cause
            )
        for name, nv in self.view.nodes.items():
            if not nv.our_marks:
                continue
            known = nodes.get(name) or NodeState()
            orphans = {
                k: MarkRecord(
                    applied_at=self.now,
                    holders=(),
                    policy=self.doc.default_policy,
                    action_key=f"adopted/{name}/{k.value}",
                    seen=True,
                )
                for k in nv.our_marks
                if k not in known.marks
            }
            if orphans:
                # Ours by annotation but unknown to our state: count them against the
                # budgets and leave them for a human (nobody's ladder holds them).
                nodes[name] = replace(known, marks={**known.marks, **orphans})
        self.cluster = replace(self.cluster, nodes=nodes)

    def _policy_or_default(self, name: str) -> Policy:
        found = self.doc.policy_for(name) or self.doc.policy_for(None)
        assert found is not None  # the document guarantees its default policy exists
        return found[1]

    # --- one job ------------------------------------------------------------------

    def decide_job(self, jv: JobView) -> None:
        resolved = self.doc.policy_for(jv.policy_name)
        if resolved is None:
            self.record(
                None,
                jv.key,
                JOB_SUBJECT,
                Verdict.HOLD,
                None,
                Reason.UNKNOWN_POLICY,
                {"policy": jv.policy_name, "known": sorted(self.doc.policies)},
                policy=jv.policy_name or "",
            )
            return
        name, policy = resolved
        mode = Mode.lowest(self.doc.mode, policy.mode, jv.mode_override)
        js = self.jobs.get(jv.key) or JobState(first_seen_at=self.now)
        ctx = _Job(jv, name, policy, mode, js)
        if ctx.enforce:
            self._drop_simulated(ctx)
        self._decide_job(ctx)
        self.jobs[jv.key] = ctx.state

    def _decide_job(self, ctx: _Job) -> None:
        jv, policy = ctx.view, ctx.policy
        if self._job_opted_out(jv):
            self._release_all(ctx, Reason.OPTED_OUT)
            self.job_hold(ctx, Reason.OPTED_OUT, {"namespace": jv.namespace, "name": jv.name})
            return
        reports = [r for r in jv.reports if isinstance(r, ScoreReport)]
        rejected = [r for r in jv.reports if isinstance(r, RejectedReport)]
        reports.sort(key=lambda r: (r.generated_at, r.sequence))
        newest_ok = reports[-1].generated_at if reports else None
        bad = [r for r in rejected if newest_ok is None or r.received_at >= newest_ok]
        if bad:
            self.job_hold(ctx, Reason.MALFORMED_REPORT, {"error": bad[-1].error[:500]})
            return
        skew = timedelta(seconds=policy.persistence.max_clock_skew_s)
        future = [r for r in reports if r.generated_at > self.now + skew]
        if future:
            ev = {
                "generatedAt": future[-1].generated_at.isoformat(),
                "sequence": future[-1].sequence,
                "error": "generatedAt is in the future",
            }
            self.job_hold(ctx, Reason.MALFORMED_REPORT, ev)
            return
        if not reports:
            self.job_hold(ctx, Reason.STALE_DATA, {"reports": 0})
            return
        latest = reports[-1]
        age_s = (self.now - latest.generated_at).total_seconds()
        if age_s > policy.persistence.max_report_age_s:
            self.job_hold(
                ctx,
                Reason.STALE_DATA,
                {
                    "ageS": round(age_s, 3),
                    "maxReportAgeS": policy.persistence.max_report_age_s,
                    "sequence": latest.sequence,
                },
            )
            return
        warm_until = self._warm_until(ctx)
        latest_digest: Digest | None = None
        for r in reports:
            if ctx.state.last_report_at is not None and r.generated_at <= ctx.state.last_report_at:
                continue
            ctx.state = replace(ctx.state, last_report_at=r.generated_at)
            if r.generated_at < warm_until:
                continue
            d = digest(r, policy)
            self._absorb(ctx, d)
            latest_digest = d if r is latest else latest_digest
        if latest.generated_at < warm_until:
            self.job_hold(ctx, Reason.WARMING_UP, {"until": warm_until.isoformat()})
            self.rechecks.append(warm_until)
            return
        d = latest_digest or digest(latest, policy)
        self._judge(ctx, d)

    def _warm_until(self, ctx: _Job) -> datetime:
        w = ctx.policy.warmup
        start = ctx.view.started_at or ctx.state.first_seen_at
        until: datetime = start + timedelta(seconds=w.after_job_start_s)
        if ctx.state.regrouped_at is not None:
            until = max(until, ctx.state.regrouped_at + timedelta(seconds=w.after_action_s))
        return until

    def _absorb(self, ctx: _Job, d: Digest) -> None:
        """Advance streaks, history and recovery counters by one new report."""
        js = ctx.state
        act = ctx.policy.thresholds.act
        recover = ctx.policy.thresholds.recover
        streaks = dict(js.streaks)
        for r, _score in d.below.items():
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
            # An unlisted rank (truncated report) clears only when its whole node is fine.
            if (
                nd is not None
                and not nd.below
                and nd.unknown == 0
                and nd.min_score is not None
                and nd.min_score >= act
            ):
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
        ctx.state = replace(js, streaks=streaks, ladders=ladders, history=history)

    def _judge(self, ctx: _Job, d: Digest) -> None:
        if d.unknown:
            self.job_hold(ctx, Reason.STALE_DATA, _ranks_evidence(d.unknown))
        if d.insufficient:
            ev = {
                **_ranks_evidence(d.insufficient),
                "minSamples": ctx.policy.persistence.min_samples,
            }
            self.job_hold(ctx, Reason.INSUFFICIENT_SAMPLES, ev)
        att = attribute(d, ctx.policy)
        base = {
            "belowFraction": round(att.below_fraction, 4),
            "below": len(d.below),
            "measured": d.measured,
            "slowNodes": att.slow_nodes,
            "jobNodes": att.job_nodes,
            "sequence": d.sequence,
        }
        match att.verdict:
            case Attributed.JOB_WIDE:
                self.job_hold(ctx, Reason.JOB_WIDE_SLOWDOWN, {**base, **_ranks_evidence(d.below)})
                return
            case Attributed.STRUCTURAL:
                ev = {**base, "kind": "structural", **_ranks_evidence(d.below)}
                self.job_hold(ctx, Reason.WORKLOAD_IMBALANCE, ev)
                return
            case Attributed.LOCAL:
                pass
            case _:
                assert_never(att.verdict)
        # Every finding is judged on the streaks as the reports left them, even when an
        # earlier finding's action (restart, drain) resets them for what comes next.
        streaks = ctx.state.streaks
        for f in att.findings:
            self._candidate(ctx, d, f, streaks)
        if ctx.state.regrouped_at == self.now:
            ctx.state = replace(ctx.state, streaks={})
        slow = {f.node for f in att.findings}
        for node in list(ctx.state.ladders):
            if node not in slow:
                self._maybe_recover(ctx, d, node)
        if not ctx.decisions or all(
            x.reason in (Reason.STALE_DATA, Reason.INSUFFICIENT_SAMPLES) for x in ctx.decisions
        ):
            ev = {
                "minScore": d.worst_score,
                "worstRank": d.worst_rank,
                "measured": d.measured,
                "sequence": d.sequence,
            }
            self.job_hold(ctx, Reason.HEALTHY, ev)

    # --- a slow subject -------------------------------------------------------------

    def _persistent(self, ctx: _Job, st: Streak | None, at: datetime) -> bool:
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
        self, ctx: _Job, d: Digest, f: NodeFinding, streaks: Mapping[Rank, Streak]
    ) -> None:
        persistent = [r for r in f.ranks if self._persistent(ctx, streaks.get(Rank(r)), d.at)]
        ev: dict[str, Any] = {
            "node": f.node,
            "finding": f.kind.value,
            "ranks": list(f.ranks),
            "scores": {str(r): round(d.below[r], 4) for r in f.ranks},
            "threshold": ctx.policy.thresholds.act,
            "consecutive": {str(r): streaks[Rank(r)].count for r in f.ranks if Rank(r) in streaks},
            "sequence": d.sequence,
        }
        imb = imbalance_of(ctx.state.history, persistent or f.ranks, ctx.policy)
        if imb is not None:
            self.node_hold(ctx, f.node, None, Reason.WORKLOAD_IMBALANCE, {**ev, **imb})
            return
        if not persistent:
            p = ctx.policy.persistence
            ev |= {"needConsecutive": p.consecutive_reports, "needBelowForS": p.below_for_s}
            self.node_hold(ctx, f.node, None, Reason.NOT_PERSISTENT, ev)
            return
        ev["ranks"] = persistent
        lad = ctx.state.ladders.get(f.node)
        if (
            lad is not None
            and lad.step is ActionKind.DRAIN_NODE
            and f.node in ctx.view.pdb_blocked_nodes
        ):
            self.node_hold(ctx, f.node, ActionKind.DRAIN_NODE, Reason.PDB_BLOCKED, ev)
            return
        move = next_move(lad, ctx.policy.ladder, f.kind, self.now)
        match move:
            case Wait(step=step, until=until):
                ev["until"] = until.isoformat()
                self.node_hold(ctx, f.node, step, Reason.AWAITING_EFFECT, ev)
                self.rechecks.append(until)
            case Exhausted(step=step):
                self.node_hold(ctx, f.node, step, Reason.LADDER_EXHAUSTED, ev)
            case Take(step=step, attempt=attempt):
                self._take(
                    ctx, d=d, f=f, ranks=persistent, step=step, attempt=attempt, lad=lad, ev=ev
                )
            case _:
                assert_never(move)

    def _take(
        self,
        ctx: _Job,
        *,
        d: Digest,
        f: NodeFinding,
        ranks: list[int],
        step: ActionKind,
        attempt: int,
        lad: LadderState | None,
        ev: dict[str, Any],
    ) -> None:
        node, job = f.node, ctx.view.key
        nv = self.view.node(node)
        lad = lad or LadderState(started_at=self.now)
        key = f"{job}/{node}/{step.value}/{attempt}/{lad.started_at.strftime('%Y%m%dT%H%M%SZ')}"
        ev |= {"attempt": attempt, "actionKey": key}
        if step in NODE_ACTIONS:
            if self._node_opted_out(node):
                self.node_hold(ctx, node, step, Reason.OPTED_OUT, ev)
                return
            if nv.cordoned_by_others:
                self.node_hold(ctx, node, step, Reason.NOT_OURS, {**ev, "cordonedBy": "other"})
                return
        include_sim = not ctx.enforce
        job_nodes = len(d.nodes)
        cluster_nodes = max(self.view.node_count(), job_nodes)
        if step in DISRUPTIVE_ACTIONS:
            self.cluster = budgets.with_demand(
                self.cluster, f"{job}|{node}", self.doc.cluster.breaker, self.now
            )
            refusal = budgets.check(
                step=step,
                node=node,
                job=job,
                job_state=ctx.state,
                cluster=self.cluster,
                policy=ctx.policy,
                safety=self.doc.cluster,
                job_nodes=job_nodes,
                cluster_nodes=cluster_nodes,
                now=self.now,
                include_simulated=include_sim,
            )
            if refusal is not None:
                self.node_hold(ctx, node, step, refusal.reason, {**ev, **refusal.evidence})
                until = refusal.evidence.get("until")
                if isinstance(until, str):
                    self.rechecks.append(datetime.fromisoformat(until))
                return
            ev |= budgets.budget_evidence(
                self.cluster,
                job=job,
                policy=ctx.policy,
                safety=self.doc.cluster,
                job_nodes=job_nodes,
                cluster_nodes=cluster_nodes,
                include_simulated=include_sim,
            )
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
        simulated = not ctx.enforce
        ladders = dict(ctx.state.ladders)
        ladders[node] = lad.advanced(step, self.now, simulated=simulated)
        ctx.state = replace(ctx.state, ladders=ladders)
        if step in DISRUPTIVE_ACTIONS:
            self.cluster = budgets.with_stamp(self.cluster, ActionStamp(self.now, job, simulated))
            ctx.state = replace(ctx.state, last_disruptive_at=self.now)
        if step in REGROUPING_ACTIONS:
            # The job's pods changed: ignore the warm-up and start counting anew, so the
            # next step needs evidence gathered after this one. A taint or cordon leaves
            # the running pods alone, so their evidence keeps counting.
            ctx.state = replace(ctx.state, regrouped_at=self.now)
            self.rechecks.append(self.now + timedelta(seconds=ctx.policy.warmup.after_action_s))
        if step in MARK_OF_ACTION:
            self._place_mark(ctx, node, MARK_OF_ACTION[step], key, simulated)
        if ctx.enforce:
            self.record(ctx, job, node_subject(node), Verdict.ACT, step, Reason.BELOW_THRESHOLD, ev)
        else:
            ev["wouldBe"] = Verdict.ACT.value
            self.node_hold(ctx, node, step, Reason.OBSERVE_MODE, ev)
        timeout = ctx.policy.ladder.step(step).timeout_s
        self.rechecks.append(self.now + timedelta(seconds=timeout))

    def _place_mark(
        self, ctx: _Job, node: NodeName, kind: MarkKind, key: str, simulated: bool
    ) -> None:
        nodes = dict(self.cluster.nodes)
        ns = nodes.get(node) or NodeState()
        marks = dict(ns.marks)
        rec = marks.get(kind)
        job = ctx.view.key
        if rec is not None:
            if job not in rec.holders:
                marks[kind] = replace(rec, holders=(*rec.holders, job))
        else:
            marks[kind] = MarkRecord(
                applied_at=self.now,
                holders=(job,),
                policy=ctx.policy_name,
                action_key=key,
                seen=kind in self.view.node(node).our_marks,
                simulated=simulated,
            )
        nodes[node] = replace(ns, marks=marks)
        self.cluster = replace(self.cluster, nodes=nodes)

    # --- recovery and undo -------------------------------------------------------------

    def _maybe_recover(self, ctx: _Job, d: Digest, node: NodeName) -> None:
        lad = ctx.state.ladders[node]
        rc = ctx.policy.recovery
        state = d.node_state(node, ctx.policy.thresholds.recover)
        ev: dict[str, Any] = {
            "node": node,
            "recoverThreshold": ctx.policy.thresholds.recover,
            "recoverCount": lad.recover_count,
            "needReports": rc.consecutive_reports,
            "holdS": rc.hold_s,
            "ladderStep": lad.step.value if lad.step else None,
        }
        if state == "absent":
            held = self._marks_held(ctx.view.key, node)
            if not held:
                self._close_ladder(ctx, node)
                self.node_hold(ctx, node, None, Reason.RECOVERED, {**ev, "cause": "ranksLeftNode"})
                return
            if rc.release_after_s is not None and lad.last_action_at is not None:
                expires = lad.last_action_at + timedelta(seconds=rc.release_after_s)
                if self.now >= expires:
                    self._release(ctx, node, Reason.MARK_EXPIRED, ev)
                    return
                self.rechecks.append(expires)
            return  # the job left the node: its marks stay for a human
        since = lad.recovering_since
        if (
            lad.recover_count >= rc.consecutive_reports
            and since is not None
            and (self.now - since).total_seconds() >= rc.hold_s
        ):
            self._release(ctx, node, Reason.RECOVERED, ev)
            return
        if since is not None:
            self.rechecks.append(since + timedelta(seconds=rc.hold_s))
        ev["nodeState"] = state
        self.node_hold(ctx, node, None, Reason.AWAITING_EFFECT, ev)

    def _marks_held(self, job: JobKey, node: NodeName) -> list[MarkKind]:
        ns = self.cluster.nodes.get(node)
        if ns is None:
            return []
        return [k for k, rec in ns.marks.items() if job in rec.holders]

    def _close_ladder(self, ctx: _Job, node: NodeName) -> None:
        ladders = dict(ctx.state.ladders)
        ladders.pop(node, None)
        ctx.state = replace(ctx.state, ladders=ladders)

    def _release(self, ctx: _Job, node: NodeName, reason: Reason, ev: dict[str, Any]) -> None:
        """Let go of this job's marks on ``node``; undo those nobody else holds. Undo is
        never blocked by budgets, the breaker or the mode (it only reduces harm)."""
        job = ctx.view.key
        nodes = dict(self.cluster.nodes)
        ns = nodes.get(node) or NodeState()
        marks = dict(ns.marks)
        undone = False
        for kind, rec in ns.marks.items():
            if job not in rec.holders:
                continue
            rest = tuple(h for h in rec.holders if h != job)
            if rest:
                marks[kind] = replace(rec, holders=rest)
                self.node_hold(
                    ctx, node, ACTION_OF_MARK[kind], reason, {**ev, "stillHeldBy": list(rest)}
                )
                continue
            del marks[kind]
            uev = {**ev, "mark": kind.value, "actionKey": f"undo/{rec.action_key}"}
            if rec.simulated:
                self.node_hold(
                    ctx, node, ACTION_OF_MARK[kind], Reason.OBSERVE_MODE, {**uev, "wouldBe": "undo"}
                )
            else:
                self.record(
                    ctx, job, node_subject(node), Verdict.UNDO, ACTION_OF_MARK[kind], reason, uev
                )
                undone = True
        cooldown_until, cause = ns.cooldown_until, ns.cooldown_cause
        if undone:
            cooldown_until = self.now + timedelta(seconds=ctx.policy.cooldowns.node_after_undo_s)
            cause = "afterUndo"
        nodes[node] = replace(ns, marks=marks, cooldown_until=cooldown_until, cooldown_cause=cause)
        self.cluster = replace(self.cluster, nodes=nodes)
        if not any(x.subject == node_subject(node) for x in ctx.decisions):
            self.node_hold(ctx, node, None, reason, ev)
        self._close_ladder(ctx, node)

    def _release_all(self, ctx: _Job, reason: Reason) -> None:
        nodes = {
            n
            for n, ns in self.cluster.nodes.items()
            for r in ns.marks.values()
            if ctx.view.key in r.holders
        }
        for node in sorted(nodes):
            self._release(ctx, node, reason, {"node": node})
        ctx.state = replace(ctx.state, ladders={}, streaks={})

    def _drop_simulated(self, ctx: _Job) -> None:
        """Progress made while observing is not a record of real actions: in enforce mode
        it is forgotten, so the real ladder starts from the bottom."""
        job = ctx.view.key
        ladders = {n: lad for n, lad in ctx.state.ladders.items() if not lad.simulated}
        if len(ladders) != len(ctx.state.ladders):
            ctx.state = replace(ctx.state, ladders=ladders)
        nodes = dict(self.cluster.nodes)
        changed = False
        for name, ns in self.cluster.nodes.items():
            marks = {k: r for k, r in ns.marks.items() if not (r.simulated and job in r.holders)}
            if len(marks) != len(ns.marks):
                nodes[name] = replace(ns, marks=marks)
                changed = True
        stamps = tuple(s for s in self.cluster.stamps if not (s.simulated and s.job == job))
        if changed or len(stamps) != len(self.cluster.stamps):
            self.cluster = replace(self.cluster, nodes=nodes, stamps=stamps)

    # --- opt-outs and small helpers ----------------------------------------------------

    def _job_opted_out(self, jv: JobView) -> bool:
        o = self.doc.opt_outs
        return (
            jv.opted_out
            or (jv.namespace is not None and jv.namespace in o.namespaces)
            or jv.key in o.jobs
            or (bool(jv.name) and jv.name in o.jobs)
        )

    def _node_opted_out(self, node: NodeName) -> bool:
        o = self.doc.opt_outs
        if node in o.nodes:
            return True
        labels = self.view.node(node).labels
        return any(sel.matches(labels) for sel in o.node_selectors)

    def job_hold(self, ctx: _Job, reason: Reason, evidence: Mapping[str, Any]) -> None:
        self.record(ctx, ctx.view.key, JOB_SUBJECT, Verdict.HOLD, None, reason, evidence)

    def node_hold(
        self,
        ctx: _Job,
        node: NodeName,
        action: ActionKind | None,
        reason: Reason,
        evidence: Mapping[str, Any],
    ) -> None:
        self.record(ctx, ctx.view.key, node_subject(node), Verdict.HOLD, action, reason, evidence)


def _ranks_evidence(ranks: Mapping[int, float] | list[int]) -> dict[str, Any]:
    listed = sorted(ranks)
    return {"ranks": listed[:EVIDENCE_RANKS_CAP], "count": len(listed)}
