"""Kernel-timing overhead on a GPU: paired A/B blocks inside one process.

Separate processes per mode differ by about +-10% on these machines, more than the
effect, so every mode is measured as alternating blocks of steps without (A) and with
(B) timing inside one process pinned to one core; the figure is the median over pairs
of B/A. Modes, all in the same run and on the same steps:
  aa            nothing timed in either block (the method's own noise)
  bare_raw      CUPTI CONCURRENT_KERNEL tracing, raw buffer callback (ctypes) only counting
  bare_cupti    CUPTI CONCURRENT_KERNEL tracing, cupti-python callback only counting records
  ours_i1       pacekeeper Detector, profiling_interval=1, every entry traced
  ours_default  pacekeeper Detector with its defaults
  ours_*_driver the same two with driver-call section markers (PACEKEEPER_KERNEL_MARKER=
                driver: the fallback where memset markers cannot be used)
  ours_i1_markers  ours_i1 with its buffers only counted, not decoded: the cost of
                markers and switching records on and off, without record handling
  ours_i1_vs_bare  A blocks bare_raw, B blocks ours_i1, in one process: our cost above
                the floor measured directly (the other modes' A blocks are untraced)
  ours_switched_vs_bare  the same with records switched per entry (the backend keeps
                them on between consecutive traced entries at interval 1)
  ours_i1_parts, ours_default_parts  ours_i1_vs_bare, and ours_default against plain
                A blocks, with each block's hook time (training thread) and buffer
                callback time (CUPTI's thread) timed in place, wall and CPU, and
                from them the steady state of a running job (steady_parts: what the
                blocks pay once per flush taken out)
  toggle_vs_bare  A blocks bare_raw, B blocks bare_toggle: what switching costs, paired
  bare_toggle   bare_raw with kernel records switched on and off around every step
  bare_toggle_memset_kind  bare_toggle, the MEMSET kind switched along
  bare_markers  bare_toggle_memset_kind plus a marker memset at each step's start and end
  nvrx          NVRx 0.7.0 Detector.detection_section(profile_cuda=True), interval 1
Steps: launch-bound (100 x Linear(256), forward and backward) and GEMM-bound
(4 x bf16 8192^3). Also generate_report time on one rank, ours vs NVRx (ours with
a cProfile of where a report's time goes), hook and marker-call costs, and where a
forced flush hands buffers over (flush_delivery).

Every block of a tracing mode (A and B alike) ends with a forced CUPTI flush inside the
timed region (NVRx's: a plain one), so the cost of handling a block's records lands in
that block and not in the next one. Prints a table and writes JSON to --out (default
$OUT, else bench/results).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

Step = Callable[[], None]


def build_steps() -> dict[str, Step]:
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(256, 256) for _ in range(100)]
    model = torch.nn.Sequential(*layers).cuda()
    x = torch.randn(64, 256, device="cuda")

    def launch_bound() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def gemm_bound() -> None:
        c = a
        for _ in range(4):
            c = torch.matmul(a, b)
        del c

    return {"launch_bound": launch_bound, "gemm_bound": gemm_bound}


class Mode:
    """How a B block runs a step; setup/teardown around the mode's whole measurement."""

    name = "aa"

    def setup(self) -> None:
        pass

    def block_start(self) -> None:
        pass

    def block_end(self) -> None:
        pass

    def a_block_start(self) -> None:
        """Before an A block: most modes run A blocks plain."""

    def a_block_end(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def warm(self, b_block: bool) -> None:
        """After a block's opening flush, before its clock starts."""

    def wrap(self, step: Step) -> Step:
        return step

    def teardown(self) -> None:
        pass


def release_cupti(cupti: Any) -> None:
    """Stop tracing and deliver what is buffered. No cuptiFinalize: called from an
    ordinary thread it left CUPTI giving no records to the next mode in this process."""
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_flush_all(1)


def cupti_flush() -> None:
    from cupti import cupti

    cupti.activity_flush_all(0)


def cupti_flush_forced() -> None:
    """Hand over every buffer, the partial one too, so a block's records are all
    handled inside that block."""
    from cupti import cupti

    cupti.activity_flush_all(1)


class BareTracing(Mode):
    """CUPTI kernel tracing on for whole B blocks, records only counted: the floor."""

    c: Any

    def block_start(self) -> None:
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def block_end(self) -> None:
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)

    flush = staticmethod(cupti_flush_forced)

    def teardown(self) -> None:
        release_cupti(self.c)


