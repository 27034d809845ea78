"""The memory of hardware's trust model (issue 40), through the real engine: what one
tenant (namespace and ServiceAccount of the job's pods) teaches the memory may make the
controller more careful toward another tenant, never readier to disrupt it, unless
tenants of two namespaces agree or the controller's own probe checks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta

from hardware_builders import REPORT_S, T0, Fleet, Job, World, actions, doc, gpu_name, node_name

from pacekeeper.controller.core import hardware_memory as hm
from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.hardware_trust import tenant_tag
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import JobView, Window
from pacekeeper.controller.core.policy import ActionKind, Mode
from pacekeeper.controller.sources.kubernetes import opt_in_of
from pacekeeper.controller.sources.world_cache import slim_pod

X = 3  # the GPU under attack: node 0, slot 3
INDIVIDUAL = {"score": {"kind": "gpuIndividual"}}
"""Each rank against its own best window, the GPU's peers checked through the memory:
0.86 of its peers lies inside the spread of healthy GPUs (1 - maxDeviation = 0.85)."""


def step(
    world: World,
    job: Job,
    tenant: tuple[str, str],
    faults: Mapping[int, float] | None = None,
    mode: Mode | None = None,
) -> None:
    """One report of ``job`` run by ``tenant`` (namespace, ServiceAccount), as the API
    says it (the report itself names no tenant)."""
    namespace, account = tenant
    world.now += timedelta(seconds=REPORT_S)
    view = JobView(
        key=JobKey(f"{namespace}/{job.name}"),
        reports=(job.report(world.now, faults),),
        namespace=namespace,
        name=job.name,
        started_at=job.started_at,
        service_account=account,
        mode_override=mode,
    )
    out = decide(Window((view,), world.cluster), world.state, world.policies, world.now)
    world.state = out.next_state
    world.cluster = world.cluster.with_decisions(out.decisions)
    world.log.extend(out.decisions)


def run(  # noqa: PLR0917 (a job's reports, as step takes them)
    world: World,
    job: Job,
    tenant: tuple[str, str],
    n: int,
    faults: Mapping[int, float],
    mode: Mode | None = None,
) -> None:
    for _ in range(n):
        step(world, job, tenant, faults, mode)


ATTACKER = ("team-a", "trainer")
VICTIM = ("team-b", "trainer")
THIRD = ("team-c", "runner")


def _poisoned_then(second: tuple[str, str]) -> tuple[World, Job]:
    """The attack: a job reports its GPU ~15 % faster than its peers for a dozen windows
    and ends; the next job on that GPU is healthy at 0.86 of its peers."""
    world = World(doc(INDIVIDUAL), Fleet())
    run(world, Job("poison", world.fleet), ATTACKER, 12, {X: 1.147})
    g = world.state.hardware.gpu(node_name(0), gpu_name(0, X))
    assert g is not None and g.factor > 1.14  # the memory did learn it
    job = Job("next", world.fleet, started_at=world.now)
    run(world, job, second, 8, {X: 0.86})
    return world, job


def test_a_factor_another_tenant_planted_neither_acts_nor_writes_a_slow_record() -> None:
    world, _ = _poisoned_then(VICTIM)
    assert actions(world.log) == []
    g = world.state.hardware.gpu(node_name(0), gpu_name(0, X))
    assert g is not None
    assert not [s for s in g.services if s.slow]  # the victim is not recorded slow


def test_the_same_tenant_is_still_judged_by_the_factor_it_taught() -> None:
    world, job = _poisoned_then(ATTACKER)
    # As before issue 40: a tenant's own factor calibrates its own jobs.
    assert actions(world.log, JobKey(f"team-a/{job.name}"))[:2] == [
        ActionKind.NOTIFY,
        ActionKind.RESTART_RANK,
    ]


def test_a_factor_two_namespaces_agree_on_calibrates_every_tenant() -> None:
    world = World(doc(INDIVIDUAL), Fleet())
    run(world, Job("fast", world.fleet), ATTACKER, 12, {X: 1.147})
    run(world, Job("also-fast", world.fleet, started_at=world.now), THIRD, 2, {X: 1.147})
    g = world.state.hardware.gpu(node_name(0), gpu_name(0, X))
    assert g is not None and g.agreed == (tenant_tag(*THIRD),)
    job = Job("next", world.fleet, started_at=world.now)
    run(world, job, VICTIM, 8, {X: 0.86})
    # Two namespaces saw a fast GPU: 0.86 of its peers is a GPU 25 % below its speed.
    assert actions(world.log)[:2] == [ActionKind.NOTIFY, ActionKind.RESTART_RANK]


def test_another_tenants_factor_below_one_is_not_applied_either() -> None:
    """Planting factors below 1 on a GPU's peers raises their calibrated scores, and so
    the peers' median every GPU is judged against: no factor is only more careful."""
    world = World(doc(INDIVIDUAL), Fleet())
    # Node 1 keeps the attacker's median at 1: node 0's GPUs all learn factors below 1.
    planted = {s: 0.87 for s in range(8)} | {X: 0.97}
    run(world, Job("plant", world.fleet), ATTACKER, 12, planted)
    for slot, below in ((0, 0.9), (X, 1.0)):
        g = world.state.hardware.gpu(node_name(0), gpu_name(0, slot))
        assert g is not None and g.known and g.factor < below
    one_node = Fleet(nodes=1)  # the same names: node 0's GPUs
    job = Job("next", one_node, started_at=world.now)
    run(world, job, VICTIM, 8, {X: 0.92})
    assert actions(world.log) == []


