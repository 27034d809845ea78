"""``confirm: probe`` at its edges (``probe_check``): the gate's every state (answered,
awaiting, unanswered past ``timeoutS``, never asked) with what it records, and the
judgement's bars exactly at ``slowerThan`` and ``1 - spread``, per part, with a GPU's
learned factor taken out of its GPU parts only. test_probe_confirmation.py runs the same
through the engine; these pin the values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from controller_builders import report

from pacekeeper.controller.core import probe_check as pc
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy_hardware import ProbeCheck
from pacekeeper.controller.core.state import LadderState
from pacekeeper.detector.score_report import ProbeEvidence, RankScores, ScoreReport

T0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
TICK = timedelta(microseconds=1)
CHECK = ProbeCheck(slower_than=0.9, timeout_s=300.0)
ASKED = "p20260101T115500-aaaaaaaaaaaaaaaa"


def ev(gemm: float | None = None, device: str = "cuda", **parts: float) -> ProbeEvidence:
    return ProbeEvidence(id=ASKED, device=device, gemm_tflops=gemm, **parts)


def answered(answers: dict[int, ProbeEvidence], seq: int = 2) -> ScoreReport:
    base = report(dict.fromkeys(range(4), 1.0), seq=seq, at=T0)
    ranks = [
        RankScores.model_validate({**r.model_dump(), "probe": answers.get(r.rank)})
        for r in base.ranks
    ]
    return ScoreReport.build(
        job=base.job,
        sequence=base.sequence,
        generated_at=base.generated_at,
        window_s=base.window_s,
        ranks=ranks,
    )


def gate(lad: LadderState, rep: ScoreReport, now: datetime = T0, **kw: object) -> pc.Gate:
    return pc.gate(lad, rep, [0], CHECK, job="ml/train", node="n1", now=now, **kw)  # type: ignore[arg-type]


ASKED_AT = T0 - timedelta(seconds=100)
WAITING = LadderState(started_at=T0, probe_id=ASKED, probe_asked_at=ASKED_AT)
NO_ANSWER = answered({})


def test_probe_id_is_stable_and_a_valid_request_id() -> None:
    got = pc.probe_id("ml/train", "n1", T0)
    assert got == "p20260101T120000-c9e0ec8b2fc50ad8"
    assert pc.probe_id("ml/train", "n2", T0) != got
    assert pc.probe_id("ml/other", "n1", T0) != got
    assert pc.probe_id("ml/train", "n1", T0 + timedelta(seconds=1)) != got


def test_an_answer_already_recorded_decides_without_a_report() -> None:
    yes = LadderState(started_at=T0, probe_id=ASKED, probe_confirmed=True)
    assert gate(yes, NO_ANSWER) == pc.Gate(True, yes, {"probe": {"id": ASKED, "confirmed": True}})
    no = LadderState(started_at=T0, probe_id=ASKED, probe_confirmed=False)
    assert gate(no, NO_ANSWER) == pc.Gate(
        False, no, {"probe": {"id": ASKED, "confirmed": False}}, Reason.PROBE_CLEARED
    )


def asked_now(**evidence: str) -> pc.Gate:
    """The gate's answer when it asks for a probe at T0: a new request, waited on for the
    300 s timeout; ``evidence`` adds to the request's."""
    request = pc.probe_id("ml/train", "n1", T0)
    return pc.Gate(
        False,
        LadderState(started_at=T0, probe_id=request, probe_asked_at=T0),
        {"probe": {"request": request, "askedAt": T0.isoformat(), **evidence}},
        Reason.AWAITING_PROBE,
        T0 + timedelta(seconds=300),
    )


def test_never_asked_asks_now() -> None:
    assert gate(LadderState(started_at=T0), NO_ANSWER) == asked_now()


def test_a_request_waits_until_its_timeout() -> None:
    due = ASKED_AT + timedelta(seconds=300)
    got = gate(WAITING, NO_ANSWER, now=due - TICK)
    assert got == pc.Gate(
        False,
        WAITING,
        {"probe": {"request": ASKED, "askedAt": ASKED_AT.isoformat()}},
        Reason.AWAITING_PROBE,
        due,
    )


