"""GPU workloads for the GPU tests, each launching a known number of named kernels."""

from __future__ import annotations

import threading
from typing import Any

import torch


def add_kernels(x: torch.Tensor, n: int) -> None:
    for _ in range(n):
        x.add_(1.0)


def mul_kernels(x: torch.Tensor, n: int) -> None:
    for _ in range(n):
        x.mul_(0.999)


def fill_kernels(x: torch.Tensor, n: int) -> None:
    for _ in range(n):
        x.fill_(0.5)


def gemm_step(a: torch.Tensor, b: torch.Tensor, n: int = 8) -> torch.Tensor:
    c = a
    for _ in range(n):
        c = torch.matmul(c, b)
        c = c * 0.01
    return c


class GpuHog:
    """Competes for the GPU's SMs from a side stream: a captured graph of large GEMMs
    replayed in a loop (one call per replay keeps the GIL mostly free)."""

    def __init__(self, device: int = 0, size: int = 8192, gemms: int = 8) -> None:
        self._stop = threading.Event()
        self._device = device
        with torch.cuda.device(device):
            self._stream = torch.cuda.Stream()
            self._a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
            self._b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(self._stream):
                self._out = self._a @ self._b  # warm-up outside capture
                torch.cuda.synchronize()
                with torch.cuda.graph(self._graph, stream=self._stream):
                    for _ in range(gemms):
                        self._out = self._a @ self._b
        self._thread = threading.Thread(target=self._run, name="gpu-hog", daemon=True)

    def _run(self) -> None:
        with torch.cuda.device(self._device), torch.cuda.stream(self._stream):
            while not self._stop.is_set():
                self._graph.replay()
                self._stream.synchronize()

    def __enter__(self) -> GpuHog:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        torch.cuda.synchronize(self._device)
