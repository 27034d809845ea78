"""What the memory of hardware changes in the decisions, through the real engine: a GPU
slow in another job is hardware, a GPU slow from a job's start is found by its peers,
a restart cannot fake recovery, and calibration keeps a static spread from eating the
margin of relative scores."""

from __future__ import annotations

from datetime import timedelta

from hardware_builders import Fleet, Job, World, actions, doc, gpu_name, node_name

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import JobView, MarkKind, RejectedReport, Window
from pacekeeper.controller.core.policy import ActionKind

SLOW_SLOT = 3  # node 0
SPREAD = {i: 0.94 + 0.12 * ((i * 7) % 16) / 15 for i in range(16)}
"""A static spread of 12 % between the fleet's healthy GPUs, deterministic."""


def test_a_gpu_slow_in_another_job_is_hardware_and_its_node_skips_the_rank_restart() -> None:
    fleet = Fleet()
    world = World(doc(), fleet)
    first = Job("first", fleet)
    world.run(first, 8, {SLOW_SLOT: 0.7})
    assert actions(world.log, first.key) == [
        ActionKind.NOTIFY,
        ActionKind.RESTART_RANK,
        ActionKind.TAINT_NODE,
    ]

    second = Job("second", fleet, started_at=world.now)
    world.run(second, 8, {SLOW_SLOT: 0.7})
    # The same GPU, slow for another job too: restarting the rank cannot help.
    assert actions(world.log, second.key) == [ActionKind.NOTIFY, ActionKind.TAINT_NODE]
    taken = [d for d in world.log if d.job == second.key and d.verdict is Verdict.ACT]
    assert all(d.evidence["slowElsewhere"] == {gpu_name(0, SLOW_SLOT): ["ml/first"]} for d in taken)
    assert taken[0].evidence["gpus"][gpu_name(0, SLOW_SLOT)]["slowHistory"] is True

    # Without that memory, the second job's ladder restarts the rank first.
    alone = World(doc(), Fleet())
    fresh = Job("second", alone.fleet)
    alone.run(fresh, 8, {SLOW_SLOT: 0.7})
    assert ActionKind.RESTART_RANK in actions(alone.log, fresh.key)


def test_a_gpu_slow_from_the_jobs_start_is_found_by_its_peers_under_an_individual_score() -> None:
    individual = {"score": {"kind": "gpuIndividual"}, "thresholds": {"act": 0.98, "recover": 0.99}}
    found = World(doc(individual), Fleet(factors=SPREAD))
    job = Job("llm", found.fleet)
    found.run(job, 10, {SLOW_SLOT: 0.85})
    acted = [d for d in found.log if d.verdict is Verdict.ACT]
    assert [d.action for d in acted][:2] == [ActionKind.NOTIFY, ActionKind.RESTART_RANK]
    assert {d.subject for d in acted} == {f"node/{node_name(0)}"}
    assert acted[0].evidence["ranks"] == [SLOW_SLOT]
    assert acted[0].evidence["scores"][str(SLOW_SLOT)] < 0.9

    # The individual baseline starts slow: without its peers, the GPU looks healthy.
    blind = World(doc({**individual, "hardware": {"peerCheck": False}}), Fleet(factors=SPREAD))
    blind.run(Job("llm", blind.fleet), 10, {SLOW_SLOT: 0.85})
    assert actions(blind.log) == []
    assert {d.reason for d in blind.log} == {Reason.HEALTHY}

    # And the spread alone is no finding: healthy GPUs 6 % off the median act nowhere.
    healthy = World(doc(individual), Fleet(factors=SPREAD))
    healthy.run(Job("llm", healthy.fleet), 30)
    assert actions(healthy.log) == []


def _taint_then_restart(gpu_recovery: bool) -> tuple[World, Job]:
    """A GPU that slows down mid-job under an individual score (no peer check): its node
    is tainted; then the job restarts with the GPU still slow."""
    policy = {
        "score": {"kind": "gpuIndividual"},
        "ladder": {
            "notify": {"enabled": True, "timeoutS": 60},
            "taintNode": {"enabled": True, "timeoutS": 60},
        },
        "hardware": {"peerCheck": False, "gpuRecovery": gpu_recovery},
    }
    world = World(doc(policy), Fleet())
    job = Job("llm", world.fleet)
    world.run(job, 3)
    world.run(job, 6, {SLOW_SLOT: 0.8})
    assert actions(world.log) == [ActionKind.NOTIFY, ActionKind.TAINT_NODE]
    world.log.clear()
    job.restart(world.now)  # fresh detector: every individual score is 1.0 again
    world.run(job, 8, {SLOW_SLOT: 0.8})
    return world, job


