"""Values of ``report_cycle``'s name bookkeeping, found by mutation (make mutation, issue
41): the section names a gathered NVRx-shaped report lists (each once, in first-seen
order, at most 4,096, the same with a few payloads or many) and the bound on the id ->
name table a receiving rank keeps."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pacekeeper.detector import report_cycle as rc
from pacekeeper.detector.payload import MAX_NAMES, RankPayload
from pacekeeper.detector.reports import RankInfo


def payload(rank: int, ids: list[int], names: dict[int, str] | None = None) -> RankPayload:
    empty = RankPayload.empty(RankInfo(rank=rank, node="n0"))
    return replace(empty, section_ids=np.array(ids, dtype=np.uint64), names=names or {})


NAMES = {1: "fwd", 2: "bwd", 3: "opt"}


def learned(payloads: list[RankPayload], seen: dict[str, None] | None = None) -> list[str]:
    got = dict(seen or {})
    rc._learn_sections(got, NAMES, payloads)
    assert all(v is None for v in got.values())
    return list(got)


def test_sections_are_learned_once_in_id_order_skipping_unnamed_ids() -> None:
    assert learned([payload(0, [3, 1]), payload(1, [1, 9])]) == ["fwd", "opt"]
    assert learned([payload(0, [2, 1])], {"opt": None}) == ["opt", "fwd", "bwd"]
    assert learned([]) == []


def test_many_payloads_give_the_same_sections_as_few() -> None:
    for n in (rc._FEW_PAYLOADS, rc._FEW_PAYLOADS + 1):
        many = [payload(r, [9, 2] if r % 2 else [3, 2]) for r in range(n)]
        assert learned(many) == ["bwd", "opt"], n


def test_at_most_max_seen_sections_are_listed() -> None:
    full = dict.fromkeys((f"s{i}" for i in range(rc._MAX_SEEN_SECTIONS - 1)), None)
    assert learned([payload(0, [1, 2, 3])], full)[-1:] == ["fwd"]
    assert len(learned([payload(0, [1, 2, 3])], full)) == rc._MAX_SEEN_SECTIONS


def test_the_name_table_is_cleared_only_past_its_bound() -> None:
    names = {i: f"k{i}" for i in range(MAX_NAMES - 1)}
    rc._learn_names(names, [payload(0, [], {MAX_NAMES: "new"})])
    assert len(names) == MAX_NAMES  # exactly at the bound: kept
    rc._learn_names(names, [payload(0, [], {MAX_NAMES + 1: "newer"})])
    assert names == {MAX_NAMES + 1: "newer"}
