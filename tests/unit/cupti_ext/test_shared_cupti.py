"""CUPTI shared with other tools (``PACEKEEPER_CUPTI_SUBSCRIBER``): the backend as one
subscriber of CUPTI's per-subscriber API where the library grants several, the single-
subscriber API where not; out of a torch profiler's way (a single-subscriber client gets
nothing beside a subscriber, H200 run 16) and back after it. Against the simulated CUPTI
and its per-subscriber calls (fake_cupti.FakeLibcupti)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fake_cupti import FakeLibcupti, short, step
from torch.profiler import ProfilerActivity, profile

from pacekeeper.cupti_ext import select_backend
from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
from pacekeeper.cupti_ext.cupti_subscriber import SUBSCRIBER_ENV, subscriber_mode_from_env


@pytest.fixture
def lib(fake) -> FakeLibcupti:
    fake.libcupti = FakeLibcupti(fake)
    return fake.libcupti


@pytest.fixture
def shared(fake, libcuda, lib, marker) -> Iterator[CuptiBackend]:
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1, attribution="gated")
    assert (b.sharing, b.marker_mode) == ("shared", marker)
    yield b
    b.shutdown()


def test_a_library_that_grants_several_subscribers_is_shared(shared, fake, lib, names):
    for _ in range(3):
        step(shared, fake, "step", names["gemm"], 2)
    w = shared.collect()
    assert (w.records, w.dropped_records) == (6, 0)
    # Kinds switched, and buffers registered, through the subscriber's own calls.
    assert lib.calls["enable"] >= 3 and lib.calls["disable"] >= 3
    assert lib.calls["register"] >= 1 and lib.calls["dropped"] >= 1
    assert shared.failures == {}


def test_a_library_that_refuses_is_used_with_one_subscriber(fake, libcuda, lib, names):
    lib.grant = False
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    try:
        assert b.sharing == "single"
        step(b, fake, "step", names["gemm"], 2)
        assert b.collect().records == 2
        assert lib.calls["enable"] == 0  # nothing went through the subscriber's calls
    finally:
        b.shutdown()


def test_shared_asked_for_and_refused_fails_naming_the_variable(monkeypatch, lib, on_a_gpu):
    lib.grant = False
    monkeypatch.setenv(SUBSCRIBER_ENV, "shared")
    _, choice = select_backend("auto")
    assert choice.name == "events"
    assert SUBSCRIBER_ENV in choice.reason and "39" in choice.reason


def test_single_keeps_the_single_subscriber_api(fake, libcuda, lib, names):
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1, subscriber="single")
    try:
        assert b.sharing == "single" and lib.calls["subscribe"] == 0
        step(b, fake, "step", names["gemm"], 1)
        assert b.collect().records == 1
    finally:
        b.shutdown()


def test_the_setting_is_read_and_checked(monkeypatch):
    assert subscriber_mode_from_env({}) == "auto"
    assert subscriber_mode_from_env({SUBSCRIBER_ENV: " Shared "}) == "shared"
    with pytest.raises(ValueError, match=SUBSCRIBER_ENV):
        subscriber_mode_from_env({SUBSCRIBER_ENV: "both"})
    monkeypatch.setenv(SUBSCRIBER_ENV, "both")
    with pytest.raises(ValueError, match=SUBSCRIBER_ENV):
        select_backend("auto")  # at initialize, also without a GPU


def test_a_torch_profiler_gets_cupti_alone_and_sharing_comes_back(shared, fake, lib, names):
    step(shared, fake, "step", names["gemm"], 1)
    with profile(activities=[ProfilerActivity.CPU]):
        # Our subscriber is gone while the profiler holds CUPTI: a single-subscriber
        # profiler gets nothing beside one, even one with its kinds off.
        assert lib.calls["unsubscribe"] == 1 and not lib.subscribed
        step(shared, fake, "step", names["gemm"], 3)
        assert shared.paused
    step(shared, fake, "step", names["relu"], 2)
    assert not shared.paused and shared.sharing == "shared"
    assert lib.calls["subscribe"] == 2 and len(lib.subscribed) == 1
    assert short(shared.collect().kernels) == {"gemm": 1, "relu": 2}
    assert "resume" not in shared.failures


def test_sharing_refused_after_a_profiler_carries_on_with_one_subscriber(
    shared, fake, lib, names, caplog
):
    caplog.set_level(logging.INFO)
    with profile(activities=[ProfilerActivity.CPU]):
        step(shared, fake, "step", names["gemm"], 1)
        lib.grant = False  # the profiler's single-subscriber session keeps CUPTI so
    for _ in range(2):
        step(shared, fake, "step", names["relu"], 2)
    assert shared.sharing == "single"
    assert "not granted again" in caplog.text
    assert short(shared.collect().kernels) == {"relu": 4}
    assert "resume" not in shared.failures


def test_shutdown_unsubscribes(fake, libcuda, lib, names):
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    assert b.sharing == "shared"
    b.shutdown()
    assert not lib.subscribed and b.sharing == "single"
