"""The CUPTI backend's logic (gating, sampling, markers, conflicts, release) against a
simulated CUPTI: this machine has no GPU, so every real CUPTI call would fail. The same
behaviour on the H200 is covered by tests/gpu."""

from __future__ import annotations

import logging

import pytest
from fake_cupti import FakeLibcuda, per_section, short, step

from pacekeeper.cupti_ext import cupti_backend
from pacekeeper.cupti_ext.cupti_backend import (
    BUFFER_BYTES,
    BUFFER_ENV,
    MARKER_ENV,
    CuptiBackend,
    CuptiUnavailable,
    marker_modes_from_env,
)
from pacekeeper.cupti_ext.markers import MARKER_BYTES


@pytest.mark.parametrize("keep_on", [True, False])
def test_raw_buffers_are_used_and_only_section_kernels_are_counted(
    fake, libcuda, marker, names, keep_on
):
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1, keep_records_on=keep_on)
    try:
        assert b.buffer_path == "raw"
        step(b, fake, "A", names["gemm"], 3)
        for _ in range(2):
            fake.launch(names["relu"])  # between sections
        step(b, fake, "B", names["relu"], 4)
        w = b.collect()
        assert short(w.sections["A"]) == {"gemm": 3}
        assert short(w.sections["B"]) == {"relu": 4}
        assert short(w.kernels) == {"gemm": 3, "relu": 4}
        assert w.records == 7 and w.dropped_records == 0
        # Kept on from A to B, records trace what ran between; it counts nowhere.
        assert w.unattributed_records == (2 if keep_on else 0)
    finally:
        b.shutdown()


def test_at_interval_one_records_stay_on_from_entry_to_entry_until_collect(backend, fake, names):
    kernel = int(fake.ActivityKind.CONCURRENT_KERNEL)
    enables = fake.calls[f"enable {kernel}"]
    for _ in range(5):
        step(backend, fake, "step", names["gemm"], 2)
    assert fake.calls[f"enable {kernel}"] - enables == 1
    assert kernel in fake.enabled
    assert backend.collect().records == 10
    assert kernel not in fake.enabled  # a report switches them off: nothing traced idle
    step(backend, fake, "step", names["gemm"], 2)
    assert fake.calls[f"enable {kernel}"] - enables == 2


def test_records_are_switched_per_entry_for_good_once_outside_kernels_cost_more(
    backend, fake, names, caplog
):
    caplog.set_level(logging.INFO)
    kernel = int(fake.ActivityKind.CONCURRENT_KERNEL)
    for _ in range(4):
        step(backend, fake, "forward", names["gemm"], 1)
        for _ in range(30):  # the backward pass, outside any section
            fake.launch(names["relu"])
    w = backend.collect()
    assert w.records == 4 and w.unattributed_records == 4 * 30  # on until the report
    assert "switched per entry" in caplog.text
    for round_ in range(2):
        enables = fake.calls[f"enable {kernel}"]
        for _ in range(4):
            step(backend, fake, "forward", names["gemm"], 1)
            assert kernel not in fake.enabled
            for _ in range(30):
                fake.launch(names["relu"])
        assert fake.calls[f"enable {kernel}"] - enables == 4
        w = backend.collect()
        assert (w.records, w.unattributed_records) == (4, 0), round_


def test_nested_sections_enable_tracing_once_and_count_kernels_in_both(backend, fake, names):
    kernel_enables = f"enable {int(fake.ActivityKind.CONCURRENT_KERNEL)}"
    enables = fake.calls[kernel_enables]
    backend.start("step")
    backend.start("forward")
    fake.launch(names["gemm"])
    backend.stop("forward")
    fake.launch(names["relu"])
    backend.stop("step")
    w = backend.collect()
    assert fake.calls[kernel_enables] - enables == 1
    assert short(w.sections["forward"]) == {"gemm": 1}
    assert short(w.sections["step"]) == {"gemm": 1, "relu": 1}
    assert short(w.kernels) == {"gemm": 1, "relu": 1}


def test_one_outermost_entry_in_n_is_traced(fake, names, marker):
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=4)
    try:
        for _ in range(8):
            b.start("step")
            step(b, fake, "inner", names["gemm"], 2)
            b.stop("step")
        w = b.collect()
        assert w.records == 2 * 2  # entries 1 and 5
        assert short(w.sections["inner"]) == {"gemm": 4}
    finally:
        b.shutdown()


