"""The simulated job answers the controller's confirmation probe (``confirm: probe``):
through the real engine in enforce mode, a GPU fault's node is tainted only on the
probe's word, and a host-side fault, which the GPU probe cannot see, is cleared."""

from __future__ import annotations

import numpy as np

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import NODE_ACTIONS, Mode
from pacekeeper.controller.core.policy_hardware import Confirm
from pacekeeper.controller.simulation import probe_answers
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.runner import Outcome, simulate

RANKS = 64


def _run(scenario: str) -> Outcome:
    policy = simulation_policy(Mode.ENFORCE, Confirm.PROBE)
    return simulate(scenario, RANKS, 1800.0, 0, policy=policy)


def test_a_slow_gpus_node_is_tainted_on_the_probes_word() -> None:
    out = _run("slow-gpu-20")
    q = out.quality["pacekeeper"]
    assert q.hardware_actions >= 1 and q.probed_hardware_actions == q.hardware_actions
    taints = [
        d for d in out.record.decisions if d.verdict is Verdict.ACT and d.action in NODE_ACTIONS
    ]
    assert taints and all(d.evidence["probe"]["confirmed"] is True for d in taints)
    # The request came first, and the answer named the slow GPU's rank about 20% slower.
    assert any(d.reason is Reason.AWAITING_PROBE for d in out.record.decisions)
    ratios = taints[0].evidence["probe"]["ratios"]
    assert min(min(r.values()) for r in ratios.values()) < 0.85


def test_a_host_side_fault_is_cleared_by_the_gpu_probe() -> None:
    out = _run("slow-host-10")
    q = out.quality["pacekeeper"]
    assert q.hardware_actions == 0
    assert any(d.reason is Reason.PROBE_CLEARED for d in out.record.decisions)


def test_the_answers_follow_each_gpus_speed_on_identical_work() -> None:
    speed = np.array([1.0, 1.0, 1.25])
    got = probe_answers.answers("p1", speed, seed=0)
    assert [r.probe_id for r in got] == ["p1"] * 3
    gemm = [r.gemm_tflops for r in got]
    assert gemm[2] is not None and gemm[0] is not None
    assert 0.75 < gemm[2] / gemm[0] < 0.85
    h2d = [r.h2d_gbps for r in got]
    assert h2d[2] is not None and h2d[0] is not None and abs(h2d[2] / h2d[0] - 1) < 0.05
