"""Kernels the program does not launch one by one: a CUDA graph's, replayed inside a
section, in every marker mode (issue 19: seen with ``api`` markers only), and Triton's,
whose names are not C++ symbols and which a compiler can make without end (the key
bound holds). Both marker modes a detector started after the model can get, and both
attributions (``markers``, and ``gated``: the detector's default)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
import torch
from workloads import add_kernels, mul_kernels

from pacekeeper.cupti_ext import CuptiBackend

REPLAYS = 12
PER_GRAPH = {"add": 3, "mul": 2}


@pytest.fixture(params=["markers", "gated"])
def attribution(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["memset", "driver"])
def backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, attribution: str
) -> Iterator[CuptiBackend]:
    monkeypatch.setenv("PACEKEEPER_KERNEL_MARKER", request.param)
    torch.zeros(1, device="cuda")  # the model exists before the detector: a context too
    b = CuptiBackend(sample_every=1, attribution=attribution)
    assert (b.marker_mode, b.attribution) == (request.param, attribution)
    yield b
    b.shutdown()


def _kinds(backend: CuptiBackend, stats: dict[str, object]) -> Counter[str]:
    names = backend.kernel_names()
    out: Counter[str] = Counter()
    for key, stat in stats.items():
        name = names[key].lower()
        kind = next((k for k in ("add", "mul", "fill") if k in name), name)
        out[kind] += stat.num  # type: ignore[attr-defined]
    return out


def test_replayed_graph_kernels_count_in_the_section_that_replays_them(backend):
    x = torch.randn(1 << 16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        add_kernels(x, 1)  # warm-up outside the capture, as torch asks
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        add_kernels(x, PER_GRAPH["add"])
        mul_kernels(x, PER_GRAPH["mul"])
    torch.cuda.synchronize()
    backend.collect()  # the capture's warm-up is not this test's
    for _ in range(REPLAYS):
        backend.start("replay")
        graph.replay()
        backend.stop("replay")
        backend.start("eager")
        mul_kernels(x, 1)
        backend.stop("eager")
        graph.replay()  # outside every section: never counted
    torch.cuda.synchronize()
    window = backend.collect()
    per_replay = sum(PER_GRAPH.values())
    assert window.records == (per_replay + 1) * REPLAYS
    assert window.dropped_records == 0 and window.held_records == 0
    assert _kinds(backend, window.kernels) == {
        "add": PER_GRAPH["add"] * REPLAYS,
        "mul": (PER_GRAPH["mul"] + 1) * REPLAYS,
    }
    if backend.attribution == "gated":
        # The replays outside every section were never recorded: records were off.
        assert window.unattributed_records == 0 and window.sections == {}
        return
    assert _kinds(backend, window.sections["replay"]) == {
        k: n * REPLAYS for k, n in PER_GRAPH.items()
    }
    assert _kinds(backend, window.sections["eager"]) == {"mul": REPLAYS}
    assert window.unattributed_records == per_replay * REPLAYS


def test_triton_kernels_are_attributed_and_their_keys_stay_bounded(backend):
    triton = pytest.importorskip("triton")
    import triton.language as tl

    def make(i: int):  # a kernel of a new name each time, as a compiler makes them
        source = (
            f"def scale_{i}(x_ptr, n, BLOCK: tl.constexpr):\n"
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
            "    m = offs < n\n"
            "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 0.5, mask=m)\n"
        )
        scope: dict[str, object] = {"tl": tl}
        path = f"/tmp/pacekeeper_triton_{i}.py"
        with open(path, "w") as f:  # Triton reads a kernel's source back from its file
            f.write(source)
        exec(compile(source, path, "exec"), scope)
        return triton.jit(scope[f"scale_{i}"])

    kernels = [make(i) for i in range(40)]
    x = torch.ones(1 << 14, device="cuda")
    for k in kernels:  # compile outside the window
        k[(16,)](x, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    bounded = CuptiBackend(sample_every=1, max_keys=8, attribution=backend.attribution)
    try:
        bounded.start("step")
        for k in kernels:
            k[(16,)](x, x.numel(), BLOCK=1024)
        bounded.stop("step")
        torch.cuda.synchronize()
        window = bounded.collect()
        assert window.records == len(kernels)
        assert sum(s.num for s in window.kernels.values()) == len(kernels)
        if bounded.attribution == "markers":
            assert sum(s.num for s in window.sections["step"].values()) == len(kernels)
        assert len(window.kernels) <= 9  # max_keys plus the overflow key
        names = bounded.kernel_names()
        assert any("scale_" in names[k] for k in window.kernels)
    finally:
        bounded.shutdown()
