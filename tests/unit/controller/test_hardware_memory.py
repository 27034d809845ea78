"""The memory of hardware on its own: what a window teaches (calibration, and what it
must not learn from), ageing, its bounds (also under random input), its stored form
through a store that drops nulls, and the size of a full shard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.controller.core import hardware_memory as hm
from pacekeeper.controller.core.hardware_memory import (
    MAX_GPUS_PER_NODE,
    MAX_NODES_PER_SHARD,
    MAX_RECENT,
    MAX_SERVICES_PER_GPU,
    GpuMemory,
    HardwareMemory,
    NodeMemory,
    Observation,
    Service,
)
from pacekeeper.controller.core.hardware_views import gpu_view
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.policy import (
    HardwareMemorySettings,
    PolicyError,
    parse_policy_document,
)
from pacekeeper.controller.core.state import JobState, LadderState, State

DOCS = Path(__file__).parents[3] / "docs" / "policy.md"
T0 = datetime(2026, 3, 1, tzinfo=UTC)
SETTINGS = HardwareMemorySettings()
CAL = SETTINGS.calibration
NODE = NodeName("gpu-node-00")
GPU = "GPU-00000000-0001-4000-8000-000000000000"


def pruned(value: Any) -> Any:
    """What the API server keeps of a merged object: no null member anywhere."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


def feed(
    memory: HardwareMemory,
    ratios: list[float],
    *,
    flagged: bool = False,
    start: datetime = T0,
    job: str = "ml/a",
    node: NodeName = NODE,
    uuid: str = GPU,
) -> HardwareMemory:
    """One window a minute, one GPU."""
    for i, ratio in enumerate(ratios):
        memory = hm.observe(
            memory,
            [Observation(node, uuid, ratio, flagged)],
            job=job,
            since=start,
            at=start + timedelta(minutes=i + 1),
            window_s=60.0,
            settings=SETTINGS,
        )
    return memory


def gpu(memory: HardwareMemory, node: str = NODE, uuid: str = GPU) -> GpuMemory:
    found = memory.gpu(node, uuid)
    assert found is not None
    return found


# --- calibration --------------------------------------------------------------------------


