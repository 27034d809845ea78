"""The CUPTI and driver calls of a traced entry (memset markers), made and timed one
by one around launch-bound steps without the detector (``entry_calls``; diagnostics
``marker_calls`` and ``sampled_calls``): which of them is slow in a busy launch
stream. Apart from the marker diagnostics, which build on the same calls, and from
the hook diagnostics, which run the detector."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

from .cupti_calls import free_memset, release_cupti
from .workloads import Step


@contextlib.contextmanager
def entry_calls(step: Step) -> Iterator[Callable[[bool], dict[str, Callable[[], Any]]]]:
    """The CUPTI and driver calls of a traced entry (memset markers) around ``step``,
    without the detector: raw buffer callbacks that drop records, a marker stream.
    Yields a factory; ``calls(keep_memset=True)`` leaves the MEMSET kind alone."""
    import ctypes

    from cupti import cupti

    from pacekeeper.cupti_ext.cupti_backend import BUFFER_BYTES, RawBuffers, _memset_resources
    from pacekeeper.cupti_ext.cupti_backend import register_callbacks_function as reg
    from pacekeeper.cupti_ext.markers import MARKER_WORDS

    register_fn = reg()
    assert register_fn is not None
    raw = RawBuffers(register_fn, BUFFER_BYTES, lambda view: None)
    raw.register()
    res = _memset_resources(ctypes.CDLL("libcuda.so.1"))
    kernel, memset = cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET

    def switch(fn: Callable[[Any], Any], kind: Any, skip: bool) -> Callable[[], Any]:
        return (lambda: None) if skip else (lambda: fn(kind))

    def calls(keep_memset: bool = False) -> dict[str, Callable[[], Any]]:
        return {
            "enable_kernel": switch(cupti.activity_enable, kernel, False),
            "enable_memset": switch(cupti.activity_enable, memset, keep_memset),
            "marker_start": lambda: res.fn(res.buffer, 1, MARKER_WORDS, res.stream),
            "step": step,
            "marker_stop": lambda: res.fn(res.buffer, 2, MARKER_WORDS, res.stream),
            "disable_kernel": switch(cupti.activity_disable, kernel, False),
            "disable_memset": switch(cupti.activity_disable, memset, keep_memset),
        }

    calls.resources = res  # type: ignore[attr-defined]
    try:
        yield calls
    finally:
        release_cupti(cupti)
        cupti.activity_disable(memset)
        free_memset(res)


def marker_call_costs(step: Step, steps: int = 200) -> dict[str, Any]:
    """Each CUPTI and driver call a traced entry makes (memset markers), timed one by
    one around launch-bound steps without the detector: which of them is slow in a
    busy launch stream (the hooks take several times what the calls take when idle)."""
    import torch
    from cupti import cupti

    with entry_calls(step) as make:
        calls = make(False)
        times: dict[str, list[int]] = {name: [] for name in calls}
        for _ in range(steps):
            time_each(calls, times)
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
    return medians_us(times)


def time_each(calls: dict[str, Callable[[], Any]], times: dict[str, list[int]]) -> None:
    for name, call in calls.items():
        t0 = time.perf_counter_ns()
        call()
        times[name].append(time.perf_counter_ns() - t0)


def medians_us(times: dict[str, list[int]]) -> dict[str, float]:
    return {f"{name}_us_median": statistics.median(t) / 1e3 for name, t in times.items()}


def sampled_call_costs(step: Step, every: int = 32, traced: int = 12) -> dict[str, Any]:
    """marker_call_costs as sampling does it: the calls around one step in ``every``,
    the others plain, so records stay off for ``every - 1`` steps between switches.
    Also with the MEMSET kind left on throughout (only kernel records switched)."""
    import torch
    from cupti import cupti

    memset = cupti.ActivityKind.MEMSET
    out: dict[str, Any] = {}
    with entry_calls(step) as make:
        for variant in ("both_kinds", "memset_kind_kept_on"):
            keep_memset = variant == "memset_kind_kept_on"
            if keep_memset:
                cupti.activity_enable(memset)
            calls = make(keep_memset)
            times: dict[str, list[int]] = {name: [] for name in calls}
            plain: list[int] = []
            for _ in range(traced):
                for _ in range(every - 1):
                    t0 = time.perf_counter_ns()
                    step()
                    plain.append(time.perf_counter_ns() - t0)
                time_each(calls, times)
            torch.cuda.synchronize()
            cupti.activity_flush_all(1)
            if keep_memset:
                cupti.activity_disable(memset)
            row = medians_us(times)
            row["plain_step_us_median"] = statistics.median(plain) / 1e3
            out[variant] = row
    return out
