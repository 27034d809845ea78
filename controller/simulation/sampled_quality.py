"""Detection quality over a sampled scenario space: per cell (detector x noise family x
fault) recall in time, time to find and act, and false disruptions per GPU-day with an
exact upper confidence bound.

* found in time: every faulty rank named within ``FIND_WITHIN_S`` of the fault's start;
  acted in time: a disruptive action on it within ``ACT_WITHIN_S``;
* false disruptions: disruptive actions (restart, taint, drain, cordon; NVRx: one stop
  per report that flags) on healthy ranks or nodes, in every run (faulty ones too);
* ``poisson_upper``: the exact one-sided upper bound of a Poisson mean after ``k``
  events (the Garwood interval: ``P(X <= k; mu) = 1 - level``), divided by the
  GPU-days; ``binomial_bounds``: the Clopper-Pearson interval of a proportion (recall).
Both solve their tail equations by bisection: exact to 1e-12, no scipy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from pacekeeper.controller.simulation.quality import Quality

FIND_WITHIN_S = 300.0
ACT_WITHIN_S = 600.0


def _poisson_cdf(k: int, mu: float) -> float:
    """P(X <= k) for X ~ Poisson(mu), summed in log space (exp(-mu) underflows past
    mu ~ 745: thousands of NVRx's false stops)."""
    if mu == 0:
        return 1.0
    logs = [-mu + i * math.log(mu) - math.lgamma(i + 1) for i in range(k + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _bisect(f: object, lo: float, hi: float) -> float:
    assert callable(f)
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2


def poisson_upper(k: int, exposure: float, level: float = 0.95) -> float:
    """The exact upper ``level`` bound of a rate after ``k`` events in ``exposure``
    (0 events: ``-ln(1 - level)``, i.e. 2.996 / exposure at 95%)."""
    if k < 0 or exposure <= 0 or not 0 < level < 1:
        raise ValueError(f"poisson_upper: k={k} >= 0, exposure={exposure} > 0, 0 < level < 1")
    hi = max(10.0, 4.0 * (k + 10))
    mu = _bisect(lambda m: _poisson_cdf(k, m) <= 1 - level, 0.0, hi)
    return mu / exposure


def _binom_cdf(k: int, n: int, p: float) -> float:
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))


def binomial_bounds(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson two-sided ``level`` interval of a proportion ``k / n``."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"binomial_bounds: 0 <= k={k} <= n={n}, n >= 1")
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else _bisect(lambda p: 1 - _binom_cdf(k - 1, n, p) >= a, 0.0, 1.0)
    hi = 1.0 if k == n else _bisect(lambda p: _binom_cdf(k, n, p) <= a, 0.0, 1.0)
    return lo, hi


@dataclass(frozen=True, slots=True)
class RunResult:
    detector: str
    family: str
    fault: str
    faulty: bool
    found_in_time: bool
    acted_in_time: bool
    time_to_find_s: float | None
    time_to_act_s: float | None
    false_disruptions: int
    gpu_days: float

    @classmethod
    def of(cls, detector: str, family: str, fault: str, q: Quality) -> RunResult:
        faulty = q.faulty > 0
        ttd, tta = q.time_to_detect_s, q.time_to_act_s
        return cls(
            detector, family, fault, faulty,
            faulty and q.found == q.faulty and ttd is not None and ttd <= FIND_WITHIN_S,
            faulty and tta is not None and tta <= ACT_WITHIN_S,
            ttd, tta, q.false_actions, q.gpu_days,
        )  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> RunResult:
        def num(k: str) -> float | None:
            v = d[k]
            return None if v is None else float(str(v))

        return cls(
            str(d["detector"]), str(d["family"]), str(d["fault"]), bool(d["faulty"]),
            bool(d["foundInTime"]), bool(d["actedInTime"]), num("timeToFindS"),
            num("timeToActS"), int(str(d["falseDisruptions"])), float(str(d["gpuDays"])),
        )  # fmt: skip

    def to_dict(self) -> dict[str, object]:
        return {"detector": self.detector, "family": self.family, "fault": self.fault,
                "faulty": self.faulty, "foundInTime": self.found_in_time,
                "actedInTime": self.acted_in_time,
                "timeToFindS": self.time_to_find_s, "timeToActS": self.time_to_act_s,
                "falseDisruptions": self.false_disruptions, "gpuDays": self.gpu_days}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Cell:
    detector: str
    family: str
    fault: str
    runs: int
    faulty_runs: int
    found: int
    acted: int
    worst_find_s: float | None
    median_act_s: float | None
    false_disruptions: int
    gpu_days: float
    found_and_acted: int = 0
    """Faulty runs both found within ``FIND_WITHIN_S`` and acted on within ``ACT_WITHIN_S``."""
    max_act_s: float | None = None
    """The longest time to act among the runs acted on (late ones too)."""

    @property
    def recall_found(self) -> float | None:
        return self.found / self.faulty_runs if self.faulty_runs else None

    @property
    def recall_acted(self) -> float | None:
        return self.acted / self.faulty_runs if self.faulty_runs else None

    @property
    def recall_in_time(self) -> float | None:
        return self.found_and_acted / self.faulty_runs if self.faulty_runs else None

    @property
    def rate(self) -> float:
        return self.false_disruptions / self.gpu_days if self.gpu_days > 0 else 0.0

    @property
    def upper95(self) -> float | None:
        return poisson_upper(self.false_disruptions, self.gpu_days) if self.gpu_days > 0 else None

    def to_dict(self) -> dict[str, object]:
        acted_ci = binomial_bounds(self.acted, self.faulty_runs) if self.faulty_runs else None
        return {
            "detector": self.detector, "family": self.family, "fault": self.fault,
            "runs": self.runs, "faultyRuns": self.faulty_runs,
            "recallFound5min": self.recall_found, "recallActed10min": self.recall_acted,
            "recallActed95": acted_ci, "worstTimeToFindS": self.worst_find_s,
            "medianTimeToActS": self.median_act_s, "maxTimeToActS": self.max_act_s,
            "found": self.found, "acted": self.acted, "foundAndActed": self.found_and_acted,
            "falseDisruptions": self.false_disruptions, "gpuDays": self.gpu_days,
            "falseDisruptionsPerGpuDay": self.rate,
            "upper95PerGpuDay": self.upper95,
        }  # fmt: skip


def _median(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def cell(detector: str, family: str, fault: str, runs: Iterable[RunResult]) -> Cell:
    rs = list(runs)
    faulty = [r for r in rs if r.faulty]
    finds = [r.time_to_find_s for r in faulty if r.time_to_find_s is not None]
    acts = [r.time_to_act_s for r in faulty if r.time_to_act_s is not None]
    worst = None
    if faulty:
        worst = math.inf if len(finds) < len(faulty) else max(finds)
    return Cell(
        detector, family, fault, len(rs), len(faulty),
        sum(r.found_in_time for r in faulty), sum(r.acted_in_time for r in faulty),
        worst, _median(acts),
        sum(r.false_disruptions for r in rs), sum(r.gpu_days for r in rs),
        sum(r.found_in_time and r.acted_in_time for r in faulty), max(acts, default=None),
    )  # fmt: skip


def cells(results: Iterable[RunResult], any_label: str = "all") -> list[Cell]:
    """Every detector x family x fault cell, each detector's family totals (fault
    ``any_label``) and its total over the whole space (both ``any_label``)."""
    rs = list(results)
    out = []
    for det in dict.fromkeys(r.detector for r in rs):
        mine = [r for r in rs if r.detector == det]
        for fam in dict.fromkeys(r.family for r in mine):
            for fault in dict.fromkeys(r.fault for r in mine):
                got = [r for r in mine if r.family == fam and r.fault == fault]
                if got:
                    out.append(cell(det, fam, fault, got))
        for fault in dict.fromkeys(r.fault for r in mine):
            out.append(cell(det, any_label, fault, [r for r in mine if r.fault == fault]))
        out.append(cell(det, any_label, any_label, mine))
    return out
