"""``OursParts``: where a B block's added time goes, timed in place (the detector's
hooks on the training thread, the buffer callback on CUPTI's thread, wall and CPU;
each step and each callback kept as a sample for ``steady_parts``). Apart from the
other detector modes because it wraps their hooks and callbacks with clocks of its own."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .cupti_calls import cupti_flush_forced
from .detector_modes import Ours, OursVsBare
from .steady import CallbackSample, StepSample, steady_parts
from .workloads import Step


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
