"""A human's mark is never undone, on the real server (issue 40): the real operator
cordons a slow node, a human uncordons it (our note goes), later cordons it for
maintenance; the next slow episode there and its recovery leave that cordon alone."""

from __future__ import annotations

from collections.abc import Callable

from e2e_world import World, fast_policy

from pacekeeper.controller.core.marks import CORDON_ANNOTATION

LADDER = ("notify", "taintNode", "cordonNode")
REPORT_EVERY_S = 0.5


def test_a_maintenance_cordon_after_a_human_uncordon_survives_the_next_episode(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-marks")
    job = world.job("llama", world.nodes(3))
    policy = fast_policy({step: {} for step in LADDER})
    policy["policies"]["gpu"]["cooldowns"] = {"nodeAfterHumanS": 2, "nodeAfterUndoS": 2}
    world.install(actions=LADDER, policy=policy)
    world.start_operator()
    node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=REPORT_EVERY_S)

    def cordon_seen() -> bool:
        marks = world.cluster_state().get("nodes", {}).get(node, {}).get("marks", {})
        return bool(marks.get("cordon", {}).get("seen"))

    world.eventually(cordon_seen, "our cordon seen on the node")
    world.set_cordon(node, False)  # the human's uncordon: annotations untouched

    def note() -> str | None:
        return (world.node(node)["metadata"].get("annotations") or {}).get(CORDON_ANNOTATION)

    world.eventually(lambda: note() is None, "our note of the cordon a human took cleared")
    reporters[job].slow.clear()
    world.eventually(lambda: not world.our_taints(node), "the episode's taint undone")

    # Later: a maintenance cordon by a human, and the node slow again, then recovered.
    world.set_cordon(node, True)
    reporters[job].slow[5] = 0.5
    world.eventually(lambda: "NotOurs" in world.reasons(job), "the human's cordon left alone")
    world.more_reports(6, reporters[job])
    reporters[job].slow.clear()
    world.more_reports(10, reporters[job])

    assert world.cordoned(node), "the maintenance cordon was undone"
    cordon_writes = [w for w in world.node_writes(node) if "unschedulable" in str(w.request_object)]
    assert len(cordon_writes) == 1, "only our first cordon"
    assert reporters.errors == []
    assert world.refusals() == []
