"""The core does no harm: budgets under a storm, stale and malformed data, humans,
imbalance and job-wide slowdowns, opt-outs, modes."""

from __future__ import annotations

from datetime import timedelta

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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacekeeper.controller.core.budgets import RATE_WINDOW, cluster_usage
from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import (
    ClusterView,
    JobView,
    MarkKind,
    NodeView,
    RejectedReport,
    Window,
)
from pacekeeper.controller.core.policy import NODE_ACTIONS, ActionKind, Mode
from pacekeeper.controller.core.state import State

SLOW = 0.4


# --- budgets under a storm ---------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_nodes=st.integers(4, 24),
    n_jobs=st.integers(1, 10),
    cluster_max=st.integers(1, 6),
    cluster_pct=st.one_of(st.none(), st.floats(1, 60)),
    job_max=st.integers(1, 3),
    per_hour=st.integers(1, 20),
    breaker_max=st.integers(1, 30),
    seed=st.randoms(use_true_random=False),
)
def test_budget_never_exceeded_when_every_node_is_slow(
    *, n_nodes, n_jobs, cluster_max, cluster_pct, job_max, per_hour, breaker_max, seed
) -> None:
    doc = policy_doc(
        {"budgets": {"nodes": {"maxNodes": job_max}, "actionsPerHour": 1000}},
        {
            "cluster": {
                "nodes": {"maxNodes": cluster_max, "maxPercent": cluster_pct},
                "actionsPerHour": per_hour,
                "breaker": {"maxActions": breaker_max},
            }
        },
    )
    names = [f"n{i:02d}" for i in range(n_nodes)]
    cluster = ClusterView(nodes={NodeName(n): NodeView(NodeName(n)) for n in names})
    # Each job spans 4 nodes with 2 ranks each; its "slow" node rotates so that every
    # node of the cluster looks slow to some job, while each job sees one bad node.
    jobs = []
    for j in range(n_jobs):
        picked = seed.sample(names, 4)
        jobs.append((f"job{j}", {r: picked[r // 2] for r in range(8)}, picked[j % 4]))
    state = State()
    now = T0
    limit = doc.cluster.nodes.limit(n_nodes)
    stamps: list = []
    for seq in range(1, 40):
        now += timedelta(seconds=REPORT_S)
        views = []
        for name, placement, bad in jobs:
            sc = {r: (SLOW if placement[r] == bad else 1.0) for r in range(8)}
            rep = report(sc, seq=seq, at=now, job=name, nodes=placement)
            views.append(JobView(JobKey(f"ml/{name}"), (rep,), namespace="ml", name=name))
        out = decide(Window(tuple(views), cluster), state, doc, now)
        state = out.next_state
        cluster = cluster.with_decisions(out.decisions)
        marked = {n for n, v in cluster.nodes.items() if v.our_marks}
        assert limit is None or len(marked) <= limit, (len(marked), limit)
        for name, _placement, _bad in jobs:
            held = {
                n
                for n, ns in state.cluster.nodes.items()
                for rec in ns.marks.values()
                if f"ml/{name}" in rec.holders
            }
            assert len(held) <= job_max
        stamps += [
            now
            for d in out.decisions
            if d.verdict is Verdict.ACT and d.action in (NODE_ACTIONS | {ActionKind.RESTART_RANK})
        ]
        assert sum(1 for t in stamps if now - t < RATE_WINDOW) <= per_hour
        # What the budget gauges show agrees with the world and with the acts.
        usage = cluster_usage(state.cluster, doc.cluster, n_nodes, now)
        assert usage["cluster.nodes"] == (len(marked), limit)
        recent = sum(1 for t in stamps if now - t < RATE_WINDOW)
        assert usage["cluster.actionsPerHour"] == (recent, per_hour)
        refused = [d for d in out.decisions if d.reason is Reason.BUDGET_EXHAUSTED]
        assert all("used" in d.evidence and "limit" in d.evidence for d in refused)


def test_breaker_trips_on_a_storm_and_still_lets_undo_through() -> None:
    doc = policy_doc(
        {
            "attribution": {"jobWideFraction": 1.0, "structuralMinNodes": 100},
            "ladder": {"restartRank": {"enabled": False}},
        },
        {"cluster": {"breaker": {"maxActions": 2, "openS": 100000}}},
    )
    loop = Loop(doc, world=64)
    slow = {r: SLOW for r in (0, 8, 16, 24, 32)}  # one rank on each of five nodes
    for _ in range(5):
        loop.step(slow)
    assert any(d.reason is Reason.BREAKER_OPEN for d in loop.log)
    marked_before = {n for n, v in loop.cluster.nodes.items() if v.our_marks}
    assert 0 < len(marked_before) <= 2
    undo = []
    for _ in range(6):
        undo += [d for d in loop.step() if d.verdict is Verdict.UNDO]
    assert loop.state.cluster.breaker_open_until is not None
    assert loop.now < loop.state.cluster.breaker_open_until
    assert {d.node for d in undo} == marked_before
    assert not any(v.our_marks for v in loop.cluster.nodes.values())


# --- stale and malformed data --------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(age_s=st.floats(301, 10_000_000), world=st.integers(2, 40))
def test_stale_reports_never_act_and_never_clear(age_s, world) -> None:
    loop = Loop(policy_doc(), world=world)
    for _ in range(4):
        loop.step({0: SLOW})
    ladder_before = loop.state.jobs[JobKey("ml/train")].ladders
    marks_before = dict(loop.cluster.nodes)
    loop.now += timedelta(seconds=age_s)
    ds = loop.decide()
    assert not acts(ds)
    assert not [d for d in ds if d.verdict is Verdict.UNDO]
    assert reasons(ds) == {Reason.STALE_DATA}
    assert loop.state.jobs[JobKey("ml/train")].ladders == ladder_before
    assert dict(loop.cluster.nodes) == marks_before


@settings(max_examples=40, deadline=None)
@given(
    bad=st.one_of(
        st.text(max_size=50),
        st.dictionaries(st.text(max_size=8), st.integers(), max_size=4).map(str),
    ),
    world=st.integers(2, 24),
)
def test_malformed_newest_report_never_acts(bad, world) -> None:
    from pacekeeper.detector.score_report import ReportRejected, ScoreReport

    loop = Loop(policy_doc(), world=world)
    for _ in range(3):
        loop.step({0: SLOW})
    try:
        ScoreReport.from_wire(bad)
        raise AssertionError("garbage must be rejected at the boundary")
    except ReportRejected as e:
        loop.reports.append(
            RejectedReport(received_at=loop.now + timedelta(seconds=30), error=str(e))
        )
    loop.now += timedelta(seconds=60)
    ds = loop.decide()
    assert not acts(ds)
    assert reasons(ds) == {Reason.MALFORMED_REPORT}


@settings(max_examples=30, deadline=None)
@given(missing=st.sets(st.integers(0, 15), min_size=1, max_size=16))
def test_ranks_without_scores_or_samples_are_unknown_and_never_act(missing) -> None:
    loop = Loop(policy_doc(), world=16)
    for _ in range(6):
        sc = scores(16, dict.fromkeys(missing, SLOW))
        for r in missing:
            sc[r] = None
        loop.now += timedelta(seconds=REPORT_S)
        loop.seq += 1
        loop.reports.append(report(sc, seq=loop.seq, at=loop.now))
        ds = loop.decide()
        assert not acts(ds)
    stale = [d for d in loop.log if d.reason is Reason.STALE_DATA]
    # Ranks are judged against their peers: a rank left with no measured peer cannot be
    # judged either (score.reference: peerMedian, docs/controller.md).
    measured = set(range(16)) - set(missing)
    unjudged = set(missing) | (measured if len(measured) == 1 else set())
    assert stale and set(stale[-1].evidence["ranks"]) == unjudged
    for _ in range(6):
        assert not acts(loop.step({0: SLOW}, samples=0))
    assert Reason.INSUFFICIENT_SAMPLES in reasons(loop.log)


def test_report_from_the_future_is_malformed() -> None:
    loop = Loop(policy_doc())
    loop.now += timedelta(seconds=60)
    loop.reports.append(report(scores(16, {0: SLOW}), seq=1, at=loop.now + timedelta(hours=1)))
    assert reasons(loop.decide()) == {Reason.MALFORMED_REPORT}


# --- humans and other owners -------------------------------------------------------------


def test_human_uncordon_is_respected_with_a_cooldown_and_no_fight() -> None:
    doc = policy_doc({"ladder": {"cordonNode": {"maxAttempts": 3, "timeoutS": 60}}})
    loop = Loop(doc)
    while not any(a == (ActionKind.CORDON_NODE, "node/node-000") for a in acts(loop.log)):
        loop.step({0: SLOW})
        assert loop.seq < 30
    loop.step({0: SLOW})  # the controller sees its cordon in place
    loop.human_uncordon("node-000")
    ds = loop.step({0: SLOW})
    assert Reason.HUMAN_OVERRIDE in reasons(ds)
    # Still slow for the whole cooldown: never put back, each decision says why.
    for _ in range(int(3600 / REPORT_S) - 2):
        ds = loop.step({0: SLOW})
        assert not acts(ds)
        node = loop.cluster.nodes[NodeName("node-000")]
        assert not node.unschedulable
        assert MarkKind.CORDON not in node.our_marks
    assert Reason.COOLDOWN in reasons(loop.log)


def test_mark_never_seen_on_the_node_is_decided_again_with_the_same_key() -> None:
    loop = Loop(policy_doc())
    while not any(a[0] is ActionKind.TAINT_NODE for a in acts(loop.log)):
        loop.step({0: SLOW})
    taint = next(d for d in loop.log if d.action is ActionKind.TAINT_NODE)
    loop.cluster = ClusterView(nodes={n: NodeView(n) for n in loop.cluster.nodes})  # it failed
    again = []
    for _ in range(3):
        ds = loop.decide_without_applying()
        again += [d for d in ds if d.verdict is Verdict.ACT and d.action is ActionKind.TAINT_NODE]
        loop.now += timedelta(seconds=60)
    assert again and all(d.action_key == taint.action_key for d in again)
    assert all(d.evidence.get("reissue") for d in again)


def test_node_cordoned_by_someone_else_is_not_ours_to_touch() -> None:
    loop = Loop(policy_doc())
    nodes = dict(loop.cluster.nodes)
    nodes[NodeName("node-000")] = NodeView(NodeName("node-000"), unschedulable=True)
    loop.cluster = ClusterView(nodes=nodes)
    for _ in range(12):
        loop.step({0: SLOW})
    node_acts = [a for a in acts(loop.log) if a[0] in NODE_ACTIONS]
    assert node_acts == []
    assert Reason.NOT_OURS in reasons(loop.log)
    for _ in range(6):
        loop.step()
    assert loop.cluster.nodes[NodeName("node-000")].unschedulable
    assert not [d for d in loop.log if d.verdict is Verdict.UNDO]


# --- attribution: imbalance and job-wide ----------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(seed=st.randoms(use_true_random=False), world=st.integers(16, 64))
def test_moving_slowest_rank_is_imbalance_and_gets_no_node_action(seed, world) -> None:
    loop = Loop(policy_doc(), world=world)
    candidates = seed.sample(range(world), 4)
    for i in range(40):
        loop.step({candidates[i % 4]: 0.5, candidates[(i + 1) % 4]: 0.6})
    assert not [a for a in acts(loop.log) if a[0] in NODE_ACTIONS]
    assert Reason.WORKLOAD_IMBALANCE in reasons(loop.log)
    # Slower rotation: each rank stays slowest for as many reports as persistence needs.
    loop = Loop(policy_doc(), world=world)
    for i in range(60):
        loop.step({candidates[(i // 3) % 4]: 0.5})
    assert not [a for a in acts(loop.log) if a[0] in NODE_ACTIONS]
    assert Reason.WORKLOAD_IMBALANCE in reasons(loop.log)


@settings(max_examples=25, deadline=None)
@given(world=st.integers(8, 128), level=st.floats(0.1, 0.69))
def test_whole_job_slow_is_job_wide_and_gets_no_node_action(world, level) -> None:
    loop = Loop(policy_doc(), world=world)
    for _ in range(12):
        loop.step(dict.fromkeys(range(world), level))
    assert acts(loop.log) == []
    assert Reason.JOB_WIDE_SLOWDOWN in reasons(loop.log)


def test_slow_pipeline_stage_on_many_nodes_is_structural_imbalance() -> None:
    loop = Loop(policy_doc(), world=128)  # 16 nodes; the last stage fills 4 of them
    for _ in range(12):
        loop.step(dict.fromkeys(range(96, 128), 0.6))
    assert acts(loop.log) == []
    # Slow from the first report on a regular block: the pattern names it (issue 39);
    # once the stage appears mid-job it is structural imbalance (too many nodes).
    held = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert held and held[-1].evidence["pattern"].startswith("ranks 96-127")
    loop = Loop(policy_doc(), world=128)
    for i in range(12):
        loop.step(dict.fromkeys(range(96, 128), 0.6) if i >= 3 else None)
    assert acts(loop.log) == []
    imb = [d for d in loop.log if d.reason is Reason.WORKLOAD_IMBALANCE]
    assert imb and imb[-1].evidence["kind"] == "structural"


def test_persistent_fault_inside_an_imbalanced_job_is_still_found() -> None:
    loop = Loop(policy_doc(), world=64)
    for i in range(30):
        loop.step({5: 0.5, 20 + (i % 5) * 8: 0.55})
    assert (ActionKind.TAINT_NODE, "node/node-000") in acts(loop.log)
    assert not [a for a in acts(loop.log) if a[1] != "node/node-000"]


# --- opt-outs and modes ---------------------------------------------------------------------


def test_opted_out_node_gets_notify_but_no_node_action() -> None:
    loop = Loop(policy_doc(document={"optOuts": {"nodes": ["node-000"]}}))
    for _ in range(15):
        loop.step({0: SLOW})
    kinds = {a[0] for a in acts(loop.log)}
    assert ActionKind.NOTIFY in kinds and not kinds & NODE_ACTIONS
    assert Reason.OPTED_OUT in reasons(loop.log)


def test_node_selector_opt_out_matches_labels() -> None:
    loop = Loop(
        policy_doc(document={"optOuts": {"nodeSelectors": [{"matchLabels": {"pool": "x"}}]}})
    )
    nodes = dict(loop.cluster.nodes)
    nodes[NodeName("node-000")] = NodeView(NodeName("node-000"), labels={"pool": "x"})
    loop.cluster = ClusterView(nodes=nodes)
    for _ in range(15):
        loop.step({0: SLOW})
    assert not {a[0] for a in acts(loop.log)} & NODE_ACTIONS


def test_opted_out_namespace_is_never_acted_on() -> None:
    loop = Loop(policy_doc(document={"optOuts": {"namespaces": ["ml"]}}))
    for _ in range(15):
        loop.step({0: SLOW})
    assert acts(loop.log) == []
    assert reasons(loop.log) == {Reason.OPTED_OUT}


def test_observe_and_dry_run_record_the_would_be_actions_only() -> None:
    for mode in (Mode.OBSERVE, Mode.DRY_RUN):
        loop = Loop(policy_doc(document={"mode": mode.value}))
        for _ in range(20):
            loop.step({0: SLOW})
        assert acts(loop.log) == []
        would = [d.action for d in loop.log if d.reason is Reason.OBSERVE_MODE]
        assert ActionKind.TAINT_NODE in would and ActionKind.CORDON_NODE in would
        assert all(d.mode is mode for d in loop.log)
        assert not any(v.our_marks for v in loop.cluster.nodes.values())


def test_job_annotation_can_only_lower_the_mode() -> None:
    loop = Loop(policy_doc(document={"mode": "dry-run"}))
    loop.job_fields["mode_override"] = Mode.ENFORCE
    for _ in range(10):
        loop.step({0: SLOW})
    assert acts(loop.log) == []
    assert all(d.mode is Mode.DRY_RUN for d in loop.log)


def test_warm_up_after_job_start_holds() -> None:
    loop = Loop(policy_doc({"warmup": {"afterJobStartS": 600}}))
    for _ in range(9):
        ds = loop.step({0: SLOW})
        assert reasons(ds) == {Reason.WARMING_UP}
    for _ in range(5):
        loop.step({0: SLOW})
    assert (ActionKind.NOTIFY, "node/node-000") in acts(loop.log)


# --- anything goes: arbitrary report streams ------------------------------------------------

_STRAGGLER = st.tuples(st.just("report"), st.just(scores(24, {0: 0.3})), st.just(60), st.just(9))
_EVENT = st.one_of(
    _STRAGGLER,  # a real straggler, so that there is something to do
    st.tuples(
        st.just("report"),
        st.dictionaries(
            st.integers(0, 23),
            st.one_of(st.sampled_from([None, 0.3, 1.0]), st.floats(0, 1.2)),
            min_size=1,
            max_size=24,
        ),
        st.integers(-120, 900),  # seconds since the previous event (back in time too)
        st.integers(0, 3),  # samples
    ),
    st.tuples(st.just("rejected"), st.none(), st.integers(0, 600), st.just(0)),
    # Time passes without new data; often past maxReportAgeS.
    st.tuples(
        st.just("tick"), st.none(), st.sampled_from([400, 1000]) | st.integers(0, 900), st.just(0)
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    events=st.lists(st.one_of(_STRAGGLER, _STRAGGLER, _EVENT), min_size=1, max_size=25),
    mode=st.sampled_from([Mode.ENFORCE, Mode.ENFORCE, Mode.DRY_RUN, Mode.OBSERVE]),
)
def test_arbitrary_report_streams_never_act_on_bad_data_and_state_round_trips(events, mode) -> None:
    import json

    doc = policy_doc({"persistence": {"minSamples": 1}}, {"mode": mode.value})
    loop = Loop(doc, world=24)
    for kind, sc, dt, samples in events:
        loop.now += timedelta(seconds=dt)
        if kind == "report":
            loop.seq += 1
            rep = report(sc, seq=loop.seq, at=loop.now, samples=samples, world_size=24)
            loop.reports.append(rep)
        elif kind == "rejected":
            loop.reports.append(RejectedReport(received_at=loop.now, error="bad"))
        if not loop.reports:
            continue
        newest = loop.reports[-5:]
        ds = loop.decide()
        last = newest[-1]
        moving = [d for d in ds if d.verdict is not Verdict.HOLD and not d.evidence.get("reissue")]
        # Stale: the newest data, by when it was made (a report may arrive after a newer
        # one), is over maxReportAgeS old.
        made = [r.generated_at for r in newest if not isinstance(r, RejectedReport)]
        if isinstance(last, RejectedReport) or loop.now - max(made) > timedelta(seconds=300):
            assert [d for d in moving if d.verdict is Verdict.ACT] == []
        for d in moving:
            if d.verdict is Verdict.ACT:
                assert mode is Mode.ENFORCE
                latest = max(
                    (r for r in newest if not isinstance(r, RejectedReport)),
                    key=lambda r: r.generated_at,
                )
                by_rank = {r.rank: r for r in latest.ranks}
                for rank in d.evidence["ranks"]:
                    assert by_rank[rank].gpu_relative is not None
                    assert by_rank[rank].gpu_relative < doc.policies["default"].thresholds.act
                    assert by_rank[rank].kernel_samples >= 1
        text = json.dumps(loop.state.to_dict())
        assert State.from_dict(json.loads(text)) == loop.state
