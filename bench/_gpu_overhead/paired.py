"""The paired A/B method: blocks of steps without (A) and with (B) a mode's timing,
alternated ABBA inside one process (separate processes per mode differ by about
+-10% on these machines, more than the effect), each block ending with its mode's
flush inside the timed region; the figure is the median over pairs of B/A. Also one
mode's whole measurement on a workload (``measure_mode``: plain blocks around it,
records seen, the parts modes' figures) and the kernels a step launches."""

from __future__ import annotations

import contextlib
import statistics
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from .bare_modes import BareCupti
from .cupti_calls import cupti_flush
from .mode import Mode
from .workloads import Step


def run_block(
    step: Step,
    steps: int,
    flush: Callable[[], None] = lambda: None,
    warm: Callable[[], None] = lambda: None,
) -> float:
    import torch

    torch.cuda.synchronize()
    flush()
    warm()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    flush()
    return (time.perf_counter() - t0) / steps


def measure(mode: Mode, step: Step, pairs: int, block: int) -> dict[str, Any]:
    timed = mode.wrap(step)
    a_times: list[float] = []
    b_times: list[float] = []

    def around(start: Callable[[], None], end: Callable[[], None], fn: Step, b: bool) -> float:
        start()
        try:
            return run_block(fn, block, mode.flush, lambda: mode.warm(b))
        finally:
            end()

    def run_a() -> float:
        return around(mode.a_block_start, mode.a_block_end, step, False)

    def run_b() -> float:
        return around(mode.block_start, mode.block_end, timed, True)

    run_a()  # warm both paths
    run_b()
    for i in range(pairs):
        # ABBA ordering cancels a slow drift within a pair.
        if i % 2 == 0:
            a_times.append(run_a())
            b_times.append(run_b())
        else:
            b_times.append(run_b())
            a_times.append(run_a())
    ratios = np.array(b_times) / np.array(a_times)
    return {
        "a_step_ms_median": statistics.median(a_times) * 1e3,
        "b_step_ms_median": statistics.median(b_times) * 1e3,
        "ratio_median": float(np.median(ratios)),
        "ratio_p25": float(np.percentile(ratios, 25)),
        "ratio_p75": float(np.percentile(ratios, 75)),
        "added_step_us_median": float(np.median(np.array(b_times) - np.array(a_times)) * 1e6),
        "a_step_ms": [round(t * 1e3, 4) for t in a_times],
        "b_step_ms": [round(t * 1e3, 4) for t in b_times],
    }


def measure_mode(mode: Mode, step: Step, pairs: int, block: int, kps: float) -> dict[str, Any]:
    """``mode`` set up, measured in ``pairs`` pairs of ``block`` steps, torn down; an
    error's traceback in place of the figures. ``kps``: the step's kernels."""
    # Plain blocks just before set-up and just after teardown: a cost the
    # mode adds to every step (B and A blocks alike) shows only here.
    before = [run_block(step, block, cupti_flush) for _ in range(6)]
    try:
        mode.setup()
        r = measure(mode, step, pairs, block)
        r["pairs"] = pairs
        backend = getattr(getattr(mode, "det", None), "_backend", None)
        marker_mode = getattr(backend, "marker_mode", None)
        if marker_mode is not None:
            r["marker_mode"] = marker_mode
        r["added_per_kernel_us"] = r["added_step_us_median"] / kps if kps else None
        parts = getattr(mode, "parts", None)
        if parts:
            # Per step, medians over blocks.
            r["hook_distribution"] = mode.hook_distribution()  # type: ignore[attr-defined]
            r["steady_per_step"] = mode.steady()  # type: ignore[attr-defined]
            r["parts_per_step"] = {
                k.removesuffix("_ns") + ("_per_block" if k.endswith("calls") else "_us"): (
                    statistics.median(v)
                    if k.endswith("calls")
                    else statistics.median(v) / 1e3 / block
                )
                for k, v in parts.items()
            }
    except Exception:
        r = {"error": traceback.format_exc(limit=4)}
    finally:
        with contextlib.suppress(Exception):
            mode.teardown()
    after = [run_block(step, block, cupti_flush) for _ in range(6)]
    # Read after teardown: ours count its window's records there.
    seen = getattr(mode, "count", getattr(mode, "records_seen", None))
    if seen is not None and "error" not in r:
        r["records_seen"] = seen
    if "a_step_ms_median" in r:
        pre = statistics.median(before) * 1e3
        r["plain_before_ms"] = pre
        r["plain_after_ms"] = statistics.median(after) * 1e3
        r["a_vs_plain_before"] = r["a_step_ms_median"] / pre
        r["plain_after_vs_before"] = r["plain_after_ms"] / pre
    return r


def kernels_per_step(step: Step, steps: int = 20) -> float:
    """Kernel launches per step, counted with bare CUPTI tracing."""
    import torch

    mode = BareCupti()
    mode.setup()
    torch.cuda.synchronize()
    mode.block_start()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    mode.block_end()
    mode.c.activity_flush_all(1)
    n = mode.count / steps
    mode.teardown()
    return n
