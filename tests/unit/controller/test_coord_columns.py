"""Coordinates read as columns (issue 42) decide what a rank at a time decides: the
peer groups of ``peer_stats.Groups`` equal ``peer_key`` per rank, and
``structure.align`` finds the same alignment as its per-rank path, on layouts of
several shapes, slow sets and unmeasured ranks."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

import numpy as np
import pytest

from pacekeeper.controller.core import rank_columns, structure
from pacekeeper.controller.core.peer_stats import Groups
from pacekeeper.controller.core.rank_table import reading
from pacekeeper.detector.score_report import (
    JobIdentity,
    Platform,
    RankScores,
    ScoreReport,
    peer_key,
)

SHAPES = [
    {"dp": 4, "pp": 2, "tp": 2},
    {"pp": 4, "tp": 4},
    {"dp": 2, "cp": 2, "tp": 4},
    {"pp": 8},
    {"dp": 8},
    {"dp": 2, "pp": 2, "stage": 2, "tp": 2},
]


def _report(shape: dict[str, int], per_node: int, order: list[str]) -> ScoreReport:
    sizes = [shape[d] for d in order]
    ranks = []
    for r, values in enumerate(itertools.product(*(range(s) for s in sizes))):
        coords = dict(zip(order, values, strict=True))
        ranks.append(RankScores(rank=r, node=f"n{r // per_node}", coords=coords, gpu_relative=1.0))
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="j"),
        sequence=1,
        generated_at=datetime(2026, 1, 1, tzinfo=UTC),
        window_s=60.0,
        ranks=ranks,
    )


def _slow_sets(report: ScoreReport, rng: random.Random) -> list[set[int]]:
    ranks = report.ranks
    n = len(ranks)
    sets: list[set[int]] = [set(range(n)), set(rng.sample(range(n), min(n, 3)))]
    for dim in ranks[0].coords or {}:
        value = rng.choice([r.coords[dim] for r in ranks if r.coords])
        sets.append({r.rank for r in ranks if r.coords and r.coords[dim] == value})
        fixed = {k: v for k, v in (ranks[rng.randrange(n)].coords or {}).items() if k != dim}
        group = {
            r.rank for r in ranks if r.coords and all(r.coords[k] == v for k, v in fixed.items())
        }
        sets.append(group)
        sets.append(group | {rng.randrange(n)})
    sets.append({r.rank for r in ranks if r.node == ranks[0].node})
    return sets


def _plain_groups(ranks: list[RankScores]) -> tuple[list[str], list[list[int]]]:
    index: dict[str, list[int]] = {}
    for i, r in enumerate(ranks):
        index.setdefault(peer_key(r), []).append(i)
    return list(index), list(index.values())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("per_node", [1, 2, 4, 8])
def test_columns_decide_as_a_rank_at_a_time(
    shape: dict[str, int], per_node: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(len(shape) * 100 + per_node)
    order = list(shape)
    rng.shuffle(order)  # which dimension is innermost
    report = _report(shape, per_node, order)
    ranks = report.ranks
    n = len(ranks)
    with reading():
        assert rank_columns.coord_block(ranks) is not None
        g = Groups._of(ranks)
    keys, members = _plain_groups(list(ranks))
    assert g.keys == keys
    assert [m.tolist() for m in g.members] == members
    assert all(m.dtype == np.int64 for m in g.members)
    for slow in _slow_sets(report, rng):
        for measured in (set(range(n)), set(range(n)) - set(rng.sample(range(n), n // 5))):
            below = slow & measured
            with reading():
                fast = structure.align(report, below, measured)
            with monkeypatch.context() as m, reading():
                m.setattr(rank_columns, "coord_block", lambda _ranks: None)
                plain = structure.align(report, below, measured)
            assert fast == plain, (order, sorted(below))


def test_mixed_coordinates_take_the_rank_at_a_time_path() -> None:
    ranks = [
        RankScores(rank=0, node="a", coords={"pp": 0, "tp": 0}),
        RankScores(rank=1, node="a", coords={"pp": 1, "tp": 0}),
        RankScores(rank=2, node="b", coords={"pp": 0, "dp": 0}),
        RankScores(rank=3, node="b", coords=None),
    ]
    with reading():
        assert rank_columns.coord_block(ranks) is None
        g = Groups._of(ranks)
    keys, members = _plain_groups(ranks)
    assert g.keys == keys
    assert [m.tolist() for m in g.members] == members


@pytest.mark.parametrize("high", [3, 1000, 2**40])
def test_first_seen_numbers_rows_in_the_order_they_first_occur(high: int) -> None:
    rng = np.random.default_rng(high % 97)
    block = rng.integers(0, high, size=(200, 3), dtype=np.int64)
    block[50:] = block[rng.integers(0, 50, size=150)]  # repeats
    code, first = rank_columns.first_seen(block)
    seen: dict[tuple[int, ...], int] = {}
    for row in map(tuple, block.tolist()):
        seen.setdefault(row, len(seen))
    assert code.tolist() == [seen[tuple(r)] for r in block.tolist()]
    assert first == [
        next(i for i, r in enumerate(block.tolist()) if tuple(r) == row) for row in seen
    ]
