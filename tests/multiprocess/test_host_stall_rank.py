"""One rank's host-side stall on real processes (issue 38): 4 gloo ranks on one node, a
synchronous all-reduce every step, one rank 20% longer on its host side from the fifth
report. Its reports, through the real decision core with ``score.hostSideOneRank``,
name that rank and restart it (``restartRank``); no node action, no other rank. The node
rule alone (two ranks of a node must agree) finds nothing in the same reports, and a
world where nobody stalls gets nothing either way.

The reports are real; their timestamps are re-stamped a minute apart so the ladder's
wait between notify and restartRank passes without the test waiting for it."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from pathlib import Path

import host_stall_ranks
import pytest
from host_stall_ranks import STALL_FROM, STALLED

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import (
    NODE_ACTIONS,
    ActionKind,
    Ladder,
    LadderStep,
    Mode,
    Persistence,
    Policy,
    PolicyDocument,
    ScoreKind,
    ScoreSelector,
    Thresholds,
    Warmup,
)
from pacekeeper.controller.simulation.runner import Replayer
from pacekeeper.detector.local_world import spawn_world
from pacekeeper.detector.score_report import ScoreReport

WORLD = 4
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _policy(one_rank: bool) -> PolicyDocument:
    policy = Policy(
        score=ScoreSelector(
            kind=ScoreKind.GPU_RELATIVE, host_side=True, host_side_one_rank=one_rank
        ),
        thresholds=Thresholds(act=0.9, recover=0.95),
        # CPU ranks time no kernels: the host side is all there is to count.
        persistence=Persistence(consecutive_reports=2, min_samples=0),
        warmup=Warmup(after_job_start_s=0.0, after_action_s=0.0),
        ladder=Ladder(
            notify=LadderStep(enabled=True, timeout_s=60.0),
            restart_rank=LadderStep(enabled=True, timeout_s=600.0),
        ),
    )
    return PolicyDocument(mode=Mode.ENFORCE, default_policy="p", policies={"p": policy})


def _world(out: Path, stall: bool) -> list[ScoreReport]:
    spawn_world(host_stall_ranks.stall_world, WORLD, str(out), stall)
    ranks = [pickle.loads((out / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    assert all(r["errors"] == {} for r in ranks), [r["errors"] for r in ranks]
    reports: list[ScoreReport] = ranks[0]["reports"]
    assert len(reports) == host_stall_ranks.REPORTS
    return [
        r.model_copy(update={"generated_at": T0 + timedelta(minutes=i + 1), "window_s": 60.0})
        for i, r in enumerate(reports)
    ]


@pytest.fixture(scope="module")
def stalled(tmp_path_factory: pytest.TempPathFactory) -> list[ScoreReport]:
    return _world(tmp_path_factory.mktemp("stall"), True)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> list[ScoreReport]:
    return _world(tmp_path_factory.mktemp("healthy"), False)


def _acted(reports: list[ScoreReport], one_rank: bool) -> list[tuple[int, Decision]]:
    """(report index, decision) for every act the decision core takes."""
    replayer = Replayer(_policy(one_rank))
    out = []
    for i, report in enumerate(reports):
        out.extend((i, d) for d in replayer.step(report) if d.verdict is Verdict.ACT)
    return out


def test_the_stalled_ranks_own_sections_show_it(stalled: list[ScoreReport]) -> None:
    last = {r.rank: r for r in stalled[-1].ranks}
    own = last[STALLED].section_individual["step"]
    assert own is not None and own < 0.9, own  # slower than its own past: a change
    others = [r.section_relative["step"] for k, r in last.items() if k != STALLED]
    assert last[STALLED].section_relative["step"] < min(v for v in others if v is not None)


def test_the_stalled_rank_is_restarted_and_no_node_is_touched(
    stalled: list[ScoreReport],
) -> None:
    acted = _acted(stalled, one_rank=True)
    restarts = [d for _, d in acted if d.action is ActionKind.RESTART_RANK]
    assert restarts, [(d.subject, d.action, d.evidence.get("ranks")) for _, d in acted]
    assert all(d.evidence.get("ranks") == [STALLED] for _, d in acted)
    assert not [d for _, d in acted if d.action in NODE_ACTIONS]
    # Acted on only after the stall began (two reports below in a row).
    assert min(i for i, _ in acted) >= STALL_FROM + 1


def test_the_node_rule_alone_misses_it(stalled: list[ScoreReport]) -> None:
    assert _acted(stalled, one_rank=False) == []


def test_a_world_where_nobody_stalls_gets_nothing(healthy: list[ScoreReport]) -> None:
    assert _acted(healthy, one_rank=True) == []


def test_the_reports_carry_each_ranks_tail(stalled: list[ScoreReport]) -> None:
    # The detector's own tail statistic (sectionTail), from its fourth window on.
    assert all(r.section_tail for rep in stalled[3:] for r in rep.ranks)
    last = {r.rank: (r.section_tail or {})["step"] for r in stalled[-1].ranks}
    # Its good windows over its slow ones: 0.1 s over 0.12 s.
    assert last[STALLED] < 0.9, last
    assert all(v > 0.95 for k, v in last.items() if k != STALLED), last
