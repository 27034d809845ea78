"""The decision core with ``safety.falseDisruptionsPerGpuDay``: a disruptive step waits
until the rank's sequential test passes; notices come as fast as without it."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from controller_builders import Loop, acts, policy_doc

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.policy import (
    DISRUPTIVE_ACTIONS,
    ActionKind,
    PolicyError,
    parse_policy_document,
)
from pacekeeper.controller.core.state import State

WORLD = 16
SLOW_RANK = 0
NODE0 = "node/node-000"
HISTORY = 12
"""Healthy reports before the slowdown (the test needs a history to learn the noise)."""


def _noisy(rng: np.random.Generator, slow: float, skewed: int | None = None) -> dict[int, float]:
    step = np.exp(rng.normal(0.0, 0.01, WORLD))
    step[SLOW_RANK] /= 1.0 - slow
    if skewed is not None:
        step[skewed] *= 1.09  # more data on this rank: a healthy GPU, slower a while
    return {r: float(s) for r, s in enumerate(np.minimum(np.median(step) / step, 1.0))}


def _run(
    rate: float | None, slow: float = 0.2, reports: int = 40, skew: bool = False
) -> list[Decision]:
    policy: dict[str, Any] = {
        "thresholds": {"act": 0.93, "recover": 0.97},
        "score": {"minDeviations": None},
    }
    if rate is not None:
        policy["safety"] = {"falseDisruptionsPerGpuDay": rate}
    loop = Loop(policy_doc(policy), world=WORLD)
    rng = np.random.default_rng(7)
    for i in range(reports):
        # With skew: every 10 reports another healthy rank is 9% slower for 4 reports.
        skewed = 1 + (i // 10) % (WORLD - 1) if skew and i % 10 < 4 else None
        loop.step(_noisy(rng, slow if i >= HISTORY else 0.0, skewed))
    return loop.log


def _first(log: list[Decision], action: ActionKind) -> int:
    return next(i for i, d in enumerate(log) if d.verdict is Verdict.ACT and d.action is action)


def test_the_restart_waits_for_the_test_and_the_notice_does_not() -> None:
    gated, plain = _run(0.001), _run(None)
    # The notice: the same decision at the same report with or without the rule.
    notice = gated[_first(gated, ActionKind.NOTIFY)]
    assert notice.decided_at == plain[_first(plain, ActionKind.NOTIFY)].decided_at
    restart = gated[_first(gated, ActionKind.RESTART_RANK)]
    without = plain[_first(plain, ActionKind.RESTART_RANK)]
    assert restart.decided_at is not None and without.decided_at is not None
    assert restart.decided_at > without.decided_at
    withheld = [
        d
        for d in gated
        if d.verdict is Verdict.HOLD
        and d.action is ActionKind.RESTART_RANK
        and d.reason is Reason.NOT_PERSISTENT
    ]
    assert withheld, "no restart was withheld for the test"
    test = withheld[-1].evidence["sequentialTest"]
    assert test["passed"] == [] and test["statistic"]["0"] < test["threshold"]
    passed = restart.evidence["sequentialTest"]
    assert passed["passed"] == [SLOW_RANK]
    assert passed["statistic"]["0"] >= passed["threshold"]
    assert restart.evidence["ranks"] == [SLOW_RANK]


def test_skew_that_comes_and_goes_is_noticed_but_never_disrupted() -> None:
    log = _run(0.001, slow=0.0, reports=60, skew=True)
    kinds = [a for a, _ in acts(log)]
    assert ActionKind.NOTIFY in kinds  # the notices stay fast
    assert set(kinds) == {ActionKind.NOTIFY}, kinds


@pytest.mark.parametrize("value", [0.0, 2.0, -1e-3, float("nan")])
def test_a_rate_out_of_bounds_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(PolicyError, match=r"policy 'default': safety\.falseDisruptionsPerGpuDay"):
        policy_doc({"safety": {"falseDisruptionsPerGpuDay": value}})


def test_a_rate_that_is_no_number_is_refused_naming_the_field() -> None:
    doc = {
        "apiVersion": "pacekeeper.dev/v1alpha1",
        "kind": "RemediationPolicies",
        "policies": {"p": {"safety": {"falseDisruptionsPerGpuDay": "often"}}},
    }
    with pytest.raises(PolicyError, match=r"safety\.falseDisruptionsPerGpuDay"):
        parse_policy_document(doc, "p.yaml")
    doc["policies"] = {"p": {"safety": {"falseDisruptionsPerGPUDay": 0.001}}}
    with pytest.raises(PolicyError, match=r"falseDisruptionsPerGPUDay"):
        parse_policy_document(doc, "p.yaml")


def test_the_tests_survive_the_controllers_state_store() -> None:
    policy = {"thresholds": {"act": 0.93, "recover": 0.97}, "score": {"minDeviations": None}}
    loop = Loop(policy_doc({**policy, "safety": {"falseDisruptionsPerGpuDay": 0.001}}))
    rng = np.random.default_rng(3)
    for _ in range(10):
        loop.step(_noisy(rng, 0.0))
    job = next(iter(loop.state.jobs.values()))
    assert len(job.tests) == WORLD and all(len(t.history) == 10 for t in job.tests.values())
    assert State.from_dict(json.loads(json.dumps(loop.state.to_dict()))) == loop.state


def test_warm_up_reports_teach_the_noise_and_build_no_evidence() -> None:
    policy = {
        "thresholds": {"act": 0.93, "recover": 0.97},
        "score": {"minDeviations": None},
        "warmup": {"afterJobStartS": 600},
        "safety": {"falseDisruptionsPerGpuDay": 0.001},
    }
    loop = Loop(policy_doc(policy), world=WORLD)
    rng = np.random.default_rng(5)
    for _ in range(9):  # all inside the warm-up, rank 0 slow from the start
        loop.step(_noisy(rng, 0.3))
    tests = next(iter(loop.state.jobs.values())).tests
    assert len(tests) == WORLD and all(len(t.history) == 9 for t in tests.values())
    assert all(t.cusum == 0.0 for t in tests.values())
    assert not acts(loop.log)


def test_a_restart_under_drift_is_carried_by_the_peers_record() -> None:
    # 256 ranks, each drifting +-2.5 % on its own ~15-report period; rank 0 a GPU 10 %
    # slower from report 30. The CUSUMs wait on the drift's autocorrelation; the peers'
    # record (every other rank's crests) passes first, and the evidence says so.
    world, onset = 256, 30
    policy = {
        "thresholds": {"act": 0.93, "recover": 0.97},
        "score": {"minDeviations": None},
        "safety": {"falseDisruptionsPerGpuDay": 0.001},
    }
    loop = Loop(policy_doc(policy), world=world)
    rng = np.random.default_rng(3)
    phase = rng.uniform(0, 2 * np.pi, world)
    period = 15.0 * rng.uniform(0.5, 2.0, world)
    for i in range(onset + 12):
        log_step = 0.025 * np.sin(2 * np.pi * i / period + phase) + rng.normal(0, 0.001, world)
        step = np.exp(log_step)
        if i >= onset:
            step[SLOW_RANK] /= 0.9
        loop.step({r: float(s) for r, s in enumerate(np.minimum(np.median(step) / step, 1.0))})
    restarts = [
        d for d in loop.log if d.verdict is Verdict.ACT and d.action is ActionKind.RESTART_RANK
    ]
    assert restarts, "the slow GPU was not restarted within 12 reports of its onset"
    assert {r for d in restarts for r in d.evidence["ranks"]} == {SLOW_RANK}
    test = restarts[0].evidence["sequentialTest"]
    at = test["thresholds"]
    assert test["passed"] == [SLOW_RANK]
    assert test["peerRecord"][str(SLOW_RANK)] >= at["peerRecord"]
    assert test["statistic"][str(SLOW_RANK)] < at["clipped"]
    assert test["wideStatistic"][str(SLOW_RANK)] < at["wide"]
    disruptive = [
        d for d in loop.log if d.verdict is Verdict.ACT and d.action in DISRUPTIVE_ACTIONS
    ]
    assert all(d.evidence.get("ranks") == [SLOW_RANK] for d in disruptive), disruptive
