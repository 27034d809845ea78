"""Generative models of per-rank timings in a synchronous data-parallel training job.

Every number here is a documented default (docs/simulator.md says where each comes
from). The simulator walks a job step by step: per rank and step it draws a speed
multiplier (static GPU spread x slow drift x faults x per-step jitter) and a work
multiplier (sequence-length imbalance, last pipeline stage), then turns them into the
per-window summaries the detector consumes — per-rank section medians, the wait the
detector's collective timing measures inside each section (``waits``), and per-rank,
per-kernel median / count / total times.

Sections and step-level events are generated per step for every rank (ranks x steps
is small). Kernels are the heavy part (ranks x kernels x invocations): ``exact=True``
draws every invocation; the default shortcut draws each window's kernel *median*
directly from its sampling distribution (``median ~ N(true median, (pi/2) cv^2 / n)``
relative, the asymptotic law of a sample median of normal jitter) and the *total* from
the sum's law. ``tests/unit/simulation`` checks the two agree statistically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.simulation.faults import Fault, FaultKind, Throttle, step_effects
from pacekeeper.controller.simulation.noise_families import (
    NoiseFamily,
    NoiseProcess,
    launch_threads,
)
from pacekeeper.controller.simulation.pauses import JobPause, pause_times
from pacekeeper.controller.simulation.waits import Pipeline, synchronise
from pacekeeper.cupti_ext.sampling import sample_every_for

__all__ = [
    "COMM_KERNEL_NAMES",
    "LAST_STAGE_KERNEL_NAMES",
    "SECTIONS",
    "Fault",
    "FaultKind",
    "Imbalance",
    "ImbalanceKind",
    "JobSimulator",
    "Layout",
    "ModelParams",
    "WindowSummary",
]

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]

SECTIONS = ("dataloader", "forward_backward", "optimizer")
"""Timed sections per step. ``optimizer`` holds the gradient all-reduce (``forward_backward``
with DDP overlap), so it also holds the wait for the slowest rank: a straggler's own
raw ``optimizer`` time is the *shortest*."""

COMM_KERNEL_NAMES = ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ncclDevKernel_AllGather_RING")
P2P_KERNEL_NAME = "ncclDevKernel_SendRecv"
"""A pipeline job's point-to-point kernel: it spins through the bubble."""
LAST_STAGE_KERNEL_NAMES = ("lm_head_gemm", "cross_entropy_fwd", "cross_entropy_bwd", "logits_sm")


def sigma_for_pairwise_spread(mean_abs_diff: float) -> float:
    """Log-normal sigma such that two GPUs drawn at random differ by ``mean_abs_diff`` on
    average: for X, Y ~ N(0, s^2) i.i.d., E|X - Y| = 2 s / sqrt(pi)."""
    return mean_abs_diff * math.sqrt(math.pi) / 2.0