class BareRaw(BareTracing):
    name = "bare_raw"

    def setup(self) -> None:
        from cupti import cupti

        from pacekeeper.cupti_ext.cupti_backend import (
            BUFFER_BYTES,
            RawBuffers,
            register_callbacks_function,
        )

        self.c = cupti
        cupti.get_timestamp()
        self.count = 0
        size = int(cupti.activity_kernel10_dtype.itemsize)

        def on_bytes(raw: Any) -> None:
            self.count += len(raw) // size

        register_fn = register_callbacks_function()
        assert register_fn is not None, "cupti-python exposes no cuptiActivityRegisterCallbacks"
        self.raw = RawBuffers(register_fn, BUFFER_BYTES, on_bytes)
        self.raw.register()


class BareToggle(BareRaw):
    """The floor, but kernel records switched on and off around every step, as a
    section does: what the switching itself costs."""

    name = "bare_toggle"

    def block_start(self) -> None:
        pass

    def block_end(self) -> None:
        pass

    def wrap(self, step: Step) -> Step:
        c, kind = self.c, self.c.ActivityKind.CONCURRENT_KERNEL

        def toggled() -> None:
            c.activity_enable(kind)
            step()
            c.activity_disable(kind)

        return toggled


class BareMarkers(BareToggle):
    """bare_toggle plus what our memset markers add at the CUPTI and driver level,
    without the detector: the MEMSET kind switched with the kernel kind, and (with
    ``memsets``) a marker memset on a private stream at each step's start and end."""

    def __init__(self, name: str, memsets: bool) -> None:
        self.name = name
        self.memsets = memsets

    def setup(self) -> None:
        super().setup()
        import ctypes

        from pacekeeper.cupti_ext.cupti_backend import _memset_resources
        from pacekeeper.cupti_ext.markers import MARKER_WORDS

        self.res = _memset_resources(ctypes.CDLL("libcuda.so.1"))
        self.words = MARKER_WORDS

    def wrap(self, step: Step) -> Step:
        c, res, words, memsets = self.c, self.res, self.words, self.memsets
        kinds = (c.ActivityKind.CONCURRENT_KERNEL, c.ActivityKind.MEMSET)

        def marked() -> None:
            for k in kinds:
                c.activity_enable(k)
            if memsets:
                res.fn(res.buffer, 1, words, res.stream)
            step()
            if memsets:
                res.fn(res.buffer, 2, words, res.stream)
            for k in kinds:
                c.activity_disable(k)

        return marked

    def teardown(self) -> None:
        super().teardown()
        self.c.activity_disable(self.c.ActivityKind.MEMSET)
        free_memset(self.res)


def free_memset(res: Any) -> None:
    import ctypes

    res.libcuda.cuMemFree_v2(ctypes.c_uint64(res.buffer))
    res.libcuda.cuStreamDestroy_v2(ctypes.c_void_p(res.stream))


class BareCupti(BareTracing):
    name = "bare_cupti"

    def setup(self) -> None:
        from cupti import cupti

        self.c = cupti
        self.count = 0

        def requested() -> tuple[int, int]:
            return 1 << 20, 0

        def completed(acts: Any) -> None:
            self.count += len(acts)

        cupti.activity_register_callbacks(requested, completed)


class SectionMode(Mode):
    """A detector's ``detection_section('step', profile_cuda=True)`` around each step
    (ours and NVRx's share the API, so they are timed the same way)."""

    det: Any

    def wrap(self, step: Step) -> Step:
        section = self.det.detection_section

        def wrapped() -> None:
            with section("step", profile_cuda=True):
                step()

        return wrapped

    flush = staticmethod(cupti_flush)


