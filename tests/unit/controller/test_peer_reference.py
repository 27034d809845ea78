"""Each rank against its peers' median and spread, not the job's fastest rank; the rank
the others wait for is the suspect, the ranks that wait are never flagged."""

from __future__ import annotations

import math
import statistics

import numpy as np
from controller_builders import T0, Loop, acts, policy_doc, reasons
from hypothesis import given, settings
from hypothesis import strategies as st
from topology_builders import feed, grid, topo_report

from pacekeeper.controller.core import peer_stats, peers
from pacekeeper.controller.core.attribution import digest, score_getter
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy import ActionKind, parse_policy_document
from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import peer_key

GPU = {"score": {"kind": "gpuRelative"}, "thresholds": {"act": 0.8, "recover": 0.9}}


def _healthy_fleet(n: int, seed: int = 0) -> dict[int, float]:
    """Relative scores of n healthy GPUs: same-SKU spread (8 % pairwise, clipped at 2
    sigma), measured against the fastest: its extreme makes the slowest look ~0.75."""
    rng = np.random.default_rng(seed)
    t = np.exp(0.0709 * np.clip(rng.standard_normal(n), -2, 2))
    return {r: float(t.min() / t[r]) for r in range(n)}


def _judge(report, policy_over=None):  # type: ignore[no-untyped-def]
    doc = policy_doc(policy_over or GPU)
    policy = doc.policies["default"]
    return peers.judge(report, policy, score_getter(policy.score))


def test_the_extreme_fastest_gpu_of_a_large_job_makes_no_healthy_rank_slow() -> None:
    fleet = _healthy_fleet(1024)
    report = topo_report(fleet, seq=1, at=T0)
    best = {**GPU, "score": {**GPU["score"], "reference": "best"}}
    assert digest(report, policy_doc(best).policies["default"]).below  # healthy look slow
    assert not digest(report, policy_doc(GPU).policies["default"]).below
    loop = Loop(policy_doc(GPU), 1024)
    for _ in range(5):
        feed(loop, fleet)
    assert reasons(loop.log) == {Reason.HEALTHY}


def test_a_slow_rank_is_judged_against_its_peers_median() -> None:
    fleet = _healthy_fleet(256, seed=1) | {17: 0.4}
    loop = Loop(policy_doc(GPU), 256)
    for _ in range(4):
        feed(loop, fleet)
    acted = [d for d in loop.log if d.action is ActionKind.NOTIFY]
    assert acted and acted[0].evidence["ranks"] == [17]
    assert acted[0].evidence["reference"] == "peerMedian"
    # 0.4 against the best is ~0.4 / median against the peers: less slow, still slow.
    assert 0.4 < acted[0].evidence["scores"]["17"] < 0.8


def test_in_a_group_of_two_each_rank_is_compared_with_the_other() -> None:
    report = topo_report({0: 1.0, 1: 0.6}, seq=1, at=T0)
    judged = _judge(report).scores()
    assert judged == [1.0, 0.6]  # not 0.6 / median(1.0, 0.6) = 0.75


def test_a_rank_within_its_peers_spread_is_not_slow() -> None:
    # Sequence-length imbalance: peers spread widely; 0.55 vs a median of ~0.77 is 0.71
    # of it, below act, but well within three robust spreads of the group.
    scores = {r: 0.5 + 0.5 * r / 63 for r in range(64)}
    judged = _judge(topo_report(scores, seq=1, at=T0)).scores()
    assert judged[3] == 0.8  # raised to act: not slow, not recovered
    off = {**GPU, "score": {**GPU["score"], "minDeviations": None}}
    assert _judge(topo_report(scores, seq=1, at=T0), off).scores()[3] < 0.8


def test_peers_come_from_the_group_then_the_coordinates_then_the_whole_job() -> None:
    coords = grid(tp=2, dp=2, pp=2)
    report = topo_report(dict.fromkeys(range(8), 1.0), seq=1, at=T0, coords=coords)
    assert [peer_key(r) for r in report.ranks] == ["pp=0"] * 4 + ["pp=1"] * 4
    grouped = topo_report({0: 1.0, 1: 1.0}, seq=1, at=T0, groups={0: "a"})
    assert [peer_key(r) for r in grouped.ranks] == ["group=a", ""]


