"""``confirm: probe``: no node action until the job's confirmation probe singles out the
node's slow rank (issue 18). The real engine over a 16-rank job whose rank 3 is slow;
the job answers the request in a later report, as its ranks would."""

from __future__ import annotations

from datetime import timedelta

from controller_builders import REPORT_S, Loop, acts, policy_doc
from topology_builders import topo_report

from pacekeeper.controller.core import probe_check
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.detector.score_report import ProbeEvidence, RankScores, ScoreReport

SLOW = dict.fromkeys(range(16), 1.0) | {3: 0.5}
TAINT = ("node/node-000", ActionKind.TAINT_NODE)


def _loop(mode: str = "enforce") -> Loop:
    policy = {
        "score": {"kind": "gpuRelative", "reference": "best"},
        "thresholds": {"act": 0.75, "recover": 0.9},
        "confirm": "probe",
        "probe": {"slowerThan": 0.9, "timeoutS": 300},
        "ladder": {
            "notify": {"enabled": True, "timeoutS": 60},
            "restartRank": {"enabled": False},
            "taintNode": {"enabled": True, "timeoutS": 60},
            "drainNode": {"enabled": False},
            "cordonNode": {"enabled": False},
        },
    }
    return Loop(policy_doc(policy, {"mode": mode}), 16)


def _send(loop: Loop, answers: dict[int, float] | None = None, probe_id: str = "") -> None:
    """One more report: rank 3 slow; ``answers``: each rank's probe GEMM rate."""
    loop.now += timedelta(seconds=REPORT_S)
    loop.seq += 1
    report = topo_report(SLOW, seq=loop.seq, at=loop.now)
    if answers:
        ranks = [
            RankScores.model_validate(
                {
                    **r.model_dump(),
                    "probe": ProbeEvidence(id=probe_id, device="cuda", gemm_tflops=answers[r.rank]),
                }
            )
            for r in report.ranks
        ]
        report = ScoreReport.build(
            job=report.job,
            sequence=report.sequence,
            generated_at=report.generated_at,
            window_s=report.window_s,
            ranks=ranks,
        )
    loop.reports.append(report)
    loop.decide()


def _request(loop: Loop) -> str:
    asked = [d for d in loop.log if d.reason is Reason.AWAITING_PROBE]
    assert asked, [d.reason for d in loop.log]
    request = asked[-1].evidence["probe"].get("request")
    assert isinstance(request, str)
    return request


def _taints(loop: Loop) -> list:
    return [(s, a) for a, s in acts(loop.log) if a is ActionKind.TAINT_NODE]


def test_the_taint_waits_for_the_probe_and_follows_a_slow_answer() -> None:
    loop = _loop()
    for _ in range(6):
        _send(loop)
    assert (ActionKind.NOTIFY, "node/node-000") in acts(loop.log)
    assert _taints(loop) == []  # asked, not answered: no node action
    request = _request(loop)
    assert all(  # the same question while it waits, never a new one
        d.evidence["probe"]["request"] == request
        for d in loop.log
        if d.reason is Reason.AWAITING_PROBE
    )
    _send(loop, dict.fromkeys(range(16), 780.0) | {3: 90.0}, request)
    assert _taints(loop) == [TAINT]
    taint = next(
        d
        for d in loop.log
        if d.action is ActionKind.TAINT_NODE and d.reason is Reason.BELOW_THRESHOLD
    )
    probe = taint.evidence["probe"]
    assert probe["confirmed"] is True and probe["ratios"]["3"]["gemm_tflops"] < 0.2


def test_a_probe_as_fast_as_its_peers_clears_the_node() -> None:
    loop = _loop()
    for _ in range(6):
        _send(loop)
    request = _request(loop)
    _send(loop, dict.fromkeys(range(16), 780.0) | {3: 770.0}, request)
    for _ in range(4):
        _send(loop)
    assert _taints(loop) == []
    cleared = [d for d in loop.log if d.reason is Reason.PROBE_CLEARED]
    assert cleared and cleared[0].evidence["probe"]["confirmed"] is False
    assert cleared[-1].subject == "node/node-000"


def test_an_unanswered_request_is_asked_again_and_nothing_is_tainted() -> None:
    loop = _loop()
    for _ in range(6):
        _send(loop)
    first = _request(loop)
    for _ in range(6):  # past timeoutS (300 s) without an answer
        _send(loop)
    assert _taints(loop) == []
    assert _request(loop) != first
    again = [d for d in loop.log if d.evidence.get("probe", {}).get("unansweredSince")]
    assert again


def test_in_dry_run_nothing_is_asked_and_the_would_be_taint_shows() -> None:
    loop = _loop("dry-run")
    for _ in range(6):
        _send(loop)
    assert not [d for d in loop.log if d.reason is Reason.AWAITING_PROBE]
    would = [
        d for d in loop.log if d.action is ActionKind.TAINT_NODE and d.reason is Reason.OBSERVE_MODE
    ]
    assert would and would[0].evidence["probe"] == {"wouldAsk": True}


def test_the_judgement_compares_like_with_like_and_needs_peers() -> None:
    def ev(rate: float, device: str = "cuda") -> ProbeEvidence:
        return ProbeEvidence(id="p1", device=device, gemm_tflops=rate)

    ok, fig = probe_check.judge({0: ev(500), 1: ev(780), 2: ev(800)}, [0], 0.9)
    assert ok is True and fig["ratios"]["0"]["gemm_tflops"] == round(500 / 790, 4)
    ok, _ = probe_check.judge({0: ev(760), 1: ev(780), 2: ev(800)}, [0], 0.9)
    assert ok is False
    # A CPU rank is no peer of a GPU rank; alone on its kind, nothing can be said.
    ok, fig = probe_check.judge({0: ev(100), 1: ev(5, "cpu")}, [0], 0.9)
    assert ok is None and fig["ratios"] == {}
    assert probe_check.judge({1: ev(780)}, [0], 0.9)[0] is None  # the suspect never answered


def _answer(rank: int, gemm: float) -> ProbeEvidence:
    return ProbeEvidence(id="p1", device="cuda", gemm_tflops=gemm, memory_gbps=4000.0 * gemm / 790)


def test_a_gpus_learned_speed_is_taken_out_of_its_probe() -> None:
    """GPUs of one model differ on identical work the same way they differ in the job:
    a GPU 12 % slower by nature is no fault, one 8 % slower than it always was is."""
    peers = {r: _answer(r, 790.0 * (1.0 + 0.01 * (r % 3 - 1))) for r in range(8, 32)}
    factors = {r: 1.0 for r in peers}
    slow_by_nature = {**peers, 0: _answer(0, 790.0 * 0.88)}
    confirmed, figures = probe_check.judge(
        slow_by_nature, [0], 0.95, {**factors, 0: 0.88}, spread=0.15
    )
    assert confirmed is False and figures["calibrated"] == ["0"]
    # Unknown to the memory, 0.88 lies inside the spread: not confirmed either.
    assert probe_check.judge(slow_by_nature, [0], 0.95, factors, spread=0.15)[0] is False
    # Against its own factor it is 8 % slower: confirmed.
    changed = {**peers, 0: _answer(0, 790.0 * 0.92)}
    assert probe_check.judge(changed, [0], 0.95, {**factors, 0: 1.0}, spread=0.15)[0] is True
    # Without the memory, only beyond the spread.
    assert probe_check.judge(changed, [0], 0.95, None, spread=0.15)[0] is False
    broken = {**peers, 0: _answer(0, 790.0 * 0.8)}
    assert probe_check.judge(broken, [0], 0.95, None, spread=0.15)[0] is True
