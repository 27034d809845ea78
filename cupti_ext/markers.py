"""Section markers carried by memset records: which of them are ours, and what they say.

A memset marker is a 244-byte ``cuMemsetD32Async`` on a private stream and buffer of the
backend. CUPTI's MEMSET record keeps the call's correlation id (from the same counter
as kernel launches), the 32-bit value written, the size and the stream; the stream and
size tell our markers from the program's memsets, and the value indexes a ring holding
the marker's 64-bit external id (see attribution.py). Switching the MEMSET kind on and
off costs ~7 µs on the H200, against ~57 µs for the DRIVER kind an API-record marker
needs once a CUDA context exists.

Nothing here touches CUDA or CUPTI: the backend writes the ring on the training thread
when it emits a marker; the window builder reads it on CUPTI's buffer thread, always
after the write (a record exists only once its call was made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

U32 = npt.NDArray[np.uint32]
U64 = npt.NDArray[np.uint64]

MARKER_WORDS = 61
"""32-bit words a memset marker writes: an unusual size, one of the two tests for ours."""
MARKER_BYTES = MARKER_WORDS * 4


class MarkerRing:
    """Marker sequence number (the memset value) -> external id, for the last ``size``
    markers. A record older than that (or a value not ours) is reported as not found.
    Two numpy arrays (``ids``, ``seqs``), which the compiled marker pass reads
    (native.py), written through memoryviews: ``put`` runs on the training thread at
    every marker, and a memoryview store costs ~40 ns against a numpy one's ~60 (a
    list's 13; the compiled pass saves far more per marker at the report)."""

    def __init__(self, size: int = 1 << 16) -> None:
        if size < 1 or size & (size - 1):
            raise ValueError(f"size={size} must be a power of two")
        self.mask = size - 1
        self.ids = np.zeros(size, np.uint64)
        self.seqs = np.full(size, -1, np.int64)  # -1: never written
        self._ids = memoryview(self.ids)  # type: ignore[arg-type]  # numpy exports one
        self._seqs = memoryview(self.seqs)  # type: ignore[arg-type]
        self._next = 0

    def put(self, external_id: int) -> int:
        """Store ``external_id``; return the 32-bit value the marker must write."""
        seq = self._next
        self._next = (seq + 1) & 0xFFFFFFFF
        slot = seq & self.mask
        # The id before the sequence number: a reader that sees the new number (on
        # CUPTI's thread) sees the new id too.
        self._ids[slot] = external_id
        self._seqs[slot] = seq
        return seq

    def get(self, value: int) -> int | None:
        """The external id a marker's value stands for; None if it left the ring."""
        slot = value & self.mask
        return int(self._ids[slot]) if self._seqs[slot] == value else None

    def resolve(
        self, correlations: list[int], values: list[int]
    ) -> tuple[list[tuple[int, int]], int]:
        """(external id, correlation id) of each marker record whose value is still in
        the ring, and how many were not."""
        ids, seqs, mask = self._ids, self._seqs, self.mask
        out = []
        for c, v in zip(correlations, values, strict=True):
            slot = v & mask
            if seqs[slot] == v:
                out.append((ids[slot], c))
        return out, len(values) - len(out)


@dataclass(slots=True)
class MemsetMarkers:
    """How to recognise our memset markers in decoded records."""

    stream_id: int
    """CUPTI's id of the backend's private stream."""
    ring: MarkerRing = field(default_factory=MarkerRing)
    nbytes: int = MARKER_BYTES
    lost: int = 0
    """Our marker records whose value had left the ring (their entries go unattributed)."""

    def select(
        self, correlation_id: U32, value: U32, nbytes: U64, stream: U32
    ) -> list[tuple[int, int]]:
        """(external id, marker correlation id) of the records that are our markers, as
        Python ints (what the marker book reads; a buffer holds a few dozen markers,
        for which numpy's cost per call was most of the work)."""
        ours = (stream == self.stream_id) & (nbytes == self.nbytes)
        if not ours.all():
            correlation_id, value = correlation_id[ours], value[ours]
        pairs, lost = self.ring.resolve(correlation_id.tolist(), value.tolist())
        self.lost += lost
        return pairs