class Ours(SectionMode):
    def __init__(
        self,
        name: str,
        sample_every: int | None,
        marker: str = "auto",
        decode: bool = True,
        buffer_kib: int | None = None,
    ) -> None:
        self.name = name
        self.sample_every = sample_every
        self.marker = marker
        self.decode = decode
        self.buffer_kib = buffer_kib

    def setup(self) -> None:
        from pacekeeper.detector import Detector

        os.environ["PACEKEEPER_KERNEL_MARKER"] = self.marker
        if self.buffer_kib is not None:
            os.environ["PACEKEEPER_CUPTI_BUFFER_KIB"] = str(self.buffer_kib)
        else:
            os.environ.pop("PACEKEEPER_CUPTI_BUFFER_KIB", None)
        if self.sample_every is not None:
            os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = str(self.sample_every)
        else:
            os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        self.det = Detector
        if self.sample_every is None:
            Detector.initialize(report_time_interval=3600, kernel_timing="cupti")
        else:
            Detector.initialize(
                report_time_interval=3600, profiling_interval=1, kernel_timing="cupti"
            )
        assert Detector.kernel_timing_backend() == "cupti", Detector.kernel_timing_backend()
        self.records_seen = 0
        if not self.decode:
            raw = Detector._backend._raw  # type: ignore[union-attr]
            assert raw is not None, "raw buffers unavailable"
            size = 16  # the smallest record: a rough count is all this mode needs

            def count(view: Any) -> None:
                self.records_seen += len(view) // size

            raw._on_bytes = count

    flush = staticmethod(cupti_flush_forced)
    warm_a = False
    """Whether A blocks trace too, and so get the same warm-up as B blocks."""

    def warm(self, b_block: bool) -> None:
        # The first marker after a forced flush takes 1-1.5 ms (runs H-K): a job pays
        # that once per report, but the bench flushes around every block. One fence
        # marker before the clock starts pays it where a block does not count it.
        if b_block or self.warm_a:
            from pacekeeper.cupti_ext.attribution import encode_external_id

            backend = self.det._backend
            backend._emit(encode_external_id(0, 0, False), backend._marker)

    def block_start(self) -> None:
        # At interval 1 a running job has records on when an entry starts (kept on from
        # the last one; switched on once per report window): switch them on here, out
        # of the timed region, as A blocks of the *_vs_bare modes do for the floor.
        backend = self.det._backend
        if backend._keep_on and backend.sample_every == 1:
            backend._gate(True)

    def block_end(self) -> None:
        # A B block ends the traced phase: records off, so the next block is plain.
        self.det._backend._ungate()

    def teardown(self) -> None:
        # One window for the whole run: a report per block would add a fence and a
        # forced flush NVRx's blocks do not pay (the report's cost is timed apart).
        if self.decode:
            self.records_seen += self.det._backend.collect().records
        self.det.shutdown()
        os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        os.environ.pop("PACEKEEPER_KERNEL_MARKER", None)
        os.environ.pop("PACEKEEPER_CUPTI_BUFFER_KIB", None)


class OursVsBare(Ours):
    """ours_i1 against the floor in the same process: A blocks trace every kernel
    through the backend's own buffer callbacks with records only counted (bare_raw),
    B blocks run the detector. The difference is what we add above bare tracing."""

    warm_a = True

    def __init__(self) -> None:
        super().__init__("ours_i1_vs_bare", 1)

    def setup(self) -> None:
        super().setup()
        from pacekeeper.detector import Detector

        self.raw = Detector._backend._raw  # type: ignore[union-attr]
        assert self.raw is not None, "raw buffers unavailable"
        self.ours = self.raw._on_bytes
        from cupti import cupti

        self.c = cupti
        self.count = 0
        size = int(cupti.activity_kernel10_dtype.itemsize)

        def count(view: Any) -> None:
            self.count += len(view) // size

        self.counter = count

    def a_block_start(self) -> None:
        self.raw._on_bytes = self.counter
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def a_block_end(self) -> None:
        # The block's forced flush (timed) has handed its records to the counter.
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)
        self.raw._on_bytes = self.ours


class ToggleVsBare(BareToggle):
    """A blocks: kernel records on for the whole block (bare_raw); B blocks: switched on
    and off around every step (bare_toggle). What switching costs, paired."""

    name = "toggle_vs_bare"

    def a_block_start(self) -> None:
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def a_block_end(self) -> None:
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)