def test_sections_taking_turns_are_each_sampled_on_their_own_count(fake, libcuda, names):
    # forward and backward as separate outermost sections, one in 2 traced: a count
    # over all entries would trace forward every time and backward never.
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=2)
    try:
        for _ in range(4):
            step(b, fake, "forward", names["gemm"], 1)
            step(b, fake, "backward", names["relu"], 1)
        w = b.collect()
        assert per_section(w) == {
            "forward": {"gemm": 2},
            "backward": {"relu": 2},
        }
    finally:
        b.shutdown()


def test_communication_kernels_are_counted_and_left_out(backend, fake, names):
    backend.start("step")
    fake.launch(names["gemm"])
    fake.launch(names["nccl"])
    backend.stop("step")
    w = backend.collect()
    assert short(w.kernels) == {"gemm": 1}
    assert w.comm_records == 1
    assert any("nccl" in full.lower() for full in backend.kernel_names().values())


def test_torch_profiler_pauses_timing_and_it_resumes_after(backend, fake, names, caplog):
    from torch.profiler import ProfilerActivity, profile

    caplog.set_level(logging.WARNING)
    with profile(activities=[ProfilerActivity.CPU]):
        step(backend, fake, "step", names["gemm"], 3)
        assert backend.paused
    assert backend.collect().records == 0
    step(backend, fake, "step", names["gemm"], 3)
    assert not backend.paused
    assert backend.collect().records == 3
    assert "paused" in caplog.text and "resumed" in caplog.text


def test_a_profiler_starting_while_records_are_kept_on_keeps_its_kinds(backend, fake, names):
    from torch.profiler import ProfilerActivity, profile

    kernel = int(fake.ActivityKind.CONCURRENT_KERNEL)
    step(backend, fake, "step", names["gemm"], 1)
    disables = fake.calls[f"disable {kernel}"]
    with profile(activities=[ProfilerActivity.CPU]):
        step(backend, fake, "step", names["gemm"], 1)
        assert backend.paused
        # Switching kernel records off now would cut the profiler's trace short.
        assert fake.calls[f"disable {kernel}"] == disables
    step(backend, fake, "step", names["gemm"], 2)
    assert not backend.paused and kernel in fake.enabled


def test_callbacks_taken_by_another_tool_are_detected_and_taken_back(backend, fake, names, caplog):
    fake.raw = None  # another tool registered its own buffer callbacks
    step(backend, fake, "step", names["gemm"], 2)
    lost = backend.collect()
    assert lost.records == 0 and lost.dropped_records > 0
    assert backend.failures.get("conflict") == 1
    assert "re-attaching" in caplog.text
    step(backend, fake, "step", names["gemm"], 2)
    assert backend.collect().records == 2


def test_shutdown_releases_cupti_and_later_calls_are_harmless(backend, fake, names):
    step(backend, fake, "step", names["gemm"], 2)
    backend.start("step")  # shut down inside a section: kernel tracing must stop too
    backend.shutdown()
    assert not fake.enabled and not fake.driver_apis
    assert not fake.records  # what CUPTI held was flushed
    # No cuptiFinalize from our thread: it races with CUPTI calls elsewhere, and on the
    # H200 a backend started after it got no records.
    assert fake.finalized == 0
    assert backend.collect().records == 2  # traced before shutdown: flushed, not lost
    step(backend, fake, "step", names["gemm"], 2)
    assert backend.collect().records == 0
    backend.shutdown()
    assert not fake.enabled


def test_a_backend_started_after_another_shut_down_gets_its_records(backend, fake, names):
    backend.shutdown()
    second = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        step(second, fake, "step", names["relu"], 4)
        assert short(second.collect().kernels) == {"relu": 4}
    finally:
        second.shutdown()


def test_an_untraced_marker_makes_cupti_unavailable_and_releases_it(fake):
    fake.has_context = False  # no memset markers either
    with pytest.raises(CuptiUnavailable, match="did not trace a section marker"):
        CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake, traced=()), sample_every=1)
    assert not fake.enabled and not fake.driver_apis


def test_raw_buffers_that_receive_nothing_fall_back_to_record_objects(
    monkeypatch, fake, names, marker
):
    monkeypatch.setattr(cupti_backend, "register_callbacks_function", lambda: lambda r, d: 0)
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        assert b.buffer_path == "objects"
        step(b, fake, "step", names["relu"], 3)
        assert short(b.collect().kernels) == {"relu": 3}
    finally:
        b.shutdown()


def test_cupti_failures_are_logged_once_and_never_raised(backend, fake, names, caplog):
    def broken(kind: int) -> None:
        raise RuntimeError("CUPTI_ERROR_UNKNOWN")

    fake.activity_enable = broken  # type: ignore[method-assign]
    for _ in range(3):
        step(backend, fake, "step", names["gemm"], 1)
    assert backend.failures["start"] == 3
    assert caplog.text.count("kernel timing failed") == 1


