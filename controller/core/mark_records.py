"""Our marks on nodes as the state records them, against the world and the jobs.

The state's ``MarkRecord``s say which taints and cordons we placed, for which jobs.
Here they are kept honest: confirmed when a node shows them, forgotten with a cooldown
when a human removed them (``HumanOverride``: we never fight a human), decided again
when never applied, adopted when ours by annotation but unknown; placed and shared
between jobs; released (``undo``) when a job's node recovered, its mark expired or the
job opted out; and left alone where someone else cordoned a node (``NotOurs``).

Separate from ``marks.py``, which holds the keys and provenance annotations on the
Kubernetes objects themselves (what the shell writes and reads back); this module is
the core's bookkeeping of those marks and the decisions it takes about them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pacekeeper.controller.core import hardware_memory, hardware_trust
from pacekeeper.controller.core.attribution import Digest
from pacekeeper.controller.core.decisions import Reason, Verdict, node_subject
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ACTION_OF_MARK, MARK_OF_ACTION, MarkKind
from pacekeeper.controller.core.policy import Mode, Policy
from pacekeeper.controller.core.run import JobRun, Run
from pacekeeper.controller.core.state import MarkRecord, NodeState

CONFIRM_GRACE = timedelta(seconds=120)
"""A mark we decided but have not seen on the node after this long is decided again
(same action key): the actuator failed or the controller died before acting."""


# --- the cluster pass: our marks against the world -------------------------------------


def reconcile(run: Run) -> None:
    """Confirm our marks, notice the ones someone else removed (respect it: cooldown,
    no fight), re-issue ones never applied, and adopt ours we have no record of."""
    nodes: dict[NodeName, NodeState] | None = None  # copied at the first change: most
    # reconciles change no node's record
    for name, ns in run.cluster.nodes.items():
        if not ns.marks:
            continue  # a cooldown alone: nothing to confirm
        nv = run.view.nodes.get(name)
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
                hold_s = _policy_or_default(run, rec.policy).cooldowns.node_after_human_s
                cooldown_until = run.now + timedelta(seconds=hold_s)
                cause = "humanOverride"
                _hand_to_human(run, rec.holders, name, kind)
                for job in rec.holders or (JobKey(""),):
                    run.record(
                        None,
                        job,
                        node_subject(name),
                        Verdict.HOLD,
                        ACTION_OF_MARK[kind],
                        Reason.HUMAN_OVERRIDE,
                        {
                            "mark": kind.value,
                            "cooldownUntil": cooldown_until.isoformat(),
                            "markedAt": rec.applied_at.isoformat(),
                        },
                        policy=rec.policy,
                    )
            elif not present and run.now - rec.applied_at >= CONFIRM_GRACE:
                mode = Mode.lowest(run.doc.mode, _policy_or_default(run, rec.policy).mode)
                if mode is Mode.ENFORCE:
                    marks[kind] = replace(rec, applied_at=run.now)
                    for job in rec.holders[:1]:
                        run.record(
                            None,
                            job,
                            node_subject(name),
                            Verdict.ACT,
                            ACTION_OF_MARK[kind],
                            Reason.BELOW_THRESHOLD,
                            {
                                "node": name,
                                "actionKey": rec.action_key,
                                "reissue": True,
                                "markedAt": run.now.isoformat(),
                            },
                            policy=rec.policy,
                            mode=Mode.ENFORCE,
                        )
                else:
                    del marks[kind]  # never applied and no longer allowed to be
        if marks == ns.marks and (cooldown_until, cause) == (ns.cooldown_until, ns.cooldown_cause):
            continue
        if nodes is None:
            nodes = dict(run.cluster.nodes)
        nodes[name] = replace(ns, marks=marks, cooldown_until=cooldown_until, cooldown_cause=cause)
    for name in run.view.marked:
        nv = run.view.nodes[name]
        known = (run.cluster.nodes if nodes is None else nodes).get(name) or NodeState()
        orphans = {
            k: MarkRecord(
                applied_at=run.now,
                holders=(),
                policy=run.doc.default_policy,
                action_key=f"adopted/{name}/{k.value}",
                seen=True,
            )
            for k in nv.our_marks
            if k not in known.marks
        }
        if orphans:
            # Ours by annotation but unknown to our state: count them against the
            # budgets and leave them for a human (nobody's ladder holds them).
            if nodes is None:
                nodes = dict(run.cluster.nodes)
            nodes[name] = replace(known, marks={**known.marks, **orphans})
    if nodes is not None:
        run.cluster = replace(run.cluster, nodes=nodes)


def _hand_to_human(run: Run, holders: tuple[JobKey, ...], node: NodeName, kind: MarkKind) -> None:
    """The holders' episodes on ``node`` remember that a human took the node from them
    (holders whose state this call does not carry find out in ``human_took``)."""
    for job in holders:
        js = run.jobs.get(job)
        lad = js.ladders.get(node) if js is not None else None
        if js is None or lad is None or lad.human_override == kind.value:
            continue
        ladders = {**js.ladders, node: replace(lad, human_override=kind.value)}
        run.jobs[job] = replace(js, ladders=ladders)


def human_took(run: Run, ctx: JobRun, node: NodeName) -> MarkKind | None:
    """The mark of the ladder's current step, when a human removed it: that mark is the
    human's now, so while the ladder stays on that step no decision of ours on the node
    may read as if we were waiting on our own action (``AwaitingEffect``). A later step
    (after the node's cooldown) is a new mark of ours."""
    lad = ctx.state.ladders.get(node)
    kind = MARK_OF_ACTION.get(lad.step) if lad is not None and lad.step is not None else None
    if lad is None or kind is None:
        return None
    if lad.human_override == kind.value:
        return kind
    ns = run.cluster.nodes.get(node)
    if lad.simulated or ns is None or ns.cooldown_cause != "humanOverride":
        return None
    rec = ns.marks.get(kind)
    if rec is not None and ctx.view.key in rec.holders:
        return None
    # Our ladder placed this mark and no record of ours holds it any more, while the
    # node's cooldown says a human removed one: the cluster pass that saw it ran for
    # another job, whose call did not carry this job's state.
    ladders = {**ctx.state.ladders, node: replace(lad, human_override=kind.value)}
    ctx.state = replace(ctx.state, ladders=ladders)
    return kind


def hold_for_human(run: Run, ctx: JobRun, node: NodeName, ev: dict[str, Any]) -> bool:
    """Hold ``node`` as the human's (True) when a human took a mark of this episode."""
    kind = human_took(run, ctx, node)
    if kind is None:
        return False
    run.node_hold(
        ctx, node, ACTION_OF_MARK[kind], Reason.HUMAN_OVERRIDE,
        {**ev, "mark": kind.value, "heldBy": "human"},
    )  # fmt: skip
    return True


def _policy_or_default(run: Run, name: str) -> Policy:
    found = run.doc.policy_for(name) or run.doc.policy_for(None)
    assert found is not None  # the document guarantees its default policy exists
    return found[1]


# --- placing marks ---------------------------------------------------------------------


def hands_off(run: Run, node: NodeName) -> tuple[Reason, dict[str, Any]] | None:
    """Why no node action may touch ``node`` (opted out, or cordoned by someone else:
    never fight a human or another system), with the evidence to add; None: it may."""
    if _node_opted_out(run, node):
        return Reason.OPTED_OUT, {}
    if run.view.node(node).cordoned_by_others:
        return Reason.NOT_OURS, {"cordonedBy": "other"}
    ns = run.cluster.nodes.get(node)
    unheld = [k.value for k, r in (ns.marks if ns else {}).items() if not r.holders]
    if unheld:
        # A mark with our note that no record of ours placed (adopted above): a note can
        # outlive our mark and sit beside a human's, so it is nobody's to claim.
        return Reason.NOT_OURS, {"markedBy": "unknown", "marks": sorted(unheld)}
    return None


def _node_opted_out(run: Run, node: NodeName) -> bool:
    o = run.doc.opt_outs
    if node in o.nodes:
        return True
    labels = run.view.node(node).labels
    return any(sel.matches(labels) for sel in o.node_selectors)


def place(
    run: Run, ctx: JobRun, node: NodeName, kind: MarkKind, key: str, *, simulated: bool
) -> MarkRecord:
    """Record ``kind`` on ``node`` for this job (joining the holders of one already there);
    the record, whose time the mark's note on the node must carry to count as ours."""
    nodes = dict(run.cluster.nodes)
    ns = nodes.get(node) or NodeState()
    marks = dict(ns.marks)
    rec = marks.get(kind)
    job = ctx.view.key
    if rec is not None:
        if job not in rec.holders:
            marks[kind] = replace(rec, holders=(*rec.holders, job))
    else:
        marks[kind] = MarkRecord(
            applied_at=run.now,
            holders=(job,),
            policy=ctx.policy_name,
            action_key=key,
            seen=kind in run.view.node(node).our_marks,
            simulated=simulated,
        )
    nodes[node] = replace(ns, marks=marks)
    run.cluster = replace(run.cluster, nodes=nodes)
    return marks[kind]


# --- recovery and undo -----------------------------------------------------------------


def maybe_recover(run: Run, ctx: JobRun, d: Digest, node: NodeName) -> None:
    """A node with this job's ladder that is no longer slow: wait until it has recovered
    long enough, then let go of the job's marks there."""
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
        held = _marks_held(run, ctx.view.key, node)
        if not held:
            ctx.close_ladder(node)
            run.node_hold(ctx, node, None, Reason.RECOVERED, {**ev, "cause": "ranksLeftNode"})
            return
        if rc.release_after_s is not None and lad.last_action_at is not None:
            expires = lad.last_action_at + timedelta(seconds=rc.release_after_s)
            if run.now >= expires:
                release(run, ctx, node, Reason.MARK_EXPIRED, ev)
                return
            run.rechecks.append(expires)
        return  # the job left the node: its marks stay for a human
    since = lad.recovering_since
    pending: dict[str, Any] = {}
    if (
        lad.recover_count >= rc.consecutive_reports
        and since is not None
        and (run.now - since).total_seconds() >= rc.hold_s
    ):
        pending = _gpus_unrecovered(run, ctx, node)
        if not pending:
            release(run, ctx, node, Reason.RECOVERED, ev)
            return
        # The node's ranks look fine, but the GPU the steps were taken for has not scored
        # well against its peers since: a restart's fresh baseline is no recovery.
        ev |= {"cause": "gpuNotRecovered", "gpus": pending}
    if since is not None and not pending:
        # A GPU still to recover needs new windows, not time: only a new report helps.
        run.rechecks.append(since + timedelta(seconds=rc.hold_s))
    ev["nodeState"] = state
    if hold_for_human(run, ctx, node, ev):
        return
    run.node_hold(ctx, node, None, Reason.AWAITING_EFFECT, ev)


def _gpus_unrecovered(run: Run, ctx: JobRun, node: NodeName) -> dict[str, Any]:
    """The ladder's suspect GPUs on ``node`` that have not yet recovered against their
    peers (empty: none, or the policy or the document does not ask for it)."""
    lad = ctx.state.ladders[node]
    if not (lad.gpus and ctx.policy.hardware.gpu_recovery and run.doc.hardware_memory.enabled):
        return {}
    return hardware_memory.unrecovered(
        run.hardware,
        node,
        lad.gpus,
        after=lad.last_action_at or lad.started_at,
        need=ctx.policy.recovery.consecutive_reports,
        recover=ctx.policy.thresholds.recover,
        tenant=hardware_trust.tenant_of(ctx.view),
    )


def _marks_held(run: Run, job: JobKey, node: NodeName) -> list[MarkKind]:
    ns = run.cluster.nodes.get(node)
    if ns is None:
        return []
    return [k for k, rec in ns.marks.items() if job in rec.holders]


def release(run: Run, ctx: JobRun, node: NodeName, reason: Reason, ev: dict[str, Any]) -> None:
    """Let go of this job's marks on ``node``; undo those nobody else holds. Undo is
    never blocked by budgets, the breaker or the mode (it only reduces harm)."""
    job = ctx.view.key
    nodes = dict(run.cluster.nodes)
    ns = nodes.get(node) or NodeState()
    marks = dict(ns.marks)
    undone = False
    for kind, rec in ns.marks.items():
        if job not in rec.holders:
            continue
        rest = tuple(h for h in rec.holders if h != job)
        if rest:
            marks[kind] = replace(rec, holders=rest)
            run.node_hold(
                ctx, node, ACTION_OF_MARK[kind], reason, {**ev, "stillHeldBy": list(rest)}
            )
            continue
        del marks[kind]
        # The record's time travels with the undo: the actuator removes the mark only
        # while the node's note carries it (a note left from a mark a human took does not).
        uev = {
            **ev,
            "mark": kind.value,
            "actionKey": f"undo/{rec.action_key}",
            "markedAt": rec.applied_at.isoformat(),
        }
        if rec.simulated:
            run.node_hold(
                ctx, node, ACTION_OF_MARK[kind], Reason.OBSERVE_MODE, {**uev, "wouldBe": "undo"}
            )
        else:
            run.record(
                ctx, job, node_subject(node), Verdict.UNDO, ACTION_OF_MARK[kind], reason, uev
            )
            undone = True
    cooldown_until, cause = ns.cooldown_until, ns.cooldown_cause
    if undone:
        cooldown_until = run.now + timedelta(seconds=ctx.policy.cooldowns.node_after_undo_s)
        cause = "afterUndo"
    nodes[node] = replace(ns, marks=marks, cooldown_until=cooldown_until, cooldown_cause=cause)
    run.cluster = replace(run.cluster, nodes=nodes)
    if not any(x.subject == node_subject(node) for x in ctx.decisions):
        run.node_hold(ctx, node, None, reason, ev)
    ctx.close_ladder(node)


def release_all(run: Run, ctx: JobRun, reason: Reason) -> None:
    """Let go of every mark the job holds and forget its ladders and streaks."""
    nodes = {
        n
        for n, ns in run.cluster.nodes.items()
        for r in ns.marks.values()
        if ctx.view.key in r.holders
    }
    for node in sorted(nodes):
        release(run, ctx, node, reason, {"node": node})
    ctx.state = replace(ctx.state, ladders={}, streaks={})


def drop_simulated(run: Run, ctx: JobRun) -> None:
    """Progress made while observing is not a record of real actions: in enforce mode
    it is forgotten, so the real ladder starts from the bottom."""
    job = ctx.view.key
    ladders = {n: lad for n, lad in ctx.state.ladders.items() if not lad.simulated}
    if len(ladders) != len(ctx.state.ladders):
        ctx.state = replace(ctx.state, ladders=ladders)
    nodes = dict(run.cluster.nodes)
    changed = False
    for name, ns in run.cluster.nodes.items():
        marks = {k: r for k, r in ns.marks.items() if not (r.simulated and job in r.holders)}
        if len(marks) != len(ns.marks):
            nodes[name] = replace(ns, marks=marks)
            changed = True
    stamps = tuple(s for s in run.cluster.stamps if not (s.simulated and s.job == job))
    if changed or len(stamps) != len(run.cluster.stamps):
        run.cluster = replace(run.cluster, nodes=nodes, stamps=stamps)