class OursSwitchedVsBare(OursVsBare):
    """ours_i1_vs_bare with kernel records switched on and off around every entry (the
    backend keeps them on between consecutive traced entries by default)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "ours_switched_vs_bare"

    def setup(self) -> None:
        super().setup()
        self.det._backend._keep_on = False


class OursParts(OursVsBare):
    """Where a B block's added time goes, timed in place: on the training thread the
    detector's enter and exit around each step (wall and thread CPU time), on CUPTI's
    buffer thread the buffer callback (wall and thread CPU time); A and B blocks apart.
    ``vs_bare``: A blocks trace every kernel with records only counted (as in
    ours_i1_vs_bare); otherwise A blocks are plain."""

    def __init__(
        self, name: str, sample_every: int | None, vs_bare: bool, buffer_kib: int | None = None
    ) -> None:
        Ours.__init__(self, name, sample_every, buffer_kib=buffer_kib)
        self.vs_bare = self.warm_a = vs_bare

    def setup(self) -> None:
        super().setup()
        self.parts: dict[str, list[float]] = {}
        self._acc = dict.fromkeys(
            ("hooks_ns", "hooks_cpu_ns", "cb_cpu_ns", "cb_wall_ns", "cb_calls"), 0
        )
        self.steps: list[StepSample] = []
        self.callbacks: list[CallbackSample] = []
        self._block = -1  # B blocks so far
        self._in_flush = False
        self.ours = self._timed(self.ours, record=True)
        self.counter = self._timed(self.counter, record=False)
        self.raw._on_bytes = self.ours

    def hook_distribution(self) -> dict[str, float]:
        """Enter and exit times per step over all B blocks: where a mean comes from."""
        out: dict[str, float] = {}
        for side in ("enter", "exit"):
            t = np.array([getattr(s, f"{side}_ns") for s in self.steps], np.float64) / 1e3
            for q in (50, 90, 97, 99):
                out[f"{side}_us_p{q}"] = float(np.percentile(t, q))
            out[f"{side}_us_mean"] = float(t.mean())
            out[f"{side}_us_max"] = float(t.max())
            out[f"{side}_share_of_sum_above_p97"] = float(
                t[t > np.percentile(t, 97)].sum() / t.sum()
            )
        return out

    def steady(self) -> dict[str, float]:
        return steady_parts(self.steps, self.callbacks)

    def flush(self) -> None:
        self._in_flush = True
        try:
            cupti_flush_forced()
        finally:
            self._in_flush = False

    def _timed(self, fn: Callable[[Any], None], record: bool) -> Callable[[Any], None]:
        acc, builder = self._acc, self.det._backend._builder

        def timed(view: Any) -> None:
            c0, w0, r0 = time.thread_time_ns(), time.perf_counter_ns(), builder.received
            try:
                fn(view)
            finally:
                wall = time.perf_counter_ns() - w0
                acc["cb_cpu_ns"] += time.thread_time_ns() - c0
                acc["cb_wall_ns"] += wall
                acc["cb_calls"] += 1
                if record:
                    self.callbacks.append(
                        CallbackSample(self._block, wall, builder.received - r0, self._in_flush)
                    )

        return timed

    def wrap(self, step: Step) -> Step:
        section, acc = self.det.detection_section, self._acc
        backend = self.det._backend
        clock, cpu = time.perf_counter_ns, time.thread_time_ns
        steps = self.steps

        def wrapped() -> None:
            t0, c0 = clock(), cpu()
            with section("step", profile_cuda=True):
                t1, c1 = clock(), cpu()
                traced = backend._active
                step()
                t2, c2 = clock(), cpu()
            t3 = clock()
            acc["hooks_ns"] += (t1 - t0) + (t3 - t2)
            acc["hooks_cpu_ns"] += (c1 - c0) + (cpu() - c2)
            steps.append(StepSample(self._block, t1 - t0, t3 - t2, bool(traced)))

        return wrapped

    def _reset(self) -> None:
        for k in self._acc:
            self._acc[k] = 0

    def _keep(self, side: str) -> None:
        for k, v in self._acc.items():
            self.parts.setdefault(f"{side}_{k}", []).append(v)

    def a_block_start(self) -> None:
        self._reset()
        if self.vs_bare:
            super().a_block_start()

    def a_block_end(self) -> None:
        if self.vs_bare:
            super().a_block_end()
        self._keep("a")

    def block_start(self) -> None:
        super().block_start()
        self._block += 1
        self._reset()

    def block_end(self) -> None:
        super().block_end()
        self._keep("b")


class StepSample(NamedTuple):
    block: int
    enter_ns: int
    exit_ns: int
    traced: bool


class CallbackSample(NamedTuple):
    block: int
    wall_ns: int
    records: int
    in_flush: bool


def steady_parts(steps: list[StepSample], callbacks: list[CallbackSample]) -> dict[str, float]:
    """Our added time per step as a running job pays it, from the parts timed in place.

    Two things the bench's blocks pay that a job pays once per report are taken out:
    the first traced entry after a forced flush (its first marker takes ~1-1.5 ms on the
    H200; it is replaced by the median of the other traced entries), and the fixed
    handling of the partial buffers each block's flush hands over (records are charged at
    what they cost in buffers handed over between flushes, where there are any).
    """
    if not steps:
        return {}
    cost = np.array([s.enter_ns + s.exit_ns for s in steps], np.float64)
    traced = np.array([s.traced for s in steps])
    first = np.zeros(len(steps), np.bool_)
    seen: set[int] = set()
    for i, s in enumerate(steps):
        if s.traced and s.block not in seen:
            seen.add(s.block)
            first[i] = True
    regular = traced & ~first
    typical = float(np.median(cost[regular])) if regular.any() else float("nan")
    steady_cost = cost.copy()
    if regular.any():
        steady_cost[first] = typical
    records = sum(c.records for c in callbacks)
    between = [c for c in callbacks if not c.in_flush and c.records]
    basis = between or [c for c in callbacks if c.records]
    per_record = sum(c.wall_ns for c in basis) / sum(c.records for c in basis) if basis else 0.0
    hooks_us = float(steady_cost.mean()) / 1e3
    callback_us = per_record * records / len(steps) / 1e3
    return {
        "hooks_us": hooks_us,
        "callback_us": callback_us,
        "added_us": hooks_us + callback_us,
        "traced_share": float(traced.mean()),
        "traced_entry_us": typical / 1e3,
        "first_after_flush_us": float(np.median(cost[first])) / 1e3 if first.any() else 0.0,
        "callback_ns_per_record": per_record,
        "per_record_from": 1.0 if between else 0.0,
    }


class Nvrx(SectionMode):
    name = "nvrx"

    def setup(self) -> None:
        from nvidia_resiliency_ext.attribution import straggler

        self.det = straggler.Detector
        self.det.initialize(report_time_interval=3600, profiling_interval=1)

    def teardown(self) -> None:
        self.det.shutdown()


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


def report_times(det: Any, step: Step, section_kw: dict[str, Any], repeats: int) -> dict[str, Any]:
    """generate_report on one rank after 40 traced steps, repeated; first and warm. For
    ours, also the backend's ``collect`` (the CUPTI part of a report) on its own."""
    import torch

    def timed(call: Callable[[], Any]) -> tuple[float, Any]:
        for _ in range(40):
            with det.detection_section("step", **section_kw):
                step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = call()
        return (time.perf_counter() - t0) * 1e3, out

    runs = [timed(det.generate_report) for _ in range(repeats)]
    times = [t for t, _ in runs]
    report = runs[-1][1]
    backend = getattr(det, "_backend", None)
    collect = getattr(backend, "collect", None)
    collect_ms = [timed(collect)[0] for _ in range(repeats)] if collect else []
    collect_parts = dict(getattr(backend, "last_collect", {}))
    idle_ms: list[float] = []
    if collect:
        # A second collect right after one has nothing to hand over: the fence alone.
        for _ in range(repeats):
            collect()
            t0 = time.perf_counter()
            collect()
            idle_ms.append((time.perf_counter() - t0) * 1e3)
    return {
        "first_ms": times[0],
        "warm_ms_median": statistics.median(times[1:]),
        "warm_ms_min": min(times[1:]),
        "kernel_keys_in_report": len(getattr(report, "local_kernel_summaries", {}) or {}),
        "collect_ms_median": statistics.median(collect_ms) if collect_ms else None,
        "collect_idle_ms_median": statistics.median(idle_ms) if idle_ms else None,
        "last_collect_after_steps": collect_parts,
        "gpu_scores": dict(getattr(report, "gpu_relative_perf_scores", {}) or {}),
    }


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
            traced = bool(backend._active)  # type: ignore[attr-defined]
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
        raw = backend._raw  # type: ignore[union-attr]
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
            backend.collect()  # type: ignore[union-attr]
        return {"rows": rows}
    finally:
        mode.teardown()


