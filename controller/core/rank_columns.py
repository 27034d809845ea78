"""Whole-report scans of one ``RankScores`` field, in C loops.

A report of 16,384 ranks is read several times per decision ("does any rank carry a
wait share, a GPU name, a peer group?"); a generator expression over the ranks costs
2-3 ms each at that size, ``map`` over ``attrgetter`` a fraction of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from pacekeeper.detector.score_report import RankScores


def any_given(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is not None (a 0.0 counts as given)."""
    # The column, then a C count of its Nones: faster than a short-circuiting scan that
    # calls a function per rank, since the common answer (nothing given) reads them all.
    column = list(map(attrgetter(field), ranks))
    return column.count(None) != len(column)


def any_true(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is truthy (a name, a non-empty mapping)."""
    return any(map(attrgetter(field), ranks))


def ints(ranks: Sequence[RankScores], *fields: str) -> npt.NDArray[np.int64]:
    """Per rank, the sum of the integer ``fields``."""
    total = np.fromiter(map(attrgetter(fields[0]), ranks), np.int64, len(ranks))
    for name in fields[1:]:
        total += np.fromiter(map(attrgetter(name), ranks), np.int64, len(ranks))
    return total
