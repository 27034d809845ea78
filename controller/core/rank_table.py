"""One report's ranks read column by column, each column once per decision.

A decision reads the same fields of every listed rank several times (the scores, the
node, "does any rank carry a wait share, a group, coordinates, a GPU name?"), and at
131,072 ranks each such scan cost 10-15 ms on the 2-core VM: the time goes to memory,
a cache miss or two per rank object, not to Python. So inside ``reading()`` (one
``engine.decide`` call, or one ``digest``) each ranks list gets one ``RankTable``:
each field is read once, and what is derived from it (a float array, the node codes,
the peer groups, "is any given?") is kept for the rest of the call.

Reading every field in one pass over the ranks' ``__dict__`` values and slicing was
tried: the pass costs three single scans, and a ``__dict__`` whose keys are in another
order (a ``model_construct`` missing a field, then given it) must be ruled out by a
pass over every key costing as much again; single scans came out level and need no
layout.

Outside ``reading()`` a table is made per call: a caller that asks once pays once.
Nothing is kept past the scope, so a report that arrives anew is read anew (the
bench's "unseen" reports, the operator's freshly parsed ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from operator import attrgetter
from typing import Any, TypeVar

from pacekeeper.detector.score_report import RankScores

T = TypeVar("T")

_tables: ContextVar[dict[int, RankTable] | None] = ContextVar("rank_tables", default=None)


class RankTable:
    """The columns of one ranks list (report order), read once each."""

    __slots__ = ("_columns", "_derived", "ranks")

    def __init__(self, ranks: Sequence[RankScores]) -> None:
        self.ranks = ranks
        self._columns: dict[str, list[Any]] = {}
        self._derived: dict[object, Any] = {}

    def column(self, field: str) -> list[Any]:
        """Every rank's ``field``, in report order."""
        col = self._columns.get(field)
        if col is None:
            col = self._columns[field] = list(map(attrgetter(field), self.ranks))
        return col

    def derived(self, key: object, make: Callable[[], T]) -> T:
        """``make()``, once per table and ``key`` (callers never modify what it gives)."""
        if key in self._derived:
            value: T = self._derived[key]
            return value
        out = self._derived[key] = make()
        return out


@contextmanager
def reading() -> Iterator[None]:
    """Within: each ranks list's table is made once (one decision)."""
    if _tables.get() is not None:
        yield  # an outer scope already keeps them
        return
    token = _tables.set({})
    try:
        yield
    finally:
        _tables.reset(token)


def table(ranks: Sequence[RankScores]) -> RankTable:
    """``ranks``' table: the scope's (made on first use), or a fresh one outside it."""
    tables = _tables.get()
    if tables is None:
        return RankTable(ranks)
    t = tables.get(id(ranks))
    if t is None or t.ranks is not ranks:
        t = tables[id(ranks)] = RankTable(ranks)
    return t
