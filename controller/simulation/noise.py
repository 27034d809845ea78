"""Drift and jitter at other strengths than the model's defaults.

``ModelParams`` holds one guess at how noisy a healthy GPU is (drift 1-2 % peak to
peak over 2-8 h, 0.5 % per-step and 2 % per-launch jitter, 1 % on sections). Nothing
calibrates it against real data yet, so the benchmark also runs at multiples of it:
``NoiseScale(drift=2, jitter=2)`` doubles every drift amplitude and every jitter's
coefficient of variation. Scaling changes no draw, only its size: a scaled run draws
the same random numbers as the unscaled one, so the two differ by the noise alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pacekeeper.controller.simulation.models import ModelParams


@dataclass(frozen=True, slots=True)
class NoiseScale:
    drift: float = 1.0
    """Multiplies ``drift_min`` and ``drift_max`` (the drift's amplitude range)."""
    jitter: float = 1.0
    """Multiplies the per-step, per-launch and section jitter (``step_jitter_cv``,
    ``kernel_jitter_cv``, ``section_jitter_cv``)."""
    drift_period_s: tuple[float, float] | None = None
    """The drift's period range instead of the model's (2-8 h); None: unchanged."""

    def __post_init__(self) -> None:
        if self.drift < 0 or self.jitter < 0:
            raise ValueError(
                f"noise scale must be >= 0, got drift={self.drift:g} jitter={self.jitter:g}"
            )
        if self.drift_period_s is not None:
            lo, hi = self.drift_period_s
            if not 0 < lo <= hi:
                raise ValueError(f"drift period range {lo:g}-{hi:g} s must be 0 < min <= max")

    @property
    def is_default(self) -> bool:
        return self.drift == 1.0 and self.jitter == 1.0 and self.drift_period_s is None

    def label(self) -> str:
        parts = []
        if self.drift != 1.0:
            parts.append(f"drift x{self.drift:g}")
        if self.jitter != 1.0:
            parts.append(f"jitter x{self.jitter:g}")
        if self.drift_period_s is not None:
            lo, hi = self.drift_period_s
            parts.append(f"drift period {lo / 60:g}-{hi / 60:g} min")
        return ", ".join(parts) or "model defaults"

    def apply(self, params: ModelParams) -> ModelParams:
        if self.is_default:
            return params
        lo, hi = self.drift_period_s or (params.drift_period_min_s, params.drift_period_max_s)
        return replace(
            params,
            drift_min=params.drift_min * self.drift,
            drift_max=params.drift_max * self.drift,
            drift_period_min_s=lo,
            drift_period_max_s=hi,
            step_jitter_cv=params.step_jitter_cv * self.jitter,
            kernel_jitter_cv=params.kernel_jitter_cv * self.jitter,
            section_jitter_cv=params.section_jitter_cv * self.jitter,
        )


DEFAULT_NOISE = NoiseScale()
