"""Values of ``score_report`` that the score-report tests checked only in part, found by
mutation (make mutation, issue 41): a rank's worst tail score, a refusal's message to
the letter (the first five problems, then how many more; ``<report>`` for a problem of
the whole report), the size limit at exactly its bound, and a report changed without
validation that still never serializes a NaN."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pacekeeper.detector.score_report import (
    MAX_REPORT_BYTES,
    JobIdentity,
    RankScores,
    ReportRejected,
    ScoreReport,
    peer_key,
    score_key,
)


def build(ranks: list[RankScores]) -> ScoreReport:
    return ScoreReport.build(
        job=JobIdentity(name="llm"),
        sequence=1,
        generated_at=datetime(2026, 12, 1, tzinfo=UTC),
        window_s=60.0,
        ranks=ranks,
    )


def test_worst_tail_is_the_lowest_measured_tail() -> None:
    assert (
        RankScores(rank=0, node="n", section_tail={"a": 0.8, "b": None, "c": 0.5}).worst_tail()
        == 0.5
    )
    assert RankScores(rank=0, node="n", section_tail={"a": None}).worst_tail() is None
    assert RankScores(rank=0, node="n", section_tail={}).worst_tail() is None
    assert RankScores(rank=0, node="n").worst_tail() is None


def wire() -> dict[str, Any]:
    return build([RankScores(rank=0, node="n0", gpu_relative=0.5)]).to_wire()


def rejected(data: dict[str, Any] | bytes) -> str:
    with pytest.raises(ReportRejected) as err:
        ScoreReport.from_wire(data)
    return str(err.value)


BAD_RANK = {"rank": -1, "node": ""}  # two problems each
RANK_PROBLEMS = (
    "ranks.{i}.rank: Input should be greater than or equal to 0; "
    "ranks.{i}.node: String should have at least 1 character"
)


def test_a_refusal_names_five_problems_then_counts_the_rest() -> None:
    six = {**wire(), "ranks": [BAD_RANK] * 3}
    assert rejected(six) == (
        "invalid score report: "
        + "; ".join(RANK_PROBLEMS.format(i=i) for i in range(2))
        + "; ranks.2.rank: Input should be greater than or equal to 0; ... and 1 more"
    )


def test_exactly_five_problems_are_all_named_and_nothing_more() -> None:
    five = {**wire(), "ranks": [BAD_RANK] * 2, "windowS": -1.0}
    assert rejected(five) == (
        "invalid score report: windowS: Input should be greater than 0; "
        + "; ".join(RANK_PROBLEMS.format(i=i) for i in range(2))
    )


def test_a_problem_of_the_whole_report_is_named_report() -> None:
    twice = wire()
    twice["ranks"] = twice["ranks"] * 2
    assert rejected(twice) == (
        "invalid score report: <report>: Value error, ranks: rank 0 appears twice"
    )


def test_the_size_limit_admits_exactly_its_bound() -> None:
    at_bound = b"{}" + b" " * (MAX_REPORT_BYTES - 2)
    # Parsed (and refused for its missing fields), not refused for its size.
    assert rejected(at_bound).startswith("invalid score report: job: Field required")
    assert rejected(at_bound + b" ") == (
        f"report is {MAX_REPORT_BYTES + 1} bytes, limit {MAX_REPORT_BYTES}"
    )


def test_a_report_changed_without_validation_never_serializes_nan() -> None:
    changed = build([RankScores(rank=0, node="n0")]).model_copy(update={"window_s": float("nan")})
    with pytest.raises(ValueError, match="not JSON compliant"):
        changed.to_json()


def test_a_list_is_no_report() -> None:
    assert rejected(b"[1]") == "report must be a JSON object, got list"


def test_the_summary_quantiles_are_nearest_rank() -> None:
    ten = build([RankScores(rank=r, node=f"n{r}", gpu_relative=0.1 * (r + 1)) for r in range(10)])
    s = ten.summary
    assert (s.min_score, s.p10_score, s.median_score, s.worst_rank) == pytest.approx(
        (0.1, 0.1, 0.5, 0)
    )
    three = build(
        [RankScores(rank=r, node="n", gpu_relative=v) for r, v in enumerate((0.9, 0.2, 0.6))]
    )
    assert (three.summary.p10_score, three.summary.median_score) == (0.2, 0.6)


def test_a_report_with_no_worst_score_still_lists_nodes_and_tail_spreads() -> None:
    # A tail is no worst score: the summary has no minimum, but its node and the tail's
    # spread over the peers are kept.
    rep = build([RankScores(rank=0, node="n0", section_tail={"fwd": 0.5})])
    assert rep.summary.min_score is None
    assert [(n.node, n.ranks, n.min_score) for n in rep.summary.nodes] == [("n0", 1, None)]
    assert [(p.peers, list(p.spreads)) for p in rep.summary.peers] == [("", ["sectionTail/fwd"])]


def test_score_keys() -> None:
    assert score_key("gpuRelative") == "gpuRelative"
    assert score_key("sectionTail", "fwd") == "sectionTail/fwd"


def test_a_spread_is_rounded_to_four_places_and_names_each_score() -> None:
    ranks = [
        RankScores(rank=r, node="n", gpu_individual=v, section_relative={"a": v})
        for r, v in enumerate((0.111111, 0.222222, 0.333333))
    ]
    (peers,) = build(ranks).summary.peers
    want = {"median": 0.2222, "mad": 0.1111, "n": 3}
    assert {k: s.model_dump() for k, s in peers.spreads.items()} == {
        "gpuIndividual": want,
        "sectionRelative/a": want,
    }


def test_the_largest_peer_groups_are_kept() -> None:
    # 65 groups, one of two ranks keyed last: it is kept, the last single one is not.
    ranks = [RankScores(rank=r, node="n", group="zz", gpu_relative=0.9) for r in (0, 1)]
    ranks += [
        RankScores(rank=r, node="n", group=f"g{r:02d}", gpu_relative=0.9) for r in range(2, 66)
    ]
    kept = [p.peers for p in build(ranks).summary.peers]
    assert len(kept) == 64
    assert "group=zz" in kept and "group=g65" not in kept
    assert kept == sorted(kept)


def test_a_peer_key_of_coordinates_leaves_the_replica_dimensions_out() -> None:
    r = RankScores(rank=0, node="n", coords={"pp": 1, "dp": 3, "ep": 2, "tp": 0})
    assert peer_key(r) == "ep=2,pp=1"
