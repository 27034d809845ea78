"""Issue 40, least privilege, on the real server with the chart's RBAC: the controller's
ServiceAccount cannot rewrite, replace or delete its policy ConfigMap (it writes no
ConfigMap in the release namespace at all) and writes its state in the state namespace,
where no job's account may touch it; a controller run end to end still records each
action once. An upgrade from a release that kept its state in the release namespace
moves that state before acting and repeats nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
from e2e_world import World, fast_policy
from identities import CHART_NAMESPACE, OPERATOR, STATE_NAMESPACE
from kubernetes.client.exceptions import ApiException

from pacekeeper.controller.runtime.state_migration import MIGRATION_CONFIGMAP
from pacekeeper.controller.runtime.state_store import MANAGED_BY


def _status(call: Callable[[], Any]) -> int:
    try:
        call()
    except ApiException as e:
        return int(e.status)
    return 200


def _config_map(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"k": "v"}}  # fmt: skip


@contextlib.contextmanager
def _policy_map(world: World) -> Iterator[dict[str, Any]]:
    """The release's policy ConfigMap as Helm would apply it (the tier mounts its content
    as a file for the operator; here the object itself is the target)."""
    assert world.release is not None and world.release.policy_map is not None
    policy_map = dict(world.release.policy_map)
    world.cluster.apply(policy_map)
    core = kubernetes.client.CoreV1Api(world.cluster.admin)
    try:
        yield policy_map
    finally:
        core.delete_namespaced_config_map(policy_map["metadata"]["name"], CHART_NAMESPACE)


def _decided_acts(world: World) -> list[str]:
    """``act <action>`` of every act decision the operator logged, every run, in order."""
    assert world.operator is not None
    out = []
    for record in world.operator.records():
        if record.get("msg") == "decision":
            parts = str(record.get("summary") or "").split(": ")[1:]
            out += [" ".join(p.split()[:2]) for p in parts if p.startswith("act ")]
    return out


def test_the_controller_cannot_write_its_policy_and_keeps_its_state_apart(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-state")
    job = world.job("llama", world.nodes(1))
    ladder: dict[str, dict[str, Any]] = {"notify": {}}
    world.install(actions=ladder, policy=fast_policy(ladder))
    cluster = world.cluster
    ours = kubernetes.client.CoreV1Api(cluster.api_client(cluster.token_for(OPERATOR)))
    theirs = kubernetes.client.CoreV1Api(cluster.api_client(cluster.token_for(job.account)))
    with _policy_map(world) as policy_map:
        name = policy_map["metadata"]["name"]
        rewritten = {**policy_map, "data": {"policy.yaml": "mode: enforce\n"}}
        # Its policy: no update, patch or delete; no ConfigMap of its own beside it.
        assert _status(lambda: ours.replace_namespaced_config_map(
            name, CHART_NAMESPACE, rewritten)) == 403  # fmt: skip
        assert _status(lambda: ours.patch_namespaced_config_map(
            name, CHART_NAMESPACE, {"data": {"policy.yaml": "{}"}})) == 403  # fmt: skip
        assert _status(lambda: ours.delete_namespaced_config_map(name, CHART_NAMESPACE)) == 403
        assert _status(lambda: ours.create_namespaced_config_map(
            CHART_NAMESPACE, _config_map("pacekeeper-state", CHART_NAMESPACE))) == 403  # fmt: skip
        # Its state namespace: create, read, replace, delete.
        probe = _config_map("pacekeeper-job-rbac-probe", STATE_NAMESPACE)
        assert _status(lambda: ours.create_namespaced_config_map(STATE_NAMESPACE, probe)) == 200
        assert _status(lambda: ours.read_namespaced_config_map(
            "pacekeeper-job-rbac-probe", STATE_NAMESPACE)) == 200  # fmt: skip
        assert _status(lambda: ours.replace_namespaced_config_map(
            "pacekeeper-job-rbac-probe", STATE_NAMESPACE, probe)) == 200  # fmt: skip
        # A job's account: nothing there, not even a read.
        assert _status(lambda: theirs.read_namespaced_config_map(
            "pacekeeper-job-rbac-probe", STATE_NAMESPACE)) == 403  # fmt: skip
        assert _status(lambda: theirs.create_namespaced_config_map(
            STATE_NAMESPACE, _config_map("pacekeeper-state", STATE_NAMESPACE))) == 403  # fmt: skip
        assert _status(lambda: ours.delete_namespaced_config_map(
            "pacekeeper-job-rbac-probe", STATE_NAMESPACE)) == 200  # fmt: skip
        since = cluster.audit.mark()

        # End to end: the controller acts, records it in the state namespace, once.
        world.start_operator()
        reporters = world.publish({job: {1: 0.4}}, every_s=0.5)
        world.eventually(lambda: ("act", "notify") in
                         [(v, a) for v, a, _ in world.acted(job)], "notified")  # fmt: skip
        world.more_reports(4, reporters[job])
        assert [a for v, a, _ in world.acted(job) if v == "act"] == ["notify"]
        assert _decided_acts(world) == ["act notify"]
        assert world.cluster_state(), "the cluster state, in the state namespace"
        refused = cluster.audit.find(since, user=OPERATOR.username, code=403)
        assert [e.describe() for e in refused] == []
        assert world.operator is not None and world.operator.forbidden_lines() == []
        writes = [e for e in cluster.audit.find(since, user=OPERATOR.username,
                                                resource="configmaps")
                  if e.verb not in ("get", "list", "watch")]  # fmt: skip
        assert writes and {e.namespace for e in writes} == {STATE_NAMESPACE}
        assert reporters.errors == []


def _move_state_back(world: World) -> list[str]:
    """The layout of a release before the state namespace: the controller's maps in the
    chart namespace (the same content: the maps' format did not change), none in the
    state namespace, no record of a move."""
    core = kubernetes.client.CoreV1Api(world.cluster.admin)
    selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    moved = []
    for cm in core.list_namespaced_config_map(STATE_NAMESPACE, label_selector=selector).items:
        name = cm.metadata.name
        core.delete_namespaced_config_map(name, STATE_NAMESPACE)
        if name == MIGRATION_CONFIGMAP:
            continue
        world.cluster.apply({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": CHART_NAMESPACE,
                         "labels": dict(cm.metadata.labels or {})},
            "data": dict(cm.data or {}),
        })  # fmt: skip
        moved.append(name)
    return moved


def test_an_upgrade_moves_the_old_state_and_repeats_no_action(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-upgrade")
    job = world.job("llama", world.nodes(3))
    # The taint holds for minutes: nothing after it within the test.
    ladder = {"notify": {}, "taintNode": {"timeoutS": 600}}
    world.install(actions=ladder, policy=fast_policy(ladder))
    operator = world.start_operator()
    slow_node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=0.5)
    world.eventually(lambda: world.our_taints(slow_node), "the slow rank's node tainted", 60)
    world.eventually(lambda: f"taintNode node/{slow_node} Applied" in operator.applied(),
                     "the taint logged", 10)  # fmt: skip
    operator.process.stop(grace_s=25.0)
    moved = _move_state_back(world)
    assert "pacekeeper-state" in moved and any(n.startswith("pacekeeper-job-") for n in moved)
    assert world.job_config_map(job) is None

    since = world.cluster.audit.mark()
    operator.start()  # the upgraded controller: its chart's env names the old namespace
    world.more_reports(6, reporters[job])
    assert _decided_acts(world) == ["act notify", "act taintNode"], "an action repeated"
    assert operator.logged("state moved to the state namespace")
    assert operator.applied() == [f"taintNode node/{slow_node} Applied"]
    assert len(world.node_writes(slow_node)) == 1
    assert [a for v, a, _ in world.acted(job) if v == "act"] == ["notify", "taintNode"]
    # The old maps were only read.
    old_writes = [e for e in world.cluster.audit.find(since, user=OPERATOR.username,
                                                      resource="configmaps")
                  if e.namespace == CHART_NAMESPACE and e.verb not in ("get", "list")]  # fmt: skip
    assert old_writes == []
    assert world.refusals() == []
    assert reporters.errors == []
