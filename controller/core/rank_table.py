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
takes their values while the dict is in cache, chained into one ranks x fields numpy
array of objects; a field's column is a view of it (``objects``). At 131,072 ranks
that is ~65 ms for 14 fields on the 2-core VM, against ~16 ms per field for single
``attrgetter`` scans (the first touch of a rank object is what costs, not the Python
step). An object array, not lists: slicing a flat list per field touched every value
again (~30 ms), and numpy arrays are not tracked by the garbage collector, which
walked 1.7 million list entries whenever a decision's own allocations woke it (35-100
ms in the fleet cases). By key, not by position: a ``__dict__`` whose keys are in
another order (a ``model_construct`` missing a field, then given it) reads the same.
A rank without a ``__dict__`` entry for one of them (not a validated model) sends the
table to single ``attrgetter`` scans, the attribute read as before.

Outside ``reading()`` a table is made per call: a caller that asks once pays once.
Nothing is kept past the scope, so a report that arrives anew is read anew (the
bench's "unseen" reports), unless its ranks come as ``ColumnarRanks``: then the table
starts from the columns read where the report was parsed (``report_columns``), and a
decision does only the numpy work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, Self, SupportsIndex, TypeVar

import numpy as np
import numpy.typing as npt

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
    "gpu_relative_median",
)
"""What the core reads of every rank, read in one pass (the rest a field at a time)."""

_ROW = itemgetter(*ROW_FIELDS)
_DICT = attrgetter("__dict__")
_AT = {name: j for j, name in enumerate(ROW_FIELDS)}

Objects = npt.NDArray[np.object_]

_tables: ContextVar[dict[int, RankTable] | None] = ContextVar("rank_tables", default=None)


@dataclass(frozen=True, slots=True)
class Parsed:
    """What one read of a ranks list gave (``RankTable.parsed``): its row pass and the
    columns derived from it, every array read-only."""

    size: int
    rows: Objects | None
    scans: bool
    derived: Mapping[object, Any]


class ColumnarRanks(list[RankScores]):
    """A report's ranks that carry their columns, read once where the report was parsed.

    The columns hold for exactly these rank objects in this order. A ``RankScores`` is
    frozen, so only the list can change under them: every list method that changes it
    drops the columns (a decision then reads the ranks itself, as for a plain list), and
    a copy or a pickle is a plain list's worth (``__reduce__``). A rank's own mappings
    (``section_relative``, ``coords``) are part of a frozen model: changing one in place
    breaks the model's contract and is not watched."""

    __slots__ = ("parsed",)

    def __init__(self, ranks: Iterable[RankScores] = ()) -> None:
        super().__init__(ranks)
        self.parsed: Parsed | None = None

    def _changed(self) -> None:
        self.parsed = None

    def __setitem__(self, i: Any, v: Any) -> None:
        self._changed()
        super().__setitem__(i, v)

    def __delitem__(self, i: SupportsIndex | slice) -> None:
        self._changed()
        super().__delitem__(i)

    def __iadd__(self, other: Iterable[RankScores]) -> Self:  # type: ignore[misc, override, unused-ignore]
        self._changed()
        return super().__iadd__(other)

    def __imul__(self, n: SupportsIndex) -> Self:
        self._changed()
        return super().__imul__(n)

    def append(self, v: RankScores) -> None:
        self._changed()
        super().append(v)

    def extend(self, v: Iterable[RankScores]) -> None:
        self._changed()
        super().extend(v)

    def insert(self, i: SupportsIndex, v: RankScores) -> None:
        self._changed()
        super().insert(i, v)

    def pop(self, i: SupportsIndex = -1) -> RankScores:
        self._changed()
        return super().pop(i)

    def remove(self, v: RankScores) -> None:
        self._changed()
        super().remove(v)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def reverse(self) -> None:
        self._changed()
        super().reverse()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().sort(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        return list, (list(self),)


class RankTable:
    """The columns of one ranks list (report order), read once each."""

    __slots__ = ("_columns", "_derived", "_objects", "_rows", "_scans", "ranks")

    def __init__(self, ranks: Sequence[RankScores]) -> None:
        self.ranks = ranks
        self._rows: Objects | None = None
        """Ranks x ``ROW_FIELDS``, once read (None: not yet, or not readable so)."""
        self._scans = False
        """Some rank's ``__dict__`` lacks a row field: single scans only."""
        self._columns: dict[str, list[Any]] = {}
        self._objects: dict[str, Objects] = {}
        self._derived: dict[object, Any] = {}
        parsed = ranks.parsed if isinstance(ranks, ColumnarRanks) else None
        if parsed is not None and parsed.size == len(ranks):
            self._rows, self._scans = parsed.rows, parsed.scans
            self._derived = dict(parsed.derived)

    def parsed(self) -> Parsed:
        """What this table has read so far, to start later tables of the same ranks."""
        return Parsed(len(self.ranks), self._rows, self._scans, dict(self._derived))

    def objects(self, field: str) -> Objects:
        """Every rank's ``field``, in report order, as a read-only 1-D object array (a
        view of the row pass for ``ROW_FIELDS``). The fast path for whole-column
        readers: nothing is copied and nothing is tracked by the garbage collector."""
        col = self._objects.get(field)
        if col is None:
            rows = self._read_rows() if field in _AT else None
            if rows is not None:
                col = rows[:, _AT[field]]
            else:
                values = self.column(field)
                col = np.fromiter(values, dtype=object, count=len(values))
                col.flags.writeable = False
            self._objects[field] = col
        return col

    def column(self, field: str) -> list[Any]:
        """Every rank's ``field``, in report order, as a list."""
        col = self._columns.get(field)
        if col is None:
            rows = self._read_rows() if field in _AT else None
            if rows is not None:
                col = rows[:, _AT[field]].tolist()
            else:
                col = list(map(attrgetter(field), self.ranks))
            self._columns[field] = col
        return col

    def _read_rows(self) -> Objects | None:
        """Every ``ROW_FIELDS`` column from one pass over the ranks' ``__dict__``s; None
        (and single scans from then on) where some rank's dict lacks one of them."""
        if self._rows is None and not self._scans:
            n, width = len(self.ranks), len(ROW_FIELDS)
            try:
                flat = np.fromiter(
                    chain.from_iterable(map(_ROW, map(_DICT, self.ranks))),
                    dtype=object,
                    count=n * width,
                )
            except (AttributeError, KeyError):
                self._scans = True
                return None
            flat.flags.writeable = False
            self._rows = flat.reshape(n, width)
        return self._rows

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
