"""A PNG heatmap of scores over ranks and time, with stragglers and actions marked.

matplotlib is an optional extra (``pacekeeper[plot]``) and is imported here only, with
the Agg backend (no display needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pacekeeper.controller.simulation.quality import SubjectKind, Truth
from pacekeeper.controller.simulation.runner import RunRecord

MAX_ROWS = 512
"""Rows drawn at most: larger jobs are shown per node (the worst rank of each node)."""


def heatmap(
    rec: RunRecord,
    truth: Truth,
    path: str | Path,
    title: str = "",
    time_label: str = "simulated minutes",
) -> Path:
    """Write the heatmap; returns the path. Colour: the lowest score of each rank per
    report (1.0 white/yellow, lower darker). Faulty ranks are marked on the left edge,
    their fault start with a dashed line; pacekeeper's actions (x) and would-be actions
    are drawn where and when they were decided."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scores = np.array(rec.scores).T if rec.scores else np.zeros((rec.ranks, 0))
    per_node = rec.ranks > MAX_ROWS
    group = rec.gpus_per_node if per_node else 1
    rows = -(-rec.ranks // group)
    if per_node:
        padded = np.full((rows * group, scores.shape[1]), np.nan)
        padded[: rec.ranks] = scores
        with np.errstate(all="ignore"):
            scores = np.nanmin(padded.reshape(rows, group, -1), axis=1)
    fig, ax = plt.subplots(figsize=(10, 5), dpi=110)
    t_end = rec.times_s[-1] if rec.times_s else rec.window_s
    extent = (0.0, t_end / 60.0, rows - 0.5, -0.5)
    img = ax.imshow(
        np.nan_to_num(scores, nan=1.0),
        aspect="auto",
        cmap="magma",
        vmin=max(0.0, float(np.nanmin(scores)) if scores.size else 0.0),
        vmax=1.0,
        extent=extent,
        interpolation="nearest",
    )
    fig.colorbar(img, ax=ax, label="score the policy judges by")
    for r in sorted(truth.faulty_ranks):
        y = r // group
        ax.plot([0], [y], marker=">", color="cyan", markersize=7, clip_on=False)
    if truth.start_s is not None:
        ax.axvline(truth.start_s / 60.0, color="cyan", linestyle="--", linewidth=1)
    for f in rec.ours:
        row: float = (f.id if f.kind is SubjectKind.RANK else f.id * rec.gpus_per_node) // group
        if f.kind is SubjectKind.NODE and not per_node:
            row += (rec.gpus_per_node - 1) / 2
        ax.plot(
            f.time_s / 60.0,
            row,
            marker="x" if f.disruptive else ".",
            color="lime" if f.disruptive else "deepskyblue",
            markersize=8 if f.disruptive else 4,
        )
    ax.set_xlabel(time_label)
    ax.set_ylabel("node" if per_node else "rank")
    ax.set_title(title or "scores over ranks and time (> faulty, x action, . notice)")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