def test_a_request_unanswered_at_its_timeout_is_asked_again_under_a_new_id() -> None:
    due = ASKED_AT + timedelta(seconds=300)
    got = gate(WAITING, NO_ANSWER, now=due)
    request = pc.probe_id("ml/train", "n1", due)
    assert request != ASKED
    assert got == pc.Gate(
        False,
        LadderState(started_at=T0, probe_id=request, probe_asked_at=due),
        {
            "probe": {
                "request": request,
                "askedAt": due.isoformat(),
                "unansweredSince": ASKED_AT.isoformat(),
            }
        },
        Reason.AWAITING_PROBE,
        due + timedelta(seconds=300),
    )


def test_a_slow_answer_confirms_and_is_recorded() -> None:
    rep = answered({0: ev(50.0), 1: ev(100.0), 2: ev(100.0), 3: ev(120.0)})
    got = gate(WAITING, rep)
    assert got.proceed is True and got.reason is None and got.recheck is None
    assert got.ladder == LadderState(
        started_at=T0, probe_id=ASKED, probe_asked_at=ASKED_AT, probe_confirmed=True
    )
    assert got.evidence["probe"]["id"] == ASKED
    assert got.evidence["probe"]["confirmed"] is True
    assert got.evidence["probe"]["ratios"] == {"0": {"gemm_tflops": 0.5}}


def test_an_answer_as_fast_as_the_peers_clears_the_node() -> None:
    rep = answered({0: ev(100.0), 1: ev(100.0), 2: ev(100.0)})
    got = gate(WAITING, rep)
    assert (got.proceed, got.reason) == (False, Reason.PROBE_CLEARED)
    assert got.ladder.probe_confirmed is False
    assert got.evidence["probe"]["confirmed"] is False


def test_an_answer_to_another_request_is_no_answer() -> None:
    other = "p20260101T000000-bbbbbbbbbbbbbbbb"
    stale = {
        r: ProbeEvidence(id=other, device="cuda", gemm_tflops=g)
        for r, g in {0: 10.0, 1: 100.0, 2: 100.0}.items()
    }
    got = gate(WAITING, answered(stale))
    assert got.reason is Reason.AWAITING_PROBE and got.ladder == WAITING


def test_an_answer_without_peers_to_compare_keeps_waiting() -> None:
    got = gate(WAITING, answered({0: ev(10.0)}))
    assert got.reason is Reason.AWAITING_PROBE and got.ladder == WAITING


# --- the judgement ----------------------------------------------------------------------


def test_confirms_strictly_below_slower_than() -> None:
    at_bar = {0: ev(90.0), 1: ev(100.0), 2: ev(100.0)}
    assert pc.judge(at_bar, [0], 0.9)[0] is False
    below = {0: ev(89.99), 1: ev(100.0), 2: ev(100.0)}
    assert pc.judge(below, [0], 0.9)[0] is True


def test_peers_median_excludes_suspects_other_devices_and_missing_parts() -> None:
    answers = {
        0: ev(80.0),
        1: ev(100.0),
        2: ev(100.0),
        3: ev(1000.0),  # another suspect: no peer
        4: ev(1.0, device="cpu"),  # another device kind: no peer
        5: ev(None, memory_gbps=5.0),  # no GEMM rate: no GEMM peer
        6: ev(0.0),  # a zero rate is no measurement
    }
    confirmed, fig = pc.judge(answers, [0, 3], 0.9)
    assert confirmed is True
    assert fig["ratios"]["0"] == {"gemm_tflops": 0.8}
    assert fig["ratios"]["3"] == {"gemm_tflops": 10.0}
    assert fig["peers"] == {"cuda": 4}
    assert fig["worst"] == 0.8


def test_the_median_of_an_even_number_of_peers() -> None:
    answers = {0: ev(60.0), 1: ev(50.0), 2: ev(70.0), 3: ev(90.0), 4: ev(110.0)}
    _, fig = pc.judge(answers, [0], 0.9)
    assert fig["ratios"]["0"]["gemm_tflops"] == 0.75  # 60 / median(50,70,90,110)=80


