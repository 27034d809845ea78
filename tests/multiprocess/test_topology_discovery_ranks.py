"""Topology found without ``set_topology`` on real gloo ranks: from a DeviceMesh, from
plain process groups and from a Megatron-style ``parallel_state``, each rank's report
carries the same ``coords`` and ``group`` as when the job calls ``set_topology``.

With discovery switched off (``PACEKEEPER_DISCOVERY=off``) the first run's reports
carry no coordinates and every test here fails."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import discovery_worlds
import pytest

from pacekeeper.detector.local_world import spawn_world

WORLD = 8


def _run(body: Any, tmp_path: Path) -> list[dict[str, Any]]:
    spawn_world(body, WORLD, str(tmp_path))
    return [pickle.loads((tmp_path / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (discovery_worlds.mesh_world, lambda r: {"pp": r // 4, "dp": (r // 2) % 2, "tp": r % 2}),
        (discovery_worlds.groups_world, lambda r: {"pp": r // 4, "dp": (r // 2) % 2, "tp": r % 2}),
        (
            discovery_worlds.megatron_world,
            lambda r: {"pp": r // 4, "dp": (r // 2) % 2, "tp": r % 2, "cp": 0},
        ),
        (discovery_worlds.pipelining_world, lambda r: {"pp": r}),
    ],
    ids=["device-mesh", "process-groups", "megatron-parallel-state", "pipelining-stage"],
)
def test_the_layout_found_equals_what_set_topology_gives(
    body: Any, expected: Any, tmp_path: Path
) -> None:
    ranks = _run(body, tmp_path)
    for rank, result in enumerate(ranks):
        found, given = result["found"], result["given"]
        assert found["errors"] == {} and given["errors"] == {}, (rank, result)
        assert given["coords"] == expected(rank), (rank, given)
        assert (found["coords"], found["group"]) == (given["coords"], given["group"]), rank
