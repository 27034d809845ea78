"""Which records a CUPTI library writes, by its version, and the layout read from them:
a newer library's kernel records read with 13.0's struct misread every record after the
first (CUPTI 13.4 on the H200, 2026-12-03)."""

from __future__ import annotations

import types

import numpy as np
import pytest
from cupti import cupti
from fake_cupti import step

from pacekeeper.cupti_ext import select_backend
from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
from pacekeeper.cupti_ext.records import (
    RecordLayout,
    RecordLayoutUnavailable,
    record_versions,
)


@pytest.mark.parametrize(
    ("api_version", "records"),
    [
        (None, (10, 4)),  # unknown: cupti-python 13.0's pairing
        (130001, (10, 4)),
        (130101, (11, 4)),
        (130202, (11, 4)),
        (130301, (12, 4)),
        (130401, (13, 5)),
        (130500, (13, 5)),
        (140000, (13, 5)),  # newer than the table: its newest
    ],
)
def test_each_library_version_has_its_records(api_version, records):
    assert record_versions(api_version) == records


def _module_with(**dtypes: np.dtype) -> types.SimpleNamespace:
    """cupti-python's parts the layout reads, with the given record dtypes."""
    return types.SimpleNamespace(
        ActivityKind=cupti.ActivityKind,
        activity_external_correlation_dtype=cupti.activity_external_correlation_dtype,
        activity_api_dtype=cupti.activity_api_dtype,
        **dtypes,
    )


def test_the_layout_takes_the_dtypes_of_the_records_written():
    k13 = np.dtype([("kind", np.uint32), ("pad", "V300")])
    m5 = np.dtype([("kind", np.uint32), ("pad", "V100")])
    module = _module_with(
        activity_kernel10_dtype=cupti.activity_kernel10_dtype,
        activity_memset4_dtype=cupti.activity_memset4_dtype,
        activity_kernel13_dtype=k13,
        activity_memset5_dtype=m5,
    )
    newer = RecordLayout.from_cupti(module, 130401)
    assert (newer.kernel_dtype, newer.memset_dtype) == (k13, m5)
    older = RecordLayout.from_cupti(module, 130001)
    assert older.kernel_dtype == cupti.activity_kernel10_dtype
    assert older.memset_dtype == cupti.activity_memset4_dtype


def test_a_cupti_python_older_than_its_library_is_refused_by_name():
    module = _module_with(
        activity_kernel10_dtype=cupti.activity_kernel10_dtype,
        activity_memset4_dtype=cupti.activity_memset4_dtype,
    )
    with pytest.raises(RecordLayoutUnavailable, match=r"CUPTI 13\.4 .*activity_kernel13_dtype"):
        RecordLayout.from_cupti(module, 130401)


def test_the_backend_falls_back_to_events_naming_the_mismatch(fake, libcuda, on_a_gpu):
    # The simulated CUPTI writes 13.0's records; told it is a 13.4 library, whose
    # records this cupti-python has no dtype for, the backend refuses to start and
    # the choice falls back to CUDA events, saying why.
    assert CuptiBackend(cupti_module=fake, libcuda=libcuda).cupti_version is None
    fake.api_version = 130401
    if hasattr(cupti, "activity_kernel13_dtype"):
        pytest.skip("this cupti-python knows CUPTI 13.4's records")
    _, choice = select_backend("auto")
    assert choice.name == "events"
    assert "activity_kernel13_dtype" in choice.reason and "13.4" in choice.reason


def test_a_known_version_decodes_as_before(fake, libcuda, names):
    fake.api_version = 130001
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert b.cupti_version == 130001
        step(b, fake, "step", names["gemm"], 3)
        assert b.collect().records == 3
    finally:
        b.shutdown()
