"""Where one warm ``generate_report`` spends its time, by phase, timed in place (no
profiler: cProfile inflates the many small numpy calls a report makes): the device
synchronize, the backend's collect (CUPTI fence, flush, window), the payload build
(baselines, individual scores), the gather, the scoring, and the ScoreReport. The
rest of the call is ``other``. Ours only; NVRx's total is timed beside it."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .workloads import Step


@contextmanager
def _timing(targets: list[tuple[Any, str, str]], spent: dict[str, float]) -> Iterator[None]:
    """Wrap ``getattr(owner, attr)`` for each (owner, attr, phase); put them back after."""
    saved = []
    for owner, attr, phase in targets:
        fn = getattr(owner, attr)
        saved.append((owner, attr, fn, attr in vars(owner)))

        def timed(*args: Any, _fn: Callable[..., Any] = fn, _p: str = phase, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*args, **kw)
            finally:
                spent[_p] += time.perf_counter() - t0

        setattr(owner, attr, timed)
    try:
        yield
    finally:
        for owner, attr, fn, own in reversed(saved):
            if own:
                setattr(owner, attr, fn)
            else:
                delattr(owner, attr)


def report_phases(det: Any, step: Step, repeats: int) -> dict[str, Any]:
    """Median ms per phase over ``repeats`` warm reports, each after 40 traced steps."""
    import torch

    from pacekeeper.cupti_ext import cupti_buffers, cupti_session, window_builder
    from pacekeeper.detector import gather, local_payload, report_cycle, run_state

    backend = det._backend
    builder = window_builder.KernelWindowBuilder
    # Inside backend_collect (not summed into ``other``): the fence's marker and flush,
    # and, inside the flush, our buffer callback's decode and attribution.
    nested: list[tuple[Any, str, str]] = [
        (cupti_session.CuptiSession, "_emit_memset", "in_collect.marker"),
        (cupti_buffers, "decode_buffer", "in_collect.decode"),
        (builder, "add", "in_collect.builder_add"),
        (builder, "settle", "in_collect.settle"),
        (builder, "take", "in_collect.take"),
        (type(backend), "_resample", "in_collect.resample"),
    ]
    per: dict[str, list[float]] = defaultdict(list)
    targets: list[tuple[Any, str, str]] = [
        (local_payload, "_cuda_synchronize", "cuda_synchronize"),
        (backend, "collect", "backend_collect"),
        (local_payload.PayloadBuilder, "build", "payload_build"),
        (run_state.RunState, "refresh", "group_refresh"),
        (gather, "gather_to_reporter", "gather"),
        (report_cycle, "score_payloads", "score"),
        (report_cycle, "_score_report", "score_report"),
    ]
    for i in range(repeats + 1):
        for _ in range(40):
            with det.detection_section("step", profile_cuda=True):
                step()
        torch.cuda.synchronize()
        spent: dict[str, float] = defaultdict(float)
        inner: dict[str, float] = defaultdict(float)
        with _timing(targets, spent), _timing(nested, inner):
            t0 = time.perf_counter()
            det.generate_report()
            total = time.perf_counter() - t0
        if i == 0:
            continue  # the first report learns names and builds its tables
        per["total"].append(total * 1e3)
        for phase in {p for _, _, p in targets}:
            per[phase].append(spent[phase] * 1e3)
        for phase in {p for _, _, p in nested}:
            per[phase].append(inner[phase] * 1e3)
        per["other"].append((total - sum(spent.values())) * 1e3)
    fence = dict(getattr(backend, "last_collect", {}))
    return {
        "median_ms": {k: statistics.median(v) for k, v in per.items()},
        "last_collect": fence,
    }
