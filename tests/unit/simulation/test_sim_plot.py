"""The heatmap is written for small jobs (per rank) and large ones (per node)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacekeeper.controller.simulation.plot import MAX_ROWS, heatmap
from pacekeeper.controller.simulation.quality import Flag, SubjectKind, Truth
from pacekeeper.controller.simulation.runner import RunRecord


@pytest.mark.parametrize("ranks", [16, MAX_ROWS + 8])
def test_heatmap_writes_a_png_with_faults_and_actions_marked(tmp_path: Path, ranks: int) -> None:
    rec = RunRecord(ranks, 8, 60.0, [f"node-{i:05d}" for i in range(-(-ranks // 8))])
    for i in range(4):
        s = np.ones(ranks)
        s[3] = 0.8 if i >= 2 else 1.0
        s[5] = np.nan
        rec.times_s.append(60.0 * (i + 1))
        rec.scores.append(s)
    rec.ours = [Flag(180.0, SubjectKind.NODE, 0, disruptive=True), Flag(240.0, SubjectKind.RANK, 3)]
    truth = Truth(frozenset({3}), 120.0, 8, ranks, 240.0, imbalance=False)
    out = heatmap(rec, truth, tmp_path / "h.png", title="t")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
