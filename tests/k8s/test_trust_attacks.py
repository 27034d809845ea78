"""The job is the least trusted party: attacks a training pod can make with the reporter's
permissions (create a StragglerReport, patch its status), against the real reconciler
over HTTP. Each test asserts the world: marks on nodes, evictions, the controller's own
state, and the record that says why nothing happened. docs/security.md lists them."""

from __future__ import annotations

import json
from typing import Any

from harness import RunningServer
from harness.objects import node, pod
from operator_world import (
    CONTROLLER_NS,
    JOB,
    NAMESPACE,
    NODES,
    Clock,
    controller_state,
    controller_status,
    cordoned,
    reconciler,
    report,
    setup_world,
    sink,
    taints,
)

from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.runtime.state_store import (
    SINCE_KEY,
    STATE_CONFIGMAP,
    job_state_name,
)
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

KEY = JobKey(f"{NAMESPACE}/{JOB}")
SLOW = {5: 0.5}  # rank 5 lives on n1
GROUP, VERSION, PLURAL = "pacekeeper.dev", "v1alpha1", "stragglerreports"


def _claiming(seq: int, clock: Clock, claims: dict[int, str], *, job: str = JOB) -> ScoreReport:
    """The usual report with some ranks' node claims replaced (and their pod names left out,
    as a forger who cannot list the job's pods would)."""
    base = report(seq, clock(), SLOW)
    ranks = [
        r.model_copy(update={"node": claims[r.rank], "pod": None}) if r.rank in claims else r
        for r in base.ranks
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=job),
        sequence=seq, generated_at=clock(), window_s=30.0, ranks=ranks,
    )  # fmt: skip


def _marked(server: RunningServer, names: tuple[str, ...]) -> list[str]:
    return [n for n in names if taints(server, n) or cordoned(server, n)]


