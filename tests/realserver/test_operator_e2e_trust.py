"""Issue 15's attacks on the real server, with the chart's reporter Roles: a second job's
ServiceAccount, whose Role names only its own report, cannot touch the first job's report
(the server answers 403), and a report naming a node that hosts none of the job's pods
marks nothing: the controller records UntrustedReport and says so in an Event, while the
first job's genuinely slow node is acted on as usual."""

from __future__ import annotations

from collections.abc import Callable

import kubernetes
import pytest
from e2e_world import GROUP, PLURAL, VERSION, World, fast_policy
from identities import INTRUDER, TRUST_NAMESPACE
from kubernetes.client.exceptions import ApiException

MERGE = "application/merge-patch+json"


def test_another_jobs_account_is_refused_and_a_report_naming_a_foreign_node_marks_nothing(
    make_world: Callable[[str], World],
) -> None:
    world = make_world(TRUST_NAMESPACE)
    llama = world.job("llama", world.nodes(3))
    evil = world.job("evil", world.nodes(1), account=INTRUDER)
    (infra_db,) = world.nodes(1)  # hosts no pod of either job
    ladder: dict[str, dict[str, int]] = {"notify": {}, "taintNode": {}}
    world.install(actions=ladder, policy=fast_policy(ladder))
    world.start_operator()
    # evil's four ranks all claim infra-db, rank 1 slow; llama's rank 5 is really slow.
    reporters = world.publish({llama: {5: 0.5}}, every_s=0.5)
    forged = reporters.add(evil, {1: 0.3})
    forged.claims.update({r: infra_db for r in range(4)})
    world.eventually(lambda: world.report(llama), "llama's report created")

    intruder = kubernetes.client.CustomObjectsApi(
        world.cluster.api_client(world.cluster.token_for(evil.account))
    )
    with pytest.raises(ApiException) as patched:
        intruder.patch_namespaced_custom_object_status(
            GROUP, VERSION, llama.namespace, PLURAL, llama.name,
            {"status": {"report": None, "controller": {"state": {"ladders": {}}}}},
            _content_type=MERGE,
        )  # fmt: skip
    assert patched.value.status == 403
    with pytest.raises(ApiException) as read:
        intruder.get_namespaced_custom_object(GROUP, VERSION, llama.namespace, PLURAL, llama.name)
    assert read.value.status == 403
    refused = world.cluster.audit.find(world.since, user=evil.account.username, code=403)
    assert sorted((e.verb, e.name, e.subresource) for e in refused) == [
        ("get", llama.name, None), ("patch", llama.name, "status"),
    ]  # fmt: skip

    world.eventually(lambda: "UntrustedReport" in world.reasons(evil), "the forged report refused")
    world.eventually(lambda: world.our_taints(llama.node_of_rank(5)), "llama's slow node tainted")
    world.more_reports(4, forged)

    (held,) = [r for r in world.records(evil) if r["reason"] == "UntrustedReport"]
    assert held["verdict"] == "hold"
    assert held["evidence"]["mismatches"][0] == {
        "rank": 0, "claimedNode": infra_db, "actualNode": evil.pods[0].node,
    }  # fmt: skip
    assert "UntrustedReport" in world.event_reasons(evil.name)
    assert world.marked() == [llama.node_of_rank(5)]
    assert {w.name for w in world.node_writes()} == {llama.node_of_rank(5)}
    assert world.job_state(evil).get("ladders", {}) == {}
    assert reporters.errors == []
    assert world.refusals() == []
