"""The whole-column forms of the decision's hot path read what the per-rank forms read:
the host-side section table (every layout of the ranks' mappings) and the judged scores
by rank (issue 42: a 131,072-rank report)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np

from pacekeeper.controller.core import host_side
from pacekeeper.controller.core.attribution import digest
from pacekeeper.controller.core.policy import parse_policy_document
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport


def _rank(r: int, sections: dict[str, float | None], gpu: float | None = 1.0) -> RankScores:
    return RankScores(
        rank=r, node=f"n{r // 2}", gpu_relative=gpu, section_relative=sections, kernel_samples=9
    )


def _per_rank(ranks: list[RankScores]) -> tuple[list[str], list[list[float]]]:
    names = sorted({s for r in ranks for s in r.section_relative})
    rows = [[r.section_relative.get(s) for s in names] for r in ranks]
    return names, [[math.nan if v is None else v for v in row] for row in rows]


def _same(got: tuple[list[str], np.ndarray], want: tuple[list[str], list[list[float]]]) -> None:
    assert got[0] == want[0]
    assert got[1].shape == (len(want[1]), len(want[0]))
    np.testing.assert_array_equal(got[1], np.array(want[1], dtype=np.float64).reshape(got[1].shape))


def test_the_section_table_reads_every_layout_of_the_ranks_mappings() -> None:
    layouts = [
        [_rank(0, {"b": 0.5, "a": 0.9}), _rank(1, {"b": 0.7, "a": 0.8})],  # one shape, unsorted
        [_rank(0, {"a": 0.5, "b": 0.9}), _rank(1, {"b": 0.7, "a": 0.8})],  # orders differ
        [_rank(0, {"a": 0.5}), _rank(1, {"b": 0.7}), _rank(2, {})],  # sections missing
        [_rank(0, {"a": None, "b": 0.2}), _rank(1, {"a": 0.3, "b": None})],  # None values
        [],
    ]
    for ranks in layouts:
        _same(host_side._sections(ranks), _per_rank(ranks))


def test_the_judged_scores_are_the_usable_ranks_scores_by_rank_number() -> None:
    rows = [_rank(r, {}, gpu=None if r == 3 else 0.5 + r / 100) for r in (7, 2, 9, 3, 5)]
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="j"),
        sequence=1,
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        window_s=60.0,
        ranks=rows,
        world_size=10,
    )
    doc = parse_policy_document(
        {"mode": "enforce", "defaultPolicy": "p", "policies": {"p": {}}}, "t"
    )
    d = digest(report, doc.policies["p"])
    assert d.values is not None
    want = {
        report.ranks[i].rank: float(d.values[i])
        for i in range(len(report.ranks))
        if not math.isnan(d.values[i])
    }
    assert d.judged_scores() == want and 3 not in want and len(want) == 4
    assert list(d.judged_scores()) == list(want)
