"""Fixtures of the CUPTI backend's CPU tests: a simulated CUPTI (fake_cupti.py), kernel
names for it to launch, and a backend over it in each marker mode."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest
from fake_cupti import FakeCupti, FakeLibcuda

from pacekeeper.cupti_ext import cupti_backend
from pacekeeper.cupti_ext.cupti_backend import MARKER_ENV, CuptiBackend

NAMES = {
    "gemm": b"_Z4gemmv",
    "relu": b"_Z4reluv",
    "nccl": b"ncclDevKernel_AllReduce_Sum_f32_RING_LL",
}


@pytest.fixture
def names() -> dict[str, int]:
    buffers = {k: ctypes.create_string_buffer(v) for k, v in NAMES.items()}
    ptrs = {k: ctypes.addressof(b) for k, b in buffers.items()}
    ptrs["_keep"] = buffers  # type: ignore[assignment]
    return ptrs


@pytest.fixture
def fake(monkeypatch) -> FakeCupti:
    # The simulated CUPTI delivers on flush or never: no need to wait as long as on a GPU.
    monkeypatch.setattr(CuptiBackend, "self_check_timeout_s", 0.02)
    monkeypatch.setattr(CuptiBackend, "fence_timeout_s", 0.02)
    f = FakeCupti()
    monkeypatch.setattr(cupti_backend, "register_callbacks_function", lambda: f.register_raw)
    return f


@pytest.fixture
def libcuda(fake) -> FakeLibcuda:
    return FakeLibcuda(fake)


@pytest.fixture(params=["memset", "api"])
def marker(request, monkeypatch) -> str:
    """Each backend test runs with memset markers (the default where a CUDA context
    exists) and with API-record markers (where none exists yet)."""
    monkeypatch.setenv(MARKER_ENV, request.param)
    return str(request.param)


@pytest.fixture
def backend(fake, libcuda, marker) -> Iterator[CuptiBackend]:
    b = CuptiBackend(cupti_module=fake, libcuda=libcuda, sample_every=1)
    assert b.marker_mode == marker
    yield b
    b.shutdown()


@pytest.fixture
def on_a_gpu(monkeypatch, fake, libcuda) -> None:
    """``select_backend`` as on a machine with a GPU: CUPTI backends over the simulated
    CUPTI, and a stand-in for CUDA events where CUPTI is refused."""
    from pacekeeper.cupti_ext import selection

    class Events:
        name = "events"

    monkeypatch.setattr(selection, "cuda_available", lambda: True)
    monkeypatch.setattr(
        selection, "make_cupti", lambda **o: CuptiBackend(cupti_module=fake, libcuda=libcuda, **o)
    )
    monkeypatch.setattr(selection, "make_events", Events)