def _slow_record_then(second: tuple[str, str], *others: tuple[str, str]) -> list[ActionKind]:
    """Jobs of ``others`` report GPU X slow (their records say so); then a job of
    ``second`` finds X slow: its ladder."""
    world = World(doc(), Fleet())
    for i, tenant in enumerate(others):
        job = Job(f"plant-{i}", world.fleet, started_at=world.now)
        # Observed only: its records are written, its own ladder marks nothing.
        run(world, job, tenant, 8, {X: 0.7}, Mode.OBSERVE)
    job = Job("next", world.fleet, started_at=world.now)
    run(world, job, second, 8, {X: 0.7})
    taken = [d for d in world.log if d.job.startswith(second[0] + "/next")]
    if others and second != others[0] and len(others) == 1:
        acted = [d for d in taken if d.verdict is Verdict.ACT]
        assert acted and all("slowElsewhereUntrusted" in d.evidence for d in acted)
    return actions(taken)


def test_a_slow_record_of_another_tenant_does_not_skip_the_rank_restart() -> None:
    assert _slow_record_then(VICTIM, ATTACKER) == [
        ActionKind.NOTIFY,
        ActionKind.RESTART_RANK,
        ActionKind.TAINT_NODE,
    ]


def test_slow_records_of_the_same_tenant_or_two_namespaces_skip_it() -> None:
    skipped = [ActionKind.NOTIFY, ActionKind.TAINT_NODE]
    assert _slow_record_then(ATTACKER, ATTACKER) == skipped
    assert _slow_record_then(VICTIM, ATTACKER, THIRD) == skipped
    # Two ServiceAccounts of one namespace are one party: whoever creates pods there
    # may run them as either.
    assert _slow_record_then(VICTIM, ATTACKER, ("team-a", "other"))[1] is ActionKind.RESTART_RANK


def test_the_tenant_is_the_pods_namespace_and_service_account_kept_by_the_cache() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "team-a"},
        "spec": {"nodeName": "n", "serviceAccountName": "trainer", "containers": []},
    }
    assert opt_in_of([slim_pod(pod)]).service_account == "trainer"
    bare = {"metadata": {"name": "q", "namespace": "team-a"}, "spec": {}}
    assert opt_in_of([slim_pod(pod), bare]).service_account == "default,trainer"
    assert tenant_tag("team-a", "trainer") != tenant_tag("team-a", "other")
    assert tenant_tag("team-a", "x")[:2] == tenant_tag("team-a", "y")[:2]


def test_a_full_shard_with_every_tenant_field_fits_a_configmap() -> None:
    t = T0 + timedelta(days=3650)
    tag = tenant_tag("n" * 63, "s" * 253)
    services = tuple(
        hm.Service(job=hm.job_label(f"{'j' * 400}{k}"), since=t, last=t, windows=10**6,
                   slow_windows=10**6, mean=0.123456, tenant=tag)
        for k in range(hm.MAX_SERVICES_PER_GPU)
    )  # fmt: skip
    g = hm.GpuMemory(
        first=t, last=t, factor=0.912345, learned=10**9,
        bootstrap=tuple(0.912345 for _ in range(5)),
        recent=tuple((t, 1.234567) for _ in range(hm.MAX_RECENT)),
        weight=123456.789, slow_weight=123456.789, services=services,
    )  # fmt: skip
    g = replace(g, teacher=tag, agreed=(tag,) * hm.MAX_AGREED)
    uuids = [f"GPU-{'f' * 70}{k:06d}" for k in range(hm.MAX_GPUS_PER_NODE)]
    names: list[NodeName] = []
    i = 0
    while len(names) < hm.MAX_NODES_PER_SHARD:
        name = f"{'n' * 240}-{i:012d}"
        if hm.shard_of(name) == 0:
            names.append(NodeName(name))
        i += 1
    nodes = {n: hm.NodeMemory(gpus=dict.fromkeys(uuids, g)) for n in names}
    memory = hm.HardwareMemory(nodes=nodes)
    body = json.dumps(hm.to_shards(memory, (0,))[0], sort_keys=True, separators=(",", ":"))
    # The bound the memory's own test keeps (1 MiB, less room for key and metadata).
    assert len(body.encode()) < 950_000, len(body)
