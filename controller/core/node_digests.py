"""A report's nodes as the digest counts them, made one at a time when asked.

A 131,072-rank report names 16,384 nodes, and a decision asks after a handful (the
slow ones, the ones its ladders are on). Building a ``NodeDigest`` and its list for
every node cost more than the rest of the digest on the 2-core VM: 32,768 objects
that live as long as the digest wake the garbage collector dozens of times a report,
and each collection walks the young columns of the report too. So the counts stay in
arrays and a node's ``NodeDigest`` is made on first access (and kept: a bounded
report's unlisted ranks are folded into the ones it names, ``attribution``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from pacekeeper.controller.core.ids import NodeName


@dataclass(slots=True)
class NodeDigest:
    ranks: int = 0
    measured: int = 0
    unknown: int = 0
    below: list[int] = field(default_factory=list)
    min_score: float | None = None


class NodeDigests(Mapping[NodeName, NodeDigest]):
    """Node -> ``NodeDigest``, in the order the report first names the nodes (then any
    added later)."""

    __slots__ = ("_below", "_index", "_made", "_measured", "_min", "_ranks")

    def __init__(
        self,
        index: Mapping[str, int],
        ranks: list[int],
        measured: list[int],
        min_score: list[float],
        below: Mapping[int, list[int]],
    ) -> None:
        """``index``: node -> its number; per number, its listed ranks, its measured
        ones, their lowest score (any value where none is measured) and its ranks below
        ``act`` (numbers without any may be absent)."""
        self._index = index
        self._ranks = ranks
        self._measured = measured
        self._min = min_score
        self._below = below
        self._made: dict[str, NodeDigest] = {}

    def __getitem__(self, node: str) -> NodeDigest:
        nd = self._made.get(node)
        if nd is None:
            i = self._index[node]  # KeyError: not a node of the report
            n, m = self._ranks[i], self._measured[i]
            below = list(self._below.get(i, ()))
            nd = self._made[node] = NodeDigest(n, m, n - m, below, self._min[i] if m else None)
        return nd

    def get(self, node: str, default: NodeDigest | None = None) -> NodeDigest | None:  # type: ignore[override]
        """``Mapping.get`` without raising and catching a ``KeyError`` for a node the
        report does not name (a bounded report's ~2,500 summarised nodes, each asked)."""
        nd = self._made.get(node)
        if nd is not None:
            return nd
        return self[node] if node in self._index else default

    def __setitem__(self, node: str, nd: NodeDigest) -> None:
        self._made[node] = nd

    def __contains__(self, node: object) -> bool:
        return node in self._index or node in self._made

    def __len__(self) -> int:
        return len(self._index) + sum(1 for n in self._made if n not in self._index)

    def __iter__(self) -> Iterator[NodeName]:
        yield from cast(Iterator[NodeName], iter(self._index))
        yield from (NodeName(n) for n in self._made if n not in self._index)
