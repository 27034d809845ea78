"""``score.tail`` (a rank slow in a few windows out of ten, judged by its tail against its
peers') and ``score.hostSideOneRank`` (one rank of a node slow on its host side, its GPU
fine: the rank, never the node): exact judgements on made reports, and the policy's
validation."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest
from controller_builders import REPORT_S, T0, policy_doc

from pacekeeper.controller.core import peers
from pacekeeper.controller.core.attribution import Finding, attribute, digest, score_getter
from pacekeeper.controller.core.policy import Policy, PolicyError
from pacekeeper.detector.score_report import JobIdentity, RankScores, ScoreReport

WORLD = 32
PER_NODE = 8
ACT = 0.95


def _report(
    *,
    tails: Mapping[int, float] | None = None,
    host_slow: Mapping[int, float] | None = None,
    changed: bool = True,
    jitter: float = 0.004,
) -> ScoreReport:
    """A data-parallel job of healthy GPUs; ``tails``: ranks' tail on ``step``;
    ``host_slow``: ``forward_backward`` x 1/value from the CPU side (its individual
    score too when ``changed``: slower than the rank's own past)."""
    rng = np.random.default_rng(7)
    ranks = []
    for r in range(WORLD):
        speed = 1.0 + jitter * rng.standard_normal()
        host = (host_slow or {}).get(r, 1.0)
        ranks.append(
            RankScores(
                rank=r,
                node=f"node-{r // PER_NODE:03d}",
                gpu_relative=min(speed, 1.0),
                gpu_individual=1.0,
                section_relative={"forward_backward": min(speed * host, 1.0)},
                section_individual={"forward_backward": host if changed else 1.0},
                section_tail={
                    "step": (tails or {}).get(r, 1.0 - abs(jitter * rng.standard_normal()))
                },
                section_samples=30,
                kernel_samples=30,
            )
        )
    return ScoreReport.build(
        job=JobIdentity(name="train"), sequence=1, generated_at=T0, window_s=REPORT_S, ranks=ranks
    )


def _policy(score: Mapping[str, object]) -> Policy:
    doc = policy_doc({"score": dict(score), "thresholds": {"act": ACT, "recover": 0.97}})
    return doc.policies["default"]


TAIL = {"kind": "gpuRelative", "tail": {"act": 0.85}}


def test_a_rank_slow_in_its_tail_is_judged_slow_in_proportion() -> None:
    report = _report(tails={5: 0.77})
    policy = _policy(TAIL)
    judged = peers.judge(report, policy, score_getter(policy.score))
    # Its tail over its peers' median (about 0.998): about 0.771.
    assert judged.tail == {
        5: pytest.approx(
            0.77
            / float(
                np.median([(r.section_tail or {})["step"] for r in report.ranks if r.rank != 5])
            ),
            abs=2e-3,
        )
    }
    # Judged as a score at act x tail / tail.act.
    assert judged.values[5] == pytest.approx(ACT * judged.tail[5] / 0.85, abs=1e-3)
    d = digest(report, policy)
    assert set(d.below) == {5}
    # One rank of its node: a rank finding, never the node.
    (finding,) = attribute(d, policy).findings
    assert finding.kind is Finding.RANK and finding.ranks == (5,)
    # Without score.tail the same report is healthy: every median is.
    assert not digest(report, _policy({"kind": "gpuRelative"})).below


def test_a_tail_like_its_peers_is_no_finding() -> None:
    # Heavy-tailed jitter widens every rank's tail: all at 0.8, none stands out.
    report = _report(tails=dict.fromkeys(range(WORLD), 0.8))
    policy = _policy(TAIL)
    assert peers.judge(report, policy, score_getter(policy.score)).tail == {}
    assert not digest(report, policy).below
    # A rank a little worse than its noisy peers stays within their spread.
    noisy = {r: 0.8 + 0.05 * ((r * 7) % 5 - 2) / 2 for r in range(WORLD)}
    noisy[3] = 0.68
    assert not digest(_report(tails=noisy), policy).below


def test_one_rank_slow_on_its_host_side_is_the_rank_with_one_rank_on() -> None:
    report = _report(host_slow={5: 0.85})
    one = _policy({"kind": "gpuRelative", "hostSide": True, "hostSideOneRank": True})
    judged = peers.judge(report, one, score_getter(one.score))
    assert set(judged.host_side) == {5}
    d = digest(report, one)
    assert set(d.below) == {5}
    (finding,) = attribute(d, one).findings
    assert finding.kind is Finding.RANK and finding.ranks == (5,)
    # The node rule alone (two ranks of a node must agree) does not see it.
    node_only = _policy({"kind": "gpuRelative", "hostSide": True})
    assert not digest(report, node_only).below


def test_a_rank_that_always_did_more_host_work_is_not_found() -> None:
    # Rank 0 logs: slower than its peers, but no slower than its own past.
    report = _report(host_slow={0: 0.85}, changed=False)
    one = _policy({"kind": "gpuRelative", "hostSide": True, "hostSideOneRank": True})
    assert not digest(report, one).below


@pytest.mark.parametrize(
    ("score", "message"),
    [
        (
            {"kind": "gpuRelative", "reference": "best", "tail": {}},
            "tail needs reference peerMedian",
        ),
        ({"kind": "gpuRelative", "hostSideOneRank": True}, "hostSideOneRank and hostSideAct need"),
        ({"kind": "gpuRelative", "hostSideAct": 0.9}, "hostSideOneRank and hostSideAct need"),
        ({"kind": "gpuRelative", "hostSide": True, "hostSideAct": 1.2}, r"score\.hostSideAct"),
        ({"kind": "gpuRelative", "tail": {"act": 1.5}}, r"score\.tail\.act"),
        ({"kind": "gpuRelative", "tail": {"acts": 0.8}}, r"score\.tail\.acts"),
        ({"kind": "gpuRelative", "tail": {"minDeviations": -1.0}}, r"score\.tail\.minDeviations"),
        ({"kind": "gpuRelative", "tail": {"act": "0.8"}}, r"score\.tail\.act"),
    ],
)
def test_bad_tail_or_one_rank_settings_are_refused_naming_the_field(
    score: Mapping[str, object], message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        policy_doc({"score": dict(score)})


def test_the_tail_rule_reads_from_yaml_with_its_defaults() -> None:
    policy = _policy({"kind": "gpuIndividual", "tail": {}})
    assert policy.score.tail is not None
    assert policy.score.tail.act == 0.85 and policy.score.tail.min_deviations == 3.0
    assert _policy({"kind": "gpuIndividual"}).score.tail is None


def test_one_rank_needs_the_restart_rank_step() -> None:
    with pytest.raises(PolicyError, match=r"hostSideOneRank needs ladder\.restartRank\.enabled"):
        policy_doc(
            {
                "score": {"kind": "gpuRelative", "hostSide": True, "hostSideOneRank": True},
                "ladder": {"restartRank": {"enabled": False}},
            }
        )


def test_host_side_act_sets_the_host_line_below_a_low_gpu_act() -> None:
    # A policy acting on GPUs at 0.75 never sees a 15% host stall (0.85) by its act.
    report = _report(host_slow={5: 0.85})
    score = {"kind": "gpuRelative", "hostSide": True, "hostSideOneRank": True}
    low = {"thresholds": {"act": 0.75, "recover": 0.9}}
    assert not digest(report, policy_doc({"score": score, **low}).policies["default"]).below
    with_line = policy_doc({"score": {**score, "hostSideAct": 0.9}, **low}).policies["default"]
    d = digest(report, with_line)
    # Judged as a score of act x host / hostSideAct: 0.75 x 0.85 / 0.9.
    assert d.below == {5: pytest.approx(0.75 * 0.85 / 0.9, abs=5e-3)}
