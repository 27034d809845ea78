"""A mark a human removed stays the human's: the decisions on that node say so."""

from __future__ import annotations

from dataclasses import replace

from controller_builders import Loop, policy_doc

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import ActionKind

SLOW = {0: 0.3}  # rank 0 lives on node-000
NODE = "node/node-000"


def tainted_loop() -> Loop:
    doc = policy_doc({"ladder": {"taintNode": {"enabled": True, "timeoutS": 600}}})
    loop = Loop(doc)
    while not any(d.verdict is Verdict.ACT and d.action is ActionKind.TAINT_NODE for d in loop.log):
        loop.step(SLOW)
        assert loop.seq < 30
    loop.step(SLOW)  # the controller sees its taint in place
    return loop


def human_untaint(loop: Loop, node: str = "node-000") -> None:
    nv = loop.cluster.nodes[NodeName(node)]
    nodes = dict(loop.cluster.nodes)
    nodes[NodeName(node)] = replace(nv, our_marks=nv.our_marks - {MarkKind.TAINT})
    loop.cluster = replace(loop.cluster, nodes=nodes)


def on_node(decisions: list) -> list[Reason]:  # type: ignore[type-arg]
    return [d.reason for d in decisions if d.subject == NODE]


def test_human_override_sticks_while_the_ladder_waits_on_the_removed_taint() -> None:
    loop = tainted_loop()
    human_untaint(loop)
    first = loop.step(SLOW)
    assert Reason.HUMAN_OVERRIDE in on_node(first)
    for _ in range(5):  # still inside the taint step's timeout
        ds = loop.step(SLOW)
        assert on_node(ds) == [Reason.HUMAN_OVERRIDE], on_node(ds)
        held = next(d for d in ds if d.subject == NODE)
        assert held.action is ActionKind.TAINT_NODE and held.evidence["heldBy"] == "human"
    assert not any(d.verdict is Verdict.ACT for d in loop.log[-5:])


def test_human_override_sticks_while_the_node_recovers() -> None:
    loop = tainted_loop()
    human_untaint(loop)
    loop.step(SLOW)
    ds = loop.step({})  # recovering: no longer waiting on our taint either
    assert on_node(ds) == [Reason.HUMAN_OVERRIDE]
    assert Reason.AWAITING_EFFECT not in on_node(ds)


def test_a_job_whose_state_missed_the_removal_still_says_human_override() -> None:
    loop = tainted_loop()
    human_untaint(loop)
    # The cluster pass that saw the removal ran for another job: this job's ladder
    # was not in that call's state, so it carries no note of it.
    loop.step(SLOW)
    job_state = next(iter(loop.state.jobs.values()))
    ladders = {n: replace(lad, human_override=None) for n, lad in job_state.ladders.items()}
    loop.state = replace(loop.state, jobs={k: replace(job_state, ladders=ladders)
                                           for k in loop.state.jobs})  # fmt: skip
    ds = loop.step(SLOW)
    assert on_node(ds) == [Reason.HUMAN_OVERRIDE]
