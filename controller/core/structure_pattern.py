"""Structure without a layout: a slow set that is regular from the job's first windows.

A drop-in job never calls ``set_topology``: its reports carry no ``group`` or
``coords``, so ``structure`` has no dimension to line a slow set up with. A pipeline's
last stage (the LM head and the loss) still has more work, and without coordinates its
ranks look like a slow node. What tells them apart without being told the layout:

* **from the start**: the stage is heavier from the job's first windows; a fault
  begins mid-job. The slow ranks of the job's first ``LEARN_REPORTS`` reports (warm-up
  ones included: they are its first windows too) are remembered (``Layout``); whatever
  becomes slow later is never structure. A rank whose GPU the memory of hardware knows
  and that runs slower than its learned factor is left out (``attribution``): that is
  the hardware, from the start or not.
* **regular**: the slow set is one value of a regular partition of the ranks, the way
  every parallelism dimension partitions them: ``(rank // block) % period == index``,
  with ``block * period`` dividing the world. ``period = world / block`` is one
  contiguous block (pipeline-outermost order); ``block = 1`` a stride (a dimension
  innermost); anything between a block repeated across replicas. At least two ranks,
  and at least ``MIN_COVER`` of the pattern's measured ranks slow in those windows.
* **stable in size**: in each report the pattern's median score stays within the
  tolerance (``tolerance``) of what it was while learned, and each slow rank of it
  within the tolerance of its pattern mates' median (the others of the pattern). A rank
  of a heavier stage that slows mid-job falls below its mates and is judged as usual;
  the whole pattern slowing further is no longer the workload's size either.

A job whose first windows showed nothing regular has no pattern for the rest of its
life (until its world size changes). Known limit: a node slow from the job's very first
window is a contiguous block too and is held as structure; coordinates
(``set_topology``), the memory of hardware or the probe tell it from a stage.

Pure: ``learn`` folds one report into the job's ``Layout``; ``explain`` says which of
its slow ranks the pattern accounts for. Separate from ``structure`` (which reads
coordinates) because this one reads history.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

LEARN_REPORTS = 3
"""Judged reports (after the warm-up) whose slow ranks may form the pattern."""
MIN_COVER = 0.75
"""Share of the pattern's measured ranks slow in the first reports, and of those slow
ranks inside the pattern: a few independent faults that happen to sit on a stride
(one on every eighth rank) cover neither."""
MAX_LEARN_RANKS = 4096
"""Slow ranks remembered while learning (the state stays small); more: no pattern."""
LOO_MAX_MEMBERS = 32
"""Patterns up to this size compare each member with the median of the others."""
MAX_TOLERANCE = 0.92
"""A pattern rank stays structure down to this ratio of its mates' median (or of the
pattern's learned level) when the policy's ``act`` is stricter: noise moves a stage's
ranks a few percent from window to window, a 15 % slowdown moves one 13 %."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """``(rank // block) % period == index`` over ranks ``0 .. world - 1``."""

    __pydantic_config__ = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    block: int
    period: int
    index: int

    def members(self, ranks: np.ndarray) -> np.ndarray:
        """Mask of ``ranks`` inside the pattern."""
        return np.asarray((ranks // self.block) % self.period == self.index)

    def describe(self, world: int) -> str:
        first = self.index * self.block
        span = f"{first}" if self.block == 1 else f"{first}-{first + self.block - 1}"
        cycle = self.block * self.period
        if cycle == world:
            return (
                f"ranks {span}: one contiguous block of {self.block} (1/{self.period} of the world)"
            )
        if self.block == 1:
            return f"every {self.period}th rank from {first} (a stride of {self.period})"
        return (
            f"ranks {span} of every {cycle} (a block of {self.block} repeated across "
            f"{world // cycle} replicas)"
        )


@dataclass(frozen=True, slots=True)
class Layout:
    """What a job's first judged reports showed (kept in ``JobState``)."""

    __pydantic_config__ = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    world: int
    reports: int = 0
    """Judged reports learned from (at most ``LEARN_REPORTS``)."""
    slow: tuple[int, ...] = ()
    """Ranks slow in any of them (cleared once learned)."""
    pattern: Pattern | None = None
    levels: tuple[float, ...] = ()
    """Per learned report, the pattern's median score (its slowdown's size)."""

    @property
    def learned(self) -> bool:
        return self.reports >= LEARN_REPORTS

    def level(self) -> float | None:
        return float(np.median(self.levels)) if self.levels else None


@dataclass(frozen=True, slots=True)
class PatternMatch:
    """The slow ranks of one report the job's pattern accounts for."""

    layout: Layout
    ranks: frozenset[int]
    median: float

    def evidence(self) -> dict[str, Any]:
        p = self.layout.pattern
        assert p is not None
        level = self.layout.level()
        return {
            "dimension": "unlabelled",
            "alignment": "pattern",
            "pattern": p.describe(self.layout.world),
            "block": p.block,
            "period": p.period,
            "index": p.index,
            "since": "the job's first judged reports",
            "learnedLevel": None if level is None else round(level, 4),
            "level": round(self.median, 4),
            "alignedRanks": sorted(self.ranks)[:64],
            "aligned": len(self.ranks),
        }


@dataclass(frozen=True, slots=True)
class Scored:
    """The judged scores of a report's measured ranks as two columns: rank numbers
    ascending (each once) and their scores. What ``learn`` and ``explain`` read: at
    131,072 ranks a rank -> score dict cost ~11 ms to build and each sort of its keys
    ~6 ms (2-core VM), twice a report while a pattern is learned."""

    ranks: npt.NDArray[np.int64]
    values: npt.NDArray[np.float64]

    @classmethod
    def of(cls, numbers: npt.NDArray[np.int64], values: npt.NDArray[np.float64]) -> Scored:
        """From a report's columns (report order; NaN: no usable score). A rank listed
        twice keeps its last score, as ``dict(zip(numbers, values))`` would."""
        ok = ~np.isnan(values)
        ranks, vals = numbers[ok], values[ok]
        if not _strictly_ascending(ranks):
            order = np.argsort(ranks, kind="stable")
            ranks, vals = ranks[order], vals[order]
            last = np.append(ranks[1:] != ranks[:-1], True)
            ranks, vals = ranks[last], vals[last]
        return cls(ranks, vals)

    @classmethod
    def of_dict(cls, values: Mapping[int, float]) -> Scored:
        """From rank -> score."""
        ranks = np.fromiter(values, np.int64, len(values))
        vals = np.fromiter(values.values(), np.float64, len(values))
        order = np.argsort(ranks, kind="stable")
        return cls(ranks[order], vals[order])

    def __len__(self) -> int:
        return int(self.ranks.size)


def learn(
    layout: Layout | None,
    world: int,
    below: Collection[int],
    scored: Scored,
) -> Layout:
    """``layout`` with one more judged report folded in (a new world starts anew).
    ``scored``: the measured ranks and the judged score of each."""
    if layout is None or layout.world != world:
        layout = Layout(world=world)
    if layout.learned:
        return layout
    slow = tuple(sorted(set(layout.slow) | set(below)))
    reports = layout.reports + 1
    if len(slow) > MAX_LEARN_RANKS:
        return Layout(world=world, reports=LEARN_REPORTS)
    pattern = fit(slow, scored.ranks, world)
    levels = layout.levels if pattern == layout.pattern else ()
    if pattern is not None:
        inside = scored.values[pattern.members(scored.ranks)]
        if inside.size:
            levels = (*levels, float(np.median(inside)))
    done = reports >= LEARN_REPORTS
    return Layout(world, reports, () if done else slow, pattern, levels)


def fit(slow: Sequence[int], measured: Collection[int], world: int) -> Pattern | None:
    """The tightest regular pattern holding most of ``slow``: at least two ranks, at
    least ``MIN_COVER`` of its measured ranks and of ``slow`` (the rest are ranks slow
    on their own), or None."""
    if len(slow) < 2 or world < 2:
        return None
    s = np.asarray(slow, dtype=np.int64)
    m = _sorted(measured)
    best: tuple[tuple[int, int], Pattern] | None = None
    for block in _divisors(world):
        for period in _divisors(world // block):
            if period < 2:
                continue
            cells = (s // block) % period
            counts = np.bincount(cells, minlength=period)
            index = int(np.argmax(counts))
            hit = int(counts[index])
            if hit < 2 or hit < MIN_COVER * len(slow):
                continue
            p = Pattern(block, period, index)
            size = int(np.count_nonzero(p.members(m)))
            if hit < MIN_COVER * size:
                continue
            key = (-hit, size)
            if best is None or key < best[0]:
                best = (key, p)
    return None if best is None else best[1]


def explain(
    layout: Layout | None, below: Collection[int], scored: Scored, act: float
) -> PatternMatch | None:
    """The ranks of ``below`` the job's pattern accounts for in this report, or None.
    ``scored``: the measured ranks and the judged score of each."""
    if layout is None or layout.pattern is None or not below:
        return None
    inside = layout.pattern.members(scored.ranks)
    members, scores = scored.ranks[inside], scored.values[inside]
    if members.size < 2:
        return None
    tol = tolerance(act)
    # A member in line with the others of the pattern (leave-one-out median): a rank of
    # it that slowed on its own is not, and its size says nothing of the pattern's.
    if members.size > LOO_MAX_MEMBERS:  # one rank barely moves a large pattern's median
        mates = np.full(members.size, float(np.median(scores)))
    else:
        mates = np.array([np.median(np.delete(scores, i)) for i in range(members.size)])
    keep = scores >= mates * tol
    in_line: list[int] = members[keep].tolist()
    if not in_line:
        return None
    median = float(np.median(scores[keep]))
    level = layout.level()
    if level is not None and median < level * tol:
        return None  # the pattern slowed further than it was: not the workload's size
    held = frozenset(in_line).intersection(below)
    return PatternMatch(layout, held, median) if held else None


def tolerance(act: float) -> float:
    """How far below its mates (or its learned level) a pattern's rank may be."""
    return min(act, MAX_TOLERANCE)


def _sorted(ranks: Collection[int] | np.ndarray) -> np.ndarray:
    """``ranks`` ascending, as an array: numpy's sort, not ``sorted`` and a list (the
    measured ranks of a 131,072-rank report; ``Scored.ranks`` are ascending already)."""
    if isinstance(ranks, np.ndarray):
        return ranks if _ascending(ranks) else np.sort(ranks)
    return np.sort(np.fromiter(ranks, np.int64, len(ranks)))


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _ascending(a: np.ndarray) -> bool:
    return a.size < 2 or bool((a[1:] >= a[:-1]).all())


def _strictly_ascending(a: np.ndarray) -> bool:
    return a.size < 2 or bool((a[1:] > a[:-1]).all())
