"""Job-wide pauses: evaluation, checkpoint saves and synchronised garbage collection,
when every rank stalls in the same step for seconds.

Nothing is broken: every rank pauses together, so a detector that acts on one is
wrong. Each rank's pause differs a little (``jitter_cv``: a checkpoint shard written
a bit slower, a collection with more garbage), and in a synchronous job the others
then wait for the slowest pauser in the step's all-reduce, as they do for a slow GPU
— once, for a few seconds, in every rank at the same time.

Where a pause lands decides what the detector sees:

* ``section=None`` (between steps, outside every timed section: an evaluation loop or
  a checkpoint save called from the training loop): no section grows, the window's
  elapsed time does, and the wait for the slowest pauser shows in the next collective;
* a section (``forward_backward`` for a collection that runs while the host launches
  kernels, ``dataloader`` for a loader reset): that section's host time grows in that
  step. Kernel durations never change (the GPU idles through a pause).

Pauses draw from a generator of their own, so a scenario with pauses draws every other
number exactly as the same scenario without them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

PAUSE_SECTIONS = ("dataloader", "forward_backward")


@dataclass(frozen=True, slots=True)
class JobPause:
    """Every ``every_s`` from ``first_s``, every rank stalls ``pause_s`` in one step."""

    name: str
    every_s: float
    pause_s: float
    section: str | None = None
    """The timed section the stall lands in; None: between steps, untimed."""
    jitter_cv: float = 0.05
    """Per-rank spread of the pause (coefficient of variation)."""
    first_s: float | None = None
    """First pause; None: one period in."""

    def __post_init__(self) -> None:
        if self.every_s <= 0 or self.pause_s <= 0:
            raise ValueError(f"pause {self.name!r}: every_s and pause_s must be > 0")
        if self.jitter_cv < 0:
            raise ValueError(f"pause {self.name!r}: jitter_cv must be >= 0")
        if self.section is not None and self.section not in PAUSE_SECTIONS:
            raise ValueError(
                f"pause {self.name!r}: section {self.section!r} is not one of "
                f"{', '.join(PAUSE_SECTIONS)} (or None: between steps)"
            )

    def steps_hit(self, t: F64, step_s: float) -> npt.NDArray[np.bool_]:
        """The steps (starting at ``t``) in which this pause falls."""
        first = self.every_s if self.first_s is None else self.first_s
        since = t - first
        return np.asarray((since >= 0) & (np.mod(since, self.every_s) < step_s), dtype=np.bool_)


EVAL = JobPause("eval", every_s=600.0, pause_s=30.0, section=None, jitter_cv=0.02)
"""Validation every 10 min for 30 s, outside the training step's sections (assumption:
NeMo and Megatron run validation every few hundred steps, for tens of seconds)."""
CHECKPOINT = JobPause("checkpoint", every_s=1800.0, pause_s=20.0, jitter_cv=0.10, first_s=900.0)
"""A synchronous checkpoint save every 30 min (first at 15 min), 20 s, I/O-bound so its
spread is the widest (assumption)."""
SYNC_GC = JobPause("gc", every_s=200.0, pause_s=0.3, section="forward_backward", jitter_cv=0.2)
"""Synchronised Python GC every 100 steps (Megatron-LM's ``--manual-gc`` with an
interval), 0.3 s inside the step (assumption; the model's unsynchronised GC pauses are
0.1-0.5 s)."""
DEFAULT_PAUSES = (EVAL, CHECKPOINT, SYNC_GC)


@dataclass(frozen=True, slots=True)
class PauseTimes:
    """One window's pauses, ranks x steps of seconds."""

    untimed_s: F64
    """Between steps: in no section."""
    section_s: dict[str, F64]
    """Per section in ``PAUSE_SECTIONS``."""


def pause_times(
    pauses: tuple[JobPause, ...],
    ranks: int,
    t: F64,
    step_s: float,
    rng: np.random.Generator,
) -> PauseTimes:
    """Every rank's stall in each step starting at ``t``."""
    untimed = np.zeros((ranks, t.size))
    per_section = {s: np.zeros((ranks, t.size)) for s in PAUSE_SECTIONS}
    for p in pauses:
        hit = np.flatnonzero(p.steps_hit(t, step_s))
        if hit.size == 0:
            continue
        spread = 1.0 + p.jitter_cv * rng.standard_normal((ranks, hit.size))
        stall = p.pause_s * np.clip(spread, 0.0, None)
        target = untimed if p.section is None else per_section[p.section]
        target[:, hit] += stall
    return PauseTimes(untimed, per_section)