def test_a_rank_without_a_peer_has_no_relative_score() -> None:
    report = topo_report({0: 1.0, 1: 0.5}, seq=1, at=T0, groups={0: "a", 1: "b"})
    assert _judge(report).scores() == [None, None]


def _plain(values: list[float | None], keys: list[str], act: float, k: float | None) -> list:
    """Reference implementation, one rank at a time."""
    out: list[float | None] = []
    for i, v in enumerate(values):
        members = [j for j, key in enumerate(keys) if key == keys[i]]
        if v is None:
            out.append(None)
            continue
        if len(members) <= peer_stats.LOO_MAX_GROUP:
            others = [values[j] for j in members if j != i and values[j] is not None]
            if not others:
                out.append(None)
                continue
        else:
            others = [values[j] for j in members if values[j] is not None]
            if len(others) < 2:
                out.append(None)
                continue
        med = statistics.median(others)
        mad = statistics.median(abs(o - med) for o in others)
        if med <= 0:
            out.append(None)
            continue
        s = min(1.0, v / med)
        if k is not None and (med - v) < k * peer_stats.MAD_TO_SIGMA * mad and s < act:
            s = act
        out.append(s)
    return out


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "big"]),
            st.none() | st.floats(0.05, 1.0),
        ),
        min_size=1,
        max_size=90,
    )
)
def test_the_vectorised_reference_matches_a_plain_loop(data) -> None:  # type: ignore[no-untyped-def]
    scores = {i: (v if v is not None else 1.0) for i, (_, v) in enumerate(data)}
    groups = {i: g for i, (g, _) in enumerate(data)}
    report = topo_report(scores, seq=1, at=T0, groups=groups)
    # None: the rank has no GPU score this window.
    report = report.model_copy(
        update={
            "ranks": [r.model_copy(update={"gpu_relative": data[r.rank][1]}) for r in report.ranks]
        }
    )
    got = _judge(report).scores()
    want = _plain([v for _, v in data], [f"group={g}" for g, _ in data], 0.8, 3.0)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g is None and w is None) or (g is not None and w is not None and math.isclose(g, w))


def test_a_bounded_report_judges_its_listed_ranks_against_all_their_peers() -> None:
    fleet = _healthy_fleet(4000, seed=2) | {10: 0.3}
    full = topo_report(fleet, seq=1, at=T0)
    small = compact(full, max_bytes=60_000)
    assert small.truncated and len(small.ranks) < 1000
    whole = dict(zip([r.rank for r in full.ranks], _judge(full).scores(), strict=True))
    listed = dict(zip([r.rank for r in small.ranks], _judge(small).scores(), strict=True))
    for rank, v in listed.items():
        assert v is not None and math.isclose(v, whole[rank] or 0, abs_tol=2e-3), rank
    assert listed[10] < 0.5


# --- culprit and victims ------------------------------------------------------------

STEP = {
    "score": {"kind": "sectionRelative", "section": "backward", "reference": "best"},
    "thresholds": {"act": 0.75, "recover": 0.9},
}


def test_ranks_waiting_in_a_section_that_holds_the_collective_are_victims() -> None:
    # DDP: backward holds the all-reduce. Rank 5 computes 60 % longer; the others wait
    # for it, so their backward is the long one and rank 5's the shortest (1.0).
    scores = dict.fromkeys(range(8), 0.6) | {5: 1.0}
    waits = dict.fromkeys(range(8), 0.36) | {5: 0.02}
    loop = Loop(policy_doc(STEP), 8)
    for _ in range(4):
        feed(loop, scores, waits=waits, section="backward")
    acted = [d for d in loop.log if d.action is ActionKind.NOTIFY]
    assert acted and all(d.evidence["ranks"] == [5] for d in acted)
    assert Reason.JOB_WIDE_SLOWDOWN not in reasons(loop.log)
    victims = [d for d in loop.log if "victims" in d.evidence]
    assert victims and victims[-1].evidence["victims"]["count"] == 7
    assert list(victims[-1].evidence["waitedFor"]) == ["5"]