def profile_reports(det: Any, step: Step, repeats: int, top: int = 20) -> list[dict[str, Any]]:
    """cProfile over ``repeats`` reports (40 traced steps before each, not profiled):
    the functions with the most own time, per report. Profiling inflates Python-heavy
    parts; read the shares, not the totals."""
    import cProfile
    import pstats

    import torch

    prof = cProfile.Profile()
    for _ in range(repeats):
        for _ in range(40):
            with det.detection_section("step", profile_cuda=True):
                step()
        torch.cuda.synchronize()
        prof.enable()
        det.generate_report()
        prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return [
        {
            "function": f"{Path(file).name}:{line}({fn})",
            "calls_per_report": nc / repeats,
            "own_us_per_report": tt / repeats * 1e6,
            "cumulative_us_per_report": ct / repeats * 1e6,
        }
        for (file, line, fn), (_, nc, tt, ct, _) in rows
    ]


def bench_reports(
    step: Step, repeats: int, names: list[str], modes: dict[str, Callable[[], Mode]]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        mode = modes[name]()
        try:
            mode.setup()
            out[name] = report_times(mode.det, step, {"profile_cuda": True}, repeats)  # type: ignore[attr-defined]
            if name.startswith("ours"):
                out[name]["profile"] = profile_reports(mode.det, step, repeats)  # type: ignore[attr-defined]
        except Exception:
            out[name] = {"error": traceback.format_exc(limit=3)}
        finally:
            with contextlib.suppress(Exception):
                mode.teardown()
    return out


def record_processing_cost(repeats: int = 30) -> dict[str, Any]:
    """CPU cost per record of our buffer path (walk and decode, fold into statistics),
    compiled and numpy, on buffers of the backend's size (``BUFFER_BYTES``) synthesized
    with cupti-python's real record dtypes: 602-kernel steps between memset section
    markers (the default), 30 kernel names, launch sizes spread over 9 buckets. Runs
    without a GPU."""
    from cupti import cupti

    from pacekeeper.cupti_ext import native
    from pacekeeper.cupti_ext.attribution import encode_external_id
    from pacekeeper.cupti_ext.cupti_backend import BUFFER_BYTES
    from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
    from pacekeeper.cupti_ext.markers import MARKER_BYTES, MemsetMarkers
    from pacekeeper.cupti_ext.records import (
        DecodeScratch,
        RecordLayout,
        decode_buffer,
        decode_span,
        record_offsets,
    )
    from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

    layout = RecordLayout.from_cupti(cupti)
    rng = np.random.default_rng(0)
    names = {i: f"_Z6kernelILi{i}EEvv" for i in range(1, 31)}
    stream = 7

    def builder() -> KernelWindowBuilder:
        b = KernelWindowBuilder(
            int(cupti.ExternalCorrelationKind.CUSTOM2),
            keys=KernelKeyTable(resolve_name=names.__getitem__),
        )
        b.memset_markers = MemsetMarkers(stream)
        return b

    def buffer(b: KernelWindowBuilder, first_serial: int, first_corr: int) -> Any:
        """One buffer of steps; its markers' values are put in ``b``'s marker ring."""
        assert b.memset_markers is not None
        ring = b.memset_markers.ring

        def mark(serial: int, stop: bool, corr: int) -> bytes:
            m = np.zeros(1, dtype=layout.memset_dtype)
            m["kind"], m["correlation_id"] = layout.memset_kind, corr
            m["value"] = ring.put(encode_external_id(serial, 0, stop))
            m["bytes"], m["stream_id"] = MARKER_BYTES, stream
            return m.tobytes()

        parts: list[bytes] = []
        corr, serial, size = first_corr, first_serial, 0
        while size < BUFFER_BYTES - 700 * layout.kernel_dtype.itemsize:
            k = np.zeros(602, dtype=layout.kernel_dtype)
            k["kind"] = layout.kernel_kind
            k["start"] = 1000
            k["end"] = 1000 + rng.integers(1000, 5000, 602)
            k["correlation_id"] = np.arange(corr + 1, corr + 603)
            k["name"] = rng.integers(1, 31, 602)
            k["block_x"] = 1 << rng.integers(0, 9, 602)
            for f in ("grid_x", "grid_y", "grid_z", "block_y", "block_z"):
                k[f] = 1
            parts += [mark(serial, False, corr), k.tobytes(), mark(serial, True, corr + 603)]
            size += len(parts[-3]) + len(parts[-2]) + len(parts[-1])
            corr, serial = corr + 604, serial + 1
        return np.frombuffer(b"".join(parts), dtype=np.uint8), serial, corr

    def best(fn: Callable[[], Any], per: int) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) / per * 1e6

    def path(compiled: bool) -> dict[str, Any]:
        os.environ[native.NATIVE_ENV] = "1" if compiled else "0"
        native.reset()
        if compiled and native.library() is None:
            return {"error": "native record path not built"}
        b = builder()
        raw, _, _ = buffer(b, 1, 1)
        decoded, n, _ = decode_buffer(raw, layout)
        b.add(decoded, n)
        if compiled:
            scratch = DecodeScratch()  # as the backend decodes: into reused arrays
            walk_decode = best(lambda: decode_buffer(raw, layout, scratch), n)
        else:
            offsets, _ = record_offsets(raw, layout)
            walk_decode = best(lambda: record_offsets(raw, layout), n) + best(
                lambda: decode_span(raw, offsets, layout), n
            )
        # A window's later buffers: 50 distinct buffers (~5,000 entries) folded first
        # (a 60 s window at interval 1 holds that many), then fresh ones timed one by one.
        late = builder()
        s, c = 1, 1
        fresh = []
        for _ in range(50 + repeats):
            raw_i, s, c = buffer(late, s, c)
            fresh.append(decode_buffer(raw_i, layout)[:2])
        for dec, k in fresh[:50]:
            late.add(dec, k)
        times = []
        for dec, k in fresh[50:]:
            t0 = time.perf_counter()
            late.add(dec, k)
            times.append((time.perf_counter() - t0) / k * 1e6)
        fold = min(times)
        late.take(["step"])  # first call pays numpy's one-time set-up
        for dec, k in fresh[:repeats]:
            late.add(dec, k)
        t0 = time.perf_counter()
        window = late.take(["step"])
        assert window.records > 0 and window.unattributed_records == 0
        return {
            "walk_decode_us_per_record": walk_decode,
            "fold_us_per_record": fold,
            "total_us_per_record": walk_decode + fold,
            "take_window_ms_warm": (time.perf_counter() - t0) * 1e3,
        }

    saved = os.environ.get(native.NATIVE_ENV)
    try:
        out = {
            "records_per_buffer": int(decode_buffer(buffer(builder(), 1, 1)[0], layout)[1]),
            "compiled": path(True),
            "numpy": path(False),
            "cpu": platform.processor() or platform.machine(),
        }
    finally:
        if saved is None:
            os.environ.pop(native.NATIVE_ENV, None)
        else:
            os.environ[native.NATIVE_ENV] = saved
        native.reset()
    return out


