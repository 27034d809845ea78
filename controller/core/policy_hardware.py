"""The policy document's settings for the memory of hardware (``hardwareMemory``: how the
controller remembers and calibrates each GPU across jobs) and each policy's use of it
(``hardware``: whether its judgement and its recovery lean on that memory).

Separate from ``policy.py`` because the memory is the cluster's, not one policy's: one
setting governs what every job's reports teach it, while each policy only chooses how
much of it to believe. ``hardware_memory.py`` is the code these settings drive.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Self

from pydantic import Field, Strict, model_validator

# Relative on purpose, as in policy.py: mypy sees PolicyModel's type only this way.
from .policy_types import Bool, Int, PolicyModel, PositiveSeconds, UnitInterval

Deviation = Annotated[float, Strict(), Field(gt=0, le=0.2)]
Band = Annotated[float, Strict(), Field(gt=0, le=0.1)]
Drift = Annotated[float, Strict(), Field(ge=0, le=0.05)]


class Calibration(PolicyModel):
    """Per-GPU speed factors learned from healthy history, so that a static spread between
    GPUs of one model does not eat the margin of relative scores."""

    max_deviation: Deviation = 0.15
    """A factor stays within 1 +/- this; a GPU further from its peers' median than this
    is never learned from, and one with no factor yet is judged slow from the start only
    beyond it. Healthy GPUs of one model sit up to ~14% from their median (an 8% mean
    pairwise spread, outliers past 2 sigma failing burn-in: docs/simulator.md); at 0.1
    the simulator's healthy jobs had GPUs at 0.87-0.89 notified and restarted."""
    windows_to_learn: Int = Field(default=6, ge=4, le=32)
    """Healthy windows whose median becomes the first factor; until then the GPU has none
    (scores are judged as they are). Short, so that a job restarted soon after a GPU went
    bad still knows what that GPU was (at 16 the simulator's restart 5 min after a fault,
    10 windows in, found the GPU healthy on its fresh baseline); a window's ratio moves
    by well under 1% with drift and jitter, the factor follows later ones slowly."""
    track_band: Band = 0.02
    """After that, a window teaches the factor only when within this of it: a GPU that
    changes is judged on the change, not calibrated to it."""
    max_drift_per_hour: Drift = 0.005
    """How fast a factor may follow a GPU that changes inside the band (per hour of
    windows); a slower failure than this could still be learned, up to maxDeviation."""


class HardwareMemorySettings(PolicyModel):
    """What the controller remembers of every GPU (reports with gpuUuid): how it scored
    against its peers in each job and incarnation, and its learned speed factor."""

    enabled: Bool = True
    """Remember GPUs and calibrate by them (false: forget nothing, learn nothing new)."""
    half_life_s: PositiveSeconds = 604800.0
    """A GPU's windows count half after this long (its slow share, in status and metrics)."""
    max_age_s: PositiveSeconds = 2592000.0
    """A GPU, or one job's record on it, unseen for this long is forgotten."""
    slow_below: UnitInterval = 0.95
    """A window is slow for a GPU when its GPU score against its peers' median, divided by
    its learned factor, is below this (while it has no factor: below the smaller of
    this and 1 - calibration.maxDeviation)."""
    calibration: Calibration = Calibration()
    """How speed factors are learned."""

    @model_validator(mode="after")
    def _sensible(self) -> Self:
        if self.slow_below == 0:
            raise ValueError("slowBelow=0 would never call a window slow")
        if self.max_age_s < self.half_life_s:
            raise ValueError(
                f"maxAgeS={self.max_age_s:g} must be at least halfLifeS={self.half_life_s:g}: "
                "a GPU would be forgotten before its older windows had even counted half"
            )
        return self


class HardwareUse(PolicyModel):
    """How a policy uses the memory of hardware (``hardwareMemory`` of the document)."""

    calibrate: Bool = True
    """Divide each GPU's relative score, judged against its peers (reference peerMedian),
    by the GPU's learned speed factor."""
    peer_check: Bool = True
    """gpuIndividual with peerMedian: also judge a GPU by its (calibrated) relative score
    against its peers when its factor is known or it is slower than any factor could be:
    a GPU slow from a job's start has a slow individual baseline, not a low score."""
    gpu_recovery: Bool = True
    """A node marked for a GPU is released only when that GPU's own recent windows score
    at or above thresholds.recover against its peers, after the mark: a restart's fresh
    baseline is no recovery."""
    slow_elsewhere_skips_restart: Bool = True
    """A GPU remembered slow in another job is hardware: the ladder skips restartRank on
    its node, as it does when every rank of the node is slow."""


class Confirm(StrEnum):
    """What a node action needs beyond the scores."""

    NONE = "none"
    PROBE = "probe"
    """The confirmation probe (``detector.probe``) on the job's ranks singled out the
    node's suspect ranks: identical work on every rank, so a heavy share of the job's
    work (a longer sequence, a pipeline stage with the loss) cannot pass for hardware."""


class ProbeCheck(PolicyModel):
    """How ``confirm: probe`` asks the job and reads its answer."""

    slower_than: Annotated[float, Strict(), Field(gt=0, lt=1)] = 0.95
    """A suspect rank whose probe rate (any part: GEMM, memory copy, host-to-device, or
    the host's matrix products) is below this share of the median of the job's other
    ranks on the same device kind confirms the node's hardware. A GPU part of a GPU with
    a learned speed factor is divided by it first (its peers' by theirs); every other
    part must also lie below 1 - hardwareMemory.calibration.maxDeviation, outside the
    spread of healthy GPUs of one model."""
    timeout_s: PositiveSeconds = 600.0
    """Unanswered this long (a job without runtime control, a detector too old), the
    request is made again under a new id; meanwhile no node action is taken."""
