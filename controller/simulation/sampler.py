"""Scenarios drawn, not chosen: noise family x fault, parameters from wide ranges.

Scenario ``i`` of a space has its family and fault by stratification (``i`` modulo
the families, then the faults, so every cell gets runs in turn) and everything else
from its own generator, seeded by ``derive_seed(space, i)``: the first 8 bytes of
SHA-256 of ``"<space>/<i>"``. Nobody picks a seed; the same index always gives the
same scenario, and a new space name gives new draws.

Ranges are wide on purpose: each spans the figures fitted on the real traces
(``TRACE_FIT``, docs/simulator.md) on both sides, from a quieter cluster than the
traces' to a much noisier one. Log-uniform where the figure spans decades.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace

import numpy as np

from pacekeeper.controller.simulation.models import FaultKind
from pacekeeper.controller.simulation.noise_families import NoiseFamily
from pacekeeper.controller.simulation.scenarios import Scenario

TRACE_FIT = {"step_cv": 0.0055, "step_lag1": 0.73, "tail_df": 14.7, "se_tail_df": 4.6}
"""What calibration.measure gives on the AR trace (one slowed worker left out) and the
SE trace's tails (tests/unit/simulation checks them against the traces)."""

FAMILIES = ("heavy-tail", "bursty-stalls", "drift", "fast-drift", "data-skew", "trace-fitted")
FAULTS = ("healthy", "slow-gpu", "bursts", "host-stall")

RANGES: dict[str, tuple[float, float]] = {
    "jitter_cv": (0.002, 0.03),
    "tail_df": (2.5, 30.0),
    "jitter_ar": (0.0, 0.95),
    "stall_bursts_per_h": (0.5, 20.0),
    "stall_burst_s": (30.0, 600.0),
    "stall_prob": (0.05, 0.5),
    "stall_s": (0.1, 3.0),
    "drift_amp": (0.0025, 0.03),
    "drift_period_s": (300.0, 14400.0),
    "fast_drift_amp": (0.01, 0.03),
    "fast_drift_period_s": (120.0, 1200.0),
    "skew_share": (0.001, 0.02),
    "skew_size": (0.02, 0.15),
    "skew_dwell_windows": (3.0, 30.0),
    "skew_kernel_share": (0.05, 0.8),
    "skew_launch_share": (0.0, 1.0),
    "fitted_scale": (0.5, 2.0),
    "slowdown": (0.10, 0.30),
    "fault_start_s": (300.0, 900.0),
    "host_stall_s": (0.2, 0.4),
}
"""Every drawn figure's range (min, max); the fault start is rounded to a window.
``skew_kernel_share`` (the data-dependent share of kernel time, docs/simulator.md) and
then ``skew_launch_share`` (the share of those kernels whose launch grows with the
extra work, issue #38) are drawn last, so adding each left every other draw of a
scenario as it was."""
LOG_UNIFORM = {"jitter_cv", "tail_df", "stall_bursts_per_h", "stall_burst_s", "stall_s",
               "drift_amp", "drift_period_s", "fast_drift_period_s", "skew_share",
               "skew_dwell_windows", "fitted_scale"}  # fmt: skip
BURST_SLOWDOWN = 0.30
BURST_ON_S = 120.0
BURST_PERIOD_S = 360.0
"""Intermittent bursts: 30% slower for 2 min in every 6."""


def derive_seed(space: str, index: int) -> int:
    digest = hashlib.sha256(f"{space}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


@dataclass(frozen=True, slots=True)
class Sampled:
    index: int
    seed: int
    family: str
    fault: str
    scenario: Scenario
    draws: dict[str, float]

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "seed": self.seed, "family": self.family,
                "fault": self.fault, "draws": self.draws}  # fmt: skip


class _Draw:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.got: dict[str, float] = {}

    def __call__(self, name: str) -> float:
        lo, hi = RANGES[name]
        if name in LOG_UNIFORM:
            v = math.exp(self.rng.uniform(math.log(lo), math.log(hi)))
        else:
            v = float(self.rng.uniform(lo, hi))
        self.got[name] = v
        return v


def _family(name: str, d: _Draw) -> NoiseFamily:
    match name:
        case "heavy-tail":
            return NoiseFamily(name, jitter_cv=d("jitter_cv"), tail_df=d("tail_df"),
                               jitter_ar=d("jitter_ar"))  # fmt: skip
        case "bursty-stalls":
            return NoiseFamily(name, stall_bursts_per_h=d("stall_bursts_per_h"),
                               stall_burst_s=d("stall_burst_s"), stall_prob=d("stall_prob"),
                               stall_s=d("stall_s"))  # fmt: skip
        case "drift" | "fast-drift":
            pre = "" if name == "drift" else "fast_"
            amp, period = d(f"{pre}drift_amp"), d(f"{pre}drift_period_s")
            # Every rank's period within 20% of the drawn one: one period, as drawn.
            return NoiseFamily(
                name, drift_amp=(amp, amp), drift_period_s=(period * 0.8, period * 1.2)
            )
        case "data-skew":
            return NoiseFamily(name, skew_share=d("skew_share"), skew_size=d("skew_size"),
                               skew_dwell_windows=d("skew_dwell_windows"))  # fmt: skip
        case "trace-fitted":
            k = d("fitted_scale")
            return NoiseFamily(name, jitter_cv=TRACE_FIT["step_cv"] * k,
                               tail_df=TRACE_FIT["tail_df"] / k,
                               jitter_ar=TRACE_FIT["step_lag1"])  # fmt: skip
    raise ValueError(f"noise family {name!r}: one of {', '.join(FAMILIES)}")


def _scenario(name: str, fault: str, family: NoiseFamily, d: _Draw, window_s: float) -> Scenario:
    label = f"{family.name}/{fault}"
    if fault == "healthy":
        return Scenario(name, label, None, family=family)
    start = max(1, round(d("fault_start_s") / window_s)) * window_s
    match fault:
        case "slow-gpu":
            return Scenario(name, label, FaultKind.SLOW_GPU, d("slowdown"), start_s=start,
                            family=family)  # fmt: skip
        case "bursts":
            return Scenario(name, label, FaultKind.THROTTLING, BURST_SLOWDOWN, start_s=start,
                            family=family, throttle_on_s=BURST_ON_S,
                            throttle_period_s=BURST_PERIOD_S)  # fmt: skip
        case "host-stall":
            step_s = 2.0
            section = "dataloader" if d.rng.random() < 0.5 else "forward_backward"
            return Scenario(name, label, FaultKind.SLOW_HOST, d("host_stall_s") / step_s,
                            start_s=start, family=family, host_section=section)  # fmt: skip
    raise ValueError(f"fault {fault!r}: one of {', '.join(FAULTS)}")


def sample(space: str, index: int, window_s: float = 60.0) -> Sampled:
    """Scenario ``index`` of ``space`` (a one-rank host stall on a 2 s step)."""
    if index < 0:
        raise ValueError(f"scenario index {index}: at least 0")
    seed = derive_seed(space, index)
    family = FAMILIES[index % len(FAMILIES)]
    fault = FAULTS[(index // len(FAMILIES)) % len(FAULTS)]
    d = _Draw(np.random.default_rng(seed))
    fam = _family(family, d)
    sc = _scenario(f"{space}-{index}", fault, fam, d, window_s)
    if family == "data-skew":
        fam = replace(fam, skew_kernel_share=d("skew_kernel_share"))
        fam = replace(fam, skew_launch_share=d("skew_launch_share"))  # after every other
        sc = replace(sc, family=fam)
    return Sampled(index, seed, family, fault, sc, dict(d.got))