@contextlib.contextmanager
def single_rank_group() -> Iterator[None]:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    try:
        yield
    finally:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=25)
    ap.add_argument("--gemm-pairs", type=int, default=None, help="pairs for gemm_bound")
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument(
        "--slow-mode-pairs",
        type=int,
        default=6,
        help="pairs for bare_cupti (cupti-python's per-record objects make it ~4x slower)",
    )
    ap.add_argument("--core", type=int, default=2)
    ap.add_argument("--report-repeats", type=int, default=12)
    ap.add_argument("--workloads", default="launch_bound,gemm_bound")
    ap.add_argument("--modes", default="aa,bare_raw,ours_i1_vs_bare,ours_i1,ours_default,nvrx")
    ap.add_argument(
        "--report-modes",
        default="ours_i1,ours_default,nvrx",
        help="modes whose generate_report is timed ('' for none)",
    )
    ap.add_argument(
        "--out", default=os.environ.get("OUT") or str(Path(__file__).parent / "results")
    )
    ap.add_argument(
        "--diagnostics",
        default="hooks,hooks_sampled,marker_calls,sampled_calls,flush_delivery",
        help="which diagnostics to run after the modes ('' for none)",
    )
    ap.add_argument(
        "--skip-decode", action="store_true", help="skip the CPU record-processing figures"
    )
    ap.add_argument(
        "--decode-only",
        action="store_true",
        help="only the CPU cost of our record processing (no GPU needed)",
    )
    args = ap.parse_args(argv)
    if args.decode_only:
        cost = record_processing_cost()
        print(json.dumps(cost, indent=2))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "gpu_overhead_decode.json").write_text(json.dumps(cost, indent=2))
        return 0
    import torch

    with contextlib.suppress(OSError, AttributeError):
        os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    steps = build_steps()
    modes: dict[str, Callable[[], Mode]] = {
        "aa": Mode,
        "bare_raw": BareRaw,
        "bare_cupti": BareCupti,
        "bare_toggle": BareToggle,
        "bare_toggle_memset_kind": lambda: BareMarkers("bare_toggle_memset_kind", False),
        "bare_markers": lambda: BareMarkers("bare_markers", True),
        "ours_i1_vs_bare": OursVsBare,
        "ours_i1": lambda: Ours("ours_i1", 1),
        "ours_default": lambda: Ours("ours_default", None),
        "ours_i1_driver": lambda: Ours("ours_i1_driver", 1, marker="driver"),
        "ours_default_driver": lambda: Ours("ours_default_driver", None, marker="driver"),
        "ours_i1_markers": lambda: Ours("ours_i1_markers", 1, decode=False),
        "nvrx": Nvrx,
        "toggle_vs_bare": ToggleVsBare,
        "ours_switched_vs_bare": OursSwitchedVsBare,
        "ours_i1_parts": lambda: OursParts("ours_i1_parts", 1, vs_bare=True),
        "ours_default_parts": lambda: OursParts("ours_default_parts", None, vs_bare=False),
        # The same with smaller CUPTI buffers (PACEKEEPER_CUPTI_BUFFER_KIB).
        "ours_i1_parts_1mib": lambda: OursParts("ours_i1_parts_1mib", 1, True, 1024),
        "ours_i1_parts_2mib": lambda: OursParts("ours_i1_parts_2mib", 1, True, 2048),
        "ours_i1_1mib": lambda: Ours("ours_i1_1mib", 1, buffer_kib=1024),
        "ours_i1_2mib": lambda: Ours("ours_i1_2mib", 1, buffer_kib=2048),
        "ours_default_1mib": lambda: Ours("ours_default_1mib", None, buffer_kib=1024),
    }
    from pacekeeper.cupti_ext.sampling import START_SAMPLE_EVERY

    result: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {
            "gpu": torch.cuda.get_device_name(0),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "host_cores": os.cpu_count(),
            "pinned_core": args.core,
        },
        "method": {
            "pairs": args.pairs,
            "block_steps": args.block,
            "order": "ABBA",
            "flush_in_block": True,
        },
        # No window is collected while a mode is measured, so the per-window rule
        # stays at its first N throughout.
        "ours_default_sample_every": START_SAMPLE_EVERY,
        "workloads": {},
    }
    with single_rank_group():
        for wname in [w for w in args.workloads.split(",") if w]:
            step = steps[wname]
            for _ in range(10):
                step()
            kps = kernels_per_step(step)
            wres: dict[str, Any] = {"kernels_per_step": kps, "modes": {}}
            for mname in args.modes.split(","):
                mode = modes[mname]()
                # Plain blocks just before set-up and just after teardown: a cost the
                # mode adds to every step (B and A blocks alike) shows only here.
                before = [run_block(step, args.block, cupti_flush) for _ in range(6)]
                try:
                    mode.setup()
                    pairs = args.slow_mode_pairs if mname == "bare_cupti" else args.pairs
                    if wname == "gemm_bound" and args.gemm_pairs:
                        pairs = args.gemm_pairs
                    r = measure(mode, step, pairs, args.block)
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
                            k.removesuffix("_ns")
                            + ("_per_block" if k.endswith("calls") else "_us"): (
                                statistics.median(v)
                                if k.endswith("calls")
                                else statistics.median(v) / 1e3 / args.block
                            )
                            for k, v in parts.items()
                        }
                    wres["modes"][mname] = r
                except Exception:
                    wres["modes"][mname] = {"error": traceback.format_exc(limit=4)}
                finally:
                    with contextlib.suppress(Exception):
                        mode.teardown()
                after = [run_block(step, args.block, cupti_flush) for _ in range(6)]
                r = wres["modes"][mname]
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
                brief = {k: v for k, v in wres["modes"][mname].items() if not k.endswith("_ms")}
                print(wname, mname, json.dumps(brief), flush=True)
                result["workloads"][wname] = wres
                save(result, args.out)
        launch = steps["launch_bound"]
        diagnostics: dict[str, Callable[[], dict[str, Any]]] = {
            "hooks": lambda: hook_costs(launch),
            "hooks_sampled": lambda: hook_costs(launch, 320, sample_every=32),
            "marker_calls": lambda: marker_call_costs(launch),
            "sampled_calls": lambda: sampled_call_costs(launch),
            "stop_marker_variants": lambda: stop_marker_variants(launch),
            "marker_after_flush": lambda: marker_after_flush(launch),
            "flush_delivery": lambda: flush_delivery(launch),
        }
        for key, run in diagnostics.items():
            if key not in args.diagnostics.split(","):
                continue
            try:
                result[key] = run()
            except Exception:
                result[key] = {"error": traceback.format_exc(limit=4)}
            print(key, json.dumps(result[key]), flush=True)
        report_modes = [m for m in args.report_modes.split(",") if m]
        result["generate_report"] = bench_reports(
            steps["launch_bound"], args.report_repeats, report_modes, modes
        )
    if not args.skip_decode:
        result["record_processing_cpu"] = record_processing_cost()

    save(result, args.out)
    print_table(result)
    return 0


