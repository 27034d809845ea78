"""The one-pass read of ``rank_table.ROW_FIELDS`` gives what single attribute reads
give: for validated ranks, for ranks whose ``__dict__`` misses a field (the table then
reads attributes, a field at a time), and a float column or section block with a None
(not measured) as NaN."""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any, cast

import numpy as np

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.rank_table import ROW_FIELDS, reading, table
from pacekeeper.detector.score_report import RankScores


def _ranks() -> list[RankScores]:
    return [
        RankScores(
            rank=i,
            node=f"n{i // 2}",
            gpu_relative=None if i == 1 else 0.9,
            gpu_individual=0.8,
            section_relative={"step": 0.7, "fwd": None if i == 2 else 0.6},
            group="g" if i == 3 else None,
        )
        for i in range(5)
    ]


class _Slotted:
    """A rank without a ``__dict__``: its fields are read as attributes."""

    __slots__ = ROW_FIELDS

    def __init__(self, r: RankScores) -> None:
        for name in ROW_FIELDS:
            setattr(self, name, getattr(r, name))


def test_every_row_field_reads_as_its_attribute() -> None:
    ranks = _ranks()
    slotted = cast(list[RankScores], [_Slotted(r) for r in ranks])
    with reading():
        for name in ROW_FIELDS:
            want = list(map(attrgetter(name), ranks))
            assert table(ranks).column(name) == want
            assert table(slotted).column(name) == want


def test_a_none_reads_as_nan() -> None:
    ranks = _ranks()
    with reading():
        gpu = rank_columns.floats(ranks, "gpu_relative")
        names, block = rank_columns.section_block(ranks, "section_relative")
    assert math.isnan(gpu[1])
    assert gpu[[0, 2, 3, 4]].tolist() == [0.9] * 4
    assert names == ["fwd", "step"]
    want: list[Any] = [[0.6, 0.7], [0.6, 0.7], [math.nan, 0.7], [0.6, 0.7], [0.6, 0.7]]
    np.testing.assert_array_equal(block, np.array(want))