def test_each_part_is_judged_on_its_own() -> None:
    fast_gemm_slow_link = {
        0: ev(100.0, h2d_gbps=10.0, memory_gbps=100.0),
        1: ev(100.0, h2d_gbps=25.0, memory_gbps=100.0),
        2: ev(100.0, h2d_gbps=25.0, memory_gbps=100.0),
    }
    confirmed, fig = pc.judge(fast_gemm_slow_link, [0], 0.9)
    assert confirmed is True
    assert fig["ratios"]["0"] == {"gemm_tflops": 1.0, "memory_gbps": 1.0, "h2d_gbps": 0.4}
    assert fig["worst"] == 0.4


def test_figures_of_a_judgement() -> None:
    answers = {0: ev(50.0), 1: ev(100.0), 2: ev(100.0), 3: ev(40.0)}
    confirmed, fig = pc.judge(answers, [3, 0], 0.9, {0: 1.0, 2: 1.0, 9: 1.0}, spread=0.123456)
    assert confirmed is True
    assert fig == {
        "ratios": {"0": {"gemm_tflops": 0.5}, "3": {"gemm_tflops": 0.4}},
        "peers": {"cuda": 2},
        "slowerThan": 0.9,
        "unseenBelow": 0.8765,
        "calibrated": ["0"],
        "worst": 0.4,
    }


def test_no_comparison_gives_no_verdict_and_no_worst() -> None:
    confirmed, fig = pc.judge({1: ev(100.0), 2: ev(100.0)}, [0], 0.9)
    assert confirmed is None and "worst" not in fig and fig["ratios"] == {}


@pytest.mark.parametrize(
    ("ratio", "spread", "confirmed"),
    [
        (0.85, 0.2, False),  # below slowerThan, but within the healthy spread
        (0.8, 0.2, False),  # at 1 - spread
        (0.799, 0.2, True),
        (0.85, 0.05, True),  # the spread is narrower than slowerThan's gap: slowerThan bars
        (0.9, 0.05, False),
    ],
)
def test_a_gpu_part_without_a_learned_factor_must_be_outside_the_spread(
    ratio: float, spread: float, confirmed: bool
) -> None:
    answers = {0: ev(100.0 * ratio), 1: ev(100.0), 2: ev(100.0)}
    assert pc.judge(answers, [0], 0.9, None, spread=spread)[0] is confirmed


def test_a_learned_factor_is_taken_out_of_the_gpu_parts_and_then_slower_than_bars() -> None:
    # Rank 0's GPU is 12% slow by nature (factor 0.88): its 85 is 96.6 of its own speed.
    answers = {0: ev(85.0, memory_gbps=85.0), 1: ev(100.0, memory_gbps=100.0), 2: ev(100.0)}
    confirmed, fig = pc.judge(answers, [0], 0.9, {0: 0.88}, spread=0.15)
    assert confirmed is False
    assert fig["ratios"]["0"] == {"gemm_tflops": 0.9659, "memory_gbps": 0.9659}
    # Calibrated, the bar is slowerThan even inside the spread: 0.89 / 1.0 confirms.
    changed = {0: ev(89.0), 1: ev(100.0), 2: ev(100.0)}
    assert pc.judge(changed, [0], 0.9, {0: 1.0}, spread=0.15)[0] is True
    # Peers' factors come out of their rates too.
    peers_slow = {0: ev(80.0), 1: ev(80.0), 2: ev(80.0)}
    _, fig = pc.judge(peers_slow, [0], 0.9, {1: 0.8, 2: 0.8}, spread=0.0)
    assert fig["ratios"]["0"]["gemm_tflops"] == 0.8


def test_a_learned_factor_does_not_touch_host_parts() -> None:
    answers = {
        0: ev(None, h2d_gbps=20.0, cpu_gflops=50.0),
        1: ev(None, h2d_gbps=25.0, cpu_gflops=50.0),
        2: ev(None, h2d_gbps=25.0, cpu_gflops=50.0),
    }
    confirmed, fig = pc.judge(answers, [0], 0.9, {0: 0.8}, spread=0.0)
    assert fig["ratios"]["0"] == {"h2d_gbps": 0.8, "cpu_gflops": 1.0}
    assert confirmed is True
    # Host parts keep the spread's bar even for a calibrated GPU: 0.88 within 15%.
    within = {0: ev(None, h2d_gbps=22.0), 1: ev(None, h2d_gbps=25.0), 2: ev(None, h2d_gbps=25.0)}
    assert pc.judge(within, [0], 0.9, {0: 1.0}, spread=0.15)[0] is False