def test_stop_without_start_is_ignored(backend, fake, names):
    backend.stop("step")
    step(backend, fake, "step", names["gemm"], 1)
    assert backend.collect().records == 1


def test_marker_uses_the_driver_kind_only_around_each_marker_when_per_api_tracing_is_dead(
    monkeypatch, fake, names
):
    # On the H200 a per-API flag set after the CUDA context exists gives no records.
    fake.per_api_alone = False
    libcuda = FakeLibcuda(fake)
    libcuda.failing_memsets.add(1)  # and memset markers are unusable: the last resort
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert b.marker_mode == "driver"
        assert libcuda.called["cuInit"] == 1  # CUPTI traces nothing before cuInit
        step(b, fake, "step", names["gemm"], 3)
        step(b, fake, "other", names["relu"], 2)
        window = b.collect()
        assert per_section(window) == {
            "step": {"gemm": 3},
            "other": {"relu": 2},
        }
        assert window.unattributed_records == 0
        # Kept on through a section, the DRIVER kind traced every launch (4x slower
        # steps on the H200): launches must make no API record, and it is off between.
        launch = int(fake.driver_api_trace_cbid.cuLaunchKernel)
        assert fake.api_records[launch] == 0
        assert int(fake.ActivityKind.DRIVER) not in fake.enabled
    finally:
        b.shutdown()
    assert not fake.enabled and not fake.driver_apis


def test_api_marker_mode_is_kept_where_per_api_tracing_works(fake, names):
    fake.has_context = False  # a detector started before the model's CUDA context
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        assert b.marker_mode == "api"
        step(b, fake, "step", names["gemm"], 2)
        assert short(b.collect().kernels) == {"gemm": 2}
        assert int(fake.ActivityKind.DRIVER) not in fake.enabled
    finally:
        b.shutdown()


def test_memset_markers_attribute_sections_with_no_api_record_at_all(monkeypatch, fake, names):
    monkeypatch.setenv(MARKER_ENV, "memset")
    fake.per_api_alone = False  # a context exists: per-API tracing gives nothing
    libcuda = FakeLibcuda(fake)
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert b.marker_mode == "memset"
        step(b, fake, "step", names["gemm"], 3)
        b.start("other")
        fake.launch(names["relu"])
        # The program's own memset of the same size, on its stream: not a marker.
        fake.memset(stream=0x1234, value=0, nbytes=MARKER_BYTES)
        fake.launch(names["relu"])
        b.stop("other")
        window = b.collect()
        memset_kind = int(fake.ActivityKind.MEMSET)
        assert memset_kind not in fake.enabled  # on only while kernels are traced
        assert per_section(window) == {
            "step": {"gemm": 3},
            "other": {"relu": 2},
        }
        assert window.unattributed_records == 0
        assert not fake.api_records  # no DRIVER kind, no per-API tracing: no API record
        # The memset's value names the entry: no external-correlation records are asked for.
        assert int(fake.ActivityKind.EXTERNAL_CORRELATION) not in fake.enabled
        # The self-check's fence waits for our stream (a memset's record exists only
        # once it ran); the report's made no marker: the plain flush left CUPTI holding
        # nothing, with every section marker in.
        assert libcuda.called["cuStreamSynchronize"] == 1
        assert b.last_collect["quiet"] == 1.0
    finally:
        b.shutdown()
    assert libcuda.called["cuMemFree_v2"] == 1 and libcuda.called["cuStreamDestroy_v2"] == 1
    assert not fake.enabled


def test_memset_markers_without_a_cuda_context_fall_back_to_api_markers(
    monkeypatch, fake, names, caplog
):
    monkeypatch.setenv(MARKER_ENV, "memset")
    fake.has_context = False
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        assert b.marker_mode == "api"
        assert "memset section markers unusable here" in caplog.text
        step(b, fake, "step", names["gemm"], 2)
        assert short(b.collect().kernels) == {"gemm": 2}
    finally:
        b.shutdown()


@pytest.mark.parametrize(
    ("raw", "modes"),
    [
        ("", ("memset", "api", "driver")),
        ("auto", ("memset", "api", "driver")),
        ("memset", ("memset", "api", "driver")),
        ("DRIVER", ("driver", "memset", "api")),
    ],
)
def test_marker_modes_come_from_the_environment(raw, modes):
    assert marker_modes_from_env({MARKER_ENV: raw}) == modes


