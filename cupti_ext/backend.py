"""The kernel-timing backend interface the detector talks to.

A backend is started and stopped around each profiled section (hot path: keep both
cheap), and drained once per report window by ``collect``. It never raises into the
training loop for its own failures; the detector's guard wraps calls as a last line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class BackendChoice:
    """Which backend runs and why; shown in the report and logged once at start."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class KernelStat:
    """Durations of one kernel identity over a window, in nanoseconds."""

    num: int
    median_ns: float
    mean_ns: float
    min_ns: float
    max_ns: float
    std_ns: float
    total_ns: float


@dataclass(frozen=True, slots=True)
class KernelWindow:
    """What a backend measured since the previous ``collect``.

    ``kernels`` maps a stable kernel key (bounded under dynamic shapes) to its stats.
    ``sections`` maps section name -> kernel key -> stats, for backends that attribute
    kernels to the section that launched them; it may be empty.
    """

    kernels: dict[str, KernelStat] = field(default_factory=dict)
    sections: dict[str, dict[str, KernelStat]] = field(default_factory=dict)
    dropped_records: int = 0
    """Kernel records lost (CUPTI buffers full, our queues or bounds hit, records a
    forced flush handed over incomplete)."""
    records: int = 0
    """Kernel records timed and attributed to a section in this window."""
    comm_records: int = 0
    """Communication kernels seen and left out of ``kernels`` and ``sections``."""
    comm_ns: float = 0.0
    """Their summed duration: on a GPU the time a rank waits for its peers (NCCL kernels
    spin until every rank has joined), which the detector turns into ``waitShare``."""
    unattributed_records: int = 0
    """Kernel records traced but launched outside every sampled section entry."""
    held_records: int = 0
    """Kernel records still waiting for their section's markers when the window closed
    (an entry still open at the report); they count in a later window."""
    lost_markers: int = 0
    """Section markers that never came or were dropped at a bound: their entries'
    kernels count as unattributed."""
    launch_threads: dict[str, float] = field(default_factory=dict)
    """Per kernel key, its launches' typical (median) threads, grid x block, over the
    window's records (issue #38: a bigger launch is read per unit of work); empty
    where the backend sees no launch (events, none)."""

    def log_losses(self, logger: logging.Logger) -> None:
        """A WARNING for each kind of loss the window had: never silently."""
        if self.dropped_records:
            logger.warning("kernel records dropped", extra={"dropped": self.dropped_records})
        if self.lost_markers:
            logger.warning(
                "section markers lost: their entries' kernels lost to attribution",
                extra={
                    "lost_markers": self.lost_markers,
                    "unattributed": self.unattributed_records,
                },
            )


@runtime_checkable
class KernelTimingBackend(Protocol):
    @property
    def name(self) -> str: ...

    def start(self, section: str) -> None:
        """Section entry on the calling thread (hot path)."""

    def stop(self, section: str) -> None:
        """Section exit on the calling thread (hot path)."""

    def collect(self) -> KernelWindow:
        """Drain everything measured since the last call (called at report time)."""

    def shutdown(self) -> None:
        """Release the GPU tooling (CUPTI subscription, events) so others can attach."""
