"""The sequential rule on real processes (issue 38): 8 gloo ranks, two a node, a
synchronous all-reduce every step, each calling the detector as an NVRx user does;
one rank 10% and 30% slower in its compute and in its whole step (a sleep on the host
before its work), and healthy ranks given 9% more work for eight reports at a time
(data skew that comes and goes). Rank 0's reports go through the real decision core
under docs/policies/enforce-recommended.yaml, its sequential rule on: the culprit is
restarted, and no disruptive step (restartRank, taint, drain, cordon) ever names
another rank or node. A healthy world of the same length gets none. Without the rule
(``safety.falseDisruptionsPerGpuDay: null``, and no budget, so the culprit's own steps
never hold a healthy rank's back) the line and the ladder alone restart a skewed healthy
rank in every one of these worlds.

Two settings of the file change, neither a time: CPU ranks time no kernels, so the
file's GPU score has nothing to judge (every rank's score is NaN: the rule has no peers
and fails closed, nothing is ever disrupted); the ranks are judged by the section
they time (``sectionRelative``, against the peers' median), and ``minSamples`` counts a
report's steps. The policy's times are its own: the reports are real, re-stamped a
minute apart (its report cadence), so its 300 s warm-up is four reports, its notice
waits five before restartRank, and the rule's threshold is the one for 60 s windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import report_paths
import sequential_ranks
from sequential_ranks import CULPRIT, SKEWS, SLOW_FROM, STEPS_PER_REPORT

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import (
    DISRUPTIVE_ACTIONS,
    NODE_ACTIONS,
    ActionKind,
    PolicyDocument,
    ScoreKind,
    load_policy_file,
)
from pacekeeper.controller.simulation.runner import Replayer
from pacekeeper.detector.score_report import ScoreReport

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "docs" / "policies" / "enforce-recommended.yaml"
WORLD = 8
REPORTS = 40
"""The culprit is restarted 21-27 reports after its onset here (8 ranks: its own clipped
deviation is an eighth of the variance term, and must stay so while healthy ranks skew
for eight reports: docs/decision-rule.md, "Few ranks")."""
T0 = datetime(2026, 6, 1, tzinfo=UTC)
CULPRIT_NODE = f"node{CULPRIT // 2}"
CASES = [(where, loss, "flat") for where in sequential_ranks.PLACES for loss in (0.1, 0.3)]
CASES.append(("step", 0.1, "tree"))
"""Each world ~30 s on the 2-core VM: the tree (report_paths) runs the hardest one only."""


def _policy(section: str, gated: bool = True) -> PolicyDocument:
    doc = load_policy_file(POLICY)
    name = doc.default_policy
    p = doc.policies[name]
    assert p.safety.false_disruptions_per_gpu_day is not None  # the file states a rate
    score = p.score.model_copy(update={"kind": ScoreKind.SECTION_RELATIVE, "section": section})
    persistence = p.persistence.model_copy(update={"min_samples": STEPS_PER_REPORT})
    update = {"score": score, "persistence": persistence}
    cluster = doc.cluster
    if not gated:
        # The line judged alone: no rule, and no budget either, so the culprit's own
        # restart (or node step) never spends the gap that a healthy rank's would need
        # (which rank wins that race is the 2-core machine's timing, not the line's).
        update["safety"] = p.safety.model_copy(update={"false_disruptions_per_gpu_day": None})
        update["budgets"] = p.budgets.model_copy(
            update={"actions_per_hour": None, "between_actions_s": 0.0}
        )
        cluster = cluster.model_copy(update={"actions_per_hour": None})
    policies = {**doc.policies, name: p.model_copy(update=update)}
    return doc.model_copy(update={"policies": policies, "cluster": cluster})


def _world(out: Path, where: str, loss: float, mode: str = "flat") -> list[ScoreReport]:
    report_paths.spawn(mode, sequential_ranks.slowed_world, WORLD, str(out), where, loss, REPORTS)
    ranks = report_paths.results(out, WORLD)
    assert all(r["errors"] == {} for r in ranks), [r["errors"] for r in ranks]
    reports: list[ScoreReport] = ranks[0]["reports"]
    assert len(reports) == REPORTS
    return [
        r.model_copy(update={"generated_at": T0 + timedelta(minutes=i + 1), "window_s": 60.0})
        for i, r in enumerate(reports)
    ]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"{c[0]}-{int(c[1] * 100)}pct-{c[2]}")
def slowed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[ScoreReport]]:
    where, loss, mode = request.param
    out = tmp_path_factory.mktemp(f"{where}{int(loss * 100)}{mode}")
    return where, _world(out, where, loss, mode)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> list[ScoreReport]:
    return _world(tmp_path_factory.mktemp("healthy"), "step", 0.0)


def _disruptive(reports: list[ScoreReport], doc: PolicyDocument) -> list[tuple[int, Decision]]:
    """(report index, decision) for every disruptive step the decision core takes."""
    replayer = Replayer(doc)
    replayer.started_at = T0  # the job's start: the warm-up counts from here
    out = []
    for i, report in enumerate(reports):
        out.extend(
            (i, d)
            for d in replayer.step(report)
            if d.verdict is Verdict.ACT and d.action in DISRUPTIVE_ACTIONS
        )
    return out


def _healthy_ones(steps: list[tuple[int, Decision]]) -> list[tuple[int, str, object]]:
    """The disruptive steps that touch anything but the culprit (its rank; its node only
    for a node step taken for it)."""
    return [
        (i, d.subject, d.evidence.get("ranks"))
        for i, d in steps
        if d.evidence.get("ranks") != [CULPRIT]
        or (d.action in NODE_ACTIONS and d.node != CULPRIT_NODE)
    ]


def test_the_culprit_alone_is_disrupted(slowed: tuple[str, list[ScoreReport]]) -> None:
    where, reports = slowed
    steps = _disruptive(reports, _policy(where))
    assert _healthy_ones(steps) == []
    restarts = [(i, d) for i, d in steps if d.action is ActionKind.RESTART_RANK]
    assert restarts, "the culprit was never restarted"
    i, first = restarts[0]
    assert i > SLOW_FROM
    test = first.evidence["sequentialTest"]
    assert test["passed"] == [CULPRIT]
    # Either statistic at its own threshold (the two clips share the rate).
    at = test["thresholds"]
    assert (
        test["statistic"][str(CULPRIT)] >= at["clipped"]
        or test["wideStatistic"][str(CULPRIT)] >= at["wide"]
    ), test


def test_without_the_rule_a_skewed_healthy_rank_is_restarted(
    slowed: tuple[str, list[ScoreReport]],
) -> None:
    where, reports = slowed
    touched = _healthy_ones(_disruptive(reports, _policy(where, gated=False)))
    assert {r for _, _, ranks in touched for r in ranks or []} <= {s[0] for s in SKEWS}
    assert touched, "the line alone restarted no healthy rank: this world tests nothing"


def test_a_healthy_world_is_never_disrupted(healthy: list[ScoreReport]) -> None:
    assert _disruptive(healthy, _policy("step")) == []
    # The same reports without the rule: the skewed healthy ranks are restarted.
    touched = _healthy_ones(_disruptive(healthy, _policy("step", gated=False)))
    assert {r for _, _, ranks in touched for r in ranks or []} == {s[0] for s in SKEWS}


def test_the_files_own_gpu_score_fails_closed_on_cpu_ranks(
    slowed: tuple[str, list[ScoreReport]],
) -> None:
    # No kernels on CPU ranks: no score for the rule to test, so nothing is disrupted.
    doc = load_policy_file(POLICY)
    assert doc.policies[doc.default_policy].score.kind is ScoreKind.GPU_INDIVIDUAL
    assert _disruptive(slowed[1], doc) == []
