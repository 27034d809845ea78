"""The whole-column readers of ``rank_columns`` give what a plain loop over the ranks
gives: with sections in the same order on every rank (the fast path), in another order
on some, missing on some, and None (not measured) as NaN."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.controller.core.rank_columns import aligned, floats, section_block
from pacekeeper.detector.score_report import RankScores


def _plain(ranks: list[RankScores], field: str) -> tuple[list[str], list[list[float]]]:
    names = sorted({name for r in ranks for name in getattr(r, field)})
    rows = []
    for r in ranks:
        d = getattr(r, field)
        rows.append([math.nan if d.get(n) is None else float(d[n]) for n in names])
    return names, rows


def _rank(i: int, sections: dict[str, float | None]) -> RankScores:
    return RankScores(
        rank=i,
        node="n",
        gpu_relative=None if i % 5 == 0 else 1.0 - i / 100,
        section_relative=sections,
    )


LAYOUTS = {
    "same order": lambda i: {"step": 1.0 - i / 50, "fwd": 0.9, "bwd": None if i == 3 else 0.8},
    "sorted already": lambda i: {"a": 0.5, "b": 1.0 - i / 50},
    "order differs": lambda i: {"fwd": 0.9, "step": 0.7} if i % 2 else {"step": 0.7, "fwd": 0.9},
    "missing on some": lambda i: {"step": 0.6} if i % 3 else {"step": 0.6, "opt": 0.4},
    "none at all": lambda i: {},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_section_block_equals_a_plain_loop(layout: str) -> None:
    ranks = [_rank(i, LAYOUTS[layout](i)) for i in range(12)]
    names, block = section_block(ranks, "section_relative")
    want_names, want = _plain(ranks, "section_relative")
    assert names == want_names
    assert block.shape == (12, len(names))
    np.testing.assert_array_equal(block, np.array(want, dtype=np.float64).reshape(12, -1))


def test_floats_turn_none_into_nan() -> None:
    ranks = [_rank(i, {}) for i in range(6)]
    want = [math.nan if r.gpu_relative is None else r.gpu_relative for r in ranks]
    np.testing.assert_array_equal(floats(ranks, "gpu_relative"), np.array(want))


def test_aligned_fills_absent_names_with_nan() -> None:
    block = np.array([[1.0, 2.0], [3.0, 4.0]])
    out = aligned(["a", "c"], block, ["a", "b", "c"])
    np.testing.assert_array_equal(out, np.array([[1.0, np.nan, 2.0], [3.0, np.nan, 4.0]]))
