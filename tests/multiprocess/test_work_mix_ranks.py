"""Four real gloo ranks, two of them timing one more section (a last pipeline stage): the
ScoreReport puts each stage in a peer group of its own, with no layout given."""

from __future__ import annotations

import pickle
from pathlib import Path

import gloo_worlds

from pacekeeper.detector.local_world import spawn_world
from pacekeeper.detector.score_report import ScoreReport, peer_key


def test_ranks_with_other_work_are_put_in_a_group_of_their_own(tmp_path: Path) -> None:
    spawn_world(gloo_worlds.stage_world, 4, str(tmp_path))
    latest = pickle.loads((tmp_path / "rank0.pkl").read_bytes())["latest"]
    assert isinstance(latest, ScoreReport)
    groups = {r.rank: r.group for r in latest.ranks}
    assert groups[0] == groups[1] and groups[2] == groups[3]
    assert groups[0] != groups[2] and all(g and g.startswith("mix-") for g in groups.values())
    assert len({peer_key(r) for r in latest.ranks}) == 2
