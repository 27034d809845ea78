"""From per-rank payloads to the Report's mappings: names, absences, own-rank views."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacekeeper.detector.gather import describe_group
from pacekeeper.detector.payload import KeyIds, RankPayload, key_id, score_payloads
from pacekeeper.detector.reports import RankInfo

IDS = KeyIds()


def _payload(rank: int, sections: dict[str, float], kernels: dict[str, float]) -> RankPayload:
    snames, knames = list(sections), list(kernels)
    kmed = np.array([kernels[k] for k in knames], dtype=np.float64)
    return RankPayload(
        info=RankInfo(rank=rank, node=f"n{rank}"),
        section_ids=IDS.ids(snames),
        section_median_ns=np.array([sections[s] for s in snames], dtype=np.float64),
        section_individual=np.ones(len(snames)),
        kernel_ids=IDS.ids(knames),
        kernel_median_ns=kmed,
        kernel_total_ns=kmed * 10,
        gpu_individual=math.nan if not knames else 1.0,
        names={key_id(n): n for n in snames + knames},
    )


def _names(payloads: list[RankPayload]) -> dict[int, str]:
    return {k: v for p in payloads for k, v in p.names.items()}


def test_ids_are_stable_across_processes_and_distinct() -> None:
    # Pinned: every rank (any host, any PYTHONHASHSEED, any pacekeeper version in one
    # job) must compute the same id for a name.
    assert key_id("forward") == 11663934519490093811
    assert key_id("forward") != key_id("backward")
    assert IDS.ids(["forward"]).tolist() == [key_id("forward")]


def test_scores_name_sections_and_leave_out_what_is_missing() -> None:
    payloads = [
        _payload(0, {"fwd": 10.0, "bwd": 20.0}, {"gemm": 100.0}),
        _payload(1, {"fwd": 20.0}, {"gemm": 200.0}),  # never entered bwd
        _payload(5, {"fwd": math.nan, "bwd": 40.0}, {}),  # broken timing, no GPU
    ]
    scores = score_payloads(payloads, _names(payloads), relative=True, individual=True)
    assert scores.section_relative == {"fwd": {0: 1.0, 1: 0.5}, "bwd": {0: 1.0, 5: 0.5}}
    assert scores.gpu_relative == {0: 1.0, 1: 0.5}
    assert scores.gpu_individual == {0: 1.0, 1: 1.0}
    assert scores.rank_to_node == {0: "n0", 1: "n1", 5: "n5"}


def test_own_rank_view_keeps_only_that_rank() -> None:
    payloads = [_payload(0, {"fwd": 10.0}, {}), _payload(1, {"fwd": 30.0}, {})]
    scores = score_payloads(
        payloads, _names(payloads), relative=True, individual=False, only_rank=1
    )
    assert scores.section_relative == {"fwd": {1: pytest.approx(1 / 3)}}
    assert scores.section_individual == {} and scores.rank_to_node == {1: "n1"}


def test_unknown_names_fall_back_to_the_key_id() -> None:
    payloads = [_payload(0, {"fwd": 10.0}, {})]
    scores = score_payloads(payloads, {}, relative=True, individual=False)
    (name,) = scores.section_relative
    assert name == f"<key {key_id('fwd'):016x}>"


def test_process_group_without_torch_distributed_is_refused() -> None:
    with pytest.raises(ValueError, match="process_group"):
        describe_group(object())
    assert describe_group(None).group_size == 1