@dataclass(frozen=True, slots=True)
class ModelParams:
    """Defaults of the generative model. Units are in the names."""

    gpus_per_node: int = 8
    step_s: float = 2.0
    window_s: float = 60.0
    kernels: int = 200
    """Distinct compute kernels per rank (communication kernels come on top)."""
    compute_s: float = 1.6
    """GPU compute time of one step on a median GPU (forward + backward)."""
    dataloader_s: float = 0.05
    optimizer_s: float = 0.15
    """Communication (all-reduce) and optimizer time when no rank is waited for."""
    allreduce_share: float = 2.0 / 3.0
    """Share of ``optimizer_s`` that is the gradient all-reduce's transfer (0.10 s; the
    rest is the optimizer's update): timed as wait by the collective timing, and the
    only part a slow link slows."""
    ddp_overlap: bool = False
    """DDP: the all-reduce runs in buckets inside backward, so its wait lands in
    ``forward_backward`` (timed from the last ready bucket, ``Detector.watch_ddp``)."""
    ddp_exposed_share: float = 0.25
    """With DDP overlap: share of the transfer left after backward (the last buckets);
    the rest runs under the backward compute."""
    static_pairwise_spread: float = 0.08
    """Same-SKU GPUs differ by this much on average (mean absolute pairwise difference)."""
    static_clip_sigmas: float = 2.0
    """GPUs beyond this many sigmas fail acceptance burn-in; beyond it is a fault."""
    drift_min: float = 0.005
    drift_max: float = 0.01
    """Drift amplitude range: peak to peak 1-2% of step time."""
    drift_period_min_s: float = 7200.0
    drift_period_max_s: float = 28800.0
    step_jitter_cv: float = 0.005
    """Per rank-step speed jitter shared by all kernels of the step (clocks, power)."""
    kernel_jitter_cv: float = 0.02
    """Per invocation jitter of one kernel."""
    section_jitter_cv: float = 0.01
    stall_prob: float = 5e-5
    """Per rank-step probability of a data-loader stall."""
    stall_mean_s: float = 1.5
    gc_prob: float = 2e-4
    """Per rank-step probability of a Python GC pause (hits the CPU side of the step)."""
    gc_min_s: float = 0.1
    gc_max_s: float = 0.5
    seq_sensitive_share: float = 0.3
    """Share of compute kernels whose time scales with the step's sequence lengths."""
    kernel_sample_every: int | None = None
    """Kernels are traced in one step in this many; None: the CUPTI backend's own rule
    (cupti_ext.sampling) for a job whose step is one traced section. The default job
    (2 s steps, ~470 kernels) gets 1: every step traced."""


class ImbalanceKind(StrEnum):
    NONE = "none"
    MOVING = "moving"
    """Sequence lengths: the slowest rank changes from step to step and window to window."""
    LAST_STAGE = "last_stage"
    """Pipeline parallelism: the last stage computes the LM head and the loss."""


@dataclass(frozen=True, slots=True)
class Imbalance:
    kind: ImbalanceKind = ImbalanceKind.NONE
    step_sigma: float = 0.10
    """Moving: log-normal sigma of one step's work on one rank."""
    window_sigma: float = 0.05
    """Moving: log-normal sigma of a rank's work over one window (a shard of long documents)."""
    pipeline_stages: int = 4
    last_stage_extra: float = 0.2
    """Last stage: extra compute share, spent in kernels only the last stage runs."""


@dataclass(frozen=True, slots=True)
class WindowSummary:
    """What the detector sees for one report window, for all ranks."""

    index: int
    start_s: float
    end_s: float
    steps: int
    section_names: tuple[str, ...]
    section_median_s: F64
    """ranks x sections."""
    section_samples: npt.NDArray[np.int64]
    """ranks: section entries in the window."""
    kernel_names: tuple[str, ...]
    kernel_median_ns: F64
    """ranks x kernels; NaN where a rank never ran the kernel."""
    kernel_count: npt.NDArray[np.int64]
    kernel_total_ns: F64
    section_wait_s: F64 | None = None
    """ranks x sections: time blocked in collectives inside the window's entries (the
    detector's ``SectionSummary.wait_ns``); None: not measured."""
    section_entries: npt.NDArray[np.int64] | None = None
    """ranks x sections: entries in the window (``SectionSummary.num``)."""
    section_work_median_s: F64 | None = None
    """ranks x sections: the median over entries of each entry's time less its own
    wait (``SectionSummary.work_median_ns``); None: waits not measured."""
    wait_s: F64 | None = None
    """ranks: time blocked in collectives over the window (all sections)."""
    wall_s: float | None = None
    """The window's elapsed time on the job's clock (the steps as long as they took)."""
    gpu_speed: F64 | None = None
    """ranks: how much longer identical GPU work takes at the window's end (static spread
    x drift x faults, no work imbalance, no host time): what a confirmation probe
    measures."""
    kernel_threads: F64 | None = None
    """ranks x kernels: each kernel's typical launch threads (NaN: none); None: launch
    sizes not modelled (a data skew whose extra work grows no launch)."""


