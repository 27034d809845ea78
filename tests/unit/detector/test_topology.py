"""Peer groups from the job's layout: ``Detector.set_topology`` in each of its forms,
in a real one-rank gloo world, and the coordinates in the ScoreReport."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as dist

from pacekeeper.detector import Detector
from pacekeeper.detector.topology import topology_of


@pytest.fixture
def one_rank_world(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_coords_are_checked_and_errors_name_the_argument() -> None:
    assert topology_of(coords={"pp": 3, "dp": 1}).coords == {"dp": 1, "pp": 3}
    with pytest.raises(ValueError, match=r"coords: dimension name 'DP'"):
        topology_of(coords={"DP": 1})
    with pytest.raises(ValueError, match=r"coords\['pp'\]: coordinate must be an int"):
        topology_of(coords={"pp": "3"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"coords\['pp'\]: coordinate -1 is out of range"):
        topology_of(coords={"pp": -1})
    with pytest.raises(ValueError, match="group: a non-empty name"):
        topology_of(group="")
    assert topology_of(group="stage-last").group == "stage-last"


def test_a_named_mesh_and_process_groups_give_coordinates(one_rank_world: None) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("pp", "dp"))
    assert topology_of(mesh=mesh).coords == {"dp": 0, "pp": 0}
    assert topology_of(groups={"tp": dist.group.WORLD}).coords == {"tp": 0}
    with pytest.raises(ValueError, match=r"mesh\['pp'\]: 0 contradicts 2"):
        topology_of(coords={"pp": 2}, mesh=mesh)
    unnamed = init_device_mesh("cpu", (1,))
    with pytest.raises(ValueError, match="mesh: give the DeviceMesh mesh_dim_names"):
        topology_of(mesh=unnamed)


def test_the_score_report_carries_the_ranks_group_and_coords(one_rank_world: None) -> None:
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    try:
        with pytest.raises(ValueError, match="coords"):
            Detector.set_topology(coords={"pp": -2})
        Detector.set_topology(coords={"pp": 1, "dp": 0}, group="stage-1")
        for _ in range(3):
            with Detector.detection_section("forward", profile_cuda=False):
                time.sleep(0.002)
        Detector.generate_report()
        (rank,) = Detector.latest_score_report().ranks  # type: ignore[union-attr]
        assert rank.coords == {"dp": 0, "pp": 1}
        assert rank.group == "stage-1"
    finally:
        Detector.shutdown()
    with pytest.raises(AssertionError, match="not initialized"):
        Detector.set_topology(coords={"pp": 1})
