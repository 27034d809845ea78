"""NVRx's scoring rules, for ``reporting.ReportGenerator`` built as NVRx users build it.

A generator constructed with NVRx's arguments scores hand-made summaries exactly as
NVRx's ``reporting.ReportGenerator`` does, so code (and tests) ported from NVRx get
NVRx's numbers. These are the rules where NVRx and pacekeeper's own scoring
(``payload.score_payloads``, what ``Detector`` reports with) part ways; the arithmetic
they share (a score is reference median / this median; the GPU score weighs each
kernel's score by the time spent in it, ``NUM * AVG``) is written once more here only
in its NVRx form, over name-keyed mappings:

* Relative reference: the smallest median over the ranks of the group, for names every
  rank reported. A section some rank did not run scores NaN on every rank; a kernel
  some rank did not run is left out of every GPU score; with no kernel common to all
  ranks the GPU score is NaN (pacekeeper: a name drops out only where one rank ran it).
* Individual baseline: the smallest median this rank ever reported for the name, this
  window included (pacekeeper: ``RecentBest``, where one lucky window does not set it).
* Communication kernels, left out before any of this: names containing ``ncclDev``
  (pacekeeper: ``cupti_ext.kernel_keys.is_comm_kernel``).

Where NVRx divides by zero (a median of 0, or kernels whose weights sum to 0) the
score here is NaN instead, so a hand-built generator never raises on such input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NAN = math.nan


def is_comm_kernel(name: str) -> bool:
    """NVRx's test for a communication kernel, left out of every score."""
    return "ncclDev" in name


@dataclass(frozen=True, slots=True)
class RankTimes:
    """One rank's medians (any unit, the same for every rank) and kernel weights."""

    sections: Mapping[str, float]
    kernels: Mapping[str, float]
    kernel_weights: Mapping[str, float]
    """Per kernel, the time spent in it (``NUM * AVG``): its weight in the GPU score."""


def common_minima(medians: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per name reported by any rank, its smallest median; NaN unless every rank has it."""
    out: dict[str, float] = {}
    for per_rank in medians:
        for name in per_rank:
            if name not in out:
                vals = [m.get(name) for m in medians]
                out[name] = NAN if None in vals else min(v for v in vals if v is not None)
    return out


def section_scores(
    medians: Mapping[str, float], reference: Mapping[str, float]
) -> dict[str, float]:
    """Per section this rank ran: reference / median (NaN without a reference)."""
    return {name: _ratio(reference.get(name, NAN), med) for name, med in medians.items()}


def gpu_score(
    medians: Mapping[str, float], weights: Mapping[str, float], reference: Mapping[str, float]
) -> float:
    """Weighted mean of reference / median over the kernels with a reference; NaN when
    none has one (no kernels, or none common to all ranks)."""
    total = weighted = 0.0
    for name, med in medians.items():
        ref = reference.get(name, NAN)
        if math.isnan(ref):
            continue
        w = weights[name]
        weighted += _ratio(ref, med) * w
        total += w
    return weighted / total if total > 0 else NAN


def relative_scores(ranks: Sequence[RankTimes]) -> list[tuple[float, dict[str, float]]]:
    """Each rank's (GPU score, section scores) against the group's common minima."""
    k_ref = common_minima([r.kernels for r in ranks])
    s_ref = common_minima([r.sections for r in ranks])
    return [
        (gpu_score(r.kernels, r.kernel_weights, k_ref), section_scores(r.sections, s_ref))
        for r in ranks
    ]


class RunningMinimum:
    """NVRx's individual baseline: per name, the smallest median seen on this rank."""

    __slots__ = ("_best",)

    def __init__(self) -> None:
        self._best: dict[str, float] = {}

    def update(self, medians: Mapping[str, float]) -> Mapping[str, float]:
        """Take this window's medians in; the baselines (this window included)."""
        best = self._best
        for name, med in medians.items():
            old = best.get(name)
            best[name] = med if old is None or med < old else old
        return best


def individual_scores(
    times: RankTimes, sections: RunningMinimum, kernels: RunningMinimum
) -> tuple[float, dict[str, float]]:
    """This rank's (GPU score, section scores) against its own smallest medians."""
    k_ref = kernels.update(times.kernels)
    s_ref = sections.update(times.sections)
    return gpu_score(times.kernels, times.kernel_weights, k_ref), section_scores(
        times.sections, s_ref
    )


def _ratio(ref: float, med: float) -> float:
    return ref / med if med != 0 else NAN
