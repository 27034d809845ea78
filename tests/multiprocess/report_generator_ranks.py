"""Rank bodies for test_report_generator_ranks: ``reporting.ReportGenerator`` built as
NVRx's is and fed hand-made summaries on real gloo ranks. Results are pickled to
``out_dir/rank<r>.pkl`` (NaN scores do not compare equal)."""

from __future__ import annotations

import os
import pickle
from typing import Any

from pacekeeper.detector import Statistic, reporting

KINDS = ["relative_perf_scores", "individual_perf_scores"]


def summary(med: float, num: int, avg: float) -> dict[Statistic, float]:
    return {
        Statistic.MIN: med,
        Statistic.MAX: med,
        Statistic.MED: med,
        Statistic.AVG: avg,
        Statistic.STD: 0.0,
        Statistic.NUM: num,
    }


def kernels(rank: int) -> dict[str, dict[Statistic, float]]:
    """Kernel A (much time) and B (little); rank 1 slow in A, rank 2 slow in B; the NCCL
    kernel is slowest on rank 0 and must not count."""
    a = {0: 1.0, 1: 2.0, 2: 1.0}[rank]
    b = {0: 4.0, 1: 4.0, 2: 8.0}[rank]
    nccl = 100.0 if rank == 0 else 1.0
    return {
        "ncclDevKernel_AllReduce_Sum": summary(nccl, 5, nccl),
        "A": summary(a, 10, a),
        "B": summary(b, 1, b),
    }


def sections(rank: int) -> dict[str, dict[Statistic, float]]:
    out = {"fwd": summary(float(rank + 1), 3, float(rank + 1))}
    if rank == 0:
        out["only_rank0"] = summary(1.0, 3, 1.0)
    return out


def scaled(s: dict[str, dict[Statistic, float]], f: float) -> dict[str, dict[Statistic, float]]:
    return {
        k: summary(v[Statistic.MED] * f, int(v[Statistic.NUM]), v[Statistic.AVG] * f)
        for k, v in s.items()
    }


def generate(rank: int, world_size: int, out_dir: str) -> None:
    """Two windows per generator: rank 0's summaries at half their times on every rank
    (each rank's individual baseline), then each rank's own summaries above."""
    del world_size
    result: dict[bool, Any] = {}
    for gather in (True, False):
        gen = reporting.ReportGenerator(
            KINDS, gather_on_rank0=gather, node_name=f"node{rank}", rules="pacekeeper"
        )
        gen.generate_report(scaled(sections(0), 0.5), kernel_summaries=scaled(kernels(0), 0.5))
        report = gen.generate_report(sections(rank), kernel_summaries=kernels(rank))
        mapper = gen.name_mapper
        result[gather] = {
            "report": pickle.dumps(report),
            "sections": dict(mapper.section_name_to_id),
            "kernels": dict(mapper.kernel_name_to_id),
        }
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)


def subgroup(rank: int, world_size: int, out_dir: str) -> None:
    """Ranks 1 and 2 report over a sub-group, NVRx's rules; rank 0 only creates it."""
    import torch.distributed as dist

    del world_size
    group = dist.new_group([1, 2])
    if rank == 0:
        return
    gen = reporting.ReportGenerator(KINDS, pg=group, node_name=f"node{rank}")
    report = gen.generate_report(sections(rank), kernel_summaries=kernels(rank))
    with open(os.path.join(out_dir, f"sub{rank}.pkl"), "wb") as f:
        pickle.dump(pickle.dumps(report), f)
