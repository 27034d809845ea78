"""Diagnostics that run our detector's backend: the time inside its start and stop
around each step (``hook_costs``: diagnostics ``hooks`` and ``hooks_sampled``) and
where a forced flush hands its buffers over (``flush_delivery``). Apart from the
call-by-call diagnostics, which run no detector."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from .detector_modes import Ours
from .workloads import Step


def hook_costs(step: Step, steps: int = 200, sample_every: int = 1) -> dict[str, Any]:
    """Time the training thread spends inside the backend's start and stop (default
    markers) around launch-bound steps: the direct part of our cost. Traced and
    untraced entries apart (with ``sample_every`` > 1), means beside medians."""
    import torch

    from pacekeeper.detector import Detector

    mode = Ours("hooks", sample_every)
    mode.setup()
    try:
        backend = Detector._backend
        assert backend is not None
        times: dict[bool, tuple[list[int], list[int]]] = {True: ([], []), False: ([], [])}
        for _ in range(steps):
            t0 = time.perf_counter_ns()
            backend.start("step")
            t1 = time.perf_counter_ns()
            traced = bool(backend._active)
            step()
            t2 = time.perf_counter_ns()
            backend.stop("step")
            t3 = time.perf_counter_ns()
            times[traced][0].append(t1 - t0)
            times[traced][1].append(t3 - t2)
        torch.cuda.synchronize()
        out: dict[str, Any] = {"marker_mode": backend.marker_mode, "sample_every": sample_every}
        for traced, (starts, stops) in times.items():
            if not starts:
                continue
            tag = "" if traced else "untraced_"
            out[f"{tag}entries"] = len(starts)
            for name, t in (("start", starts), ("stop", stops)):
                out[f"{tag}{name}_us_median"] = statistics.median(t) / 1e3
                out[f"{tag}{name}_us_p90"] = float(np.percentile(t, 90)) / 1e3
                out[f"{tag}{name}_us_mean"] = float(np.mean(t)) / 1e3
        return out
    finally:
        mode.teardown()


def flush_delivery(step: Step, steps: int = 40, repeats: int = 5) -> dict[str, Any]:
    """Where and when a forced flush hands our buffers over after traced steps and a
    device synchronize: inside the flush call on the calling thread, on CUPTI's own
    thread, or after the call returned. Decides whether a report needs a fence marker."""
    import threading

    import torch

    from pacekeeper.detector import Detector

    mode = Ours("flush", 1)
    mode.setup()
    try:
        backend = Detector._backend
        raw = backend._raw
        assert raw is not None
        ours = raw._on_bytes
        me = threading.get_ident()
        seen: list[tuple[bool, int]] = []

        def spy(view: Any) -> None:
            seen.append((threading.get_ident() == me, time.perf_counter_ns()))
            ours(view)

        raw._on_bytes = spy
        from cupti import cupti

        rows = []
        for _ in range(repeats):
            for _ in range(steps):
                with Detector.detection_section("step", profile_cuda=True):
                    step()
            torch.cuda.synchronize()
            seen.clear()
            t0 = time.perf_counter_ns()
            cupti.activity_flush_all(1)
            t1 = time.perf_counter_ns()
            time.sleep(0.05)
            rows.append(
                {
                    "flush_us": (t1 - t0) / 1e3,
                    "in_call_this_thread": sum(1 for mine, t in seen if mine and t <= t1),
                    "in_call_other_thread": sum(1 for mine, t in seen if not mine and t <= t1),
                    "after_return": sum(1 for _, t in seen if t > t1),
                    "last_after_return_us": max(
                        [(t - t1) / 1e3 for _, t in seen if t > t1], default=0
                    ),
                }
            )
            seen.clear()
            t0 = time.perf_counter_ns()
            cupti.activity_flush_all(1)
            rows[-1]["idle_flush_us"] = (time.perf_counter_ns() - t0) / 1e3
            t0 = time.perf_counter_ns()
            cupti.activity_flush_all(0)
            rows[-1]["idle_plain_flush_us"] = (time.perf_counter_ns() - t0) / 1e3
            backend.collect()
        return {"rows": rows}
    finally:
        mode.teardown()
