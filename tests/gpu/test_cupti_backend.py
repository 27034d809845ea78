"""The CUPTI backend on a real GPU: counts, names, attribution, sampling, conflicts.

Every test runs with each marker mode a detector started after the model can get:
``memset`` (the default) and ``driver`` (the fallback where memsets cannot be used), and
with each attribution: ``markers`` (a backend with a per-section table, made directly)
and ``gated`` (records on inside traced entries alone: the detector's default).
"""

from __future__ import annotations

import ctypes
import re
from collections import Counter
from collections.abc import Iterator

import pytest
import torch
from workloads import add_kernels, fill_kernels, mul_kernels

from pacekeeper.cupti_ext import CuptiBackend, KernelWindow
from pacekeeper.cupti_ext.markers import MARKER_WORDS

STEPS = 20


@pytest.fixture
def x() -> torch.Tensor:
    t = torch.randn(1 << 20, device="cuda")
    torch.cuda.synchronize()
    return t


@pytest.fixture(params=["memset", "driver"])
def marker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PACEKEEPER_KERNEL_MARKER", request.param)
    torch.zeros(1, device="cuda")  # a detector starts after the model: a context exists
    return str(request.param)


@pytest.fixture(params=["markers", "gated"])
def attribution(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def backend(marker: str, attribution: str) -> Iterator[CuptiBackend]:
    b = CuptiBackend(sample_every=1, attribution=attribution)
    assert (b.marker_mode, b.attribution) == (marker, attribution)
    yield b
    b.shutdown()


def program_memset(x: torch.Tensor) -> None:
    """A memset of the program's own, the size of our markers, on torch's stream."""
    libcuda = ctypes.CDLL("libcuda.so.1")
    fn = libcuda.cuMemsetD32Async
    fn.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    assert fn(x.data_ptr(), 0, MARKER_WORDS, stream) == 0


def counts_by_name(backend: CuptiBackend, stats: dict[str, object]) -> dict[str, int]:
    names = backend.kernel_names()
    out: Counter[str] = Counter()
    for key, stat in stats.items():
        out[names[key]] += stat.num  # type: ignore[attr-defined]
    return dict(out)


def kind_of(name: str) -> str:
    for kind in ("add", "mul", "fill"):
        if re.search(kind, name, re.IGNORECASE):
            return kind
    return name


def collect(backend: CuptiBackend) -> KernelWindow:
    torch.cuda.synchronize()
    return backend.collect()


def test_kernel_counts_and_names_match_what_torch_launched(backend, x):
    # Raw buffers, not cupti-python's per-record objects (~58 us per kernel).
    assert backend.buffer_path == "raw"
    for _ in range(STEPS):
        backend.start("step")
        add_kernels(x, 7)
        mul_kernels(x, 5)
        fill_kernels(x, 3)
        backend.stop("step")
    window = collect(backend)
    ours = counts_by_name(backend, window.kernels)
    assert Counter({kind_of(n): c for n, c in ours.items()}) == Counter(
        {"add": 7 * STEPS, "mul": 5 * STEPS, "fill": 3 * STEPS}
    )
    assert window.records == 15 * STEPS
    assert window.dropped_records == 0
    assert window.unattributed_records == 0
    for s in window.kernels.values():
        assert 0 < s.min_ns <= s.median_ns <= s.max_ns

    # The same steps under torch.profiler, after our shutdown released CUPTI.
    backend.shutdown()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(STEPS):
            add_kernels(x, 7)
            mul_kernels(x, 5)
            fill_kernels(x, 3)
        torch.cuda.synchronize()
    theirs = Counter(
        e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
    )
    assert sum(theirs.values()) == 15 * STEPS
    squash = lambda s: re.sub(r"\s+", "", s)  # noqa: E731
    assert Counter({squash(n): c for n, c in ours.items()}) == Counter(
        {squash(n): c for n, c in theirs.items()}
    )


def test_interleaved_sections_get_only_their_own_kernels(backend, x):
    for _ in range(STEPS):
        backend.start("A")
        add_kernels(x, 4)
        backend.stop("A")
        backend.start("B")
        mul_kernels(x, 6)
        program_memset(x)  # not a kernel, and never taken for a marker
        backend.stop("B")
        fill_kernels(x, 5)  # outside every section: never counted
        backend.start("A")
        add_kernels(x, 2)
        backend.stop("A")
    window = collect(backend)
    # Both ways, only what ran inside the entries counts (gated: the rest is never
    # recorded; markers: recorded between entries, counted as unattributed).
    assert {kind_of(n): c for n, c in counts_by_name(backend, window.kernels).items()} == {
        "add": 6 * STEPS,
        "mul": 6 * STEPS,
    }
    assert window.records == 12 * STEPS
    if backend.attribution == "gated":
        assert window.sections == {} and window.unattributed_records == 0
        return
    assert window.unattributed_records == 5 * STEPS
    per = {s: counts_by_name(backend, k) for s, k in window.sections.items()}
    assert set(window.sections) == {"A", "B"}
    assert {kind_of(n): c for n, c in counts_by_name(backend, window.sections["A"]).items()} == {
        "add": 6 * STEPS
    }
    assert {kind_of(n): c for n, c in counts_by_name(backend, window.sections["B"]).items()} == {
        "mul": 6 * STEPS
    }, per


def test_nested_section_kernels_count_in_both_sections_and_once_overall(backend, x):
    for _ in range(STEPS):
        backend.start("step")
        backend.start("forward")
        add_kernels(x, 3)
        backend.stop("forward")
        mul_kernels(x, 2)
        backend.stop("step")
    window = collect(backend)
    kinds = lambda stats: {kind_of(n): c for n, c in counts_by_name(backend, stats).items()}  # noqa: E731
    assert kinds(window.kernels) == {"add": 3 * STEPS, "mul": 2 * STEPS}
    if backend.attribution == "gated":
        assert window.sections == {}  # no markers, no per-section table
        return
    assert kinds(window.sections["forward"]) == {"add": 3 * STEPS}
    assert kinds(window.sections["step"]) == {"add": 3 * STEPS, "mul": 2 * STEPS}


def test_sampling_traces_one_in_n_outermost_entries(marker, attribution, x):
    b = CuptiBackend(sample_every=4, attribution=attribution)
    try:
        for _ in range(STEPS):
            b.start("step")
            add_kernels(x, 3)
            b.stop("step")
        window = collect(b)
        assert window.records == 3 * (STEPS // 4)
    finally:
        b.shutdown()


def test_windows_do_not_leak_into_each_other(backend, x):
    for _ in range(5):
        backend.start("step")
        add_kernels(x, 3)
        backend.stop("step")
    first = collect(backend)
    second = collect(backend)
    assert first.records == 15
    assert second.records == 0 and second.kernels == {}


def test_torch_profiler_pauses_timing_and_it_resumes_after(backend, x):
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            backend.start("step")
            add_kernels(x, 3)
            backend.stop("step")
        torch.cuda.synchronize()
        assert backend.paused
    seen = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(seen) == 15  # the profiler got every kernel: we did not fight it
    during = collect(backend)
    assert during.records == 0
    for _ in range(5):
        backend.start("step")
        add_kernels(x, 3)
        backend.stop("step")
    after = collect(backend)
    assert not backend.paused
    assert after.records == 15


def test_dynamic_shapes_stay_within_the_key_bound(marker, attribution):
    b = CuptiBackend(sample_every=1, max_keys=8, attribution=attribution)
    try:
        b.start("step")
        for n in range(1, 400, 3):
            torch.ones(n * 1000, device="cuda").add_(1.0)
        b.stop("step")
        window = collect(b)
        assert len(window.kernels) <= 9  # max_keys plus the overflow key
        assert sum(s.num for s in window.kernels.values()) == window.records
    finally:
        b.shutdown()


def test_sampling_follows_what_tracing_cost_in_the_last_window(monkeypatch, attribution, x):
    monkeypatch.delenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", raising=False)
    import time

    b = CuptiBackend(attribution=attribution)
    try:
        assert b.adaptive_sampling and b.sample_every == 32
        for _ in range(64):  # short entries, 15 kernels each: tracing all would cost a lot
            b.start("step")
            add_kernels(x, 15)
            b.stop("step")
        assert collect(b).records == 2 * 15
        assert b.sample_every > 32
        # Slow entries: two windows to settle (none traced in the first). 120 ms each,
        # so tracing all of them costs ~0.2% by the rule's own figures (225 us each).
        for _ in range(3):
            for _ in range(8):
                b.start("step")
                add_kernels(x, 3)
                time.sleep(0.12)
                b.stop("step")
            collect(b)
        assert b.sample_every == 1
    finally:
        b.shutdown()
