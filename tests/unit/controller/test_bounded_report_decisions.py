"""Decisions on a bounded report of many nodes (schemaVersion 5): the worst rank is still
found and acted on; a node the report only counts (``summary.omittedNodes``) is never
acted on and counts in the job's nodes; a node with a ladder that drops out of the list
recovers only where the API places the job there, and is never taken for left."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from controller_builders import REPORT_S, T0, Loop, acts, policy_doc, report, scores

from pacekeeper.controller.core.attribution import digest
from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.sources.kubernetes import job_view_of, opt_in_of, report_of
from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import ScoreReport

WORLD = 4096  # 512 nodes of 8: their entries alone would crowd 40 kB
BOUND = 40_000
LATE = 4000  # a rank on node-500, which a healthy report's list leaves out


def _bounded(loop: Loop, slow: dict[int, float]) -> ScoreReport:
    full = report(scores(WORLD, slow), seq=loop.seq, at=loop.now)
    small = compact(full, max_bytes=BOUND)
    assert small.summary.omitted_nodes is not None
    return small


def _step(loop: Loop, slow: dict[int, float], edit: Any = None) -> list[Decision]:
    loop.now += timedelta(seconds=REPORT_S)
    loop.seq += 1
    small = _bounded(loop, slow)
    loop.reports.append(edit(small) if edit else small)
    return loop.decide()


def _with_slow_counted_node(small: ScoreReport) -> ScoreReport:
    """The report's claim that a node it does not name has a rank at 0.1."""
    wire = small.to_wire()
    sketch = wire["summary"]["omittedNodes"]
    sketch["minScore"] = 0.1
    sketch["counts"][-1] -= 1
    sketch["counts"][0] += 1
    return ScoreReport.from_wire(wire)


def test_the_worst_rank_of_a_bounded_report_is_acted_on_and_a_counted_node_never_is() -> None:
    loop = Loop(policy_doc(), world=WORLD)
    for _ in range(12):
        _step(loop, {LATE: 0.3}, _with_slow_counted_node)
    subjects = {subject for _, subject in acts(loop.log)}
    assert (ActionKind.TAINT_NODE, "node/node-500") in acts(loop.log)
    # Only the listed rank and its node: nothing for the node the report only counts.
    assert subjects <= {"node/node-500", f"rank/{LATE}"}


def test_a_counted_node_enters_no_digest_and_the_job_keeps_its_node_count() -> None:
    loop = Loop(policy_doc(), world=WORLD)
    small = _with_slow_counted_node(_bounded(loop, {LATE: 0.3}))
    d = digest(small, loop.doc.policies["default"])
    assert set(d.below) == {LATE}
    assert d.job_nodes == WORLD // 8 and len(d.nodes) < WORLD // 8
    assert d.node_state(d.node_of[LATE], 0.9) == "below"
    assert d.node_state(next(iter(set(d.nodes))), 0.9) != "unlisted"


def _slow_then_healthy(placed: bool | None) -> tuple[Loop, list[Decision]]:
    loop = Loop(policy_doc(), world=WORLD)
    if placed is not None:
        names = set(loop.cluster.nodes) - (set() if placed else {"node-500"})
        loop.job_fields["placed_nodes"] = frozenset(names)
    for _ in range(12):
        _step(loop, {LATE: 0.3})
    assert (ActionKind.TAINT_NODE, "node/node-500") in acts(loop.log)
    later: list[Decision] = []
    for _ in range(6):
        later += _step(loop, {})
    return loop, later


def test_a_ladder_node_left_out_of_the_list_recovers_where_the_api_places_the_job() -> None:
    loop, later = _slow_then_healthy(placed=True)
    placed = {a for a, s in acts(loop.log) if s == "node/node-500"} & {
        ActionKind.TAINT_NODE,
        ActionKind.CORDON_NODE,
    }
    undone = {d.action for d in later if d.verdict is Verdict.UNDO and d.node == "node-500"}
    assert placed and undone == placed


def test_without_the_api_placement_a_left_out_ladder_node_holds_and_is_not_taken_for_left() -> None:
    _, later = _slow_then_healthy(placed=None)
    mine = [d for d in later if d.node == "node-500"]
    assert mine and all(d.verdict is Verdict.HOLD for d in mine)
    assert {d.reason for d in mine} == {Reason.AWAITING_EFFECT}
    assert {d.evidence.get("nodeState") for d in mine} == {"unlisted"}


def test_a_left_out_ladder_node_the_job_no_longer_runs_on_is_left_to_a_human() -> None:
    _, later = _slow_then_healthy(placed=False)
    assert not [d for d in later if d.verdict is Verdict.UNDO and d.node == "node-500"]


def _status(report: ScoreReport, version: int) -> dict[str, Any]:
    wire = report.to_wire()
    wire["schemaVersion"] = version
    return {"metadata": {"name": "train", "namespace": "ml"}, "status": {"report": wire}}


def test_the_controller_reads_the_previous_and_the_new_schema_version() -> None:
    """During an upgrade the controller (upgraded first) reads a version-4 job's report,
    which names every node, beside a version-5 job's, which counts most of them."""
    loop = Loop(policy_doc(), world=WORLD)
    loop.now += timedelta(seconds=REPORT_S)
    full = report(scores(WORLD, {LATE: 0.3}), seq=1, at=loop.now)
    new = _bounded(loop, {LATE: 0.3})
    for rep, version in ((full, 4), (new, 5)):
        got = report_of(_status(rep, version), loop.now)
        assert isinstance(got, ScoreReport) and got.schema_version == version
        d = digest(got, loop.doc.policies["default"])
        assert set(d.below) == {LATE} and d.job_nodes == WORLD // 8


def test_the_operator_places_the_job_from_its_live_pods_never_the_report() -> None:
    def pod(name: str, node: str, **meta: Any) -> dict[str, Any]:
        return {"metadata": {"name": name, **meta}, "spec": {"nodeName": node}}

    pods = [
        pod("train-0", "node-000"),
        pod("train-1", "node-001"),
        pod("train-2", "node-002", deletionTimestamp="2026-12-05T09:00:00Z"),
    ]
    opt_in = opt_in_of(pods)
    assert opt_in.nodes == {"node-000", "node-001"}
    view = job_view_of(_status(report(scores(16), seq=1, at=T0), 5), None, opt_in, None)
    assert view.placed_nodes == {"node-000", "node-001"}


def test_a_budget_in_percent_counts_the_nodes_a_bounded_report_only_counts() -> None:
    # 10% of the job's 512 nodes is 51; of the nodes the bounded report lists, far fewer.
    doc = policy_doc({"budgets": {"nodes": {"maxNodes": 1000, "maxPercent": 10}}})
    loop = Loop(doc, world=WORLD)
    for _ in range(12):
        _step(loop, {LATE: 0.3})
    taints = [d for d in loop.log if d.verdict is Verdict.ACT and d.action is ActionKind.TAINT_NODE]
    assert taints and len(_bounded(loop, {LATE: 0.3}).summary.nodes) < WORLD // 8
    assert {d.evidence["jobNodesLimit"] for d in taints} == {WORLD // 8 // 10}