def save(result: dict[str, Any], out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_overhead.json").write_text(json.dumps(result, indent=2, default=str))


def print_table(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(f"\n{result['date']}  {m['gpu']}  torch {m['torch']}  core {m['pinned_core']}")
    print(
        f"{'workload':14} {'mode':13} {'A ms':>8} {'B/A med':>8} {'p25':>6} {'p75':>6} "
        f"{'+us/step':>9} {'+us/kernel':>10}"
    )
    for wname, w in result["workloads"].items():
        for mname, r in w["modes"].items():
            if "error" in r:
                print(f"{wname:14} {mname:13} ERROR {r['error'].splitlines()[-1]}")
                continue
            per_k = r.get("added_per_kernel_us")
            print(
                f"{wname:14} {mname:13} {r['a_step_ms_median']:8.3f} {r['ratio_median']:8.4f} "
                f"{r['ratio_p25']:6.3f} {r['ratio_p75']:6.3f} {r['added_step_us_median']:9.1f} "
                f"{per_k if per_k is None else round(per_k, 3)!s:>10}"
            )
            st = r.get("steady_per_step")
            if st:
                kps = w["kernels_per_step"]
                print(
                    f"{'':14} steady: +{st['added_us']:.1f} us/step "
                    f"(hooks {st['hooks_us']:.1f}, callback {st['callback_us']:.1f}) = "
                    f"{st['added_us'] / kps if kps else float('nan'):.3f} us/kernel; "
                    f"first traced entry after a flush {st['first_after_flush_us']:.0f} us"
                )
        print(f"{wname:14} kernels/step {w['kernels_per_step']:.1f}")
    print("\ngenerate_report on one rank (ms):")
    for name, r in result["generate_report"].items():
        if "error" in r:
            print(f"  {name:13} ERROR {r['error'].splitlines()[-1]}")
        else:
            print(
                f"  {name:13} first {r['first_ms']:7.3f}  warm median {r['warm_ms_median']:7.3f}"
                f"  min {r['warm_ms_min']:7.3f}  kernel keys {r['kernel_keys_in_report']}"
                f"  collect alone {r.get('collect_ms_median')}"
                f"  idle collect {r.get('collect_idle_ms_median')}"
                f"  parts {r.get('last_collect_after_steps')}"
            )


if __name__ == "__main__":
    sys.exit(main())