def test_a_static_spread_becomes_the_gpus_factor_after_its_first_healthy_windows() -> None:
    ratios = [0.93 + 0.002 * (i % 3) for i in range(CAL.windows_to_learn)]
    almost = feed(HardwareMemory(), ratios[:-1])
    assert not gpu(almost).known and gpu(almost).speed() == 1.0
    learned = gpu(feed(HardwareMemory(), ratios))
    assert learned.known and learned.learned == CAL.windows_to_learn
    assert abs(learned.factor - sorted(ratios)[len(ratios) // 2]) < 0.002
    assert learned.bootstrap == ()


def test_calibration_never_learns_from_flagged_windows() -> None:
    flagged = gpu(feed(HardwareMemory(), [0.93] * 40, flagged=True))
    assert not flagged.known and flagged.bootstrap == ()
    # The same windows unflagged teach it.
    assert gpu(feed(HardwareMemory(), [0.93] * 40)).known


def test_a_gpu_slower_than_any_spread_is_never_calibrated_and_counts_slow() -> None:
    g = gpu(feed(HardwareMemory(), [0.8] * 40))
    assert not g.known
    assert g.slow_history() and g.services[0].slow_windows == 40


def test_a_step_outside_the_band_teaches_nothing_and_counts_slow() -> None:
    memory = feed(HardwareMemory(), [1.0] * CAL.windows_to_learn)
    factor = gpu(memory).factor
    later = T0 + timedelta(hours=1)
    stepped = gpu(feed(memory, [0.94] * 30, start=later))
    assert stepped.factor == factor  # 6 % below its factor: a change, not its speed
    assert stepped.slow_history()


def test_a_three_hour_ramp_outruns_the_drift_limit() -> None:
    memory = feed(HardwareMemory(), [1.0] * CAL.windows_to_learn)
    minutes = 180
    ramp = [1.0 - 0.1 * (i + 1) / minutes for i in range(minutes)]  # -10 % over 3 h
    memory = feed(memory, ramp, start=T0 + timedelta(hours=1))
    g = gpu(memory)
    # At most maxDriftPerHour per hour of windows, and only while inside the band.
    assert g.factor >= 1.0 - CAL.max_drift_per_hour * 3 - 1e-9
    assert ramp[-1] / g.speed() < SETTINGS.slow_below  # the calibrated score still says it
    # Every window below the bar once the ramp passed it (its last ~85 minutes) is slow.
    assert g.services[-1].slow_windows >= 80


def test_a_factor_follows_a_slow_healthy_drift_at_the_drift_limit() -> None:
    memory = feed(HardwareMemory(), [1.0] * CAL.windows_to_learn)
    memory = feed(memory, [0.985] * 120, start=T0 + timedelta(hours=1))  # two hours
    g = gpu(memory)
    assert abs(g.factor - (1.0 - 2 * CAL.max_drift_per_hour)) < 2e-4
    assert g.learned == CAL.windows_to_learn + 120


def test_a_factor_never_leaves_its_bounds() -> None:
    g = gpu(feed(HardwareMemory(), [0.905] * CAL.windows_to_learn))
    assert g.factor >= 1.0 - CAL.max_deviation
    fast = gpu(feed(HardwareMemory(), [1.5] * 40))
    assert not fast.known  # beyond the bound: never learned from


# --- ageing -------------------------------------------------------------------------------


def test_windows_count_half_after_a_half_life_and_go_after_the_maximum_age() -> None:
    memory = feed(HardwareMemory(), [0.8] * 10)
    last = gpu(memory).last
    half = gpu_view(gpu(memory), last + timedelta(seconds=SETTINGS.half_life_s), SETTINGS)
    assert abs(half["windows"] - gpu(memory).weight / 2) < 0.01
    assert half["slowShare"] == 1.0
    kept = hm.aged(memory, last + timedelta(seconds=SETTINGS.max_age_s - 60), SETTINGS)
    assert kept.gpu(NODE, GPU) is not None
    gone = hm.aged(memory, last + timedelta(seconds=SETTINGS.max_age_s + 60), SETTINGS)
    assert gone.nodes == {}


def test_an_old_job_record_ages_out_while_the_gpu_stays() -> None:
    memory = feed(HardwareMemory(), [0.8] * 5, job="ml/old")
    later = T0 + timedelta(seconds=SETTINGS.max_age_s)
    memory = feed(memory, [1.0] * 5, job="ml/new", start=later)
    aged = hm.aged(memory, later + timedelta(hours=2), SETTINGS)
    assert [s.job for s in gpu(aged).services] == ["ml/new"]


# --- bounds -------------------------------------------------------------------------------


def _gpus(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"GPU-{i:08x}-0000-4000-8000-000000000000"


def test_a_job_naming_many_gpus_on_a_node_cannot_push_out_a_slow_one() -> None:
    memory = feed(HardwareMemory(), [0.8] * 5)  # slow history
    t = T0 + timedelta(hours=1)
    for i, uuid in enumerate(_gpus(40)):
        memory = hm.observe(
            memory, [Observation(NODE, uuid, 1.0, False)], job="ml/flood", since=t,
            at=t + timedelta(minutes=i), window_s=60.0, settings=SETTINGS,
        )  # fmt: skip
    kept = memory.nodes[NODE].gpus
    assert len(kept) == MAX_GPUS_PER_NODE
    assert GPU in kept and kept[GPU].slow_history()


def test_job_records_are_bounded_and_slow_ones_outlive_healthy_ones() -> None:
    memory = feed(HardwareMemory(), [0.8] * 3, job="ml/slow")
    for j in range(10):
        start = T0 + timedelta(hours=j + 1)
        memory = feed(memory, [1.0] * 2, job=f"ml/ok-{j}", start=start)
    services = gpu(memory).services
    assert len(services) == MAX_SERVICES_PER_GPU
    assert "ml/slow" in {s.job for s in services}
    assert {s.job for s in services} - {"ml/slow"} == {"ml/ok-7", "ml/ok-8", "ml/ok-9"}


def _same_shard(n: int) -> list[NodeName]:
    names, i = [], 0
    while len(names) < n:
        name = f"node-{i}"
        if hm.shard_of(name) == 0:
            names.append(NodeName(name))
        i += 1
    return names


def test_a_full_shard_keeps_marked_and_slow_nodes_and_refuses_when_all_are_kept() -> None:
    names = _same_shard(MAX_NODES_PER_SHARD + 10)
    marked, slow = names[0], names[1]
    memory = feed(HardwareMemory(), [1.0], node=marked)
    memory = feed(memory, [0.8] * 3, node=slow)
    for k, name in enumerate(names[2:]):
        at = T0 + timedelta(hours=1, minutes=k)
        memory = hm.observe(
            memory, [Observation(name, GPU, 1.0, False)], job="ml/a", since=T0, at=at,
            window_s=60.0, settings=SETTINGS, protected=frozenset({marked}),
        )  # fmt: skip
    in_shard = [n for n in memory.nodes if hm.shard_of(n) == 0]
    assert len(in_shard) == MAX_NODES_PER_SHARD
    assert marked in memory.nodes and slow in memory.nodes
    assert names[-1] in memory.nodes  # the newest in, the oldest healthy out
    full = frozenset(memory.nodes)
    refused = hm.observe(
        memory, [Observation(NodeName("node-new"), GPU, 1.0, False)], job="ml/a", since=T0,
        at=T0 + timedelta(days=1), window_s=60.0, settings=SETTINGS, protected=full,
    )  # fmt: skip
    if hm.shard_of("node-new") == 0:
        assert "node-new" not in refused.nodes
    assert frozenset(refused.nodes) >= full


observations = st.builds(
    Observation,
    node=st.sampled_from([*_same_shard(MAX_NODES_PER_SHARD + 6), "other-a", "other-b"]).map(
        NodeName
    ),
    uuid=st.sampled_from(list(_gpus(MAX_GPUS_PER_NODE + 6))),
    ratio=st.floats(0.0, 2.0) | st.just(float("nan")),
    flagged=st.booleans(),
)
windows = st.tuples(
    st.lists(observations, max_size=24),
    st.sampled_from(["ml/a", "ml/b", "ml/c", "x" * 300]),
    st.integers(0, 8),  # incarnation
    st.integers(1, 3600),  # seconds since the last window
)


@settings(max_examples=60, deadline=None)
@given(st.lists(windows, min_size=1, max_size=40))
def test_the_memory_stays_within_its_bounds_whatever_jobs_report(
    steps: list[tuple[list[Observation], str, int, int]],
) -> None:
    memory, at = HardwareMemory(), T0
    for obs, job, incarnation, gap_s in steps:
        at += timedelta(seconds=gap_s)
        before = {
            (n, u) for n, nm in memory.nodes.items() for u, g in nm.gpus.items() if g.slow_history()
        }
        memory = hm.observe(
            memory, obs, job=job, since=T0 + timedelta(hours=incarnation), at=at,
            window_s=60.0, settings=SETTINGS,
        )  # fmt: skip
        shards: dict[int, int] = {}
        for name, nm in memory.nodes.items():
            shards[hm.shard_of(name)] = shards.get(hm.shard_of(name), 0) + 1
            assert len(nm.gpus) <= MAX_GPUS_PER_NODE
            for g in nm.gpus.values():
                assert len(g.services) <= MAX_SERVICES_PER_GPU
                assert len(g.recent) <= MAX_RECENT
                assert len(g.bootstrap) < CAL.windows_to_learn
                assert all(len(s.job) <= hm.MAX_JOB_CHARS for s in g.services)
                assert abs(g.factor - 1.0) <= CAL.max_deviation + 1e-9
                assert 0.0 <= g.slow_weight <= g.weight + 1e-9
        assert all(n <= MAX_NODES_PER_SHARD for n in shards.values())
        # Slow history is evidence: a newcomer never pushes it out of a node it knows.
        after = {(n, u) for n, nm in memory.nodes.items() for u in nm.gpus}
        assert {(n, u) for n, u in before if n in memory.nodes} <= after


# --- the stored form ----------------------------------------------------------------------


def _busy_memory() -> HardwareMemory:
    memory = feed(HardwareMemory(), [0.93] * (CAL.windows_to_learn + 3))
    memory = feed(memory, [0.8] * 4, job="ml/b", start=T0 + timedelta(hours=1))
    return feed(memory, [1.0] * 3, node=NodeName("gpu-node-01"), uuid="MIG-abc")


def test_the_memory_reads_back_from_its_shards_after_a_merge_patch_drops_nulls() -> None:
    memory = _busy_memory()
    wire = json.loads(json.dumps(hm.to_shards(memory)))
    assert set(wire) == {str(i) for i in range(hm.SHARDS)}
    back = hm.from_shards(pruned(doc) for doc in wire.values())
    assert back == replace(memory, swept_at=None)
    # Whole seconds and four decimals: the restored memory learns on exactly as before.
    nxt = feed(memory, [0.95], start=T0 + timedelta(hours=2))
    assert feed(back, [0.95], start=T0 + timedelta(hours=2)) == replace(nxt, swept_at=None)


def test_the_state_with_its_memory_and_ladder_suspects_survives_a_null_dropping_store() -> None:
    lad = LadderState(started_at=T0, gpus=(GPU,), last_action_at=None)
    state = State(
        jobs={JobKey("ml/a"): JobState(first_seen_at=T0, ladders={NODE: lad})},
        hardware=hm.aged(_busy_memory(), T0 + timedelta(hours=3), SETTINGS),
    )
    assert State.from_dict(pruned(json.loads(json.dumps(state.to_dict())))) == state


def test_a_stored_memory_with_a_bad_field_is_refused_naming_it() -> None:
    doc = json.loads(json.dumps(hm.to_shards(_busy_memory())[hm.shard_of(NODE)]))
    doc["nodes"][NODE]["gpus"][GPU]["learned"] = "many"
    try:
        hm.from_shards([doc])
    except hm.HardwareMemoryError as e:
        assert f"memory.nodes.{NODE}.gpus.{GPU}.learned" in str(e)
    else:
        raise AssertionError("a bad memory was read")


def test_a_full_shard_at_every_bound_fits_a_configmap() -> None:
    long_job = "j" * 400
    t = T0 + timedelta(days=3650)
    services = tuple(
        Service(job=hm.job_label(f"{long_job}{k}"), since=t, last=t, windows=10**6,
                slow_windows=10**6, mean=0.123456)
        for k in range(MAX_SERVICES_PER_GPU)
    )  # fmt: skip
    g = GpuMemory(
        first=t, last=t, factor=0.912345, learned=10**9,
        bootstrap=tuple(0.912345 for _ in range(CAL.windows_to_learn - 1)),
        recent=tuple((t, 1.234567) for _ in range(MAX_RECENT)),
        weight=123456.789, slow_weight=123456.789, services=services,
    )  # fmt: skip
    uuids = [f"GPU-{'f' * 70}{k:06d}" for k in range(MAX_GPUS_PER_NODE)]
    names = []
    i = 0
    while len(names) < MAX_NODES_PER_SHARD:
        name = f"{'n' * 240}-{i:012d}"
        if hm.shard_of(name) == 0:
            names.append(NodeName(name))
        i += 1
    memory = HardwareMemory(nodes={n: NodeMemory(gpus=dict.fromkeys(uuids, g)) for n in names})
    body = json.dumps(hm.to_shards(memory, (0,))[0], sort_keys=True, separators=(",", ":"))
    # A ConfigMap holds at most 1 MiB of data; leave room for its key and metadata.
    assert len(body.encode()) < 950_000, len(body)


# --- settings -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"hardwareMemory": {"maxAgeS": 3600}},
            "hardwareMemory.maxAgeS=3600 must be at least halfLifeS=604800",
        ),
        ({"hardwareMemory": {"slowBelow": 0}}, "hardwareMemory.slowBelow=0 would never call a"),
        (
            {"hardwareMemory": {"calibration": {"maxDeviation": 0.5}}},
            "hardwareMemory.calibration.maxDeviation=0.5 is outside (0, 0.2]",
        ),
        (
            {"policies": {"default": {"hardware": {"peerCheck": "yes"}}}},
            "policy 'default': hardware.peerCheck='yes' must be true or false, not a string",
        ),
    ],
)
def test_bad_memory_settings_are_refused_naming_the_field(
    document: dict[str, Any], message: str
) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_policy_document(document, "p.yaml")
    assert message in str(refused.value)
    if "hardwareMemory" in message:
        assert message in DOCS.read_text(), "docs/policy.md should show this message"


