"""Diagnostics of the marker memset itself (``stop_marker_variants``: what makes the
stop marker slow right after a step's launches; ``marker_after_flush``: the first
marker after a plain and a forced flush). Apart from ``entry_calls``, whose calls
they reuse, because each holds many variants of one question."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .entry_calls import entry_calls, medians_us
from .workloads import Step


def stop_marker_variants(step: Step, rounds: int = 60) -> dict[str, Any]:
    """What makes the stop marker slow right after a step's launches (27-38 us against
    5 us at a step's start): the same call, and calls like it, each timed right after
    its own launch-bound step, round-robin so the host's drift touches all alike.
    Kernel and memset records on (as at interval 1), except where a variant says off."""
    import ctypes

    import torch
    from cupti import cupti

    from pacekeeper.cupti_ext.markers import MARKER_WORDS

    kernel, memset = cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET
    with entry_calls(step) as make:
        res = make.resources  # type: ignore[attr-defined]
        lib = res.libcuda
        torch_stream = int(torch.cuda.current_stream().cuda_stream)
        event = ctypes.c_void_p()
        lib.cuEventCreate(ctypes.byref(event), ctypes.c_uint(2))  # CU_EVENT_DISABLE_TIMING
        query = lib.cuStreamQuery
        query.argtypes = [ctypes.c_void_p]

        def private(words: int) -> Callable[[], Any]:
            return lambda: res.fn(res.buffer, 7, words, res.stream)

        def twice() -> None:
            res.fn(res.buffer, 7, MARKER_WORDS, res.stream)
            t0 = time.perf_counter_ns()
            res.fn(res.buffer, 8, MARKER_WORDS, res.stream)
            second.append(time.perf_counter_ns() - t0)

        second: list[int] = []
        small = torch.ones(16, device="cuda")
        launch_first: list[int] = []

        def after_main_thread_launch() -> None:
            # The bench's step ends in backward, whose kernels autograd launches from
            # its own thread; a training step ends on the main thread (the optimizer).
            t0 = time.perf_counter_ns()
            small.add_(1)
            launch_first.append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            res.fn(res.buffer, 8, MARKER_WORDS, res.stream)
            second_after_launch.append(time.perf_counter_ns() - t0)

        second_after_launch: list[int] = []
        variants: dict[str, Callable[[], Any]] = {
            "main_thread_launch_then_memset": after_main_thread_launch,
            "private_memset_61_words": private(MARKER_WORDS),
            "private_memset_1_word": private(1),
            "torch_stream_memset_61_words": lambda: res.fn(
                res.buffer, 7, MARKER_WORDS, torch_stream
            ),
            "private_memset_twice_first": twice,
            "private_event_record": lambda: lib.cuEventRecord(event, ctypes.c_void_p(res.stream)),
            "private_stream_query": lambda: query(ctypes.c_void_p(res.stream)),
            "get_timestamp": cupti.get_timestamp,
            # The parts modes read this clock once per hook side (their own cost).
            "thread_time_ns": time.thread_time_ns,
        }
        times: dict[str, list[int]] = {name: [] for name in variants}
        times_off: list[int] = []
        cupti.activity_enable(kernel)
        cupti.activity_enable(memset)
        for _ in range(rounds):
            for name, call in variants.items():
                step()
                t0 = time.perf_counter_ns()
                call()
                times[name].append(time.perf_counter_ns() - t0)
        cupti.activity_disable(kernel)
        cupti.activity_disable(memset)
        for _ in range(rounds):  # no records at all: is it CUPTI's doing?
            step()
            t0 = time.perf_counter_ns()
            res.fn(res.buffer, 7, MARKER_WORDS, res.stream)
            times_off.append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
        cupti.activity_flush_all(1)
        lib.cuEventDestroy_v2(event)
    out = medians_us(times)
    out["private_memset_twice_second_us_median"] = statistics.median(second) / 1e3
    out["main_thread_launch_us_median"] = statistics.median(launch_first) / 1e3
    out["memset_after_main_thread_launch_us_median"] = statistics.median(second_after_launch) / 1e3
    out["private_memset_records_off_us_median"] = statistics.median(times_off) / 1e3
    return out


def marker_after_flush(step: Step, rounds: int = 20) -> dict[str, Any]:
    """The first marker after a flush (kernel and memset records on, device
    synchronized): a forced flush (every report's) against a plain one, and the
    marker after that. A traced entry right after a forced flush took 1-1.5 ms."""
    import torch
    from cupti import cupti

    from pacekeeper.cupti_ext.markers import MARKER_WORDS

    kernel, memset = cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMSET
    out: dict[str, Any] = {}
    with entry_calls(step) as make:
        res = make.resources  # type: ignore[attr-defined]
        cupti.activity_enable(kernel)
        cupti.activity_enable(memset)
        times: dict[str, list[int]] = {}
        for i in range(2 * rounds):
            forced = i % 2 == 0
            step()
            torch.cuda.synchronize()
            cupti.activity_flush_all(1 if forced else 0)
            for which in ("first", "second"):
                t0 = time.perf_counter_ns()
                res.fn(res.buffer, 9, MARKER_WORDS, res.stream)
                key = f"{'forced' if forced else 'plain'}_flush_{which}_marker"
                times.setdefault(key, []).append(time.perf_counter_ns() - t0)
        cupti.activity_disable(kernel)
        cupti.activity_disable(memset)
        cupti.activity_flush_all(1)
        out = medians_us(times)
    return out
