"""One report's ranks read column by column, each column once per decision.

A decision reads the same fields of every listed rank several times (the scores, the
node, "does any rank carry a wait share, a group, coordinates, a GPU name?"), and at
131,072 ranks each such scan cost 10-15 ms on the 2-core VM: the time goes to memory,
a cache miss or two per rank object, not to Python. So inside ``reading()`` (one
``engine.decide`` call, or one ``digest``) each ranks list gets one ``RankTable``:
each field is read once, and what is derived from it (a float array, the node codes,
the peer groups, "is any given?") is kept for the rest of the call.

The fields a decision reads of every rank (``ROW_FIELDS``) are read together, in one
pass: each rank's ``__dict__`` is fetched once and an ``itemgetter`` of all of them
takes their values while the dict is in cache, chained into one flat list that is
sliced per field. At 131,072 ranks that is ~65 ms for 13 fields on the 2-core VM,
against ~16 ms per field for single ``attrgetter`` scans (the first touch of a rank
object is what costs, not the Python step). By key, not by position: a ``__dict__``
whose keys are in another order (a ``model_construct`` missing a field, then given it)
reads the same. A rank without a ``__dict__`` entry for one of them (not a validated
model) sends the table to single ``attrgetter`` scans, the attribute read as before.

Outside ``reading()`` a table is made per call: a caller that asks once pays once.
Nothing is kept past the scope, so a report that arrives anew is read anew (the
bench's "unseen" reports, the operator's freshly parsed ones).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from pacekeeper.detector.score_report import RankScores

T = TypeVar("T")

ROW_FIELDS = (
    "rank",
    "node",
    "gpu_relative",
    "gpu_individual",
    "gpu_individual_median",
    "section_relative",
    "section_individual",
    "section_samples",
    "kernel_samples",
    "group",
    "coords",
    "wait_share",
    "gpu_uuid",
)
"""What the core reads of every rank, read in one pass (the rest a field at a time)."""

_ROW = itemgetter(*ROW_FIELDS)
_DICT = attrgetter("__dict__")

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
            if field in ROW_FIELDS and not self._columns and self._read_rows():
                return self._columns[field]
            col = self._columns[field] = list(map(attrgetter(field), self.ranks))
        return col

    def _read_rows(self) -> bool:
        """Every ``ROW_FIELDS`` column from one pass over the ranks' ``__dict__``s;
        False (nothing kept) where some rank's dict lacks one of them."""
        try:
            flat = list(chain.from_iterable(map(_ROW, map(_DICT, self.ranks))))
        except (AttributeError, KeyError):
            return False
        width = len(ROW_FIELDS)
        for j, name in enumerate(ROW_FIELDS):
            self._columns[name] = flat[j::width]
        return True

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
