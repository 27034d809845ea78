"""Rank bodies for the report-tree tests (run inside gloo ranks; results to pickles).

The tests start them with ``report_paths.spawn("tree", ...)``: the ranks inherit the
report path's environment (``LOCAL_WORLD_SIZE`` forms the "hosts" on one machine), and
every rank is checked to have made its report group on the tree."""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from gloo_worlds import save, step

from pacekeeper.detector import Detector, gather, report_group, tree_group
from pacekeeper.detector.own_gloo import OwnGlooGroup
from pacekeeper.detector.payload import RankPayload, key_id, score_payloads
from pacekeeper.detector.reports import RankInfo

SLOW = 5
"""The culprit of every world here (a member, not a node leader, in each layout)."""
SECTIONS = ("forward", "backward")


def sockets() -> int:
    """Sockets this process holds (the detector's groups are gloo TCP pairs)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return n


def _payload(rank: int) -> RankPayload:
    """A fixed payload: rank ``SLOW``'s backward takes 1/0.7 as long as everyone's."""
    ids = np.array([key_id(s) for s in SECTIONS], dtype=np.uint64)
    ms = np.array([10.0, 15.0 / (0.7 if rank == SLOW else 1.0)]) * 1e6
    return RankPayload(
        RankInfo(rank, f"n{rank // 2}", section_samples=16),
        ids,
        ms,
        np.array([1.0, 1.0]),
        np.zeros(0, dtype=np.uint64),
        np.zeros(0),
        np.zeros(0),
        names={int(i): s for i, s in zip(ids.tolist(), SECTIONS, strict=True)},
    )


def _run_all(group: Any, rank: int) -> dict[str, Any]:
    info = gather.describe_group(group)
    payload = _payload(rank)
    gathered = gather.gather_to_reporter(payload, info, group)
    scores = None
    if gathered is not None:
        names = {k: v for p in gathered for k, v in p.names.items()}
        scores = score_payloads(gathered, names, relative=True, individual=True)
    everyone = gather.all_gather(rank * 10, info, group)
    told = gather.broadcast_from_reporter(f"from {rank}", info, group)
    top = gather.all_reduce_max(float(rank), info, group)
    return {"scores": scores, "all_gather": everyone, "broadcast": told, "max": top}


def same_payloads_both_paths(rank: int, world_size: int, out_dir: str) -> None:
    """The four collectives over one flat group and one tree, on the same payloads."""
    ranks = range(world_size)
    before = sockets()
    flat = OwnGlooGroup(ranks, rank, 30.0, "test/flat/")
    after_flat = sockets()
    tree = tree_group.make(ranks, rank, 30.0, "test/tree/")
    after_tree = sockets()
    result = {
        "flat": _run_all(flat, rank),
        "tree": _run_all(tree, rank),
        "tree_type": type(tree).__name__,
        "flat_sockets": after_flat - before,
        "tree_sockets": after_tree - after_flat,
        "leader": isinstance(tree, tree_group.TreeGroup) and tree.shape.leader,
    }
    flat.close()
    tree.close()
    save(out_dir, rank, result)


def _step(rank: int) -> None:
    # Half the throughput: eight ranks sleeping on two busy cores overshoot by a few ms,
    # and the culprit must stay the lowest score through that noise.
    step(rank, SLOW, "backward", factor=2.0)


def detector_on_tree(rank: int, world_size: int, out_dir: str) -> None:
    """``Detector`` reporting through the tree (hosts as the test's environment says)."""
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"h{rank}")
    for _ in range(12):
        _step(rank)
    before = sockets()
    first = Detector.generate_report()
    added = sockets() - before
    for _ in range(12):
        _step(rank)
    second = Detector.generate_report()
    kinds = sorted({type(k[4]).__name__ for k in report_group._kept})
    save(
        out_dir,
        rank,
        {
            "first": pickle.dumps(first),
            "second": pickle.dumps(second),
            "added": added,
            "kinds": kinds,
            "errors": Detector.internal_errors(),
        },
    )
    Detector.shutdown()


def split_on_tree(rank: int, world_size: int, out_dir: str) -> None:
    """The job splits into two halves; each reports on its own tree at its own pace."""
    half = world_size // 2
    low = dist.new_group(list(range(half)))
    high = dist.new_group(list(range(half, world_size)))
    group = low if rank < half else high
    Detector.initialize(process_group=group, report_time_interval=0.05, node_name=f"h{rank}")
    reports = []
    # The low half runs more steps than the high one: a collective over both would hang.
    for _ in range(30 if rank < half else 18):
        _step(rank)
        report = Detector.generate_report_if_interval_elapsed()
        if report is not None:
            reports.append(report)
    last = Detector.generate_report()
    save(
        out_dir,
        rank,
        {
            "reports": len(reports),
            "last": pickle.dumps(last),
            "errors": Detector.internal_errors(),
            "kinds": sorted({type(k[4]).__name__ for k in report_group._kept}),
        },
    )
    Detector.shutdown()