def test_a_restart_does_not_fake_recovery_and_a_healed_gpu_releases_its_node() -> None:
    world, job = _taint_then_restart(gpu_recovery=True)
    node = NodeName(node_name(0))
    assert MarkKind.TAINT in world.cluster.nodes[node].our_marks
    assert not [d for d in world.log if d.verdict is Verdict.UNDO]
    waiting = [d for d in world.log if d.evidence.get("cause") == "gpuNotRecovered"]
    assert waiting and all(d.reason is Reason.AWAITING_EFFECT for d in waiting)
    pending = waiting[-1].evidence["gpus"][gpu_name(0, SLOW_SLOT)]
    assert all(s < 0.9 for s in pending["scores"])

    world.log.clear()
    world.run(job, 6)  # the GPU scores with its peers again
    undone = [d for d in world.log if d.verdict is Verdict.UNDO]
    assert [(d.action, d.reason) for d in undone] == [(ActionKind.TAINT_NODE, Reason.RECOVERED)]
    assert MarkKind.TAINT not in world.cluster.nodes[node].our_marks


def test_without_gpu_recovery_the_restarts_fresh_baseline_releases_the_node() -> None:
    world, _ = _taint_then_restart(gpu_recovery=False)
    undone = [d for d in world.log if d.verdict is Verdict.UNDO]
    assert [(d.action, d.reason) for d in undone] == [(ActionKind.TAINT_NODE, Reason.RECOVERED)]


def test_calibration_finds_a_five_percent_slowdown_that_the_spread_hides() -> None:
    fast = max(SPREAD, key=lambda k: SPREAD[k])  # a GPU 6 % faster than the median
    policy = {"thresholds": {"act": 0.97, "recover": 0.98}}
    outcome = {}
    for calibrate in (True, False):
        world = World(doc({**policy, "hardware": {"calibrate": calibrate}}), Fleet(factors=SPREAD))
        job = Job("llm", world.fleet)
        world.run(job, 20)  # long enough to learn every factor
        assert actions(world.log) == []
        world.log.clear()
        world.run(job, 6, {fast: 0.95})  # now it runs at the median's pace: 5 % slower
        outcome[calibrate] = world
    found = outcome[True]
    assert actions(found.log)[:1] == [ActionKind.NOTIFY]
    acted = next(d for d in found.log if d.verdict is Verdict.ACT)
    assert acted.evidence["ranks"] == [fast]
    known = acted.evidence["gpus"][gpu_name(fast // 8, fast % 8)]["factor"]
    assert abs(known - SPREAD[fast]) < 0.01
    # Uncalibrated, the spread against the fastest GPU makes the whole job look slow.
    assert actions(outcome[False].log) == []
    assert Reason.JOB_WIDE_SLOWDOWN in {d.reason for d in outcome[False].log}


def test_a_report_the_api_contradicts_teaches_the_memory_nothing() -> None:
    world = World(doc(), Fleet())
    job = Job("llm", world.fleet)
    world.run(job, 2)
    before = world.state.hardware
    refused = RejectedReport(
        received_at=world.now + timedelta(seconds=60),
        error="rank 3 claims node 'elsewhere'",
        reason=Reason.UNTRUSTED_REPORT,
    )
    view = JobView(key=JobKey("ml/llm"), reports=(refused,), namespace="ml", name="llm")
    out = decide(Window((view,), world.cluster), world.state, world.policies, refused.received_at)
    assert out.next_state.hardware.nodes == before.nodes
    assert {d.reason for d in out.decisions} == {Reason.UNTRUSTED_REPORT}


def test_the_peer_check_leaves_drift_inside_the_track_band_alone() -> None:
    """A GPU whose factor is known, 3 % slower than it in a new job (a fresh baseline),
    lies inside ``trackBand`` (2 %) below ``act`` (0.98): drift a factor follows, no
    finding. 7 % slower is the GPU changed: found by its peers from the job's start."""
    individual = {"score": {"kind": "gpuIndividual"}, "thresholds": {"act": 0.98, "recover": 0.99}}
    for slowdown, found in ((0.97, False), (0.93, True)):
        world = World(doc(individual), Fleet(factors=SPREAD))
        world.run(Job("before", world.fleet), 10)  # the memory learns every GPU's factor
        world.log.clear()
        job = Job("after", world.fleet, started_at=world.now)
        world.run(job, 8, {SLOW_SLOT: slowdown})
        assert (ActionKind.NOTIFY in actions(world.log, job.key)) is found, slowdown
