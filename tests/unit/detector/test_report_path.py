"""The report tree's shape (``report_path``): every rank reaches the root once, groups
stay small whatever the job's size, and the plan's variables are checked."""

from __future__ import annotations

import pytest

from pacekeeper.detector import report_path
from pacekeeper.detector.report_path import Plan, choose, depth, shape


def _parent_of(ranks: list[int], plan: Plan) -> dict[int, int]:
    """Each rank's next hop towards the root, from the shapes every rank computes."""
    up: dict[int, int] = {}
    for me in ranks:
        s = shape(ranks, me, plan)
        if not s.leader:
            up[me] = s.node[0]
        elif s.under:
            up[me] = s.under[0]
        # each group names its head first, and the head's own shape agrees
        for group in (s.node, s.heads, s.under):
            if group:
                assert group == tuple(sorted(group))
    return up


@pytest.mark.parametrize(
    ("world", "per_node", "fanout"), [(8, 2, 2), (37, 4, 3), (64, 8, 8), (5, 1, 2)]
)
def test_every_rank_reaches_the_root_once(world: int, per_node: int, fanout: int) -> None:
    ranks = list(range(world))
    up = _parent_of(ranks, Plan("tree", per_node, fanout))
    assert set(up) == set(ranks) - {0}
    for r in ranks:
        hops, seen = 0, r
        while seen != 0:
            seen = up[seen]
            hops += 1
        assert hops <= 1 + depth(-(-world // per_node), fanout)


def test_groups_stay_small_at_131072_ranks() -> None:
    ranks = range(131_072)
    plan = Plan("tree", 8, 8)
    for me in (0, 1, 8, 8 * 9, 131_064, 131_071):
        s = shape(ranks, me, plan)
        assert len(s.node) == 8
        assert len(s.heads) <= 9 and len(s.under) <= 9
    assert depth(131_072 // 8, 8) == 5


def test_sub_group_ranks_are_grouped_by_their_hosts() -> None:
    s = shape([4, 5, 6, 7, 12, 13], 13, Plan("tree", 4, 2))
    assert s.node == (12, 13) and not s.leader
    lead = shape([4, 5, 6, 7, 12, 13], 12, Plan("tree", 4, 2))
    assert lead.under == (4, 12)


def test_choose_flat_small_tree_large_and_forced() -> None:
    assert choose(16, {}).mode == "flat"
    assert choose(17, {"LOCAL_WORLD_SIZE": "8"}) == Plan("tree", 8, 8)
    assert choose(4, {"PACEKEEPER_REPORT_PATH": "tree"}).mode == "tree"
    assert choose(10_000, {"PACEKEEPER_REPORT_PATH": "flat"}).mode == "flat"
    assert Plan.decode(Plan("tree", 4, 3).encode()) == Plan("tree", 4, 3)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PACEKEEPER_REPORT_PATH": "mesh"}, "PACEKEEPER_REPORT_PATH"),
        ({"PACEKEEPER_REPORT_FANOUT": "1"}, "PACEKEEPER_REPORT_FANOUT"),
        ({"LOCAL_WORLD_SIZE": "eight"}, "LOCAL_WORLD_SIZE"),
    ],
)
def test_a_malformed_variable_is_named(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        report_path.choose(8, env)
