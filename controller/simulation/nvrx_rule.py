"""NVRx's published straggler rule, re-implemented from its documentation as the baseline.

NVRx (``nvidia_resiliency_ext`` straggler detector, 0.x) per report window:

* relative score of a key (section or kernel) on a rank = the minimum over ranks of the
  key's median time / this rank's median time; a kernel some rank did not run has no
  reference and is skipped;
* individual score = the minimum median this rank ever saw for the key (kept for the
  whole job) / this window's median;
* the GPU score = kernel scores averaged with weight ``count x mean`` (= total time),
  communication (``ncclDev*``) kernels left out;
* ``identify_stragglers`` flags a rank whose score is strictly below the threshold
  (0.75 by default for all four scores; NeMo's straggler callback recipes use 0.7 on
  the GPU scores). There is no persistence: every flag is a verdict, and NeMo's
  ``stop_if_detected`` acts on the first one.

This is our own code working on the simulator's arrays, so the baseline and pacekeeper
see exactly the same traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.simulation.models import WindowSummary

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class NvrxRule:
    name: str
    threshold: float
    sections: bool
    """Also flag on section scores (NVRx defaults); NeMo recipes look at GPU scores only."""


NVRX_DEFAULT = NvrxRule("nvrx-0.75", 0.75, sections=True)
NVRX_GPU = NvrxRule("nvrx-0.75-gpu", 0.75, sections=False)
"""The default threshold on GPU scores only: fair to users who time no sections."""
NEMO_RECIPE = NvrxRule("nvrx-0.7-gpu", 0.7, sections=False)
NVRX_RULES = (NVRX_DEFAULT, NVRX_GPU, NEMO_RECIPE)


@dataclass(frozen=True, slots=True)
class NvrxScores:
    gpu_relative: F64
    gpu_individual: F64
    section_relative: F64
    """ranks x sections."""
    section_individual: F64


def _weighted(scores: F64, weights: F64) -> F64:
    ok = np.isfinite(scores) & np.isfinite(weights) & (weights > 0)
    num = np.where(ok, scores * np.where(ok, weights, 0.0), 0.0).sum(axis=1)
    den = np.where(ok, weights, 0.0).sum(axis=1)
    out = np.full(scores.shape[0], np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


class NvrxScorer:
    """Keeps NVRx's per-rank historical minima across windows."""

    def __init__(self) -> None:
        self._kernel_min: F64 | None = None
        self._section_min: F64 | None = None

    def score(self, w: WindowSummary) -> NvrxScores:
        keep = np.array(["ncclDev" not in k for k in w.kernel_names])
        med = w.kernel_median_ns[:, keep]
        weight = w.kernel_total_ns[:, keep]
        # A kernel missing on any rank has no workload reference (NVRx all-reduces -1).
        complete = np.isfinite(med).all(axis=0)
        ref = np.where(complete, np.nanmin(np.where(np.isfinite(med), med, np.inf), axis=0), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            gpu_rel = _weighted(ref[None, :] / med, weight)
            self._kernel_min = med if self._kernel_min is None else np.fmin(self._kernel_min, med)
            gpu_ind = _weighted(self._kernel_min / med, weight)
            sec = w.section_median_s
            sec_rel = sec.min(axis=0, keepdims=True) / sec
            self._section_min = (
                sec if self._section_min is None else np.fmin(self._section_min, sec)
            )
            sec_ind = self._section_min / sec
        return NvrxScores(gpu_rel, gpu_ind, sec_rel, sec_ind)


def flagged(scores: NvrxScores, rule: NvrxRule) -> B:
    """Ranks ``identify_stragglers`` would return for this rule (strictly below)."""
    t = rule.threshold
    with np.errstate(invalid="ignore"):
        out = (scores.gpu_relative < t) | (scores.gpu_individual < t)
        if rule.sections:
            out |= (scores.section_relative < t).any(axis=1)
            out |= (scores.section_individual < t).any(axis=1)
    return np.asarray(out, dtype=bool)
