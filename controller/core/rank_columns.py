"""Whole-report scans of one ``RankScores`` field, in C loops.

A report of 16,384 ranks is read several times per decision ("does any rank carry a
wait share, a GPU name, a peer group?"); a generator expression over the ranks costs
2-3 ms each at that size, ``map`` over ``attrgetter`` a fraction of it. Inside
``rank_table.reading()`` (one decision) each column is read once and each answer here
kept for the rest of the call: arrays come back read-only, so no caller can change
what the next one reads. The columns come as numpy object arrays (``RankTable.objects``,
views of one pass over the ranks): numbers are cast from them in one numpy loop, and
nothing here builds a list per rank the garbage collector would walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core.rank_table import Objects, table
from pacekeeper.detector.score_report import RankScores

A = TypeVar("A", bound=np.ndarray)


def any_given(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is not None (a 0.0 counts as given)."""
    # The column, then a C count of its Nones: faster than a short-circuiting scan that
    # calls a function per rank, since the common answer (nothing given) reads them all.
    t = table(ranks)
    given: bool = t.derived(("given", field), lambda: _given(t.objects(field).tolist()))
    return given


def _given(column: list[object]) -> bool:
    return column.count(None) != len(column)


def any_true(ranks: Sequence[RankScores], field: str) -> bool:
    """Some rank's ``field`` is truthy (a name, a non-empty mapping)."""
    t = table(ranks)
    true: bool = t.derived(("true", field), lambda: any(t.objects(field).tolist()))
    return true


def ints(ranks: Sequence[RankScores], *fields: str) -> npt.NDArray[np.int64]:
    """Per rank, the sum of the integer ``fields``."""
    t = table(ranks)

    def make() -> npt.NDArray[np.int64]:
        total = t.objects(fields[0]).astype(np.int64)
        for name in fields[1:]:
            total += t.objects(name).astype(np.int64)
        return _frozen(total)

    out: npt.NDArray[np.int64] = t.derived(("ints", fields), make)
    return out


def floats(ranks: Sequence[RankScores], field: str) -> npt.NDArray[np.float64]:
    """Per rank, the float ``field`` (NaN where None)."""
    t = table(ranks)
    out: npt.NDArray[np.float64] = t.derived(
        ("floats", field), lambda: _frozen(t.objects(field).astype(np.float64))
    )
    return out


def _float_array(values: Iterable[float | None], n: int) -> npt.NDArray[np.float64]:
    """``values`` as floats, NaN for a None. ``np.fromiter`` first: it skips the type
    sniffing ``np.array`` does per element (a third of a 131,072-value column), and
    stops at the first None, which then takes ``np.array``: ``values`` is read again,
    so it must be iterable twice (a list, ``_Picked``)."""
    try:
        return np.fromiter(values, np.float64, n)
    except TypeError:  # a None (not measured)
        return np.array(list(values), dtype=np.float64)


def numbers(ranks: Sequence[RankScores]) -> npt.NDArray[np.int64]:
    """Per listed row, its rank number."""
    t = table(ranks)
    out: npt.NDArray[np.int64] = t.derived(
        "numbers", lambda: _frozen(t.objects("rank").astype(np.int64))
    )
    return out


def node_codes(ranks: Sequence[RankScores]) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
    """Per listed row, its node's number, and the numbers by node: nodes numbered in
    the order the report first names them (their ranks need not come together)."""
    t = table(ranks)
    out: tuple[npt.NDArray[np.int64], dict[str, int]] = t.derived(
        "nodes", lambda: _node_codes(t.objects("node"))
    )
    return out


def _node_codes(names: Objects) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
    """A node's ranks nearly always come together: the names are looked up once per run
    of equal names (one numpy comparison of neighbours finds the runs), not per rank."""
    n = len(names)
    if n == 0:
        return _frozen(np.zeros(0, dtype=np.int64)), {}
    starts = np.flatnonzero(np.concatenate(([True], names[1:] != names[:-1])))
    heads = names[starts].tolist()
    index = {name: i for i, name in enumerate(dict.fromkeys(heads))}
    run_codes = np.fromiter(map(index.__getitem__, heads), np.int64, len(heads))
    lengths = np.diff(np.append(starts, n))
    return _frozen(np.repeat(run_codes, lengths)), index


