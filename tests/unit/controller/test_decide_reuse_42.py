"""The decision path's shortcuts at 131,072 ranks (issue 42) give what the long way gives:
one peer group's references as a broadcast row (``peer_stats``), the pattern's scores as
columns (``structure_pattern.Scored``), the best alignment (``structure._best``), the
slow GPUs found once per report (``breadth.gpu_slow``), a section block whose mappings
hold more names than the first, and ``align`` asking for the measured ranks only when a
report carries coordinates."""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Collection
from datetime import UTC, datetime

import numpy as np
import pytest

from pacekeeper.controller.core import (
    breadth,
    peer_stats,
    rank_columns,
    structure,
    structure_pattern,
)
from pacekeeper.controller.core.peer_stats import LOO_MAX_GROUP, Groups, against, shared_row
from pacekeeper.controller.core.rank_table import reading
from pacekeeper.controller.core.structure import Alignment
from pacekeeper.controller.core.structure_pattern import Layout, Pattern, Scored
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _matrix(rng: np.random.Generator, n: int, cols: int, nan: float) -> np.ndarray:
    raw = rng.uniform(0.5, 1.0, size=(n, cols))
    raw[rng.random((n, cols)) < nan] = np.nan
    if cols > 1:
        raw[:, -1] = np.nan  # a column nobody measured
        raw[rng.integers(n), -1] = 0.7  # ... but one rank: still no peer median
    return raw


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("nan", [0.0, 0.2])
def test_one_group_references_equal_the_general_path(
    seed: int, nan: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(LOO_MAX_GROUP + 1, 400))
    raw = _matrix(rng, n, int(rng.integers(1, 5)), nan)
    raw.flags.writeable = False  # a table's column: never written
    groups = Groups([""], [np.arange(n, dtype=np.int64)])
    ref, mad = groups.references(raw)
    assert ref.strides[0] == 0 and not ref.flags.writeable  # one row, broadcast
    monkeypatch.setattr(Groups, "_whole", lambda self, raw, summaries: None)
    ref_long, mad_long = groups.references(raw)
    np.testing.assert_array_equal(ref, ref_long)
    np.testing.assert_array_equal(mad, mad_long)
    for k in (None, 3.0):
        np.testing.assert_array_equal(
            against(raw, ref, mad, 0.9, k), against(raw, ref_long, mad_long, 0.9, k)
        )


def test_small_or_several_groups_take_the_general_path() -> None:
    rng = np.random.default_rng(1)
    raw = _matrix(rng, LOO_MAX_GROUP, 2, 0.0)
    ref, _ = Groups([""], [np.arange(LOO_MAX_GROUP, dtype=np.int64)]).references(raw)
    assert ref.strides[0] != 0  # leave-one-out: each rank its own reference
    halves = Groups(["a", "b"], [np.arange(0, 100), np.arange(100, 200)])
    ref, _ = halves.references(_matrix(rng, 200, 2, 0.0))
    assert ref.flags.writeable and not np.array_equal(ref[0], ref[150])


def test_shared_row_only_for_rows_broadcast() -> None:
    row = np.array([[1.0, 2.0]])
    wide = np.broadcast_to(row, (5, 2))
    assert shared_row(wide).shape == (1, 2)
    full = np.ones((5, 2))
    assert shared_row(full) is full
    column = np.broadcast_to(np.ones((5, 1)), (5, 3))  # columns shared, not rows
    assert shared_row(column) is column


def _dict_scored(numbers: list[int], values: list[float]) -> dict[int, float]:
    """What ``Digest.judged_scores`` gives: rank -> score, NaN left out."""
    return {r: v for r, v in zip(numbers, values, strict=True) if not math.isnan(v)}


