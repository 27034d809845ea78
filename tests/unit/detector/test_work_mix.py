"""Peer groups from the work itself when the job gives no layout: sections and the
kernels that carry the time, never a rare kernel; ranks with a layout keep theirs."""

from __future__ import annotations

import numpy as np

from pacekeeper.detector.payload import RankPayload
from pacekeeper.detector.reports import RankInfo
from pacekeeper.detector.work_mix import mix_groups, with_mix_groups


def payload(
    rank: int, sections: list[int], kernels: dict[int, float], **info: object
) -> RankPayload:
    ids = np.array(list(kernels), dtype=np.uint64)
    total = np.array(list(kernels.values()), dtype=np.float64)
    return RankPayload(
        RankInfo(rank=rank, node=f"n{rank}", **info),  # type: ignore[arg-type]
        np.array(sections, dtype=np.uint64), np.ones(len(sections)), np.ones(len(sections)),
        ids, total / 10, total,
    )  # fmt: skip


def test_a_stage_with_other_kernels_is_its_own_group() -> None:
    middle = [payload(r, [1], {10: 600.0, 11: 400.0}) for r in range(6)]
    last = [payload(r, [1], {10: 600.0, 11: 400.0, 12: 300.0}) for r in (6, 7)]
    groups = mix_groups(middle + last)
    assert len({groups[r] for r in range(6)}) == 1
    assert groups[6] == groups[7] != groups[0]
    assert groups[0].startswith("mix-")


def test_rare_kernels_and_one_shared_mix_make_no_groups() -> None:
    same = [payload(r, [1, 2], {10: 600.0, 11: 400.0}) for r in range(4)]
    # Rank 0 also ran a checkpoint kernel for 1% of its time: still the same work.
    same[0] = payload(0, [1, 2], {10: 600.0, 11: 400.0, 99: 10.0})
    assert mix_groups(same) == {}


def test_a_rank_alone_with_its_mix_and_ranks_with_a_layout_get_none() -> None:
    ranks = [payload(r, [1], {10: 1.0}) for r in range(3)]
    ranks.append(payload(3, [1, 5], {10: 1.0}))  # alone: compared with the whole job
    ranks.append(payload(4, [7], {10: 1.0}, coords={"pp": 1}))
    ranks.append(payload(5, [7], {10: 1.0}, group="given"))
    groups = mix_groups(ranks)
    assert set(groups) == {0, 1, 2}
    infos = with_mix_groups({p.info.rank: p.info for p in ranks}, ranks)
    assert infos[3].group is None
    assert infos[4].group is None and infos[4].coords == {"pp": 1}
    assert infos[5].group == "given"
    assert infos[0].group == groups[0]