def test_an_unknown_marker_mode_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=f"{MARKER_ENV}='nvtx' is not one of auto, memset"):
        marker_modes_from_env({MARKER_ENV: "nvtx"})


@pytest.mark.parametrize(("kib", "expected"), [(None, BUFFER_BYTES), ("64", 64 << 10)])
def test_cupti_buffers_are_the_size_the_environment_asks(  # noqa: PLR0917
    monkeypatch, fake, libcuda, names, kib, expected
):
    if kib is None:
        monkeypatch.delenv(BUFFER_ENV, raising=False)
    else:
        monkeypatch.setenv(BUFFER_ENV, kib)
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        step(b, fake, "step", names["gemm"], 3)
        assert b.collect().records == 3
    finally:
        b.shutdown()
    assert fake.buffer_sizes and set(fake.buffer_sizes) == {expected}


@pytest.mark.parametrize("failing", ["start", "stop", "nested start"])
def test_a_failing_marker_never_leaves_kernel_records_switched_on(  # noqa: PLR0917
    monkeypatch, backend, fake, libcuda, names, failing
):
    kernel_kind = int(fake.ActivityKind.CONCURRENT_KERNEL)
    push = fake.activity_push_external_correlation_id
    calls = {"n": 0}
    fail_at = {"start": 1, "stop": 2, "nested start": 2}[failing]

    def flaky_push(kind, ext_id):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise RuntimeError("CUPTI_ERROR_UNKNOWN")
        push(kind, ext_id)

    monkeypatch.setattr(fake, "activity_push_external_correlation_id", flaky_push)
    libcuda.failing_memsets.add(libcuda.called["cuMemsetD32Async"] + fail_at)
    backend.start("step")
    if failing == "nested start":
        backend.start("inner")
        backend.stop("inner")
    fake.launch(names["gemm"])
    backend.stop("step")
    assert kernel_kind not in fake.enabled  # else every later kernel would be traced
    assert backend.failures == {failing.split()[-1]: 1}
    # The next entry is traced and attributed as usual.
    monkeypatch.setattr(fake, "activity_push_external_correlation_id", push)
    backend.collect()
    step(backend, fake, "step", names["relu"], 2)
    assert short(backend.collect().kernels) == {"relu": 2}
    assert kernel_kind not in fake.enabled


def test_collect_tells_where_its_time_went(backend, fake, names):
    step(backend, fake, "step", names["gemm"], 3)
    assert backend.collect().records == 3
    parts = backend.last_collect
    assert parts["buffers_in_fence"] == 1  # the fence's flush handed the records over
    assert parts["forced_after_plain"] == 0.0  # the plain flush handed everything over
    assert set(parts) == {
        "forced_after_plain",
        "quiet",
        "fence_ms",
        "marker_ms",
        "flush_ms",
        "wait_ms",
        "dropped_query_ms",
        "take_ms",
        "buffers_in_fence",
        "handling_in_fence_ms",
    }
    assert parts["fence_ms"] >= parts["marker_ms"] + parts["flush_ms"]
    # The simulated CUPTI hands buffers over inside the flush call.
    assert 0 < parts["handling_in_fence_ms"] <= parts["flush_ms"]
    # No fence marker: the plain flush left CUPTI holding nothing, every marker in.
    assert (parts["quiet"], parts["marker_ms"]) == (1.0, 0.0)
    backend.collect()
    assert backend.last_collect["buffers_in_fence"] == 0  # nothing made, nothing handed over


def test_a_fence_marker_where_the_quiet_fence_is_off(monkeypatch, backend, fake, names):
    monkeypatch.setattr(CuptiBackend, "quiet_fence", False)
    step(backend, fake, "step", names["gemm"], 3)
    assert backend.collect().records == 3
    assert backend.last_collect["quiet"] == 0.0
    backend.collect()
    assert backend.last_collect["buffers_in_fence"] == 1  # the fence marker alone


def test_a_report_flushes_plain_and_forces_only_what_a_plain_flush_kept(
    monkeypatch, backend, fake, names
):
    monkeypatch.setattr(CuptiBackend, "fence_timeout_s", 5.0)  # the grace, not this, bounds it
    step(backend, fake, "step", names["gemm"], 3)
    fake.flush_flags.clear()
    assert backend.collect().records == 3
    assert fake.flush_flags == [0]  # the detector synchronized: a plain flush suffices
    fake.plain_flush_delivers = False
    step(backend, fake, "step", names["gemm"], 4)
    fake.flush_flags.clear()
    window = backend.collect()
    assert (window.records, window.unattributed_records) == (4, 0)
    # The quiet fence's flush kept everything (CUPTI still holds a buffer): then the
    # marker, its plain flush, and the forced one after the grace.
    assert fake.flush_flags == [0, 0, 1]
    assert backend.last_collect["quiet"] == 0.0
    parts = backend.last_collect
    assert parts["forced_after_plain"] == 1.0
    assert parts["wait_ms"] < 1000  # forced after the grace, not after the fence timeout
    assert backend.failures == {}