@pytest.mark.parametrize("seed", range(20))
def test_scored_columns_hold_what_the_dict_holds(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(0, 40)
    numbers = [rng.randint(0, 30) for _ in range(n)]  # unsorted, some twice
    values = [float("nan") if rng.random() < 0.2 else rng.random() for _ in range(n)]
    s = Scored.of(np.asarray(numbers, dtype=np.int64), np.asarray(values, dtype=np.float64))
    want = _dict_scored(numbers, values)
    assert s.ranks.tolist() == sorted(want)
    assert s.values.tolist() == [want[r] for r in sorted(want)]
    d = Scored.of_dict(want)
    assert d.ranks.tolist() == s.ranks.tolist() and d.values.tolist() == s.values.tolist()
    assert len(s) == len(want)


def _explain_dict(
    layout: Layout | None, below: Collection[int], values: dict[int, float], act: float
) -> structure_pattern.PatternMatch | None:
    """``explain`` as it read a rank -> score dict before the columns (the oracle)."""
    if layout is None or layout.pattern is None or not below:
        return None
    arr = np.sort(np.fromiter(values, np.int64, len(values)))
    members = arr[layout.pattern.members(arr)].tolist() if arr.size else []
    if len(members) < 2:
        return None
    tol = structure_pattern.tolerance(act)
    scores = np.array([values[r] for r in members])
    if len(members) > structure_pattern.LOO_MAX_MEMBERS:
        mates = np.full(len(members), float(np.median(scores)))
    else:
        mates = np.array([np.median(np.delete(scores, i)) for i in range(len(members))])
    in_line = [r for r, v, m in zip(members, scores, mates, strict=True) if v >= m * tol]
    if not in_line:
        return None
    median = float(np.median([values[r] for r in in_line]))
    level = layout.level()
    if level is not None and median < level * tol:
        return None
    held = frozenset(in_line).intersection(below)
    return structure_pattern.PatternMatch(layout, held, median) if held else None


@pytest.mark.parametrize("seed", range(30))
def test_explain_and_learn_on_columns_equal_the_dict_reading(seed: int) -> None:
    rng = random.Random(seed)
    world = rng.choice([16, 64, 96])
    block = rng.choice([d for d in (1, 2, 4, 8) if world % d == 0])
    period = rng.choice([p for p in (2, 4) if world % (block * p) == 0])
    pattern = Pattern(block, period, rng.randrange(period))
    values: dict[int, float] = {}
    for r in range(world):
        if rng.random() < 0.1:
            continue  # unmeasured
        slow = pattern.members(np.array([r]))[0]
        values[r] = rng.uniform(0.6, 0.8) if slow else rng.uniform(0.9, 1.0)
        if rng.random() < 0.05:
            values[r] *= 0.5  # slowed on its own
    below = {r for r, v in values.items() if v < 0.85}
    levels = tuple(rng.uniform(0.6, 0.8) for _ in range(rng.randint(0, 3)))
    layout = Layout(world, 3, (), pattern, levels)
    scored = Scored.of_dict(values)
    assert structure_pattern.explain(layout, below, scored, 0.85) == _explain_dict(
        layout, below, values, 0.85
    )
    learned = structure_pattern.learn(None, world, below, scored)
    fit = structure_pattern.fit(sorted(below), set(values), world)
    assert learned.pattern == fit
    if fit is not None:
        inside = [values[r] for r in sorted(values) if fit.members(np.array([r]))[0]]
        assert learned.levels == ((float(np.median(inside)),) if inside else ())


def _found(dim: str, kind: structure.Kind, ranks: int, cells: int) -> Alignment:
    return Alignment(dim, kind, tuple(f"c{i}" for i in range(cells)), frozenset(range(ranks)))


def test_best_alignment_covers_most_then_fewest_cells_then_slices_then_name() -> None:
    best = structure._best
    assert best([None, None]) is None
    most = _found("tp", "groups", 8, 4)
    assert best([_found("pp", "slice", 4, 1), None, most]) is most
    fewest = _found("tp", "groups", 8, 2)
    assert best([most, fewest]) is fewest
    piece = _found("tp", "slice", 8, 2)
    assert best([fewest, piece]) is piece
    first = _found("dp", "slice", 8, 2)
    assert best([piece, first]) is first
    again = _found("dp", "slice", 8, 2)
    assert best([first, again]) is first  # the first of equals


def _ranks(n: int, slow: dict[int, float]) -> list[RankScores]:
    return [
        RankScores(rank=r, node=f"n{r // 4}", gpu_individual=slow.get(r, 1.0 - r / 1000))
        for r in range(n)
    ]


def _report(ranks: list[RankScores]) -> ScoreReport:
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm"),
        sequence=1,
        generated_at=T0,
        window_s=60.0,
        ranks=ranks,
    )


def test_gpu_slow_found_once_per_report_and_act() -> None:
    report = _report(_ranks(16, {3: 0.5, 9: 0.7}))
    alone = breadth.gpu_slow(report, 0.9)
    assert alone == [3, 9]
    with reading():
        first = breadth.gpu_slow(report, 0.9)
        first.append(99)  # the caller's own list
        assert breadth.gpu_slow(report, 0.9) == [3, 9]
        assert breadth.gpu_slow(report, 0.6) == [3]


def test_section_block_reads_mappings_with_more_names_than_the_first() -> None:
    layout = [{"a": 0.5, "b": 0.6}, {"a": 0.4, "b": 0.3, "c": 0.2}, {"b": 0.1, "a": 0.9}]
    ranks = [RankScores(rank=i, node="n", section_relative=s) for i, s in enumerate(layout)]
    with reading():
        names, block = rank_columns.section_block(ranks, "section_relative")
    assert names == ["a", "b", "c"]
    want = [[s.get(k, np.nan) for k in names] for s in layout]
    np.testing.assert_array_equal(block, np.array(want))


def test_align_asks_for_the_measured_ranks_only_with_coordinates() -> None:
    asked: list[int] = []

    def measured() -> set[int]:
        asked.append(1)
        return set(range(8))

    plain = _report(_ranks(8, {}))
    assert structure.align(plain, {0, 1}, measured) is None
    assert asked == []
    coords = [
        RankScores(rank=r, node=f"n{r % 4}", gpu_relative=0.5, coords={"pp": r // 4, "tp": r % 4})
        for r in range(8)
    ]
    found = structure.align(_report(coords), {0, 1, 2, 3}, measured)
    assert asked == [1]
    assert found is not None and found.ranks == frozenset({0, 1, 2, 3})
    assert found == structure.align(_report(coords), {0, 1, 2, 3}, set(range(8)))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("nan", [0.0, 0.3])
def test_whole_group_medians_equal_a_plain_median_and_leave_a_column_alone(
    seed: int, nan: float
) -> None:
    rng = np.random.default_rng(seed)
    sub = _matrix(rng, int(rng.integers(40, 300)), int(rng.integers(1, 4)), nan)[None]
    kept = sub.copy()
    med, dev = peer_stats._whole_group(sub, fresh=False)
    np.testing.assert_array_equal(sub, kept)  # not the caller's to reorder
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = np.nanmedian(kept, axis=1)
        want_dev = np.nanmedian(np.abs(kept - want[:, None, :]), axis=1)
    enough = np.count_nonzero(np.isfinite(kept), axis=1) >= 2
    np.testing.assert_array_equal(med[:, 0, :], np.where(enough, want, np.nan))
    np.testing.assert_array_equal(dev[:, 0, :], want_dev)
