"""Data skew against a slow GPU, through the detector's real scoring and the real
decision core under docs/policies/enforce-recommended.yaml.

A rank carrying 12% more work for ~15 windows is, in step times, a 12% slow GPU. Its
extra work runs in the data-dependent kernels (here 30% of the kernel time), so its
broad GPU score (``gpuIndividualMedian``) stays at its GPU's speed, and the sequential
test, reading it (``breadth.broad_scores``), holds back every disruptive step; a 10%
slow GPU under the same noise is still restarted within 10 minutes. Without the broad
score the same healthy job gets a healthy rank disrupted. With the skew on 70% of the
kernel time the median reads it as a slow GPU too, and the fastest tenth of the kernel
time (``gpuIndividualFast``) holds the test instead (``partial_slowdown``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacekeeper.controller.core import partial_slowdown, tail_gate
from pacekeeper.controller.core.policy import load_policy_file
from pacekeeper.controller.simulation.models import FaultKind, JobSimulator, ModelParams
from pacekeeper.controller.simulation.noise_families import NoiseFamily
from pacekeeper.controller.simulation.policy_runs import judge_policies
from pacekeeper.controller.simulation.scenarios import Scenario

RECOMMENDED = Path(__file__).resolve().parents[3] / "docs" / "policies" / "enforce-recommended.yaml"
P = ModelParams(kernels=48)
SKEW = NoiseFamily(
    "data-skew", skew_share=0.05, skew_size=0.12, skew_dwell_windows=15.0, skew_kernel_share=0.3
)
RANKS = 64
SEED = 0


def test_the_skew_lands_on_the_data_dependent_kernels_only() -> None:
    fam = NoiseFamily("s", skew_share=0.25, skew_size=0.12, skew_dwell_windows=1e6,
                      skew_kernel_share=0.3)  # fmt: skip
    sim = JobSimulator(16, params=P, noise=fam, seed=1)
    dd = sim._skew_kernels
    assert dd is not None
    w = sim.next_window()
    skewed = sim._noise.skewed if sim._noise is not None else None
    assert skewed is not None and 0 < skewed.sum() < 16
    k = P.kernels
    tot = w.kernel_total_ns[:, :k]
    base = sim._static.kernel_base_ns * sim._static.kernel_per_step
    share = base[dd].sum() / base.sum()
    assert 0.25 < share < 0.35
    # The step's compute grows by the drawn 12%: all of it in the data-dependent kernels.
    grown = tot.sum(axis=1) / (tot[:, ~dd].sum(axis=1) / (1.0 - share))
    assert grown[skewed] == pytest.approx(np.full(skewed.sum(), 1.12), abs=0.01)
    assert grown[~skewed] == pytest.approx(np.ones((~skewed).sum()), abs=0.01)


def _judge(sc: Scenario) -> tuple[int, float | None]:
    q = judge_policies(sc, RANKS, 1800.0, SEED, {"r": load_policy_file(RECOMMENDED)}, params=P)
    return q["r"].false_actions, q["r"].time_to_act_s


SKEW_MOST = NoiseFamily(
    "data-skew", skew_share=0.05, skew_size=0.12, skew_dwell_windows=15.0, skew_kernel_share=0.7
)
"""The same skew on 70% of the kernel time: the median reads it as a slow GPU, only the
fastest tenth of the kernel time (``gpuIndividualFast``, ``partial_slowdown``) does not."""


@pytest.mark.parametrize("family", [SKEW, SKEW_MOST], ids=["share-0.3", "share-0.7"])
def test_skew_disrupts_nothing_and_a_slow_gpu_is_restarted_in_ten_minutes(
    family: NoiseFamily,
) -> None:
    false, _ = _judge(Scenario("skew", "skew", None, family=family))
    assert false == 0
    slow = Scenario("slow", "slow", FaultKind.SLOW_GPU, 0.10, start_s=300.0, family=family)
    false, act_s = _judge(slow)
    assert false == 0
    assert act_s is not None and act_s <= 600.0


def test_without_the_broad_score_the_same_skew_disrupts_a_healthy_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The fastest tenth holds a skew on 30% of the kernel time too: both gates go.
    monkeypatch.setattr(tail_gate, "broad_scores", lambda judged, report, kind, act=None: judged)
    monkeypatch.setattr(partial_slowdown, "held", lambda scores, *a, **k: scores)
    false, _ = _judge(Scenario("skew", "skew", None, family=SKEW))
    assert false >= 1


def test_without_the_partial_gate_skew_on_most_kernels_disrupts_a_healthy_rank(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(partial_slowdown, "held", lambda scores, *a, **k: scores)
    false, _ = _judge(Scenario("skew", "skew", None, family=SKEW_MOST))
    assert false >= 1
