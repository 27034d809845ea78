"""Decision records, log grouping, state persistence and the less travelled paths of the
engine: truncated reports, PDB-blocked drains, unknown policies, marks left behind."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from controller_builders import (
    REPORT_S,
    T0,
    Loop,
    acts,
    policy_doc,
    reasons,
    report,
    scores,
)

from pacekeeper.controller.core.decisions import (
    Decision,
    Reason,
    Verdict,
    group_ranks_by_reason,
    summary_lines,
)
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName, Rank
from pacekeeper.controller.core.observations import (
    ClusterView,
    MarkKind,
    NodeView,
    Window,
    cluster_from_reports,
    job_view,
)
from pacekeeper.controller.core.policy import ActionKind, Mode
from pacekeeper.controller.core.state import State, StateError
from pacekeeper.detector.compaction import compact

SLOW = 0.4


def test_ranks_sharing_a_reason_share_a_line() -> None:
    lines = group_ranks_by_reason(
        [(42, "StaleData"), (3, "StaleData"), (17, "StaleData"), (5, "OptedOut")]
    )
    assert lines == ["ranks 3, 17, 42: StaleData", "rank 5: OptedOut"]
    many = group_ranks_by_reason((r, "StaleData") for r in range(20))
    assert many == ["ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 8 more: StaleData"]


def test_summary_lines_group_decisions_by_reason() -> None:
    loop = Loop(policy_doc(), world=32)
    for _ in range(2):
        sc = scores(32)
        for r in (3, 17, 30):
            sc[r] = None
        loop.now += timedelta(seconds=REPORT_S)
        loop.seq += 1
        loop.reports.append(report(sc, seq=loop.seq, at=loop.now))
        ds = loop.decide()
    assert "ml/train ranks 3, 17, 30: hold StaleData" in summary_lines(ds)


def test_every_decision_is_a_json_record_with_time_policy_and_mode() -> None:
    loop = Loop(policy_doc())
    for _ in range(15):
        loop.step({0: SLOW})
    for _ in range(4):
        loop.step()
    assert {Verdict.ACT, Verdict.HOLD, Verdict.UNDO} <= {d.verdict for d in loop.log}
    for d in loop.log:
        rec = json.loads(json.dumps(d.to_dict()))
        assert rec["reason"] == d.reason.value and rec["policy"] == "default"
        assert rec["mode"] == "enforce" and rec["decidedAt"]
    for d in loop.log:
        if d.verdict is not Verdict.HOLD:
            assert d.action_key and d.node == NodeName("node-000")


def test_decision_is_frozen() -> None:
    d = Decision(JobKey("a/b"), "job", Verdict.HOLD, None, Reason.HEALTHY)
    with pytest.raises(AttributeError):
        d.reason = Reason.RECOVERED  # type: ignore[misc]


def test_state_from_bad_data_names_the_field() -> None:
    with pytest.raises(StateError, match=r"state\.jobs\.a/b\.firstSeenAt"):
        State.from_dict({"jobs": {"a/b": {"firstSeenAt": "yesterday"}}})
    with pytest.raises(StateError, match="stateVersion 7"):
        State.from_dict({"stateVersion": 7})
    # sequential.advance reads at most HISTORY windows a rank: more is refused at load.
    at = "2026-12-07T00:00:00Z"
    for n, ok in ((32, True), (33, False)):
        data = {"jobs": {"a/b": {"firstSeenAt": at, "tests": {"5": {"history": [0.01] * n}}}}}
        if ok:
            assert len(State.from_dict(data).jobs[JobKey("a/b")].tests[Rank(5)].history) == n
        else:
            with pytest.raises(StateError, match=r"state\.jobs\.a/b\.tests\.5\.history"):
                State.from_dict(data)


def test_state_stays_bounded_over_a_long_noisy_run() -> None:
    loop = Loop(policy_doc(), world=64)
    for i in range(200):
        loop.step({(i * 7) % 64: 0.6})
    js = loop.state.jobs[JobKey("ml/train")]
    assert len(js.history) <= 8
    assert len(js.streaks) <= 2
    assert len(json.dumps(loop.state.to_dict())) < 20_000


def test_outcome_asks_to_be_called_back_when_the_ladder_timeout_ends() -> None:
    loop = Loop(policy_doc({"ladder": {"notify": {"timeoutS": 500}}}))
    for _ in range(3):
        loop.step({0: SLOW})
    window = Window(jobs=(loop.view(),), cluster=loop.cluster)
    out = decide(window, loop.state, loop.doc, loop.now)
    assert out.recheck_at == loop.now - timedelta(seconds=0) + timedelta(seconds=500)


def test_unknown_policy_name_holds_and_says_which() -> None:
    loop = Loop(policy_doc())
    loop.job_fields["policy_name"] = "nope"
    ds = loop.step({0: SLOW})
    assert reasons(ds) == {Reason.UNKNOWN_POLICY}
    assert ds[0].evidence["policy"] == "nope"


def test_truncated_report_keeps_acting_on_listed_ranks_and_recovers_via_node_minima() -> None:
    loop = Loop(policy_doc(), world=4096)

    def compact_step(slow: dict[int, float]) -> list[Decision]:
        loop.now += timedelta(seconds=REPORT_S)
        loop.seq += 1
        full = report(scores(4096, slow), seq=loop.seq, at=loop.now)
        small = compact(full, max_bytes=40_000)
        assert small.truncated and len(small.ranks) < 4096
        loop.reports.append(small)
        return loop.decide()

    for _ in range(12):
        compact_step({0: SLOW})
    assert (ActionKind.TAINT_NODE, "node/node-000") in acts(loop.log)
    placed = {a for a, _ in acts(loop.log)} & {ActionKind.TAINT_NODE, ActionKind.CORDON_NODE}
    undo = []
    for _ in range(6):
        undo += [d for d in compact_step({}) if d.verdict is Verdict.UNDO]
    assert {d.action for d in undo} == placed


def test_drain_blocked_by_a_pdb_holds_instead_of_escalating() -> None:
    loop = Loop(policy_doc())
    while (ActionKind.DRAIN_NODE, "node/node-000") not in acts(loop.log):
        loop.step({0: SLOW})
    loop.job_fields["pdb_blocked_nodes"] = frozenset({NodeName("node-000")})
    for _ in range(10):
        ds = loop.step({0: SLOW})
        assert (ActionKind.CORDON_NODE, "node/node-000") not in acts(ds)
    assert Reason.PDB_BLOCKED in reasons(loop.log)


def test_marks_on_a_node_the_job_left_expire_only_when_configured() -> None:
    for release, expect in ((None, []), (600.0, [ActionKind.TAINT_NODE])):
        loop = Loop(policy_doc({"recovery": {"releaseAfterS": release}}), world=16)
        while (ActionKind.TAINT_NODE, "node/node-000") not in acts(loop.log):
            loop.step({0: SLOW})
        # The job moves off node-000: its ranks now run on node-001 and node-002.
        for _ in range(15):
            loop.step(nodes={r: f"node-{1 + r // 8:03d}" for r in range(16)})
        undone = [d.action for d in loop.log if d.verdict is Verdict.UNDO]
        assert undone == expect
        if expect:
            assert Reason.MARK_EXPIRED in reasons(loop.log)


def test_our_marks_unknown_to_the_state_are_adopted_and_counted_against_budgets() -> None:
    doc = policy_doc(document={"cluster": {"nodes": {"maxNodes": 1}}})
    loop = Loop(doc)
    nodes = dict(loop.cluster.nodes)
    nodes[NodeName("node-001")] = NodeView(
        NodeName("node-001"), our_marks=frozenset({MarkKind.TAINT})
    )
    loop.cluster = ClusterView(nodes=nodes)
    for _ in range(10):
        loop.step({0: SLOW})
    assert (ActionKind.TAINT_NODE, "node/node-000") not in acts(loop.log)
    refused = [d for d in loop.log if d.reason is Reason.BUDGET_EXHAUSTED]
    assert refused and refused[0].evidence["budget"] == "cluster.nodes"


def test_helpers_build_a_window_from_reports_alone() -> None:
    reps = [report(scores(16, {0: SLOW}), seq=i, at=T0 + timedelta(minutes=i)) for i in range(1, 5)]
    jv = job_view(reps, started_at=T0, mode_override=Mode.DRY_RUN)
    cluster = cluster_from_reports(reps)
    assert jv.key == JobKey("ml/train") and set(cluster.nodes) == {"node-000", "node-001"}
    out = decide(Window((jv,), cluster), State(), policy_doc(), reps[-1].generated_at)
    assert [d.reason for d in out.decisions] == [Reason.OBSERVE_MODE]
    assert out.decisions[0].action is ActionKind.NOTIFY


CORE = (
    "engine",
    "run",
    "mark_records",
    "job_window",
    "job_decisions",
    "attribution",
    "ladder",
    "budgets",
    "decisions",
    "state",
    "observations",
)
IMPURE = (
    "datetime.now",
    "utcnow",
    "time.time",
    "time.monotonic",
    "os.environ",
    "getenv",
    "open(",
    "import socket",
    "import logging",
    "import random",
)


@pytest.mark.parametrize("module", CORE)
def test_core_module_reads_no_clock_env_file_or_socket(module: str) -> None:
    import importlib
    import inspect

    source = inspect.getsource(importlib.import_module(f"pacekeeper.controller.core.{module}"))
    found = [word for word in IMPURE if word in source]
    assert found == [], f"{module} uses {found}: the core must take time and data as input"