def section_block(
    ranks: Sequence[RankScores], field: str
) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The section names some rank's mapping ``field`` holds (sorted), and ranks x names
    of their scores (NaN where a rank has none).

    A job's ranks nearly always time the same sections: then every mapping holds each of
    the first's names (the ``itemgetter`` of them raises no ``KeyError``) and no other
    (their sizes add up to as many), and their values come out in one C pass of that
    ``itemgetter`` (at 131,072 ranks a comprehension per section cost more than the rest
    of the decision; a pass to compare the keys first cost as much as reading the
    values). Any other layout takes a column at a time."""
    t = table(ranks)
    out: tuple[list[str], npt.NDArray[np.float64]] = t.derived(
        ("sections", field), lambda: _section_block(t.objects(field))
    )
    return out


def _section_block(dicts: Objects) -> tuple[list[str], npt.NDArray[np.float64]]:
    n = len(dicts)
    names = sorted(dicts[0]) if n else []
    if names:
        # Read by the first's names (sorted), in one pass; a name missing somewhere (a
        # KeyError) means other keys there. Each mapping then has at least those names:
        # it has no other when the sizes add up to as many (a sum, not a size per rank
        # compared first: ~4 ms against ~6 at 131,072 ranks).
        get = itemgetter(*names)
        values = _Picked(dicts, get, len(names) > 1)
        try:
            flat = _float_array(values, n * len(names))
        except KeyError:
            pass
        else:
            if sum(map(len, dicts)) == n * len(names):
                return names, _frozen(flat.reshape(n, len(names)))
    names = sorted(set(chain.from_iterable(dicts)))
    block = np.empty((n, len(names)), dtype=np.float64)
    for j, name in enumerate(names):
        block[:, j] = np.array([d.get(name) for d in dicts], dtype=np.float64)
    return names, _frozen(block)


class _Picked:
    """``get`` of every mapping in turn, flattened where it gives tuples (several
    names), iterable again (``_float_array``'s fallback)."""

    __slots__ = ("_dicts", "_flat", "_get")

    def __init__(self, dicts: Objects, get: itemgetter[Any], flat: bool) -> None:
        self._dicts, self._get, self._flat = dicts, get, flat

    def __iter__(self) -> Iterator[float | None]:
        values = map(self._get, self._dicts)
        return chain.from_iterable(values) if self._flat else values


def coord_block(ranks: Sequence[RankScores]) -> tuple[list[str], npt.NDArray[np.int64]] | None:
    """When every rank carries coordinates under the same names (a job that called
    ``set_topology``): those names, sorted, and ranks x names of their values; else None
    (some rank without coordinates, or with other names)."""
    t = table(ranks)
    out: tuple[list[str], npt.NDArray[np.int64]] | None = t.derived(
        "coords", lambda: _coord_block(t.objects("coords"))
    )
    return out


def _coord_block(col: Objects) -> tuple[list[str], npt.NDArray[np.int64]] | None:
    n = len(col)
    if n == 0 or not col[0] or col.tolist().count(None):
        return None
    names = sorted(col[0])
    if not (np.fromiter(map(len, col), np.int64, n) == len(names)).all():
        return None
    get = itemgetter(*names)
    picked = map(get, col)
    try:
        flat = np.fromiter(
            chain.from_iterable(picked) if len(names) > 1 else picked, np.int64, n * len(names)
        )
    except KeyError:  # as many names, other ones
        return None
    return names, _frozen(flat.reshape(n, len(names)))


def first_seen(block: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], list[int]]:
    """Per row of ``block``, the number of its distinct row (numbered in the order they
    first occur), and the row where each first occurs."""
    key = _row_keys(block)
    if key is None:
        _, first, inverse = np.unique(block, axis=0, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    relabel = np.empty(len(order), dtype=np.int64)
    relabel[order] = np.arange(len(order), dtype=np.int64)
    return relabel[inverse.reshape(-1)], first[order].tolist()


def _row_keys(block: npt.NDArray[np.int64]) -> npt.NDArray[np.int64] | None:
    """One integer per row, equal exactly where the rows are (mixed radix over each
    column's range): a sort of integers, not of rows (``np.unique(axis=0)`` sorts a
    131,072-row block ~5x slower). None where the ranges' product could overflow."""
    if block.size == 0:
        return None
    low, high = block.min(axis=0), block.max(axis=0)
    key = np.zeros(block.shape[0], dtype=np.int64)
    span = 1
    for j in range(block.shape[1]):
        radix = int(high[j]) - int(low[j]) + 1
        if span * radix >= 2**62:
            return None
        key = key * radix + (block[:, j] - low[j])
        span *= radix
    return key


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