SKIPPER = 7
"""Skips one report: a member of the deepest host (4 hosts of 2, fan-out 2)."""


def one_rank_skips_on_tree(rank: int, world_size: int, out_dir: str, timeout_s: float) -> None:
    """Rank ``SKIPPER`` skips the second report; nobody raises, the job's group goes on."""
    Detector.initialize(report_time_interval=3600, kernel_timing="none", report_timeout_s=timeout_s)
    for _ in range(4):
        _step(rank)
    first = Detector.generate_report()
    second: Any = "not called"
    if rank != SKIPPER:
        second = Detector.generate_report()
    after_second = Detector.internal_errors()
    t = torch.ones(1)
    dist.all_reduce(t)
    t0 = time.monotonic()
    third = Detector.generate_report()
    third_s = time.monotonic() - t0
    t2 = torch.full((1,), float(rank))
    dist.all_reduce(t2)
    save(
        out_dir,
        rank,
        {
            "first_ok": first is not None,
            "second": second,
            "after_second": after_second,
            "third": third,
            "third_s": third_s,
            "errors": Detector.internal_errors(),
            "world_sums": (float(t.item()), float(t2.item())),
        },
    )
    Detector.shutdown()


KERNELS = ("gemm", "attn", "norm")


def _kernel_payload(rank: int) -> RankPayload:
    """Sections and kernels with launches of two sizes: rank ``SLOW``'s GPU is 0.6x
    its peers', odd ranks launch attention twice as big (in twice the time)."""
    s_ids = np.array([key_id(s) for s in SECTIONS], dtype=np.uint64)
    k_ids = np.array([key_id(k) for k in KERNELS], dtype=np.uint64)
    pace = 0.6 if rank == SLOW else 1.0
    big = 2.0 if rank % 2 else 1.0
    kernels = np.array([3.0, 2.0 * big, 1.0]) * 1e3 / pace + rank  # every rank's own times
    names = {int(i): s for i, s in zip(s_ids.tolist(), SECTIONS, strict=True)}
    names.update({int(i): k for i, k in zip(k_ids.tolist(), KERNELS, strict=True)})
    return RankPayload(
        RankInfo(rank, f"n{rank // 2}", section_samples=16, kernel_samples=48),
        s_ids,
        np.array([10.0, 15.0 / pace]) * 1e6 + rank,
        np.array([1.0, 0.9]),
        k_ids,
        kernels,
        kernels * 16,
        gpu_individual=1.0,
        names=names,
        kernel_threads=np.array([4096.0, 1024.0 * big, 256.0]),
    )


def leaders_score_as_one_rank(rank: int, world_size: int, out_dir: str) -> None:
    """Scoring on the node leaders (``TreeGroup.score_at_leaders``) against rank 0
    scoring every payload gathered over a flat group; each rank records how many
    payloads it ever held."""
    from pacekeeper.detector import host_scores, key_references

    ranks = range(world_size)
    payload = _kernel_payload(rank)
    flat = OwnGlooGroup(ranks, rank, 30.0, "test/flat/")
    tree = tree_group.make(ranks, rank, 30.0, "test/tree/")
    gathered = flat.gather_to_first(payload)
    want = None
    if gathered is not None:
        names = {k: v for p in gathered for k, v in p.names.items()}
        want = score_payloads(gathered, names, relative=True, individual=True)
    held: list[int] = []

    def summarize(mine: list[RankPayload]) -> key_references.References:
        held.append(len(mine))
        return key_references.of_payloads(mine)

    def score(mine: list[RankPayload], refs: key_references.References) -> Any:
        names = {k: v for p in mine for k, v in p.names.items()}
        return host_scores.score_host(mine, names, refs, relative=True, individual=True)

    assert isinstance(tree, tree_group.TreeGroup)
    merge, join = key_references.merge, host_scores.join
    got = tree.score_at_leaders(payload, summarize, merge, score, join, to_root=True)
    own = tree.score_at_leaders(payload, summarize, merge, score, join, to_root=False)
    save(
        out_dir,
        rank,
        {
            "want": want,
            "got": None if got is None else got.scores(),
            "rank_info": None if got is None else got.rank_info(),
            "own": own.scores().only(rank),
            "held": held,
            "leader": tree.shape.leader,
        },
    )
    flat.close()
    tree.close()
