"""Values of ``probe_check.gate`` that test_probe_gate_edges.py checked only through
``judge``, found by mutation (make mutation, issue 41): the gate hands the GPUs' learned
factors and the model's spread on to the judgement (a gate that dropped either would
confirm a healthy node whose GPU is merely slow by nature), and a ladder holding only
half of a request (an id without its time, or a time without its id: a state written by
hand or by an older controller) asks again instead of waiting on it or failing."""

from __future__ import annotations

from test_probe_gate_edges import (
    ASKED,
    ASKED_AT,
    NO_ANSWER,
    T0,
    WAITING,
    answered,
    asked_now,
    ev,
    gate,
)

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.state import LadderState

# Rank 0 (the suspect) at 85% of its peers on GEMM: below slowerThan 0.9.
SLOW_BY_NATURE = answered({0: ev(85.0), 1: ev(100.0), 2: ev(100.0), 3: ev(100.0)})


def test_the_gate_takes_a_learned_factor_out_of_the_suspects_gpu() -> None:
    # Its GPU is known to run at 0.88: 85 / 0.88 is 96.6% of the peers, no fault.
    got = gate(WAITING, SLOW_BY_NATURE, factors={0: 0.88})
    assert (got.proceed, got.reason) == (False, Reason.PROBE_CLEARED)
    assert got.ladder.probe_confirmed is False
    assert got.evidence["probe"]["ratios"] == {"0": {"gemm_tflops": 0.9659}}
    assert got.evidence["probe"]["calibrated"] == ["0"]
    # The same answer without the factor confirms.
    assert gate(WAITING, SLOW_BY_NATURE).proceed is True


def test_the_gate_bars_an_uncalibrated_gpu_at_the_spread() -> None:
    # 0.85 is within a 20% spread of one model's GPUs: no fault.
    got = gate(WAITING, SLOW_BY_NATURE, spread=0.2)
    assert (got.proceed, got.reason) == (False, Reason.PROBE_CLEARED)
    assert got.evidence["probe"]["unseenBelow"] == 0.8
    assert got.evidence["probe"]["ratios"] == {"0": {"gemm_tflops": 0.85}}
    # With no spread, slowerThan bars and the same answer confirms.
    assert gate(WAITING, SLOW_BY_NATURE, spread=0.0).proceed is True


def test_an_id_without_its_ask_time_is_asked_again() -> None:
    half = LadderState(started_at=T0, probe_id=ASKED)
    assert gate(half, NO_ANSWER) == asked_now()


def test_an_ask_time_without_its_id_is_asked_again_at_once() -> None:
    # Asked 100 s ago, well inside the timeout, but under no id an answer could carry.
    half = LadderState(started_at=T0, probe_asked_at=ASKED_AT)
    assert gate(half, NO_ANSWER) == asked_now(unansweredSince=ASKED_AT.isoformat())
