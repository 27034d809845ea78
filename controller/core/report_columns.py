"""A report's columns, read once where the report is parsed, not in every decision.

At 131,072 ranks reading the rank objects was most of a decision: the one row pass
over 131,072 pydantic ``RankScores`` (~55 ms on the 2-core VM), the two section blocks
(~26 ms each), the casts and the node numbers (~20 ms), then freeing it all (~7 ms),
each time a report was decided (docs/performance.md). ``columnar`` does those reads
once, where the shell has just parsed and placed the report, and hands them on with the
ranks (``rank_table.ColumnarRanks``): a decision's ``RankTable`` starts from them.

The columns are the same functions' results on the same objects, so every decision is
the one a plain report gets. Pure: no clock, no I/O; the shell calls it.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import numpy as np

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.peer_stats import Groups
from pacekeeper.controller.core.rank_table import ColumnarRanks, Parsed, reading, table
from pacekeeper.detector.score_report import ScoreReport

FLOAT_FIELDS = (
    "gpu_relative",
    "gpu_individual",
    "gpu_individual_median",
    "gpu_relative_median",
    "gpu_individual_fast",
    "wait_share",
)
"""Read as floats by the peer check, the breadth and partial-slowdown tests."""

GIVEN_FIELDS = (*FLOAT_FIELDS, "group")
TRUE_FIELDS = ("coords", "gpu_uuid")
SECTION_FIELDS = ("section_relative", "section_individual")
SAMPLE_SUMS = (("kernel_samples",), ("section_samples",), ("kernel_samples", "section_samples"))
"""The sample counts a score kind is built from (``attribution._SAMPLES``' values)."""


def columnar(report: ScoreReport) -> ScoreReport:
    """``report`` with ranks that carry their columns (the same rank objects)."""
    ranks = report.ranks
    if isinstance(ranks, ColumnarRanks) and ranks.parsed is not None:
        return report
    carried = ColumnarRanks(ranks)
    carried.parsed = read(carried)
    return report.model_copy(update={"ranks": carried})


def read(ranks: ColumnarRanks) -> Parsed:
    """Every column a decision reads of ``ranks``, derived as a decision derives it."""
    with reading():
        t = table(ranks)
        for field in GIVEN_FIELDS:
            rank_columns.any_given(ranks, field)
        for field in TRUE_FIELDS:
            rank_columns.any_true(ranks, field)
        for field in FLOAT_FIELDS:
            if rank_columns.any_given(ranks, field):
                rank_columns.floats(ranks, field)
        for field in SECTION_FIELDS:
            rank_columns.section_block(ranks, field)
        for fields in SAMPLE_SUMS:
            rank_columns.ints(ranks, *fields)
        rank_columns.numbers(ranks)
        rank_columns.node_codes(ranks)
        rank_columns.coord_block(ranks)
        Groups.of(ranks)
        parsed = t.parsed()
    for value in parsed.derived.values():
        _freeze(value)
    return Parsed(parsed.size, parsed.rows, parsed.scans, MappingProxyType(dict(parsed.derived)))


def _freeze(value: Any) -> None:
    """Every array in ``value`` read-only: later decisions share them."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, tuple | list):
        for v in value:
            _freeze(v)
    elif isinstance(value, Groups):
        _freeze(value.members)
