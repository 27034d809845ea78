"""CPU time a detection_section entry adds, ours vs a no-op context manager.

Each variant runs ``with <cm>: pass`` in blocks of 20,000 entries, timed in thread CPU
time; the figure is the best block's mean per entry (the minimum resists other
processes on a shared machine), with the median block alongside. "added" subtracts the
no-op baseline.

"NVRx-shaped model" re-creates the per-entry work NVRx 0.7's ``detection_section``
does on its CPU path (a generator context manager, a three-frame walk for the
location, a dict lookup, a bounded deque append): NVRx itself does not install on this
CPU machine. ENVIRONMENT.md's GPU-machine measurement of the real NVRx gives ~3 us.

Run: .venv/bin/python bench/detector_overhead.py
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.detector import Detector

BLOCK = 20_000
BLOCKS = 15


class _Noop:
    __slots__ = ()

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_NOOP = _Noop()
_sections: dict[str, collections.deque[float]] = {}


@contextlib.contextmanager
def _nvrx_shaped(name: str) -> Iterator[None]:
    frame = inspect.currentframe().f_back.f_back.f_back  # type: ignore[union-attr]
    _location = f"{frame.f_code.co_filename}:{frame.f_lineno}"  # type: ignore[union-attr]
    times = _sections.get(name)
    if times is None:
        times = _sections[name] = collections.deque(maxlen=8192)
    start = time.perf_counter_ns()
    yield
    times.append((time.perf_counter_ns() - start) * 1e-6)


def _block(body: Callable[[], None]) -> float:
    # Thread CPU time: the cost to the training thread, not time spent preempted by
    # other processes on a shared machine.
    t0 = time.thread_time_ns()
    body()
    return (time.thread_time_ns() - t0) / BLOCK


def _noop() -> None:
    cm = _NOOP
    for _ in range(BLOCK):
        with cm:
            pass


def _ours_named() -> None:
    section = Detector.detection_section
    for _ in range(BLOCK):
        with section("forward"):
            pass


def _ours_handle() -> None:
    handle = Detector.detection_section("forward")
    for _ in range(BLOCK):
        with handle:
            pass


def _ours_unnamed() -> None:
    section = Detector.detection_section
    for _ in range(BLOCK):
        with section():
            pass


def _ours_sampled() -> None:
    section = Detector.detection_section
    for _ in range(BLOCK):
        with section("sampled"):
            pass


def _nvrx_model() -> None:
    for _ in range(BLOCK):
        with _nvrx_shaped("forward"):
            pass


def measure(variants: list[tuple[str, Callable[[], None]]]) -> dict[str, tuple[float, float]]:
    """Blocks interleaved round-robin, so load from other processes hits all variants."""
    for _, body in variants:
        _block(body)  # warm-up
    blocks: dict[str, list[float]] = {label: [] for label, _ in variants}
    for _ in range(BLOCKS):
        for label, body in variants:
            blocks[label].append(_block(body))
    return {label: (min(b), statistics.median(b)) for label, b in blocks.items()}


def main() -> None:
    Detector.initialize(kernel_timing="none")
    # A second, sampled section timed on every 10th entry only.
    with Detector.detection_section("sampled"):
        pass
    Detector.custom_sections["sampled"].profiling_interval = 10
    variants: list[tuple[str, Callable[[], None]]] = [
        ("no-op context manager (baseline)", _noop),
        ("ours: detection_section('forward')", _ours_named),
        ("ours: cached handle (wrap_callables path)", _ours_handle),
        ("ours: detection_section() unnamed", _ours_unnamed),
        ("ours: profiling_interval=10 (9 of 10 untimed)", _ours_sampled),
        ("NVRx-shaped model (generator + frame walk)", _nvrx_model),
    ]
    results = measure(variants)
    Detector.shutdown()

    base_min, base_med = results["no-op context manager (baseline)"]
    rows = [
        {
            "variant": label,
            "per entry ns (best)": round(best, 1),
            "per entry ns (median)": round(med, 1),
            "added ns (best)": round(best - base_min, 1),
            "added ns (median)": round(med - base_med, 1),
        }
        for label, (best, med) in results.items()
    ]
    emit(
        "detector_overhead",
        rows,
        title="detection_section entry+exit, CPU path (kernel_timing=none)",
        meta={
            "block_entries": BLOCK,
            "blocks": BLOCKS,
            "goal_added_ns": 1000,
            "nvrx_reference_ns": 3000,
            "nvrx_reference": "ENVIRONMENT.md: NVRx 0.7.0 detection_section ~1.5-3 us",
        },
    )


if __name__ == "__main__":
    main()
