"""The heatmap reads as docs/simulator.md says: whole-rank ticks, marks on the rows they
concern, whole time units, a named colour bar and a legend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pacekeeper.controller.core.policy import load_policy_document
from pacekeeper.controller.simulation.plot import heatmap, score_label
from pacekeeper.controller.simulation.quality import Flag, SubjectKind, Truth
from pacekeeper.controller.simulation.runner import RunRecord


def _figure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minutes: int) -> Any:
    import matplotlib.pyplot as plt

    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)
    rec = RunRecord(16, 8, 60.0, ["node-0", "node-1"])
    for i in range(minutes):
        s = np.ones(16)
        s[11] = 0.7
        rec.times_s.append(60.0 * (i + 1))
        rec.scores.append(s)
    rec.ours = [
        Flag(180.0, SubjectKind.NODE, 1, disruptive=True),
        Flag(120.0, SubjectKind.RANK, 11),
    ]
    truth = Truth(frozenset({11}), 60.0, 8, 16, 60.0 * minutes, imbalance=False)
    heatmap(rec, truth, tmp_path / "h.png", score_name="gpuRelative score")
    return kept[0]


def test_ticks_are_whole_ranks_and_node_actions_span_the_node_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fig = _figure(tmp_path, monkeypatch, minutes=20)
    ax, bar = fig.axes
    ticks = [t for t in ax.get_yticks() if -0.5 <= t <= 15.5]
    assert ticks and all(float(t).is_integer() for t in ticks)
    (node_bar,) = [c for c in ax.collections if len(c.get_segments()) == 1]
    (x, y0), (_, y1) = node_bar.get_segments()[0]
    assert x == pytest.approx(3.0)  # minute 3
    assert sorted((y0, y1)) == pytest.approx([8 - 0.45, 15 + 0.45])  # node-1 = ranks 8..15
    rank_marks = [ln for ln in ax.lines if ln.get_marker() == "." and ln.get_ydata()[0] == 11]
    assert rank_marks  # the notice sits on rank 11's row, not between rows
    assert ax.get_xlabel() == "simulated minutes"
    assert bar.get_ylabel() == "gpuRelative score"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "faulty rank" in labels and "node action (bar over its ranks)" in labels


def test_short_runs_are_in_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = _figure(tmp_path, monkeypatch, minutes=5)
    assert fig.axes[0].get_xlabel() == "simulated seconds"


def test_the_colour_bar_names_the_policy_score_and_section() -> None:
    doc = load_policy_document(
        "policies:\n  default:\n    score: {kind: sectionRelative, section: forward}\n", "p"
    )
    assert (
        score_label(doc)
        == "sectionRelative score of section 'forward' (policy 'default'; 1 = the job's pace)"
    )


def test_a_restart_leaves_its_downtime_empty_and_every_window_over_its_own_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.pyplot as plt

    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)
    rec = RunRecord(16, 8, 60.0, ["node-0", "node-1"])
    for end in (60.0, 120.0, 180.0, 300.0, 360.0):  # down from 180 to 240 s
        rec.times_s.append(end)
        rec.scores.append(np.full(16, 0.9 if end > 200 else 1.0))
    rec.restarts_s = [180.0]
    truth = Truth(frozenset(), None, 8, 16, 360.0, imbalance=False)
    heatmap(rec, truth, tmp_path / "h.png")
    ax = kept[0].axes[0]
    (img,) = ax.get_images()
    data = img.get_array()
    assert data.shape == (16, 6)  # six windows on the clock, five reports
    assert list(np.ma.getmaskarray(data)[0]) == [False, False, False, True, False, False]
    assert img.get_extent()[:2] == pytest.approx([0.0, 360.0])
    restart_lines = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    assert [ln.get_xdata()[0] for ln in restart_lines] == [180.0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "job restart (grey: down)" in labels
