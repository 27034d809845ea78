"""A heavier last pipeline stage is no slow node, without being told the layout (issue
39): a real 8-rank gloo pipeline (2 replicas x 4 stages, the last with 30% more work,
no ``set_topology``), its real detector reports fed through the real decision core for
30 minutes of report time (a fake clock on the controller side, a report a minute).
Healthy: no action at all, the stage held as WorkloadStructure naming its pattern. One
rank slowed 15% mid-job — in an ordinary stage, or in the heavier one — that rank is
named and no other. Without the controller's pattern test (``structure_pattern``) the
stage's ranks were slow nodes."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pipeline_worlds
import pytest

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.policy import parse_policy_document
from pacekeeper.controller.simulation.runner import effective_verdict, replay
from pacekeeper.detector.local_world import spawn_world
from pacekeeper.detector.score_report import ScoreReport

WORLD = 8
T0 = datetime(2026, 1, 1, tzinfo=UTC)
REPORT_S = 60.0
HEAVY = [3, 7]  # the last stage of both replicas

POLICY = parse_policy_document(
    {
        "apiVersion": "pacekeeper.dev/v1alpha1",
        "kind": "RemediationPolicies",
        "mode": "enforce",
        "defaultPolicy": "p",
        "policies": {
            "p": {
                "score": {"kind": "worst", "reference": "peerMedian"},
                "thresholds": {"act": 0.9, "recover": 0.95},
                "persistence": {"consecutiveReports": 2, "minSamples": 1},
                # Like every example policy, a warm-up: the detector's first windows
                # hold the job's start (one stage's replica scored 1.0 in the first).
                "warmup": {"afterJobStartS": 180, "afterActionS": 0},
                "ladder": {
                    "notify": {"enabled": True, "timeoutS": 120},
                    "restartRank": {"enabled": True, "timeoutS": 300},
                    "taintNode": {"enabled": True, "timeoutS": 600},
                },
            }
        },
    }
)  # fmt: skip


def _run(tmp: Path, slow_rank: int | None) -> list[ScoreReport]:
    spawn_world(pipeline_worlds.pipeline_world, WORLD, str(tmp), slow_rank)
    rank0 = pickle.loads((tmp / "rank0.pkl").read_bytes())
    assert rank0["errors"] == {}
    reports: list[ScoreReport] = rank0["reports"]
    assert len(reports) == pipeline_worlds.REPORTS
    assert all(not r.coords for rep in reports for r in rep.ranks)  # nothing was told
    # The controller's clock: a report a minute, 30 minutes in all.
    return [
        rep.model_copy(
            update={
                "generated_at": T0 + timedelta(seconds=REPORT_S * (i + 1)),
                "window_s": REPORT_S,
            }
        )
        for i, rep in enumerate(reports)
    ]


def _acted(decisions: list[tuple[float, Decision]]) -> list[Decision]:
    return [d for _, d in decisions if d.action is not None and effective_verdict(d) is Verdict.ACT]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> list[ScoreReport]:
    return _run(tmp_path_factory.mktemp("healthy"), None)


def test_the_heavier_last_stage_gets_no_action_in_30_minutes(healthy: list[ScoreReport]) -> None:
    decisions = replay(healthy, POLICY)
    assert (healthy[-1].generated_at - T0).total_seconds() == 30 * 60
    assert _acted(decisions) == [], [(d.subject, d.action, d.reason) for d in _acted(decisions)]
    held = [d for _, d in decisions if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert held, {d.reason for _, d in decisions}
    assert {r for d in held for r in d.evidence["alignedRanks"]} <= set(HEAVY)
    assert any(d.evidence["alignedRanks"] == HEAVY for d in held)
    assert held[-1].evidence["alignment"] == "pattern"


@pytest.mark.parametrize("slow_rank", [5, 7], ids=["ordinary-stage", "heavier-stage"])
def test_one_rank_slowed_mid_job_is_named_and_no_other(
    slow_rank: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    reports = _run(tmp_path_factory.mktemp(f"slow{slow_rank}"), slow_rank)
    acted = _acted(replay(reports, POLICY))
    ranks: set[Any] = {r for d in acted for r in d.evidence.get("ranks", [])}
    assert ranks == {slow_rank}, [(d.subject, d.action, d.evidence.get("ranks")) for d in acted]
    node = f"n{slow_rank // 2}"
    assert {d.node for d in acted} == {node}
    first = min(d.evidence["sequence"] for d in acted)
    assert first >= reports[pipeline_worlds.SLOW_FROM].sequence  # not before it was slow
