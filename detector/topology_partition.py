"""Which of this rank's process groups are parallel dimensions, and what to call them.

Pure: the inputs are what c10d knows on this rank (each group it belongs to: its
member ranks and its description), the output is this rank's coordinates. A rank
only sees the groups it is a member of, so the test is local: a group is a parallel
dimension when its members are an arithmetic progression (``start + k * stride``)
whose translates tile the world (the world size is a multiple of ``stride * size``),
neither a single rank nor the whole world. Every rank of a regular layout sees its
own group of each dimension and reaches the same verdict. Two dimensions meet in this
rank only; a group that holds another found group (a flattened ``dp_tp``, a
per-node group around a tensor-parallel pair) is a combination, not a dimension, and
is left out.

Names: a described group (``new_group(..., group_desc=...)``; a DeviceMesh names its
dimensions' groups ``mesh_<dim>``) keeps its description's name. Undescribed groups
are named by convention from the outermost (largest stride) in: ``pp``, ``dp``,
``cp``, ``tp`` (three: ``pp``, ``dp``, ``tp``), the layout Megatron-Core, DeepSpeed
and torchtitan share (pipeline outermost, tensor-parallel innermost). The outermost
is never a replica dimension (``score_report.REPLICA_DIMENSIONS``), so a wrong guess
splits peers more finely than needed, and never puts two pipeline stages of that
layout in one peer group.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

NAME = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
"""A dimension name (``topology.topology_of`` checks names with the same pattern)."""

CONVENTION = ("pp", "dp", "cp", "tp")
"""Names of undescribed dimensions, outermost first (docs/detector.md, "Topology
without set_topology")."""

_NOT_NAMES = frozenset({"undefined", "default_pg", "default", "mesh_default"})
"""Descriptions torch gives groups nobody named."""


@dataclass(frozen=True, slots=True)
class GroupSeen:
    """One process group this rank belongs to, as c10d describes it."""

    ranks: tuple[int, ...]
    """Global ranks of its members, ascending."""
    group_rank: int
    """This rank's rank in it (what ``set_topology(groups=...)`` reads)."""
    desc: str | None = None


@dataclass(frozen=True, slots=True)
class Dimension:
    name: str | None
    stride: int
    size: int
    coord: int
    ranks: frozenset[int]


def progression(ranks: Sequence[int]) -> tuple[int, int] | None:
    """``(stride, size)`` when ``ranks`` (ascending) are evenly spaced, else None."""
    if len(ranks) < 2:
        return None
    stride = ranks[1] - ranks[0]
    if stride <= 0 or any(b - a != stride for a, b in itertools.pairwise(ranks)):
        return None
    return stride, len(ranks)


def tiles_world(ranks: Sequence[int], world: int) -> bool:
    """Whether translates of this evenly spaced group partition ``range(world)``: within
    each block of ``stride * size`` ranks, ``stride`` groups interleave."""
    found = progression(ranks)
    if found is None:
        return False
    stride, size = found
    block = stride * size
    return 1 < size < world and world % block == 0 and ranks[-1] < world


def name_of(desc: str | None) -> str | None:
    """The dimension name a group's description gives, or None (an undescribed group)."""
    if not desc:
        return None
    text = desc.strip().lower()
    if text in _NOT_NAMES:
        return None
    if text.startswith("mesh_"):
        text = text[len("mesh_") :]
    return text if NAME.match(text) and text not in _NOT_NAMES else None


def dimensions(me: int, world: int, groups: Sequence[GroupSeen]) -> list[Dimension]:
    """The regular, mutually orthogonal groups among ``groups``, smallest first."""
    candidates: dict[frozenset[int], Dimension] = {}
    for g in groups:
        if me not in g.ranks or not tiles_world(g.ranks, world):
            continue
        members = frozenset(g.ranks)
        stride, size = progression(g.ranks) or (0, 0)
        seen = candidates.get(members)
        name = name_of(g.desc)
        if seen is None or (seen.name is None and name is not None):
            candidates[members] = Dimension(name, stride, size, g.group_rank, members)
    kept: list[Dimension] = []
    product = 1
    for d in sorted(candidates.values(), key=lambda d: (d.size, d.stride, d.name or "")):
        if any(len(d.ranks & k.ranks) != 1 for k in kept):
            continue  # holds a found dimension (a combination of them), or overlaps one
        if world % (product * d.size):
            continue
        kept.append(d)
        product *= d.size
    return kept


def named(dims: Sequence[Dimension], taken: frozenset[str] = frozenset()) -> dict[str, int]:
    """Coordinates by name: described dimensions under their names (the first of two
    with one name wins), undescribed ones by ``CONVENTION`` from the outermost in."""
    coords: dict[str, int] = {}
    for d in dims:
        if d.name is not None and d.name not in coords and d.name not in taken:
            coords[d.name] = d.coord
    unnamed = sorted((d for d in dims if d.name is None), key=lambda d: -d.stride)
    used = taken | coords.keys()
    for i, (d, guess) in enumerate(zip(unnamed, convention(len(unnamed)), strict=True)):
        name = (
            guess
            if guess not in used
            else next((n for n in CONVENTION if n not in used), f"dim{i}")
        )
        used = used | {name}
        coords[name] = d.coord
    return coords


def convention(k: int) -> tuple[str, ...]:
    """Names of ``k`` undescribed dimensions, outermost first: the layouts jobs use with
    that many (``pp``; ``pp, dp``; ``pp, dp, tp``, context parallelism being the
    rarest; then all four, then ``dim4``...)."""
    names = {0: (), 1: ("pp",), 2: ("pp", "dp"), 3: ("pp", "dp", "tp")}.get(k, CONVENTION)
    return names + tuple(f"dim{i}" for i in range(len(names), k))


def coordinates(me: int, world: int, groups: Sequence[GroupSeen]) -> dict[str, int]:
    """This rank's coordinates from the groups it belongs to (empty: no layout seen)."""
    return named(dimensions(me, world, groups))
