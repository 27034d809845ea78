"""The docs' table of a sampled-space run (docs/detection-quality.md, "Sampled noise
and faults"): one policy's noise family x fault cells beside NVRx's rules on the same
runs, and issue #38's verdicts (``sampled_goals``) under it.

Reads a results file of ``bench/detection_quality.py`` (its own run, or ``--merge`` of
chunks) and rebuilds the cells from its per-run results, so the table never depends on
how an older file summed them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pacekeeper.controller.core.policy import PolicyDocument
from pacekeeper.controller.simulation import sampled_goals
from pacekeeper.controller.simulation.policy_runs import NVRX_PREFIX
from pacekeeper.controller.simulation.sampled_quality import (
    ACT_WITHIN_S,
    FIND_WITHIN_S,
    Cell,
    RunResult,
    binomial_bounds,
    cells,
)

ANY = sampled_goals.ANY
PREFERRED = "enforce-recommended"


def budget_of(doc: PolicyDocument) -> float | None:
    """The default policy's ``safety.falseDisruptionsPerGpuDay`` (None: not stated)."""
    return doc.policies[doc.default_policy].safety.false_disruptions_per_gpu_day


def pick_detector(results: Mapping[str, object], detector: str | None) -> str:
    """``detector``, else the recommended policy when judged, else the first policy."""
    names = [n for n in _policies(results) if not n.startswith(NVRX_PREFIX)]
    if detector is not None:
        if detector not in names:
            raise ValueError(f"detector {detector!r} is not in this file: {', '.join(names)}")
        return detector
    if not names:
        raise ValueError("this file judged no policy, only NVRx's rules")
    return PREFERRED if PREFERRED in names else names[0]


def _policies(results: Mapping[str, object]) -> list[str]:
    runs = results["runs_"]
    assert isinstance(runs, list)
    return list(dict.fromkeys(str(r["detector"]) for r in runs))


def _num(v: float | None, spec: str) -> str:
    if v is None:
        return "-"
    return "never" if math.isinf(v) else format(v, spec)


def _acted(c: Cell) -> str:
    if not c.faulty_runs:
        return "-"
    lo, hi = binomial_bounds(c.acted, c.faulty_runs)
    return f"{c.acted}/{c.faulty_runs} ({lo:.2f}-{hi:.2f})"


def _nvrx(c: Cell | None) -> str:
    if c is None:
        return "-"
    acted = "-" if c.recall_acted is None else f"{c.recall_acted:.2f}"
    return f"{acted} / {c.false_disruptions}"


def _row(c: Cell, nvrx: list[dict[tuple[str, str], Cell]]) -> str:
    key = (c.family, c.fault)
    found = "-" if c.faulty_runs == 0 else f"{c.found}/{c.faulty_runs}"
    act = "-" if c.median_act_s is None else f"{c.median_act_s:.0f} / {_num(c.max_act_s, '.0f')}"
    cols = [
        c.family, c.fault, str(c.runs), f"{c.gpu_days:,.0f}", found, _acted(c), act,
        str(c.false_disruptions), f"{c.rate:.1e}", _num(c.upper95, ".1e"),
        *(_nvrx(n.get(key)) for n in nvrx),
    ]  # fmt: skip
    return "| " + " | ".join(cols) + " |"


def table(
    results: Mapping[str, object], detector: str | None = None
) -> tuple[str, dict[str, object]]:
    """The markdown and the verdicts' JSON for ``detector`` (``pick_detector``)."""
    name = pick_detector(results, detector)
    raw = results["runs_"]
    assert isinstance(raw, list)
    rs = [RunResult.from_dict(r) for r in raw]
    every = cells(rs, any_label=ANY)
    mine = [c for c in every if c.detector == name]
    rules = [n for n in _policies(results) if n.startswith(NVRX_PREFIX)]
    nvrx = [{(c.family, c.fault): c for c in every if c.detector == r} for r in rules]
    policies = results.get("policies", {})
    assert isinstance(policies, dict)
    budget = budget_of(PolicyDocument.model_validate(policies[name])) if name in policies else None
    ranks = int(str(results["ranks"]))
    verdicts = sampled_goals.judge(mine, budget, ranks)
    verdicts.append(sampled_goals.overall(verdicts))
    head = [
        "family", "fault", "runs", "GPU-days", f"found ≤ {FIND_WITHIN_S / 60:.0f} min",
        f"acted ≤ {ACT_WITHIN_S / 60:.0f} min (95 %)", "act s median / max",
        "false disr.", "per GPU-day", "upper 95 %",
        *(f"{r.removeprefix(NVRX_PREFIX)} acted / false" for r in rules),
    ]  # fmt: skip
    total = next(c for c in mine if c.family == ANY and c.fault == ANY)
    lines = [
        f"**{name}**: {total.runs} sampled scenarios (space `{results['space']}`), "
        f"{ranks:,} ranks, {float(str(results['durationS'])) / 60:.0f} min each, "
        f"{total.gpu_days:,.0f} GPU-days; NVRx's rules on the same runs (recall acted "
        f"≤ {ACT_WITHIN_S / 60:.0f} min / false stops). Upper 95 %: exact one-sided Poisson "
        "(Garwood) bound per GPU-day; recall intervals: Clopper-Pearson 95 %; time to act "
        "over the runs acted on (late ones too).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *(_row(c, nvrx) for c in mine),
        "",
        *(f"- {v.line()}" for v in verdicts),
    ]
    doc: dict[str, object] = {"detector": name, "budgetPerGpuDay": budget,
           "verdicts": [v.to_dict() for v in verdicts]}  # fmt: skip
    return "\n".join(lines), doc
