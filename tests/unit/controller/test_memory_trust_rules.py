"""What the memory of hardware may make a job do, rule by rule (``hardware_trust``): a
record of another job lets the ladder skip the rank restart only when it is the job's own
tenant's, or records of two namespaces agree, or the probe will check the node; another
tenant's word alone is evidence. The engine-level tests (test_hardware_tenants.py) show
the outcome; these pin each clause of the rule and the tag the memory stores."""

from __future__ import annotations

from datetime import UTC, datetime

from pacekeeper.controller.core.hardware_memory import (
    MIN_SLOW_WINDOWS,
    GpuMemory,
    HardwareMemory,
    NodeMemory,
    Service,
    job_label,
)
from pacekeeper.controller.core.hardware_trust import (
    Elsewhere,
    slow_elsewhere,
    tenant_of,
    tenant_tag,
)
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import JobView

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
ME = "team-a/me"
MINE = tenant_tag("team-a", "trainer")
SAME_NS = tenant_tag("team-a", "other-sa")
NS_B = tenant_tag("team-b", "trainer")
NS_C = tenant_tag("team-c", "trainer")


def svc(job: str, tenant: str, *, slow: bool = True) -> Service:
    windows = 2 * MIN_SLOW_WINDOWS
    return Service(
        job=job_label(job),
        since=T0,
        last=T0,
        windows=windows,
        slow_windows=MIN_SLOW_WINDOWS if slow else MIN_SLOW_WINDOWS - 1,
        mean=0.7,
        tenant=tenant,
    )


def memory(**gpus: tuple[Service, ...]) -> HardwareMemory:
    return HardwareMemory(
        nodes={
            NodeName("n1"): NodeMemory(
                gpus={u: GpuMemory(first=T0, last=T0, services=s) for u, s in gpus.items()}
            )
        }
    )


def elsewhere(mem: HardwareMemory, *uuids: str, probed: bool = False) -> Elsewhere:
    return slow_elsewhere(mem, "n1", uuids or ("g0",), ME, MINE, probed=probed)


def test_tags_are_stable_namespace_first_and_thirteen_characters() -> None:
    # The memory stores these: a changed tag would orphan every stored record's tenant.
    assert tenant_tag("team-a", "trainer") == "lssHSIZCwSB6H"
    assert tenant_tag("team-a", "") == "lsetnr0B3jC1r"
    assert tenant_tag("", "") == "47bjQLnP-zepi"


def test_tenant_of_reads_namespace_and_service_account_from_the_view() -> None:
    view = JobView(
        key=JobKey("team-a/me"), reports=(), namespace="team-a", service_account="trainer"
    )
    assert tenant_of(view) == tenant_tag("team-a", "trainer")
    assert tenant_of(JobView(key=JobKey("ray:1"), reports=())) == tenant_tag("", "")
    no_sa = JobView(key=JobKey("team-a/x"), reports=(), namespace="team-a")
    assert tenant_of(no_sa) == tenant_tag("team-a", "")


def test_own_tenants_record_is_trusted() -> None:
    got = elsewhere(memory(g0=(svc("team-a/old", MINE),)))
    assert got == Elsewhere(trusted={"g0": ["team-a/old"]}, untrusted={})


def test_another_tenant_alone_is_evidence_only() -> None:
    got = elsewhere(memory(g0=(svc("team-b/x", NS_B),)))
    assert got == Elsewhere(trusted={}, untrusted={"g0": ["team-b/x"]})


def test_two_tenants_of_one_namespace_are_not_independent() -> None:
    got = elsewhere(memory(g0=(svc("team-a/x", SAME_NS), svc("team-a/y", SAME_NS))))
    assert got.untrusted == {"g0": ["team-a/x", "team-a/y"]} and got.trusted == {}


def test_two_namespaces_agreeing_are_trusted() -> None:
    got = elsewhere(memory(g0=(svc("team-c/y", NS_C), svc("team-b/x", NS_B))))
    assert got == Elsewhere(trusted={"g0": ["team-b/x", "team-c/y"]}, untrusted={})


def test_a_record_without_a_tenant_counts_for_no_namespace() -> None:
    got = elsewhere(memory(g0=(svc("old/x", ""), svc("team-b/x", NS_B))))
    assert got.untrusted == {"g0": ["old/x", "team-b/x"]}


def test_the_probe_lets_any_record_send_the_ladder_to_the_node() -> None:
    got = elsewhere(memory(g0=(svc("team-b/x", NS_B),)), probed=True)
    assert got == Elsewhere(trusted={"g0": ["team-b/x"]}, untrusted={})


def test_the_jobs_own_record_and_healthy_records_count_for_nothing() -> None:
    mem = memory(
        g0=(svc(ME, MINE),),
        g1=(svc("team-a/old", MINE, slow=False),),
        g2=(svc(ME, MINE), svc("team-b/x", NS_B, slow=False)),
    )
    assert elsewhere(mem, "g0", "g1", "g2", "unknown") == Elsewhere()


def test_only_the_slow_records_of_a_gpu_decide_and_are_named() -> None:
    mem = memory(g0=(svc("team-a/old", MINE, slow=False), svc("team-b/x", NS_B)))
    assert elsewhere(mem) == Elsewhere(trusted={}, untrusted={"g0": ["team-b/x"]})


def test_each_gpu_is_judged_on_its_own_records() -> None:
    mem = memory(g0=(svc("team-a/old", MINE),), g1=(svc("team-b/x", NS_B),))
    got = elsewhere(mem, "g0", "g1")
    assert got == Elsewhere(trusted={"g0": ["team-a/old"]}, untrusted={"g1": ["team-b/x"]})


def test_a_job_repeated_on_a_gpu_is_named_once() -> None:
    mem = memory(g0=(svc("team-b/x", NS_B), svc("team-b/x", NS_B)))
    assert elsewhere(mem).untrusted == {"g0": ["team-b/x"]}


def test_another_node_is_not_read() -> None:
    mem = memory(g0=(svc("team-a/old", MINE),))
    assert slow_elsewhere(mem, "n2", ("g0",), ME, MINE) == Elsewhere()


def test_an_unknown_or_healthy_gpu_does_not_end_the_search_and_no_probe_by_default() -> None:
    mem = memory(g1=(svc("team-a/old", MINE, slow=False),), g2=(svc("team-b/x", NS_B),))
    got = slow_elsewhere(mem, "n1", ("unknown", "g1", "g2"), ME, MINE)
    assert got == Elsewhere(trusted={}, untrusted={"g2": ["team-b/x"]})
