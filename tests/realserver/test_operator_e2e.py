"""The operator end to end on the real server: the ladder, a human's marks, recovery and
undo, stale data. The real `pacekeeper operator run` process runs as the chart's
ServiceAccount under the chart's RBAC; the real reporter writes each job's
StragglerReport as the job's ServiceAccount; pods belong to a real batch/v1 Job.
Every test ends by checking that the operator was refused nothing (audit log and its
own log)."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
from e2e_world import GROUP, PLURAL, VERSION, World, fast_policy

from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.runtime.report_birth import born_object
from pacekeeper.controller.sources.workloads import OwnerRef

LADDER = ("notify", "taintNode", "cordonNode")
REPORT_EVERY_S = 0.5


def test_the_ladder_notifies_then_taints_then_cordons_the_slow_ranks_node_only(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-ladder")
    nodes = world.nodes(3)
    job = world.job("llama", nodes)
    world.install(actions=LADDER, policy=fast_policy({step: {} for step in LADDER}))
    world.start_operator()
    slow_node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=REPORT_EVERY_S)

    world.eventually(lambda: world.cordoned(slow_node), "the slow rank's node cordoned")
    assert [t["key"] for t in world.our_taints(slow_node)] == [TAINT_KEY]
    assert [t["effect"] for t in world.our_taints(slow_node)] == ["NoSchedule"]
    acted = [action for verdict, action, _ in world.acted(job) if verdict == "act"]
    assert acted == list(LADDER)
    # Nothing more happens while the rank stays slow: the ladder has no further step.
    world.more_reports(6, reporters[job])
    assert world.marked() == [slow_node]
    writes = world.node_writes()
    assert [w.name for w in writes] == [slow_node, slow_node]
    assert [sorted(w.request_object["spec"]) for w in writes] == [["taints"], ["unschedulable"]]
    assert world.event_actions(slow_node) == ["taintNode", "cordonNode"]
    assert world.event_actions(job.name, "StragglerReport") == ["notify"]
    # The workload (the Job) hears of every step, once each, then that the ladder is spent.
    actions, reasons = world.event_actions(job.name, "Job"), world.event_reasons(job.name, "Job")
    told = list(zip(actions, reasons, strict=True))
    assert told == [(step, "BelowThreshold") for step in LADDER] + [
        ("cordonNode", "LadderExhausted")
    ]
    report = world.report(job)
    assert report is not None
    display = report["status"]["controller"]
    assert [d["action"] for d in display["decisions"] if d["verdict"] == "act"] == list(LADDER)
    assert reporters.errors == []
    assert world.refusals() == []


def test_a_humans_cordon_is_never_undone_and_a_human_uncordon_is_not_fought(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-human")
    alpha_nodes, beta_nodes = world.nodes(2), world.nodes(2)
    alpha = world.job("alpha", alpha_nodes)
    beta = world.job("beta", beta_nodes)
    human_cordoned, ours = alpha.node_of_rank(5), beta.node_of_rank(5)
    world.set_cordon(human_cordoned, True)  # before the controller ever saw the node
    world.install(actions=LADDER, policy=fast_policy({step: {} for step in LADDER}))
    world.start_operator()
    reporters = world.publish({alpha: {5: 0.5}, beta: {5: 0.5}}, every_s=REPORT_EVERY_S)

    world.eventually(lambda: world.cordoned(ours), "our cordon of beta's slow node")
    # A node someone else cordoned is theirs: no taint, no cordon, a record of why.
    world.eventually(lambda: "NotOurs" in world.reasons(alpha), "alpha's node left: NotOurs")

    # The human uncordons our cordon once the controller has seen it in place.
    def cordon_seen() -> bool:
        marks = world.cluster_state().get("nodes", {}).get(ours, {}).get("marks", {})
        return bool(marks.get("cordon", {}).get("seen"))

    world.eventually(cordon_seen, "our cordon seen on the node")
    world.set_cordon(ours, False)
    world.eventually(lambda: "HumanOverride" in world.reasons(beta), "the uncordon noticed")
    world.more_reports(6, reporters[beta])  # still slow, reconciled again and again
    assert not world.cordoned(ours), "the controller put back a cordon a human removed"
    cordon_writes = [
        w for w in world.node_writes(ours) if w.request_object["spec"].get("unschedulable")
    ]
    assert len(cordon_writes) == 1

    # Both ranks recover: our taint goes, the human's cordon stays, ours stays removed.
    reporters[alpha].slow.clear()
    reporters[beta].slow.clear()
    world.eventually(lambda: not world.our_taints(ours), "our taint removed on recovery")
    world.more_reports(4, reporters[alpha])
    assert world.cordoned(human_cordoned), "a human's cordon was undone"
    assert not world.cordoned(ours)
    assert world.marked() == [human_cordoned]
    assert world.node_writes(human_cordoned) == [], "a human-cordoned node was written"
    # Each job's records hold its own decisions only (the override is beta's, whichever
    # job's reconcile noticed it): a job's StragglerReport says nothing of another job.
    for job in (alpha, beta):
        assert {r["job"] for r in world.records(job)} == {job.key}
        report = world.report(job)
        assert report is not None
        assert {d["job"] for d in report["status"]["controller"]["decisions"]} == {job.key}
    assert reporters.errors == []
    assert world.refusals() == []


def test_recovery_removes_our_taint_and_cordon_and_says_so(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-recovery")
    job = world.job("llama", world.nodes(3))
    world.install(actions=LADDER, policy=fast_policy({step: {} for step in LADDER}))
    operator = world.start_operator()
    slow_node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=REPORT_EVERY_S)
    world.eventually(lambda: world.cordoned(slow_node), "the slow rank's node cordoned")

    reporters[job].slow.clear()  # every rank healthy: history entries without a worst rank
    world.eventually(
        lambda: not world.cordoned(slow_node) and not world.our_taints(slow_node),
        "our marks undone",
    )
    undone = [action for verdict, action, _ in world.acted(job) if verdict == "undo"]
    assert sorted(undone) == ["cordonNode", "taintNode"]
    annotations = world.node(slow_node)["metadata"].get("annotations") or {}
    assert not [k for k in annotations if k.startswith("pacekeeper.dev/")], annotations
    assert world.event_actions(slow_node)[:2] == ["taintNode", "cordonNode"]
    assert sorted(world.event_actions(slow_node)[2:]) == ["uncordonNode", "untaintNode"]
    assert len(world.node_writes(slow_node)) == 4, "two marks, two removals"
    assert len(world.node_writes()) == 4
    # The state the server stored reads back, healthy reports' entries (no worst rank)
    # included: decisions go on (issue 16: a merge patch used to prune those nulls).
    world.more_reports(4, reporters[job])
    history = world.job_state(job)["history"]
    assert any(entry.get("worstRank") is None for entry in history), history
    assert "reconcile failed" not in operator.log_text()
    assert reporters.errors == []
    assert world.refusals() == []


def test_stale_reports_never_act_and_fresh_ones_do(make_world: Callable[[str], World]) -> None:
    world = make_world("e2e-stale")
    job = world.job("llama", world.nodes(3))
    world.install(actions=LADDER, policy=fast_policy({step: {} for step in LADDER}))
    slow_node = job.node_of_rank(5)
    # The report as a controller creates it (issue 40), so the old reports are there
    # before this one starts: the stale data is the first it sees.
    workload = OwnerRef("batch/v1", "Job", job.name, job.namespace, uid=job.uid)
    born = born_object(job.namespace, job.name, workload)
    kubernetes.client.CustomObjectsApi(world.cluster.admin).create_namespaced_custom_object(
        GROUP, VERSION, job.namespace, PLURAL, born
    )
    reporters = world.publish({}, every_s=REPORT_EVERY_S)
    publishing = reporters.add(job, {5: 0.3})
    publishing.age_s = 60.0  # older than persistence.maxReportAgeS (20 s) when sent
    world.eventually(lambda: publishing.sent, "the first old report sent")
    world.start_operator()

    world.eventually(lambda: "StaleData" in world.reasons(job), "StaleData recorded")
    stale = next(r for r in world.records(job) if r["reason"] == "StaleData")
    assert stale["evidence"]["ageS"] >= 60 and stale["evidence"]["maxReportAgeS"] == 20
    # With fresh data two reports notify and one more second taints; give it many more.
    world.more_reports(10, publishing)
    assert world.node_writes() == []
    assert world.marked() == []
    assert world.event_actions(job.name) == []
    assert not [a for verdict, a, _ in world.acted(job) if verdict == "act"]

    publishing.age_s = 0.0  # the same job, now reporting on time
    world.eventually(lambda: world.our_taints(slow_node), "fresh data acted on")
    assert reporters.errors == []
    assert world.refusals() == []
