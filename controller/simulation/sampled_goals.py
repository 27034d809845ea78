"""Issue #38's bar over the sampled space, judged from one policy's cells.

(a) no disruptive action on a healthy rank or node in the whole space, and the exact
one-sided upper 95% Poisson bound of that rate (``sampled_quality.poisson_upper``) at
or below the policy's own ``safety.falseDisruptionsPerGpuDay``: zero events alone
is not enough when the space is too small for its bound to reach the budget;
(b) recall, a point estimate over the faulty runs of a fault (its Clopper-Pearson 95%
interval shown beside it): sustained GPU slowdowns found within ``FIND_WITHIN_S`` *and*
acted on within ``ACT_WITHIN_S``, over the whole space and again in each drift family on
its own; bursts and one rank's host stall acted on within ``ACT_WITHIN_S``;
and the scope the figures need to count: ranks, GPU-days, seeds in every cell.
"""

from __future__ import annotations

from dataclasses import dataclass

from pacekeeper.controller.simulation.sampled_quality import Cell, binomial_bounds

ANY = "all"
MIN_RANKS = 1024
MIN_GPU_DAYS = 10000.0
MIN_SEEDS = 3


@dataclass(frozen=True, slots=True)
class RecallGoal:
    name: str
    fault: str
    min_recall: float
    needs_found: bool = False
    """Found in time as well as acted on in time (else acted on in time)."""
    families: tuple[str, ...] = ()
    """Families whose cells must meet the bar on their own too."""


GOALS = (
    RecallGoal("sustained GPU slowdown 10-30%", "slow-gpu", 0.95, True, ("drift", "fast-drift")),
    RecallGoal("intermittent 30% bursts", "bursts", 0.9),
    RecallGoal("one rank's host stall 0.2-0.4 s a step", "host-stall", 0.9),
)


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    passed: bool
    text: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.text}"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "passed": self.passed, "text": self.text}


def _recall(c: Cell, goal: RecallGoal) -> tuple[int, int]:
    return (c.found_and_acted if goal.needs_found else c.acted), c.faulty_runs


def _recall_text(hit: int, n: int) -> str:
    lo, hi = binomial_bounds(hit, n)
    return f"{hit}/{n} = {hit / n:.3f} (95% {lo:.3f}-{hi:.3f})"


def judge_recall(goal: RecallGoal, by: dict[tuple[str, str], Cell]) -> Verdict:
    parts, ok = [], True
    for fam in (ANY, *goal.families):
        c = by.get((fam, goal.fault))
        if c is None or c.faulty_runs == 0:
            parts.append(f"{fam}: no runs")
            ok = False
            continue
        hit, n = _recall(c, goal)
        ok &= hit / n >= goal.min_recall
        parts.append(f"{'whole space' if fam == ANY else fam} {_recall_text(hit, n)}")
    what = "found <= 5 min and acted <= 10 min" if goal.needs_found else "acted <= 10 min"
    return Verdict(
        f"(b) {goal.name}", ok, f"{what}, >= {goal.min_recall:.2f} needed: " + "; ".join(parts)
    )


def judge_false(total: Cell, budget: float | None) -> Verdict:
    up = total.upper95
    if budget is None:
        return Verdict(
            "(a) false disruptions", False,
            f"{total.false_disruptions} in {total.gpu_days:,.0f} GPU-days; the policy states "
            "no safety.falseDisruptionsPerGpuDay to hold them to",
        )  # fmt: skip
    ok = total.false_disruptions == 0 and up is not None and up <= budget
    return Verdict(
        "(a) false disruptions", ok,
        f"{total.false_disruptions} in {total.gpu_days:,.0f} GPU-days, 0 needed; upper 95% "
        f"(exact Poisson) {up if up is not None else float('nan'):.2e}/GPU-day, at most "
        f"{budget:.2e} needed (safety.falseDisruptionsPerGpuDay)",
    )  # fmt: skip


def judge_scope(cells: list[Cell], ranks: int) -> Verdict:
    total = next(c for c in cells if c.family == ANY and c.fault == ANY)
    seeds = min((c.runs for c in cells if ANY not in (c.family, c.fault)), default=0)
    ok = ranks >= MIN_RANKS and total.gpu_days >= MIN_GPU_DAYS and seeds >= MIN_SEEDS
    return Verdict(
        "scope", ok,
        f"{ranks:,} ranks (>= {MIN_RANKS:,}), {total.gpu_days:,.0f} GPU-days "
        f"(>= {MIN_GPU_DAYS:,.0f}), {seeds} seeds in the thinnest cell (>= {MIN_SEEDS})",
    )  # fmt: skip


def judge(cells: list[Cell], budget: float | None, ranks: int) -> list[Verdict]:
    """Scope, (a) and each (b) goal for one detector's cells (``sampled_quality.cells``)."""
    if len({c.detector for c in cells}) != 1:
        raise ValueError("judge: the cells of one detector only")
    by = {(c.family, c.fault): c for c in cells}
    if (ANY, ANY) not in by:
        raise ValueError("judge: the cells need their whole-space total (family and fault 'all')")
    return [
        judge_scope(cells, ranks),
        judge_false(by[(ANY, ANY)], budget),
        *(judge_recall(g, by) for g in GOALS),
    ]


def overall(verdicts: list[Verdict]) -> Verdict:
    failed = [v.name for v in verdicts if not v.passed]
    return Verdict(
        "issue #38 over the sampled space", not failed,
        "every part met" if not failed else "not met: " + ", ".join(failed),
    )  # fmt: skip
