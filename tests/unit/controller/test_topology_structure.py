"""Structure is not hardware: a slow set that lines up with a parallelism dimension is
held as WorkloadStructure, naming the dimension, with no hardware action."""

from __future__ import annotations

from controller_builders import T0, Loop, acts, policy_doc, reasons
from topology_builders import feed, grid, topo_report

from pacekeeper.controller.core.attribution import digest
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.structure import align

# Against the best rank, so that the stage's ranks are below and the rule must decide.
BEST = {"score": {"kind": "gpuRelative", "reference": "best"}}
LAYOUT = grid(tp=2, dp=2, pp=4)  # 16 ranks; stage 3 is ranks 12..15


def _stage_slow(extra: dict[int, float] | None = None) -> dict[int, float]:
    return dict.fromkeys(range(16), 1.0) | dict.fromkeys(range(12, 16), 0.6) | (extra or {})


def test_a_last_stage_with_more_work_is_structure_under_every_node_layout() -> None:
    for per_node in (2, 4, 8):
        loop = Loop(policy_doc(BEST), 16)
        for _ in range(8):
            feed(loop, _stage_slow(), coords=LAYOUT, per_node=per_node)
        assert acts(loop.log) == [], per_node
        held = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE]
        assert len(held) == 8
        assert held[-1].evidence["dimension"] == "pp"
        assert held[-1].evidence["cells"] == ["pp=3"]
        assert held[-1].evidence["alignment"] == "slice"


def test_against_its_peers_the_last_stage_is_not_even_slow() -> None:
    loop = Loop(policy_doc(), 16)  # peerMedian: stage 3 is compared with stage 3
    for _ in range(6):
        feed(loop, _stage_slow(), coords=LAYOUT)
    assert reasons(loop.log) == {Reason.HEALTHY}


def test_without_coordinates_the_same_job_is_held_by_its_pattern() -> None:
    # What issue 39 found: 4 GPUs per node, the stage fills one node, and the reports
    # carry no coords. The stage is slow from the first report on a regular block.
    loop = Loop(policy_doc(BEST), 16)
    for _ in range(8):
        feed(loop, _stage_slow(), per_node=4)
    assert acts(loop.log) == []
    held = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert len(held) == 8 and held[-1].evidence["alignment"] == "pattern"


def test_a_fault_beside_the_stage_is_still_judged() -> None:
    loop = Loop(policy_doc(BEST), 16)
    for _ in range(6):
        feed(loop, _stage_slow({1: 0.5}), coords=LAYOUT, per_node=4)
    assert Reason.WORKLOAD_STRUCTURE in reasons(loop.log)
    found = {tuple(d.evidence["ranks"]) for d in loop.log if d.action is ActionKind.NOTIFY}
    assert found == {(1,)}
    assert not [s for a, s in acts(loop.log) if s != "node/node-000"]


def test_one_tensor_parallel_group_on_one_node_is_a_node_finding() -> None:
    tp8 = grid(tp=8, dp=4)
    slow = dict.fromkeys(range(32), 1.0) | dict.fromkeys(range(8, 16), 0.5)
    report = topo_report(slow, seq=1, at=T0, coords=tp8)
    d = digest(report, policy_doc(BEST).policies["default"])
    assert align(report, d.below, d.measured_ranks()) is None  # a slow node looks the same
    # Two whole TP groups at once, on two nodes: the workload's shape.
    slow |= dict.fromkeys(range(24, 32), 0.5)
    report = topo_report(slow, seq=1, at=T0, coords=tp8)
    d = digest(report, policy_doc(BEST).policies["default"])
    found = align(report, d.below, d.measured_ranks())
    assert found is not None and found.kind == "slice" and found.dimension == "dp"
    assert found.cells == ("dp=1", "dp=3")


def test_one_slow_rank_is_never_structure() -> None:
    report = topo_report(
        _stage_slow() | dict.fromkeys(range(12, 16), 1.0) | {13: 0.5}, seq=1, at=T0, coords=LAYOUT
    )
    d = digest(report, policy_doc(BEST).policies["default"])
    assert align(report, d.below, d.measured_ranks()) is None


def test_a_bounded_report_is_not_read_for_structure() -> None:
    report = topo_report(_stage_slow(), seq=1, at=T0, coords=LAYOUT)
    truncated = report.model_copy(update={"truncated": True})
    assert align(truncated, set(range(12, 16)), set(range(16))) is None


def test_half_the_job_far_from_the_fastest_is_named_when_it_is_a_stage() -> None:
    # pp=2: the long last stage is half the job. Against the peers nobody is slow, but
    # as reported half the ranks are far from the fastest: the shape of the job.
    two = grid(tp=2, dp=4, pp=2)
    scores = dict.fromkeys(range(16), 1.0) | dict.fromkeys(range(8, 16), 0.6)
    loop = Loop(policy_doc(), 16)
    for _ in range(4):
        feed(loop, scores, coords=two)
    assert acts(loop.log) == []
    held = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert len(held) == 4 and held[-1].evidence["cells"] == ["pp=1"]
    loop = Loop(policy_doc(), 16)  # without coordinates: the pattern from the start
    for _ in range(4):
        feed(loop, scores)
    assert acts(loop.log) == []
    assert reasons(loop.log) == {Reason.WORKLOAD_STRUCTURE}
    assert loop.log[-1].evidence["pattern"].startswith("ranks 8-15")