def test_a_huge_report_updates_healthy_gpus_in_turn_and_every_slow_one_at_once() -> None:
    n = 4 * hm.MAX_HEALTHY_PER_WINDOW
    names = [NodeName(f"node-{i // 8}") for i in range(n)]
    slow = {7, 2049, 4000}
    memory, seen = HardwareMemory(), set()
    for turn in range(4):
        obs = [
            Observation(names[i], f"GPU-{i:08x}", 0.5 if i in slow else 1.0, False)
            for i in range(n)
        ]
        before = memory
        memory = hm.observe(
            memory, obs, job="ml/huge", since=T0, at=T0 + timedelta(minutes=turn + 1),
            window_s=60.0, settings=SETTINGS, turn=turn,
        )  # fmt: skip
        updated = {
            u for nm in memory.nodes.values() for u, g in nm.gpus.items()
            if g.last == T0 + timedelta(minutes=turn + 1)
        }  # fmt: skip
        assert {f"GPU-{i:08x}" for i in slow} <= updated  # evidence every window
        assert len(updated - {f"GPU-{i:08x}" for i in slow}) <= hm.MAX_HEALTHY_PER_WINDOW * 1.1
        seen |= updated
        assert before is not memory
    assert len(seen) == n  # in four windows, every GPU once at least
