"""Noise families beyond the model's defaults: what a real cluster adds to a healthy job.

``NoiseFamily`` holds one family's parameters; ``NoiseProcess`` draws its effect on
each window's steps from its own random stream (``[seed, NOISE_STREAM]``), so adding
a family leaves every other draw of the simulator alone. Per rank and step it gives

* ``speed``: a GPU-speed multiplier — heavy-tailed, autocorrelated jitter: an AR(1)
  chain ``e_t = phi e_(t-1) + sqrt(1 - phi^2) cv z_t`` with ``z_t`` Student-t with
  ``tail_df`` degrees of freedom scaled to unit variance (normal when None), carried
  across windows;
* ``work``: a workload multiplier on the step's compute — persistent data skew: a
  ``skew_share`` of the ranks carry ``skew_size`` more work; the set is redrawn at
  the start of a window with probability ``1 / skew_dwell_windows`` (a geometric dwell
  with that mean), so the same ranks stay slow for ~that many windows. It is no
  hardware's doing: ``WindowSummary.gpu_speed`` leaves it out. The extra work lands
  in the data-dependent kernels only (``skew_kernel_share`` of the kernel time,
  ``data_dependent_kernels``): the step's compute grows by ``skew_size``, those kernels
  by ``skew_size / share``, the kernels of fixed shape not at all (1.0: every kernel,
  the model before issue #38's broad GPU score). A ``skew_launch_share`` of those
  kernels launch bigger in proportion to their extra work (a GEMM's grid follows the
  token count; ``launch_threads``), the rest keep a fixed launch and loop inside;
* ``loader_s``: host time in the data loader — bursty stalls: bursts start on a rank
  at ``stall_bursts_per_h``, last ``stall_burst_s``; inside one each step stalls with
  probability ``stall_prob`` for an exponential ``stall_s`` on average.

Drift is the model's own sinusoid, with the family's amplitude and period ranges
(``apply``): amplitude is half the peak to peak, so ``drift_amp=(0.02, 0.02)`` is
+-2%.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
NOISE_STREAM = 0x401CE
LAUNCH_STREAM = 0x1A0C4
"""Which data-dependent kernels launch bigger draws from ``[seed, NOISE_STREAM,
LAUNCH_STREAM]``: adding it left the noise stream's draws as they were."""
BASE_THREADS = float(1 << 20)
"""Every kernel's launch (grid x block threads) at the job's typical batch; only ratios
between ranks of one kernel matter to the scores."""
MIN_SPEED = 0.5
"""A jitter draw never makes a step more than twice as fast (Student-t tails with few
degrees of freedom reach far)."""


@dataclass(frozen=True, slots=True)
class NoiseFamily:
    name: str
    jitter_cv: float = 0.0
    tail_df: float | None = None
    jitter_ar: float = 0.0
    drift_amp: tuple[float, float] | None = None
    """Drift amplitude range (half the peak to peak); None: the model's."""
    drift_period_s: tuple[float, float] | None = None
    stall_bursts_per_h: float = 0.0
    stall_burst_s: float = 0.0
    stall_prob: float = 0.0
    stall_s: float = 0.0
    skew_share: float = 0.0
    skew_size: float = 0.0
    skew_dwell_windows: float = 10.0
    skew_kernel_share: float = 1.0
    """Share of the compute kernels' time whose work depends on the data (varlen
    attention, routed expert GEMMs): where a skewed rank's extra work runs."""
    skew_launch_share: float = 0.0
    """Share of those data-dependent kernels whose launch grows with the extra work
    (the rest loop inside a fixed launch); 0: no launch sizes are reported."""

    def __post_init__(self) -> None:
        checks = {
            "jitter_cv": 0 <= self.jitter_cv <= 1,
            "tail_df": self.tail_df is None or self.tail_df > 2,
            "jitter_ar": 0 <= self.jitter_ar < 1,
            "stall_prob": 0 <= self.stall_prob <= 1,
            "skew_share": 0 <= self.skew_share <= 1,
            "skew_dwell_windows": self.skew_dwell_windows >= 1,
            "skew_kernel_share": 0 < self.skew_kernel_share <= 1,
            "skew_launch_share": 0 <= self.skew_launch_share <= 1,
            "stall_s": self.stall_s >= 0 and self.stall_burst_s >= 0,
            "skew_size": self.skew_size >= 0 and self.stall_bursts_per_h >= 0,
        }
        for rng_name, rng in (
            ("drift_amp", self.drift_amp),
            ("drift_period_s", self.drift_period_s),
        ):
            if rng is not None and not 0 <= rng[0] <= rng[1]:
                raise ValueError(
                    f"noise family {self.name!r}: {rng_name} {rng} must be 0 <= min <= max"
                )
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"noise family {self.name!r}: {bad[0]} out of range")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class NoiseDraw:
    speed: F64
    work: F64
    loader_s: F64


