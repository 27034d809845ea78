"""Faults the simulator injects, with their ground truth and their effect on a step.

A fault names the ranks it breaks, when it starts and how much slower they get. Most
slow the GPU (compute x (1 + s)); a slow link slows everyone's all-reduce transfer; a
host fault adds CPU time to a section and leaves every kernel's duration alone (the
launches come late, so the GPU idles between kernels, and the section's wall time
grows). ``ramp_s`` makes a slowdown grow linearly from 0 at ``start_s`` to its full
size ``ramp_s`` later (a GPU that degrades over hours: a clogged heat sink, a failing
fan). Effects are pure numpy over ranks x steps, except throttling's on/off chain,
which draws from the simulator's generator in the order it always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

HOST_SECTIONS = ("dataloader", "forward_backward")
"""Where a host fault's CPU time can land: a slow data loader, or a busy CPU that
launches the forward and backward kernels late."""

FOUND_AT_SLOWDOWN = 0.05
"""A ramping fault counts for recall and time to find once it is this much slower."""


class FaultKind(StrEnum):
    SLOW_GPU = "slow_gpu"
    SLOW_NODE = "slow_node"
    THROTTLING = "throttling"
    SLOW_LINK = "slow_link"
    SLOW_HOST = "slow_host"
    """The CPU side of the ranks: ``slowdown x step_s`` more host time per step in
    ``host_section``; kernels unchanged."""


@dataclass(frozen=True, slots=True)
class Fault:
    """Ground truth: ``ranks`` are broken from ``start_s`` on."""

    kind: FaultKind
    ranks: tuple[int, ...]
    start_s: float
    slowdown: float
    """Fractional slowdown: 0.1 makes compute 10% slower (time x 1.1); for a host fault,
    the extra CPU time per step as a share of the step (0.1 = 0.2 s of a 2 s step)."""
    throttle_on_s: float = 30.0
    throttle_off_s: float = 150.0
    throttle_period_s: float = 0.0
    """Throttling on a clock instead of the on/off chain: slow for ``throttle_on_s``
    at the start of every ``throttle_period_s`` from ``start_s`` (2 min in every 6:
    120 and 360); 0: the chain."""
    ramp_s: float = 0.0
    """Seconds over which the slowdown grows linearly to its full size (0: at once)."""
    host_section: str = field(default="forward_backward")
    """A host fault's section (one of ``HOST_SECTIONS``)."""

    def __post_init__(self) -> None:
        if not self.ranks:
            raise ValueError("fault.ranks must not be empty")
        if self.slowdown <= 0:
            raise ValueError(f"fault.slowdown must be > 0, got {self.slowdown}")
        if self.start_s < 0:
            raise ValueError(f"fault.start_s must be >= 0, got {self.start_s}")
        if self.ramp_s < 0:
            raise ValueError(f"fault.ramp_s must be >= 0, got {self.ramp_s}")
        if self.throttle_period_s and not 0 < self.throttle_on_s < self.throttle_period_s:
            raise ValueError(
                f"fault.throttle_on_s {self.throttle_on_s:g} must be inside its period "
                f"{self.throttle_period_s:g}"
            )
        if self.host_section not in HOST_SECTIONS:
            raise ValueError(
                f"fault.host_section {self.host_section!r}: one of {', '.join(HOST_SECTIONS)}"
            )

    def level_at(self, t: F64) -> F64:
        """The slowdown in force at times ``t`` (0 before the start; on a ramp, the share
        of it reached by then)."""
        if self.ramp_s <= 0:
            return np.where(t >= self.start_s, self.slowdown, 0.0)
        grown = np.clip((t - self.start_s) / self.ramp_s, 0.0, 1.0)
        return np.where(t >= self.start_s, self.slowdown * grown, 0.0)

    def reaches_s(self, level: float) -> float | None:
        """When the slowdown first reaches ``level``; None: it never does."""
        if level > self.slowdown:
            return None
        if self.ramp_s <= 0:
            return self.start_s
        return self.start_s + self.ramp_s * level / self.slowdown


@dataclass(frozen=True, slots=True)
class StepEffects:
    """What the faults do to one window's steps."""

    compute: F64
    """ranks x steps: compute time multiplier."""
    comm: F64
    """steps: all-reduce transfer multiplier (a slow link slows everyone's)."""
    host_s: dict[str, F64]
    """Per section in ``HOST_SECTIONS``, ranks x steps of extra CPU time."""


class Throttle:
    """Two-state Markov chain per throttled rank, stepped once per training step; the
    state carries over from window to window."""

    def __init__(self, ranks: int, step_s: float) -> None:
        self.on = np.zeros(ranks, dtype=bool)
        self.step_s = step_s

    def states(self, idx: I64, t: F64, f: Fault, rng: np.random.Generator) -> F64:
        p_on = self.step_s / f.throttle_off_s
        p_off = self.step_s / f.throttle_on_s
        out = np.zeros((idx.size, t.size))
        state = self.on[idx].copy()
        u = rng.random((idx.size, t.size))
        for j in range(t.size):
            if t[j] < f.start_s:
                state[:] = False
            else:
                state = np.where(state, u[:, j] >= p_off, u[:, j] < p_on)
            out[:, j] = state
        self.on[idx] = state
        return out


def step_effects(
    faults: tuple[Fault, ...],
    ranks: int,
    t: F64,
    *,
    step_s: float,
    throttle: Throttle,
    rng: np.random.Generator,
) -> StepEffects:
    """The faults' effect on the steps at times ``t``."""
    comp = np.ones((ranks, t.size))
    comm = np.ones(t.size)
    host = {s: np.zeros((ranks, t.size)) for s in HOST_SECTIONS}
    for f in faults:
        if not (t >= f.start_s).any():
            continue
        idx = np.array(f.ranks, dtype=np.int64)
        match f.kind:
            case FaultKind.SLOW_GPU | FaultKind.SLOW_NODE:
                # 1.0 exactly where the fault is off: earlier traces stay bit for bit.
                comp[idx] *= 1.0 + f.level_at(t)[None, :]
            case FaultKind.THROTTLING if f.throttle_period_s > 0:
                on = (t >= f.start_s) & ((t - f.start_s) % f.throttle_period_s < f.throttle_on_s)
                comp[idx] *= 1.0 + f.slowdown * on[None, :]
            case FaultKind.THROTTLING:
                comp[idx] *= 1.0 + f.slowdown * throttle.states(idx, t, f, rng)
            case FaultKind.SLOW_LINK:
                # A ring all-reduce runs at its slowest link: everyone waits longer,
                # nobody computes slower.
                comm *= 1.0 + f.level_at(t)
            case FaultKind.SLOW_HOST:
                host[f.host_section][idx] += f.level_at(t)[None, :] * step_s
    return StepEffects(comp, comm, host)
