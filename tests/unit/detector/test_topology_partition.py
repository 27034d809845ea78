"""The pure part of topology discovery: which groups are parallel dimensions, and
their names (``detector/topology_partition.py``)."""

from __future__ import annotations

import pytest

from pacekeeper.detector.topology_partition import (
    GroupSeen,
    coordinates,
    name_of,
    progression,
    tiles_world,
)


def _groups_of(me: int, layout: dict[str, tuple[int, int]], world: int, desc: bool) -> list:
    """This rank's group along each dimension of a regular layout (stride, size)."""
    out = []
    for name, (stride, size) in layout.items():
        block = stride * size
        start = me - (me % block) + me % stride
        ranks = tuple(range(start, start + block, stride))
        out.append(GroupSeen(ranks, ranks.index(me), f"mesh_{name}" if desc else None))
    return out


@pytest.mark.parametrize(
    ("ranks", "world", "regular"),
    [
        ((0, 1), 4, True),
        ((1, 3, 5, 7), 8, True),
        ((0, 4), 8, True),
        ((0, 1, 2), 4, False),  # 4 ranks are not tiled by groups of 3
        ((0, 1, 3), 8, False),  # not evenly spaced
        ((0, 1, 2, 3), 4, False),  # the world
        ((2,), 4, False),  # one rank
        ((0, 6), 8, False),  # the embedding group's shape: {first, last} stage
    ],
)
def test_a_group_is_a_dimension_only_when_it_tiles_the_world(
    ranks: tuple[int, ...], world: int, regular: bool
) -> None:
    assert tiles_world(ranks, world) is regular


def test_progression() -> None:
    assert progression((2, 5, 8)) == (3, 3)
    assert progression((0, 1, 3)) is None
    assert progression((4,)) is None


@pytest.mark.parametrize("me", range(16))
def test_described_groups_keep_their_names_on_every_rank(me: int) -> None:
    layout = {"pp": (8, 2), "dp": (2, 4), "tp": (1, 2)}
    got = coordinates(me, 16, _groups_of(me, layout, 16, desc=True))
    assert got == {"pp": me // 8, "dp": (me // 2) % 4, "tp": me % 2}


@pytest.mark.parametrize("me", range(16))
def test_undescribed_groups_are_named_outermost_first(me: int) -> None:
    layout = {"a": (8, 2), "b": (2, 4), "c": (1, 2)}
    got = coordinates(me, 16, _groups_of(me, layout, 16, desc=False))
    assert got == {"pp": me // 8, "dp": (me // 2) % 4, "tp": me % 2}  # DeepSpeed's grid


def test_four_undescribed_dimensions_and_names_already_taken() -> None:
    layout = {"a": (8, 2), "b": (4, 2), "c": (2, 2), "d": (1, 2)}
    assert coordinates(13, 16, _groups_of(13, layout, 16, desc=False)) == {
        "pp": 1,
        "dp": 1,
        "cp": 0,
        "tp": 1,
    }
    groups = _groups_of(5, {"a": (4, 2), "b": (1, 2)}, 8, desc=False)
    groups.append(GroupSeen((5, 7), 1, "pp"))  # a described pp: the outermost is not pp
    assert coordinates(5, 8, groups) == {"pp": 1, "dp": 1, "cp": 1}


def test_one_undescribed_dimension_is_never_a_replica() -> None:
    # Two pipelines of four stages, the stage groups contiguous: a guess of "dp" would
    # put the four stages in one peer group.
    assert coordinates(5, 8, [GroupSeen((4, 5, 6, 7), 1)]) == {"pp": 1}


def test_a_flattened_or_per_node_group_is_left_out() -> None:
    me = 5
    groups = _groups_of(me, {"dp": (2, 2), "tp": (1, 2)}, 8, desc=True)
    groups.append(GroupSeen((4, 5, 6, 7), 1, "mesh_dp_tp"))  # dp x tp flattened
    groups.append(GroupSeen((0, 1, 2, 3, 4, 5, 6, 7), 5, "default_pg"))
    assert coordinates(me, 8, groups) == {"dp": 0, "tp": 1}


def test_a_group_seen_twice_counts_once_and_keeps_a_name() -> None:
    groups = [GroupSeen((0, 2), 0), GroupSeen((0, 2), 0, "mesh_pp"), GroupSeen((0, 1), 0)]
    assert coordinates(0, 4, groups) == {"pp": 0, "dp": 0}


def test_overlapping_groups_keep_the_smaller() -> None:
    # (0, 1, 2, 3) and (0, 2, 4, 6) meet in two ranks: not two dimensions of one layout.
    groups = [GroupSeen((0, 1, 2, 3), 0, "a"), GroupSeen((0, 2, 4, 6), 0, "b"),
              GroupSeen((0, 1), 0, "tp")]  # fmt: skip
    assert coordinates(0, 8, groups) == {"tp": 0, "b": 0}


@pytest.mark.parametrize(
    ("desc", "name"),
    [("mesh_dp", "dp"), ("mesh_dp_shard", "dp_shard"), ("undefined", None),
     ("default_pg", None), ("mesh_default", None), (None, None), ("DP", "dp"),
     ("Tensor Parallel", None)],
)  # fmt: skip
def test_names_from_descriptions(desc: str | None, name: str | None) -> None:
    assert name_of(desc) == name
