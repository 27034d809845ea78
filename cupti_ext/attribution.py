"""Which section launched a kernel: correlation-id intervals bounded by section markers.

CUPTI gives every driver/runtime API call a correlation id from one process-wide,
increasing counter, and stamps each kernel record with the id of the call that launched
it. On section entry and exit the backend makes one cheap, traced driver call (the
marker) while an external correlation id naming the entry is pushed; CUPTI then emits an
EXTERNAL_CORRELATION record tying that id to the marker call's correlation id. So each
section entry becomes a correlation-id interval ``(start, stop)``, and a kernel belongs to
the entry whose interval contains its correlation id: a kernel launched outside a section
(or in a section whose entry was not sampled) never counts.

External ids pack ``serial << 17 | section << 1 | is_stop``; serials count entries.
CUPTI may hand buffers over in any order (records of different kinds or streams go to
different buffers), so a kernel can arrive before the markers of its entry. The book
therefore also knows how many entries the backend has marked (``sent``) and which of
them have shown a marker yet: a kernel above the last entry marker of the entries all
heard of waits (is held), because an entry not heard of yet may hold it.

Nothing here touches CUPTI: the book is fed decoded arrays, so it is tested on the CPU.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from . import native

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

_NEVER_ABOVE = (1 << 63) - 1
"""A correlation-id bound no id passes (ids are 32-bit)."""

MAX_SECTION_ID = (1 << 16) - 1
"""Section ids fit in 16 bits; this last id is shared by sections beyond the limit."""


_SERIAL_SHIFT = 17


def encode_external_id(serial: int, section_id: int, is_stop: bool) -> int:
    return (serial << _SERIAL_SHIFT) | (section_id << 1) | int(is_stop)


def serial_of(packed: int) -> int:
    """The entry serial of a packed external id (0: a fence, no entry)."""
    return packed >> _SERIAL_SHIFT


_packed = operator.itemgetter(0)


def decode_external_ids(ids: U64) -> tuple[I64, I64, Mask]:
    """(serial, section id, is_stop) of each packed external id."""
    ids = ids.astype(np.uint64)
    serial = (ids >> np.uint64(_SERIAL_SHIFT)).astype(np.int64)
    section = ((ids >> np.uint64(1)) & np.uint64(MAX_SECTION_ID)).astype(np.int64)
    is_stop = (ids & np.uint64(1)).astype(np.bool_)
    return serial, section, is_stop


@dataclass(slots=True)
class Assignment:
    """Result of attributing a batch of kernels."""

    sections: dict[int, Mask]
    """Section id -> which kernels ran inside one of its entries."""
    any_section: Mask
    pending: Mask
    """Kernels that may belong to an entry whose exit marker has not arrived yet."""


class _Intervals:
    """One section's closed entries, kept ready for ``_inside``: starts sorted, stops as
    a running maximum. A window at interval 1 holds thousands of entries, and rebuilding
    arrays for every buffer made attribution cost grow through the window; so entries
    are appended to Python lists (a few dozen per buffer, where a numpy store each cost
    more than the rest of the marker's handling) and moved into the arrays in one step
    when ``arrays`` is asked. Entries close in serial order, so starts nearly always
    arrive sorted and the running maximum only extends."""

    __slots__ = (
        "_addresses",
        "_cummax",
        "_last",
        "_n",
        "_new_starts",
        "_new_stops",
        "_sorted",
        "_starts",
        "_stops",
    )

    def __init__(self) -> None:
        self._starts = np.empty(64, np.int64)
        self._stops = np.empty(64, np.int64)
        self._cummax = np.empty(64, np.int64)
        self._n = 0
        self._sorted = True
        self._last = -1  # the latest start appended
        self._new_starts: list[int] = []
        self._new_stops: list[int] = []
        self._addresses: tuple[int, int] | None = None

    def __len__(self) -> int:
        return self._n + len(self._new_starts)

    def append(self, start: int, stop: int) -> None:
        if start < self._last:
            self._sorted = False
        self._last = start
        self._new_starts.append(start)
        self._new_stops.append(stop)

    def extend(self, starts: I64, stops: I64, ascending: bool) -> None:
        """Append many entries at once (``ascending``: ``starts`` do not descend)."""
        self._move_new()
        if len(starts) and (not ascending or int(starts[0]) < self._last):
            self._sorted = False
        self._store(starts, stops)
        if len(starts):
            self._last = int(starts[-1])

    def _move_new(self) -> None:
        if not self._new_starts:
            return
        self._store(self._new_starts, self._new_stops)
        self._new_starts.clear()
        self._new_stops.clear()

    def _store(self, starts: I64 | list[int], stops: I64 | list[int]) -> None:
        k = len(starts)
        if not k:
            return
        n = self._n
        if n + k > len(self._starts):
            spare = np.empty(max(n, k), np.int64)
            self._starts = np.concatenate([self._starts[:n], spare])
            self._stops = np.concatenate([self._stops[:n], spare])
            self._cummax = np.concatenate([self._cummax[:n], spare])
            self._addresses = None
        self._starts[n : n + k] = starts
        stored = self._stops[n : n + k]
        stored[:] = stops
        if self._sorted:
            run = np.maximum.accumulate(stored)
            self._cummax[n : n + k] = run if n == 0 else np.maximum(run, self._cummax[n - 1])
        self._n = n + k

    def refs(self) -> tuple[int, int, int]:
        """``arrays`` for the compiled fold: (address of starts, of the running
        maximum, length); the addresses are read again only when the arrays grow."""
        self.arrays()
        if self._addresses is None:
            self._addresses = (native.ptr(self._starts), native.ptr(self._cummax))
        return (*self._addresses, self._n)

    def arrays(self) -> tuple[I64, I64]:
        """(starts ascending, running maximum of stops in that order)."""
        self._move_new()
        n = self._n
        if not self._sorted:
            order = np.argsort(self._starts[:n], kind="stable")
            self._starts[:n] = self._starts[:n][order]
            self._stops[:n] = self._stops[:n][order]
            self._cummax[:n] = np.maximum.accumulate(self._stops[:n])
            self._sorted = True
            self._last = int(self._starts[n - 1]) if n else -1
        return self._starts[:n], self._cummax[:n]


class MarkerBook:
    """Section entries as correlation-id intervals; bounded, one owner thread."""

    def __init__(self, max_open: int = 65536, max_closed: int = 1 << 20) -> None:
        self.max_open = max_open
        self.max_closed = max_closed
        self._open: dict[int, tuple[int, int]] = {}  # serial -> (section, start corr)
        self._early_stops: dict[int, int] = {}  # serial -> stop corr, start not seen yet
        self._closed: dict[int, _Intervals] = {}
        self._retiring: dict[int, _Intervals] = {}
        self._closed_count = 0
        self._stale: set[int] = set()
        self._abandoned: set[int] = set()  # entries whose exit marker was never sent
        self.lost_markers = 0
        """Markers dropped because a bound was hit, and entries given up on (``give_up``)
        with no marker come (their kernels count as unattributed)."""
        self.sent: Callable[[], int] | None = None
        """The backend's count of entries marked so far (serials are 1..sent), read on
        the buffer thread; None: every marker made is in (the pure tests)."""
        # Every serial up to _known_through has shown a marker (or was given up on);
        # _entry_floor is the highest entry-marker id among them, under which no entry
        # not heard of yet can start (its entry marker came later, from the same thread).
        self._known_through = 0
        self._entry_floor = 0
        self._known_above: dict[int, int] = {}  # serial -> entry marker id (-1: exit only)

    def add(self, external_ids: U64, correlation_ids: U32) -> None:
        """Record markers (external id -> the marker call's correlation id)."""
        if len(external_ids) == 0:
            return
        self.add_packed(list(zip(external_ids.tolist(), correlation_ids.tolist(), strict=True)))

    def add_packed(self, markers: list[tuple[int, int]]) -> None:
        """``add`` for (packed external id, correlation id) pairs as Python ints: a
        buffer holds a few dozen markers, for which numpy's per-call cost is most of
        the work. Where the compiled path is built, ``scan_state``/``add_scanned`` do
        this with a buffer's markers read, sorted and mostly paired in C."""
        # Sorted by serial, then entry before exit: the packed id orders so (a serial's
        # entry and exit markers name the same section); a C key, not a Python one.
        markers.sort(key=_packed)
        known = self._known_through
        above = self._known_above
        floor = self._entry_floor
        for packed, c in markers:
            s = packed >> _SERIAL_SHIFT
            entry_corr = -1 if packed & 1 else c
            if s > known:
                prev = above.get(s)
                if prev is None or prev < entry_corr:
                    above[s] = entry_corr
            elif entry_corr > floor:
                floor = entry_corr
        self._entry_floor = floor
        self._pair(markers)
        self._advance()

    def _pair(self, markers: list[tuple[int, int]]) -> None:
        """Open, close or park each marker (sorted by packed id) of its entry."""
        abandoned, early_stops, opened_ = self._abandoned, self._early_stops, self._open
        for packed, c in markers:
            s = packed >> _SERIAL_SHIFT
            stop = packed & 1
            if abandoned and s in abandoned:
                if not stop:  # its entry marker: the last of it we will see
                    abandoned.discard(s)
                continue
            if not stop:
                early = early_stops.pop(s, None) if early_stops else None
                if early is not None:
                    self._close((packed >> 1) & MAX_SECTION_ID, c, early)
                elif len(opened_) < self.max_open:
                    opened_[s] = ((packed >> 1) & MAX_SECTION_ID, c)
                else:
                    self.lost_markers += 1
                continue
            opened = opened_.pop(s, None)
            if opened is not None:
                self._close(opened[0], opened[1], c)
            elif len(early_stops) < self.max_open:
                early_stops[s] = c
            else:
                self.lost_markers += 1

    def scan_state(self, markers: int) -> tuple[int, int, bool, I64 | None] | None:
        """What the compiled marker pass (``pk_markers``) reads of the book before a
        buffer of up to ``markers`` markers: (known-through serial, entry floor,
        whether no later serial has been heard of, the serials it must leave to
        ``_pair``: open, exited early or abandoned, sorted; None for none). None where
        that many markers could reach a bound of the book, which makes the order of
        closing matter: ``add_packed`` then."""
        if (
            self._closed_count + markers > self.max_closed
            or len(self._open) + markers > self.max_open
            or len(self._early_stops) + markers > self.max_open
        ):
            return None
        special = None
        if self._open or self._early_stops or self._abandoned:
            serials = {*self._open, *self._early_stops, *self._abandoned}
            special = np.array(sorted(serials), np.int64)
        return self._known_through, self._entry_floor, not self._known_above, special

    def add_scanned(
        self,
        pairs: I64,
        left: list[tuple[int, int]],
        above: list[tuple[int, int]],
        *,
        known_through: int,
        entry_floor: int,
        one_section: bool,
        ascending: bool,
    ) -> None:
        """The compiled marker pass's results (the state was ``scan_state``'s): entries
        closed in the buffer (``pairs``: section, entry id, exit id by row, by serial;
        ``one_section``: all of one section; ``ascending``: entry ids ascend), the
        markers left for ``_pair`` (sorted), later serials heard of (serial, highest
        entry-marker id), and the known-through serial and floor after them."""
        self._known_through, self._entry_floor = known_through, entry_floor
        if above:
            heard = self._known_above
            for s, c in above:
                prev = heard.get(s)
                if prev is None or prev < c:
                    heard[s] = c
        n = len(pairs)
        if n:
            if one_section:
                self._intervals(int(pairs[0, 0])).extend(pairs[:, 1], pairs[:, 2], ascending)
            else:
                sections = pairs[:, 0]
                for section in np.unique(sections).tolist():
                    rows = pairs[sections == section]
                    self._intervals(section).extend(rows[:, 1], rows[:, 2], ascending)
            self._closed_count += n
        if left:
            self._pair(left)
        self._advance()

    def _advance(self) -> None:
        """Move ``_known_through`` over the serials heard of since."""
        above = self._known_above
        s, floor = self._known_through, self._entry_floor
        while s + 1 in above:
            s += 1
            floor = max(floor, above.pop(s))
        self._known_through, self._entry_floor = s, floor
        if len(above) > self.max_open:
            # A marker that never comes (lost past a bound) must not hold kernels for
            # ever: give up on the entries before the oldest heard of.
            self.give_up(min(above) - 1)

    @property
    def known_through(self) -> int:
        """Every entry up to this serial has shown a marker (or was given up on)."""
        return self._known_through

    def give_up(self, through: int) -> int:
        """Entries up to serial ``through`` whose markers have not come will not (a
        report's fence waited for them): stop holding kernels for them. Returns how
        many of them had shown no marker at all (counted in ``lost_markers``)."""
        above = self._known_above
        s, floor, lost = self._known_through, self._entry_floor, 0
        while s < through:
            s += 1
            c = above.pop(s, None)
            if c is None:
                lost += 1
            else:
                floor = max(floor, c)
        self._known_through, self._entry_floor = s, floor
        self.lost_markers += lost
        self._advance()
        return lost

    def abandon(self, serials: Iterable[int]) -> None:
        """Entries that will never get their exit marker (sending it failed): forget
        them, so they do not hold every later kernel pending. Their markers may still
        be on the way; they are skipped when they come."""
        for s in serials:
            if s > self._known_through:
                self._known_above.setdefault(s, -1)
            if self._open.pop(s, None) is None:
                if len(self._abandoned) >= self.max_open:
                    self._abandoned.clear()  # bounded; at worst a late marker opens it
                self._abandoned.add(s)
            self._early_stops.pop(s, None)
        self._advance()

    def _close(self, section: int, start: int, stop: int) -> None:
        if self._closed_count >= self.max_closed:
            self.lost_markers += 1
            return
        iv = self._closed.get(section)
        if iv is None:
            iv = self._closed[section] = _Intervals()
        iv.append(start, stop)
        self._closed_count += 1

    def _intervals(self, section: int) -> _Intervals:
        iv = self._closed.get(section)
        if iv is None:
            iv = self._closed[section] = _Intervals()
        return iv

    def retire(self) -> None:
        """Forget entries closed before the previous call (their kernels have arrived)."""
        self._retiring = self._closed
        self._closed = {}
        self._closed_count = 0
        # An entry open across two retires lost its exit marker (or never exits): drop it,
        # so it cannot hold every later kernel pending.
        for serial in self._stale & self._open.keys():
            del self._open[serial]
            self.lost_markers += 1
        for serial in self._stale & self._early_stops.keys():
            del self._early_stops[serial]
            self.lost_markers += 1
        self._stale = set(self._open) | set(self._early_stops)

    @property
    def open_entries(self) -> int:
        return len(self._open)

    def pending_bounds(self) -> tuple[int, int]:
        """(after, before): kernels with a correlation id above ``after`` may belong to
        an entry still open or to one not heard of yet, below ``before`` to an exit
        whose entry has not come yet; either kind waits for more markers."""
        after = min(c for _, c in self._open.values()) if self._open else _NEVER_ABOVE
        sent = self.sent
        if sent is not None and sent() > self._known_through:
            after = min(after, self._entry_floor)
        before = max(self._early_stops.values()) if self._early_stops else 0
        return after, before

    def interval_lists(self) -> list[tuple[int, I64, I64]]:
        """(section id, starts, running maximum of stops) of every list ``assign``
        reads, by section id (those of one section next to each other)."""
        lists = [
            (sec, *iv.arrays())
            for book in (self._retiring, self._closed)
            for sec, iv in book.items()
            if len(iv)
        ]
        return sorted(lists, key=lambda item: item[0])

    def interval_refs(self) -> list[tuple[int, int, int, int]]:
        """``interval_lists`` as (section id, starts' address, running maximum's
        address, length), for the compiled fold."""
        refs = [
            (sec, *iv.refs())
            for book in (self._retiring, self._closed)
            for sec, iv in book.items()
            if len(iv)
        ]
        if len(refs) > 1:
            refs.sort(key=_packed)
        return refs

    def assign(self, correlation_ids: U32) -> Assignment:
        corr = correlation_ids.astype(np.int64)
        n = len(corr)
        any_section = np.zeros(n, np.bool_)
        sections: dict[int, Mask] = {}
        for book in (self._retiring, self._closed):
            for sec, iv in book.items():
                inside = _inside(corr, iv)
                if inside.any():
                    prev = sections.get(sec)
                    sections[sec] = inside if prev is None else (prev | inside)
                    any_section |= inside
        after, before = self.pending_bounds()
        pending = (corr > after) | (corr < before)
        # A kernel still waiting for a marker is counted once, when it is resolved.
        if pending.any():
            for sec in sections:
                sections[sec] &= ~pending
            any_section &= ~pending
        return Assignment(sections=sections, any_section=any_section, pending=pending)


def _inside(corr: I64, iv: _Intervals) -> Mask:
    # Nested entries of one section (recursion) merge into their enclosing interval:
    # the running maximum of stops.
    starts, stops = iv.arrays()
    idx = np.searchsorted(starts, corr, side="left") - 1  # strictly after the entry marker
    # Clamped instead of masked (three fewer passes): idx -1 means before every entry.
    inside: Mask = (corr < stops[np.maximum(idx, 0)]) & (idx >= 0)
    return inside
