"""Gated attribution (``PACEKEEPER_KERNEL_ATTRIBUTION=gated``): kernel records on inside
traced entries alone and no section markers, against the simulated CUPTI in each
marker mode (fences still use the mode's marker where they need one)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_cupti import FakeLibcuda, short, step

from pacekeeper.cupti_ext import select_backend
from pacekeeper.cupti_ext.cupti_backend import ATTRIBUTION_ENV, CuptiBackend
from pacekeeper.cupti_ext.cupti_env import attribution_from_env


@pytest.fixture
def gated(fake, libcuda, marker) -> Iterator[CuptiBackend]:
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1, attribution="gated")
    assert (b.attribution, b.marker_mode) == ("gated", marker)
    yield b
    b.shutdown()


def test_only_kernels_of_traced_entries_are_recorded_and_all_count(gated, fake, libcuda, names):
    memsets = libcuda.called["cuMemsetD32Async"]
    api_records = sum(fake.api_records.values())
    kernel = int(fake.ActivityKind.CONCURRENT_KERNEL)
    for _ in range(3):
        step(gated, fake, "A", names["gemm"], 3)
        assert kernel not in fake.enabled  # switched per entry: nothing traced between
        for _ in range(2):
            fake.launch(names["relu"])  # between sections: never recorded
        gated.start("B")
        gated.start("inner")  # nested: nothing more to do
        fake.launch(names["relu"])
        fake.launch(names["nccl"])  # communication: counted apart, not timed
        gated.stop("inner")
        gated.stop("B")
    w = gated.collect()
    assert short(w.kernels) == {"gemm": 9, "relu": 3}
    assert (w.records, w.comm_records, w.unattributed_records) == (12, 3, 0)
    assert (w.held_records, w.lost_markers, w.dropped_records) == (0, 0, 0)
    assert w.sections == {}  # no markers, so no per-section table
    # No section marker was made: no memset, no API record for an entry.
    assert libcuda.called["cuMemsetD32Async"] == memsets
    assert sum(fake.api_records.values()) == api_records
    assert gated.last_collect["quiet"] == 1.0
    assert gated.failures == {}


def test_sampled_entries_alone_are_recorded(fake, libcuda, marker, names):
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=4, attribution="gated")
    try:
        for _ in range(8):
            step(b, fake, "step", names["gemm"], 2)
        w = b.collect()
        assert (w.records, w.unattributed_records) == (4, 0)  # entries 1 and 5 of 8
    finally:
        b.shutdown()


def test_a_report_inside_an_entry_counts_what_ran_so_far(gated, fake, names):
    gated.start("step")
    fake.launch(names["gemm"])
    w = gated.collect()
    assert w.records == 1
    fake.launch(names["gemm"])  # still inside: records stay on
    gated.stop("step")
    assert gated.collect().records == 1
    assert gated.failures == {}


def test_the_marker_fence_still_works_where_cupti_keeps_its_buffers(gated, fake, names):
    step(gated, fake, "step", names["gemm"], 3)
    fake.plain_flush_delivers = False
    w = gated.collect()
    assert (w.records, gated.last_collect["quiet"], gated.last_collect["forced_after_plain"]) == (
        3,
        0.0,
        1.0,
    )
    assert gated.failures == {}


def test_the_setting_is_read_and_checked(monkeypatch, fake, libcuda):
    assert attribution_from_env({}) is None  # unset: the backend's default
    assert attribution_from_env({ATTRIBUTION_ENV: " Gated "}) == "gated"
    with pytest.raises(ValueError, match=ATTRIBUTION_ENV):
        attribution_from_env({ATTRIBUTION_ENV: "timing"})
    monkeypatch.setenv(ATTRIBUTION_ENV, "gated")
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        assert b.attribution == "gated"
    finally:
        b.shutdown()
    with pytest.raises(ValueError, match="attribution='x'"):
        CuptiBackend(cupti_module=fake, libcuda=libcuda, attribution="x")
    # A bad value fails initialize's backend choice too, naming the variable.
    monkeypatch.setenv(ATTRIBUTION_ENV, "nope")
    with pytest.raises(ValueError, match=ATTRIBUTION_ENV):
        select_backend("auto")


def test_a_fence_marker_inside_an_entry_is_recorded(gated, fake, names):
    # Records on (inside an entry) but no MEMSET kind switched with them: a fence
    # marker must switch that kind on itself, or its record never comes.
    gated.start("step")
    fake.launch(names["gemm"])
    fake.plain_flush_delivers = False  # no quiet fence: the marker's
    w = gated.collect()
    gated.stop("step")
    assert (w.records, gated.last_collect["quiet"]) == (1, 0.0)
    assert gated.failures == {}


def test_the_default_follows_the_per_section_table(monkeypatch, fake, libcuda):
    # A backend keeping a per-section kernel table needs markers; one without (the
    # detector's) is gated. The variable wins over both, the argument over it.
    monkeypatch.delenv(ATTRIBUTION_ENV, raising=False)
    made = []
    try:
        for stats, env, arg, want in (
            (True, None, None, "markers"),
            (False, None, None, "gated"),
            (False, "markers", None, "markers"),
            (True, "gated", None, "gated"),
            (False, "gated", "markers", "markers"),
        ):
            if env is None:
                monkeypatch.delenv(ATTRIBUTION_ENV, raising=False)
            else:
                monkeypatch.setenv(ATTRIBUTION_ENV, env)
            b = CuptiBackend(
                cupti_module=fake, libcuda=libcuda, section_stats=stats, attribution=arg
            )
            made.append(b)
            assert b.attribution == want, (stats, env, arg)
    finally:
        for b in made:
            b.shutdown()


def test_the_detector_gets_gated_attribution_by_default(monkeypatch, on_a_gpu):
    monkeypatch.delenv(ATTRIBUTION_ENV, raising=False)
    backend, choice = select_backend("auto", section_stats=False)  # as run_state asks
    try:
        assert choice.name == "cupti"
        assert backend.attribution == "gated"  # type: ignore[attr-defined]
    finally:
        backend.shutdown()


def test_callbacks_taken_by_another_tool_are_noticed_without_markers(gated, fake, names, caplog):
    # Gated, no section marker is made: a window of traced entries with no record at
    # all asks for a fence marker, which another tool's callbacks swallow too.
    fake.raw = None  # another tool registered its own buffer callbacks
    step(gated, fake, "step", names["gemm"], 2)
    lost = gated.collect()
    assert lost.records == 0
    assert gated.failures.get("conflict") == 1
    assert "re-attaching" in caplog.text
    step(gated, fake, "step", names["gemm"], 2)
    assert gated.collect().records == 2


def test_entries_that_launch_nothing_are_not_a_conflict(gated, fake, libcuda, names):
    # Sections with no kernel (a CPU-only part of the step): the fence marker comes,
    # so nothing is re-attached and nothing is counted as a failure.
    memsets = libcuda.called["cuMemsetD32Async"]
    for _ in range(3):
        gated.start("step")
        gated.stop("step")
    w = gated.collect()
    assert w.records == 0
    assert gated.failures == {}
    assert gated.last_collect["quiet"] == 0.0  # the probe's fence had a marker
    if gated.marker_mode == "memset":
        assert libcuda.called["cuMemsetD32Async"] == memsets + 1
    step(gated, fake, "step", names["gemm"], 2)
    assert gated.collect().records == 2
    assert gated.last_collect["quiet"] == 1.0  # records came: no probe
