"""The core claims no mark it has no record of (issue 40): a node that carries our note
beside a mark no episode of ours placed (a note that outlived our uncordoned cordon, now
beside a human's maintenance cordon) is left alone, and every act and undo of a mark
carries the time of the record the actuator must find on the node."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from controller_builders import Loop, policy_doc

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import ActionKind

SLOW = {0: 0.3}  # rank 0 lives on node-000
NODE = "node/node-000"
LADDER = {"ladder": {"taintNode": {"enabled": True}, "cordonNode": {"enabled": True}}}


def test_a_cordon_that_reads_as_ours_but_no_record_holds_is_never_claimed() -> None:
    loop = Loop(policy_doc(LADDER))
    nv = loop.cluster.nodes[NodeName("node-000")]
    nodes = dict(loop.cluster.nodes)
    # Cordoned, with a note of ours no record of the state holds.
    nodes[NodeName("node-000")] = replace(
        nv, our_marks=frozenset({MarkKind.CORDON}), unschedulable=True
    )
    loop.cluster = replace(loop.cluster, nodes=nodes)

    for _ in range(20):
        loop.step(SLOW)
    for _ in range(20):
        loop.step({})

    on_node = [d for d in loop.log if d.subject == NODE]
    marks = (ActionKind.TAINT_NODE, ActionKind.CORDON_NODE)
    assert not [d for d in on_node if d.verdict is not Verdict.HOLD and d.action in marks]
    held = [d for d in on_node if d.reason is Reason.NOT_OURS]
    assert held and held[0].evidence["markedBy"] == "unknown"


def test_acts_and_undos_of_marks_carry_their_records_time() -> None:
    loop = Loop(policy_doc(LADDER))
    for _ in range(30):
        loop.step(SLOW)
    for _ in range(30):
        loop.step({})
    marks = [
        d
        for d in loop.log
        if d.action in (ActionKind.TAINT_NODE, ActionKind.CORDON_NODE)
        and d.verdict in (Verdict.ACT, Verdict.UNDO)
    ]
    assert {(d.action, d.verdict) for d in marks} == {
        (a, v)
        for a in (ActionKind.TAINT_NODE, ActionKind.CORDON_NODE)
        for v in (Verdict.ACT, Verdict.UNDO)
    }
    for action in (ActionKind.TAINT_NODE, ActionKind.CORDON_NODE):
        act, undo = (next(d for d in marks if d.action is action and d.verdict is v)
                     for v in (Verdict.ACT, Verdict.UNDO))  # fmt: skip
        assert datetime.fromisoformat(act.evidence["markedAt"]) == act.decided_at
        assert undo.evidence["markedAt"] == act.evidence["markedAt"]
