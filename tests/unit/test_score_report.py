"""The score report is the one contract between job and controller: round trips,
refuses bad input naming the field, and stays bounded for Kubernetes status."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from score_report_builders import LLAMA_JOB as JOB

from pacekeeper.detector.compaction import compact
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    SCHEMA_VERSION,
    RankScores,
    ReportRejected,
    ScoreReport,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _rank(rank: int, score: float, node: str | None = None) -> RankScores:
    return RankScores(
        rank=rank,
        node=node or f"node-{rank // 8}",
        pod=f"llama-{rank}",
        gpu_relative=score,
        gpu_individual=min(1.0, score + 0.1),
        section_relative={"fwd": score, "bwd": 1.0},
        section_individual={"fwd": 1.0, "bwd": 1.0},
        section_samples=120,
        kernel_samples=800,
    )


def _report(scores: list[float], **kw: object) -> ScoreReport:
    return ScoreReport.build(
        job=JOB,
        sequence=7,
        generated_at=NOW,
        window_s=60.0,
        ranks=[_rank(i, s) for i, s in enumerate(scores)],
        **kw,  # type: ignore[arg-type]
    )


def test_round_trip_through_json_keeps_every_field() -> None:
    rep = _report([1.0, 0.9, 0.5, 1.0])
    back = ScoreReport.from_wire(rep.to_json())
    assert back == rep
    wire = rep.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION
    assert wire["ranks"][2]["gpuRelative"] == 0.5
    assert wire["job"]["namespace"] == "ml"


def test_summary_names_worst_rank_and_per_node_minimum() -> None:
    scores = [1.0] * 16
    scores[11] = 0.4
    rep = _report(scores)
    assert rep.summary.worst_rank == 11
    assert rep.summary.min_score == 0.4
    node1 = next(n for n in rep.summary.nodes if n.node == "node-1")
    assert (node1.min_score, node1.worst_rank, node1.ranks) == (0.4, 11, 8)


def test_future_schema_version_is_refused_with_a_clear_message() -> None:
    wire = _report([1.0]).to_wire()
    wire["schemaVersion"] = SCHEMA_VERSION + 1
    with pytest.raises(ReportRejected, match=r"schemaVersion: .*newer than this pacekeeper"):
        ScoreReport.from_wire(wire)


@pytest.mark.parametrize("bad", [float("nan"), -0.1, float("inf")])
def test_nan_negative_or_infinite_scores_are_refused_naming_the_rank(bad: float) -> None:
    wire = _report([1.0, 1.0]).to_wire()
    wire["ranks"][1]["gpuRelative"] = bad
    with pytest.raises(ReportRejected, match=r"ranks\.1\.gpuRelative"):
        ScoreReport.from_wire(json.dumps(wire))


def test_duplicate_rank_and_rank_outside_world_are_refused() -> None:
    wire = _report([1.0, 1.0]).to_wire()
    wire["ranks"][1]["rank"] = 0
    with pytest.raises(ReportRejected, match="rank 0 appears twice"):
        ScoreReport.from_wire(wire)
    wire = _report([1.0, 1.0]).to_wire()
    wire["ranks"][1]["rank"] = 5
    with pytest.raises(ReportRejected, match="outside worldSize 2"):
        ScoreReport.from_wire(wire)


def test_kubernetes_job_without_namespace_is_refused() -> None:
    wire = _report([1.0]).to_wire()
    del wire["job"]["namespace"]
    with pytest.raises(ReportRejected, match=r"job\.namespace is required"):
        ScoreReport.from_wire(wire)


def test_naive_timestamp_is_refused_and_aware_one_normalised_to_utc() -> None:
    wire = _report([1.0]).to_wire()
    wire["generatedAt"] = "2026-11-30T12:00:00"
    with pytest.raises(ReportRejected, match="generatedAt"):
        ScoreReport.from_wire(wire)
    wire["generatedAt"] = "2026-11-30T13:00:00+01:00"
    assert ScoreReport.from_wire(wire).generated_at == NOW


def test_oversize_and_non_object_payloads_are_refused() -> None:
    with pytest.raises(ReportRejected, match="not valid JSON"):
        ScoreReport.from_wire("{nope")
    with pytest.raises(ReportRejected, match="must be a JSON object"):
        ScoreReport.from_wire("[1, 2]")
    with pytest.raises(ReportRejected, match="bytes, limit"):
        ScoreReport.from_wire(b" " * (64 * 1024 * 1024 + 1))


def test_unknown_field_is_refused_so_typos_do_not_pass_silently() -> None:
    wire = _report([1.0]).to_wire()
    wire["ranks"][0]["gpuRelativ"] = 0.2
    with pytest.raises(ReportRejected, match=r"ranks\.0\.gpuRelativ"):
        ScoreReport.from_wire(wire)


def test_16k_rank_status_form_fits_256_kib_and_keeps_the_worst_ranks() -> None:
    world = 16_384
    scores = [0.95 + 0.05 * ((i * 7919) % 100) / 100 for i in range(world)]
    slow = [3, 4097, 9000, 16_383]
    for r in slow:
        scores[r] = 0.3
    full = _report(scores)
    assert len(full.to_json()) > K8S_STATUS_MAX_BYTES
    small = compact(full)
    size = len(small.to_json())
    assert size <= K8S_STATUS_MAX_BYTES, size
    assert small.truncated
    kept = {r.rank for r in small.ranks}
    assert set(slow) <= kept
    # Every kept rank is at least as bad as every dropped one.
    worst_dropped = min(r.worst_score() or math.inf for r in full.ranks if r.rank not in kept)
    assert max(r.worst_score() or 0 for r in small.ranks) <= worst_dropped
    assert small.summary == full.summary
    assert len(small.summary.nodes) == world // 8
    assert ScoreReport.from_wire(small.to_json()) == small


def test_small_report_is_not_truncated() -> None:
    rep = _report([1.0, 0.5])
    assert compact(rep) is rep
    assert not rep.truncated


def test_ranks_without_measurements_have_no_scores_rather_than_nan() -> None:
    rep = ScoreReport.build(
        job=JOB,
        sequence=0,
        generated_at=NOW - timedelta(seconds=5),
        window_s=1.0,
        ranks=[RankScores(rank=0, node="n0")],
    )
    wire = rep.to_wire()
    assert "gpuRelative" not in wire["ranks"][0]
    assert rep.summary.min_score is None
    assert "NaN" not in rep.to_json()


@given(
    st.lists(
        st.one_of(st.none(), st.floats(min_value=0, max_value=2, allow_nan=False)),
        min_size=1,
        max_size=40,
    )
)
def test_any_valid_scores_round_trip_and_summary_min_is_the_true_minimum(
    values: list[float | None],
) -> None:
    ranks = [RankScores(rank=i, node=f"n{i % 3}", gpu_relative=v) for i, v in enumerate(values)]
    rep = ScoreReport.build(job=JOB, sequence=1, generated_at=NOW, window_s=1, ranks=ranks)
    assert ScoreReport.from_wire(rep.to_json()) == rep
    present = [v for v in values if v is not None]
    assert rep.summary.min_score == (min(present) if present else None)


@given(st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=5), max_size=6))
def test_arbitrary_junk_is_refused_with_report_rejected_not_a_crash(junk: dict) -> None:
    with pytest.raises(ReportRejected):
        ScoreReport.from_wire(junk)