class NoiseProcess:
    """One job's draws of a family, window by window (state carries over)."""

    def __init__(self, family: NoiseFamily, ranks: int, step_s: float, seed: int) -> None:
        self.f = family
        self.seed = seed
        self.ranks = ranks
        self.step_s = step_s
        self.rng = np.random.default_rng([seed, NOISE_STREAM])
        self.e = np.zeros(ranks)
        self.skewed = self._pick_skewed()
        self.burst_left = np.zeros(ranks, dtype=np.int64)

    def _pick_skewed(self) -> npt.NDArray[np.bool_]:
        k = round(self.f.skew_share * self.ranks)
        out = np.zeros(self.ranks, dtype=bool)
        if k > 0 and self.f.skew_size > 0:
            out[self.rng.choice(self.ranks, k, replace=False)] = True
        return out

    def data_dependent_kernels(self, kernel_ns: F64) -> npt.NDArray[np.bool_]:
        """Which kernels (of per-step times ``kernel_ns``) carry the skew: a random
        subset whose time share is the nearest to ``skew_kernel_share`` that whole
        kernels give (all of them at 1.0). Drawn from this process's own stream."""
        k = kernel_ns.size
        if self.f.skew_kernel_share >= 1.0 or k == 0:
            return np.ones(k, dtype=bool)
        order = self.rng.permutation(k)
        cum = np.cumsum(kernel_ns[order]) / float(kernel_ns.sum())
        take = int(np.argmin(np.abs(cum - self.f.skew_kernel_share))) + 1
        out = np.zeros(k, dtype=bool)
        out[order[:take]] = True
        return out

    def grown_launches(self, data_dependent: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Which of the ``data_dependent`` kernels launch bigger under skew: a random
        ``skew_launch_share`` of them by count (rounded), from the launch stream."""
        cols = np.flatnonzero(data_dependent)
        take = round(self.f.skew_launch_share * cols.size)
        out = np.zeros(data_dependent.size, dtype=bool)
        if take > 0:
            rng = np.random.default_rng([self.seed, NOISE_STREAM, LAUNCH_STREAM])
            out[rng.permutation(cols)[:take]] = True
        return out

    def innovations(self, shape: tuple[int, int]) -> F64:
        """Unit-variance draws: Student-t scaled by sqrt((df - 2) / df), else normal."""
        df = self.f.tail_df
        if df is None:
            return self.rng.standard_normal(shape)
        return self.rng.standard_t(df, shape) * math.sqrt((df - 2.0) / df)

    def draw(self, steps: int) -> NoiseDraw:
        f, n = self.f, self.ranks
        speed = np.ones((n, steps))
        if f.jitter_cv > 0:
            z = self.innovations((n, steps))
            keep = math.sqrt(1.0 - f.jitter_ar**2)
            e = self.e
            for j in range(steps):
                e = f.jitter_ar * e + keep * f.jitter_cv * z[:, j]
                speed[:, j] += e
            self.e = e
            np.maximum(speed, MIN_SPEED, out=speed)
        work = np.ones((n, steps))
        if f.skew_share > 0 and f.skew_size > 0:
            if self.rng.random() < 1.0 / f.skew_dwell_windows:
                self.skewed = self._pick_skewed()
            work[self.skewed] += f.skew_size
        loader = np.zeros((n, steps))
        if f.stall_bursts_per_h > 0 and f.stall_prob > 0:
            p_start = f.stall_bursts_per_h * self.step_s / 3600.0
            length = max(1, round(f.stall_burst_s / self.step_s))
            starts = self.rng.random((n, steps)) < p_start
            hit = self.rng.random((n, steps)) < f.stall_prob
            size = self.rng.exponential(f.stall_s, (n, steps))
            left = self.burst_left
            for j in range(steps):
                left = np.where(starts[:, j] & (left == 0), length, left)
                on = left > 0
                loader[:, j] = np.where(on & hit[:, j], size[:, j], 0.0)
                left = np.where(on, left - 1, 0)
            self.burst_left = left
        return NoiseDraw(speed, work, loader)


def launch_threads(grown: npt.NDArray[np.bool_], skew: F64) -> F64:
    """Per rank and kernel, the window's typical launch threads: ``BASE_THREADS``, times
    the rank's skew factor (``skew``, one per rank: the window's extra work in the
    data-dependent kernels) on the ``grown`` kernels."""
    out = np.full((skew.size, grown.size), BASE_THREADS)
    out[:, grown] *= skew[:, None]
    return out
