"""Whole-report scans of one ``RankScores`` field, in C loops.

A report of 16,384 ranks is read several times per decision ("does any rank carry a
wait share, a GPU name, a peer group?"); a generator expression over the ranks costs
2-3 ms each at that size, ``map`` over ``attrgetter`` a fraction of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from operator import attrgetter, is_

import numpy as np
import numpy.typing as npt

from pacekeeper.detector.score_report import RankScores

_is_none = partial(is_, None)


def any_given(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is not None (a 0.0 counts as given)."""
    return not all(map(_is_none, map(attrgetter(field), ranks)))


def any_true(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is truthy (a name, a non-empty mapping)."""
    return any(map(attrgetter(field), ranks))


def ints(ranks: Sequence[RankScores], *fields: str) -> npt.NDArray[np.int64]:
    """Per rank, the sum of the integer ``fields``."""
    total = np.fromiter(map(attrgetter(fields[0]), ranks), np.int64, len(ranks))
    for name in fields[1:]:
        total += np.fromiter(map(attrgetter(name), ranks), np.int64, len(ranks))
    return total