def test_a_report_naming_a_node_without_the_jobs_pods_marks_nothing_and_says_so(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    k8s_server.apply(node("infra-db"))
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = sink(k8s_api_client)
    for seq in range(16):
        out.send(_claiming(seq, clock, {r: "infra-db" for r in range(4, 8)}))
        rec.reconcile_job(KEY)
        clock.advance(30)

    assert _marked(k8s_server, (*NODES, "infra-db")) == []
    assert k8s_server.history.find(verb="patch", plural="nodes") == []
    held = [d for d in controller_status(k8s_server)["decisions"]
            if d["reason"] == "UntrustedReport"]  # fmt: skip
    assert held and held[0]["verdict"] == "hold"
    assert held[0]["evidence"]["mismatches"][0] == {
        "rank": 4, "claimedNode": "infra-db", "actualNode": "n1",
    }  # fmt: skip
    events = [e for e in k8s_server.list("v1", "Event", NAMESPACE)
              if "UntrustedReport" in (e.get("message") or "")]  # fmt: skip
    assert len(events) == 1, "said once while the report keeps lying"
    assert "rank 4 claims node 'infra-db', the API says 'n1'" in events[0]["message"]
    refused = rec.metrics.registry.get_sample_value(
        "pacekeeper_reports_refused_total", {"reason": "UntrustedReport"}
    )
    assert refused == 1


def test_a_truthful_report_of_the_same_job_is_still_acted_on(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = sink(k8s_api_client)
    for seq in range(16):
        # Pod names left out: placement comes from the pods' completion indexes.
        out.send(_claiming(seq, clock, {r: NODES[r // 4] for r in range(12)}))
        rec.reconcile_job(KEY)
        clock.advance(30)
    assert _marked(k8s_server, NODES) == ["n1"]


def _ghost(api_client: Any, name: str, slow_node: str, clock: Clock, seq: int) -> None:
    """A report object no workload stands behind, slow on a node of somebody else's."""
    ranks = [
        RankScores(rank=r, node=slow_node if r == 0 else "n0", gpu_relative=0.3 if r == 0 else 1.0,
                   gpu_individual=0.3 if r == 0 else 1.0, section_samples=100,
                   kernel_samples=1000)
        for r in range(4)
    ]  # fmt: skip
    ghost = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=name),
        sequence=seq, generated_at=clock(), window_s=30.0, ranks=ranks,
    )  # fmt: skip
    if seq == 0:  # made by someone with `create` (no reporter has it any more)
        intrude(api_client, name)
    KubernetesStatusSink(namespace=NAMESPACE, name=name, incarnation="g", api_client=api_client,
                         ).send(ghost)  # fmt: skip


def intrude(api_client: Any, name: str, **fields: Any) -> dict[str, Any]:
    """A StragglerReport created by someone other than the controller: ``fields`` go
    into the body (``metadata``, ``spec``)."""
    from kubernetes import client

    body: dict[str, Any] = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StragglerReport",
        "metadata": {"name": name, "namespace": NAMESPACE, **fields.get("metadata", {})},
        "spec": {"job": {"platform": "kubernetes", "namespace": NAMESPACE, "name": name},
                 **fields.get("spec", {})},
    }  # fmt: skip
    out: dict[str, Any] = client.CustomObjectsApi(api_client).create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, body
    )
    return out


def test_ghost_reports_touch_nothing_keep_no_state_and_leave_the_budget_to_real_jobs(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    from kubernetes import client

    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    custom = client.CustomObjectsApi(k8s_api_client)
    ghosts = [f"ghost-{i}" for i in range(3)]
    for seq in range(12):
        for i, name in enumerate(ghosts):
            _ghost(k8s_api_client, name, NODES[i], clock, seq)
            if seq == 0:  # opting itself in by its own annotation changes nothing
                custom.patch_namespaced_custom_object(
                    GROUP, VERSION, NAMESPACE, PLURAL, name,
                    {"metadata": {"annotations": {"pacekeeper.dev/detect": "true"}}},
                    _content_type="application/merge-patch+json",
                )  # fmt: skip
            rec.reconcile_job(JobKey(f"{NAMESPACE}/{name}"))
        clock.advance(30)
    assert _marked(k8s_server, NODES) == []
    for name in ghosts:
        records = controller_status_of(k8s_server, name)["decisions"]
        assert [d["reason"] for d in records] == ["UnboundReport"]
        assert "no pod" in records[0]["evidence"]["problem"]
        state = job_state_name(JobKey(f"{NAMESPACE}/{name}"))
        assert k8s_server.read("v1", "ConfigMap", state, namespace=CONTROLLER_NS) is None

    # The real job's slow node is still acted on: the ghosts spent no budget, tripped
    # no breaker.
    out = sink(k8s_api_client)
    for seq in range(16):
        out.send(report(seq, clock(), SLOW))
        rec.reconcile_job(KEY)
        clock.advance(30)
    assert _marked(k8s_server, NODES) == ["n1"]
    reasons = {d["reason"] for d in controller_status(k8s_server)["decisions"]}
    assert "BudgetExhausted" not in reasons and "BreakerOpen" not in reasons


def controller_status_of(server: RunningServer, name: str) -> dict[str, Any]:
    obj = server.read("pacekeeper.dev/v1alpha1", "StragglerReport", name, namespace=NAMESPACE)
    return dict((obj.get("status") or {}).get("controller") or {})


def test_a_report_owned_by_a_lookalike_of_the_job_is_recreated_bound_and_its_claims_dropped(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    """Pods named after a job, a report that names the same job but is owned by a
    lookalike (same kind and name, another uid): the controller did not make it, so it
    is deleted and made again, owned by the job's real workload; nothing it said is
    decided on."""
    setup_world(k8s_server)
    k8s_server.apply(
        pod("other-0", node_name="n2", owner={"kind": "Job", "name": "other", "uid": "uid-1"},
            labels={"batch.kubernetes.io/job-name": "other",
                    "batch.kubernetes.io/job-completion-index": "0"},
            annotations={"pacekeeper.dev/detect": "true"})
    )  # fmt: skip
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    _ghost(k8s_api_client, "other", "n2", clock, 0)
    custom_patch = {"metadata": {"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "other", "uid": "uid-guess",
         "controller": True}]}}  # fmt: skip
    from kubernetes import client

    client.CustomObjectsApi(k8s_api_client).patch_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, PLURAL, "other", custom_patch,
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    forged_uid = k8s_server.read("pacekeeper.dev/v1alpha1", "StragglerReport", "other",
                                 namespace=NAMESPACE)["metadata"]["uid"]  # fmt: skip
    result = rec.reconcile_job(JobKey(f"{NAMESPACE}/other"))
    assert [d.reason.value for d in result.decisions] == ["StaleData"]  # no report yet
    now = k8s_server.read("pacekeeper.dev/v1alpha1", "StragglerReport", "other",
                          namespace=NAMESPACE)  # fmt: skip
    assert now["metadata"]["uid"] != forged_uid
    assert [r["uid"] for r in now["metadata"]["ownerReferences"]] == ["uid-1"]
    assert "report" not in (now.get("status") or {})
    assert _marked(k8s_server, NODES) == []


def test_a_job_rewriting_the_controller_status_changes_neither_state_nor_decisions(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    from kubernetes import client

    setup_world(k8s_server)
    # The report object first: its creation is the job's start here (no pod has a
    # startTime), and the test's first report must not predate it.
    out = sink(k8s_api_client)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out.send(report(0, clock(), SLOW))
    rec.reconcile_job(KEY)
    kept = controller_state(k8s_server)
    assert "5" in kept["streaks"]

    forged = {"state": {"streaks": {"x": 1}, "ladders": "not a ladder"}, "decisions": [],
              "lastDecision": {"verdict": "undo"}}  # fmt: skip
    client.CustomObjectsApi(k8s_api_client).patch_namespaced_custom_object_status(
        GROUP, VERSION, NAMESPACE, PLURAL, JOB, {"status": {"controller": forged}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    clock.advance(30)
    out.send(report(1, clock(), SLOW))
    result = rec.reconcile_job(KEY)  # no StateError: the forged block is never read
    assert result.decisions
    state = controller_state(k8s_server)
    assert state["streaks"]["5"]["count"] == kept["streaks"]["5"]["count"] + 1
    assert "x" not in state["streaks"]


def test_an_old_releases_state_is_taken_over_once_and_never_from_a_newer_report(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    from kubernetes import client

    setup_world(k8s_server)
    clock = Clock()
    rec = reconciler(k8s_api_client, clock)
    out = sink(k8s_api_client)
    out.send(report(0, clock(), SLOW))
    rec.reconcile_job(KEY)
    legacy = controller_state(k8s_server)
    assert legacy["streaks"]["5"]["count"] == 1

    # What an old release left: state in status.controller, no ConfigMap; and this
    # version first ran after the report was created.
    core = client.CoreV1Api(k8s_api_client)
    core.delete_namespaced_config_map(job_state_name(KEY), CONTROLLER_NS)
    cm = k8s_server.read("v1", "ConfigMap", STATE_CONFIGMAP, namespace=CONTROLLER_NS)
    cm["data"][SINCE_KEY] = "2999-01-01T00:00:00+00:00"
    k8s_server.apply(cm)
    custom = client.CustomObjectsApi(k8s_api_client)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NAMESPACE, PLURAL, JOB, {"status": {"controller": {"state": legacy}}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    clock.advance(30)
    out.send(report(1, clock(), SLOW))
    rec.reconcile_job(KEY)
    assert controller_state(k8s_server)["streaks"]["5"]["count"] == 2, "taken over, continued"
    assert "state" not in controller_status(k8s_server), "the old copy is removed"

    # A report created after this version first ran cannot seed the controller's state.
    cm = k8s_server.read("v1", "ConfigMap", STATE_CONFIGMAP, namespace=CONTROLLER_NS)
    cm["data"][SINCE_KEY] = "2000-01-01T00:00:00+00:00"
    k8s_server.apply(cm)
    core.delete_namespaced_config_map(job_state_name(KEY), CONTROLLER_NS)
    seeded = json.loads(json.dumps(legacy))
    seeded["streaks"]["5"]["count"] = 40
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NAMESPACE, PLURAL, JOB, {"status": {"controller": {"state": seeded}}},
        _content_type="application/merge-patch+json",
    )  # fmt: skip
    clock.advance(30)
    out.send(report(2, clock(), SLOW))
    rec.reconcile_job(KEY)
    assert controller_state(k8s_server)["streaks"]["5"]["count"] == 1
