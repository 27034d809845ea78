"""Kernels belong to the section entry whose marker interval holds their correlation id."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.cupti_ext.attribution import (
    MarkerBook,
    _Intervals,
    decode_external_ids,
    encode_external_id,
)


def book_with(entries: list[tuple[int, int, int, int]]) -> MarkerBook:
    """entries: (serial, section, start corr, stop corr)."""
    book = MarkerBook()
    ids, corr = [], []
    for serial, sec, c0, c1 in entries:
        ids += [encode_external_id(serial, sec, False), encode_external_id(serial, sec, True)]
        corr += [c0, c1]
    book.add(np.array(ids, np.uint64), np.array(corr, np.uint32))
    return book


def test_external_ids_round_trip():
    ids = np.array([encode_external_id(123456, 65000, True)], np.uint64)
    serial, section, stop = decode_external_ids(ids)
    assert (serial[0], section[0], bool(stop[0])) == (123456, 65000, True)


def test_interleaved_entries_attribute_each_kernel_to_its_own_section():
    book = book_with([(1, 0, 10, 20), (2, 1, 30, 40), (3, 0, 50, 60)])
    asg = book.assign(np.array([15, 35, 45, 55, 5], np.uint32))
    assert asg.sections[0].tolist() == [True, False, False, True, False]
    assert asg.sections[1].tolist() == [False, True, False, False, False]
    assert asg.any_section.tolist() == [True, True, False, True, False]
    assert not asg.pending.any()


def test_nested_entries_count_a_kernel_in_both_sections():
    book = book_with([(1, 0, 10, 100), (2, 1, 20, 30)])
    asg = book.assign(np.array([25, 50], np.uint32))
    assert asg.sections[0].tolist() == [True, True]
    assert asg.sections[1].tolist() == [True, False]


def test_kernels_after_an_open_entry_wait_for_its_exit_marker():
    book = MarkerBook()
    book.add(np.array([encode_external_id(1, 0, False)], np.uint64), np.array([10], np.uint32))
    first = book.assign(np.array([12, 13], np.uint32))
    assert first.pending.tolist() == [True, True]
    assert not first.any_section.any()
    book.add(np.array([encode_external_id(1, 0, True)], np.uint64), np.array([20], np.uint32))
    later = book.assign(np.array([12, 13], np.uint32))
    assert later.sections[0].tolist() == [True, True]
    assert not later.pending.any()


def test_exit_marker_seen_before_entry_marker_still_closes_the_interval():
    book = MarkerBook()
    book.add(np.array([encode_external_id(1, 4, True)], np.uint64), np.array([20], np.uint32))
    book.add(np.array([encode_external_id(1, 4, False)], np.uint64), np.array([10], np.uint32))
    assert book.assign(np.array([15], np.uint32)).sections[4].tolist() == [True]


def test_intervals_survive_one_retire_for_late_kernel_records_then_go():
    book = book_with([(1, 0, 10, 20)])
    book.retire()
    assert book.assign(np.array([15], np.uint32)).sections[0].tolist() == [True]
    book.retire()
    assert not book.assign(np.array([15], np.uint32)).any_section.any()


def test_entry_that_never_exits_is_dropped_after_two_retires_and_counted():
    book = MarkerBook()
    book.add(np.array([encode_external_id(1, 0, False)], np.uint64), np.array([10], np.uint32))
    book.retire()
    assert book.open_entries == 1
    book.retire()
    assert book.open_entries == 0
    assert book.lost_markers == 1
    assert not book.assign(np.array([15], np.uint32)).pending.any()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(1, 30)), min_size=1, max_size=12),
    st.lists(st.integers(0, 400), max_size=40),
)
def test_vectorized_attribution_matches_a_plain_loop(entries, kernel_corr):
    # Disjoint entries laid out one after the other, sections chosen at random.
    spans, c, full = [], 1, []
    for serial, (sec, length) in enumerate(entries, start=1):
        spans.append((serial, sec, c, c + length))
        full.append((sec, c, c + length))
        c += length + 1
    book = book_with(spans)
    corr = np.array(kernel_corr, np.uint32)
    asg = book.assign(corr)
    for i, k in enumerate(kernel_corr):
        expected = {sec for sec, c0, c1 in full if c0 < k < c1}
        got = {sec for sec, mask in asg.sections.items() if mask[i]}
        assert got == expected
        assert bool(asg.any_section[i]) == bool(expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), max_size=300))
def test_interval_store_matches_sorting_everything_each_time(pairs):
    # Entries usually close in order (O(1) appends); any order must give the same arrays.
    iv = _Intervals()
    for i, (start, stop) in enumerate(pairs):
        iv.append(start, stop)
        if i % 37 == 0 or i == len(pairs) - 1:
            ref = sorted(pairs[: i + 1], key=lambda p: p[0])
            starts, cummax = iv.arrays()
            assert starts.tolist() == [p[0] for p in ref]
            assert cummax.tolist() == np.maximum.accumulate([p[1] for p in ref]).tolist()
    assert len(iv) == len(pairs)


def test_an_abandoned_entry_holds_no_kernel_back_whether_its_marker_came_or_not():
    book = MarkerBook()
    start = encode_external_id(1, 0, False)
    book.add(np.array([start], np.uint64), np.array([10], np.uint32))
    assert book.assign(np.array([11, 12], np.uint32)).pending.all()  # waits for the exit
    book.abandon([1, 2])  # 1 is open; 2's entry marker is still on the way
    asg = book.assign(np.array([11, 12], np.uint32))
    assert not asg.pending.any() and not asg.any_section.any()
    book.add(np.array([encode_external_id(2, 0, False)], np.uint64), np.array([20], np.uint32))
    assert book.open_entries == 0
    assert not book.assign(np.array([21], np.uint32)).pending.any()
