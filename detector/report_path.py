"""Which shape the detector's report group takes: one flat gloo group, or a tree of small ones.

A gloo group connects every member to every other when it is made (measured: a group of
k ranks adds k sockets to each member, k - 1 peers and a listener), so one group over the
job is a full mesh: N sockets on every rank, N^2 over the job. The tree keeps every
group small:

* **node groups**: the ranks of one host (torchrun's layout: global rank //
  ``LOCAL_WORLD_SIZE``), led by the host's lowest rank;
* **leader groups**: the node leaders in a heap of fan-out ``f`` (node i's parent is
  node (i - 1) // f); each leader heads one group (itself and its children) and sits in
  its parent's. The first node's leader, the job group's rank 0, is the root.

A rank then holds its host's group only (``LOCAL_WORLD_SIZE`` sockets); a leader adds two
groups of at most f + 1 (2f + 2 sockets more), whatever the job's size; a report climbs
ceil(log_f(nodes)) levels. Without ``LOCAL_WORLD_SIZE`` each rank is its own node: the
tree is over ranks. Grouping ranks that are not really on one host costs traffic across
hosts, never correctness: every rank reaches the root through exactly one path.

Every member must build the same shape, or the groups never form: the job group's rank
0 decides (``choose``) and publishes its ``Plan`` in the job's store; the others read it
there (``tree_group.agree``). This module is pure: the plan and the shape, no I/O.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

REPORT_PATH = "PACEKEEPER_REPORT_PATH"
"""``auto`` (default), ``flat`` (one gloo group over the job group) or ``tree`` (node
groups and leader groups). Read by the job group's rank 0 only: the others follow it."""

REPORT_FANOUT = "PACEKEEPER_REPORT_FANOUT"
"""Children per node leader in the leaders' tree. Default 8 (>= 2)."""

LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
"""torchrun's ranks per host: the node groups' size."""

FLAT_MAX_RANKS = 16
"""``auto`` keeps one flat group up to this many ranks (docs/detector.md, "Report path"):
there the mesh is a few sockets a rank and a job of one or two hosts gains nothing from
levels; above it the flat group's sockets and its ring of N hops (the sizes' all-gather)
grow with the job, and the scale bench's rank 0 reported faster on the tree from 16 ranks."""

DEFAULT_FANOUT = 8
MODES = ("auto", "flat", "tree")


@dataclass(frozen=True, slots=True)
class Plan:
    mode: str
    """``flat`` or ``tree`` (never ``auto``: the decision is made)."""
    per_node: int = 1
    fanout: int = DEFAULT_FANOUT

    def encode(self) -> bytes:
        return f"{self.mode}:{self.per_node}:{self.fanout}".encode()

    @classmethod
    def decode(cls, data: bytes) -> Plan:
        mode, per_node, fanout = data.decode().split(":")
        return cls(mode, int(per_node), int(fanout))


def _positive_int(env: Mapping[str, str], name: str, default: int, least: int) -> int:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: not an integer") from None
    if value < least:
        raise ValueError(f"{name}={raw!r}: must be at least {least}")
    return value


def choose(group_size: int, environ: Mapping[str, str] | None = None) -> Plan:
    """The report path for a job group of ``group_size`` ranks (raises ValueError naming
    the variable on a malformed one; callers log it and use the flat path)."""
    env = os.environ if environ is None else environ
    mode = env.get(REPORT_PATH, "auto") or "auto"
    if mode not in MODES:
        raise ValueError(f"{REPORT_PATH}={mode!r}: use one of {', '.join(MODES)}")
    per_node = _positive_int(env, LOCAL_WORLD_SIZE, 1, 1)
    fanout = _positive_int(env, REPORT_FANOUT, DEFAULT_FANOUT, 2)
    if mode == "auto":
        mode = "tree" if group_size > FLAT_MAX_RANKS else "flat"
    return Plan(mode, per_node, fanout)


@dataclass(frozen=True, slots=True)
class Shape:
    """This rank's groups in the tree (global ranks, sorted: index 0 is each group's head)."""

    node: tuple[int, ...]
    """This rank's host group (the leader first); a group of one means none is made."""
    heads: tuple[int, ...]
    """The leader group this rank heads (itself and its children); () when none."""
    under: tuple[int, ...]
    """Its parent's leader group, where it is a child; () for the root and non-leaders."""
    node_index: int
    me: int

    @property
    def leader(self) -> bool:
        return self.node[0] == self.me


def nodes_of(ranks: Sequence[int], per_node: int) -> list[tuple[int, ...]]:
    """The job group's ranks by host, in host order (global rank // ``per_node``)."""
    out: dict[int, list[int]] = {}
    for r in sorted(ranks):
        out.setdefault(r // per_node, []).append(r)
    return [tuple(v) for _, v in sorted(out.items())]


def shape(ranks: Sequence[int], me: int, plan: Plan) -> Shape:
    """Where ``me`` (a global rank in ``ranks``) sits in the tree ``plan`` describes."""
    nodes = nodes_of(ranks, plan.per_node)
    index = next(i for i, n in enumerate(nodes) if me in n)
    node = nodes[index]
    if node[0] != me:
        return Shape(node, (), (), index, me)
    f = plan.fanout
    children = range(f * index + 1, min(f * index + f, len(nodes) - 1) + 1)
    heads = (me, *(nodes[c][0] for c in children)) if children else ()
    under: tuple[int, ...] = ()
    if index > 0:
        parent = (index - 1) // f
        siblings = range(f * parent + 1, min(f * parent + f, len(nodes) - 1) + 1)
        under = (nodes[parent][0], *(nodes[c][0] for c in siblings))
    return Shape(node, heads, under, index, me)


def depth(nodes: int, fanout: int) -> int:
    """Hops from the deepest leader to the root in a heap of ``nodes`` leaders."""
    hops, last = 0, nodes - 1
    while last > 0:
        last = (last - 1) // fanout
        hops += 1
    return hops
