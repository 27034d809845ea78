"""The detector's report group as a tree of small gloo groups (``report_path`` draws it).

``TreeGroup`` offers ``OwnGlooGroup``'s four collectives over the whole job group, run
level by level: up (node group, then the leader group this rank heads, then its
parent's) for gathers and maxima, down (parent's, own, node) for broadcasts. Each level
is an ``OwnGlooGroup`` with the detector's timeout; a level that fails raises, and the
caller (``report_group``) closes every group of this rank, so its peers' next call on
them fails at once, as the flat group does.

In the four collectives, what travels up is each rank's object pickled once, tagged
with its group rank: heads pass the bytes on without unpickling them, and only the rank
that keeps the result decodes it. ``score_at_leaders`` instead has each node leader work
on its host's objects and each head combine what its children send (scoring on the
leaders, ``host_scores``). The groups are made once, at the first report collective (``make``), each
rank first the group it heads, then its parent's: a head waits only for ranks below it,
so creation never waits in a cycle.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from . import report_path
from .own_gloo import OwnGlooGroup
from .report_path import Plan, Shape

logger = logging.getLogger(__name__)

PLAN_KEY = "report-path-plan"

made: Counter[str] = Counter()
"""The report groups this process made, by shape (``flat``, ``tree``): which path its
reports took (the tests of both paths read it on every rank)."""


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def agree(ranks: Sequence[int], me: int, key_prefix: str, timeout_s: float) -> Plan:
    """The plan of the job group's rank 0, read by every member from the job's store.

    Rank 0 reads the environment (a malformed variable is logged and gives the flat
    path); the others follow it, so a variable set on some ranks only cannot split the
    job into ranks waiting on different groups."""
    dist = _dist()
    store = dist.PrefixStore(key_prefix, dist.distributed_c10d._get_default_store())
    if me == min(ranks):
        try:
            plan = report_path.choose(len(ranks))
        except ValueError as exc:
            logger.error("report path: %s; using the flat group", exc)
            plan = Plan("flat")
        store.set(PLAN_KEY, plan.encode().decode())
        return plan
    store.wait([PLAN_KEY], timedelta(seconds=timeout_s))
    return Plan.decode(bytes(store.get(PLAN_KEY)))


def make(
    ranks: Sequence[int], me: int, timeout_s: float, key_prefix: str
) -> OwnGlooGroup | TreeGroup:
    """The detector's report group over ``ranks``: flat or a tree, as rank 0's plan says."""
    plan = agree(ranks, me, key_prefix, timeout_s)
    group: OwnGlooGroup | TreeGroup
    if plan.mode == "flat":
        group = OwnGlooGroup(ranks, me, timeout_s, key_prefix)
    else:
        group = TreeGroup(ranks, me, timeout_s, key_prefix, plan)
    made[plan.mode] += 1
    return group


class TreeGroup:
    """The job group's ranks reached through node groups and a heap of leader groups."""

    def __init__(
        self, ranks: Sequence[int], global_rank: int, timeout_s: float, prefix: str, plan: Plan
    ) -> None:
        self.ranks = tuple(sorted(ranks))
        self.rank = self.ranks.index(global_rank)
        self.size = len(self.ranks)
        self.plan = plan
        self.shape: Shape = report_path.shape(self.ranks, global_rank, plan)
        s = self.shape
        self.node: OwnGlooGroup | None = None
        self.heads: OwnGlooGroup | None = None
        self.under: OwnGlooGroup | None = None
        try:
            if len(s.node) > 1:
                self.node = OwnGlooGroup(
                    s.node, global_rank, timeout_s, f"{prefix}node/{s.node[0]}/"
                )
            if s.heads:
                self.heads = OwnGlooGroup(
                    s.heads, global_rank, timeout_s, f"{prefix}lead/{s.heads[0]}/"
                )
            if s.under:
                self.under = OwnGlooGroup(
                    s.under, global_rank, timeout_s, f"{prefix}lead/{s.under[0]}/"
                )
        except Exception:
            self.close()
            raise

    @property
    def levels(self) -> tuple[OwnGlooGroup, ...]:
        """This rank's groups, bottom up."""
        return tuple(g for g in (self.node, self.heads, self.under) if g is not None)

    # --- collectives (OwnGlooGroup's, over the whole tree) ---------------------------------

    def gather_to_first(self, obj: Any) -> list[Any] | None:
        items = self._up([(self.rank, pickle.dumps(obj))], _concat)
        if items is None:
            return None
        return [pickle.loads(data) for _, data in sorted(items)]

    def all_gather(self, obj: Any) -> list[Any]:
        items = self._up([(self.rank, pickle.dumps(obj))], _concat)
        blobs = self._down(None if items is None else [data for _, data in sorted(items)])
        return [pickle.loads(data) for data in blobs]

    def broadcast_from_first(self, obj: Any) -> Any:
        return self._down(obj if self.rank == 0 else None)

    def all_reduce_max(self, value: float) -> float:
        top = self._up(value, max)
        return float(self._down(top))

    def score_at_leaders(
        self,
        obj: Any,
        summarize: Callable[[list[Any]], Any],
        merge: Callable[[list[Any]], Any],
        score: Callable[[list[Any], Any], Any],
        join: Callable[[list[Any]], Any],
        *,
        to_root: bool,
    ) -> Any:
        """Each node leader works on its host's objects; only its result climbs further.

        Members send ``obj`` to their node leader. Each leader ``summarize``s its host's
        objects; the summaries ``merge`` up the leaders' tree into the root's, which comes
        back down to every leader, and each leader ``score``s its host's objects against
        it (``host_scores``: scoring where the data is). ``to_root``: the hosts' results
        climb to the root, each leader ``join``ing its children's with its own, and the
        root gets the whole job's (every other rank None); otherwise each leader hands its
        host's result to its members, and every rank gets its own host's. No rank holds
        another host's objects.
        """
        mine = [obj] if self.node is None else self.node.gather_to_first(obj)
        if mine is None:  # a member: its leader does the rest
            if to_root:
                return None
            assert self.node is not None
            return self.node.broadcast_from_first(None)
        summary = self._leaders_up(summarize(mine), merge)
        refs = self._leaders_down(summary)
        part = score(mine, refs)
        if not to_root:
            if self.node is not None:
                self.node.broadcast_from_first(part)
            return part
        return self._leaders_up(part, join)

    def close(self) -> None:
        """End this rank's groups (their peers' next call on them fails at once)."""
        for g in (self.under, self.heads, self.node):
            if g is not None:
                with contextlib.suppress(Exception):
                    g.close()

    # --- levels ---------------------------------------------------------------------------

    def _up(self, value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        """``value`` combined over this rank's subtree; None where it went up to a parent."""
        for group in (self.node, self.heads, self.under):
            if group is None:
                continue
            got = group.gather_to_first(value)
            if got is None:  # sent to this group's head: the rest is above us
                return None
            value = combine(got)
        return value

    def _leaders_up(self, value: Any, combine: Callable[[list[Any]], Any]) -> Any:
        """``_up`` from a node leader: its leader groups only."""
        for group in (self.heads, self.under):
            if group is None:
                continue
            got = group.gather_to_first(value)
            if got is None:
                return None
            value = combine(got)
        return value

    def _leaders_down(self, value: Any) -> Any:
        """``_down`` to a node leader: its leader groups only."""
        for group in (self.under, self.heads):
            if group is not None:
                value = group.broadcast_from_first(value)
        return value

    def _down(self, value: Any) -> Any:
        """The root's ``value`` on every rank: from the parent, on to children and host."""
        for group in (self.under, self.heads, self.node):
            if group is not None:
                value = group.broadcast_from_first(value)
        return value


def _concat(parts: list[list[Any]]) -> list[Any]:
    return [item for part in parts for item in part]
