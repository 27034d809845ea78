"""The StragglerReport status of a 131,072-rank job (16,384 nodes of 8) stays within its
byte bound: the per-node entries no longer grow with the job (schemaVersion 5,
``summary.omittedNodes``). Before, such a job's reporter raised ``status is 1296218
bytes, over the 262144-byte bound`` and the job reported nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from reporter_helpers import status_validator

from pacekeeper.detector.reporters.k8s_status import build_status, status_bytes
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    JobIdentity,
    Platform,
    RankScores,
    ScoreReport,
)

JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")
WORLD = 131_072
SLOW = {17: 0.31, 65_536: 0.52, WORLD - 1: 0.6}


def _report() -> ScoreReport:
    ranks = [
        RankScores(
            rank=r,
            node=f"gpu-{r // 8:05d}.pool-a.cluster.internal",
            pod=f"llm-worker-{r // 8}",
            gpu_relative=SLOW.get(r, 0.95 + 0.05 * ((r * 7919) % 100) / 100),
            section_relative={"step": 1.0},
            kernel_samples=800,
            section_samples=40,
        )
        for r in range(WORLD)
    ]
    return ScoreReport.build(
        job=JOB,
        sequence=1,
        generated_at=datetime(2026, 12, 5, 9, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=ranks,
    )


@pytest.mark.slow
def test_status_of_a_131072_rank_job_fits_its_bound_and_keeps_the_worst_ranks() -> None:
    report = _report()
    status = build_status(report, incarnation="i")
    assert status_bytes(status) <= K8S_STATUS_MAX_BYTES
    assert list(status_validator().iter_errors(status)) == []
    stored = ScoreReport.from_wire(status["report"])
    assert stored.truncated and stored.summary.world_size == WORLD
    assert set(SLOW) <= {r.rank for r in stored.ranks}
    assert status["worstRank"] == 17 and status["stragglers"] == 3
    omitted = stored.summary.omitted_nodes
    assert omitted is not None
    # Every node is named or counted; the slow ranks' nodes are named.
    assert stored.summary.node_count == WORLD // 8
    assert len(stored.summary.nodes) + omitted.nodes == WORLD // 8
    named = {n.node for n in stored.summary.nodes}
    assert {r.node for r in stored.ranks if r.rank in SLOW} <= named
