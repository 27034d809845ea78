"""Escalation, recovery and undo, and restarts that repeat and lose nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import pairwise

from controller_builders import REPORT_S, Loop, acts, policy_doc, reasons
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import Window
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.state import State

SLOW = 0.4
NODE0 = "node/node-000"


def _run_until(loop: Loop, action: ActionKind, slow: dict[int, float], limit: int = 40) -> None:
    while (action, NODE0) not in acts(loop.log):
        loop.step(slow)
        assert loop.seq < limit, f"{action} never came"


def test_single_slow_rank_climbs_the_whole_ladder_in_order() -> None:
    loop = Loop(policy_doc())
    for _ in range(20):
        loop.step({0: SLOW})
    order = [a for a, subject in acts(loop.log) if subject == NODE0]
    assert order == [
        ActionKind.NOTIFY,
        ActionKind.RESTART_RANK,
        ActionKind.TAINT_NODE,
        ActionKind.DRAIN_NODE,
        ActionKind.CORDON_NODE,
    ]
    assert Reason.LADDER_EXHAUSTED in reasons(loop.log[-3:])
    restart = next(d for d in loop.log if d.action is ActionKind.RESTART_RANK)
    assert restart.evidence["pods"] == ["train-0"] and restart.evidence["ranks"] == [0]
    drain = next(d for d in loop.log if d.action is ActionKind.DRAIN_NODE)
    assert drain.evidence["pods"] == [f"train-{r}" for r in range(8)]


def test_whole_node_slow_skips_the_rank_restart() -> None:
    loop = Loop(policy_doc(), world=64)
    for _ in range(3):  # slow from the first report, a whole node could be a stage
        loop.step()
    for _ in range(20):
        loop.step(dict.fromkeys(range(8), SLOW))
    kinds = [a for a, _ in acts(loop.log)]
    assert ActionKind.RESTART_RANK not in kinds
    assert kinds[:2] == [ActionKind.NOTIFY, ActionKind.TAINT_NODE]
    taint = next(d for d in loop.log if d.action is ActionKind.TAINT_NODE)
    assert taint.evidence["finding"] == "node"


def test_step_waits_its_timeout_and_repeats_up_to_its_attempt_cap() -> None:
    doc = policy_doc(
        {"ladder": {"restartRank": {"timeoutS": 300, "maxAttempts": 2}}},
    )
    loop = Loop(doc)
    for _ in range(30):
        loop.step({0: SLOW})
    restarts = [
        d for d in loop.log if d.verdict is Verdict.ACT and d.action is ActionKind.RESTART_RANK
    ]
    assert [d.evidence["attempt"] for d in restarts] == [1, 2]
    gap = restarts[1].decided_at - restarts[0].decided_at
    assert gap >= timedelta(seconds=300)
    assert Reason.AWAITING_EFFECT in reasons(loop.log)
    first_taint = next(d for d in loop.log if d.action is ActionKind.TAINT_NODE)
    assert first_taint.decided_at > restarts[1].decided_at


def test_recovery_waits_for_its_own_threshold_and_hold_then_undoes_only_our_marks() -> None:
    doc = policy_doc({"thresholds": {"act": 0.7, "recover": 0.9}, "recovery": {"holdS": 180}})
    loop = Loop(doc)
    _run_until(loop, ActionKind.CORDON_NODE, {0: SLOW})
    loop.step({0: SLOW})
    # Between the thresholds: not slow any more, but not recovered either.
    for _ in range(5):
        assert not [d for d in loop.step({0: 0.8}) if d.verdict is Verdict.UNDO]
    undos = []
    for _ in range(6):
        undos += [d for d in loop.step({0: 0.95}) if d.verdict is Verdict.UNDO]
    assert {d.action for d in undos} == {ActionKind.TAINT_NODE, ActionKind.CORDON_NODE}
    assert {d.reason for d in undos} == {Reason.RECOVERED}
    node = loop.cluster.nodes[NodeName("node-000")]
    assert not node.our_marks and not node.unschedulable
    assert JobKey("ml/train") in loop.state.jobs
    assert loop.state.jobs[JobKey("ml/train")].ladders == {}


def test_relapse_during_the_recovery_hold_keeps_the_marks() -> None:
    loop = Loop(policy_doc({"recovery": {"holdS": 300, "consecutiveReports": 3}}))
    _run_until(loop, ActionKind.TAINT_NODE, {0: SLOW})
    for slow in ({}, {}, {0: SLOW}, {}, {}):
        ds = loop.step(slow)
        assert not [d for d in ds if d.verdict is Verdict.UNDO]
    assert loop.cluster.nodes[NodeName("node-000")].our_marks


def test_undo_after_recovery_starts_a_node_cooldown() -> None:
    loop = Loop(policy_doc({"cooldowns": {"nodeAfterUndoS": 1200}}))
    _run_until(loop, ActionKind.TAINT_NODE, {0: SLOW})
    for _ in range(4):
        loop.step()
    assert not loop.cluster.nodes[NodeName("node-000")].our_marks
    seen_before = len(acts(loop.log))
    for _ in range(12):
        loop.step({0: SLOW})
    later = acts(loop.log)[seen_before:]
    assert (ActionKind.TAINT_NODE, NODE0) not in later
    assert any(d.reason is Reason.COOLDOWN and d.action is ActionKind.TAINT_NODE for d in loop.log)


def test_two_jobs_holding_one_mark_undo_it_only_when_both_recover() -> None:
    doc = policy_doc()
    a, b = Loop(doc, job="a"), Loop(doc, job="b")
    # One shared world: b sees what a did and the other way round.
    for _ in range(12):
        a.step({0: SLOW})
        b.state, b.cluster = a.state, a.cluster
        b.step({0: SLOW})
        a.state, a.cluster = b.state, b.cluster
    marks = a.state.cluster.nodes[NodeName("node-000")].marks
    assert all(set(r.holders) == {JobKey("ml/a"), JobKey("ml/b")} for r in marks.values())
    for _ in range(4):
        a.step()
        b.state, b.cluster = a.state, a.cluster
        b.step({0: SLOW})
        a.state, a.cluster = b.state, b.cluster
    assert a.cluster.nodes[NodeName("node-000")].our_marks
    assert not [d for d in a.log + b.log if d.verdict is Verdict.UNDO]


def test_observe_progress_is_forgotten_when_enforcing_starts() -> None:
    loop = Loop(policy_doc(document={"mode": "observe"}))
    for _ in range(12):
        loop.step({0: SLOW})
    assert loop.state.jobs[JobKey("ml/train")].ladders[NodeName("node-000")].simulated
    loop.doc = policy_doc()
    ds = loop.step({0: SLOW})
    ds += loop.step({0: SLOW})
    assert (ActionKind.NOTIFY, NODE0) in acts(ds)


# --- restarts: serialise state, reload, decide again -----------------------------------


def test_restart_mid_ladder_repeats_nothing() -> None:
    loop = Loop(policy_doc())
    _run_until(loop, ActionKind.TAINT_NODE, {0: SLOW})
    saved = json.loads(json.dumps(loop.state.to_dict()))
    # The controller dies after acting and comes back: same window, same time.
    window = Window(jobs=(loop.view(),), cluster=loop.cluster)
    again = decide(window, State.from_dict(saved), loop.doc, loop.now)
    assert acts(list(again.decisions)) == []
    assert again.next_state.jobs == loop.state.jobs
    assert again.next_state.cluster.stamps == loop.state.cluster.stamps
    before = loop.state.cluster.nodes[NodeName("node-000")].marks
    after = again.next_state.cluster.nodes[NodeName("node-000")].marks
    assert {k: r.action_key for k, r in after.items()} == {
        k: r.action_key for k, r in before.items()
    }


@settings(max_examples=30, deadline=None)
@given(
    pattern=st.lists(st.sampled_from(["slow", "ok", "node", "gap"]), min_size=5, max_size=40),
    restarts=st.sets(st.integers(0, 39)),
)
def test_restarts_at_any_point_repeat_nothing_and_lose_nothing(pattern, restarts) -> None:
    doc = policy_doc()
    plain, restarted = Loop(doc), Loop(doc)
    for i, what in enumerate(pattern):
        for loop in (plain, restarted):
            match what:
                case "slow":
                    loop.step({0: SLOW})
                case "node":
                    loop.step(dict.fromkeys(range(8), SLOW))
                case "ok":
                    loop.step()
                case "gap":  # no new report: a level-based recheck
                    loop.now += timedelta(seconds=REPORT_S)
                    loop.decide()
        if i in restarts:
            text = json.dumps(restarted.state.to_dict())
            restarted.state = State.from_dict(json.loads(text))
            restarted.decide()  # the restarted controller's first look
    # Both look at the final world once more: a restart's extra look may already have
    # confirmed a mark that the uninterrupted loop only sees on its next look.
    for loop in (plain, restarted):
        loop.decide()
    keys = [d.action_key for d in restarted.log if d.verdict is not Verdict.HOLD]
    assert len(keys) == len(set(keys)), "an action was decided twice"
    assert [d.action_key for d in plain.log if d.verdict is not Verdict.HOLD] == keys
    assert plain.state == restarted.state


def test_state_round_trips_through_json() -> None:
    loop = Loop(policy_doc())
    for _ in range(12):
        loop.step({0: SLOW, 9: SLOW})
    text = json.dumps(loop.state.to_dict())
    assert State.from_dict(json.loads(text)) == loop.state


def test_disruptive_actions_on_one_job_keep_their_minimum_gap() -> None:
    loop = Loop(policy_doc({"budgets": {"betweenActionsS": 600}}))
    for _ in range(30):
        loop.step({0: SLOW})
    disruptive = [
        d for d in loop.log if d.verdict is Verdict.ACT and d.action is not ActionKind.NOTIFY
    ]
    assert len(disruptive) >= 3
    gaps = [b.decided_at - a.decided_at for a, b in pairwise(disruptive)]
    assert min(gaps) >= timedelta(seconds=600)
    held = [d for d in loop.log if d.reason is Reason.COOLDOWN]
    assert held and held[0].evidence["cause"] == "betweenActions"
