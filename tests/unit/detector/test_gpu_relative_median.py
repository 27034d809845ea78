"""The broad GPU score against the peers (``gpuRelativeMedian``, schemaVersion 7): the
kernel-time-weighted lower median of the per-kernel scores ``gpuRelative`` averages.
Both scoring paths (plain loops for few entries, numpy for many) give the plain-Python
definition's value; then its way through the report cycle, the simulator, the
ScoreReport, the bounded form's peer spreads, and back."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from test_report_cycle_flow_values import generate, in_world, make_run

from pacekeeper.controller.simulation.detection import RealScoring
from pacekeeper.controller.simulation.models import Fault, FaultKind, JobSimulator, ModelParams
from pacekeeper.detector.payload import RankPayload, score_payloads
from pacekeeper.detector.reports import RankInfo
from pacekeeper.detector.score_report import (
    SCHEMA_VERSION,
    JobIdentity,
    RankScores,
    ReportRejected,
    ScoreReport,
)
from pacekeeper.detector.scoring import (
    gpu_relative_medians,
    gpu_relative_scores,
    weighted_median,
    weighted_row_median,
)

JOB = JobIdentity(name="train")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def plain_median(rows: list[int], values: list[float], weights: list[float], row: int) -> float:
    """The definition, one row: ``weighted_median`` of that row's entries."""
    mine = [(v, w) for r, v, w in zip(rows, values, weights, strict=True) if r == row]
    return weighted_median([v for v, _ in mine], [w for _, w in mine])


def _row_medians(rows: list[int], values: list[float], weights: list[float], n: int) -> list[float]:
    got = weighted_row_median(
        np.array(rows, dtype=np.int64), np.array(values), np.array(weights), n
    )
    out: list[float] = got.tolist()
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_row_medians_by_value() -> None:
    rows = [0, 0, 0, 1, 1, 2, 2, 2, 3]
    values = [0.9, 1.0, 0.8, 0.8, 1.0, 0.8, 1.0, 1.0, 0.7]
    weights = [1.0, 1.0, 1.0, 5.0, 5.0, 6.0, 2.0, 2.0, 3.0]
    got = _row_medians(rows, values, weights, 5)
    # Row 0: the middle value; row 1: a tie at exactly half goes to the lower value;
    # row 2: weight, not count, decides; row 3: one key; row 4: no entry at all.
    assert got[:4] == [0.9, 0.8, 0.8, 0.7]
    assert math.isnan(got[4])


def test_row_medians_leave_out_missing_values_and_weights() -> None:
    rows = [0, 0, 0, 1, 1, 2]
    values = [math.nan, 0.7, 1.0, 0.7, 1.0, 0.6]
    weights = [9.0, 1.0, 3.0, 0.0, math.nan, math.inf]
    got = _row_medians(rows, values, weights, 3)
    assert got[0] == 1.0
    assert math.isnan(got[1]) and math.isnan(got[2])


@pytest.mark.parametrize("seed", range(12))
def test_row_medians_agree_with_the_plain_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_rows = int(rng.integers(1, 9))
    size = int(rng.integers(1, 60))
    rows = np.sort(rng.integers(0, n_rows, size)) if seed % 2 else rng.integers(0, n_rows, size)
    # Few distinct values and whole weights: ties in value and at exactly half.
    values = rng.choice([0.6, 0.8, 0.9, 1.0, math.nan], size)
    weights = rng.choice([0.0, 1.0, 2.0, 3.0, math.nan], size)
    got = weighted_row_median(rows, values, weights, n_rows).tolist()
    want = [
        plain_median(rows.tolist(), values.tolist(), weights.tolist(), r) for r in range(n_rows)
    ]
    assert all(_same(a, b) for a, b in zip(got, want, strict=True)), (got, want)


def _payloads(times: np.ndarray, totals: np.ndarray) -> list[RankPayload]:
    """One payload per row; NaN marks a kernel the rank did not run."""
    out = []
    for r in range(times.shape[0]):
        ran = np.isfinite(times[r])
        ids = np.arange(1, times.shape[1] + 1, dtype=np.uint64)[ran]
        empty = RankPayload.empty(RankInfo(rank=r, node=f"n{r // 8}"))
        out.append(
            replace(
                empty,
                kernel_ids=ids,
                kernel_median_ns=times[r, ran],
                kernel_total_ns=totals[r, ran],
            )
        )
    return out


def _definition(times: np.ndarray, totals: np.ndarray) -> list[float]:
    """Each rank's weighted median of ``best of the key / its time``, keys only one
    rank ran left out (several ranks report kernels): the per-entry scores
    ``gpu_relative_scores`` averages, by hand."""
    ran = np.isfinite(times) & (times > 0)
    best = [
        min(times[ran[:, k], k]) if ran[:, k].any() else math.nan for k in range(times.shape[1])
    ]
    support = ran.sum(axis=0)
    several = int(ran.any(axis=1).sum()) > 1
    out = []
    for r in range(times.shape[0]):
        vals, ws = [], []
        for k in range(times.shape[1]):
            if ran[r, k] and (support[k] >= 2 or not several):
                vals.append(best[k] / times[r, k])
                ws.append(float(totals[r, k]))
        out.append(weighted_median(vals, ws))
    return out


