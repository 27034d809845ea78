"""Data skew over half the kernel time against a slow GPU, through the detector's real
scoring and the real decision core under docs/policies/enforce-recommended.yaml.

A rank carrying 12% more work in kernels that take 70% of the kernel time and keep
their launch size is, in its kernels' mean and median alike, a slow GPU. Only its
fastest kernels (the ones of fixed work) tell it apart: ``gpuIndividualFast`` stays at
the peers' level, and the sequential test (``partial_slowdown.held``) holds back every
disruptive step. A 10% slow GPU under the same noise is still restarted within ten
minutes. Without the gate the same healthy job gets a healthy rank disrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pacekeeper.controller.core import partial_slowdown
from pacekeeper.controller.core.policy import load_policy_file
from pacekeeper.controller.simulation.models import FaultKind, ModelParams
from pacekeeper.controller.simulation.noise_families import NoiseFamily
from pacekeeper.controller.simulation.policy_runs import judge_policies
from pacekeeper.controller.simulation.scenarios import Scenario

RECOMMENDED = Path(__file__).resolve().parents[3] / "docs" / "policies" / "enforce-recommended.yaml"
P = ModelParams(kernels=48)
SKEW = NoiseFamily(
    "data-skew", skew_share=0.05, skew_size=0.12, skew_dwell_windows=15.0, skew_kernel_share=0.7
)
RANKS = 64
SEED = 0


def _judge(sc: Scenario) -> tuple[int, float | None]:
    q = judge_policies(sc, RANKS, 1800.0, SEED, {"r": load_policy_file(RECOMMENDED)}, params=P)
    return q["r"].false_actions, q["r"].time_to_act_s


def test_skew_on_most_kernels_disrupts_nothing_and_a_slow_gpu_is_restarted() -> None:
    false, _ = _judge(Scenario("skew", "skew", None, family=SKEW))
    assert false == 0
    slow = Scenario("slow", "slow", FaultKind.SLOW_GPU, 0.10, start_s=300.0, family=SKEW)
    false, act_s = _judge(slow)
    assert false == 0
    assert act_s is not None and act_s <= 600.0


def test_without_the_gate_the_same_skew_disrupts_a_healthy_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partial_slowdown, "held", lambda scores, *a, **k: scores)
    false, _ = _judge(Scenario("skew", "skew", None, family=SKEW))
    assert false >= 1
