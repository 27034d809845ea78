"""A PNG heatmap of scores over ranks and time, with stragglers and actions marked.

matplotlib is an optional extra (``pacekeeper[plot]``) and is imported here only, with
the Agg backend (no display needed). docs/simulator.md, "Reading the heatmap", shows
one and says how to read it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pacekeeper.controller.core.policy import PolicyDocument, ScoreKind
from pacekeeper.controller.simulation.quality import SubjectKind, Truth
from pacekeeper.controller.simulation.runner import RunRecord

MAX_ROWS = 512
"""Rows drawn at most: larger jobs are shown per node (the worst rank of each node)."""
SECONDS_UP_TO_S = 600.0
"""Runs up to this long get a time axis in seconds, longer ones in minutes."""
MAX_ROW_TICKS = 32
"""More rows than this get ticks on a coarser integer step."""


def score_label(policy: PolicyDocument | None) -> str:
    """The colour bar's name: the score the default policy judges by (its section too)."""
    resolved = policy.policy_for(None) if policy is not None else None
    if resolved is None:
        return "worst score of each rank (1 = the job's pace)"
    name, p = resolved
    sel = p.score
    what = "worst score" if sel.kind is ScoreKind.WORST else f"{sel.kind.value} score"
    if sel.section:
        what += f" of section '{sel.section}'"
    return f"{what} (policy '{name}'; 1 = the job's pace)"


def heatmap(  # noqa: PLR0917 - one figure, drawn in one place
    rec: RunRecord,
    truth: Truth,
    path: str | Path,
    title: str = "",
    time_label: str = "simulated {unit}",
    score_name: str = "worst score of each rank (1 = the job's pace)",
) -> Path:
    """Write the heatmap; returns the path. Colour: ``score_name`` of each rank (or the
    worst rank of each node, past ``MAX_ROWS``) per report, 1.0 light, lower darker; a
    cell is one report window of one rank. Faulty ranks are marked on the left edge and
    their fault start with a dashed line; a rank decision is drawn on its row, a node
    decision as a bar over that node's rows; a job restart is a dotted line, its
    downtime grey. ``time_label`` may name ``{unit}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    scores = np.array(rec.scores).T if rec.scores else np.zeros((rec.ranks, 0))
    per_node = rec.ranks > MAX_ROWS
    group = rec.gpus_per_node if per_node else 1
    rows = -(-rec.ranks // group)
    if per_node:
        padded = np.full((rows * group, scores.shape[1]), np.nan)
        padded[: rec.ranks] = scores
        with np.errstate(all="ignore"):
            scores = np.nanmin(padded.reshape(rows, group, -1), axis=1)
    # A restart's downtime has no report: its columns stay empty (grey), so every column
    # sits over the window it scores.
    times = np.asarray(rec.times_s, dtype=np.float64)
    down = np.zeros(scores.shape[1], dtype=bool)
    if times.size > 1:
        cols = np.rint((times - times[0]) / rec.window_s).astype(np.int64)
        grid = np.full((scores.shape[0], int(cols[-1]) + 1), np.nan)
        grid[:, cols] = scores
        down = np.ones(grid.shape[1], dtype=bool)
        down[cols] = False
        scores = grid
    t_end = rec.times_s[-1] if rec.times_s else rec.window_s
    minutes = t_end > SECONDS_UP_TO_S
    scale = 60.0 if minutes else 1.0
    unit = "minutes" if minutes else "seconds"
    fig, ax = plt.subplots(figsize=(10, 5.5), dpi=110)
    # Each column spans the window it scores: (end - window, end].
    extent = (max(0.0, (t_end - rec.window_s * scores.shape[1])) / scale, t_end / scale)
    cmap = matplotlib.colormaps["magma"].with_extremes(bad="lightgrey")
    shown = np.ma.masked_array(
        np.nan_to_num(scores, nan=1.0), mask=np.broadcast_to(down, scores.shape)
    )
    img = ax.imshow(
        shown,
        aspect="auto",
        cmap=cmap,
        vmin=max(0.0, float(np.nanmin(scores)) if scores.size else 0.0),
        vmax=1.0,
        extent=(extent[0], extent[1], rows - 0.5, -0.5),
        interpolation="nearest",
    )
    fig.colorbar(img, ax=ax, label=score_name + (", worst rank per node" if per_node else ""))
    for r in sorted(truth.faulty_ranks):
        ax.plot([extent[0]], [r // group], marker=">", color="cyan", markersize=7, clip_on=False)
    if truth.start_s is not None:
        ax.axvline(truth.start_s / scale, color="cyan", linestyle="--", linewidth=1)
    for t in rec.restarts_s:
        ax.axvline(t / scale, color="grey", linestyle=":", linewidth=1.5)
    for f in rec.ours:
        colour = "lime" if f.disruptive else "deepskyblue"
        x = f.time_s / scale
        if f.kind is SubjectKind.NODE and not per_node:
            first = f.id * rec.gpus_per_node
            last = min(first + rec.gpus_per_node, rec.ranks) - 1
            ax.vlines(x, first - 0.45, last + 0.45, colors=colour, linewidth=3)
            continue
        row = f.id if f.kind is SubjectKind.RANK else f.id * rec.gpus_per_node // group
        ax.plot(
            x,
            row,
            marker="x" if f.disruptive else ".",
            color=colour,
            markersize=9 if f.disruptive else 5,
            markeredgewidth=2,
        )
    ax.yaxis.set_major_locator(MaxNLocator(nbins=min(rows, MAX_ROW_TICKS), integer=True))
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_xlabel(time_label.format(unit=unit))
    ax.set_ylabel("node" if per_node else "rank")
    ax.set_title(title or "scores over ranks and time")
    handles: list[Any] = [
        Line2D([], [], marker=">", color="cyan", linestyle="", label="faulty rank"),
        Line2D([], [], color="cyan", linestyle="--", label="fault starts"),
        Line2D([], [], marker="x", color="lime", linestyle="", label="disruptive action (rank)"),
        Line2D([], [], color="lime", linewidth=3, label="node action (bar over its ranks)"),
        Line2D([], [], marker=".", color="deepskyblue", linestyle="", label="notice (rank)"),
        Line2D([], [], color="deepskyblue", linewidth=3, label="notice or hold (node)"),
    ]
    if rec.restarts_s:
        handles.append(
            Line2D([], [], color="grey", linestyle=":", label="job restart (grey: down)")
        )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
