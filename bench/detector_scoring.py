"""Scoring a simulated 16,384-rank job with 200 kernels and 8 sections per rank.

Times what the reporting rank does after the gather: ``score_payloads`` (relative and
individual scores for GPU and sections, all ranks), plus — separately — converting the
result to a ScoreReport and its bounded Kubernetes form. One core (numpy is single-
threaded: the scoring uses element-wise ufuncs, bincount and sorting, no BLAS).
Goal: scoring under 200 ms.

Run: .venv/bin/python bench/detector_scoring.py [ranks]
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.detector.payload import KeyIds, RankPayload, score_payloads
from pacekeeper.detector.reports import RankInfo, Report, to_score_report
from pacekeeper.detector.score_report import JobIdentity, Platform

KERNELS = 200
SECTIONS = 8
REPEATS = 5


def simulate(ranks: int, seed: int = 0) -> tuple[list[RankPayload], dict[int, str], set[int]]:
    """Payloads as ranks would send them: same kernels (a few ranks miss some), noise,
    and a handful of slow ranks."""
    rng = np.random.default_rng(seed)
    ids = KeyIds()
    knames = [f"void gemm_kernel_{i}<128, 64, float>(...)" for i in range(KERNELS)]
    snames = [f"section_{i}" for i in range(SECTIONS)]
    kids, sids = ids.ids(knames), ids.ids(snames)
    names = dict(zip(kids.tolist(), knames, strict=True)) | dict(
        zip(sids.tolist(), snames, strict=True)
    )
    base_k = rng.uniform(5e3, 5e6, KERNELS)
    base_s = rng.uniform(1e6, 1e8, SECTIONS)
    slow = set(rng.choice(ranks, size=max(1, ranks // 1000), replace=False).tolist())
    payloads = []
    for r in range(ranks):
        factor = 1.4 if r in slow else 1.0
        kmed = base_k * factor * rng.normal(1.0, 0.02, KERNELS)
        keep = slice(None) if r % 97 else slice(0, KERNELS - 3)  # some ranks miss kernels
        payloads.append(
            RankPayload(
                info=RankInfo(rank=r, node=f"node-{r // 8}", pod=f"job-worker-{r}"),
                section_ids=sids,
                section_median_ns=base_s * factor * rng.normal(1.0, 0.02, SECTIONS),
                section_individual=np.ones(SECTIONS),
                kernel_ids=kids[keep],
                kernel_median_ns=kmed[keep],
                kernel_total_ns=(kmed * 50)[keep],
                gpu_individual=1.0 / factor,
            )
        )
    return payloads, names, slow


def _time(fn, repeats: int = REPEATS) -> tuple[float, float, object]:  # type: ignore[no-untyped-def]
    out = fn()
    samples = []
    for _ in range(repeats):
        # CPU time of this process: what the work costs one core, not how long the
        # scheduler of a shared machine kept us waiting.
        t0 = time.process_time()
        out = fn()
        samples.append((time.process_time() - t0) * 1e3)
    return min(samples), statistics.median(samples), out


def main() -> None:
    ranks = int(sys.argv[1]) if len(sys.argv) > 1 else 16_384
    payloads, names, slow = simulate(ranks)

    best, med, scores = _time(
        lambda: score_payloads(payloads, names, relative=True, individual=True)
    )
    rows = [
        {
            "step": "score_payloads (all scores, all ranks)",
            "best CPU ms": best,
            "median CPU ms": med,
        }
    ]

    report = Report(
        gpu_relative_perf_scores=scores.gpu_relative,  # type: ignore[attr-defined]
        section_relative_perf_scores=scores.section_relative,  # type: ignore[attr-defined]
        gpu_individual_perf_scores=scores.gpu_individual,  # type: ignore[attr-defined]
        section_individual_perf_scores=scores.section_individual,  # type: ignore[attr-defined]
        rank_to_node=scores.rank_to_node,  # type: ignore[attr-defined]
        local_section_summaries={},
        local_kernel_summaries={},
        generate_report_elapsed_time=0.0,
        gather_on_rank0=True,
        rank=0,
    )
    flagged = report.identify_stragglers()["straggler_gpus_relative"]
    info = {p.info.rank: p.info for p in payloads}
    job = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="big-job")

    def convert():  # type: ignore[no-untyped-def]
        return to_score_report(
            report,
            job=job,
            sequence=1,
            generated_at=datetime.now(UTC),
            window_s=60.0,
            rank_info=info,
            world_size=ranks,
        )

    best, med, sr = _time(convert, repeats=2)
    rows.append(
        {"step": "to_score_report (pydantic, all ranks)", "best CPU ms": best, "median CPU ms": med}
    )
    best, med, compact = _time(sr.compact, repeats=2)  # type: ignore[attr-defined]
    rows.append(
        {"step": "compact() to Kubernetes status size", "best CPU ms": best, "median CPU ms": med}
    )
    emit(
        "detector_scoring",
        rows,
        title=f"Scoring {ranks:,} ranks x {KERNELS} kernels + {SECTIONS} sections, one core",
        meta={
            "ranks": ranks,
            "kernels_per_rank": KERNELS,
            "sections_per_rank": SECTIONS,
            "goal_ms": 200,
            "slow_ranks_flagged": len(flagged),
            "flagged_are_exactly_the_slowed": {s.rank for s in flagged} == slow,
            "full_json_bytes": len(sr.to_json()),  # type: ignore[attr-defined]
            "compact_json_bytes": len(compact.to_json()),  # type: ignore[attr-defined]
            "compact_ranks_kept": len(compact.ranks),  # type: ignore[attr-defined]
        },
    )


if __name__ == "__main__":
    main()
