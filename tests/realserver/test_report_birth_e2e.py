"""Issue 40 on the real server, with the chart's RBAC: a job's reporter Role cannot create
a StragglerReport (RBAC cannot limit `create` by name, so it could create another job's
first); the controller creates each opted-in job's report, owned by its workload, and the
job's reporter only patches its status."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
import pytest
from e2e_world import GROUP, PLURAL, VERSION, World, fast_policy
from identities import BIRTH_NAMESPACE, INTRUDER
from kubernetes.client.exceptions import ApiException


def test_no_jobs_account_can_create_a_report_the_controller_creates_it_bound(
    make_world: Callable[[str], World],
) -> None:
    world = make_world(BIRTH_NAMESPACE)
    llama = world.job("llama", world.nodes(2))
    evil = world.job("evil", world.nodes(1), account=INTRUDER)
    ladder: dict[str, dict[str, int]] = {"notify": {}}
    world.install(actions=ladder, policy=fast_policy(ladder))

    # Before the controller runs: the intruder tries to make llama's report first.
    intruder = kubernetes.client.CustomObjectsApi(
        world.cluster.api_client(world.cluster.token_for(evil.account))
    )
    body = {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "StragglerReport",
        "metadata": {"name": llama.name, "namespace": llama.namespace},
        "spec": {"job": {"platform": "kubernetes", "namespace": llama.namespace,
                         "name": llama.name},
                 "control": {"enabled": False}},
    }  # fmt: skip
    with pytest.raises(ApiException) as created:
        intruder.create_namespaced_custom_object(GROUP, VERSION, llama.namespace, PLURAL, body)
    assert created.value.status == 403
    assert world.report(llama) is None

    world.start_operator()
    reporters = world.publish({llama: {}}, every_s=0.5)
    world.eventually(lambda: world.report(llama), "llama's report created by the controller")
    obj = world.report(llama)
    assert obj is not None
    assert obj["metadata"]["annotations"]["pacekeeper.dev/created-by"] == "controller"
    assert [r["kind"] for r in obj["metadata"]["ownerReferences"]] == ["Job"]
    assert "control" not in obj["spec"]
    world.eventually(
        lambda: "report" in ((world.report(llama) or {}).get("status") or {}),
        "llama's reporter patched the status of the report it did not create",
    )
    assert reporters.errors == []
