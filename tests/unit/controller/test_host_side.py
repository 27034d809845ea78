"""Host-side stragglers (``score.hostSide``): a node whose CPU side is slow is found and
acted on, its GPU left alone; a healthy slow GPU, a slow GPU, and one rank doing more
of the job's own work are not host findings."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import numpy as np
import pytest
from controller_builders import REPORT_S, T0, Loop, policy_doc

from pacekeeper.controller.core import peers
from pacekeeper.controller.core.attribution import digest, score_getter
from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.policy import ActionKind, Policy, PolicyError
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

WORLD = 32
PER_NODE = 8
ACT = 0.95


def _report(
    seq: int,
    *,
    host_slow: Mapping[int, float] | None = None,
    gpu_slow: Mapping[int, float] | None = None,
    gpu_speed: Mapping[int, float] | None = None,
    loader_slow: Mapping[int, float] | None = None,
) -> ScoreReport:
    """A data-parallel job: ``forward_backward`` is GPU-bound (its time follows the
    GPU's), ``dataloader`` is CPU only. ``gpu_speed``: healthy GPUs of one model that
    differ; ``gpu_slow``: a GPU fault; ``host_slow``/``loader_slow``: a section's time
    x 1/value from the CPU side, the kernels unchanged."""
    rng = np.random.default_rng(seq)
    ranks = []
    for r in range(WORLD):
        speed = (gpu_speed or {}).get(r, 1.0) * (gpu_slow or {}).get(r, 1.0)
        speed *= 1.0 + 0.004 * rng.standard_normal()
        fwd = speed * (host_slow or {}).get(r, 1.0) * (1.0 + 0.004 * rng.standard_normal())
        loader = (loader_slow or {}).get(r, 1.0) * (1.0 + 0.01 * rng.standard_normal())
        ranks.append(
            RankScores(
                rank=r,
                node=f"node-{r // PER_NODE:03d}",
                pod=f"train-{r}",
                gpu_relative=min(speed, 1.0),
                gpu_individual=min((gpu_slow or {}).get(r, 1.0), 1.0),
                section_relative={
                    "forward_backward": min(fwd, 1.0),
                    "dataloader": min(loader, 1.0),
                },
                section_samples=10,
                kernel_samples=10,
            )
        )
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="train"),
        sequence=seq,
        generated_at=_t(seq),
        window_s=REPORT_S,
        ranks=ranks,
    )


def _t(seq: int) -> datetime:
    return T0 + timedelta(seconds=REPORT_S * seq)


def _policy(host_side: bool = True, kind: str = "gpuRelative") -> Policy:
    doc = policy_doc(
        {
            "score": {"kind": kind, "hostSide": host_side},
            "thresholds": {"act": ACT, "recover": 0.97},
        }
    )
    return doc.policies["default"]


def _judged(report: ScoreReport, policy: Policy) -> peers.Judged:
    return peers.judge(report, policy, score_getter(policy.score))


NODE_2 = {r: 0.8 for r in range(16, 24)}


def test_a_slow_host_is_found_on_its_node_and_not_its_gpu() -> None:
    report = _report(1, host_slow=NODE_2)
    judged = _judged(report, _policy())
    assert set(judged.host_side) == set(NODE_2)
    assert all(v < ACT for v in judged.host_side.values())
    d = digest(report, _policy())
    assert set(d.below) == set(NODE_2)
    # Without the host side the same report is healthy: the GPU scores never see it.
    assert not digest(report, _policy(host_side=False)).below


def test_a_slow_data_loader_is_found_too() -> None:
    judged = _judged(_report(1, loader_slow={r: 0.5 for r in range(8, 16)}), _policy())
    assert set(judged.host_side) == set(range(8, 16))


def test_one_rank_doing_more_work_is_no_host_finding() -> None:
    # Rank 0 logs: one rank of its node slower in a section is the job's own work.
    judged = _judged(_report(1, host_slow={0: 0.7}), _policy())
    assert judged.host_side == {}
    # Two ranks of the node (half of a node of four listed would do) are a host.
    judged = _judged(_report(1, host_slow={0: 0.7, 1: 0.7, 2: 0.7, 3: 0.7}), _policy())
    assert set(judged.host_side) == {0, 1, 2, 3}


def test_a_healthy_slow_gpu_is_not_a_slow_host() -> None:
    # A node of GPUs 12% slower than the median (within one model's spread): their
    # GPU-bound section is 12% slower too. Judged by their own baselines (individual)
    # the GPUs are fine; the GPU's part is taken out of the section.
    slow_gpus = {r: 0.88 for r in range(24, 32)}
    report = _report(1, gpu_speed=slow_gpus)
    judged = _judged(report, _policy(kind="gpuIndividual"))
    assert judged.host_side == {}
    assert all(v is not None and v >= ACT for v in judged.values)
    # The section alone, against its peers, would have called them slow.
    by_section = policy_doc(
        {
            "score": {
                "kind": "sectionRelative",
                "section": "forward_backward",
                "minDeviations": None,
            },
            "thresholds": {"act": ACT, "recover": 0.97},
        }
    ).policies["default"]
    assert set(digest(report, by_section).below) == set(slow_gpus)


def test_a_slow_gpu_is_left_to_the_gpu_score() -> None:
    judged = _judged(_report(1, gpu_slow={r: 0.8 for r in range(8, 16)}), _policy())
    assert judged.host_side == {}
    slow = [judged.values[r] for r in range(8, 16)]
    assert all(v is not None and v < ACT for v in slow)


def test_host_side_needs_a_gpu_kind_and_the_peer_reference() -> None:
    with pytest.raises(PolicyError, match="hostSide"):
        policy_doc({"score": {"kind": "worst", "hostSide": True}})
    with pytest.raises(PolicyError, match="hostSide"):
        policy_doc({"score": {"kind": "gpuRelative", "reference": "best", "hostSide": True}})


def _host_decisions(log: list[Decision]) -> list[Decision]:
    return [d for d in log if "hostSide" in d.evidence]


def test_the_ladder_acts_on_the_node_with_host_evidence() -> None:
    loop = Loop(
        policy_doc(
            {
                "score": {"kind": "gpuIndividual", "hostSide": True},
                "thresholds": {"act": ACT, "recover": 0.97},
                "persistence": {"consecutiveReports": 2},
            }
        ),
        world=WORLD,
    )
    for i in range(9):
        loop.seq += 1
        loop.now = _t(loop.seq)
        # The node turns slow after the job's first reports: slow from the first one, a
        # whole node is a regular block the job may be made of (structure_pattern).
        loop.reports.append(_report(loop.seq, host_slow=NODE_2 if i >= 3 else None))
        loop.decide()
    acted = [(d.action, d.node) for d in loop.log if d.verdict.value == "act"]
    assert (ActionKind.NOTIFY, "node-002") in acted
    assert {d.node for d in loop.log if d.verdict.value == "act"} == {"node-002"}
    evidence = _host_decisions(loop.log)
    assert evidence and set(evidence[-1].evidence["hostSide"]) == {str(r) for r in NODE_2}