def test_without_wait_shares_the_same_section_flags_the_ranks_that_wait() -> None:
    # What reports without waitShare (schemaVersion 1) give: job-wide, never the culprit.
    scores = dict.fromkeys(range(8), 0.6) | {5: 1.0}
    loop = Loop(policy_doc(STEP), 8)
    for _ in range(4):
        feed(loop, scores, section="backward")
    assert acts(loop.log) == [] and Reason.JOB_WIDE_SLOWDOWN in reasons(loop.log)


def test_a_rank_the_others_wait_for_is_only_named_when_the_score_measures_its_work() -> None:
    # Rank 0 busy with work nothing times (logging): its peers wait for it, but its
    # compute is as fast as theirs. Named in the evidence, never acted on.
    scores = dict.fromkeys(range(16), 1.0)
    waits = dict.fromkeys(range(16), 0.55) | {0: 0.3}
    loop = Loop(policy_doc(GPU), 16)
    for _ in range(6):
        feed(loop, scores, waits=waits)
    assert acts(loop.log) == [] and reasons(loop.log) == {Reason.HEALTHY}
    assert loop.log[-1].evidence["waitedFor"] == {"0": round(0.45 / 0.7, 4)}


def test_a_slow_rank_that_also_waits_for_a_slower_one_is_no_victim() -> None:
    # Ranks 2 and 5 both compute slower; 2 waits for 5. Its own work is slow: suspect.
    scores = dict.fromkeys(range(8), 1.0) | {2: 0.6, 5: 0.5}
    waits = dict.fromkeys(range(8), 0.5) | {2: 0.2, 5: 0.0}
    judged = _judge(
        topo_report(scores, seq=1, at=T0, waits=waits), {**GPU, "score": {"kind": "gpuRelative"}}
    )
    assert judged.victims == {}
    assert judged.scores()[2] is not None and judged.scores()[2] < 0.8
    assert judged.scores()[5] is not None and judged.scores()[5] < 0.8


def test_a_slow_gpu_that_waits_for_a_slower_one_is_judged_by_its_gpu_score() -> None:
    # Rank 3's GPU is slower than its peers (0.75) but rank 7's much more so (0.5): rank 3
    # waits for rank 7 almost as long as the healthy ranks do, so its busy score passes.
    # GPU scores leave the communication kernels out: no wait is in them, and rank 3 is
    # slow by its own GPU (the simulator found every such GPU missed as a "victim").
    scores = dict.fromkeys(range(16), 1.0) | {3: 0.75, 7: 0.5}
    waits = dict.fromkeys(range(16), 0.40) | {3: 0.35, 7: 0.0}
    report = topo_report(scores, seq=1, at=T0, waits=waits)
    for kind in ("gpuRelative", "worst"):
        judged = _judge(report, {**GPU, "score": {"kind": kind}})
        assert judged.victims == {}, kind
        assert judged.scores()[3] is not None and judged.scores()[3] < 0.8, kind
        assert judged.scores()[7] is not None and judged.scores()[7] < 0.8, kind
    # The same shape in a section that holds the collective: rank 3 waited, a victim.
    sections = topo_report(scores | {3: 0.7}, seq=1, at=T0, waits=waits, section="backward")
    judged = _judge(sections, STEP)
    assert 3 in judged.victims and 7 not in judged.victims


def test_policy_reference_and_victim_settings_are_validated() -> None:
    doc = parse_policy_document(
        {"policies": {"default": {"score": {"reference": "peerMedian", "minDeviations": 2}}}}
    )
    assert doc.policies["default"].score.min_deviations == 2
    for bad in ({"score": {"reference": "fastest"}}, {"score": {"minDeviations": -1}}):
        try:
            parse_policy_document({"policies": {"default": bad}})
        except ValueError as e:
            assert "score" in str(e)
        else:  # pragma: no cover - the document must be refused
            raise AssertionError(bad)