@pytest.mark.parametrize(("ranks", "keys"), [(3, 5), (12, 40), (1, 4), (5, 1)])
def test_both_scoring_paths_give_the_definition(ranks: int, keys: int) -> None:
    rng = np.random.default_rng(ranks * 100 + keys)
    times = rng.choice([1.0, 1.0, 1.1, 1.25, 2.0], (ranks, keys)) * 1e5
    if ranks * keys > 4:
        times[rng.random((ranks, keys)) < 0.15] = math.nan  # kernels some rank did not run
    totals = times * rng.choice([1.0, 2.0, 10.0], (ranks, keys))
    want = _definition(times, totals)
    payloads = _payloads(times, totals)
    for path in ("few", "vectorised"):
        got = score_payloads(payloads, {}, relative=True, individual=False, path=path)
        assert set(got.gpu_relative_median) == {r for r, v in enumerate(want) if math.isfinite(v)}
        for r, v in got.gpu_relative_median.items():
            assert v == want[r], (path, r)


def test_data_skew_on_a_minority_of_the_time_leaves_the_median_at_the_peers() -> None:
    # Rank 1 has 15 % more work in a third of the kernel time; rank 2's GPU is 10 % slow.
    base = np.array([[4.0, 3.0, 2.0, 1.0, 1.0]] * 6) * 1e5
    times = base.copy()
    times[1, 1] *= 1.15
    times[1, 3] *= 1.15
    times[2] *= 1.1
    rows = np.repeat(np.arange(6, dtype=np.int64), 5)
    cols = np.tile(np.arange(5, dtype=np.int64), 6)
    flat = times.ravel()
    mean = gpu_relative_scores(rows, cols, flat, flat, 6, 5)
    median = gpu_relative_medians(rows, cols, flat, flat, 6, 5)
    assert mean[1] < 0.95 and median[1] == 1.0
    assert mean[2] == pytest.approx(1 / 1.1) and median[2] == pytest.approx(1 / 1.1)


def _report(medians: dict[int, float]) -> ScoreReport:
    ranks = [
        RankScores(rank=r, node="n0", gpu_relative=rel, gpu_individual=1.0,
                   gpu_relative_median=medians.get(r))
        for r, rel in ((0, 1.0), (1, 0.8))
    ]  # fmt: skip
    return ScoreReport.build(job=JOB, sequence=1, generated_at=NOW, window_s=60.0, ranks=ranks)


def test_the_median_travels_in_the_score_report_and_reads_back() -> None:
    report = _report({1: 0.99})
    wire = report.to_wire()
    assert wire["schemaVersion"] == SCHEMA_VERSION >= 7
    assert "gpuRelativeMedian" not in wire["ranks"][0]  # not measured: absent
    assert wire["ranks"][1]["gpuRelativeMedian"] == 0.99
    back = ScoreReport.from_wire(report.to_json())
    assert back.ranks[1].gpu_relative_median == 0.99
    # Not a worst score: the peer check reads it, notices do not.
    assert back.ranks[1].worst_score() == 0.8
    assert back.summary.peers[0].spreads["gpuRelativeMedian"].median == 0.99


def test_older_reports_read_without_it_and_a_bad_one_is_refused() -> None:
    wire = _report({}).to_wire()
    assert "gpuRelativeMedian" not in wire["ranks"][1]
    old = {**wire, "schemaVersion": 6}
    assert ScoreReport.from_wire(old).ranks[1].gpu_relative_median is None
    wire["ranks"][1]["gpuRelativeMedian"] = -0.5
    with pytest.raises(ReportRejected, match=r"ranks\.1\.gpuRelativeMedian"):
        ScoreReport.from_wire(wire)


def _kernel_peer(rank: int, slow: float) -> RankPayload:
    empty = RankPayload.empty(RankInfo(rank=rank, node=f"n{rank}"))
    times = np.array([3e5, 1e5 * slow])  # the second kernel follows the data
    return replace(
        empty,
        kernel_ids=np.array([11, 12], dtype=np.uint64),
        kernel_median_ns=times,
        kernel_total_ns=times * 10,
        gpu_individual=1.0,
    )


def test_the_report_cycle_carries_the_median_into_the_score_report() -> None:
    run = make_run(True)
    in_world(run, [], with_own=False)
    peers = [_kernel_peer(0, 1.0), _kernel_peer(1, 1.3), _kernel_peer(2, 1.0)]
    run.group.collective = lambda *_: [*peers, RankPayload.empty(RankInfo(rank=3, node="n3"))]  # type: ignore[method-assign]
    out: Any = generate(run)
    assert out is not None
    sr = out[1]()
    assert sr is not None
    by_rank = {r.rank: r for r in sr.ranks}
    assert by_rank[1].gpu_relative is not None and by_rank[1].gpu_relative < 0.95
    assert by_rank[1].gpu_relative_median == 1.0
    assert by_rank[3].gpu_relative_median is None  # no kernel timed


def test_the_simulator_reports_it_from_the_detectors_scoring() -> None:
    slow = Fault(FaultKind.SLOW_GPU, (5,), 180.0, 0.25)
    sim = JobSimulator(16, params=ModelParams(kernels=16), faults=(slow,), seed=1)
    scoring = RealScoring(sim.layout)
    after = [scoring.report(w) for w in sim.windows(5)][4].ranks
    assert after[5].gpu_relative_median is not None
    # A slow GPU slows every kernel: its median falls as its mean does, below every
    # healthy GPU's (against the fastest rank, the healthy spread is 0.85-1.0).
    medians = {r.rank: r.gpu_relative_median for r in after}
    assert all(m is not None for m in medians.values())
    assert after[5].gpu_relative_median < 0.75 < min(m for r, m in medians.items() if r != 5)  # type: ignore[operator,type-var]
