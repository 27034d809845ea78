"""Overhead at the defaults by per-step interleaving: one process, the detector running
with its default settings, and each pair of consecutive steps one plain step (A) and
one inside ``detection_section`` (B), in random order. The host's drift, which moves a
40-step block by up to +-25% on these machines, is the same for both steps of a pair,
so thousands of pairs resolve a few microseconds: the paired-block method could not
resolve 0.5% (issue 19). Every step ends with a device synchronize inside its timing,
so GPU-side cost counts too. Reports run between pairs, untimed, every
``report_every`` pairs (the sampling rule adapts per report window, as in a job); their
own cost is timed and amortised at the default report interval. The sampling rule's
N is the one it chooses for a job whose every step is a section entry.

An A/A control (both steps plain, same loop) shows what the method resolves.
Figures: mean and 5%-trimmed mean of B - A per pair, a 95% interval by bootstrap."""

from __future__ import annotations

import contextlib
import random
import statistics
import time
import traceback
from typing import Any

import numpy as np

from .workloads import Step

REPORT_INTERVAL_S = 60.0
"""NVRx's and our default ``report_time_interval``: how often a report's cost is paid."""


def _trimmed(x: np.ndarray, cut: float = 0.05) -> float:
    lo, hi = np.quantile(x, [cut, 1 - cut])
    return float(x[(x >= lo) & (x <= hi)].mean())


def _interval(x: np.ndarray, seed: int, n: int = 2000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = [_trimmed(rng.choice(x, x.size)) for _ in range(n)]
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def _pairs(a: Step, b: Step, pairs: int, seed: int, between: Any = None) -> dict[str, Any]:
    import torch

    rng = random.Random(seed)
    diffs = np.empty(pairs)
    a_s = np.empty(pairs)
    clock = time.perf_counter
    sync = torch.cuda.synchronize
    for i in range(pairs):
        first_a = rng.random() < 0.5
        t: dict[bool, float] = {}
        for is_a in (first_a, not first_a):
            fn = a if is_a else b
            t0 = clock()
            fn()
            sync()
            t[is_a] = clock() - t0
        diffs[i] = t[False] - t[True]
        a_s[i] = t[True]
        if between is not None:
            between(i)
    us = diffs * 1e6
    a_ms = float(np.median(a_s) * 1e3)
    lo, hi = _interval(us, seed)
    trimmed = _trimmed(us)
    return {
        "pairs": pairs,
        "a_step_ms_median": a_ms,
        "added_us_mean": float(us.mean()),
        "added_us_trimmed": trimmed,
        "added_us_ci95": [lo, hi],
        "added_pct_trimmed": trimmed / (a_ms * 1e3) * 100,
        "added_pct_ci95": [lo / (a_ms * 1e3) * 100, hi / (a_ms * 1e3) * 100],
        "added_us_median": float(np.median(us)),
    }


def interleaved(step: Step, pairs: int, report_every: int = 500, seed: int = 7) -> dict[str, Any]:
    """A/A control, then the detector at its defaults: B - A per pair."""
    import torch

    from pacekeeper.detector import Detector

    out: dict[str, Any] = {"method": __doc__.split("\n\n")[0].replace("\n", " ")}
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    out["aa"] = _pairs(step, step, pairs, seed)
    report_ms: list[float] = []
    try:
        Detector.initialize(gather_on_rank0=True)

        def b() -> None:
            with Detector.detection_section("step", profile_cuda=True):
                step()

        backend = getattr(Detector, "_backend", None)
        # The rule sets N from the entry rate: with every step a section entry, as in a
        # job, for three windows; then N stays put, since the pairs' plain steps would
        # halve the rate it sees and so double the traced share.
        for _ in range(3):
            for _ in range(300):
                b()
            torch.cuda.synchronize()
            Detector.generate_report()
        out["sample_every"] = getattr(backend, "sample_every", None)
        if backend is not None and hasattr(backend, "adaptive_sampling"):
            backend.adaptive_sampling = False

        def between(i: int) -> None:
            if (i + 1) % report_every == 0:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                Detector.generate_report()
                report_ms.append((time.perf_counter() - t0) * 1e3)

        out["ours_default"] = _pairs(step, b, pairs, seed + 1, between)
        out["sample_every_at_end"] = getattr(backend, "sample_every", None)
        latest = Detector.latest_score_report()
        timing = getattr(latest, "kernel_timing", None)
        out["last_window_counts"] = (
            None
            if timing is None
            else {
                k: getattr(timing, f"{k}_records")
                for k in ("attributed", "unattributed", "held", "dropped")
            }
        )
    except Exception:
        out["error"] = traceback.format_exc(limit=4)
    finally:
        with contextlib.suppress(Exception):
            Detector.shutdown()
    if report_ms:
        med = statistics.median(report_ms)
        out["report_ms_median"] = med
        out["report_pct_at_default_interval"] = med / (REPORT_INTERVAL_S * 1e3) * 100
    return out


def presence(step: Step, blocks: int = 10, steps: int = 300) -> dict[str, Any]:
    """Whether a running detector slows the steps it does not time: blocks of ``steps``
    with the detector initialized (plain and in-section steps alternating) and without
    it (plain steps), alternated ABBA, each block from initialize to shutdown. The
    per-step interleaving above cancels what every step of a process pays; this is that
    part (a plain step's median with the detector running over one without)."""
    import torch

    from pacekeeper.detector import Detector

    def timed(fn: Step) -> float:
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def b() -> None:
        with Detector.detection_section("step", profile_cuda=True):
            step()

    rows = []
    for i in range(2 * blocks):
        on = (i % 4) in (1, 2)  # off, on, on, off, ...
        if on:
            Detector.initialize(gather_on_rank0=True)
        try:
            for _ in range(20):
                step()
            torch.cuda.synchronize()
            plain, inside = [], []
            for j in range(steps):
                if on and j % 2:
                    inside.append(timed(b))
                else:
                    plain.append(timed(step))
        finally:
            if on:
                Detector.shutdown()
        rows.append(
            {
                "on": on,
                "plain_ms": statistics.median(plain) * 1e3,
                "section_ms": statistics.median(inside) * 1e3 if inside else None,
            }
        )
    off = [r["plain_ms"] for r in rows if not r["on"]]
    on_plain = [r["plain_ms"] for r in rows if r["on"]]
    on_section = [r["section_ms"] for r in rows if r["on"]]
    ratios = [p / q for p, q in zip(on_plain, off, strict=True)]
    return {
        "blocks": rows,
        "plain_on_over_off_median": statistics.median(ratios),
        "plain_on_over_off": ratios,
        "section_on_over_off_median": statistics.median(
            [s / q for s, q in zip(on_section, off, strict=True)]
        ),
    }
