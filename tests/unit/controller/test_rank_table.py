"""Inside one decision (``rank_table.reading``) each column is read once: what it
gives equals a plain read of each rank, also when some rank's attribute dictionary is
not laid out as pydantic lays it out (a read by position would go wrong there), and
what it keeps cannot be changed by a caller."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.node_digests import NodeDigest, NodeDigests
from pacekeeper.controller.core.rank_table import reading, table
from pacekeeper.detector.score_report import RankScores


def _ranks() -> list[RankScores]:
    return [
        RankScores(
            rank=i,
            node=f"n{i // 2}",
            gpu_relative=None if i == 3 else 1.0 - i / 10,
            kernel_samples=10 * i,
            wait_share=0.2 if i == 4 else None,
        )
        for i in range(6)
    ]


def _plain(ranks: list[RankScores]) -> tuple[list[float], list[int], list[str]]:
    gpu = [math.nan if r.gpu_relative is None else r.gpu_relative for r in ranks]
    return gpu, [r.kernel_samples for r in ranks], [r.node for r in ranks]


@pytest.mark.parametrize("odd", ["none", "missing field", "extra key"])
def test_columns_in_a_scope_equal_a_plain_read(odd: str) -> None:
    ranks = _ranks()
    if odd == "missing field":
        # ``model_construct`` leaves a field it is not given out of ``__dict__``; given
        # it later, it is last there: the same keys in another order.
        ranks[2] = RankScores.model_construct(
            node="n1", gpu_relative=0.55, kernel_samples=7, section_relative={}
        )
        object.__setattr__(ranks[2], "rank", 2)  # now last in ``__dict__``
    if odd == "extra key":
        object.__setattr__(ranks[1], "note", "x")
    gpu, samples, nodes = _plain(ranks)
    with reading():
        np.testing.assert_array_equal(rank_columns.floats(ranks, "gpu_relative"), gpu)
        assert rank_columns.ints(ranks, "kernel_samples").tolist() == samples
        assert table(ranks).column("node") == nodes
        assert rank_columns.numbers(ranks).tolist() == list(range(6))
        assert rank_columns.any_given(ranks, "wait_share")
        assert not rank_columns.any_true(ranks, "coords")
        code, index = rank_columns.node_codes(ranks)
        assert list(index) == list(dict.fromkeys(nodes))
        assert [list(index)[c] for c in code.tolist()] == nodes


def test_a_kept_column_is_read_once_and_read_only() -> None:
    ranks = _ranks()
    with reading():
        a = rank_columns.floats(ranks, "gpu_relative")
        assert rank_columns.floats(ranks, "gpu_relative") is a
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 0.0
    assert rank_columns.floats(ranks, "gpu_relative") is not a  # nothing kept past it


def test_node_digests_are_made_when_asked_and_kept() -> None:
    nodes = NodeDigests({"a": 0, "b": 1}, [2, 3], [2, 1], [0.5, math.inf], {0: [1]})
    assert list(nodes) == ["a", "b"] and len(nodes) == 2
    assert nodes["a"] == NodeDigest(2, 2, 0, [1], 0.5)
    assert nodes["b"] == NodeDigest(3, 1, 2, [], math.inf)
    assert nodes.get("c") is None and "c" not in nodes
    nodes["a"].measured += 1  # a bounded report folds its unlisted ranks in
    nodes["c"] = NodeDigest()
    assert nodes["a"].measured == 3 and list(nodes) == ["a", "b", "c"] and len(nodes) == 3
