"""``tail_gate``: a rank found slow by its section tail alone is restarted only when its
GPU was slow within the tail's memory; it is still named (notify) either way."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from controller_builders import GPU_TAIL_POLICY, REPORT_S, Loop, calm_gpus, gpu_report, policy_doc

from pacekeeper.controller.core import breadth, tail_gate
from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.state import State
from pacekeeper.detector.scoring import TAIL_WINDOWS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORLD = 16
RANK = 5


def test_gpu_slow_reads_the_broad_gpu_against_the_jobs_median() -> None:
    # Rank 1: a slow GPU (mean and median 0.85); rank 2: data skew (mean 0.85, median
    # 0.999); rank 3: 0.94 against a median of 1.0, above act 0.93; rank 4: no score.
    gpu = [(1.0, 1.0), (0.85, 0.85), (0.85, 0.999), (0.94, 0.94), (None, None), (1.0, 1.0)]
    assert breadth.gpu_slow(gpu_report(gpu), 0.93) == [1]
    # Against the job's median, not 1.0: everyone at 0.9 (a drift), rank 1 at 0.81.
    drift = [(0.9, 0.9), (0.81, 0.81), (0.9, 0.9), (0.9, 0.9)]
    assert breadth.gpu_slow(gpu_report(drift), 0.93) == [1]
    # Without the median (an older detector) the mean alone decides.
    assert breadth.gpu_slow(gpu_report([(1.0, None), (0.85, None), (1.0, None)]), 0.93) == [1]
    assert breadth.gpu_slow(gpu_report([(None, None), (None, None)]), 0.93) == []


def test_remembered_keeps_the_tails_memory_and_stamps_the_newest() -> None:
    at = T0 + timedelta(hours=1)
    keep = tail_gate.memory_s(REPORT_S)
    assert keep == TAIL_WINDOWS * REPORT_S
    assert tail_gate.TAIL_WINDOWS == TAIL_WINDOWS  # the detector's memory
    old = {1: at - timedelta(seconds=keep + 1), 2: at - timedelta(seconds=keep), 3: at}
    got = tail_gate.remembered(old, [4, 1], at, keep)
    assert got == {1: at, 2: at - timedelta(seconds=keep), 3: at, 4: at}


def test_remembered_is_bounded_oldest_first() -> None:
    at = T0 + timedelta(hours=2)
    many = {r: at - timedelta(seconds=r) for r in range(tail_gate.MAX_REMEMBERED + 10)}
    got = tail_gate.remembered(many, [], at, 10**6)
    assert len(got) == tail_gate.MAX_REMEMBERED
    assert max(got) == tail_gate.MAX_REMEMBERED - 1  # the ten oldest went


def test_gated_holds_back_a_tail_only_finding_without_a_slow_gpu() -> None:
    scores = {0: 1.0, 1: 0.99, 2: 0.7, 3: 0.8, 4: 0.75, 5: 0.98}
    # 2: tail alone, GPU never slow -> the peers' median; 3: tail and host side -> kept;
    # 4: tail with a slow GPU window remembered -> kept; 5: no tail -> kept.
    got = tail_gate.gated(scores, {2: 0.6, 3: 0.6, 4: 0.6}, {3: 0.8}, {4: T0})
    assert got[2] == pytest.approx(float(np.median(list(scores.values()))))
    assert {r: got[r] for r in (0, 1, 3, 4, 5)} == {r: scores[r] for r in (0, 1, 3, 4, 5)}
    assert tail_gate.gated(scores, {}, {}, {}) is scores


def _job(gpu_burst: bool, reports: int = 45) -> Loop:
    """Rank 5's section tail is low from report 12 on; its GPU either keeps pace
    (a host-side stall in bursts) or is 25 % slower one report in every six."""
    policy = {**GPU_TAIL_POLICY, "safety": {"falseDisruptionsPerGpuDay": 0.001}}
    loop = Loop(policy_doc(policy), world=WORLD)
    rng = np.random.default_rng(3)
    for i in range(1, reports + 1):
        g, tails = calm_gpus(rng, WORLD, 0.005)
        if i >= 12:
            tails[RANK] = 0.6
            if gpu_burst and i % 6 == 0:
                g[RANK] = 0.75
        loop.step_gpu(g, tails)
    return loop


def _acted(log: list[Decision], action: ActionKind) -> bool:
    return any(d.verdict is Verdict.ACT and d.action is action for d in log)


def test_a_tail_finding_with_its_gpu_at_pace_is_named_never_restarted() -> None:
    log = _job(gpu_burst=False).log
    assert _acted(log, ActionKind.NOTIFY)
    assert not _acted(log, ActionKind.RESTART_RANK)


def test_a_tail_finding_whose_gpu_was_slow_in_a_burst_is_restarted() -> None:
    log = _job(gpu_burst=True).log
    restarts = [d for d in log if d.verdict is Verdict.ACT and d.action is ActionKind.RESTART_RANK]
    assert restarts and all(d.evidence.get("ranks") == [RANK] for d in restarts)


def test_the_slow_gpu_windows_survive_the_controllers_state_store() -> None:
    loop = _job(gpu_burst=True, reports=12)  # rank 5's GPU slow at report 12
    job = next(iter(loop.state.jobs.values()))
    assert dict(job.gpu_slow_at) == {RANK: loop.now}
    assert State.from_dict(json.loads(json.dumps(loop.state.to_dict()))) == loop.state
