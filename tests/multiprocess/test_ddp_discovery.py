"""DDP without being told: a plain DistributedDataParallel script (4 gloo ranks, one
rank's forward 2.6x slower, sections around forward, backward and the optimizer step,
no ``watch_ddp`` call). The detector finds the DDP model itself and takes the wait at
the end of the backward out of it, so the controller's ``worst`` score names the slow
rank and never a rank that only waited for it.

Without the discovery (``PACEKEEPER_DISCOVERY=off``) the healthy ranks' backward holds
their wait for the slow rank: under ``worst`` the job is held as ``JobWideSlowdown`` or
a healthy rank is named, and these tests fail."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import discovery_worlds
import pytest
import yaml
from discovery_worlds import SLOW_RANK

from pacekeeper.controller.core.decisions import Verdict
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.policy import parse_policy_document
from pacekeeper.controller.core.state import State
from pacekeeper.detector.local_world import spawn_world
from pacekeeper.detector.score_report import ScoreReport

WORLD = 4


def _worst_policy() -> Any:
    """docs/policies/observe.yaml (every score against the peers' median, act below
    0.7), enforcing, and acting on one report: every report is judged on its own."""
    doc = yaml.safe_load((ROOT / "docs" / "policies" / "observe.yaml").read_text())
    doc["mode"] = "enforce"
    policy = doc["policies"][doc["defaultPolicy"]]
    assert policy["score"]["kind"] == "worst"
    policy["persistence"]["consecutiveReports"] = 1
    policy["warmup"] = {"afterJobStartS": 0, "afterActionS": 0}
    return parse_policy_document(doc)


ROOT = Path(__file__).resolve().parents[2]
POLICY = _worst_policy()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> list[ScoreReport]:
    out = tmp_path_factory.mktemp("ddp")
    spawn_world(discovery_worlds.ddp_world, WORLD, str(out))
    ranks = [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    assert all(r["errors"] == {} for r in ranks), [r["errors"] for r in ranks]
    got = ranks[0]["reports"]
    assert got and all(isinstance(r, ScoreReport) for r in got)
    return list(got)


def _decide(report: ScoreReport, state: State, now: datetime) -> tuple[list[Any], State]:
    report = report.model_copy(update={"generated_at": now})
    nodes = {r.node for r in report.ranks}
    job = JobView(JobKey("ml/ddp"), (report,), namespace="ml", name="ddp")
    cluster = ClusterView(nodes={n: NodeView(n) for n in nodes})
    out = decide(Window((job,), cluster), state, POLICY, now)
    return list(out.decisions), out.next_state


def test_worst_never_scores_a_waiting_rank_below_the_line(reports: list[ScoreReport]) -> None:
    act = 0.7  # the policy's act line
    for report in reports:
        worst = {r.rank: r.worst_score() for r in report.ranks}
        # The slow rank's forward, against the best rank's: about 1 / 2.6.
        assert worst[SLOW_RANK] is not None and worst[SLOW_RANK] < act, worst
        # A healthy rank's worst score, against the best rank's (stricter than the
        # controller's peer median), stays above the line: its backward is scored on
        # its own work, not on its wait for the slow rank.
        assert all(s is not None and s > act for r, s in worst.items() if r != SLOW_RANK), worst


def test_the_controller_names_the_slow_rank_and_no_healthy_one(
    reports: list[ScoreReport],
) -> None:
    slow_node = f"n{SLOW_RANK}"
    now = datetime.now(UTC)
    state = State()
    named = 0
    for i, report in enumerate(reports):
        decisions, state = _decide(report, state, now + timedelta(seconds=60 * i))
        acted = [d for d in decisions if d.verdict is Verdict.ACT]
        assert all(d.node == slow_node for d in acted), [
            (d.subject, d.reason, d.evidence) for d in acted
        ]
        held = [d.reason for d in decisions if d.verdict is Verdict.HOLD]
        assert "JobWideSlowdown" not in {str(r) for r in held}, held
        named += bool(acted)
        # A fresh state each report too: no report on its own names a healthy rank.
        fresh, _ = _decide(report, State(), now)
        assert {d.node for d in fresh if d.verdict is Verdict.ACT} <= {slow_node}
    assert named, "the slow rank was never named"
