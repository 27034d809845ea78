"""Memset section markers: the value ring and telling our records from the program's."""

from __future__ import annotations

import numpy as np
import pytest

from pacekeeper.cupti_ext.markers import MARKER_BYTES, MarkerRing, MemsetMarkers


def _lookup(ring: MarkerRing, values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(ids found, which values were found) through the ring's ``get``."""
    got = [ring.get(v) for v in values]
    return np.array([g for g in got if g is not None]), np.array([g is not None for g in got])


def test_ring_maps_each_value_back_to_its_external_id():
    ring = MarkerRing(size=8)
    values = [ring.put(1000 + i) for i in range(5)]
    ids, found = _lookup(ring, values)
    assert found.all() and ids.tolist() == [1000, 1001, 1002, 1003, 1004]


def test_ring_forgets_values_older_than_its_size_rather_than_guessing():
    ring = MarkerRing(size=4)
    values = [ring.put(i) for i in range(6)]
    ids, found = _lookup(ring, values)
    assert found.tolist() == [False, False, True, True, True, True]
    assert ids.tolist() == [2, 3, 4, 5]


def test_ring_values_wrap_at_32_bits():
    ring = MarkerRing(size=4)
    ring._next = 0xFFFFFFFF
    assert ring.put(7) == 0xFFFFFFFF
    assert ring.put(8) == 0
    ids, found = _lookup(ring, [0xFFFFFFFF, 0])
    assert found.all() and ids.tolist() == [7, 8]


@pytest.mark.parametrize("size", [0, 3, 100])
def test_ring_size_must_be_a_power_of_two(size):
    with pytest.raises(ValueError, match=f"size={size} must be a power of two"):
        MarkerRing(size=size)


def test_only_records_on_our_stream_with_our_size_are_markers():
    m = MemsetMarkers(stream_id=9)
    v0, v1 = m.ring.put(111), m.ring.put(222)
    corr = np.array([10, 11, 12, 13], np.uint32)
    value = np.array([v0, v0, v1, v1], np.uint32)
    nbytes = np.array([MARKER_BYTES, MARKER_BYTES, 64, MARKER_BYTES], np.uint64)
    stream = np.array([9, 3, 9, 9], np.uint32)  # record 1: the program's stream
    assert m.select(corr, value, nbytes, stream) == [(111, 10), (222, 13)]
    assert m.lost == 0


def test_marker_records_whose_value_left_the_ring_are_counted_as_lost():
    m = MemsetMarkers(stream_id=9, ring=MarkerRing(size=2))
    old = m.ring.put(1)
    for i in range(2):
        m.ring.put(2 + i)
    got = m.select(
        np.array([5], np.uint32),
        np.array([old], np.uint32),
        np.array([MARKER_BYTES], np.uint64),
        np.array([9], np.uint32),
    )
    assert got == [] and m.lost == 1
