"""Structure is not hardware: does a report's slow set line up with a parallelism
dimension?

Independent hardware faults strike single GPUs and single nodes. A slow set that is a
whole slice of the job's topology — every rank of pipeline stage 3 (``pp=3``), every
data-parallel replica of a stage, the same tensor-parallel rank in every group — or
several whole groups along one dimension (two TP groups at once) is the shape of the
work: the last stage computes the loss, one replica got the long sequences. Such ranks
get a ``WorkloadStructure`` hold naming the dimension, never a hardware action.

A whole slice of a dimension that says which work a rank does (``pp``: every replica of
a stage) is structure on any node layout. Along the replica dimensions (dp, tp, cp),
whose ranks should all do the same work, a slow set that is exactly one whole node, or
one whole group on a single node (a TP group is often one node), stays a node finding:
that is what a slow node looks like too. Only reports that list every rank are read (a
bounded report leaves the cells' other members out), and only ranks that carry
``coords``.

Separate from ``attribution`` because it reads the topology, not the scores.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.rank_table import table
from pacekeeper.detector.score_report import REPLICA_DIMENSIONS, RankScores, ScoreReport

Kind = Literal["slice", "groups"]
KINDS: tuple[Kind, ...] = ("slice", "groups")


@dataclass(frozen=True, slots=True)
class Alignment:
    """The part of the slow set that lines up with ``dimension``."""

    dimension: str
    kind: Kind
    """``slice``: all ranks with one value of the dimension (``pp=3``); ``groups``: all
    ranks that differ only in the dimension (a TP group: ``dp=1,pp=2``)."""
    cells: tuple[str, ...]
    ranks: frozenset[int]

    def evidence(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "alignment": self.kind,
            "cells": list(self.cells),
            "alignedRanks": sorted(self.ranks)[:64],
            "aligned": len(self.ranks),
        }


def align(
    report: ScoreReport,
    below: Collection[int],
    measured: Collection[int] | Callable[[], Collection[int]],
) -> Alignment | None:
    """The dimension whose whole cells cover most of ``below`` (at least two ranks),
    or None. ``measured``: the ranks with a usable score (a cell is whole when every
    measured member is below), or what gives them, asked only when a report carries
    coordinates (a set of 131,072 ranks cost ~4 ms a call for a drop-in job)."""
    if report.truncated or len(below) < 2:
        return None
    ranks = report.ranks
    if not rank_columns.any_true(ranks, "coords"):
        return None  # no rank carries coordinates (a drop-in job): nothing to line up
    if callable(measured):
        measured = measured()
    block = rank_columns.coord_block(ranks)
    if block is not None:
        return _align_columns(ranks, block, below, measured)
    # Whole columns (``rank_table``), not an attribute read per rank: at 131,072 ranks a
    # loop over the rank objects cost ~30-50 ms a decision.
    t = table(ranks)
    wanted = set(measured)
    coords: dict[int, Mapping[str, int]] = {}
    nodes: dict[int, str] = {}
    for rank, c, node in zip(
        rank_columns.numbers(ranks).tolist(),
        t.objects("coords").tolist(),
        t.objects("node").tolist(),
        strict=True,
    ):
        if c and rank in wanted:
            coords[rank] = c
            nodes[rank] = node
    slow = {r for r in below if r in coords}
    if len(slow) < 2:
        return None
    dims = sorted(set.intersection(*(set(c) for c in coords.values())))
    return _best(_whole_cells(dim, kind, coords, slow, nodes) for dim in dims for kind in KINDS)


def _best(found: Iterable[Alignment | None]) -> Alignment | None:
    """The alignment covering the most slow ranks, then in the fewest cells, a slice
    before groups, then by dimension name; the first of equals (None: none found)."""
    best: tuple[tuple[int, int, int, str], Alignment] | None = None
    for a in found:
        if a is None:
            continue
        rank = (-len(a.ranks), len(a.cells), a.kind != "slice", a.dimension)
        if best is None or rank < best[0]:
            best = (rank, a)
    return None if best is None else best[1]


def _align_columns(
    ranks: Sequence[RankScores],
    block: tuple[list[str], npt.NDArray[np.int64]],
    below: Collection[int],
    measured: Collection[int],
) -> Alignment | None:
    """``align`` where every rank carries the same coordinate names (``block``: those
    names and their values): each dimension's cells numbered from the value columns,
    not a string per rank, dimension and kind (~1 s at 131,072 ranks)."""
    names, values = block
    numbers = rank_columns.numbers(ranks)
    rows = np.flatnonzero(np.isin(numbers, _array(measured)))
    listed = numbers[rows]
    slow = np.isin(listed, _array(below))
    if np.count_nonzero(slow) < 2:
        return None
    vals = values[rows]
    nodes = rank_columns.node_codes(ranks)[0][rows]

    def found(j: int, kind: Kind) -> Alignment | None:
        cols = [j] if kind == "slice" else [i for i in range(len(names)) if i != j]
        if not cols:
            return None  # one dimension: a single group, which splits nothing
        return _whole_columns(
            names[j], kind, [names[i] for i in cols], vals[:, cols], slow, nodes, listed
        )

    return _best(found(j, kind) for j in range(len(names)) for kind in KINDS)


def _whole_columns(  # noqa: PLR0917 (one dimension's cells and what they hold)
    dim: str,
    kind: Kind,
    names: list[str],
    cells_of: npt.NDArray[np.int64],
    slow: npt.NDArray[np.bool_],
    nodes: npt.NDArray[np.int64],
    listed: npt.NDArray[np.int64],
) -> Alignment | None:
    """``_whole_cells`` on columns: ``cells_of`` the values (ranks x ``names``) that
    make a rank's cell, ``nodes`` its node's number, ``listed`` its rank number."""
    code, first = rank_columns.first_seen(cells_of)
    if len(first) < 2:
        return None  # the dimension does not split this job
    count = np.bincount(code, minlength=len(first))
    whole = (count >= 2) & (np.bincount(code, weights=slow, minlength=len(first)) == count)
    inside = whole[code]
    if kind == "groups" and np.count_nonzero(whole) == 1 and np.unique(nodes[inside]).size < 2:
        return None  # one group on one node: a slow node looks the same
    covered = np.flatnonzero(inside)
    if covered.size < 2 or covered.size == len(code):
        return None  # nothing to explain, or the whole job (job-wide)
    hosts = np.unique(nodes[covered])
    work = kind == "slice" and dim not in REPLICA_DIMENSIONS
    if not work and hosts.size == 1 and inside[nodes == hosts[0]].all():
        return None  # exactly one whole node: a slow node looks the same
    cells = sorted(
        ",".join(f"{n}={v}" for n, v in zip(names, cells_of[first[c]].tolist(), strict=True))
        for c in np.flatnonzero(whole).tolist()
    )
    return Alignment(dim, kind, tuple(cells), frozenset(listed[covered].tolist()))


def _array(ranks: Collection[int]) -> npt.NDArray[np.int64]:
    return np.fromiter(ranks, np.int64, len(ranks))


def _whole_cells(
    dim: str,
    kind: Kind,
    coords: Mapping[int, Mapping[str, int]],
    slow: set[int],
    nodes: Mapping[int, str],
) -> Alignment | None:
    cells: dict[str, list[int]] = {}
    for rank, c in coords.items():
        cells.setdefault(_cell(dim, kind, c), []).append(rank)
    if len(cells) < 2:
        return None  # the dimension does not split this job
    whole = {
        name: members
        for name, members in cells.items()
        if len(members) >= 2 and all(m in slow for m in members)
    }
    if kind == "groups" and len(whole) == 1:
        (members,) = whole.values()
        if len({nodes[m] for m in members}) < 2:
            return None  # one group on one node: a slow node looks the same
    covered = frozenset(m for members in whole.values() for m in members)
    if len(covered) < 2 or len(covered) == len(coords):
        return None  # nothing to explain, or the whole job (job-wide)
    hosts = {nodes[m] for m in covered}
    work = kind == "slice" and dim not in REPLICA_DIMENSIONS
    if not work and len(hosts) == 1 and all(m in covered for m in coords if nodes[m] in hosts):
        return None  # exactly one whole node: a slow node looks the same
    return Alignment(dim, kind, tuple(sorted(whole)), covered)


def _cell(dim: str, kind: Kind, c: Mapping[str, int]) -> str:
    if kind == "slice":
        return f"{dim}={c[dim]}"
    return ",".join(f"{k}={v}" for k, v in sorted(c.items()) if k != dim)
