"""The confirmation probe through runtime control: a document asking for it makes every
rank run it once per id at the same report, and that report carries every rank's
result (issue 18); two real gloo ranks, the document read by rank 0 only."""

from __future__ import annotations

import pickle

import control_ranks
import pytest

from pacekeeper.detector.local_world import spawn_world

pytestmark = pytest.mark.timeout(120)


def test_every_rank_probes_once_per_request_in_the_same_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spawn_world(control_ranks.probe_world, 2, str(tmp_path))
    out = pickle.loads((tmp_path / "rank0.pkl").read_bytes())
    other = pickle.loads((tmp_path / "rank1.pkl").read_bytes())
    assert out["errors"] == {} and other["errors"] == {}
    none, first, again, second = out["seen"]
    assert none == {0: None, 1: None}
    assert {r: (p.id, p.device) for r, p in first.items()} == {0: ("p1", "cpu"), 1: ("p1", "cpu")}
    assert all(p.cpu_gflops and p.cpu_gflops > 0 and p.elapsed_ms > 0 for p in first.values())
    assert again == {0: None, 1: None}  # the same request is answered once
    assert {r: p.id for r, p in second.items()} == {0: "p2", 1: "p2"}
