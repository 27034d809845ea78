"""What ``pacekeeper status`` shows, from what the controller keeps: one ``JobStatus`` per
job and its renderings (a rich table, a per-rank heatmap, JSON).

Separate from ``status.py`` (which reads Kubernetes or Ray) so the view is pure: it takes
the report's wire dict, the job's stored state and decision records and the cluster
state, and reads no clock, file or socket; the tests build it from plain values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pacekeeper.controller.core.policy import PolicyDocument, Thresholds
from pacekeeper.controller.core.state import ClusterState, JobState

WORST_SHOWN = 3
BUDGET_WINDOW = timedelta(hours=1)
"""Disruptive actions are counted over the last hour, as ``budgets.actionsPerHour`` is."""


@dataclass(frozen=True, slots=True)
class ShownThresholds:
    """The thresholds a job's cells are coloured by, and whose they are."""

    act: float
    recover: float
    source: str
    """``policy gpu (ConfigMap ns/name)``, or why the model's defaults are shown."""


def thresholds_of(
    document: PolicyDocument | None, where: str, policy_name: str | None
) -> ShownThresholds:
    """The thresholds of ``policy_name`` (None: the document's ``defaultPolicy``) in
    ``document``, read from ``where``; the policy model's defaults when there is no
    document or no such policy, saying so."""
    if document is not None:
        chosen = document.policy_for(policy_name)
        if chosen is not None:
            name, p = chosen
            return ShownThresholds(
                p.thresholds.act, p.thresholds.recover, f"policy {name} ({where})"
            )
        where = f"policy {policy_name} is not in {where}"
    model = Thresholds()
    return ShownThresholds(model.act, model.recover, f"the policy model's defaults ({where})")


def age_text(seconds: float | None) -> str:
    """kubectl's style: ``42s``, ``3m``, ``5h``, ``2d``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 120 * 60:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def _age_s(wire: Mapping[str, Any] | None, now: datetime) -> float | None:
    raw = (wire or {}).get("generatedAt")
    if not isinstance(raw, str):
        return None
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if at.tzinfo is None:
        return None
    return (now - at).total_seconds()


@dataclass(frozen=True, slots=True)
class WorstRank:
    rank: int
    node: str
    score: float


@dataclass(frozen=True, slots=True)
class JobStatus:
    """One job's line: what the newest report says and what the controller decided."""

    job: str
    ranks: int = 0
    sequence: int | None = None
    generated_at: str | None = None
    worst: tuple[WorstRank, ...] = ()
    verdict: str | None = None
    action: str | None = None
    reason: str | None = None
    subject: str | None = None
    mode: str | None = None
    policy: str | None = None
    decided_at: str | None = None
    marks: tuple[str, ...] = ()
    """``cordon on node-a`` (``(simulated)`` when observe or dry-run placed it)."""
    actions_last_hour: int = 0
    ladders: tuple[str, ...] = ()
    """``node-a: taintNode x1`` for each node whose ladder has started."""
    scores: tuple[float | None, ...] = field(default=(), repr=False)
    """Per rank (index = rank), the worst score of the newest report; None: not measured."""
    report_age_s: float | None = None
    """Seconds since the newest report was generated."""
    thresholds: ShownThresholds | None = None
    """What the heatmap colours by: the thresholds of the policy in force for the job."""
    policy_chosen_by: str | None = None
    """The pod-template annotation that chose the policy (``pacekeeper.dev/policy``)."""
    mode_chosen_by: str | None = None
    """The annotation that lowered the mode (``pacekeeper.dev/mode=observe``)."""
    controller_found: bool = True
    """False: no controller state was found, so no verdict can be shown."""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["worst"] = [asdict(w) for w in self.worst]
        out["scores"] = list(self.scores)
        return out

    def overrides(self) -> tuple[str, ...]:
        return tuple(a for a in (self.policy_chosen_by, self.mode_chosen_by) if a)


def _worst_scores(wire: Mapping[str, Any] | None) -> list[tuple[int, str, float | None]]:
    from pacekeeper.detector.score_report import ScoreReport

    if not wire:
        return []
    try:
        report = ScoreReport.from_wire(dict(wire))
    except ValueError:
        return []
    return [(r.rank, r.node, r.worst_score()) for r in report.ranks]


def job_status(  # noqa: PLR0917 - one argument per source of the line
    job: str,
    wire: Mapping[str, Any] | None,
    state: JobState | None,
    records: Sequence[Mapping[str, Any]],
    cluster: ClusterState,
    now: datetime,
    *,
    policy: str | None = None,
    thresholds: ShownThresholds | None = None,
    policy_chosen_by: str | None = None,
    mode_chosen_by: str | None = None,
    controller_found: bool = True,
) -> JobStatus:
    """The job's line from its newest report ``wire``, its stored ``state`` and decision
    ``records`` (newest last) and the cluster state (marks, action stamps). ``policy``
    names the job's policy until a decision record does."""
    per_rank = _worst_scores(wire)
    measured = [(r, n, s) for r, n, s in per_rank if s is not None and not math.isnan(s)]
    worst = tuple(WorstRank(r, n, s) for r, n, s in sorted(measured, key=lambda x: x[2]))
    n_ranks = max((r for r, _, _ in per_rank), default=-1) + 1
    scores: list[float | None] = [None] * n_ranks
    for r, _, s in measured:
        scores[r] = s
    last = records[-1] if records else {}
    marks = tuple(
        f"{kind} on {node}" + (" (simulated)" if m.simulated else "")
        for node, ns in sorted(cluster.nodes.items())
        for kind, m in ns.marks.items()
        if job in m.holders
    )
    since = now - BUDGET_WINDOW
    used = sum(1 for s in cluster.stamps if s.job == job and s.at >= since)
    ladders: tuple[str, ...] = ()
    if state is not None:
        ladders = tuple(
            f"{node}: {lad.step.value if lad.step else 'started'} x{lad.attempts}"
            + (" (simulated)" if lad.simulated else "")
            for node, lad in sorted(state.ladders.items())
        )
    w = wire or {}
    return JobStatus(
        job=job,
        ranks=n_ranks,
        sequence=w.get("sequence"),
        generated_at=w.get("generatedAt"),
        worst=worst[:WORST_SHOWN],
        verdict=last.get("verdict"),
        action=last.get("action"),
        reason=last.get("reason"),
        subject=last.get("subject"),
        mode=last.get("mode"),
        policy=last.get("policy") or policy,
        decided_at=last.get("decidedAt"),
        marks=marks,
        actions_last_hour=used,
        ladders=ladders,
        scores=tuple(scores),
        report_age_s=_age_s(wire, now),
        thresholds=thresholds,
        policy_chosen_by=policy_chosen_by,
        mode_chosen_by=mode_chosen_by,
        controller_found=controller_found,
    )


