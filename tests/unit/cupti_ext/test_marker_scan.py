"""The compiled marker pass (pk_markers, marker_scan.py) leaves the marker book, the
memset markers and every window exactly as the Python path does, on any input: markers
of both kinds in any order within and across buffers (kernels before their markers,
exits before entries), fences, duplicated and missing markers, other tools' ids and
the program's memsets, ring values gone, abandoned entries, reports (settle, take)
between buffers, and bounds of the book small enough to be reached."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from buffers import LAYOUT, OURS, as_buffer, kernels, marker
from hypothesis import example, given, settings
from hypothesis import strategies as st
from native_paths import WINDOW_NAMES, both, fresh_native, window_figures

from pacekeeper.cupti_ext import native
from pacekeeper.cupti_ext.attribution import MarkerBook, encode_external_id
from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
from pacekeeper.cupti_ext.markers import MARKER_BYTES, MarkerRing, MemsetMarkers
from pacekeeper.cupti_ext.records import decode_span, record_offsets
from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

__all__ = ["fresh_native"]  # the fixture, used by every test here
STREAM = 7


def memset_record(corr: int, value: int, nbytes: int = MARKER_BYTES, stream: int = STREAM) -> bytes:
    m = np.zeros(1, dtype=LAYOUT.memset_dtype)
    m["kind"], m["correlation_id"], m["value"] = LAYOUT.memset_kind, corr, value
    m["bytes"], m["stream_id"] = nbytes, stream
    return m.tobytes()


def book_state(book: MarkerBook) -> dict[str, Any]:
    """Everything the book decides with, in a canonical form: each closed list as the
    sorted multiset of its (start, stop) entries, and what ``interval_lists`` gives."""

    def entries(lists: dict[int, Any]) -> dict[int, list[tuple[int, int]]]:
        out = {}
        for sec, iv in lists.items():
            iv._move_new()
            n = iv._n
            out[sec] = sorted(zip(iv._starts[:n].tolist(), iv._stops[:n].tolist(), strict=True))
        return {k: v for k, v in out.items() if v}

    return {
        "closed": entries(book._closed),
        "retiring": entries(book._retiring),
        "closed_count": book._closed_count,
        "open": dict(book._open),
        "early_stops": dict(book._early_stops),
        "abandoned": set(book._abandoned),
        "stale": set(book._stale),
        "lost_markers": book.lost_markers,
        "known_through": book._known_through,
        "entry_floor": book._entry_floor,
        "known_above": dict(book._known_above),
        "pending_bounds": book.pending_bounds(),
        "lists": [(s, a.tolist(), b.tolist()) for s, a, b in book.interval_lists()],
    }


_SERIAL = st.integers(0, 9)  # 0: a fence
_SECTION = st.integers(0, 3)
_CORR = st.integers(1, 120)
_RECORD = st.one_of(
    # an external-correlation marker: ours, or another tool's kind
    st.tuples(st.just("x"), _SERIAL, _SECTION, st.booleans(), _CORR, st.booleans()),
    # a memset marker: ours, on another stream, of another size, or a value not in the ring
    st.tuples(
        st.just("m"),
        _SERIAL,
        _SECTION,
        st.booleans(),
        _CORR,
        st.sampled_from(["ours", "ours", "ours", "stream", "bytes", "gone"]),
    ),
    st.tuples(st.just("k"), _CORR, st.integers(1, 4)),
    # a whole entry: its entry and exit markers, of one kind, side by side
    st.tuples(st.just("p"), st.integers(1, 9), _SECTION, _CORR, _CORR, st.booleans()),
)
_OP = st.one_of(
    st.tuples(st.just("buffer"), st.lists(_RECORD, max_size=16)),
    st.tuples(st.just("abandon"), st.lists(st.integers(1, 9), max_size=3)),
    st.tuples(st.just("settle"), st.integers(0, 10)),
    st.tuples(st.just("sent"), st.integers(0, 10)),
    st.tuples(st.just("take")),
)


def _run(ops: list[tuple[Any, ...]], ring_size: int, max_open: int, max_closed: int) -> list[Any]:
    b = KernelWindowBuilder(OURS, keys=KernelKeyTable(resolve_name=WINDOW_NAMES.__getitem__))
    b.book.max_open, b.book.max_closed = max_open, max_closed
    sent = [10]
    b.book.sent = lambda: sent[0]
    memset = b.memset_markers = MemsetMarkers(stream_id=STREAM, ring=MarkerRing(ring_size))
    seen: list[Any] = []
    for op in ops:
        match op:
            case ("buffer", records):
                parts = []
                expanded: list[Any] = []
                for r in records:
                    if r[0] == "p":
                        _, serial, section, entry, exit_, memset_kind = r
                        kind = "m" if memset_kind else "x"
                        how: Any = "ours" if memset_kind else True
                        expanded.append((kind, serial, section, False, entry, how))
                        expanded.append((kind, serial, section, True, exit_, how))
                    else:
                        expanded.append(r)
                for r in expanded:
                    if r[0] == "x":
                        _, serial, section, stop, corr, ours = r
                        kind = OURS if ours else OURS - 1
                        parts.append(marker(serial, section, stop, corr, kind=kind))
                    elif r[0] == "m":
                        _, serial, section, stop, corr, how = r
                        value = memset.ring.put(encode_external_id(serial, section, stop))
                        parts.append(
                            memset_record(
                                corr,
                                (value + 12345) & 0xFFFFFFFF if how == "gone" else value,
                                nbytes=64 if how == "bytes" else MARKER_BYTES,
                                stream=STREAM + 1 if how == "stream" else STREAM,
                            )
                        )
                    else:
                        parts.append(kernels([r[1]], name_ptr=r[2], dur_ns=r[1] * 3))
                if parts:
                    raw = as_buffer(*parts)
                    offsets, whole = record_offsets(raw, LAYOUT)
                    assert whole
                    b.add(decode_span(raw, offsets, LAYOUT), len(offsets))
            case ("abandon", serials):
                b.book.abandon(serials)
            case ("settle", through):
                b.settle(through)
            case ("sent", value):
                sent[0] = value
            case ("take",):
                seen.append(window_figures(b.take(["a", "b", "c", "d"])))
        seen.append((book_state(b.book), b.fences_seen, memset.lost, b.pending_records))
    seen.append(window_figures(b.take(["a", "b", "c", "d"])))
    return seen


@settings(max_examples=300, deadline=None)
# A serial heard of before its predecessor, then both in one buffer (the book's
# ``above`` already holds the later one, with a higher entry id).
@example(
    ops=[
        ("buffer", [("x", 2, 0, False, 50, True)]),
        ("buffer", [("p", 1, 0, 10, 20, False), ("x", 2, 0, False, 40, True)]),
    ],
    ring_size=1024,
    max_open=65536,
    max_closed=1 << 20,
)
# Entries open up to the bound, then a whole entry: its entry marker is lost.
@example(
    ops=[
        (
            "buffer",
            [
                ("x", 1, 0, False, 10, True),
                ("x", 2, 0, False, 11, True),
                ("p", 3, 0, 20, 30, False),
            ],
        )
    ],
    ring_size=1024,
    max_open=2,
    max_closed=1 << 20,
)
@given(
    ops=st.lists(_OP, max_size=12),
    ring_size=st.sampled_from([4, 1024]),
    max_open=st.sampled_from([2, 12, 65536]),
    max_closed=st.sampled_from([3, 20, 1 << 20]),
)
def test_the_compiled_marker_pass_leaves_the_book_and_windows_as_python_does(
    ops, ring_size, max_open, max_closed
) -> None:
    compiled, python_path = both(lambda: _run(ops, ring_size, max_open, max_closed))
    assert compiled == python_path


def _steps(steps: int, sections: int = 1, late_kernels: bool = False) -> list[tuple[Any, ...]]:
    """Steps of entry, kernels, exit; one buffer of all of them, or the kernels in a
    buffer of their own before the markers' (``late_kernels``)."""
    markers: list[Any] = []
    kernel_records: list[Any] = []
    corr = 1
    for serial in range(1, steps + 1):
        section = serial % sections
        markers.append(("m", serial, section, False, corr, "ours"))
        kernel_records += [("k", corr + i, 1 + i % 3) for i in range(1, 5)]
        markers.append(("m", serial, section, True, corr + 5, "ours"))
        corr += 6
    if late_kernels:
        return [("sent", steps), ("buffer", kernel_records), ("buffer", markers), ("take",)]
    return [("sent", steps), ("buffer", markers + kernel_records), ("take",)]


@pytest.mark.parametrize(
    ("sections", "late_kernels"), [(1, False), (3, False), (1, True), (2, True)]
)
def test_whole_entries_are_paired_in_c_without_the_python_loop(
    monkeypatch: pytest.MonkeyPatch, sections: int, late_kernels: bool
) -> None:
    """The common case (every entry's markers in one buffer) never reaches the book's
    per-marker loop, and counts every kernel; the Python path agrees."""
    ops = _steps(40, sections, late_kernels)
    python_path = both(lambda: _run(ops, 1 << 16, 65536, 1 << 20))[1]
    native.reset()
    pairs: list[int] = []

    def forbidden(self: MarkerBook, markers: Any) -> None:
        pairs.append(len(markers))

    monkeypatch.setattr(MarkerBook, "_pair", forbidden)
    monkeypatch.setattr(MarkerBook, "add_packed", forbidden)
    compiled = _run(ops, 1 << 16, 65536, 1 << 20)
    assert pairs == []
    assert compiled == python_path
    assert compiled[-3]["counts"][:5] == (160, 0, 0, 0, 0)
