"""The object-array columns of ``rank_table`` (issue 42) read what a plain loop over the
ranks reads: node numbers when a node's ranks do not come together, section blocks
whose mappings have as many keys as the first but other names, and nothing of the
row pass is left for the garbage collector to walk."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.rank_table import ROW_FIELDS, reading, table
from pacekeeper.detector.score_report import RankScores


def _rank(i: int, node: str, sections: dict[str, float | None]) -> RankScores:
    return RankScores(rank=i, node=node, gpu_relative=1.0 - i / 100, section_relative=sections)


@pytest.mark.parametrize(
    "nodes",
    [
        ["a", "a", "b", "b", "c", "c"],
        ["a", "b", "a", "c", "b", "a"],
        ["x"],
        ["b", "a", "a", "b", "b", "c", "a"],
    ],
)
def test_node_numbers_follow_the_first_naming_when_ranks_interleave(nodes: list[str]) -> None:
    ranks = [_rank(i, n, {}) for i, n in enumerate(nodes)]
    with reading():
        code, index = rank_columns.node_codes(ranks)
    assert list(index) == list(dict.fromkeys(nodes))
    assert list(index.values()) == list(range(len(index)))
    assert [list(index)[c] for c in code.tolist()] == nodes


def test_no_ranks_have_no_nodes() -> None:
    with reading():
        code, index = rank_columns.node_codes([])
    assert code.tolist() == [] and index == {}


@pytest.mark.parametrize(
    "layout",
    [
        lambda i: {"a": 0.5, "b": 0.6 + i / 100},
        lambda i: {"b": 0.6, "a": None if i == 2 else 0.5},
        lambda i: {"a": 0.5, "b": 0.6} if i % 2 else {"a": 0.5, "c": 0.7},  # same length
        lambda i: {"a": 0.5} if i else {"a": 0.5, "b": 0.6},
        lambda i: {"only": 0.9 - i / 100},
        lambda i: {} if i else {"a": 0.4},
    ],
)
def test_section_block_equals_a_plain_read(layout: object) -> None:
    ranks = [_rank(i, "n", layout(i)) for i in range(5)]  # type: ignore[operator]
    names = sorted({k for r in ranks for k in r.section_relative})
    want = [
        [math.nan if r.section_relative.get(k) is None else r.section_relative[k] for k in names]
        for r in ranks
    ]
    with reading():
        got_names, block = rank_columns.section_block(ranks, "section_relative")
    assert got_names == names
    np.testing.assert_array_equal(block, np.array(want, dtype=np.float64).reshape(5, len(names)))


def test_object_columns_are_read_only_views_the_collector_does_not_track() -> None:
    ranks = [_rank(i, f"n{i // 2}", {"s": 0.5}) for i in range(6)]
    with reading():
        t = table(ranks)
        for name in ROW_FIELDS:
            col = t.objects(name)
            assert col.tolist() == [getattr(r, name) for r in ranks]
            assert not col.flags.writeable
            assert not gc.is_tracked(col)
        assert t.column("node") == [r.node for r in ranks]
        assert rank_columns.floats(ranks, "gpu_relative").tolist() == [
            r.gpu_relative for r in ranks
        ]