def _verdict_cell(s: JobStatus) -> Text:
    if not s.controller_found:
        return Text("no controller state found", style="dim")
    if s.verdict is None:
        return Text("no decision yet", style="dim")
    style = {"act": "bold red", "undo": "green"}.get(s.verdict, "")
    text = Text(s.verdict, style=style)
    if s.action:
        text.append(f" {s.action}")
    if s.subject and s.subject != "job":
        text.append(f" {s.subject}")
    if s.mode and s.mode != "enforce":
        text.append(f" ({s.mode})", style="dim")
    return text


def _policy_cell(s: JobStatus) -> Text:
    text = Text(s.policy or "-")
    if s.thresholds is not None:
        text.append(f"\nact {s.thresholds.act:g} recover {s.thresholds.recover:g}", style="dim")
    for chosen_by in s.overrides():
        text.append(f"\nby {chosen_by}", style="cyan")
    return text


def status_table(rows: Sequence[JobStatus], title: str, caption: str | None = None) -> Table:
    t = Table(title=title, caption=caption, caption_justify="left")
    columns = ("job", "ranks", "age", "worst ranks", "verdict", "reason", "policy")
    for col in (*columns, "marks held", "budget used"):
        t.add_column(col, overflow="fold")
    for s in rows:
        worst = ", ".join(f"{w.rank}@{w.node} {w.score:.2f}" for w in s.worst) or "-"
        budget = f"{s.actions_last_hour} action(s)/h"
        if s.ladders:
            budget += "\n" + "\n".join(s.ladders)
        t.add_row(
            s.job,
            str(s.ranks),
            age_text(s.report_age_s),
            worst,
            _verdict_cell(s),
            s.reason or "-",
            _policy_cell(s),
            "\n".join(s.marks) or "-",
            budget,
        )
    return t


def heat_row(
    scores: Sequence[float | None], thresholds: ShownThresholds | None = None, width: int = 64
) -> Text:
    """One cell per rank (``width`` per line), coloured by the job's policy thresholds:
    green at the job's pace, yellow below ``recover``, red below ``act``; ``·`` not
    measured."""
    t = thresholds or thresholds_of(None, "no policy document read", None)
    text = Text()
    for i, s in enumerate(scores):
        if i and i % width == 0:
            text.append("\n")
        if s is None:
            text.append("·", style="dim")
        elif s < t.act:
            text.append("█", style="bold red")
        elif s < t.recover:
            text.append("▓", style="yellow")
        else:
            text.append("■", style="green")
    return text


def _shown(s: JobStatus) -> ShownThresholds:
    return s.thresholds or thresholds_of(None, "no policy document read", None)


def legend(t: ShownThresholds) -> Text:
    return Text(
        f"■ at pace  ▓ below {t.recover:g}  █ below {t.act:g}  · not measured  "
        f"(thresholds of {t.source})"
    )


def watch_view(rows: Sequence[JobStatus], title: str, caption: str | None = None) -> Group:
    """The table, then each job's ranks as a heatmap (the ``--watch`` screen), each with
    the thresholds it is coloured by and whose they are."""
    parts: list[Any] = [status_table(rows, title, caption)]
    for s in rows:
        t = _shown(s)
        parts.append(Text(f"{s.job}: ranks 0..{max(s.ranks - 1, 0)}", style="bold"))
        parts.append(heat_row(s.scores, t))
        parts.append(legend(t))
    return Group(*parts)


def hardware_table(memory: Mapping[str, Any], title: str) -> Table:
    """One row per remembered GPU (``hardware_views.view``'s form)."""
    t = Table(title=f"{title}: {memory.get('nodes', 0)} node(s), {memory.get('gpus', 0)} GPU(s)")
    for col in ("node", "gpu", "factor", "windows", "slow share", "slow in jobs", "last seen"):
        t.add_column(col, overflow="fold")
    for node, gpus in (memory.get("byNode") or {}).items():
        for uuid, g in gpus.items():
            factor = g.get("factor")
            slow = ", ".join(g.get("slowJobs") or ()) or "-"
            t.add_row(
                node,
                uuid,
                "-" if factor is None else f"{factor:.3f}",
                f"{g.get('windows', 0):g}",
                f"{g.get('slowShare', 0.0):.2f}",
                Text(slow, style="bold red") if g.get("slowHistory") else Text(slow),
                str(g.get("lastSeen", "-")),
            )
    return t
