"""Culprit, not victims: 8 real gloo ranks with a synchronous all-reduce every step, one
rank's work 10% and 30% slower (throughput), and the section placed around the compute
only, around the whole step (compute and all-reduce) and around DDP's own backward
(its gradient all-reduce). In every placement the slow rank scores lowest, no rank
that only waited scores below the line, the wait shares say who waited, and the
controller's decision names the culprit's node and nobody else's.

Before the detector took the collective wait out of sections, the step and backward
placements scored the culprit 1.0 (it never waits) and its peers 0.3-0.8.

Every world runs on both report paths (``report_paths``: flat, and a tree of 4 hosts of
2 with fan-out 2, two leader levels)."""

from __future__ import annotations

import os
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest
import report_paths
import victim_worlds
from victim_worlds import CULPRIT, PLACEMENTS

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.policy import parse_policy_document
from pacekeeper.controller.core.state import State
from pacekeeper.detector.score_report import ScoreReport

WORLD = 8
LOSSES = (0.1, 0.3)


def _policy(section: str, act: float) -> Any:
    return parse_policy_document(
        {
            "apiVersion": "pacekeeper.dev/v1alpha1",
            "kind": "RemediationPolicies",
            "mode": "enforce",
            "defaultPolicy": "p",
            "policies": {
                "p": {
                    "score": {"kind": "sectionRelative", "section": section,
                              "reference": "peerMedian"},
                    "thresholds": {"act": act, "recover": min(0.99, act + 0.03)},
                    "persistence": {"consecutiveReports": 1, "minSamples": 1},
                    "warmup": {"afterJobStartS": 0, "afterActionS": 0},
                    "ladder": {"notify": {"enabled": True}},
                }
            },
        }
    )  # fmt: skip


# DDP's backward at 10% needs a core per rank: with eight ranks on two cores each
# reduction wakes all eight at once and the few ms until each runs again land partly in
# the backward; a 10% culprit scored 0.93 in a quiet run and 0.99 (no lower than its
# victims) in a loaded one (docs/detection-quality.md). 30% is found in every run.
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
WORLDS = [
    pytest.param(
        (p, loss, mode),
        marks=pytest.mark.skipif(
            (p, loss) == ("backward", 0.1) and (_CORES or 1) < WORLD,
            reason=f"DDP at 10% needs {WORLD} cores for {WORLD} ranks, this machine has "
            f"{_CORES} (runs on the GPU machine's 16: docs/detection-quality.md)",
        ),
    )
    for p in PLACEMENTS
    for loss in LOSSES
    for mode in report_paths.MODES  # every world on both report paths
]


@pytest.fixture(scope="module", params=WORLDS, ids=lambda p: f"{p[0]}-{int(p[1] * 100)}pct-{p[2]}")
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    placement, loss, mode = request.param
    out = tmp_path_factory.mktemp(f"{placement}{int(loss * 100)}{mode}")
    report_paths.spawn(mode, victim_worlds.sync_world, WORLD, str(out), placement, loss)
    ranks = report_paths.results(out, WORLD)
    report = ranks[0]["score_report"]
    assert isinstance(report, ScoreReport)
    return {"placement": placement, "loss": loss, "report": report, "ranks": ranks}


def _line(world: dict) -> float:
    """The threshold of these tests: halfway between the culprit's work ratio and 1."""
    return 1.0 - world["loss"] / 2


def _section_scores(world: dict) -> dict[int, float]:
    """Each rank's section score over the ranks' median (the controller's ``peerMedian``
    reference): NVRx's reference, the best rank, moves with whichever rank was luckiest."""
    section = world["placement"]
    raw = {r.rank: r.section_relative[section] for r in world["report"].ranks}
    middle = statistics.median(raw.values())
    return {rank: score / middle for rank, score in raw.items()}


def test_the_culprit_scores_lowest_and_no_victim_is_below_the_line(world: dict) -> None:
    scores = _section_scores(world)
    assert min(scores, key=scores.__getitem__) == CULPRIT, scores
    # Flagged: below the line halfway between its work ratio (1 - loss) and 1.
    assert scores[CULPRIT] < _line(world), scores
    victims = [s for r, s in scores.items() if r != CULPRIT]
    assert min(victims) > _line(world), scores
    assert all(r["errors"] == {} for r in world["ranks"])
    if world["placement"] == "backward":
        assert all(r["hooked"] for r in world["ranks"])


def test_the_wait_shares_say_who_waited(world: dict) -> None:
    shares = {r.rank: r.wait_share for r in world["report"].ranks}
    assert all(s is not None for s in shares.values()), shares
    culprit = shares[CULPRIT]
    # Every other rank waited for the culprit: about its extra work per step.
    assert all(s > culprit for r, s in shares.items() if r != CULPRIT), shares


def test_the_controller_names_the_culprits_node_only(world: dict) -> None:
    report: ScoreReport = world["report"]
    act = _line(world)
    now = datetime.now(UTC)
    report = report.model_copy(update={"generated_at": now})
    nodes = {r.node for r in report.ranks}
    job = JobView(JobKey("ml/sync"), (report,), namespace="ml", name="sync")
    cluster = ClusterView(nodes={n: NodeView(n) for n in nodes})
    out = decide(Window((job,), cluster), State(), _policy(world["placement"], act), now)
    acted = [d for d in out.decisions if d.verdict is Verdict.ACT]
    culprit_node = next(r.node for r in report.ranks if r.rank == CULPRIT)
    # Never a victim, in any placement.
    assert {d.node for d in acted} <= {culprit_node}
    assert all(str(CULPRIT) in d.subject or d.node == culprit_node for d in acted)
    assert acted, [(d.subject, d.verdict, d.reason) for d in out.decisions]