@dataclass(frozen=True, slots=True)
class Layout:
    ranks: int
    gpus_per_node: int

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node

    def node_name(self, node: int) -> str:
        return f"node-{node:05d}"

    def nodes(self) -> int:
        return -(-self.ranks // self.gpus_per_node)

    def node_index(self) -> npt.NDArray[np.int64]:
        return np.arange(self.ranks, dtype=np.int64) // self.gpus_per_node

    def ranks_of_node(self, node: int) -> tuple[int, ...]:
        lo = node * self.gpus_per_node
        return tuple(range(lo, min(self.ranks, lo + self.gpus_per_node)))

    def gpu_uuid(self, rank: int) -> str:
        """The UUID of the GPU a rank runs on, in the driver's ``GPU-<uuid>`` form: fixed
        by node and local index, so a restarted job finds the same GPU there."""
        node, local = divmod(rank, self.gpus_per_node)
        return f"GPU-{node:08x}-{local:04x}-4000-8000-000000000000"


def truncated_normal(rng: np.random.Generator, size: int, clip: float) -> F64:
    """Standard normal draws restricted to [-clip, clip] (rejection, vectorised)."""
    z = rng.standard_normal(size)
    bad = np.abs(z) > clip
    while bad.any():
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > clip
    return z


@dataclass
class _Static:
    speed: F64
    drift_amp: F64
    drift_period_s: F64
    drift_phase: F64
    kernel_base_ns: F64
    kernel_per_step: npt.NDArray[np.int64]
    seq_sensitive: B
    window_work: F64 = field(default_factory=lambda: np.ones(0))


class JobSimulator:
    """Simulates one job window by window; deterministic for a given seed."""

    def __init__(
        self,
        ranks: int,
        *,
        params: ModelParams | None = None,
        faults: tuple[Fault, ...] = (),
        imbalance: Imbalance | None = None,
        seed: int = 0,
        exact_kernels: bool = False,
        pauses: tuple[JobPause, ...] = (),
        noise: NoiseFamily | None = None,
    ) -> None:
        """``noise``: a noise family on top of the model's (its own random stream; its
        drift is the caller's to apply to ``params``: ``NoiseFamily.apply``)."""
        if ranks < 1:
            raise ValueError(f"ranks must be >= 1, got {ranks}")
        self.p = params or ModelParams()
        if self.p.window_s < self.p.step_s:
            raise ValueError("window_s must be at least one step_s")
        if not 0.0 <= self.p.allreduce_share < 1.0:
            raise ValueError(f"allreduce_share must be in [0, 1), got {self.p.allreduce_share}")
        if not 0.0 <= self.p.ddp_exposed_share <= 1.0:
            raise ValueError(f"ddp_exposed_share must be in [0, 1], got {self.p.ddp_exposed_share}")
        self.ranks = ranks
        self.layout = Layout(ranks, self.p.gpus_per_node)
        self.faults = faults
        for f in faults:
            bad = [r for r in f.ranks if not 0 <= r < ranks]
            if bad:
                raise ValueError(f"fault {f.kind}: rank {bad[0]} is outside 0..{ranks - 1}")
        self.imbalance = imbalance or Imbalance()
        self.pipeline = (
            Pipeline.over_nodes(ranks, self.p.gpus_per_node, self.imbalance.pipeline_stages)
            if self.imbalance.kind is ImbalanceKind.LAST_STAGE
            else None
        )
        self.exact_kernels = exact_kernels
        self.pauses = pauses
        self.rng = np.random.default_rng(seed)
        # Pauses draw from their own stream: adding them leaves every other draw alone.
        self._pause_rng = np.random.default_rng([seed, 0x9A05E])
        self._static = self._draw_static()
        self._noise = None if noise is None else NoiseProcess(noise, ranks, self.p.step_s, seed)
        self._skew_kernels: B | None = None
        """The data-dependent kernels a data skew slows (None: all compute, as before)."""
        if self._noise is not None and noise is not None and noise.skew_kernel_share < 1.0:
            st = self._static
            self._skew_kernels = self._noise.data_dependent_kernels(
                st.kernel_base_ns * st.kernel_per_step
            )
        self._grown: B | None = None
        """The data-dependent kernels whose launch grows with the skew (issue #38)."""
        if self._noise is not None and self._skew_kernels is not None:
            self._grown = self._noise.grown_launches(self._skew_kernels)
        if self.p.kernel_sample_every is not None and self.p.kernel_sample_every < 1:
            raise ValueError(f"kernel_sample_every must be >= 1, got {self.p.kernel_sample_every}")
        self.kernel_sample_every = self.p.kernel_sample_every or sample_every_for(
            kernels_per_entry=float(self._static.kernel_per_step.sum()),
            entry_interval_s=self.p.step_s,
        )
        self._throttle = Throttle(ranks, self.p.step_s)
        self._step = 0
        self._window = 0
        kernel_names = [f"compute_kernel_{k:03d}" for k in range(self.p.kernels)]
        if self.imbalance.kind is ImbalanceKind.LAST_STAGE:
            kernel_names += list(LAST_STAGE_KERNEL_NAMES)
        kernel_names += list(COMM_KERNEL_NAMES)
        if self.pipeline is not None:
            kernel_names.append(P2P_KERNEL_NAME)
        self.kernel_names = tuple(kernel_names)

    def coords(self) -> list[dict[str, int]] | None:
        """Per rank, the parallel coordinates a job would give ``Detector.set_topology``;
        None for a data-parallel job (one peer group: nothing to tell)."""
        return None if self.pipeline is None else self.pipeline.coords()

    # --- static draws ----------------------------------------------------------------

    def _draw_static(self) -> _Static:
        p, rng, n = self.p, self.rng, self.ranks
        sigma = sigma_for_pairwise_spread(p.static_pairwise_spread)
        # speed > 1 means slower: it multiplies times.
        speed = np.exp(sigma * truncated_normal(rng, n, p.static_clip_sigmas))
        drift_amp = rng.uniform(p.drift_min, p.drift_max, n)
        drift_period = rng.uniform(p.drift_period_min_s, p.drift_period_max_s, n)
        drift_phase = rng.uniform(0.0, 2 * math.pi, n)
        # Kernel durations are heavy-tailed: a few GEMMs dominate, many small kernels.
        raw = rng.lognormal(0.0, 1.0, p.kernels)
        per_step = rng.choice(np.array([1, 2, 4], dtype=np.int64), p.kernels)
        base_ns = raw / float((raw * per_step).sum()) * p.compute_s * 1e9
        seq = rng.random(p.kernels) < p.seq_sensitive_share
        return _Static(speed, drift_amp, drift_period, drift_phase, base_ns, per_step, seq)

    # --- per step ----------------------------------------------------------------------

    def _throttle_states(self, idx: npt.NDArray[np.int64], t: F64, f: Fault) -> F64:
        """Throttling's on/off states for ranks ``idx`` over the steps at ``t``."""
        return self._throttle.states(idx, t, f, self.rng)

    @property
    def steps_per_window(self) -> int:
        return int(self.p.window_s // self.p.step_s)

    @property
    def clock_s(self) -> float:
        """The job's clock: when the next window starts."""
        return self._step * self.p.step_s

    def skip(self, windows: int) -> None:
        """Let ``windows`` report windows pass with no report (a restart's downtime): the
        job's clock moves on (drift, faults, pauses follow it), nothing is drawn."""
        if windows < 0:
            raise ValueError(f"windows must be >= 0, got {windows}")
        self._step += windows * self.steps_per_window
        self._window += windows

    def next_window(self) -> WindowSummary:
        p, rng, n = self.p, self.rng, self.ranks
        steps = self.steps_per_window
        t = (self._step + np.arange(steps, dtype=np.float64)) * p.step_s
        st = self._static
        drift = 1.0 + st.drift_amp[:, None] * np.sin(
            2 * math.pi * t[None, :] / st.drift_period_s[:, None] + st.drift_phase[:, None]
        )
        effects = step_effects(self.faults, n, t, step_s=p.step_s, throttle=self._throttle, rng=rng)
        comp_fault, comm_fault = effects.compute, effects.comm
        jitter = 1.0 + p.step_jitter_cv * rng.standard_normal((n, steps))
        extra = None if self._noise is None else self._noise.draw(steps)
        if extra is not None:
            jitter = jitter * extra.speed
        speed = st.speed[:, None] * drift * comp_fault * jitter
        work = self._work(steps)
        plain_mult = speed
        seq_mult = speed * work
        dd = self._skew_kernels
        if extra is not None and dd is None:  # data skew: more work on all compute
            plain_mult = plain_mult * extra.work
            seq_mult = seq_mult * extra.work
        last_stage = self._last_stage_mask()

        # Sections, per step.
        step_ns = st.kernel_base_ns * st.kernel_per_step
        fixed_compute = float(step_ns[~st.seq_sensitive].sum())
        seq_compute = float(step_ns[st.seq_sensitive].sum())
        compute_s = (fixed_compute * plain_mult + seq_compute * seq_mult) / 1e9
        skew = None
        if extra is not None and dd is not None:
            # Data skew on the data-dependent kernels alone: the step's compute grows by
            # the drawn size, those kernels by size / their time share.
            skew = 1.0 + (extra.work - 1.0) * float(step_ns.sum()) / float(step_ns[dd].sum())
            dd_fixed = float(step_ns[dd & ~st.seq_sensitive].sum())
            dd_seq = float(step_ns[dd & st.seq_sensitive].sum())
            compute_s = compute_s + (skew - 1.0) * (dd_fixed * plain_mult + dd_seq * seq_mult) / 1e9
        if last_stage is not None:
            compute_s[last_stage] += (
                self.imbalance.last_stage_extra * p.compute_s * plain_mult[last_stage]
            )
        compute_s *= 1.0 + p.section_jitter_cv * rng.standard_normal((n, steps))
        gc = (rng.random((n, steps)) < p.gc_prob) * rng.uniform(p.gc_min_s, p.gc_max_s, (n, steps))
        # Host time (a host fault, a pause in the section) delays launches: the section's
        # wall time grows, its kernels' durations do not.
        paused = pause_times(self.pauses, n, t, p.step_s, self._pause_rng)
        fwd_bwd_s = (
            compute_s
            + gc
            + effects.host_s["forward_backward"]
            + paused.section_s["forward_backward"]
        )
        stall = (rng.random((n, steps)) < p.stall_prob) * rng.exponential(
            p.stall_mean_s, (n, steps)
        )
        loader_s = (
            p.dataloader_s * (1.0 + p.section_jitter_cv * rng.standard_normal((n, steps)))
            + stall
            + effects.host_s["dataloader"]
            + paused.section_s["dataloader"]
        )
        if extra is not None:
            loader_s = loader_s + extra.loader_s
        # A slow link slows the transfer only (1.0 exactly when healthy: same draws).
        share = p.allreduce_share
        link = 1.0 + share * (comm_fault - 1.0)
        jit = 1.0 + p.section_jitter_cv * rng.standard_normal((n, steps))
        comm_s = p.optimizer_s * link[None, :] * jit
        # A pause between steps times in no section but delays the rank's arrival at
        # the all-reduce like any other.
        sync = synchronise(
            loader_s + paused.untimed_s,
            fwd_bwd_s,
            comm_s,
            p.optimizer_s * share * comm_fault[None, :] * jit,
            ddp_overlap=p.ddp_overlap,
            exposed_share=p.ddp_exposed_share,
            pipeline=self.pipeline,
        )
        fwd_bwd_s, optimizer_s = sync.forward_backward_s, sync.optimizer_s
        section_median = np.stack(
            [np.median(loader_s, axis=1), np.median(fwd_bwd_s, axis=1), np.median(optimizer_s, 1)],
            axis=1,
        )
        # What the detector scores: each step's own work (its time less its own wait),
        # median over the window's steps (``SectionSummary.work_median_ns``).
        section_work = np.stack(
            [
                np.median(loader_s, axis=1),
                np.median(fwd_bwd_s - sync.forward_backward_wait_s, axis=1),
                np.median(optimizer_s - sync.optimizer_wait_s, axis=1),
            ],
            axis=1,
        )
        section_wait = np.stack(
            [
                np.zeros(n),
                sync.forward_backward_wait_s.sum(axis=1),
                sync.optimizer_wait_s.sum(axis=1),
            ],
            axis=1,
        )
        wall_s = float((loader_s + paused.untimed_s + fwd_bwd_s + optimizer_s).max(axis=0).sum())

        traced = (self._step + np.arange(steps)) % self.kernel_sample_every == 0
        if traced.all():  # every step traced: no selection (and the same draws as ever)
            med, cnt, tot = self._kernels(plain_mult, seq_mult, last_stage, steps)
        elif traced.any():
            k_plain, k_seq = plain_mult[:, traced], seq_mult[:, traced]
            med, cnt, tot = self._kernels(k_plain, k_seq, last_stage, int(traced.sum()))
        else:  # no traced step in this window: no kernel samples at all
            k = p.kernels + (len(LAST_STAGE_KERNEL_NAMES) if last_stage is not None else 0)
            med, tot = np.full((n, k), np.nan), np.zeros((n, k))
            cnt = np.zeros((n, k), dtype=np.int64)
        if skew is not None and dd is not None:
            # The skewed set holds for the whole window: one factor per rank.
            cols = np.flatnonzero(dd)
            med[:, cols] *= skew[:, :1]
            tot[:, cols] *= skew[:, :1]
        thr = None
        if skew is not None and self._grown is not None and self._grown.any():
            thr = launch_threads(self._grown, skew[:, 0])
        # Communication kernels spin while waiting for peers, so they carry the wait.
        sync_ns = sync.allreduce_sync_s * 1e9
        shares = np.array([0.8, 0.2])
        med = np.concatenate([med, np.median(sync_ns, axis=1)[:, None] * shares], axis=1)
        tot = np.concatenate([tot, sync_ns.sum(axis=1)[:, None] * shares], axis=1)
        cnt = np.concatenate([cnt, np.full((n, shares.size), steps, dtype=np.int64)], axis=1)
        if sync.p2p_wait_s is not None:
            p2p_ns = sync.p2p_wait_s * 1e9
            med = np.concatenate([med, np.median(p2p_ns, axis=1)[:, None]], axis=1)
            tot = np.concatenate([tot, p2p_ns.sum(axis=1)[:, None]], axis=1)
            cnt = np.concatenate([cnt, np.full((n, 1), steps, dtype=np.int64)], axis=1)

        summary = WindowSummary(
            index=self._window,
            start_s=float(t[0]),
            end_s=float(t[-1] + p.step_s),
            steps=steps,
            section_names=SECTIONS,
            section_median_s=section_median,
            section_samples=np.full(n, steps * len(SECTIONS), dtype=np.int64),
            kernel_names=self.kernel_names,
            kernel_median_ns=med,
            kernel_count=cnt,
            kernel_total_ns=tot,
            section_wait_s=section_wait,
            section_work_median_s=section_work,
            section_entries=np.full((n, len(SECTIONS)), steps, dtype=np.int64),
            wait_s=section_wait.sum(axis=1),
            wall_s=wall_s,
            gpu_speed=(st.speed[:, None] * drift * comp_fault)[:, -1].copy(),
            kernel_threads=None if thr is None else _pad_nan(thr, med.shape[1]),
        )
        self._step += steps
        self._window += 1
        return summary

    def _work(self, steps: int) -> F64:
        im, n = self.imbalance, self.ranks
        if im.kind is not ImbalanceKind.MOVING:
            return np.ones((n, steps))
        per_window = np.exp(im.window_sigma * self.rng.standard_normal((n, 1)))
        return per_window * np.exp(im.step_sigma * self.rng.standard_normal((n, steps)))

    def _last_stage_mask(self) -> B | None:
        # Pipeline stages over nodes: the last stage is the last 1/stages of the nodes.
        return None if self.pipeline is None else self.pipeline.last_stage()

    def _kernels(
        self, plain: F64, seq: F64, last_stage: B | None, steps: int
    ) -> tuple[F64, npt.NDArray[np.int64], F64]:
        st, p, rng, n = self._static, self.p, self.rng, self.ranks
        k = p.kernels
        cnt = np.broadcast_to(st.kernel_per_step * steps, (n, k)).copy()
        cv = p.kernel_jitter_cv
        if self.exact_kernels:
            med = np.empty((n, k))
            tot = np.empty((n, k))
            for j in range(k):
                mult = seq if st.seq_sensitive[j] else plain
                reps = int(st.kernel_per_step[j])
                inv = np.repeat(mult, reps, axis=1) * (
                    1.0 + cv * rng.standard_normal((n, steps * reps))
                )
                times = st.kernel_base_ns[j] * inv
                med[:, j] = np.median(times, axis=1)
                tot[:, j] = times.sum(axis=1)
        else:
            med_mult = np.where(
                st.seq_sensitive[None, :],
                np.median(seq, axis=1)[:, None],
                np.median(plain, axis=1)[:, None],
            )
            sum_mult = np.where(
                st.seq_sensitive[None, :], seq.sum(1)[:, None], plain.sum(1)[:, None]
            )
            n_inv = cnt.astype(np.float64)
            med_sd = cv * np.sqrt(math.pi / 2.0 / n_inv)
            med = (
                st.kernel_base_ns[None, :] * med_mult * (1.0 + med_sd * rng.standard_normal((n, k)))
            )
            tot_sd = cv / np.sqrt(n_inv)
            tot = (
                st.kernel_base_ns[None, :]
                * st.kernel_per_step[None, :]
                * sum_mult
                * (1.0 + tot_sd * rng.standard_normal((n, k)))
            )
        if last_stage is not None:
            extra = len(LAST_STAGE_KERNEL_NAMES)
            share_ns = self.imbalance.last_stage_extra * p.compute_s * 1e9 / extra
            e_med = np.full((n, extra), np.nan)
            e_tot = np.full((n, extra), np.nan)
            e_cnt = np.zeros((n, extra), dtype=np.int64)
            m = np.median(plain[last_stage], axis=1)[:, None]
            e_med[last_stage] = (
                share_ns
                * m
                * (
                    1.0
                    + cv * rng.standard_normal((int(last_stage.sum()), extra)) / math.sqrt(steps)
                )
            )
            e_tot[last_stage] = e_med[last_stage] * steps
            e_cnt[last_stage] = steps
            med = np.concatenate([med, e_med], axis=1)
            tot = np.concatenate([tot, e_tot], axis=1)
            cnt = np.concatenate([cnt, e_cnt], axis=1)
        return med, cnt, tot

    def windows(self, count: int) -> list[WindowSummary]:
        return [self.next_window() for _ in range(count)]


def _pad_nan(a: F64, cols: int) -> F64:
    """``a`` with NaN columns appended up to ``cols`` (the kernels it does not cover)."""
    return np.concatenate([a, np.full((a.shape[0], cols - a.shape[1]), np.nan)], axis=1)
