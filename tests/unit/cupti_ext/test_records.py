"""Bulk record decoding with cupti-python's real dtypes, on synthesized buffers."""

from __future__ import annotations

import ctypes

import numpy as np
from buffers import LAYOUT, OURS, as_buffer, kernels, marker
from cupti import cupti

from pacekeeper.cupti_ext.attribution import decode_external_ids
from pacekeeper.cupti_ext.records import (
    decode_addresses,
    decode_span,
    memory_view,
    record_offsets,
)


def test_layout_uses_cupti_pythons_own_record_dtypes():
    assert LAYOUT.kernel_dtype == cupti.activity_kernel10_dtype
    assert LAYOUT.external_dtype == cupti.activity_external_correlation_dtype
    assert LAYOUT.api_dtype == cupti.activity_api_dtype
    assert LAYOUT.kernel_kind == int(cupti.ActivityKind.CONCURRENT_KERNEL)


def test_walk_finds_every_record_in_a_mixed_buffer():
    raw = as_buffer(
        marker(1, 2, False, 10), kernels([11, 12, 13]), marker(1, 2, True, 20), kernels([21])
    )
    offsets, whole = record_offsets(raw, LAYOUT)
    assert whole
    m, k = len(marker(1, 2, False, 10)), LAYOUT.kernel_dtype.itemsize
    e = LAYOUT.external_dtype.itemsize
    assert offsets.tolist() == [0, e, m, m + k, m + 2 * k, 3 * k + m, 3 * k + m + e, 3 * k + 2 * m]


def test_decoded_fields_equal_what_was_written():
    raw = as_buffer(
        marker(5, 3, False, 100),
        kernels([101, 102], name_ptr=0xABC, dur_ns=777, threads=1024),
        marker(5, 3, True, 103),
    )
    offsets, _ = record_offsets(raw, LAYOUT)
    d = decode_span(raw, offsets, LAYOUT)
    assert d.kernels.correlation_id.tolist() == [101, 102]
    assert d.kernels.duration_ns.tolist() == [777, 777]
    assert d.kernels.name_ptr.tolist() == [0xABC, 0xABC]
    assert d.kernels.threads.tolist() == [1024, 1024]
    assert d.external_correlation_id.tolist() == [100, 103]
    assert d.api_correlation_id.tolist() == [100, 103]
    assert d.external_kind.tolist() == [OURS, OURS]
    serial, section, stop = decode_external_ids(d.external_id)
    assert serial.tolist() == [5, 5] and section.tolist() == [3, 3]
    assert stop.tolist() == [False, True]


def test_kernel_without_end_timestamp_is_counted_incomplete_not_timed():
    k = np.frombuffer(kernels([1, 2, 3]), dtype=LAYOUT.kernel_dtype).copy()
    k["end"][1] = 0
    raw = as_buffer(k.tobytes())
    d = decode_span(raw, record_offsets(raw, LAYOUT)[0], LAYOUT)
    assert d.incomplete == 1
    assert d.kernels.correlation_id.tolist() == [1, 3]


def test_unknown_record_kind_stops_the_walk_and_says_so():
    junk = np.zeros(2, dtype=np.int32)
    junk[0] = 9999
    raw = as_buffer(kernels([1, 2]), junk.tobytes(), kernels([3]))
    offsets, whole = record_offsets(raw, LAYOUT)
    assert not whole
    assert len(offsets) == 2


def test_truncated_buffer_is_not_trusted_past_the_last_whole_record():
    raw = as_buffer(kernels([1, 2]))[:-8]
    offsets, whole = record_offsets(raw, LAYOUT)
    assert not whole
    assert len(offsets) == 1


def test_live_memory_decodes_by_address_like_the_byte_view():
    data = b"".join([marker(1, 0, False, 10), kernels([11, 12]), marker(1, 0, True, 13)])
    block = ctypes.create_string_buffer(data, len(data))
    base = ctypes.addressof(block)
    raw = memory_view(base, len(data))
    offsets, _ = record_offsets(raw, LAYOUT)
    by_view = decode_span(raw, offsets, LAYOUT)
    by_address = decode_addresses(offsets.astype(np.uint64) + np.uint64(base), LAYOUT)
    assert by_address.kernels.correlation_id.tolist() == by_view.kernels.correlation_id.tolist()
    assert by_address.external_id.tolist() == by_view.external_id.tolist()


def test_empty_buffer_decodes_to_nothing():
    raw = as_buffer()
    offsets, whole = record_offsets(raw, LAYOUT)
    assert whole and len(offsets) == 0
    assert len(decode_span(raw, offsets, LAYOUT).kernels.correlation_id) == 0
