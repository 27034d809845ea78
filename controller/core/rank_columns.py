"""Whole-report scans of one ``RankScores`` field, in C loops.

A report of 16,384 ranks is read several times per decision ("does any rank carry a
wait share, a GPU name, a peer group?"); a generator expression over the ranks costs
2-3 ms each at that size, ``map`` over ``attrgetter`` a fraction of it. Inside
``rank_table.reading()`` (one decision) each column is read once and each answer here
kept for the rest of the call: arrays come back read-only, so no caller can change
what the next one reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core.rank_table import table
from pacekeeper.detector.score_report import RankScores

A = TypeVar("A", bound=np.ndarray)


def any_given(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is not None (a 0.0 counts as given)."""
    # The column, then a C count of its Nones: faster than a short-circuiting scan that
    # calls a function per rank, since the common answer (nothing given) reads them all.
    t = table(ranks)
    given: bool = t.derived(("given", field), lambda: _given(t.column(field)))
    return given


def _given(column: list[object]) -> bool:
    return column.count(None) != len(column)


def any_true(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is truthy (a name, a non-empty mapping)."""
    t = table(ranks)
    true: bool = t.derived(("true", field), lambda: any(t.column(field)))
    return true


def ints(ranks: Sequence[RankScores], *fields: str) -> npt.NDArray[np.int64]:
    """Per rank, the sum of the integer ``fields``."""
    t = table(ranks)

    def make() -> npt.NDArray[np.int64]:
        total = np.fromiter(t.column(fields[0]), np.int64, len(ranks))
        for name in fields[1:]:
            total += np.fromiter(t.column(name), np.int64, len(ranks))
        return _frozen(total)

    out: npt.NDArray[np.int64] = t.derived(("ints", fields), make)
    return out


def floats(ranks: Sequence[RankScores], field: str) -> npt.NDArray[np.float64]:
    """Per rank, the float ``field`` (NaN where None)."""
    t = table(ranks)
    out: npt.NDArray[np.float64] = t.derived(
        ("floats", field), lambda: _frozen(_float_array(t.column(field), len(ranks)))
    )
    return out


def _float_array(values: Iterable[float | None], n: int) -> npt.NDArray[np.float64]:
    """``values`` as floats, NaN for a None. ``np.fromiter`` first: it skips the type
    sniffing ``np.array`` does per element (a third of a 131,072-value column), and
    stops at the first None, which then takes ``np.array``: ``values`` is read again,
    so it must be iterable twice (a list, ``_Values``)."""
    try:
        return np.fromiter(values, np.float64, n)
    except TypeError:  # a None (not measured)
        return np.array(list(values), dtype=np.float64)


def numbers(ranks: Sequence[RankScores]) -> npt.NDArray[np.int64]:
    """Per listed row, its rank number."""
    t = table(ranks)
    out: npt.NDArray[np.int64] = t.derived(
        "numbers", lambda: _frozen(np.fromiter(t.column("rank"), np.int64, len(ranks)))
    )
    return out


def node_codes(ranks: Sequence[RankScores]) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
    """Per listed row, its node's number, and the numbers by node: nodes numbered in
    the order the report first names them (their ranks need not come together)."""
    t = table(ranks)

    def make() -> tuple[npt.NDArray[np.int64], dict[str, int]]:
        names = t.column("node")
        index = {name: i for i, name in enumerate(dict.fromkeys(names))}
        return _frozen(np.fromiter(map(index.__getitem__, names), np.int64, len(names))), index

    out: tuple[npt.NDArray[np.int64], dict[str, int]] = t.derived("nodes", make)
    return out


def section_block(
    ranks: Sequence[RankScores], field: str
) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The section names some rank's mapping ``field`` holds (sorted), and ranks x names
    of their scores (NaN where a rank has none).

    A job's ranks nearly always time the same sections, inserted in the same order: then
    the mappings' keys, read in one C pass, equal the first one's repeated, and their
    values come out in one pass too (at 131,072 ranks a comprehension per section cost
    more than the rest of the decision). Any other layout takes a column at a time."""
    t = table(ranks)
    out: tuple[list[str], npt.NDArray[np.float64]] = t.derived(
        ("sections", field), lambda: _section_block(t.column(field))
    )
    return out


def _section_block(
    dicts: list[dict[str, float | None]],
) -> tuple[list[str], npt.NDArray[np.float64]]:
    n = len(dicts)
    first = list(dicts[0]) if n else []
    keys = list(chain.from_iterable(dicts))
    if keys == first * n:
        values = _float_array(_Values(dicts), n * len(first))
        block = values.reshape(n, len(first))
        names = sorted(first)
        if names != first:
            block = block[:, [first.index(s) for s in names]]
        return names, _frozen(block)
    names = sorted(set(keys))
    block = np.empty((n, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        block[:, j] = np.array([d.get(name) for d in dicts], dtype=np.float64)
    return names, _frozen(block)


class _Values:
    """Every mapping's values in turn, iterable again (``_float_array``'s fallback)."""

    __slots__ = ("_dicts",)

    def __init__(self, dicts: list[dict[str, float | None]]) -> None:
        self._dicts = dicts

    def __iter__(self) -> Iterator[float | None]:
        return chain.from_iterable(map(dict.values, self._dicts))


def aligned(
    names: list[str], block: npt.NDArray[np.float64], wanted: list[str]
) -> npt.NDArray[np.float64]:
    """``block``'s columns for ``wanted`` names, in that order (NaN for a name absent)."""
    if names == wanted:
        return block
    out = np.full((block.shape[0], len(wanted)), np.nan)
    at = {name: j for j, name in enumerate(names)}
    for j, name in enumerate(wanted):
        if name in at:
            out[:, j] = block[:, at[name]]
    return out


def rows_of(ranks: Sequence[RankScores], wanted: Iterable[int]) -> list[int]:
    """The rows (report order) of the listed ranks numbered ``wanted``: read straight
    where row ``r`` holds rank ``r`` (a full report), else found by one scan."""
    want = set(wanted)
    n = len(ranks)
    if all(0 <= w < n and ranks[w].rank == w for w in want):
        return sorted(want)
    return [i for i, r in enumerate(ranks) if r.rank in want]


def _frozen(a: A) -> A:
    a.flags.writeable = False
    return a
