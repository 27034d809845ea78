"""A buffer's section markers read into the marker book by the compiled pass.

``pk_markers`` (``_native.c``) does for a decoded buffer what the window builder's
Python path does marker by marker: pick our external-correlation records and memset
markers (their values looked up in the marker ring), count fences, sort, keep the
book's count of the serials heard of, and close each entry whose entry and exit
markers both came in this buffer. Only what needs the book's Python state (entries
open or exited early or abandoned, markers after a gap in the serials) comes back to
``MarkerBook``. The results are the Python path's on every input
(tests/unit/cupti_ext/test_marker_scan.py); where the library is not built, or a bound
of the book could be reached, the Python path runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from . import native
from .attribution import MarkerBook
from .markers import MemsetMarkers
from .records import DecodedBuffer


class MarkerScan:
    """The compiled pass's scratch arrays, reused from one buffer to the next."""

    def __init__(self) -> None:
        self._cap = 0
        self._marks: npt.NDArray[np.uint8] = np.empty(0, np.uint8)
        self._pairs: npt.NDArray[np.int64] = np.empty((0, 3), np.int64)
        self._left: npt.NDArray[np.uint64] = np.empty((0, 2), np.uint64)
        self._above: npt.NDArray[np.int64] = np.empty((0, 2), np.int64)
        self._ptrs = (0, 0, 0, 0)
        self._counts = np.zeros(native.MARKER_COUNTS, np.int64)
        self._counts_ptr = native.ptr(self._counts)
        self._ring: Any = None
        self._ring_ptrs = (0, 0)

    def _ensure(self, n: int) -> None:
        if n <= self._cap:
            return
        cap = max(n, 2 * self._cap, 64)
        self._marks = np.empty(cap * native.MARK_BYTES, np.uint8)
        self._pairs = np.empty((cap // 2 + 1, 3), np.int64)
        self._left = np.empty((cap, 2), np.uint64)
        self._above = np.empty((cap, 2), np.int64)
        self._ptrs = tuple(  # type: ignore[assignment]
            native.ptr(a) for a in (self._marks, self._pairs, self._left, self._above)
        )
        self._cap = cap

    def add(
        self,
        lib: native.NativeLib,
        dec: DecodedBuffer,
        external_kind: int,
        memset: MemsetMarkers | None,
        book: MarkerBook,
    ) -> int | None:
        """Read ``dec``'s markers into ``book``; the fences among them, or None where
        the book could reach a bound (the caller takes the Python path: nothing was
        changed)."""
        ne = len(dec.external_kind)
        nm = 0 if memset is None else len(dec.memset_correlation_id)
        n = ne + nm
        if not n:
            return 0
        state = book.scan_state(n)
        if state is None:
            return None
        known, floor, advance, special = state
        self._ensure(n)
        ptr = native.ptr
        if nm:
            assert memset is not None
            ring = memset.ring
            if ring is not self._ring:
                self._ring, self._ring_ptrs = ring, (ptr(ring.ids), ptr(ring.seqs))
            m_ptrs: tuple[int | None, ...] = (
                ptr(dec.memset_correlation_id),
                ptr(dec.memset_value),
                ptr(dec.memset_bytes),
                ptr(dec.memset_stream),
            )
            stream_id, nbytes, mask = memset.stream_id, memset.nbytes, ring.mask
            ring_ids, ring_seqs = self._ring_ptrs
        else:
            m_ptrs = (None, None, None, None)
            stream_id, nbytes, mask, ring_ids, ring_seqs = -1, 0, 0, None, None
        e_ptrs: tuple[int | None, ...] = (
            (ptr(dec.external_correlation_id), ptr(dec.external_id), ptr(dec.external_kind))
            if ne
            else (None, None, None)
        )
        marks, pairs, left, above = self._ptrs
        lib.lib.pk_markers(
            *e_ptrs,
            ne,
            external_kind,
            *m_ptrs,
            nm,
            stream_id,
            nbytes,
            ring_ids,
            ring_seqs,
            mask,
            None if special is None else ptr(special),
            0 if special is None else len(special),
            known,
            floor,
            advance,
            marks,
            pairs,
            left,
            above,
            self._counts_ptr,
        )
        fences, lost, n_pairs, n_left, n_above, known, floor, _, ascending, one = (
            self._counts.tolist()
        )
        if memset is not None:
            memset.lost += lost
        book.add_scanned(
            self._pairs[:n_pairs],
            [(p, c) for p, c in self._left[:n_left].tolist()] if n_left else [],
            [(s, c) for s, c in self._above[:n_above].tolist()] if n_above else [],
            known_through=known,
            entry_floor=floor,
            one_section=bool(one),
            ascending=bool(ascending),
        )
        return int(fences)


__all__ = ["MarkerScan"]
