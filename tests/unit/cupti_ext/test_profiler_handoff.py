"""Kernel timing hands CUPTI to a torch profiler and takes it back whole: records flow
again afterwards in every marker mode, and a scheduled profiler keeps CUPTI from its
warm-up on (issue 19: ``api`` markers gave nothing after a profiler, fences waited out
their timeout, the log said "resumed", and a later scheduled profiler got no events)."""

from __future__ import annotations

import logging

import pytest
from fake_cupti import FakeLibcuda, short, step
from torch.profiler import ProfilerActivity, profile, schedule

from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
from pacekeeper.cupti_ext.cupti_env import BEFORE_PROFILER


def test_api_markers_dead_after_a_profiler_are_replaced_and_records_flow_again(fake, names, caplog):
    caplog.set_level(logging.WARNING)
    fake.has_context = False  # initialize() before the model's CUDA context
    b = CuptiBackend(cupti_module=fake, libcuda=FakeLibcuda(fake), sample_every=1)
    try:
        assert b.marker_mode == "api"
        step(b, fake, "step", names["gemm"], 2)
        assert b.collect().records == 2
        fake.has_context = True
        with profile(activities=[ProfilerActivity.CPU]):
            step(b, fake, "step", names["gemm"], 3)
            assert b.paused
            fake.per_api_alone = False  # as on the H200: per-API records gone for good
        assert b.collect().records == 0
        for _ in range(3):
            step(b, fake, "step", names["gemm"], 2)
            assert b.marker_mode == "memset"  # a context exists now
            w = b.collect()
            assert (w.records, w.unattributed_records, w.lost_markers) == (2, 0, 0)
        assert "fence" not in b.failures and "resume" not in b.failures
        assert "kernel timing resumed" in caplog.text
    finally:
        b.shutdown()


def test_resuming_without_any_marker_that_works_says_so_and_traces_nothing(fake, names, caplog):
    caplog.set_level(logging.WARNING)
    fake.has_context = False
    libcuda = FakeLibcuda(fake)
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        with profile(activities=[ProfilerActivity.CPU]):
            step(b, fake, "step", names["gemm"], 1)
        fake.per_api_alone = False  # and no context, no DRIVER records either
        libcuda._traced = ()
        step(b, fake, "step", names["gemm"], 2)
        assert b.failures.get("resume") == 1
        assert "could not resume" in caplog.text
        assert "kernel timing resumed" not in caplog.text
        assert b.collect().records == 0
    finally:
        b.shutdown()


def test_a_scheduled_profiler_keeps_cupti_from_its_warm_up_on(backend, fake, names):
    kernel = int(fake.ActivityKind.CONCURRENT_KERNEL)
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=2, active=2)
    ) as prof:
        paused, switches = [], []
        for _ in range(5):
            step(backend, fake, "step", names["gemm"], 1)
            paused.append(backend.paused)
            switches.append(fake.calls[f"disable {kernel}"] + fake.calls[f"enable {kernel}"])
            prof.step()
    # Waiting, we trace; from the warm-up on, Kineto holds CUPTI and we touch nothing:
    # no kind switched, no report's re-attach.
    assert paused == [False, True, True, True, True]
    assert len(set(switches[1:])) == 1
    step(backend, fake, "step", names["relu"], 3)
    assert not backend.paused
    assert short(backend.collect().kernels) == {"gemm": 1, "relu": 3}


@pytest.mark.parametrize("stop_in_warm_up", [True, False])
def test_a_profiler_that_stops_releases_cupti_to_us_again(backend, fake, names, stop_in_warm_up):
    with profile(
        activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=2, active=1)
    ) as prof:
        for _ in range(1 if stop_in_warm_up else 3):
            step(backend, fake, "step", names["gemm"], 1)
            prof.step()
    step(backend, fake, "step", names["gemm"], 2)
    assert not backend.paused
    assert backend.collect().records == 2


def test_records_cupti_holds_when_a_profiler_starts_are_handed_to_us_first(backend, fake, names):
    step(backend, fake, "step", names["gemm"], 3)  # still in CUPTI's buffers

    def kineto_prepares() -> None:
        fake.raw = None  # Kineto registers its own buffer callbacks

    BEFORE_PROFILER.append(kineto_prepares)  # after the backend's: as Kineto's prepare
    try:
        with profile(activities=[ProfilerActivity.CPU]):
            assert backend.paused  # before any section entry saw the profiler
            step(backend, fake, "step", names["relu"], 2)
        fake.records = []  # the profiler's own, flushed to it when it stopped
    finally:
        BEFORE_PROFILER.remove(kineto_prepares)
    w = backend.collect()  # takes CUPTI back
    assert (w.records, w.unattributed_records, w.lost_markers) == (3, 0, 0)
    assert short(w.kernels) == {"gemm": 3}
    step(backend, fake, "step", names["relu"], 4)
    assert backend.collect().records == 4


def test_memset_markers_that_stop_coming_after_a_profiler_are_replaced(
    fake, names, monkeypatch, caplog
):
    caplog.set_level(logging.WARNING)
    monkeypatch.setenv("PACEKEEPER_KERNEL_MARKER", "memset")
    fake.per_api_alone = False  # a context exists: per-API records give nothing
    libcuda = FakeLibcuda(fake)
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert b.marker_mode == "memset"
        with profile(activities=[ProfilerActivity.CPU]):
            step(b, fake, "step", names["gemm"], 1)
        # The resume's self-check memset fails, and so would every later one.
        failing = libcuda.called["cuMemsetD32Async"]
        libcuda.failing_memsets.update(range(failing + 1, failing + 1000))
        step(b, fake, "step", names["gemm"], 2)
        assert b.marker_mode == "driver"
        w = b.collect()
        assert (w.records, w.unattributed_records) == (2, 0)
        assert "choosing again" in caplog.text and "kernel timing resumed" in caplog.text
    finally:
        b.shutdown()