def test_a_report_flush_forced_by_setting(monkeypatch, fake, libcuda, names):
    monkeypatch.setenv("PACEKEEPER_REPORT_FLUSH", "forced")
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        step(b, fake, "step", names["gemm"], 2)
        fake.flush_flags.clear()
        assert b.collect().records == 2
        assert fake.flush_flags == [1]
    finally:
        b.shutdown()


@pytest.mark.parametrize("buffers", [2, 5])
def test_a_flush_handing_over_several_buffers_splits_entries_across_them(
    backend, fake, names, buffers
):
    fake.buffers_per_flush = buffers  # the H200 hands over two per report flush
    for _ in range(3):
        step(backend, fake, "A", names["gemm"], 3)
        step(backend, fake, "B", names["relu"], 4)
    window = backend.collect()
    assert per_section(window) == {"A": {"gemm": 9}, "B": {"relu": 12}}
    assert window.unattributed_records == 0
    assert backend.last_collect["buffers_in_fence"] == buffers


def test_a_fence_waits_for_buffers_cupti_hands_over_on_its_own_thread(
    monkeypatch, backend, fake, names
):
    monkeypatch.setattr(CuptiBackend, "fence_timeout_s", 5.0)  # a loaded machine is slow
    fake.deliver_after_s = 0.005
    step(backend, fake, "step", names["gemm"], 3)
    window = backend.collect()
    assert window.records == 3
    parts = backend.last_collect
    # The records came from the other thread, after the flush (unless a loaded machine
    # took longer over the flush than the delivery's delay).
    assert parts["wait_ms"] >= 4 or parts["flush_ms"] >= 5, parts
    # A buffer still on its way when the first flush returned: the quiet fence gave
    # way to the marker's, whose record came in a buffer of its own.
    assert (parts["quiet"], parts["buffers_in_fence"]) == (0.0, 2)
    assert backend.failures == {}  # no timeout, no second flush


def test_a_quiet_fence_needs_every_section_marker_in(monkeypatch, backend, fake, names):
    monkeypatch.setattr(CuptiBackend, "fence_timeout_s", 5.0)
    step(backend, fake, "step", names["gemm"], 3)
    fake.markers_by_thread_s = 0.01
    window = backend.collect()
    # CUPTI held nothing after the first flush, but the step's markers were still to
    # come: the fence marker's wait, not a window with the kernels ruled outside.
    assert (window.records, window.unattributed_records, window.lost_markers) == (3, 0, 0)
    assert backend.last_collect["quiet"] == 0.0
    assert backend.failures == {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sampling_adapts_to_what_the_last_window_cost(monkeypatch, fake, libcuda, names):
    monkeypatch.delenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", raising=False)
    clock = Clock()
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, clock=clock)
    try:
        assert b.adaptive_sampling and b.sample_every == 32
        # Slow steps: 64 entries over 120 s, 3 kernels each: tracing every one is cheap.
        for _ in range(64):
            step(b, fake, "step", names["gemm"], 3)
        clock.now += 120.0
        assert b.collect().records == 2 * 3  # entries 0 and 32
        assert b.sample_every == 1
        # Fast steps: 300 entries of 10 kernels in 50 ms: one in many.
        for _ in range(300):
            step(b, fake, "step", names["relu"], 10)
        clock.now += 0.05
        assert b.collect().records == 300 * 10
        assert b.sample_every > 100
        assert b.failures == {}
    finally:
        b.shutdown()


@pytest.mark.parametrize("setting", [("auto", True, 32), ("7", False, 7)])
def test_sampling_is_fixed_only_when_asked(monkeypatch, fake, libcuda, names, setting):
    env, adaptive, n = setting
    monkeypatch.setenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", env)
    clock = Clock()
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, clock=clock)
    try:
        assert (b.adaptive_sampling, b.sample_every) == (adaptive, n)
        for _ in range(50):
            step(b, fake, "step", names["gemm"], 1)
        clock.now += 600.0
        b.collect()
        assert b.sample_every == (1 if adaptive else 7)
    finally:
        b.shutdown()
