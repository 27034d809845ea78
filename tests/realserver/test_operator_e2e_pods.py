"""The operator's pod actions and the job's end, on the real server: restartRank through
the Eviction API in the version the server serves (1.20: policy/v1beta1 only), against
PodDisruptionBudgets whose status kube-controller-manager's disruption controller
computes; and garbage collection: deleting the Job deletes its StragglerReport (the
reporter made the Job its owner), and the controller then deletes the job's state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from e2e_jobs import JOB_NAME, TrainingJob
from e2e_world import World, fast_policy

RESTART = {"notify": {}, "restartRank": {"timeoutS": 30, "maxAttempts": 1}}


def _pod(world: World, job: TrainingJob, index: int) -> dict[str, Any]:
    import json

    import kubernetes

    core: Any = kubernetes.client.CoreV1Api(world.cluster.admin)
    pod = job.pods[index]
    return dict(json.loads(core.read_namespaced_pod(pod.name, job.namespace,
                                                    _preload_content=False).data))  # fmt: skip


def _pdb(world: World, job: TrainingJob, min_available: int) -> None:
    world.cluster.apply(
        {
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": job.name, "namespace": job.namespace},
            "spec": {
                "minAvailable": min_available,
                "selector": {"matchLabels": {JOB_NAME: job.name}},
            },
        }
    )


def _pdb_status(world: World, job: TrainingJob) -> dict[str, Any]:
    import kubernetes

    # The client has no typed v1beta1 API any more; the generic path reads any group.
    api: Any = kubernetes.client.CustomObjectsApi(world.cluster.admin)
    pdb = api.get_namespaced_custom_object(
        "policy", "v1beta1", job.namespace, "poddisruptionbudgets", job.name
    )
    return {**(pdb.get("status") or {}), "_generation": pdb["metadata"]["generation"]}


def _computed(world: World, job: TrainingJob, allowed: int) -> bool:
    status = _pdb_status(world, job)
    return (
        status.get("observedGeneration") == status["_generation"]
        and status.get("currentHealthy") == len(job.pods)
        and status.get("disruptionsAllowed") == allowed
    )


def test_restart_rank_evicts_through_policy_v1beta1_and_honours_disruption_budgets(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-evict")
    open_job = world.job("open", world.nodes(2))  # no budget
    guarded = world.job("guarded", world.nodes(2))  # minAvailable 2: no disruption allowed
    spare = world.job("spare", world.nodes(2))  # minAvailable 1: one disruption allowed
    _pdb(world, guarded, 2)
    _pdb(world, spare, 1)
    world.eventually(lambda: _computed(world, guarded, 0), "guarded's budget computed")
    world.eventually(lambda: _computed(world, spare, 1), "spare's budget computed")
    world.install(actions=("notify", "restartRank"), policy=fast_policy(RESTART))
    world.start_operator()
    jobs = (open_job, guarded, spare)
    reporters = world.publish({job: {5: 0.4} for job in jobs}, every_s=0.5)

    def terminating(job: TrainingJob) -> bool:
        return bool(_pod(world, job, 1)["metadata"].get("deletionTimestamp"))

    world.eventually(lambda: terminating(open_job), "open's slow rank's pod evicted")
    world.eventually(lambda: terminating(spare), "spare's slow rank's pod evicted")
    for job in (open_job, spare):
        reporters[job].paused = True  # its ranks are gone; the job would restart them
    refused = world.eventually(
        lambda: world.operator_requests(verb="create", subresource="eviction", code=429),
        "guarded's eviction refused by its budget",
    )
    assert {e.namespace for e in refused} == {guarded.namespace}
    assert {e.name for e in refused} == {guarded.pods[1].name}
    world.eventually(lambda: "PdbBlocked" in world.event_reasons(guarded.pods[1].name),
                     "the refusal announced on the pod")  # fmt: skip

    # Discovery found policy/v1beta1 first time: no request in a version the server lacks.
    attempts = world.operator_requests(verb="create", subresource="eviction")
    assert {e.code for e in attempts} == {201, 429}
    evictions = [e for e in attempts if e.code == 201]
    assert sorted(str(e.name) for e in evictions) == sorted(
        [open_job.pods[1].name, spare.pods[1].name]
    )
    assert world.operator_requests(verb="delete", resource="pods") == [], "no delete fallback"
    # Evicted and bound to a node: Terminating until a kubelet (there is none) confirms.
    for job in (open_job, spare):
        pod = _pod(world, job, 1)
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
        assert _pod(world, job, 0)["metadata"].get("deletionTimestamp") is None
    assert not terminating(guarded)
    world.eventually(lambda: _computed(world, guarded, 0), "guarded's budget unchanged")
    spare_status = _pdb_status(world, spare)
    assert spare_status["disruptionsAllowed"] == 0
    assert [a for v, a, _ in world.acted(open_job) if v == "act"] == ["notify", "restartRank"]
    assert world.node_writes() == []
    assert reporters.errors == []
    assert world.refusals() == []


def test_deleting_the_job_deletes_its_report_and_the_controller_its_state(
    make_world: Callable[[str], World],
) -> None:
    import kubernetes

    world = make_world("e2e-gc")
    job = world.job("llama", world.nodes(3))
    ladder: dict[str, dict[str, int]] = {"notify": {}, "taintNode": {}}
    world.install(actions=ladder, policy=fast_policy(ladder))
    world.start_operator()
    slow_node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=0.5)
    world.eventually(lambda: world.our_taints(slow_node), "the slow rank's node tainted")
    world.eventually(lambda: world.job_config_map(job), "the job's state kept")
    report = world.report(job)
    assert report is not None
    assert [(o["kind"], o["name"], o["uid"]) for o in report["metadata"]["ownerReferences"]] == [
        ("Job", job.name, job.uid)
    ]

    reporters[job].paused = True  # the job ends: its pods stop reporting
    batch = kubernetes.client.BatchV1Api(world.cluster.admin)
    # As `kubectl delete job` does: batch/v1 Jobs orphan their dependents by default.
    batch.delete_namespaced_job(job.name, job.namespace, propagation_policy="Background")
    world.eventually(lambda: world.report(job) is None, "the garbage collector deletes the report")
    world.eventually(lambda: world.job_config_map(job) is None, "the controller deletes its state")
    # A mark outlives its job (docs/operator.md, Known gaps): the node did not get better.
    assert world.our_taints(slow_node)
    assert reporters.errors == []
    assert world.refusals() == []
