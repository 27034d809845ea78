"""The CUPTI window names each kernel key's typical launch threads (grid x block, the
median over the window's records), and a new window starts afresh (issue #38)."""

from __future__ import annotations

from buffers import LAYOUT, OURS, as_buffer, kernels, marker

from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
from pacekeeper.cupti_ext.records import decode_span, record_offsets
from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

NAMES = {1: "_Z4gemmv", 2: "_Z4reluv"}


def _feed(b: KernelWindowBuilder, *parts: bytes) -> None:
    raw = as_buffer(*parts)
    offsets, whole = record_offsets(raw, LAYOUT)
    assert whole
    b.add(decode_span(raw, offsets, LAYOUT), len(offsets))


def test_each_key_carries_its_median_launch_threads() -> None:
    b = KernelWindowBuilder(OURS, keys=KernelKeyTable(resolve_name=NAMES.__getitem__))
    # 640 and 896 threads share a shape bucket (floor(log2) = 9): one key, two sizes.
    _feed(
        b,
        marker(1, 0, False, 10),
        kernels([11, 12], name_ptr=1, threads=640),
        kernels([13], name_ptr=1, threads=896),
        kernels([14], name_ptr=2, threads=4096),
        marker(1, 0, True, 15),
    )
    w = b.take(["step"])
    (gemm,) = (k for k in w.kernels if k.startswith("gemm"))
    (relu,) = (k for k in w.kernels if k.startswith("relu"))
    assert w.launch_threads == {gemm: 640.0, relu: 4096.0}
    _feed(b, marker(2, 0, False, 20), kernels([21], name_ptr=1, threads=896),
          marker(2, 0, True, 22))  # fmt: skip
    assert b.take(["step"]).launch_threads == {gemm: 896.0}


def test_medians_are_the_snapshots_medians_on_both_paths(monkeypatch) -> None:
    import numpy as np

    from pacekeeper.cupti_ext import kernel_stats, native

    rng = np.random.default_rng(3)
    groups = rng.integers(0, 40, 5000).astype(np.int64)
    values = rng.choice([640.0, 768.0, 896.0], 5000)
    for lib in (native.library(), None):
        monkeypatch.setattr(native, "library", lambda lib=lib: lib)
        stats = kernel_stats.RingStats(ring=64)
        stats.add(groups, values)
        assert stats.medians() == {g: s.median_ns for g, s in stats.snapshot().items()}
        stats.reset()
        assert stats.medians() == {}
